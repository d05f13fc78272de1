package pi

import (
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

// Options configure the pi backend. Zero fields mean the defaults noted.
type Options struct {
	// Env reads the configuration: ITERION_PI_MODE, ITERION_PI_COMMAND,
	// ITERION_PI_NO_CONTEXT_FILES, ITERION_PI_TRUST_PROJECT,
	// PI_CODING_AGENT_DIR, HOME, ITERION_FORBID_SUBSCRIPTION_OAUTH and the
	// providers' key variables. nil means os.Getenv.
	Env func(string) string
	// Logger receives the operator's warnings (pi's own retries, a model
	// other than the one asked for, a subscription credential). nil means
	// none.
	Logger *slog.Logger
	// TempDir holds each execution's directory (agent directory copy,
	// sessions, prompt and extension files), removed when it ends. ""
	// means os.TempDir().
	TempDir string
	// Prices price the tokens of models pi reports no cost for, by model
	// prefix ("<provider>/<model>"). nil means none: such a node's cost is
	// then 0.
	Prices map[string]Price
	// StartTimeout bounds pi's start, until its RPC session answers. 0
	// means 60 s.
	StartTimeout time.Duration
	// Binary is the iterion executable the sandbox runs pi under
	// (sandbox-exec, the run channel's forwarder). "" means
	// os.Executable().
	Binary string
	// StopGrace is how long a cancelled pi has to end its turn (abort) and
	// then to exit (stdin closed) before its process tree is killed. 0
	// means 5 s.
	StopGrace time.Duration
}

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	InputPerMTok  float64 `json:"input_per_mtok"`
	OutputPerMTok float64 `json:"output_per_mtok"`
}

// Transport modes.
const (
	ModeRPC   = "rpc"
	ModePrint = "print"
)

// Backend is the pi backend.
type Backend struct {
	env          func(string) string
	log          *slog.Logger
	tempDir      string
	prices       map[string]Price
	mode         string
	startTimeout time.Duration
	stopGrace    time.Duration
	binary       string
	// contract is the extension contract version written into its
	// configuration; only tests change it, to see a mismatch refused.
	contract int
}

var (
	_ engine.Backend     = (*Backend)(nil)
	_ engine.Preflighter = (*Backend)(nil)
)

// New returns the pi backend, on the transport ITERION_PI_MODE names
// (rpc, the default, or print).
func New(opts Options) (*Backend, error) {
	b := &Backend{env: opts.Env, log: opts.Logger, tempDir: opts.TempDir, prices: opts.Prices,
		startTimeout: opts.StartTimeout, stopGrace: opts.StopGrace, binary: opts.Binary, contract: contractVersion}
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
	switch m := strings.TrimSpace(b.env("ITERION_PI_MODE")); m {
	case "", ModeRPC:
		b.mode = ModeRPC
	case ModePrint:
		b.mode = ModePrint
	default:
		return nil, fmt.Errorf("ITERION_PI_MODE=%q: use rpc (the default) or print", m)
	}
	return b, nil
}

// Mode is the transport: ModeRPC or ModePrint.
func (b *Backend) Mode() string { return b.mode }

// Capabilities: the async question tools need the RPC transport, whose
// extension carries them; print mode has no channel for them.
func (b *Backend) Capabilities() engine.Capabilities {
	return engine.Capabilities{AsyncQuestions: b.mode == ModeRPC}
}

// Preflight checks that pi can be started: its command is found, and node
// too when pi is a node script.
func (b *Backend) Preflight(string) error {
	_, err := b.command()
	return err
}

// launcher is how pi is started: the argv before pi's own arguments, and
// the installation the sandbox must show read-only.
type launcher struct {
	argv   []string
	mounts []engine.Mount
	// path is the PATH inside the sandbox when node lives outside the
	// system's directories; "" keeps the sandbox's.
	path string
}

