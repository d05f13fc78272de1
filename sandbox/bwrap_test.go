//go:build linux

package sandbox_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/sandbox"
)

// hostFixture is what a server keeps next to the workspaces: a store, keys,
// its unix socket, its owner file, another run's workspace. A sandboxed
// process must see none of it.
type hostFixture struct {
	ws, other, store, key, socket, owner string
	secrets                              []string
}

func newHostFixture(tb testing.TB) *hostFixture {
	tb.Helper()
	root := tb.TempDir()
	f := &hostFixture{
		ws:      filepath.Join(root, "ws"),
		other:   filepath.Join(root, "ws-other"),
		store:   filepath.Join(root, "store"),
		key:     filepath.Join(root, "keys", "app.pem"),
		socket:  filepath.Join(root, "iterion.sock"),
		owner:   filepath.Join(root, "owner.json"),
		secrets: []string{"STORE-SECRET", "KEY-SECRET", "OWNER-SECRET", "OTHER-WORKSPACE-SECRET", "s3cr3t-value-of-the-server"},
	}
	for _, d := range []string{f.ws, f.other, f.store, filepath.Dir(f.key)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	for path, content := range map[string]string{
		filepath.Join(f.store, "000001.vlog"):   "STORE-SECRET",
		f.key:                                   "KEY-SECRET",
		f.owner:                                 `{"token": "OWNER-SECRET"}`,
		filepath.Join(f.other, "notes.txt"):     "OTHER-WORKSPACE-SECRET",
		filepath.Join(f.ws, "in-workspace.txt"): "visible",
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	l, err := net.Listen("unix", f.socket)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return f
}

// assertNoSecret fails if any of the fixture's secrets is in the output.
func (f *hostFixture) assertNoSecret(tb testing.TB, res *sandbox.Result) {
	tb.Helper()
	for _, s := range f.secrets {
		if bytes.Contains(res.Stdout, []byte(s)) || bytes.Contains(res.Stderr, []byte(s)) {
			tb.Errorf("%s reached the sandbox; stdout %q stderr %q", s, res.Stdout, res.Stderr)
		}
	}
}

func TestBwrapHidesTheHost(t *testing.T) {
	t.Setenv("ITERION_TEST_SECRET", "s3cr3t-value-of-the-server")
	d := newBwrap(t, sandbox.Options{})
	f := newHostFixture(t)
	tests := []struct {
		name   string
		script string
		// wantFail: the command must fail (the path is not there, or
		// cannot be read); otherwise only the absence of secrets counts.
		wantFail bool
	}{
		{"store directory", "ls " + f.store + "; cat " + f.store + "/*", true},
		{"key file", "cat " + f.key, true},
		{"server socket", "test -e " + f.socket, true},
		{"owner file", "cat " + f.owner, true},
		{"other workspace", "ls " + f.other + " && cat " + f.other + "/notes.txt", true},
		{"server's home", "ls -A /root", true},
		{"shadow passwords", "cat /etc/shadow", true},
		{"ssh host keys", "ls /etc/ssh", true},
		{"ssl private keys", "ls -A /etc/ssl/private | grep .", true},
		{"sysfs", "ls /sys/class", true},
		{"kernel memory", `[ "$(head -c 16 /proc/kcore | wc -c)" -gt 0 ]`, true},
		{"kernel keys", "grep . /proc/keys", true},
		{"environment of init and parent", "cat /proc/1/environ /proc/$PPID/environ | tr '\\0' '\\n'; env", false},
		{"environment of every process", "cat /proc/[0-9]*/environ | tr '\\0' '\\n'", false},
		{"parent's memory", "set -o pipefail; a=$(grep -m1 -E 'heap|stack' /proc/$PPID/maps | cut -d- -f1) && dd if=/proc/$PPID/mem bs=4096 count=1 skip=$((0x$a / 4096)) status=none | od -c | head -3", true},
		{"init's memory", "set -o pipefail; a=$(grep -m1 stack /proc/1/maps | cut -d- -f1) && dd if=/proc/1/mem bs=4096 count=1 skip=$((0x$a / 4096)) status=none | od -c | head -3", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := mustRun(t, d, bash(f.ws, tc.script))
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantFail && res.ExitCode == 0 {
				t.Errorf("exit 0, want a failure; stdout %q", res.Stdout)
			}
			f.assertNoSecret(t, res)
		})
	}
	t.Run("the workspace is visible", func(t *testing.T) {
		res, err := mustRun(t, d, bash(f.ws, "cat in-workspace.txt"))
		if err != nil || string(res.Stdout) != "visible" {
			t.Errorf("got %q, %v; want visible", res.Stdout, err)
		}
	})
	t.Run("only the sandbox's processes", func(t *testing.T) {
		res, err := mustRun(t, d, bash(f.ws, "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"))
		if err != nil {
			t.Fatal(err)
		}
		if lines := strings.Count(string(res.Stdout), "\n"); lines > 4 || bytes.Contains(res.Stdout, []byte(".test")) {
			t.Errorf("the sandbox sees %d processes:\n%s", lines, res.Stdout)
		}
	})
}

func TestBwrapRefusesWritesOutsideTheWorkspace(t *testing.T) {
	d := newBwrap(t, sandbox.Options{})
	f := newHostFixture(t)
	// A name of this run's own, so that only what this test could have
	// written is looked for on the host.
	name := fmt.Sprintf("iterion-planted-%d-%s", os.Getpid(), filepath.Base(filepath.Dir(f.ws)))
	outside := filepath.Join(filepath.Dir(f.ws), name)
	tests := []struct {
		name     string
		script   string
		wantFail bool
	}{
		{"/usr", "touch /usr/" + name, true},
		{"/usr/bin", "cp /usr/bin/true /usr/bin/" + name, true},
		{"/etc", "touch /etc/" + name, true},
		{"/etc/passwd", "echo 'x:x:0:0::/:/bin/sh' >> /etc/passwd", true},
		{"/", "touch /" + name, true},
		// Each write puts back the value it read, so that a failure of the
		// sandbox changes nothing on this machine.
		{"a sysctl", "v=$(cat /proc/sys/vm/swappiness) && echo $v > /proc/sys/vm/swappiness", true},
		{"a network sysctl", "v=$(cat /proc/sys/net/ipv4/ip_forward) && echo $v > /proc/sys/net/ipv4/ip_forward", true},
		{"kernel core pattern", "v=$(cat /proc/sys/kernel/core_pattern) && echo \"$v\" > /proc/sys/kernel/core_pattern", true},
		// The workspace's parent exists inside only as a mount point in
		// the private /tmp: writing there must not reach the host.
		{"beside the workspace", "echo x > " + outside, false},
		{"another workspace", "mkdir -p " + f.other + " && echo x > " + f.other + "/" + name, false},
		{"a host directory outside /tmp", "echo x > /var/tmp/" + name, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := mustRun(t, d, bash(f.ws, tc.script))
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantFail && res.ExitCode == 0 {
				t.Errorf("the write succeeded: %s", tc.script)
			}
		})
	}
	for _, dir := range []string{filepath.Dir(outside), f.other, "/usr", "/etc", "/", "/usr/bin", "/var/tmp"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s appeared on the host", filepath.Join(dir, name))
		}
	}
	t.Run("workspace, /tmp and HOME are writable", func(t *testing.T) {
		res, err := mustRun(t, d, bash(f.ws, "echo a > ws-file && echo b > /tmp/f && echo c > $HOME/f && cat ws-file /tmp/f $HOME/f"))
		if err != nil || string(res.Stdout) != "a\nb\nc\n" {
			t.Errorf("got %q %q, %v", res.Stdout, res.Stderr, err)
		}
	})
}

