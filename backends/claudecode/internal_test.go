package claudecode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/engine/permission"
)

func TestClaudeModel(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		fails          bool
	}{
		{"prefixed", "anthropic/claude-sonnet-4-6", "claude-sonnet-4-6", false},
		{"bare", "claude-opus-4-5", "claude-opus-4-5", false},
		{"alias", "sonnet", "sonnet", false},
		{"default", "", "", false},
		{"another provider", "openai/gpt-5.5", "", true},
		{"empty model", "anthropic/", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := claudeModel(tc.in)
			if (err != nil) != tc.fails || got != tc.want {
				t.Errorf("claudeModel(%q) = %q, %v; want %q, fails %v", tc.in, got, err, tc.want, tc.fails)
			}
			if err != nil && !strings.Contains(err.Error(), "backend claude_code runs Anthropic's models only") {
				t.Errorf("error %q does not say what to write", err)
			}
		})
	}
}

func TestBuiltinTools(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tools    []string
		readonly bool
		want     []string
		fails    string
	}{
		{"none", nil, false, nil, ""},
		{"iterion's names", []string{"read_file", "write_file", "edit_file", "list_files", "grep", "bash"}, false, []string{"Read", "Write", "Edit", "Glob", "Grep", "Bash"}, ""},
		{"Claude Code's names, once each", []string{"Bash", "bash", "Read", "glob", "Glob"}, false, []string{"Bash", "Read", "Glob"}, ""},
		{"readonly drops the writers", []string{"read_file", "write_file", "edit_file", "bash", "NotebookEdit", "grep"}, true, []string{"Read", "Grep"}, ""},
		{"unmappable", []string{"read_file", "patch"}, false, nil, `tool "patch" has no Claude Code built-in (backend claude_code)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := builtinTools(&engine.Task{Tools: tc.tools, ReadOnly: tc.readonly})
			if tc.fails != "" {
				var be *engine.BackendError
				if !errors.As(err, &be) || be.Code != engine.CodeExecutionFailed || !strings.Contains(err.Error(), tc.fails) {
					t.Errorf("err = %v, want %q", err, tc.fails)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("builtinTools = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestFailure(t *testing.T) {
	status := func(n int) *int { return &n }
	for _, tc := range []struct {
		name      string
		ev        event
		code      string
		retryable bool
	}{
		{"refused key", event{Subtype: "success", IsError: true, Result: "API Error: 401 invalid x-api-key", TerminalReason: "api_error"}, "AUTH_FAILED", false},
		{"status field", event{Subtype: "success", IsError: true, Result: "Failed", APIErrorStatus: status(403)}, "AUTH_FAILED", false},
		{"rate limited", event{Subtype: "success", IsError: true, Result: "API Error: 429 rate_limit_error", TerminalReason: "api_error"}, engine.CodeRateLimited, true},
		{"overloaded", event{Subtype: "success", IsError: true, Result: "API Error: 529 overloaded", TerminalReason: "api_error"}, "NETWORK_TRANSIENT", true},
		{"server down", event{Subtype: "success", IsError: true, Result: "API Error: Connection refused", TerminalReason: "api_error"}, "NETWORK_TRANSIENT", true},
		{"context", event{Subtype: "success", IsError: true, Result: "API Error: 400 prompt is too long: 210000 tokens > 200000 maximum"}, engine.CodeContextLengthExceeded, false},
		{"bad request", event{Subtype: "success", IsError: true, Result: "API Error: 400 invalid model", TerminalReason: "api_error"}, engine.CodeExecutionFailed, false},
		{"max turns", event{Subtype: "error_max_turns", IsError: true, NumTurns: 4}, engine.CodeExecutionFailed, false},
		{"during execution", event{Subtype: "error_during_execution", IsError: true}, engine.CodeExecutionFailed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := failure(&tc.ev)
			var be *engine.BackendError
			if !errors.As(err, &be) || be.Code != tc.code || be.Retryable() != tc.retryable {
				t.Errorf("failure = %v (%+v), want %s, retryable %v", err, be, tc.code, tc.retryable)
			}
		})
	}
}

// The line reader splits on LF only: U+2028 and U+2029 are legal inside
// JSON strings and stay in their line.
func TestLineReader(t *testing.T) {
	in := "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"a\u2028b\u2029c\"}]}}\r\n\n  \n{\"type\":\"result\",\"result\":\"done\"}"
	lr := newLineReader(strings.NewReader(in))
	var got []*event
	for {
		line, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ev, err := parseEvent(line)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	if len(got) != 2 || got[0].Message.text() != "a\u2028b\u2029c" || got[1].Result != "done" {
		t.Errorf("events = %+v", got)
	}
	long := strings.NewReader(strings.Repeat("x", maxLine+10) + "\n")
	if _, err := newLineReader(long).next(); !errors.Is(err, errLineTooLong) {
		t.Errorf("a line over the bound: err = %v", err)
	}
}

// An interrupted session written back under the workspace's project
// directory, with the session id as Claude Code names it.
func TestSavedSession(t *testing.T) {
	if got := projectKey("/tmp/cc/exp/ws_1.x"); got != "-tmp-cc-exp-ws-1-x" {
		t.Errorf("projectKey = %q", got)
	}
	good := savedSession{V: 1, SessionID: "3925ea79-5294-4b0d-ba35-abe672367967", Transcript: "{}\n", Kind: pauseAsk, Question: "Which?"}
	data, _ := json.Marshal(good)
	got, err := decodeSaved(data)
	if err != nil || got.SessionID != good.SessionID {
		t.Fatalf("decodeSaved = %+v, %v", got, err)
	}
	for name, s := range map[string]savedSession{
		"format":      {V: 2, SessionID: good.SessionID, Kind: pauseAsk},
		"session id":  {V: 1, SessionID: "../../etc/passwd", Kind: pauseAsk},
		"unknown why": {V: 1, SessionID: good.SessionID, Kind: "shell"},
	} {
		data, _ := json.Marshal(s)
		if _, err := decodeSaved(data); err == nil {
			t.Errorf("%s: a bad saved session was accepted", name)
		}
	}
}

// The hook against a real run channel: the policy's decision printed for
// Claude Code, and every failure (no channel, a wrong token, a call that
// is not one) an exit 2 that blocks the call.
func TestHookMain(t *testing.T) {
	task := &engine.Task{RunID: "r1", NodeID: "n1"}
	pol, err := permissionPolicy("deny", []string{"Bash(go test:*)"})
	if err != nil {
		t.Fatal(err)
	}
	r := &run{task: &engine.Task{RunID: "r1", NodeID: "n1", Permission: pol}, inv: &invocation{workDir: "/ws"}}
	s, err := runchannel.Open(context.Background(), task, runchannel.Options{Binary: os.Args[0], Upstreams: []runchannel.Upstream{}, Permission: r.permission})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	env := map[string]string{}
	for _, kv := range s.ChannelEnv() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	call := func(input string, env map[string]string) (int, string, string) {
		var out, errb bytes.Buffer
		code := HookMain(context.Background(), func(k string) string { return env[k] }, strings.NewReader(input), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, _ := call(`{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"go test ./..."}}`, env)
	if code != 0 || !strings.Contains(out, `"permissionDecision":"allow"`) {
		t.Errorf("allowed call: exit %d, %s", code, out)
	}
	code, out, _ = call(`{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf /"}}`, env)
	if code != 0 || !strings.Contains(out, `"permissionDecision":"deny"`) || !strings.Contains(out, "refused by the workflow's permission policy") {
		t.Errorf("denied call: exit %d, %s", code, out)
	}
	big := `{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"file_path":"/ws/a.go","content":"` + strings.Repeat("x", 2<<20) + `"}}`
	if code, out, _ := call(big, env); code != 0 || !strings.Contains(out, `"permissionDecision":"deny"`) {
		t.Errorf("a large Write: exit %d, %s (want a decision, not a failure)", code, out)
	}
	wrong := map[string]string{}
	for k, v := range env {
		wrong[k] = v
	}
	wrong[runchannel.EnvToken] = "not-the-token"
	for name, tc := range map[string]struct {
		input string
		env   map[string]string
	}{
		"no channel":  {`{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{}}`, map[string]string{}},
		"wrong token": {`{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{}}`, wrong},
		"not json":    {`{"hook_event_name":`, env},
		"other event": {`{"hook_event_name":"PostToolUse","tool_name":"Bash"}`, env},
		"no tool":     {`{"hook_event_name":"PreToolUse"}`, env},
	} {
		if code, out, errOut := call(tc.input, tc.env); code != 2 || out != "" || !strings.Contains(errOut, "the call is denied") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 and the reason", name, code, out, errOut)
		}
	}
}

// A call's absolute paths inside the workspace are matched as the rules
// write them, relative to it; others stay absolute.
func TestWorkspacePaths(t *testing.T) {
	ws := t.TempDir()
	pol, err := permissionPolicy("deny", []string{"Edit(src/**)"})
	if err != nil {
		t.Fatal(err)
	}
	r := &run{task: &engine.Task{Permission: pol}, inv: &invocation{workDir: ws}}
	for path, allow := range map[string]bool{
		filepath.Join(ws, "src/a.go"): true,
		filepath.Join(ws, "a.go"):     false,
		"/etc/src/a.go":               false,
	} {
		input, _ := json.Marshal(map[string]any{"file_path": path, "old_string": "a", "new_string": "b"})
		d, err := r.permission(context.Background(), runchannel.PermissionRequest{Tool: "Edit", Input: input})
		if err != nil || d.Allow != allow {
			t.Errorf("Edit %s: %+v, %v; want allow %v", path, d, err, allow)
		}
	}
}

func permissionPolicy(mode string, allow []string) (*permission.Policy, error) {
	m, err := permission.ParseMode(mode)
	if err != nil {
		return nil, err
	}
	rules, err := permission.ParseRules(allow)
	return &permission.Policy{Mode: m, Allow: rules}, err
}
