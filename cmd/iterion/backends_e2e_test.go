package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/internal/agentcli"
)

// crossBackend is a backend the same workflows run on, through the CLI,
// with the backends the build makes from the environment (the real claw,
// Claude Code and pi, in the default sandbox): what the environment needs
// for it to reach the fake model server, and the names its agent calls
// the tools by.
type crossBackend struct {
	name                string
	ask, askAsync, bash string
	// bashInput is the input of a bash call running cmd.
	bashInput func(cmd string) map[string]any
	// use points c's commands at the backend and the fake model at url.
	use func(t *testing.T, c *testCLI, url string)
}

var crossBackends = []crossBackend{
	{
		name: "claw", ask: "ask_user", askAsync: "ask_user_async", bash: "bash",
		bashInput: func(cmd string) map[string]any { return map[string]any{"command": cmd} },
		use: func(t *testing.T, c *testCLI, url string) {
			c.setenv("ANTHROPIC_BASE_URL", url)
			c.setenv("ANTHROPIC_API_KEY", "test-key")
			c.setenv("ITERION_DEFAULT_BACKEND", "claw")
		},
	},
	{
		name: "claude_code", ask: "mcp__iterion__ask_user", askAsync: "mcp__iterion__ask_user_async", bash: "Bash",
		bashInput: func(cmd string) map[string]any { return map[string]any{"command": cmd, "description": "work"} },
		use: func(t *testing.T, c *testCLI, url string) {
			cmd, err := agentcli.Find(agentcli.Claude)
			if err != nil {
				t.Fatal(err)
			}
			c.setenv("ITERION_CLAUDE_COMMAND", cmd)
			c.setenv("ANTHROPIC_BASE_URL", url)
			c.setenv("ANTHROPIC_API_KEY", "test-key")
			c.setenv("ITERION_DEFAULT_BACKEND", "claude_code")
		},
	},
	{
		name: "pi", ask: "ask_user", askAsync: "ask_user_async", bash: "bash",
		bashInput: func(cmd string) map[string]any { return map[string]any{"command": cmd} },
		use: func(t *testing.T, c *testCLI, url string) {
			cmd, err := agentcli.Find(agentcli.Pi)
			if err != nil {
				t.Fatal(err)
			}
			// The operator's pi configuration points pi's Anthropic provider
			// at the fake model; the key is the server's, as for a real one.
			agent := filepath.Join(t.TempDir(), "agent")
			if err := os.MkdirAll(agent, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(agent, "models.json"), []byte(`{"providers": {"anthropic": {"baseUrl": "`+url+`"}}}`), 0o600); err != nil {
				t.Fatal(err)
			}
			c.setenv("ITERION_PI_COMMAND", cmd)
			c.setenv("PI_CODING_AGENT_DIR", agent)
			c.setenv("HOME", t.TempDir())
			c.setenv("ANTHROPIC_API_KEY", "test-key")
			c.setenv("ITERION_DEFAULT_BACKEND", "pi")
		},
	},
}

// holdingModel is a fake model server that holds the first request whose
// body holdIf accepts until the test releases it: the agent's model call
// is then in flight while the test acts.
type holdingModel struct {
	*fakellm.Server
	holdIf  func(body []byte) bool
	arrived chan struct{} // closed when the held request arrives
	release chan struct{} // closed by the test

	mu   sync.Mutex
	held bool
}

func newHoldingModel(t *testing.T, script *fakellm.Script, holdIf func([]byte) bool) (*holdingModel, string) {
	m := &holdingModel{Server: fakellm.New(script, fakellm.Options{}), holdIf: holdIf, arrived: make(chan struct{}), release: make(chan struct{})}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	t.Cleanup(m.letGo)
	return m, srv.URL
}

func (m *holdingModel) letGo() {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.release:
	default:
		close(m.release)
	}
}

func (m *holdingModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	m.mu.Lock()
	hold := !m.held && m.holdIf != nil && m.holdIf(body)
	if hold {
		m.held = true
		close(m.arrived)
	}
	m.mu.Unlock()
	if hold {
		select {
		case <-m.release:
		case <-r.Context().Done():
			return
		}
	}
	m.Server.Handler().ServeHTTP(w, r)
}

// answerElsewhere runs `iterion runs answer` as a process of its own, with
// c's environment and the build's backends: when no process owns the
// store, the answer's process continues the run itself, as a person's
// would. It returns what the command printed.
func answerElsewhere(t *testing.T, c *testCLI, st, run, id, answer string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "runs", "answer", run, id, answer, "--store-dir", st)
	var env []string
	for k, v := range c.env {
		env = append(env, k+"="+v)
	}
	cmd.Env = childEnv(append(env, "ITERION_TEST_BACKENDS=build")...)
	cmd.Dir = c.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("runs answer %s: %v\n%s", id, err, out)
	}
	return string(out)
}

