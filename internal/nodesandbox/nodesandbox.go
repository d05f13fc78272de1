// Package nodesandbox runs the processes of a run's nodes in the sandbox
// the server and the workflow chose: it implements engine.Sandbox over the
// drivers of package sandbox (bwrap by default, docker, or host as the
// explicit opt-out), with the environment allowlist, the network policy,
// the operator's mounts and limits, and a HOME of each workspace's own.
package nodesandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/sandbox"
)

// Options configure a Sandboxes. The zero value of each field means the
// default documented on it.
type Options struct {
	// Driver is the server's driver, used by every node that does not ask
	// for another: "bwrap", "docker" or "host". "" means bwrap.
	Driver string
	// OpenNetwork gives processes the server's network when their node's
	// sandbox: declares no network. false means none, the default.
	OpenNetwork bool
	// AllowNetwork lets a workflow's sandbox: ask for network: open. false
	// refuses such runs before they start, unless OpenNetwork is set: open
	// is the server's network, loopback and metadata addresses included.
	AllowNetwork bool
	// DockerImages are the images a workflow's sandbox: may name, besides
	// DockerImage. Empty means DockerImage alone: a workflow cannot make the
	// server pull, with its credentials, an image the operator did not name.
	DockerImages []string
	// AnyDockerImage lets a workflow name any image (iterion run: the
	// person running it wrote or chose the workflow).
	AnyDockerImage bool
	// AllowHost lets a workflow or node choose sandbox: none (or host) and
	// run on the host. false refuses such runs before they start, unless
	// Driver is host itself.
	AllowHost bool
	// DockerImage is the image of the docker driver when a workflow names
	// none. "" means a docker sandbox must name its image.
	DockerImage string
	// Mounts are the operator's extra binds (a module cache, say), given to
	// every sandbox.
	Mounts []sandbox.Mount
	// Limits bound every process; a zero field means the default of
	// DefaultLimits.
	Limits sandbox.Limits
	// HomeFor, when set, names the HOME kept for a workspace (so caches
	// last between a run's processes), created when missing; "" from it, or
	// a nil HomeFor, means a private HOME per process. A home inside the
	// workspace is not used (the workspace's bind would cover it).
	HomeFor func(workspace string) string
	// Hide are the server's own directories (the store, the local API's
	// private directory): when one lies inside a workspace, as the store
	// .iterion does under iterion run in the current directory, an empty
	// read-only directory covers it in the sandbox. A workspace that is
	// one of them, or lies inside one, is refused, unless it lies in
	// Workspaces.
	Hide []string
	// Workspaces is the directory of the server's per-run workspaces
	// (inside the store, which Hide names).
	Workspaces string
}

// DefaultLimits are the limits of a process when the operator sets none:
// enough for a build and its tests, not enough to take the machine.
func DefaultLimits() sandbox.Limits {
	return sandbox.Limits{
		Memory:    4 << 30,
		Processes: 512,
		OpenFiles: 4096,
		FileSize:  8 << 30,
	}
}

// envAllowlist is what a sandboxed process gets of the server's
// environment: these names, with the server's values when set. HOME and
// TMPDIR are the sandbox's own.
var envAllowlist = []string{"LANG", "TERM"}

// defaultPath is the PATH inside the bwrap and docker sandboxes: the
// system's directories, which they bind read-only.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Sandboxes runs node processes. It is safe for concurrent use.
type Sandboxes struct {
	opts    Options
	drivers map[string]sandbox.Driver

	mu     sync.Mutex
	images map[string]sandbox.Driver // docker drivers by image
	empty  string                    // an empty directory, for Hide
}

var (
	_ engine.Sandbox            = (*Sandboxes)(nil)
	_ engine.SandboxPreflighter = (*Sandboxes)(nil)
	_ engine.SandboxWarner      = (*Sandboxes)(nil)
	_ engine.SandboxHomer       = (*Sandboxes)(nil)
)

// HomeOf is the HOME kept for the workspace workdir, "" when none is.
func (s *Sandboxes) HomeOf(workdir string) string {
	if s.opts.HomeFor == nil {
		return ""
	}
	dir, err := s.workspace(workdir)
	if err != nil {
		return ""
	}
	if h := s.opts.HomeFor(dir); h != "" && !within(dir, h) {
		return h
	}
	return ""
}

