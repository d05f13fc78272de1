package slack_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/internal/fakeslack"
)

// Requests Slack did not sign, or signed more than 5 minutes from the
// server's clock, are refused before anything is parsed or stored; the
// URL verification is answered with its challenge.
func TestIntakeRefusals(t *testing.T) {
	w := newWorld(t, nil)
	body := []byte(`{"type":"url_verification","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","token":"x"}`)
	code, resp := w.post("/webhooks/slack/events", "application/json", body, nil)
	var got map[string]string
	if code != http.StatusOK || json.Unmarshal([]byte(resp), &got) != nil || got["challenge"] != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Errorf("url_verification = %d %s", code, resp)
	}
	send := func(req *http.Request) (int, string) {
		t.Helper()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var msg map[string]string
		_ = json.NewDecoder(res.Body).Decode(&msg)
		return res.StatusCode, msg["error"]
	}
	tests := []struct {
		name string
		req  *http.Request
		want string
	}{
		{"forged signature", fakeslack.Signed(w.base+"/webhooks/slack/events", "another secret", "application/json", body, time.Now()), "does not match the body"},
		{"stale timestamp", fakeslack.Signed(w.base+"/webhooks/slack/interactive", secret, "application/x-www-form-urlencoded", []byte("payload={}"), time.Now().Add(-6*time.Minute)), "more than 5 minutes"},
		{"timestamp from the future", fakeslack.Signed(w.base+"/webhooks/slack/commands", secret, "application/x-www-form-urlencoded", []byte("text=run"), time.Now().Add(6*time.Minute)), "more than 5 minutes"},
	}
	unsigned, _ := http.NewRequest(http.MethodPost, w.base+"/webhooks/slack/events", strings.NewReader(string(body)))
	tests = append(tests, struct {
		name string
		req  *http.Request
		want string
	}{"unsigned", unsigned, "X-Slack-Signature and X-Slack-Request-Timestamp are required"})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := send(tc.req)
			if code != http.StatusUnauthorized || !strings.Contains(msg, tc.want) {
				t.Errorf("= %d %q, want 401 saying %q", code, msg, tc.want)
			}
		})
	}
	if pending, _ := w.db.PendingDeliveries(context.Background(), 0); len(pending) != 0 {
		t.Errorf("refused requests stored deliveries: %+v", pending)
	}
}

