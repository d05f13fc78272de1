package dsl

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Tests of the limits on hostile input: file size (E091), the diagnostic
// cap (E092) and nesting depth (E003). E091 has no testdata/codes case (a
// file over 1 MiB does not belong in the repository): TestFileTooLarge
// covers it.

// smallWorkflow is a valid workflow; padding is inserted as comment lines
// (or a prompt body) to reach a given size.
const smallWorkflow = `prompt summary_user:
  Summarize the open issues of the project.

agent summarizer:
  model: "anthropic/claude-sonnet-4-6"
  user: summary_user

workflow summary:
  entry: summarizer
  summarizer -> done
`

// padTo returns smallWorkflow preceded by comment lines so that the whole
// source is exactly size bytes.
func padTo(t *testing.T, size int) []byte {
	t.Helper()
	var b strings.Builder
	line := "## " + strings.Repeat("x", 76) + "\n" // 80 bytes
	for b.Len()+len(line)+len(smallWorkflow) <= size {
		b.WriteString(line)
	}
	if rest := size - b.Len() - len(smallWorkflow); rest > 0 {
		if rest == 1 {
			b.WriteString("\n")
		} else {
			b.WriteString("#" + strings.Repeat("x", rest-2) + "\n")
		}
	}
	b.WriteString(smallWorkflow)
	if b.Len() != size {
		t.Fatalf("padTo built %d bytes, want %d", b.Len(), size)
	}
	return []byte(b.String())
}

func TestFileTooLarge(t *testing.T) {
	t.Run("over the limit", func(t *testing.T) {
		src := padTo(t, MaxFileSize+1)
		w, ds := CompileSource("big.bot", src)
		// The file is refused as a whole: one E091 at 1:1 and nothing else
		// (in particular no C006 "no workflow", which is not the problem).
		if len(ds) != 1 || ds[0].Code != ErrTooLarge {
			t.Fatalf("want exactly one %s, got:\n%s", ErrTooLarge, ds.Error())
		}
		d := ds[0]
		if d.Severity != SevError || d.Subject.Start.String() != "1:1" || d.Subject.File != "big.bot" {
			t.Errorf("E091 = %s %s at %s, want an error at big.bot:1:1", d.Severity, d.Code, d.Subject)
		}
		if !strings.Contains(d.Summary, fmt.Sprint(MaxFileSize+1)) {
			t.Errorf("summary %q should give the file size", d.Summary)
		}
		// Compile always returns a workflow; for a refused file it is empty.
		if w == nil || w.Name != "" || len(w.Nodes) != 0 {
			t.Errorf("a refused file must yield an empty workflow, got %v", w)
		}
	})
	t.Run("a large prompt body", func(t *testing.T) {
		// Realistic shape: a workflow whose prompt pastes a huge document.
		body := strings.Repeat("  Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n", MaxFileSize/50+10)
		src := []byte("prompt summary_user:\n" + body + strings.TrimPrefix(smallWorkflow, "prompt summary_user:\n  Summarize the open issues of the project.\n"))
		if len(src) <= MaxFileSize {
			t.Fatalf("input is only %d bytes", len(src))
		}
		_, ds := CompileSource("big.bot", src)
		if len(ds) != 1 || ds[0].Code != ErrTooLarge {
			t.Fatalf("want exactly one %s, got:\n%s", ErrTooLarge, ds.Error())
		}
	})
	t.Run("exactly at the limit", func(t *testing.T) {
		src := padTo(t, MaxFileSize)
		w, ds := CompileSource("big.bot", src)
		if len(ds) != 0 {
			t.Fatalf("a file of exactly MaxFileSize bytes must be accepted, got:\n%s", ds.Error())
		}
		if w == nil || w.Entry != "summarizer" {
			t.Fatalf("workflow not compiled: %v", w)
		}
	})
}

