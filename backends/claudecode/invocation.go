package claudecode

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/iterion-bot/iterion/backends/askmcp"
	"github.com/iterion-bot/iterion/backends/asktools"
	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
)

// mcpPrefix starts the names Claude Code gives the interaction tools of
// iterion's MCP server.
const mcpPrefix = "mcp__" + askmcp.ServerName + "__"

// invocation is one execution of a node on Claude Code: its directory
// (removed at the end), holding Claude Code's config directory and HOME,
// the settings with the hook, the MCP configuration and the system
// prompt; and so its argv, environment and mounts.
type invocation struct {
	dir        string
	configDir  string
	home       string
	settings   string
	mcpConfig  string // "" when the node has no interaction tools
	systemFile string // "" when there is nothing to append
	workDir    string // the workspace, as the sandbox shows it

	launcher *launcher
	model    string
	tools    []string
	resume   string // the session id to resume, "" for a new one
	// maxTurns bounds the model calls of one message's turn: the node's
	// tool_max_steps, and the answer after them; 0 is Claude Code's
	// default.
	maxTurns int
	env      []string
}

// MCPTimeout and MCPToolTimeout bound, in milliseconds, the start of
// iterion's MCP server and one call of its tools: a call stays open while
// the store is slow, but never forever.
const (
	mcpStartTimeout = 60000
	mcpToolTimeout  = 600000
)

// maxRetries is how often Claude Code retries a failed model call itself
// (its default is 10, with back-off reaching minutes).
const maxRetries = 3

// hookTimeout bounds one permission decision, in seconds; a hook that
// takes longer denies the call.
const hookTimeout = 60

