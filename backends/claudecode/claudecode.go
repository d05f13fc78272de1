package claudecode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/agentcli"
)

// Options configure the Claude Code backend. Zero fields mean the defaults
// noted.
type Options struct {
	// Env reads the configuration: ITERION_CLAUDE_COMMAND, and the
	// Anthropic key and base URL the run's model proxy forwards with
	// (ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN, ANTHROPIC_BASE_URL).
	// nil means os.Getenv.
	Env func(string) string
	// Logger receives the operator's warnings (Claude Code's own retries,
	// a model other than the one asked for). nil means none.
	Logger *slog.Logger
	// TempDir holds each execution's directory (Claude Code's config
	// directory and HOME, its settings and MCP configuration) and its run
	// channel, removed when the execution ends. "" means os.TempDir().
	TempDir string
	// Binary is the iterion executable the sandbox runs (sandbox-exec,
	// mcp-ask-user, claude-hook). "" means os.Executable(); tests give a
	// test binary that dispatches the same subcommands.
	Binary string
	// ExtraEnv are more variables for Claude Code's environment (and so
	// its hooks' and MCP server's), after iterion's, which they override:
	// CLAUDE_CODE_MAX_RETRIES, say. A provider's real key is refused
	// there, as everywhere in the sandbox. nil means none.
	ExtraEnv []string
	// StartTimeout bounds Claude Code's start, until its session is up
	// (system/init). 0 means 60 s.
	StartTimeout time.Duration
	// StopGrace is how long Claude Code has to end an interrupted turn and
	// then to exit (stdin closed) before its process tree is killed. 0
	// means 5 s.
	StopGrace time.Duration
}

// Backend is the Claude Code backend.
type Backend struct {
	env          func(string) string
	log          *slog.Logger
	tempDir      string
	binary       string
	extraEnv     []string
	startTimeout time.Duration
	stopGrace    time.Duration
	// hook is the subcommand the PreToolUse hook runs; only tests change
	// it, to see a failing hook deny.
	hook string
}

var (
	_ engine.Backend     = (*Backend)(nil)
	_ engine.Preflighter = (*Backend)(nil)
)

// HookCommand is the subcommand of the iterion binary that Claude Code
// runs as its PreToolUse hook (HookMain).
const HookCommand = "claude-hook"

// New returns the Claude Code backend.
func New(opts Options) *Backend {
	b := &Backend{env: opts.Env, log: opts.Logger, tempDir: opts.TempDir, binary: opts.Binary, extraEnv: opts.ExtraEnv,
		startTimeout: opts.StartTimeout, stopGrace: opts.StopGrace, hook: HookCommand}
	if b.env == nil {
		b.env = os.Getenv
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.startTimeout <= 0 {
		b.startTimeout = 60 * time.Second
	}
	if b.stopGrace <= 0 {
		b.stopGrace = 5 * time.Second
	}
	return b
}

// Capabilities: Claude Code offers the async question tools (over MCP).
func (b *Backend) Capabilities() engine.Capabilities {
	return engine.Capabilities{AsyncQuestions: true}
}

// Preflight checks, before a run starts, that Claude Code is installed,
// that the model is one it can call (Anthropic's), and that the server
// has an Anthropic key for the run's model proxy.
func (b *Backend) Preflight(model string) error {
	if _, err := b.command(); err != nil {
		return err
	}
	if _, err := claudeModel(model); err != nil {
		return err
	}
	return b.checkKey()
}

// checkKey fails when the server has no Anthropic credential: Claude Code
// reaches the model through the run's proxy, which adds it.
func (b *Backend) checkKey() error {
	if b.env("ANTHROPIC_API_KEY") == "" && b.env("ANTHROPIC_AUTH_TOKEN") == "" {
		return engine.NewBackendError("AUTH_FAILED", false, errors.New(
			"backend claude_code needs an Anthropic key in the server's environment: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), and ANTHROPIC_BASE_URL for another endpoint; it stays outside the sandbox, where the run's model proxy adds it"))
	}
	return nil
}

// claudeModel turns a node's model into Claude Code's --model: an
// "anthropic/" prefix is dropped, a bare name is kept, "" leaves Claude
// Code its default; another provider is refused, Claude Code speaks only
// Anthropic's API.
func claudeModel(model string) (string, error) {
	model = strings.TrimSpace(model)
	p, m, ok := strings.Cut(model, "/")
	switch {
	case !ok:
		return model, nil
	case p == "anthropic" && m != "":
		return m, nil
	}
	return "", engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf(
		"model %q: backend claude_code runs Anthropic's models only (write anthropic/<model> or a bare model name such as claude-sonnet-4-6); use backend claw or pi for %s", model, p))
}

// launcher is how Claude Code is started: its argv before its own
// arguments, and the installation the sandbox must show read-only.
type launcher struct {
	argv   []string
	mounts []engine.Mount
}

