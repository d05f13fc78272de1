package claw

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/engine"
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
	b := New(Options{})
	task := &engine.Task{WorkDir: dir}
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
		{"list", "list_files", map[string]any{"path": "."}, "dangling\nescape\nsrc/", ""},
		{"grep", "grep", map[string]any{"pattern": "cl.w"}, "src/a.txt:1:hello claw", ""},
		{"grep no match", "grep", map[string]any{"pattern": "zzz"}, "no match", ""},
		{"bash", "bash", map[string]any{"command": "echo hi; exit 3"}, "hi\n\n(exit status 3)", ""},
		{"absolute path refused", "read_file", map[string]any{"path": "/etc/passwd"}, "", "must be relative"},
		{"dot-dot refused", "read_file", map[string]any{"path": "../x"}, "", "leaves the workspace"},
		{"symlink escape refused", "read_file", map[string]any{"path": "escape/secret"}, "", "leaves the workspace"},
		{"write through symlink refused", "write_file", map[string]any{"path": "escape/new", "content": "x"}, "", "leaves the workspace"},
		{"write through dangling symlink refused", "write_file", map[string]any{"path": "dangling", "content": "x"}, "", "leaves the workspace"},
		{"secrets stay out of bash", "bash", map[string]any{"command": "echo key=${ANTHROPIC_API_KEY:-none}"}, "key=none", ""},
		{"background children do not hold the tool", "bash", map[string]any{"command": "sleep 30 & echo started"}, "started", ""},
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

func TestParseOutput(t *testing.T) {
	schema := map[string]any{"type": "object", "required": []any{"ok", "n"}}
	tests := []struct {
		name    string
		text    string
		want    map[string]any
		wantErr string
	}{
		{"plain json", `{"ok": true, "n": 3}`, map[string]any{"ok": true, "n": int64(3)}, ""},
		{"fenced json", "Here:\n```json\n{\"ok\": false, \"n\": 1.5}\n```", map[string]any{"ok": false, "n": 1.5}, ""},
		{"missing field", `{"ok": true}`, nil, "fields n are missing"},
		{"not json", "all done", nil, "not a JSON object"},
	}
	for _, tc := range tests {
		got, err := parseOutput(tc.text, schema)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) || got["ok"] != tc.want["ok"] || got["n"] != tc.want["n"] {
			t.Errorf("%s: got %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if got, _ := parseOutput("free text", nil); got["text"] != "free text" {
		t.Errorf("schemaless output = %v", got)
	}
}
