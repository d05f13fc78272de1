package github

import (
	"context"
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
	if strings.Contains(last, "was not used") {
		t.Errorf("the retried delivery denies the answer it recorded:\n%s", last)
	}
	_ = engine.KindBlocking
}
