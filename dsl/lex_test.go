package dsl

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// kinds lexes src and returns the token kinds and, for values, their text.
func kinds(src string) (string, Diagnostics) {
	sink := &diagSink{file: "t.bot", stage: StageParse, max: MaxDiagnostics}
	l := lex("t.bot", src, sink)
	var parts []string
	for _, t := range l.toks {
		s := t.kind.String()
		switch t.kind {
		case tokIdent, tokInt, tokFloat:
			s = t.text
		case tokString, tokRaw, tokText:
			s = t.kind.String() + "(" + t.val + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " "), sink.diags
}

func TestLex(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		want  string
		codes []Code
	}{
		{
			name: "header and property",
			src:  "agent a:\n  model: \"x\"\n",
			want: `"agent" a ":" end of line indented block model ":" string(x) end of line end of indented block end of file`,
		},
		{
			name: "comments both forms",
			src:  "## c1\n# c2\nvars: # trailing\n",
			want: `"vars" ":" end of line end of file`,
		},
		{
			name: "arrow, dash list and negative number",
			src:  "a -> b\n- x\n-3\n",
			want: `a "->" b end of line "-" x end of line -3 end of line end of file`,
		},
		{
			name:  "unquoted duration is reported and kept as a string",
			src:   "timeout: 20m\n",
			want:  `timeout ":" string(20m) end of line end of file`,
			codes: []Code{ErrExpected},
		},
		{
			name:  "tab indentation",
			src:   "a:\n\tb: 1\n",
			want:  `a ":" end of line indented block b ":" 1 end of line end of indented block end of file`,
			codes: []Code{ErrIndent},
		},
		{
			name: "prompt body is text, # inside is text",
			src:  "prompt p:\n  line # one\n    deeper\nagent a:\n",
			want: `"prompt" p ":" text block(line # one` + "\n" + `  deeper) end of line "agent" a ":" end of line end of file`,
		},
		{
			name: "block scalar keeps blank lines",
			src:  "x: |\n  one\n\n  two\ny: 1\n",
			want: "x \":\" text block(one\n\ntwo) end of line y \":\" 1 end of line end of file",
		},
		{
			name: "newlines inside brackets are insignificant",
			src:  "with {\n  a: \"1\",\n  b: 2\n}\n",
			want: `"with" "{" a ":" string(1) "," b ":" 2 "}" end of line end of file`,
		},
		{
			name: "profile 1 keeps backslashes, profile 2 decodes",
			src:  "a: \"x\\ny\"\n",
			want: `a ":" string(x\ny) end of line end of file`,
		},
		{
			name: "profile 2 decodes escapes",
			src:  "dsl: 2\na: \"x\\ty\"\n",
			want: "dsl \":\" 2 end of line a \":\" string(x\ty) end of line end of file",
		},
		{
			name:  "unterminated string",
			src:   "a: \"open\nb: 1\n",
			want:  `a ":" string(open) end of line b ":" 1 end of line end of file`,
			codes: []Code{ErrUnterminated},
		},
		{
			name:  "unknown profile",
			src:   "dsl: 7\n",
			want:  `dsl ":" 7 end of line end of file`,
			codes: []Code{ErrProfile},
		},
		{
			name:  "profile 1 keeps \\\" verbatim, warned once per string",
			src:   "a: \"{\\\"ok\\\": 1}\"\nb: \"\\\"\"\n",
			want:  `a ":" string({\"ok\": 1}) end of line b ":" string(\") end of line end of file`,
			codes: []Code{VerbatimQuoteEscape, VerbatimQuoteEscape},
		},
		{
			name: "profile 2 reads \\\" as a quote",
			src:  "dsl: 2\na: \"{\\\"ok\\\": 1}\"\n",
			want: `dsl ":" 2 end of line a ":" string({"ok": 1}) end of line end of file`,
		},
		{
			name: "strict-escape reads \\\" as a quote",
			src:  "## strict-escape: on\na: \"\\\"\"\n",
			want: `a ":" string(") end of line end of file`,
		},
		{
			name: "an escaped backslash before the closing quote is not \\\"",
			src:  "a: \"x\\\\\"\n",
			want: `a ":" string(x\\) end of line end of file`,
		},
		{
			name: "backtick strings and blocks have no escapes to warn about",
			src:  "a: `{\\\"ok\\\": 1}`\nb: |\n  \\\"\n",
			want: `a ":" raw string({\"ok\": 1}) end of line b ":" text block(\") end of line end of file`,
		},
		{
			name: "raw string spans lines",
			src:  "a: `x\ny`\n",
			want: "a \":\" raw string(x\ny) end of line end of file",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ds := kinds(tc.src)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tokens (-want +got):\n%s", diff)
			}
			var codes []Code
			for _, d := range ds {
				codes = append(codes, d.Code)
			}
			if diff := cmp.Diff(tc.codes, codes); diff != "" {
				t.Errorf("codes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStringPositions(t *testing.T) {
	// A reference inside a block body is reported at its own line and column.
	src := "prompt p:\n  hello\n  see {{vars.nope}}\nagent a:\n  model: \"m/x\"\n  user: p\nworkflow w:\n  entry: a\n  a -> done\n"
	_, ds := CompileSource("t.bot", []byte(src))
	if len(ds) != 1 || ds[0].Code != UndeclaredVar {
		t.Fatalf("diagnostics: %v", ds)
	}
	if got := ds[0].Subject.Start.String(); got != "3:7" {
		t.Errorf("position = %s, want 3:7", got)
	}
}

func BenchmarkCompileExamples(b *testing.B) {
	var srcs [][]byte
	for _, name := range []string{"async-questions", "pr-review", "nightly"} {
		src, err := os.ReadFile("../examples/" + name + "/main.bot")
		if err != nil {
			b.Fatal(err)
		}
		srcs = append(srcs, src)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, src := range srcs {
			if _, ds := CompileSource("x.bot", src); ds.HasErrors() {
				b.Fatal(ds)
			}
		}
	}
}

// BenchmarkCompileLarge measures a generated workflow near the size limit's
// order of magnitude: 2,000 chained agents.
func BenchmarkCompileLarge(b *testing.B) {
	var sb strings.Builder
	const n = 2000
	for i := range n {
		sb.WriteString("agent a" + itoa(i) + ":\n  model: \"anthropic/x\"\n  user: \"step {{vars.v}}\"\n\n")
	}
	sb.WriteString("vars:\n  v: string = \"x\"\n\nworkflow w:\n  entry: a0\n")
	for i := 0; i+1 < n; i++ {
		sb.WriteString("  a" + itoa(i) + " -> a" + itoa(i+1) + "\n")
	}
	sb.WriteString("  a" + itoa(n-1) + " -> done\n")
	src := []byte(sb.String())
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ds := CompileSource("x.bot", src); ds.HasErrors() {
			b.Fatal(ds)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
