package engine

import (
	"os"
	"os/exec"
	"testing"

	"github.com/iterion-bot/iterion/dsl"
)

// compileTemplate gets a template the way the compiler makes it, through a
// prompt of a tiny workflow.
func compileTemplate(t testing.TB, text string) *dsl.Template {
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
		want string
	}{
		{"text", "hello {{vars.name}} x{{vars.n}}", "hello it's me x3"},
		{"json of a list", "{{outputs.c.items}}", "[1,2]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := render(compileTemplate(t, tc.text), s); got != tc.want {
				t.Errorf("render = %q, want %q", got, tc.want)
			}
		})
	}
}

// Values never become shell text: whatever quotes surround a reference,
// the command sees the value as one word, and $(…), backticks and quotes
// in it do nothing.
func TestRenderCommandIsInjectionSafe(t *testing.T) {
	dir := t.TempDir()
	marker := dir + "/pwned"
	evil := "a b $(touch " + marker + ") `touch " + marker + "` \"q\" 'p' \\ *"
	s := &scope{vars: map[string]any{"name": evil}}
	for _, tc := range []struct{ name, cmd, want string }{
		{"bare", `printf '%s|' {{vars.name}}`, evil + "|"},
		{"double quotes", `printf '%s|' "x {{vars.name}} y"`, "x " + evil + " y|"},
		{"single quotes", `printf '%s|' 'x {{vars.name}} y'`, "x " + evil + " y|"},
		{"after an escaped quote", `printf '%s|' "\" {{vars.name}}"`, "\" " + evil + "|"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmdText, env, err := renderCommand(compileTemplate(t, tc.cmd), s)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", "-c", cmdText)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v", cmdText, err)
			}
			if string(out) != tc.want {
				t.Errorf("command %s printed %q, want %q", cmdText, out, tc.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the value was executed")
			}
		})
	}
	// Raw references are the author's explicit choice: verbatim.
	cmdText, env, err := renderCommand(compileTemplate(t, "echo {{!vars.name}}"), &scope{vars: map[string]any{"name": "x"}})
	if err != nil || cmdText != "echo x" || len(env) != 0 {
		t.Errorf("raw: %q %v", cmdText, env)
	}
}