// New returns the sandboxes of a server. It fails only on a driver name it
// does not know; an unavailable driver is reported by each run that needs
// it, so the server still starts and says what to install.
func New(opts Options) (*Sandboxes, error) {
	if opts.Driver == "" {
		opts.Driver = "bwrap"
	}
	def := DefaultLimits()
	l := &opts.Limits
	if l.Memory == 0 {
		l.Memory = def.Memory
	}
	if l.Processes == 0 {
		l.Processes = def.Processes
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = def.OpenFiles
	}
	if l.FileSize == 0 {
		l.FileSize = def.FileSize
	}
	s := &Sandboxes{opts: opts, drivers: map[string]sandbox.Driver{}, images: map[string]sandbox.Driver{}}
	for _, name := range []string{"bwrap", "docker", "host"} {
		d, err := sandbox.New(name, sandbox.Options{DockerImage: opts.DockerImage})
		if err != nil {
			return nil, err
		}
		s.drivers[name] = d
	}
	if _, ok := s.drivers[opts.Driver]; !ok {
		return nil, fmt.Errorf("unknown sandbox %q: use bwrap (the default), docker or host", opts.Driver)
	}
	hide := make([]string, len(opts.Hide))
	for i, h := range opts.Hide {
		hide[i] = resolve(h)
	}
	opts.Hide = hide
	for _, m := range opts.Mounts {
		src := resolve(m.Source) // a link to the store is the store
		for _, h := range hide {
			if within(src, h) || within(h, src) {
				return nil, fmt.Errorf("sandbox.mounts: %s would show sandboxes the server's own directory %s (the store or the local API's): mount something else", m.Source, h)
			}
		}
	}
	if len(opts.Hide) > 0 {
		empty, err := os.MkdirTemp("", "iterion-hidden-")
		if err != nil {
			return nil, fmt.Errorf("creating the directory that hides the store: %w", err)
		}
		if err := os.Chmod(empty, 0o555); err != nil {
			return nil, err
		}
		s.empty = empty
	}
	s.opts = opts
	return s, nil
}

// Close removes what New made.
func (s *Sandboxes) Close() error {
	if s.empty == "" {
		return nil
	}
	return os.Remove(s.empty)
}

// within reports whether path is dir or lies under it.
func within(dir, path string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

// workspace resolves dir, a workspace, to the path the sandbox binds: it
// is absolute and free of symlinks, so that the directories hidden inside
// it are covered where the sandbox sees them. A workspace that is one of
// the server's own directories, or lies inside one outside Workspaces, is
// refused.
func (s *Sandboxes) workspace(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("the workspace %s: %w", dir, err)
	}
	inRuns := s.opts.Workspaces != "" && within(resolve(s.opts.Workspaces), abs) && abs != resolve(s.opts.Workspaces)
	for _, h := range s.opts.Hide {
		if abs == h || within(h, abs) && !inRuns {
			return "", &engine.UnavailableError{Driver: s.opts.Driver, Err: fmt.Errorf(
				"the workspace %s is the server's own directory %s, or lies inside it: run the workflow from another directory", abs, h)}
		}
	}
	return abs, nil
}

// resolve makes path absolute and free of symlinks, as far as it exists.
func resolve(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	return abs
}

// hidden returns the mounts that cover the server's directories inside
// the workspace dir.
func (s *Sandboxes) hidden(dir string) []sandbox.Mount {
	var ms []sandbox.Mount
	for _, h := range s.opts.Hide {
		if within(dir, h) && h != dir {
			ms = append(ms, sandbox.Mount{Source: s.empty, Target: h})
		}
	}
	return ms
}

// Default is the server's driver.
func (s *Sandboxes) Default() sandbox.Driver { return s.drivers[s.opts.Driver] }

// SandboxWarning says, for each run's status, that the server's driver
// is the host, with no isolation; "" otherwise.
func (s *Sandboxes) SandboxWarning() string {
	if s.Default().Isolated() {
		return ""
	}
	return "this server runs workflow processes on the host, without a sandbox (sandbox: host): they can read its files and reach its network"
}