// command finds Claude Code: ITERION_CLAUDE_COMMAND, else claude on
// PATH. npm installs a native binary (bin/claude.exe, linked by the
// package's postinstall); an older install is a node script, run by the
// node found on PATH with its node_modules mounted.
func (b *Backend) command() (*launcher, error) {
	name := b.env("ITERION_CLAUDE_COMMAND")
	from := "ITERION_CLAUDE_COMMAND=" + name
	if name == "" {
		name, from = "claude", "claude on PATH"
	}
	found, err := exec.LookPath(name)
	if err != nil {
		return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf(
			"Claude Code is not installed (%s: %v): install it with npm install -g %s, or set ITERION_CLAUDE_COMMAND to its path", from, err, agentcli.Claude.Package))
	}
	real, err := filepath.EvalSymlinks(found)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("resolving Claude Code (%s): %w", found, err))
	}
	switch head := fileHead(real); {
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		return &launcher{argv: []string{real}, mounts: []engine.Mount{{Source: filepath.Dir(real)}}}, nil
	case bytes.HasPrefix(head, []byte("#!")):
		node, err := exec.LookPath("node")
		if err == nil {
			node, err = filepath.EvalSymlinks(node)
		}
		if err != nil {
			return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf(
				"Claude Code (%s) is a node script, and node is not on PATH: install Node.js, or install Claude Code's native build with npm install -g %s", real, agentcli.Claude.Package))
		}
		l := &launcher{argv: []string{node, real}, mounts: []engine.Mount{{Source: installRoot(real)}}}
		if !systemPath(node) {
			l.mounts = append(l.mounts, engine.Mount{Source: filepath.Dir(filepath.Dir(node))})
		}
		return l, nil
	}
	return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf(
		"%s (%s) is not Claude Code's binary: npm's postinstall may not have linked it (do not install with --omit=optional); reinstall with npm install -g %s, or set ITERION_CLAUDE_COMMAND to node_modules/@anthropic-ai/claude-code-linux-x64/claude", real, from, agentcli.Claude.Package))
}

// fileHead is the first bytes of a file, nil when it cannot be read.
func fileHead(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	head := make([]byte, 4)
	n, _ := f.Read(head)
	return head[:n]
}

// installRoot is the outermost node_modules above a package's file, where
// npm hoists its dependencies; the file's directory when there is none.
func installRoot(file string) string {
	root := filepath.Dir(file)
	for dir := filepath.Dir(file); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if filepath.Base(dir) == "node_modules" {
			root = dir
		}
	}
	return root
}

// systemPath reports whether the sandbox shows path anyway (the system's
// read-only directories).
func systemPath(path string) bool {
	for _, d := range []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/"} {
		if strings.HasPrefix(path, d) {
			return true
		}
	}
	return false
}

// Execute runs the node on Claude Code.
func (b *Backend) Execute(ctx context.Context, task *engine.Task) (*engine.Result, error) {
	if task.Run == nil {
		return nil, engine.NewBackendError(engine.CodeSandboxUnavailable, false, errors.New(
			"the claude_code backend runs Claude Code in the node's sandbox, and this engine has none: configure a sandbox"))
	}
	if strings.TrimSpace(task.User) == "" && task.ResumeConversation == nil {
		return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf(
			"node %s has no user prompt: Claude Code needs one to do anything (give the node a user: prompt)", task.NodeID))
	}
	if err := b.checkKey(); err != nil {
		return nil, err
	}
	model, err := claudeModel(task.Model)
	if err != nil {
		return nil, err
	}
	tools, err := builtinTools(task)
	if err != nil {
		return nil, err
	}
	l, err := b.command()
	if err != nil {
		return nil, err
	}
	var saved *savedSession
	if task.ResumeConversation != nil {
		if saved, err = decodeSaved(task.ResumeConversation); err != nil {
			return nil, engine.NewBackendError(engine.CodeResumeInvalid, false, err)
		}
	}
	r := newRun(b, task, saved)
	sess, err := runchannel.Open(ctx, task, runchannel.Options{
		Upstreams:    runchannel.UpstreamsFromEnv(b.env),
		Dir:          b.tempDir,
		Binary:       b.binary,
		Ask:          r.ask,
		AwaitPending: r.awaitPending,
		Permission:   r.permission,
		Logger:       b.log,
	})
	if err != nil {
		return nil, fmt.Errorf("opening the run channel: %w", err)
	}
	defer sess.Close()
	inv, err := b.prepare(task, sess, l, model, tools, saved)
	if err != nil {
		return nil, err
	}
	defer inv.remove()
	r.sess, r.inv = sess, inv
	start := time.Now()
	res, err := r.execute(ctx)
	if res != nil {
		res.Duration = time.Since(start)
	}
	return res, err
}