func TestBwrapHomeAndMounts(t *testing.T) {
	d := newBwrap(t, sandbox.Options{})
	root := t.TempDir()
	ws, home, ro, rw := filepath.Join(root, "ws"), filepath.Join(root, "home"), filepath.Join(root, "tools"), filepath.Join(root, "cache")
	for _, dir := range []string{ws, home, ro, rw} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ro, "tool"), []byte("tool"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("a private HOME starts empty each time", func(t *testing.T) {
		for range 2 {
			res, err := mustRun(t, d, bash(ws, `echo $HOME; ls -A "$HOME"; touch "$HOME/left"`))
			if err != nil || string(res.Stdout) != "/home/iterion\n" {
				t.Errorf("got %q %q, %v; want /home/iterion and nothing in it", res.Stdout, res.Stderr, err)
			}
		}
	})
	t.Run("Spec.Home persists", func(t *testing.T) {
		s := bash(ws, `echo $HOME; echo kept >> "$HOME/settings"; cat "$HOME/settings"`)
		s.Home = home
		mustRun(t, d, s)
		res, err := mustRun(t, d, s)
		if err != nil || string(res.Stdout) != home+"\nkept\nkept\n" {
			t.Errorf("got %q %q, %v", res.Stdout, res.Stderr, err)
		}
	})
	t.Run("mounts", func(t *testing.T) {
		s := bash(ws, "cat /opt/tools/tool && ! touch /opt/tools/x && echo y > "+rw+"/y && cat /opt/tools/tool")
		s.Mounts = []sandbox.Mount{{Source: ro, Target: "/opt/tools"}, {Source: rw, Writable: true}}
		res, err := mustRun(t, d, s)
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != "tooltool" {
			t.Errorf("got exit %d %q %q, %v", res.ExitCode, res.Stdout, res.Stderr, err)
		}
		if b, err := os.ReadFile(filepath.Join(rw, "y")); err != nil || string(b) != "y\n" {
			t.Errorf("writable mount: %q, %v", b, err)
		}
		if _, err := os.Stat(filepath.Join(ro, "x")); err == nil {
			t.Error("the read-only mount was written")
		}
	})
}

