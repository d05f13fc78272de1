package claw_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/backends/claw"
	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/engine"
)

// BenchmarkAnswerToNextRequest measures, on claw, an answer recorded as
// the agent's tool call ends (the ask_user_async call, whose posting
// records the answer at once): the time from the tool's end until the
// model's next request arrives, and whether that request carries the
// answer (hit). claw drains the node's inbox between a tool's result and
// the next request, in process, so nothing waits for a bell.
func BenchmarkAnswerToNextRequest(b *testing.B) {
	fake := fakellm.New(&fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{{Name: "ask_user_async", Input: map[string]any{"question": "Which?"}}}},
	}, Fallback: &fakellm.Turn{Text: "done"}}, fakellm.Options{})
	var mu sync.Mutex
	var toolEnd, next time.Time
	carried := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now() // its arrival
		fake.Handler().ServeHTTP(w, r)
		mu.Lock()
		defer mu.Unlock()
		if toolEnd.IsZero() || !next.IsZero() || !strings.HasSuffix(r.URL.Path, "/messages") {
			return
		}
		next = now
		reqs := fake.Requests()
		for _, m := range reqs[len(reqs)-1].LastUserTurn() {
			carried = carried || strings.Contains(m.Text, "[Answer to question r_n_async_1]")
		}
	}))
	defer srv.Close()
	env := map[string]string{"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": srv.URL}
	be := claw.New(claw.Options{Env: func(k string) string { return env[k] }})
	var total time.Duration
	hits := 0
	for b.Loop() {
		fake.Reset()
		mu.Lock()
		toolEnd, next, carried = time.Time{}, time.Time{}, false
		mu.Unlock()
		var inbox []string
		task := &engine.Task{
			RunID: "r", NodeID: "n", Model: "anthropic/m", User: "Work.", Interaction: "async", WorkDir: b.TempDir(),
			PostQuestion: func(_ context.Context, q engine.AsyncQuestion) (string, error) {
				mu.Lock()
				defer mu.Unlock()
				inbox = append(inbox, engine.AnswerMessage("r_n_async_1", q.Question, "this one"))
				toolEnd = time.Now()
				return "r_n_async_1", nil
			},
			InboxDrain: func(context.Context) ([]string, error) {
				mu.Lock()
				defer mu.Unlock()
				out := inbox
				inbox = nil
				return out, nil
			},
		}
		if _, err := be.Execute(context.Background(), task); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		if next.IsZero() {
			mu.Unlock()
			b.Fatal("no model request after the tool's end")
		}
		total += next.Sub(toolEnd)
		if carried {
			hits++
		}
		mu.Unlock()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/next-request")
	b.ReportMetric(float64(hits)/float64(b.N), "hit")
}
