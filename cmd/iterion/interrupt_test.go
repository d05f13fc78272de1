package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// A run as a person drives it from a terminal: typed answers, Ctrl-C (the
// command's context cancelled, as main does on SIGINT), and the advice it
// prints, followed.

// runInTerminal starts `iterion args…` in-process, a command of c,
// reading the terminal tty, printing progress and prompts on scr; wait
// returns the exit code and stdout.
func runInTerminal(t *testing.T, c *testCLI, ctx context.Context, tty interface {
	Read([]byte) (int, error)
}, scr *screen, args ...string) (wait func() (int, string)) {
	t.Helper()
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		var out bytes.Buffer
		code := c.exec(ctx, tty, &out, scr, args...)
		done <- result{code, out.String()}
	}()
	return func() (int, string) {
		select {
		case r := <-done:
			return r.code, r.out
		case <-time.After(time.Minute): // a watchdog, not a wait
			t.Fatalf("the command did not end; its screen:\n%s", scr)
			return 0, ""
		}
	}
}

// adviceLine returns the line of out that starts with prefix.
func adviceLine(t *testing.T, out, prefix string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("no line starting %q in:\n%s", prefix, out)
	return ""
}

// follow runs a command the CLI advised, "iterion …", as it is, but for
// its "…" placeholders, filled from fill (field=… by the field, "…" by the
// word before it). The advice names the store when it is not the default
// one (the tests' never is). It runs as a command of c.
func follow(c *testCLI, command string, fill map[string]string) (int, string, string) {
	t := c.t
	t.Helper()
	// A remark after the command, "(node x runs again)" or ", or …", is
	// not part of it.
	if i := strings.IndexAny(command, "(,"); i >= 0 {
		command = command[:i]
	}
	words := strings.Fields(strings.TrimPrefix(command, "iterion "))
	for i, w := range words {
		switch {
		case strings.HasSuffix(w, "=…"):
			k := strings.TrimSuffix(w, "=…")
			words[i] = k + "=" + fill[k]
		case w == `"…"`:
			words[i] = fill[words[i-1]]
		}
		if strings.Contains(words[i], "…") {
			t.Fatalf("nothing fills %q of %q", w, command)
		}
	}
	return c.run(words...)
}

// Ctrl-C at a human node's prompt leaves the run paused and prints the
// node, the form's fields and the resume command that answers them; that
// command, filled in, finishes the run.
func TestCtrlCAtThePrompt(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	_, tty := newPTY(t)
	st := filepath.Join(t.TempDir(), "st")
	wf := writeFile(t, "release.bot", humanWorkflow)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scr := newScreen()
	wait := runInTerminal(t, c, ctx, tty, scr, "run", wf, "--store-dir", st, "--run-id", "rel-1", "--var", "version=2.0")
	scr.waitFor(t, "approved [yes or no]: ", 1)
	cancel()
	code, out := wait()
	if code != exitOK {
		t.Fatalf("exit %d, want 0 (paused)\n%s%s", code, out, scr)
	}
	for _, want := range []string{
		"run rel-1 paused at node approve, waiting for the answers of rel-1_approve:\n",
		"  Approve the release of 2.0?\n",
		"fields:\n  approved: bool\n  reason: string\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "<nil>") {
		t.Errorf("stdout has <nil>:\n%s", out)
	}
	advice := adviceLine(t, out, "answer with: ")
	if want := "answer with: iterion runs answer rel-1 rel-1_approve approved=… reason=… --store-dir " + st; advice != want {
		t.Errorf("advice %q, want %q", advice, want)
	}
	code, out, errOut := follow(c, strings.TrimPrefix(advice, "answer with: "), map[string]string{"approved": "yes", "reason": "tested"})
	if code != exitOK || !strings.Contains(out, "run rel-1 is finished") {
		t.Errorf("following %q: exit %d\n%s%s", advice, code, out, errOut)
	}
}

// awaitWorkflow is one async agent that waits, in the await_answers tool,
// for the question it posted.
const awaitWorkflow = "agent deploy:\n  model: \"anthropic/x\"\n  interaction: async\nworkflow w:\n  entry: deploy\n  deploy -> done\n"

