package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
)

const formWorkflow = `
schema decision:
  approved: bool
  reason: string
  risk: string

prompt ask:
  Approve the release?

human approve:
  instructions: ask
  output: decision

workflow w:
  entry: approve
  approve -> done when approved
  approve -> fail
`

// events collects a run's events as the engine hands them out, so tests
// wait on what happened instead of on time.
type events struct {
	mu   sync.Mutex
	seen map[string]chan struct{} // "run/type" → closed once seen
}

func newEvents() *events { return &events{seen: map[string]chan struct{}{}} }

func (ev *events) ch(runID, typ string) chan struct{} {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	key := runID + "/" + typ
	c := ev.seen[key]
	if c == nil {
		c = make(chan struct{})
		ev.seen[key] = c
	}
	return c
}

func (ev *events) on(e engine.Event) {
	c := ev.ch(e.RunID, e.Type)
	ev.mu.Lock()
	defer ev.mu.Unlock()
	select {
	case <-c:
	default:
		close(c)
	}
}

// wait blocks until the run has had an event of type typ.
func (ev *events) wait(t *testing.T, runID, typ string) {
	t.Helper()
	select {
	case <-ev.ch(runID, typ):
	case <-t.Context().Done():
		t.Fatalf("run %s: no %s event", runID, typ)
	}
}

// lifecycleEngine is an engine that resumes runs by itself, loading w for
// every stored run.
func lifecycleEngine(t *testing.T, db engine.Store, w *dsl.Workflow, backends map[string]engine.Backend, mod func(*engine.Options)) (*engine.Engine, *events) {
	t.Helper()
	ev := newEvents()
	opts := engine.Options{
		Store: db, Backends: backends, Poll: time.Hour, Sandbox: testSandbox(t), OnEvent: ev.on,
		Workflow: func(context.Context, *engine.Run) (*dsl.Workflow, error) { return w, nil },
	}
	if mod != nil {
		mod(&opts)
	}
	e := engine.New(opts)
	t.Cleanup(func() {
		e.Close()
		_ = e.Wait(context.Background())
	})
	return e, ev
}

func TestAnswerFormResumesTheRun(t *testing.T) {
	w := mustCompile(t, formWorkflow)
	db := newStore(t)
	e, ev := lifecycleEngine(t, db, w, nil, nil)
	ctx := t.Context()
	run, err := e.Launch(ctx, engine.StartRequest{Workflow: w, RunID: "form-1", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ev.wait(t, run.ID, engine.EventRunPaused)
	ix, err := db.Interaction(ctx, run.ID, run.ID+"_approve")
	if err != nil {
		t.Fatal(err)
	}
	wantFields := []engine.FormField{{Name: "approved", Type: "bool"}, {Name: "reason", Type: "string"}, {Name: "risk", Type: "string"}}
	if diff := cmp.Diff(wantFields, ix.Fields); diff != "" {
		t.Errorf("the form's fields (-want +got):\n%s", diff)
	}

	refusals := []struct {
		name string
		req  engine.AnswerRequest
		want string
	}{
		{"text and fields", engine.AnswerRequest{Text: "yes", Fields: map[string]any{"approved": true}}, "either an answer text or the form's fields"},
		{"text for a form", engine.AnswerRequest{Text: "yes"}, `missing answer for "approved" (bool)`},
		{"wrong types", engine.AnswerRequest{Fields: map[string]any{"approved": "maybe", "reason": 3.0, "risk": "low"}},
			`answer for "approved": "maybe" is not a yes/no answer (use true or false); answer for "reason": a number given, string wanted`},
		{"unknown field", engine.AnswerRequest{Fields: map[string]any{"approved": true, "reason": "r", "risk": "low", "colour": "red"}}, `"colour" is not a field of this form`},
	}
	for _, r := range refusals {
		r.req.RunID, r.req.InteractionID = run.ID, ix.ID
		if _, err := e.Answer(ctx, r.req); err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("%s: err = %v, want it to say %q", r.name, err, r.want)
		}
	}
	if got, _ := db.Run(ctx, run.ID); got.Status != engine.StatusPausedWaitingHuman {
		t.Fatalf("a refused answer moved the run to %s", got.Status)
	}

	res, err := e.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: ix.ID, By: "alice", Via: "api",
		Fields: map[string]any{"approved": true, "reason": "tests pass", "risk": "low"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Resumed {
		t.Error("the answer did not report the run resumed")
	}
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := db.Run(ctx, run.ID)
	if got.Status != engine.StatusFinished {
		t.Fatalf("status = %s %s %s, want finished", got.Status, got.FailureCode, got.Error)
	}
	ix, _ = db.Interaction(ctx, run.ID, ix.ID)
	if ix.AnsweredBy != "alice" || ix.Via != "api" || ix.Answers["approved"] != true {
		t.Errorf("answered interaction = by %q via %q answers %v", ix.AnsweredBy, ix.Via, ix.Answers)
	}
	_, err = e.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: ix.ID, Fields: map[string]any{"approved": false, "reason": "no", "risk": "high"}})
	var already *engine.AlreadyAnsweredError
	if !errors.As(err, &already) || already.AnsweredBy != "alice" || already.Via != "api" {
		t.Errorf("late answer: err = %v, want who answered first", err)
	}
}

