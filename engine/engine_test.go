package engine_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// newStore opens a real Badger store in a temporary directory.
func newStore(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustCompile(t testing.TB, src string) *dsl.Workflow {
	t.Helper()
	w, ds := dsl.CompileSource("t.bot", []byte(src))
	if ds.HasErrors() {
		t.Fatalf("workflow does not compile:\n%s", dsl.RenderString(ds, map[string][]byte{"t.bot": []byte(src)}))
	}
	return w
}

// script is a backend whose behaviour is a Go function: it stands in for a
// model in engine tests.
type script struct {
	async bool
	run   func(ctx context.Context, t *engine.Task) (*engine.Result, error)
}

func (s *script) Execute(ctx context.Context, t *engine.Task) (*engine.Result, error) {
	return s.run(ctx, t)
}
func (s *script) Capabilities() engine.Capabilities {
	return engine.Capabilities{AsyncQuestions: s.async}
}

func newEngine(t testing.TB, db engine.Store, backends map[string]engine.Backend) *engine.Engine {
	t.Helper()
	return engine.New(engine.Options{Store: db, Backends: backends, Poll: time.Hour, Sandbox: testSandbox(t)})
}

func start(t testing.TB, e *engine.Engine, w *dsl.Workflow, vars map[string]any) *engine.Run {
	t.Helper()
	run, err := e.Start(context.Background(), engine.StartRequest{Workflow: w, Vars: vars, WorkDir: t.TempDir(), Trigger: engine.Trigger{Source: "test"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return run
}

func eventTypes(t testing.TB, db engine.Store, runID string) []string {
	t.Helper()
	evs, err := db.Events(context.Background(), runID, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range evs {
		s := ev.Type
		if ev.NodeID != "" {
			s += ":" + ev.NodeID
		}
		types = append(types, s)
	}
	return types
}

func TestComputeChainAndLoop(t *testing.T) {
	src := `
schema count:
  n: int

compute start:
  output: count
  expr:
    n: "1"

compute double:
  output: count
  expr:
    n: "outputs.start.n * (loop.again.iteration + 1)"

workflow w:
  entry: start
  start -> double
  double -> double as again(3)
  double -> done
`
	db := newStore(t)
	e := newEngine(t, db, nil)
	run := start(t, e, mustCompile(t, src), nil)
	if run.Status != engine.StatusFinished {
		t.Fatalf("status = %s (%s %s), want finished", run.Status, run.FailureCode, run.Error)
	}
	got := eventTypes(t, db, run.ID)
	if n := strings.Count(strings.Join(got, " "), "node_finished:double"); n != 4 {
		t.Errorf("double ran %d times, want 4 (3 crossings + 1): %v", n, got)
	}
}

func TestToolOutputsAndFailure(t *testing.T) {
	tests := []struct {
		name       string
		command    string
		wantStatus engine.Status
		wantCode   string
		wantErr    string
	}{
		{name: "json object", command: `echo '{"ok": true, "n": 3}'`, wantStatus: engine.StatusFinished},
		{name: "plain text", command: "echo hello", wantStatus: engine.StatusFinished},
		{name: "non-zero exit", command: "echo broken >&2; exit 3", wantStatus: engine.StatusFailedResumable, wantCode: engine.CodeExecutionFailed, wantErr: "status 3: broken"},
		{name: "quoted var", command: "test {{vars.v}} = \"it's\"", wantStatus: engine.StatusFinished},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "vars:\n  v: string = \"it's\"\ntool t:\n  command: `" + tc.command + "`\nworkflow w:\n  entry: t\n  t -> done\n"
			db := newStore(t)
			run := start(t, newEngine(t, db, nil), mustCompile(t, src), map[string]any{"v": "it's"})
			if run.Status != tc.wantStatus || run.FailureCode != tc.wantCode || !strings.Contains(run.Error, tc.wantErr) {
				t.Errorf("run = %s %s %q, want %s %s containing %q", run.Status, run.FailureCode, run.Error, tc.wantStatus, tc.wantCode, tc.wantErr)
			}
		})
	}
}

func TestFailNodeAndGuards(t *testing.T) {
	src := `
vars:
  score: int

compute judge:
  expr:
    good: "vars.score > 5"

fail too_low:
  code: SCORE_TOO_LOW
  message: "score {{vars.score}} is too low"

workflow w:
  entry: judge
  judge -> done when "good"
  judge -> too_low else
`
	w := mustCompile(t, src)
	for _, tc := range []struct {
		score      int64
		wantStatus engine.Status
		wantCode   string
	}{{9, engine.StatusFinished, ""}, {2, engine.StatusFailed, "SCORE_TOO_LOW"}} {
		db := newStore(t)
		run := start(t, newEngine(t, db, nil), w, map[string]any{"score": tc.score})
		if run.Status != tc.wantStatus || run.FailureCode != tc.wantCode {
			t.Errorf("score %d: run = %s %s %q", tc.score, run.Status, run.FailureCode, run.Error)
		}
		if tc.wantCode != "" && run.Error != "score 2 is too low" {
			t.Errorf("error = %q, want the rendered fail message", run.Error)
		}
	}
}

func TestHumanPauseAndResume(t *testing.T) {
	src := `
schema decision:
  approved: bool
  reason: string

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
	w := mustCompile(t, src)
	db := newStore(t)
	e := newEngine(t, db, nil)
	run := start(t, e, w, nil)
	if run.Status != engine.StatusPausedWaitingHuman {
		t.Fatalf("status = %s, want paused_waiting_human", run.Status)
	}
	ixs, err := db.Interactions(context.Background(), run.ID)
	if err != nil || len(ixs) != 1 {
		t.Fatalf("interactions = %v, %v", ixs, err)
	}
	if ixs[0].ID != run.ID+"_approve" || ixs[0].Questions["_instructions"] != "Approve the release?" {
		t.Errorf("interaction = %+v", ixs[0])
	}
	ctx := context.Background()
	recorded := 0
	_, err = e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: run.ID, Answers: map[string]string{"approved": "maybe", "reason": "x"}, Recorded: func() { recorded++ }})
	if err == nil || !strings.Contains(err.Error(), `"maybe" is not a yes/no answer`) {
		t.Fatalf("bad answer: err = %v", err)
	}
	if recorded != 0 {
		t.Error("Recorded was called for refused answers")
	}
	var statusAtRecord engine.Status
	run, err = e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: run.ID, Answers: map[string]string{"approved": "yes", "reason": "tested"}, Recorded: func() {
		recorded++
		r, _ := db.Run(ctx, run.ID)
		statusAtRecord = r.Status
	}})
	if err != nil {
		t.Fatal(err)
	}
	if recorded != 1 || statusAtRecord != engine.StatusRunning {
		t.Errorf("Recorded called %d times, run %s then; want once, running", recorded, statusAtRecord)
	}
	if run.Status != engine.StatusFinished {
		t.Fatalf("after resume: %s %s %s", run.Status, run.FailureCode, run.Error)
	}
}

func TestFanOutJoin(t *testing.T) {
	src := `
schema v:
  n: int

compute seed:
  output: v
  expr:
    n: "21"

router split:
  mode: fan_out_all

compute left:
  output: v
  expr:
    n: "outputs.seed.n"

compute right:
  output: v
  expr:
    n: "outputs.seed.n"

compute gather:
  await: wait_all
  output: v
  publish: total
  expr:
    n: "outputs.left.n + outputs.right.n"

workflow w:
  entry: seed
  budget:
    max_parallel_branches: 1
  seed -> split
  split -> left
  split -> right
  left -> gather
  right -> gather
  gather -> done
`
	db := newStore(t)
	run := start(t, newEngine(t, db, nil), mustCompile(t, src), nil)
	if run.Status != engine.StatusFinished {
		t.Fatalf("status = %s %s %s", run.Status, run.FailureCode, run.Error)
	}
	evs, _ := db.Events(context.Background(), run.ID, 0, 1000)
	var total any
	for _, ev := range evs {
		if ev.Type == engine.EventNodeFinished && ev.NodeID == "gather" {
			total = ev.Data["output"].(map[string]any)["n"]
		}
	}
	if total != float64(42) && total != int64(42) {
		t.Errorf("gather.n = %v, want 42", total)
	}
}

// A workflow routed to a backend this build lacks is refused before its
// first node, naming the backend and those there are; nothing runs.
func TestBackendNotAvailable(t *testing.T) {
	src := "tool first:\n  command: \"echo ran > ran.txt\"\nagent a:\n  backend: claude_code\nworkflow w:\n  entry: first\n  first -> a\n  a -> done\n"
	db := newStore(t)
	dir := t.TempDir()
	_, err := newEngine(t, db, map[string]engine.Backend{"claw": &script{}}).Start(context.Background(), engine.StartRequest{Workflow: mustCompile(t, src), WorkDir: dir})
	want := `node a: backend "claude_code" is not available in this build (available: claw)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Start = %v, want it refused with %q", err, want)
	}
	if runs, _ := db.Runs(context.Background(), engine.RunFilter{}); len(runs) != 0 {
		t.Errorf("%d runs stored, want none", len(runs))
	}
	if _, err := os.Stat(filepath.Join(dir, "ran.txt")); err == nil {
		t.Error("the first node ran")
	}
}

func TestAsyncBackendCapability(t *testing.T) {
	src := "agent a:\n  model: \"anthropic/x\"\n  interaction: async\nworkflow w:\n  entry: a\n  a -> done\n"
	db := newStore(t)
	sync := &script{run: func(context.Context, *engine.Task) (*engine.Result, error) { return &engine.Result{}, nil }}
	run := start(t, newEngine(t, db, map[string]engine.Backend{"claw": sync}), mustCompile(t, src), nil)
	if run.Status != engine.StatusFailedResumable || run.FailureCode != engine.CodeCapabilityUnsupported {
		t.Errorf("run = %s %s %q, want CAPABILITY_UNSUPPORTED", run.Status, run.FailureCode, run.Error)
	}
}

const asyncWorkflow = `
schema draft_out:
  draft: string

agent draft:
  model: "anthropic/x"
  interaction: async
  output: draft_out

await_answers gate:
  from: draft
  timeout: "%s"

agent finalize:
  model: "anthropic/x"
  user: "{{outputs.gate.answers}}"

workflow w:
  entry: draft
  draft -> gate
  gate -> finalize
  finalize -> done
`

// asker posts two questions, keeps working, and finishes; finisher records
// what it was told.
func asyncBackends(t *testing.T, finalUser *string, posted chan<- []string) map[string]engine.Backend {
	var mu sync.Mutex
	b := &script{async: true, run: func(ctx context.Context, task *engine.Task) (*engine.Result, error) {
		if task.NodeID == "draft" {
			var ids []string
			for _, q := range []string{"Which licence?", "Minimum Go version?"} {
				id, err := task.PostQuestion(ctx, engine.AsyncQuestion{Question: q})
				if err != nil {
					return nil, err
				}
				ids = append(ids, id)
			}
			if posted != nil {
				posted <- ids
			}
			return &engine.Result{Output: map[string]any{"draft": "README with TODO(licence)"}}, nil
		}
		mu.Lock()
		*finalUser = task.User
		mu.Unlock()
		return &engine.Result{Output: map[string]any{"readme": "done"}}, nil
	}}
	return map[string]engine.Backend{"claw": b}
}

func TestAwaitGateReleasedByAnswers(t *testing.T) {
	db := newStore(t)
	var finalUser string
	posted := make(chan []string, 1)
	e := newEngine(t, db, asyncBackends(t, &finalUser, posted))
	w := mustCompile(t, strings.Replace(asyncWorkflow, "%s", "30m", 1))
	ctx := context.Background()
	runID := "async-1"
	done := make(chan *engine.Run, 1)
	go func() {
		run, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: runID, WorkDir: t.TempDir()})
		if err != nil {
			t.Error(err)
		}
		done <- run
	}()
	// Once both questions are posted, answer them; the gate is parked or
	// about to be, and is level-triggered either way.
	var ids []string
	select {
	case ids = <-posted:
	case run := <-done:
		t.Fatalf("run stopped before the questions: %+v", run)
	}
	for i, id := range ids {
		if _, err := e.Answer(ctx, engine.AnswerRequest{RunID: runID, InteractionID: id, Text: []string{"MIT", "1.26"}[i], By: "tester", Via: "cli"}); err != nil {
			t.Fatal(err)
		}
	}
	run := <-done
	if run.Status != engine.StatusFinished {
		t.Fatalf("status = %s %s %s", run.Status, run.FailureCode, run.Error)
	}
	for _, want := range []string{runID + "_draft_async_1", `"answer":"MIT"`, `"answer":"1.26"`} {
		if !strings.Contains(finalUser, want) {
			t.Errorf("finalize's prompt lacks %q: %s", want, finalUser)
		}
	}
	// The answers were queued for the asking node too.
	msgs, _ := db.DrainInbox(ctx, runID, "draft")
	if len(msgs) != 2 || !strings.HasPrefix(msgs[0].Text, "[Answer to question "+runID+"_draft_async_1] Q: \"Which licence?\" — A: MIT") {
		t.Errorf("inbox = %+v", msgs)
	}
	// A second answer is a conflict naming the first responder.
	_, err := e.Answer(ctx, engine.AnswerRequest{RunID: runID, InteractionID: ids[0], Text: "GPL", By: "late", Via: "slack"})
	var already *engine.AlreadyAnsweredError
	if !errors.As(err, &already) || already.AnsweredBy != "tester" {
		t.Errorf("second answer: err = %v, want AlreadyAnsweredError by tester", err)
	}
}

