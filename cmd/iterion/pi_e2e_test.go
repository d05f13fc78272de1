package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/internal/agentcli"
)

// usePi makes the CLI run its agents on the real pi (the pinned one of
// make deps), in the sandbox, against a fake model server reached through
// pi's own Anthropic provider: the operator's pi configuration points
// that provider at it, and the key comes from ANTHROPIC_API_KEY as it
// would for a real one. The shipped workflows run unchanged.
func usePi(t *testing.T, c *testCLI, script *fakellm.Script) *fakellm.Server {
	t.Helper()
	cmd, err := agentcli.Find(agentcli.Pi)
	if err != nil {
		t.Fatal(err)
	}
	fake := fakellm.New(script, fakellm.Options{})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	agent := filepath.Join(t.TempDir(), "agent")
	if err := os.MkdirAll(agent, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(agent, "models.json"), []byte(`{"providers": {"anthropic": {"baseUrl": "`+srv.URL+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c.setenv("ITERION_PI_COMMAND", cmd)
	c.setenv("PI_CODING_AGENT_DIR", agent)
	c.setenv("HOME", t.TempDir())
	c.setenv("ANTHROPIC_API_KEY", "test-key")
	c.setenv("ITERION_DEFAULT_BACKEND", "pi")
	return fake
}

// The async-questions example on pi: the agent posts its two questions and
// works on (a bash call that lasts until the test lets it end); `iterion
// runs answer` answers both meanwhile; pi's steer brings them into the
// turn, each exactly once; the gate releases and the finishing agent gets
// them.
func TestPiAsyncQuestionsExample(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	hasResult := true
	fake := usePi(t, c, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{System: "README files", HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: "ask_user_async", Input: map[string]any{"question": "Which licence?"}},
			{Name: "ask_user_async", Input: map[string]any{"question": "Minimum Go version?"}},
		}},
		{Name: "work", Match: fakellm.Match{ToolResultFor: "ask_user_async"}, ToolCalls: []fakellm.ToolCall{
			{Name: "bash", Input: map[string]any{"command": "while [ ! -e release ]; do sleep 0.01; done; echo drafted"}},
		}},
		{Name: "draft", Match: fakellm.Match{ToolResultFor: "bash", HasToolResult: &hasResult}, Text: `{"draft": "README", "open_questions": []}`},
		{Name: "finalize", Match: fakellm.Match{Contains: "Replace every placeholder"}, Text: `{"readme": "final"}`},
	}})
	// The run's workspace is dir, the only place its sandbox sees.
	example, err := filepath.Abs("../../examples/async-questions/main.bot")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	st := filepath.Join(dir, "st")
	pr, pw := io.Pipe()
	done := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		code := c.exec(context.Background(), nil, &out, pw, "run", example, "--store-dir", st, "--run-id", "pim")
		pw.Close()
		done <- fmt.Sprintf("%d %s", code, out.String())
	}()
	posted := make(chan struct{})
	go func() {
		defer func() { _, _ = io.Copy(io.Discard, pr) }()
		defer close(posted)
		sc := bufio.NewScanner(pr)
		for n := 0; n < 2 && sc.Scan(); {
			if strings.HasPrefix(sc.Text(), "? question ") {
				n++
			}
		}
	}()
	<-posted
	for i, answer := range []string{"MIT", "Go 1.26"} {
		id := fmt.Sprintf("pim_draft_async_%d", i+1)
		if code, out, errOut := c.run("runs", "answer", "pim", id, answer, "--store-dir", st); code != exitOK {
			t.Fatalf("runs answer: exit %d\n%s%s", code, out, errOut)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := <-done; !strings.HasPrefix(r, "0 ") {
		t.Fatalf("run: %s", r)
	}
	var draftReq, finalReq string
	for _, req := range fake.Requests() {
		var b strings.Builder
		for _, m := range req.Messages {
			b.WriteString(m.Text + "\n")
		}
		switch {
		case strings.Contains(b.String(), "Replace every placeholder"):
			finalReq = b.String()
		case len(req.ToolResults) > 0 && req.ToolResults[len(req.ToolResults)-1].Name == "bash":
			draftReq = b.String()
		}
	}
	for i, answer := range []string{"MIT", "Go 1.26"} {
		want := fmt.Sprintf("[Answer to question pim_draft_async_%d] Q: ", i+1)
		if n := strings.Count(draftReq, want); n != 1 {
			t.Errorf("answer %d appears %d times in the agent's conversation, want once:\n%s", i+1, n, draftReq)
		}
		if !strings.Contains(finalReq, answer) {
			t.Errorf("the finishing agent did not receive %q", answer)
		}
	}
}

// The await_answers tool on pi, through the CLI: the run pauses with pi's
// session in its checkpoint, two `iterion runs answer` release it, and
// the resumed pi session's await_answers call gets both answers.
func TestPiAwaitToolThroughTheCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	hasResult := true
	fake := usePi(t, c, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{System: "README files", HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: "ask_user_async", Input: map[string]any{"question": "Which licence?"}},
			{Name: "ask_user_async", Input: map[string]any{"question": "Minimum Go version?"}},
		}},
		{Name: "wait", Match: fakellm.Match{ToolResultFor: "ask_user_async"}, ToolCalls: []fakellm.ToolCall{{Name: "await_answers"}}},
		{Name: "draft", Match: fakellm.Match{LastUserContains: "All posted questions are answered", HasToolResult: &hasResult}, Text: `{"draft": "README under MIT", "open_questions": []}`},
		{Name: "draft after resume", Match: fakellm.Match{LastUserContains: "All posted questions are answered"}, Text: `{"draft": "README under MIT", "open_questions": []}`},
		{Name: "finalize", Match: fakellm.Match{Contains: "Replace every placeholder"}, Text: `{"readme": "final"}`},
	}})
	st := filepath.Join(t.TempDir(), "st")
	pr, pw := io.Pipe()
	done := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		code := c.exec(context.Background(), nil, &out, pw, "run", "../../examples/async-questions/main.bot", "--store-dir", st, "--run-id", "pia")
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
	for i, answer := range []string{"MIT", "Go 1.26"} {
		id := fmt.Sprintf("pia_draft_async_%d", i+1)
		if code, out, errOut := c.run("runs", "answer", "pia", id, answer, "--store-dir", st); code != exitOK {
			t.Fatalf("runs answer %s: exit %d\n%s%s", id, code, out, errOut)
		}
	}
	if r := <-done; !strings.HasPrefix(r, "0 ") || !strings.Contains(r, "run pia finished") {
		t.Fatalf("run: %s", r)
	}
	var resumed string
	for _, req := range fake.Requests() {
		if strings.Contains(lastUser(req), "All posted questions are answered") {
			resumed = lastUser(req)
			// The resumed session is the paused one: its start is there.
			if !strings.Contains(req.Messages[0].Text, "Draft the README") {
				t.Errorf("the resumed conversation lost its start: %q", req.Messages[0].Text)
			}
		}
	}
	for _, want := range []string{"[pia_draft_async_1] Q: Which licence? — A: MIT", "[pia_draft_async_2] Q: Minimum Go version? — A: Go 1.26"} {
		if !strings.Contains(resumed, want) {
			t.Errorf("the resumed agent did not get %q:\n%s", want, resumed)
		}
	}
}

