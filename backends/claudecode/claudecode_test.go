package claudecode_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/engine/permission"
)

// A node on the real Claude Code, in the sandbox: its Bash runs there,
// the prompt arrives on stdin, the node's system prompt is appended to
// Claude Code's, the tools are the node's only, and the result carries
// the answer, the tokens and Claude Code's cost. The agent's bash prints
// its environment: no real key, only the session's dummy one.
func TestRunsANode(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "work", Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: "Bash", Input: map[string]any{"command": "env; echo made > made.txt", "description": "look around"}},
		}},
		{Name: "answer", Match: fakellm.Match{ToolResultFor: "Bash"}, Text: "DONE", Usage: fakellm.Usage{InputTokens: 1000, OutputTokens: 20}},
	}})
	task := h.task("-Look around and say DONE.", "bash", "read_file")
	task.System = "SYSTEM-OF-THE-NODE: be brief."
	res, err := h.backend().Execute(watchdog(t), task)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Output["text"]; got != "DONE" {
		t.Errorf("output = %v, want DONE", res.Output)
	}
	if res.Tokens <= 1020 || res.CostUSD <= 0 || res.SessionID == "" || res.EffectiveModel != "anthropic/claude-sonnet-4-5" {
		t.Errorf("result = %+v, want the tokens of both turns, a cost, a session and the model", res)
	}
	if b, err := os.ReadFile(filepath.Join(h.work, "made.txt")); err != nil || string(b) != "made\n" {
		t.Errorf("the agent's bash did not write the workspace: %q, %v", b, err)
	}
	reqs := h.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	first := reqs[0]
	if !strings.Contains(first.System, "SYSTEM-OF-THE-NODE: be brief.") {
		t.Errorf("the node's system prompt is not in Claude Code's")
	}
	if !strings.Contains(lastUser(first), "-Look around and say DONE.") {
		t.Errorf("the prompt did not reach the model whole:\n%s", lastUser(first))
	}
	if tools := slices.Sorted(slices.Values(first.Tools)); !slices.Equal(tools, []string{"Bash", "Read"}) {
		t.Errorf("tools offered = %v, want the node's: Bash, Read", tools)
	}
	if got := first.Header.Get("X-Api-Key"); got != realKey {
		t.Errorf("the model got key %q, want the real one (added by the proxy)", got)
	}
	env := reqs[1].ToolResults[0].Content
	if strings.Contains(env, realKey) {
		t.Errorf("the agent's bash sees the real key:\n%s", env)
	}
	for _, want := range []string{"ANTHROPIC_API_KEY=sk-iterion-", "ANTHROPIC_BASE_URL=http://127.0.0.1:", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"} {
		if !strings.Contains(env, want) {
			t.Errorf("the agent's environment lacks %s:\n%s", want, env)
		}
	}
}

// permission: deny refuses Bash: the hook denies the call with the policy's
// reason, which the model reads, and the command never runs.
func TestPermissionDenyRefusesBash(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "try", Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: "Bash", Input: map[string]any{"command": "touch pwned"}},
		}},
		{Name: "after", Match: fakellm.Match{ToolResultFor: "Bash"}, Text: "could not"},
	}})
	task := h.task("Make a file.", "bash")
	task.Permission = &permission.Policy{Mode: permission.Deny}
	res, err := h.backend().Execute(watchdog(t), task)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output["text"] != "could not" {
		t.Errorf("output = %v", res.Output)
	}
	if _, err := os.Stat(filepath.Join(h.work, "pwned")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the denied command ran: %v", err)
	}
	reqs := h.fake.Requests()
	got := reqs[len(reqs)-1].ToolResults[0]
	if !got.IsError || !strings.Contains(got.Content, "refused by the workflow's permission policy (permission: deny (no rule allows it))") {
		t.Errorf("the model read %+v, want the policy's refusal", got)
	}
}

var _ = engine.CodeExecutionFailed

