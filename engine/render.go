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

// renderMode says how references are substituted.
type renderMode int

const (
	// renderText substitutes values as text (prompts, messages, with).
	renderText renderMode = iota
	// renderShell quotes each value as one shell word, unless written
	// {{!…}} (tool commands).
	renderShell
)

// render substitutes the references of t. An unresolved reference stays
// as written, {{…}}, so a reader sees what was missing.
func render(t *dsl.Template, s *scope, mode renderMode) string {
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
		text := valueText(v)
		if mode == renderShell && !p.Ref.Raw {
			text = shellQuote(text)
		}
		b.WriteString(text)
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
	return render(t, s, renderText)
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

// shellQuote quotes s as one word for bash: single quotes, with embedded
// single quotes closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
