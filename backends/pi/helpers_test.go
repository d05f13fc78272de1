package pi_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/backends/pi"
	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/agentcli"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/internal/nodesandbox/nodesandboxtest"
)

// TestMain lets the test binary stand in for the iterion binary inside
// the sandbox: the run channel runs pi under `sandbox-exec`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == runchannel.ExecCommand {
		os.Exit(runchannel.Exec(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// fakeKey is the key of the fake providers: the real key of these tests,
// which no agent may see.
const fakeKey = "sk-pitest-7a1c0e"

// harness is a pi backend over the real pi, in the default sandbox, with
// an operator agent directory whose models.json names the fake model
// server through pi's Anthropic provider ("fake/fake-claude") and its
// OpenAI one ("fakeoai/fake-gpt").
type harness struct {
	t        testing.TB
	fake     *fakellm.Server
	url      string // the fake model server's, on the host's loopback
	env      map[string]string
	agentDir string
	work     string
	sb       *nodesandbox.Sandboxes
}

func newHarness(t testing.TB, script *fakellm.Script) *harness {
	t.Helper()
	cmd, err := agentcli.Find(agentcli.Pi)
	if err != nil {
		t.Fatal(err)
	}
	fake := fakellm.New(script, fakellm.Options{})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	root := t.TempDir()
	h := &harness{t: t, fake: fake, url: srv.URL, agentDir: filepath.Join(root, "agent"), work: filepath.Join(root, "work"), sb: nodesandboxtest.New(t, nodesandbox.Options{})}
	for _, d := range []string{h.agentDir, h.work, filepath.Join(root, "home")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	models := `{
  // the project's fake model server, through pi's two providers
  "providers": {
    "fake": {"baseUrl": "` + srv.URL + `", "api": "anthropic-messages", "apiKey": "FAKE_KEY",
      "models": [{"id": "fake-claude", "name": "Fake Claude", "reasoning": false, "input": ["text"],
        "contextWindow": 200000, "maxTokens": 4096,
        "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}]},
    "fakeoai": {"baseUrl": "` + srv.URL + `/v1", "api": "openai-completions", "apiKey": "FAKE_KEY",
      "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
      "models": [{"id": "fake-gpt", "contextWindow": 128000, "maxTokens": 4096,
        "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0}}]}
  }
}`
	h.write(filepath.Join(h.agentDir, "models.json"), models)
	h.env = map[string]string{
		"ITERION_PI_COMMAND":  cmd,
		"PI_CODING_AGENT_DIR": h.agentDir,
		"HOME":                filepath.Join(root, "home"),
		"FAKE_KEY":            fakeKey,
	}
	return h
}

func (h *harness) write(path, content string) {
	h.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

// backend returns a pi backend reading the harness's environment, with
// extra variables.
func (h *harness) backend(extra ...string) *pi.Backend {
	h.t.Helper()
	env := map[string]string{}
	for k, v := range h.env {
		env[k] = v
	}
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	b, err := pi.New(pi.Options{Env: func(k string) string { return env[k] }, TempDir: h.t.TempDir(), StopGrace: 2 * time.Second})
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// task is a node's task on model, running its processes in the sandbox.
func (h *harness) task(model, user string) *engine.Task {
	return &engine.Task{
		RunID: "r1", NodeID: "n1", Model: model, User: user, WorkDir: h.work,
		Run: func(ctx context.Context, p *engine.Process) (*engine.ProcessResult, error) {
			q := *p
			q.Dir = h.work
			return h.sb.Run(ctx, &q)
		},
	}
}

// watchdog bounds a test that waits on pi: a hang fails, it never waits.
func watchdog(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
