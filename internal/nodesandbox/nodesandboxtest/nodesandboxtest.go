// Package nodesandboxtest helps the tests of what runs processes in the
// sandbox: the default sandbox, which tests use for real, and the escape
// attempts a hostile pull request makes from inside a run, for every path
// that runs its commands (tool nodes, an agent's shell tool): each must be
// refused or contained, with the reason in the run's failure. It is
// imported only by tests.
package nodesandboxtest

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/sandbox"
)

// Secret is a value of the server's environment during Run: no sandboxed
// process may see it.
const Secret = "sk-escapetest-4f1d2a9c"

// Runner runs command in the sandbox, with workspace as its workspace and
// a timeout, through the path under test, and returns what the command
// printed and, when it failed, the failure (code and message) as the run
// or the agent sees it.
type Runner func(t *testing.T, workspace, command string, timeout time.Duration) (output, failure string)

// New returns the default sandboxes, bwrap, with opts; the test fails,
// naming the command that installs it, when bubblewrap is missing.
func New(tb testing.TB, opts nodesandbox.Options) *nodesandbox.Sandboxes {
	tb.Helper()
	sb, err := nodesandbox.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sb.Close() })
	if err := sb.Default().Available(); err != nil {
		tb.Fatalf("the tests run processes under bubblewrap: %v", err)
	}
	return sb
}

// Sandboxes returns the sandboxes of the escape tests: bwrap, with limits
// small enough that a fork bomb and a large allocation meet them fast.
func Sandboxes(tb testing.TB) *nodesandbox.Sandboxes {
	tb.Helper()
	return New(tb, nodesandbox.Options{Limits: sandbox.Limits{Processes: 64, Memory: 256 << 20}})
}

// RunEscapes tries every escape through run. The server's secrets live where a
// server keeps them, outside the workspace: a store with its owner.json,
// the API's socket and token, the App's key, another run's workspace, and
// a secret in the environment.
func RunEscapes(t *testing.T, run Runner) {
	t.Setenv("ITERION_ESCAPETEST_SECRET", Secret)
	outside := t.TempDir()
	store := filepath.Join(outside, "store")
	other := filepath.Join(outside, "workspaces", "other-run")
	for _, d := range []string{store, other} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(store, "MANIFEST"):   Secret,
		filepath.Join(store, "owner.json"): `{"pid": 1, "token": "` + Secret + `"}`,
		filepath.Join(outside, "app.pem"):  "-----BEGIN RSA PRIVATE KEY-----\n" + Secret + "\n",
		filepath.Join(outside, "token"):    Secret,
		filepath.Join(other, "secret"):     Secret,
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sock, err := net.Listen("unix", filepath.Join(outside, "api.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	port := strconv.Itoa(tcp.Addr().(*net.TCPAddr).Port)
	// Files a write outside would leave, named for this test alone (an
	// escape that worked must not overwrite anything of the machine).
	planted := "iterion-escapetest-" + strconv.Itoa(os.Getpid())
	writeTargets := []string{"/", "/usr", "/etc", "/usr/bin", outside}
	self, err := os.Executable() // the server's own process
	if err != nil {
		t.Fatal(err)
	}

	// Each command prints ESCAPED when the escape worked.
	cases := []struct {
		name, command string
		timeout       time.Duration
		// wantFailure, when set, must appear in the failure; else the
		// command must not fail for a limit.
		wantFailure string
	}{
		{name: "read the store", command: "cat " + store + "/MANIFEST && echo ESCAPED; ls " + store + " && echo ESCAPED; true"},
		{name: "read owner.json", command: "cat " + store + "/owner.json && echo ESCAPED; true"},
		{name: "reach the API socket", command: "test -S " + outside + "/api.sock && echo ESCAPED; (exec 3<>/dev/tcp/127.0.0.1/" + port + ") 2>/dev/null && echo ESCAPED; true"},
		{name: "read the App key and the API token", command: "cat " + outside + "/app.pem " + outside + "/token && echo ESCAPED; true"},
		{name: "read the server's environment", command: "cat /proc/1/environ /proc/$PPID/environ /proc/self/environ 2>/dev/null | tr '\\0' '\\n' | grep -q " + Secret + " && echo ESCAPED; true"},
		{name: "see the server's processes", command: "for p in /proc/[0-9]*; do [ \"$(readlink $p/exe 2>/dev/null)\" = " + self + " ] && echo ESCAPED $p; done; true"},
		{name: "read another run's workspace", command: "cat " + other + "/secret && echo ESCAPED; ls " + filepath.Dir(other) + " && echo ESCAPED; true"},
		{name: "write outside the workspace", command: "for d in " + strings.Join(writeTargets, " ") + "; do (echo x > $d/" + planted + ") 2>/dev/null && echo ESCAPED $d; done; true"},
		{name: "print the environment", command: "env | grep -q " + Secret + " && echo ESCAPED; env | grep -E '^(ITERION|ANTHROPIC|OPENAI|GITHUB)' && echo ESCAPED; true"},
		{name: "mount, unshare, ptrace", command: "mount -t tmpfs none \"$PWD\" 2>/dev/null && echo ESCAPED; unshare -r true 2>/dev/null && echo ESCAPED; grep -q '^Seccomp:[[:space:]]*2' /proc/self/status || echo ESCAPED; grep -q '^CapEff:[[:space:]]*0*$' /proc/self/status || echo ESCAPED; test \"$(id -u)\" != 0 || echo ESCAPED"},
		{name: "leave a process behind", command: "sleep 600.4242 & echo started"},
		// Forks for ever, each child too: stopped at its timeout, having
		// met the processes limit.
		{name: "fork bomb", command: "b() { while :; do b & done; }; b", timeout: 3 * time.Second, wantFailure: "processes"},
		{name: "allocate 2 GiB", command: "x=$(head -c 2000000000 /dev/zero | tr '\\0' a); echo ${#x}", timeout: time.Minute, wantFailure: "memory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 30 * time.Second
			}
			out, failure := run(t, t.TempDir(), tc.command, timeout)
			if strings.Contains(out, "ESCAPED") || strings.Contains(out, Secret) || strings.Contains(failure, Secret) {
				t.Errorf("escaped: output %q, failure %q", out, failure)
			}
			switch {
			case tc.wantFailure != "" && !strings.Contains(failure, tc.wantFailure):
				t.Errorf("failure = %q, want it to name the %s limit", failure, tc.wantFailure)
			case tc.wantFailure == "" && strings.Contains(failure, "limit"):
				t.Errorf("unexpected limit: %q", failure)
			}
			for _, d := range writeTargets {
				if p := filepath.Join(d, planted); fileExists(p) {
					_ = os.Remove(p)
					t.Errorf("a file was written outside the workspace: %s", p)
				}
			}
			if pids := processesWith("600.4242"); len(pids) > 0 {
				t.Errorf("processes outlived the command: %v", pids)
			}
		})
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// processesWith lists the host's processes whose command line contains s.
func processesWith(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}
