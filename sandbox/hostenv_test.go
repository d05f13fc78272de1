//go:build linux

package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/iterion-bot/iterion/sandbox"
)

// A pull request ships a library in the workspace and a workflow's env
// names it in LD_PRELOAD (or LD_LIBRARY_PATH): it may load into the
// sandboxed command, never into what runs outside the sandbox (the gate
// shell, bwrap), which would run it on the host.
func TestSandboxEnvStaysInside(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Fatalf("this test builds a shared library with gcc: apt-get install -y gcc")
	}
	ws := t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran-on-the-host")
	src := filepath.Join(ws, "evil.c")
	code := `#include <stdio.h>
__attribute__((constructor)) static void run(void) { FILE *f = fopen("` + marker + `", "a"); if (f) { fputs("x", f); fclose(f); } }
`
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", filepath.Join(ws, "evil.so"), src).CombinedOutput(); err != nil {
		t.Fatalf("building the library: %v\n%s", err, out)
	}
	b := newBwrap(t, sandbox.Options{})
	for _, limits := range []sandbox.Limits{{}, {Processes: 64, Memory: 256 << 20}} { // without and with the gate
		res, err := sandbox.Run(context.Background(), b, sandbox.Spec{
			Argv: []string{"true"}, Dir: ws, Limits: limits,
			Env: []string{"PATH=/usr/bin:/bin", "LD_PRELOAD=./evil.so", "LD_LIBRARY_PATH=."},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 {
			t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("the workspace's library ran on the host (limits %+v)", limits)
		}
	}
}
