// Package agentcli finds the agent CLIs the backends drive (pi and Claude
// Code) for tests: `make deps` installs their pinned versions into a
// project-local, git-ignored npm prefix, .tools/npm, and a test that
// cannot find one fails with the command that installs it.
package agentcli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// CLI is one agent CLI: its npm package at the pinned version, the
// binary it installs, and the variable that overrides where it is.
type CLI struct {
	Name    string // the binary: "pi", "claude"
	Package string // the npm package, pinned
	Env     string // overrides the path
}

// The CLIs, at the versions the project pins.
var (
	Pi     = CLI{Name: "pi", Package: "@mariozechner/pi-coding-agent@0.73.1", Env: "ITERION_PI_COMMAND"}
	Claude = CLI{Name: "claude", Package: "@anthropic-ai/claude-code@2.1.332", Env: "ITERION_CLAUDE_COMMAND"}
)

// Prefix is the npm prefix `make deps` installs into, relative to the
// repository's root.
const Prefix = ".tools/npm"

// InstallCommand is the command that installs c where Find looks.
func (c CLI) InstallCommand() string {
	return fmt.Sprintf("make deps (or: npm install --prefix %s %s)", Prefix, c.Package)
}

// Find returns the path of c's binary: $Env when set, else the one in
// the repository's .tools/npm. The error says how to install it.
func Find(c CLI) (string, error) {
	if p := os.Getenv(c.Env); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", c.Env, p, err)
		}
		return p, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, Prefix, "node_modules", ".bin", c.Name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is not installed at %s: run %s", c.Name, p, c.InstallCommand())
	}
	return p, nil
}

// repoRoot is the directory holding go.mod, found from the working
// directory upwards (a test runs in its package's directory).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run the tests from the repository")
		}
		dir = parent
	}
}
