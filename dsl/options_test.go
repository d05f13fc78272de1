package dsl

import (
	"fmt"
	"strings"
	"testing"
)

func TestLoopBoundCap(t *testing.T) {
	loop := func(bound string) []byte {
		return []byte("vars:\n  n: int = 1000000000\ntool t:\n  command: \"true\"\nworkflow w:\n  entry: t\n  t -> t as retry(" + bound + ")\n  t -> done\n")
	}
	for _, tc := range []struct {
		name  string
		opts  Options
		bound string
		want  int // the cap the warning names; 0 for no warning
	}{
		{name: "10^9 with the default cap", bound: "1000000000", want: DefaultMaxLoopBound},
		{name: "beyond int32 with the default cap", bound: "99999999999", want: DefaultMaxLoopBound},
		{name: "at the default cap", bound: "10000", want: 0},
		{name: "just above the default cap", bound: "10001", want: DefaultMaxLoopBound},
		{name: "a quoted number", bound: `"20000"`, want: DefaultMaxLoopBound},
		{name: "a small bound", bound: "3", want: 0},
		{name: "a raised cap", opts: Options{MaxLoopBound: 1_000_000}, bound: "20000", want: 0},
		{name: "above a raised cap", opts: Options{MaxLoopBound: 1_000_000}, bound: "1000001", want: 1_000_000},
		{name: "a lowered cap", opts: Options{MaxLoopBound: 10}, bound: "11", want: 10},
		{name: "no cap", opts: Options{MaxLoopBound: -1}, bound: "1000000000", want: 0},
		{name: "a bound read from a var is known only at run time", bound: `"{{vars.n}}"`, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := loop(tc.bound)
			w, ds := tc.opts.CompileSource("loop.bot", src)
			if ds.HasErrors() {
				t.Fatalf("errors:\n%s", ds.Error())
			}
			var got []*Diagnostic
			for _, d := range ds {
				if d.Code == LoopBoundOverCap {
					got = append(got, d)
				}
			}
			if tc.want == 0 {
				if len(got) != 0 {
					t.Fatalf("unexpected warning: %s", got[0].Error())
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("want one %s warning, got:\n%s", LoopBoundOverCap, ds.Error())
			}
			d := got[0]
			if d.Severity != SevWarning || d.Subject.Start.String() != "7:19" {
				t.Errorf("%s %s at %s, want a warning at 7:19 (the bound)", d.Severity, d.Code, d.Subject.Start)
			}
			if want := fmt.Sprintf("above the cap of %d", tc.want); !strings.Contains(d.Summary, want) {
				t.Errorf("summary %q, want it to say %q", d.Summary, want)
			}
			if !strings.Contains(d.Detail, "MaxLoopBound") || !strings.Contains(d.Detail, fmt.Sprintf("as retry(%d)", tc.want)) {
				t.Errorf("hint %q should say how to lower the bound and how to raise the cap", d.Detail)
			}
			if w.Loops[0].Max < 1 {
				t.Errorf("the bound is kept: Max = %d", w.Loops[0].Max)
			}
		})
	}
}

// The same loop on several edges is warned about once, where it is first
// declared.
func TestLoopBoundCapOncePerLoop(t *testing.T) {
	src := []byte("tool a:\n  command: \"true\"\ntool b:\n  command: \"true\"\nworkflow w:\n  entry: a\n  a -> b\n  b -> a as l(50000)\n  a -> a as l(50000)\n  b -> done\n")
	_, ds := CompileSource("loop.bot", src)
	n := 0
	for _, d := range ds {
		if d.Code == LoopBoundOverCap {
			n++
			if d.Subject.Start.String() != "8:15" {
				t.Errorf("warning at %s, want 8:15 (the first declaration)", d.Subject.Start)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, ds.Error())
	}
}
