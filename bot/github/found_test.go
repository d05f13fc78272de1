package github

import (
	"context"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/engine"
)

// A question comment GitHub wrote although the relay did not record it (a
// 502 after the write, a crash before RecordPost) is found again by its
// marker; if the question was answered meanwhile, the comment is edited to
// say so rather than left asking for an answer.
func TestFoundQuestionCommentIsBroughtUpToDate(t *testing.T) {
	world := newWorld(t)
	db, fake := world.db, world.fake
	ctx := context.Background()
	run := createPRRun(t, db, "q-1")
	ix, err := db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, NodeID: "draft", Questions: map[string]any{engine.QuestionKey: "Which licence?"}})
	if err != nil {
		t.Fatal(err)
	}
	relay := world.relay(t, world.commenter())
	// The first attempt: numbered, written on GitHub, not recorded.
	if _, err := db.ShortID(ctx, PRScope("acme/app", 7), run.ID, ix.ID); err != nil {
		t.Fatal(err)
	}
	v, err := relay.read(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := world.commenter().Post(ctx, 42, "acme", "app", 7, questionKey(ix.ID), renderQuestion(v, ix)); err != nil {
		t.Fatal(err)
	}
	// Someone answers it (they see the comment, or answer on Slack).
	if _, err := db.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: ix.ID, Text: "MIT", By: "ana", Via: "slack"}); err != nil {
		t.Fatal(err)
	}
	relay.Drain(ctx)
	relay.Drain(ctx)
	q := fake.BotComments(7, "**Question Q1**")
	if len(q) != 1 {
		t.Fatalf("%d question comments", len(q))
	}
	if !strings.Contains(q[0].Body, "Answered by") {
		t.Errorf("the question comment still asks for an answer:\n%s", q[0].Body)
	}
}
