package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Spec describes one process to run in a sandbox.
type Spec struct {
	// Argv is the command and its arguments. Argv[0] is looked up in the
	// PATH of Env inside the sandbox (the bwrap and docker drivers) or on
	// the host (the host driver); without PATH in Env the lookup uses
	// /usr/local/bin:/usr/bin:/bin.
	Argv []string

	// Dir is the workspace: an absolute host directory, bound read-write at
	// the same absolute path inside the sandbox and used as the working
	// directory. It must exist and must not be "/".
	Dir string
	// ReadOnlyDir binds Dir read-only (a read-only agent's workspace). The
	// host driver cannot enforce it and refuses it.
	ReadOnlyDir bool

	// Home, when set, is an absolute host directory bound read-write at the
	// same path inside and used as HOME (for example a per-workspace home
	// that keeps an agent CLI's settings between runs). Empty means a
	// private HOME that lives as long as the process: a tmpfs at
	// /home/iterion under bwrap and docker, a temporary directory removed
	// after Wait on the host.
	Home string

	// Mounts are extra host paths to bind. Only these, Dir and Home are
	// visible of the host besides the system directories (see the package
	// documentation).
	Mounts []Mount

	// Env is the complete environment as KEY=VALUE entries; the caller
	// allowlists it and nothing of the server's environment is inherited.
	// The sandbox adds HOME (see Home), TMPDIR (a private temporary
	// directory) and PWD (the working directory) when Env does not set
	// them, and nothing else. When a key appears twice, the last entry
	// wins.
	Env []string

	// Network is the network policy; the zero value is NetworkNone.
	Network Network

	// Limits bounds the process tree; the zero value sets no limit except
	// the default output cap.
	Limits Limits

	// Stdin is the process's standard input; nil means empty (/dev/null).
	// A *os.File is passed as is; any other reader is copied through a
	// pipe by a goroutine that ends when the reader returns an error or
	// EOF, or when the process has ended and its Read returns.
	Stdin io.Reader

	// Stdout and Stderr, when set, receive the whole stream as it is read,
	// with no cap, and the stream is then not kept in the Result (the
	// caller who streams keeps what it needs, e.g. with io.MultiWriter).
	// When nil, the stream is captured into the Result up to
	// Limits.Output. A write error stops the copying (the rest of the
	// stream is read and dropped so the process never blocks on a full
	// pipe) and is returned by Wait. A writer that blocks holds the process
	// back (its pipe fills) and Wait until it returns.
	Stdout, Stderr io.Writer
}

// Mount is a host path bound into the sandbox.
type Mount struct {
	// Source is an absolute host path that must exist.
	Source string
	// Target is the absolute path inside; empty means the same as Source.
	// The host driver cannot remap paths and refuses a Target that differs
	// from Source.
	Target string
	// Writable binds read-write; the default is read-only. The host driver
	// cannot make a path read-only and ignores this field.
	Writable bool
}

// Network is a sandbox's network policy.
type Network int

const (
	// NetworkNone is the default: a private network namespace with only its
	// own loopback, so neither the internet nor the host's loopback
	// services (the server's API, databases) can be reached. The host
	// driver cannot enforce it.
	NetworkNone Network = iota
	// NetworkOpen shares the host's network namespace: the internet, and
	// also every service listening on the host's loopback interface and
	// abstract unix sockets. Agents calling model APIs need it.
	NetworkOpen
)

// String returns "none" or "open".
func (n Network) String() string {
	switch n {
	case NetworkNone:
		return "none"
	case NetworkOpen:
		return "open"
	}
	return fmt.Sprintf("Network(%d)", int(n))
}

// Limits bounds a process tree. A zero field sets no limit, except Output.
// How each limit is enforced depends on the driver and on what the host
// offers (Driver.Mechanism names it for the logs); see the package
// documentation.
type Limits struct {
	// WallTime is the longest the process may run; when it passes, the
	// whole tree is killed and Result.Limit is LimitWallTime. The context
	// given to Start still applies.
	WallTime time.Duration

	// CPUTime is the CPU time (user plus system) the tree may use. With a
	// cgroup CPU accounting controller it is the tree's total, checked by
	// a watchdog; otherwise RLIMIT_CPU bounds each process separately.
	CPUTime time.Duration

	// Memory is in bytes: the memory cgroup limit of the tree (including
	// its tmpfs files), or RLIMIT_AS of each process without cgroups (a
	// poor stand-in: it counts address space, which runtimes such as Go's
	// and V8 reserve far beyond what they use). Under bwrap and docker it
	// also sizes the private /tmp and HOME tmpfs.
	Memory int64

	// Processes is the number of tasks the tree may hold at once, threads
	// included (the pids cgroup counts threads, as RLIMIT_NPROC does); the
	// process itself counts. A driver's own helper processes (bwrap's two,
	// docker's init) are added on top. A fork or clone beyond it fails with
	// EAGAIN.
	Processes int

	// OpenFiles is RLIMIT_NOFILE of each process. A breach is returned to
	// the process as EMFILE and is not visible from outside, so it is never
	// reported in Result.Limit.
	OpenFiles int

	// Output is the number of bytes kept per captured stream (stdout and
	// stderr each); 0 means DefaultOutput. Past it, further output is read
	// and dropped and Result.StdoutTruncated or StderrTruncated is set; the
	// process is not stopped (WallTime bounds a process that prints
	// forever), so truncation alone is not a breach.
	Output int

	// FileSize is RLIMIT_FSIZE of each process, in bytes: the largest file
	// it may write (pipes are not bounded). Writing past it raises
	// SIGXFSZ.
	FileSize int64
}