// The gate fails at its deadline, not before and not at the next poll,
// naming the questions nobody answered. In a synctest bubble its 30
// minutes pass as soon as the run has nothing else to do.
func TestAwaitGateTimeoutNamesUnanswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := newStore(t)
		var finalUser string
		e := newEngine(t, db, asyncBackends(t, &finalUser, nil))
		w := mustCompile(t, strings.Replace(asyncWorkflow, "%s", "30m", 1))
		began := time.Now()
		run := start(t, e, w, nil)
		if run.Status != engine.StatusFailedResumable || run.FailureCode != engine.CodeTimeout {
			t.Fatalf("run = %s %s %q, want failed_resumable TIMEOUT", run.Status, run.FailureCode, run.Error)
		}
		if waited := time.Since(began); waited < 30*time.Minute || waited >= 31*time.Minute {
			t.Errorf("the gate failed after %s, want its timeout of 30m", waited)
		}
		for _, want := range []string{"2 unanswered question(s)", run.ID + "_draft_async_1", run.ID + "_draft_async_2"} {
			if !strings.Contains(run.Error, want) {
				t.Errorf("error %q lacks %q", run.Error, want)
			}
		}
	})
}

// A wait node ends when its event is emitted, earlier emits included, and
// fails at its timeout when nobody emits it.
func TestWaitNode(t *testing.T) {
	const alone = "wait hold:\n  event: \"ready\"\n  timeout: \"10m\"\nworkflow w:\n  entry: hold\n  hold -> done\n"
	const emitted = `
router split:
  mode: fan_out_all

emit ready:
  event: "ready"
  with:
    n: "1"

wait hold:
  event: "ready"
  timeout: "10m"

compute join:
  await: wait_all
  expr:
    ok: "true"

workflow w:
  entry: split
  split -> ready
  split -> hold
  ready -> join
  hold -> join
  join -> done
`
	cases := []struct {
		name, src string
		status    engine.Status
		waited    time.Duration
	}{
		{"emitted in a sibling branch", emitted, engine.StatusFinished, 0},
		{"never emitted", alone, engine.StatusFailedResumable, 10 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEngine(t, newStore(t), nil)
				began := time.Now()
				run := start(t, e, mustCompile(t, tc.src), nil)
				waited := time.Since(began)
				if run.Status != tc.status {
					t.Fatalf("run = %s %s %q, want %s", run.Status, run.FailureCode, run.Error, tc.status)
				}
				if waited < tc.waited || waited >= tc.waited+time.Minute {
					t.Errorf("the run ended after %s, want %s", waited, tc.waited)
				}
				if tc.status != engine.StatusFinished && (run.FailureCode != engine.CodeTimeout || !strings.Contains(run.Error, `event "ready" was not emitted within 10m0s`)) {
					t.Errorf("failure = %s %q, want TIMEOUT naming the event", run.FailureCode, run.Error)
				}
			})
		})
	}
}

