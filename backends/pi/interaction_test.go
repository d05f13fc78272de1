package pi_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/backends/asktools"
	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/engine/permission"
)

// questions is the engine's side of a node's interaction tools, in
// memory: posted questions, their answers, the node's inbox and its bell.
type questions struct {
	mu      sync.Mutex
	posted  []string
	answers map[string]string
	inbox   []string
	bell    chan struct{}
}

func newQuestions() *questions {
	return &questions{answers: map[string]string{}, bell: make(chan struct{})}
}

// bind gives task the closures of an async node.
func (q *questions) bind(task *engine.Task) {
	task.Interaction = "async"
	task.PostQuestion = func(_ context.Context, aq engine.AsyncQuestion) (string, error) {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.posted = append(q.posted, aq.Question)
		return fmt.Sprintf("r1_n1_async_%d", len(q.posted)), nil
	}
	task.PendingQuestions = func(context.Context) ([]engine.PendingQuestion, error) {
		q.mu.Lock()
		defer q.mu.Unlock()
		var out []engine.PendingQuestion
		for i, text := range q.posted {
			id := fmt.Sprintf("r1_n1_async_%d", i+1)
			if _, ok := q.answers[id]; !ok {
				out = append(out, engine.PendingQuestion{InteractionID: id, Question: text})
			}
		}
		return out, nil
	}
	task.CollectAnswers = func(context.Context) (string, error) {
		q.mu.Lock()
		defer q.mu.Unlock()
		var lines []string
		for i, text := range q.posted {
			id := fmt.Sprintf("r1_n1_async_%d", i+1)
			lines = append(lines, fmt.Sprintf("- [%s] Q: %s — A: %s", id, text, q.answers[id]))
		}
		return "All posted questions are answered:\n" + strings.Join(lines, "\n"), nil
	}
	task.InboxDrain = func(context.Context) ([]string, error) {
		q.mu.Lock()
		defer q.mu.Unlock()
		out := q.inbox
		q.inbox = nil
		return out, nil
	}
	task.InboxWake = func() <-chan struct{} {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.bell
	}
}

// answer records an answer, queues its message and rings, as Answer does.
func (q *questions) answer(id, text string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	fmt.Sscanf(id, "r1_n1_async_%d", &n)
	q.answers[id] = text
	q.inbox = append(q.inbox, engine.AnswerMessage(id, q.posted[n-1], text))
	close(q.bell)
	q.bell = make(chan struct{})
}

// The agent posts a question and works on (a tool that lasts until the
// test lets it end); the answer, recorded meanwhile, is steered into the
// turn: the next model request carries it, exactly once, and no later one
// again.
func TestAnswerWhileTheAgentWorks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: "ask_user_async", Input: map[string]any{"question": "Which licence?"}},
		}},
		{Name: "work", Match: fakellm.Match{ToolResultFor: "ask_user_async"}, ToolCalls: []fakellm.ToolCall{
			{Name: "bash", Input: map[string]any{"command": "echo > started; while [ ! -e release ]; do sleep 0.01; done; echo drafted"}},
		}},
		{Name: "draft", Match: fakellm.Match{LastUserContains: "[Answer to question r1_n1_async_1]"}, Text: "README under MIT"},
	}})
	mkfifo(t, filepath.Join(h.work, "started"))
	q := newQuestions()
	task := h.task("fake/fake-claude", "Draft the README.")
	q.bind(task)
	ctx := watchdog(t)
	done := make(chan error, 1)
	var res *engine.Result
	go func() {
		var err error
		res, err = h.backend().Execute(ctx, task)
		done <- err
	}()
	waitOpen(ctx, t, filepath.Join(h.work, "started"))
	q.answer("r1_n1_async_1", "MIT")
	h.write(filepath.Join(h.work, "release"), "")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if res.Output["text"] != "README under MIT" {
		t.Errorf("output = %v", res.Output)
	}
	reqs := h.fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	if got := reqs[1].ToolResults[len(reqs[1].ToolResults)-1].Content; !strings.Contains(got, asktools.PostedText) || !strings.Contains(got, "r1_n1_async_1") {
		t.Errorf("ask_user_async's result = %q", got)
	}
	var seen int
	for _, m := range reqs[2].Messages {
		seen += strings.Count(m.Text, "[Answer to question r1_n1_async_1]")
	}
	if seen != 1 {
		t.Errorf("the answer is %d times in the last request, want once", seen)
	}
	if !strings.Contains(reqs[2].System, "[ASYNC QUESTIONS]") {
		t.Error("the system prompt lacks the async questions' section")
	}
	for _, name := range []string{"ask_user", "ask_user_async", "await_answers"} {
		if !contains(reqs[0].Tools, name) {
			t.Errorf("tool %s not offered: %v", name, reqs[0].Tools)
		}
	}
}