// DefaultOutput is the number of bytes kept per captured stream when
// Limits.Output is 0.
const DefaultOutput = 4 << 20

// The values of Result.Limit and LimitError.Limit: which limit a process
// tree ran into.
const (
	LimitWallTime  = "wall_time"
	LimitCPUTime   = "cpu_time"
	LimitMemory    = "memory"
	LimitProcesses = "processes"
	LimitFileSize  = "file_size"
)

// Result is what a finished process left.
type Result struct {
	// ExitCode is the exit status of the command. A command killed by
	// signal n reports 128+n, as a shell does.
	ExitCode int
	// Signal is the signal that killed the command when the driver can
	// tell: always under the host driver; under bwrap and docker only when
	// the sandbox killed it (a command killed inside the sandbox reaches us
	// as exit status 128+n from the sandbox's init).
	Signal syscall.Signal
	// Stdout and Stderr are the captured streams, at most Limits.Output
	// bytes each (the first bytes written); nil for a stream sent to
	// Spec.Stdout or Spec.Stderr.
	Stdout, Stderr []byte
	// StdoutTruncated and StderrTruncated say that output was dropped past
	// the cap.
	StdoutTruncated, StderrTruncated bool
	// Limit is "" or the limit the tree ran into (one of the Limit*
	// constants). A breach is reported only when the process failed (a
	// non-zero exit status or a signal), or was killed for it: a command
	// that saw a fork fail and still exited 0 has no Limit. memory and
	// processes win over wall_time and cpu_time, because they name the
	// cause (a fork bomb stuck until its wall time reports processes).
	Limit string
	// Duration is the wall time from start to exit.
	Duration time.Duration
	// CPUTime is the CPU time the tree used: the cgroup's account when the
	// tree has a CPU cgroup (Limits.CPUTime set and cgroups in use);
	// otherwise, under the host driver, the usage of the command and the
	// descendants it waited for, and under bwrap and docker 0 (unknown).
	CPUTime time.Duration
}

// LimitError reports that a process tree ran into one of its limits. Wait
// and Run return it, next to a Result whose Limit is the same, so that a
// caller can report SANDBOX_LIMIT.
type LimitError struct {
	// Limit is one of the Limit* constants.
	Limit string
	// Value is the configured value, as text: "2s", "268435456 bytes",
	// "64 tasks".
	Value string
}

// Error names the limit and its value.
func (e *LimitError) Error() string {
	return fmt.Sprintf("sandbox limit exceeded: %s (%s)", e.Limit, e.Value)
}

// ErrKilled is returned by Wait after Kill stopped the process.
var ErrKilled = errors.New("sandbox: process killed")

// Driver runs processes in one kind of sandbox. New returns one by name;
// NewBwrap, NewHost and NewDocker return the concrete types.
type Driver interface {
	// Name is "bwrap", "docker" or "host".
	Name() string
	// Available returns nil when the driver works here, otherwise an error
	// that names the fix.
	Available() error
	// Isolated reports whether the driver isolates the process from the
	// host (false for host, so that callers can warn).
	Isolated() bool
	// Mechanism says, for the logs, how the driver enforces Limits here,
	// e.g. "cgroup v1 (pids, memory, cpuacct); rlimits (nofile, fsize)".
	Mechanism() string
	// Start starts the process described by s. Cancelling ctx kills the
	// whole process tree; so do Limits.WallTime and Process.Kill.
	Start(ctx context.Context, s Spec) (*Process, error)
}

