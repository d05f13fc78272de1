package dsl

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

const eof = -1

// Limits on hostile input. They are generous for hand-written workflows and
// small enough that a file crafted to exhaust the front end cannot.
const (
	// MaxFileSize is the largest workflow file accepted, in bytes.
	MaxFileSize = 1 << 20
	// MaxDepth bounds nesting: indentation levels plus open brackets.
	MaxDepth = 32
	// MaxDiagnostics caps the diagnostics one file produces; the rest are
	// summarised in a final note.
	MaxDiagnostics = 50
	// MaxTokens bounds the tokens of one file, and so the memory the
	// front end spends on it (a token is about a hundred bytes): a file dense
	// with punctuation reaches it before MaxFileSize.
	MaxTokens = 1 << 18
	// MaxReferenceUses bounds the template and expression references the
	// compiler checks, each counted once for every node that reads it: a
	// prompt of 1,000 references used by 100 nodes counts 100,000. Only a
	// prompt shared by many nodes comes near it; past it the compiler
	// reports E091 and checks no further references.
	MaxReferenceUses = 1 << 20
)

// stateFn is one state of the lexer; it returns the next state, nil to stop.
type stateFn func(*lexer) stateFn

// lexer turns source text into tokens. It is a state-function machine run
// synchronously to completion (no goroutine): lex returns the whole token
// slice, bounded by MaxFileSize.
type lexer struct {
	file  string
	src   string
	diags *diagSink

	pos  int // byte offset of the next rune
	line int // line of the next rune, 1-based
	col  int // column of the next rune, 1-based, in runes

	toks    []token
	indents []int // indentation stack; indents[0] == 0
	depth   int   // open brackets

	lineIndent int // indentation of the current logical line
	lineFirst  int // index in toks of the current line's first token

	profile      int  // 1 unless a dsl: 2 header was read
	strictEscape bool // "## strict-escape: on" among the leading comments
	strictAt     Pos  // where that comment is
	seenCode     bool // a significant line has been lexed
	profilePos   Pos  // position of the profile header, if any
	stopped      bool // a fatal limit was hit; emit EOF
	failed       bool // an error was reported: the tokens are not the whole file

	comments []Comment // every comment, in source order
}

// lex tokenizes src. Diagnostics go to sink.
func lex(file, src string, sink *diagSink) *lexer {
	l := &lexer{file: file, src: src, diags: sink, line: 1, col: 1, indents: []int{0}, profile: 1}
	l.toks = make([]token, 0, min(len(src)/4+16, MaxTokens+64))
	for state := lexLineStart; state != nil; {
		state = state(l)
	}
	return l
}

func (l *lexer) here() Pos { return Pos{Line: l.line, Col: l.col, Byte: l.pos} }

func (l *lexer) peek() rune {
	if l.pos >= len(l.src) {
		return eof
	}
	r, _ := utf8.DecodeRuneInString(l.src[l.pos:])
	return r
}

func (l *lexer) peekAt(n int) rune {
	p := l.pos
	for i := 0; i < n; i++ {
		if p >= len(l.src) {
			return eof
		}
		_, w := utf8.DecodeRuneInString(l.src[p:])
		p += w
	}
	if p >= len(l.src) {
		return eof
	}
	r, _ := utf8.DecodeRuneInString(l.src[p:])
	return r
}

func (l *lexer) next() rune {
	if l.pos >= len(l.src) {
		return eof
	}
	r, w := utf8.DecodeRuneInString(l.src[l.pos:])
	l.pos += w
	if r == '\n' {
		l.line++
		l.col = 1
	} else {
		l.col++
	}
	return r
}

func (l *lexer) errorf(start, end Pos, code Code, hint, format string, args ...any) {
	l.failed = true
	l.diags.add(SevError, code, Range{File: l.file, Start: start, End: end}, fmt.Sprintf(format, args...), hint)
}

func (l *lexer) emit(t token) {
	if len(l.toks) >= MaxTokens && t.kind != tokEOF && t.kind != tokDedent && t.kind != tokNewline {
		if !l.stopped {
			l.failed = true
			l.diags.addFatal(ErrTooLarge, Range{Start: t.pos, End: t.end}, fmt.Sprintf("file has more than %d tokens; the rest was not read", MaxTokens), "split the workflow into smaller files")
			l.stopped = true
		}
		return
	}
	l.toks = append(l.toks, t)
}