// checkCapped asserts that ds is exactly MaxDiagnostics diagnostics followed
// by one E092 summary that counts the total-MaxDiagnostics not shown.
func checkCapped(t *testing.T, ds Diagnostics, total int) {
	t.Helper()
	if len(ds) != MaxDiagnostics+1 {
		t.Fatalf("got %d diagnostics, want %d + one %s:\n%s", len(ds), MaxDiagnostics, ErrTooManyDiags, ds.Error())
	}
	for i, d := range ds[:MaxDiagnostics] {
		if d.Code == ErrTooManyDiags {
			t.Errorf("diagnostic %d is a %s summary (%s); the summary must come once, last", i, d.Code, d.Error())
		}
	}
	last := ds[MaxDiagnostics]
	if last.Code != ErrTooManyDiags || last.Severity != SevError {
		t.Fatalf("last diagnostic is %s, want the %s summary", last.Error(), ErrTooManyDiags)
	}
	if want := fmt.Sprintf("%d more not shown", total-MaxDiagnostics); !strings.Contains(last.Summary, want) {
		t.Errorf("summary %q, want it to say %q (%d problems in all)", last.Summary, want, total)
	}
	if !last.Subject.Start.IsValid() {
		t.Errorf("summary has no position")
	}
}

func TestTooManyDiagnostics(t *testing.T) {
	t.Run("compile errors", func(t *testing.T) {
		// 60 schema fields of an unknown type: 60 E021 from the compiler.
		var b strings.Builder
		b.WriteString("schema audit_report:\n")
		for i := 1; i <= 60; i++ {
			fmt.Fprintf(&b, "  check_%02d: text\n", i)
		}
		b.WriteString(strings.Replace(smallWorkflow, "  user: summary_user\n", "  user: summary_user\n  output: audit_report\n", 1))
		_, ds := CompileSource("many.bot", []byte(b.String()))
		checkCapped(t, ds, 60)
		if d := ds[MaxDiagnostics-1]; d.Code != ErrBadType || d.Subject.Start.String() != "51:13" {
			t.Errorf("50th diagnostic = %s, want E021 at 51:13 (the sorted order must be kept)", d.Error())
		}
	})
	t.Run("parse errors", func(t *testing.T) {
		// 60 misspelled properties on one agent: 60 E012 from the parser.
		var b strings.Builder
		b.WriteString("agent summarizer:\n  model: \"anthropic/claude-sonnet-4-6\"\n")
		for i := 1; i <= 60; i++ {
			fmt.Fprintf(&b, "  temperature_%02d: 1\n", i)
		}
		b.WriteString("\nworkflow summary:\n  entry: summarizer\n  summarizer -> done\n")
		_, ds := CompileSource("many.bot", []byte(b.String()))
		checkCapped(t, ds, 60)
	})
	t.Run("parse and compile errors", func(t *testing.T) {
		// 30 parse errors (E012) and 30 compile errors (C001).
		var b strings.Builder
		b.WriteString("agent summarizer:\n  model: \"anthropic/claude-sonnet-4-6\"\n")
		for i := 1; i <= 30; i++ {
			fmt.Fprintf(&b, "  temperature_%02d: 1\n", i)
		}
		b.WriteString("\nworkflow summary:\n  entry: summarizer\n  summarizer -> done\n")
		for i := 1; i <= 30; i++ {
			fmt.Fprintf(&b, "  step_%02d -> done\n", i)
		}
		_, ds := CompileSource("many.bot", []byte(b.String()))
		checkCapped(t, ds, 60)
	})
	t.Run("compile sink overflow", func(t *testing.T) {
		// More compile errors than the compiler's own sink keeps
		// (4*MaxDiagnostics): 250 edges from undeclared nodes.
		var b strings.Builder
		b.WriteString(smallWorkflow)
		for i := 1; i <= 250; i++ {
			fmt.Fprintf(&b, "  step_%03d -> done\n", i)
		}
		_, ds := CompileSource("many.bot", []byte(b.String()))
		checkCapped(t, ds, 250)
		if d := ds[0]; d.Code != UndeclaredNode {
			t.Errorf("first diagnostic = %s, want the first C001 in source order", d.Error())
		}
	})
	t.Run("exactly at the cap", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("schema audit_report:\n")
		for i := 1; i <= MaxDiagnostics; i++ {
			fmt.Fprintf(&b, "  check_%02d: text\n", i)
		}
		b.WriteString(strings.Replace(smallWorkflow, "  user: summary_user\n", "  user: summary_user\n  output: audit_report\n", 1))
		_, ds := CompileSource("many.bot", []byte(b.String()))
		if len(ds) != MaxDiagnostics {
			t.Fatalf("got %d diagnostics, want %d", len(ds), MaxDiagnostics)
		}
		for _, d := range ds {
			if d.Code == ErrTooManyDiags {
				t.Fatalf("unexpected summary at exactly the cap: %s", d.Error())
			}
		}
	})
}

