package pi_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/engine"
)

// The same turn on both transports, through both of pi's providers,
// reports the same output, tokens, cost and model: only the wire differs.
// Tokens are input plus output; cache reads and writes are not billed
// input, though pi prices them.
func TestTransportsReportTheSame(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, model string }{
		{"anthropic", "fake/fake-claude"},
		{"openai", "fakeoai/fake-gpt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			script := func() *fakellm.Script {
				return &fakellm.Script{Turns: []fakellm.Turn{
					{Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{{Name: "bash", Input: map[string]any{"command": "echo hi"}}},
						Usage: fakellm.Usage{InputTokens: 1200, OutputTokens: 30}},
					{Match: fakellm.Match{ToolResultFor: "bash"}, Text: `{"answer": "hi"}`, Usage: fakellm.Usage{InputTokens: 1300, OutputTokens: 12}},
				}}
			}
			results := map[string]*engine.Result{}
			for _, mode := range []string{"rpc", "print"} {
				h := newHarness(t, script())
				task := h.task(tc.model, "Say hi with bash.")
				task.OutputSchema = map[string]any{"type": "object", "required": []any{"answer"}}
				res, err := h.backend("ITERION_PI_MODE="+mode).Execute(watchdog(t), task)
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				if unused := h.fake.Unused(); len(unused) > 0 {
					t.Errorf("%s: turns %v unused", mode, unused)
				}
				results[mode] = res
			}
			rpc, print := results["rpc"], results["print"]
			if rpc.Tokens != 1200+30+1300+12 {
				t.Errorf("tokens = %d, want the input and output of both calls, %d", rpc.Tokens, 1200+30+1300+12)
			}
			if rpc.CostUSD <= 0 {
				t.Errorf("cost = %v, want pi's price of the calls", rpc.CostUSD)
			}
			type seen struct {
				Output         map[string]any
				Tokens         int64
				Cost           string
				EffectiveModel string
			}
			view := func(r *engine.Result) seen {
				return seen{r.Output, r.Tokens, strconv.FormatFloat(r.CostUSD, 'g', 12, 64), r.EffectiveModel}
			}
			if diff := cmp.Diff(view(rpc), view(print)); diff != "" {
				t.Errorf("rpc and print differ (-rpc +print):\n%s", diff)
			}
			if rpc.EffectiveModel != tc.model || rpc.SessionID == "" || print.SessionID == "" {
				t.Errorf("model %q, sessions %q and %q", rpc.EffectiveModel, rpc.SessionID, print.SessionID)
			}
		})
	}
}

// A cache read is not billed input: it is left out of the tokens (pi
// still prices it, and its cost is the one reported).
func TestCacheIsNotBilledInput(t *testing.T) {
	t.Parallel()
	sse := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"fake-claude\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":100,\"output_tokens\":1,\"cache_creation_input_tokens\":2000,\"cache_read_input_tokens\":50000}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"cached\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":7}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{{RawSSE: sse}}})
	res, err := h.backend().Execute(watchdog(t), h.task("fake/fake-claude", "Answer from the cache."))
	if err != nil {
		t.Fatal(err)
	}
	if res.Tokens != 107 || res.Output["text"] != "cached" {
		t.Errorf("tokens %d, output %v; want 107 (100 in, 7 out) and the text", res.Tokens, res.Output)
	}
	// models.json: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million.
	want := (100*3 + 7*15 + 50000*0.3 + 2000*3.75) / 1e6
	if diff := res.CostUSD - want; diff > 1e-9 || diff < -1e-9 {
		t.Errorf("cost = %v, want pi's %v", res.CostUSD, want)
	}
}

