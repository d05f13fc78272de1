package claw_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/backends/claw"
	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// fixture is claw pointed at a fake model server, with the engine and a
// real store around it.
type fixture struct {
	fake   *fakellm.Server
	srv    *httptest.Server
	db     *store.DB
	engine *engine.Engine
	sleeps []time.Duration
	// before, when set, runs before the fake answers request n (1-based).
	mu     sync.Mutex
	before map[int]func()
	seen   int
}

func newFixture(t testing.TB, script *fakellm.Script, dialect string) *fixture {
	t.Helper()
	f := &fixture{fake: fakellm.New(script, fakellm.Options{}), before: map[int]func(){}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/messages") || strings.HasSuffix(r.URL.Path, "/chat/completions") {
			f.mu.Lock()
			f.seen++
			hook := f.before[f.seen]
			f.mu.Unlock()
			if hook != nil {
				hook()
			}
		}
		f.fake.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	env := map[string]string{
		"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": f.srv.URL,
		"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": f.srv.URL + "/v1",
	}
	b := claw.New(claw.Options{
		Env: func(k string) string { return env[k] },
		Sleep: func(_ context.Context, d time.Duration) error {
			f.sleeps = append(f.sleeps, d)
			return nil
		},
	})
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f.db = db
	f.engine = engine.New(engine.Options{Store: db, Backends: map[string]engine.Backend{"claw": b}, Poll: time.Hour})
	return f
}

func compileFile(t *testing.T, path string, model string) *dsl.Workflow {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(src), `"anthropic/claude-sonnet-4-6"`, `"`+model+`"`)
	w, ds := dsl.CompileSource(path, []byte(text))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	return w
}