// driverFor returns the driver a node's processes run in.
func (s *Sandboxes) driverFor(w *dsl.Workflow, n *dsl.Node) (sandbox.Driver, error) {
	decl := declFor(w, n)
	name := s.opts.Driver
	if decl != nil {
		switch decl.Mode {
		case dsl.SandboxHost:
			name = "host"
		case dsl.SandboxBwrap:
			name = "bwrap"
		case dsl.SandboxDocker:
			name = "docker"
		}
	}
	if name == "host" && s.opts.Driver != "host" && !s.opts.AllowHost {
		return nil, &engine.UnavailableError{Driver: "host", Err: fmt.Errorf(
			"the workflow asks for sandbox: %s (its processes would run on the host), which this server does not allow: remove it, or let the operator set sandbox.allow_host: true", declName(decl))}
	}
	if decl != nil && decl.Network == dsl.SandboxNetworkOpen && !s.opts.AllowNetwork && !s.opts.OpenNetwork {
		return nil, &engine.UnavailableError{Driver: name, Err: errors.New(
			"the workflow asks for network: open (the server's network, loopback and cloud metadata included), which this server does not allow: remove it, or let the operator set sandbox.allow_network: true")}
	}
	d := s.drivers[name]
	if name == "docker" {
		image := s.opts.DockerImage
		if decl != nil && decl.Image != "" {
			image = decl.Image
		}
		if image != s.opts.DockerImage && !s.opts.AnyDockerImage && !slices.Contains(s.opts.DockerImages, image) {
			return nil, &engine.UnavailableError{Driver: "docker", Err: fmt.Errorf(
				"the workflow names the image %q, which this server does not run: use the server's image (sandbox.docker_image), or let the operator add it to sandbox.docker_images", image)}
		}
		if image == "" {
			return nil, &engine.UnavailableError{Driver: "docker", Err: errors.New("no image: name one in the workflow (sandbox: image: …) or set sandbox.docker_image in the server's config")}
		}
		if image != s.opts.DockerImage {
			d = s.dockerFor(image)
		}
	}
	if err := d.Available(); err != nil {
		if name == s.opts.Driver && name != "host" {
			err = fmt.Errorf("%w; the server's driver is chosen by iterion run --sandbox, ITERION_SANDBOX or sandbox.driver in serve.yml", err)
		}
		return nil, &engine.UnavailableError{Driver: name, Err: err}
	}
	return d, nil
}

// declFor is the sandbox: declaration n runs under; nil when none, or
// when the process belongs to no workflow.
func declFor(w *dsl.Workflow, n *dsl.Node) *dsl.Sandbox {
	if w == nil {
		return nil
	}
	return w.SandboxFor(n)
}

func declName(decl *dsl.Sandbox) string {
	if decl == nil {
		return "host"
	}
	return decl.Mode.String()
}

// dockerFor returns the docker driver of image, made once.
func (s *Sandboxes) dockerFor(image string) sandbox.Driver {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.images[image]; ok {
		return d
	}
	d := sandbox.NewDocker(sandbox.Options{DockerImage: image})
	s.images[image] = d
	return d
}