// pi exits 0 when its model call failed: the failure is typed from the
// last message, never from the exit code. A 429 is a rate limit (to
// retry), a 400 a failure (not to retry), a missing key fails before any
// call.
func TestFailedCallsAreTyped(t *testing.T) {
	t.Parallel()
	noRetry := map[string]string{"X-Should-Retry": "false"}
	for _, tc := range []struct {
		name      string
		turn      fakellm.Turn
		model     string
		code      string
		retryable bool
		says      string
	}{
		{"rate limited", fakellm.Turn{Status: 429, Error: "slow down", Headers: noRetry, Repeat: true}, "fake/fake-claude", engine.CodeRateLimited, true, "slow down"},
		{"rate limited on openai", fakellm.Turn{Status: 429, Error: "slow down", Headers: noRetry, Repeat: true}, "fakeoai/fake-gpt", engine.CodeRateLimited, true, "slow down"},
		{"bad request", fakellm.Turn{Status: 400, Error: "your request is malformed", Headers: noRetry}, "fake/fake-claude", engine.CodeExecutionFailed, false, "your request is malformed"},
		{"refused key", fakellm.Turn{Status: 401, Error: "invalid x-api-key", Headers: noRetry}, "fake/fake-claude", "AUTH_FAILED", false, "invalid x-api-key"},
		{"no key at all", fakellm.Turn{Text: "never asked"}, "anthropic/claude-sonnet-4-5", "AUTH_FAILED", false, "anthropic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{tc.turn}})
			_, err := h.backend().Execute(watchdog(t), h.task(tc.model, "Hello."))
			var be *engine.BackendError
			if !errors.As(err, &be) {
				t.Fatalf("err = %v, want a BackendError", err)
			}
			if be.Code != tc.code || be.Retryable() != tc.retryable || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %s %v (retryable %v), want %s, retryable %v, naming %q", be.Code, err, be.Retryable(), tc.code, tc.retryable, tc.says)
			}
			if tc.name == "no key at all" && len(h.fake.Requests()) > 0 {
				t.Error("a node without a key called the model")
			}
		})
	}
}

// A message holding U+2028 and U+2029 (legal inside a JSON string, a line
// break to readers that split on them) arrives whole.
func TestLineSeparatorsInMessages(t *testing.T) {
	t.Parallel()
	text := "first\u2028second\u2029third"
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{{Text: text}}})
	res, err := h.backend().Execute(watchdog(t), h.task("fake/fake-claude", "Say it\u2028with separators."))
	if err != nil {
		t.Fatal(err)
	}
	if res.Output["text"] != text {
		t.Errorf("output %q, want %q", res.Output["text"], text)
	}
	reqs := h.fake.Requests()
	if len(reqs) != 1 || !strings.Contains(lastUserText(reqs[0]), "Say it\u2028with separators.") {
		t.Errorf("the prompt did not reach the model whole: %+v", reqs)
	}
}

// The extension and iterion must speak the same contract: configured with
// another, the extension registers nothing and says so, and the node fails
// saying why before any model call.
func TestExtensionContractMismatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Fallback: &fakellm.Turn{Text: "never"}})
	b := h.backend()
	b.SetContract(99)
	task := h.task("fake/fake-claude", "Hello.")
	task.Interaction = "human"
	_, err := b.Execute(watchdog(t), task)
	if err == nil || !strings.Contains(err.Error(), "contract 1 and was configured with 99") || !strings.Contains(err.Error(), "registered no tool") {
		t.Errorf("err = %v, want the contract mismatch", err)
	}
	if n := len(h.fake.Requests()); n > 0 {
		t.Errorf("%d model requests, want none", n)
	}
}

