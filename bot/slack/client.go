package slack

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// DefaultPace spaces the bot's posts in one channel: Slack allows about
// one message a second per channel, with short bursts (burst posts may go
// at once, then one per pace).
const (
	DefaultPace = time.Second
	burst       = 3
)

// RetryLater is the error of a call Slack asked us to repeat later (a
// rate limit, an outage): the worker and the relay postpone the work by
// After (delivery.RetryLater).
type RetryLater = delivery.RetryLater

// Client is the bot's side of Slack's Web API, on slack-go pointed at the
// API's base URL: posts in one channel are spaced by its pace, Slack's
// refusals are classified for the worker and the relay (429 and outages
// are a *RetryLater, the rest say what to fix), and the server's secrets
// are scrubbed from everything written.
type Client struct {
	api      *slackgo.Client
	pace     time.Duration
	redactor *engine.Redactor
	// wait sleeps for d or until ctx ends; now is the clock of the pace.
	wait func(ctx context.Context, d time.Duration) error
	now  func() time.Time

	mu   sync.Mutex
	next map[string]time.Time // channel → the earliest next post
}

// ClientOptions configure a Client. Token is required.
type ClientOptions struct {
	// Token is the bot token (xoxb-…); AppToken the app-level token
	// (xapp-…) Socket Mode connects with, "" without Socket Mode.
	Token, AppToken string
	// APIURL is the Web API's base ("" means Slack's), with its trailing
	// slash: a fake's in tests, a proxy's on Enterprise Grid.
	APIURL string
	// HTTPClient carries the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Pace spaces the posts in one channel; 0 means DefaultPace, a
	// negative value no spacing.
	Pace time.Duration
	// Redactor scrubs the server's secrets from every message; nil means
	// nothing is scrubbed.
	Redactor *engine.Redactor
}