// TestAsyncQuestionsEndToEnd runs examples/async-questions with claw on
// both API dialects: the agent posts two questions and keeps working; the
// answers arrive in its conversation mid-run; the gate releases; the
// finishing agent receives the answers.
func TestAsyncQuestionsEndToEnd(t *testing.T) {
	for _, tc := range []struct{ dialect, model string }{
		{"anthropic", "anthropic/claude-sonnet-4-6"},
		{"openai", "openai/gpt-5.5"},
	} {
		t.Run(tc.dialect, func(t *testing.T) {
			hasResult := true
			script := &fakellm.Script{Turns: []fakellm.Turn{
				{Name: "ask", Match: fakellm.Match{System: "README files", HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
					{Name: "ask_user_async", Input: map[string]any{"question": "Which licence?"}},
					{Name: "ask_user_async", Input: map[string]any{"question": "Minimum Go version?"}},
				}},
				{Name: "keep working", Match: fakellm.Match{System: "README files", ToolResultFor: "ask_user_async"}, ToolCalls: []fakellm.ToolCall{
					{Name: "list_files", Input: map[string]any{"path": "."}},
				}},
				{Name: "draft done", Match: fakellm.Match{System: "README files", HasToolResult: &hasResult}, Text: `{"draft": "README with TODO(licence)", "open_questions": []}`},
				{Name: "finalize", Match: fakellm.Match{Contains: "Replace every placeholder"}, Text: `{"readme": "final README"}`},
			}}
			f := newFixture(t, script, tc.dialect)
			ctx := context.Background()
			w := compileFile(t, "../../examples/async-questions/main.bot", tc.model)
			// The operator answers while the model thinks about its second
			// turn; claw delivers the answers after the list_files result.
			var ids []string
			f.before[2] = func() {
				pending, err := f.db.Pending(ctx, "e2e", "draft")
				if err != nil || len(pending) != 2 {
					t.Errorf("pending = %v, %v", pending, err)
					return
				}
				for i, ix := range pending {
					ids = append(ids, ix.ID)
					if _, err := f.engine.Answer(ctx, engine.AnswerRequest{RunID: "e2e", InteractionID: ix.ID, Text: []string{"MIT", "1.26"}[i], Via: "test"}); err != nil {
						t.Error(err)
					}
				}
			}
			run, err := f.engine.Start(ctx, engine.StartRequest{Workflow: w, RunID: "e2e", WorkDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != engine.StatusFinished {
				t.Fatalf("run = %s %s %s", run.Status, run.FailureCode, run.Error)
			}
			reqs := f.fake.Requests()
			if len(reqs) != 4 {
				t.Fatalf("%d model requests, want 4", len(reqs))
			}
			// The third request carries both answers, each exactly once.
			third := joinMessages(reqs[2])
			for i, id := range ids {
				want := "[Answer to question " + id + "] Q: "
				if n := strings.Count(third, want); n != 1 {
					t.Errorf("answer %d appears %d times in the agent's conversation, want 1", i+1, n)
				}
			}
			if !strings.Contains(third, "A: MIT") {
				t.Errorf("third request lacks the answer:\n%s", third)
			}
			// The finishing agent receives the answers through the gate.
			if last := joinMessages(reqs[3]); !strings.Contains(last, "MIT") || !strings.Contains(last, "1.26") {
				t.Errorf("finalize did not receive the answers:\n%s", last)
			}
			if !strings.Contains(reqs[0].System, "[ASYNC QUESTIONS]") {
				t.Errorf("the async node's system prompt lacks the protocol section")
			}
			for _, tool := range []string{"ask_user", "ask_user_async", "await_answers", "read_file", "list_files"} {
				if !contains(reqs[0].Tools, tool) {
					t.Errorf("tool %s not offered: %v", tool, reqs[0].Tools)
				}
			}
		})
	}
}

func joinMessages(r fakellm.Recorded) string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A late answer, arriving while the model writes its final answer, forces
// exactly one more request instead of being lost.
func TestLateAnswerForcesOneMoreTurn(t *testing.T) {
	script := &fakellm.Script{Turns: []fakellm.Turn{
		{Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{{Name: "ask_user_async", Input: map[string]any{"question": "Colour?"}}}},
		{Match: fakellm.Match{ToolResultFor: "ask_user_async", LastUserContains: "Question posted"}, Text: "done without the answer"},
		{Match: fakellm.Match{LastUserContains: "[Answer to question"}, Text: "done with blue"},
	}}
	f := newFixture(t, script, "anthropic")
	ctx := context.Background()
	f.before[2] = func() {
		if _, err := f.engine.Answer(ctx, engine.AnswerRequest{RunID: "late", InteractionID: "late_a_async_1", Text: "blue"}); err != nil {
			t.Error(err)
		}
	}
	w, ds := dsl.CompileSource("t.bot", []byte("agent a:\n  model: \"anthropic/m\"\n  interaction: async\nworkflow w:\n  entry: a\n  a -> done\n"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	run, err := f.engine.Start(ctx, engine.StartRequest{Workflow: w, RunID: "late", WorkDir: t.TempDir()})
	if err != nil || run.Status != engine.StatusFinished {
		t.Fatalf("run = %+v, %v", run, err)
	}
	if n := len(f.fake.Requests()); n != 3 {
		t.Errorf("%d requests, want 3 (the late answer forces exactly one more)", n)
	}
	evs, _ := f.db.Events(ctx, "late", 0, 100)
	for _, ev := range evs {
		if ev.Type == engine.EventNodeFinished && ev.Data["output"].(map[string]any)["text"] != "done with blue" {
			t.Errorf("output = %v", ev.Data["output"])
		}
	}
}

// Blocking ask_user pauses the run; resuming continues the same
// conversation: the model sees the tool_result with the answer.
func TestAskUserResumesTheConversation(t *testing.T) {
	script := &fakellm.Script{Turns: []fakellm.Turn{
		{Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{{ID: "toolu_ask", Name: "ask_user", Input: map[string]any{"question": "Delete the branch?"}}}},
		{Match: fakellm.Match{ToolResultFor: "ask_user"}, Text: "deleted"},
	}}
	f := newFixture(t, script, "openai")
	ctx := context.Background()
	w, ds := dsl.CompileSource("t.bot", []byte("agent a:\n  model: \"openai/m\"\n  interaction: human\nworkflow w:\n  entry: a\n  a -> done\n"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	run, err := f.engine.Start(ctx, engine.StartRequest{Workflow: w, RunID: "ask", WorkDir: t.TempDir()})
	if err != nil || run.Status != engine.StatusPausedWaitingHuman {
		t.Fatalf("run = %+v, %v", run, err)
	}
	run, err = f.engine.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: "ask", Answers: map[string]string{engine.QuestionKey: "yes, delete it"}})
	if err != nil || run.Status != engine.StatusFinished {
		t.Fatalf("resume = %+v, %v", run, err)
	}
	reqs := f.fake.Requests()
	last := reqs[len(reqs)-1]
	if len(last.ToolResults) != 1 || last.ToolResults[0].ToolCallID != "toolu_ask" || last.ToolResults[0].Content != "yes, delete it" {
		t.Errorf("resumed request tool results = %+v", last.ToolResults)
	}
}

func TestRetriesAndAuthFailures(t *testing.T) {
	w, ds := dsl.CompileSource("t.bot", []byte("agent a:\n  model: \"anthropic/m\"\nworkflow w:\n  entry: a\n  a -> done\n"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	ctx := context.Background()

	// 429 with Retry-After is retried after the wait it asked for.
	f := newFixture(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Status: 429, Error: "slow down", Headers: map[string]string{"Retry-After": "7"}},
		{Text: "hello"},
	}}, "anthropic")
	run, err := f.engine.Start(ctx, engine.StartRequest{Workflow: w, RunID: "r429", WorkDir: t.TempDir()})
	if err != nil || run.Status != engine.StatusFinished {
		t.Fatalf("429 then success: %+v %v", run, err)
	}
	if len(f.sleeps) != 1 || f.sleeps[0] != 7*time.Second {
		t.Errorf("waits = %v, want [7s]", f.sleeps)
	}

	// Three 429s in a row: RATE_LIMITED.
	f = newFixture(t, &fakellm.Script{Turns: []fakellm.Turn{{Status: 429, Error: "slow down", Repeat: true}}}, "anthropic")
	run, _ = f.engine.Start(ctx, engine.StartRequest{Workflow: w, RunID: "r429x3", WorkDir: t.TempDir()})
	if run.Status != engine.StatusFailedResumable || run.FailureCode != engine.CodeRateLimited || len(f.fake.Requests()) != 3 {
		t.Errorf("persistent 429: %s %s after %d requests", run.Status, run.FailureCode, len(f.fake.Requests()))
	}

	// 401 fails at once, naming the key.
	f = newFixture(t, &fakellm.Script{Turns: []fakellm.Turn{{Status: 401, Error: "invalid x-api-key", Repeat: true}}}, "anthropic")
	run, _ = f.engine.Start(ctx, engine.StartRequest{Workflow: w, RunID: "r401", WorkDir: t.TempDir()})
	if run.Status != engine.StatusFailedResumable || run.FailureCode != "AUTH_FAILED" || len(f.fake.Requests()) != 1 || !strings.Contains(run.Error, "API key") {
		t.Errorf("401: %s %s %q after %d requests", run.Status, run.FailureCode, run.Error, len(f.fake.Requests()))
	}
}

// Missing credentials fail the run before any work starts, naming the key.
func TestMissingKeyFailsBeforeTheRun(t *testing.T) {
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := claw.New(claw.Options{Env: func(string) string { return "" }})
	e := engine.New(engine.Options{Store: db, Backends: map[string]engine.Backend{"claw": b}})
	w, ds := dsl.CompileSource("t.bot", []byte("tool first:\n  command: \"touch ran\"\nagent a:\n  model: \"openai/gpt-5.5\"\nworkflow w:\n  entry: first\n  first -> a\n  a -> done\n"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	dir := t.TempDir()
	_, err = e.Start(context.Background(), engine.StartRequest{Workflow: w, WorkDir: dir})
	if err == nil || !strings.Contains(err.Error(), "set OPENAI_API_KEY") {
		t.Fatalf("err = %v, want a message naming OPENAI_API_KEY", err)
	}
	if _, err := os.Stat(dir + "/ran"); err == nil {
		t.Error("the first node ran although the run could not start")
	}
	runs, _ := db.Runs(context.Background(), engine.RunFilter{})
	if len(runs) != 0 {
		t.Errorf("a run was stored: %+v", runs)
	}
}

// A reply stream that is not the API's events fails the node at once with
// a clear error, without retries.
func TestMalformedStream(t *testing.T) {
	for _, tc := range []struct{ dialect, model, raw string }{
		{"anthropic", "anthropic/m", "event: message_start\ndata: {\"type\": \"message_start\", \"message\": {oops\n\n"},
		{"openai", "openai/m", "data: {\"id\": \"x\", \"choices\": [oops\n\n"},
	} {
		t.Run(tc.dialect, func(t *testing.T) {
			f := newFixture(t, &fakellm.Script{Turns: []fakellm.Turn{{RawSSE: tc.raw, Repeat: true}}}, tc.dialect)
			w, ds := dsl.CompileSource("t.bot", []byte("agent a:\n  model: \""+tc.model+"\"\nworkflow w:\n  entry: a\n  a -> done\n"))
			if ds.HasErrors() {
				t.Fatal(ds)
			}
			run, err := f.engine.Start(context.Background(), engine.StartRequest{Workflow: w, RunID: "bad", WorkDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != engine.StatusFailedResumable || !strings.Contains(run.Error, "response stream is malformed") {
				t.Errorf("run = %s %s %q", run.Status, run.FailureCode, run.Error)
			}
			if n := len(f.fake.Requests()); n != 1 {
				t.Errorf("%d requests, want 1 (no retry)", n)
			}
		})
	}
}

// Cancelling the run mid-stream stops the model request.
func TestCancelMidStream(t *testing.T) {
	started, stopped := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n")
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done() // the client went away
		close(stopped)
	}))
	defer srv.Close()
	env := map[string]string{"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": srv.URL}
	b := claw.New(claw.Options{Env: func(k string) string { return env[k] }})
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e := engine.New(engine.Options{Store: db, Backends: map[string]engine.Backend{"claw": b}})
	w, ds := dsl.CompileSource("t.bot", []byte("agent a:\n  model: \"anthropic/m\"\nworkflow w:\n  entry: a\n  a -> done\n"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *engine.Run, 1)
	go func() {
		run, _ := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "cx", WorkDir: t.TempDir()})
		done <- run
	}()
	<-started
	cancel()
	<-stopped
	if run := <-done; run.Status != engine.StatusCancelled {
		t.Errorf("run = %s %s %q, want cancelled", run.Status, run.FailureCode, run.Error)
	}
}

// A final answer that does not match the schema gets one repair turn.
func TestStructuredOutputRepairTurn(t *testing.T) {
	script := &fakellm.Script{Turns: []fakellm.Turn{
		{Match: fakellm.Match{LastUserContains: "Review"}, Text: "Looks fine to me."},
		{Match: fakellm.Match{LastUserContains: "could not be used"}, Text: `{"approved": true, "summary": "fine"}`},
	}}
	f := newFixture(t, script, "openai")
	w, ds := dsl.CompileSource("t.bot", []byte("schema v:\n  approved: bool\n  summary: string\nagent a:\n  model: \"openai/m\"\n  user: \"Review it\"\n  output: v\nworkflow w:\n  entry: a\n  a -> done when approved\n  a -> fail\n"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	run, err := f.engine.Start(context.Background(), engine.StartRequest{Workflow: w, RunID: "rep", WorkDir: t.TempDir()})
	if err != nil || run.Status != engine.StatusFinished {
		t.Fatalf("run = %+v, %v", run, err)
	}
	reqs := f.fake.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[0].System, `"approved"`) {
		t.Errorf("%d requests; the first system prompt should carry the schema: %q", len(reqs), reqs[0].System)
	}
}

// Tokens and cost are counted per node from the price table.
func TestTokensAndCost(t *testing.T) {
	script := &fakellm.Script{Turns: []fakellm.Turn{{Text: "ok", Usage: fakellm.Usage{InputTokens: 1000, OutputTokens: 500}}}}
	f := newFixture(t, script, "anthropic")
	w, ds := dsl.CompileSource("t.bot", []byte("agent a:\n  model: \"anthropic/claude-sonnet-4-6\"\nworkflow w:\n  entry: a\n  a -> done\n"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	ctx := context.Background()
	if _, err := f.engine.Start(ctx, engine.StartRequest{Workflow: w, RunID: "cost", WorkDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	evs, _ := f.db.Events(ctx, "cost", 0, 100)
	for _, ev := range evs {
		if ev.Type != engine.EventNodeFinished {
			continue
		}
		out := ev.Data["output"].(map[string]any)
		// 1000 input tokens at $3/Mtok and 500 output tokens at $15/Mtok.
		if out["_tokens"] != float64(1500) || out["_cost_usd"] != 0.0105 {
			t.Errorf("output = %v, want _tokens 1500 and _cost_usd 0.0105", out)
		}
	}
}

// await_answers answers inline when every posted question is answered.
func TestAwaitAnswersInline(t *testing.T) {
	script := &fakellm.Script{Turns: []fakellm.Turn{
		{Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{{Name: "ask_user_async", Input: map[string]any{"question": "Colour?"}}}},
		{Match: fakellm.Match{ToolResultFor: "ask_user_async"}, ToolCalls: []fakellm.ToolCall{{Name: "await_answers"}}},
		{Match: fakellm.Match{ToolResultFor: "await_answers"}, Text: "done"},
	}}
	f := newFixture(t, script, "anthropic")
	ctx := context.Background()
	f.before[2] = func() {
		if _, err := f.engine.Answer(ctx, engine.AnswerRequest{RunID: "inline", InteractionID: "inline_a_async_1", Text: "blue"}); err != nil {
			t.Error(err)
		}
	}
	w, ds := dsl.CompileSource("t.bot", []byte("agent a:\n  model: \"anthropic/m\"\n  interaction: async\nworkflow w:\n  entry: a\n  a -> done\n"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	run, err := f.engine.Start(ctx, engine.StartRequest{Workflow: w, RunID: "inline", WorkDir: t.TempDir()})
	if err != nil || run.Status != engine.StatusFinished {
		t.Fatalf("run = %+v, %v", run, err)
	}
	reqs := f.fake.Requests()
	last := reqs[len(reqs)-1]
	got := last.ToolResults[len(last.ToolResults)-1].Content
	if want := "All posted questions are answered:\n- [inline_a_async_1] Q: Colour? — A: blue"; got != want {
		t.Errorf("await_answers result = %q, want %q", got, want)
	}
	var all strings.Builder
	for _, m := range last.Messages {
		all.WriteString(m.Text)
	}
	if n := strings.Count(all.String(), "blue"); n != 1 {
		t.Errorf("the answer appears %d times in the conversation, want once", n)
	}
}

// A pause in the middle of a turn with several tool calls saves a
// conversation in which every call has its result once resumed.
func TestPauseInMultiCallTurn(t *testing.T) {
	script := &fakellm.Script{Turns: []fakellm.Turn{
		{Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{ID: "toolu_list", Name: "list_files", Input: map[string]any{}},
			{ID: "toolu_ask", Name: "ask_user", Input: map[string]any{"question": "Proceed?"}},
			{ID: "toolu_after", Name: "list_files", Input: map[string]any{}},
		}},
		{Match: fakellm.Match{ToolResultFor: "ask_user"}, Text: "done"},
	}}
	f := newFixture(t, script, "anthropic")
	ctx := context.Background()
	w, ds := dsl.CompileSource("t.bot", []byte("agent a:\n  model: \"anthropic/m\"\n  interaction: human\n  tools: [list_files]\nworkflow w:\n  entry: a\n  a -> done\n"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	run, err := f.engine.Start(ctx, engine.StartRequest{Workflow: w, RunID: "multi", WorkDir: t.TempDir()})
	if err != nil || run.Status != engine.StatusPausedWaitingHuman {
		t.Fatalf("run = %+v, %v", run, err)
	}
	if run, err = f.engine.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: "multi", Answers: map[string]string{engine.QuestionKey: "yes"}}); err != nil || run.Status != engine.StatusFinished {
		t.Fatalf("resume = %+v, %v", run, err)
	}
	reqs := f.fake.Requests()
	got := map[string]string{}
	for _, tr := range reqs[len(reqs)-1].ToolResults {
		got[tr.ToolCallID] = tr.Content
	}
	if len(got) != 3 || got["toolu_ask"] != "yes" || !strings.HasPrefix(got["toolu_after"], "not run") {
		t.Errorf("tool results of the resumed request = %v", got)
	}
}

// A base URL that misses /v1 (OpenAI-compatible) or repeats it
// (Anthropic, whose client adds it) makes every call a 404: the error says
// what to change.
func TestNotFoundHintsAtTheBaseURL(t *testing.T) {
	fake := fakellm.New(&fakellm.Script{Fallback: &fakellm.Turn{Text: "hello"}}, fakellm.Options{})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	providers := map[string]claw.ProviderConfig{"local": {BaseURL: srv.URL, APIKeyEnv: "LOCAL_KEY"}}
	tests := []struct {
		name, model, baseEnv, baseURL string
		wantErr                       string // "" means the run finishes
	}{
		{"openai without /v1", "openai/gpt-5.5", "OPENAI_BASE_URL", srv.URL, "OPENAI_BASE_URL is " + srv.URL + ", without /v1: OpenAI-compatible servers answer under /v1, so try " + srv.URL + "/v1"},
		{"openai with a trailing slash", "openai/gpt-5.5", "OPENAI_BASE_URL", srv.URL + "/", "so try " + srv.URL + "/v1"},
		{"openai with /v1", "openai/gpt-5.5", "OPENAI_BASE_URL", srv.URL + "/v1", ""},
		{"a configured provider without /v1", "local/m", "", "", "the base_url of provider local (ITERION_PROVIDERS) is " + srv.URL + ", without /v1"},
		{"anthropic with /v1", "anthropic/m", "ANTHROPIC_BASE_URL", srv.URL + "/v1", "ANTHROPIC_BASE_URL is " + srv.URL + "/v1: the client adds /v1 itself, so try " + srv.URL},
		{"anthropic without /v1", "anthropic/m", "ANTHROPIC_BASE_URL", srv.URL, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k", "LOCAL_KEY": "k", tc.baseEnv: tc.baseURL}
			b := claw.New(claw.Options{Env: func(k string) string { return env[k] }, Providers: providers})
			db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			e := engine.New(engine.Options{Store: db, Backends: map[string]engine.Backend{"claw": b}})
			w, ds := dsl.CompileSource("t.bot", []byte("agent a:\n  model: \""+tc.model+"\"\nworkflow w:\n  entry: a\n  a -> done\n"))
			if ds.HasErrors() {
				t.Fatal(ds)
			}
			run, err := e.Start(context.Background(), engine.StartRequest{Workflow: w, RunID: "r", WorkDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantErr == "" {
				if run.Status != engine.StatusFinished {
					t.Errorf("status %s (%s), want finished", run.Status, run.Error)
				}
				return
			}
			if run.Status != engine.StatusFailedResumable || !strings.Contains(run.Error, "HTTP 404") || !strings.Contains(run.Error, tc.wantErr) {
				t.Errorf("run %s: %q; want a 404 saying %q", run.Status, run.Error, tc.wantErr)
			}
		})
	}
}
