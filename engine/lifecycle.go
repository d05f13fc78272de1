package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/iterion-bot/iterion/dsl"
)

// The engine owns a run's life for every channel: Launch starts it, Answer
// answers its questions and resumes it when an answer releases it, Stop
// ends it, and Recover continues what a previous process left. Runs the
// engine executes by itself (launched, released, recovered) go in its run
// group, which Wait drains; no front end keeps a set of runs starting or
// resuming, polls, or retries a resume.

// errExecuting refuses a second executor of a run in this process.
var errExecuting = errors.New("run is executing in this process")

// runGroup is the runs the engine executes in the background.
type runGroup struct {
	wg sync.WaitGroup
}

// Launch validates a run (its id, vars and every backend and sandbox its
// nodes can route to), stores its record durably and returns it at once;
// the run executes in the engine's run group. Refusals are typed:
// *InvalidRunIDError, *VarsError, *PresetError, *PreflightError,
// ErrRunExists.
func (e *Engine) Launch(ctx context.Context, req StartRequest) (*Run, error) {
	run, ck, done, err := e.create(ctx, req, context.Background())
	if err != nil {
		return nil, err
	}
	launched := *run
	e.group.wg.Go(func() {
		defer done.release()
		if _, err := e.drive(done.ctx, req.Workflow, run, ck, run.WorkDir); err != nil {
			e.log.Error("a launched run stopped on an error", "run", run.ID, "err", err)
		}
	})
	return &launched, nil
}

// Start is Launch executing the run in the caller's goroutine: it returns
// the run as it stopped (finished, failed, paused or, when ctx is
// cancelled, cancelled); an error only when the run could not be created
// or its state not stored.
func (e *Engine) Start(ctx context.Context, req StartRequest) (*Run, error) {
	run, ck, done, err := e.create(ctx, req, ctx)
	if err != nil {
		return nil, err
	}
	defer done.release()
	return e.drive(done.ctx, req.Workflow, run, ck, run.WorkDir)
}

// registration is a run registered as executing here: its context, and
// the release its executor calls when it returns.
type registration struct {
	ctx     context.Context
	release func()
}

// create validates req, registers the run as executing under parent and
// stores it.
func (e *Engine) create(ctx context.Context, req StartRequest, parent context.Context) (*Run, *checkpoint, registration, error) {
	w := req.Workflow
	id := req.RunID
	if id == "" {
		id = NewRunID(e.now())
	} else if !ValidRunID(id) {
		return nil, nil, registration{}, &InvalidRunIDError{ID: id}
	}
	vars, err := resolveVars(w, req.Vars, req.Preset)
	if err != nil {
		return nil, nil, registration{}, err
	}
	if err := e.Preflight(w); err != nil {
		return nil, nil, registration{}, err
	}
	now := e.now()
	run := &Run{
		ID: id, Workflow: w.Name, WorkflowHash: w.Hash, File: req.File, Status: StatusRunning, WorkDir: req.WorkDir,
		Vars: vars, Trigger: req.Trigger, Channels: req.Channels, CreatedAt: now, UpdatedAt: now,
	}
	// Made only once the run is known valid: a refused launch leaves no
	// workspace behind.
	switch {
	case run.WorkDir != "":
	case e.workDir != nil:
		if run.WorkDir, err = e.workDir(run); err != nil {
			return nil, nil, registration{}, err
		}
	default:
		if run.WorkDir, err = os.Getwd(); err != nil {
			return nil, nil, registration{}, fmt.Errorf("finding the work directory: %w", err)
		}
	}
	started := Event{Type: EventRunStarted, Time: now, Data: map[string]any{"workflow": w.Name, "vars": vars}}
	if sw, ok := e.sandbox.(SandboxWarner); ok {
		if warning := sw.SandboxWarning(); warning != "" {
			started.Data["sandbox_warning"] = warning
		}
	}
	rctx, release, err := e.register(parent, id)
	if errors.Is(err, errExecuting) {
		return nil, nil, registration{}, fmt.Errorf("run %s: %w", id, ErrRunExists)
	}
	if err != nil {
		return nil, nil, registration{}, err
	}
	if err := e.store.CreateRun(context.WithoutCancel(ctx), run, []Event{started}); err != nil {
		release()
		if errors.Is(err, ErrRunExists) {
			return nil, nil, registration{}, fmt.Errorf("run %s: %w", id, err)
		}
		return nil, nil, registration{}, fmt.Errorf("creating run %s: %w", id, err)
	}
	return run, newCheckpoint(w), registration{ctx: rctx, release: release}, nil
}