// Options configures the drivers. The zero value is usable for bwrap and
// host; docker needs DockerImage.
type Options struct {
	// DockerImage is the image the docker driver runs processes in. It is
	// required by the docker driver and must contain what the commands
	// need (a shell, git, the agent CLIs).
	DockerImage string
	// DockerUser is the docker driver's --user; empty means "1000:1000".
	// The workspace must be writable by it on the host.
	DockerUser string
	// DockerPath is the docker CLI; empty means "docker" in the server's
	// PATH.
	DockerPath string
	// BwrapPath is the bubblewrap binary; empty means "bwrap" in the
	// server's PATH.
	BwrapPath string
	// NoCgroups makes the bwrap and host drivers enforce limits with
	// rlimits only, even where cgroups are writable.
	NoCgroups bool
	// CgroupParent is a cgroup v2 directory delegated to the server (for
	// example a systemd unit's cgroup with Delegate=yes, the server itself
	// running in a leaf below it) in which per-process cgroups are made.
	// Empty means automatic: a writable cgroup v2 root with the pids and
	// memory controllers, else the server's own cgroups in the v1
	// hierarchies.
	CgroupParent string
}

// New returns the driver named name: "bwrap", "docker" or "host".
func New(name string, opts Options) (Driver, error) {
	switch name {
	case "bwrap":
		return NewBwrap(opts), nil
	case "docker":
		return NewDocker(opts), nil
	case "host":
		return NewHost(opts), nil
	}
	return nil, fmt.Errorf("unknown sandbox %q: want bwrap, docker or host", name)
}

// Run starts s with d and waits for it: Start followed by Wait.
func Run(ctx context.Context, d Driver, s Spec) (*Result, error) {
	p, err := d.Start(ctx, s)
	if err != nil {
		return nil, err
	}
	return p.Wait()
}

// checkSpec validates what every driver relies on.
func checkSpec(s *Spec) error {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return errors.New("sandbox: empty command")
	}
	if err := checkDir("workspace", s.Dir); err != nil {
		return err
	}
	if filepath.Clean(s.Dir) == "/" {
		return errors.New("sandbox: the workspace cannot be /")
	}
	if s.Home != "" {
		if err := checkDir("home", s.Home); err != nil {
			return err
		}
	}
	for _, m := range s.Mounts {
		if !filepath.IsAbs(m.Source) {
			return fmt.Errorf("sandbox: mount source %q is not absolute", m.Source)
		}
		if _, err := os.Stat(m.Source); err != nil {
			return fmt.Errorf("sandbox: mount source: %w", err)
		}
		if m.Target != "" && !filepath.IsAbs(m.Target) {
			return fmt.Errorf("sandbox: mount target %q is not absolute", m.Target)
		}
	}
	for _, kv := range s.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsRune(kv, 0) {
			return fmt.Errorf("sandbox: environment entry %q is not KEY=VALUE", kv)
		}
	}
	if s.Network != NetworkNone && s.Network != NetworkOpen {
		return fmt.Errorf("sandbox: unknown network policy %v", s.Network)
	}
	l := s.Limits
	if l.WallTime < 0 || l.CPUTime < 0 || l.Memory < 0 || l.Processes < 0 || l.OpenFiles < 0 || l.Output < 0 || l.FileSize < 0 {
		return errors.New("sandbox: negative limit")
	}
	return nil
}

func checkDir(what, dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("sandbox: %s %q is not an absolute path", what, dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("sandbox: %s: %w", what, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("sandbox: %s %s is not a directory", what, dir)
	}
	return nil
}

// mergeEnv returns env with later duplicates winning (keeping the order of
// first appearance) and HOME, TMPDIR and PWD added when missing. bwrap and
// the shell of a gated start would set PWD anyway.
func mergeEnv(env []string, home, tmp, pwd string) []string {
	idx := make(map[string]int, len(env)+2)
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	if _, ok := idx["HOME"]; !ok {
		out = append(out, "HOME="+home)
	}
	if _, ok := idx["TMPDIR"]; !ok {
		out = append(out, "TMPDIR="+tmp)
	}
	if _, ok := idx["PWD"]; !ok {
		out = append(out, "PWD="+pwd)
	}
	return out
}

// envValue returns the value of key in env, the last entry winning.
func envValue(env []string, key string) (string, bool) {
	v, found := "", false
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v, found = val, true
		}
	}
	return v, found
}

// defaultPath is searched for Argv[0] when Env has no PATH.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// lookPath finds file in the colon-separated path list the way a shell
// does on the host; a name with a slash is taken relative to dir.
func lookPath(file, path, dir string) (string, error) {
	if strings.Contains(file, "/") {
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		if err := executable(file); err != nil {
			return "", fmt.Errorf("sandbox: %s: %w", file, err)
		}
		return file, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = dir
		}
		p := filepath.Join(d, file)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("sandbox: %s: command not found in PATH %s", file, path)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}
