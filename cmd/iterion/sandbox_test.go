package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/sandbox"
)

// iterion run in a project with its store in .iterion: the tools work in
// the project, but the store and the local API's directory are not there
// for them, and nothing of them can be read or written.
func TestRunHidesTheStoreInTheWorkspace(t *testing.T) {
	t.Parallel()
	project := t.TempDir()
	c := newCLI(t)
	c.dir = project
	c.setenv("ITERION_RUNTIME_DIR", filepath.Join(project, "runtime"))
	wf := writeFile(t, "look.bot", `tool look:
  command: "{ ls -A .iterion | wc -l; ls -A runtime | wc -l; cat .iterion/owner.json || echo no-owner; (echo x > .iterion/planted) 2>/dev/null || echo refused; echo hi > mine.txt; } > seen.txt 2>&1"
workflow w:
  entry: look
  look -> done
`)
	code, out, errOut := c.run("run", wf, "--no-interactive")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	seen, err := os.ReadFile(filepath.Join(project, "seen.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// cat's own complaint comes between the counts and no-owner.
	got := strings.Fields(string(seen))
	if len(got) < 4 || got[0] != "0" || got[1] != "0" || !slices.Contains(got, "no-owner") || got[len(got)-1] != "refused" {
		t.Errorf("the tool saw %q, want an empty store and runtime directory, no owner.json, and no write", seen)
	}
	if _, err := os.Stat(filepath.Join(project, ".iterion", "planted")); err == nil {
		t.Error("the tool wrote into the store")
	}
	if b, err := os.ReadFile(filepath.Join(project, "mine.txt")); err != nil || string(b) != "hi\n" {
		t.Errorf("the tool's own file: %q, %v", b, err)
	}
}

func TestParseMounts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		items   []string
		want    []sandbox.Mount
		wantErr string
	}{
		{"read-only by default", []string{"/srv/cache"}, []sandbox.Mount{{Source: "/srv/cache"}}, ""},
		{"target and rw", []string{"/srv/gomod:/home/iterion/go/pkg/mod:rw"}, []sandbox.Mount{{Source: "/srv/gomod", Target: "/home/iterion/go/pkg/mod", Writable: true}}, ""},
		{"explicit ro", []string{"/opt/tools:ro"}, []sandbox.Mount{{Source: "/opt/tools"}}, ""},
		{"relative", []string{"cache"}, nil, "is not an absolute path"},
		{"too many parts", []string{"/a:/b:/c:rw"}, nil, "write SOURCE, SOURCE:TARGET"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseMounts(tc.items)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mounts (-want +got):\n%s", diff)
			}
		})
	}
}

// Without bubblewrap, iterion run refuses the run before its first node,
// with the command that installs it and how to choose another driver;
// nothing runs on the host instead. The command runs in a child process:
// its PATH (no bwrap, nor anything else) is read by exec.LookPath, which
// only the process's environment reaches.
func TestRunWithoutBubblewrap(t *testing.T) {
	t.Parallel()
	project := t.TempDir()
	wf := writeFile(t, "touch.bot", "tool t:\n  command: \"echo ran > ran.txt\"\nworkflow w:\n  entry: t\n  t -> done\n")
	cmd := child(t, "", "run", wf, "--no-interactive")
	cmd.Dir = project
	cmd.Env = append(cmd.Env, "ITERION_STORE=", "ITERION_SANDBOX=", "PATH="+t.TempDir())
	b, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitError {
		t.Fatalf("exit %v, want %d\n%s", err, exitError, b)
	}
	for _, want := range []string{"bubblewrap is not installed: apt-get install -y bubblewrap", "iterion run --sandbox, ITERION_SANDBOX or sandbox.driver"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("output lacks %q:\n%s", want, b)
		}
	}
	if _, err := os.Stat(filepath.Join(project, "ran.txt")); err == nil {
		t.Error("the tool ran")
	}
}