// Two answers to one form given together: one is taken, the other learns
// who answered first, and the run resumes once.
func TestAnswerFormRace(t *testing.T) {
	w := mustCompile(t, formWorkflow)
	for i := range 20 {
		db := newStore(t)
		e, ev := lifecycleEngine(t, db, w, nil, nil)
		ctx := t.Context()
		run, err := e.Launch(ctx, engine.StartRequest{Workflow: w, RunID: "race", WorkDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		ev.wait(t, run.ID, engine.EventRunPaused)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for j, who := range []string{"alice", "bob"} {
			wg.Go(func() {
				_, errs[j] = e.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: run.ID + "_approve", By: who, Via: "github",
					Fields: map[string]any{"approved": "yes", "reason": who, "risk": "low"}})
			})
		}
		wg.Wait()
		if err := e.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		ok := 0
		for _, err := range errs {
			var already *engine.AlreadyAnsweredError
			switch {
			case err == nil:
				ok++
			case !errors.As(err, &already):
				t.Errorf("iteration %d: err = %v, want AlreadyAnsweredError", i, err)
			}
		}
		if ok != 1 {
			t.Fatalf("iteration %d: %d answers taken, want 1 (%v)", i, ok, errs)
		}
		evs, _ := db.Events(ctx, run.ID, 0, 0)
		resumed := 0
		for _, e := range evs {
			if e.Type == engine.EventRunResumed {
				resumed++
			}
		}
		if got, _ := db.Run(ctx, run.ID); got.Status != engine.StatusFinished || resumed != 1 {
			t.Fatalf("iteration %d: status %s, resumed %d times", i, got.Status, resumed)
		}
	}
}

func TestLaunchRefusesBeforeStoringAnything(t *testing.T) {
	src := "agent a:\n  model: \"anthropic/x\"\n  backend: pi\nvars:\n  n: int\nworkflow w:\n  entry: a\n  a -> done\n"
	w := mustCompile(t, src)
	db := newStore(t)
	var workspaces []string // asked of Options.WorkDir
	e, _ := lifecycleEngine(t, db, w, map[string]engine.Backend{"claw": &script{}}, func(o *engine.Options) {
		o.WorkDir = func(r *engine.Run) (string, error) { workspaces = append(workspaces, r.ID); return t.TempDir(), nil }
	})
	ctx := t.Context()

	_, err := e.Launch(ctx, engine.StartRequest{Workflow: w, RunID: "bad id!"})
	var badID *engine.InvalidRunIDError
	if !errors.As(err, &badID) {
		t.Errorf("bad run id: err = %v, want *InvalidRunIDError", err)
	}
	_, err = e.Launch(ctx, engine.StartRequest{Workflow: w, RunID: "vars"})
	var verr *engine.VarsError
	if !errors.As(err, &verr) || len(verr.Problems) != 1 || verr.Problems[0].Name != "n" || verr.Problems[0].Kind != engine.ProblemMissing {
		t.Errorf("missing var: err = %v, want *VarsError naming n", err)
	}
	_, err = e.Launch(ctx, engine.StartRequest{Workflow: w, RunID: "pi", Vars: map[string]any{"n": "1"}})
	var unavailable *engine.BackendUnavailableError
	if !errors.As(err, &unavailable) || unavailable.Backend != "pi" || unavailable.Node != "a" || !cmp.Equal(unavailable.Available, []string{"claw"}) {
		t.Errorf("unbuilt backend: err = %v, want *BackendUnavailableError for pi at a, with claw available", err)
	}
	runs, err := db.Runs(ctx, engine.RunFilter{})
	if err != nil || len(runs) != 0 {
		t.Errorf("refused launches stored runs: %v, %v", runs, err)
	}
	if len(workspaces) != 0 {
		t.Errorf("refused launches made workspaces for %v", workspaces)
	}
}