// A reply in a run's thread answers its one pending question; Slack's
// retry of the event (X-Slack-Retry-Num) has no second effect; an edit of
// the reply, a reply in a thread that is no run's, and the bot's own
// messages are not answers.
func TestThreadReply(t *testing.T) {
	w := newWorld(t, nil)
	run, ix := w.ask("r-reply", "Which database?")
	card := w.message("iterion_run", "run_id", run.ID)
	w.message("iterion_question", "question_id", ix.ID)
	w.fake.WaitFor(10*time.Second, "the question's post recorded", func() bool { return w.interaction(run.ID, ix.ID).Posts["slack"] != "" })

	other := w.fake.Post(fakeslack.Channel, "", "U1", "lunch?")
	chatter := w.fake.Post(fakeslack.Channel, other.TS, "U1", "PostgreSQL")
	w.event(fakeslack.MessageEvent(chatter, "Ev-chatter"), nil)
	reply := w.fake.Post(fakeslack.Channel, card.TS, "U1", "PostgreSQL &amp; <https://example.com|its docs>")
	w.event(fakeslack.EditEvent(reply, "MySQL", "Ev-edit"), nil)
	w.event(fakeslack.MessageEvent(reply, "Ev-1"), nil)
	w.event(fakeslack.MessageEvent(reply, "Ev-1"), map[string]string{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
	w.fake.WaitFor(10*time.Second, "the reply taken as the answer", func() bool { return !w.interaction(run.ID, ix.ID).Pending() })
	if got := w.interaction(run.ID, ix.ID); got.Answer() != "PostgreSQL & its docs" || got.AnsweredBy != "ana" || got.Via != "slack" {
		t.Errorf("answer %q by %q via %q", got.Answer(), got.AnsweredBy, got.Via)
	}
	w.message("iterion_answered", "question_id", ix.ID)
	// The retry was the same delivery: nobody is told "already answered".
	w.stop()
	if e := w.fake.Ephemerals(""); len(e) != 0 {
		t.Errorf("ephemeral messages %+v, want none", e)
	}
	if n := len(w.fake.BotMessages("answered by")); n != 1 {
		t.Errorf("%d replies saying who answered, want 1", n)
	}
}

// When several questions wait in a thread, a reply must name the one it
// answers (Q2), and is told so otherwise.
func TestThreadReplyNamesItsQuestion(t *testing.T) {
	w := newWorld(t, nil)
	run, q1 := w.ask("r-two", "Which database?")
	q2 := w.question(run, "Which port?")
	card := w.message("iterion_run", "run_id", run.ID)
	w.message("iterion_question", "question_id", q1.ID)
	w.message("iterion_question", "question_id", q2.ID)
	w.fake.WaitFor(10*time.Second, "both posts recorded", func() bool {
		return w.interaction(run.ID, q1.ID).Posts["slack"] != "" && w.interaction(run.ID, q2.ID).Posts["slack"] != ""
	})
	vague := w.fake.Post(fakeslack.Channel, card.TS, "U1", "8080")
	w.event(fakeslack.MessageEvent(vague, "Ev-v"), nil)
	w.ephemeral("U1", "several questions wait in this thread (Q1, Q2)")
	wrong := w.fake.Post(fakeslack.Channel, card.TS, "U1", "Q7 8080")
	w.event(fakeslack.MessageEvent(wrong, "Ev-w"), nil)
	w.ephemeral("U1", "there is no question Q7 in this thread; the ones waiting are Q1, Q2")
	named := w.fake.Post(fakeslack.Channel, card.TS, "U1", "q2: 8080")
	w.event(fakeslack.MessageEvent(named, "Ev-n"), nil)
	w.fake.WaitFor(10*time.Second, "Q2 answered", func() bool { return !w.interaction(run.ID, q2.ID).Pending() })
	if got := w.interaction(run.ID, q2.ID).Answer(); got != "8080" {
		t.Errorf("Q2's answer = %q, want 8080", got)
	}
	if !w.interaction(run.ID, q1.ID).Pending() {
		t.Error("Q1 was answered too")
	}
}

// A reply written in a run's thread while the server was down (its event
// never delivered) is read back at the next start and answers; a reply
// whose event did arrive is not taken twice.
func TestRepliesWhileDown(t *testing.T) {
	w := newWorld(t, nil)
	run, q1 := w.ask("r-down", "Which database?")
	q2 := w.question(run, "Which port?")
	card := w.message("iterion_run", "run_id", run.ID)
	w.message("iterion_question", "question_id", q2.ID)
	w.fake.WaitFor(10*time.Second, "both posts recorded", func() bool {
		return w.interaction(run.ID, q1.ID).Posts["slack"] != "" && w.interaction(run.ID, q2.ID).Posts["slack"] != ""
	})
	seen := w.fake.Post(fakeslack.Channel, card.TS, "U1", "Q1 PostgreSQL")
	w.event(fakeslack.MessageEvent(seen, "Ev-seen"), nil)
	w.fake.WaitFor(10*time.Second, "Q1 answered", func() bool { return !w.interaction(run.ID, q1.ID).Pending() })
	w.stop()

	w.fake.Post(fakeslack.Channel, card.TS, "U1", "Q2 5432")
	w.start(nil)
	w.fake.WaitFor(10*time.Second, "Q2 answered after the restart", func() bool { return !w.interaction(run.ID, q2.ID).Pending() })
	if got := w.interaction(run.ID, q2.ID).Answer(); got != "5432" {
		t.Errorf("Q2 = %q", got)
	}
	w.message("iterion_answered", "question_id", q2.ID)
	w.stop()
	if e := w.fake.Ephemerals(""); len(e) != 0 {
		t.Errorf("told %+v: the reply seen before the restart was taken again", e)
	}
}
