package claw

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// Runner carries out the workspace tools: on the host for now, in a
// sandbox later. Paths are relative to the node's work directory dir and
// may not leave it.
type Runner interface {
	Run(ctx context.Context, dir, command string) (output string, exitCode int, err error)
	ReadFile(dir, path string) ([]byte, error)
	WriteFile(dir, path string, data []byte) error
	List(dir, path string) ([]string, error)
}

// HostRunner runs the workspace tools on this machine.
type HostRunner struct{}

var _ Runner = HostRunner{}

// Limits on what one tool call reads or prints.
const (
	maxFileRead   = 256 << 10
	maxToolOutput = 64 << 10
	bashTimeout   = 10 * time.Minute
)

// Run runs command with bash -c in dir; output is stdout and stderr, cut
// at maxToolOutput. The command gets a minimal environment: never the
// process's secrets (API keys, tokens).
func (HostRunner) Run(ctx context.Context, dir, command string) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, bashTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.Dir = dir
	cmd.Env = engine.SafeEnv(nil)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	out := &cappedBuffer{max: maxToolOutput}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // background children too
	}
	text := out.String()
	if out.cut {
		text += "\n… (output cut)"
	}
	var exit *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success():
		return text, 0, nil
	case errors.As(err, &exit):
		return text, exit.ExitCode(), nil
	}
	return text, -1, err
}

