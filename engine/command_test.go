package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
)

// hostileValues each create the file pwned in the working directory if a
// shell ever runs them as code, in one quoting context or another.
var hostileValues = []string{
	"a[$(touch pwned)]",
	"$(touch pwned)",
	"`touch pwned`",
	"'; touch pwned; '",
	`"; touch pwned; "`,
	"x\ntouch pwned",
	"$(touch${IFS}pwned)",
	"1+a[$(touch pwned)]",
	"x[$(touch pwned)]",
}

// TestToolValuesAreInert runs a tool through the engine for every shell
// context a reference can stand in, with hostile values: none may run.
// Where the shell evaluates the value (arithmetic, a variable name), a
// value that is not a plain number or name fails the node instead; a
// legitimate value works everywhere. Each case's control shows the context
// is dangerous: the same command with a raw {{!…}} reference does run the
// control value.
func TestToolValuesAreInert(t *testing.T) {
	tests := []struct {
		name    string
		command string
		// check is "number" or "name" where a hostile value fails the
		// node; otherwise the command prints echo(value).
		check   string
		echo    func(v string) string
		legit   string
		want    string // the output for legit
		control string // a value the raw form runs
	}{
		{name: "plain", command: `echo {{vars.x}}`, echo: same, legit: "a b", want: "a b", control: "$(touch pwned)"},
		{name: "double-quoted", command: `echo "v={{vars.x}}"`, echo: prefix("v="), legit: "a b", want: "v=a b", control: "$(touch pwned)"},
		{name: "single-quoted", command: `echo 'v={{vars.x}}'`, echo: prefix("v="), legit: "a b", want: "v=a b", control: "'; touch pwned; '"},
		{name: "printf", command: `printf '%s\n' {{vars.x}}`, echo: same, legit: "a b", want: "a b", control: "$(touch pwned)"},
		{name: "let", command: `let n={{vars.x}}+1; echo $n`, check: "number", legit: "41", want: "42", control: "a[$(touch pwned)]"},
		{name: "arithmetic expansion", command: `echo $(( {{vars.x}} + 1 ))`, check: "number", legit: "41", want: "42", control: "a[$(touch pwned)]"},
		{name: "arithmetic command", command: `(( {{vars.x}} > 3 )) && echo big || echo small`, check: "number", legit: "5", want: "big", control: "a[$(touch pwned)]"},
		{name: "[[ -eq ]]", command: `[[ {{vars.x}} -eq 5 ]] && echo five || echo other`, check: "number", legit: "5", want: "five", control: "a[$(touch pwned)]"},
		{name: "[[ -lt ]] right operand", command: `[[ 1 -lt {{vars.x}} ]] && echo more || echo less`, check: "number", legit: "007", want: "more", control: "a[$(touch pwned)]"},
		{name: "declare -i", command: `declare -i n={{vars.x}}; echo $n`, check: "number", legit: "-3", want: "-3", control: "a[$(touch pwned)]"},
		{name: "local -i", command: `f() { local -i n={{vars.x}}; echo $n; }; f`, check: "number", legit: "8", want: "8", control: "a[$(touch pwned)]"},
		{name: "typeset -i then assign", command: `typeset -i n; n={{vars.x}}; echo $n`, check: "number", legit: "9", want: "9", control: "a[$(touch pwned)]"},
		{name: "array subscript expansion", command: `a=(zero one two); echo ${a[{{vars.x}}]}`, check: "number", legit: "2", want: "two", control: "a[$(touch pwned)]"},
		{name: "array subscript assignment", command: `a[{{vars.x}}]=set; echo ${a[1]}`, check: "number", legit: "1", want: "set", control: "a[$(touch pwned)]"},
		{name: "substring offset", command: `v=abcdef; echo ${v:{{vars.x}}:2}`, check: "number", legit: "2", want: "cd", control: "a[$(touch pwned)]"},
		{name: "through a variable", command: `n={{vars.x}}; echo $(( n * 2 ))`, check: "number", legit: "21", want: "42", control: "a[$(touch pwned)]"},
		{name: "printf -v", command: `printf -v {{vars.x}} %s hi; echo "$out"`, check: "name", legit: "out", want: "hi", control: "a[$(touch pwned)]"},
		{name: "[[ -v ]]", command: `out=1; [[ -v {{vars.x}} ]] && echo set || echo unset`, check: "name", legit: "out", want: "set", control: "a[$(touch pwned)]"},
		{name: "bash -c single-quoted", command: `bash -c 'echo {{vars.x}}'`, echo: same, legit: "a b", want: "a b", control: "$(touch pwned)"},
		{name: "bash -c double-quoted", command: `bash -c "echo {{vars.x}}"`, echo: same, legit: "a b", want: "a b", control: "$(touch pwned)"},
		{name: "sh -c with inner quotes", command: `sh -c 'echo "v={{vars.x}}"'`, echo: prefix("v="), legit: "a b", want: "v=a b", control: "$(touch pwned)"},
		{name: "bash -c arithmetic", command: `bash -c 'echo $(( {{vars.x}} + 1 ))'`, check: "number", legit: "1", want: "2", control: "a[$(touch pwned)]"},
		{name: "bash -c nested", command: `bash -c "bash -c 'echo {{vars.x}}'"`, echo: same, legit: "a b", want: "a b", control: "$(touch pwned)"},
		{name: "eval", command: `eval echo {{vars.x}}`, echo: same, legit: "a b", want: "a b", control: "$(touch pwned)"},
		{name: "eval double-quoted", command: `eval "echo {{vars.x}}"`, echo: same, legit: "a b", want: "a b", control: "$(touch pwned)"},
		{name: "trap", command: `trap 'echo {{vars.x}}' EXIT`, echo: same, legit: "a b", want: "a b", control: "$(touch pwned)"},
		{name: "command substitution", command: `echo "$(printf '%s' {{vars.x}})"`, echo: same, legit: "a b", want: "a b", control: "$(touch pwned)"},
		{name: "heredoc", command: "cat <<EOF\n{{vars.x}}\nEOF", echo: same, legit: "a b", want: "a b", control: "$(touch pwned)"},
	}
	db := newStore(t)
	e := newEngine(t, db, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := mustCompile(t, toolWorkflow(tc.command))
			run, dir := runIn(t, e, w, tc.legit)
			if run.Status != engine.StatusFinished {
				t.Fatalf("legitimate value %q: status %s (%s %s), want finished", tc.legit, run.Status, run.FailureCode, run.Error)
			}
			if got := toolResult(t, db, run.ID); got != tc.want {
				t.Errorf("legitimate value %q printed %q, want %q", tc.legit, got, tc.want)
			}
			pwned(t, dir, false)

			for _, v := range hostileValues {
				run, dir := runIn(t, e, w, v)
				pwned(t, dir, false)
				if tc.check != "" {
					if run.Status != engine.StatusFailedResumable || run.FailureCode != engine.CodeToolFailedPermanent ||
						!strings.Contains(run.Error, "{{vars.x}} is used as a "+map[string]string{"number": "number", "name": "variable name"}[tc.check]) {
						t.Errorf("value %q: run %s %s %q, want failed_resumable %s naming {{vars.x}}", v, run.Status, run.FailureCode, run.Error, engine.CodeToolFailedPermanent)
					}
					continue
				}
				if run.Status != engine.StatusFinished {
					t.Errorf("value %q: status %s (%s %s), want finished", v, run.Status, run.FailureCode, run.Error)
					continue
				}
				if got, want := toolResult(t, db, run.ID), strings.TrimSpace(tc.echo(v)); got != want {
					t.Errorf("value %q printed %q, want %q", v, got, want)
				}
			}

			raw := mustCompile(t, toolWorkflow(strings.ReplaceAll(tc.command, "{{vars.x}}", "{{!vars.x}}")))
			_, dir = runIn(t, e, raw, tc.control)
			pwned(t, dir, true)
		})
	}
}