// Print mode has no channel for the async tools: it refuses an async node
// before pi starts.
func TestPiPrintModeRefusesAsync(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	fake := usePi(t, c, &fakellm.Script{Fallback: &fakellm.Turn{Text: "never"}})
	c.setenv("ITERION_PI_MODE", "print")
	code, out, errOut := c.run("run", "../../examples/async-questions/main.bot", "--store-dir", filepath.Join(t.TempDir(), "st"))
	if code != exitError || !strings.Contains(out+errOut, "CAPABILITY_UNSUPPORTED") || !strings.Contains(out+errOut, `backend "pi" cannot serve interaction: async`) {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
	if n := len(fake.Requests()); n > 0 {
		t.Errorf("%d model requests, want none", n)
	}
}

func lastUser(r fakellm.Recorded) string {
	var parts []string
	for _, m := range r.LastUserTurn() {
		parts = append(parts, m.Text)
	}
	return strings.Join(parts, "\n")
}

// Nodes that name no backend run on pi only when the operator names it:
// ITERION_BACKEND_PREFERENCE. A pi that is not installed is then refused
// before the run starts, with the npm command that installs it.
func TestPiOnlyByPreference(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	fake := fakellm.New(&fakellm.Script{Fallback: &fakellm.Turn{Text: "hello from claw"}}, fakellm.Options{})
	srv := httptest.NewServer(fake.Handler())
	defer srv.Close()
	c.setenv("ANTHROPIC_BASE_URL", srv.URL)
	c.setenv("ANTHROPIC_API_KEY", "k")
	c.setenv("ITERION_PI_COMMAND", filepath.Join(t.TempDir(), "no-pi-here"))
	wf := writeFile(t, "w.bot", "agent a:\n  model: \"anthropic/claude-sonnet-4-6\"\n  user: \"hi\"\nworkflow w:\n  entry: a\n  a -> done\n")
	if code, out, errOut := c.run("run", wf, "--store-dir", filepath.Join(t.TempDir(), "st")); code != exitOK || len(fake.Requests()) != 1 {
		t.Fatalf("without a preference: exit %d, %d requests\n%s%s", code, len(fake.Requests()), out, errOut)
	}
	c.setenv("ITERION_BACKEND_PREFERENCE", "pi,claw")
	code, out, errOut := c.run("run", wf, "--store-dir", filepath.Join(t.TempDir(), "st"))
	if code == exitOK || !strings.Contains(out+errOut, "npm install -g @mariozechner/pi-coding-agent@0.73.1") {
		t.Errorf("preferring pi: exit %d\n%s%s", code, out, errOut)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("%d requests, want only claw's", n)
	}
}