// cappedBuffer keeps the first max bytes written to it.
type cappedBuffer struct {
	bytes.Buffer
	max int
	cut bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room < len(p) {
		b.cut = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// openRoot opens the workspace so that no path, link or race can leave it.
func openRoot(dir string) (*os.Root, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the workspace: %w", err)
	}
	return r, nil
}

func clean(path string) (string, error) {
	if path == "" {
		path = "."
	}
	if filepath.IsAbs(path) {
		return "", fmt.Errorf("path %q must be relative to the workspace", path)
	}
	return path, nil
}

// openIn opens path inside the workspace dir; close the root when done.
func openIn(dir, path string) (*os.Root, *os.File, error) {
	path, err := clean(path)
	if err != nil {
		return nil, nil, err
	}
	r, err := openRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	f, err := r.Open(path)
	if err != nil {
		r.Close()
		return nil, nil, rootErr(path, err)
	}
	return r, f, nil
}

// ReadFile reads a workspace file.
func (HostRunner) ReadFile(dir, path string) ([]byte, error) {
	r, f, err := openIn(dir, path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	defer f.Close()
	b := make([]byte, maxFileRead+1)
	n, _ := f.Read(b)
	if n > maxFileRead {
		return nil, fmt.Errorf("%s is larger than %d bytes: read a part of it with bash (head, sed -n)", path, maxFileRead)
	}
	return b[:n], nil
}

// WriteFile writes a workspace file, creating its directories.
func (HostRunner) WriteFile(dir, path string, data []byte) error {
	path, err := clean(path)
	if err != nil {
		return err
	}
	r, err := openRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	if d := filepath.Dir(path); d != "." {
		if err := r.MkdirAll(d, 0o755); err != nil {
			return rootErr(path, err)
		}
	}
	return rootErr(path, r.WriteFile(path, data, 0o644))
}

// List lists a workspace directory, directories marked with a slash.
func (HostRunner) List(dir, path string) ([]string, error) {
	r, f, err := openIn(dir, path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			name += "/"
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// rootErr says plainly when a path tried to leave the workspace.
func rootErr(path string, err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("path %q leaves the workspace", path)
	}
	return err
}

func str(input map[string]any, key string) string {
	s, _ := input[key].(string)
	return s
}

func objectSchema(required []string, props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props, "required": required}
}

var strProp = map[string]any{"type": "string"}

// workspaceTool returns a built-in workspace tool by name.
func (b *Backend) workspaceTool(name string) (tool, bool) {
	r := b.runner
	switch name {
	case "read_file":
		return tool{def: ToolDef{Name: name, Description: "Read a text file of the workspace.", Schema: objectSchema([]string{"path"}, map[string]any{"path": strProp})},
			run: func(_ context.Context, t *engine.Task, _ *Conversation, _ Block, in map[string]any) (string, error) {
				b, err := r.ReadFile(t.WorkDir, str(in, "path"))
				return string(b), err
			}}, true
	case "write_file":
		return tool{def: ToolDef{Name: name, Description: "Write (create or replace) a file of the workspace.", Schema: objectSchema([]string{"path", "content"}, map[string]any{"path": strProp, "content": strProp})},
			run: func(_ context.Context, t *engine.Task, _ *Conversation, _ Block, in map[string]any) (string, error) {
				if err := r.WriteFile(t.WorkDir, str(in, "path"), []byte(str(in, "content"))); err != nil {
					return "", err
				}
				return "wrote " + str(in, "path"), nil
			}}, true
	case "edit_file":
		return tool{def: ToolDef{Name: name, Description: "Replace exactly one occurrence of old with new in a workspace file.", Schema: objectSchema([]string{"path", "old", "new"}, map[string]any{"path": strProp, "old": strProp, "new": strProp})},
			run: func(_ context.Context, t *engine.Task, _ *Conversation, _ Block, in map[string]any) (string, error) {
				path, old := str(in, "path"), str(in, "old")
				b, err := r.ReadFile(t.WorkDir, path)
				if err != nil {
					return "", err
				}
				switch n := strings.Count(string(b), old); {
				case old == "" || n == 0:
					return "", fmt.Errorf("the text to replace is not in %s", path)
				case n > 1:
					return "", fmt.Errorf("the text to replace occurs %d times in %s: include more context so it occurs once", n, path)
				}
				if err := r.WriteFile(t.WorkDir, path, []byte(strings.Replace(string(b), old, str(in, "new"), 1))); err != nil {
					return "", err
				}
				return "edited " + path, nil
			}}, true
	case "list_files":
		return tool{def: ToolDef{Name: name, Description: "List a directory of the workspace.", Schema: objectSchema(nil, map[string]any{"path": strProp})},
			run: func(_ context.Context, t *engine.Task, _ *Conversation, _ Block, in map[string]any) (string, error) {
				names, err := r.List(t.WorkDir, str(in, "path"))
				return strings.Join(names, "\n"), err
			}}, true
	case "grep":
		return tool{def: ToolDef{Name: name, Description: "Search the workspace for a regular expression (grep -rnE).", Schema: objectSchema([]string{"pattern"}, map[string]any{"pattern": strProp, "path": strProp})},
			run: func(ctx context.Context, t *engine.Task, _ *Conversation, _ Block, in map[string]any) (string, error) {
				path, err := clean(str(in, "path"))
				if err != nil {
					return "", err
				}
				if r, err := openRoot(t.WorkDir); err == nil {
					_, err = r.Stat(path)
					r.Close()
					if err != nil {
						return "", rootErr(path, err)
					}
				}
				if path == "" {
					path = "."
				}
				out, code, err := r.Run(ctx, t.WorkDir, "grep -rnE -- "+shellQuote(str(in, "pattern"))+" "+shellQuote(path))
				if err == nil && code == 1 {
					return "no match", nil
				}
				return out, err
			}}, true
	case "bash":
		return tool{def: ToolDef{Name: name, Description: "Run a bash command in the workspace; returns its output and exit status.", Schema: objectSchema([]string{"command"}, map[string]any{"command": strProp})},
			run: func(ctx context.Context, t *engine.Task, _ *Conversation, _ Block, in map[string]any) (string, error) {
				out, code, err := r.Run(ctx, t.WorkDir, str(in, "command"))
				if err != nil {
					return "", err
				}
				return fmt.Sprintf("%s\n(exit status %d)", out, code), nil
			}}, true
	}
	return tool{}, false
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
