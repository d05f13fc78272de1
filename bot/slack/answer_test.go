package slack_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/slack"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakeslack"
)

// A run's card comes in the server's channel, the question as a reply in
// its thread with one button per option; a click answers it: the question
// message is updated to say who answered and where, one thread reply says
// so, and later clicks, from anyone, are told it was already answered.
func TestAnswerByButton(t *testing.T) {
	w := newWorld(t, nil)
	run, ix := w.ask("r-button", "Should I check the docs too?", "Yes, the docs too", "Code only")
	card := w.message("iterion_run", "run_id", run.ID)
	if card.Channel != fakeslack.Channel || card.ThreadTS != "" || !strings.Contains(blocksText(card), "iterion · review") {
		t.Fatalf("card = %+v\n%s", card, blocksText(card))
	}
	q := w.message("iterion_question", "question_id", ix.ID)
	text := blocksText(q)
	for _, want := range []string{"Question Q1", "> Should I check the docs too?", "Yes, the docs too", "Code only", "Answer in words…", "who may answer: GitHub @ana"} {
		if !strings.Contains(text, want) {
			t.Errorf("question message lacks %q:\n%s", want, text)
		}
	}
	if q.ThreadTS != card.TS {
		t.Errorf("question in thread %q, want the card's %q", q.ThreadTS, card.TS)
	}
	w.fake.WaitFor(10*time.Second, "the question's post recorded", func() bool {
		return w.interaction(run.ID, ix.ID).Posts["slack"] == q.Channel+"/"+q.TS
	})

	// Someone the server does not know, then bo (not allowed), click first.
	w.interact(w.fake.Click("U3", q, slack.ActionOption+"1", "1"))
	w.ephemeral("U3", "Ask the server's admin to add `U3: <your GitHub login>` under `slack.users`")
	w.interact(w.fake.Click("U2", q, slack.ActionOption+"1", "1"))
	w.ephemeral("U2", "only the GitHub accounts listed under `slack.allowed`")
	if !w.interaction(run.ID, ix.ID).Pending() {
		t.Fatal("an answer from someone not allowed was recorded")
	}
	// ana's click answers.
	w.interact(w.fake.Click("U1", q, slack.ActionOption+"0", "0"))
	w.fake.WaitFor(10*time.Second, "the question answered", func() bool { return !w.interaction(run.ID, ix.ID).Pending() })
	got := w.interaction(run.ID, ix.ID)
	if got.Answer() != "Yes, the docs too" || got.AnsweredBy != "ana" || got.Via != "slack" {
		t.Errorf("answer = %q by %q via %q", got.Answer(), got.AnsweredBy, got.Via)
	}
	w.fake.WaitFor(10*time.Second, "the question message updated", func() bool {
		m, _ := w.fake.Message(q.Channel, q.TS)
		return strings.Contains(blocksText(m), "Answered by <@U1> (GitHub @ana) via Slack: *Yes, the docs too*")
	})
	m, _ := w.fake.Message(q.Channel, q.TS)
	if strings.Contains(blocksText(m), "Code only") {
		t.Errorf("the answered question still shows its buttons:\n%s", blocksText(m))
	}
	reply := w.message("iterion_answered", "question_id", ix.ID)
	if reply.ThreadTS != card.TS || !strings.Contains(reply.Text, "Q1* answered by <@U1> (GitHub @ana) via Slack") {
		t.Errorf("answered reply = %+v", reply)
	}
	// A second click by ana is a double click: nothing said. bo's is told.
	w.interact(w.fake.Click("U1", q, slack.ActionOption+"0", "0"))
	w.interact(w.fake.Click("U2", q, slack.ActionOption+"1", "1"))
	w.ephemeral("U2", "Q1 was already answered by `ana` via Slack; your answer was not used.")
	for _, e := range w.fake.Ephemerals("U1") {
		t.Errorf("ana was told %q", e.Text)
	}
	if n := len(w.fake.BotMessages("answered by")); n != 1 {
		t.Errorf("%d replies saying who answered, want 1", n)
	}
	// No post of the bot's shows a preview of a link it carries (a
	// question's text, a PR's title may hold any).
	for _, m := range w.fake.Messages("") {
		if m.Unfurls {
			t.Errorf("message %s (%q) is posted with link or media previews on", m.TS, m.Text)
		}
	}
}

// An answer given elsewhere (the PR, the CLI) updates the Slack question
// and posts the thread reply saying who and where; a click afterwards is
// told.
func TestAnswerFromElsewhere(t *testing.T) {
	w := newWorld(t, nil)
	run, ix := w.ask("r-elsewhere", "Which port?", "8080", "9090")
	q := w.message("iterion_question", "question_id", ix.ID)
	if _, err := w.db.Answer(context.Background(), engine.AnswerRequest{RunID: run.ID, InteractionID: ix.ID, Text: "9090", By: "carol", Via: "github"}); err != nil {
		t.Fatal(err)
	}
	w.svc.OnEvent(engine.Event{Type: engine.EventInteractionAnswered, RunID: run.ID})
	reply := w.message("iterion_answered", "question_id", ix.ID)
	if !strings.Contains(reply.Text, "answered by @carol via GitHub: *9090*") {
		t.Errorf("reply = %q", reply.Text)
	}
	w.fake.WaitFor(10*time.Second, "the question message updated", func() bool {
		m, _ := w.fake.Message(q.Channel, q.TS)
		return strings.Contains(blocksText(m), "Answered by @carol via GitHub")
	})
	w.interact(w.fake.Click("U1", q, slack.ActionOption+"0", "0"))
	w.ephemeral("U1", "Q1 was already answered by `carol` via GitHub")
}
