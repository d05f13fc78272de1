//go:build linux

package sandbox

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The arguments of docker run carry the whole policy, so they are checked
// here where no engine is needed; docker_test.go runs them where one is.
func TestDockerRunArgs(t *testing.T) {
	d := NewDocker(Options{DockerImage: "registry.example/iterion-tools:1"})
	s := Spec{
		Argv:    []string{"make", "test"},
		Dir:     "/srv/ws/r-1",
		Mounts:  []Mount{{Source: "/opt/tools,v2", Target: "/opt/tools"}, {Source: "/srv/cache", Writable: true}},
		Env:     []string{"PATH=/usr/bin:/bin", "API_KEY=k", "DOCKER_HOST=tcp://inside:2375"},
		Network: NetworkNone,
		Limits:  Limits{Processes: 64, Memory: 256 << 20, CPUTime: 1500 * time.Millisecond, OpenFiles: 100, FileSize: 1 << 20},
	}
	env := mergeEnv(s.Env, sandboxHome, "/tmp", s.Dir)
	got, err := d.runArgs(&s, "iterion-abc", sandboxHome, env)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"run", "-i", "--name", "iterion-abc", "--label", "iterion.sandbox=1", "--init",
		"--pull", "missing",
		"--network", "none", "--hostname", "iterion",
		"--user", "1000:1000", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--read-only",
		"--tmpfs", "/tmp:rw,exec,mode=1777,size=268435456",
		"--tmpfs", "/home/iterion:rw,exec,mode=1777,size=268435456",
		"--mount", "type=bind,source=/srv/ws/r-1,target=/srv/ws/r-1",
		"--mount", `type=bind,"source=/opt/tools,v2",target=/opt/tools,readonly`,
		"--mount", "type=bind,source=/srv/cache,target=/srv/cache",
		"--workdir", "/srv/ws/r-1",
		"--pids-limit", "65",
		"--memory", "268435456", "--memory-swap", "268435456",
		"--ulimit", "cpu=2:3",
		"--ulimit", "nofile=100:100",
		"--ulimit", "fsize=1048576:1048576",
		// Values travel in the CLI's environment, not on its command line,
		// except for the CLI's own variables.
		"--env", "PATH", "--env", "API_KEY", "--env", "DOCKER_HOST=tcp://inside:2375",
		"--env", "HOME", "--env", "TMPDIR", "--env", "PWD",
		"registry.example/iterion-tools:1", "make", "test",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runArgs (-want +got):\n%s", diff)
	}

	s.Network = NetworkOpen
	got, _ = d.runArgs(&s, "iterion-abc", sandboxHome, env)
	if i := slices.Index(got, "--network"); i < 0 || got[i+1] != "host" {
		t.Errorf("NetworkOpen: %v, want --network host", got)
	}

	cli := d.cliEnv(env)
	if slices.Contains(cli, "DOCKER_HOST=tcp://inside:2375") {
		t.Errorf("the sandbox's DOCKER_HOST reached the docker CLI's environment: %v", cli)
	}
	if !slices.Contains(cli, "API_KEY=k") {
		t.Errorf("the CLI's environment lacks the variable it forwards by name: %v", cli)
	}
}

func TestDockerNeedsAnImage(t *testing.T) {
	err := NewDocker(Options{}).Available()
	if err == nil || !strings.Contains(err.Error(), "sandbox.docker_image") {
		t.Errorf("Available() = %v, want an error naming the image setting", err)
	}
}
