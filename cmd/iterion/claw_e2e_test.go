package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/engine"
)

// The whole loop with the real claw backend against the fake model
// server: the agent posts two questions and calls the await_answers tool;
// the run pauses; two `iterion runs answer` commands answer through the
// owner's socket; the last one resumes the run by itself and the agent's
// await_answers call receives both answers.
func TestClawAwaitToolThroughTheCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	fake := awaitReadmeModel(t, c)

	st := filepath.Join(t.TempDir(), "st")
	pr, pw := io.Pipe()
	done := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		code := c.exec(context.Background(), nil, &out, pw, "run", "../../examples/async-questions/main.bot", "--store-dir", st, "--run-id", "cl-1")
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
		if code, out, errOut := c.run("runs", "answer", "cl-1", id, answer, "--store-dir", st); code != exitOK {
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
	t.Parallel()
	c := newCLI(t)
	fake := fakellm.New(&fakellm.Script{Turns: []fakellm.Turn{{Text: "hi from local"}}}, fakellm.Options{})
	srv := httptest.NewServer(fake.Handler())
	defer srv.Close()
	dir := t.TempDir()
	providers := writeFile(t, "providers.json", `{"providers": {"local": {"base_url": "`+srv.URL+`/v1", "api_key_env": "LOCAL_KEY"}}}`)
	c.setenv("ITERION_PROVIDERS", providers)
	wf := writeFile(t, "w.bot", "agent a:\n  model: \"local/tiny\"\nworkflow w:\n  entry: a\n  a -> done\n")

	code, _, errOut := c.run("run", wf, "--store-dir", filepath.Join(dir, "st1"))
	if code != exitError || !strings.Contains(errOut, "set LOCAL_KEY") {
		t.Errorf("without the key: exit %d, %s", code, errOut)
	}
	c.setenv("LOCAL_KEY", "k")
	code, out, errOut := c.run("run", wf, "--store-dir", filepath.Join(dir, "st2"))
	if code != exitOK || !strings.Contains(out, "finished") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if reqs := fake.Requests(); len(reqs) != 1 || reqs[0].Dialect != fakellm.OpenAI || reqs[0].Model != "tiny" {
		t.Errorf("requests = %+v", reqs)
	}

	bad := writeFile(t, "bad.json", `{"providers": {"x": {"base_url": "http://h"}}}`)
	c.setenv("ITERION_PROVIDERS", bad)
	if code, _, errOut := c.run("run", wf, "--store-dir", filepath.Join(dir, "st3")); code != exitError || !strings.Contains(errOut, "needs base_url and api_key_env") {
		t.Errorf("bad providers file: exit %d, %s", code, errOut)
	}
}

// The scenario, on both API dialects: the agent posts two questions
// and keeps working (a bash tool call that lasts until the test lets it
// end); `iterion runs answer` answers both through the owner's socket; the
// answers reach the agent's conversation mid-run, each exactly once; the
// gate releases and the finishing agent receives them.
func TestClawAnswersArriveMidRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ dialect, model string }{
		{"anthropic", "anthropic/claude-sonnet-4-6"},
		{"openai", "openai/gpt-5.5"},
	} {
		t.Run(tc.dialect, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			dir := t.TempDir()
			release := filepath.Join(dir, "release")
			hasResult := true
			script := &fakellm.Script{Turns: []fakellm.Turn{
				{Name: "ask", Match: fakellm.Match{System: "README files", HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
					{Name: "ask_user_async", Input: map[string]any{"question": "Which licence?"}},
					{Name: "ask_user_async", Input: map[string]any{"question": "Minimum Go version?"}},
				}},
				{Name: "work", Match: fakellm.Match{ToolResultFor: "ask_user_async"}, ToolCalls: []fakellm.ToolCall{
					// The run's workspace is dir, the only place its sandbox sees.
					{Name: "bash", Input: map[string]any{"command": "while [ ! -e release ]; do sleep 0.01; done; echo drafted"}},
				}},
				{Name: "draft", Match: fakellm.Match{ToolResultFor: "bash", HasToolResult: &hasResult}, Text: `{"draft": "README", "open_questions": []}`},
				{Name: "finalize", Match: fakellm.Match{Contains: "Replace every placeholder"}, Text: `{"readme": "final"}`},
			}}
			fake := fakellm.New(script, fakellm.Options{})
			srv := httptest.NewServer(fake.Handler())
			defer srv.Close()
			c.setenv("ANTHROPIC_BASE_URL", srv.URL)
			c.setenv("ANTHROPIC_API_KEY", "k")
			c.setenv("OPENAI_BASE_URL", srv.URL+"/v1")
			c.setenv("OPENAI_API_KEY", "k")
			src, err := os.ReadFile("../../examples/async-questions/main.bot")
			if err != nil {
				t.Fatal(err)
			}
			text := strings.ReplaceAll(string(src), `"anthropic/claude-sonnet-4-6"`, `"`+tc.model+`"`)
			text = strings.Replace(text, "tools: [read_file, list_files]", "tools: [read_file, list_files, bash]", 1)
			wf := writeFile(t, "main.bot", text)
			c.dir = dir // the run's workspace
			st := filepath.Join(dir, "st")
			pr, pw := io.Pipe()
			done := make(chan string, 1)
			go func() {
				var out bytes.Buffer
				code := c.exec(context.Background(), nil, &out, pw, "run", wf, "--store-dir", st, "--run-id", "mid")
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
				id := fmt.Sprintf("mid_draft_async_%d", i+1)
				if code, out, errOut := c.run("runs", "answer", "mid", id, answer, "--store-dir", st); code != exitOK {
					t.Fatalf("runs answer: exit %d\n%s%s", code, out, errOut)
				}
			}
			if err := os.WriteFile(release, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if r := <-done; !strings.HasPrefix(r, "0 ") {
				for _, req := range fake.Requests() {
					var last []string
					for _, m := range req.LastUserTurn() {
						last = append(last, m.Text)
					}
					t.Logf("request %d turn %d last user: %q", req.Seq, req.Turn, clip(strings.Join(last, " | ")))
				}
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
				want := fmt.Sprintf("[Answer to question mid_draft_async_%d] Q: ", i+1)
				if n := strings.Count(draftReq, want); n != 1 {
					t.Errorf("answer %d appears %d times in the agent's conversation, want once:\n%s", i+1, n, draftReq)
				}
				if !strings.Contains(finalReq, answer) {
					t.Errorf("the finishing agent did not receive %q", answer)
				}
			}
		})
	}
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300]
	}
	return s
}

