package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/iterion-bot/iterion/backends/runchannel"
)

// HookMain is `iterion claude-hook`, the PreToolUse hook Claude Code runs
// before every tool call inside the node's sandbox: it reads the call from
// stdin, asks the node's run channel (from the environment) for the
// workflow's permission decision, and prints it. It returns the exit
// status: 0 with a decision on stdout, or 2 with the reason on stderr,
// which Claude Code reads as "blocked". Every failure blocks the call; and
// since Claude Code runs with --permission-mode dontAsk, a hook that dies
// otherwise, or hangs past its timeout, denies it too.
func HookMain(ctx context.Context, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	decision, err := hook(ctx, getenv, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "iterion's permission check failed, so the call is denied: %v\n", err)
		return 2
	}
	if _, err := stdout.Write(decision); err != nil {
		fmt.Fprintf(stderr, "iterion's permission check could not answer, so the call is denied: %v\n", err)
		return 2
	}
	return 0
}

// maxHookInput bounds what Claude Code gives the hook (a Write's content
// is in it).
const maxHookInput = 64 << 20

// hookInput is the part of a PreToolUse hook's input iterion reads.
type hookInput struct {
	Event     string          `json:"hook_event_name"`
	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input"`
}

func hook(ctx context.Context, getenv func(string) string, stdin io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(stdin, maxHookInput+1))
	if err != nil {
		return nil, fmt.Errorf("reading the call: %w", err)
	}
	if len(data) > maxHookInput {
		return nil, fmt.Errorf("the call is over %d MiB", maxHookInput>>20)
	}
	in, err := parseHookInput(data)
	if err != nil {
		return nil, err
	}
	c, err := runchannel.ClientFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	d, err := c.Permission(ctx, runchannel.PermissionRequest{Tool: in.ToolName, Input: in.ToolInput})
	if err != nil {
		return nil, err
	}
	return hookOutput(d), nil
}

// parseHookInput reads a PreToolUse hook's input. The bulky strings of the
// call (a file's new content) are replaced by their size: the policy
// decides on the tool, the command, the path and the URL, and the run
// channel takes calls of at most a MiB.
func parseHookInput(data []byte) (*hookInput, error) {
	var in hookInput
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("the call is not the JSON a PreToolUse hook gets: %v", err)
	}
	switch {
	case in.Event != "PreToolUse":
		return nil, fmt.Errorf("the hook is for PreToolUse, not %q", clip(in.Event, 40))
	case in.ToolName == "":
		return nil, errors.New("the call names no tool")
	}
	if len(in.ToolInput) == 0 || string(in.ToolInput) == "null" {
		in.ToolInput = json.RawMessage("{}")
	}
	var input map[string]any
	if err := json.Unmarshal(in.ToolInput, &input); err != nil {
		return nil, fmt.Errorf("the call's input is not a JSON object: %v", err)
	}
	trimmed := false
	for k, v := range input {
		if s, ok := v.(string); ok && len(s) > maxHookString {
			input[k] = "(" + strconv.Itoa(len(s)) + " bytes, not shown)"
			trimmed = true
		}
	}
	if trimmed {
		in.ToolInput, _ = json.Marshal(input)
	}
	return &in, nil
}

// maxHookString is the longest string of a call's input the hook passes
// on as it is.
const maxHookString = 16 << 10

// hookOutput is the hook's answer for Claude Code.
func hookOutput(d runchannel.PermissionDecision) []byte {
	out := map[string]any{"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": d.Reason}
	if d.Allow {
		out["permissionDecision"] = "allow"
		out["permissionDecisionReason"] = "allowed by the workflow's permission policy"
	} else if d.Reason == "" {
		out["permissionDecisionReason"] = "denied by the workflow's permission policy"
	}
	data, _ := json.Marshal(map[string]any{"hookSpecificOutput": out})
	return append(data, '\n')
}
