//go:build linux

package sandbox_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/sandbox"
)

// newDocker returns the docker driver with the image named by
// ITERION_TEST_DOCKER_IMAGE (debian:bookworm-slim by default), skipping
// the test where no Docker engine answers: the only skip in the project.
func newDocker(tb testing.TB) *sandbox.Docker {
	tb.Helper()
	image := os.Getenv("ITERION_TEST_DOCKER_IMAGE")
	if image == "" {
		image = "debian:bookworm-slim"
	}
	d := sandbox.NewDocker(sandbox.Options{DockerImage: image})
	if err := d.Available(); err != nil {
		tb.Logf("docker: %v", err)
		tb.Skip("no Docker engine answers here: docker driver tests did not run")
	}
	return d
}

func TestDocker(t *testing.T) {
	d := newDocker(t)
	ws := newWorkspace(t)
	// The container's uid must be able to write the workspace.
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ITERION_TEST_SECRET", "s3cr3t-value-of-the-server")
	t.Run("contract", func(t *testing.T) {
		res, err := mustRun(t, d, bash(ws, "id -u; pwd; env | sort; echo x > made; exit 3"))
		if err != nil {
			t.Fatal(err)
		}
		out := string(res.Stdout)
		if res.ExitCode != 3 || !strings.HasPrefix(out, "1000\n"+ws+"\n") || strings.Contains(out, "s3cr3t") {
			t.Errorf("exit %d stdout %q", res.ExitCode, out)
		}
	})
	t.Run("no network", func(t *testing.T) {
		res, err := mustRun(t, d, bash(ws, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"))
		if err != nil || string(res.Stdout) != "lo\n" {
			t.Errorf("interfaces %q, %v; want only lo", res.Stdout, err)
		}
	})
	t.Run("read-only root", func(t *testing.T) {
		res, err := mustRun(t, d, bash(ws, "touch /planted || touch /etc/planted"))
		if err != nil || res.ExitCode == 0 {
			t.Errorf("wrote outside the workspace: exit %d, %v", res.ExitCode, err)
		}
	})
	t.Run("tree dies with the run", func(t *testing.T) {
		marker := newMarker()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		started := newSignalWriter("started")
		s := bash(ws, "sleep "+marker+" & echo started; wait")
		s.Stdout = started
		p, err := d.Start(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		waitSeen(t, started, time.Minute)
		cancel()
		p.Wait()
		assertNoneLeft(t, marker)
	})
	t.Run("memory limit", func(t *testing.T) {
		s := bash(ws, "head -c 2G /dev/zero | tail -n 1")
		s.Limits = sandbox.Limits{Memory: 128 << 20, WallTime: time.Minute}
		res, err := mustRun(t, d, s)
		assertLimit(t, res, err, sandbox.LimitMemory)
	})
}