// readonly: the writing tools are not offered, and Claude Code runs with
// the workspace mounted read-only.
func TestReadOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Fallback: &fakellm.Turn{Text: "looked"}})
	task := h.task("Look.", "bash", "read_file", "write_file", "grep")
	task.ReadOnly = true
	if _, err := h.backend().Execute(watchdog(t), task); err != nil {
		t.Fatal(err)
	}
	if tools := slices.Sorted(slices.Values(h.fake.Requests()[0].Tools)); !slices.Equal(tools, []string{"Grep", "Read"}) {
		t.Errorf("tools offered = %v, want Grep and Read", tools)
	}
}

// A node with an output schema: an answer that is not the object asked
// for gets one repair turn in the same session.
func TestOutputRepairTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "prose", Match: fakellm.Match{LastUserContains: "Sum up"}, Text: "It went well."},
		{Name: "repaired", Match: fakellm.Match{LastUserContains: "could not be used"}, Text: `{"summary": "went well", "score": 3}`},
	}})
	task := h.task("Sum up.")
	task.OutputSchema = map[string]any{"type": "object", "required": []any{"summary"}, "properties": map[string]any{"summary": map[string]any{"type": "string"}}}
	res, err := h.backend().Execute(watchdog(t), task)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output["summary"] != "went well" || res.Output["score"] != int64(3) {
		t.Errorf("output = %v", res.Output)
	}
	if !strings.Contains(h.fake.Requests()[0].System, `[OUTPUT]`) {
		t.Error("the schema is not in the system prompt")
	}
}

// tool_max_steps bounds the agent's model calls: past it the node fails,
// naming the limit.
func TestToolMaxSteps(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Fallback: &fakellm.Turn{ToolCalls: []fakellm.ToolCall{{Name: "Bash", Input: map[string]any{"command": "true"}}}}})
	task := h.task("Loop.", "bash")
	task.ToolMaxSteps = 2
	_, err := h.backend().Execute(watchdog(t), task)
	var be *engine.BackendError
	if !errors.As(err, &be) || be.Code != engine.CodeExecutionFailed || !strings.Contains(err.Error(), "more turns than the node allows") {
		t.Errorf("err = %v", err)
	}
	if n := len(h.fake.Requests()); n != 3 {
		t.Errorf("%d model requests, want 3 (two steps and the answer)", n)
	}
}

// The agent's bash reaches the model's host only on the open network: by
// default (model-only) Claude Code's sandbox reaches the run channel's
// proxy alone, and either way the agent sees the dummy key, never the
// real one, while the model gets the real one from the proxy.
func TestNetwork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		network engine.Network
		direct  string
	}{
		{"model-only by default", engine.NetworkDefault, "direct: cut"},
		{"model-only declared", engine.NetworkModelOnly, "direct: cut"},
		{"open", engine.NetworkOpen, "direct: reached"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
				{Name: "probe", Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{{Name: "Bash", Input: map[string]any{
					"command":     `env; echo "direct: $(curl -sf -m 10 -o /dev/null "$(cat fake-url)/v1/models" && echo reached || echo cut)"`,
					"description": "probe the network",
				}}}},
				{Name: "answer", Match: fakellm.Match{ToolResultFor: "Bash"}, Text: "probed"},
			}})
			h.write("fake-url", h.env["ANTHROPIC_BASE_URL"])
			task := h.task("Probe the network.", "bash")
			task.Network = tc.network
			if _, err := h.backend().Execute(watchdog(t), task); err != nil {
				t.Fatal(err)
			}
			reqs := h.fake.Requests()
			if len(reqs) != 2 || len(reqs[1].ToolResults) != 1 {
				t.Fatalf("%d model requests, want the probe's and the answer's", len(reqs))
			}
			out := reqs[1].ToolResults[0].Content
			if !strings.Contains(out, tc.direct) {
				t.Errorf("the agent's bash printed %q, want %q", out, tc.direct)
			}
			if strings.Contains(out, realKey) || !strings.Contains(out, "ANTHROPIC_API_KEY=sk-iterion-") {
				t.Errorf("the agent's environment holds the real key, or not the dummy one:\n%s", out)
			}
			for _, r := range reqs {
				if got := r.Header.Get("X-Api-Key"); got != realKey {
					t.Errorf("the model got key %q, want the real one (added by the proxy)", got)
				}
			}
		})
	}
}
