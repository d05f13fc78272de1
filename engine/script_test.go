package engine_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
)

// A tool's script: runs in its language, read by the interpreter from
// stdin inside the sandbox. A reference stands for its value (as data in
// a shell script, as JSON in js and py), and a hostile value never runs.
func TestToolScripts(t *testing.T) {
	for _, bin := range []string{"node", "python3"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is needed by this test: install it (apt-get install -y nodejs python3)", bin)
		}
	}
	db := newStore(t)
	e := newEngine(t, db, nil)
	for _, tc := range []struct {
		lang, script string
	}{
		{"sh", `printf '%s|%s' {{vars.x}} "$(echo ok)"`},
		{"bash", `v={{vars.x}}; printf '%s|%s' "$v" "${BASH_VERSION:+ok}"`},
		{"js", `const v = {{vars.x}}; process.stdout.write(v + "|" + (typeof v === "string" ? "ok" : "no"))`},
		{"py", `v = {{vars.x}}
print(v + "|" + ("ok" if isinstance(v, str) else "no"), end="")`},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			src := "vars:\n  x: string = \"\"\ntool t:\n  language: " + tc.lang + "\n  script: |\n    " + strings.ReplaceAll(tc.script, "\n", "\n    ") + "\nworkflow w:\n  entry: t\n  t -> done\n"
			w := mustCompile(t, src)
			run, dir := runIn(t, e, w, "a b")
			if run.Status != engine.StatusFinished {
				t.Fatalf("status %s (%s %s)", run.Status, run.FailureCode, run.Error)
			}
			if got := toolResult(t, db, run.ID); got != "a b|ok" {
				t.Errorf("printed %q, want %q", got, "a b|ok")
			}
			pwned(t, dir, false)
			// Values that would run as code if spliced into a js or py
			// literal, beside the shell ones.
			codeValues := []string{`"+require('fs').writeFileSync('pwned','')+"`, `"+open('pwned','w').write('')+"`, `'+open('pwned','w').write('')+'`}
			for _, v := range append(hostileValues, codeValues...) {
				run, dir := runIn(t, e, w, v)
				pwned(t, dir, false)
				if run.Status != engine.StatusFinished {
					t.Errorf("value %q: status %s (%s)", v, run.Status, run.Error)
				}
			}
		})
	}
}

// The control: spliced raw, a value does run as code, so the test above
// proves something.
func TestToolScriptRawRefRuns(t *testing.T) {
	db := newStore(t)
	e := newEngine(t, db, nil)
	for lang, v := range map[string]string{"js": "require('fs').writeFileSync('pwned', '')", "py": "open('pwned', 'w').write('')"} {
		w := mustCompile(t, "vars:\n  x: string = \"\"\ntool t:\n  language: "+lang+"\n  script: \"{{!vars.x}}\"\nworkflow w:\n  entry: t\n  t -> done\n")
		run, dir := runIn(t, e, w, v)
		if run.Status != engine.StatusFinished {
			t.Fatalf("%s: status %s (%s)", lang, run.Status, run.Error)
		}
		pwned(t, dir, true)
	}
}

// A script in a language nobody can run is refused when compiled; a tool
// with both command: and script: too.
func TestToolScriptErrors(t *testing.T) {
	for src, want := range map[string]string{
		"tool t:\n  language: ruby\n  script: \"puts 1\"\nworkflow w:\n  entry: t\n  t -> done\n":  `unknown script language "ruby"`,
		"tool t:\n  command: \"true\"\n  script: \"true\"\nworkflow w:\n  entry: t\n  t -> done\n": "both command: and script:",
		"tool t:\n  language: py\n  command: \"true\"\nworkflow w:\n  entry: t\n  t -> done\n":     "language: without script:",
		"tool t:\n  description: \"x\"\nworkflow w:\n  entry: t\n  t -> done\n":                    "must declare command: or script:",
	} {
		_, ds := dsl.CompileSource("t.bot", []byte(src))
		if got := dsl.RenderString(ds, map[string][]byte{"t.bot": []byte(src)}); !ds.HasErrors() || !strings.Contains(got, want) {
			t.Errorf("%q: diagnostics %s, want %q", src, got, want)
		}
	}
}
