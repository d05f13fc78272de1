package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/dsl/expr"
	"github.com/iterion-bot/iterion/dsl/shell"
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

// CodeToolFailedPermanent (upstream's TOOL_FAILED_PERMANENT) fails a tool
// node whose command would evaluate a value that is not a plain number or
// variable name ($(( … )), [[ … -eq … ]], printf -v, …). Running it again
// cannot help, so --auto-resume does not retry it.
const CodeToolFailedPermanent = "TOOL_FAILED_PERMANENT"

// renderCommand renders a tool command without ever splicing a value into
// the shell text: each reference becomes the expansion of a variable,
// ${ITERION_REF_n}, written for the place it stands in (see dsl/shell), and
// the values travel in the returned environment. So $(…), backticks and
// quotes in a value are inert whatever quotes the author put around the
// reference, and in a script handed to a second shell (bash -c '…', eval)
// the inner shell expands the variable, never the text of the value.
// Where the shell evaluates a value (arithmetic, a variable name), the
// value must be a plain number or name, or the node fails: err is then a
// node failure. Raw references {{!…}} are spliced verbatim, as the author
// asked; the scan reads their text as part of the command.
func renderCommand(t *dsl.Template, s *scope) (string, []string, error) {
	if t == nil {
		return "", nil, nil
	}
	pieces := make([]shell.Piece, 0, len(t.Parts))
	var refs []*dsl.Ref
	var values []string
	for _, p := range t.Parts {
		if p.Ref == nil {
			pieces = append(pieces, shell.Piece{Text: p.Literal})
			continue
		}
		v := s.Lookup(p.Ref.Namespace, p.Ref.Path)
		switch {
		case v == nil:
			pieces = append(pieces, shell.Piece{Text: p.Ref.String()})
		case p.Ref.Raw:
			pieces = append(pieces, shell.Piece{Text: valueText(v)})
		default:
			pieces = append(pieces, shell.Piece{Hole: true})
			refs = append(refs, p.Ref)
			values = append(values, valueText(v))
		}
	}
	uses := shell.Scan(pieces)
	var b strings.Builder
	var env []string
	hole := 0
	for _, p := range pieces {
		if !p.Hole {
			b.WriteString(p.Text)
			continue
		}
		u, ref, v := &uses[hole], refs[hole], values[hole]
		hole++
		switch u.Check {
		case shell.CheckNumber:
			if !shell.IsNumber(v) {
				return "", nil, failf(CodeToolFailedPermanent, "command: %s is used as a number in %s but its value is not a plain number: %s", ref, u.Context, quoteValue(v))
			}
			v = shell.Number(v)
		case shell.CheckName:
			if !shell.IsName(v) {
				return "", nil, failf(CodeToolFailedPermanent, "command: %s is used as a variable name in %s but its value is not a plain name: %s", ref, u.Context, quoteValue(v))
			}
		}
		name := fmt.Sprintf("ITERION_REF_%d", hole)
		if len(name)+1+len(v) >= maxEnvEntry {
			return "", nil, failf(CodeToolFailedPermanent, "command: the value of %s is %d bytes, more than a command's environment variable can hold (128 KiB): write it to a file in an earlier node and read the file here", ref, len(v))
		}
		env = append(env, name+"="+v)
		b.WriteString(u.Render(name))
	}
	return b.String(), env, nil
}

// maxEnvEntry is the kernel's bound on one NAME=value string given to a
// program (MAX_ARG_STRLEN, 32 pages of 4 KiB, with its NUL).
const maxEnvEntry = 128 << 10

// quoteValue shows a refused value in a message: quoted, escaped, and cut
// to 60 runes, so a hostile value cannot forge lines or flood the log.
func quoteValue(v string) string {
	const max = 60
	if utf8.RuneCountInString(v) > max {
		r := []rune(v)
		return strconv.Quote(string(r[:max])) + "…"
	}
	return strconv.Quote(v)
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