// Nesting depth is the number of indentation levels below column 0 plus
// the open brackets; MaxDepth levels are allowed, one more is E003.

// nestedBlocks returns an agent whose description property nests levels
// indentation levels deep (the agent's properties are level 1). Parse
// accepts nested blocks anywhere; only the compiler gives them meaning.
func nestedBlocks(levels int) (src string, deepest int) {
	var b strings.Builder
	b.WriteString("agent summarizer:\n")
	for lv := 1; lv < levels; lv++ {
		key := fmt.Sprintf("block_%02d", lv)
		if lv == 1 {
			key = "description" // a known property: the nested keys are not checked by Parse
		}
		fmt.Fprintf(&b, "%s%s:\n", strings.Repeat("  ", lv), key)
	}
	fmt.Fprintf(&b, "%sleaf: \"x\"\n", strings.Repeat("  ", levels))
	return b.String(), levels + 1 // line of the deepest level
}

// nestedBrackets returns a var whose default nests brackets lists inside
// one another, on a line at indentation level 1. It returns the column of
// the last opening bracket.
func nestedBrackets(brackets int) (src string, lastOpen int) {
	prefix := "  matrix: json = "
	src = "vars:\n" + prefix + strings.Repeat("[", brackets) + "1" + strings.Repeat("]", brackets) + "\n"
	return src, len(prefix) + brackets
}

func TestNestingTooDeep(t *testing.T) {
	t.Run("indentation", func(t *testing.T) {
		src, line := nestedBlocks(MaxDepth + 1)
		_, ds := Parse("deep.bot", []byte(src))
		want := fmt.Sprintf("%d:1", line)
		n := 0
		for _, d := range ds {
			if d.Code == ErrIndent {
				n++
				if d.Subject.Start.String() != want {
					t.Errorf("E003 at %s, want %s (the line that goes one level too deep)", d.Subject.Start, want)
				}
			}
		}
		if n != 1 {
			t.Errorf("want one %s, got:\n%s", ErrIndent, ds.Error())
		}
	})
	t.Run("brackets", func(t *testing.T) {
		// One indentation level plus MaxDepth brackets.
		src, col := nestedBrackets(MaxDepth)
		_, ds := Parse("deep.bot", []byte(src))
		want := fmt.Sprintf("2:%d", col)
		n := 0
		for _, d := range ds {
			if d.Code == ErrIndent {
				n++
				if d.Subject.Start.String() != want {
					t.Errorf("E003 at %s, want %s (the bracket that goes one level too deep)", d.Subject.Start, want)
				}
			}
		}
		if n != 1 {
			t.Errorf("want one %s, got:\n%s", ErrIndent, ds.Error())
		}
	})
	t.Run("brackets in a with map", func(t *testing.T) {
		// Brackets in a multi-line with { … } on an edge: line breaks inside
		// brackets do not reset the depth.
		src := smallWorkflow + "  summarizer -> done with {\n    a: " + strings.Repeat("[", 2*MaxDepth) + "\n  }\n"
		_, ds := Parse("deep.bot", []byte(src))
		found := false
		for _, d := range ds {
			found = found || d.Code == ErrIndent
		}
		if !found {
			t.Errorf("want %s, got:\n%s", ErrIndent, ds.Error())
		}
	})
	t.Run("hostile input stops", func(t *testing.T) {
		// 100k open brackets must be refused quickly with one E003.
		src := "vars:\n  x: json = " + strings.Repeat("[", 100000) + "\n"
		_, ds := CompileSource("deep.bot", []byte(src))
		n := 0
		for _, d := range ds {
			if d.Code == ErrIndent {
				n++
			}
		}
		if n != 1 {
			t.Errorf("want one %s, got %d:\n%s", ErrIndent, n, ds.Error())
		}
	})
}

