package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/iterion-bot/iterion/backends/claudecode"
	"github.com/iterion-bot/iterion/backends/claw"
	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/agentcli"
)

// heldModel is a fake model server whose hold-th request waits until the
// test lets it go: the agent is then busy (its model call in flight)
// while the test acts.
type heldModel struct {
	*fakellm.Server
	hold    int
	arrived chan struct{} // closed when the held request arrives
	release chan struct{} // closed by the test

	mu sync.Mutex
	n  int
}

func (m *heldModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.n++
	held := m.n == m.hold
	m.mu.Unlock()
	if held {
		close(m.arrived)
		select {
		case <-m.release:
		case <-r.Context().Done():
			return
		}
	}
	m.Server.Handler().ServeHTTP(w, r)
}

// useClaude makes the CLI run its agents on the real Claude Code (the
// pinned one of make deps), in the sandbox, against a fake model server
// the server's environment names as Anthropic's base URL. The iterion
// binary the sandbox runs (sandbox-exec, mcp-ask-user, claude-hook) is this
// test binary, which acts as the program when ITERION_TEST_MAIN=1 (see
// TestMain). hold, when not 0, is the request the model holds.
func useClaude(t *testing.T, c *testCLI, script *fakellm.Script, hold int) *heldModel {
	t.Helper()
	cmd, err := agentcli.Find(agentcli.Claude)
	if err != nil {
		t.Fatal(err)
	}
	m := &heldModel{Server: fakellm.New(script, fakellm.Options{}), hold: hold, arrived: make(chan struct{}), release: make(chan struct{})}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-m.release:
		default:
			close(m.release)
		}
	})
	c.setenv("ITERION_CLAUDE_COMMAND", cmd)
	c.setenv("ANTHROPIC_API_KEY", "test-key")
	c.setenv("ANTHROPIC_BASE_URL", srv.URL)
	c.setenv("ITERION_DEFAULT_BACKEND", "claude_code")
	c.backends = func(getenv func(string) string) (map[string]engine.Backend, error) {
		return map[string]engine.Backend{
			"claw":        claw.New(claw.Options{Env: getenv}),
			"claude_code": claudecode.New(claudecode.Options{Env: getenv, ExtraEnv: []string{"ITERION_TEST_MAIN=1"}}),
		}, nil
	}
	return m
}

// answerFromAnotherProcess runs `iterion runs answer` as a process of its
// own, as a person would in another terminal.
func answerFromAnotherProcess(t *testing.T, st, run, id, answer string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "runs", "answer", run, id, answer, "--store-dir", st)
	cmd.Env = childEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("runs answer %s: %v\n%s", id, err, out)
	}
}

// The async-questions example on Claude Code: the agent posts its two
// questions, and while its next model call is in flight two `iterion runs
// answer` processes answer them; the answers go to Claude Code's stdin as
// they are recorded and reach the agent in its next request, each exactly
// once; the gate releases and the finishing agent gets them.
func TestClaudeAsyncQuestionsExample(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	model := useClaude(t, c, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{System: "README files", HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: "mcp__iterion__ask_user_async", Input: map[string]any{"question": "Which licence?"}},
			{Name: "mcp__iterion__ask_user_async", Input: map[string]any{"question": "Minimum Go version?"}},
		}},
		{Name: "finalize", Match: fakellm.Match{Contains: "Replace every placeholder"}, Text: `{"readme": "final"}`},
		{Name: "draft", Match: fakellm.Match{ToolResultFor: "mcp__iterion__ask_user_async"}, Text: `{"draft": "README, licence TODO", "open_questions": ["licence", "go"]}`},
		{Name: "redraft", Match: fakellm.Match{LastUserContains: "[Answer to question"}, Repeat: true, Text: `{"draft": "README under MIT for Go 1.26", "open_questions": []}`},
	}}, 2)
	example, err := filepath.Abs("../../examples/async-questions/main.bot")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	st := filepath.Join(dir, "st")
	var stderr bytes.Buffer
	done := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		code := c.exec(context.Background(), nil, &out, &stderr, "run", example, "--store-dir", st, "--run-id", "cca")
		done <- fmt.Sprintf("%d %s", code, out.String())
	}()
	select {
	case <-model.arrived:
	case r := <-done:
		t.Fatalf("the run ended before its draft call: %s\n%s", r, stderr.String())
	}
	for i, answer := range []string{"MIT", "Go 1.26"} {
		answerFromAnotherProcess(t, st, "cca", fmt.Sprintf("cca_draft_async_%d", i+1), answer)
	}
	close(model.release)
	if r := <-done; !strings.HasPrefix(r, "0 ") || !strings.Contains(r, "run cca finished") {
		t.Fatalf("run: %s\n%s", r, stderr.String())
	}
	var redraft, final string
	for _, req := range model.Requests() {
		text := allMessages(req)
		switch {
		case strings.Contains(text, "Replace every placeholder"):
			final = text
		case strings.Contains(text, "[Answer to question"):
			redraft = text
		}
	}
	for i, answer := range []string{"MIT", "Go 1.26"} {
		want := fmt.Sprintf("[Answer to question cca_draft_async_%d] Q: ", i+1)
		if n := strings.Count(redraft, want); n != 1 {
			t.Errorf("answer %d appears %d times in the agent's conversation, want once:\n%s", i+1, n, redraft)
		}
		if !strings.Contains(final, answer) {
			t.Errorf("the finishing agent did not receive %q", answer)
		}
	}
}

