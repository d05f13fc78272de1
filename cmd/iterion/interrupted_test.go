package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// A run whose process was killed mid-node keeps its status, running; runs
// list and runs show label it interrupted, naming the dead owner's pid and
// the command that continues it, which works.
func TestInterruptedRunsAreLabelled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf, log := toolChain(t, dir)
	st := filepath.Join(dir, "st")
	crashed := child(t, engine.FailAfterExec+":2", "run", wf, "--store-dir", st, "--run-id", "c1", "--no-interactive", "--var", "log=ran.log")
	out, err := crashed.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("the child was not killed at the failpoint: %v\n%s", err, out)
	}
	pid := crashed.Process.Pid
	gone := fmt.Sprintf("interrupted (owner pid %d is gone)", pid)

	_, list := runChild(t, "", "runs", "list", "--store-dir", st)
	if got := listedStatus(list, "c1"); got != "interrupted" {
		t.Errorf("runs list does not label c1 interrupted:\n%s", list)
	}
	if want := "c1 is " + gone + ": continue it with: iterion resume --run-id c1 --store-dir " + st; !strings.Contains(list, want) {
		t.Errorf("runs list lacks %q:\n%s", want, list)
	}
	_, show := runChild(t, "", "runs", "show", "c1", "--store-dir", st)
	for _, want := range []string{
		"status: " + gone + ", stored as running\n",
		"node: t2 (tool), stopped mid-node: it runs again on resume\n",
		"outputs:\n  t1:\n",
	} {
		if !strings.Contains(show, want) {
			t.Errorf("runs show lacks %q:\n%s", want, show)
		}
	}
	// No new status: the record still says running.
	if _, js := runChild(t, "", "runs", "show", "c1", "--store-dir", st, "--json"); !strings.Contains(js, `"status": "running"`) || !strings.Contains(js, fmt.Sprintf(`"owner_pid": %d`, pid)) {
		t.Errorf("runs show --json:\n%s", js)
	}
	resume := adviceLine(t, show, "continue it with: ")
	code, rout, errOut := follow(newCLI(t), strings.TrimPrefix(resume, "continue it with: "), nil)
	if code != exitOK || !strings.Contains(rout, "run c1 finished") {
		t.Fatalf("following %q: exit %d\n%s%s", resume, code, rout, errOut)
	}
	if got := readLog(t, log); got != "t1 t2 t2 t3" {
		t.Errorf("nodes ran %q, want the interrupted t2 twice", got)
	}
}

// While another process holds the store, a run it does not own is
// interrupted, and the advice says to wait for the holder; the holder's own
// run is running.
func TestInterruptedUnderALiveOwner(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf, _ := toolChain(t, dir)
	st := filepath.Join(dir, "st")
	if killed, out := runChild(t, engine.FailAfterExec+":1", "run", wf, "--store-dir", st, "--run-id", "c2", "--no-interactive", "--var", "log=ran.log"); !killed {
		t.Fatalf("not killed:\n%s", out)
	}
	gate, _ := filepath.Abs("../../examples/async-questions/main.bot")
	// Without a terminal and without --no-interactive, the gate waits in
	// the process, which holds the store meanwhile.
	holder := child(t, "", "run", gate, "--store-dir", st, "--run-id", "g2")
	stderr, err := holder.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	watchdog := time.AfterFunc(time.Minute, func() { _ = holder.Process.Kill() })
	defer watchdog.Stop()
	// The holder runs its gate once it has posted both questions.
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "▶ await_answers gate") {
	}
	go io.Copy(io.Discard, stderr)

	_, list := runChild(t, "", "runs", "list", "--store-dir", st)
	if listedStatus(list, "c2") != "interrupted" || listedStatus(list, "g2") != "running" {
		t.Errorf("runs list:\n%s", list)
	}
	if want := fmt.Sprintf("once pid %d, which holds the store, exits, continue it with: iterion resume --run-id c2 --store-dir %s", holder.Process.Pid, st); !strings.Contains(list, want) {
		t.Errorf("runs list lacks %q:\n%s", want, list)
	}
	_, show := runChild(t, "", "runs", "show", "g2", "--store-dir", st)
	for _, want := range []string{"status: running\n", "node: gate (await_answers) (running)\n", "open questions:\n  g2_draft_async_1 (from draft): Which licence?\n"} {
		if !strings.Contains(show, want) {
			t.Errorf("runs show g2 lacks %q:\n%s", want, show)
		}
	}
}

// listedStatus is the STATUS column of run id in the table of runs list.
func listedStatus(table, id string) string {
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == id {
			return f[1]
		}
	}
	return ""
}