func TestResolveVars(t *testing.T) {
	w := mustCompile(t, `
vars:
  name: string
  n: int = 2
  mode: string [enum: "a", "b"] = "a"

presets:
  fast:
    n: 1

compute c:
  expr:
    x: "1"

workflow w:
  entry: c
  c -> done
`)
	got, err := engine.ResolveVars(w, map[string]any{"name": "x", "mode": "b"}, "fast")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"name": "x", "n": int64(1), "mode": "b"}, got); diff != "" {
		t.Errorf("vars (-want +got):\n%s", diff)
	}
	_, err = engine.ResolveVars(w, map[string]any{"mode": "c", "nope": "1"}, "")
	for _, want := range []string{`missing var "name"`, `unknown var "nope"`, `"c" is not one of: a, b`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to mention %q", err, want)
		}
	}
	var verr *engine.VarsError
	if !errors.As(err, &verr) {
		t.Fatalf("err = %T, want *engine.VarsError", err)
	}
	want := []engine.VarProblem{
		{Name: "mode", Kind: engine.ProblemInvalid, Type: "string", Detail: `"c" is not one of: a, b`},
		{Name: "nope", Kind: engine.ProblemUnknown},
		{Name: "name", Kind: engine.ProblemMissing, Type: "string"},
	}
	if diff := cmp.Diff(want, verr.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	// A REST launch sends JSON: numbers and booleans are checked, not parsed.
	got, err = engine.ResolveVars(w, map[string]any{"name": "x", "n": float64(3)}, "")
	if err != nil || got["n"] != int64(3) {
		t.Errorf("n=3.0 (JSON): got %v, %v; want int64 3", got["n"], err)
	}
	_, err = engine.ResolveVars(w, map[string]any{"name": "x", "n": 2.5}, "")
	if err == nil || !strings.Contains(err.Error(), "var n: 2.5 is not a whole number") {
		t.Errorf("n=2.5: err = %v, want it refused as not a whole number", err)
	}
	_, err = engine.ResolveVars(w, map[string]any{"name": true}, "")
	if err == nil || !strings.Contains(err.Error(), "var name: a boolean given, string wanted") {
		t.Errorf("name=true: err = %v, want the type it wants named", err)
	}
}

