//go:build linux

package runchannel_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iterion-bot/iterion/backends/runchannel"
)

// sandboxExec starts the test binary as `iterion sandbox-exec args…`.
func sandboxExec(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	return exec.Command(testBinary(t), append([]string{runchannel.ExecCommand}, args...)...)
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatal(err)
	return -1
}

// The command's exit status is the wrapper's, 128+n for a signal; the
// wrapper's own failures are 125, 126 and 127 with the reason.
func TestExecExitStatus(t *testing.T) {
	cases := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"exit 0", []string{"--", "true"}, 0, ""},
		{"exit 7", []string{"--", "sh", "-c", "exit 7"}, 7, ""},
		{"killed by TERM", []string{"--", "sh", "-c", "kill -TERM $$"}, 128 + 15, ""},
		{"not found", []string{"--", "no-such-cli-4242"}, runchannel.ExitNotFound, "no-such-cli-4242: exec: \"no-such-cli-4242\": executable file not found"},
		{"no command", []string{"--forward", "127.0.0.1:1=/s"}, runchannel.ExitFailed, "no -- before the command"},
		{"not a loopback listener", []string{"--forward", "0.0.0.0:4180=/s", "--", "true"}, runchannel.ExitFailed, "must be a loopback address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := sandboxExec(t, tc.args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			code := exitCode(t, cmd.Run())
			if code != tc.wantCode || !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tc.wantCode, tc.wantStderr)
			}
		})
	}
}

// A listener that cannot be opened fails before the command starts.
func TestExecListenerInUse(t *testing.T) {
	ln := listenTCP(t)
	cmd := sandboxExec(t, "--forward", ln.Addr().String()+"=/tmp/s", "--", "sh", "-c", "echo started")
	out, err := cmd.CombinedOutput()
	if code := exitCode(t, err); code != runchannel.ExitFailed || strings.Contains(string(out), "started") || !strings.Contains(string(out), "listening on "+ln.Addr().String()+" for the run channel") {
		t.Errorf("exit %d, output %q; want 125 naming the listener, and no command run", code, out)
	}
}

// lines returns a reader of cmd's stdout lines, started.
func startLines(t *testing.T, cmd *exec.Cmd) (*bufio.Scanner, io.WriteCloser) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return bufio.NewScanner(stdout), stdin
}

func nextLine(t *testing.T, sc *bufio.Scanner) string {
	t.Helper()
	if !sc.Scan() {
		t.Fatalf("the command's output ended: %v", sc.Err())
	}
	return sc.Text()
}

// awaitExit waits, on a pidfd, for process pid to end. The bound is a
// failure, not a wait: the process is expected gone at once.
func awaitExit(t *testing.T, pidfd int) {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int((30 * time.Second).Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatal("the process is still alive")
		}
		return
	}
}

func pidfdOf(t *testing.T, line string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("not a pid: %q", line)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// A signal to the wrapper reaches the command, which handles it; its exit
// status comes back.
func TestExecPassesSignals(t *testing.T) {
	cmd := sandboxExec(t, "--", "bash", "-c", `trap 'echo got TERM; kill $!; exit 42' TERM; sleep 600 & echo ready; wait`)
	sc, _ := startLines(t, cmd)
	if line := nextLine(t, sc); line != "ready" {
		t.Fatalf("first line %q", line)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if line := nextLine(t, sc); line != "got TERM" {
		t.Errorf("after TERM: %q", line)
	}
	if code := exitCode(t, cmd.Wait()); code != 42 {
		t.Errorf("exit %d, want the command's 42", code)
	}
}

// What the command leaves running in its process group ends with it.
func TestExecEndsTheProcessGroup(t *testing.T) {
	cmd := sandboxExec(t, "--", "bash", "-c", `sleep 600 & echo $!; read x; exit 3`)
	sc, stdin := startLines(t, cmd)
	left := pidfdOf(t, nextLine(t, sc))
	stdin.Close() // the command exits
	if code := exitCode(t, cmd.Wait()); code != 3 {
		t.Errorf("exit %d, want 3", code)
	}
	awaitExit(t, left)
}

// Killing the wrapper kills the command.
func TestExecCommandDiesWithTheWrapper(t *testing.T) {
	cmd := sandboxExec(t, "--", "bash", "-c", `echo $$; read x`)
	sc, _ := startLines(t, cmd)
	child := pidfdOf(t, nextLine(t, sc))
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	awaitExit(t, child)
}

func TestParseExecArgs(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want runchannel.ExecArgs
		err  string
	}{
		{name: "forwards and a command", args: []string{"--forward", "127.0.0.1:4180=/tmp/a/s", "--forward=[::1]:9=/b", "--", "pi", "--mode", "rpc", "--"},
			want: runchannel.ExecArgs{Forwards: []runchannel.Forward{{Listen: "127.0.0.1:4180", Socket: "/tmp/a/s"}, {Listen: "[::1]:9", Socket: "/b"}}, Argv: []string{"pi", "--mode", "rpc", "--"}}},
		{name: "no forward", args: []string{"--", "claude"}, want: runchannel.ExecArgs{Argv: []string{"claude"}}},
		{name: "nothing", args: nil, err: "no -- before the command"},
		{name: "empty command", args: []string{"--", ""}, err: "no command after --"},
		{name: "forward without value", args: []string{"--forward"}, err: "--forward needs LISTEN=SOCKET"},
		{name: "no =", args: []string{"--forward", "127.0.0.1:1", "--", "x"}, err: "write LISTEN=SOCKET"},
		{name: "a name, not an address", args: []string{"--forward", "localhost:1=/s", "--", "x"}, err: "must be a loopback address"},
		{name: "port 0", args: []string{"--forward", "127.0.0.1:0=/s", "--", "x"}, err: "not a number from 1 to 65535"},
		{name: "port +1", args: []string{"--forward", "127.0.0.1:+1=/s", "--", "x"}, err: "not a number from 1 to 65535"},
		{name: "relative socket", args: []string{"--forward", "127.0.0.1:1=s", "--", "x"}, err: "not an absolute path"},
		{name: "long socket", args: []string{"--forward", "127.0.0.1:1=/" + strings.Repeat("s", 200), "--", "x"}, err: "over 107 bytes"},
		{name: "unknown option", args: []string{"-v", "--", "x"}, err: `unexpected argument "-v"`},
		{name: "NUL in an argument", args: []string{"--", "x", "a\x00b"}, err: "NUL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runchannel.ParseExecArgs(tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Forwards) != len(tc.want.Forwards) || strings.Join(got.Argv, " ") != strings.Join(tc.want.Argv, " ") {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			for i := range got.Forwards {
				if got.Forwards[i] != tc.want.Forwards[i] {
					t.Errorf("forward %d = %+v, want %+v", i, got.Forwards[i], tc.want.Forwards[i])
				}
			}
		})
	}
}

// listenTCP holds a port of the host's loopback for the test.
func listenTCP(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}
