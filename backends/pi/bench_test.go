package pi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/backends/pi/rpc"
	"github.com/iterion-bot/iterion/engine"
)

// What a node costs on top of pi itself: BenchmarkPiBare is a bare pi
// RPC session in the same sandbox doing the same one-call turn (start,
// get_state, prompt, agent_end, stdin closed); BenchmarkNodeRPC is the
// backend's Execute of that turn (agent directory copy, extension,
// handshake, settings, stats, stop). The difference is iterion's.
func BenchmarkPiBare(b *testing.B) {
	h := newHarness(b, &fakellm.Script{Fallback: &fakellm.Turn{Text: "ok"}})
	// pi's script, and the node_modules it loads from.
	cli := resolve(b, h.env["ITERION_PI_COMMAND"])
	modules := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(cli))))
	for b.Loop() {
		stdinR, stdinW := io.Pipe()
		stdoutR, stdoutW := io.Pipe()
		done := make(chan error, 1)
		go func() {
			_, err := h.sb.Run(context.Background(), &engine.Process{
				Argv: []string{cli, "--mode", "rpc", "--no-session", "--provider", "fake", "--model", "fake-claude"},
				Env:  []string{"PI_CODING_AGENT_DIR=" + h.agentDir, "PI_OFFLINE=1", "FAKE_KEY=" + fakeKey}, Dir: h.work,
				Mounts:  []engine.Mount{{Source: modules}, {Source: h.agentDir, Writable: true}},
				Network: engine.NetworkOpen, Stdin: stdinR, Stdout: stdoutW,
			})
			stdoutW.Close()
			stdinR.Close()
			done <- err
		}()
		c := rpc.New(stdinW, stdoutR)
		ctx := watchdog(b)
		if _, err := c.Call(ctx, "get_state", nil); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Call(ctx, "prompt", map[string]any{"message": "hi"}); err != nil {
			b.Fatal(err)
		}
		for {
			ev, err := c.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if ev.Type == rpc.TypeAgentEnd {
				break
			}
		}
		c.Close()
		for {
			if _, err := c.Next(ctx); err != nil {
				break
			}
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNodeRPC(b *testing.B) {
	h := newHarness(b, &fakellm.Script{Fallback: &fakellm.Turn{Text: "ok"}})
	be := h.backend()
	for b.Loop() {
		if _, err := be.Execute(watchdog(b), h.task("fake/fake-claude", "hi")); err != nil {
			b.Fatal(err)
		}
	}
}

// An answer recorded while the agent's tool runs, and the tool ending
// right then: how long until the model's next request carries it,
// against the same turn with nothing to deliver. The difference is what
// delivery adds to the turn boundary (steer, no polling).
func BenchmarkAnswerToNextRequest(b *testing.B) {
	for _, answered := range []bool{false, true} {
		name := "no answer"
		if answered {
			name = "answer"
		}
		b.Run(name, func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				total += answerLatency(b, answered)
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/boundary")
		})
	}
}

// answerLatency runs one node whose bash waits for a release file, then
// records the answer (or not), releases the tool and measures until the
// next model request arrives.
func answerLatency(b *testing.B, answered bool) time.Duration {
	b.Helper()
	script := &fakellm.Script{Turns: []fakellm.Turn{
		{Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{{Name: "ask_user_async", Input: map[string]any{"question": "Which?"}}}},
		{Match: fakellm.Match{ToolResultFor: "ask_user_async"}, ToolCalls: []fakellm.ToolCall{
			{Name: "bash", Input: map[string]any{"command": "echo > started; while [ ! -e release ]; do sleep 0.001; done"}}}},
	}, Fallback: &fakellm.Turn{Text: "done"}}
	h := newHarness(b, script)
	var mu sync.Mutex
	var third time.Time
	seen := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/messages") {
			mu.Lock()
			if seen++; seen == 3 {
				third = time.Now()
			}
			mu.Unlock()
		}
		h.fake.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	h.write(filepath.Join(h.agentDir, "models.json"), `{"providers": {"fake": {"baseUrl": "`+srv.URL+`", "api": "anthropic-messages", "apiKey": "FAKE_KEY",
  "models": [{"id": "fake-claude", "contextWindow": 200000, "maxTokens": 4096}]}}}`)
	mkfifo(b, filepath.Join(h.work, "started"))
	q := newQuestions()
	task := h.task("fake/fake-claude", "Work.")
	q.bind(task)
	ctx := watchdog(b)
	done := make(chan error, 1)
	go func() {
		_, err := h.backend().Execute(ctx, task)
		done <- err
	}()
	waitOpen(ctx, b, filepath.Join(h.work, "started"))
	start := time.Now()
	if answered {
		q.answer("r1_n1_async_1", "this one")
	}
	h.write(filepath.Join(h.work, "release"), "")
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if answered && !strings.Contains(lastUserText(h.fake.Requests()[2]), "[Answer to question r1_n1_async_1]") {
		b.Fatal("the answer missed the next request")
	}
	return third.Sub(start)
}

func resolve(tb testing.TB, path string) string {
	tb.Helper()
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
