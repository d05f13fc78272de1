package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// mountTmpfs mounts a tmpfs of size bytes for the test. It needs root, as
// CI has: elsewhere the test fails saying so rather than pass untested.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a small tmpfs to fill it, which needs root: run the store tests as root (CI does)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Fatalf("mounting a tmpfs on %s: %v (the test needs root with CAP_SYS_ADMIN)", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// helper runs this test binary as a helper process playing role on the
// store in dir with the given reserve, and returns its output. A helper
// killed by a signal (the SIGBUS of a full disk) fails the test.
func helper(t *testing.T, role, dir string, reserve int64, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, "ITERION_STORE_TEST_DIR="+dir, fmt.Sprintf("ITERION_STORE_TEST_RESERVE=%d", reserve))
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("the %s helper crashed (%v):\n%s", role, ws.Signal(), tail(out.String()))
		}
	}
	if err != nil {
		t.Fatalf("the %s helper failed (%v):\n%s", role, err, tail(out.String()))
	}
	return out.String()
}

// tail is the end of a crash's output: the signal and the first frames.
func tail(s string) string {
	if len(s) > 3000 {
		return s[:3000] + "\n…"
	}
	return s
}

// fillUp writes a file in dir until the filesystem is full.
func fillUp(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			break
		}
	}
	for n := len(buf) / 2; n > 0; n /= 2 {
		_, _ = f.Write(buf[:n])
	}
	if free, err := freeSpace(dir); err != nil || free != 0 {
		t.Fatalf("after filling %s: %d bytes free, err=%v", dir, free, err)
	}
	return path
}

// wantLines checks that out holds each line of want.
func wantLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("%s: output does not say %q:\n%s", what, w, out)
		}
	}
}

// TestFullTmpfs fills a store on a 24 MiB tmpfs: writes are refused with
// clear errors before the disk is full, and no process crashes, neither
// the writer nor, once something else has taken the rest of the disk,
// readers of the store, whether the writer closed it or was killed.
func TestFullTmpfs(t *testing.T) {
	const reserve = 8 << 20
	tests := []struct {
		name   string
		closed bool
		want   []string // what the reader says on the full disk
	}{
		{"closed", true, []string{"open: ok", "read-only: true", "events: 2", "write full: true"}},
		// Recovering a store that was not closed writes, so it cannot be
		// opened until space is freed; but opening it does not crash.
		{"killed", false, []string{"open full: true"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := mountTmpfs(t, 24<<20)
			dir := filepath.Join(fs, "store")
			close := "1"
			if !tc.closed {
				close = "0"
			}
			out := helper(t, "fill", dir, reserve, "ITERION_STORE_TEST_CLOSE="+close)
			for _, want := range []string{"refused: ", dir, "free, less than the 8 MiB the store keeps free", "iterion runs prune"} {
				if !strings.Contains(out, want) {
					t.Errorf("fill: output does not say %q:\n%s", want, out)
				}
			}
			var written int
			if _, err := fmt.Sscanf(out, "written: %d", &written); err != nil || written < 40 {
				t.Fatalf("fill wrote %d runs of 200 KiB (%v), want most of the 16 MiB above the reserve:\n%s", written, err, out)
			}

			filler := fillUp(t, fs)
			out = helper(t, "read", dir, reserve)
			wantLines(t, "read on a full disk", out, tc.want...)
			if tc.closed {
				wantLines(t, "read on a full disk", out, fmt.Sprintf("runs: %d", written))
			} else if !strings.Contains(out, "not closed cleanly") {
				t.Errorf("read on a full disk: output does not say the store was not closed cleanly:\n%s", out)
			}

			// Once space is freed, the store opens for writing again, and
			// nothing committed was lost.
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			out = helper(t, "read", dir, 1<<20)
			wantLines(t, "read once space is freed", out, "open: ok", "read-only: false", fmt.Sprintf("runs: %d", written), "write: <nil>")
		})
	}
}
