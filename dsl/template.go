package dsl

import (
	"fmt"
	"strings"
)

// Template is a text with {{namespace.path}} references: a prompt body, a
// tool command, a with value, a fail message. Parts alternate between
// literal text and references; rendering is the engine's job.
type Template struct {
	// Source is the text as written.
	Source string
	// Parts is Source split into literals and references, in order.
	Parts []TemplatePart
}

// TemplatePart is one literal run or one reference of a Template.
type TemplatePart struct {
	// Literal is the text of a literal part; empty for a reference.
	Literal string
	// Ref is the reference, nil for a literal part.
	Ref *Ref
}

// Ref is a {{namespace.path}} reference.
type Ref struct {
	// Namespace is vars, input, outputs, artifacts, loop or run.
	Namespace string
	// Path is the dotted path after the namespace, at least one segment.
	Path []string
	// Raw marks {{!…}}: substituted verbatim in tool commands, as shell
	// text, instead of being passed as data (E094 warns when a pull
	// request or a model controls the value).
	Raw bool
	// Offset and End are byte offsets of the whole {{…}} in Source.
	Offset, End int
}

// String renders the reference as written canonically: {{ns.path}}.
func (r *Ref) String() string {
	bang := ""
	if r.Raw {
		bang = "!"
	}
	return "{{" + bang + r.Namespace + "." + strings.Join(r.Path, ".") + "}}"
}

// Refs returns the references of t in order.
func (t *Template) Refs() []*Ref {
	if t == nil {
		return nil
	}
	var refs []*Ref
	for _, p := range t.Parts {
		if p.Ref != nil {
			refs = append(refs, p.Ref)
		}
	}
	return refs
}

// IsSingleRef reports whether the template is exactly one reference, in
// which case a with mapping passes the referenced value with its type.
func (t *Template) IsSingleRef() bool {
	return t != nil && len(t.Parts) == 1 && t.Parts[0].Ref != nil
}

// templateNamespaces are the namespaces a reference may name. attachments,
// secrets and each are upstream namespaces this implementation refuses.
var templateNamespaces = map[string]bool{
	"vars": true, "input": true, "outputs": true, "artifacts": true, "loop": true, "run": true,
}

var unsupportedNamespaces = map[string]bool{"attachments": true, "secrets": true, "each": true, "params": true}

// templateError is a malformed reference at byte offsets [off, end).
type templateError struct {
	off, end int
	msg      string
	hint     string
	code     Code
}

// parseTemplate splits src into parts. It never fails outright: malformed
// references are returned as errors and kept as literal text.
func parseTemplate(src string) (*Template, []templateError) {
	t := &Template{Source: src}
	var errs []templateError
	lit := strings.Builder{}
	flush := func() {
		if lit.Len() > 0 {
			t.Parts = append(t.Parts, TemplatePart{Literal: lit.String()})
			lit.Reset()
		}
	}
	i := 0
	for i < len(src) {
		open := strings.Index(src[i:], "{{")
		if open < 0 {
			lit.WriteString(src[i:])
			break
		}
		open += i
		lit.WriteString(src[i:open])
		close := strings.Index(src[open+2:], "}}")
		if close < 0 {
			errs = append(errs, templateError{off: open, end: len(src), code: BadTemplate,
				msg: "unterminated template reference: missing }}", hint: "close the reference with }}"})
			lit.WriteString(src[open:])
			break
		}
		close += open + 2
		inner := src[open+2 : close]
		end := close + 2
		if nested := strings.Index(inner, "{{"); nested >= 0 {
			errs = append(errs, templateError{off: open, end: end, code: BadTemplate,
				msg: "nested template reference: {{ inside an open {{ … }}", hint: "write one reference per pair of braces"})
			lit.WriteString(src[open:end])
			i = end
			continue
		}
		ref, msg, hint := parseRef(inner)
		if ref == nil {
			errs = append(errs, templateError{off: open, end: end, code: BadTemplate, msg: msg, hint: hint})
			lit.WriteString(src[open:end])
			i = end
			continue
		}
		if ref.Namespace == "" { // a literal such as {{"{{"}}
			lit.WriteString(ref.Path[0])
			i = end
			continue
		}
		ref.Offset, ref.End = open, end
		flush()
		t.Parts = append(t.Parts, TemplatePart{Ref: ref})
		i = end
	}
	flush()
	return t, errs
}

// parseRef parses the text between the braces. It returns a nil Ref and a
// message when the reference is malformed. {{"{{"}} yields a literal (a Ref
// with an empty namespace whose Path[0] is the text).
func parseRef(inner string) (*Ref, string, string) {
	s := strings.TrimSpace(inner)
	if s == `"{{"` {
		return &Ref{Path: []string{"{{"}}, "", ""
	}
	raw := false
	if strings.HasPrefix(s, "!") {
		raw = true
		s = strings.TrimSpace(s[1:])
	}
	if strings.HasPrefix(s, "include ") || strings.HasPrefix(s, "include\t") {
		return nil, "{{include …}} is not supported by this implementation", "paste the included text into the prompt"
	}
	segs := strings.Split(s, ".")
	if len(segs) < 2 {
		return nil, fmt.Sprintf("invalid reference {{%s}}: expected namespace.path", truncate(s, 40)),
			"write {{vars.name}}, {{input.field}}, {{outputs.node.field}}, {{artifacts.name}}, {{loop.name.iteration}} or {{run.id}}"
	}
	for _, seg := range segs {
		if !isIdent(seg) {
			return nil, fmt.Sprintf("invalid reference {{%s}}: %q is not a name", truncate(s, 40), truncate(seg, 20)),
				"path segments are names made of letters, digits and _"
		}
	}
	ns := segs[0]
	if unsupportedNamespaces[ns] {
		return nil, fmt.Sprintf("the %s namespace is not supported by this implementation", ns),
			"use vars, input, outputs, artifacts, loop or run"
	}
	if !templateNamespaces[ns] {
		hint := "use vars, input, outputs, artifacts, loop or run"
		if near := nearest(ns, []string{"vars", "input", "outputs", "artifacts", "loop", "run"}); near != "" {
			hint = fmt.Sprintf("did you mean {{%s.%s}}?", near, strings.Join(segs[1:], "."))
		}
		return nil, fmt.Sprintf("unknown reference namespace %q", ns), hint
	}
	return &Ref{Namespace: ns, Path: segs[1:], Raw: raw}, "", ""
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(isWordStart(r) || (i > 0 && isDigit(r))) {
			return false
		}
	}
	return true
}