// nodeOutputs are the latest outputs of a run's nodes, as `iterion runs
// show --json` gives them, without the fields that say which backend
// served them and what it cost (_session_id, _tokens, …).
func nodeOutputs(t *testing.T, c *testCLI, st, run string) map[string]map[string]any {
	t.Helper()
	code, out, errOut := c.run("runs", "show", run, "--store-dir", st, "--json")
	if code != exitOK {
		t.Fatalf("runs show: exit %d\n%s%s", code, out, errOut)
	}
	var v struct {
		Status  string                    `json:"status"`
		Outputs map[string]map[string]any `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("runs show --json: %v\n%s", err, out)
	}
	if v.Status != "finished" {
		t.Fatalf("run %s is %s, want finished", run, v.Status)
	}
	for _, o := range v.Outputs {
		maps.DeleteFunc(o, func(k string, _ any) bool { return strings.HasPrefix(k, "_") })
	}
	return v.Outputs
}

// mkfifo makes a named pipe in dir, where the agent's bash and the test
// meet without polling.
func mkfifo(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o666); err != nil {
		t.Fatal(err)
	}
	return p
}

// fifoRead waits until the agent's bash writes to fifo, or the run ends
// first (a failure).
func fifoRead(t *testing.T, fifo string, done <-chan string) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		b, err := os.ReadFile(fifo)
		if err == nil && len(b) == 0 {
			err = errors.New("nothing written")
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case r := <-done:
		// Unblock the reader: nobody will write now.
		_ = os.WriteFile(fifo, []byte("x"), 0o644)
		t.Fatalf("the run ended before its agent's bash reached %s: %s", filepath.Base(fifo), r)
	}
}

// answerOf is the text an answer reaches the agent in.
func answerOf(run string, n int) string {
	return fmt.Sprintf("[Answer to question %s_draft_async_%d] Q: ", run, n)
}

// The same workflows on claw, Claude Code and pi, through the CLI, with
// the answers given by `iterion runs answer` processes:
//   - async: the async-questions example (its drafter given bash). The
//     agent posts two questions and works on (a bash call that lasts until
//     the test lets it end); the first answer is given meanwhile and
//     reaches the request that carries the tool's result; the second is
//     given while the next model call is in flight, late for it, and
//     forces one more turn. Each reaches the agent exactly once; the gate
//     lets the run through and the finisher gets both.
//   - blocking: ask_user pauses the run (the command ends, paused, with no
//     model call after the question); the answer from another process
//     continues it there, in the same conversation.
//
// The runs' node outputs are the same on every backend.
func TestQuestionsOnEveryBackend(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	outputs := map[string]map[string]map[string]map[string]any{"async": {}, "blocking": {}} // scenario → backend → node → output
	record := func(scenario, backend string, out map[string]map[string]any) {
		mu.Lock()
		defer mu.Unlock()
		outputs[scenario][backend] = out
	}
	t.Run("backends", func(t *testing.T) {
		for _, b := range crossBackends {
			t.Run(b.name+"/async", func(t *testing.T) {
				t.Parallel()
				record("async", b.name, asyncScenario(t, b))
			})
			t.Run(b.name+"/blocking", func(t *testing.T) {
				t.Parallel()
				record("blocking", b.name, blockingScenario(t, b))
			})
		}
	})
	for scenario, byBackend := range outputs {
		want := byBackend["claw"]
		for name, got := range byBackend {
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: the outputs on %s differ from claw's (-claw +%s):\n%s", scenario, name, name, diff)
			}
		}
	}
}

// runCtx bounds one run of the CLI: a hang fails the test.
func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func asyncScenario(t *testing.T, b crossBackend) map[string]map[string]any {
	const run = "xb"
	hasResult := true
	script := &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{System: "README files", HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: b.askAsync, Input: map[string]any{"question": "Which licence?"}},
			{Name: b.askAsync, Input: map[string]any{"question": "Minimum Go version?"}},
		}},
		{Name: "work", Match: fakellm.Match{ToolResultFor: b.askAsync}, ToolCalls: []fakellm.ToolCall{
			{Name: b.bash, Input: b.bashInput("echo started > started; cat release; echo WORK-DONE")},
		}},
		{Name: "finalize", Match: fakellm.Match{Contains: "Replace every placeholder"}, Text: `{"readme": "# iterion\nMIT licence, Go 1.26 or later."}`},
		{Name: "redraft", Match: fakellm.Match{LastUserContains: answerOf(run, 2)}, Text: `{"draft": "README under MIT for Go 1.26", "open_questions": []}`},
		{Name: "draft", Match: fakellm.Match{ToolResultFor: b.bash, HasToolResult: &hasResult}, Text: `{"draft": "README under MIT, Go version TODO", "open_questions": ["go"]}`},
	}}
	// Held: the request that carries the bash call's result.
	model, url := newHoldingModel(t, script, func(body []byte) bool { return bytes.Contains(body, []byte("WORK-DONE")) })
	c := newCLI(t)
	b.use(t, c, url)
	src, err := os.ReadFile("../../examples/async-questions/main.bot")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(src), "tools: [read_file, list_files]", "tools: [read_file, list_files, bash]", 1)
	wf := writeFile(t, "main.bot", text)
	c.dir = t.TempDir() // the run's workspace, the only place its sandbox sees
	started, release := mkfifo(t, c.dir, "started"), mkfifo(t, c.dir, "release")
	st := filepath.Join(t.TempDir(), "st")

	var stderr bytes.Buffer
	done := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		code := c.exec(runCtx(t), strings.NewReader(""), &out, &stderr, "run", wf, "--store-dir", st, "--run-id", run)
		done <- fmt.Sprintf("%d %s", code, out.String())
	}()
	fifoRead(t, started, done)
	answerElsewhere(t, c, st, run, run+"_draft_async_1", "MIT")
	if err := os.WriteFile(release, []byte("go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-model.arrived:
	case r := <-done:
		t.Fatalf("the run ended before the model call after the bash call: %s\n%s", r, stderr.String())
	}
	answerElsewhere(t, c, st, run, run+"_draft_async_2", "Go 1.26")
	model.letGo()
	if r := <-done; !strings.HasPrefix(r, "0 ") || !strings.Contains(r, "run "+run+" finished") {
		t.Fatalf("run: %s\n%s", r, stderr.String())
	}

	var afterBash, lastDraft, final string
	for _, req := range model.Requests() {
		all := allMessages(req)
		switch {
		case strings.Contains(all, "Replace every placeholder"):
			final = all
		case strings.Contains(req.System, "README files"):
			if afterBash == "" && slices.ContainsFunc(req.ToolResults, func(r fakellm.ToolResult) bool { return strings.Contains(r.Content, "WORK-DONE") }) {
				afterBash = all
			}
			lastDraft = all
		}
	}
	if n := strings.Count(afterBash, answerOf(run, 1)); n != 1 {
		t.Errorf("the answer given while the agent's bash ran is %d times in the request after it, want once:\n%s", n, afterBash)
	}
	for i := 1; i <= 2; i++ {
		if n := strings.Count(lastDraft, answerOf(run, i)); n != 1 {
			t.Errorf("answer %d is %d times in the agent's conversation, want once:\n%s", i, n, lastDraft)
		}
	}
	for _, want := range []string{"MIT", "Go 1.26"} {
		if !strings.Contains(final, want) {
			t.Errorf("the finishing agent did not get %q:\n%s", want, final)
		}
	}
	if u := model.Unused(); len(u) != 0 {
		t.Errorf("model turns never used: %v", u)
	}
	outs := nodeOutputs(t, c, st, run)
	if outs["draft"]["draft"] != "README under MIT for Go 1.26" || outs["finalize"]["readme"] != "# iterion\nMIT licence, Go 1.26 or later." {
		t.Errorf("outputs = %v, want the redrafted draft and the final README", outs)
	}
	return outs
}

const pickWorkflow = `prompt pick_user:
  Choose the licence of the project: ask the operator which one.

agent pick:
  model: "anthropic/claude-sonnet-4-6"
  interaction: human
  user: pick_user

workflow pick_licence:
  entry: pick
  pick -> done
`

func blockingScenario(t *testing.T, b crossBackend) map[string]map[string]any {
	const run = "xp"
	model, url := newHoldingModel(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{HasToolResult: new(bool), LastUserContains: "Choose the licence"}, ToolCalls: []fakellm.ToolCall{
			{Name: b.ask, Input: map[string]any{"question": "Which licence?"}},
		}},
		{Name: "answered", Match: fakellm.Match{Contains: "Apache-2.0"}, Text: "The licence is Apache-2.0."},
	}}, nil)
	c := newCLI(t)
	b.use(t, c, url)
	wf := writeFile(t, "pick.bot", pickWorkflow)
	c.dir = t.TempDir()
	st := filepath.Join(t.TempDir(), "st")

	var out, errOut bytes.Buffer
	code := c.exec(runCtx(t), strings.NewReader(""), &out, &errOut, "run", wf, "--store-dir", st, "--run-id", run, "--json")
	var paused struct {
		Status        string `json:"status"`
		InteractionID string `json:"interaction_id"`
	}
	if err := json.Unmarshal(out.Bytes(), &paused); code != exitOK || err != nil || paused.Status != "paused_waiting_human" || paused.InteractionID == "" {
		t.Fatalf("run: exit %d, %v\n%s%s", code, err, out.String(), errOut.String())
	}
	if n := len(model.Requests()); n != 1 {
		t.Fatalf("%d model requests before the answer, want 1: the question pauses the agent", n)
	}
	if got := answerElsewhere(t, c, st, run, paused.InteractionID, "Apache-2.0"); !strings.Contains(got, "run "+run+" is finished") {
		t.Fatalf("the answer's process did not finish the run:\n%s", got)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2 (the question, and the resumed turn)", len(reqs))
	}
	resumed := allMessages(reqs[1])
	if !strings.Contains(resumed, "Choose the licence") || strings.Count(resumed, "Apache-2.0") != 1 {
		t.Errorf("the resumed turn does not continue the conversation with the answer once:\n%s", resumed)
	}
	outs := nodeOutputs(t, c, st, run)
	if outs["pick"]["text"] != "The licence is Apache-2.0." {
		t.Errorf("outputs = %v, want the resumed agent's answer", outs)
	}
	return outs
}
