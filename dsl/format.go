package dsl

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// The formatter: iterion fmt. It prints a parsed file in the one canonical
// layout:
//
//   - a "dsl: N" header first when the file has one, then the declarations,
//     one blank line between them;
//   - two spaces of indentation per level, "key: value" with one space
//     after the colon, and inside a body at most one blank line where the
//     source had one or more;
//   - edges as "a -> b when [not] x else as name(n) with { … }";
//   - lists as [a, b] and maps as { k: v } on one line when they fit in
//     maxWidth columns and hold no comment, and otherwise one item per line
//     (a dashed list for a property's value, a bracketed list with trailing
//     commas elsewhere);
//   - | blocks and prompt bodies indented one level under their owner.
//
// Values keep their meaning byte for byte: quoted and raw strings are
// copied from the source, since their decoding depends on the profile and
// on the strict-escape directive, and block texts are re-indented so that
// they decode to the same value. An unsupported declaration's body, which
// the parser does not read, is copied verbatim. Every comment is put back,
// in order: a comment alone on its line before the construct that follows
// it, at that construct's indentation (or inside the block it was indented
// into), a trailing comment after its line.

// maxWidth is the column past which an inline list or map is broken.
const maxWidth = 100

// Format parses src and returns it in canonical form. A file the parser had
// to recover in (a syntax error) is not formatted: the error is then the
// file's Diagnostics. Diagnostics that leave the tree whole (an unknown or
// unsupported property, an unsupported declaration, a duplicate, an empty
// body) do not stop it, so workflows written for upstream iterion can be
// formatted too. The result is checked before it is returned: it must parse
// to the same tree with the same comments, or Format fails rather than
// change the file's meaning.
func Format(name string, src []byte) ([]byte, error) {
	f, ds := Parse(name, src)
	if f.partial || !formattable(ds) {
		return nil, errorsOf(name, ds)
	}
	out := formatFile(f, string(src))
	g, gds := Parse(name, out)
	if g.partial || !formattable(gds) || strippedTree(g) != strippedTree(f) || !slices.Equal(commentTexts(g), commentTexts(f)) {
		return nil, fmt.Errorf("formatting %s: the canonical form would not mean the same as the file, which was left unchanged; this is a bug in iterion fmt", name)
	}
	return out, nil
}

// formattable reports whether every error in ds leaves the tree whole.
func formattable(ds Diagnostics) bool {
	for _, d := range ds {
		if d.Severity != SevError {
			continue
		}
		switch d.Code {
		case ErrUnknownProp, ErrUnsupported, ErrDuplicate, ErrMissingProp, ErrTooManyDiags:
		default:
			return false
		}
	}
	return true
}

// errSharedLine is Format's error for the one tree that is partial without
// an error diagnostic: a prompt header on the line of another declaration.
var errSharedLine = errors.New("a prompt declaration shares its line with another declaration; start each declaration on a line of its own")

// errorsOf returns the errors of ds as the error Format fails with.
func errorsOf(name string, ds Diagnostics) error {
	var errs Diagnostics
	for _, d := range ds {
		if d.Severity == SevError {
			errs = append(errs, d)
		}
	}
	if len(errs) == 0 {
		return fmt.Errorf("formatting %s: %w", name, errSharedLine)
	}
	return errs
}

