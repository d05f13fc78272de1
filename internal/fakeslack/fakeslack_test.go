package fakeslack

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

func client(s *Server) *slack.Client {
	return slack.New(BotToken, slack.OptionAPIURL(s.URL()), slack.OptionAppLevelToken(AppToken))
}

// The fake keeps Slack's rules the bot must live with: distinct ts per
// message, threads, metadata only on request, updates of the bot's own
// messages, the limits on blocks, single-use trigger ids that expire, and
// 429 with Retry-After.
func TestFakeKeepsSlacksRules(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	s := New(t)
	s.Clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := client(s)
	ctx := context.Background()

	auth, err := c.AuthTestContext(ctx)
	if err != nil || auth.UserID != BotUserID || auth.TeamID != TeamID {
		t.Fatalf("auth.test = %+v, %v", auth, err)
	}
	if _, err := slack.New("xoxb-wrong", slack.OptionAPIURL(s.URL())).AuthTestContext(ctx); err == nil || err.Error() != "invalid_auth" {
		t.Errorf("a wrong token: %v, want invalid_auth", err)
	}
	// Two posts in the same second get distinct ts; a reply joins the root's thread.
	ch, root, err := c.PostMessageContext(ctx, "#"+ChannelName, slack.MsgOptionText("card", false),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "iterion_run", EventPayload: map[string]any{"run_id": "r-1"}}))
	if err != nil || ch != Channel {
		t.Fatalf("post: %s %v", ch, err)
	}
	_, reply, err := c.PostMessageContext(ctx, Channel, slack.MsgOptionText("question", false), slack.MsgOptionTS(root))
	if err != nil || reply == root {
		t.Fatalf("reply ts %s (root %s), %v", reply, root, err)
	}
	msgs, _, _, err := c.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: Channel, Timestamp: root})
	if err != nil || len(msgs) != 2 || msgs[1].Timestamp != reply || msgs[0].Metadata.EventType != "" {
		t.Errorf("replies without metadata = %+v, %v", msgs, err)
	}
	msgs, _, _, _ = c.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: Channel, Timestamp: root, IncludeAllMetadata: true})
	if len(msgs) != 2 || msgs[0].Metadata.EventPayload["run_id"] != "r-1" {
		t.Errorf("replies with metadata = %+v", msgs)
	}
	if _, _, _, err := c.UpdateMessageContext(ctx, Channel, root, slack.MsgOptionText("card, updated", false)); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.Message(Channel, root); m.Text != "card, updated" || m.Edits != 1 {
		t.Errorf("updated card = %+v", m)
	}
	person := s.Post(Channel, root, "U1", "an answer")
	if _, _, _, err := c.UpdateMessageContext(ctx, Channel, person.TS, slack.MsgOptionText("x", false)); err == nil || err.Error() != "cant_update_message" {
		t.Errorf("updating a person's message: %v", err)
	}
	// Slack's limits on blocks.
	long := slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, strings.Repeat("x", 3001), false, false), nil, nil)
	if _, _, err := c.PostMessageContext(ctx, Channel, slack.MsgOptionBlocks(long)); err == nil || err.Error() != "invalid_blocks" {
		t.Errorf("a section of 3001 characters: %v", err)
	}
	btn := slack.NewButtonBlockElement("a", "v", slack.NewTextBlockObject(slack.PlainTextType, strings.Repeat("b", 76), false, false))
	if _, _, err := c.PostMessageContext(ctx, Channel, slack.MsgOptionBlocks(slack.NewActionBlock("q", btn))); err == nil {
		t.Error("a button text of 76 characters was taken")
	}
	// A trigger id opens one modal, within 3 s.
	view := slack.ModalViewRequest{Type: slack.VTModal, Title: slack.NewTextBlockObject(slack.PlainTextType, "Answer", false, false)}
	tr := s.NewTrigger("U1")
	if _, err := c.OpenViewContext(ctx, tr, view); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenViewContext(ctx, tr, view); err == nil || err.Error() != "exchanged_trigger_id" {
		t.Errorf("a trigger id used twice: %v", err)
	}
	late := s.NewTrigger("U1")
	mu.Lock()
	now = now.Add(4 * time.Second)
	mu.Unlock()
	if _, err := c.OpenViewContext(ctx, late, view); err == nil || err.Error() != "expired_trigger_id" {
		t.Errorf("a trigger id 4 s old: %v", err)
	}
	// A rate limit is 429 with Retry-After.
	s.Limit("chat.update", 7)
	_, _, _, err = c.UpdateMessageContext(ctx, Channel, root, slack.MsgOptionText("again", false))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
		t.Errorf("over the limit: %v, want a RateLimitedError of 7s", err)
	}
	link, err := c.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: Channel, Ts: reply})
	if err != nil || !strings.Contains(link, "/archives/"+Channel+"/p") {
		t.Errorf("permalink = %q, %v", link, err)
	}
}

// A Socket Mode client connects through apps.connections.open, receives
// the envelopes the test sends, acknowledges them, and comes back after a
// disconnect or a dropped connection.
func TestFakeSocketMode(t *testing.T) {
	s := New(t)
	s.PingEvery = 50 * time.Millisecond
	sm := socketmode.New(client(s), socketmode.OptionPingInterval(time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = sm.RunContext(ctx); close(done) }()
	go func() {
		for evt := range sm.Events {
			if evt.Request != nil && evt.Request.EnvelopeID != "" {
				_ = sm.Ack(*evt.Request, map[string]any{"seen": evt.Request.RetryAttempt})
			}
		}
	}()
	defer func() { cancel(); <-done }()
	id := s.Send("events_api", map[string]any{"type": "event_callback", "event_id": "Ev1", "event": map[string]any{"type": "message"}})
	var got map[string]any
	if err := json.Unmarshal(s.WaitAck(id), &got); err != nil || got["seen"] != float64(0) {
		t.Errorf("ack payload %v, %v", got, err)
	}
	s.Disconnect()
	s.WaitFor(10*time.Second, "a second connection", func() bool { ever, open := s.Connections(); return ever >= 2 && open == 1 })
	s.Drop()
	s.WaitFor(30*time.Second, "a third connection", func() bool { ever, open := s.Connections(); return ever >= 3 && open == 1 })
	again := s.Send("interactive", map[string]any{"type": "block_actions"})
	s.WaitAck(again)
	if e := s.Envelope(again); e.Attempts != 1 || !e.Acked {
		t.Errorf("envelope %+v", e)
	}
}
