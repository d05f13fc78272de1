package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/backends/claudecode"
	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// Crash tests run the real program in a child process (this test binary,
// re-executed with ITERION_TEST_MAIN=1, so the scripted backend below is
// available), stop it with SIGKILL at a named failpoint, and restart it on
// the same store.

// testRuntimeDir is the tests' private directory of the owners' sockets
// and tokens, not the user's: a short one, for the socket path limit. The
// tests' Apps and children get it in their environment.
var testRuntimeDir string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == runchannel.ExecCommand {
		// The run channel's wrapper in a node's sandbox, which runs this
		// binary as the iterion binary (os.Executable) with the agent
		// CLI's own environment.
		os.Exit(runchannel.Exec(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && (os.Args[1] == "mcp-ask-user" || os.Args[1] == claudecode.HookCommand) {
		// Claude Code's MCP server and hook in its sandbox, which run this
		// binary as the iterion binary with Claude Code's environment.
		app := &App{Args: os.Args[1:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
		code := app.Run(context.Background())
		app.Close()
		os.Exit(code)
	}
	if os.Getenv("ITERION_TEST_MAIN") == "1" {
		app := &App{Args: os.Args[1:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, WritePace: time.Millisecond,
			Backends: func(func(string) string) (map[string]engine.Backend, error) {
				return map[string]engine.Backend{"claw": twoQuestions{}}, nil
			}}
		if os.Getenv("ITERION_TEST_BACKENDS") == "build" {
			app.Backends = nil // the build's, from the environment
		}
		code := app.Run(context.Background())
		app.Close()
		os.Exit(code)
	}
	rt, err := os.MkdirTemp("", "itrt")
	if err != nil {
		panic(err)
	}
	testRuntimeDir = filepath.Join(rt, "run")
	code := m.Run()
	os.RemoveAll(rt)
	os.Exit(code)
}

// childEnv is the environment of a child: the process's, the tests'
// private directory, and extra.
func childEnv(extra ...string) []string {
	return append(append(os.Environ(), "ITERION_TEST_MAIN=1", "ITERION_RUNTIME_DIR="+testRuntimeDir), extra...)
}

// twoQuestions is the child's scripted agent: the async node posts two
// questions and returns a draft; any other node returns its prompt.
type twoQuestions struct{}

func (twoQuestions) Capabilities() engine.Capabilities {
	return engine.Capabilities{AsyncQuestions: true}
}
func (twoQuestions) Execute(ctx context.Context, task *engine.Task) (*engine.Result, error) {
	if task.PostQuestion == nil {
		return &engine.Result{Output: map[string]any{"readme": task.User}}, nil
	}
	for _, q := range []string{"Which licence?", "Minimum Go version?"} {
		if _, err := task.PostQuestion(ctx, engine.AsyncQuestion{Question: q}); err != nil {
			return nil, err
		}
	}
	return &engine.Result{Output: map[string]any{"draft": "TODO", "open_questions": []any{}}}, nil
}

// child runs the program in a child process.
func child(t testing.TB, failpoint string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = childDir(t)
	cmd.Env = childEnv("ITERION_FAILPOINT=" + failpoint)
	return cmd
}

// childDirs are the working directories of each test's children: the
// workspace of the runs they execute, the same for all of a test's
// children (a resume works where the run started).
var childDirs sync.Map

func childDir(t testing.TB) string {
	if d, ok := childDirs.Load(t.Name()); ok {
		return d.(string)
	}
	d := t.TempDir()
	childDirs.Store(t.Name(), d)
	t.Cleanup(func() { childDirs.Delete(t.Name()) })
	return d
}

// runChild runs it to its end and reports whether SIGKILL stopped it.
func runChild(t *testing.T, failpoint string, args ...string) (killed bool, out string) {
	t.Helper()
	b, err := child(t, failpoint, args...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, string(b)
		}
	}
	return false, string(b)
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// toolChain is a workflow of three tools that note their runs in the file
// named by var log, relative to the workspace (the sandbox lets them write
// nowhere else), and the file's path as the test sees it.
func toolChain(t *testing.T, dir string) (wf, log string) {
	log = filepath.Join(childDir(t), "ran.log")
	src := "vars:\n  log: string\n"
	for _, n := range []string{"t1", "t2", "t3"} {
		src += "tool " + n + ":\n  command: \"echo " + n + " >> {{vars.log}}\"\n"
	}
	src += "workflow w:\n  entry: t1\n  t1 -> t2 -> t3\n  t3 -> done\n"
	return writeFile(t, "chain.bot", src), log
}

func TestCrashDuringNodeRerunsOnlyThatNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf, log := toolChain(t, dir)
	st := filepath.Join(dir, "st")
	killed, out := runChild(t, engine.FailAfterExec+":2", "run", wf, "--store-dir", st, "--run-id", "c1", "--no-interactive", "--var", "log=ran.log")
	if !killed {
		t.Fatalf("the child was not killed at the failpoint:\n%s", out)
	}
	if got := readLog(t, log); got != "t1 t2" {
		t.Fatalf("before the crash: %q", got)
	}
	killed, out = runChild(t, "", "resume", "--run-id", "c1", "--store-dir", st)
	if killed || !strings.Contains(out, "run c1 finished") {
		t.Fatalf("resume:\n%s", out)
	}
	if got := readLog(t, log); got != "t1 t2 t2 t3" {
		t.Errorf("nodes ran %q, want only the interrupted t2 twice", got)
	}
	if _, out := runChild(t, "", "runs", "recover", "--store-dir", st); !strings.Contains(out, "no interrupted run") {
		t.Errorf("recover after the resume:\n%s", out)
	}
}

func TestCrashBetweenNodesSkipsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf, log := toolChain(t, dir)
	st := filepath.Join(dir, "st")
	if killed, out := runChild(t, engine.FailBetweenNodes+":1", "run", wf, "--store-dir", st, "--run-id", "c2", "--no-interactive", "--var", "log=ran.log"); !killed {
		t.Fatalf("not killed:\n%s", out)
	}
	// Another run on the store notes the interrupted one.
	other := writeFile(t, "other.bot", "compute c:\n  expr:\n    x: \"1\"\nworkflow w:\n  entry: c\n  c -> done\n")
	if _, out := runChild(t, "", "run", other, "--store-dir", st); !strings.Contains(out, "note: run c2 was interrupted") {
		t.Errorf("no note about the interrupted run:\n%s", out)
	}
	if _, out := runChild(t, "", "runs", "resume", "c2", "--store-dir", st); !strings.Contains(out, "run c2 finished") {
		t.Fatalf("runs resume:\n%s", out)
	}
	if got := readLog(t, log); got != "t1 t2 t3" {
		t.Errorf("nodes ran %q, want each once", got)
	}
}

// gateDeadline reads the stored deadline of the parked gate.
func gateDeadline(t *testing.T, st, runID string) time.Time {
	t.Helper()
	db, err := store.Open(st, store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	raw, err := db.Checkpoint(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var ck struct {
		Gates map[string]time.Time `json:"gates"`
	}
	if err := json.Unmarshal(raw, &ck); err != nil || ck.Gates["/gate"].IsZero() {
		t.Fatalf("no parked gate in the checkpoint (%v): %s", err, raw)
	}
	return ck.Gates["/gate"]
}

func TestCrashWhileParkedKeepsTheDeadline(t *testing.T) {
	t.Parallel()
	st := filepath.Join(t.TempDir(), "st")
	wf, _ := filepath.Abs("../../examples/async-questions/main.bot")
	if killed, out := runChild(t, engine.FailGateParked, "run", wf, "--store-dir", st, "--run-id", "g1", "--no-interactive"); !killed {
		t.Fatalf("not killed at the gate:\n%s", out)
	}
	first := gateDeadline(t, st, "g1")
	// Restarted, the gate is parked again with the same deadline.
	if killed, out := runChild(t, engine.FailGateParked, "resume", "--run-id", "g1", "--store-dir", st); !killed {
		t.Fatalf("not killed at the re-armed gate:\n%s", out)
	}
	if again := gateDeadline(t, st, "g1"); !again.Equal(first) {
		t.Errorf("deadline moved from %s to %s across the restart", first, again)
	}
	// Answers given while nothing runs are honoured on resume.
	for i, answer := range []string{"MIT", "1.26"} {
		id := "g1_draft_async_" + string(rune('1'+i))
		if _, out := runChild(t, "", "runs", "answer", "g1", id, answer, "--store-dir", st); !strings.Contains(out, "recorded") || !strings.Contains(out, "iterion resume --run-id g1") {
			t.Fatalf("runs answer without an owner:\n%s", out)
		}
	}
	if _, out := runChild(t, "", "resume", "--run-id", "g1", "--store-dir", st); !strings.Contains(out, "run g1 finished") {
		t.Fatalf("resume:\n%s", out)
	}
}

func TestCrashAfterAnswerCommittedLosesNothing(t *testing.T) {
	t.Parallel()
	st := filepath.Join(t.TempDir(), "st")
	wf, _ := filepath.Abs("../../examples/async-questions/main.bot")
	owner := child(t, engine.FailAnswerCommitted, "run", wf, "--store-dir", st, "--run-id", "a1")
	stderr, err := owner.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	// A watchdog, not a wait: should the owner never post its questions,
	// killing it ends the scan below instead of hanging the suite.
	watchdog := time.AfterFunc(time.Minute, func() { _ = owner.Process.Kill() })
	defer watchdog.Stop()
	t.Cleanup(func() { _ = owner.Process.Kill() })
	// Wait for the owner to post both questions (its progress lines say so).
	sc := bufio.NewScanner(stderr)
	for posted := 0; posted < 2 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "? question ") {
			posted++
		}
	}
	go io.Copy(io.Discard, stderr)
	// The owner dies after storing the answer, before acknowledging it.
	_, out := runChild(t, "", "runs", "answer", "a1", "a1_draft_async_1", "MIT", "--store-dir", st)
	if strings.Contains(out, "recorded") {
		t.Errorf("the answer was acknowledged although the owner died first:\n%s", out)
	}
	werr := owner.Wait()
	var exit *exec.ExitError
	if !errors.As(werr, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("owner did not die at the failpoint: %v", werr)
	}
	// The stored answer survived; the other question is still open.
	_, out = runChild(t, "", "runs", "questions", "a1", "--store-dir", st)
	if strings.Contains(out, "a1_draft_async_1") || !strings.Contains(out, "a1_draft_async_2") {
		t.Errorf("pending after the crash:\n%s", out)
	}
	_, out = runChild(t, "", "runs", "answer", "a1", "a1_draft_async_1", "GPL", "--store-dir", st)
	if !strings.Contains(out, "already answered") {
		t.Errorf("the first answer was lost:\n%s", out)
	}
	runChild(t, "", "runs", "answer", "a1", "a1_draft_async_2", "1.26", "--store-dir", st)
	if _, out := runChild(t, "", "resume", "--run-id", "a1", "--store-dir", st); !strings.Contains(out, "run a1 finished") {
		t.Fatalf("resume:\n%s", out)
	}
}

func TestRecoverContinuesInterruptedRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf, log := toolChain(t, dir)
	st := filepath.Join(dir, "st")
	if killed, out := runChild(t, engine.FailAfterExec+":1", "run", wf, "--store-dir", st, "--run-id", "r1", "--no-interactive", "--var", "log=ran.log"); !killed {
		t.Fatalf("not killed:\n%s", out)
	}
	killed, out := runChild(t, "", "runs", "recover", "--store-dir", st)
	if killed || !strings.Contains(out, "run r1 finished") {
		t.Fatalf("recover:\n%s", out)
	}
	if got := readLog(t, log); got != "t1 t1 t2 t3" {
		t.Errorf("nodes ran %q, want the interrupted t1 twice and the rest once", got)
	}
}

// serve continues, at start, a run a killed process left interrupted.
func TestServeContinuesInterruptedRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf, log := toolChain(t, dir)
	st := filepath.Join(dir, "st")
	if killed, out := runChild(t, engine.FailAfterExec+":2", "run", wf, "--store-dir", st, "--run-id", "s1", "--no-interactive", "--var", "log=ran.log"); !killed {
		t.Fatalf("not killed:\n%s", out)
	}
	srv := child(t, "", "serve", "--addr", "127.0.0.1:0", "--store-dir", st)
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	// Only once the server owns the store may other commands run: before
	// that, one of them could open the store itself and keep serve out.
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || !strings.Contains(sc.Text(), "listening on") {
		t.Fatalf("serve did not start: %q", sc.Text())
	}
	go io.Copy(io.Discard, stdout)
	// The run finishes in the server: wait for it through the socket API,
	// as another command would. Its timeout is the watchdog.
	if _, out := runChild(t, "", "runs", "wait", "s1", "--until", "finished", "--timeout", "1m", "--store-dir", st); !strings.Contains(out, "run s1 is finished") {
		t.Fatalf("run s1 did not finish under serve:\n%s", out)
	}
	_ = srv.Process.Signal(syscall.SIGTERM)
	_ = srv.Wait()
	if got := readLog(t, log); got != "t1 t2 t2 t3" {
		t.Errorf("nodes ran %q, want only the interrupted t2 twice", got)
	}
}
