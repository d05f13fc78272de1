package dsl

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"
)

// checkFormat formats src and checks the formatter's three promises: the
// result formats to itself, parses to the same tree (positions aside) and
// compiles to the same IR with the same diagnostic codes, and keeps every
// comment in order. It returns false when Format refused the file, which
// it may only do with the file's own diagnostics.
func checkFormat(tb testing.TB, name string, src []byte) bool {
	tb.Helper()
	out, err := Format(name, src)
	if err != nil {
		if errors.Is(err, errSharedLine) {
			return false
		}
		var ds Diagnostics
		if !errors.As(err, &ds) {
			tb.Fatalf("%s: Format: %v", name, err)
		}
		if !ds.HasErrors() {
			tb.Fatalf("%s: refused without an error diagnostic: %v", name, ds)
		}
		return false
	}
	again, err := Format(name, out)
	if err != nil {
		tb.Fatalf("%s: formatting the formatted file: %v\n%s", name, err, out)
	}
	if diff := cmp.Diff(string(out), string(again)); diff != "" {
		tb.Fatalf("%s: not idempotent (-once +twice):\n%s", name, diff)
	}
	f, _ := Parse(name, src)
	g, _ := Parse(name, out)
	if diff := cmp.Diff(strippedTree(f), strippedTree(g)); diff != "" {
		tb.Fatalf("%s: the tree changed (-before +after):\n%s\nformatted:\n%s", name, diff, out)
	}
	if diff := cmp.Diff(commentTexts(f), commentTexts(g)); diff != "" {
		tb.Fatalf("%s: comments changed (-before +after):\n%s", name, diff)
	}
	w1, d1 := CompileSource(name, src)
	w2, d2 := CompileSource(name, out)
	if (w1 == nil) != (w2 == nil) || (w1 != nil && w1.String() != w2.String()) {
		tb.Fatalf("%s: the IR changed:\n%v\n---\n%v", name, w1, w2)
	}
	if diff := cmp.Diff(codesOf(d1), codesOf(d2)); diff != "" {
		tb.Fatalf("%s: diagnostics changed (-before +after):\n%s", name, diff)
	}
	return true
}

func codesOf(ds Diagnostics) []string {
	var codes []string
	for _, d := range ds {
		codes = append(codes, string(d.Severity.String())+" "+string(d.Code))
	}
	slices.Sort(codes)
	return codes
}

// TestFormatGolden formats every input of the golden and code cases; the
// golden inputs without parse errors and the examples must all be
// formatted.
func TestFormatGolden(t *testing.T) {
	archives, err := filepath.Glob("testdata/*/*.txtar")
	if err != nil || len(archives) == 0 {
		t.Fatalf("no archives: %v", err)
	}
	formatted := 0
	for _, path := range archives {
		ar, err := txtar.ParseFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, af := range ar.Files {
			if !strings.HasSuffix(af.Name, ".bot") {
				continue
			}
			name := strings.TrimSuffix(filepath.Base(path), ".txtar") + "/" + af.Name
			t.Run(name, func(t *testing.T) {
				ok := checkFormat(t, af.Name, af.Data)
				f, ds := Parse(af.Name, af.Data)
				if !ok && !f.partial && formattable(ds) {
					t.Fatalf("refused a file whose parse diagnostics leave the tree whole:\n%s", RenderString(ds, map[string][]byte{af.Name: af.Data}))
				}
				if ok {
					formatted++
				}
			})
		}
	}
	if formatted < len(archives) {
		t.Errorf("only %d inputs formatted out of %d archives", formatted, len(archives))
	}
}

