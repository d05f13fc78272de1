package claudecode_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/engine/permission"
)

// mkfifo makes a named pipe in the workspace: the agent's bash and the
// test meet there, with no polling on either side.
func (h *harness) mkfifo(name string) string {
	h.t.Helper()
	p := filepath.Join(h.work, name)
	if err := syscall.Mkfifo(p, 0o666); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// waitFor opens the fifo for reading, which blocks until the agent's
// bash opens it to write, and reads what it wrote.
func waitFor(ctx context.Context, t testing.TB, fifo string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		b, err := os.ReadFile(fifo)
		if err == nil && len(b) == 0 {
			err = errors.New("nothing written")
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the agent's bash never reached the fifo")
	}
}

// release lets the agent's bash go on, writing to the fifo it reads.
func release(t *testing.T, fifo string) {
	t.Helper()
	if err := os.WriteFile(fifo, []byte("go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// workCall is a Bash call that signals it started and waits for the test.
var workCall = fakellm.ToolCall{Name: "Bash", Input: map[string]any{"command": "echo started > started; cat release; echo drafted", "description": "draft"}}

func execute(ctx context.Context, h *harness, task *engine.Task) (chan *engine.Result, chan error) {
	resc, errc := make(chan *engine.Result, 1), make(chan error, 1)
	go func() {
		res, err := h.backend().Execute(ctx, task)
		resc <- res
		errc <- err
	}()
	return resc, errc
}

// The agent posts a question and works on (a bash call that lasts until
// the test lets it end); the answer, recorded meanwhile, is sent on stdin
// as soon as the bell rings, and Claude Code folds it into the running
// tool's result: the next model request carries it, exactly once.
func TestAnswerWhileTheAgentWorks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: "mcp__iterion__ask_user_async", Input: map[string]any{"question": "Which licence?"}},
		}},
		{Name: "work", Match: fakellm.Match{ToolResultFor: "mcp__iterion__ask_user_async"}, ToolCalls: []fakellm.ToolCall{workCall}},
		{Name: "draft", Match: fakellm.Match{LastUserContains: "[Answer to question r1_n1_async_1]"}, Text: "README under MIT"},
	}})
	started, rel := h.mkfifo("started"), h.mkfifo("release")
	q := newQuestions()
	task := h.task("Draft the README.", "bash")
	q.bind(task)
	ctx := watchdog(t)
	resc, errc := execute(ctx, h, task)
	waitFor(ctx, t, started)
	q.answer(1, "MIT")
	release(t, rel)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if res := <-resc; res.Output["text"] != "README under MIT" {
		t.Errorf("output = %v", res.Output)
	}
	reqs := h.fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3 (ask, work, draft)", len(reqs))
	}
	if got := reqs[1].ToolResults[0].Content; !strings.HasPrefix(got, "Question posted.") || !strings.Contains(got, "(question id: r1_n1_async_1)") {
		t.Errorf("ask_user_async answered %q, want the text every backend gives", got)
	}
	want := `[Answer to question r1_n1_async_1] Q: "Which licence?" — A: MIT`
	if n := strings.Count(allText(reqs[2]), want); n != 1 {
		t.Errorf("the answer appears %d times in the draft request, want once:\n%s", n, allText(reqs[2]))
	}
	if !strings.Contains(lastUser(reqs[2]), "drafted") {
		t.Errorf("the answer did not ride with the tool's result:\n%s", lastUser(reqs[2]))
	}
}

