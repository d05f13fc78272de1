//go:build linux

package sandbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/sandbox"
)

// limitDrivers returns the drivers the limit tests run on: bwrap and host,
// with the cgroups found here, and both with rlimits only.
func limitDrivers(tb testing.TB) map[string]sandbox.Driver {
	tb.Helper()
	return map[string]sandbox.Driver{
		"bwrap":         newBwrap(tb, sandbox.Options{}),
		"host":          newHost(tb, sandbox.Options{}),
		"bwrap-rlimits": newBwrap(tb, sandbox.Options{NoCgroups: true}),
		"host-rlimits":  newHost(tb, sandbox.Options{NoCgroups: true}),
	}
}

// assertLimit checks that a run ended on limit, in the Result and as a
// *LimitError.
func assertLimit(tb testing.TB, res *sandbox.Result, err error, limit string) {
	tb.Helper()
	var le *sandbox.LimitError
	if !errors.As(err, &le) || le.Limit != limit || res.Limit != limit {
		tb.Errorf("Limit = %q, error %v; want %s (exit %d, stderr %.300q)", res.Limit, err, limit, res.ExitCode, res.Stderr)
	}
}

func TestForkBombIsContained(t *testing.T) {
	for name, d := range limitDrivers(t) {
		if strings.HasSuffix(name, "-rlimits") && os.Geteuid() == 0 {
			continue // RLIMIT_NPROC does not bind root: nothing would stop the bomb
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(d.Mechanism(), "pids") && !strings.Contains(d.Mechanism(), "nproc") {
				t.Fatalf("the processes limit is not enforced here (%s): refusing to run a fork bomb", d.Mechanism())
			}
			marker := newMarker()
			// The main shell sleeps so that the bomb has time to go off; the
			// wall time ends it.
			s := bash(newWorkspace(t), ":(){ :|:& };:; sleep 30 # "+marker)
			s.Limits = sandbox.Limits{Processes: 64, WallTime: 2 * time.Second}
			res, err := mustRun(t, d, s)
			assertLimit(t, res, err, sandbox.LimitProcesses)
			assertNoneLeft(t, marker)
		})
	}
}

func TestMemoryLimit(t *testing.T) {
	for name, d := range limitDrivers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// tail keeps the last line, and 2 GiB of zeros is one line.
			s := bash(newWorkspace(t), "head -c 2G /dev/zero | tail -n 1")
			s.Limits = sandbox.Limits{Memory: 128 << 20, WallTime: 30 * time.Second}
			res, err := mustRun(t, d, s)
			if res.ExitCode == 0 {
				t.Fatalf("the 2 GiB allocation succeeded under a 128 MiB limit")
			}
			if strings.Contains(d.Mechanism(), "memory") {
				assertLimit(t, res, err, sandbox.LimitMemory)
				return
			}
			// RLIMIT_AS: the allocation fails inside and is not reported.
			if res.Limit != "" || err != nil {
				t.Errorf("Limit = %q, error %v; want none (a failed allocation is the process's own error)", res.Limit, err)
			}
		})
	}
}

func TestCPUTimeLimit(t *testing.T) {
	for name, d := range limitDrivers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := bash(newWorkspace(t), "while :; do :; done")
			s.Limits = sandbox.Limits{CPUTime: 500 * time.Millisecond, WallTime: 30 * time.Second}
			res, err := mustRun(t, d, s)
			assertLimit(t, res, err, sandbox.LimitCPUTime)
			// Without a cgroup, bwrap's account of the tree is unknown (0).
			if name != "bwrap-rlimits" && res.CPUTime < 400*time.Millisecond {
				t.Errorf("CPUTime = %v, want about the 500ms budget or more", res.CPUTime)
			}
			if strings.HasPrefix(name, "host-") && res.Signal != syscall.SIGXCPU {
				t.Errorf("Signal = %v, want SIGXCPU from RLIMIT_CPU", res.Signal)
			}
		})
	}
}

func TestFileSizeLimit(t *testing.T) {
	for name, d := range limitDrivers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ws := newWorkspace(t)
			// 64 KiB is less than some of the files bwrap copies into the
			// sandbox: the limit must bind the command, not bwrap.
			s := sandbox.Spec{Argv: []string{"dd", "if=/dev/zero", "of=big", "bs=1M", "count=3"}, Dir: ws, Env: baseEnv}
			s.Limits = sandbox.Limits{FileSize: 64 << 10}
			res, err := mustRun(t, d, s)
			assertLimit(t, res, err, sandbox.LimitFileSize)
			if fi, err := os.Stat(filepath.Join(ws, "big")); err != nil || fi.Size() != 64<<10 {
				t.Errorf("the file is %v (%v), want 64 KiB", fi, err)
			}
		})
	}
}

func TestOpenFilesLimit(t *testing.T) {
	for name, d := range limitDrivers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// 10 is fewer descriptors than bwrap holds while it sets up: the
			// limit must bind the command, not bwrap.
			s := bash(newWorkspace(t), "ulimit -n; ulimit -Hn; for i in $(seq 3 40); do eval \"exec $i</dev/null\" || exit 7; done")
			s.Limits = sandbox.Limits{OpenFiles: 10}
			res, err := mustRun(t, d, s)
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Stdout) != "10\n10\n" || res.ExitCode == 0 {
				t.Errorf("ulimit -n = %q, exit %d (%s); want 10 10 and a refused descriptor", res.Stdout, res.ExitCode, res.Stderr)
			}
		})
	}
}

// A breach counts only when the process failed: one that saw a fork fail
// and still exited 0 did its job. perl forks until the kernel refuses,
// kills its children and exits with the given status.
func TestBreachCountsOnlyOnFailure(t *testing.T) {
	script := `while (defined($p = fork)) { if (!$p) { sleep 30; exit 0 } push @k, $p } kill "KILL", @k; exit $ARGV[0]`
	tests := []struct {
		exit string
		want string
	}{
		{"0", ""},
		{"1", sandbox.LimitProcesses},
	}
	for _, name := range []string{"bwrap", "host"} {
		d := limitDrivers(t)[name]
		for _, tc := range tests {
			t.Run(name+"/exit "+tc.exit, func(t *testing.T) {
				t.Parallel()
				s := sandbox.Spec{Argv: []string{"perl", "-e", script, tc.exit}, Dir: newWorkspace(t), Env: baseEnv}
				s.Limits = sandbox.Limits{Processes: 8, WallTime: 20 * time.Second}
				res, err := mustRun(t, d, s)
				if res.ExitCode != 0 && res.ExitCode != 1 {
					t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
				}
				if res.Limit != tc.want {
					t.Errorf("Limit = %q (error %v), want %q", res.Limit, err, tc.want)
				}
			})
		}
	}
}
