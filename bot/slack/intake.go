package slack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	slackgo "github.com/slack-go/slack"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// Delivery events: what a stored Slack delivery holds.
const (
	EventMessage = "message"         // a reply in a run's thread
	EventClick   = "block_actions"   // an option clicked or picked
	EventSubmit  = "view_submission" // an answer modal submitted
	EventCommand = "slash_command"   // /iterion …
)

// intakeStore is what taking requests in reads of the store: where a
// message's thread goes, and the question a click or a modal answers.
type intakeStore interface {
	PostRef(ctx context.Context, channel, extID string) (runID, ixID string, err error)
	Interaction(ctx context.Context, runID, id string) (*engine.Interaction, error)
	Run(ctx context.Context, id string) (*engine.Run, error)
	ShortIDs(ctx context.Context, scope, runID string) (map[string]int, error)
}

// taker turns what Slack sends, over HTTP or Socket Mode alike, into a
// delivery to store and an answer to give in the request. It reads the
// store but writes nothing: the caller stores the delivery before it
// answers.
type taker struct {
	team    string // the workspace's id: requests of another are ignored
	botUser string // the bot's user id: its own messages are ignored
	slash   string // the slash command's name ("/iterion")
	store   intakeStore
	client  *Client
	log     *slog.Logger
}

// taken is what a request makes: a delivery to store (nil for none), and
// a JSON body to answer with (nil for an empty 200).
type taken struct {
	d    *delivery.Delivery
	body []byte
}

func (t *taker) source() string { return "slack/" + t.team }

// outer is the envelope of an Events API request: the fields read, no
// more. (slack-go's slackevents parser refuses a whole event for an inner
// event or a block it does not know, and a reply in a run's thread must
// not be lost for a block of someone's message.)
type outer struct {
	Type      string     `json:"type"`
	Challenge string     `json:"challenge"`
	TeamID    string     `json:"team_id"`
	EventID   string     `json:"event_id"`
	Event     innerEvent `json:"event"`
}

// innerEvent is a message event's fields the bot reads.
type innerEvent struct {
	Type        string `json:"type"`
	SubType     string `json:"subtype"`
	User        string `json:"user"`
	BotID       string `json:"bot_id"`
	Text        string `json:"text"`
	TS          string `json:"ts"`
	ThreadTS    string `json:"thread_ts"`
	Channel     string `json:"channel"`
	ChannelType string `json:"channel_type"`
}

// event takes an Events API request's body: the URL verification is
// answered; a person's reply in a run's thread is stored, keyed by its
// channel and ts (a retry of the event, or the same reply read again after
// downtime, is one delivery); every other event is acknowledged and
// ignored (edits, deletions, reactions, the bot's own messages, threads
// that are no run's).
func (t *taker) event(ctx context.Context, body []byte) (taken, error) {
	var o outer
	if err := json.Unmarshal(body, &o); err != nil {
		return taken{}, delivery.Refuse(http.StatusBadRequest, "the body is not an Events API JSON payload: "+err.Error())
	}
	switch o.Type {
	case "url_verification":
		b, _ := json.Marshal(map[string]string{"challenge": o.Challenge})
		return taken{body: b}, nil
	case "app_rate_limited":
		t.log.Warn("Slack is holding back events: over 30,000 an hour for the workspace", "team", o.TeamID)
		return taken{}, nil
	case "event_callback":
	default:
		return taken{}, nil
	}
	if o.TeamID != t.team {
		t.log.Debug("an event of another workspace is ignored", "team", o.TeamID)
		return taken{}, nil
	}
	d, err := t.message(ctx, o.Event)
	if d != nil {
		d.Payload = body
	}
	return taken{d: d}, err
}

// message returns the delivery of a message event that may answer a
// question: a person's reply in the thread of a run's card; nil for any
// other.
func (t *taker) message(ctx context.Context, e innerEvent) (*delivery.Delivery, error) {
	switch {
	case e.Type != "message",
		// Edits, deletions, joins, the bot's messages: no answers. A reply
		// also sent to the channel (thread_broadcast) is one.
		e.SubType != "" && e.SubType != "thread_broadcast",
		e.BotID != "", e.User == "", e.User == t.botUser,
		e.ThreadTS == "", e.ThreadTS == e.TS, e.Channel == "", e.TS == "":
		return nil, nil
	}
	if _, _, err := t.store.PostRef(ctx, "slack", e.Channel+"/"+e.ThreadTS); errors.Is(err, engine.ErrNotFound) {
		return nil, nil // a thread that is no run's
	} else if err != nil {
		return nil, err
	}
	return &delivery.Delivery{Source: t.source(), ID: "msg/" + e.Channel + "/" + e.TS, Event: EventMessage, Group: "channel/" + e.Channel}, nil
}

