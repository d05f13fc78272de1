package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/sandbox"
)

// sandboxSettings choose where the processes of runs run: the serve
// config's sandbox: block, ITERION_SANDBOX, and iterion run's --sandbox.
type sandboxSettings struct {
	// Driver is bwrap (the default), docker or host (no isolation).
	Driver string `yaml:"driver"`
	// AllowHost lets workflows ask for sandbox: none (the host). Off by
	// default under serve: a workflow could otherwise opt out of isolation.
	AllowHost bool `yaml:"allow_host"`
	// Network is the network of processes whose workflow declares none:
	// none (the default: not even the server's loopback; an agent CLI
	// still reaches its model through the run's proxy), model-only (the
	// same, by its name for agents) or open (the server's network,
	// loopback included).
	Network string `yaml:"network"`
	// AllowNetwork lets workflows ask for network: open. Off by default
	// under serve: open is the server's network, loopback included.
	AllowNetwork bool `yaml:"allow_network"`
	// DockerImage is the docker driver's image when a workflow names none.
	DockerImage string `yaml:"docker_image"`
	// DockerImages are the other images workflows may name.
	DockerImages []string `yaml:"docker_images"`
	// MaxParallelBranches bounds the branches of a fan-out running at once
	// when the workflow's budget does not; 0 means four per core.
	MaxParallelBranches int `yaml:"max_parallel_branches"`
	// Limits bound every process; 0 means the default.
	Limits sandboxLimits `yaml:"limits"`
	// Mounts are extra host paths every sandbox sees, each
	// "SOURCE[:TARGET][:ro|rw]" (read-only unless rw), like a module cache:
	// "/srv/cache/gomod:/home/iterion/go/pkg/mod:rw".
	Mounts []string `yaml:"mounts"`
	// WorkspaceQuotaMB is the most a run's workspace may hold, in MiB,
	// measured after each node; serve's default is defaultWorkspaceQuotaMB, 0
	// means none.
	WorkspaceQuotaMB int64 `yaml:"workspace_quota_mb"`
}

// sandboxLimits are the per-process limits of the config file.
type sandboxLimits struct {
	// MemoryMB is the memory of a process tree, in MiB. The defaults of
	// these are nodesandbox.DefaultLimits.
	MemoryMB int64 `yaml:"memory_mb"`
	// Processes is the number of processes of a tree.
	Processes int `yaml:"processes"`
	// OpenFiles is the open files of each process.
	OpenFiles int `yaml:"open_files"`
	// CPUTime is the CPU time of a tree; 0 means none (the node's timeout
	// bounds its wall time).
	CPUTime time.Duration `yaml:"cpu_time"`
}

// sandboxDrivers are the values of a driver setting.
var sandboxDrivers = map[string]bool{"bwrap": true, "docker": true, "host": true}

// newSandboxes builds the sandboxes of a process that executes runs over
// the store in storeDir (cli: a command a person runs, not the server): flag (iterion run --sandbox), else
// ITERION_SANDBOX, else the settings, else bwrap. It logs the choice, and
// loudly when it is the host or the driver cannot run here: runs are then
// refused, each with the fix, while the server goes on serving. The App's
// Close releases the sandboxes.
func (a *App) newSandboxes(s sandboxSettings, flag, storeDir string, cli bool, log *slog.Logger) (*nodesandbox.Sandboxes, error) {
	if cli {
		// A person running their own workflow (iterion run): it may ask for
		// the host, the network and any image.
		s.AllowHost, s.AllowNetwork = true, true
	}
	driver := cmp.Or(flag, a.getenv("ITERION_SANDBOX"), s.Driver, defaultSandboxDriver)
	if !sandboxDrivers[driver] {
		return nil, fmt.Errorf("unknown sandbox %q (from --sandbox, ITERION_SANDBOX or sandbox.driver): use bwrap (the default), docker or host", driver)
	}
	workspaces, err := filepath.Abs(filepath.Join(storeDir, "workspaces"))
	if err != nil {
		return nil, err
	}
	// The store and the local API's private directory are never seen from
	// a sandbox, even when the workspace holds them (iterion run in the
	// directory of its .iterion store).
	hide := []string{storeDir}
	if ep, err := api.LocalEndpoint(storeDir, a.localOptions()); err == nil {
		hide = append(hide, ep.Dir)
	}
	mounts, err := parseMounts(s.Mounts)
	if err != nil {
		return nil, err
	}
	sb, err := nodesandbox.New(nodesandbox.Options{
		Mounts: mounts, OpenNetwork: s.Network == "open", AllowNetwork: s.AllowNetwork, DockerImages: s.DockerImages, AnyDockerImage: cli, Workspaces: workspaces,
		Driver: driver, AllowHost: s.AllowHost, DockerImage: s.DockerImage, Hide: hide,
		HomeFor: func(ws string) string { return homeOf(workspaces, ws) },
		Limits:  sandbox.Limits{Memory: s.Limits.MemoryMB << 20, Processes: s.Limits.Processes, OpenFiles: s.Limits.OpenFiles, CPUTime: s.Limits.CPUTime},
	})
	if err != nil {
		return nil, err
	}
	a.hold(func() { _ = sb.Close() })
	d := sb.Default()
	switch err := d.Available(); {
	case err != nil:
		log.Error("sandbox not available: runs are refused until it is", "sandbox", driver, "fix", err.Error())
	case !d.Isolated():
		log.Warn("sandbox host: processes of runs are NOT isolated; they see the server's files, processes and network", "sandbox", driver)
	default:
		log.Info("sandbox", "driver", driver, "limits", d.Mechanism())
	}
	return sb, nil
}

// homeOf is the HOME kept for a workspace of the store's workspaces/:
// beside it, <workspace>.home, removed with it. Other workspaces (iterion
// run's current directory) get a private HOME per process.
func homeOf(workspaces, ws string) string {
	if filepath.Dir(filepath.Clean(ws)) != workspaces {
		return ""
	}
	return filepath.Clean(ws) + ".home"
}

// parseMount reads one sandbox.mounts item, "SOURCE[:TARGET][:ro|rw]",
// and says what is wrong with it otherwise.
func parseMount(item string) (sandbox.Mount, error) {
	parts := strings.Split(item, ":")
	m := sandbox.Mount{}
	switch last := parts[len(parts)-1]; {
	case len(parts) > 1 && last == "rw":
		m.Writable, parts = true, parts[:len(parts)-1]
	case len(parts) > 1 && last == "ro":
		parts = parts[:len(parts)-1]
	}
	switch len(parts) {
	case 1:
		m.Source = parts[0]
	case 2:
		m.Source, m.Target = parts[0], parts[1]
	default:
		return m, fmt.Errorf("%q: write SOURCE, SOURCE:TARGET, or either followed by :ro or :rw", item)
	}
	for _, p := range []string{m.Source, m.Target} {
		if p != "" && !filepath.IsAbs(p) {
			return m, fmt.Errorf("%q: %s is not an absolute path", item, p)
		}
	}
	if m.Source == "" {
		return m, fmt.Errorf("%q: the source path is empty", item)
	}
	return m, nil
}

// parseMounts reads sandbox.mounts; nodesandbox refuses any that would
// show sandboxes the server's own directories.
func parseMounts(items []string) ([]sandbox.Mount, error) {
	var out []sandbox.Mount
	for _, item := range items {
		m, err := parseMount(item)
		if err != nil {
			return nil, fmt.Errorf("sandbox.mounts: %w", err)
		}
		out = append(out, m)
	}
	return out, nil
}