// A repository's own pi extension (.pi/extensions) is code pi would run in
// the process that holds the run's key: it is not loaded unless the
// operator trusts the project (ITERION_PI_TRUST_PROJECT=1).
func TestRepositoryExtensionRefused(t *testing.T) {
	t.Parallel()
	for _, trusted := range []bool{false, true} {
		t.Run("trusted="+strconv.FormatBool(trusted), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{{Text: "ok"}}})
			h.write(filepath.Join(h.work, ".pi", "extensions", "planted.js"), `export default function (pi) {
  pi.registerTool({name: "planted_tool", label: "planted", description: "from the repository",
    parameters: {type: "object", properties: {}}, async execute() { return {content: [{type: "text", text: "ran"}], details: {}}; }});
}
`)
			// The operator's own extension loads either way.
			h.write(filepath.Join(h.agentDir, "extensions", "operator.js"), `export default function (pi) {
  pi.registerTool({name: "operator_tool", label: "operator", description: "the operator's",
    parameters: {type: "object", properties: {}}, async execute() { return {content: [{type: "text", text: "ran"}], details: {}}; }});
}
`)
			var extra []string
			if trusted {
				extra = append(extra, "ITERION_PI_TRUST_PROJECT=1")
			}
			if _, err := h.backend(extra...).Execute(watchdog(t), h.task("fake/fake-claude", "Hello.")); err != nil {
				t.Fatal(err)
			}
			reqs := h.fake.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests", len(reqs))
			}
			if got := slices.Contains(reqs[0].Tools, "planted_tool"); got != trusted {
				t.Errorf("the repository's tool offered: %v, want %v", got, trusted)
			}
			if !slices.Contains(reqs[0].Tools, "operator_tool") {
				t.Error("the operator's extension was not loaded")
			}
		})
	}
}

// The agent's bash sees no real key: pi got it over its stdin, not in its
// environment, argv or files.
func TestNoKeyInTheAgentsShell(t *testing.T) {
	t.Parallel()
	// The key is split in the command, which the probe's own output shows.
	split := strings.Replace(fakeKey, "-", `-""`, 1)
	probe := "env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n'; grep -rs " + split + " \"$PI_CODING_AGENT_DIR\" /tmp; echo probed"
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{{Name: "bash", Input: map[string]any{"command": probe}}}},
		{Match: fakellm.Match{ToolResultFor: "bash"}, Text: "done"},
	}})
	if _, err := h.backend().Execute(watchdog(t), h.task("fake/fake-claude", "Look around.")); err != nil {
		t.Fatal(err)
	}
	var out string
	for _, req := range h.fake.Requests() {
		for _, tr := range req.ToolResults {
			out += tr.Content
		}
		if req.Header.Get("X-Api-Key") != fakeKey {
			t.Errorf("the model call carried key %q, want the provider's", req.Header.Get("X-Api-Key"))
		}
	}
	if !strings.Contains(out, "probed") || !strings.Contains(out, "PI_CODING_AGENT_DIR=") {
		t.Fatalf("the probe did not run: %q", out)
	}
	if strings.Contains(out, fakeKey) {
		t.Errorf("the agent's shell saw the key:\n%s", out)
	}
}

// The pid files of the processes whose command line holds s.
func processesWith(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

// mkfifo makes a named pipe in the workspace: the agent's bash opening it
// tells the test that the tool is running.
func mkfifo(t testing.TB, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitOpen returns once a writer opened the named pipe (the open blocks
// until then), or when ctx ends.
func waitOpen(ctx context.Context, t testing.TB, path string) {
	t.Helper()
	opened := make(chan error, 1)
	go func() {
		f, err := os.Open(path)
		if err == nil {
			f.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the agent's tool never started")
	}
}

// lastUserText is the text of a request's last user turn.
func lastUserText(r fakellm.Recorded) string {
	var parts []string
	for _, m := range r.LastUserTurn() {
		parts = append(parts, m.Text)
	}
	return strings.Join(parts, "\n")
}

// A readonly node gets pi's reading tools only, and its interaction
// tools.
func TestReadonlyTools(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{{Text: "looked"}}})
	task := h.task("fake/fake-claude", "Look only.")
	task.ReadOnly, task.Interaction = true, "human"
	if _, err := h.backend().Execute(watchdog(t), task); err != nil {
		t.Fatal(err)
	}
	reqs := h.fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	got := slices.Clone(reqs[0].Tools)
	slices.Sort(got)
	if want := []string{"ask_user", "find", "grep", "ls", "read"}; !slices.Equal(got, want) {
		t.Errorf("tools %v, want %v", got, want)
	}
}
