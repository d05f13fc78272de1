package api_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// fixture is a real store with one run holding one async question.
type fixture struct {
	db     *store.DB
	engine *engine.Engine
	client *api.Client
	run    *engine.Run
	ix     *engine.Interaction
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	now := time.Now()
	run := &engine.Run{ID: "r-api", Workflow: "w", Status: engine.StatusRunning, CreatedAt: now, UpdatedAt: now}
	if err := db.CreateRun(ctx, run, nil); err != nil {
		t.Fatal(err)
	}
	run, err = db.Acquire(ctx, run.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	ix, err := db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "draft", Questions: map[string]any{engine.QuestionKey: "Which licence?"}})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(engine.Options{Store: db})
	srv := httptest.NewServer(api.NewServer(e, db, api.Options{}).Handler())
	t.Cleanup(srv.Close)
	return &fixture{db: db, engine: e, client: api.NewClient(srv.URL, srv.Client()), run: run, ix: ix}
}

func TestAnswerThroughAPI(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pending, err := f.client.Pending(ctx, f.run.ID)
	if err != nil || len(pending) != 1 || pending[0].ID != "r-api_draft_async_1" {
		t.Fatalf("pending = %v, %v", pending, err)
	}
	res, err := f.client.Answer(ctx, engine.AnswerRequest{RunID: f.run.ID, InteractionID: f.ix.ID, Text: "MIT", By: "ana"})
	if err != nil || !res.Queued || res.InteractionID != f.ix.ID {
		t.Fatalf("answer = %+v, %v", res, err)
	}
	pending, _ = f.client.Pending(ctx, f.run.ID)
	if len(pending) != 0 {
		t.Errorf("answered question still pending: %v", pending)
	}
	ix, _ := f.db.Interaction(ctx, f.run.ID, f.ix.ID)
	if ix.AnsweredBy != "ana" || ix.Via != "api" || ix.Answer() != "MIT" {
		t.Errorf("stored interaction = %+v", ix)
	}
}

func TestAPIErrors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tests := []struct {
		name       string
		req        engine.AnswerRequest
		wantStatus int
		wantErr    error
		wantText   string
	}{
		{"unknown run", engine.AnswerRequest{RunID: "nope", InteractionID: f.ix.ID, Text: "x"}, 404, engine.ErrNotFound, "not found"},
		{"unknown question", engine.AnswerRequest{RunID: f.run.ID, InteractionID: "r-api_draft_async_9", Text: "x"}, 404, engine.ErrNotFound, "not found"},
		{"empty answer", engine.AnswerRequest{RunID: f.run.ID, InteractionID: f.ix.ID, Text: "  "}, 400, engine.ErrEmptyAnswer, "answer text is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.client.Answer(ctx, tc.req)
			var apiErr *api.Error
			if !errors.As(err, &apiErr) || apiErr.Status != tc.wantStatus || !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("err = %v (%+v), want %d %v containing %q", err, apiErr, tc.wantStatus, tc.wantErr, tc.wantText)
			}
		})
	}
	// The question is still pending after the refusals; then a double answer conflicts.
	if _, err := f.client.Answer(ctx, engine.AnswerRequest{RunID: f.run.ID, InteractionID: f.ix.ID, Text: "MIT", By: "ana"}); err != nil {
		t.Fatal(err)
	}
	_, err := f.client.Answer(ctx, engine.AnswerRequest{RunID: f.run.ID, InteractionID: f.ix.ID, Text: "GPL", By: "bo"})
	if !errors.Is(err, engine.ErrAlreadyAnswered) || !strings.Contains(err.Error(), "ana") {
		t.Errorf("double answer: err = %v, want a conflict naming ana", err)
	}
	if _, err := f.client.Run(ctx, "missing"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("unknown run: err = %v", err)
	}
}

func TestRunsAndEvents(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	runs, err := f.client.Runs(ctx, engine.RunFilter{})
	if err != nil || len(runs) != 1 || runs[0].ID != f.run.ID {
		t.Fatalf("runs = %v, %v", runs, err)
	}
	evs, err := f.client.Events(ctx, f.run.ID, 0, 100)
	if err != nil || len(evs) != 1 || evs[0].Type != engine.EventHumanInputRequested || evs[0].Data["async"] != true {
		t.Fatalf("events = %+v, %v", evs, err)
	}
	cancelled, err := f.client.Cancel(ctx, f.run.ID)
	if err != nil || cancelled {
		t.Errorf("cancel of a run not executing here = %v, %v", cancelled, err)
	}
}
