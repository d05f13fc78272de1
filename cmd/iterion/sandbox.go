package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

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
	// DockerImage is the docker driver's image when a workflow names none.
	DockerImage string `yaml:"docker_image"`
	// MaxParallelBranches bounds the branches of a fan-out running at once
	// when the workflow's budget does not; 0 means four per core.
	MaxParallelBranches int `yaml:"max_parallel_branches"`
	// Limits bound every process; 0 means the default.
	Limits sandboxLimits `yaml:"limits"`
	// WorkspaceQuotaMB is the most a run's workspace may hold, in MiB,
	// measured after each node; serve's default is 10240, 0 means none.
	WorkspaceQuotaMB int64 `yaml:"workspace_quota_mb"`
}

// sandboxLimits are the per-process limits of the config file.
type sandboxLimits struct {
	// MemoryMB is the memory of a process tree, in MiB (default 4096).
	MemoryMB int64 `yaml:"memory_mb"`
	// Processes is the number of processes of a tree (default 512).
	Processes int `yaml:"processes"`
	// OpenFiles is the open files of each process (default 4096).
	OpenFiles int `yaml:"open_files"`
	// CPUTime is the CPU time of a tree; 0 means none (the node's timeout
	// bounds its wall time).
	CPUTime time.Duration `yaml:"cpu_time"`
}

// sandboxDrivers are the values of a driver setting.
var sandboxDrivers = map[string]bool{"bwrap": true, "docker": true, "host": true}

// newSandboxes builds the sandboxes of a process that executes runs over
// the store in storeDir: flag (iterion run --sandbox), else
// ITERION_SANDBOX, else the settings, else bwrap. It logs the choice, and
// loudly when it is the host or the driver cannot run here: runs are then
// refused, each with the fix, while the server goes on serving.
func newSandboxes(s sandboxSettings, flag, storeDir string, log *slog.Logger) (*nodesandbox.Sandboxes, error) {
	driver := cmp.Or(flag, os.Getenv("ITERION_SANDBOX"), s.Driver, "bwrap")
	if !sandboxDrivers[driver] {
		return nil, fmt.Errorf("unknown sandbox %q (from --sandbox, ITERION_SANDBOX or sandbox.driver): use bwrap (the default), docker or host", driver)
	}
	homes, err := filepath.Abs(filepath.Join(storeDir, "homes"))
	if err != nil {
		return nil, err
	}
	sb, err := nodesandbox.New(nodesandbox.Options{
		Driver: driver, AllowHost: s.AllowHost, DockerImage: s.DockerImage, HomeRoot: homes,
		Limits: sandbox.Limits{Memory: s.Limits.MemoryMB << 20, Processes: s.Limits.Processes, OpenFiles: s.Limits.OpenFiles, CPUTime: s.Limits.CPUTime},
	})
	if err != nil {
		return nil, err
	}
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