// Ctrl-C while the run waits in the await_answers tool prints the question
// ids and how to answer them; the answer continues the run to its end.
func TestCtrlCWhileTheAgentAwaits(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	a := &awaiter{posted: make(chan string, 1), resumed: make(chan string, 1)}
	c.useBackend(a)
	st := filepath.Join(t.TempDir(), "st")
	wf := writeFile(t, "deploy.bot", awaitWorkflow)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scr := newScreen()
	wait := runInTerminal(t, c, ctx, strings.NewReader(""), scr, "run", wf, "--store-dir", st, "--run-id", "dep-1")
	id := <-a.posted
	scr.waitFor(t, "waits for the answers", 1)
	cancel()
	code, out := wait()
	if code != exitOK {
		t.Fatalf("exit %d, want 0 (paused)\n%s%s", code, out, scr)
	}
	for _, want := range []string{
		"run dep-1 paused at node deploy, waiting for the answers to its questions",
		"  " + id + " (from deploy): Deploy to which region?\n",
		"the last answer continues the run\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	answer := adviceLine(t, out, "iterion runs answer dep-1 ")
	code, out, errOut := follow(c, answer, map[string]string{id: "eu-west"})
	if code != exitOK || !strings.Contains(out, "run dep-1 is finished") {
		t.Fatalf("following %q: exit %d\n%s%s", answer, code, out, errOut)
	}
	if got := <-a.resumed; !strings.Contains(got, "A: eu-west") {
		t.Errorf("the agent read back %q", got)
	}
}

// blocker is an agent whose first call runs until it is cancelled; later
// calls finish at once.
type blocker struct {
	started chan struct{}
	calls   int
}

func (b *blocker) Capabilities() engine.Capabilities { return engine.Capabilities{} }
func (b *blocker) Execute(ctx context.Context, task *engine.Task) (*engine.Result, error) {
	b.calls++
	if b.calls == 1 {
		close(b.started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &engine.Result{Output: map[string]any{"text": "done at last"}}, nil
}

// Ctrl-C mid-node names the node, which runs again on the resume the
// advice names.
func TestCtrlCMidNode(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	b := &blocker{started: make(chan struct{})}
	c.useBackend(b)
	st := filepath.Join(t.TempDir(), "st")
	wf := writeFile(t, "work.bot", "agent work:\n  model: \"anthropic/x\"\nworkflow w:\n  entry: work\n  work -> done\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scr := newScreen()
	wait := runInTerminal(t, c, ctx, strings.NewReader(""), scr, "run", wf, "--store-dir", st, "--run-id", "blk-1")
	<-b.started
	cancel()
	code, out := wait()
	if code != exitError {
		t.Fatalf("exit %d, want 1 (cancelled)\n%s%s", code, out, scr)
	}
	if want := "run blk-1 cancelled in node work [CANCELLED]: run cancelled\n"; !strings.Contains(out, want) {
		t.Errorf("stdout lacks %q:\n%s", want, out)
	}
	resume := adviceLine(t, out, "continue it with: ")
	if !strings.HasSuffix(resume, "(node work runs again)") {
		t.Errorf("advice %q does not say that work runs again", resume)
	}
	code, out, errOut := follow(c, strings.TrimPrefix(resume, "continue it with: "), nil)
	if code != exitOK || !strings.Contains(out, "run blk-1 finished\noutput of work:\n  text: done at last\n") {
		t.Errorf("following %q: exit %d\n%s%s", resume, code, out, errOut)
	}
}

// Ctrl-C while the await_answers gate waits lists its open questions; the
// answers and the resume the advice names pass the gate.
func TestCtrlCAtTheGate(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	a := &asker{posted: make(chan []string, 1)}
	c.useBackend(a)
	st := filepath.Join(t.TempDir(), "st")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scr := newScreen()
	wait := runInTerminal(t, c, ctx, strings.NewReader(""), scr, "run", "../../examples/async-questions/main.bot", "--store-dir", st, "--run-id", "g-1")
	ids := <-a.posted
	scr.waitFor(t, "▶ await_answers gate", 1)
	cancel()
	code, out := wait()
	if code != exitError {
		t.Fatalf("exit %d, want 1 (cancelled)\n%s%s", code, out, scr)
	}
	for _, want := range []string{
		"run g-1 cancelled in node gate [CANCELLED]: run cancelled\n",
		"open questions:\n  " + ids[0] + " (from draft): Which licence?\n  " + ids[1] + " (from draft): Minimum Go version?\n",
		"continue it with: iterion resume --run-id g-1 --store-dir " + st + " (node gate runs again)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	fill := map[string]string{ids[0]: "MIT", ids[1]: "Go 1.26"}
	for _, id := range ids {
		answer := adviceLine(t, out, "iterion runs answer g-1 "+id)
		if code, out, errOut := follow(c, answer, fill); code != exitOK {
			t.Fatalf("following %q: exit %d\n%s%s", answer, code, out, errOut)
		}
	}
	resume := strings.TrimPrefix(adviceLine(t, out, "continue it with: "), "continue it with: ")
	code, out, errOut := follow(c, resume, nil)
	if code != exitOK || !strings.Contains(out, "run g-1 finished\noutput of finalize:\n  readme: ") {
		t.Errorf("following %q: exit %d\n%s%s", resume, code, out, errOut)
	}
}

// An answer that does not fit its field is refused at once, naming what
// the field accepts, and the field is asked again; the run then goes on
// with the answers that fit.
func TestPromptAsksAgain(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	ptmx, tty := newPTY(t)
	st := filepath.Join(t.TempDir(), "st")
	wf := writeFile(t, "release.bot", `
schema decision:
  approved: bool
  channel: string [enum: "stable", "beta"]
  copies: int

human approve:
  output: decision

workflow release:
  entry: approve
  approve -> done
`)
	scr := newScreen()
	wait := runInTerminal(t, c, context.Background(), tty, scr, "run", wf, "--store-dir", st, "--run-id", "p-1", "--json")
	steps := []struct{ prompt, typed, refusal string }{
		{"approved [yes or no]: ", "perhaps", `"perhaps" is not a yes/no answer (use true or false); try again`},
		{"approved [yes or no]: ", "yes", ""},
		{"channel [one of: stable, beta]: ", "nightly", `"nightly" is not one of: stable, beta; try again`},
		{"channel [one of: stable, beta]: ", "beta", ""},
		{"copies [a whole number]: ", "two", `"two" is not a whole number; try again`},
		{"copies [a whole number]: ", "2", ""},
	}
	shown := map[string]int{}
	for _, s := range steps {
		shown[s.prompt]++
		scr.waitFor(t, s.prompt, shown[s.prompt])
		if _, err := ptmx.WriteString(s.typed + "\n"); err != nil {
			t.Fatal(err)
		}
		if s.refusal != "" {
			scr.waitFor(t, s.refusal, 1)
		}
	}
	code, out := wait()
	if code != exitOK || !strings.Contains(out, `"status": "finished"`) {
		t.Fatalf("exit %d\n%s%s", code, out, scr)
	}
	for _, want := range []string{`"approved": true`, `"channel": "beta"`, `"copies": 2`} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %s:\n%s", want, out)
		}
	}
}

// screen collects what a command prints, for a test to wait until a text
// shows.
type screen struct {
	mu      sync.Mutex
	text    strings.Builder
	changed chan struct{}
}

func newScreen() *screen { return &screen{changed: make(chan struct{})} }

func (s *screen) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.text.Write(b)
	close(s.changed)
	s.changed = make(chan struct{})
	return len(b), nil
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.text.String()
}

// waitFor returns once text shows for the n-th time. The minute is a
// watchdog that fails the test instead of hanging it, not a wait.
func (s *screen) waitFor(t testing.TB, text string, n int) {
	t.Helper()
	watchdog := time.After(time.Minute)
	for {
		s.mu.Lock()
		seen, changed := strings.Count(s.text.String(), text), s.changed
		s.mu.Unlock()
		if seen >= n {
			return
		}
		select {
		case <-changed:
		case <-watchdog:
			t.Fatalf("%q never showed %d times; the screen:\n%s", text, n, s.String())
		}
	}
}
