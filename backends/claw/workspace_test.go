package claw

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/internal/nodesandbox/nodesandboxtest"
)

func TestWorkspaceTools(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-secret")
	dir := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	// A link to a file that does not exist yet, outside the workspace.
	if err := os.Symlink(filepath.Join(outside, "planted"), filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := New(Options{})
	task := &engine.Task{WorkDir: dir, Exec: sandboxExec(t, dir)}
	run := func(name string, input map[string]any) (string, error) {
		tl, ok := b.workspaceTool(name)
		if !ok {
			t.Fatalf("no tool %s", name)
		}
		return tl.run(context.Background(), task, &Conversation{}, Block{}, input)
	}
	steps := []struct {
		name    string
		tool    string
		input   map[string]any
		want    string
		wantErr string
	}{
		{"write", "write_file", map[string]any{"path": "src/a.txt", "content": "hello world\n"}, "wrote src/a.txt", ""},
		{"read", "read_file", map[string]any{"path": "src/a.txt"}, "hello world\n", ""},
		{"edit", "edit_file", map[string]any{"path": "src/a.txt", "old": "world", "new": "claw"}, "edited src/a.txt", ""},
		{"read edited", "read_file", map[string]any{"path": "src/a.txt"}, "hello claw\n", ""},
		{"edit missing text", "edit_file", map[string]any{"path": "src/a.txt", "old": "nope", "new": "x"}, "", "not in src/a.txt"},
		{"list", "list_files", map[string]any{"path": "."}, "dangling\nescape\nfifo\nsrc/", ""},
		{"a FIFO is not read", "read_file", map[string]any{"path": "fifo"}, "", "fifo is not a regular file (a FIFO)"},
		{"a FIFO is not written", "write_file", map[string]any{"path": "fifo", "content": "x"}, "", "fifo is not a regular file (a FIFO)"},
		{"a FIFO is not listed", "list_files", map[string]any{"path": "fifo"}, "", "fifo is not a directory"},
		{"a directory is not read", "read_file", map[string]any{"path": "src"}, "", "src is a directory"},
		{"grep", "grep", map[string]any{"pattern": "cl.w"}, "src/a.txt:1:hello claw", ""},
		{"grep no match", "grep", map[string]any{"pattern": "zzz"}, "no match", ""},
		{"bash", "bash", map[string]any{"command": "echo hi; exit 3"}, "hi\n\n(exit status 3)", ""},
		{"bash works in the workspace", "bash", map[string]any{"command": "cat src/a.txt; id -u"}, "hello claw\n1000", ""},
		{"secrets stay out of bash", "bash", map[string]any{"command": "echo key=${ANTHROPIC_API_KEY:-none}; cat /proc/1/environ /proc/$PPID/environ | tr '\\0' '\\n' | grep -c sk-secret"}, "key=none\n0", ""},
		{"the outside is not there for bash", "bash", map[string]any{"command": "cat " + filepath.Join(outside, "secret")}, "No such file", ""},
		{"background children do not hold the tool", "bash", map[string]any{"command": "sleep 30 & echo started"}, "started", ""},
		{"absolute path refused", "read_file", map[string]any{"path": "/etc/passwd"}, "", "must be relative"},
		{"dot-dot refused", "read_file", map[string]any{"path": "../x"}, "", "leaves the workspace"},
		{"symlink escape refused", "read_file", map[string]any{"path": "escape/secret"}, "", "leaves the workspace"},
		{"write through symlink refused", "write_file", map[string]any{"path": "escape/new", "content": "x"}, "", "leaves the workspace"},
		{"write through dangling symlink refused", "write_file", map[string]any{"path": "dangling", "content": "x"}, "", "leaves the workspace"},
	}
	for _, st := range steps {
		got, err := run(st.tool, st.input)
		switch {
		case st.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), st.wantErr) {
				t.Errorf("%s: err = %v, want %q", st.name, err, st.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", st.name, err)
		case !strings.Contains(got, st.want):
			t.Errorf("%s: got %q, want %q", st.name, got, st.want)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("a file was planted outside the workspace through a dangling link")
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Error("a file was written outside the workspace")
	}
}

// sandboxExec runs the shell tools as the engine does: in the default
// sandbox (bubblewrap), in dir.
func sandboxExec(t *testing.T, dir string) func(ctx context.Context, argv []string) (*engine.ProcessResult, error) {
	t.Helper()
	sb := nodesandboxtest.New(t, nodesandbox.Options{})
	return func(ctx context.Context, argv []string) (*engine.ProcessResult, error) {
		return sb.Run(ctx, &engine.Process{Argv: argv, Dir: dir})
	}
}

// The agent's bash tool tries each escape a hostile pull request would
// (a prompt-injected agent runs what it is told): every one is refused or
// contained, and a limit it meets is said in the tool's result.
func TestBashToolEscapes(t *testing.T) {
	sb := nodesandboxtest.Sandboxes(t)
	b := New(Options{})
	bash, ok := b.workspaceTool("bash")
	if !ok {
		t.Fatal("no bash tool")
	}
	nodesandboxtest.RunEscapes(t, func(t *testing.T, workspace, command string, timeout time.Duration) (string, string) {
		task := &engine.Task{WorkDir: workspace, Exec: func(ctx context.Context, argv []string) (*engine.ProcessResult, error) {
			return sb.Run(ctx, &engine.Process{Argv: argv, Dir: workspace})
		}}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		out, err := bash.run(ctx, task, &Conversation{}, Block{}, map[string]any{"command": command})
		if err != nil {
			return out, err.Error()
		}
		if _, stopped, ok := strings.Cut(out, "(stopped: "); ok {
			return out, stopped
		}
		return out, ""
	})
}

// What the shell tools print and what list_files lists reach the model
// bounded, saying where they were cut.
func TestToolOutputIsBounded(t *testing.T) {
	dir := t.TempDir()
	for i := range maxListed + 5 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := New(Options{})
	task := &engine.Task{WorkDir: dir, Exec: sandboxExec(t, dir)}
	bash, _ := b.workspaceTool("bash")
	out, err := bash.run(context.Background(), task, &Conversation{}, Block{}, map[string]any{"command": "head -c 300000 /dev/zero | tr '\\0' a; head -c 300000 /dev/zero | tr '\\0' b >&2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > 2*maxToolOutput+200 || !strings.Contains(out, "output cut at 65536 bytes") {
		t.Errorf("bash printed %d bytes, want at most two streams of %d and the note", len(out), maxToolOutput)
	}
	ls, _ := b.workspaceTool("list_files")
	out, err = ls.run(context.Background(), task, &Conversation{}, Block{}, map[string]any{"path": "."})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\n"); n != maxListed || !strings.HasSuffix(out, "… and 5 more (list a subdirectory, or use bash: ls | head)") {
		t.Errorf("list_files gave %d lines ending %q, want %d and the rest counted", n, out[len(out)-60:], maxListed)
	}
}