// TestFormatExamples formats the shipped examples: each is already in
// canonical form.
func TestFormatExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/*/*.bot")
	if err != nil || len(files) < 4 {
		t.Fatalf("examples missing: %v %v", files, err)
	}
	for _, file := range files {
		t.Run(filepath.Base(filepath.Dir(file)), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !checkFormat(t, file, src) {
				t.Fatal("refused")
			}
			out, _ := Format(file, src)
			if diff := cmp.Diff(string(src), string(out)); diff != "" {
				t.Errorf("the example is not in canonical form (-file +fmt):\n%s", diff)
			}
		})
	}
}

// TestFormatUpstreamCorpus formats every .bot and .iter file of upstream
// iterion's repository, read from the git directory that
// ITERION_UPSTREAM_GIT names (the one "fetch github:SocialGouv/iterion"
// gives). Every file that parses with its tree whole must be formatted.
func TestFormatUpstreamCorpus(t *testing.T) {
	dir := os.Getenv("ITERION_UPSTREAM_GIT")
	if dir == "" {
		t.Skip("set ITERION_UPSTREAM_GIT to a git directory of github.com/SocialGouv/iterion to format its corpus")
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"--git-dir", dir}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return string(out)
	}
	var paths []string
	for _, p := range strings.Split(git("ls-tree", "-r", "--name-only", "HEAD"), "\n") {
		if strings.HasSuffix(p, ".bot") || strings.HasSuffix(p, ".iter") {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		t.Fatal("no workflow files in the upstream repository")
	}
	formatted := 0
	for _, p := range paths {
		src := []byte(git("show", "HEAD:"+p))
		if checkFormat(t, p, src) {
			formatted++
		} else {
			_, ds := Parse(p, src)
			t.Logf("%s: not formatted: %s", p, ds[0].Summary)
		}
	}
	t.Logf("%d of %d upstream files formatted", formatted, len(paths))
}

// TestFormatCases runs testdata/fmt/*.txtar: in.bot formats to out.bot,
// and the three promises hold. go test ./dsl -update rewrites out.bot.
func TestFormatCases(t *testing.T) {
	files, err := filepath.Glob("testdata/fmt/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			in := archiveFile(t, ar, "in.bot")
			got, err := Format("in.bot", in)
			if err != nil {
				t.Fatalf("Format: %v", err)
			}
			if *update {
				ar.Files = []txtar.File{{Name: "in.bot", Data: in}, {Name: "out.bot", Data: got}}
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(string(archiveFile(t, ar, "out.bot")), string(got)); diff != "" {
				t.Errorf("out.bot mismatch (-want +got):\n%s\n(run go test ./dsl -update to accept)", diff)
			}
			checkFormat(t, "in.bot", in)
		})
	}
}

// TestFormatRefuses checks that a file the parser had to recover in is left
// alone, with its diagnostics as the error.
func TestFormatRefuses(t *testing.T) {
	tests := []struct {
		name string
		src  string
		code Code
	}{
		{name: "unexpected token", src: "agent a:\n  model: \"x\" \"y\"\n", code: ErrUnexpected},
		{name: "unterminated string", src: "agent a:\n  model: \"x\n", code: ErrUnterminated},
		{name: "unquoted value", src: "agent a:\n  model: gpt-5\n", code: ErrExpected},
		{name: "tab indentation", src: "agent a:\n\tmodel: \"x\"\n", code: ErrIndent},
		{name: "unknown declaration", src: "agnet a:\n  model: \"x\"\n", code: ErrUnknownDecl},
		{name: "header after a declaration", src: "agent a:\n  model: \"x\"\ndsl: 2\n", code: ErrProfileNotFirst},
		{name: "foreach loop", src: "workflow w:\n  entry: a\n  a -> a as foreach\n", code: ErrUnsupported},
		{name: "duplicate when", src: "workflow w:\n  entry: a\n  a -> b when x when y\n", code: ErrDuplicateClause},
		{name: "duplicate vars block", src: "workflow w:\n  entry: a\n  vars:\n    x: int\n  vars:\n    y: int\n  a -> b\n", code: ErrDuplicate},
		{name: "missing value", src: "agent a:\n  model:\n", code: ErrExpected},
		{name: "not UTF-8", src: "agent a:\n  model: \"\xff\"\n", code: ErrNotUTF8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Format("x.bot", []byte(tc.src))
			if out != nil {
				t.Errorf("Format returned output for a file with syntax errors:\n%s", out)
			}
			var ds Diagnostics
			if !errors.As(err, &ds) {
				t.Fatalf("err = %v, want the file's diagnostics", err)
			}
			if !slices.ContainsFunc(ds, func(d *Diagnostic) bool { return d.Code == tc.code }) {
				t.Errorf("diagnostics %v, want one with code %s", ds, tc.code)
			}
		})
	}
}

// TestFormatAcceptsWholeTrees checks that errors which leave the tree
// whole do not stop the formatter: upstream workflows are formatted.
func TestFormatAcceptsWholeTrees(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{name: "unknown property", src: "agent a:\n  modle:   \"x\"\n", want: "agent a:\n  modle: \"x\"\n"},
		{name: "unsupported property", src: "agent a:\n  readonly:true\n", want: "agent a:\n  readonly: true\n"},
		{name: "duplicate property", src: "agent a:\n  model: \"x\"\n  model: \"y\"\n", want: "agent a:\n  model: \"x\"\n  model: \"y\"\n"},
		{name: "empty node", src: "agent a:\nagent b:\n  model: \"x\"\n", want: "agent a:\n\nagent b:\n  model: \"x\"\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Format("x.bot", []byte(tc.src))
			if err != nil {
				t.Fatalf("Format: %v", err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			checkFormat(t, "x.bot", []byte(tc.src))
		})
	}
}

// FuzzFormat checks the formatter's promises on any input that parses:
// idempotent, the same tree and IR, every comment kept in order; and on
// every input, that Format never fails its own check.
func FuzzFormat(f *testing.F) {
	fuzzSeeds(f)
	f.Add([]byte("agent a: # c\n  tools: [a, # b\n    c]\n  x: { k: 1, # d\n  }\n# e\n"))
	f.Add([]byte("dsl: 2\nprompt p:\n  a\n\n  b\n#x\nsubbot s:\n  y: |\n    z\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		checkFormat(t, "fuzz.bot", src)
	})
}

// BenchmarkFormat measures Format (parse, print, and the check that the
// result parses to the same tree) on the largest shipped example and on
// the generated 2,000-agent workflow of BenchmarkCompileLarge, with a
// comment on every agent.
func BenchmarkFormat(b *testing.B) {
	paths, _ := filepath.Glob("../examples/*/*.bot")
	var largest []byte
	for _, p := range paths {
		if src, err := os.ReadFile(p); err == nil && len(src) > len(largest) {
			largest = src
		}
	}
	var sb strings.Builder
	const n = 2000
	for i := range n {
		sb.WriteString("# step " + itoa(i) + "\nagent a" + itoa(i) + ":\n  model: \"anthropic/x\" # the model\n  user: \"step {{vars.v}}\"\n\n")
	}
	sb.WriteString("vars:\n  v: string = \"x\"\n\nworkflow w:\n  entry: a0\n")
	for i := 0; i+1 < n; i++ {
		sb.WriteString("  a" + itoa(i) + " -> a" + itoa(i+1) + "\n")
	}
	sb.WriteString("  a" + itoa(n-1) + " -> done\n")
	for _, bc := range []struct {
		name string
		src  []byte
	}{{"largest-example", largest}, {"large", []byte(sb.String())}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Format("x.bot", bc.src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
