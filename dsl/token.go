package dsl

import (
	"fmt"
	"unicode/utf8"
)

// tokenKind is the kind of a lexical token. Keywords come after the
// kwSentinel marker so isKeyword is a comparison.
type tokenKind int

const (
	tokInvalid tokenKind = iota
	tokEOF
	tokNewline // end of a logical line
	tokIndent  // the line is indented deeper than the previous one
	tokDedent  // the line closes one indentation level
	tokIdent   // bare word: [A-Za-z_][A-Za-z0-9_]*
	tokString  // "double quoted", or a bare run such as 20m reported as unquoted
	tokRaw     // `backtick raw`
	tokText    // a prompt body or | block scalar
	tokInt
	tokFloat
	tokColon
	tokComma
	tokDot
	tokLBrack
	tokRBrack
	tokLBrace
	tokRBrace
	tokLParen
	tokRParen
	tokArrow  // ->
	tokAssign // =
	tokDash   // "- " list item marker
	tokPipe   // | introducing a block scalar (consumed by the lexer)

	kwSentinel // keywords follow
	kwVars
	kwPresets
	kwPrompt
	kwSchema
	kwAgent
	kwJudge
	kwHuman
	kwRouter
	kwTool
	kwCompute
	kwEmit
	kwWait
	kwAwaitAnswers
	kwFail
	kwWorkflow
	kwWhen
	kwNot
	kwAs
	kwWith
	kwElse
	kwTrue
	kwFalse
)

var keywords = map[string]tokenKind{
	"vars":          kwVars,
	"presets":       kwPresets,
	"prompt":        kwPrompt,
	"schema":        kwSchema,
	"agent":         kwAgent,
	"judge":         kwJudge,
	"human":         kwHuman,
	"router":        kwRouter,
	"tool":          kwTool,
	"compute":       kwCompute,
	"emit":          kwEmit,
	"wait":          kwWait,
	"await_answers": kwAwaitAnswers,
	"fail":          kwFail,
	"workflow":      kwWorkflow,
	"when":          kwWhen,
	"not":           kwNot,
	"as":            kwAs,
	"with":          kwWith,
	"else":          kwElse,
	"true":          kwTrue,
	"false":         kwFalse,
}

var tokenNames = map[tokenKind]string{
	tokInvalid: "invalid token",
	tokEOF:     "end of file",
	tokNewline: "end of line",
	tokIndent:  "indented block",
	tokDedent:  "end of indented block",
	tokIdent:   "name",
	tokString:  "string",
	tokRaw:     "raw string",
	tokText:    "text block",
	tokInt:     "integer",
	tokFloat:   "number",
	tokColon:   `":"`,
	tokComma:   `","`,
	tokDot:     `"."`,
	tokLBrack:  `"["`,
	tokRBrack:  `"]"`,
	tokLBrace:  `"{"`,
	tokRBrace:  `"}"`,
	tokLParen:  `"("`,
	tokRParen:  `")"`,
	tokArrow:   `"->"`,
	tokAssign:  `"="`,
	tokDash:    `"-"`,
	tokPipe:    `"|"`,
}

// String names the kind the way an error message should.
func (k tokenKind) String() string {
	if k > kwSentinel {
		for word, kw := range keywords {
			if kw == k {
				return fmt.Sprintf("%q", word)
			}
		}
	}
	if s, ok := tokenNames[k]; ok {
		return s
	}
	return fmt.Sprintf("token(%d)", int(k))
}

// token is one lexical token. text is the source text; val is the decoded
// value of strings and text blocks, with pieces mapping offsets in val back
// to source positions.
type token struct {
	kind   tokenKind
	text   string
	val    string
	pieces []piece
	pos    Pos
	end    Pos
}

// isWord reports whether t can serve as a name: an identifier or a keyword
// used as a property name, node name or bare value.
func (t token) isWord() bool { return t.kind == tokIdent || t.kind > kwSentinel }

// describe names the token for "unexpected …" messages.
func (t token) describe() string {
	switch {
	case t.kind == tokIdent:
		return fmt.Sprintf("name %q", t.text)
	case t.kind > kwSentinel:
		return fmt.Sprintf("keyword %q", t.text)
	case t.kind == tokString, t.kind == tokRaw:
		return "string " + truncate(t.text, 40)
	case t.kind == tokInt, t.kind == tokFloat:
		return "number " + t.text
	}
	return t.kind.String()
}

// piece maps the decoded byte offset off of a string value to the source
// position of the character it came from. Within a piece, characters map
// one to one.
type piece struct {
	off int
	pos Pos
}

// posInValue returns the source position of byte offset off in a decoded
// value described by pieces.
func posInValue(val string, pieces []piece, off int) Pos {
	if len(pieces) == 0 {
		return Pos{}
	}
	if off > len(val) {
		off = len(val)
	}
	p := pieces[0]
	for _, q := range pieces[1:] {
		if q.off > off {
			break
		}
		p = q
	}
	pos := p.pos
	for _, r := range val[p.off:off] {
		pos.Col++
		pos.Byte += len(string(r))
	}
	return pos
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// posCursor maps byte offsets of a decoded value to source positions. Asked
// for increasing offsets, as references come in source order, it does the
// whole value in linear time; a smaller offset restarts it.
type posCursor struct {
	val      string
	pieces   []piece
	fallback Pos

	started bool
	pi      int // current piece
	off     int // offset reached
	pos     Pos // position of off
}

func (c *posCursor) at(off int) Pos {
	if len(c.pieces) == 0 {
		return c.fallback
	}
	off = max(0, min(off, len(c.val)))
	if !c.started || off < c.off {
		c.started, c.pi, c.off, c.pos = true, 0, c.pieces[0].off, c.pieces[0].pos
	}
	for c.pi+1 < len(c.pieces) && c.pieces[c.pi+1].off <= off {
		c.pi++
		c.off, c.pos = c.pieces[c.pi].off, c.pieces[c.pi].pos
	}
	for c.off < off {
		_, w := utf8.DecodeRuneInString(c.val[c.off:])
		c.off += w
		c.pos.Col++
		c.pos.Byte += w
	}
	return c.pos
}
