//go:build linux

package runchannel_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/internal/nodesandbox/nodesandboxtest"
)

// Wrap runs the CLI under sandbox-exec with the session's environment
// after the backend's, mounts the binary and the session's directory, and
// asks for model-only.
func TestWrap(t *testing.T) {
	s := open(t, &engine.Task{RunID: "r1", NodeID: "n"}, runchannel.Options{Upstreams: upstreamsAt("http://127.0.0.1:9")})
	in := &engine.Process{Argv: []string{"pi", "--mode", "rpc"}, Env: []string{"PI_CODING_AGENT_DIR=/tmp/agent", "ANTHROPIC_API_KEY=placeholder"},
		Mounts: []engine.Mount{{Source: "/opt/pi"}}}
	p, err := s.Wrap(in)
	if err != nil {
		t.Fatal(err)
	}
	sock := s.Socket()
	dir := sock[:strings.LastIndex(sock, "/")]
	base := strings.TrimSuffix(s.BaseURL("anthropic"), "/model/anthropic")
	listen := strings.TrimPrefix(base, "http://")
	wantArgv := []string{s.Binary(), "sandbox-exec", "--forward", listen + "=" + sock, "--", "pi", "--mode", "rpc"}
	if !slices.Equal(p.Argv, wantArgv) {
		t.Errorf("argv = %q, want %q", p.Argv, wantArgv)
	}
	if want := []engine.Mount{{Source: "/opt/pi"}, {Source: s.Binary()}, {Source: dir}}; !slices.Equal(p.Mounts, want) {
		t.Errorf("mounts = %+v, want %+v (read-only)", p.Mounts, want)
	}
	if p.Network != engine.NetworkModelOnly {
		t.Errorf("network = %v, want model-only", p.Network)
	}
	env := map[string]string{}
	for _, kv := range p.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v // the last one wins, as in the sandbox
	}
	for k, want := range map[string]string{
		"PI_CODING_AGENT_DIR": "/tmp/agent", "ANTHROPIC_API_KEY": s.Key(), "ANTHROPIC_BASE_URL": base + "/model/anthropic",
		"OPENAI_API_KEY": s.Key(), "OPENAI_BASE_URL": base + "/model/openai", "ITERION_CHANNEL": sock, "ITERION_RUN_ID": "r1", "ITERION_NODE_ID": "n",
	} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	if s.BaseURL("zai") != base+"/model/zai" || s.BaseURL("unknown") != "" {
		t.Errorf("BaseURL(zai) = %q, BaseURL(unknown) = %q", s.BaseURL("zai"), s.BaseURL("unknown"))
	}
	if len(in.Argv) != 3 || len(in.Env) != 2 || len(in.Mounts) != 1 || in.Network != engine.NetworkDefault {
		t.Errorf("Wrap changed its argument: %+v", in)
	}
	open := &engine.Process{Argv: []string{"pi"}, Network: engine.NetworkOpen}
	if p, _ := s.Wrap(open); p.Network != engine.NetworkOpen {
		t.Errorf("a process that asks for open gets %v", p.Network)
	}
	for _, kv := range []string{"ANTHROPIC_API_KEY=" + realAnthropic, "SOME_TOKEN=x" + realGateway} {
		_, err := s.Wrap(&engine.Process{Argv: []string{"pi"}, Env: []string{kv}})
		if err == nil || !strings.Contains(err.Error(), "holds a provider's real key") || strings.Contains(err.Error(), "REAL") {
			t.Errorf("Wrap with %s: err = %v, want a refusal that does not repeat the key", kv[:strings.Index(kv, "=")], err)
		}
	}
	if _, err := s.Wrap(&engine.Process{}); err == nil {
		t.Error("Wrap of a process without a command succeeded")
	}
}

// The whole path, in the default sandbox with no network: a CLI inside
// reaches the fake model on the host's loopback through the forwarder and
// the proxy, on both APIs, streaming; a direct connection to the same
// address fails; the CLI's environment holds the dummy key and no real
// one; the fake model received the real keys.
func TestInsideTheSandbox(t *testing.T) {
	fake := fakellm.New(&fakellm.Script{Fallback: &fakellm.Turn{Text: "hello from the fake model"}}, fakellm.Options{})
	srv := httptest.NewServer(fake.Handler())
	defer srv.Close()
	t.Setenv("ANTHROPIC_API_KEY", realAnthropic) // the server's environment: never the sandbox's
	t.Setenv("OPENAI_API_KEY", realOpenAI)
	t.Setenv("ANTHROPIC_BASE_URL", srv.URL)
	t.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	sb := nodesandboxtest.New(t, nodesandbox.Options{})
	task := &engine.Task{RunID: "r1", NodeID: "n", Interaction: "async"}
	s, err := runchannel.Open(context.Background(), task, runchannel.Options{Binary: testBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, err := s.Wrap(&engine.Process{Argv: []string{testBinary(t), "probe", "env", ";", "anthropic", ";", "openai", ";", "dial", strings.TrimPrefix(srv.URL, "http://")}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", res.ExitCode, out, res.Stderr)
	}
	for _, want := range []string{
		"env: ANTHROPIC_API_KEY=" + s.Key(),
		"env: OPENAI_API_KEY=" + s.Key(),
		"post: event: message_stop", `"text":"hello`, // Anthropic, streamed
		"post: data: [DONE]", // OpenAI, streamed
		"dial: cut",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the sandbox's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "post: status 200") != 2 {
		t.Errorf("want two answered requests:\n%s", out)
	}
	for _, secret := range []string{realAnthropic, realOpenAI} {
		if strings.Contains(out, secret) || strings.Contains(string(res.Stderr), secret) {
			t.Errorf("a real key reached the sandbox:\n%s", out)
		}
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the fake model got %d requests, want 2", len(reqs))
	}
	if got := reqs[0].Header.Get("X-Api-Key"); got != realAnthropic {
		t.Errorf("Anthropic request key = %q, want the real one", got)
	}
	if got := reqs[1].Header.Get("Authorization"); got != "Bearer "+realOpenAI {
		t.Errorf("OpenAI request auth = %q, want the real key", got)
	}
}