// The same through `iterion serve`: answers posted to the REST API that
// leave no question open resume the run paused on await_answers (serve's
// answer hook), and it finishes with both answers.
func TestServeAnswersResumeAwaitingRun(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	awaitReadmeModel(t, c)
	c.setenv("ITERION_API_TOKEN", "tok")
	st := filepath.Join(t.TempDir(), "st")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = root // serve takes workflow paths relative to its directory

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := c.exec(ctx, nil, pw, io.Discard, "serve", "--addr", "127.0.0.1:0", "--store-dir", st)
		pw.Close()
		done <- code
	}()
	base := listenAddr(t, pr)
	call := func(method, path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	if out := call("POST", "/api/runs", `{"file_path": "examples/async-questions/main.bot", "run_id": "sv-1"}`); out["run_id"] != "sv-1" {
		t.Fatalf("launch: %v", out)
	}
	waitRunStatus(t, base, "tok", "sv-1", engine.StatusPausedWaitingHuman)
	first := call("POST", "/api/runs/sv-1/interactions/sv-1_draft_async_1/answer", `{"answer": "MIT"}`)
	last := call("POST", "/api/runs/sv-1/interactions/sv-1_draft_async_2/answer", `{"answer": "Go 1.26"}`)
	if first["resumed"] != false || last["resumed"] != true {
		t.Errorf("resumed: first %v, last %v; want false then true", first["resumed"], last["resumed"])
	}
	waitRunStatus(t, base, "tok", "sv-1", engine.StatusFinished)
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("serve exited %d", code)
	}
}

// awaitReadmeModel serves, as the Anthropic API of c's commands, the
// README drafter of examples/async-questions that posts two questions and
// calls the await_answers tool, then the finisher.
func awaitReadmeModel(t *testing.T, c *testCLI) *fakellm.Server {
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
	t.Cleanup(srv.Close)
	c.setenv("ANTHROPIC_BASE_URL", srv.URL)
	c.setenv("ANTHROPIC_API_KEY", "test-key")
	return fake
}

// ITERION_PERMISSION is the mode of agents whose workflow writes none; a
// value that is no mode stops the command with the variable named.
func TestPermissionFromTheEnvironment(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	wf := writeFile(t, "w.bot", "compute c:\n  expr:\n    x: \"1\"\n\nworkflow w:\n  entry: c\n  c -> done\n")
	c.setenv("ITERION_PERMISSION", "maybe")
	if code, _, errOut := c.run("run", wf, "--store-dir", filepath.Join(t.TempDir(), "st")); code != exitError || !strings.Contains(errOut, "ITERION_PERMISSION") || !strings.Contains(errOut, "off, ask or deny") {
		t.Errorf("ITERION_PERMISSION=maybe: exit %d, %s", code, errOut)
	}
	c.setenv("ITERION_PERMISSION", "deny")
	if code, _, errOut := c.run("run", wf, "--store-dir", filepath.Join(t.TempDir(), "st")); code != exitOK {
		t.Errorf("ITERION_PERMISSION=deny on a workflow with no agent: exit %d, %s", code, errOut)
	}
}