// Wait waits until the runs of the engine's run group have stopped
// (finished, failed, paused or cancelled), or ctx ends.
func (e *Engine) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { e.group.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Recover continues, in the run group, every run a previous process left
// running (interrupted: its node runs again from the checkpoint), and arms
// the stored deadlines of paused runs. It returns how many runs it
// continued; a run that cannot continue is logged and left as it is.
func (e *Engine) Recover(ctx context.Context) (int, error) {
	interrupted, err := e.store.Runs(ctx, RunFilter{Status: StatusRunning})
	if err != nil {
		return 0, fmt.Errorf("listing interrupted runs: %w", err)
	}
	n := 0
	for _, r := range interrupted {
		w, err := e.workflowOf(ctx, r)
		if err != nil {
			e.log.Error("an interrupted run cannot continue", "run", r.ID, "err", err)
			continue
		}
		e.log.Info("continuing an interrupted run", "run", r.ID)
		n++
		e.group.wg.Go(func() {
			if _, err := e.Resume(context.Background(), ResumeRequest{Workflow: w, RunID: r.ID, Force: true, Via: "recovery", Expect: StatusRunning}); err != nil && !errors.Is(err, errExecuting) {
				e.log.Error("continuing an interrupted run failed", "run", r.ID, "err", err)
			}
		})
	}
	// The questions' reminders, escalations and expiries: those due
	// while no process owned the store fire now.
	if _, ok, err := e.store.NextTimer(ctx); err != nil {
		return n, err
	} else if ok {
		e.wakeFollowUps()
	}
	paused, err := e.store.Runs(ctx, RunFilter{Status: StatusPausedWaitingHuman})
	if err != nil {
		return n, fmt.Errorf("listing paused runs: %w", err)
	}
	for _, r := range paused {
		raw, err := e.store.Checkpoint(ctx, r.ID)
		if err != nil || raw == nil {
			continue
		}
		ck, err := decodeCheckpoint(raw)
		if err != nil || ck.Pause == nil {
			continue
		}
		if !ck.Pause.Deadline.IsZero() {
			e.arm(r.ID, ck.Pause.InteractionID, ck.Pause.Deadline)
		}
		// Answered while no process owned the store (or just before a
		// crash): released now.
		e.releaseIfReady(r.ID)
	}
	return n, nil
}

// workflowOf loads the workflow a stored run executes, with Options.Workflow
// or, by default, by compiling the run's file.
func (e *Engine) workflowOf(ctx context.Context, run *Run) (*dsl.Workflow, error) {
	if e.loadWorkflow != nil {
		return e.loadWorkflow(ctx, run)
	}
	return LoadWorkflowFile(run.File, dsl.Options{})
}

// LoadWorkflowFile reads and compiles a workflow file with opts; errors
// name the file and list its diagnostics.
func LoadWorkflowFile(path string, opts dsl.Options) (*dsl.Workflow, error) {
	if path == "" {
		return nil, errors.New("the run records no workflow file")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the workflow: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the workflow: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("workflow %s is not a regular file", path)
	}
	if st.Size() > dsl.MaxFileSize {
		return nil, fmt.Errorf("workflow %s is %d bytes, more than the %d a workflow may have", path, st.Size(), dsl.MaxFileSize)
	}
	src := make([]byte, st.Size())
	if _, err := f.ReadAt(src, 0); err != nil {
		return nil, fmt.Errorf("reading the workflow: %w", err)
	}
	w, ds := opts.CompileSource(path, src)
	if ds.HasErrors() {
		return nil, fmt.Errorf("workflow %s has errors:\n%s", path, dsl.RenderString(ds, map[string][]byte{path: src}))
	}
	return w, nil
}

// releaseIfReady resumes, in the run group, a run paused on an await (the
// await_answers tool, or a gate parked durably) whose questions are all
// answered, and reports whether it did (or another answer already did).
func (e *Engine) releaseIfReady(runID string) bool {
	ctx := context.Background()
	ready, err := e.AwaitReady(ctx, runID)
	if err != nil || !ready {
		return false
	}
	run, err := e.store.Run(ctx, runID)
	if err != nil {
		return false
	}
	w, err := e.workflowOf(ctx, run)
	if err != nil {
		e.log.Error("a released run cannot resume", "run", runID, "err", err)
		return false
	}
	// The executor that paused the run may not have exited yet, and
	// another answer may be resuming it: wait for whoever executes it, then
	// resume it if it is still paused (a resume finds the answers itself,
	// so a second one is refused harmlessly).
	e.group.wg.Go(func() {
		for {
			if err := e.waitIdle(ctx, runID); err != nil {
				return
			}
			_, err := e.Resume(ctx, ResumeRequest{Workflow: w, RunID: runID, Force: true, Via: "answer", Expect: StatusPausedWaitingHuman})
			var unanswered *UnansweredError
			switch {
			case errors.Is(err, errExecuting):
				continue // registered meanwhile: wait for it too
			case err == nil, errors.Is(err, ErrStatusChanged), errors.As(err, &unanswered):
			default:
				e.log.Error("resuming a released run failed", "run", runID, "err", err)
			}
			return
		}
	})
	return true
}

func (e *Engine) isExecuting(runID string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.running[runID]
	return ok
}

// runLocks serializes the answers of one run's blocking questions, so that
// of two answers given together one is taken and the other is told who
// answered first. Entries live while someone holds or waits for them.
type runLocks struct {
	mu    sync.Mutex
	locks map[string]*runLock
}

type runLock struct {
	mu    sync.Mutex
	users int
}

func (l *runLocks) lock(runID string) (unlock func()) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*runLock{}
	}
	rl := l.locks[runID]
	if rl == nil {
		rl = &runLock{}
		l.locks[runID] = rl
	}
	rl.users++
	l.mu.Unlock()
	rl.mu.Lock()
	return func() {
		rl.mu.Unlock()
		l.mu.Lock()
		if rl.users--; rl.users == 0 {
			delete(l.locks, runID)
		}
		l.mu.Unlock()
	}
}