func TestOutputSchemaValidation(t *testing.T) {
	src := `
schema verdict:
  approved: bool
  level: string [enum: "low", "high"]

tool t:
  command: ` + "`" + `echo '{"approved": "yes", "level": "medium"}'` + "`" + `
  output: verdict

workflow w:
  entry: t
  t -> done
`
	db := newStore(t)
	run := start(t, newEngine(t, db, nil), mustCompile(t, src), nil)
	if run.Status != engine.StatusFailedResumable || run.FailureCode != engine.CodeSchemaValidation {
		t.Fatalf("run = %s %s %q, want SCHEMA_VALIDATION", run.Status, run.FailureCode, run.Error)
	}
	for _, want := range []string{`field "approved"`, `field "level"`} {
		if !strings.Contains(run.Error, want) {
			t.Errorf("error %q does not name %s", run.Error, want)
		}
	}
}

func TestAskUserPausesAndResumesTheConversation(t *testing.T) {
	src := "agent a:\n  model: \"anthropic/x\"\n  interaction: human\nworkflow w:\n  entry: a\n  a -> done\n"
	var calls []*engine.Task
	b := &script{run: func(_ context.Context, task *engine.Task) (*engine.Result, error) {
		calls = append(calls, task)
		if task.ResumeAnswer == "" {
			return nil, &engine.NeedsInteractionError{Question: "Delete the branch?", Conversation: []byte(`[{"role":"user"}]`), PendingToolUseID: "toolu_1"}
		}
		return &engine.Result{Output: map[string]any{"deleted": task.ResumeAnswer == "yes"}}, nil
	}}
	db := newStore(t)
	e := newEngine(t, db, map[string]engine.Backend{"claw": b})
	w := mustCompile(t, src)
	run := start(t, e, w, nil)
	if run.Status != engine.StatusPausedWaitingHuman {
		t.Fatalf("status = %s (%s)", run.Status, run.Error)
	}
	ctx := context.Background()
	ix, err := db.Interaction(ctx, run.ID, run.ID+"_a")
	if err != nil || ix.Question() != "Delete the branch?" {
		t.Fatalf("interaction = %+v, %v", ix, err)
	}
	_, err = e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: run.ID})
	var bad *engine.InvalidAnswerError
	if !errors.As(err, &bad) || len(bad.Problems) != 1 || bad.Problems[0].Field != engine.QuestionKey || bad.Problems[0].Kind != engine.ProblemMissing {
		t.Errorf("resume without the answer: err = %v, want the missing %s named", err, engine.QuestionKey)
	}
	run, err = e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: run.ID, Answers: map[string]string{engine.QuestionKey: "yes"}})
	if err != nil || run.Status != engine.StatusFinished {
		t.Fatalf("resume: %v %+v", err, run)
	}
	last := calls[len(calls)-1]
	if last.ResumeAnswer != "yes" || last.ResumePendingToolUseID != "toolu_1" || string(last.ResumeConversation) != `[{"role":"user"}]` {
		t.Errorf("resumed task = answer %q, tool use %q, conversation %s", last.ResumeAnswer, last.ResumePendingToolUseID, last.ResumeConversation)
	}
}