func same(v string) string { return v }
func prefix(p string) func(string) string {
	return func(v string) string { return p + v }
}

func toolWorkflow(command string) string {
	return "vars:\n  x: string = \"\"\ntool t:\n  command: `" + command + "`\nworkflow w:\n  entry: t\n  t -> done\n"
}

// runIn runs w with x = v in a fresh working directory.
func runIn(t *testing.T, e *engine.Engine, w *dsl.Workflow, v string) (*engine.Run, string) {
	t.Helper()
	dir := t.TempDir()
	run, err := e.Start(context.Background(), engine.StartRequest{Workflow: w, Vars: map[string]any{"x": v}, WorkDir: dir, Trigger: engine.Trigger{Source: "test"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return run, dir
}

// pwned checks whether a hostile value ran.
func pwned(t *testing.T, dir string, want bool) {
	t.Helper()
	_, err := os.Stat(filepath.Join(dir, "pwned"))
	switch {
	case err == nil && !want:
		t.Fatal("a value ran as code: pwned exists")
	case errors.Is(err, os.ErrNotExist) && want:
		t.Fatal("control: the raw form did not run the value, so the test proves nothing")
	case err != nil && !errors.Is(err, os.ErrNotExist):
		t.Fatal(err)
	}
}

// toolResult is what tool t printed in run id.
func toolResult(t *testing.T, db engine.Store, id string) string {
	t.Helper()
	evs, err := db.Events(context.Background(), id, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == engine.EventNodeFinished && ev.NodeID == "t" {
			if out, ok := ev.Data["output"].(map[string]any); ok {
				s, _ := out["result"].(string)
				return s
			}
		}
	}
	t.Fatalf("run %s: tool t did not finish", id)
	return ""
}
