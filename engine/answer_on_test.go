package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/engine"
)

// A node's answer_on and answerers go with its questions, async and
// blocking, and the one door refuses an answer from another channel, or
// from a GitHub account not among the answerers, before anything is
// recorded; the question stays open for a proper answer.
func TestAnswerOnAndAnswerers(t *testing.T) {
	db := newStore(t)
	var finalUser string
	posted := make(chan []string, 1)
	e := newEngine(t, db, asyncBackends(t, &finalUser, posted))
	src := strings.Replace(strings.Replace(asyncWorkflow, "%s", "30m", 1), "  interaction: async\n",
		"  interaction: async\n  answer_on: [github, cli]\n  answerers: [ana]\n", 1)
	w := mustCompile(t, src)
	ctx := context.Background()
	const runID = "answer-on"
	done := make(chan *engine.Run, 1)
	go func() {
		run, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: runID, WorkDir: t.TempDir()})
		if err != nil {
			t.Error(err)
		}
		done <- run
	}()
	var ids []string
	select {
	case ids = <-posted:
	case run := <-done:
		t.Fatalf("run stopped before the questions: %+v", run)
	}
	ix, err := db.Interaction(ctx, runID, ids[0])
	if err != nil || !slices.Equal(ix.AnswerOn, []string{"github", "cli"}) || !slices.Equal(ix.Answerers, []string{"ana"}) {
		t.Fatalf("stored question: %+v, %v", ix, err)
	}

	var offChannel *engine.ChannelRefusedError
	_, err = e.Answer(ctx, engine.AnswerRequest{RunID: runID, InteractionID: ids[0], Text: "GPL", By: "ana", Via: "slack"})
	if !errors.As(err, &offChannel) || offChannel.Via != "slack" || !strings.Contains(err.Error(), "only via github, cli") {
		t.Errorf("an answer from Slack: %v; want ChannelRefusedError", err)
	}
	var notAnswerer *engine.AnswererRefusedError
	_, err = e.Answer(ctx, engine.AnswerRequest{RunID: runID, InteractionID: ids[0], Text: "GPL", By: "bo", Via: "github"})
	if !errors.As(err, &notAnswerer) || notAnswerer.By != "bo" {
		t.Errorf("an answer from bo on GitHub: %v; want AnswererRefusedError", err)
	}
	if ix, _ := db.Interaction(ctx, runID, ids[0]); !ix.Pending() {
		t.Fatalf("a refused answer was recorded: %+v", ix)
	}
	// GitHub logins are case-insensitive; the CLI is the operator's, whom
	// answerers (GitHub accounts) do not bind.
	if _, err := e.Answer(ctx, engine.AnswerRequest{RunID: runID, InteractionID: ids[0], Text: "MIT", By: "Ana", Via: "github"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Answer(ctx, engine.AnswerRequest{RunID: runID, InteractionID: ids[1], Text: "1.26", By: "operator", Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	if run := <-done; run.Status != engine.StatusFinished {
		t.Fatalf("status = %s %s %s", run.Status, run.FailureCode, run.Error)
	}
	// Answered, a question tells a late answer from anywhere who was first.
	_, err = e.Answer(ctx, engine.AnswerRequest{RunID: runID, InteractionID: ids[0], Text: "GPL", By: "x", Via: "slack"})
	var already *engine.AlreadyAnsweredError
	if !errors.As(err, &already) || already.AnsweredBy != "Ana" {
		t.Errorf("a late answer from Slack: %v; want AlreadyAnsweredError", err)
	}
}

// A human node's form carries them too, and a refused channel leaves the
// run paused.
func TestAnswerOnHumanForm(t *testing.T) {
	src := "human approve:\n  instructions: \"ok?\"\n  answer_on: [slack]\n  answerers: [ana]\nworkflow w:\n  entry: approve\n  approve -> done\n"
	w := mustCompile(t, src)
	ctx := context.Background()
	db := newStore(t)
	e := newEngine(t, db, nil)
	run := start(t, e, w, nil)
	if run.Status != engine.StatusPausedWaitingHuman {
		t.Fatalf("status %s", run.Status)
	}
	id := engine.PauseInteractionID(run.ID, "approve", 0)
	ix, err := db.Interaction(ctx, run.ID, id)
	if err != nil || !slices.Equal(ix.AnswerOn, []string{"slack"}) || !slices.Equal(ix.Answerers, []string{"ana"}) {
		t.Fatalf("the form's question: %+v, %v", ix, err)
	}
	var offChannel *engine.ChannelRefusedError
	if _, err := e.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: id, Text: "yes", By: "ana", Via: "github"}); !errors.As(err, &offChannel) {
		t.Errorf("an answer on GitHub: %v; want ChannelRefusedError", err)
	}
	var notAnswerer *engine.AnswererRefusedError
	if _, err := e.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: id, Text: "yes", By: "bo", Via: "slack"}); !errors.As(err, &notAnswerer) {
		t.Errorf("bo's answer in Slack: %v; want AnswererRefusedError", err)
	}
	if got, _ := db.Run(ctx, run.ID); got.Status != engine.StatusPausedWaitingHuman {
		t.Errorf("after the refusals the run is %s", got.Status)
	}
}