// The conformance case of upstream's async_await_mini: a gate in one branch
// of a fan-out parks (giving its slot back) while the sibling branch
// finishes; an answer releases it and the join sees both.
func TestAwaitGateInBranchReleasedWhileSiblingFinishes(t *testing.T) {
	src := `
schema v:
  n: int

compute prep:
  output: v
  expr:
    n: "21 + 21"

router split:
  mode: fan_out_all

compute side:
  output: v
  expr:
    n: "outputs.prep.n"

await_answers gate:
  timeout: "1h"

compute gather:
  await: wait_all
  output: v
  expr:
    n: "outputs.side.n"

workflow w:
  entry: prep
  budget:
    max_parallel_branches: 1
  prep -> split
  split -> gate
  split -> side
  gate -> gather
  side -> gather
  gather -> done
`
	db := newStore(t)
	ctx := context.Background()
	// A question posted before the run reaches the gate (as by an earlier
	// agent) keeps the gate parked.
	now := time.Now()
	if err := db.CreateRun(ctx, &engine.Run{ID: "mini", Workflow: "w", Status: engine.StatusRunning, CreatedAt: now, UpdatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	run, _ := db.Acquire(ctx, "mini", "test")
	ix, err := db.PostQuestion(ctx, engine.PostRequest{RunID: "mini", Generation: run.Generation, NodeID: "asker", Questions: map[string]any{engine.QuestionKey: "go?"}})
	if err != nil {
		t.Fatal(err)
	}
	var sideDone = make(chan struct{})
	e := engine.New(engine.Options{Store: db, Sandbox: testSandbox(t), Poll: time.Hour, OnEvent: func(ev engine.Event) {
		if ev.Type == engine.EventNodeFinished && ev.NodeID == "side" {
			close(sideDone)
		}
	}})
	w := mustCompile(t, src)
	done := make(chan *engine.Run, 1)
	go func() {
		r, err := e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: "mini", Force: true})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	// With one slot, side can only finish if the parked gate gave it back.
	<-sideDone
	if _, err := e.Answer(ctx, engine.AnswerRequest{RunID: "mini", InteractionID: ix.ID, Text: "yes"}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r == nil || r.Status != engine.StatusFinished {
		t.Fatalf("run = %+v", r)
	}
}

func TestAwaitGateWithoutQuestionsPasses(t *testing.T) {
	src := "await_answers gate:\n  timeout: \"1h\"\nworkflow w:\n  entry: gate\n  gate -> done\n"
	db := newStore(t)
	run := start(t, newEngine(t, db, nil), mustCompile(t, src), nil)
	if run.Status != engine.StatusFinished {
		t.Fatalf("run = %s %s", run.Status, run.Error)
	}
}

// A node that outlives its timeout fails TIMEOUT at the timeout: its
// context ends (which is how a tool's process is killed, as in
// TestCancelKillsTheToolProcess).
func TestNodeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := "agent slow:\n  model: \"anthropic/x\"\n  timeout: \"20m\"\nworkflow w:\n  entry: slow\n  slow -> done\n"
		slow := &script{run: func(ctx context.Context, _ *engine.Task) (*engine.Result, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}}
		e := newEngine(t, newStore(t), map[string]engine.Backend{"claw": slow})
		began := time.Now()
		run := start(t, e, mustCompile(t, src), nil)
		if run.Status != engine.StatusFailedResumable || run.FailureCode != engine.CodeTimeout || !strings.Contains(run.Error, "timed out after 20m0s") {
			t.Errorf("run = %s %s %q, want failed_resumable TIMEOUT after 20m0s", run.Status, run.FailureCode, run.Error)
		}
		if waited := time.Since(began); waited < 20*time.Minute || waited >= 21*time.Minute {
			t.Errorf("the node failed after %s, want its timeout of 20m", waited)
		}
	})
}

