package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

type ctxKey string

// gatedStore holds Stop's first lease of the run (ctx tagged "stop") until
// released, and runs a hook when Resume reads the checkpoint.
type gatedStore struct {
	*store.DB
	once         sync.Once
	stopRead     chan struct{} // closed once Stop has leased the run
	releaseStop  chan struct{}
	onCheckpoint func()
}

func (s *gatedStore) Acquire(ctx context.Context, id, owner string) (*engine.Run, error) {
	r, err := s.DB.Acquire(ctx, id, owner)
	if ctx.Value(ctxKey("stop")) != nil {
		s.once.Do(func() {
			close(s.stopRead)
			<-s.releaseStop
		})
	}
	return r, err
}

func (s *gatedStore) Checkpoint(ctx context.Context, id string) ([]byte, error) {
	if f := s.onCheckpoint; f != nil {
		s.onCheckpoint = nil
		f()
	}
	return s.DB.Checkpoint(ctx, id)
}

const pauseThenCompute = "human approve:\n  instructions: \"ok?\"\ncompute c:\n  expr:\n    x: \"1\"\nworkflow w:\n  entry: approve\n  approve -> c\n  c -> done\n"

// Stop leased the paused run before Resume registered it and commits while
// Resume reads the checkpoint: when Stop says "stopped" (and queues the
// cancelled outbox row), the run must not go on and finish.
func TestStopDuringResumeIsKept(t *testing.T) {
	w := mustCompile(t, pauseThenCompute)
	ctx := context.Background()
	db := newStore(t)
	gs := &gatedStore{DB: db, stopRead: make(chan struct{}), releaseStop: make(chan struct{})}
	e := newEngine(t, gs, nil)
	run, err := e.Start(ctx, engine.StartRequest{Workflow: w, Channels: []string{"github"}, WorkDir: t.TempDir()})
	if err != nil || run.Status != engine.StatusPausedWaitingHuman {
		t.Fatalf("start: %v %+v", err, run)
	}
	type res struct {
		ok  bool
		err error
	}
	stopc := make(chan res, 1)
	go func() {
		ok, err := e.Stop(context.WithValue(ctx, ctxKey("stop"), true), run.ID, "cancelled by a maintainer")
		stopc <- res{ok, err}
	}()
	<-gs.stopRead // Stop found nothing executing and leased the run paused
	var stop res
	gs.onCheckpoint = func() { // Resume has registered and re-read the run
		close(gs.releaseStop)
		stop = <-stopc
	}
	got, err := e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: run.ID, WorkDir: t.TempDir(), Answers: map[string]string{}, Expect: engine.StatusPausedWaitingHuman})
	if !stop.ok || stop.err != nil {
		t.Fatalf("Stop = %v, %v", stop.ok, stop.err)
	}
	if err == nil && got.Status == engine.StatusFinished {
		t.Fatalf("Stop reported the run stopped, but it went on and finished")
	}
}

// Stop lands after Resume stored the answers, before the run executes: once
// Resume returns, the run is no longer registered as executing (a later
// Resume would be refused, a Cancel would claim a run nothing executes).
func TestResumeStoppedEarlyUnregisters(t *testing.T) {
	w := mustCompile(t, pauseThenCompute)
	ctx := context.Background()
	db := newStore(t)
	gs := &gatedStore{DB: db, stopRead: make(chan struct{}), releaseStop: make(chan struct{})}
	e := newEngine(t, gs, nil)
	run, err := e.Start(ctx, engine.StartRequest{Workflow: w, Channels: []string{"github"}, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	stopc := make(chan bool, 1)
	go func() {
		ok, _ := e.Stop(context.WithValue(ctx, ctxKey("stop"), true), run.ID, "x")
		stopc <- ok
	}()
	<-gs.stopRead
	_, _ = e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: run.ID, WorkDir: t.TempDir(), Answers: map[string]string{},
		Recorded: func() { close(gs.releaseStop); <-stopc }})
	// Resume has returned: nothing executes the run any more.
	if e.Cancel(run.ID) {
		t.Errorf("Cancel reports a run executing that nothing executes (a later Resume is refused: \"executing in this process\")")
	}
}

type acquireHookStore struct {
	*store.DB
	afterAcquire func()
}

func (s *acquireHookStore) Acquire(ctx context.Context, id, owner string) (*engine.Run, error) {
	r, err := s.DB.Acquire(ctx, id, owner)
	if f := s.afterAcquire; f != nil {
		s.afterAcquire = nil
		f()
	}
	return r, err
}

// A Stop right after a starting run takes its lease (a supersede meeting
// a run just launched) is kept: the run ends cancelled.
func TestStopWhileStartingIsKept(t *testing.T) {
	w := mustCompile(t, "compute c:\n  expr:\n    x: \"1\"\nworkflow w:\n  entry: c\n  c -> done\n")
	ctx := context.Background()
	hs := &acquireHookStore{DB: newStore(t)}
	e := newEngine(t, hs, nil)
	var stopped bool
	var stopErr error
	hs.afterAcquire = func() { stopped, stopErr = e.Stop(ctx, "r-stop", "superseded") }
	run, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "r-stop", Channels: []string{"github"}, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if stopped && stopErr == nil && run.Status != engine.StatusCancelled {
		t.Fatalf("Stop reported success, but the run ended %s", run.Status)
	}
}

// Stop and an answer's Resume racing with no hook: whenever Stop says it
// stopped the run, the run does not finish, and nothing stays registered.
func TestStopResumeRaces(t *testing.T) {
	w := mustCompile(t, pauseThenCompute)
	ctx := context.Background()
	db := newStore(t)
	e := newEngine(t, db, nil)
	const races = 1000
	lost, leaked := 0, 0
	for range races {
		run, err := e.Start(ctx, engine.StartRequest{Workflow: w, Channels: []string{"github"}, WorkDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var stopped bool
		wg.Go(func() { stopped, _ = e.Stop(ctx, run.ID, "x") })
		wg.Go(func() {
			_, _ = e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: run.ID, WorkDir: t.TempDir(), Answers: map[string]string{}, Expect: engine.StatusPausedWaitingHuman})
		})
		wg.Wait()
		final, _ := db.Run(ctx, run.ID)
		if stopped && final.Status != engine.StatusCancelled {
			lost++
		}
		if e.Cancel(run.ID) {
			leaked++
		}
	}
	if lost+leaked > 0 {
		t.Errorf("of %d races: %d stops acknowledged but the run did not end cancelled, %d runs left registered as executing", races, lost, leaked)
	}
}

// A stop acknowledged while the run executed is kept across a crash: the
// recovery that resumes the interrupted run ends it cancelled, with the
// stop's reason, instead of running it on.
func TestStopSurvivesCrash(t *testing.T) {
	w := mustCompile(t, "compute c:\n  expr:\n    x: \"1\"\nworkflow w:\n  entry: c\n  c -> done\n")
	ctx := context.Background()
	db := newStore(t)
	// The run as a crashed owner left it: running, a stop recorded.
	if err := db.CreateRun(ctx, &engine.Run{ID: "r-crash", Workflow: "w", WorkflowHash: w.Hash, Status: engine.StatusRunning}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RequestStop(ctx, "r-crash", "cancelled by ana"); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, db, nil)
	got, err := e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: "r-crash", WorkDir: t.TempDir(), Expect: engine.StatusRunning})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != engine.StatusCancelled || got.Error != "cancelled by ana" || got.StopRequested != "" {
		t.Errorf("recovered run: status %s, error %q, stop %q; want cancelled by the recorded stop", got.Status, got.Error, got.StopRequested)
	}
}