// interaction takes an interaction payload (the JSON of a form body's
// payload field, or of a Socket Mode envelope). Two kinds are answered in
// the request, as Slack allows nothing later: a click on "Answer in
// words…" or "Fill in the form…" opens the modal with its trigger id
// (valid once, for 3 seconds); a modal submission is checked against the
// question's schema, and refused with its errors shown beside each input
// (response_action: errors), so bad input is lost nowhere. Only a valid
// submission and an option's click are stored.
func (t *taker) interaction(ctx context.Context, payload []byte) (taken, error) {
	var cb slackgo.InteractionCallback
	if err := json.Unmarshal(payload, &cb); err != nil {
		return taken{}, delivery.Refuse(http.StatusBadRequest, "the interaction payload is not JSON Slack sends: "+err.Error())
	}
	if cb.Team.ID != t.team {
		t.log.Debug("an interaction of another workspace is ignored", "team", cb.Team.ID)
		return taken{}, nil
	}
	key := func(prefix string) string {
		sum := sha256.Sum256(payload)
		return prefix + hex.EncodeToString(sum[:12])
	}
	switch cb.Type {
	case slackgo.InteractionTypeBlockActions:
		if len(cb.ActionCallback.BlockActions) == 0 {
			return taken{}, nil
		}
		a := cb.ActionCallback.BlockActions[0]
		switch {
		case a.ActionID == ActionWords || a.ActionID == ActionForm:
			return taken{}, t.openModal(ctx, cb)
		case strings.HasPrefix(a.ActionID, ActionOption) || a.ActionID == ActionSelect:
			ch := cb.Container.ChannelID
			return taken{d: &delivery.Delivery{Source: t.source(), ID: key("click/"), Event: EventClick, Group: "channel/" + ch, Payload: payload}}, nil
		}
		return taken{}, nil // a link's button: acknowledged, nothing to do
	case slackgo.InteractionTypeViewSubmission:
		if cb.View.CallbackID != CallbackID {
			return taken{}, nil
		}
		refusal, err := t.checkSubmission(ctx, cb)
		if err != nil || refusal != nil {
			return taken{body: refusal}, err
		}
		var meta modalMeta
		_ = json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta) // checked above
		return taken{d: &delivery.Delivery{Source: t.source(), ID: key("submit/"), Event: EventSubmit, Group: "channel/" + meta.Channel, Payload: payload}}, nil
	}
	return taken{}, nil
}