func TestMaxDepthOK(t *testing.T) {
	t.Run("indentation", func(t *testing.T) {
		src, _ := nestedBlocks(MaxDepth)
		if _, ds := Parse("deep.bot", []byte(src)); len(ds) != 0 {
			t.Errorf("%d indentation levels must parse cleanly, got:\n%s", MaxDepth, ds.Error())
		}
	})
	t.Run("brackets", func(t *testing.T) {
		// One indentation level plus MaxDepth-1 brackets: MaxDepth in all.
		src, _ := nestedBrackets(MaxDepth - 1)
		if _, ds := Parse("deep.bot", []byte(src)); len(ds) != 0 {
			t.Errorf("1 indentation level + %d brackets must parse cleanly, got:\n%s", MaxDepth-1, ds.Error())
		}
	})
}

// referenceUses builds a workflow whose prompt of per references is used
// by nodes nodes, then a last node with extra inline references: nodes×per
// + extra reference uses in all. It returns the line of the last node's
// user: property.
func referenceUses(nodes, per, extra int) (src []byte, lastLine int) {
	var b strings.Builder
	b.WriteString("vars:\n  v: string = \"x\"\nprompt p:\n  " + strings.Repeat("{{vars.v}}", per) + "\n")
	for i := range nodes {
		fmt.Fprintf(&b, "agent a%d:\n  model: \"anthropic/x\"\n  user: p\n", i)
	}
	b.WriteString("agent last:\n  model: \"anthropic/x\"\n")
	lastLine = strings.Count(b.String(), "\n") + 1
	b.WriteString("  user: \"" + strings.Repeat("{{vars.v}}", extra) + "x\"\n")
	b.WriteString("workflow w:\n  entry: a0\n")
	for i := range nodes {
		fmt.Fprintf(&b, "  a%d -> ", i)
	}
	b.WriteString("last -> done\n")
	return []byte(b.String()), lastLine
}

func TestTooManyReferenceUses(t *testing.T) {
	const nodes, per = 1024, 1024 // nodes × per == MaxReferenceUses
	if nodes*per != MaxReferenceUses {
		t.Fatalf("the test assumes MaxReferenceUses = %d", nodes*per)
	}
	t.Run("at the limit", func(t *testing.T) {
		src, _ := referenceUses(nodes, per, 0)
		if _, ds := CompileSource("refs.bot", src); len(ds) != 0 {
			t.Fatalf("exactly MaxReferenceUses reference uses must be accepted, got:\n%s", ds.Error())
		}
	})
	t.Run("one over", func(t *testing.T) {
		src, line := referenceUses(nodes, per, 1)
		_, ds := CompileSource("refs.bot", src)
		if len(ds) != 1 || ds[0].Code != ErrTooLarge || ds[0].Severity != SevError {
			t.Fatalf("want exactly one %s error, got:\n%s", ErrTooLarge, ds.Error())
		}
		d := ds[0]
		if want := fmt.Sprintf("%d:10", line); d.Subject.Start.String() != want || d.NodeID != "last" {
			t.Errorf("E091 at %s on node %q, want %s on node \"last\" (the reference past the limit)", d.Subject.Start, d.NodeID, want)
		}
		if !strings.Contains(d.Summary, fmt.Sprint(MaxReferenceUses)) || !strings.Contains(d.Summary, `user of agent "last"`) {
			t.Errorf("summary %q should give the limit and the site", d.Summary)
		}
	})
	t.Run("references before the limit are still checked", func(t *testing.T) {
		src, _ := referenceUses(nodes, per, 1)
		src = []byte(strings.Replace(string(src), "{{vars.v}}", "{{vars.w}}", 1))
		_, ds := CompileSource("refs.bot", src)
		var codes []Code
		for _, d := range ds {
			codes = append(codes, d.Code)
		}
		if !slices.Contains(codes, UndeclaredVar) || !slices.Contains(codes, ErrTooLarge) {
			t.Errorf("want the C033 of the prompt and the E091, got %v", codes)
		}
	})
}
