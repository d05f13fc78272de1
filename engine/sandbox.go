package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/iterion-bot/iterion/dsl"
)

// Sandbox runs every process a run starts: tool nodes' commands, agents'
// shell tools and CLI agent backends. The engine never starts a process
// itself; cmd wires an implementation over package sandbox.
type Sandbox interface {
	// Run runs p to its end. A process that exits non-zero is a result,
	// not an error; an error means it could not run, or could not run in
	// the sandbox it asked for (an *UnavailableError).
	Run(ctx context.Context, p *Process) (*ProcessResult, error)
}

// SandboxPreflighter is a Sandbox that can tell, before a run starts,
// whether it can serve every node of a workflow (the driver each one asks
// for is installed and allowed). Preflight calls it.
type SandboxPreflighter interface {
	PreflightSandbox(w *dsl.Workflow) error
}

// SandboxWarner is a Sandbox that can say, for every run's status, that
// it does not isolate processes (the host driver chosen by the operator).
// Start records the warning in the run_started event, as sandbox_warning.
type SandboxWarner interface {
	SandboxWarning() string
}

// SandboxHomer is a Sandbox that keeps a HOME for each workspace on the
// server's disk; the workspace quota counts it with the workspace.
type SandboxHomer interface {
	HomeOf(workdir string) string
}

// Network is a process's network policy.
type Network int

// Network policies. The zero value is the default for the process: none
// for tool nodes and agents' shells.
const (
	NetworkDefault Network = iota
	// NetworkNone: no network at all, not even the host's loopback.
	NetworkNone
	// NetworkOpen: the host's network, loopback included.
	NetworkOpen
	// NetworkModelOnly: no network, except the run's model proxy, which an
	// agent CLI reaches through a forwarder inside its sandbox to a socket
	// bound in (package backends/runchannel wraps its command so). For the
	// sandbox it is the default: none, unless the node's sandbox:
	// declaration or the server's default opens the network.
	NetworkModelOnly
)

func (n Network) String() string {
	switch n {
	case NetworkNone:
		return "none"
	case NetworkOpen:
		return "open"
	case NetworkModelOnly:
		return "model-only"
	}
	return "default"
}

// Process is one process to run for a node.
type Process struct {
	// Workflow and Node are the workflow and the node the process runs for:
	// the sandbox reads the node's sandbox: declaration (or the workflow's).
	Workflow *dsl.Workflow
	Node     *dsl.Node
	// Argv is the command; Argv[0] is looked up in the sandbox's PATH.
	Argv []string
	// Dir is the run's workspace: read-write, and the working directory.
	Dir string
	// ReadOnly mounts Dir read-only (a readonly: node's processes).
	ReadOnly bool
	// Env is what the process gets beyond the sandbox's own allowlist
	// (PATH, HOME, LANG, TERM): template values, a backend's provider
	// variables. Never the server's environment.
	Env []string
	// Network is the policy asked for; NetworkDefault means none unless the
	// node's sandbox: declaration opens it.
	Network Network
	// MaxStdout and MaxStderr bound the output kept; 0 means the sandbox's
	// defaults.
	MaxStdout, MaxStderr int

	// Mounts are host paths bound into the sandbox besides the workspace:
	// an agent CLI's installation, a per-run channel socket. Read-only
	// unless Writable.
	Mounts []Mount
	// Stdin, when set, is the process's standard input; nil is empty.
	Stdin io.Reader
	// Stdout and Stderr, when set, receive the stream as it is read, with
	// no bound, and it is then not kept in the result: a backend driving a
	// long-lived CLI reads its protocol from them.
	Stdout, Stderr io.Writer
}

// Mount is a host path bound into a process's sandbox.
type Mount struct {
	// Source is an absolute host path that must exist; Target is where it
	// appears inside, the same path when empty.
	Source, Target string
	Writable       bool
}

// ProcessResult is how a process ended.
type ProcessResult struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	// StdoutTruncated reports that stdout was cut at its bound.
	StdoutTruncated bool
	// Limit, when not empty, names the limit the process broke (memory,
	// processes, cpu_time, wall_time, open_files, file_size, output) and
	// Detail says what it was; the node fails SANDBOX_LIMIT.
	Limit, Detail string
}

