package pi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/engine/permission"
)

func TestResolveModelAndEffort(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  modelRef
	}{
		{"anthropic/claude-sonnet-4-6", modelRef{"anthropic", "claude-sonnet-4-6"}},
		{"openrouter/meta-llama/llama-4", modelRef{"openrouter", "meta-llama/llama-4"}},
		{"sonnet", modelRef{"", "sonnet"}},
		{" ", modelRef{}},
		{"/x", modelRef{"", "/x"}},
	} {
		if got := resolveModel(tc.model); got != tc.want {
			t.Errorf("resolveModel(%q) = %+v, want %+v", tc.model, got, tc.want)
		}
	}
	for effort, want := range map[string]string{"": "", "low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "xhigh", "bogus": ""} {
		if got := mapEffort(effort); got != want {
			t.Errorf("mapEffort(%q) = %q, want %q", effort, got, want)
		}
	}
}

func TestArgv(t *testing.T) {
	agent := t.TempDir()
	if err := os.MkdirAll(filepath.Join(agent, "extensions", "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"extensions/a.ts", "extensions/b.js", "extensions/notes.md", "extensions/dir/index.js", "extensions/.hidden.ts"} {
		if err := os.WriteFile(filepath.Join(agent, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base := invocation{launcher: &launcher{argv: []string{"/usr/bin/node", "/pi/cli.js"}}, agentDir: agent, sessionDir: "/x/sessions"}
	tests := []struct {
		name string
		inv  func(*invocation)
		mode string
		want []string
	}{
		{"untrusted rpc", func(i *invocation) {
			i.model, i.thinking, i.systemFile, i.extFile = modelRef{"fake", "m"}, "high", "/x/files/system.md", "/x/files/iterion-pi.js"
		}, "rpc", []string{"/usr/bin/node", "/pi/cli.js", "--mode", "rpc", "--session-dir", "/x/sessions", "--provider", "fake", "--model", "m",
			"--thinking", "high", "--append-system-prompt", "/x/files/system.md", "--no-extensions",
			"-e", agent + "/extensions/a.ts", "-e", agent + "/extensions/b.js", "-e", agent + "/extensions/dir/index.js", "-e", "/x/files/iterion-pi.js"}},
		{"trusted print resumed, no context files", func(i *invocation) {
			i.trust, i.noCtx, i.resumeFile, i.model = true, true, "/x/sessions/s.jsonl", modelRef{id: "sonnet"}
		}, "json", []string{"/usr/bin/node", "/pi/cli.js", "--mode", "json", "--session", "/x/sessions/s.jsonl", "--model", "sonnet", "--no-context-files"}},
	}
	for _, tc := range tests {
		inv := base
		tc.inv(&inv)
		if diff := cmp.Diff(tc.want, inv.argv(tc.mode)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func testBackend(t *testing.T, env map[string]string) *Backend {
	t.Helper()
	b, err := New(Options{Env: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestModeAndCapabilities(t *testing.T) {
	if b := testBackend(t, nil); b.Mode() != ModeRPC || !b.Capabilities().AsyncQuestions {
		t.Errorf("default: mode %s, %+v", b.Mode(), b.Capabilities())
	}
	if b := testBackend(t, map[string]string{"ITERION_PI_MODE": "print"}); b.Mode() != ModePrint || b.Capabilities().AsyncQuestions {
		t.Errorf("print: mode %s, %+v", b.Mode(), b.Capabilities())
	}
	if _, err := New(Options{Env: func(k string) string { return map[string]string{"ITERION_PI_MODE": "json"}[k] }}); err == nil || !strings.Contains(err.Error(), "use rpc (the default) or print") {
		t.Errorf("a bad mode: %v", err)
	}
}

// A pi that is not installed fails the preflight with the npm command.
func TestPreflightNamesTheInstall(t *testing.T) {
	b := testBackend(t, map[string]string{"ITERION_PI_COMMAND": filepath.Join(t.TempDir(), "nope")})
	err := b.Preflight("anthropic/x")
	if err == nil || !strings.Contains(err.Error(), "npm install -g @mariozechner/pi-coding-agent@0.73.1") {
		t.Errorf("err = %v", err)
	}
}

func TestCredentials(t *testing.T) {
	agent := t.TempDir()
	models := `{
  // comments are allowed, "// not in strings"
  "providers": {
    "local": {"apiKey": "LOCAL_KEY", "baseUrl": "http://x//y"}, /* block */
    "literal": {"apiKey": "sk-literal-value!"}
  }
}`
	if err := os.WriteFile(filepath.Join(agent, "models.json"), []byte(models), 0o600); err != nil {
		t.Fatal(err)
	}
	b := testBackend(t, map[string]string{"ANTHROPIC_API_KEY": "ak", "OPENAI_API_KEY": "ok", "LOCAL_KEY": "lk", "UNRELATED": "x"})
	for _, tc := range []struct{ provider, name, value string }{
		{"anthropic", "ANTHROPIC_API_KEY", "ak"},
		{"local", "LOCAL_KEY", "lk"},
		{"literal", "", ""},
		{"google", "", ""},
	} {
		if name, value := b.providerKey(tc.provider, agent); name != tc.name || value != tc.value {
			t.Errorf("providerKey(%s) = %s=%s, want %s=%s", tc.provider, name, value, tc.name, tc.value)
		}
	}
	// With the open network and no proxy, print mode gives pi the keys
	// themselves; the providers the proxy carries get none.
	open := &invocation{agentDir: agent, open: true, model: modelRef{provider: "openai", id: "gpt"}}
	if got := b.printKeyEnv(open); !slices.Equal(got, []string{"OPENAI_API_KEY=ok"}) {
		t.Errorf("print env for openai = %v", got)
	}
	open.model = modelRef{id: "gpt"}
	if got := b.printKeyEnv(open); !slices.Equal(got, []string{"ANTHROPIC_API_KEY=ak", "LOCAL_KEY=lk", "OPENAI_API_KEY=ok"}) {
		t.Errorf("print env for a bare model = %v", got)
	}
	open.route = &route{proxied: map[string]bool{"anthropic": true, "local": true}}
	if got := b.printKeyEnv(open); !slices.Equal(got, []string{"OPENAI_API_KEY=ok"}) {
		t.Errorf("print env for a bare model, anthropic and local proxied = %v", got)
	}
	open.open = false
	if got := b.printKeyEnv(open); len(got) != 0 {
		t.Errorf("print env without the open network = %v, want no key", got)
	}
}

func TestSubscriptionOnly(t *testing.T) {
	withLogin := t.TempDir()
	if err := os.WriteFile(filepath.Join(withLogin, "auth.json"), []byte(`{"anthropic": {"type": "oauth", "access": "x"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	none := t.TempDir()
	for _, tc := range []struct {
		name     string
		env      map[string]string
		agent    string
		provider string
		runtime  bool
		want     bool
	}{
		{"an API key", map[string]string{"ANTHROPIC_API_KEY": "k"}, none, "anthropic", true, false},
		{"only the OAuth token", map[string]string{"ANTHROPIC_OAUTH_TOKEN": "t"}, none, "anthropic", true, true},
		{"the token wins over the key, as pi reads them", map[string]string{"ANTHROPIC_OAUTH_TOKEN": "t", "ANTHROPIC_API_KEY": "k"}, none, "anthropic", true, true},
		{"an OAuth login, no key", nil, withLogin, "anthropic", true, true},
		{"an OAuth login, a key set as pi's runtime key", map[string]string{"ANTHROPIC_API_KEY": "k"}, withLogin, "anthropic", true, false},
		{"an OAuth login wins over the key in print mode", map[string]string{"ANTHROPIC_API_KEY": "k"}, withLogin, "anthropic", false, true},
		{"another provider", map[string]string{"ANTHROPIC_OAUTH_TOKEN": "t"}, none, "openai", true, false},
	} {
		if got := testBackend(t, tc.env).subscriptionOnly(tc.provider, tc.agent, tc.runtime); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestFailureTyping(t *testing.T) {
	for _, tc := range []struct {
		name      string
		m         message
		code      string
		retryable bool
	}{
		{"status in diagnostics", message{ErrorMessage: "something", Diagnostics: diag(429)}, engine.CodeRateLimited, true},
		{"status in the message", message{ErrorMessage: `429 {"type":"error","error":{"type":"rate_limit_error"}}`}, engine.CodeRateLimited, true},
		{"rate_limit_error text", message{ErrorMessage: "rate_limit_error: too many requests"}, engine.CodeRateLimited, true},
		{"401", message{ErrorMessage: `401 {"error":{"message":"invalid x-api-key"}}`}, "AUTH_FAILED", false},
		{"no key", message{ErrorMessage: "No API key found for zai"}, "AUTH_FAILED", false},
		{"overloaded", message{ErrorMessage: `529 {"type":"overloaded_error"}`}, "NETWORK_TRANSIENT", true},
		{"connection", message{ErrorMessage: "Connection error."}, "NETWORK_TRANSIENT", true},
		{"context", message{ErrorMessage: `400 prompt is too long: 250000 tokens > 200000 maximum`}, engine.CodeContextLengthExceeded, false},
		{"extra usage", message{ErrorMessage: "400 Third-party apps now draw from your extra usage, not your plan limits."}, "USAGE_LIMIT_BLOCKED", false},
		{"anything else", message{ErrorMessage: `400 {"error":"bad tool schema"}`}, engine.CodeExecutionFailed, false},
		{"empty", message{}, engine.CodeExecutionFailed, false},
	} {
		err := failure(&tc.m)
		var be *engine.BackendError
		if !errors.As(err, &be) || be.Code != tc.code || be.Retryable() != tc.retryable {
			t.Errorf("%s: %v, want %s (retryable %v)", tc.name, err, tc.code, tc.retryable)
		}
	}
}

// diag is the diagnostics pi records for a failed call of HTTP status code.
func diag(code int) []struct {
	Error *struct {
		Code    any    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
} {
	var m message
	_ = json.Unmarshal(fmt.Appendf(nil, `{"diagnostics":[{"type":"http","error":{"code":%d,"message":"m"}}]}`, code), &m)
	return m.Diagnostics
}

// The agent directory copy leaves out sessions and keeps links as links;
// the settings get pi's retries off and keep the operator's others.
func TestAgentDirCopy(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "agent")
	for path, content := range map[string]string{
		"auth.json": `{}`, "settings.json": `{"theme": "dark", "retry": {"maxRetries": 5}}`,
		"sessions/--work--/s.jsonl": "history", "extensions/e.ts": "x",
	} {
		p := filepath.Join(src, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := copyAgentDir(src, dst); err != nil {
		t.Fatal(err)
	}
	if err := disableRetries(filepath.Join(dst, "settings.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dst, "sessions")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sessions copied: %v", err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "link")); err != nil || l != "/etc/hostname" {
		t.Errorf("link = %q, %v", l, err)
	}
	b, _ := os.ReadFile(filepath.Join(dst, "settings.json"))
	var settings map[string]any
	_ = json.Unmarshal(b, &settings)
	want := map[string]any{"theme": "dark", "retry": map[string]any{"maxRetries": float64(5), "enabled": false}}
	if diff := cmp.Diff(want, settings); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	if orig, _ := os.ReadFile(filepath.Join(src, "settings.json")); strings.Contains(string(orig), "enabled") {
		t.Error("the operator's settings were changed")
	}
	if err := copyAgentDir("", filepath.Join(t.TempDir(), "empty")); err != nil {
		t.Errorf("no operator directory: %v", err)
	}
}

// Only payloads marked as ours are ours.
func TestOurs(t *testing.T) {
	for text, want := range map[string]bool{
		`{"__iterion": 1, "op": "tool"}`: true,
		`{"__iterion": 7}`:               true,
		`{"op": "tool"}`:                 false,
		`Name:`:                          false,
		`{"__iterion": null}`:            false,
	} {
		if _, got := ours(text); got != want {
			t.Errorf("ours(%s) = %v, want %v", text, got, want)
		}
	}
}

// Dialog titles come from any extension pi loaded: decoding one never
// fails loudly, and what it keeps as ours has a contract.
func FuzzOurs(f *testing.F) {
	for _, s := range []string{`{"__iterion":1,"op":"hello","provider":"x"}`, `{"__iterion":"1"}`, `[]`, `{"__iterion":1,"input":{"a":[1,{"b":null}]}}`, "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, ok := ours(text)
		if ok && p.Contract == nil {
			t.Errorf("%q kept without a contract", text)
		}
	})
}

// Comments are removed, strings are kept as they are.
func FuzzStripJSONComments(f *testing.F) {
	for _, s := range []string{`{"a": "//x", "b": "/*y*/"} // c`, `/* only */`, `{"s": "\"//\""}`, `{"a":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := stripJSONComments([]byte(in))
		var v any
		if !strings.Contains(in, "/") && string(out) != in {
			t.Errorf("%q without comments became %q", in, out)
		}
		if json.Unmarshal([]byte(in), &v) == nil {
			var w any
			if err := json.Unmarshal(out, &w); err != nil || !cmp.Equal(v, w) {
				t.Errorf("valid JSON %q became %q (%v)", in, out, err)
			}
		}
	})
}

// Refusals that come before pi starts: a node without a prompt, a gated
// or subscription-only node in print mode, no sandbox.
func TestRefusedBeforePiStarts(t *testing.T) {
	fakeCmd := filepath.Join(t.TempDir(), "pi")
	if err := os.WriteFile(fakeCmd, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T) func(context.Context, *engine.Process) (*engine.ProcessResult, error) {
		return func(context.Context, *engine.Process) (*engine.ProcessResult, error) {
			t.Error("pi was started")
			return nil, errors.New("not started")
		}
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		task func(*engine.Task)
		code string
		says string
	}{
		{"no prompt", nil, func(tk *engine.Task) { tk.User = "  " }, engine.CodeExecutionFailed, "has no user prompt"},
		{"no sandbox", nil, func(tk *engine.Task) { tk.Run = nil }, engine.CodeSandboxUnavailable, "configure a sandbox"},
		{"print mode with a permission policy", map[string]string{"ITERION_PI_MODE": "print"},
			func(tk *engine.Task) { tk.Permission = &permission.Policy{Mode: permission.Deny} }, engine.CodeCapabilityUnsupported, "unset ITERION_PI_MODE"},
		{"a subscription credential refused", map[string]string{"ITERION_PI_MODE": "print", "ITERION_FORBID_SUBSCRIPTION_OAUTH": "1", "ANTHROPIC_OAUTH_TOKEN": "sk-ant-oat-x"},
			func(tk *engine.Task) { tk.Model = "anthropic/claude-sonnet-4-6" }, "AUTH_FAILED", "ITERION_FORBID_SUBSCRIPTION_OAUTH=1 refuses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"ITERION_PI_COMMAND": fakeCmd, "HOME": t.TempDir()}
			for k, v := range tc.env {
				env[k] = v
			}
			b, err := New(Options{Env: func(k string) string { return env[k] }, TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			task := &engine.Task{RunID: "r", NodeID: "n", User: "Go.", Model: "fake/m", Run: run(t)}
			tc.task(task)
			_, err = b.Execute(context.Background(), task)
			var be *engine.BackendError
			if !errors.As(err, &be) || be.Code != tc.code || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %v, want %s saying %q", err, tc.code, tc.says)
			}
		})
	}
}
