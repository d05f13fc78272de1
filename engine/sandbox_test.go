package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/internal/nodesandbox/nodesandboxtest"
)

// A workspace past its quota after a node fails the run SANDBOX_LIMIT,
// saying what to do; under the quota the same node passes.
func TestWorkspaceQuota(t *testing.T) {
	w := mustCompile(t, "tool fill:\n  command: \"head -c 300000 /dev/zero > big\"\nworkflow w:\n  entry: fill\n  fill -> done\n")
	for _, tc := range []struct {
		name       string
		quota      int64
		wantStatus engine.Status
	}{
		{"over", 200_000, engine.StatusFailedResumable},
		{"under", 1 << 20, engine.StatusFinished},
		{"none", 0, engine.StatusFinished},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := engine.New(engine.Options{Store: newStore(t), Sandbox: testSandbox(t), Poll: time.Hour, WorkspaceQuota: tc.quota})
			run, err := e.Start(context.Background(), engine.StartRequest{Workflow: w, WorkDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != tc.wantStatus {
				t.Fatalf("status = %s (%s %s), want %s", run.Status, run.FailureCode, run.Error, tc.wantStatus)
			}
			if tc.wantStatus != engine.StatusFinished && (run.FailureCode != engine.CodeSandboxLimit || !strings.Contains(run.Error, "more than its quota of 195.3 KiB")) {
				t.Errorf("failure = %s %q, want SANDBOX_LIMIT naming the quota", run.FailureCode, run.Error)
			}
		})
	}
}

