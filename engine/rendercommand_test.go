package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/dsl"
)

func TestRenderCommandPlaces(t *testing.T) {
	tests := []struct {
		name    string
		cmd     string
		vars    map[string]any
		want    string
		wantEnv []string
		wantErr string
	}{
		{name: "bare", cmd: "echo {{vars.name}}", vars: map[string]any{"name": "a b"},
			want: `echo "${ITERION_REF_1}"`, wantEnv: []string{"ITERION_REF_1=a b"}},
		{name: "number", cmd: "echo $(( {{vars.n}} + 1 ))", vars: map[string]any{"n": int64(41)},
			want: `echo $(( ${ITERION_REF_1} + 1 ))`, wantEnv: []string{"ITERION_REF_1=41"}},
		{name: "number without leading zeros", cmd: "(( {{vars.name}} ))", vars: map[string]any{"name": "-010"},
			want: `(( ${ITERION_REF_1} ))`, wantEnv: []string{"ITERION_REF_1=-10"}},
		{name: "not a number", cmd: "echo $(( {{vars.name}} + 1 ))", vars: map[string]any{"name": "a[$(id)]"},
			wantErr: `command: {{vars.name}} is used as a number in $(( … )) but its value is not a plain number: "a[$(id)]"`},
		{name: "a float is not a plain number", cmd: "let n={{vars.name}}", vars: map[string]any{"name": 2.5},
			wantErr: `is used as a number in let but its value is not a plain number: "2.5"`},
		{name: "not a name", cmd: "printf -v {{vars.name}} %s x", vars: map[string]any{"name": "a[1]"},
			wantErr: `command: {{vars.name}} is used as a variable name in printf -v but its value is not a plain name: "a[1]"`},
		{name: "a long value is cut", cmd: "let {{vars.name}}", vars: map[string]any{"name": strings.Repeat("é", 100) + "\n"},
			wantErr: `not a plain number: "` + strings.Repeat("é", 60) + `"…`},
		{name: "second shell", cmd: `bash -c "echo {{vars.name}}"`, vars: map[string]any{"name": "$(id)"},
			want: `bash -c "echo \"\${ITERION_REF_1}\""`, wantEnv: []string{"ITERION_REF_1=$(id)"}},
		{name: "raw text is read as shell", cmd: `{{!vars.shell}} 'echo {{vars.name}}'`, vars: map[string]any{"shell": "bash -c", "name": "x"},
			want: `bash -c 'echo "${ITERION_REF_1}"'`, wantEnv: []string{"ITERION_REF_1=x"}},
		{name: "raw arithmetic makes the later reference a number", cmd: `{{!vars.shell}}{{vars.name}} ))`, vars: map[string]any{"shell": "echo $((", "name": "x"},
			wantErr: "is used as a number in $(( … ))"},
		{name: "unresolved stays as written", cmd: "echo {{vars.missing}} {{vars.name}}", vars: map[string]any{"name": "x"},
			want: `echo {{vars.missing}} "${ITERION_REF_1}"`, wantEnv: []string{"ITERION_REF_1=x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, env, err := renderCommand(compileCommand(t, tc.cmd), &scope{vars: tc.vars})
			if tc.wantErr != "" {
				var nf *nodeFailure
				if !errors.As(err, &nf) || nf.code != CodeToolFailedPermanent || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a %s failure containing %q", err, CodeToolFailedPermanent, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("command = %s, want %s", got, tc.want)
			}
			if diff := cmp.Diff(tc.wantEnv, env); diff != "" {
				t.Errorf("env mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// compileCommand compiles text as a tool command with the vars name, n,
// shell and missing declared.
func compileCommand(t *testing.T, text string) *dsl.Template {
	t.Helper()
	src := "vars:\n  name: json\n  n: int\n  shell: string\n  missing: string\ntool t:\n  command: `" + text + "`\nworkflow w:\n  entry: t\n  t -> done\n"
	w, ds := dsl.CompileSource("t.bot", []byte(src))
	if ds.HasErrors() {
		t.Fatalf("compile: %v", ds)
	}
	return w.Node("t").Tool.Command
}