// NewClient returns the client o describes.
func NewClient(o ClientOptions) *Client {
	opts := []slackgo.Option{slackgo.OptionHTTPClient(cmp.Or(o.HTTPClient, http.DefaultClient))}
	if o.APIURL != "" {
		opts = append(opts, slackgo.OptionAPIURL(o.APIURL))
	}
	if o.AppToken != "" {
		opts = append(opts, slackgo.OptionAppLevelToken(o.AppToken))
	}
	return &Client{api: slackgo.New(o.Token, opts...), pace: max(cmp.Or(o.Pace, DefaultPace), 0), redactor: o.Redactor,
		wait: sleepCtx, now: time.Now, next: map[string]time.Time{}}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Identity is who the token is: the workspace and the bot's user.
type Identity struct {
	Team, TeamID, User, UserID, BotID string
	// URL is the workspace's address ("https://acme.slack.com/").
	URL string
}

// AuthTest asks Slack who the token is (auth.test): a token Slack
// refuses is an error that says so.
func (c *Client) AuthTest(ctx context.Context) (Identity, error) {
	r, err := c.api.AuthTestContext(ctx)
	if err != nil {
		return Identity{}, classify("checking the bot token (auth.test)", "", err)
	}
	return Identity{Team: r.Team, TeamID: r.TeamID, User: r.User, UserID: r.UserID, BotID: r.BotID, URL: r.URL}, nil
}

// message is what the bot posts: a notification text, blocks, metadata
// naming what it is, and the thread it goes in.
type message struct {
	text   string
	blocks []slackgo.Block
	meta   *slackgo.SlackMetadata
	thread string
}

// options are the message's options for slack-go, scrubbed of secrets.
func (c *Client) options(m message) ([]slackgo.MsgOption, error) {
	opts := []slackgo.MsgOption{slackgo.MsgOptionText(c.redactor.String(m.text), false)}
	if len(m.blocks) > 0 {
		blocks, err := c.scrub(m.blocks)
		if err != nil {
			return nil, err
		}
		opts = append(opts, slackgo.MsgOptionBlocks(blocks.BlockSet...))
	}
	if m.meta != nil {
		opts = append(opts, slackgo.MsgOptionMetadata(*m.meta))
	}
	if m.thread != "" {
		opts = append(opts, slackgo.MsgOptionTS(m.thread))
	}
	return opts, nil
}

// scrub removes the server's secrets from blocks, whatever text of them
// holds one.
func (c *Client) scrub(blocks []slackgo.Block) (slackgo.Blocks, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(slackgo.Blocks{BlockSet: blocks}); err != nil {
		return slackgo.Blocks{}, fmt.Errorf("encoding blocks: %w", err)
	}
	var out slackgo.Blocks
	if err := json.Unmarshal([]byte(c.redactor.String(buf.String())), &out); err != nil {
		return slackgo.Blocks{}, fmt.Errorf("decoding blocks: %w", err)
	}
	return out, nil
}

// Post posts m in channel (an id or a name), at the channel's pace, and
// returns the channel's id and the message's ts.
func (c *Client) Post(ctx context.Context, channel string, m message) (string, string, error) {
	opts, err := c.options(m)
	if err != nil {
		return "", "", err
	}
	if err := c.paced(ctx, channel); err != nil {
		return "", "", err
	}
	// No previews: a question's or a PR's text may carry any link, which
	// Slack would fetch and show.
	opts = append(opts, slackgo.MsgOptionDisableLinkUnfurl(), slackgo.MsgOptionDisableMediaUnfurl())
	ch, ts, err := c.api.PostMessageContext(ctx, channel, opts...)
	if err != nil {
		return "", "", classify("posting in Slack channel "+channel, channel, err)
	}
	return ch, ts, nil
}

// Update replaces the bot's message channel/ts with m (its thread stays).
func (c *Client) Update(ctx context.Context, channel, ts string, m message) error {
	m.thread = ""
	opts, err := c.options(m)
	if err != nil {
		return err
	}
	if _, _, _, err := c.api.UpdateMessageContext(ctx, channel, ts, opts...); err != nil {
		return classify(fmt.Sprintf("updating Slack message %s in %s", ts, channel), channel, err)
	}
	return nil
}

// Ephemeral shows text to user alone, in channel (in thread, when set).
func (c *Client) Ephemeral(ctx context.Context, channel, user, thread, text string, blocks ...slackgo.Block) error {
	opts, err := c.options(message{text: text, blocks: blocks, thread: thread})
	if err != nil {
		return err
	}
	if _, err := c.api.PostEphemeralContext(ctx, channel, user, opts...); err != nil {
		return classify("telling a Slack user in "+channel, channel, err)
	}
	return nil
}

// OpenView opens a modal with a click's trigger id, which Slack takes
// once, within 3 seconds.
func (c *Client) OpenView(ctx context.Context, trigger string, v slackgo.ModalViewRequest) error {
	if _, err := c.api.OpenViewContext(ctx, trigger, v); err != nil {
		return classify("opening a Slack modal", "", err)
	}
	return nil
}

// Permalink returns a link to a message.
func (c *Client) Permalink(ctx context.Context, channel, ts string) (string, error) {
	link, err := c.api.GetPermalinkContext(ctx, &slackgo.PermalinkParameters{Channel: channel, Ts: ts})
	if err != nil {
		return "", classify("linking Slack message "+ts, channel, err)
	}
	return link, nil
}

// Replies returns the messages of thread in channel after oldest (a ts;
// "" for all), its root first, with their metadata.
func (c *Client) Replies(ctx context.Context, channel, thread, oldest string) ([]slackgo.Message, error) {
	var out []slackgo.Message
	p := &slackgo.GetConversationRepliesParameters{ChannelID: channel, Timestamp: thread, Oldest: oldest, Limit: 200, IncludeAllMetadata: true}
	for {
		msgs, more, next, err := c.api.GetConversationRepliesContext(ctx, p)
		if err != nil {
			return nil, classify("reading Slack thread "+thread, channel, err)
		}
		out = append(out, msgs...)
		if !more || next == "" {
			return out, nil
		}
		p.Cursor = next
	}
}

// ChannelID returns the id of a channel named by its id or its name
// (#name, or name), as the configuration names it: chat.postMessage takes
// a name, conversations.history only an id. "" when the bot sees no such
// channel.
func (c *Client) ChannelID(ctx context.Context, channel string) (string, error) {
	name := strings.TrimPrefix(channel, "#")
	if isChannelID(name) {
		return name, nil
	}
	p := &slackgo.GetConversationsParameters{ExcludeArchived: true, Limit: 200, Types: []string{"public_channel", "private_channel"}}
	for {
		chans, next, err := c.api.GetConversationsContext(ctx, p)
		if err != nil {
			return "", classify("listing the Slack channels for "+channel, channel, err)
		}
		for _, ch := range chans {
			if ch.Name == name {
				return ch.ID, nil
			}
		}
		if next == "" {
			return "", nil
		}
		p.Cursor = next
	}
}

// isChannelID reports whether s is shaped like a conversation id (C…,
// G…, D…) rather than a name, which Slack writes in lower case.
func isChannelID(s string) bool {
	if len(s) < 2 || !strings.ContainsRune("CGD", rune(s[0])) {
		return false
	}
	for _, c := range s[1:] {
		if !('A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// findLimit bounds the messages Find reads: a message it looks for was
// posted by a retry of a recent attempt.
const findLimit = 400

// Find returns the ts of the bot's message carrying metadata of
// eventType whose payload has key = value: in thread when it is set, else
// among the channel's recent messages. "" when there is none.
func (c *Client) Find(ctx context.Context, channel, thread, botID, eventType, key, value string) (string, error) {
	match := func(m slackgo.Message) bool {
		v, _ := m.Metadata.EventPayload[key].(string)
		return m.BotID == botID && m.Metadata.EventType == eventType && v == value
	}
	if thread != "" {
		msgs, err := c.Replies(ctx, channel, thread, "")
		if err != nil {
			return "", err
		}
		for _, m := range msgs {
			if match(m) {
				return m.Timestamp, nil
			}
		}
		return "", nil
	}
	p := &slackgo.GetConversationHistoryParameters{ChannelID: channel, Limit: 200, IncludeAllMetadata: true}
	for read := 0; read < findLimit; {
		r, err := c.api.GetConversationHistoryContext(ctx, p)
		if err != nil {
			return "", classify("reading Slack channel "+channel, channel, err)
		}
		for _, m := range r.Messages {
			if match(m) {
				return m.Timestamp, nil
			}
		}
		read += len(r.Messages)
		if !r.HasMore || r.ResponseMetaData.NextCursor == "" {
			break
		}
		p.Cursor = r.ResponseMetaData.NextCursor
	}
	return "", nil
}

// paced holds a post in channel as the pace asks: up to burst posts at
// once, then one per pace (a cell rate: next is when the channel's posts
// would be due if each took a pace).
func (c *Client) paced(ctx context.Context, channel string) error {
	c.mu.Lock()
	now := c.now()
	due := c.next[channel]
	if due.Before(now) {
		due = now
	}
	c.next[channel] = due.Add(c.pace)
	at := due.Add(-time.Duration(burst-1) * c.pace)
	if len(c.next) > 10000 {
		clear(c.next) // only a pace: a forgotten channel posts at once
	}
	c.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		return c.wait(ctx, d)
	}
	return nil
}

// AuthError is Slack refusing the bot token: no retry helps until it is
// replaced.
type AuthError struct{ Code string }

func (e *AuthError) Error() string {
	return fmt.Sprintf("Slack refuses the bot token (%s): set ITERION_SLACK_BOT_TOKEN to the app's Bot User OAuth Token (xoxb-…), reinstalling the app if it was revoked", e.Code)
}

// classify wraps a Web API error: a 429 is a *RetryLater with Limited
// set (never given up), Slack's outages and network failures a
// *RetryLater, a refused token an *AuthError, and Slack's other refusals
// a permanent error that says what to fix.
func classify(what, channel string, err error) error {
	var rl *slackgo.RateLimitedError
	var sc slackgo.StatusCodeError
	var se slackgo.SlackErrorResponse
	switch {
	case errors.As(err, &rl):
		return &RetryLater{After: max(rl.RetryAfter, time.Second), Limited: true, Err: fmt.Errorf("%s: Slack's rate limit", what)}
	case errors.As(err, &sc) && sc.Code >= 500:
		return &RetryLater{After: 30 * time.Second, Err: fmt.Errorf("%s: Slack answered %s", what, sc.Status)}
	case errors.As(err, &se):
		switch se.Err {
		case "ratelimited":
			return &RetryLater{After: time.Second, Limited: true, Err: fmt.Errorf("%s: Slack's rate limit", what)}
		case "internal_error", "fatal_error", "service_unavailable", "request_timeout":
			return &RetryLater{After: 30 * time.Second, Err: fmt.Errorf("%s: Slack answered %s", what, se.Err)}
		case "invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive":
			return fmt.Errorf("%s: %w", what, &AuthError{Code: se.Err})
		case "channel_not_found":
			return fmt.Errorf("%s: Slack has no channel %q the bot can see (channel_not_found): check slack.channel, and invite the bot to a private channel", what, channel)
		case "not_in_channel":
			return fmt.Errorf("%s: the bot is not in the channel (not_in_channel): invite it with /invite", what)
		case "missing_scope":
			return fmt.Errorf("%s: the app lacks the scope %s (missing_scope): add it in the app's OAuth & Permissions and reinstall", what, se.Needed)
		}
		return fmt.Errorf("%s: Slack answered %s", what, se.Err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var netErr net.Error
	var opErr *net.OpError
	if errors.As(err, &netErr) || errors.As(err, &opErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &RetryLater{After: 30 * time.Second, Err: fmt.Errorf("%s: %w", what, err)}
	}
	return fmt.Errorf("%s: %w", what, err)
}