// A blocking ask_user pauses the node (no model call after it); resumed
// with the answer, the same pi session goes on from it.
func TestAskUserPausesAndResumes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{HasToolResult: new(bool), LastUserContains: "Drop the table"}, ToolCalls: []fakellm.ToolCall{
			{Name: "ask_user", Input: map[string]any{"question": "Really drop the users table?", "options": []any{map[string]any{"id": "y", "label": "Yes"}}}},
		}, Usage: fakellm.Usage{InputTokens: 100, OutputTokens: 10}},
		{Name: "resumed", Match: fakellm.Match{LastUserContains: "The operator answered your ask_user question: yes, drop it"}, Text: "Dropped.",
			Usage: fakellm.Usage{InputTokens: 200, OutputTokens: 5}},
	}})
	task := h.task("fake/fake-claude", "Drop the table.")
	task.Interaction = "human"
	b := h.backend()
	_, err := b.Execute(watchdog(t), task)
	var need *engine.NeedsInteractionError
	if !errors.As(err, &need) {
		t.Fatalf("err = %v, want a pause", err)
	}
	if need.Question != "Really drop the users table?" || len(need.Options) != 1 || need.PendingToolUseID == "" || len(need.Conversation) == 0 {
		t.Fatalf("pause = %+v", need)
	}
	if n := len(h.fake.Requests()); n != 1 {
		t.Fatalf("%d model requests before the pause, want 1", n)
	}
	task.ResumeConversation, task.ResumePendingToolUseID, task.ResumeAnswer = need.Conversation, need.PendingToolUseID, "yes, drop it"
	res, err := b.Execute(watchdog(t), task)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output["text"] != "Dropped." {
		t.Errorf("output = %v", res.Output)
	}
	reqs := h.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	// The resumed request is the same conversation: the question and the
	// pause's result are in it.
	var tr string
	for _, r := range reqs[1].ToolResults {
		tr += r.Content
	}
	if !strings.Contains(tr, "The run is now paused") || !strings.Contains(reqs[1].Messages[0].Text, "Drop the table.") {
		t.Errorf("the resumed conversation lost its start: %+v", reqs[1].Messages)
	}
	// The resumed execution reports its own call, not the paused one's
	// again.
	if res.Tokens != 205 {
		t.Errorf("tokens = %d, want 205", res.Tokens)
	}
}

// await_answers with everything answered returns the answers inline;
// with a question pending it pauses the node.
func TestAwaitAnswers(t *testing.T) {
	t.Parallel()
	for _, answered := range []bool{true, false} {
		t.Run(fmt.Sprintf("answered=%v", answered), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
				{Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{{Name: "ask_user_async", Input: map[string]any{"question": "Min Go?"}}}},
				{Match: fakellm.Match{ToolResultFor: "ask_user_async"}, ToolCalls: []fakellm.ToolCall{{Name: "await_answers", Input: map[string]any{}}}},
				{Match: fakellm.Match{ToolResultFor: "await_answers"}, Text: "go 1.26 it is"},
			}})
			q := newQuestions()
			task := h.task("fakeoai/fake-gpt", "Plan.")
			q.bind(task)
			if answered {
				post := task.PostQuestion
				task.PostQuestion = func(ctx context.Context, aq engine.AsyncQuestion) (string, error) {
					id, err := post(ctx, aq)
					q.answer(id, "Go 1.26")
					q.mu.Lock()
					q.inbox = nil // delivered with await_answers below
					q.mu.Unlock()
					return id, err
				}
			}
			res, err := h.backend().Execute(watchdog(t), task)
			if !answered {
				var need *engine.NeedsInteractionError
				if !errors.As(err, &need) || len(need.AwaitPending) != 1 || need.AwaitPending[0].Question != "Min Go?" {
					t.Fatalf("err = %v, want a pause on the pending question", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			reqs := h.fake.Requests()
			last := reqs[len(reqs)-1].ToolResults
			if got := last[len(last)-1].Content; !strings.Contains(got, "[r1_n1_async_1] Q: Min Go? — A: Go 1.26") {
				t.Errorf("await_answers' result = %q", got)
			}
			if res.Output["text"] != "go 1.26 it is" {
				t.Errorf("output = %v", res.Output)
			}
		})
	}
}

