package dsl

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// firstInvalidUTF8 returns the position of the first byte that is not
// valid UTF-8.
func firstInvalidUTF8(src []byte) Pos {
	pos := Pos{Line: 1, Col: 1}
	for i := 0; i < len(src); {
		r, w := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && w <= 1 {
			pos.Byte = i
			return pos
		}
		if r == '\n' {
			pos.Line++
			pos.Col = 1
		} else {
			pos.Col++
		}
		i += w
	}
	return pos
}

// Parse lexes and parses one workflow file. It always returns a File, partial
// when there are errors, together with every diagnostic found (sorted, capped
// at MaxDiagnostics). The source is untrusted: size and nesting are bounded.
func Parse(name string, src []byte) (*File, Diagnostics) {
	sink := &diagSink{file: name, stage: StageParse, max: MaxDiagnostics}
	f := &File{Name: name, Profile: 1}
	if len(src) > MaxFileSize {
		sink.addFatal(ErrTooLarge, Range{File: name, Start: Pos{Line: 1, Col: 1}, End: Pos{Line: 1, Col: 1}},
			fmt.Sprintf("file is %d bytes, more than the limit of %d", len(src), MaxFileSize),
			"split the workflow or move long prompts out of it")
		return f, finish(sink)
	}
	if !utf8.Valid(src) {
		at := firstInvalidUTF8(src)
		sink.add(SevError, ErrNotUTF8, Range{File: name, Start: at, End: at},
			"the file is not valid UTF-8", "save the file as UTF-8")
	}
	l := lex(name, string(src), sink)
	f.Profile = l.profile
	f.Comments = l.comments
	p := &parser{toks: l.toks, diags: sink, file: f}
	p.parseFile()
	f.partial = l.failed || p.skipped
	if l.stopped {
		// The lexer stopped at a limit: what the parser says past that
		// point is about a truncated file, so it is left out.
		var at Pos
		for _, d := range sink.diags {
			if d.fatal {
				at = d.Subject.Start
			}
		}
		kept := sink.diags[:0]
		for _, d := range sink.diags {
			if d.fatal || d.Subject.Start.Before(at) {
				kept = append(kept, d)
			}
		}
		sink.diags = kept
	}
	return f, finish(sink)
}

// finish sorts a sink's diagnostics, notes any that were dropped, and
// applies the cap (fatal ones always kept).
func finish(s *diagSink) Diagnostics {
	return capDiagnostics(s.withOverflow())
}

