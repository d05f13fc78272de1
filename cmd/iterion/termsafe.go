package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Agent outputs, questions, errors and even node names come from hostile
// input. Printed as they are, an escape sequence or a carriage return in
// them could rewrite what the user's terminal shows (fake a "finished"
// line, hide a question, set the window title). Everything the CLI prints
// as text from a run goes through termLine or termText, which show such
// characters as visible escapes (\x1b, \r, \u202e) instead.

// termLine returns s safe to print within one line of a terminal: every
// control character but tab, newlines included, is escaped.
func termLine(s string) string { return termEscape(s, false) }

// termText is termLine keeping newlines, for text printed as a block.
func termText(s string) string { return termEscape(s, true) }

func termEscape(s string, keepNewlines bool) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unsafeRune(r, keepNewlines) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\n' && !keepNewlines:
			b.WriteString(`\n`)
		case unsafeRune(r, keepNewlines) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r, keepNewlines):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// unsafeRune reports whether r can change what a terminal shows beyond
// printing a glyph: C0 and C1 controls and DEL, the bidirectional
// overrides and isolates, and the line and paragraph separators.
func unsafeRune(r rune, keepNewlines bool) bool {
	switch {
	case r == '\t', r == '\n' && keepNewlines:
		return false
	case r < 0x20, r >= 0x7f && r <= 0x9f, r == '\u2028', r == '\u2029':
		return true
	}
	return unicode.Is(unicode.Bidi_Control, r)
}

// jsonSafe escapes, in encoded JSON, the characters encoding/json leaves
// raw that a terminal acts on (DEL, C1 controls, bidirectional controls).
// They can only occur inside JSON strings, where \u escapes mean the same
// text: the JSON decodes to the same value.
func jsonSafe(b []byte) []byte {
	s := string(b)
	if !strings.ContainsFunc(s, func(r rune) bool { return r != '\n' && r != '\t' && unsafeRune(r, true) }) {
		return b
	}
	var out strings.Builder
	for _, r := range s {
		if r != '\n' && r != '\t' && unsafeRune(r, true) {
			fmt.Fprintf(&out, `\u%04x`, r)
			continue
		}
		out.WriteRune(r)
	}
	return []byte(out.String())
}
