package expr

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// tokKind identifies the lexical class of a token.
type tokKind int

const (
	tEOF tokKind = iota
	tErr         // a lexical error; msg holds the message
	tInt
	tFloat
	tStr
	tWord // identifiers and the keywords true false and or not
	tLParen
	tRParen
	tLBrack
	tRBrack
	tLBrace
	tRBrace
	tComma
	tDot
	tColon
	tPlus
	tMinus
	tStar
	tSlash
	tPercent
	tBang
	tEq
	tNe
	tLt
	tLe
	tGt
	tGe
	tAndAnd
	tOrOr
	tArrow
)

// punctText is the source spelling of punctuation and operator tokens.
var punctText = map[tokKind]string{
	tLParen:  "(",
	tRParen:  ")",
	tLBrack:  "[",
	tRBrack:  "]",
	tLBrace:  "{",
	tRBrace:  "}",
	tComma:   ",",
	tDot:     ".",
	tColon:   ":",
	tPlus:    "+",
	tMinus:   "-",
	tStar:    "*",
	tSlash:   "/",
	tPercent: "%",
	tBang:    "!",
	tEq:      "==",
	tNe:      "!=",
	tLt:      "<",
	tLe:      "<=",
	tGt:      ">",
	tGe:      ">=",
	tAndAnd:  "&&",
	tOrOr:    "||",
	tArrow:   "=>",
}

// token is one lexical token. pos and end are byte offsets in the source.
type token struct {
	kind tokKind
	pos  int
	end  int
	text string  // words: the identifier; strings: the decoded value; tErr: the message
	ival int64   // tInt
	fval float64 // tFloat
}

// describe renders the token for an error message.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of expression"
	case tInt, tFloat:
		return "number " + t.text
	case tStr:
		s := t.text
		if len(s) > 20 {
			s = s[:20] + "…"
		}
		return "string " + strconv.Quote(s)
	case tWord:
		if isKeyword(t.text) {
			return strconv.Quote(t.text)
		}
		return "identifier " + strconv.Quote(t.text)
	}
	if s, ok := punctText[t.kind]; ok {
		return strconv.Quote(s)
	}
	return "token"
}

// keywords are the reserved words of the language.
func isKeyword(w string) bool {
	switch w {
	case "true", "false", "and", "or", "not":
		return true
	}
	return false
}

func isIdentStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isWord reports whether s is spelled like an identifier.
func isWord(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentChar(s[i]) {
			return false
		}
	}
	return true
}

// lex splits src into tokens. The slice always ends with a tEOF or a tErr
// token; lexing stops at the first error so that the parser reports
// problems in source order.
func lex(src string) []token {
	var toks []token
	i := 0
	for {
		for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\r' || src[i] == '\n') {
			i++
		}
		if i >= len(src) {
			return append(toks, token{kind: tEOF, pos: len(src), end: len(src)})
		}
		t := lexOne(src, i)
		toks = append(toks, t)
		if t.kind == tErr {
			return toks
		}
		i = t.end
	}
}

// singleChar maps one-byte punctuation to its token kind.
var singleChar = map[byte]tokKind{
	'(': tLParen, ')': tRParen, '[': tLBrack, ']': tRBrack, '{': tLBrace, '}': tRBrace,
	',': tComma, '.': tDot, ':': tColon, '+': tPlus, '-': tMinus, '*': tStar, '/': tSlash,
	'%': tPercent, '!': tBang, '<': tLt, '>': tGt,
}

// lexOne scans the token starting at src[i], which is not whitespace.
func lexOne(src string, i int) token {
	c := src[i]
	switch {
	case isIdentStart(c):
		j := i + 1
		for j < len(src) && isIdentChar(src[j]) {
			j++
		}
		return token{kind: tWord, pos: i, end: j, text: src[i:j]}
	case isDigit(c):
		return lexNumber(src, i)
	case c == '"' || c == '\'':
		return lexString(src, i)
	}
	two := ""
	if i+1 < len(src) {
		two = src[i : i+2]
	}
	switch two {
	case "==":
		return token{kind: tEq, pos: i, end: i + 2}
	case "!=":
		return token{kind: tNe, pos: i, end: i + 2}
	case "<=":
		return token{kind: tLe, pos: i, end: i + 2}
	case ">=":
		return token{kind: tGe, pos: i, end: i + 2}
	case "&&":
		return token{kind: tAndAnd, pos: i, end: i + 2}
	case "||":
		return token{kind: tOrOr, pos: i, end: i + 2}
	case "=>":
		return token{kind: tArrow, pos: i, end: i + 2}
	}
	if k, ok := singleChar[c]; ok {
		return token{kind: k, pos: i, end: i + 1}
	}
	errAt := func(end int, format string, args ...any) token {
		return token{kind: tErr, pos: i, end: end, text: fmt.Sprintf(format, args...)}
	}
	switch c {
	case '=':
		return errAt(i+1, `unexpected "=" (use "==" to compare or "=>" for a lambda)`)
	case '&':
		return errAt(i+1, `unexpected "&" (use "&&" or "and")`)
	case '|':
		return errAt(i+1, `unexpected "|" (use "||" or "or")`)
	case '?':
		return errAt(i+1, `unexpected "?" (there is no ternary operator; use if(cond, a, b))`)
	}
	r, size := utf8.DecodeRuneInString(src[i:])
	if r == utf8.RuneError && size <= 1 {
		return errAt(i+1, "unexpected byte 0x%02x", c)
	}
	return errAt(i+size, "unexpected character %q", r)
}

// lexNumber scans an integer (digits) or a float (digits "." digits).
func lexNumber(src string, i int) token {
	j := i
	for j < len(src) && isDigit(src[j]) {
		j++
	}
	isFloat := false
	if j+1 < len(src) && src[j] == '.' && isDigit(src[j+1]) {
		isFloat = true
		j++
		for j < len(src) && isDigit(src[j]) {
			j++
		}
	}
	if j < len(src) && isIdentChar(src[j]) {
		k := j
		for k < len(src) && isIdentChar(src[k]) {
			k++
		}
		return token{kind: tErr, pos: i, end: k, text: fmt.Sprintf("invalid number %q", src[i:k])}
	}
	text := src[i:j]
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return token{kind: tErr, pos: i, end: j, text: "invalid number " + text + " (out of range)"}
		}
		return token{kind: tFloat, pos: i, end: j, text: text, fval: f}
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return token{kind: tErr, pos: i, end: j, text: "invalid integer " + text + " (out of range)"}
	}
	return token{kind: tInt, pos: i, end: j, text: text, ival: n}
}

// lexString scans a single- or double-quoted string literal.
func lexString(src string, i int) token {
	q := src[i]
	buf := make([]byte, 0, 16)
	j := i + 1
	for j < len(src) {
		c := src[j]
		switch {
		case c == q:
			return token{kind: tStr, pos: i, end: j + 1, text: string(buf)}
		case c == '\\':
			if j+1 >= len(src) {
				j = len(src)
				continue
			}
			switch e := src[j+1]; e {
			case 'n':
				buf = append(buf, '\n')
			case 't':
				buf = append(buf, '\t')
			default: // \\ \" \' and any other \x yield x
				buf = append(buf, e)
			}
			j += 2
		default:
			buf = append(buf, c)
			j++
		}
	}
	return token{kind: tErr, pos: i, end: len(src), text: "unterminated string"}
}
