package slack_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/slack"
	"github.com/iterion-bot/iterion/internal/fakeslack"
)

// Over Socket Mode the same requests come as envelopes: each is stored,
// then acknowledged (a modal's errors as the ack's payload); the
// connection comes back after Slack's disconnect warning and after it is
// lost, and a redelivered envelope has no second effect.
func TestSocketMode(t *testing.T) {
	w := newWorld(t, func(o *slack.ServiceOptions) {
		o.Transport, o.AppToken, o.SigningSecret = slack.TransportSocket, fakeslack.AppToken, ""
	})
	run, ix := w.ask("r-socket", "Which region?", "eu", "us")
	q := w.message("iterion_question", "question_id", ix.ID)
	w.fake.WaitFor(10*time.Second, "the question's post recorded", func() bool { return w.interaction(run.ID, ix.ID).Posts["slack"] != "" })

	// A modal over the socket: its errors come back in the ack.
	var click map[string]any
	_ = json.Unmarshal(w.fake.Click("U1", q, slack.ActionWords, "words"), &click)
	w.fake.WaitAck(w.fake.Send("interactive", click))
	views := w.fake.Views()
	if len(views) != 1 {
		t.Fatalf("views = %+v", views)
	}
	var empty map[string]any
	_ = json.Unmarshal(w.fake.Submission("U1", views[0], map[string]string{"answer": ""}), &empty)
	if ack := string(w.fake.WaitAck(w.fake.Send("interactive", empty))); !strings.Contains(ack, `"response_action":"errors"`) {
		t.Errorf("the ack of an empty answer = %s, want its errors", ack)
	}

	w.fake.Disconnect()
	w.fake.WaitFor(10*time.Second, "a new connection after the warning", func() bool { ever, open := w.fake.Connections(); return ever >= 2 && open == 1 })
	w.fake.Drop()
	w.fake.WaitFor(30*time.Second, "a new connection after the loss", func() bool { ever, open := w.fake.Connections(); return ever >= 3 && open == 1 })

	reply := w.fake.Post(q.Channel, q.ThreadTS, "U1", "eu")
	var ev map[string]any
	_ = json.Unmarshal(fakeslack.MessageEvent(reply, "Ev-sock"), &ev)
	env := w.fake.Send("events_api", ev)
	w.fake.WaitAck(env)
	w.fake.Redeliver(env)
	w.fake.WaitFor(10*time.Second, "the answer", func() bool { return w.interaction(run.ID, ix.ID).Answer() == "eu" })
	w.message("iterion_answered", "question_id", ix.ID)
	w.stop()
	if e := w.fake.Ephemerals(""); len(e) != 0 {
		t.Errorf("told %+v, want nothing (the redelivery is the same delivery)", e)
	}
}
