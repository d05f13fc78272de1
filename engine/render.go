package engine

import (
	"encoding/json"
	"fmt"
	"slices"
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

// maxRendered bounds the text of one rendered template: a prompt, a tool
// command with the values it is given, a fail message, a with mapping. A
// MiB is more than any model takes as one prompt, and half of what Linux
// lets a command's arguments and environment hold together.
const maxRendered = 1 << 20

// renderTooLargeError reports a template whose text would pass its cap.
// Rendering stops there: the rest is never built.
type renderTooLargeError struct {
	max     int
	at      int64 // the size the text would have had with the part that passed
	largest string
	size    int64 // of the largest reference's value
	uses    int   // of the largest reference in the template
}

func (e *renderTooLargeError) Error() string {
	msg := fmt.Sprintf("the rendered text would pass %s (the most a prompt, command or message may hold) at %s", byteSize(int64(e.max)), byteSize(e.at))
	if e.largest != "" {
		msg += fmt.Sprintf("; its largest reference is %s (%s", e.largest, byteSize(e.size))
		if e.uses > 1 {
			msg += fmt.Sprintf(", used %d times", e.uses)
		}
		msg += ")"
	}
	return msg + ": refer to a smaller field, or have the node that made it write a file and pass its path"
}

// sizer tracks the size of a text being rendered and its largest
// reference, and refuses to pass max.
type sizer struct {
	t       *dsl.Template
	max     int
	n       int64
	largest *dsl.Ref
	size    int64
}

// add counts size more bytes, of ref's value when ref is not nil.
func (z *sizer) add(ref *dsl.Ref, size int64) error {
	if ref != nil && size > z.size {
		z.largest, z.size = ref, size
	}
	if z.n+size > int64(z.max) {
		e := &renderTooLargeError{max: z.max, at: z.n + size}
		if z.largest != nil {
			e.largest, e.size = z.largest.String(), z.size
			for _, p := range z.t.Parts {
				if r := p.Ref; r != nil && r.Raw == z.largest.Raw && r.Namespace == z.largest.Namespace && slices.Equal(r.Path, z.largest.Path) {
					e.uses++
				}
			}
		}
		return e
	}
	z.n += size
	return nil
}

// refText is the text a value takes in a template, unless it would pass
// what z has left: then the value is not encoded at all.
func (z *sizer) refText(ref *dsl.Ref, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, z.add(ref, int64(len(x)))
	case map[string]any, []any:
		if err := z.add(ref, jsonSize(x)); err != nil {
			return "", err
		}
		return valueText(x), nil
	}
	text := valueText(v)
	return text, z.add(ref, int64(len(text)))
}

// renderText substitutes the references of t. An unresolved reference
// stays as written, {{…}}, so a reader sees what was missing. It fails
// with a *renderTooLargeError as soon as the text would pass maxRendered.
func renderText(t *dsl.Template, s *scope) (string, error) {
	return renderLimited(t, s, maxRendered)
}

// renderLimited is renderText with a cap of max bytes; on failure it
// returns the text rendered before the cap.
func renderLimited(t *dsl.Template, s *scope, max int) (string, error) {
	if t == nil {
		return "", nil
	}
	z := &sizer{t: t, max: max}
	var b strings.Builder
	for _, p := range t.Parts {
		text := p.Literal
		var err error
		switch {
		case p.Ref == nil:
			err = z.add(nil, int64(len(text)))
		default:
			v := s.Lookup(p.Ref.Namespace, p.Ref.Path)
			if v == nil {
				text = p.Ref.String()
				err = z.add(nil, int64(len(text)))
			} else {
				text, err = z.refText(p.Ref, v)
			}
		}
		if err != nil {
			return b.String(), err
		}
		b.WriteString(text)
	}
	return b.String(), nil
}

// render is renderText for a text that is shown, not run (a human node's
// instructions): past the cap it is cut, with a note saying why.
func render(t *dsl.Template, s *scope) string {
	text, err := renderText(t, s)
	if err != nil {
		return text + "\n…(cut: " + err.Error() + ")"
	}
	return text
}