func (l *lexer) emitSimple(kind tokenKind, start Pos) {
	l.emit(token{kind: kind, text: l.src[start.Byte:l.pos], pos: start, end: l.here()})
}

// lexLineStart measures the indentation of a new physical line, skips
// blank and comment-only lines, and emits INDENT/DEDENT tokens.
func lexLineStart(l *lexer) stateFn {
	if l.stopped {
		return lexEOF
	}
	start := l.here()
	indent := 0
	for {
		switch l.peek() {
		case ' ':
			l.next()
			indent++
			continue
		case '\t':
			p := l.here()
			l.next()
			indent++
			if l.depth == 0 {
				l.errorf(p, l.here(), ErrTabIndent, "indent with spaces only (two per level is the convention)", "tab character in indentation")
			}
			continue
		case '\r':
			l.next()
			continue
		}
		break
	}
	switch r := l.peek(); {
	case r == eof:
		return lexEOF
	case r == '\n':
		l.next()
		return lexLineStart
	case r == '#':
		l.lexComment(true)
		return lexLineStart
	}
	if l.depth > 0 {
		// Inside brackets, line breaks and indentation are insignificant.
		return lexInLine
	}
	l.lineIndent = indent
	l.lineFirst = len(l.toks)
	top := l.indents[len(l.indents)-1]
	switch {
	case indent > top:
		if len(l.indents)+l.depth > MaxDepth {
			l.fatalDepth(start)
			return lexEOF
		}
		l.indents = append(l.indents, indent)
		l.emit(token{kind: tokIndent, pos: start, end: l.here()})
		l.lineFirst = len(l.toks)
	case indent < top:
		for len(l.indents) > 1 && indent < l.indents[len(l.indents)-1] {
			l.indents = l.indents[:len(l.indents)-1]
			l.emit(token{kind: tokDedent, pos: l.here(), end: l.here()})
		}
		if indent != l.indents[len(l.indents)-1] {
			l.errorf(start, l.here(), ErrBadDedent, "indent this line to the same column as an enclosing line", "indentation of %d spaces matches no enclosing block", indent)
			l.indents = append(l.indents, indent)
			l.emit(token{kind: tokIndent, pos: start, end: l.here()})
		}
		l.lineFirst = len(l.toks)
	}
	return lexInLine
}

func (l *lexer) fatalDepth(at Pos) {
	l.failed = true
	l.diags.addFatal(ErrTooDeep, Range{Start: at, End: at}, fmt.Sprintf("nesting deeper than %d levels; the rest was not read", MaxDepth), "flatten the structure")
	l.stopped = true
}

// lexComment reads a # or ## comment to the end of the line and records it
// for the formatter; ownLine says no token precedes it on its line. A
// leading "## strict-escape: on" comment opts a profile 1 file into escape
// decoding.
func (l *lexer) lexComment(ownLine bool) {
	startPos := l.here()
	start := l.pos
	for r := l.peek(); r != '\n' && r != eof; r = l.peek() {
		l.next()
	}
	l.comments = append(l.comments, Comment{
		Text:    strings.TrimRight(l.src[start:l.pos], " \t\r"),
		Start:   startPos,
		End:     l.here(),
		OwnLine: ownLine,
	})
	if !l.seenCode {
		text := strings.TrimSpace(strings.TrimLeft(l.src[start:l.pos], "#"))
		switch strings.Join(strings.Fields(text), "") {
		case "strict-escape:on", "strict-escape=on":
			l.strictEscape, l.strictAt = true, startPos
		}
	}
}

