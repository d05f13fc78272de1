package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/dsl/expr"
)

// scope is what templates and expressions of one node execution can read:
// the namespaces vars, input, outputs, artifacts, loop and run. It
// implements expr.Env.
type scope struct {
	vars      map[string]any
	input     map[string]any
	outputs   map[string]map[string]any
	history   map[string][]any
	artifacts map[string]any
	loops     map[string]map[string]any
	run       map[string]any
}

var _ expr.Env = (*scope)(nil)

// Lookup resolves a namespace path; absent paths are nil.
func (s *scope) Lookup(ns string, path []string) any {
	if len(path) == 0 {
		return nil
	}
	var root any
	switch ns {
	case "vars":
		root = mapAny(s.vars)
	case "input":
		root = mapAny(s.input)
	case "outputs":
		out, ok := s.outputs[path[0]]
		if !ok {
			return nil
		}
		if len(path) > 1 && path[1] == "history" {
			return walk(anySlice(s.history[path[0]]), path[2:])
		}
		return walk(mapAny(out), path[1:])
	case "artifacts":
		root = mapAny(s.artifacts)
	case "loop":
		l, ok := s.loops[path[0]]
		if !ok {
			return nil
		}
		return walk(mapAny(l), path[1:])
	case "run":
		root = mapAny(s.run)
	default:
		return nil
	}
	return walk(root, path)
}

func mapAny(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

func anySlice(s []any) any {
	if s == nil {
		return []any{}
	}
	return s
}

// walk follows path through maps and lists (numeric segments index lists).
func walk(v any, path []string) any {
	for _, seg := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// render substitutes the references of t. An unresolved reference stays
// as written, {{…}}, so a reader sees what was missing.
func render(t *dsl.Template, s *scope) string {
	if t == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range t.Parts {
		if p.Ref == nil {
			b.WriteString(p.Literal)
			continue
		}
		v := s.Lookup(p.Ref.Namespace, p.Ref.Path)
		if v == nil {
			b.WriteString(p.Ref.String())
			continue
		}
		b.WriteString(valueText(v))
	}
	return b.String()
}

// renderValue renders a with mapping: a template that is exactly one
// reference passes the value with its type; anything else is text.
func renderValue(t *dsl.Template, s *scope) any {
	if t.IsSingleRef() {
		r := t.Parts[0].Ref
		if v := s.Lookup(r.Namespace, r.Path); v != nil {
			return v
		}
	}
	return render(t, s)
}

// renderCommand renders a tool command without ever splicing a value into
// the shell text: each reference becomes a variable expansion
// (${ITERION_REF_n}, quoted as one word for the context it stands in:
// outside quotes, inside "…" or inside '…'), and the values travel in the
// returned environment. So $(…), backticks and quotes in a value are inert
// whatever quotes the author put around the reference. Raw references
// {{!…}} are spliced verbatim, as the author asked.
func renderCommand(t *dsl.Template, s *scope) (string, []string) {
	if t == nil {
		return "", nil
	}
	var b strings.Builder
	var env []string
	quote := byte(0) // the open quote: 0, '\'' or '"'
	for _, p := range t.Parts {
		if p.Ref == nil {
			quote = scanQuotes(p.Literal, quote)
			b.WriteString(p.Literal)
			continue
		}
		v := s.Lookup(p.Ref.Namespace, p.Ref.Path)
		if v == nil {
			b.WriteString(p.Ref.String())
			continue
		}
		if p.Ref.Raw {
			b.WriteString(valueText(v))
			quote = scanQuotes(valueText(v), quote)
			continue
		}
		name := fmt.Sprintf("ITERION_REF_%d", len(env)+1)
		env = append(env, name+"="+valueText(v))
		switch quote {
		case '"':
			b.WriteString("${" + name + "}")
		case '\'':
			b.WriteString("'\"${" + name + "}\"'")
		default:
			b.WriteString("\"${" + name + "}\"")
		}
	}
	return b.String(), env
}

// scanQuotes follows bash quoting through s, starting in state quote, and
// returns the state at its end.
func scanQuotes(s string, quote byte) byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case c == '\\':
			i++ // an escaped character, in or out of double quotes
		case quote == '"':
			if c == '"' {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		}
	}
	return quote
}

// valueText renders a value for a template: strings as they are, other
// scalars in Go's notation, lists and maps as JSON.
func valueText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case bool, int, int64, float64:
		return fmt.Sprint(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