type parser struct {
	toks  []token
	i     int
	diags *diagSink
	file  *File
	// skipped is set when recovery discarded tokens or a repeated clause
	// replaced an earlier one: the tree is then not the whole file.
	skipped bool
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) peekN(n int) token {
	if p.i+n < len(p.toks) {
		return p.toks[p.i+n]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) errorAt(start, end Pos, code Code, hint, format string, args ...any) *Diagnostic {
	return p.diags.add(SevError, code, Range{Start: start, End: end}, fmt.Sprintf(format, args...), hint)
}

// unexpected reports the current token as out of place.
func (p *parser) unexpected(want, hint string) {
	t := p.peek()
	p.errorAt(t.pos, t.end, ErrUnexpected, hint, "unexpected %s, expected %s", t.describe(), want)
}

// skipLine discards the rest of the current line and any block nested
// under it: the recovery step after an error, so one mistake yields one
// diagnostic instead of a cascade.
func (p *parser) skipLine() {
	p.skipped = true
	for k := p.peek().kind; k != tokNewline && k != tokEOF; k = p.peek().kind {
		if k == tokDedent {
			return
		}
		p.next()
	}
	p.next()
	p.skipBlock()
}

// skipBlock discards an indented block if one starts here.
func (p *parser) skipBlock() {
	if p.peek().kind != tokIndent {
		return
	}
	p.skipped = true
	depth := 0
	for {
		switch p.next().kind {
		case tokIndent:
			depth++
		case tokDedent:
			depth--
			if depth == 0 {
				return
			}
		case tokEOF:
			return
		}
	}
}

// endOfLine expects the end of a line; extra tokens are reported once.
func (p *parser) endOfLine() {
	t := p.peek()
	switch t.kind {
	case tokNewline:
		p.next()
		return
	case tokEOF, tokDedent:
		return
	}
	p.errorAt(t.pos, t.end, ErrUnexpected, "put one property or edge per line", "unexpected %s at end of line", t.describe())
	p.skipLine()
}

// file = { decl } .
func (p *parser) parseFile() {
	sawDecl, sawHeader := false, false
	for {
		t := p.peek()
		switch {
		case t.kind == tokEOF:
			return
		case t.kind == tokNewline || t.kind == tokDedent:
			p.next()
			continue
		case t.kind == tokIndent:
			p.errorAt(t.pos, p.peekN(1).pos, ErrUnexpected, "declarations start in the first column", "unexpected indentation")
			p.skipBlock()
			continue
		case t.kind == tokIdent && t.text == "dsl" && p.peekN(1).kind == tokColon:
			switch {
			case sawHeader:
				p.errorAt(t.pos, t.end, ErrProfileNotFirst, "keep one dsl: header", "duplicate dsl: header; the first one is kept")
			case sawDecl:
				p.errorAt(t.pos, t.end, ErrProfileNotFirst, "move the dsl: header to the first line of the file", "the profile header must come before every declaration; everything above it was read as profile 1")
			}
			if !sawHeader {
				p.file.Header = t.pos
			}
			sawHeader = true
			// The header is kept in File.Header, not skipped as an error.
			skipped := p.skipped
			p.skipLine()
			p.skipped = skipped || sawDecl || p.file.Header != t.pos
			continue
		}
		sawDecl = true
		switch t.kind {
		case kwVars:
			if d := p.parseVars(); d != nil {
				p.file.Decls = append(p.file.Decls, d)
			}
		case kwPresets:
			p.file.Decls = append(p.file.Decls, p.parsePresets())
		case kwPrompt:
			if d := p.parsePrompt(); d != nil {
				p.file.Decls = append(p.file.Decls, d)
			}
		case kwSchema:
			if d := p.parseSchema(); d != nil {
				p.file.Decls = append(p.file.Decls, d)
			}
		case kwAgent, kwJudge, kwHuman, kwRouter, kwTool, kwCompute, kwEmit, kwWait, kwAwaitAnswers, kwFail:
			if d := p.parseNode(); d != nil {
				p.file.Decls = append(p.file.Decls, d)
			}
		case kwWorkflow:
			p.file.Decls = append(p.file.Decls, p.parseWorkflow())
		case tokIdent:
			if t.text == "mcp_server" {
				if d := p.parseMCPServer(); d != nil {
					p.file.Decls = append(p.file.Decls, d)
				}
				continue
			}
			fallthrough
		default:
			if t.isWord() {
				if what, ok := unsupportedDecls[t.text]; ok {
					p.next()
					d := &UnsupportedDecl{Kw: ident(t)}
					if n := p.peek(); n.isWord() || n.kind == tokString {
						d.Name = ident(n)
					}
					p.errorAt(t.pos, t.end, ErrUnsupported, "remove it, or run this workflow with upstream iterion", "%s are not supported by this implementation", what)
					p.file.Decls = append(p.file.Decls, d)
					// The body is skipped by design; the formatter keeps
					// it verbatim.
					skipped := p.skipped
					p.skipLine()
					p.skipped = skipped
					continue
				}
				hint := "declare one of: " + strings.Join(declKeywords, ", ")
				if near := nearest(t.text, declKeywords); near != "" {
					hint = fmt.Sprintf("did you mean %q?", near)
				}
				p.errorAt(t.pos, t.end, ErrUnknownDecl, hint, "unknown declaration %q", t.text)
			} else {
				p.unexpected("a declaration", "start each declaration in the first column with a keyword such as agent, schema or workflow")
			}
			p.skipLine()
		}
	}
}

var declKeywords = []string{"vars", "presets", "prompt", "schema", "agent", "judge", "human", "router",
	"tool", "compute", "emit", "wait", "await_answers", "fail", "workflow", "mcp_server"}

func ident(t token) Ident { return Ident{Name: t.text, Start: t.pos, End: t.end} }

// header parses "keyword [name] :" and the NEWLINE after it. It returns
// false (after recovering) when the header is malformed.
func (p *parser) header(named bool) (kw, name Ident, ok bool) {
	kw = ident(p.next())
	// Until a name is read, point at the keyword, so that a declaration
	// whose header is malformed still has a position.
	name = Ident{Start: kw.Start, End: kw.End}
	if named {
		t := p.peek()
		if !t.isWord() {
			p.errorAt(t.pos, t.end, ErrExpectedName, fmt.Sprintf("write: %s <name>:", kw.Name), "expected a name after %q, found %s", kw.Name, t.describe())
			p.skipLine()
			return kw, name, false
		}
		name = ident(p.next())
	}
	if t := p.peek(); t.kind != tokColon {
		p.errorAt(t.pos, t.end, ErrExpectedColon, fmt.Sprintf("end the header line with a colon: %s %s:", kw.Name, name.Name), "expected \":\" after %s, found %s", strings.TrimSpace(kw.Name+" "+name.Name), t.describe())
		p.skipLine()
		return kw, name, false
	}
	p.next()
	return kw, name, true
}

// prompt = "prompt" name ":" [ text ] NEWLINE .
func (p *parser) parsePrompt() *PromptDecl {
	kw, name, ok := p.header(true)
	if !ok {
		return nil
	}
	d := &PromptDecl{Kw: kw, Name: name}
	if t := p.peek(); t.kind == tokText {
		p.next()
		d.Body = textLit(t)
	} else if t.kind != tokNewline && t.kind != tokEOF {
		// An inline body: prompt x: "text".
		v := p.parseValue()
		if s, ok := v.(*StringLit); ok {
			d.Body = s
		} else if v != nil {
			start, end := v.Span()
			p.errorAt(start, end, ErrExpectedValue, "write the prompt text on indented lines below the header", "a prompt body must be text")
		}
	}
	if d.Body == nil {
		// A header that shares its line with another declaration gets no
		// body, which no layout of the file can reproduce.
		p.skipped = true
	}
	p.endOfLine()
	return d
}

func textLit(t token) *StringLit {
	return &StringLit{Value: t.val, Style: StyleBlock, Start: t.pos, End: t.end, pieces: t.pieces}
}

// schema = "schema" name ":" NEWLINE INDENT { field } DEDENT .
func (p *parser) parseSchema() *SchemaDecl {
	kw, name, ok := p.header(true)
	if !ok {
		return nil
	}
	return &SchemaDecl{Kw: kw, Name: name, Fields: p.parseFields("schema field")}
}

// vars = "vars" ":" NEWLINE INDENT { field } DEDENT .
func (p *parser) parseVars() *VarsDecl {
	kw, _, ok := p.header(false)
	d := &VarsDecl{Kw: kw}
	if ok {
		d.Fields = p.parseFields("var")
	}
	return d
}

// parseFields parses the body of a schema or vars block:
//
//	field = name ":" type [ "[" "]" ] [ "[" "enum" ":" value { "," value } "]" ] [ "=" value ] NEWLINE .
func (p *parser) parseFields(what string) []*FieldDecl {
	if !p.openBlock() {
		return nil
	}
	var fields []*FieldDecl
	for p.peek().kind != tokDedent && p.peek().kind != tokEOF {
		if p.peek().kind == tokNewline {
			p.next()
			continue
		}
		if f := p.parseField(what); f != nil {
			fields = append(fields, f)
		}
	}
	p.next() // DEDENT
	return fields
}

// openBlock consumes the NEWLINE INDENT that opens a declaration body. A
// missing body is reported by the caller's context; it returns false.
func (p *parser) openBlock() bool {
	if p.peek().kind == tokNewline {
		p.next()
	}
	if p.peek().kind != tokIndent {
		return false
	}
	p.next()
	return true
}

func (p *parser) parseField(what string) *FieldDecl {
	t := p.peek()
	if !t.isWord() {
		p.errorAt(t.pos, t.end, ErrExpectedName, fmt.Sprintf("write each %s as: name: type", what), "expected a %s name, found %s", what, t.describe())
		p.skipLine()
		return nil
	}
	f := &FieldDecl{Name: ident(p.next())}
	if c := p.peek(); c.kind != tokColon {
		p.errorAt(c.pos, c.end, ErrExpectedColon, fmt.Sprintf("write: %s: string", f.Name.Name), "expected \":\" after %s %q, found %s", what, f.Name.Name, c.describe())
		p.skipLine()
		return nil
	}
	p.next()
	ty := p.peek()
	if !ty.isWord() {
		p.errorAt(ty.pos, ty.end, ErrExpectedType, "use one of: string, bool, int, float, json, string[]", "expected a type for %s %q, found %s", what, f.Name.Name, ty.describe())
		p.skipLine()
		return nil
	}
	f.Type = ident(p.next())
	if p.peek().kind == tokLBrack && p.peekN(1).kind == tokRBrack {
		p.next()
		end := p.next()
		f.List = true
		f.Type.End = end.end
	}
	if p.peek().kind == tokLBrack {
		open := p.next()
		f.EnumPos = open.pos
		if kw := p.peek(); !(kw.isWord() && kw.text == "enum") || p.peekN(1).kind != tokColon {
			p.errorAt(kw.pos, kw.end, ErrUnexpected, `write the allowed values as [enum: "a", "b"]`, "expected \"enum:\" in brackets after the type, found %s", kw.describe())
			p.skipLine()
			return f
		}
		p.next()
		p.next()
		f.Enum = []Value{}
		for {
			v := p.parseValue()
			if v == nil {
				p.skipLine()
				return f
			}
			f.Enum = append(f.Enum, v)
			if p.peek().kind == tokComma {
				p.next()
				continue
			}
			break
		}
		if c := p.peek(); c.kind != tokRBrack {
			p.errorAt(c.pos, c.end, ErrUnexpected, "close the enum list with ]", "expected \"]\" after the enum values, found %s", c.describe())
			p.skipLine()
			return f
		}
		p.next()
	}
	if p.peek().kind == tokAssign {
		p.next()
		f.Default = p.parseValue()
		if f.Default == nil {
			p.skipLine()
			return f
		}
	}
	p.endOfLine()
	return f
}

// presets = "presets" ":" NEWLINE INDENT { name ":" NEWLINE block } DEDENT .
func (p *parser) parsePresets() *PresetsDecl {
	kw, _, ok := p.header(false)
	d := &PresetsDecl{Kw: kw}
	if !ok || !p.openBlock() {
		return d
	}
	for p.peek().kind != tokDedent && p.peek().kind != tokEOF {
		t := p.peek()
		if t.kind == tokNewline {
			p.next()
			continue
		}
		if !t.isWord() || p.peekN(1).kind != tokColon {
			p.errorAt(t.pos, t.end, ErrExpectedName, "write each preset as: name: followed by indented var: value lines", "expected a preset name, found %s", t.describe())
			p.skipLine()
			continue
		}
		pr := &PresetDecl{Name: ident(p.next())}
		p.next()
		if p.peek().kind != tokNewline {
			p.unexpected("end of line after the preset name", "write the preset name alone, then its var: value lines indented below")
			p.skipLine()
			continue
		}
		p.next()
		if p.peek().kind == tokIndent {
			p.next()
			pr.Values = p.parseEntries()
		}
		d.Presets = append(d.Presets, pr)
	}
	p.next()
	return d
}

// node = kind name ":" NEWLINE INDENT { entry } DEDENT .
func (p *parser) parseNode() *NodeDecl {
	kw, name, ok := p.header(true)
	if !ok {
		return nil
	}
	d := &NodeDecl{Kind: kw, Name: name}
	if p.peek().kind != tokNewline && p.peek().kind != tokEOF {
		p.unexpected("end of line after the node header", "put each property on its own indented line below the header")
		p.skipLine()
		return d
	}
	if !p.openBlock() {
		p.errorAt(name.Start, name.End, ErrEmptyBody, fmt.Sprintf("add indented properties under %s %s:", kw.Name, name.Name), "%s %q has no body", kw.Name, name.Name)
		return d
	}
	d.Props = p.parseEntries()
	p.checkProps(nodeProps[kw.Name], d.Props, kw.Name)
	return d
}

// mcp-server = "mcp_server" name ":" NEWLINE INDENT { entry } DEDENT .
func (p *parser) parseMCPServer() *MCPServerDecl {
	kw, name, ok := p.header(true)
	if !ok {
		return nil
	}
	d := &MCPServerDecl{Kw: kw, Name: name}
	if p.peek().kind != tokNewline && p.peek().kind != tokEOF {
		p.unexpected("end of line after the mcp_server header", "put each property on its own indented line below the header")
		p.skipLine()
		return d
	}
	if !p.openBlock() {
		p.errorAt(name.Start, name.End, ErrEmptyBody, fmt.Sprintf("add indented properties under mcp_server %s: (transport:, and command: or url:)", name.Name), "mcp_server %q has no body", name.Name)
		return d
	}
	d.Props = p.parseEntries()
	p.checkProps(mcpServerProps, d.Props, "mcp_server")
	return d
}

// checkProps reports duplicate, unknown (E012, with the nearest valid
// name) and unsupported properties.
func (p *parser) checkProps(table map[string]bool, props []*Property, where string) {
	seen := map[string]bool{}
	for _, pr := range props {
		k := pr.Key
		if seen[k.Name] {
			p.errorAt(k.Start, k.End, ErrDuplicateProp, "keep one of them", "duplicate property %q in %s", k.Name, where)
			continue
		}
		seen[k.Name] = true
		supported, known := table[k.Name]
		switch {
		case !known:
			names := supportedNames(table)
			hint := "valid properties: " + strings.Join(names, ", ")
			if near := nearest(k.Name, names); near != "" {
				hint = fmt.Sprintf("did you mean %q?", near)
			}
			p.errorAt(k.Start, k.End, ErrUnknownProp, hint, "unknown property %q in %s", k.Name, where)
		case !supported:
			p.errorAt(k.Start, k.End, ErrUnsupported, "remove it, or run this workflow with upstream iterion", "property %q is not supported by this implementation", k.Name)
		}
	}
}

// parseEntries parses an indented block of entries up to and including its
// DEDENT. The opening INDENT has been consumed.
//
//	entry = key ":" value NEWLINE
//	      | key ":" NEWLINE ( block | dashed-list )
//	      | "with" map NEWLINE .
func (p *parser) parseEntries() []*Property {
	var props []*Property
	for {
		t := p.peek()
		switch {
		case t.kind == tokDedent:
			p.next()
			return props
		case t.kind == tokEOF:
			return props
		case t.kind == tokNewline:
			p.next()
		case t.kind == kwWith && p.peekN(1).kind == tokLBrace:
			p.next()
			m := p.parseMap()
			if m != nil {
				props = append(props, &Property{Key: ident(t), Value: m})
				p.endOfLine()
			} else {
				p.skipLine()
			}
		case t.isWord() && p.peekN(1).kind == tokColon:
			props = append(props, p.parseEntry())
		case t.kind == tokIndent:
			p.errorAt(t.pos, t.end, ErrUnexpected, "align this line with the properties above it", "unexpected indentation")
			p.skipBlock()
		case t.isWord():
			n := p.peekN(1)
			p.errorAt(n.pos, n.end, ErrExpectedColon, fmt.Sprintf("write: %s: value", t.text), "expected \":\" after property %q, found %s", t.text, n.describe())
			p.skipLine()
		default:
			p.errorAt(t.pos, t.end, ErrUnexpected, "write properties as: name: value", "unexpected %s, expected a property", t.describe())
			p.skipLine()
		}
	}
}

func (p *parser) parseEntry() *Property {
	key := ident(p.next())
	colon := p.next()
	pr := &Property{Key: key}
	switch t := p.peek(); t.kind {
	case tokText:
		p.next()
		pr.Value = textLit(t)
		p.endOfLine()
	case tokNewline, tokEOF:
		p.next()
		if p.peek().kind != tokIndent {
			p.errorAt(colon.pos, colon.end, ErrExpectedValue, fmt.Sprintf("give %s a value on the same line or an indented block below", key.Name), "property %q has no value", key.Name)
			return pr
		}
		open := p.next()
		if p.peek().kind == tokDash {
			pr.Value = p.parseDashList(open.pos)
		} else {
			b := &BlockLit{Start: open.pos}
			b.Props = p.parseEntries()
			b.End = p.toks[p.i-1].pos
			pr.Value = b
		}
	default:
		pr.Value = p.parseValue()
		if pr.Value == nil {
			p.skipLine()
			return pr
		}
		p.endOfLine()
	}
	return pr
}

// dashed-list = INDENT { "-" value NEWLINE } DEDENT .
func (p *parser) parseDashList(start Pos) *ListLit {
	l := &ListLit{Start: start, Items: []Value{}}
	for {
		t := p.peek()
		switch t.kind {
		case tokDedent:
			l.End = t.pos
			p.next()
			return l
		case tokEOF:
			l.End = t.pos
			return l
		case tokNewline:
			p.next()
		case tokDash:
			p.next()
			if v := p.parseValue(); v != nil {
				l.Items = append(l.Items, v)
				p.endOfLine()
			} else {
				p.skipLine()
			}
		default:
			p.errorAt(t.pos, t.end, ErrUnexpected, "start each list item with \"- \"", "unexpected %s in a dashed list", t.describe())
			p.skipLine()
		}
	}
}

// value = string | raw | number | bool | word { "." word } | list | map .
func (p *parser) parseValue() Value {
	t := p.peek()
	switch {
	case t.kind == tokString || t.kind == tokRaw:
		p.next()
		style := StyleQuoted
		if t.kind == tokRaw {
			style = StyleRaw
		}
		return &StringLit{Value: t.val, Style: style, Start: t.pos, End: t.end, pieces: t.pieces}
	case t.kind == tokText:
		p.next()
		return textLit(t)
	case t.kind == tokInt || t.kind == tokFloat:
		p.next()
		return &NumberLit{Text: t.text, IsFloat: t.kind == tokFloat, Start: t.pos, End: t.end}
	case t.kind == kwTrue || t.kind == kwFalse:
		p.next()
		return &BoolLit{Value: t.kind == kwTrue, Start: t.pos, End: t.end}
	case t.isWord():
		p.next()
		w := &WordLit{Ident: ident(t)}
		for p.peek().kind == tokDot && p.peekN(1).isWord() {
			p.next()
			part := p.next()
			w.Name += "." + part.text
			w.End = part.end
		}
		return w
	case t.kind == tokLBrack:
		return p.parseList()
	case t.kind == tokLBrace:
		// A nil *MapLit must not become a non-nil Value.
		if m := p.parseMap(); m != nil {
			return m
		}
		return nil
	}
	p.errorAt(t.pos, t.end, ErrExpectedValue, `write a value: "text", a name, a number, true/false, [a, b] or { key: "value" }`, "expected a value, found %s", t.describe())
	return nil
}

// list = "[" [ value { "," value } [ "," ] ] "]" .
func (p *parser) parseList() Value {
	open := p.next()
	l := &ListLit{Start: open.pos, Items: []Value{}}
	for {
		if t := p.peek(); t.kind == tokRBrack {
			p.next()
			l.End = t.end
			return l
		}
		v := p.parseValue()
		if v == nil {
			p.skipBrackets(tokRBrack)
			return nil
		}
		l.Items = append(l.Items, v)
		switch t := p.peek(); t.kind {
		case tokComma:
			p.next()
		case tokRBrack:
		default:
			p.errorAt(t.pos, t.end, ErrUnexpected, "separate list items with commas and close the list with ]", "unexpected %s in a list", t.describe())
			p.skipBrackets(tokRBrack)
			return nil
		}
	}
}

// map = "{" [ key ":" value { "," key ":" value } [ "," ] ] "}" .
func (p *parser) parseMap() *MapLit {
	open := p.next()
	m := &MapLit{Start: open.pos}
	seen := map[string]bool{}
	for {
		t := p.peek()
		if t.kind == tokRBrace {
			p.next()
			m.End = t.end
			return m
		}
		if !(t.isWord() || t.kind == tokString) || p.peekN(1).kind != tokColon {
			p.errorAt(t.pos, t.end, ErrUnexpected, `write entries as { key: "value", other: "value" }`, "unexpected %s in a map, expected key: value", t.describe())
			p.skipBrackets(tokRBrace)
			return nil
		}
		p.next()
		p.next()
		key := ident(t)
		if t.kind == tokString {
			key.Name = t.val
		}
		v := p.parseValue()
		if v == nil {
			p.skipBrackets(tokRBrace)
			return nil
		}
		if seen[key.Name] {
			p.errorAt(key.Start, key.End, ErrDuplicateKey, "keep one of them", "duplicate key %q", key.Name)
		}
		seen[key.Name] = true
		m.Entries = append(m.Entries, &Property{Key: key, Value: v})
		switch t := p.peek(); t.kind {
		case tokComma:
			p.next()
		case tokRBrace:
		default:
			p.errorAt(t.pos, t.end, ErrUnexpected, "separate entries with commas and close the map with }", "unexpected %s in a map", t.describe())
			p.skipBrackets(tokRBrace)
			return nil
		}
	}
}

// skipBrackets skips to the closing bracket kind close (or the end of the
// line) after an error inside a list or map.
func (p *parser) skipBrackets(close tokenKind) {
	p.skipped = true
	for {
		switch p.peek().kind {
		case close:
			p.next()
			return
		case tokNewline, tokEOF, tokDedent:
			return
		}
		p.next()
	}
}

// workflow = "workflow" name ":" NEWLINE INDENT { entry | vars | edge } DEDENT .
func (p *parser) parseWorkflow() *WorkflowDecl {
	kw, name, ok := p.header(true)
	d := &WorkflowDecl{Kw: kw, Name: name}
	if !ok {
		return d
	}
	if !p.openBlock() {
		p.errorAt(name.Start, name.End, ErrEmptyBody, "add entry: and the edges of the workflow", "workflow %q has no body", name.Name)
		return d
	}
	for {
		t := p.peek()
		switch {
		case t.kind == tokDedent:
			p.next()
			p.checkProps(workflowProps, d.Props, "workflow")
			for _, pr := range d.Props {
				if b, ok := pr.Value.(*BlockLit); ok && pr.Key.Name == "budget" {
					p.checkProps(budgetProps, b.Props, "budget")
				}
			}
			return d
		case t.kind == tokEOF:
			return d
		case t.kind == tokNewline:
			p.next()
		case p.lineHasArrow():
			if e := p.parseEdge(); e != nil {
				d.Edges = append(d.Edges, e)
			}
		case t.kind == kwVars && p.peekN(1).kind == tokColon:
			v := p.parseVars()
			if d.Vars != nil {
				p.skipped = true
				p.errorAt(v.Kw.Start, v.Kw.End, ErrDuplicateProp, "merge the two vars blocks", "duplicate vars block in workflow")
			}
			d.Vars = v
		default:
			if props, ok := p.parseOneEntry(); ok {
				d.Props = append(d.Props, props...)
			}
		}
	}
}

// parseOneEntry parses a single property line inside a workflow body.
func (p *parser) parseOneEntry() ([]*Property, bool) {
	t := p.peek()
	switch {
	case t.isWord() && p.peekN(1).kind == tokColon:
		return []*Property{p.parseEntry()}, true
	case t.kind == tokIndent:
		p.errorAt(t.pos, t.end, ErrUnexpected, "align this line with the lines above it", "unexpected indentation")
		p.skipBlock()
	case t.isWord():
		n := p.peekN(1)
		p.errorAt(n.pos, n.end, ErrUnexpected, "write a property (name: value) or an edge (a -> b)", "unexpected %s after %q", n.describe(), t.text)
		p.skipLine()
	default:
		p.errorAt(t.pos, t.end, ErrUnexpected, "write a property (name: value) or an edge (a -> b)", "unexpected %s in workflow", t.describe())
		p.skipLine()
	}
	return nil, false
}

// lineHasArrow reports whether the current line holds "->".
func (p *parser) lineHasArrow() bool {
	for j := p.i; j < len(p.toks); j++ {
		switch p.toks[j].kind {
		case tokArrow:
			return true
		case tokNewline, tokEOF, tokIndent, tokDedent:
			return false
		}
	}
	return false
}

// edge   = name "->" name { "->" name } { clause } NEWLINE .
// clause = "when" [ "not" ] ( name | string ) | "else"
//
//	| "as" name "(" value ")" | "with" map .
func (p *parser) parseEdge() *EdgeStmt {
	e := &EdgeStmt{}
	t := p.peek()
	if !t.isWord() {
		p.errorAt(t.pos, t.end, ErrExpectedName, "start an edge with a node name: a -> b", "expected a node name, found %s", t.describe())
		p.skipLine()
		return nil
	}
	e.Chain = append(e.Chain, ident(p.next()))
	clauses := false
	for {
		t := p.peek()
		switch {
		case t.kind == tokNewline || t.kind == tokEOF || t.kind == tokDedent:
			p.endOfLine()
			if len(e.Chain) < 2 {
				p.errorAt(e.Chain[0].Start, e.Chain[0].End, ErrExpectedName, "write an edge as: from -> to", "edge has no target")
				return nil
			}
			return e
		case t.kind == tokArrow:
			if clauses {
				p.errorAt(t.pos, t.end, ErrClauseBeforeArrow, "put when/else/as/with clauses after the last node of the chain, or split the chain into separate edges", "clause before a further \"->\": clauses bind to the last segment of a chain")
				p.skipLine()
				return nil
			}
			p.next()
			n := p.peek()
			if !n.isWord() {
				p.errorAt(n.pos, n.end, ErrExpectedName, "name the target node after ->", "expected a node name after \"->\", found %s", n.describe())
				p.skipLine()
				return nil
			}
			e.Chain = append(e.Chain, ident(p.next()))
		case t.kind == kwWhen:
			clauses = true
			if !p.parseWhen(e) {
				return nil
			}
		case t.kind == kwElse:
			clauses = true
			p.next()
			if e.Else.IsValid() {
				p.errorAt(t.pos, t.end, ErrDuplicateClause, "keep one else", "duplicate else clause")
			}
			e.Else = t.pos
		case t.kind == kwAs:
			clauses = true
			if !p.parseLoop(e) {
				return nil
			}
		case t.kind == kwWith:
			clauses = true
			p.next()
			if p.peek().kind != tokLBrace {
				p.unexpected(`"{" after with`, `write with { key: "value" }`)
				p.skipLine()
				return nil
			}
			if e.With != nil {
				p.skipped = true
				p.errorAt(t.pos, t.end, ErrDuplicateClause, "merge the two with maps", "duplicate with clause")
			}
			m := p.parseMap()
			if m == nil {
				p.skipLine()
				return nil
			}
			e.With = m
		default:
			p.errorAt(t.pos, t.end, ErrUnexpected, "edge clauses are: when [not] field, when \"expr\", else, as name(N), with { … }", "unexpected %s in edge", t.describe())
			p.skipLine()
			return nil
		}
	}
}

func (p *parser) parseWhen(e *EdgeStmt) bool {
	w := p.next()
	if e.When != nil {
		p.skipped = true
		p.errorAt(w.pos, w.end, ErrDuplicateClause, "combine the conditions in one when \"expression\"", "duplicate when clause")
	}
	g := &Guard{When: w.pos}
	if p.peek().kind == kwNot {
		p.next()
		g.Not = true
	}
	switch t := p.peek(); {
	case t.isWord():
		id := ident(p.next())
		g.Field = &id
	case t.kind == tokString || t.kind == tokRaw:
		p.next()
		g.Expr = &StringLit{Value: t.val, Style: StyleQuoted, Start: t.pos, End: t.end, pieces: t.pieces}
	default:
		p.errorAt(t.pos, t.end, ErrExpectedValue, `write when field, when not field, or when "expression"`, "expected a field or a quoted expression after when, found %s", t.describe())
		p.skipLine()
		return false
	}
	e.When = g
	return true
}

func (p *parser) parseLoop(e *EdgeStmt) bool {
	as := p.next()
	if e.Loop != nil {
		p.errorAt(as.pos, as.end, ErrDuplicateClause, "keep one loop declaration", "duplicate as clause")
	}
	n := p.peek()
	if n.isWord() && (n.text == "foreach" || n.text == "unbounded") && p.peekN(1).kind != tokLParen {
		p.errorAt(n.pos, n.end, ErrUnsupported, "use a bounded loop: as name(N)", "%s loops are not supported by this implementation", n.text)
		p.skipLine()
		return false
	}
	if !n.isWord() {
		p.errorAt(n.pos, n.end, ErrExpectedName, "write the loop as: as name(N)", "expected a loop name after as, found %s", n.describe())
		p.skipLine()
		return false
	}
	lc := &LoopClause{As: as.pos, Name: ident(p.next())}
	if t := p.peek(); t.kind != tokLParen {
		p.errorAt(t.pos, t.end, ErrExpectedValue, fmt.Sprintf("write the bound in parentheses: as %s(3)", lc.Name.Name), "expected \"(\" and a maximum after loop %q, found %s", lc.Name.Name, t.describe())
		p.skipLine()
		return false
	}
	p.next()
	lc.Count = p.parseValue()
	if lc.Count == nil {
		p.skipLine()
		return false
	}
	if t := p.peek(); t.kind != tokRParen {
		p.errorAt(t.pos, t.end, ErrUnexpected, "close the loop bound with )", "expected \")\", found %s", t.describe())
		p.skipLine()
		return false
	}
	p.next()
	e.Loop = lc
	return true
}
