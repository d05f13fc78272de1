//go:build linux

package runchannel_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/agentcli"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/internal/nodesandbox/nodesandboxtest"
)

// The real Claude Code, in the default sandbox with no network, reaches
// the fake model through the forwarder and the proxy with its dummy key;
// the bash it runs prints its environment, which holds no real key; the
// fake model received the real one.
func TestClaudeCodeThroughTheProxy(t *testing.T) {
	claude, err := agentcli.Find(agentcli.Claude)
	if err != nil {
		t.Fatal(err)
	}
	claude, err = filepath.EvalSymlinks(claude)
	if err != nil {
		t.Fatal(err)
	}
	fake := fakellm.New(&fakellm.Script{Turns: []fakellm.Turn{
		{Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{{Name: "Bash", Input: map[string]any{"command": "env", "description": "print the environment"}}}},
		{Match: fakellm.Match{ToolResultFor: "Bash"}, Text: "DONE", Repeat: true},
	}, Fallback: &fakellm.Turn{Text: "ok"}}, fakellm.Options{})
	srv := httptest.NewServer(fake.Handler())
	defer srv.Close()
	sb := nodesandboxtest.New(t, nodesandbox.Options{})
	s := open(t, &engine.Task{RunID: "r1", NodeID: "n"}, runchannel.Options{Upstreams: []runchannel.Upstream{
		{Name: runchannel.Anthropic, BaseURL: srv.URL, Key: realAnthropic, Auth: runchannel.AuthAPIKey},
	}})
	p, err := s.Wrap(&engine.Process{
		Argv:   []string{claude, "-p", "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash", "--", "Print your environment."},
		Env:    []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "ENABLE_TOOL_SEARCH=false"},
		Mounts: []engine.Mount{{Source: claude}},
		Dir:    t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout) + string(res.Stderr)
	if res.ExitCode != 0 || !strings.Contains(string(res.Stdout), `"result":"DONE"`) {
		t.Fatalf("claude exit %d, want a DONE result:\n%s", res.ExitCode, out)
	}
	reqs := fake.Requests()
	if len(reqs) < 2 {
		t.Fatalf("the fake model got %d requests", len(reqs))
	}
	var env string
	for _, r := range reqs {
		if got := r.Header.Get("X-Api-Key"); got != realAnthropic {
			t.Errorf("request %d carried key %q, want the real one", r.Seq, got)
		}
		for _, tr := range r.ToolResults {
			env += tr.Content
		}
	}
	if !strings.Contains(env, "ANTHROPIC_API_KEY="+s.Key()) || !strings.Contains(env, "ANTHROPIC_BASE_URL="+s.BaseURL("anthropic")) {
		t.Errorf("the agent's bash did not see the dummy key and the proxy's URL:\n%s", env)
	}
	if strings.Contains(env, realAnthropic) || strings.Contains(out, realAnthropic) {
		t.Errorf("the real key reached the sandbox:\n%s", env)
	}
}