// Cancelled while its bash tool runs, pi aborts the turn and stops; no
// process of its tree is left.
func TestCancelMidTool(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{ToolCalls: []fakellm.ToolCall{{Name: "bash", Input: map[string]any{"command": "echo > started; sleep 600.31337"}}}},
	}, Fallback: &fakellm.Turn{Text: "aborted?"}})
	mkfifo(t, filepath.Join(h.work, "started"))
	ctx, cancel := context.WithCancel(watchdog(t))
	done := make(chan error, 1)
	go func() {
		_, err := h.backend().Execute(ctx, h.task("fake/fake-claude", "Sleep."))
		done <- err
	}()
	waitOpen(ctx, t, filepath.Join(h.work, "started"))
	began := time.Now()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	t.Logf("stopped %s after the cancel", time.Since(began).Round(time.Millisecond))
	if left := processesWith("600.31337"); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
	if left := processesWith(h.agentDir); len(left) > 0 {
		t.Errorf("pi left running: %v", left)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The workflow's permission policy decides pi's tool calls through the
// extension: a refused bash never runs and the agent reads why; a call the
// policy asks about pauses the run, and once allowed that same call runs.
func TestPermissionGate(t *testing.T) {
	t.Parallel()
	bashDenied, err := permission.ParseRules([]string{"Bash(touch *)"})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("deny", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
			{Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{{Name: "bash", Input: map[string]any{"command": "touch ran"}}}},
			{Match: fakellm.Match{ToolResultFor: "bash"}, Text: "could not"},
		}})
		task := h.task("fake/fake-claude", "Touch it.")
		task.Permission = &permission.Policy{Deny: bashDenied}
		if _, err := h.backend().Execute(watchdog(t), task); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(h.work, "ran")); err == nil {
			t.Error("the refused bash ran")
		}
		tr := h.fake.Requests()[1].ToolResults
		if got := tr[len(tr)-1]; !got.IsError || !strings.Contains(got.Content, "refused by the workflow's permission policy (the rule Bash(touch *))") {
			t.Errorf("the agent read %+v", got)
		}
	})
	t.Run("ask", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
			{Name: "call", Match: fakellm.Match{HasToolResult: new(bool), LastUserContains: "Touch it."}, ToolCalls: []fakellm.ToolCall{{Name: "bash", Input: map[string]any{"command": "touch ran"}}}},
			{Name: "again", Match: fakellm.Match{LastUserContains: "The operator allowed the call"}, ToolCalls: []fakellm.ToolCall{{Name: "bash", Input: map[string]any{"command": "touch ran"}}}},
			{Name: "done", Match: fakellm.Match{ToolResultFor: "bash"}, Text: "touched", Repeat: true},
		}})
		task := h.task("fake/fake-claude", "Touch it.")
		task.Permission = &permission.Policy{Mode: permission.Ask}
		b := h.backend()
		_, err := b.Execute(watchdog(t), task)
		var need *engine.NeedsInteractionError
		if !errors.As(err, &need) || !strings.Contains(need.Question, `The agent asks to call bash with {"command":"touch ran"}`) || len(need.Options) != 2 {
			t.Fatalf("err = %v, want a permission question", err)
		}
		if _, err := os.Stat(filepath.Join(h.work, "ran")); err == nil {
			t.Fatal("the held bash ran before the answer")
		}
		task.ResumeConversation, task.ResumePendingToolUseID, task.ResumeAnswer = need.Conversation, need.PendingToolUseID, "allow"
		res, err := b.Execute(watchdog(t), task)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(h.work, "ran")); err != nil || res.Output["text"] != "touched" {
			t.Errorf("after allow: %v, output %v", err, res.Output)
		}
	})
}
