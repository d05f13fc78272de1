package claudecode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/backends/askmcp"
	"github.com/iterion-bot/iterion/backends/claudecode"
	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/agentcli"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/internal/nodesandbox/nodesandboxtest"
)

// TestMain lets the test binary be the iterion binary inside the
// sandbox: the wrapper sandbox-exec, the MCP server mcp-ask-user and the
// hook claude-hook are the real ones; claude-hook-crash is a hook that
// fails.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case runchannel.ExecCommand:
			os.Exit(runchannel.Exec(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case "mcp-ask-user":
			if err := askmcp.Main(context.Background(), os.Getenv, os.Stdin, os.Stdout, "test"); err != nil {
				fmt.Fprintln(os.Stderr, "iterion mcp-ask-user:", err)
				os.Exit(1)
			}
			os.Exit(0)
		case claudecode.HookCommand:
			os.Exit(claudecode.HookMain(context.Background(), os.Getenv, os.Stdin, os.Stdout, os.Stderr))
		case "claude-hook-crash":
			fmt.Println(`{"hookSpecificOutput": {"permissionDecision": "al`)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// realKey is the Anthropic key of these tests: the server's, which no
// agent may see.
const realKey = "sk-ant-cctest-5b2e9d71c4"

// harness is a Claude Code backend over the real CLI (the pinned one of
// make deps), in the default sandbox, against a fake model server that
// the server's environment names as Anthropic's base URL.
type harness struct {
	t    testing.TB
	fake *fakellm.Server
	env  map[string]string
	work string
	sb   *nodesandbox.Sandboxes
}

func newHarness(t testing.TB, script *fakellm.Script) *harness {
	t.Helper()
	cmd, err := agentcli.Find(agentcli.Claude)
	if err != nil {
		t.Fatal(err)
	}
	fake := fakellm.New(script, fakellm.Options{})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	h := &harness{t: t, fake: fake, work: filepath.Join(t.TempDir(), "work"), sb: nodesandboxtest.New(t, nodesandbox.Options{})}
	if err := os.MkdirAll(h.work, 0o700); err != nil {
		t.Fatal(err)
	}
	h.env = map[string]string{
		"ITERION_CLAUDE_COMMAND": cmd,
		"ANTHROPIC_API_KEY":      realKey,
		"ANTHROPIC_BASE_URL":     srv.URL,
	}
	return h
}

// backend returns a Claude Code backend reading the harness's
// environment, with the test binary as iterion's.
func (h *harness) backend(opts ...func(*claudecode.Options)) *claudecode.Backend {
	h.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		h.t.Fatal(err)
	}
	o := claudecode.Options{Env: func(k string) string { return h.env[k] }, TempDir: h.t.TempDir(), Binary: exe, StopGrace: 3 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	return claudecode.New(o)
}

// task is a node's task, running its processes in the sandbox.
func (h *harness) task(user string, tools ...string) *engine.Task {
	return &engine.Task{
		RunID: "r1", NodeID: "n1", Model: "anthropic/claude-sonnet-4-5", User: user, Tools: tools, WorkDir: h.work,
		Run: func(ctx context.Context, p *engine.Process) (*engine.ProcessResult, error) {
			q := *p
			q.Dir = h.work
			return h.sb.Run(ctx, &q)
		},
	}
}

func (h *harness) write(name, content string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.work, name), []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// watchdog bounds a test that waits on Claude Code: a hang fails, it
// never waits forever.
func watchdog(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// questions is the engine's side of a node's interaction tools, in
// memory: posted questions, their answers, the node's inbox and its bell.
type questions struct {
	mu      sync.Mutex
	posted  []string
	answers map[string]string
	inbox   []string
	bell    chan struct{}
	// post, when set, runs before a question is recorded (a slow store).
	post func(ctx context.Context) error
}

func newQuestions() *questions {
	return &questions{answers: map[string]string{}, bell: make(chan struct{})}
}

func qid(n int) string { return fmt.Sprintf("r1_n1_async_%d", n) }

// bind gives task the closures of an async node.
func (q *questions) bind(task *engine.Task) {
	task.Interaction = "async"
	task.PostQuestion = func(ctx context.Context, aq engine.AsyncQuestion) (string, error) {
		if q.post != nil {
			if err := q.post(ctx); err != nil {
				return "", err
			}
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		q.posted = append(q.posted, aq.Question)
		return qid(len(q.posted)), nil
	}
	task.PendingQuestions = func(context.Context) ([]engine.PendingQuestion, error) {
		q.mu.Lock()
		defer q.mu.Unlock()
		var out []engine.PendingQuestion
		for i, text := range q.posted {
			if _, ok := q.answers[qid(i+1)]; !ok {
				out = append(out, engine.PendingQuestion{InteractionID: qid(i + 1), Question: text})
			}
		}
		return out, nil
	}
	task.CollectAnswers = func(context.Context) (string, error) {
		q.mu.Lock()
		defer q.mu.Unlock()
		var lines []string
		for i, text := range q.posted {
			lines = append(lines, fmt.Sprintf("- [%s] Q: %s — A: %s", qid(i+1), text, q.answers[qid(i+1)]))
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

// answer records an answer, queues its message and rings, as
// engine.Answer does.
func (q *questions) answer(n int, text string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.answers[qid(n)] = text
	q.inbox = append(q.inbox, engine.AnswerMessage(qid(n), q.posted[n-1], text))
	close(q.bell)
	q.bell = make(chan struct{})
}

// lastUser is the text of a request's last user turn.
func lastUser(r fakellm.Recorded) string {
	var parts []string
	for _, m := range r.LastUserTurn() {
		parts = append(parts, m.Text)
	}
	return strings.Join(parts, "\n")
}

// allText is the text of every message of a request.
func allText(r fakellm.Recorded) string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Text + "\n")
	}
	return b.String()
}

func setHook(b *claudecode.Backend, cmd string) { claudecode.SetHookForTest(b, cmd) }

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