// lexInLine lexes the tokens of one logical line.
func lexInLine(l *lexer) stateFn {
	for {
		if l.stopped {
			return lexEOF
		}
		start := l.here()
		r := l.peek()
		switch {
		case r == eof:
			l.endLine()
			return lexEOF
		case r == '\n':
			l.next()
			if l.depth > 0 {
				return lexLineStart
			}
			if block := l.endLine(); block != nil {
				return block
			}
			return lexLineStart
		case r == ' ' || r == '\t' || r == '\r':
			l.next()
		case r == '#':
			l.lexComment(false)
		case r == '"':
			l.lexQuoted()
		case r == '`':
			l.lexRaw()
		case r == '-' && l.peekAt(1) == '>':
			l.next()
			l.next()
			l.emitSimple(tokArrow, start)
		case r == '-' && isDigit(l.peekAt(1)):
			l.next()
			l.lexNumber(start)
		case r == '-':
			l.next()
			l.emitSimple(tokDash, start)
		case isDigit(r):
			l.lexNumber(start)
		case isWordStart(r):
			l.lexWord(start)
		case opening[r] != 0:
			l.next()
			l.depth++
			if len(l.indents)-1+l.depth > MaxDepth {
				l.fatalDepth(start)
				return lexEOF
			}
			l.emitSimple(opening[r], start)
		case closing[r] != 0:
			l.next()
			if l.depth > 0 {
				l.depth--
			}
			l.emitSimple(closing[r], start)
		case punctuation[r] != 0:
			l.next()
			l.emitSimple(punctuation[r], start)
		default:
			l.next()
			l.errorf(start, l.here(), ErrBadChar, "remove it, or quote the value that contains it", "unexpected character %q", r)
		}
	}
}

// endLine closes a logical line: it emits NEWLINE when the line had tokens,
// reads a profile header, and returns the block-text state when the line
// opens a prompt body or a | block scalar.
func (l *lexer) endLine() stateFn {
	line := l.toks[l.lineFirst:]
	if len(line) == 0 {
		return nil
	}
	if !l.seenCode {
		l.seenCode = true
		if len(line) >= 2 && line[0].kind == tokIdent && line[0].text == "dsl" && line[1].kind == tokColon {
			l.profileHeader(line)
		}
	}
	switch {
	case line[len(line)-1].kind == tokPipe:
		pipe := line[len(line)-1]
		l.toks = l.toks[:len(l.toks)-1]
		l.lexBlock(pipe.pos, l.lineIndent, true)
	case l.lineIndent == 0 && len(line) == 3 && line[0].kind == kwPrompt && line[1].isWord() && line[2].kind == tokColon:
		l.lexBlock(line[2].end, 0, false)
	}
	l.emit(token{kind: tokNewline, pos: l.here(), end: l.here()})
	return nil
}

// profileHeader validates "dsl: N". Only profiles 1 and 2 exist.
func (l *lexer) profileHeader(line []token) {
	l.profilePos = line[0].pos
	if len(line) != 3 || line[2].kind != tokInt {
		end := line[len(line)-1].end
		l.errorf(line[0].pos, end, ErrProfileSyntax, `write the header as "dsl: 2"`, "malformed profile header")
		return
	}
	n, _ := strconv.Atoi(line[2].text)
	if n != 1 && n != 2 {
		l.errorf(line[2].pos, line[2].end, ErrProfileUnknown, "use dsl: 1 or dsl: 2", "unknown syntax profile %s", line[2].text)
		return
	}
	l.profile = n
	if n == 2 && l.strictEscape {
		l.errorf(l.strictAt, l.strictAt, ErrStrictEscapeInProfile2, "delete the strict-escape comment: profile 2 always decodes escapes", "the strict-escape directive is a profile 1 option and has no place in a profile 2 file")
	}
}

// lexBlock reads the indented lines after a prompt header or a | marker as
// one text token. base is the indentation of the owning line: body lines
// must be indented deeper. The first body line fixes the body indentation;
// deeper lines keep their extra indentation. keepBlank keeps blank lines
// (always for | blocks; for prompt bodies only in profile 2).
func (l *lexer) lexBlock(at Pos, base int, pipe bool) {
	keepBlank := pipe || l.profile == 2
	var b strings.Builder
	var pieces []piece
	bodyIndent := -1
	pendingBlank := 0
	for l.pos < len(l.src) {
		// Measure this line without consuming it.
		p := l.pos
		indent := 0
		for p < len(l.src) && l.src[p] == ' ' {
			p++
			indent++
		}
		lineEnd := strings.IndexByte(l.src[p:], '\n')
		if lineEnd < 0 {
			lineEnd = len(l.src)
		} else {
			lineEnd += p
		}
		if strings.TrimSpace(l.src[p:lineEnd]) == "" {
			if bodyIndent < 0 && indent <= base && lineEnd == len(l.src) {
				break
			}
			pendingBlank++
			l.skipTo(lineEnd)
			continue
		}
		if indent <= base {
			break
		}
		if bodyIndent < 0 {
			bodyIndent = indent
		}
		if b.Len() > 0 || len(pieces) > 0 {
			b.WriteByte('\n')
			if keepBlank {
				for ; pendingBlank > 0; pendingBlank-- {
					b.WriteByte('\n')
				}
			}
		}
		pendingBlank = 0
		cut := min(indent, bodyIndent)
		for i := 0; i < cut; i++ {
			l.next()
		}
		pieces = append(pieces, piece{off: b.Len(), pos: l.here()})
		text := strings.TrimSuffix(l.src[l.pos:lineEnd], "\r")
		b.WriteString(text)
		l.skipTo(lineEnd)
	}
	if bodyIndent < 0 {
		// An empty body: the token still carries its position.
		pieces = append(pieces, piece{off: 0, pos: at})
	}
	l.emit(token{kind: tokText, text: "|", val: b.String(), pieces: pieces, pos: at, end: at})
}

