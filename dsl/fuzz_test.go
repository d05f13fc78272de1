package dsl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/tools/txtar"
)

// fuzzSeeds adds every example, golden input and code case as a seed.
func fuzzSeeds(f *testing.F) {
	f.Helper()
	paths, _ := filepath.Glob("../examples/*/main.bot")
	for _, p := range paths {
		if src, err := os.ReadFile(p); err == nil {
			f.Add(src)
		}
	}
	archives, _ := filepath.Glob("testdata/*/*.txtar")
	for _, p := range archives {
		ar, err := txtar.ParseFile(p)
		if err != nil {
			continue
		}
		for _, file := range ar.Files {
			if strings.HasSuffix(file.Name, ".bot") {
				f.Add(file.Data)
			}
		}
	}
	f.Add([]byte("workflow w:\n\tentry: a\n"))
	f.Add([]byte("prompt p:\n  {{vars.x\nagent a:\n  user: \"{{outputs.}}\"\n"))
	f.Add([]byte("\xff\xfe dsl: 3\n[[[[{{{{"))
}

// checkPositions verifies that every diagnostic lies inside the file: a
// line that exists and a column within that line (one past its end at most).
func checkPositions(t *testing.T, src []byte, ds Diagnostics) {
	t.Helper()
	lines := strings.Split(string(src), "\n")
	for _, d := range ds {
		p := d.Subject.Start
		if !p.IsValid() {
			t.Fatalf("diagnostic without position: %v", d)
		}
		if p.Line > len(lines) {
			t.Fatalf("%v: line %d past the end (%d lines)", d, p.Line, len(lines))
		}
		if n := utf8.RuneCountInString(lines[p.Line-1]); p.Col < 1 || p.Col > n+1 {
			t.Fatalf("%v: column %d outside line %d of %d characters", d, p.Col, p.Line, n)
		}
		if d.Summary == "" || d.Code == "" || d.Detail == "" {
			t.Fatalf("diagnostic without code, message or fix hint: %#v", d)
		}
	}
	if len(ds) > MaxDiagnostics+1 {
		t.Fatalf("%d diagnostics, more than the cap", len(ds))
	}
}

// FuzzParse feeds arbitrary bytes to the lexer and parser: no panic, every
// diagnostic positioned inside the file, and the printer total.
func FuzzParse(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		file, ds := Parse("fuzz.bot", src)
		if file == nil {
			t.Fatal("nil file")
		}
		checkPositions(t, src, ds)
		_ = file.String()
	})
}

// FuzzCompile runs the whole front end on arbitrary bytes: no panic,
// positions inside the file, rendering and printing total.
func FuzzCompile(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		w, ds := CompileSource("fuzz.bot", src)
		checkPositions(t, src, ds)
		_ = RenderString(ds, map[string][]byte{"fuzz.bot": src})
		if w != nil {
			_ = w.String()
		}
	})
}