// timers are the armed deadlines of paused runs, by run id.
type timers struct {
	mu sync.Mutex
	m  map[string]*time.Timer
}

// arm fails run runID when it is still paused on interaction ixID at at,
// with the questions still unanswered (ADR-081: every wait is bounded).
// Arming a run again replaces its timer.
func (e *Engine) arm(runID, ixID string, at time.Time) {
	e.timers.mu.Lock()
	defer e.timers.mu.Unlock()
	if e.timers.m == nil {
		e.timers.m = map[string]*time.Timer{}
	}
	if t := e.timers.m[runID]; t != nil {
		t.Stop()
	}
	e.timers.m[runID] = time.AfterFunc(max(at.Sub(e.now()), 0), func() {
		e.group.wg.Go(func() {
			e.timers.mu.Lock()
			delete(e.timers.m, runID)
			e.timers.mu.Unlock()
			if err := e.expire(context.Background(), runID, ixID); err != nil {
				e.log.Error("ending a paused run at its deadline failed", "run", runID, "err", err)
			}
		})
	})
}

// Close stops the engine's timers, the questions' with them. Runs still
// executing go on; Wait for them first.
func (e *Engine) Close() {
	e.stopFollowUps()
	e.timers.mu.Lock()
	defer e.timers.mu.Unlock()
	for id, t := range e.timers.m {
		t.Stop()
		delete(e.timers.m, id)
	}
}

