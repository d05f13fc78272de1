package slack_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/slack"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakeslack"
)

// engineDoor is the engine's door to answers, made once the world's
// store is open.
type engineDoor struct{ e atomic.Pointer[engine.Engine] }

func (d *engineDoor) Answer(ctx context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error) {
	return d.e.Load().Answer(ctx, req)
}

// A question whose workflow keeps it off Slack (answer_on: [github, cli])
// shows no buttons, only where it is answered; a click forged on it and a
// thread reply are refused with the reason, and nothing is recorded. A
// question only some may answer (answerers) says who, and refuses the
// others though the server lets them answer.
func TestAnswerOnKeepsSlackOut(t *testing.T) {
	door := &engineDoor{}
	w := newWorld(t, func(o *slack.ServiceOptions) {
		o.Allowed = []string{"ana", "bo"}
	}, door)
	w.perms.may["bo"] = true
	door.e.Store(engine.New(engine.Options{Store: w.db, Poll: time.Hour}))
	ctx := context.Background()
	run, _ := w.ask("r-answer-on", "Warm-up question?", "yes")
	ix, err := w.db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "review",
		Questions: map[string]any{engine.QuestionKey: "Delete the production database?", engine.OptionsKey: []any{map[string]any{"id": "yes", "label": "Yes"}}},
		AnswerOn:  []string{"github", "cli"}})
	if err != nil {
		t.Fatal(err)
	}
	w.svc.OnEvent(engine.Event{Type: engine.EventHumanInputRequested, RunID: run.ID})
	q := w.message("iterion_question", "question_id", ix.ID)
	text := blocksText(q)
	if !strings.Contains(text, "can be answered only through GitHub or the command line") || strings.Contains(string(q.Blocks), `"actions"`) {
		t.Errorf("a question kept off Slack shows:\n%s\n%s", text, q.Blocks)
	}
	w.fake.WaitFor(10*time.Second, "the question's post recorded", func() bool { return w.interaction(run.ID, ix.ID).Posts["slack"] != "" })

	// A click on a button it does not show (a forged payload), then a reply
	// naming it: both refused.
	w.interact(w.fake.Click("U1", q, slack.ActionOption+"0", "0"))
	w.ephemeral("U1", "cannot be answered from Slack: its workflow lets it be answered only through GitHub or the command line")
	card := w.message("iterion_run", "run_id", run.ID)
	before := len(w.fake.Ephemerals("U1"))
	reply := w.fake.Post(fakeslack.Channel, card.TS, "U1", "Q2 yes, drop it")
	w.event(fakeslack.MessageEvent(reply, "Ev-answer-on"), nil)
	w.fake.WaitFor(10*time.Second, "the reply refused", func() bool { return len(w.fake.Ephemerals("U1")) > before })
	if e := w.fake.Ephemerals("U1"); !strings.Contains(e[len(e)-1].Text, "Q2 cannot be answered from Slack") {
		t.Errorf("the reply was told %q", e[len(e)-1].Text)
	}
	if !w.interaction(run.ID, ix.ID).Pending() {
		t.Fatal("an answer from Slack to a question kept off Slack was recorded")
	}

	// Only ana may answer this one, though bo may write to the repository.
	only, err := w.db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "review",
		Questions: map[string]any{engine.QuestionKey: "Tag the release?", engine.OptionsKey: []any{map[string]any{"id": "yes", "label": "Yes"}}},
		Answerers: []string{"ana"}})
	if err != nil {
		t.Fatal(err)
	}
	w.svc.OnEvent(engine.Event{Type: engine.EventHumanInputRequested, RunID: run.ID})
	m := w.message("iterion_question", "question_id", only.ID)
	if !strings.Contains(blocksText(m), "and only GitHub @ana (the workflow's `answerers`)") {
		t.Errorf("the question does not say who may answer:\n%s", blocksText(m))
	}
	w.interact(w.fake.Click("U2", m, slack.ActionOption+"0", "0"))
	w.ephemeral("U2", "only GitHub @ana may answer")
	if !w.interaction(run.ID, only.ID).Pending() {
		t.Fatal("bo's answer was recorded")
	}
	w.interact(w.fake.Click("U1", m, slack.ActionOption+"0", "0"))
	w.fake.WaitFor(10*time.Second, "ana's answer", func() bool { return !w.interaction(run.ID, only.ID).Pending() })
}
