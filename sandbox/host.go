//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// Host runs processes directly on the host, as the server's user: the
// explicit opt-out of isolation. It keeps what it can of the contract: the
// environment is exactly Spec.Env, the tree is killed as a whole (by its
// cgroup where one is writable, else by its process group), and the limits
// are enforced by cgroups or rlimits. It cannot hide anything of the host,
// make a mount read-only or stop network access, and when the server is
// SIGKILLed only the direct child is sure to die (Pdeathsig); its
// descendants live on until the next server's driver sweeps the dead
// server's cgroups (without cgroups, until they end).
type Host struct {
	opts Options
	cg   *cgroups
}

var _ Driver = (*Host)(nil)

// NewHost returns the host driver. It finds the cgroups it can use unless
// opts.NoCgroups is set.
func NewHost(opts Options) *Host {
	h := &Host{opts: opts}
	if !opts.NoCgroups {
		h.cg = hostCgroups(opts.CgroupParent)
	}
	return h
}

// Name returns "host".
func (h *Host) Name() string { return "host" }

// Available returns nil: the host is always there.
func (h *Host) Available() error { return nil }

// Isolated returns false.
func (h *Host) Isolated() bool { return false }

// Mechanism says how limits and the tree kill work, and that nothing is
// isolated.
func (h *Host) Mechanism() string {
	note := ", counting all of the server user's processes"
	if os.Geteuid() == 0 {
		note = ": not enforced, the server runs as root"
	}
	kill := "tree killed by cgroup"
	if h.cg == nil {
		kill = "tree killed by process group"
	}
	return joinMechanism(h.cg.describe(), describeRlimits(h.cg, note), kill, "no isolation: files, network and processes of the host are reachable")
}

// Start starts s on the host.
func (h *Host) Start(ctx context.Context, s Spec) (*Process, error) {
	if err := checkSpec(&s); err != nil {
		return nil, err
	}
	if s.ReadOnlyDir {
		return nil, fmt.Errorf("sandbox: the host driver cannot make the workspace %s read-only; run read-only agents under bwrap or docker", s.Dir)
	}
	for _, m := range s.Mounts {
		if m.Target != "" && filepath.Clean(m.Target) != filepath.Clean(m.Source) {
			return nil, fmt.Errorf("sandbox: the host driver cannot show %s at %s", m.Source, m.Target)
		}
	}
	env := s.Env
	var cleanup func()
	_, hasHome := envValue(env, "HOME")
	_, hasTmp := envValue(env, "TMPDIR")
	home := s.Home
	if !hasTmp || (!hasHome && home == "") {
		dir, err := os.MkdirTemp("", "iterion-host-")
		if err != nil {
			return nil, fmt.Errorf("sandbox: making a private home: %w", err)
		}
		cleanup = func() { os.RemoveAll(dir) }
		for _, sub := range []string{"home", "tmp"} {
			if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
				cleanup()
				return nil, fmt.Errorf("sandbox: making a private home: %w", err)
			}
		}
		if home == "" {
			home = filepath.Join(dir, "home")
		}
		env = mergeEnv(env, home, filepath.Join(dir, "tmp"), s.Dir)
	} else {
		env = mergeEnv(env, home, "", s.Dir)
	}
	path, _ := envValue(env, "PATH")
	if path == "" {
		path = defaultPath
	}
	bin, err := lookPath(s.Argv[0], path, s.Dir)
	if err != nil {
		if cleanup != nil {
			cleanup()
		}
		return nil, err
	}
	lim := s.Limits
	l := &launch{
		path:      bin,
		argv:      s.Argv,
		env:       env,
		dir:       s.Dir,
		needs:     needsFor(lim, true),
		killGroup: true,
		waitsTree: true,
		cleanup:   cleanup,
	}
	if lim.Processes > 0 {
		l.nproc = func() int {
			if uid := os.Getuid(); uid != 0 {
				return lim.Processes + userTasks(uid)
			}
			return lim.Processes
		}
	}
	return start(ctx, &s, l, h.cg)
}