// Cancelling a run kills its tool's process. The tool tells the test it
// runs through one FIFO, then holds another open for writing: the test
// reads that one to its end, which comes when the process dies (sleep
// would hold it an hour).
func TestCancelKillsTheToolProcess(t *testing.T) {
	dir := t.TempDir()
	started, held := filepath.Join(dir, "started"), filepath.Join(dir, "held")
	for _, p := range []string{started, held} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src := "vars:\n  started: string\n  held: string\ntool slow:\n  command: \"echo up > {{vars.started}}; exec sleep 3600 > {{vars.held}}\"\nworkflow w:\n  entry: slow\n  slow -> done\n"
	e := newEngine(t, newStore(t), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan *engine.Run, 1)
	go func() {
		r, err := e.Start(ctx, engine.StartRequest{Workflow: mustCompile(t, src), RunID: "to-cancel", Vars: map[string]any{"started": started, "held": held}, WorkDir: dir})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	if _, err := os.ReadFile(started); err != nil { // returns once the tool wrote
		t.Fatal(err)
	}
	f, err := os.Open(held) // returns once the tool opened it
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	eof := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(f)
		eof <- err
	}()
	cancel()
	select {
	case err := <-eof:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // a guard, not a wait: sleep holds the FIFO an hour
		t.Fatal("the tool's process outlived the cancellation of its run")
	}
	if r := <-done; r == nil || r.Status != engine.StatusCancelled || r.FailureCode != engine.CodeCancelled {
		t.Errorf("cancel: run = %+v", r)
	}
}

func TestLLMRouterAndTokenBudget(t *testing.T) {
	src := `
router pick:
  mode: llm
  model: "anthropic/x"

agent left:
  model: "anthropic/x"

agent right:
  model: "anthropic/x"

workflow w:
  entry: pick
  budget:
    max_tokens: 150
  pick -> left
  pick -> right
  left -> done
  right -> done
`
	var seen []string
	b := &script{run: func(_ context.Context, task *engine.Task) (*engine.Result, error) {
		seen = append(seen, task.NodeID)
		if task.NodeID == "pick" {
			enum := task.OutputSchema["properties"].(map[string]any)["selected_route"].(map[string]any)["enum"]
			if diff := cmp.Diff([]any{"left", "right"}, enum); diff != "" {
				t.Errorf("router schema enum (-want +got):\n%s", diff)
			}
			return &engine.Result{Output: map[string]any{"selected_route": "right"}, Tokens: 140}, nil
		}
		return &engine.Result{Output: map[string]any{}, Tokens: 10}, nil
	}}
	db := newStore(t)
	run := start(t, newEngine(t, db, map[string]engine.Backend{"claw": b}), mustCompile(t, src), nil)
	// The router chose right, but 140 of 150 tokens is past 90%: right never starts.
	if run.Status != engine.StatusFailedResumable || run.FailureCode != engine.CodeBudgetExceeded || !strings.Contains(run.Error, "tokens") {
		t.Errorf("run = %s %s %q", run.Status, run.FailureCode, run.Error)
	}
	if diff := cmp.Diff([]string{"pick"}, seen); diff != "" {
		t.Errorf("nodes run (-want +got):\n%s", diff)
	}
}