// Failure codes of sandboxed processes.
const (
	// CodeSandboxLimit: a process broke one of the sandbox's limits.
	CodeSandboxLimit = "SANDBOX_LIMIT"
	// CodeSandboxUnavailable: the sandbox a node asks for cannot run here
	// (not installed, or not allowed by the server).
	CodeSandboxUnavailable = "SANDBOX_UNAVAILABLE"
)

// UnavailableError says a node's sandbox cannot run here, and what to do.
type UnavailableError struct {
	// Driver is the sandbox driver asked for (bwrap, docker, host).
	Driver string
	Err    error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("sandbox %s is not available: %v", e.Driver, e.Err)
}
func (e *UnavailableError) Unwrap() error { return e.Err }

// errNoSandbox is what a run meets on an engine built without a sandbox:
// nothing runs on the host by default.
var errNoSandbox = errors.New("this engine has no sandbox to run processes in (configure one, or choose sandbox: host to run on the host)")

// runProcess runs p through the engine's sandbox and turns the ways it
// can fail into node failures.
func (rs *runState) runProcess(ctx context.Context, p *Process) (*ProcessResult, error) {
	if rs.e.sandbox == nil {
		return nil, failf(CodeSandboxUnavailable, "%v", errNoSandbox)
	}
	p.Workflow = rs.w
	if p.Dir == "" {
		p.Dir = rs.workdir
	}
	res, err := rs.e.sandbox.Run(ctx, p)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ue *UnavailableError
		if errors.As(err, &ue) {
			return nil, failf(CodeSandboxUnavailable, "%v", err)
		}
		return nil, failf(CodeExecutionFailed, "running %s: %v", p.Argv[0], err)
	}
	if res.Limit == "wall_time" && ctx.Err() != nil {
		return nil, ctx.Err() // the node's timeout, which the sandbox enforced
	}
	if res.Limit != "" {
		return nil, failf(CodeSandboxLimit, "the process broke the sandbox's %s limit (%s)", res.Limit, res.Detail)
	}
	return res, nil
}

// checkQuota fails the node when the run's workspace holds more than the
// engine's workspace quota; it is measured after each node that may have
// written to it (the filesystems iterion runs on rarely offer quotas).
func (rs *runState) checkQuota(n *dsl.Node) error {
	if rs.e.quota <= 0 || (n.Kind != dsl.NodeTool && n.LLM == nil) {
		return nil
	}
	size, err := dirSize(rs.workdir, rs.e.quota)
	if err != nil {
		return failf(CodeExecutionFailed, "measuring the workspace: %v", err)
	}
	if h, ok := rs.e.sandbox.(SandboxHomer); ok && size <= rs.e.quota {
		if home := h.HomeOf(rs.workdir); home != "" {
			more, err := dirSize(home, rs.e.quota-size)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return failf(CodeExecutionFailed, "measuring the workspace's home: %v", err)
			}
			size += more
		}
	}
	if size > rs.e.quota {
		return failf(CodeSandboxLimit, "the workspace (with its HOME) holds more than its quota of %s after node %s: remove what the run does not need (build outputs, caches), or raise the server's workspace quota", byteSize(rs.e.quota), n.ID)
	}
	return nil
}

// dirSize adds up the sizes of the files under dir, stopping once past
// limit. Links are not followed.
func dirSize(dir string, limit int64) (int64, error) {
	var total int64
	errOver := errors.New("over")
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				return nil // gone meanwhile, or a directory the process locked
			}
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err == nil {
				total += info.Size()
			}
		}
		if total > limit {
			return errOver
		}
		return nil
	})
	if errors.Is(err, errOver) {
		err = nil
	}
	return total, err
}

// byteSize writes n bytes for people: 512 B, 3.0 MiB, 10.0 GiB.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// declaredNetwork is the network policy a sandbox: declaration asks for;
// NetworkDefault when there is none or it says nothing of the network.
func declaredNetwork(decl *dsl.Sandbox) Network {
	if decl == nil {
		return NetworkDefault
	}
	switch decl.Network {
	case dsl.SandboxNetworkNone:
		return NetworkNone
	case dsl.SandboxNetworkOpen:
		return NetworkOpen
	case dsl.SandboxNetworkModelOnly:
		return NetworkModelOnly
	}
	return NetworkDefault
}