// A launch that names no workspace gets Options.WorkDir's, recorded on
// the run; one that names its own keeps it.
func TestLaunchWorkspaceFromTheOptions(t *testing.T) {
	w := mustCompile(t, "compute c:\n  expr:\n    x: \"1\"\nworkflow w:\n  entry: c\n  c -> done\n")
	db := newStore(t)
	given := t.TempDir()
	e, _ := lifecycleEngine(t, db, w, nil, func(o *engine.Options) {
		o.WorkDir = func(r *engine.Run) (string, error) { return given + "/" + r.ID, nil }
	})
	ctx := t.Context()
	own := t.TempDir()
	for id, dir := range map[string]string{"from-options": "", "own": own} {
		if _, err := e.Launch(ctx, engine.StartRequest{Workflow: w, RunID: id, WorkDir: dir}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"from-options": given + "/from-options", "own": own} {
		run, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if run.WorkDir != want {
			t.Errorf("run %s: WorkDir = %s, want %s", id, run.WorkDir, want)
		}
	}
}

// Launch returns once the run's record is stored, before its first node
// finishes.
func TestLaunchStoresTheRecordFirst(t *testing.T) {
	w := mustCompile(t, "agent a:\n  model: \"anthropic/x\"\nworkflow w:\n  entry: a\n  a -> done\n")
	release := make(chan struct{})
	b := &script{run: func(ctx context.Context, _ *engine.Task) (*engine.Result, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &engine.Result{Output: map[string]any{"text": "ok"}}, nil
	}}
	db := newStore(t)
	e, _ := lifecycleEngine(t, db, w, map[string]engine.Backend{"claw": b}, nil)
	ctx := t.Context()
	run, err := e.Launch(ctx, engine.StartRequest{Workflow: w, RunID: "first", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := db.Run(ctx, run.ID)
	if err != nil || stored.Status != engine.StatusRunning {
		t.Fatalf("right after Launch: %v, %v; want the run stored, running", stored, err)
	}
	if _, err := e.Launch(ctx, engine.StartRequest{Workflow: w, RunID: "first", WorkDir: t.TempDir()}); !errors.Is(err, engine.ErrRunExists) {
		t.Errorf("second launch of the id: err = %v, want ErrRunExists", err)
	}
	close(release)
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Run(ctx, run.ID); got.Status != engine.StatusFinished {
		t.Errorf("status = %s, want finished", got.Status)
	}
}

// A gate parked durably (ParkGates) pauses the run; answering its last
// question resumes the run at the gate, which then opens.
func TestParkedGateReleasedByItsLastAnswer(t *testing.T) {
	var finalUser string
	posted := make(chan []string, 1)
	w := mustCompile(t, strings.Replace(asyncWorkflow, "%s", "30m", 1))
	db := newStore(t)
	e, _ := lifecycleEngine(t, db, w, asyncBackends(t, &finalUser, posted), func(o *engine.Options) { o.ParkGates = true })
	ctx := t.Context()
	run, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "park", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != engine.StatusPausedWaitingHuman {
		t.Fatalf("status = %s, want paused at the gate", run.Status)
	}
	ids := <-posted
	res, err := e.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: ids[0], Text: "MIT", By: "a", Via: "cli"})
	if err != nil || res.Resumed {
		t.Fatalf("first answer: resumed %v, %v; want the run still waiting for the second", res != nil && res.Resumed, err)
	}
	_, err = e.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: run.ID + "_gate_await", Text: "go"})
	var await *engine.AwaitError
	if !errors.As(err, &await) || !cmp.Equal(await.Pending, []string{ids[1]}) {
		t.Errorf("answering the wait itself: err = %v, want *AwaitError naming %s", err, ids[1])
	}
	res, err = e.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: ids[1], Text: "1.26", By: "b", Via: "slack"})
	if err != nil || !res.Resumed {
		t.Fatalf("last answer: resumed %v, %v; want the run released", res != nil && res.Resumed, err)
	}
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := db.Run(ctx, run.ID)
	if got.Status != engine.StatusFinished {
		t.Fatalf("status = %s %s %s, want finished", got.Status, got.FailureCode, got.Error)
	}
	if !strings.Contains(finalUser, `"answer":"1.26"`) {
		t.Errorf("finalize's prompt lacks the answers: %s", finalUser)
	}
}