// command finds pi: ITERION_PI_COMMAND, else pi on PATH. pi from npm is a
// node script, run by the node found on PATH; its whole node_modules is
// mounted, since pi loads its dependencies from there.
func (b *Backend) command() (*launcher, error) {
	name := b.env("ITERION_PI_COMMAND")
	from := "ITERION_PI_COMMAND=" + name
	if name == "" {
		name, from = "pi", "pi on PATH"
	}
	found, err := exec.LookPath(name)
	if err != nil {
		return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf(
			"pi is not installed (%s: %v): install it with npm install -g %s, or set ITERION_PI_COMMAND to its path", from, err, agentcli.Pi.Package))
	}
	real, err := filepath.EvalSymlinks(found)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("resolving pi (%s): %w", found, err))
	}
	l := &launcher{}
	if !isScript(real) {
		// A native single-file build of pi.
		l.argv = []string{real}
		l.mounts = []engine.Mount{{Source: filepath.Dir(real)}}
		return l, nil
	}
	node, err := exec.LookPath("node")
	if err == nil {
		node, err = filepath.EvalSymlinks(node)
	}
	if err != nil {
		return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf(
			"pi (%s) is a node script, and node is not on PATH: install Node.js 20 or later (apt-get install -y nodejs)", real))
	}
	l.argv = []string{node, real}
	l.mounts = []engine.Mount{{Source: installRoot(real)}}
	if !systemPath(node) {
		root := filepath.Dir(filepath.Dir(node)) // <prefix>/bin/node
		l.mounts = append(l.mounts, engine.Mount{Source: root})
		l.path = filepath.Dir(node) + ":/usr/local/bin:/usr/bin:/bin"
	}
	return l, nil
}

// isScript reports whether path starts with "#!".
func isScript(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 2)
	n, _ := f.Read(head)
	return n == 2 && string(head) == "#!"
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

// Execute runs the node on pi.
func (b *Backend) Execute(ctx context.Context, task *engine.Task) (*engine.Result, error) {
	if strings.TrimSpace(task.User) == "" && task.ResumeConversation == nil {
		// pi given an empty prompt writes its session header and ends
		// without a turn: the node would do nothing and fail later on its
		// output.
		return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf(
			"node %s has no user prompt: pi needs one to do anything (give the node a user: prompt)", task.NodeID))
	}
	if task.Run == nil {
		return nil, engine.NewBackendError(engine.CodeSandboxUnavailable, false, errors.New(
			"the pi backend runs pi in the node's sandbox, and this engine has none: configure a sandbox"))
	}
	if b.mode == ModePrint && task.Permission.Gated() {
		// Print mode has no extension, so nothing would stop a call the
		// policy refuses: the node fails closed, before pi starts.
		return nil, engine.NewBackendError(engine.CodeCapabilityUnsupported, false, fmt.Errorf(
			"node %s has a permission: policy, which pi in print mode cannot apply (it has no extension to hold calls): unset ITERION_PI_MODE for the rpc transport", task.NodeID))
	}
	if b.mode == ModePrint && task.Interaction != "" && task.Interaction != "none" {
		b.log.Warn("pi in print mode cannot ask the operator: the node runs without ask_user (unset ITERION_PI_MODE for the rpc transport)",
			"run", task.RunID, "node", task.NodeID, "interaction", task.Interaction)
	}
	inv, err := b.prepare(task)
	if err != nil {
		return nil, err
	}
	defer inv.remove()
	rt, err := b.planRoute(inv.agentDir)
	if err != nil {
		return nil, err
	}
	if err := b.checkRoute(rt, task, inv.model.provider, inv.agentDir); err != nil {
		return nil, err
	}
	sess, err := runchannel.Open(ctx, task, runchannel.Options{Upstreams: rt.upstreams, Binary: b.binary, Logger: b.log})
	if err != nil {
		return nil, engine.NewBackendError(engine.CodeSandboxUnavailable, false, fmt.Errorf("opening the run channel of node %s: %w", task.NodeID, err))
	}
	defer sess.Close()
	open := task.Network == engine.NetworkOpen
	if err := rt.apply(sess, inv.agentDir, open); err != nil {
		return nil, fmt.Errorf("routing pi's providers through the model proxy: %w", err)
	}
	inv.route, inv.sess, inv.open = rt, sess, open
	start := time.Now()
	var res *engine.Result
	if b.mode == ModePrint {
		res, err = b.executePrint(ctx, task, inv)
	} else {
		res, err = b.executeRPC(ctx, task, inv)
	}
	if res != nil {
		res.Duration = time.Since(start)
	}
	return res, err
}
