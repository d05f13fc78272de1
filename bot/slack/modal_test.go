package slack_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/bot/slack"
	"github.com/iterion-bot/iterion/engine"
)

// "Answer in words…" opens a modal with the click's trigger id; an empty
// submission is refused in the modal (response_action: errors) and
// nothing is stored; a submission answers; a click on the answered
// question opens a modal saying who answered.
func TestAnswerInWords(t *testing.T) {
	w := newWorld(t, nil)
	run, ix := w.ask("r-words", "What should the release be called?", "v2", "v3")
	q := w.message("iterion_question", "question_id", ix.ID)
	w.fake.WaitFor(10*time.Second, "the question's post recorded", func() bool { return w.interaction(run.ID, ix.ID).Posts["slack"] != "" })

	if body := w.interact(w.fake.Click("U1", q, slack.ActionWords, "words")); body != "" {
		t.Errorf("the click is answered %q, want an empty 200", body)
	}
	views := w.fake.Views()
	if len(views) != 1 || !strings.Contains(string(views[0].View), "What should the release be called?") || !strings.Contains(string(views[0].View), `"callback_id":"iterion/answer"`) {
		t.Fatalf("views = %+v", views)
	}
	refused := w.interact(w.fake.Submission("U1", views[0], map[string]string{"answer": "   "}))
	var errs struct {
		Action string            `json:"response_action"`
		Errors map[string]string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(refused), &errs); err != nil || errs.Action != "errors" || errs.Errors["answer"] != "Write your answer." {
		t.Errorf("an empty answer is answered %s", refused)
	}
	if pending, _ := w.db.PendingDeliveries(context.Background(), 0); len(pending) != 0 {
		t.Errorf("a refused submission was stored: %+v", pending)
	}
	if body := w.interact(w.fake.Submission("U1", views[0], map[string]string{"answer": "Nimbus"})); body != "" {
		t.Errorf("a good submission is answered %q, want an empty 200 (the modal closes)", body)
	}
	w.fake.WaitFor(10*time.Second, "the answer recorded", func() bool { return !w.interaction(run.ID, ix.ID).Pending() })
	if got := w.interaction(run.ID, ix.ID); got.Answer() != "Nimbus" || got.AnsweredBy != "ana" {
		t.Errorf("answer %q by %q", got.Answer(), got.AnsweredBy)
	}
	// The same modal submitted again, after the answer, is refused in it.
	late := w.interact(w.fake.Submission("U1", views[0], map[string]string{"answer": "Cirrus"}))
	if !strings.Contains(late, "was already answered by ana via Slack") {
		t.Errorf("a submission after the answer = %s", late)
	}
	w.interact(w.fake.Click("U2", q, slack.ActionWords, "words"))
	if views := w.fake.Views(); len(views) != 2 || !strings.Contains(string(views[1].View), "already answered by `ana` via Slack") {
		t.Errorf("the click on an answered question opened %+v", views)
	}
}

// recorder is the engine's door for a blocking question: it records the
// answers it is given.
type recorder struct {
	mu   sync.Mutex
	reqs []engine.AnswerRequest
	// answered is closed at the first answer.
	answered chan struct{}
}

func newRecorder() *recorder { return &recorder{answered: make(chan struct{})} }

func (r *recorder) Answer(_ context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	if len(r.reqs) == 1 {
		close(r.answered)
	}
	return &engine.AnswerResult{Resumed: true}, nil
}

func (r *recorder) got() []engine.AnswerRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]engine.AnswerRequest(nil), r.reqs...)
}

// A human node's form opens as a modal with one input per field, typed
// from its schema (a yes/no, an enum's values, a number, text); a
// submission with a value of the wrong type is refused beside its input;
// a good one is given to the engine field by field.
func TestFormModal(t *testing.T) {
	doors := newRecorder()
	w := newWorld(t, nil, doors)
	ctx := context.Background()
	run := &engine.Run{ID: "r-form", Workflow: "release", Status: engine.StatusPausedWaitingHuman, Trigger: engine.Trigger{Source: "api"},
		Channels: []string{"slack"}, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := w.db.CreateRun(ctx, run, nil); err != nil {
		t.Fatal(err)
	}
	run, _ = w.db.Run(ctx, run.ID)
	ix := &engine.Interaction{ID: "r-form_approve", RunID: run.ID, NodeID: "approve", Kind: engine.KindBlocking, RequestedAt: time.Now(),
		Questions: map[string]any{"_instructions": "Ship it?", "approved": "Ship this release", "count": "How many replicas", "env": "Where"},
		Fields:    []engine.FormField{{Name: "approved", Type: "bool"}, {Name: "count", Type: "int"}, {Name: "env", Type: "string", Enum: []string{"staging", "prod"}}}}
	if err := w.db.Commit(ctx, engine.Change{RunID: run.ID, Generation: run.Generation, Interactions: []*engine.Interaction{ix},
		Outbox: []engine.OutboxRow{{Kind: engine.OutboxRunPaused, InteractionID: ix.ID}}}); err != nil {
		t.Fatal(err)
	}
	w.svc.OnEvent(engine.Event{Type: engine.EventRunPaused, RunID: run.ID})
	q := w.message("iterion_question", "question_id", ix.ID)
	if text := blocksText(q); !strings.Contains(text, "Fill in the form…") || !strings.Contains(text, "`count` (int): How many replicas") {
		t.Errorf("form message:\n%s", text)
	}
	w.fake.WaitFor(10*time.Second, "the question's post recorded", func() bool { return w.interaction(run.ID, ix.ID).Posts["slack"] != "" })
	w.interact(w.fake.Click("U1", q, slack.ActionForm, "form"))
	views := w.fake.Views()
	if len(views) != 1 {
		t.Fatalf("views = %+v", views)
	}
	view := string(views[0].View)
	for _, want := range []string{`"block_id":"f/approved"`, `"type":"static_select"`, `"type":"number_input"`, `"value":"prod"`} {
		if !strings.Contains(view, want) {
			t.Errorf("the form's modal lacks %s:\n%s", want, view)
		}
	}
	refused := w.interact(w.fake.Submission("U1", views[0], map[string]string{"f/approved": "yes", "f/count": "2.5", "f/env": "prod"}))
	var errs struct {
		Errors map[string]string `json:"errors"`
	}
	_ = json.Unmarshal([]byte(refused), &errs)
	if diff := cmp.Diff(map[string]string{"f/count": `"2.5" is not a whole number`}, errs.Errors); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if body := w.interact(w.fake.Submission("U1", views[0], map[string]string{"f/approved": "yes", "f/count": "3", "f/env": "prod"})); body != "" {
		t.Errorf("a good form is answered %q", body)
	}
	select {
	case <-doors.answered:
	case <-time.After(10 * time.Second):
		t.Fatalf("the form was not given to the engine; told %+v", w.fake.Ephemerals(""))
	}
	want := engine.AnswerRequest{RunID: run.ID, InteractionID: ix.ID, Fields: map[string]any{"approved": "yes", "count": "3", "env": "prod"}, By: "ana", Via: "slack"}
	if diff := cmp.Diff(want, doors.got()[0]); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
}
