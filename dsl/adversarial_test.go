package dsl

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Adversarial graphs: valid workflows, each as large as the documented
// limits allow (MaxFileSize bytes, MaxTokens tokens, MaxReferenceUses
// reference uses), shaped against the compiler's graph and reference
// checks. They are valid so that every check runs to its end (a file full
// of errors stops at the diagnostic cap). BenchmarkAdversarial measures them (BENCHMARKS.md); the target is
// at most 2 s and 256 MB per file. TestAdversarialInputs guards the memory
// half of it, which, unlike time, does not depend on the machine's load.

// adversarialShapes builds each shape for a size parameter n.
var adversarialShapes = map[string]func(n int) string{
	// Every node reads the outputs of several earlier nodes, each a
	// different producer: one reachability question per reference.
	"cross-refs": func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "agent a%d:\n  model: \"anthropic/x\"\n  user: \"", i)
			if i > 0 {
				for _, j := range []int{i - 1, i / 2, i / 3, (i * 7919) % i} {
					fmt.Fprintf(&b, "{{outputs.a%d}}", j)
				}
			}
			b.WriteString("\"\n")
		}
		b.WriteString("workflow w:\n  entry: a0\n")
		chain(&b, "a", n)
		return b.String()
	},
	// Every node loops on itself, and goes on to the next.
	"self-loops": func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "tool t%d:\n  command: \"true\"\n", i)
		}
		b.WriteString("workflow w:\n  entry: t0\n")
		for i := range n {
			fmt.Fprintf(&b, "  t%d -> t%d as l%d(3)\n", i, i, i)
		}
		chain(&b, "t", n)
		return b.String()
	},
	// Every node loops back to the middle of the chain before it: nested
	// and overlapping loops, each over many nodes.
	"many-loops": func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "tool t%d:\n  command: \"true\"\n", i)
		}
		b.WriteString("workflow w:\n  entry: t0\n")
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, "  t%d -> t%d as l%d(2)\n", i, i/2, i)
		}
		chain(&b, "t", n)
		return b.String()
	},
	// The longest chain, written as one edge statement; its last node
	// reads the outputs of the first node and of the middle one.
	"deep-chain": func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "tool t%d:\n  command: \"true\"\n", i)
		}
		fmt.Fprintf(&b, "tool last:\n  command: \"echo {{outputs.t0}} {{outputs.t%d}}\"\n", n/2)
		b.WriteString("workflow w:\n  entry: t0\n  ")
		for i := range n {
			fmt.Fprintf(&b, "t%d -> ", i)
		}
		b.WriteString("last -> done\n")
		return b.String()
	},
	// One schema with n fields; an agent branches on every field, mapping
	// one input key per edge, and the next agent's prompt reads every
	// field and every key.
	"wide-schema": func(n int) string {
		var b strings.Builder
		b.WriteString("schema s:\n")
		for i := range n {
			fmt.Fprintf(&b, "  f%d: bool\n", i)
		}
		b.WriteString("agent a:\n  model: \"anthropic/x\"\n  output: s\n")
		b.WriteString("agent b:\n  model: \"anthropic/x\"\n  user: p\n")
		b.WriteString("prompt p:\n  ")
		for i := range n {
			fmt.Fprintf(&b, "{{outputs.a.f%d}}{{input.k%d}}", i, n-1-i)
		}
		b.WriteString("\nworkflow w:\n  entry: a\n")
		for i := range n {
			fmt.Fprintf(&b, "  a -> b when f%d with { k%d: \"x\" }\n", i, i)
		}
		b.WriteString("  a -> b else with { x: \"x\" }\n  b -> done\n")
		return b.String()
	},
	// One prompt full of references, used by a thousand nodes: its
	// references are checked for each node that uses it, as many as
	// MaxReferenceUses allows. n pads the file with comments to the size
	// limit.
	"shared-prompt": func(n int) string {
		const nodes = 1000
		var b strings.Builder
		for range n {
			b.WriteString("## " + strings.Repeat("x", 76) + "\n")
		}
		b.WriteString("vars:\n  v: string = \"x\"\nprompt p:\n  ")
		for range MaxReferenceUses / (3 * (nodes - 1)) {
			b.WriteString("{{vars.v}}{{outputs.a0.x}}{{input.k}}")
		}
		b.WriteString("\nschema s:\n  x: string\n")
		b.WriteString("agent a0:\n  model: \"anthropic/x\"\n  output: s\n")
		for i := 1; i < nodes; i++ {
			fmt.Fprintf(&b, "agent a%d:\n  model: \"anthropic/x\"\n  user: p\n", i)
		}
		b.WriteString("workflow w:\n  entry: a0\n")
		for i := 0; i+1 < nodes; i++ {
			fmt.Fprintf(&b, "  a%d -> a%d with { k: \"x\" }\n", i, i+1)
		}
		fmt.Fprintf(&b, "  a%d -> done\n", nodes-1)
		return b.String()
	},
	// Raw references to artifacts and to loops' previous outputs: each is
	// traced to what produced it, for E094.
	"raw-refs": func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "tool t%d:\n  publish: p%d\n  command: \"echo {{!artifacts.p%d}} {{!loop.l%d.previous_output}}\"\n", i, i, n-1-i, n-1-i)
		}
		b.WriteString("workflow w:\n  entry: t0\n")
		for i := range n {
			fmt.Fprintf(&b, "  t%d -> t%d as l%d(2)\n", i, i, i)
		}
		chain(&b, "t", n)
		return b.String()
	},
}

