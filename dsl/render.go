package dsl

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Render writes diagnostics the way people read them, the same on every
// surface (terminal, PR comment, tests):
//
//	main.bot:12:14: error [C241]: await_answers "gate" has no positive timeout …
//	   12 |   timeout: "0s"
//	      |            ^^^^
//	  fix: add timeout: "30m" …
//
// src maps file names to their contents, for the source lines; a file not
// in it is rendered without them.
func Render(w io.Writer, ds Diagnostics, src map[string][]byte) error {
	for _, d := range ds {
		if _, err := io.WriteString(w, renderOne(d, src[d.Subject.File])); err != nil {
			return err
		}
	}
	return nil
}

// RenderString is Render into a string.
func RenderString(ds Diagnostics, src map[string][]byte) string {
	var b strings.Builder
	_ = Render(&b, ds, src)
	return b.String()
}

func renderOne(d *Diagnostic, src []byte) string {
	var b strings.Builder
	start := d.Subject.Start
	if !start.IsValid() {
		start = Pos{Line: 1, Col: 1}
	}
	fmt.Fprintf(&b, "%s:%d:%d: %s [%s]: %s\n", d.Subject.File, start.Line, start.Col, d.Severity, d.Code, d.Summary)
	if line, ok := sourceLine(src, start.Line); ok {
		gutter := fmt.Sprintf("%5d | ", start.Line)
		fmt.Fprintf(&b, "%s%s\n", gutter, line)
		width := 1
		end := d.Subject.End
		if end.Line == start.Line && end.Col > start.Col {
			width = end.Col - start.Col
		}
		lineLen := utf8.RuneCountInString(line)
		if start.Col-1+width > lineLen+1 {
			width = max(1, lineLen+1-(start.Col-1))
		}
		pad := strings.Repeat(" ", len(gutter)-2) + "| "
		b.WriteString(pad)
		// Tabs in the line keep the caret aligned.
		runes := []rune(line)
		for i := 0; i < start.Col-1 && i < len(runes); i++ {
			if runes[i] == '\t' {
				b.WriteByte('\t')
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(strings.Repeat("^", width))
		b.WriteByte('\n')
	}
	if d.Detail != "" {
		fmt.Fprintf(&b, "  fix: %s\n", d.Detail)
	}
	return b.String()
}

// sourceLine returns line n (1-based) of src, without its newline, with
// control characters other than tab shown as spaces and very long lines cut.
func sourceLine(src []byte, n int) (string, bool) {
	if src == nil || n < 1 {
		return "", false
	}
	line := 1
	startOff := 0
	for i := 0; i < len(src) && line < n; i++ {
		if src[i] == '\n' {
			line++
			startOff = i + 1
		}
	}
	if line != n {
		return "", false
	}
	end := startOff
	for end < len(src) && src[end] != '\n' {
		end++
	}
	s := strings.ToValidUTF8(string(src[startOff:end]), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	const maxLine = 400
	if utf8.RuneCountInString(s) > maxLine {
		s = string([]rune(s)[:maxLine]) + "…"
	}
	return s, true
}

// JSONDiagnostic is the machine-readable form of a diagnostic printed by
// iterion validate --json.
type JSONDiagnostic struct {
	Source   string `json:"source"`
	Code     string `json:"code"`
	Severity string `json:"severity"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Message  string `json:"message"`
	Hint     string `json:"hint"`
	NodeID   string `json:"node_id"`
	EdgeID   string `json:"edge_id"`
}

// JSON converts diagnostics to their JSON form.
func (ds Diagnostics) JSON() []JSONDiagnostic {
	out := make([]JSONDiagnostic, 0, len(ds))
	for _, d := range ds {
		start := d.Subject.Start
		if !start.IsValid() {
			start = Pos{Line: 1, Col: 1}
		}
		out = append(out, JSONDiagnostic{
			Source: d.Stage.String(), Code: string(d.Code), Severity: d.Severity.String(),
			File: d.Subject.File, Line: start.Line, Column: start.Col,
			Message: d.Summary, Hint: d.Detail, NodeID: d.NodeID, EdgeID: d.EdgeID,
		})
	}
	return out
}

// MarshalJSON encodes a diagnostic in its JSON form.
func (d *Diagnostic) MarshalJSON() ([]byte, error) {
	return json.Marshal(Diagnostics{d}.JSON()[0])
}
