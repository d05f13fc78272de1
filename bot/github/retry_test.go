package github

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// A blocking (form) answer whose 👍 failed after AnswerPause stored it is
// handled again by the worker: the retry takes it again (👍), instead of
// telling the person who answered that their answer was not used.
func TestBlockingAnswerRetriedIsTaken(t *testing.T) {
	h, cs, runs := newHandler(t, handlerConfig)
	// What AnswerPause left in the store on the first attempt.
	for _, ix := range runs.questions["r1"] {
		if ix.ID == "r1_approve" {
			ix.Answers = map[string]any{"approved": true, "reason": "ok"}
			ix.AnsweredAt, ix.AnsweredBy, ix.Via = time.Now(), "ana", "github"
		}
	}
	d := commentDelivery(t, "d1", "ana", "/iterion answer Q3 approved: yes\nreason: ok")
	if err := h.Handle(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	last := cs.comments[len(cs.comments)-1].GetBody()
	if strings.Contains(last, "was not used") || !strings.Contains(last, "answer to `Q3` recorded.") {
		t.Errorf("the retried delivery denies the answer it recorded:\n%s", last)
	}
}

// racingRuns answers an interaction as pending on its first read, and as
// answered (by the answer the store already holds) afterwards: the same
// comment handled twice at once, by the worker and by the start-up
// reconciliation.
type racingRuns struct {
	*fakeRuns
	reads int
}

func (r *racingRuns) Interaction(ctx context.Context, runID, id string) (*engine.Interaction, error) {
	ix, err := r.fakeRuns.Interaction(ctx, runID, id)
	if err != nil {
		return nil, err
	}
	r.reads++
	if r.reads == 1 {
		return ix, nil
	}
	answered := *ix
	answered.Answers = map[string]any{engine.QuestionKey: "MIT"}
	answered.AnsweredAt, answered.AnsweredBy, answered.Via = time.Now(), "ana", "github"
	return &answered, nil
}

// Lost the race to store the answer to the same answer from the same
// person: taken (👍), not "already answered".
func TestSameAnswerRaceIsTaken(t *testing.T) {
	h, cs, runs := newHandler(t, handlerConfig)
	o := h.options()
	o.Runs = &racingRuns{fakeRuns: runs}
	h = NewHandler(o)
	runs.answers = []engine.AnswerRequest{{RunID: "r1", InteractionID: "r1_ask_async_1", Text: "MIT", By: "ana", Via: "github"}}
	if err := h.Handle(context.Background(), commentDelivery(t, "d1", "ana", "/iterion answer Q1 MIT")); err != nil {
		t.Fatal(err)
	}
	if got := cs.comments[0].GetBody(); !strings.Contains(got, "answer to `Q1` recorded.") {
		t.Errorf("reply = %q, want the answer taken", got)
	}
	if !slices.Contains(cs.reactions, "1001:+1") {
		t.Errorf("reactions %v, want 👍", cs.reactions)
	}
}
