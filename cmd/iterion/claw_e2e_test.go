package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/backends/fakellm"
)

// The whole loop with the real claw backend against the fake model
// server: the agent posts two questions and calls the await_answers tool;
// the run pauses; two `iterion runs answer` commands answer through the
// owner's socket; the last one resumes the run by itself and the agent's
// await_answers call receives both answers.
func TestClawAwaitToolThroughTheCLI(t *testing.T) {
	hasResult := true
	script := &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{System: "README files", HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: "ask_user_async", Input: map[string]any{"question": "Which licence?"}},
			{Name: "ask_user_async", Input: map[string]any{"question": "Minimum Go version?"}},
		}},
		{Name: "wait", Match: fakellm.Match{ToolResultFor: "ask_user_async"}, ToolCalls: []fakellm.ToolCall{{Name: "await_answers"}}},
		{Name: "draft", Match: fakellm.Match{ToolResultFor: "await_answers", HasToolResult: &hasResult}, Text: `{"draft": "README under MIT", "open_questions": []}`},
		{Name: "finalize", Match: fakellm.Match{Contains: "Replace every placeholder"}, Text: `{"readme": "final"}`},
	}}
	fake := fakellm.New(script, fakellm.Options{})
	srv := httptest.NewServer(fake.Handler())
	defer srv.Close()
	t.Setenv("ANTHROPIC_BASE_URL", srv.URL)
	t.Setenv("ANTHROPIC_API_KEY", "test-key")

	st := filepath.Join(t.TempDir(), "st")
	pr, pw := io.Pipe()
	done := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		code := run(context.Background(), []string{"run", "../../examples/async-questions/main.bot", "--store-dir", st, "--run-id", "cl-1", "--no-interactive"}, &out, pw)
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
		id := fmt.Sprintf("cl-1_draft_async_%d", i+1)
		if code, out, errOut := runCLI(t, "runs", "answer", "cl-1", id, answer, "--store-dir", st); code != exitOK {
			t.Fatalf("runs answer %s: exit %d\n%s%s", id, code, out, errOut)
		}
	}
	if r := <-done; !strings.HasPrefix(r, "0 ") || !strings.Contains(r, "run cl-1 finished") {
		t.Fatalf("run: %s", r)
	}
	var awaitResult string
	for _, req := range fake.Requests() {
		for _, tr := range req.ToolResults {
			if tr.Name == "await_answers" {
				awaitResult = tr.Content
			}
		}
	}
	for _, want := range []string{"All posted questions are answered:", "[cl-1_draft_async_1] Q: Which licence? — A: MIT", "[cl-1_draft_async_2] Q: Minimum Go version? — A: Go 1.26"} {
		if !strings.Contains(awaitResult, want) {
			t.Errorf("the await_answers result lacks %q:\n%s", want, awaitResult)
		}
	}
}

// A provider declared in the ITERION_PROVIDERS file is reached through the
// OpenAI dialect at its base URL with its own key.
func TestProvidersFile(t *testing.T) {
	fake := fakellm.New(&fakellm.Script{Turns: []fakellm.Turn{{Text: "hi from local"}}}, fakellm.Options{})
	srv := httptest.NewServer(fake.Handler())
	defer srv.Close()
	dir := t.TempDir()
	providers := writeFile(t, "providers.json", `{"providers": {"local": {"base_url": "`+srv.URL+`/v1", "api_key_env": "LOCAL_KEY"}}}`)
	t.Setenv("ITERION_PROVIDERS", providers)
	wf := writeFile(t, "w.bot", "agent a:\n  model: \"local/tiny\"\nworkflow w:\n  entry: a\n  a -> done\n")

	code, _, errOut := runCLI(t, "run", wf, "--store-dir", filepath.Join(dir, "st1"))
	if code != exitError || !strings.Contains(errOut, "set LOCAL_KEY") {
		t.Errorf("without the key: exit %d, %s", code, errOut)
	}
	t.Setenv("LOCAL_KEY", "k")
	code, out, errOut := runCLI(t, "run", wf, "--store-dir", filepath.Join(dir, "st2"))
	if code != exitOK || !strings.Contains(out, "finished") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if reqs := fake.Requests(); len(reqs) != 1 || reqs[0].Dialect != fakellm.OpenAI || reqs[0].Model != "tiny" {
		t.Errorf("requests = %+v", reqs)
	}

	bad := writeFile(t, "bad.json", `{"providers": {"x": {"base_url": "http://h"}}}`)
	t.Setenv("ITERION_PROVIDERS", bad)
	if code, _, errOut := runCLI(t, "run", wf, "--store-dir", filepath.Join(dir, "st3")); code != exitError || !strings.Contains(errOut, "needs base_url and api_key_env") {
		t.Errorf("bad providers file: exit %d, %s", code, errOut)
	}
}
