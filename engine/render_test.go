package engine

import (
	"testing"

	"github.com/iterion-bot/iterion/dsl"
)

// compileTemplate gets a template the way the compiler makes it, through a
// prompt of a tiny workflow.
func compileTemplate(t *testing.T, text string) *dsl.Template {
	t.Helper()
	src := "vars:\n  name: string\n  n: int\nschema o:\n  items: json\n  ok: bool\ncompute c:\n  output: o\n  expr:\n    items: \"[1, 2]\"\n    ok: \"true\"\ntool t:\n  command: `" + text + "`\nworkflow w:\n  entry: c\n  c -> t\n  t -> done\n"
	w, ds := dsl.CompileSource("t.bot", []byte(src))
	if ds.HasErrors() {
		t.Fatalf("compile: %v", ds)
	}
	return w.Node("t").Tool.Command
}

func TestRender(t *testing.T) {
	s := &scope{
		vars:    map[string]any{"name": "it's me", "n": int64(3)},
		outputs: map[string]map[string]any{"c": {"items": []any{int64(1), int64(2)}, "ok": true}},
	}
	tests := []struct {
		name string
		text string
		mode renderMode
		want string
	}{
		{"text", "hello {{vars.name}} x{{vars.n}}", renderText, "hello it's me x3"},
		{"json of a list", "{{outputs.c.items}}", renderText, "[1,2]"},
		{"shell quotes one word", "echo {{vars.name}}", renderShell, `echo 'it'\''s me'`},
		{"raw is verbatim", "echo {{!vars.name}}", renderShell, "echo it's me"},
		{"unresolved stays", "echo {{outputs.t.last}}", renderShell, "echo {{outputs.t.last}}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := render(compileTemplate(t, tc.text), s, tc.mode); got != tc.want {
				t.Errorf("render = %q, want %q", got, tc.want)
			}
		})
	}
}