func TestOutboxOnlyForAttachedChannels(t *testing.T) {
	src := "human approve:\n  instructions: \"ok?\"\nworkflow w:\n  entry: approve\n  approve -> done\n"
	w := mustCompile(t, src)
	ctx := context.Background()
	for _, tc := range []struct {
		channels []string
		want     int
	}{{nil, 0}, {[]string{"github", "slack"}, 4}} {
		db := newStore(t)
		e := newEngine(t, db, nil)
		run, err := e.Start(ctx, engine.StartRequest{Workflow: w, Channels: tc.channels, WorkDir: t.TempDir()})
		if err != nil || run.Status != engine.StatusPausedWaitingHuman {
			t.Fatalf("start: %v %+v", err, run)
		}
		rows, err := db.DueOutbox(ctx, time.Now().Add(time.Hour), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != tc.want {
			t.Errorf("channels %v: %d outbox rows, want %d", tc.channels, len(rows), tc.want)
		}
		// One row per channel (the store splits them), in order.
		for i, ch := range tc.channels {
			if r := rows[i]; r.Kind != engine.OutboxRunStarted || !slices.Equal(r.Channels, []string{ch}) {
				t.Errorf("row %d = %+v, want run_started for %s", i, r, ch)
			}
			if r := rows[2+i]; r.Kind != engine.OutboxRunPaused || r.InteractionID != run.ID+"_approve" || !slices.Equal(r.Channels, []string{ch}) {
				t.Errorf("row %d = %+v, want run_paused for %s", 2+i, r, ch)
			}
		}
	}
}

// A cancelled run keeps its parked gate's deadline for the resume. (In a
// synctest bubble, time stands still while the test looks.)
func TestCancelKeepsGateDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := newStore(t)
		var finalUser string
		parked := make(chan struct{}, 1)
		e := engine.New(engine.Options{Store: db, Sandbox: testSandbox(t), Backends: asyncBackends(t, &finalUser, nil), Poll: time.Hour, Failpoint: func(name string) {
			if name == engine.FailGateParked {
				parked <- struct{}{}
			}
		}})
		w := mustCompile(t, strings.Replace(asyncWorkflow, "%s", "1h", 1))
		ctx, cancel := context.WithCancel(context.Background())
		began := time.Now()
		done := make(chan *engine.Run, 1)
		go func() {
			r, _ := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "keep", WorkDir: t.TempDir()})
			done <- r
		}()
		<-parked
		raw, _ := db.Checkpoint(context.Background(), "keep")
		i := strings.Index(string(raw), `"gates":{`)
		if i < 0 {
			t.Fatalf("no gate in the checkpoint: %s", raw)
		}
		before := string(raw[i:min(i+60, len(raw))])
		snap, err := engine.ReadSnapshot(raw)
		if err != nil || len(snap.Gates) != 1 || snap.Gates["gate"].Before(began.Add(time.Hour)) || snap.Gates["gate"].After(time.Now().Add(time.Hour)) {
			t.Errorf("ReadSnapshot = %+v, %v; want the gate due an hour after it was reached", snap, err)
		}
		cancel()
		if r := <-done; r.Status != engine.StatusCancelled {
			t.Fatalf("run = %+v", r)
		}
		raw, _ = db.Checkpoint(context.Background(), "keep")
		if !strings.Contains(string(raw), before) {
			t.Errorf("the gate deadline was lost on cancellation: had %s, now %s", before, raw)
		}
	})
}

