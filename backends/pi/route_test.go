package pi_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/engine"
)

// probeNetwork is a bash command for the agent: what it can read of the
// operator's logins, and whether it reaches the fake model server itself
// (which only the model proxy should), at the URL the test wrote in the
// workspace.
const probeNetwork = `echo "login: $(cat "$PI_CODING_AGENT_DIR/auth.json" 2>/dev/null || echo none)"; cat "$PI_CODING_AGENT_DIR/models.json"; ` +
	`node -e 'fetch(process.argv[1]).then(() => console.log("direct: reached"), () => console.log("direct: cut"))' "$(cat fake-url)/v1/models"; echo probed`

const (
	loginSecret   = "sk-operator-login-93f1"
	literalSecret = "sk-literal-in-models-5e2a"
)

// On the default network (model-only), pi reaches its provider through
// the proxy alone: the agent's commands cannot reach the provider's host
// themselves, nor read the operator's logins; the provider sees the real
// key. The open network, asked for, gives both back: that is what it
// exposes.
func TestModelOnlyNetwork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		network engine.Network
		direct  string
		login   bool
	}{
		{"model-only by default", engine.NetworkDefault, "direct: cut", false},
		{"open when asked", engine.NetworkOpen, "direct: reached", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
				{Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{{Name: "bash", Input: map[string]any{"command": probeNetwork}}}},
				{Match: fakellm.Match{ToolResultFor: "bash"}, Text: "done"},
			}})
			h.write(filepath.Join(h.work, "fake-url"), h.url)
			h.write(filepath.Join(h.agentDir, "auth.json"), `{"other": {"type": "api_key", "key": "`+loginSecret+`"}}`)
			// Another provider, which the proxy cannot carry (Google's API),
			// with a literal key and a credential header.
			models, _ := os.ReadFile(filepath.Join(h.agentDir, "models.json"))
			models = []byte(strings.Replace(string(models), `"providers": {`, `"providers": {
    "gem": {"baseUrl": "https://generativelanguage.googleapis.com/v1beta", "api": "google-generative-ai",
      "apiKey": "`+literalSecret+`", "headers": {"x-goog-user-project": "`+literalSecret+`-h"},
      "models": [{"id": "g", "contextWindow": 1000, "maxTokens": 100}]},`, 1))
			h.write(filepath.Join(h.agentDir, "models.json"), string(models))
			task := h.task("fake/fake-claude", "Look around.")
			task.Network = tc.network
			if _, err := h.backend().Execute(watchdog(t), task); err != nil {
				t.Fatal(err)
			}
			var out string
			for _, req := range h.fake.Requests() {
				for _, tr := range req.ToolResults {
					out += tr.Content
				}
				if req.Path == "/v1/messages" && req.Header.Get("X-Api-Key") != fakeKey {
					t.Errorf("the model call reached the provider with key %q, want the real one", req.Header.Get("X-Api-Key"))
				}
			}
			if !strings.Contains(out, "probed") {
				t.Fatalf("the probe did not run: %q", out)
			}
			if !strings.Contains(out, tc.direct) || strings.Contains(out, loginSecret) != tc.login || strings.Contains(out, literalSecret) != tc.login {
				t.Errorf("the agent's shell printed %q, want %q, the operator's login shown: %v", out, tc.direct, tc.login)
			}
			if after, _ := os.ReadFile(filepath.Join(h.agentDir, "models.json")); string(after) != string(models) {
				t.Errorf("the operator's models.json changed:\n%s", after)
			}
		})
	}
}

// pi's built-in anthropic provider goes through the proxy to the base URL
// the server's ANTHROPIC_BASE_URL names, with the server's key, which pi
// never holds.
func TestBuiltinProviderThroughTheProxy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{{Name: "bash", Input: map[string]any{"command": "env | grep -c " + fakeKey + "; echo probed"}}}},
		{Match: fakellm.Match{ToolResultFor: "bash"}, Text: "done"},
	}})
	b := h.backend("ANTHROPIC_API_KEY="+fakeKey, "ANTHROPIC_BASE_URL="+h.url)
	res, err := b.Execute(watchdog(t), h.task("anthropic/claude-sonnet-4-5", "Hello."))
	if err != nil {
		t.Fatal(err)
	}
	if res.Output["text"] != "done" {
		t.Errorf("output %v", res.Output)
	}
	reqs := h.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		if r.Header.Get("X-Api-Key") != fakeKey {
			t.Errorf("the provider got key %q, want the server's", r.Header.Get("X-Api-Key"))
		}
	}
	if got := reqs[1].ToolResults[0].Content; !strings.HasPrefix(got, "0\n") {
		t.Errorf("the agent's environment holds the key: %q", got)
	}
}

// Without the open network, a node whose provider the proxy cannot carry
// is refused before pi starts, naming both ways out.
func TestUncarriedProviderRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{{Text: "never asked"}}})
	h.write(filepath.Join(h.agentDir, "auth.json"), `{"other": {"type": "oauth", "access": "`+loginSecret+`"}}`)
	h.write(filepath.Join(h.agentDir, "models.json"), `{"providers": {
  "cmdkey": {"baseUrl": "`+h.url+`", "api": "anthropic-messages", "apiKey": "!pass show key"},
  "gemini": {"baseUrl": "`+h.url+`", "api": "google-generative-ai", "apiKey": "FAKE_KEY"},
  "unset": {"baseUrl": "`+h.url+`", "api": "anthropic-messages", "apiKey": "NOT_SET_ANYWHERE"}
}}`)
	for _, tc := range []struct{ model, says string }{
		{"other/m", "the operator's oauth login in auth.json"},
		{"cmdkey/m", "is a command (!…)"},
		{"gemini/m", `its API "google-generative-ai" is not one the model proxy carries`},
		{"unset/m", "names the variable NOT_SET_ANYWHERE"},
		{"nowhere/m", "the server holds no key for it"},
	} {
		_, err := h.backend().Execute(watchdog(t), h.task(tc.model, "Hello."))
		var be *engine.BackendError
		if !errors.As(err, &be) || be.Code != "AUTH_FAILED" || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "open network") {
			t.Errorf("%s: err = %v, want AUTH_FAILED saying %q and naming the open network", tc.model, err, tc.says)
		}
	}
	if n := len(h.fake.Requests()); n != 0 {
		t.Errorf("%d model requests, want none", n)
	}
}

// A provider whose models carry headers of their own is not carried: the
// headers would be in the sandbox.
func TestModelHeadersNotCarried(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{{Text: "never asked"}}})
	h.write(filepath.Join(h.agentDir, "models.json"), `{"providers": {
  "hdr": {"baseUrl": "`+h.url+`", "api": "anthropic-messages", "apiKey": "FAKE_KEY",
    "models": [{"id": "m", "headers": {"x-secret": "s3cr3t-value"}}]}
}}`)
	_, err := h.backend().Execute(watchdog(t), h.task("hdr/m", "Hello."))
	if err == nil || !strings.Contains(err.Error(), "declares headers of its own") {
		t.Errorf("err = %v, want the model's headers named", err)
	}
}
