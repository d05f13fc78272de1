package agentcli

import (
	"os/exec"
	"strings"
	"testing"
)

// TestInstalled checks that make deps installed both CLIs at their pinned
// versions; a missing one fails with the command that installs it.
func TestInstalled(t *testing.T) {
	for _, c := range []CLI{Pi, Claude} {
		t.Run(c.Name, func(t *testing.T) {
			p, err := Find(c)
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(p, "--version").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --version: %v\n%s", p, err, out)
			}
			want := c.Package[strings.LastIndex(c.Package, "@")+1:]
			if !strings.Contains(string(out), want) {
				t.Errorf("%s --version = %q, want version %s: run %s", p, strings.TrimSpace(string(out)), want, c.InstallCommand())
			}
		})
	}
}

func TestFindHonoursTheVariable(t *testing.T) {
	t.Setenv(Pi.Env, "/nonexistent/pi")
	if _, err := Find(Pi); err == nil || !strings.Contains(err.Error(), Pi.Env) {
		t.Fatalf("Find with %s unusable: err = %v, want one naming the variable", Pi.Env, err)
	}
}
