package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/engine"
)

const humanWorkflow = `
vars:
  version: string = "1.0"

schema decision:
  approved: bool
  reason: string

prompt ask:
  Approve the release of {{vars.version}}?

compute prep:
  expr:
    v: "vars.version"

human approve:
  instructions: ask
  output: decision

workflow release:
  entry: prep
  prep -> approve
  approve -> done when approved
  approve -> fail
`

func TestRunFinishes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := writeFile(t, "w.bot", "compute c:\n  expr:\n    x: \"1 + 1\"\nworkflow w:\n  entry: c\n  c -> done\n")
	code, out, errOut := runCLI(t, "run", wf, "--store-dir", filepath.Join(dir, "st"), "--run-id", "first", "--json")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || res["status"] != "finished" || res["run_id"] != "first" {
		t.Errorf("json = %s (%v)", out, err)
	}
	if !strings.Contains(errOut, "▶ compute c") {
		t.Errorf("no progress on stderr: %q", errOut)
	}
}

func TestRunPauseResume(t *testing.T) {
	t.Parallel()
	st := filepath.Join(t.TempDir(), "st")
	wf := writeFile(t, "release.bot", humanWorkflow)
	code, out, errOut := runCLI(t, "run", wf, "--store-dir", st, "--run-id", "rel-1", "--no-interactive", "--var", "version=2.0")
	if code != exitOK || !strings.Contains(out, "run rel-1 paused at node approve, waiting for the answers of rel-1_approve:") {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "runs", "list", "--store-dir", st)
	if code != exitOK || !strings.Contains(out, "rel-1") || !strings.Contains(out, "paused_waiting_human") {
		t.Errorf("runs list: exit %d\n%s", code, out)
	}
	// A form takes field=value for each field; a bare text is refused,
	// naming the fields.
	code, _, errOut = runCLI(t, "runs", "answer", "rel-1", "rel-1_approve", "yes", "--store-dir", st)
	if code != exitError || !strings.Contains(errOut, `missing answer for "approved" (bool)`) || !strings.Contains(errOut, "iterion runs answer rel-1 rel-1_approve approved=… reason=…") {
		t.Errorf("runs answer with a bare text to a form: exit %d, %s", code, errOut)
	}
	code, _, errOut = runCLI(t, "runs", "answer", "rel-1", "rel-1_approve", "approved=perhaps", "reason=x", "--store-dir", st)
	if code != exitError || !strings.Contains(errOut, `"perhaps" is not a yes/no answer`) {
		t.Errorf("runs answer with a bad field: exit %d, %s", code, errOut)
	}
	code, _, errOut = runCLI(t, "resume", "--run-id", "rel-1", "--store-dir", st, "--answer", "approved=perhaps", "--answer", "reason=x")
	if code != exitError || !strings.Contains(errOut, `"perhaps" is not a yes/no answer`) {
		t.Errorf("bad answer: exit %d, %s", code, errOut)
	}
	// Nobody owns the store: the answer that releases the run resumes it
	// in the answering command.
	code, out, errOut = runCLI(t, "runs", "answer", "rel-1", "rel-1_approve", "approved=yes", "reason=tested, it's fine", "--store-dir", st)
	if code != exitOK || !strings.Contains(out, "run rel-1 continues here") || !strings.Contains(out, "run rel-1 is finished") {
		t.Errorf("runs answer: exit %d\n%s%s", code, out, errOut)
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	st := filepath.Join(t.TempDir(), "st")
	ok := writeFile(t, "ok.bot", "compute c:\n  expr:\n    x: \"1\"\nworkflow w:\n  entry: c\n  c -> done\n")
	if code, _, errOut := runCLI(t, "run", ok, "--store-dir", st); code != exitOK {
		t.Fatalf("setting up a store: %s", errOut)
	}
	bad := writeFile(t, "bad.bot", "agent a:\nworkflow w:\n  entry: a\n")
	typed := writeFile(t, "v.bot", "vars:\n  name: string\n  n: int = 1\ncompute c:\n  expr:\n    x: \"vars.name\"\nworkflow w:\n  entry: c\n  c -> done\n")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"invalid workflow", []string{"run", bad, "--store-dir", st}, exitError, "has errors"},
		{"missing var", []string{"run", typed, "--store-dir", st}, exitUsage, `missing var "name" (string): pass --var name=`},
		{"mistyped var", []string{"run", typed, "--store-dir", st, "--var", "name=x", "--var", "n=ten"}, exitUsage, `var n: "ten" is not a whole number`},
		{"unknown var", []string{"run", typed, "--store-dir", st, "--var", "name=x", "--var", "nme=y"}, exitUsage, `unknown var "nme"`},
		{"unknown preset", []string{"run", typed, "--store-dir", st, "--var", "name=x", "--preset", "fast"}, exitUsage, `unknown preset "fast"`},
		{"bad run id", []string{"run", writeFile(t, "ok.bot", "compute c:\n  expr:\n    x: \"1\"\nworkflow w:\n  entry: c\n  c -> done\n"), "--run-id", "Bad Id", "--store-dir", st}, exitUsage, "--run-id"},
		{"bad var syntax", []string{"run", bad, "--var", "novalue"}, exitUsage, "write name=value"},
		{"unknown run", []string{"runs", "show", "nope", "--store-dir", st}, exitError, "list runs with iterion runs list"},
		{"no store", []string{"runs", "list", "--store-dir", filepath.Join(st, "missing")}, exitError, "no iterion store at"},
		{"resume needs id", []string{"resume"}, exitUsage, "resume needs --run-id"},
	}
	for _, tc := range tests {
		// Serial: the cases use the one store in turn, some as its owner.
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.args...)
			if code != tc.wantCode || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d containing %q", code, errOut, tc.wantCode, tc.wantErr)
			}
		})
	}
}