// An answer recorded while the agent works but never rung in (an engine
// that cannot ring) is found by the final drain: it forces one more turn
// instead of being lost.
func TestLateAnswerForcesATurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{HasToolResult: new(bool), LastUserContains: "Draft"}, ToolCalls: []fakellm.ToolCall{
			{Name: "mcp__iterion__ask_user_async", Input: map[string]any{"question": "Which licence?"}},
		}},
		{Name: "work", Match: fakellm.Match{ToolResultFor: "mcp__iterion__ask_user_async"}, ToolCalls: []fakellm.ToolCall{workCall}},
		{Name: "draft", Match: fakellm.Match{ToolResultFor: "Bash"}, Text: "README, licence TODO"},
		{Name: "redraft", Match: fakellm.Match{LastUserContains: "[Answer to question r1_n1_async_1]"}, Text: "README under MIT"},
	}})
	started, rel := h.mkfifo("started"), h.mkfifo("release")
	q := newQuestions()
	task := h.task("Draft the README.", "bash")
	q.bind(task)
	task.InboxWake = nil
	ctx := watchdog(t)
	resc, errc := execute(ctx, h, task)
	waitFor(ctx, t, started)
	q.answer(1, "MIT")
	release(t, rel)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if res := <-resc; res.Output["text"] != "README under MIT" {
		t.Errorf("output = %v, want the turn the late answer forced", res.Output)
	}
	if n := len(h.fake.Requests()); n != 4 {
		t.Errorf("%d model requests, want 4", n)
	}
	if u := h.fake.Unused(); len(u) != 0 {
		t.Errorf("turns never used: %v", u)
	}
}

// A blocking ask_user pauses the run: Claude Code's turn stops with no
// further model call, and the pause carries its session. Resuming with
// the answer continues the same session (--resume): the conversation so
// far is there, the answer is the next message, and the tokens and cost
// are the resumed turn's.
func TestAskUserPausesAndResumesTheSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{HasToolResult: new(bool), LastUserContains: "Pick the database"}, ToolCalls: []fakellm.ToolCall{
			{Name: "mcp__iterion__ask_user", Input: map[string]any{"question": "Which database?", "options": []any{map[string]any{"id": "pg", "label": "Postgres"}}}},
		}},
		{Name: "after", Match: fakellm.Match{LastUserContains: "A: pg"}, Text: "Postgres it is", Usage: fakellm.Usage{InputTokens: 500, OutputTokens: 5}},
	}})
	task := h.task("Pick the database.", "read_file")
	task.Interaction = "human"
	_, err := h.backend().Execute(watchdog(t), task)
	var need *engine.NeedsInteractionError
	if !errors.As(err, &need) {
		t.Fatalf("err = %v, want a pause", err)
	}
	if need.Question != "Which database?" || len(need.Options) != 1 || need.Options[0].ID != "pg" || need.Conversation == nil || !strings.HasPrefix(need.PendingToolUseID, "toolu_") {
		t.Errorf("pause = %+v", need)
	}
	if n := len(h.fake.Requests()); n != 1 {
		t.Errorf("%d model requests before the pause, want 1", n)
	}
	task.ResumeConversation, task.ResumePendingToolUseID, task.ResumeAnswer = need.Conversation, need.PendingToolUseID, "pg"
	res, err := h.backend().Execute(watchdog(t), task)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output["text"] != "Postgres it is" {
		t.Errorf("output = %v", res.Output)
	}
	reqs := h.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	resumed := allText(reqs[1])
	if !strings.Contains(resumed, "Pick the database.") || !strings.Contains(lastUser(reqs[1]), "Q: Which database?\nA: pg") {
		t.Errorf("the resumed session lost its start or the answer:\n%s", resumed)
	}
	if res.Tokens < 505 || res.Tokens > 505+int64(len(resumed)) {
		t.Errorf("tokens = %d, want the resumed turn's only", res.Tokens)
	}
	// Claude Code prices claude-sonnet-4-5 at $3 per million input tokens
	// and $15 per million output: the resumed turn's cost, not the
	// session's (which the resumed session carries over).
	if limit := 3e-6*float64(res.Tokens) + 15e-6*5; res.CostUSD <= 0 || res.CostUSD > limit {
		t.Errorf("cost = %v, want the resumed turn's (at most %v)", res.CostUSD, limit)
	}
	var first struct {
		SessionID string `json:"session_id"`
	}
	decode(t, need.Conversation, &first)
	if res.SessionID != first.SessionID {
		t.Errorf("resumed session %q, want the paused one %q", res.SessionID, first.SessionID)
	}
}