// awaitTool is an agent that asks one question and then waits in the
// await_answers tool, which pauses the run.
func awaitTool() (*dsl.Workflow, map[string]engine.Backend, error) {
	src := "agent a:\n  model: \"anthropic/x\"\n  interaction: async\n  timeout: \"20m\"\nworkflow w:\n  entry: a\n  a -> done\n"
	w, ds := dsl.CompileSource("t.bot", []byte(src))
	if ds.HasErrors() {
		return nil, nil, ds
	}
	b := &script{async: true, run: func(ctx context.Context, task *engine.Task) (*engine.Result, error) {
		id, err := task.PostQuestion(ctx, engine.AsyncQuestion{Question: "Which licence?"})
		if err != nil {
			return nil, err
		}
		return nil, &engine.NeedsInteractionError{AwaitPending: []engine.PendingQuestion{{InteractionID: id, Question: "Which licence?"}}, PendingToolUseID: "toolu_9"}
	}}
	return w, map[string]engine.Backend{"claw": b}, nil
}

// An agent paused in the await_answers tool is bounded by its node's
// timeout: the deadline is stored with the pause, and the engine that
// paused it fails the run at that deadline with the unanswered ids.
func TestAwaitToolPauseFailsAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, backends, err := awaitTool()
		if err != nil {
			t.Fatal(err)
		}
		db := newStore(t)
		e, ev := lifecycleEngine(t, db, w, backends, nil)
		ctx := t.Context()
		began := time.Now()
		run, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "tool", WorkDir: t.TempDir()})
		if err != nil || run.Status != engine.StatusPausedWaitingHuman {
			t.Fatalf("run = %+v, %v; want paused in the await tool", run, err)
		}
		ev.wait(t, run.ID, engine.EventRunFailed)
		if waited := time.Since(began); waited < 20*time.Minute || waited >= 21*time.Minute {
			t.Errorf("the paused run failed after %s, want its node's timeout of 20m", waited)
		}
		got, _ := db.Run(ctx, run.ID)
		if got.Status != engine.StatusFailedResumable || got.FailureCode != engine.CodeTimeout || !strings.Contains(got.Error, "1 unanswered question(s): tool_a_async_1") {
			t.Errorf("run = %s %s %q, want failed_resumable TIMEOUT naming tool_a_async_1", got.Status, got.FailureCode, got.Error)
		}
	})
}

// A deadline that passed while no engine owned the store fails the run as
// soon as the next owner recovers it.
func TestAwaitToolDeadlinePassedWhileDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, backends, err := awaitTool()
		if err != nil {
			t.Fatal(err)
		}
		db := newStore(t)
		e, _ := lifecycleEngine(t, db, w, backends, nil)
		ctx := t.Context()
		run, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "tool", WorkDir: t.TempDir()})
		if err != nil || run.Status != engine.StatusPausedWaitingHuman {
			t.Fatalf("run = %+v, %v; want paused in the await tool", run, err)
		}
		e.Close() // the owner goes: its timer with it

		time.Sleep(21 * time.Minute) // in the bubble: the clock moves on at once
		if got, _ := db.Run(ctx, run.ID); got.Status != engine.StatusPausedWaitingHuman {
			t.Fatalf("with no owner the run is %s, want still paused", got.Status)
		}
		later, ev := lifecycleEngine(t, db, w, backends, nil)
		recovered := time.Now()
		if _, err := later.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		ev.wait(t, run.ID, engine.EventRunFailed)
		if waited := time.Since(recovered); waited != 0 {
			t.Errorf("the recovered run failed %s after the recovery, want at once", waited)
		}
		got, _ := db.Run(ctx, run.ID)
		if got.Status != engine.StatusFailedResumable || got.FailureCode != engine.CodeTimeout || !strings.Contains(got.Error, "1 unanswered question(s): tool_a_async_1") {
			t.Errorf("run = %s %s %q, want failed_resumable TIMEOUT naming tool_a_async_1", got.Status, got.FailureCode, got.Error)
		}
	})
}