// strippedTree prints f's tree without positions (every @line:col): two
// files with the same strippedTree mean the same.
func strippedTree(f *File) string {
	s := f.String()
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '@' {
			if j := posMarkEnd(s, i+1); j > 0 {
				i = j - 1
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// posMarkEnd returns the end of "line:col" at s[i:], or 0 when there is none.
func posMarkEnd(s string, i int) int {
	digits := func(i int) int {
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i {
			return 0
		}
		return j
	}
	j := digits(i)
	if j == 0 || j >= len(s) || s[j] != ':' {
		return 0
	}
	return digits(j + 1)
}

func commentTexts(f *File) []string {
	texts := make([]string, len(f.Comments))
	for i, c := range f.Comments {
		texts[i] = c.Text
	}
	return texts
}

type formatter struct {
	src  string
	file *File
	out  strings.Builder
	cur  strings.Builder // the output line being built
	// comments[next:] are still to be printed.
	comments []Comment
	next     int
	// lastEnd is the source offset just past the last construct or
	// comment printed, -1 before the first.
	lastEnd int
	// forceBlank puts one blank line before the next line (between
	// declarations); blockStart suppresses it (first line of a body).
	forceBlank bool
	blockStart bool
}

func formatFile(f *File, src string) []byte {
	p := &formatter{src: src, file: f, comments: f.Comments, lastEnd: -1}
	if f.Header.IsValid() {
		p.open(f.Header, 0)
		fmt.Fprintf(&p.cur, "dsl: %d", f.Profile)
		p.close(f.Header)
		p.forceBlank = true
	}
	for i, d := range f.Decls {
		limit := len(src)
		if i+1 < len(f.Decls) {
			limit = f.Decls[i+1].Keyword().Start.Byte
		}
		if i > 0 {
			p.forceBlank = true
		}
		p.decl(d, limit)
	}
	p.leading(len(src)+1, 0)
	return []byte(p.out.String())
}

// open starts an output line for the construct at start: the comments
// before it come first, then a blank line where one belongs.
func (p *formatter) open(start Pos, indent int) {
	p.leading(start.Byte, indent)
	p.blank(start.Byte)
	p.indent(indent)
}

func (p *formatter) indent(n int) {
	for range n {
		p.cur.WriteString("  ")
	}
}

// close ends the current line, whose source text reached end, with the
// comment that trailed that source line if any. A comment that follows
// more values on its source line (a list broken after its first line)
// waits for the last of them.
func (p *formatter) close(end Pos) {
	p.lastEnd = max(p.lastEnd, end.Byte)
	if p.next < len(p.comments) {
		if c := p.comments[p.next]; !c.OwnLine && c.Start.Line <= end.Line && (c.Start.Byte < end.Byte || onlyPunctuation(p.src[end.Byte:c.Start.Byte])) {
			p.cur.WriteString(" " + c.Text)
			p.lastEnd = max(p.lastEnd, c.End.Byte)
			p.next++
		}
	}
	p.out.WriteString(strings.TrimRight(p.cur.String(), " "))
	p.out.WriteByte('\n')
	p.cur.Reset()
}

// onlyPunctuation reports whether s holds no value: blanks, separators and
// brackets.
func onlyPunctuation(s string) bool {
	return strings.Trim(s, " \t\r,:|[]{}()") == ""
}

// blank writes the blank line that belongs before source offset at: one
// between declarations, none at the start of a body, and elsewhere one
// where the source had at least one.
func (p *formatter) blank(at int) {
	switch {
	case p.forceBlank:
		if p.out.Len() > 0 {
			p.out.WriteByte('\n')
		}
	case p.blockStart:
	case p.lastEnd >= 0 && p.lastEnd < at && hasBlankLine(p.src[p.lastEnd:at]):
		p.out.WriteByte('\n')
	}
	p.forceBlank, p.blockStart = false, false
}

// hasBlankLine reports whether s, the source between two constructs,
// holds an empty line.
func hasBlankLine(s string) bool {
	lines := strings.Split(s, "\n")
	if len(lines) < 3 {
		return false
	}
	for _, l := range lines[1 : len(lines)-1] {
		if strings.TrimSpace(l) == "" {
			return true
		}
	}
	return false
}

// leading prints, each on its own line at indent, the comments that come
// before source offset limit.
func (p *formatter) leading(limit, indent int) {
	for p.next < len(p.comments) && p.comments[p.next].Start.Byte < limit {
		p.comment(indent)
	}
}

func (p *formatter) comment(indent int) {
	c := p.comments[p.next]
	p.next++
	p.blank(c.Start.Byte)
	p.indent(indent)
	p.cur.WriteString(c.Text)
	p.out.WriteString(p.cur.String())
	p.out.WriteByte('\n')
	p.cur.Reset()
	p.lastEnd = max(p.lastEnd, c.End.Byte)
}

// tail prints the comments before limit that are indented deeper than
// column ownerCol: they close the body of the construct there.
func (p *formatter) tail(limit, ownerCol, indent int) {
	for p.next < len(p.comments) {
		c := p.comments[p.next]
		if c.Start.Byte >= limit || c.Start.Col <= ownerCol {
			return
		}
		p.comment(indent)
	}
}

// text is the source text of a span.
func (p *formatter) text(start, end Pos) string { return p.src[start.Byte:end.Byte] }

func (p *formatter) decl(d Decl, limit int) {
	switch d := d.(type) {
	case *PromptDecl:
		p.open(d.Kw.Start, 0)
		p.cur.WriteString("prompt " + d.Name.Name + ":")
		if d.Body == nil || d.Body.Style == StyleBlock {
			p.close(d.Name.End)
			if d.Body != nil {
				p.blockText(d.Body, 1, p.file.Profile == 2)
			}
			return
		}
		p.cur.WriteByte(' ')
		p.value(d.Body, 0)
		p.close(d.Body.End)
	case *SchemaDecl:
		p.header(d.Kw.Start, 0, "schema "+d.Name.Name+":", d.Name.End)
		p.fields(d.Fields, 1, d.Kw.Start.Col, limit)
	case *VarsDecl:
		p.header(d.Kw.Start, 0, "vars:", d.Kw.End)
		p.fields(d.Fields, 1, d.Kw.Start.Col, limit)
	case *PresetsDecl:
		p.header(d.Kw.Start, 0, "presets:", d.Kw.End)
		for i, pr := range d.Presets {
			plimit := limit
			if i+1 < len(d.Presets) {
				plimit = d.Presets[i+1].Name.Start.Byte
			}
			p.header(pr.Name.Start, 1, pr.Name.Name+":", pr.Name.End)
			p.props(pr.Values, 2, pr.Name.Start.Col, plimit)
		}
		p.tail(limit, d.Kw.Start.Col, 1)
	case *NodeDecl:
		p.header(d.Kind.Start, 0, d.Kind.Name+" "+d.Name.Name+":", d.Name.End)
		p.props(d.Props, 1, d.Kind.Start.Col, limit)
	case *WorkflowDecl:
		p.header(d.Kw.Start, 0, "workflow "+d.Name.Name+":", d.Name.End)
		p.workflowBody(d, limit)
	case *MCPServerDecl:
		p.header(d.Kw.Start, 0, "mcp_server "+d.Name.Name+":", d.Name.End)
		p.props(d.Props, 1, d.Kw.Start.Col, limit)
	case *UnsupportedDecl:
		p.verbatim(d, limit)
	}
}

// header prints a line that opens a body.
func (p *formatter) header(start Pos, indent int, text string, end Pos) {
	p.open(start, indent)
	p.cur.WriteString(text)
	p.close(end)
	p.blockStart = true
}

// workflowBody prints a workflow's properties, vars block and edges in
// their source order.
func (p *formatter) workflowBody(d *WorkflowDecl, limit int) {
	type item struct {
		at  int
		put func(limit int)
	}
	var items []item
	for _, pr := range d.Props {
		items = append(items, item{pr.Key.Start.Byte, func(l int) { p.prop(pr, 1, l) }})
	}
	if v := d.Vars; v != nil {
		items = append(items, item{v.Kw.Start.Byte, func(l int) {
			p.open(v.Kw.Start, 1)
			p.cur.WriteString("vars:")
			p.close(v.Kw.End)
			p.blockStart = true
			p.fields(v.Fields, 2, v.Kw.Start.Col, l)
		}})
	}
	for _, e := range d.Edges {
		items = append(items, item{e.Chain[0].Start.Byte, func(int) { p.edge(e, 1) }})
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].at < items[j].at })
	for i, it := range items {
		l := limit
		if i+1 < len(items) {
			l = items[i+1].at
		}
		it.put(l)
	}
	p.tail(limit, d.Kw.Start.Col, 1)
}

// fields prints schema fields or vars.
func (p *formatter) fields(fields []*FieldDecl, indent, ownerCol, limit int) {
	for _, f := range fields {
		p.open(f.Name.Start, indent)
		p.cur.WriteString(f.Name.Name + ": " + f.Type.Name)
		end := f.Type.End
		if f.List {
			p.cur.WriteString("[]")
		}
		if f.Enum != nil {
			p.cur.WriteString(" [enum: ")
			for i, v := range f.Enum {
				if i > 0 {
					p.cur.WriteString(", ")
				}
				p.value(v, indent)
				_, end = v.Span()
			}
			p.cur.WriteString("]")
		}
		if f.Default != nil {
			p.cur.WriteString(" = ")
			p.value(f.Default, indent)
			_, end = f.Default.Span()
		}
		p.close(end)
	}
	p.tail(limit, ownerCol, indent)
}

// props prints the entries of a body at indent; limit is where the source
// of the next construct after the body starts.
func (p *formatter) props(props []*Property, indent, ownerCol, limit int) {
	for i, pr := range props {
		l := limit
		if i+1 < len(props) {
			l = props[i+1].Key.Start.Byte
		}
		p.prop(pr, indent, l)
	}
	p.tail(limit, ownerCol, indent)
}

func (p *formatter) prop(pr *Property, indent, limit int) {
	p.open(pr.Key.Start, indent)
	key := pr.Key.Name
	switch v := pr.Value.(type) {
	case nil:
		p.cur.WriteString(key + ":")
		p.close(pr.Key.End)
	case *MapLit:
		if key == "with" {
			p.cur.WriteString("with ")
		} else {
			p.cur.WriteString(key + ": ")
		}
		p.value(v, indent)
		p.close(v.End)
	case *BlockLit:
		p.cur.WriteString(key + ":")
		p.close(pr.Key.End)
		p.blockStart = true
		p.props(v.Props, indent+1, pr.Key.Start.Col, limit)
	case *StringLit:
		if v.Style == StyleBlock {
			p.cur.WriteString(key + ": |")
			p.close(v.Start)
			p.blockText(v, indent+1, true)
			return
		}
		p.cur.WriteString(key + ": ")
		p.value(v, indent)
		p.close(v.End)
	case *ListLit:
		if p.dashed(pr.Key, v, len(key)+2) {
			p.cur.WriteString(key + ":")
			p.close(pr.Key.End)
			p.blockStart = true
			for _, it := range v.Items {
				start, end := it.Span()
				p.open(start, indent+1)
				if s, ok := it.(*StringLit); ok && s.Style == StyleBlock {
					p.cur.WriteString("- |")
					p.close(s.Start)
					p.blockText(s, indent+2, true)
					continue
				}
				p.cur.WriteString("- ")
				p.value(it, indent+1)
				p.close(end)
			}
			p.tail(limit, pr.Key.Start.Col, indent+1)
			return
		}
		p.cur.WriteString(key + ": ")
		p.value(v, indent)
		p.close(v.End)
	default:
		p.cur.WriteString(key + ": ")
		p.value(v, indent)
		_, end := v.Span()
		p.close(end)
	}
}

// dashed reports whether a property's list value is printed as a dashed
// list: when it does not fit on the line after the key and its colon, which
// take keyWidth columns, or a comment lies between the key and the list's
// end. A comment that trailed the first line of the list trails the key's
// line once the list is dashed, so it must keep the list dashed.
func (p *formatter) dashed(key Ident, l *ListLit, keyWidth int) bool {
	return p.commentWithin(key.End.Byte, l.End.Byte) || !p.fitsAfter(l, keyWidth)
}

// fits reports whether a list or map is printed inline from the current
// position: no comment inside it, nothing inside that must break, and the
// line no longer than maxWidth.
func (p *formatter) fits(v Value) bool { return p.fitsAfter(v, 0) }

func (p *formatter) fitsAfter(v Value, extra int) bool {
	if p.breaks(v) {
		return false
	}
	first, _, _ := strings.Cut(p.inline(v), "\n")
	return utf8.RuneCountInString(p.cur.String())+extra+utf8.RuneCountInString(first) <= maxWidth
}

// breaks reports whether a value can never be printed inline: a comment
// lies inside it, or it holds a block text.
func (p *formatter) breaks(v Value) bool {
	switch v := v.(type) {
	case *StringLit:
		return v.Style == StyleBlock
	case *ListLit:
		if p.commentWithin(v.Start.Byte, v.End.Byte) {
			return true
		}
		return slices.ContainsFunc(v.Items, p.breaks)
	case *MapLit:
		if p.commentWithin(v.Start.Byte, v.End.Byte) {
			return true
		}
		for _, e := range v.Entries {
			if p.breaks(e.Value) {
				return true
			}
		}
	}
	return false
}

func (p *formatter) commentWithin(start, end int) bool {
	i := sort.Search(len(p.comments), func(i int) bool { return p.comments[i].Start.Byte >= start })
	return i < len(p.comments) && p.comments[i].Start.Byte < end
}

// inline renders a value on one line (raw strings keep their line breaks).
func (p *formatter) inline(v Value) string {
	switch v := v.(type) {
	case *StringLit:
		return p.text(v.Start, v.End)
	case *WordLit:
		return v.Name
	case *NumberLit:
		return v.Text
	case *BoolLit:
		if v.Value {
			return "true"
		}
		return "false"
	case *ListLit:
		items := make([]string, len(v.Items))
		for i, it := range v.Items {
			items[i] = p.inline(it)
		}
		return "[" + strings.Join(items, ", ") + "]"
	case *MapLit:
		if len(v.Entries) == 0 {
			return "{}"
		}
		items := make([]string, len(v.Entries))
		for i, e := range v.Entries {
			items[i] = p.text(e.Key.Start, e.Key.End) + ": " + p.inline(e.Value)
		}
		return "{ " + strings.Join(items, ", ") + " }"
	}
	return ""
}

// value writes v into the current line; a list or map that does not fit
// is broken over lines, one item per line at indent+1, its closing bracket
// starting the line the caller then finishes.
func (p *formatter) value(v Value, indent int) {
	switch v := v.(type) {
	case *ListLit:
		if p.fits(v) {
			break
		}
		p.cur.WriteString("[")
		p.close(v.Start)
		p.blockStart = true
		for _, it := range v.Items {
			start, end := it.Span()
			p.open(start, indent+1)
			p.value(it, indent+1)
			p.cur.WriteString(",")
			p.close(end)
		}
		p.closeBracket(v.End, indent, "]")
		return
	case *MapLit:
		if p.fits(v) {
			break
		}
		p.cur.WriteString("{")
		p.close(v.Start)
		p.blockStart = true
		for _, e := range v.Entries {
			_, end := e.Value.Span()
			p.open(e.Key.Start, indent+1)
			p.cur.WriteString(p.text(e.Key.Start, e.Key.End) + ": ")
			p.value(e.Value, indent+1)
			p.cur.WriteString(",")
			p.close(end)
		}
		p.closeBracket(v.End, indent, "}")
		return
	}
	p.cur.WriteString(p.inline(v))
}

// closeBracket prints the comments left inside a broken list or map, then
// starts the line of its closing bracket; end is just past the bracket.
func (p *formatter) closeBracket(end Pos, indent int, bracket string) {
	at := end.Byte - 1
	p.leading(at, indent+1)
	p.blockStart = false
	p.indent(indent)
	p.cur.WriteString(bracket)
	p.lastEnd = max(p.lastEnd, at)
}

// edge prints "a -> b when … else as n(…) with {…}".
func (p *formatter) edge(e *EdgeStmt, indent int) {
	p.open(e.Chain[0].Start, indent)
	end := e.Chain[len(e.Chain)-1].End
	later := func(q Pos) {
		if end.Before(q) {
			end = q
		}
	}
	for i, id := range e.Chain {
		if i > 0 {
			p.cur.WriteString(" -> ")
		}
		p.cur.WriteString(id.Name)
	}
	if g := e.When; g != nil {
		p.cur.WriteString(" when ")
		if g.Not {
			p.cur.WriteString("not ")
		}
		if g.Field != nil {
			p.cur.WriteString(g.Field.Name)
			later(g.Field.End)
		} else {
			p.cur.WriteString(p.text(g.Expr.Start, g.Expr.End))
			later(g.Expr.End)
		}
	}
	if e.Else.IsValid() {
		p.cur.WriteString(" else")
		later(Pos{Line: e.Else.Line, Col: e.Else.Col + 4, Byte: e.Else.Byte + 4})
	}
	if l := e.Loop; l != nil {
		p.cur.WriteString(" as " + l.Name.Name + "(")
		p.value(l.Count, indent)
		p.cur.WriteString(")")
		_, ce := l.Count.Span()
		later(ce)
	}
	if e.With != nil {
		p.cur.WriteString(" with ")
		p.value(e.With, indent)
		later(e.With.End)
	}
	p.close(end)
}

// blockText prints the lines of a | block or prompt body at indent so that
// they decode to the same value. A profile 1 prompt body drops blank lines
// from its value; one is put back where the source had any.
func (p *formatter) blockText(s *StringLit, indent int, keepBlank bool) {
	if s.Value == "" {
		return
	}
	prefix := strings.Repeat("  ", indent)
	for i, line := range strings.Split(s.Value, "\n") {
		if !keepBlank && i > 0 && i < len(s.pieces) && s.pieces[i].pos.Line-s.pieces[i-1].pos.Line > 1 {
			p.out.WriteByte('\n')
		}
		if line == "" {
			p.out.WriteByte('\n')
			continue
		}
		p.out.WriteString(prefix + line + "\n")
	}
	// The source of the body ends with its last line.
	last := s.pieces[len(s.pieces)-1].pos.Byte
	if nl := strings.IndexByte(p.src[last:], '\n'); nl >= 0 {
		last += nl
	} else {
		last = len(p.src)
	}
	p.lastEnd = max(p.lastEnd, last)
	p.blockStart = false
}

// verbatim copies an unsupported declaration as written, up to the
// blank lines and column-1 comments that precede the next declaration.
func (p *formatter) verbatim(d *UnsupportedDecl, limit int) {
	start := d.Kw.Start.Byte
	end := limit
	for {
		body := strings.TrimRight(p.src[start:end], "\r\n")
		cut := strings.LastIndexByte(body, '\n') + 1
		line := body[cut:]
		if cut > 0 && (strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") && p.ownLineCommentAt(start+cut)) {
			end = start + cut
			continue
		}
		end = start + len(body)
		break
	}
	p.leading(start, 0)
	p.blank(start)
	for p.next < len(p.comments) && p.comments[p.next].Start.Byte < end {
		p.next++
	}
	p.out.WriteString(p.src[start:end])
	p.out.WriteByte('\n')
	p.lastEnd = max(p.lastEnd, end)
}

func (p *formatter) ownLineCommentAt(at int) bool {
	i := sort.Search(len(p.comments), func(i int) bool { return p.comments[i].Start.Byte >= at })
	return i < len(p.comments) && p.comments[i].Start.Byte == at && p.comments[i].OwnLine
}