// renderValue renders a with mapping: a template that is exactly one
// reference passes the value with its type; anything else is text.
func renderValue(t *dsl.Template, s *scope) (any, error) {
	if t.IsSingleRef() {
		r := t.Parts[0].Ref
		if v := s.Lookup(r.Namespace, r.Path); v != nil {
			return v, nil
		}
	}
	return renderText(t, s)
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
	// The command's text and the values it is given count together.
	z := &sizer{t: t, max: maxRendered}
	tooLarge := func(err error) (string, []string, error) {
		return "", nil, failf(CodeToolFailedPermanent, "command: %v", err)
	}
	for _, p := range t.Parts {
		if p.Ref == nil {
			if err := z.add(nil, int64(len(p.Literal))); err != nil {
				return tooLarge(err)
			}
			pieces = append(pieces, shell.Piece{Text: p.Literal})
			continue
		}
		v := s.Lookup(p.Ref.Namespace, p.Ref.Path)
		if v == nil {
			text := p.Ref.String()
			if err := z.add(nil, int64(len(text))); err != nil {
				return tooLarge(err)
			}
			pieces = append(pieces, shell.Piece{Text: text})
			continue
		}
		text, err := z.refText(p.Ref, v)
		if err != nil {
			return tooLarge(err)
		}
		if p.Ref.Raw {
			pieces = append(pieces, shell.Piece{Text: text})
			continue
		}
		pieces = append(pieces, shell.Piece{Hole: true})
		refs = append(refs, p.Ref)
		values = append(values, text)
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
func quoteValue(v string) string { return quoteStart(v, 60) }

// quoteStart quotes the first max runes of s, escaped, marking a cut.
func quoteStart(s string, max int) string {
	if utf8.RuneCountInString(s) > max {
		return strconv.Quote(string([]rune(s)[:max])) + "…"
	}
	return strconv.Quote(s)
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

// renderScript renders a tool's script for its language. A shell script
// (sh, bash) is rendered as a command is, each reference's value given
// as data in an environment variable. In a js or py script a reference
// stands for its value as JSON, read from an environment variable at run
// time, so no value is ever parsed as code: JSON.parse(process.env.X) or
// json.loads(os.environ["X"]). A value the run does not have is null
// (None). {{!…}} splices the value's text into the script.
func renderScript(t *dsl.Template, lang string, s *scope) (string, []string, error) {
	if lang == "sh" || lang == "bash" {
		return renderCommand(t, s)
	}
	var b strings.Builder
	var env []string
	z := &sizer{t: t, max: maxRendered}
	tooLarge := func(err error) (string, []string, error) {
		return "", nil, failf(CodeToolFailedPermanent, "script: %v", err)
	}
	for _, p := range t.Parts {
		if p.Ref == nil {
			if err := z.add(nil, int64(len(p.Literal))); err != nil {
				return tooLarge(err)
			}
			b.WriteString(p.Literal)
			continue
		}
		v := s.Lookup(p.Ref.Namespace, p.Ref.Path)
		if p.Ref.Raw && v != nil {
			text, err := z.refText(p.Ref, v)
			if err != nil {
				return tooLarge(err)
			}
			b.WriteString(text)
			continue
		}
		if v == nil {
			b.WriteString(map[string]string{"js": "null", "py": "None"}[lang])
			continue
		}
		data, err := json.Marshal(v)
		if err != nil {
			return "", nil, failf(CodeToolFailedPermanent, "script: %s cannot be given as JSON: %v", p.Ref, err)
		}
		if err := z.add(p.Ref, int64(len(data))); err != nil {
			return tooLarge(err)
		}
		name := fmt.Sprintf("ITERION_REF_%d", len(env)+1)
		if len(name)+1+len(data) >= maxEnvEntry {
			return "", nil, failf(CodeToolFailedPermanent, "script: the value of %s is %d bytes as JSON, more than an environment variable can hold (128 KiB): write it to a file in an earlier node and read the file here", p.Ref, len(data))
		}
		env = append(env, name+"="+string(data))
		switch lang {
		case "js":
			fmt.Fprintf(&b, "JSON.parse(process.env.%s)", name)
		default:
			fmt.Fprintf(&b, "__import__(\"json\").loads(__import__(\"os\").environ[%q])", name)
		}
	}
	return b.String(), env, nil
}

// scriptArgv runs a script of lang read from standard input.
var scriptArgv = map[string][]string{
	"sh":   {"sh", "-s"},
	"bash": {"bash", "-s"},
	"js":   {"node", "-"},
	"py":   {"python3", "-"},
}
