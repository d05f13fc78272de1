package dsl

import (
	"slices"
	"strings"
	"testing"
)

func TestExpandEnv(t *testing.T) {
	env := map[string]string{"EFFORT": "medium", "EMPTY": "", "SECRET_KEY": "sk-x"}
	allowed := func(name string) (string, bool) {
		if strings.Contains(name, "KEY") {
			return "", false
		}
		v, ok := env[name]
		return v, ok
	}
	for _, c := range []struct {
		in, want, err string
		read          []string
	}{
		{in: "${EFFORT:-high}", want: "medium", read: []string{"EFFORT"}},
		{in: "${UNSET:-high}", want: "high"},
		{in: "${EMPTY:-high}", want: "high"},
		{in: "${UNSET:-${EFFORT:-low}}", want: "medium", read: []string{"EFFORT"}},
		{in: "${UNSET:-${ALSO:-low}}", want: "low"},
		{in: "anthropic/${UNSET:-claude}-4", want: "anthropic/claude-4"},
		{in: "${EFFORT}", want: "medium", read: []string{"EFFORT"}},
		{in: "${UNSET}", want: ""},
		{in: "${SECRET_KEY:-none}", want: "none"},
		{in: "cost $5", want: "cost $5"},
		{in: "${:-x}", err: "names no variable"},
		{in: "${1A}", err: "names no variable"},
		{in: "${A", err: "not closed"},
		{in: "${A:-b", err: "not closed"},
		{in: "${A-b}", err: "must be followed by"},
		{in: strings.Repeat("${A:-", MaxEnvDepth+2) + "x" + strings.Repeat("}", MaxEnvDepth+2), err: "nested more than"},
	} {
		var names, read []string
		got, err := expandEnv(c.in, allowed, &names, &read)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("expandEnv(%q) = %q, %v; want an error saying %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want || !slices.Equal(read, c.read) {
			t.Errorf("expandEnv(%q) = %q (read %v), %v; want %q (read %v)", c.in, got, read, err, c.want, c.read)
		}
	}
}

// The compiler reads routing properties by their defaults unless given
// an environment, records every reference, and checks the value it gets.
func TestEnvInProperties(t *testing.T) {
	src := `prompt p:
  Work.

agent a:
  model: "anthropic/${ITERION_MODEL:-claude-sonnet-4-6}"
  reasoning_effort: "${ITERION_X_EFFORT:-high}"
  timeout: "${ITERION_X_TIMEOUT:-20m}"
  user: p

workflow w:
  entry: a
  default_backend: "${ITERION_BACKEND:-claw}"
  a -> done
`
	w, ds := CompileSource("t.bot", []byte(src))
	if ds.HasErrors() {
		t.Fatal(RenderString(ds, map[string][]byte{"t.bot": []byte(src)}))
	}
	a := w.Node("a")
	if a.LLM.Model != "anthropic/claude-sonnet-4-6" || a.LLM.ReasoningEffort != "high" || a.Timeout.String() != "20m0s" || w.DefaultBackend != "claw" {
		t.Errorf("defaults: model %q, effort %q, timeout %v, backend %q", a.LLM.Model, a.LLM.ReasoningEffort, a.Timeout, w.DefaultBackend)
	}
	if len(w.EnvRefs) != 4 {
		t.Errorf("EnvRefs = %+v, want 4", w.EnvRefs)
	}

	env := map[string]string{"ITERION_X_EFFORT": "low", "ITERION_X_TIMEOUT": "5m"}
	w, ds = Options{Env: func(n string) (string, bool) { v, ok := env[n]; return v, ok }}.CompileSource("t.bot", []byte(src))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	if a := w.Node("a"); a.LLM.ReasoningEffort != "low" || a.Timeout.String() != "5m0s" {
		t.Errorf("from the environment: effort %q, timeout %v", a.LLM.ReasoningEffort, a.Timeout)
	}

	// A value the environment makes invalid is reported as such.
	env["ITERION_X_EFFORT"] = "extreme"
	_, ds = Options{Env: func(n string) (string, bool) { v, ok := env[n]; return v, ok }}.CompileSource("t.bot", []byte(src))
	if !ds.HasErrors() || !strings.Contains(ds.Error(), `invalid reasoning_effort "extreme"`) {
		t.Errorf("an invalid value from the environment: %v", ds)
	}
}

func FuzzExpandEnv(f *testing.F) {
	for _, s := range []string{"${A:-b}", "${A:-${B:-c}}", "$", "${", "x${A}y", "${A:-}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var names, read []string
		out, err := expandEnv(s, func(string) (string, bool) { return "v", true }, &names, &read)
		if err != nil {
			return
		}
		if !strings.Contains(s, "${") && out != s {
			t.Fatalf("a value with no reference changed: %q -> %q", s, out)
		}
		if len(read) > len(names) {
			t.Fatalf("read %v of names %v", read, names)
		}
	})
}
