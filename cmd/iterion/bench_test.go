package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Whole-CLI timings: each step is a new process of the real program (this
// test binary re-executed, see TestMain), as a person would type them.

func benchChild(b *testing.B, args ...string) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = childEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%v: %v\n%s", args, err, out)
	}
	return string(out)
}

// BenchmarkCLIPauseThenAnswer is workload (d): run to a human pause, then
// answer from a second process until the run finishes.
func BenchmarkCLIPauseThenAnswer(b *testing.B) {
	dir := b.TempDir()
	wf := filepath.Join(dir, "release.bot")
	if err := os.WriteFile(wf, []byte(humanWorkflow), 0o644); err != nil {
		b.Fatal(err)
	}
	st := filepath.Join(dir, "st")
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("rel-%d", i)
		if out := benchChild(b, "run", wf, "--store-dir", st, "--run-id", id, "--no-interactive"); !strings.Contains(out, "paused") {
			b.Fatal(out)
		}
		if out := benchChild(b, "resume", "--run-id", id, "--store-dir", st, "--answer", "approved=yes", "--answer", "reason=ok"); !strings.Contains(out, "finished") {
			b.Fatal(out)
		}
	}
}

// BenchmarkCLIAnswerReleasesGate times, from a second process, the answer
// to the last open question of a run parked at an await_answers gate until
// the owner process has finished the run and exited.
func BenchmarkCLIAnswerReleasesGate(b *testing.B) {
	wf, _ := filepath.Abs("../../examples/async-questions/main.bot")
	st := filepath.Join(b.TempDir(), "st")
	var total time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		id := fmt.Sprintf("g-%d", i)
		owner := exec.Command(os.Args[0], "run", wf, "--store-dir", st, "--run-id", id)
		owner.Env = childEnv()
		stderr, _ := owner.StderrPipe()
		if err := owner.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(stderr)
		for posted := 0; posted < 2 && sc.Scan(); {
			if strings.HasPrefix(sc.Text(), "? question ") {
				posted++
			}
		}
		go io.Copy(io.Discard, stderr)
		benchChild(b, "runs", "answer", id, id+"_draft_async_1", "MIT", "--store-dir", st)
		b.StartTimer()
		start := time.Now()
		benchChild(b, "runs", "answer", id, id+"_draft_async_2", "1.26", "--store-dir", st)
		if err := owner.Wait(); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/release")
}

// BenchmarkServeGitHubCommandReply measures a PR comment's round trip
// through serve on loopback: the signed webhook is stored and
// acknowledged, the worker reads .iterion.yml, checks nothing further for
// /iterion status, lists the PR's runs and replies; the clock stops when
// the fake GitHub has the reply.
func BenchmarkServeGitHubCommandReply(b *testing.B) {
	h := newGHHarness(b, nil)
	h.start()
	b.ResetTimer()
	for b.Loop() {
		id := h.comment("ana", "/iterion status")
		marker := fmt.Sprintf("<!-- iterion:comment-%d -->", id)
		h.fake.WaitFor(30*time.Second, "the reply", func() bool { return len(h.fake.BotComments(7, marker)) == 1 })
	}
}