// skipTo consumes runes up to byte offset end and the newline there.
func (l *lexer) skipTo(end int) {
	for l.pos < end {
		l.next()
	}
	if l.peek() == '\n' {
		l.next()
	}
}

// lexQuoted lexes a "double quoted" string. In profile 1 backslashes are
// kept verbatim (a \" does not end the string); profile 2 and strict-escape
// files decode the usual escapes. The first \" of a profile 1 string is
// warning C144: it stays a backslash and a quote, which is rarely what the
// author meant (JSON printed by a tool command with \" in it is invalid).
func (l *lexer) lexQuoted() {
	start := l.here()
	l.next()
	decode := l.profile == 2 || l.strictEscape
	warned := false
	var b strings.Builder
	pieces := []piece{{off: 0, pos: l.here()}}
	for {
		r := l.peek()
		switch {
		case r == eof || r == '\n':
			l.errorf(start, l.here(), ErrUnterminated, `close the string with " on the same line, or use a | block for several lines`, "unterminated string")
			l.emit(token{kind: tokString, text: l.src[start.Byte:l.pos], val: b.String(), pieces: pieces, pos: start, end: l.here()})
			return
		case r == '"':
			l.next()
			l.emit(token{kind: tokString, text: l.src[start.Byte:l.pos], val: b.String(), pieces: pieces, pos: start, end: l.here()})
			return
		case r == '\\':
			escPos := l.here()
			l.next()
			e := l.peek()
			if e == eof || e == '\n' {
				b.WriteByte('\\')
				continue
			}
			l.next()
			if !decode {
				if e == '"' && !warned {
					warned = true
					l.diags.add(SevWarning, VerbatimQuoteEscape, Range{File: l.file, Start: escPos, End: l.here()},
						`\" is kept as a backslash and a quote: profile 1 keeps backslashes in "…" strings verbatim`,
						"write the value as a backtick string, in which \" needs no backslash (`printf '{\"ok\": true}'`), or make dsl: 2 the file's first line so that \\\" reads as \"")
				}
				b.WriteByte('\\')
				b.WriteRune(e)
				continue
			}
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '"', '\\', '/':
				b.WriteRune(e)
			case 'u':
				hex := ""
				for i := 0; i < 4 && isHex(l.peek()); i++ {
					hex += string(l.next())
				}
				n, err := strconv.ParseUint(hex, 16, 32)
				if len(hex) != 4 || err != nil {
					l.errorf(escPos, l.here(), ErrBadEscape, `write \u followed by four hex digits`, "invalid unicode escape")
					break
				}
				b.WriteRune(rune(n))
			default:
				l.errorf(escPos, l.here(), ErrBadEscape, `use \n, \t, \r, \", \\ or \uXXXX, or a backtick string for literal backslashes`, "unknown escape sequence \\%c", e)
			}
			pieces = append(pieces, piece{off: b.Len(), pos: l.here()})
		default:
			b.WriteRune(l.next())
		}
	}
}