// chain writes the edges p0 -> p1 -> … -> p(n-1) -> done.
func chain(b *strings.Builder, prefix string, n int) {
	for i := 0; i+1 < n; i++ {
		fmt.Fprintf(b, "  %s%d -> %s%d\n", prefix, i, prefix, i+1)
	}
	fmt.Fprintf(b, "  %s%d -> done\n", prefix, n-1)
}

// withinLimits reports whether src is a file the documented limits accept
// whole: at most MaxFileSize bytes and MaxTokens tokens.
func withinLimits(src string) bool {
	if len(src) > MaxFileSize {
		return false
	}
	l := lex("x.bot", src, &diagSink{file: "x.bot", stage: StageParse, max: MaxDiagnostics})
	return !l.stopped
}

// largest returns the shape at the largest n within the limits.
func largest(shape func(int) string) string {
	lo, hi := 1, 2
	for withinLimits(shape(hi)) {
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; withinLimits(shape(mid)) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return shape(lo)
}

// adversarialInputs returns every shape at its largest, sorted by name.
// They are built once per test binary: finding the largest size lexes
// each shape a dozen times.
var adversarialInputs = sync.OnceValues(func() ([]string, map[string][]byte) {
	var names []string
	in := map[string][]byte{}
	for name, shape := range adversarialShapes {
		names = append(names, name)
		in[name] = []byte(largest(shape))
	}
	sort.Strings(names)
	return names, in
})

// TestAdversarialInputs compiles each adversarial input: it must be a
// valid workflow (so every check ran), and compiling it must allocate at
// most 256 MB in all, the memory half of the target. Total allocation
// bounds the peak heap and, unlike time, does not depend on the load of
// the machine. Before the graph checks shared one computation, cross-refs
// allocated 3.6 GB and wide-schema 32 GB.
func TestAdversarialInputs(t *testing.T) {
	const limit = 256 << 20
	names, in := adversarialInputs()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			src := in[name]
			if len(src) < MaxFileSize/2 {
				t.Fatalf("input is only %d bytes; the shape should fill the limits", len(src))
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			w, ds := CompileSource("a.bot", src)
			runtime.ReadMemStats(&after)
			if ds.HasErrors() {
				t.Fatalf("the shape must be a valid workflow, so every check runs:\n%s", ds.Error())
			}
			if len(w.Nodes) < 2 || len(w.Edges) < 2 {
				t.Fatalf("workflow not compiled: %d nodes, %d edges", len(w.Nodes), len(w.Edges))
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > limit {
				t.Errorf("compiling %d bytes allocated %d MB, want at most %d MB", len(src), got>>20, limit>>20)
			}
		})
	}
}

func BenchmarkAdversarial(b *testing.B) {
	names, in := adversarialInputs()
	for _, name := range names {
		src := in[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				CompileSource("a.bot", src)
			}
		})
	}
}