// question returns the question a bot's message carries, with its short
// id, nil when the message carries none.
func (t *taker) question(ctx context.Context, channel, ts string) (*engine.Interaction, string, error) {
	runID, ixID, err := t.store.PostRef(ctx, "slack", channel+"/"+ts)
	if errors.Is(err, engine.ErrNotFound) || err == nil && ixID == "" {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	ix, err := t.store.Interaction(ctx, runID, ixID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	return ix, t.qid(ctx, ix), nil
}

// qid is a question's short id, as its thread shows it.
func (t *taker) qid(ctx context.Context, ix *engine.Interaction) string {
	run, err := t.store.Run(ctx, ix.RunID)
	if err != nil {
		return "the question"
	}
	nums, err := t.store.ShortIDs(ctx, scopeOf(run), run.ID)
	if n := nums[ix.ID]; err == nil && n > 0 {
		return "Q" + strconv.Itoa(n)
	}
	return "the question"
}

// openModal opens the answer modal of the question a click's message
// carries, or, when it waits no more, a modal saying who answered.
func (t *taker) openModal(ctx context.Context, cb slackgo.InteractionCallback) error {
	ch, ts := cb.Container.ChannelID, cb.Container.MessageTs
	ix, q, err := t.question(ctx, ch, ts)
	if err != nil {
		return err
	}
	var view slackgo.ModalViewRequest
	switch {
	case ix == nil:
		view = answeredModal("Not a question", "This message carries no question of iterion's.")
	case !ix.Pending():
		view = answeredModal(q, fmt.Sprintf("%s was already answered by %s via %s: *%s*", q, code(ix.AnsweredBy), viaWords(ix.Via), escape(oneLine(answerText(ix), 500))))
	default:
		view = answerModal(q, ix, modalMeta{Run: ix.RunID, Ix: ix.ID, Channel: ch, TS: ts, Thread: cb.Container.ThreadTs})
	}
	if err := t.client.OpenView(ctx, cb.TriggerID, view); err != nil {
		// The click is answered all the same: a trigger id used too late
		// (a slow store) cannot be used again, and a retry would be late.
		t.log.Warn("opening an answer modal failed", "channel", ch, "ts", ts, "err", err)
	}
	return nil
}

// checkSubmission checks an answer modal's submission: still the
// question's, still pending, and valid by its schema. A refusal is the
// JSON of response_action: errors; nil when the submission is good.
func (t *taker) checkSubmission(ctx context.Context, cb slackgo.InteractionCallback) ([]byte, error) {
	var meta modalMeta
	if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta); err != nil {
		return nil, delivery.Refuse(http.StatusBadRequest, "the modal's private_metadata is not the bot's")
	}
	ix, q, err := t.question(ctx, meta.Channel, meta.TS)
	if err != nil {
		return nil, err
	}
	if ix == nil || ix.RunID != meta.Run || ix.ID != meta.Ix {
		return nil, delivery.Refuse(http.StatusBadRequest, "the modal's question is not the one its message carries")
	}
	errorsOf := func(m map[string]string) []byte {
		b, _ := json.Marshal(slackgo.NewErrorsViewSubmissionResponse(m))
		return b
	}
	first := blockAnswer
	if isForm(ix) {
		first = blockField + ix.Fields[0].Name
	}
	if !ix.Pending() {
		return errorsOf(map[string]string{first: oneLine(fmt.Sprintf("%s was already answered by %s via %s; your answer was not used.", q, ix.AnsweredBy, viaWords(ix.Via)), 150)}), nil
	}
	run, err := t.store.Run(ctx, ix.RunID)
	if err != nil {
		return nil, err
	}
	if run.Status.Terminal() {
		return errorsOf(map[string]string{first: fmt.Sprintf("Run %s has ended; %s can no longer be answered.", run.ID, q)}), nil
	}
	text, fields := submitted(ix, cb.View.State)
	if labels := options(ix); text != "" && len(labels) > 0 {
		text = pickOption(text, labels)
	}
	var bad *engine.InvalidAnswerError
	if err := engine.ValidateAnswer(ix, text, fields); errors.As(err, &bad) {
		return errorsOf(modalErrors(ix, bad)), nil
	} else if err != nil {
		return errorsOf(map[string]string{first: oneLine(err.Error(), 150)}), nil
	}
	return nil, nil
}

// command takes a slash command: stored, keyed by its trigger id, and
// acknowledged with nothing; the handler answers its caller.
func (t *taker) command(c slackgo.SlashCommand) (taken, error) {
	if c.TeamID != t.team || c.Command != t.slash || c.TriggerID == "" {
		t.log.Debug("a command that is not the bot's is ignored", "team", c.TeamID, "command", c.Command)
		return taken{}, nil
	}
	payload, _ := json.Marshal(c) // cannot fail: strings
	return taken{d: &delivery.Delivery{Source: t.source(), ID: "cmd/" + c.TriggerID, Event: EventCommand, Group: "channel/" + c.ChannelID, Payload: payload}}, nil
}

// signed is the side of the HTTP intake all three endpoints share: the
// request's signature (X-Slack-Signature over v0:timestamp:body, keyed
// with the signing secret) and its timestamp within 5 minutes of the
// server's clock, checked before any of the body is parsed.
type signed struct{ secret string }

// slackVerifier is slack-go's verifier as the intake's.
type slackVerifier struct{ sv slackgo.SecretsVerifier }

func (v *slackVerifier) Write(p []byte) (int, error) { return v.sv.Write(p) }

func (v *slackVerifier) Verify() error {
	if v.sv.Ensure() != nil {
		return noRetry(http.StatusUnauthorized, "X-Slack-Signature does not match the body: the request was not signed with this app's signing secret (ITERION_SLACK_SIGNING_SECRET)")
	}
	return nil
}

// noRetry is a refusal Slack should not retry: it would be refused the
// same.
func noRetry(status int, msg string) *delivery.Refusal {
	return &delivery.Refusal{Status: status, Message: msg, Header: http.Header{"X-Slack-No-Retry": {"1"}}}
}

func (s signed) Verifier(h http.Header) (delivery.Verifier, error) {
	sv, err := slackgo.NewSecretsVerifier(h, s.secret)
	switch {
	case err == nil:
		return &slackVerifier{sv: sv}, nil
	case errors.Is(err, slackgo.ErrMissingHeaders):
		return nil, noRetry(http.StatusUnauthorized, "X-Slack-Signature and X-Slack-Request-Timestamp are required: only requests Slack signs are taken")
	case errors.Is(err, slackgo.ErrExpiredTimestamp):
		return nil, noRetry(http.StatusUnauthorized, "X-Slack-Request-Timestamp is more than 5 minutes from the server's clock: a replayed request, or a clock off (check the server's time sync)")
	case errors.Is(err, slackgo.ErrInvalidConfiguration):
		return nil, err // no secret: serve refuses to start first
	}
	return nil, noRetry(http.StatusUnauthorized, "X-Slack-Signature is not a v0= signature, or X-Slack-Request-Timestamp no number: only requests Slack signs are taken")
}

// eventsChannel is the Events API endpoint's side of the intake.
type eventsChannel struct {
	signed
	t *taker
}

func (c eventsChannel) Accept(ctx context.Context, h http.Header, body []byte) (delivery.Outcome, error) {
	tk, err := c.t.event(ctx, body)
	if err != nil {
		return delivery.Outcome{}, err
	}
	if n := h.Get("X-Slack-Retry-Num"); n != "" && tk.d != nil {
		// The first attempt may never have reached us: stored unless it did.
		c.t.log.Info("Slack retried an event", "delivery", tk.d.ID, "retry", n, "reason", h.Get("X-Slack-Retry-Reason"))
	}
	return outcome(tk), nil
}

// interactiveChannel is the interactivity endpoint's side: a form body
// whose payload field is the interaction's JSON.
type interactiveChannel struct {
	signed
	t *taker
}

func (c interactiveChannel) Accept(ctx context.Context, _ http.Header, body []byte) (delivery.Outcome, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("payload") == "" {
		return delivery.Outcome{}, delivery.Refuse(http.StatusBadRequest, "an interaction is a form body with a payload field")
	}
	tk, err := c.t.interaction(ctx, []byte(form.Get("payload")))
	if err != nil {
		return delivery.Outcome{}, err
	}
	return outcome(tk), nil
}

// commandsChannel is the slash commands endpoint's side: a form body.
type commandsChannel struct {
	signed
	t *taker
}

func (c commandsChannel) Accept(_ context.Context, _ http.Header, body []byte) (delivery.Outcome, error) {
	f, err := url.ParseQuery(string(body))
	if err != nil {
		return delivery.Outcome{}, delivery.Refuse(http.StatusBadRequest, "a slash command is a form body")
	}
	tk, err := c.t.command(slackgo.SlashCommand{
		TeamID: f.Get("team_id"), TeamDomain: f.Get("team_domain"), ChannelID: f.Get("channel_id"), ChannelName: f.Get("channel_name"),
		UserID: f.Get("user_id"), UserName: f.Get("user_name"), Command: f.Get("command"), Text: f.Get("text"),
		ResponseURL: f.Get("response_url"), TriggerID: f.Get("trigger_id"), APIAppID: f.Get("api_app_id"),
	})
	if err != nil {
		return delivery.Outcome{}, err
	}
	return outcome(tk), nil
}

// outcome is the intake's Outcome of a request taken: a 200, as Slack
// asks, with the body when there is one.
func outcome(tk taken) delivery.Outcome {
	resp := &delivery.Response{Status: http.StatusOK}
	if tk.body != nil {
		resp.ContentType, resp.Body = "application/json", tk.body
	}
	return delivery.Outcome{Delivery: tk.d, Response: resp}
}

var (
	_ delivery.Channel = eventsChannel{}
	_ delivery.Channel = interactiveChannel{}
	_ delivery.Channel = commandsChannel{}
)