// The await_answers tool on Claude Code, through the CLI: the run pauses
// with Claude Code's session in its checkpoint, two `iterion runs answer`
// processes release it, and the resumed session goes on from both answers.
func TestClaudeAwaitToolThroughTheCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	model := useClaude(t, c, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{System: "README files", HasToolResult: new(bool), LastUserContains: "Draft the README"}, ToolCalls: []fakellm.ToolCall{
			{Name: "mcp__iterion__ask_user_async", Input: map[string]any{"question": "Which licence?"}},
			{Name: "mcp__iterion__ask_user_async", Input: map[string]any{"question": "Minimum Go version?"}},
		}},
		{Name: "wait", Match: fakellm.Match{ToolResultFor: "mcp__iterion__ask_user_async"}, ToolCalls: []fakellm.ToolCall{{Name: "mcp__iterion__await_answers"}}},
		{Name: "finalize", Match: fakellm.Match{Contains: "Replace every placeholder"}, Text: `{"readme": "final"}`},
		{Name: "draft after resume", Match: fakellm.Match{LastUserContains: "All posted questions are answered"}, Text: `{"draft": "README under MIT", "open_questions": []}`},
	}}, 0)
	example, err := filepath.Abs("../../examples/async-questions/main.bot")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = t.TempDir()
	st := filepath.Join(c.dir, "st")
	pr, pw := io.Pipe()
	done := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		code := c.exec(context.Background(), nil, &out, pw, "run", example, "--store-dir", st, "--run-id", "ccw")
		pw.Close()
		done <- fmt.Sprintf("%d %s", code, out.String())
	}()
	paused := make(chan struct{})
	go func() {
		defer func() { _, _ = io.Copy(io.Discard, pr) }()
		defer close(paused)
		sc := bufio.NewScanner(pr)
		for sc.Scan() && !strings.Contains(sc.Text(), "waits for the answers") {
		}
	}()
	<-paused
	select {
	case r := <-done:
		t.Fatalf("the run ended instead of pausing: %s", r)
	default:
	}
	for i, answer := range []string{"MIT", "Go 1.26"} {
		answerFromAnotherProcess(t, st, "ccw", fmt.Sprintf("ccw_draft_async_%d", i+1), answer)
	}
	if r := <-done; !strings.HasPrefix(r, "0 ") || !strings.Contains(r, "run ccw finished") {
		t.Fatalf("run: %s", r)
	}
	var resumed fakellm.Recorded
	for _, req := range model.Requests() {
		if strings.Contains(lastUserText(req), "All posted questions are answered") {
			resumed = req
		}
	}
	if !strings.Contains(allMessages(resumed), "Draft the README") {
		t.Errorf("the resumed conversation lost its start:\n%s", allMessages(resumed))
	}
	for _, want := range []string{"[ccw_draft_async_1] Q: Which licence? — A: MIT", "[ccw_draft_async_2] Q: Minimum Go version? — A: Go 1.26"} {
		if !strings.Contains(lastUserText(resumed), want) {
			t.Errorf("the resumed agent did not get %q:\n%s", want, lastUserText(resumed))
		}
	}
}

// Preflight names a missing Claude Code with the npm command that
// installs it, before the run starts.
func TestClaudeMissingCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.setenv("ITERION_CLAUDE_COMMAND", filepath.Join(t.TempDir(), "no-claude"))
	c.setenv("ANTHROPIC_API_KEY", "test-key")
	c.setenv("ITERION_DEFAULT_BACKEND", "claude_code")
	code, out, errOut := c.run("run", "../../examples/async-questions/main.bot", "--store-dir", filepath.Join(t.TempDir(), "st"))
	if code == exitOK || !strings.Contains(out+errOut, "npm install -g "+agentcli.Claude.Package) {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
}

func allMessages(r fakellm.Recorded) string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Text + "\n")
	}
	return b.String()
}

func lastUserText(r fakellm.Recorded) string {
	var parts []string
	for _, m := range r.LastUserTurn() {
		parts = append(parts, m.Text)
	}
	return strings.Join(parts, "\n")
}
