package claw

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// Limits on what one tool call reads or prints.
const (
	maxFileRead   = 256 << 10
	maxToolOutput = 64 << 10
	maxListed     = 2000
	bashTimeout   = 10 * time.Minute
)

// run runs command with bash -c in the task's workspace, inside the
// node's sandbox (the engine's Task.Exec); output is stdout then stderr,
// each cut at maxToolOutput.
func run(ctx context.Context, t *engine.Task, command string) (string, int, error) {
	if t.Exec == nil {
		return "", -1, errors.New("this node has no sandbox to run commands in")
	}
	ctx, cancel := context.WithTimeout(ctx, bashTimeout)
	defer cancel()
	res, err := t.Exec(ctx, []string{"bash", "-c", command})
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return "", -1, fmt.Errorf("the command ran longer than %s and was stopped", bashTimeout)
		}
		return "", -1, err
	}
	stdout, cut := capped(res.Stdout)
	stderr, errCut := capped(res.Stderr)
	text := stdout
	if stderr != "" {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += stderr
	}
	if cut || errCut || res.StdoutTruncated {
		text += fmt.Sprintf("\n… (output cut at %d bytes a stream: narrow the command, e.g. with head or grep)", maxToolOutput)
	}
	if res.Limit != "" {
		text += fmt.Sprintf("\n(stopped: the sandbox's %s limit, %s)", res.Limit, res.Detail)
	}
	return text, res.ExitCode, nil
}

// capped is b as text, cut at maxToolOutput; cut says it was.
func capped(b []byte) (string, bool) {
	if len(b) > maxToolOutput {
		return string(b[:maxToolOutput]), true
	}
	return string(b), false
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

// openIn opens path inside the workspace dir for reading; close the root
// when done. It never blocks: a FIFO, a socket or a device is refused
// (opened non-blocking, then checked), so a planted FIFO cannot hold a
// tool call past its node's timeout. want is the kind of file expected.
func openIn(dir, path string, want os.FileMode) (*os.Root, *os.File, error) {
	path, err := clean(path)
	if err != nil {
		return nil, nil, err
	}
	r, err := openRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	f, err := r.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		r.Close()
		return nil, nil, rootErr(path, err)
	}
	if err := checkKind(f, path, want); err != nil {
		f.Close()
		r.Close()
		return nil, nil, err
	}
	return r, f, nil
}

// checkKind refuses f unless it is a regular file (want 0) or a directory
// (want os.ModeDir).
func checkKind(f *os.File, path string, want os.FileMode) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	switch got := st.Mode().Type(); {
	case got == want:
		return nil
	case want == os.ModeDir:
		return fmt.Errorf("%s is not a directory", path)
	case got == os.ModeDir:
		return fmt.Errorf("%s is a directory: use list_files", path)
	default:
		return fmt.Errorf("%s is not a regular file (%s): only regular files can be read or written", path, kindName(got))
	}
}

func kindName(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// readFile reads a workspace file.
func readFile(dir, path string) ([]byte, error) {
	r, f, err := openIn(dir, path, 0)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	defer f.Close()
	b := make([]byte, maxFileRead+1)
	n, _ := io.ReadFull(f, b)
	if n > maxFileRead {
		return nil, fmt.Errorf("%s is larger than %d bytes: read a part of it with bash (head, sed -n)", path, maxFileRead)
	}
	return b[:n], nil
}

// writeFile writes a workspace file, creating its directories. Like
// openIn it never blocks on, or writes into, anything but a regular file.
func writeFile(dir, path string, data []byte) error {
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
	f, err := r.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		if errors.Is(err, syscall.ENXIO) {
			return fmt.Errorf("%s is not a regular file (a FIFO): only regular files can be read or written", path)
		}
		return rootErr(path, err)
	}
	defer f.Close()
	if err := checkKind(f, path, 0); err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.Write(data)
	return err
}

// list lists a workspace directory, directories marked with a slash.
func list(dir, path string) ([]string, error) {
	r, f, err := openIn(dir, path, os.ModeDir)
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
	if len(names) > maxListed {
		names = append(names[:maxListed], fmt.Sprintf("… and %d more (list a subdirectory, or use bash: ls | head)", len(names)-maxListed))
	}
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
	switch name {
	case "read_file":
		return tool{def: ToolDef{Name: name, Description: "Read a text file of the workspace.", Schema: objectSchema([]string{"path"}, map[string]any{"path": strProp})},
			run: func(_ context.Context, t *engine.Task, _ *Conversation, _ Block, in map[string]any) (string, error) {
				b, err := readFile(t.WorkDir, str(in, "path"))
				return string(b), err
			}}, true
	case "write_file":
		return tool{def: ToolDef{Name: name, Description: "Write (create or replace) a file of the workspace.", Schema: objectSchema([]string{"path", "content"}, map[string]any{"path": strProp, "content": strProp})},
			run: func(_ context.Context, t *engine.Task, _ *Conversation, _ Block, in map[string]any) (string, error) {
				if err := writeFile(t.WorkDir, str(in, "path"), []byte(str(in, "content"))); err != nil {
					return "", err
				}
				return "wrote " + str(in, "path"), nil
			}}, true
	case "edit_file":
		return tool{def: ToolDef{Name: name, Description: "Replace exactly one occurrence of old with new in a workspace file.", Schema: objectSchema([]string{"path", "old", "new"}, map[string]any{"path": strProp, "old": strProp, "new": strProp})},
			run: func(_ context.Context, t *engine.Task, _ *Conversation, _ Block, in map[string]any) (string, error) {
				path, old := str(in, "path"), str(in, "old")
				b, err := readFile(t.WorkDir, path)
				if err != nil {
					return "", err
				}
				switch n := strings.Count(string(b), old); {
				case old == "" || n == 0:
					return "", fmt.Errorf("the text to replace is not in %s", path)
				case n > 1:
					return "", fmt.Errorf("the text to replace occurs %d times in %s: include more context so it occurs once", n, path)
				}
				if err := writeFile(t.WorkDir, path, []byte(strings.Replace(string(b), old, str(in, "new"), 1))); err != nil {
					return "", err
				}
				return "edited " + path, nil
			}}, true
	case "list_files":
		return tool{def: ToolDef{Name: name, Description: "List a directory of the workspace.", Schema: objectSchema(nil, map[string]any{"path": strProp})},
			run: func(_ context.Context, t *engine.Task, _ *Conversation, _ Block, in map[string]any) (string, error) {
				names, err := list(t.WorkDir, str(in, "path"))
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
				out, code, err := run(ctx, t, "grep -rnE -- "+shellQuote(str(in, "pattern"))+" "+shellQuote(path))
				if err == nil && code == 1 {
					return "no match", nil
				}
				return out, err
			}}, true
	case "bash":
		return tool{def: ToolDef{Name: name, Description: "Run a bash command in the workspace; returns its output and exit status.", Schema: objectSchema([]string{"command"}, map[string]any{"command": strProp})},
			run: func(ctx context.Context, t *engine.Task, _ *Conversation, _ Block, in map[string]any) (string, error) {
				out, code, err := run(ctx, t, str(in, "command"))
				if err != nil {
					return "", err
				}
				return fmt.Sprintf("%s\n(exit status %d)", out, code), nil
			}}, true
	}
	return tool{}, false
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
