package dsl

import (
	"strconv"
	"strings"
	"testing"
)

// hostileInputs are files crafted against the front end's worst cases, each
// just under the size limit. The test runs them (the suite's timeout is the
// backstop); BenchmarkHostile measures them, and BENCHMARKS.md records the
// numbers, so a quadratic regression shows up as a number, not a flaky timer.
func hostileInputs() map[string][]byte {
	in := map[string][]byte{}
	fill := func(prefix, unit, suffix string) []byte {
		var b strings.Builder
		b.WriteString(prefix)
		for b.Len()+len(unit)+len(suffix) < MaxFileSize {
			b.WriteString(unit)
		}
		b.WriteString(suffix)
		return []byte(b.String())
	}
	// One prompt line holding tens of thousands of references.
	in["refs-on-one-line"] = fill("vars:\n  x: string\nprompt p:\n  ", "{{vars.x}}{{vars.nope}}", "\nagent a:\n  model: \"m/x\"\n  user: p\nworkflow w:\n  entry: a\n  a -> done\n")
	// Thousands of edges to undeclared nodes, each wanting a suggestion.
	var b strings.Builder
	for i := range 3000 {
		b.WriteString("agent node" + strconv.Itoa(i) + ":\n  model: \"m/x\"\n")
	}
	b.WriteString("workflow w:\n  entry: node0\n")
	for i := 0; b.Len() < MaxFileSize-64; i++ {
		b.WriteString("  node" + strconv.Itoa(i%3000) + " -> nodx" + strconv.Itoa(i) + "\n")
	}
	in["unknown-targets"] = []byte(b.String())
	// A cycle at the end of a long chain: cycle detection must stay linear.
	b.Reset()
	const chain = 8000
	for i := range chain {
		b.WriteString("tool t" + strconv.Itoa(i) + ":\n  command: \"true\"\n")
	}
	b.WriteString("workflow w:\n  entry: t0\n")
	for i := 0; i+1 < chain; i++ {
		b.WriteString("  t" + strconv.Itoa(i) + " -> t" + strconv.Itoa(i+1) + "\n")
	}
	b.WriteString("  t" + strconv.Itoa(chain-1) + " -> t0\n")
	in["long-cycle"] = []byte(b.String())
	// Unterminated and nested template openings.
	in["template-openings"] = fill("prompt p:\n  ", "{{ {{vars.", "\nworkflow w:\n  entry: a\n")
	// Brackets opened to the depth limit, over and over.
	in["brackets"] = fill("agent a:\n  tools: ", strings.Repeat("[", MaxDepth-2)+strings.Repeat("]", MaxDepth-2)+"\n  x: ", "\n")
	// Garbage: every byte value.
	var g []byte
	for len(g) < MaxFileSize {
		for c := range 256 {
			g = append(g, byte(c))
		}
	}
	in["all-bytes"] = g[:MaxFileSize]
	return in
}

func TestHostileInputs(t *testing.T) {
	for name, src := range hostileInputs() {
		t.Run(name, func(t *testing.T) {
			if len(src) > MaxFileSize {
				t.Fatalf("input is %d bytes, over the limit", len(src))
			}
			_, ds := CompileSource("h.bot", src)
			if len(ds) == 0 {
				t.Errorf("no diagnostics for a hostile file")
			}
			if name == "brackets" {
				// A million tokens: the token limit stops the lexer.
				found := false
				for _, d := range ds {
					found = found || (d.Code == ErrTooLarge && strings.Contains(d.Summary, "tokens"))
				}
				if !found {
					t.Errorf("no E091 for more than MaxTokens tokens: %v", ds)
				}
			}
			if len(ds) > MaxDiagnostics+1 {
				t.Errorf("%d diagnostics, over the cap", len(ds))
			}
			checkPositions(t, src, ds)
		})
	}
}

func BenchmarkHostile(b *testing.B) {
	for name, src := range hostileInputs() {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				CompileSource("h.bot", src)
			}
		})
	}
}