// A gate parked inside a fan-out branch keeps its deadline across a stop:
// the fan-out runs again from its router on resume, and the gate re-arms
// with the deadline it had.
func TestBranchGateKeepsDeadline(t *testing.T) {
	src := `
router split:
  mode: fan_out_all

compute side:
  expr:
    n: "1"

await_answers gate:
  timeout: "1h"

compute gather:
  await: wait_all
  expr:
    ok: "true"

workflow w:
  entry: split
  split -> side
  split -> gate
  side -> gather
  gate -> gather
  gather -> done
`
	db := newStore(t)
	bg := context.Background()
	now := time.Now()
	if err := db.CreateRun(bg, &engine.Run{ID: "bg", Workflow: "w", Status: engine.StatusRunning, CreatedAt: now, UpdatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	run, _ := db.Acquire(bg, "bg", "test")
	if _, err := db.PostQuestion(bg, engine.PostRequest{RunID: "bg", Generation: run.Generation, NodeID: "asker", Questions: map[string]any{engine.QuestionKey: "?"}}); err != nil {
		t.Fatal(err)
	}
	w := mustCompile(t, src)
	deadline := func() string {
		raw, _ := db.Checkpoint(bg, "bg")
		i := strings.Index(string(raw), `"branch_split_gate/gate":"`)
		if i < 0 {
			t.Fatalf("no branch gate in the checkpoint: %s", raw)
		}
		return string(raw[i:min(i+60, len(raw))])
	}
	stopAtGate := func() string {
		parked := make(chan struct{}, 1)
		e := engine.New(engine.Options{Store: db, Sandbox: testSandbox(t), Poll: time.Hour, Failpoint: func(name string) {
			if name == engine.FailGateParked {
				parked <- struct{}{}
			}
		}})
		ctx, cancel := context.WithCancel(bg)
		done := make(chan *engine.Run, 1)
		go func() {
			r, err := e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: "bg", Force: true})
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		<-parked // the gate stored its deadline and parks
		d := deadline()
		cancel()
		if r := <-done; r == nil || r.Status != engine.StatusCancelled {
			t.Fatalf("run = %+v", r)
		}
		return d
	}
	first := stopAtGate()
	if again := stopAtGate(); again != first {
		t.Errorf("the branch gate's deadline moved: %s, then %s", first, again)
	}
}

// Stop cancels a paused run in the store and tells its channels; a run
// already over is left alone.
func TestStopPausedRun(t *testing.T) {
	src := "human approve:\n  instructions: \"ok?\"\nworkflow w:\n  entry: approve\n  approve -> done\n"
	w := mustCompile(t, src)
	ctx := context.Background()
	db := newStore(t)
	e := newEngine(t, db, nil)
	run, err := e.Start(ctx, engine.StartRequest{Workflow: w, Channels: []string{"github"}, WorkDir: t.TempDir()})
	if err != nil || run.Status != engine.StatusPausedWaitingHuman {
		t.Fatalf("start: %v %+v", err, run)
	}
	stopped, err := e.Stop(ctx, run.ID, "superseded by a newer run")
	if err != nil || !stopped {
		t.Fatalf("Stop = %v, %v", stopped, err)
	}
	got, _ := db.Run(ctx, run.ID)
	if got.Status != engine.StatusCancelled || got.FailureCode != engine.CodeCancelled || got.Error != "superseded by a newer run" {
		t.Errorf("run after Stop = %s %s %q", got.Status, got.FailureCode, got.Error)
	}
	rows, _ := db.DueOutbox(ctx, time.Now().Add(time.Hour), 0)
	if last := rows[len(rows)-1]; last.Kind != engine.OutboxRunFailed || !strings.Contains(string(last.Payload), `"status":"cancelled"`) {
		t.Errorf("last outbox row = %+v %s, want run_failed (cancelled)", last, last.Payload)
	}
	if stopped, err := e.Stop(ctx, run.ID, "again"); err != nil || stopped {
		t.Errorf("Stop of a cancelled run = %v, %v; want false, nil", stopped, err)
	}
}

// A Cancel that reaches a resume before it runs a node is recorded (the
// run ends cancelled, not running); an answer's resume (Expect paused) does
// not revive a run cancelled meanwhile.
func TestCancelDuringResume(t *testing.T) {
	src := "human approve:\n  instructions: \"ok?\"\ncompute c:\n  expr:\n    x: \"1\"\nworkflow w:\n  entry: approve\n  approve -> c\n  c -> done\n"
	w := mustCompile(t, src)
	ctx := context.Background()
	db := newStore(t)
	e := newEngine(t, db, nil)
	run, err := e.Start(ctx, engine.StartRequest{Workflow: w, WorkDir: t.TempDir()})
	if err != nil || run.Status != engine.StatusPausedWaitingHuman {
		t.Fatalf("start: %v %+v", err, run)
	}
	cancelled := false
	got, err := e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: run.ID, WorkDir: t.TempDir(), Answers: map[string]string{},
		Recorded: func() { cancelled = e.Cancel(run.ID) }})
	if err != nil || !cancelled {
		t.Fatalf("resume: %v, cancel reached it: %v", err, cancelled)
	}
	if got.Status != engine.StatusCancelled {
		t.Errorf("run after a cancel before its first node: %s, want cancelled", got.Status)
	}
	_, err = e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: run.ID, WorkDir: t.TempDir(), Expect: engine.StatusPausedWaitingHuman})
	if !errors.Is(err, engine.ErrStatusChanged) {
		t.Errorf("an answer's resume of a cancelled run: %v, want ErrStatusChanged", err)
	}
}

// Answers for a question are refused once the run waits on another.
func TestResumeAnswersTheirQuestionOnly(t *testing.T) {
	src := "human plan:\n  instructions: \"plan ok?\"\nhuman deploy:\n  instructions: \"deploy?\"\nworkflow w:\n  entry: plan\n  plan -> deploy\n  deploy -> done\n"
	w := mustCompile(t, src)
	ctx := context.Background()
	db := newStore(t)
	e := newEngine(t, db, nil)
	run, err := e.Start(ctx, engine.StartRequest{Workflow: w, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	planID := run.ID + "_plan"
	if run, err = e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: run.ID, InteractionID: planID, Answers: map[string]string{}}); err != nil || run.Status != engine.StatusPausedWaitingHuman {
		t.Fatalf("plan's answer: %v %+v", err, run)
	}
	// A second answer to plan, read while plan was pending, must not
	// approve deploy.
	_, err = e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: run.ID, InteractionID: planID, Answers: map[string]string{}})
	if !errors.Is(err, engine.ErrStatusChanged) {
		t.Errorf("late answer to plan: %v, want ErrStatusChanged", err)
	}
	if ix, _ := db.Interaction(ctx, run.ID, run.ID+"_deploy"); ix == nil || !ix.Pending() {
		t.Errorf("deploy was answered by plan's late answer")
	}
}