// await_answers with a question pending pauses the run; resumed with the
// answers, the session goes on from them.
func TestAwaitAnswersPauses(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{HasToolResult: new(bool), LastUserContains: "Draft"}, ToolCalls: []fakellm.ToolCall{
			{Name: "mcp__iterion__ask_user_async", Input: map[string]any{"question": "Which licence?"}},
		}},
		{Name: "wait", Match: fakellm.Match{ToolResultFor: "mcp__iterion__ask_user_async"}, ToolCalls: []fakellm.ToolCall{{Name: "mcp__iterion__await_answers"}}},
		{Name: "after", Match: fakellm.Match{LastUserContains: "All posted questions are answered"}, Text: "README under MIT"},
	}})
	q := newQuestions()
	task := h.task("Draft the README.")
	q.bind(task)
	_, err := h.backend().Execute(watchdog(t), task)
	var need *engine.NeedsInteractionError
	if !errors.As(err, &need) || len(need.AwaitPending) != 1 || need.AwaitPending[0].InteractionID != qid(1) {
		t.Fatalf("err = %v, want a pause on the pending question", err)
	}
	q.answer(1, "MIT")
	text, _ := task.CollectAnswers(t.Context())
	task.ResumeConversation, task.ResumePendingToolUseID, task.ResumeAnswer = need.Conversation, need.PendingToolUseID, text
	task.InboxDrain(t.Context()) // the engine drains the answers' copies on such a resume
	res, err := h.backend().Execute(watchdog(t), task)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output["text"] != "README under MIT" {
		t.Errorf("output = %v", res.Output)
	}
}

// A call the policy asks a person about pauses the run; the operator's
// allow lets that very call run on resume, once; a deny refuses it with
// their words.
func TestPermissionAskPausesTheRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, answer string
		runs         bool
	}{
		{"allowed", "allow", true},
		{"refused", "not in the repo, please", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
				{Name: "try", Match: fakellm.Match{HasToolResult: new(bool), LastUserContains: "Make"}, ToolCalls: []fakellm.ToolCall{
					{Name: "Bash", Input: map[string]any{"command": "touch made"}},
				}},
				{Name: "again", Match: fakellm.Match{LastUserContains: "Make the same call again now"}, ToolCalls: []fakellm.ToolCall{
					{Name: "Bash", Input: map[string]any{"command": "touch made"}},
				}},
				{Name: "done", Match: fakellm.Match{ToolResultFor: "Bash"}, Text: "made"},
				{Name: "refused", Match: fakellm.Match{LastUserContains: "Your call to Bash was refused by the operator: not in the repo, please."}, Text: "not made"},
			}})
			task := h.task("Make a file.", "bash")
			task.Permission = &permission.Policy{Mode: permission.Ask}
			_, err := h.backend().Execute(watchdog(t), task)
			var need *engine.NeedsInteractionError
			if !errors.As(err, &need) {
				t.Fatalf("err = %v, want a pause", err)
			}
			if !strings.Contains(need.Question, `The agent asks to call Bash with {"command":"touch made"}`) || len(need.Options) != 2 {
				t.Errorf("question = %q, options %v", need.Question, need.Options)
			}
			if _, err := os.Stat(filepath.Join(h.work, "made")); err == nil {
				t.Fatal("the call ran before anybody answered")
			}
			task.ResumeConversation, task.ResumePendingToolUseID, task.ResumeAnswer = need.Conversation, need.PendingToolUseID, tc.answer
			res, err := h.backend().Execute(watchdog(t), task)
			if err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Stat(filepath.Join(h.work, "made"))
			if ran := statErr == nil; ran != tc.runs {
				t.Errorf("the call ran: %v, want %v (output %v)", ran, tc.runs, res.Output)
			}
		})
	}
}