func TestBwrapRefusesPrivilege(t *testing.T) {
	d := newBwrap(t, sandbox.Options{})
	ws := newWorkspace(t)
	tests := []struct {
		name   string
		script string
		want   string // the whole stdout; "" means the command must fail
	}{
		{"not root", "id -u; id -g; id -un", "1000\n1000\niterion\n"},
		{"no capabilities", "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status | cut -f2 | sort -u", "0000000000000000\n"},
		{"seccomp filter and no new privileges", "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status | tr -d '\\t'", "NoNewPrivs:1\nSeccomp:2\n"},
		{"unshare -r", "unshare -r true", ""},
		{"unshare a mount namespace", "unshare -m true", ""},
		{"mount a tmpfs", "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m", ""},
		{"remount /usr read-write", "mount -o remount,rw /usr", ""},
		{"hostname", "hostname", "iterion\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := mustRun(t, d, bash(ws, tc.script))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && res.ExitCode == 0:
				t.Errorf("succeeded, want it refused: stdout %q", res.Stdout)
			case tc.want != "" && (res.ExitCode != 0 || string(res.Stdout) != tc.want):
				t.Errorf("exit %d stdout %q stderr %q, want %q", res.ExitCode, res.Stdout, res.Stderr, tc.want)
			}
		})
	}
}

func TestBwrapNetwork(t *testing.T) {
	d := newBwrap(t, sandbox.Options{})
	ws := newWorkspace(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	connect := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo connected", port)
	tests := []struct {
		name    string
		network sandbox.Network
		script  string
		want    string // "" means the command must fail
	}{
		{"none: the host's loopback listener", sandbox.NetworkNone, connect, ""},
		{"none: only a loopback interface", sandbox.NetworkNone, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", "lo\n"},
		{"open: the host's loopback listener", sandbox.NetworkOpen, connect, "connected\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := bash(ws, tc.script)
			s.Network = tc.network
			res, err := mustRun(t, d, s)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && res.ExitCode == 0:
				t.Errorf("succeeded, want it refused: stdout %q", res.Stdout)
			case tc.want != "" && (res.ExitCode != 0 || string(res.Stdout) != tc.want):
				t.Errorf("exit %d stdout %q stderr %q, want %q", res.ExitCode, res.Stdout, res.Stderr, tc.want)
			}
		})
	}
}