// An engine without a sandbox refuses a workflow with tool nodes before
// the first node, saying so; nothing runs on the host by default.
func TestNoSandboxRefusesTools(t *testing.T) {
	w := mustCompile(t, "tool t:\n  command: \"true\"\nworkflow w:\n  entry: t\n  t -> done\n")
	e := engine.New(engine.Options{Store: newStore(t), Poll: time.Hour})
	_, err := e.Start(context.Background(), engine.StartRequest{Workflow: w, WorkDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "no sandbox to run processes in") {
		t.Fatalf("Start = %v, want a refusal naming the missing sandbox", err)
	}
}

// What a run writes to the HOME kept for its workspace counts against the
// workspace's quota.
func TestWorkspaceQuotaCountsHome(t *testing.T) {
	homes := t.TempDir()
	sb := nodesandboxtest.New(t, nodesandbox.Options{HomeFor: func(ws string) string { return filepath.Join(homes, filepath.Base(ws)) }})
	w := mustCompile(t, "tool fill:\n  command: \"head -c 300000 /dev/zero > $HOME/cache\"\nworkflow w:\n  entry: fill\n  fill -> done\n")
	e := engine.New(engine.Options{Store: newStore(t), Sandbox: sb, Poll: time.Hour, WorkspaceQuota: 200_000})
	run, err := e.Start(context.Background(), engine.StartRequest{Workflow: w, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if run.FailureCode != engine.CodeSandboxLimit || !strings.Contains(run.Error, "(with its HOME) holds more than its quota") {
		t.Errorf("run = %s %s %q, want SANDBOX_LIMIT for the quota", run.Status, run.FailureCode, run.Error)
	}
}

// A value too large for a process's environment fails the node naming
// the reference and what to do, instead of a bare "argument list too
// long" from the kernel.
func TestToolValueTooLarge(t *testing.T) {
	w := mustCompile(t, "vars:\n  big: string\ntool t:\n  command: \"printf %s {{vars.big}} | wc -c\"\nworkflow w:\n  entry: t\n  t -> done\n")
	e := newEngine(t, newStore(t), nil)
	run, err := e.Start(context.Background(), engine.StartRequest{Workflow: w, Vars: map[string]any{"big": strings.Repeat("x", 200<<10)}, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(run.Error, "the value of {{vars.big}} is 204800 bytes, more than a command's environment variable can hold") {
		t.Errorf("run = %s %s %q, want the value named with its size", run.Status, run.FailureCode, run.Error)
	}
}

// A fan-out whose budget sets no parallelism runs at most the engine's
// MaxParallelBranches branches at once (four per core when unset): each
// branch notes how many are running while it runs.
func TestFanOutParallelismFromTheEngine(t *testing.T) {
	var src strings.Builder
	src.WriteString("router split:\n  mode: fan_out_all\n\n")
	for i := range 8 {
		fmt.Fprintf(&src, "tool b%d:\n  command: \"touch running.%d; ls running.* | wc -l >> counts; sleep 0.2; rm running.%d\"\n\n", i, i, i)
	}
	src.WriteString("compute join:\n  await: wait_all\n  expr:\n    ok: \"true\"\n\nworkflow w:\n  entry: split\n")
	for i := range 8 {
		fmt.Fprintf(&src, "  split -> b%d\n  b%d -> join\n", i, i)
	}
	src.WriteString("  join -> done\n")
	w := mustCompile(t, src.String())
	dir := t.TempDir()
	e := engine.New(engine.Options{Store: newStore(t), Sandbox: testSandbox(t), Poll: time.Hour, MaxParallelBranches: 2})
	run, err := e.Start(context.Background(), engine.StartRequest{Workflow: w, WorkDir: dir})
	if err != nil || run.Status != engine.StatusFinished {
		t.Fatalf("run: %v %+v", err, run)
	}
	counts, err := os.ReadFile(filepath.Join(dir, "counts"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(counts))
	if len(lines) != 8 {
		t.Fatalf("%d branches noted, want 8: %q", len(lines), counts)
	}
	for _, l := range lines {
		if n, _ := strconv.Atoi(l); n < 1 || n > 2 {
			t.Errorf("a branch saw %s running, want at most 2", l)
		}
	}
}

// A tool node's start is stored, and told to OnEvent, while it runs, not
// when it finishes: a long step shows a sign of life.
func TestToolNodeStartIsStoredWhenItStarts(t *testing.T) {
	// The tool reads a line from a FIFO: it runs until the test writes one.
	w := mustCompile(t, "tool wait:\n  command: \"read -r line < go\"\nworkflow w:\n  entry: wait\n  wait -> done\n")
	db := newStore(t)
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "go"), 0o600); err != nil {
		t.Fatal(err)
	}
	// release writes the line; it waits for the tool to open the FIFO,
	// unless hurry (the tool may never have started).
	release := func(hurry bool) error {
		flags := os.O_WRONLY
		if hurry {
			flags |= syscall.O_NONBLOCK
		}
		f, err := os.OpenFile(filepath.Join(dir, "go"), flags, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString("go\n")
		return err
	}
	started := make(chan engine.Event, 1)
	e := engine.New(engine.Options{Store: db, Sandbox: testSandbox(t), Poll: time.Hour, OnEvent: func(ev engine.Event) {
		if ev.Type == engine.EventNodeStarted {
			started <- ev
		}
	}})
	done := make(chan error, 1)
	go func() {
		_, err := e.Start(context.Background(), engine.StartRequest{Workflow: w, RunID: "r-live", WorkDir: dir})
		done <- err
	}()
	var ev engine.Event
	select {
	case ev = <-started: // the tool is running: it waits for the file below
	case err := <-done:
		t.Fatalf("the run ended (%v) before its tool node's start was told", err)
	case <-time.After(time.Minute): // a guard, not a wait: the tool never ends by itself
		_ = release(true)
		t.Fatal("no node_started while the tool node runs")
	}
	evs, err := db.Events(context.Background(), ev.RunID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.Type != engine.EventNodeStarted || last.NodeID != "wait" {
		t.Errorf("while the tool runs, the store's last event is %s %s, want node_started wait", last.Type, last.NodeID)
	}
	if err := release(false); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A backend sees the network its node's sandbox: declaration (or the
// workflow's) asks for, so that a CLI backend can tell whether the node may
// use what only the open network allows.
func TestTaskNetwork(t *testing.T) {
	for _, tc := range []struct {
		name, node, workflow string
		want                 engine.Network
	}{
		{name: "none declared", want: engine.NetworkDefault},
		{name: "node open", node: "  sandbox:\n    mode: auto\n    network: open\n", want: engine.NetworkOpen},
		{name: "node model_only", node: "  sandbox:\n    mode: auto\n    network: model_only\n", want: engine.NetworkModelOnly},
		{name: "workflow none", workflow: "  sandbox:\n    mode: auto\n    network: none\n", want: engine.NetworkNone},
		{name: "node without network over a workflow's", node: "  sandbox: auto\n", workflow: "  sandbox:\n    mode: auto\n    network: open\n", want: engine.NetworkDefault},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "agent a:\n  model: \"anthropic/m\"\n  backend: \"claw\"\n  user: \"hi\"\n" + tc.node + "workflow w:\n  entry: a\n" + tc.workflow + "  a -> done\n"
			var got engine.Network = -1
			backend := &script{run: func(_ context.Context, task *engine.Task) (*engine.Result, error) {
				got = task.Network
				return &engine.Result{Output: map[string]any{"text": "ok"}}, nil
			}}
			e := engine.New(engine.Options{Store: newStore(t), Backends: map[string]engine.Backend{"claw": backend}, Poll: time.Hour,
				Sandbox: nodesandboxtest.New(t, nodesandbox.Options{AllowNetwork: true})})
			if run := start(t, e, mustCompile(t, src), nil); run.Status != engine.StatusFinished {
				t.Fatalf("status = %s (%s)", run.Status, run.Error)
			}
			if got != tc.want {
				t.Errorf("Task.Network = %v, want %v", got, tc.want)
			}
		})
	}
}
