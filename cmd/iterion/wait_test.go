package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// fakeRuns is a runsAPI of one run whose status a test changes; each
// change is an event. A live one holds WaitEvents until the next change,
// as an owner does; one that is not answers at once, as the store does.
type fakeRuns struct {
	runsAPI // the calls waitRun does not make
	owner   bool

	mu      sync.Mutex
	run     engine.Run
	seq     int64
	changed chan struct{}
}

func newFakeRuns(status engine.Status, owner bool) *fakeRuns {
	return &fakeRuns{owner: owner, run: engine.Run{ID: "r", Status: status}, seq: 3, changed: make(chan struct{})}
}

func (f *fakeRuns) set(r engine.Run) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r.ID = f.run.ID
	f.run = r
	f.seq++
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeRuns) Run(context.Context, string) (*engine.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.run
	return &r, nil
}

func (f *fakeRuns) WaitEvents(ctx context.Context, _ string, after int64, _ int, wait time.Duration) ([]engine.Event, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		f.mu.Lock()
		seq, changed := f.seq, f.changed
		f.mu.Unlock()
		if seq > after {
			return []engine.Event{{Seq: seq}}, nil
		}
		if !f.owner {
			return nil, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (f *fakeRuns) live() bool { return f.owner }

// waitRun ends when the run reaches the state, fails when it ended in
// another, when nothing can change it, and at its timeout; it prints the
// status line it ended on. In a synctest bubble the run's changes and the
// timeout come on the fake clock.
func TestWaitRun(t *testing.T) {
	t.Parallel()
	failed := engine.Run{Status: engine.StatusFailed, FailureCode: "EXECUTION_FAILED", Error: "boom"}
	tests := []struct {
		name    string
		status  engine.Status
		owner   bool
		changes map[time.Duration]engine.Run // after how long, the run becomes
		until   string
		timeout time.Duration
		line    string
		err     string // "" for success
		waited  time.Duration
	}{
		{name: "there already", status: engine.StatusFinished, owner: true, until: "finished", line: "run r is finished"},
		{name: "paused, by default", status: engine.StatusPausedWaitingHuman, owner: true, line: "run r is paused_waiting_human"},
		{name: "stopped", status: engine.StatusCancelled, owner: true, until: "stopped", line: "run r is cancelled"},
		{name: "finishes after a pause", status: engine.StatusRunning, owner: true, until: "finished",
			changes: map[time.Duration]engine.Run{2 * time.Minute: {Status: engine.StatusPausedWaitingHuman}, 5 * time.Minute: {Status: engine.StatusFinished}},
			line:    "run r is finished", waited: 5 * time.Minute},
		{name: "fails instead", status: engine.StatusRunning, owner: true, until: "finished",
			changes: map[time.Duration]engine.Run{time.Minute: failed},
			line:    "run r is failed [EXECUTION_FAILED] boom", err: "run r ended failed, not finished", waited: time.Minute},
		{name: "ended, not paused", status: engine.StatusFinished, owner: true, until: "paused", line: "run r is finished", err: "run r ended finished, not paused"},
		{name: "timeout", status: engine.StatusRunning, owner: true, until: "finished", timeout: 10 * time.Minute,
			line: "run r is running", err: "run r is still running after 10m0s, not finished", waited: 10 * time.Minute},
		{name: "no owner", status: engine.StatusPausedWaitingHuman, until: "finished",
			line: "run r is paused_waiting_human", err: "no iterion process owns the store, so nothing changes it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeRuns(tc.status, tc.owner)
				for after, r := range tc.changes {
					time.AfterFunc(after, func() { f.set(r) })
				}
				want, err := untilState(tc.until)
				if err != nil {
					t.Fatal(err)
				}
				var out bytes.Buffer
				began := time.Now()
				err = waitRun(t.Context(), &out, f, "r", want, tc.timeout)
				if got := strings.TrimSpace(out.String()); got != tc.line {
					t.Errorf("printed %q, want %q", got, tc.line)
				}
				switch {
				case tc.err == "" && err != nil:
					t.Errorf("err = %v, want none", err)
				case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
					t.Errorf("err = %v, want %q", err, tc.err)
				}
				if waited := time.Since(began); waited != tc.waited {
					t.Errorf("waited %s, want %s", waited, tc.waited)
				}
			})
		})
	}
}