// A hook that fails (it prints half an answer and exits 1) denies the
// call: Claude Code runs in dontAsk mode, where only the hook allows.
func TestFailingHookDenies(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "try", Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: "Bash", Input: map[string]any{"command": "touch pwned"}},
		}},
		{Name: "after", Match: fakellm.Match{ToolResultFor: "Bash"}, Text: "denied"},
	}})
	b := h.backend()
	setHook(b, "claude-hook-crash")
	res, err := b.Execute(watchdog(t), h.task("Make a file.", "bash"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(h.work, "pwned")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the call ran although its hook failed: %v (output %v)", err, res.Output)
	}
	reqs := h.fake.Requests()
	if got := reqs[len(reqs)-1].ToolResults[0]; !strings.Contains(got.Content, "denied") {
		t.Errorf("the model read %+v, want a denial", got)
	}
}

// An MCP server slow to answer: the store holds ask_user_async's post;
// Claude Code waits for it (no second model request, no retried call),
// and the post's text reaches the model when it comes.
func TestSlowMCPServer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: "mcp__iterion__ask_user_async", Input: map[string]any{"question": "Which licence?"}},
		}},
		{Name: "after", Match: fakellm.Match{ToolResultFor: "mcp__iterion__ask_user_async"}, Text: "posted"},
	}})
	q := newQuestions()
	entered, held := make(chan struct{}), make(chan struct{})
	q.post = func(ctx context.Context) error {
		close(entered)
		select {
		case <-held:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	task := h.task("Ask about the licence.")
	q.bind(task)
	ctx := watchdog(t)
	resc, errc := execute(ctx, h, task)
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the question was never posted")
	}
	if n := len(h.fake.Requests()); n != 1 {
		t.Errorf("%d model requests while the MCP call is held, want 1", n)
	}
	close(held)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	<-resc
	reqs := h.fake.Requests()
	if len(q.posted) != 1 || len(reqs) != 2 || !strings.Contains(reqs[1].ToolResults[0].Content, "(question id: r1_n1_async_1)") {
		t.Errorf("posted %v; requests %d", q.posted, len(reqs))
	}
}

// An API error ends the turn with a result that says so while Claude
// Code itself exits cleanly: the node fails, typed from the result.
func TestAPIErrorIsAFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		code   string
		says   string
	}{
		{"bad request", 400, engine.CodeExecutionFailed, "scripted refusal"},
		{"bad key", 401, "AUTH_FAILED", "HTTP 401"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{{Status: tc.status, Error: "scripted refusal", Repeat: true}}})
			_, err := h.backend().Execute(watchdog(t), h.task("Say hello."))
			var be *engine.BackendError
			if !errors.As(err, &be) || be.Code != tc.code || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %v, want %s with the API's message", err, tc.code)
			}
		})
	}
}

func decode(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := jsonUnmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// Cancelled while the agent's bash runs: the turn is interrupted, the
// node ends with the context's error, and nothing of Claude Code's tree
// is left (the bash that read the fifo is gone).
func TestCancelMidTool(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "work", Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{workCall}},
	}, Fallback: &fakellm.Turn{Text: "stopped"}})
	started, rel := h.mkfifo("started"), h.mkfifo("release")
	ctx, cancel := context.WithCancel(watchdog(t))
	resc, errc := execute(ctx, h, h.task("Work.", "bash"))
	waitFor(watchdog(t), t, started)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want the cancellation", err)
	}
	<-resc
	// A fifo opened to write without blocking fails when nobody reads it.
	f, err := os.OpenFile(rel, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err == nil {
		f.Close()
		t.Error("the agent's bash still reads its fifo after the node ended")
	} else if !errors.Is(err, syscall.ENXIO) {
		t.Errorf("opening the fifo: %v", err)
	}
}
