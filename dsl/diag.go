package dsl

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Severity says whether a diagnostic blocks execution.
type Severity int

const (
	// SevInvalid is the zero Severity; no diagnostic carries it.
	SevInvalid Severity = iota
	// SevError blocks execution: a file with one does not run.
	SevError
	// SevWarning is advice: the workflow still runs.
	SevWarning
)

// String returns "error" or "warning", the words used in rendered and JSON
// diagnostics.
func (s Severity) String() string {
	switch s {
	case SevError:
		return "error"
	case SevWarning:
		return "warning"
	}
	return "invalid"
}

// Stage tells which phase produced a diagnostic.
type Stage int

const (
	// StageInvalid is the zero Stage.
	StageInvalid Stage = iota
	// StageParse marks lexer and parser diagnostics (codes E0xx).
	StageParse
	// StageCompile marks compiler diagnostics (codes Cxxx).
	StageCompile
)

// String returns "parse" or "compile", the JSON "source" field.
func (s Stage) String() string {
	switch s {
	case StageParse:
		return "parse"
	case StageCompile:
		return "compile"
	}
	return "invalid"
}

// Diagnostic is one problem found in a workflow file. Diagnostics are values,
// not errors: Parse and Compile return every one they find together with a
// partial result, so a tool can report them all at once.
type Diagnostic struct {
	// Severity says whether the diagnostic blocks execution.
	Severity Severity
	// Code is the stable upstream-compatible code, such as "C241" or "E012".
	Code Code
	// Stage is the phase that produced the diagnostic.
	Stage Stage
	// Summary is a one-line statement of the problem, in lower case.
	Summary string
	// Detail is the fix hint, an instruction naming what to change. It may be
	// empty when the summary says it all.
	Detail string
	// Subject is the source range the diagnostic is about: the offending value
	// or, when there is none, the name of the declaration.
	Subject Range
	// NodeID names the node concerned, if any.
	NodeID string
	// EdgeID names the edge concerned ("from->to"), if any.
	EdgeID string

	// fatal marks a limit that stopped the phase; it survives the cap so
	// the reader learns why the rest of the file was not checked.
	fatal bool
	// more is, on an E092 summary, how many diagnostics it stands for.
	more int
}

// Error renders the diagnostic as a single line: file:line:col: severity [code]: summary.
func (d *Diagnostic) Error() string {
	return fmt.Sprintf("%s: %s [%s]: %s", d.Subject, d.Severity, d.Code, d.Summary)
}

// Diagnostics is a list of diagnostics. A non-empty Diagnostics can be used as
// an error; callers usually test HasErrors, since warnings do not block.
type Diagnostics []*Diagnostic

// Error joins the single-line form of every diagnostic.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.Error()
	}
	return strings.Join(lines, "\n")
}

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == SevError {
			return true
		}
	}
	return false
}

// Count returns the number of errors and of warnings in ds.
func (ds Diagnostics) Count() (errs, warns int) {
	for _, d := range ds {
		if d.Severity == SevError {
			errs++
		} else {
			warns++
		}
	}
	return errs, warns
}

// Sort orders ds by file, then position, then code, keeping equal ones in
// the order they were found.
func (ds Diagnostics) Sort() {
	slices.SortStableFunc(ds, func(a, b *Diagnostic) int {
		if c := cmp.Compare(a.Subject.File, b.Subject.File); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Subject.Start.Line, b.Subject.Start.Line); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Subject.Start.Col, b.Subject.Start.Col); c != 0 {
			return c
		}
		return cmp.Compare(a.Code, b.Code)
	})
}

// diagSink collects diagnostics for one phase and enforces the cap, so that
// a hostile file cannot make a phase allocate without bound.
type diagSink struct {
	file  string
	stage Stage
	max   int
	diags Diagnostics
	// dropped counts diagnostics past the cap, droppedErrors those of them
	// that are errors.
	dropped, droppedErrors int
}

func (s *diagSink) add(sev Severity, code Code, r Range, summary, hint string) *Diagnostic {
	if r.File == "" {
		r.File = s.file
	}
	d := &Diagnostic{Severity: sev, Code: code, Stage: s.stage, Summary: summary, Detail: hint, Subject: r}
	if s.skip(sev) {
		return d // returned so callers may still set fields; it is not kept
	}
	s.diags = append(s.diags, d)
	return d
}

// addFatal records a diagnostic that stopped the phase, past the cap.
func (s *diagSink) addFatal(code Code, r Range, summary, hint string) *Diagnostic {
	if r.File == "" {
		r.File = s.file
	}
	d := &Diagnostic{Severity: SevError, Code: code, Stage: s.stage, Summary: summary, Detail: hint, Subject: r, fatal: true}
	s.diags = append(s.diags, d)
	return d
}

func (s *diagSink) full() bool { return s.max > 0 && len(s.diags) >= s.max }

// skip counts a diagnostic of severity sev past the cap and reports true,
// or reports false when the cap is not reached. Callers whose message or
// hint is costly to build (one listing every field of a wide schema)
// call it first, so diagnostics nobody will see cost nothing.
func (s *diagSink) skip(sev Severity) bool {
	if !s.full() {
		return false
	}
	s.dropped++
	if sev == SevError {
		s.droppedErrors++
	}
	return true
}

// withOverflow returns the sink's diagnostics, with an E092 summary of
// those past the cap when there are any.
func (s *diagSink) withOverflow() Diagnostics {
	ds := s.diags
	if s.dropped > 0 {
		ds = append(ds, overflow(s.stage, ds[len(ds)-1].Subject, s.dropped, s.droppedErrors > 0))
	}
	return ds
}

// overflow is the E092 summary of n diagnostics left out. It is an error
// only when one of them is: a file with many warnings still validates.
func overflow(stage Stage, at Range, n int, anyError bool) *Diagnostic {
	sev := SevWarning
	if anyError {
		sev = SevError
	}
	return &Diagnostic{
		Severity: sev, Code: ErrTooManyDiags, Stage: stage, Subject: at,
		Summary: fmt.Sprintf("too many problems: %d more not shown", n),
		Detail:  "fix the problems above and validate again",
		more:    n,
	}
}
