package engine_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// lastSeq is the Seq of the run's last stored event.
func lastSeq(t *testing.T, db engine.Store, runID string) int64 {
	t.Helper()
	evs, err := db.Events(context.Background(), runID, 0, 0)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events of %s: %v, %v", runID, evs, err)
	}
	return evs[len(evs)-1].Seq
}

// waitInBackground starts WaitChange in a goroutine; its error arrives on
// the channel.
func waitInBackground(ctx context.Context, e *engine.Engine, runID string, after int64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- e.WaitChange(ctx, runID, after) }()
	return done
}

// returned is the error of the wait of done. An hour without it (of the
// bubble's time, which passes at once when all is blocked) fails the test:
// a watchdog, not a wait.
func returned(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Hour):
		t.Fatal("WaitChange did not return")
		return nil
	}
}

// blocked reports whether no wait of done has returned, once every
// goroutine of the bubble is blocked.
func blocked(done <-chan error) bool {
	synctest.Wait()
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// A wait for a paused run's next change blocks, whatever happens to other
// runs, until the run changes: an answer that resumes it, or a Stop. Every
// waiter wakes, and none is left behind.
func TestWaitChangeWakesAtTheRunsNextChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := mustCompile(t, formWorkflow)
		db := newStore(t)
		e, _ := lifecycleEngine(t, db, w, nil, nil)
		ctx := t.Context()
		for _, id := range []string{"answered", "stopped"} {
			if run, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: id, WorkDir: t.TempDir()}); err != nil || run.Status != engine.StatusPausedWaitingHuman {
				t.Fatalf("run %s = %+v, %v; want it paused on its form", id, run, err)
			}
		}
		after := lastSeq(t, db, "answered")
		var waits []<-chan error
		for range 5 {
			waits = append(waits, waitInBackground(ctx, e, "answered", after))
		}
		if !blocked(waits[0]) {
			t.Fatal("WaitChange returned for a paused run that did not change")
		}
		if got := e.WatchedRuns(); got != 1 {
			t.Errorf("%d runs watched, want 1", got)
		}

		// A change of another run leaves them waiting.
		stopWait := waitInBackground(ctx, e, "stopped", lastSeq(t, db, "stopped"))
		if ok, err := e.Stop(ctx, "stopped", "test"); err != nil || !ok {
			t.Fatalf("Stop = %v, %v", ok, err)
		}
		if err := returned(t, stopWait); err != nil {
			t.Errorf("the wait of the stopped run: %v", err)
		}
		if !blocked(waits[0]) {
			t.Fatal("a change of another run ended the wait")
		}

		if _, err := e.Answer(ctx, engine.AnswerRequest{RunID: "answered", InteractionID: "answered_approve", By: "alice", Via: "api",
			Fields: map[string]any{"approved": true, "reason": "ok", "risk": "low"}}); err != nil {
			t.Fatal(err)
		}
		for i, done := range waits {
			if err := returned(t, done); err != nil {
				t.Errorf("waiter %d: %v", i, err)
			}
		}
		if err := e.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if got := e.WatchedRuns(); got != 0 {
			t.Errorf("%d runs still watched after every wait returned", got)
		}
	})
}

// A run that already has events after the caller's, or that is over,
// answers at once; an unknown run is ErrNotFound; a wait that nothing ends
// ends with its context, and leaves nothing behind.
func TestWaitChangeAnswersAtOnceOrAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := mustCompile(t, formWorkflow)
		db := newStore(t)
		e, _ := lifecycleEngine(t, db, w, nil, nil)
		ctx := t.Context()
		if _, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "paused", WorkDir: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
		finished := start(t, e, mustCompile(t, "compute c:\n  expr:\n    x: \"1\"\nworkflow w:\n  entry: c\n  c -> done\n"), nil)
		if finished.Status != engine.StatusFinished {
			t.Fatalf("run = %s, want finished", finished.Status)
		}
		minute, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		began := time.Now()
		for _, tc := range []struct {
			name  string
			run   string
			after int64
		}{
			{"events after the caller's", "paused", 0},
			{"a run that is over", finished.ID, lastSeq(t, db, finished.ID)},
		} {
			if err := e.WaitChange(minute, tc.run, tc.after); err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		}
		if waited := time.Since(began); waited != 0 {
			t.Errorf("answered after %s, want at once", waited)
		}
		if err := e.WaitChange(minute, "nope", 0); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("unknown run: err = %v, want ErrNotFound", err)
		}
		if err := e.WaitChange(minute, "paused", lastSeq(t, db, "paused")); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a run that does not change: err = %v, want the context's deadline", err)
		}
		if waited := time.Since(began); waited != time.Minute {
			t.Errorf("the wait ended after %s, want its context's minute", waited)
		}
		if got := e.WatchedRuns(); got != 0 {
			t.Errorf("%d runs still watched", got)
		}
	})
}
