package dsl

import "fmt"

// Pos is a position in a source file. Line and Col are 1-based; Col counts
// characters (runes), not bytes, so a caret lines up under the text a person
// sees. Byte is the 0-based byte offset, for slicing the source.
//
// The zero Pos means "no position"; diagnostics without one are rendered at
// 1:1 of their file.
type Pos struct {
	Line int
	Col  int
	Byte int
}

// IsValid reports whether p names a real position.
func (p Pos) IsValid() bool { return p.Line > 0 }

// String renders p as line:col.
func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Before reports whether p comes strictly before q in the file.
func (p Pos) Before(q Pos) bool {
	if p.Line != q.Line {
		return p.Line < q.Line
	}
	return p.Col < q.Col
}

// Range is a span of source text: Start is the first character and End the
// position just after the last one. File names the source the range lies in.
type Range struct {
	File  string
	Start Pos
	End   Pos
}

// String renders the range as file:line:col of its start.
func (r Range) String() string {
	if r.File == "" {
		return r.Start.String()
	}
	return r.File + ":" + r.Start.String()
}
