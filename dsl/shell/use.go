// Package shell reads just enough bash to say how a tool command treats
// the value of each reference in it, so that the engine can pass every
// value through the environment in a form the shell never runs, and the
// compiler can warn where no such form exists.
//
// A command template is a list of pieces: literal shell text written by
// the workflow's author, and holes where a reference's value goes. Scan
// follows the literal text with a small scanner of bash syntax and returns
// one Use per hole: the quoting the hole stands in, whether the place
// evaluates the value (as a number or as a variable name), the scripts it
// is nested in (bash -c '…', eval …), and a Risk when no rendering can keep
// the value inert. Use.Render writes the expansion of an environment
// variable that is right for that place.
//
// The grammar subset is documented on scanner (scan.go). The scan is a
// best effort over hostile text: it never panics, it is linear in the
// input (times the nesting depth of scripts, capped by maxDepth), and
// where it cannot follow the text it errs towards a Risk.
package shell

import "strings"

// Piece is one piece of a command template: literal shell text, or a hole
// where a reference's value goes.
type Piece struct {
	// Text is the literal text; empty for a hole.
	Text string
	// Hole marks a reference's place.
	Hole bool
}

// Quote is the quoting of the text a hole stands in.
type Quote uint8

const (
	// QuoteInvalid is the zero value: not set.
	QuoteInvalid Quote = iota
	// Unquoted is a bare word: an expansion must be double-quoted to stay
	// one word.
	Unquoted
	// Double is inside "…".
	Double
	// Single is inside '…', where nothing expands.
	Single
	// Dollar is inside $'…'.
	Dollar
	// HereDoc is the body of a heredoc whose delimiter is unquoted:
	// expansions happen, quotes are plain characters.
	HereDoc
	// Literal is where nothing expands and no quote can be closed: the
	// body of a heredoc whose delimiter is quoted.
	Literal
	// Arith is inside an arithmetic expression ($(( )), (( )), $[ ]),
	// where quotes are not needed.
	Arith
)

var quoteNames = [...]string{"invalid", "unquoted", "double", "single", "dollar", "heredoc", "literal", "arith"}

// String names the quoting, for tests and debugging.
func (q Quote) String() string {
	if int(q) < len(quoteNames) {
		return quoteNames[q]
	}
	return "invalid"
}

// Check is what a value must look like to be inert where it stands.
type Check uint8

const (
	// CheckNone: any value is inert (as one word, or as text).
	CheckNone Check = iota
	// CheckNumber: the place evaluates the value as an arithmetic
	// expression, so it must be a plain decimal number, ^-?[0-9]+$.
	CheckNumber
	// CheckName: the place reads the value as a variable name (and would
	// evaluate a subscript in it), so it must be ^[A-Za-z_][A-Za-z0-9_]*$.
	CheckName
)

var checkNames = [...]string{"none", "number", "name"}

// String names the check, for tests and debugging.
func (c Check) String() string {
	if int(c) < len(checkNames) {
		return checkNames[c]
	}
	return "invalid"
}

// Use is how the shell reads the value of one hole.
type Use struct {
	// Quote is the quoting at the hole, in the innermost script.
	Quote Quote
	// Check is what the value must look like; it is checked at run time.
	Check Check
	// Escaped says a backslash stands just before the hole, which would
	// escape the rendering's first quote; Render neutralises it.
	Escaped bool
	// Layers are the script words the hole is nested in, innermost first:
	// a hole in bash -c '…' has one layer, Single. The inner shell expands
	// the (exported) variable; each outer shell only passes the text of
	// the expansion on.
	Layers []Layer
	// Context names the place for messages: "$(( … ))", "printf -v",
	// "bash -c \"…\"". Empty for a plain word.
	Context string
	// Risk is non-empty when no rendering keeps the value inert here; it
	// says why ("inside backticks …"). The compiler warns about it.
	Risk string
	// Fix says how to write the command instead, when Risk is set.
	Fix string
}

// Layer is one script word a hole is nested in: its quoting, and whether a
// backslash precedes the hole in it.
type Layer struct {
	Quote   Quote
	Escaped bool
}

// Render returns the text that stands for the hole in the command: the
// expansion of the environment variable name, quoted for the hole's place
// and then encoded for each enclosing script word, so that only the
// innermost shell expands it and no shell ever parses the value.
func (u *Use) Render(name string) string {
	exp := "${" + name + "}"
	var s string
	switch u.Quote {
	case Double, HereDoc, Literal, Arith:
		s = exp
	case Single:
		s = `'"` + exp + `"'`
	case Dollar:
		s = `'"` + exp + `"$'`
	default:
		s = `"` + exp + `"`
	}
	if u.Escaped {
		s = "\n" + s // the author's \ and this newline make a line continuation
	}
	for _, l := range u.Layers {
		s = encode(s, l.Quote)
		if l.Escaped {
			s = "\n" + s
		}
	}
	return s
}

// encode writes s so that a shell parsing it at quoting q yields s.
func encode(s string, q Quote) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch q {
		case Single:
			if c == '\'' {
				b.WriteString(`'\''`)
				continue
			}
		case Dollar:
			if c == '\'' || c == '\\' {
				b.WriteByte('\\')
			}
		case Double:
			if c == '$' || c == '`' || c == '"' || c == '\\' {
				b.WriteByte('\\')
			}
		case HereDoc:
			if c == '$' || c == '`' || c == '\\' {
				b.WriteByte('\\')
			}
		case Unquoted:
			if c == '\n' {
				b.WriteString("'\n'") // \ and a newline would be a line continuation
				continue
			}
			if !isPlainByte(c) {
				b.WriteByte('\\')
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// isPlainByte reports whether c needs no quoting in a bare word.
func isPlainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == '/' || c == '-' || c == ',' || c == ':' || c == '@' || c == '%' || c == '+'
}

// IsNumber reports whether v is a plain decimal number, ^-?[0-9]+$, the
// only values a CheckNumber place accepts.
func IsNumber(v string) bool {
	if strings.HasPrefix(v, "-") {
		v = v[1:]
	}
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

// Number returns v, a plain number, without leading zeros, which bash
// would read as octal (010 is 8).
func Number(v string) string {
	neg := strings.HasPrefix(v, "-")
	d := strings.TrimLeft(strings.TrimPrefix(v, "-"), "0")
	if d == "" {
		return "0"
	}
	if neg {
		return "-" + d
	}
	return d
}

// IsName reports whether v is a plain variable name,
// ^[A-Za-z_][A-Za-z0-9_]*$, the only values a CheckName place accepts.
func IsName(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
