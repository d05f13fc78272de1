package claudecode_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/engine"
)

// What a node costs on top of Claude Code itself. BenchmarkClaudeBare is
// a bare `claude -p` in the same sandbox doing the same one-call turn,
// straight to the fake model (the network open for it); BenchmarkNode is
// the backend's Execute of that turn (the run channel and its proxy,
// sandbox-exec's forwarder, the directory and settings, stream-json on
// stdin, the stop), and BenchmarkNodeAsync the same on an async node,
// which adds iterion's MCP server to Claude Code's start. The
// differences are iterion's.
func BenchmarkClaudeBare(b *testing.B) {
	h := newHarness(b, &fakellm.Script{Fallback: &fakellm.Turn{Text: "ok"}})
	cli, err := filepath.EvalSymlinks(h.env["ITERION_CLAUDE_COMMAND"])
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		dir := b.TempDir()
		res, err := h.sb.Run(context.Background(), &engine.Process{
			Argv: []string{cli, "-p", "--output-format", "stream-json", "--verbose", "--model", "claude-sonnet-4-5",
				"--tools", "", "--setting-sources", "", "--", "hi"},
			Env: []string{"HOME=" + dir, "CLAUDE_CONFIG_DIR=" + dir, "ANTHROPIC_BASE_URL=" + h.env["ANTHROPIC_BASE_URL"],
				"ANTHROPIC_API_KEY=" + realKey, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"},
			Dir: h.work, Mounts: []engine.Mount{{Source: filepath.Dir(cli)}, {Source: dir, Writable: true}}, Network: engine.NetworkOpen,
		})
		if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Stdout), `"result":"ok"`) {
			b.Fatalf("%v, %+v", err, res)
		}
	}
}

func BenchmarkNode(b *testing.B) {
	h := newHarness(b, &fakellm.Script{Fallback: &fakellm.Turn{Text: "ok"}})
	be := h.backend()
	for b.Loop() {
		if _, err := be.Execute(watchdog(b), h.task("hi")); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNodeAsync(b *testing.B) {
	h := newHarness(b, &fakellm.Script{Fallback: &fakellm.Turn{Text: "ok"}})
	be := h.backend()
	for b.Loop() {
		task := h.task("hi")
		newQuestions().bind(task)
		if _, err := be.Execute(watchdog(b), task); err != nil {
			b.Fatal(err)
		}
	}
}

// An answer recorded while the agent's bash runs, and the bash ending at
// that very moment: how long until the model's next request, and until
// the request that carries the answer (the same one when the message
// reached Claude Code before the tool's result was made, else the turn
// after), against the same boundary with nothing to deliver. hit is the
// share of boundaries where the next request carried it.
func BenchmarkAnswerToNextRequest(b *testing.B) {
	for _, answered := range []bool{false, true} {
		name := "no answer"
		if answered {
			name = "answer"
		}
		b.Run(name, func(b *testing.B) {
			var next, carried time.Duration
			hits := 0
			for b.Loop() {
				n, c, hit := answerLatency(b, answered)
				next += n
				carried += c
				if hit {
					hits++
				}
			}
			b.ReportMetric(float64(next.Microseconds())/float64(b.N)/1000, "ms/next-request")
			if answered {
				b.ReportMetric(float64(carried.Microseconds())/float64(b.N)/1000, "ms/answer-seen")
				b.ReportMetric(float64(hits)/float64(b.N), "hit")
			}
		})
	}
}

// answerLatency runs one node whose bash waits on a fifo, records the
// answer (or not), releases the bash, and measures until the next model
// request and until the one carrying the answer.
func answerLatency(b *testing.B, answered bool) (next, carried time.Duration, hit bool) {
	b.Helper()
	h := newHarness(b, &fakellm.Script{Turns: []fakellm.Turn{
		{Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{{Name: "mcp__iterion__ask_user_async", Input: map[string]any{"question": "Which?"}}}},
		{Match: fakellm.Match{ToolResultFor: "mcp__iterion__ask_user_async"}, ToolCalls: []fakellm.ToolCall{workCall}},
	}, Fallback: &fakellm.Turn{Text: "done"}})
	var mu sync.Mutex
	var third, seen time.Time
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now() // its arrival
		h.fake.Handler().ServeHTTP(w, r)
		mu.Lock()
		defer mu.Unlock()
		n++
		reqs := h.fake.Requests()
		if n == 3 {
			third = now
		}
		if seen.IsZero() && len(reqs) > 0 && strings.Contains(allText(reqs[len(reqs)-1]), "[Answer to question") {
			seen = now
		}
	}))
	defer srv.Close()
	h.env["ANTHROPIC_BASE_URL"] = srv.URL
	started, rel := h.mkfifo("started"), h.mkfifo("release")
	q := newQuestions()
	task := h.task("Work.", "bash")
	q.bind(task)
	ctx := watchdog(b)
	done := make(chan error, 1)
	go func() {
		_, err := h.backend().Execute(ctx, task)
		done <- err
	}()
	waitFor(ctx, b, started)
	start := time.Now()
	if answered {
		q.answer(1, "this one")
	}
	if err := os.WriteFile(rel, []byte("go\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if answered && seen.IsZero() {
		b.Fatal("no request carried the answer")
	}
	return third.Sub(start), seen.Sub(start), answered && seen.Equal(third)
}