// builtinTools maps the node's tools onto Claude Code's built-ins,
// without the writing ones on a readonly node. A name with no built-in
// fails the node: Claude Code would run without the tool the workflow
// counts on.
func builtinTools(task *engine.Task) ([]string, error) {
	var out []string
	for _, name := range task.Tools {
		t, ok := dsl.ClaudeCodeTool(name)
		if !ok {
			return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf(
				"tool %q has no Claude Code built-in (backend claude_code): use one of %s", name, strings.Join(dsl.ClaudeCodeToolNames(), ", ")))
		}
		if task.ReadOnly && writes(t) {
			continue // a readonly node gets no tool that changes the workspace
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// writes reports whether a built-in can change the workspace.
func writes(tool string) bool {
	switch tool {
	case "Write", "Edit", "NotebookEdit", "Bash":
		return true
	}
	return false
}

// prepare makes the execution's directory and files.
func (b *Backend) prepare(task *engine.Task, sess *runchannel.Session, l *launcher, model string, tools []string, saved *savedSession) (inv *invocation, err error) {
	dir, err := os.MkdirTemp(b.tempDir, "iterion-claude-")
	if err != nil {
		return nil, fmt.Errorf("creating Claude Code's directory: %w", err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	inv = &invocation{dir: dir, configDir: filepath.Join(dir, "config"), home: filepath.Join(dir, "home"),
		settings: filepath.Join(dir, "settings.json"), launcher: l, model: model, tools: tools}
	if task.ToolMaxSteps > 0 {
		inv.maxTurns = task.ToolMaxSteps + 1
	}
	defer func() {
		if err != nil {
			inv.remove()
		}
	}()
	inv.workDir = task.WorkDir
	if abs, err := filepath.Abs(task.WorkDir); err == nil {
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			inv.workDir = real
		}
	}
	for _, d := range []string{inv.configDir, inv.home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	hook := shellQuote(sess.Binary()) + " " + b.hook
	settings := map[string]any{"hooks": map[string]any{"PreToolUse": []any{map[string]any{
		"matcher": "*",
		"hooks":   []any{map[string]any{"type": "command", "command": hook, "timeout": hookTimeout}},
	}}}}
	if err := writeJSON(inv.settings, settings); err != nil {
		return nil, err
	}
	if len(asktools.For(task.Interaction)) > 0 {
		inv.mcpConfig = filepath.Join(dir, "mcp.json")
		env := map[string]string{}
		for _, kv := range sess.ChannelEnv() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		mcp := map[string]any{"mcpServers": map[string]any{askmcp.ServerName: map[string]any{
			"type": "stdio", "command": sess.Binary(), "args": []string{"mcp-ask-user"}, "env": env,
		}}}
		if err := writeJSON(inv.mcpConfig, mcp); err != nil {
			return nil, err
		}
	}
	if sys := systemPrompt(task); sys != "" {
		inv.systemFile = filepath.Join(dir, "system.md")
		if err := os.WriteFile(inv.systemFile, []byte(sys), 0o600); err != nil {
			return nil, err
		}
	}
	if saved != nil {
		// The paused session, written back where Claude Code looks for it.
		proj := filepath.Join(inv.configDir, "projects", projectKey(inv.workDir))
		if err := os.MkdirAll(proj, 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(proj, saved.SessionID+".jsonl"), []byte(saved.Transcript), 0o600); err != nil {
			return nil, fmt.Errorf("writing back the paused Claude Code session: %w", err)
		}
		inv.resume = saved.SessionID
	}
	inv.env = []string{
		"HOME=" + inv.home,
		"CLAUDE_CONFIG_DIR=" + inv.configDir,
		// Only the model requests leave: no telemetry, updates, error
		// reports or feedback surveys (they would fail anyway, the sandbox
		// reaching nothing but the model proxy).
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
		"DISABLE_BUG_COMMAND=1", "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1",
		// The MCP tools' schemas go in every request, rather than behind
		// ToolSearch: the interaction tools are there from the first turn.
		"ENABLE_TOOL_SEARCH=false",
		// Claude Code's own retries of a failed model call stay few: a
		// transient failure beyond them fails the node, which the engine
		// may retry.
		"CLAUDE_CODE_MAX_RETRIES=" + strconv.Itoa(maxRetries),
		"MCP_TIMEOUT=" + strconv.Itoa(mcpStartTimeout),
		"MCP_TOOL_TIMEOUT=" + strconv.Itoa(mcpToolTimeout),
	}
	if task.MaxTokens > 0 {
		inv.env = append(inv.env, "CLAUDE_CODE_MAX_OUTPUT_TOKENS="+strconv.Itoa(task.MaxTokens))
	}
	inv.env = append(inv.env, b.extraEnv...)
	return inv, nil
}

func (inv *invocation) remove() { _ = os.RemoveAll(inv.dir) }

// argv is Claude Code's command line. The prompt is not on it: messages
// go on stdin.
func (inv *invocation) argv() []string {
	a := append(slices.Clip(inv.launcher.argv),
		"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--replay-user-messages",
		"--permission-mode", "dontAsk",
		"--setting-sources", "",
		"--settings", inv.settings,
		"--disable-slash-commands",
		"--tools", strings.Join(inv.tools, ","),
		"--strict-mcp-config",
	)
	if inv.mcpConfig != "" {
		a = append(a, "--mcp-config", inv.mcpConfig, "--allowedTools", "mcp__"+askmcp.ServerName)
	}
	if inv.model != "" {
		a = append(a, "--model", inv.model)
	}
	if inv.systemFile != "" {
		a = append(a, "--append-system-prompt-file", inv.systemFile)
	}
	if inv.maxTurns > 0 {
		a = append(a, "--max-turns", strconv.Itoa(inv.maxTurns))
	}
	if inv.resume != "" {
		a = append(a, "--resume", inv.resume)
	}
	return a
}

// mounts are the installation (read-only) and the execution's directory.
func (inv *invocation) mounts() []engine.Mount {
	return append(slices.Clip(inv.launcher.mounts), engine.Mount{Source: inv.dir, Writable: true})
}

// transcript returns the session's transcript as Claude Code left it.
func (inv *invocation) transcript(session string) ([]byte, error) {
	files, _ := filepath.Glob(filepath.Join(inv.configDir, "projects", "*", session+".jsonl"))
	if len(files) != 1 {
		return nil, fmt.Errorf("Claude Code left %d transcripts of session %s, want one", len(files), session)
	}
	return os.ReadFile(files[0])
}

// projectKey is the directory of CLAUDE_CONFIG_DIR/projects that Claude
// Code keeps the sessions of a working directory in: its path with every
// character but a letter or a digit made '-'.
func projectKey(dir string) string {
	b := []byte(dir)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

// systemPrompt is what is appended to Claude Code's own system prompt: the
// node's, the async-questions section when it has the async tools, and
// its output schema.
func systemPrompt(task *engine.Task) string {
	var parts []string
	if s := strings.TrimSpace(task.System); s != "" {
		parts = append(parts, s)
	}
	if task.Interaction == "async" {
		parts = append(parts, asktools.SystemSection+"\nHere the tools are named "+mcpPrefix+asktools.AskUserAsync+", "+
			mcpPrefix+asktools.AwaitAnswers+" and "+mcpPrefix+asktools.AskUser+".")
	}
	if task.OutputSchema != nil {
		parts = append(parts, engine.OutputSection(task.OutputSchema))
	}
	return strings.Join(parts, "\n\n")
}

// shellQuote quotes s for sh, which Claude Code runs a hook's command
// with.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// maxSaved bounds a paused session carried in the checkpoint.
const maxSaved = 32 << 20

// savedSession is a paused node's Claude Code session, as the checkpoint
// keeps it (engine.NeedsInteractionError.Conversation): its id and
// transcript, and what it paused on.
type savedSession struct {
	V          int    `json:"v"`
	SessionID  string `json:"session_id"`
	Transcript string `json:"transcript"`
	// Kind is what paused: ask_user, await_answers or permission.
	Kind string `json:"kind"`
	// Question is ask_user's question.
	Question string `json:"question,omitempty"`
	// Tool and Input are the call a permission question is about.
	Tool  string          `json:"tool,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

// The kinds of pause.
const (
	pauseAsk        = "ask_user"
	pauseAwait      = "await_answers"
	pausePermission = "permission"
)

// decodeSaved reads a checkpoint's session, refusing what this backend did
// not write.
func decodeSaved(data []byte) (*savedSession, error) {
	if len(data) > maxSaved+(1<<20) {
		return nil, errors.New("the paused Claude Code session is larger than a checkpoint keeps")
	}
	var s savedSession
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("the paused Claude Code session is unreadable: %w", err)
	}
	switch {
	case s.V != 1:
		return nil, fmt.Errorf("the paused Claude Code session has format %d, this iterion reads 1", s.V)
	case !validSessionID(s.SessionID):
		return nil, fmt.Errorf("the paused Claude Code session has no valid session id (%q)", clip(s.SessionID, 80))
	case s.Kind != pauseAsk && s.Kind != pauseAwait && s.Kind != pausePermission:
		return nil, fmt.Errorf("the paused Claude Code session paused on %q, which this iterion does not resume", clip(s.Kind, 40))
	}
	return &s, nil
}

// validSessionID reports whether id is a UUID, as Claude Code's are: it
// names a file.
func validSessionID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i, c := range id {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
			return false
		}
	}
	return true
}