// Through serve, runs wait and runs events --follow wait on the owner for
// the run's changes; once serve is gone they answer from the store, where
// nothing changes the run. Usage errors exit 2.
func TestRunsWaitAndFollow(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	c.dir = dir
	c.setenv("ITERION_API_TOKEN", "tok")
	if err := writeFileAt(filepath.Join(dir, "h.bot"), humanWorkflow); err != nil {
		t.Fatal(err)
	}
	base, stop := startServe(t, c)
	for _, id := range []string{"w1", "w2"} {
		if code, out := apiCall(t, base, "POST", "/api/runs", "tok", `{"file_path": "h.bot", "run_id": "`+id+`"}`); code != http.StatusCreated {
			t.Fatalf("launch %s = %d %v", id, code, out)
		}
	}
	// By default it waits for the run to stop or pause.
	if code, out, errOut := c.run("runs", "wait", "w1", "--timeout", "1m", "--store-dir", "st"); code != exitOK || out != "run w1 is paused_waiting_human\n" {
		t.Fatalf("runs wait: exit %d\n%s%s", code, out, errOut)
	}
	for _, args := range [][]string{{"w1", "--until", "done"}, {"w1", "--timeout", "-1s"}, {}} {
		code, _, errOut := c.run(append([]string{"runs", "wait", "--store-dir", "st"}, args...)...)
		if code != exitUsage {
			t.Errorf("runs wait %v: exit %d, want 2\n%s", args, code, errOut)
		}
		if len(args) > 1 && args[1] == "--until" && !strings.Contains(errOut, "use one of stopped, paused, finished") {
			t.Errorf("a bad --until does not list the states:\n%s", errOut)
		}
	}

	// --follow prints the events so far, waits through the pause and ends
	// with the run.
	pr, pw := io.Pipe()
	followed := make(chan int, 1)
	go func() {
		code := c.exec(context.Background(), nil, pw, io.Discard, "runs", "events", "w1", "--follow", "--store-dir", "st")
		pw.Close()
		followed <- code
	}()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// A watchdog, not a wait: a minute without the next line fails.
	next := func() (string, bool) {
		t.Helper()
		select {
		case l, ok := <-lines:
			return l, ok
		case <-time.After(time.Minute):
			t.Fatal("runs events --follow printed nothing for a minute")
			return "", false
		}
	}
	for l, ok := next(); !strings.Contains(l, `"type":"run_paused"`); l, ok = next() {
		if !ok {
			t.Fatal("runs events --follow ended before the run paused")
		}
	}
	if code, out := apiCall(t, base, "POST", "/api/runs/w1/interactions/w1_approve/answer", "tok", `{"answers": {"approved": true, "reason": "ok"}}`); code != http.StatusOK {
		t.Fatalf("answer = %d %v", code, out)
	}
	var last string
	for l, ok := next(); ok; l, ok = next() {
		last = l
	}
	if code := <-followed; code != exitOK || !strings.Contains(last, `"type":"run_finished"`) {
		t.Errorf("runs events --follow: exit %d, last line %s; want it to end with run_finished", code, last)
	}
	if code, out, errOut := c.run("runs", "wait", "w1", "--until", "paused", "--store-dir", "st"); code != exitError || out != "run w1 is finished\n" || !strings.Contains(errOut, "run w1 ended finished, not paused") {
		t.Errorf("runs wait --until paused of a finished run: exit %d\n%s%s", code, out, errOut)
	}
	if code := stop(); code != exitOK {
		t.Errorf("serve exited %d", code)
	}

	// Without an owner, the store answers.
	if code, out, errOut := c.run("runs", "wait", "w1", "--until", "finished", "--store-dir", "st"); code != exitOK || out != "run w1 is finished\n" {
		t.Errorf("runs wait without an owner: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := c.run("runs", "wait", "w2", "--until", "finished", "--store-dir", "st"); code != exitError || out != "run w2 is paused_waiting_human\n" || !strings.Contains(errOut, "nothing changes it") {
		t.Errorf("runs wait of a paused run without an owner: exit %d\n%s%s", code, out, errOut)
	}
	done := make(chan struct{})
	var code int
	var out, errOut string
	go func() {
		defer close(done)
		code, out, errOut = c.run("runs", "events", "w2", "--follow", "--store-dir", "st")
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // a watchdog, not a wait
		t.Fatal("runs events --follow without an owner did not end")
	}
	if code != exitOK || !strings.Contains(out, `"type":"run_paused"`) || !strings.Contains(errOut, "--follow ends here") {
		t.Errorf("runs events --follow without an owner: exit %d\n%s%s", code, out, errOut)
	}
}