// PreflightSandbox reports, before a run starts, every node whose sandbox
// cannot run here, naming the fix.
func (s *Sandboxes) PreflightSandbox(w *dsl.Workflow) error {
	var problems []string
	seen := map[string]bool{}
	for _, n := range w.Nodes {
		if !startsProcesses(n) {
			continue
		}
		_, err := s.driverFor(w, n)
		if err == nil || seen[err.Error()] {
			continue
		}
		seen[err.Error()] = true
		problems = append(problems, fmt.Sprintf("node %s: %v", n.ID, err))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// startsProcesses reports whether a node may start processes: tool nodes,
// and agents or judges (their shell tools, CLI backends).
func startsProcesses(n *dsl.Node) bool {
	switch n.Kind {
	case dsl.NodeTool, dsl.NodeAgent, dsl.NodeJudge:
		return true
	}
	return false
}

// Run runs p in its node's sandbox.
func (s *Sandboxes) Run(ctx context.Context, p *engine.Process) (*engine.ProcessResult, error) {
	d, err := s.driverFor(p.Workflow, p.Node)
	if err != nil {
		return nil, err
	}
	dir, err := s.workspace(p.Dir)
	if err != nil {
		return nil, err
	}
	spec := sandbox.Spec{
		Argv:        p.Argv,
		Dir:         dir,
		Mounts:      append(slices.Clip(s.opts.Mounts), s.hidden(dir)...),
		Env:         s.env(p),
		Network:     s.network(p),
		Limits:      s.opts.Limits,
		Stdin:       p.Stdin,
		ReadOnlyDir: p.ReadOnly,
		Stdout:      p.Stdout,
		Stderr:      p.Stderr,
	}
	for _, m := range p.Mounts {
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: m.Source, Target: m.Target, Writable: m.Writable})
	}
	spec.Limits.Output = max(p.MaxStdout, p.MaxStderr)
	if h := s.HomeOf(dir); h != "" {
		if err := os.MkdirAll(h, 0o700); err != nil {
			return nil, fmt.Errorf("creating the sandbox's home %s: %w", h, err)
		}
		spec.Home = h
	}
	if dl, ok := ctx.Deadline(); ok {
		// The node's timeout is the process's wall time, so that the
		// sandbox, which ends it then, says which limit it met first (a fork
		// bomb stuck until its timeout meets the processes limit). ctx
		// still ends it at once when it is cancelled.
		spec.Limits.WallTime = time.Until(dl)
		parent := ctx
		inner, cancel := context.WithCancel(context.WithoutCancel(parent))
		defer cancel()
		stop := context.AfterFunc(parent, func() {
			if !errors.Is(parent.Err(), context.DeadlineExceeded) {
				cancel()
			}
		})
		defer stop()
		ctx = inner
	}
	res, err := sandbox.Run(ctx, d, spec)
	var limit *sandbox.LimitError
	switch {
	case errors.As(err, &limit):
		out := result(res, p)
		out.Limit, out.Detail = limit.Limit, limit.Value
		return out, nil
	case err != nil:
		return nil, err
	}
	return result(res, p), nil
}

// result converts a sandbox result, keeping each stream to its bound.
func result(res *sandbox.Result, p *engine.Process) *engine.ProcessResult {
	out := &engine.ProcessResult{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr, StdoutTruncated: res.StdoutTruncated}
	if p.MaxStdout > 0 && len(out.Stdout) > p.MaxStdout {
		out.Stdout, out.StdoutTruncated = out.Stdout[:p.MaxStdout], true
	}
	if p.MaxStderr > 0 && len(out.Stderr) > p.MaxStderr {
		out.Stderr = out.Stderr[:p.MaxStderr]
	}
	if res.Limit != "" && out.Limit == "" {
		out.Limit = res.Limit
	}
	return out
}

// network is the policy of p: what the process asked for, else its
// node's declaration, else the server's. model-only is no network for the
// sandbox: the process reaches its model through the run channel's socket
// bound in (package backends/runchannel), which is no network at all; a
// process that asks for it still gets the network its node declares or
// the server opens.
func (s *Sandboxes) network(p *engine.Process) sandbox.Network {
	switch p.Network {
	case engine.NetworkOpen:
		return sandbox.NetworkOpen
	case engine.NetworkNone:
		return sandbox.NetworkNone
	}
	if decl := declFor(p.Workflow, p.Node); decl != nil {
		switch decl.Network {
		case dsl.SandboxNetworkOpen:
			return sandbox.NetworkOpen
		case dsl.SandboxNetworkNone, dsl.SandboxNetworkModelOnly:
			return sandbox.NetworkNone
		}
	}
	if s.opts.OpenNetwork {
		return sandbox.NetworkOpen
	}
	return sandbox.NetworkNone
}

// env is the whole environment of p: the allowlist, the node's declared
// variables, then what the engine passes (template values, a backend's
// provider variables). Nothing else of the server's environment.
func (s *Sandboxes) env(p *engine.Process) []string {
	env := []string{"PATH=" + defaultPath}
	for _, k := range envAllowlist {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if decl := declFor(p.Workflow, p.Node); decl != nil {
		for _, k := range slices.Sorted(maps.Keys(decl.Env)) {
			env = append(env, k+"="+decl.Env[k])
		}
	}
	return append(env, p.Env...)
}