// expire ends a run whose await deadline passed while it was paused: it
// fails resumably (TIMEOUT) naming the questions nobody answered. A run
// no longer paused on ixID, or whose questions were all answered
// meanwhile (it is resumed instead), is left alone.
func (e *Engine) expire(ctx context.Context, runID, ixID string) error {
	unlock := e.answers.lock(runID)
	defer unlock()
	if e.isExecuting(runID) {
		// Resuming (its answers came): the run is no longer paused. (The
		// executor that paused it arms the timer before it exits, with a
		// deadline its own node timeout has not reached.)
		return nil
	}
	run, err := e.store.Run(ctx, runID)
	if err != nil || run.Status != StatusPausedWaitingHuman {
		return err
	}
	raw, err := e.store.Checkpoint(ctx, runID)
	if err != nil || raw == nil {
		return err
	}
	ck, err := decodeCheckpoint(raw)
	if err != nil || ck.Pause == nil || ck.Pause.InteractionID != ixID {
		return err
	}
	pending, err := e.store.Pending(ctx, runID, ck.Pause.scope())
	if err != nil {
		return err
	}
	if len(pending) == 0 {
		e.releaseIfReady(runID)
		return nil
	}
	var ids []string
	for _, q := range pending {
		ids = append(ids, q.ID)
	}
	run, err = e.store.Acquire(ctx, runID, e.owner)
	if err != nil {
		return err
	}
	if run.Status != StatusPausedWaitingHuman {
		return nil
	}
	msg := fmt.Sprintf("node %s: waited until its deadline with %d unanswered question(s): %s", ck.Pause.Node, len(ids), strings.Join(ids, ", "))
	c := Change{
		RunID: run.ID, Generation: run.Generation, Status: StatusFailedResumable, FailureCode: CodeTimeout, Error: msg,
		Events: []Event{{Type: EventRunFailed, NodeID: ck.Pause.Node, Time: e.now(), Data: map[string]any{"failure_code": CodeTimeout, "error": msg, "unanswered": ids}}},
		Sync:   true,
	}
	if len(run.Channels) > 0 {
		c.Outbox = []OutboxRow{{Kind: OutboxRunFailed, RunID: run.ID, Channels: run.Channels,
			Payload: mustJSON(map[string]any{"status": string(StatusFailedResumable), "failure_code": CodeTimeout, "error": msg})}}
	}
	if err := e.store.Commit(ctx, c); err != nil {
		if errors.Is(err, ErrStopRequested) {
			_, err = e.endIfStopped(ctx, runID)
		}
		return err
	}
	e.log.Info("run ended", "run", runID, "status", StatusFailedResumable, "code", CodeTimeout)
	e.notify(Event{Type: EventRunFailed, RunID: runID, NodeID: ck.Pause.Node, Time: e.now(), Data: map[string]any{"failure_code": CodeTimeout, "error": msg}})
	return nil
}

// NotResumableError refuses to continue a run that did not stop
// resumably by itself: a paused run waits for its answer (Answer
// continues it), a running one runs, and a finished or failed one is over.
type NotResumableError struct {
	RunID  string
	Status Status
}

func (e *NotResumableError) Error() string {
	switch e.Status {
	case StatusPausedWaitingHuman:
		return fmt.Sprintf("run %s is paused waiting for an answer: answer its question to continue it", e.RunID)
	case StatusRunning:
		return fmt.Sprintf("run %s is running", e.RunID)
	}
	return fmt.Sprintf("run %s is %s and cannot be resumed", e.RunID, e.Status)
}

// Continue resumes a cancelled or failed_resumable run in the engine's run
// group, as Launch starts one: it returns once the run is marked running
// again, and the run executes in the background. by and via record who
// asked, through which channel, on the run_resumed event. Refusals are
// typed: ErrNotFound, *NotResumableError, *WorkflowChangedError (the
// workflow the run would load is not the one it started with), and
// ErrStatusChanged when the run changed meanwhile (a Stop, another
// resume).
func (e *Engine) Continue(ctx context.Context, runID, by, via string) (*Run, error) {
	run, err := e.store.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	if run.Status != StatusCancelled && run.Status != StatusFailedResumable {
		return nil, &NotResumableError{RunID: run.ID, Status: run.Status}
	}
	w, err := e.workflowOf(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("loading the workflow of run %s: %w", run.ID, err)
	}
	if w.Hash != run.WorkflowHash {
		return nil, &WorkflowChangedError{RunID: run.ID, File: run.File}
	}
	recorded := make(chan struct{})
	errc := make(chan error, 1)
	e.group.wg.Go(func() {
		_, err := e.Resume(context.Background(), ResumeRequest{Workflow: w, RunID: run.ID, By: by, Via: via,
			Expect: run.Status, Recorded: func() { close(recorded) }})
		errc <- err
	})
	select {
	case <-recorded:
	case err := <-errc:
		select {
		case <-recorded: // resumed, and already stopped again
		default:
			if err == nil || errors.Is(err, errExecuting) {
				err = fmt.Errorf("run %s: %w", run.ID, ErrStatusChanged)
			}
			return nil, err
		}
	}
	return e.store.Run(ctx, run.ID)
}