// asker is a scripted async agent: it posts two questions, tells the test,
// and finishes.
type asker struct{ posted chan []string }

func (a *asker) Capabilities() engine.Capabilities { return engine.Capabilities{AsyncQuestions: true} }
func (a *asker) Execute(ctx context.Context, task *engine.Task) (*engine.Result, error) {
	if task.PostQuestion == nil {
		return &engine.Result{Output: map[string]any{"readme": task.User}}, nil
	}
	var ids []string
	for _, q := range []string{"Which licence?", "Minimum Go version?"} {
		id, err := task.PostQuestion(ctx, engine.AsyncQuestion{Question: q})
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	a.posted <- ids
	return &engine.Result{Output: map[string]any{"draft": "TODO(licence)", "open_questions": []any{}}}, nil
}

func TestRunsAnswerThroughTheOwner(t *testing.T) {
	t.Parallel()
	a := &asker{posted: make(chan []string, 1)}
	c := newCLI(t)
	c.useBackend(a)

	st := filepath.Join(t.TempDir(), "st")
	wf := "../../examples/async-questions/main.bot"
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		// Not a terminal: the run waits at its gate for answers through
		// the socket.
		code, out, errOut := c.run("run", wf, "--store-dir", st, "--run-id", "async-1")
		done <- result{code, out, errOut}
	}()
	ids := <-a.posted

	// While the run owns the store, a second run gets a clear error.
	var code int
	var out, errOut string
	code, _, errOut = c.run("run", wf, "--store-dir", st)
	if code != exitError || !strings.Contains(errOut, "is in use by another iterion process") {
		t.Errorf("second owner: exit %d, %s", code, errOut)
	}
	code, out, errOut = c.run("runs", "questions", "async-1", "--store-dir", st)
	var listed struct {
		Interactions []engine.Interaction `json:"interactions"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &listed) != nil || len(listed.Interactions) != 2 {
		t.Fatalf("runs questions: exit %d\n%s%s", code, out, errOut)
	}
	if listed.Interactions[0].ID != "async-1_draft_async_1" || listed.Interactions[0].Question() != "Which licence?" {
		t.Errorf("first question = %+v", listed.Interactions[0])
	}
	code, _, errOut = c.run("runs", "answer", "async-1", ids[0], " ", "--store-dir", st)
	if code != exitUsage || !strings.Contains(errOut, "answer text is required") {
		t.Errorf("empty answer: exit %d, %s", code, errOut)
	}
	code, _, errOut = c.run("runs", "answer", "async-1", "async-1_draft_async_9", "MIT", "--store-dir", st)
	if code != exitError || !strings.Contains(errOut, "not found") {
		t.Errorf("unknown question: exit %d, %s", code, errOut)
	}
	for i, id := range ids {
		code, out, errOut = c.run("runs", "answer", "async-1", id, []string{"MIT", "Go 1.26"}[i], "--store-dir", st)
		if code != exitOK || !strings.Contains(out, "answer to "+id+" recorded") {
			t.Fatalf("runs answer: exit %d\n%s%s", code, out, errOut)
		}
	}
	r := <-done
	if r.code != exitOK || !strings.Contains(r.out, "run async-1 finished") {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.out, r.err)
	}
	// Once the run is over (no owner), a second answer is still refused.
	code, _, errOut = c.run("runs", "answer", "async-1", ids[0], "GPL", "--store-dir", st)
	if code != exitError || !strings.Contains(errOut, "already answered") {
		t.Errorf("second answer: exit %d, %s", code, errOut)
	}
}

// With --no-interactive, a run that must wait for answers ends the
// command (exit 0), parked in the store with its gate's deadline; the
// answer that releases it resumes it in the answering command.
func TestNoInteractiveParksAtTheGate(t *testing.T) {
	t.Parallel()
	a := &asker{posted: make(chan []string, 1)}
	c := newCLI(t)
	c.useBackend(a)
	st := filepath.Join(t.TempDir(), "st")
	code, out, errOut := c.run("run", "../../examples/async-questions/main.bot", "--store-dir", st, "--run-id", "park-1", "--no-interactive")
	ids := <-a.posted
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"run park-1 paused at node gate, waiting for the answers to its questions until ",
		"  iterion runs answer park-1 " + ids[0] + " \"…\" --store-dir " + st + "\n",
		"  iterion runs answer park-1 " + ids[1] + " \"…\" --store-dir " + st + "\n",
		"the last answer continues the run\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("run's output lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = c.run("runs", "answer", "park-1", ids[0], "MIT", "--store-dir", st)
	if code != exitOK || strings.Contains(out, "continues") {
		t.Fatalf("first answer: exit %d\n%s%s; want it recorded, the run still waiting", code, out, errOut)
	}
	code, out, errOut = c.run("runs", "answer", "park-1", ids[1], "Go 1.26", "--store-dir", st)
	if code != exitOK || !strings.Contains(out, "run park-1 continues here") || !strings.Contains(out, "run park-1 is finished") {
		t.Fatalf("last answer: exit %d\n%s%s; want the run resumed here and finished", code, out, errOut)
	}
}

// awaiter posts a question, then calls the await_answers tool, which
// pauses the run until the question is answered; resumed, it reads the
// answers and finishes.
type awaiter struct {
	posted  chan string
	resumed chan string
}

func (a *awaiter) Capabilities() engine.Capabilities {
	return engine.Capabilities{AsyncQuestions: true}
}
func (a *awaiter) Execute(ctx context.Context, task *engine.Task) (*engine.Result, error) {
	if task.ResumeAnswer != "" {
		a.resumed <- task.ResumeAnswer
		return &engine.Result{Output: map[string]any{"done": true}}, nil
	}
	id, err := task.PostQuestion(ctx, engine.AsyncQuestion{Question: "Deploy to which region?"})
	if err != nil {
		return nil, err
	}
	pending, err := task.PendingQuestions(ctx)
	if err != nil {
		return nil, err
	}
	a.posted <- id
	return nil, &engine.NeedsInteractionError{AwaitPending: pending, PendingToolUseID: "tool-1"}
}

func TestAwaitToolPauseResumesByItself(t *testing.T) {
	t.Parallel()
	a := &awaiter{posted: make(chan string, 1), resumed: make(chan string, 1)}
	c := newCLI(t)
	c.useBackend(a)
	st := filepath.Join(t.TempDir(), "st")
	wf := writeFile(t, "deploy.bot", "agent deploy:\n  model: \"anthropic/x\"\n  interaction: async\nworkflow w:\n  entry: deploy\n  deploy -> done\n")
	// The run's progress goes through a pipe, so the test can wait for the
	// moment the run is paused on the tool before answering.
	pr, pw := io.Pipe()
	done := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		// Not a terminal, and prompts not refused: the command waits for
		// the answers through its socket.
		code := c.exec(context.Background(), nil, &out, pw, "run", wf, "--store-dir", st, "--run-id", "dep-1")
		pw.Close()
		done <- fmt.Sprintf("%d %s", code, out.String())
	}()
	paused := make(chan struct{})
	go func() {
		// paused is closed at the line, or when the output ends without it
		// (the assertions below then say what happened instead of hanging).
		defer func() { _, _ = io.Copy(io.Discard, pr) }()
		defer close(paused)
		sc := bufio.NewScanner(pr)
		for sc.Scan() && !strings.Contains(sc.Text(), "waits for the answers") {
		}
	}()
	id := <-a.posted
	<-paused
	code, out, errOut := c.run("runs", "answer", "dep-1", id, "eu-west", "--store-dir", st)
	if code != exitOK || !strings.Contains(out, "run dep-1 continues in the store's owner") {
		t.Fatalf("runs answer: exit %d\n%s%s", code, out, errOut)
	}
	if got := <-a.resumed; !strings.Contains(got, "A: eu-west") || !strings.HasPrefix(got, "All posted questions are answered:") {
		t.Errorf("the agent read back %q", got)
	}
	if r := <-done; !strings.HasPrefix(r, "0 ") || !strings.Contains(r, "run dep-1 finished") {
		t.Errorf("run: %s", r)
	}
}