// Options.MaxStoredBytes bounds what a run writes to the store.
func TestMaxStoredBytesOption(t *testing.T) {
	w := mustCompile(t, "compute c:\n  expr:\n    n: \"loop.l.iteration\"\nworkflow w:\n  entry: c\n  c -> c as l(999)\n  c -> done\n")
	db := newStore(t)
	e, _ := lifecycleEngine(t, db, w, nil, func(o *engine.Options) { o.MaxStoredBytes = 20_000 })
	run, err := e.Start(t.Context(), engine.StartRequest{Workflow: w, RunID: "budget", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if run.FailureCode != engine.CodeBudgetExceeded || !strings.Contains(run.Error, "budget") {
		t.Errorf("run = %s %s %q, want BUDGET_EXCEEDED naming the budget", run.Status, run.FailureCode, run.Error)
	}
	unlimited, _ := lifecycleEngine(t, newStore(t), w, nil, func(o *engine.Options) { o.MaxStoredBytes = -1 })
	if run, err := unlimited.Start(t.Context(), engine.StartRequest{Workflow: w, RunID: "free", WorkDir: t.TempDir()}); err != nil || run.Status != engine.StatusFinished {
		t.Errorf("without a budget: %v %+v", err, run)
	}
}

// Continue resumes a cancelled run in the run group, recording who asked;
// it refuses a paused run (its answer continues it) and a finished one.
func TestContinueResumesACancelledRun(t *testing.T) {
	w := mustCompile(t, formWorkflow)
	db := newStore(t)
	e, ev := lifecycleEngine(t, db, w, nil, nil)
	ctx := t.Context()
	run, err := e.Launch(ctx, engine.StartRequest{Workflow: w, RunID: "cont-1", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ev.wait(t, run.ID, engine.EventRunPaused)
	var notResumable *engine.NotResumableError
	if _, err := e.Continue(ctx, run.ID, "ana", "page"); !errors.As(err, &notResumable) || !strings.Contains(err.Error(), "answer its question") {
		t.Errorf("Continue of a paused run: err = %v, want it told to answer", err)
	}
	if _, err := e.Stop(ctx, run.ID, "cancelled by ana via page"); err != nil {
		t.Fatal(err)
	}
	ev.wait(t, run.ID, engine.EventRunCancelled)
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Run(ctx, run.ID); got.Status != engine.StatusCancelled {
		t.Fatalf("status after Stop = %s", got.Status)
	}
	got, err := e.Continue(ctx, run.ID, "ana", "page")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != engine.StatusRunning && got.Status != engine.StatusPausedWaitingHuman {
		t.Errorf("Continue returned the run %s, want it running (or paused again)", got.Status)
	}
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// The form is asked again: the run waits on it, paused.
	if got, _ := db.Run(ctx, run.ID); got.Status != engine.StatusPausedWaitingHuman {
		t.Errorf("after Continue the run is %s, want paused on its form again", got.Status)
	}
	evs, err := db.Events(ctx, run.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var resumed *engine.Event
	for i := range evs {
		if evs[i].Type == engine.EventRunResumed {
			resumed = &evs[i]
		}
	}
	if resumed == nil || resumed.Data["by"] != "ana" || resumed.Data["via"] != "page" || resumed.Data["resumed_from"] != "cancelled" {
		t.Errorf("run_resumed = %+v, want by ana via page from cancelled", resumed)
	}
	if _, err := e.Continue(ctx, "no-such-run", "ana", "page"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Continue of an unknown run: err = %v, want ErrNotFound", err)
	}
}