// lexRaw lexes a `backtick` string: no escapes, newlines allowed.
func (l *lexer) lexRaw() {
	start := l.here()
	l.next()
	var b strings.Builder
	pieces := []piece{{off: 0, pos: l.here()}}
	for {
		r := l.peek()
		switch r {
		case eof:
			l.errorf(start, l.here(), ErrUnterminated, "close the raw string with a backtick", "unterminated raw string")
			l.emit(token{kind: tokRaw, text: l.src[start.Byte:l.pos], val: b.String(), pieces: pieces, pos: start, end: l.here()})
			return
		case '`':
			l.next()
			l.emit(token{kind: tokRaw, text: l.src[start.Byte:l.pos], val: b.String(), pieces: pieces, pos: start, end: l.here()})
			return
		}
		b.WriteRune(l.next())
		if r == '\n' {
			pieces = append(pieces, piece{off: b.Len(), pos: l.here()})
		}
	}
}

// lexNumber lexes an integer or float. A number glued to letters (20m, 1.5x)
// is a bare value that must be quoted: it is reported and kept as a string
// so that parsing goes on.
func (l *lexer) lexNumber(start Pos) {
	for isDigit(l.peek()) {
		l.next()
	}
	kind := tokInt
	if l.peek() == '.' && isDigit(l.peekAt(1)) {
		kind = tokFloat
		l.next()
		for isDigit(l.peek()) {
			l.next()
		}
	}
	if isBareRun(l.peek()) && !(l.peek() == '-' && l.peekAt(1) == '>') {
		l.lexBare(start)
		return
	}
	l.emitSimple(kind, start)
}

// lexWord lexes an identifier or keyword, or a bare run such as gpt-5 that
// needs quotes.
func (l *lexer) lexWord(start Pos) {
	for isWordChar(l.peek()) {
		l.next()
	}
	r := l.peek()
	if (r == '-' && isWordChar(l.peekAt(1))) || r == '/' || r == '@' || r == '+' || (r == '.' && isDigit(l.peekAt(1))) {
		l.lexBare(start)
		return
	}
	text := l.src[start.Byte:l.pos]
	kind := tokIdent
	if kw, ok := keywords[text]; ok {
		kind = kw
	}
	l.emit(token{kind: kind, text: text, val: text, pos: start, end: l.here()})
}

// lexBare consumes the rest of an unquoted value such as 20m or gpt-5.5,
// reports it, and emits it as the string it was meant to be.
func (l *lexer) lexBare(start Pos) {
	for isBareRun(l.peek()) && !(l.peek() == '-' && l.peekAt(1) == '>') {
		l.next()
	}
	text := l.src[start.Byte:l.pos]
	l.errorf(start, l.here(), ErrUnquoted, fmt.Sprintf("quote it: %q", text), "value %s must be quoted: only a single bare word is accepted unquoted", text)
	l.emit(token{kind: tokString, text: strconv.Quote(text), val: text, pieces: []piece{{off: 0, pos: start}}, pos: start, end: l.here()})
}

func lexEOF(l *lexer) stateFn {
	if len(l.toks) > 0 && l.lineFirst < len(l.toks) && l.toks[len(l.toks)-1].kind != tokNewline {
		l.emit(token{kind: tokNewline, pos: l.here(), end: l.here()})
	}
	for len(l.indents) > 1 {
		l.indents = l.indents[:len(l.indents)-1]
		l.emit(token{kind: tokDedent, pos: l.here(), end: l.here()})
	}
	l.emit(token{kind: tokEOF, pos: l.here(), end: l.here()})
	return nil
}

// The one-character tokens.
var (
	opening     = map[rune]tokenKind{'[': tokLBrack, '{': tokLBrace, '(': tokLParen}
	closing     = map[rune]tokenKind{']': tokRBrack, '}': tokRBrace, ')': tokRParen}
	punctuation = map[rune]tokenKind{':': tokColon, ',': tokComma, '.': tokDot, '=': tokAssign, '|': tokPipe}
)

func isDigit(r rune) bool     { return r >= '0' && r <= '9' }
func isHex(r rune) bool       { return isDigit(r) || (r >= 'a' && r <= 'f') || (r >= 'A' && r <= 'F') }
func isWordStart(r rune) bool { return r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') }
func isWordChar(r rune) bool  { return isWordStart(r) || isDigit(r) }
func isBareRun(r rune) bool {
	return isWordChar(r) || r == '-' || r == '.' || r == '/' || r == '@' || r == '+'
}
