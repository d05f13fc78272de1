package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const unformatted = `# the agent
agent   a :
    model:"anthropic/claude-sonnet-4-6"   # which model
workflow w:
    entry: a
    a->done
`

const formattedWant = `# the agent
agent a:
  model: "anthropic/claude-sonnet-4-6" # which model

workflow w:
  entry: a
  a -> done
`

const syntaxError = "agent a:\n  model: \"x\" \"y\"\nworkflow w:\n  entry: a\n  a -> done\n"

func TestFmtPrints(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "w.bot", unformatted)
	code, out, errOut := runCLI(t, "fmt", path)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if diff := cmp.Diff(formattedWant, out); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if src, _ := os.ReadFile(path); string(src) != unformatted {
		t.Errorf("fmt without -w changed the file")
	}
}

// newTree is a directory with a formatted and an unformatted workflow, a
// file that is no workflow and a hidden directory fmt must skip.
func newTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"ok.bot":            formattedWant,
		"sub/messy.iter":    unformatted,
		"notes.txt":         unformatted,
		".git/hidden.bot":   unformatted,
		"sub/deeper/ok.bot": formattedWant,
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestFmtList(t *testing.T) {
	t.Parallel()
	cli := newCLI(t)
	cli.dir = newTree(t)
	code, out, errOut := cli.run("fmt", "-l", ".")
	if code != exitError || errOut != "" {
		t.Fatalf("exit %d, want 1; stderr %q", code, errOut)
	}
	if want := filepath.Join("sub", "messy.iter") + "\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	code, out, _ = cli.run("fmt", "-l", "ok.bot", "sub/deeper")
	if code != exitOK || out != "" {
		t.Errorf("formatted files: exit %d, stdout %q; want 0 and nothing", code, out)
	}
}

func TestFmtDiff(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "w.bot", unformatted)
	code, out, _ := runCLI(t, "fmt", "-d", path)
	if code != exitError {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.HasPrefix(out, "--- "+path+"\n+++ "+path+" (formatted)\n@@ -1,6 +1,7 @@\n") {
		t.Errorf("diff header:\n%s", out)
	}
	if got := applyDiff(t, unformatted, out); got != formattedWant {
		t.Errorf("the diff does not turn the file into its formatted form:\n%s", out)
	}
	code, out, _ = runCLI(t, "fmt", "-d", writeFile(t, "ok.bot", formattedWant))
	if code != exitOK || out != "" {
		t.Errorf("formatted file: exit %d, stdout %q", code, out)
	}
}

func TestFmtWrite(t *testing.T) {
	t.Parallel()
	cli := newCLI(t)
	cli.dir = newTree(t)
	link := filepath.Join(cli.dir, "link.bot")
	if err := os.Symlink(filepath.Join("sub", "messy.iter"), link); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli.run("fmt", "-w", "link.bot")
	if code != exitOK || out != "" || errOut != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	messy := filepath.Join(cli.dir, "sub", "messy.iter")
	got, _ := os.ReadFile(messy)
	if diff := cmp.Diff(formattedWant, string(got)); diff != "" {
		t.Errorf("rewritten file (-want +got):\n%s", diff)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v %v", st, err)
	}
	if st, _ := os.Stat(messy); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want the original 0600", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Join(cli.dir, "sub"))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".fmt-") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
	if code, out, _ := cli.run("fmt", "-l", "."); code != exitOK || out != "" {
		t.Errorf("after -w: exit %d, -l lists %q", code, out)
	}
}

func TestFmtErrors(t *testing.T) {
	t.Parallel()
	bad := writeFile(t, "bad.bot", syntaxError)
	empty := t.TempDir()
	tests := []struct {
		name       string
		args       []string
		wantStderr []string
	}{
		{name: "no arguments", args: []string{"fmt"}, wantStderr: []string{"fmt needs at least one workflow file or directory"}},
		{name: "unknown flag", args: []string{"fmt", "-x", bad}, wantStderr: []string{"unknown shorthand flag: 'x'"}},
		{name: "syntax error", args: []string{"fmt", "-w", bad}, wantStderr: []string{
			"bad.bot:2:14: error [E001]: unexpected string \"y\" at end of line", bad + ": not formatted: 1 syntax error to fix first"}},
		{name: "missing file", args: []string{"fmt", "/nonexistent/x.bot"}, wantStderr: []string{"/nonexistent/x.bot: reading workflow:", "no such file or directory"}},
		{name: "wrong extension", args: []string{"fmt", "w.yaml"}, wantStderr: []string{`unsupported workflow extension ".yaml"`}},
		{name: "empty directory", args: []string{"fmt", empty}, wantStderr: []string{empty + ": no .bot or .iter file in this directory"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want 2", code)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			for _, want := range tc.wantStderr {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut)
				}
			}
		})
	}
	if src, _ := os.ReadFile(bad); string(src) != syntaxError {
		t.Errorf("a file with syntax errors was changed")
	}
}

// TestFmtExamples formats the examples through the CLI: all canonical.
func TestFmtExamples(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, "fmt", "-l", "../../examples")
	if code != exitOK || out != "" || errOut != "" {
		t.Errorf("exit %d, listed %q, stderr %q", code, out, errOut)
	}
}

// TestUnifiedDiff checks that the diff of random edits applies back.
func TestUnifiedDiff(t *testing.T) {
	t.Parallel()
	if got := unifiedDiff("f", "a\n", "a\n"); got != "" {
		t.Errorf("equal inputs: %q", got)
	}
	want := "--- f\n+++ f (formatted)\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
	if got := unifiedDiff("f", "a\nb\n", "a\nc\n"); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		a := randomLines(r)
		b := mutate(r, a)
		d := unifiedDiff("f", a, b)
		if got := applyDiff(t, a, d); got != b {
			t.Fatalf("case %d: applying\n%s\nto %q gave %q, want %q", i, d, a, got, b)
		}
	}
}

func randomLines(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(30) {
		fmt.Fprintf(&b, "l%d\n", r.IntN(6))
	}
	if r.IntN(4) == 0 {
		b.WriteString("last")
	}
	return b.String()
}

func mutate(r *rand.Rand, s string) string {
	lines := splitLines(s)
	var out []string
	for _, l := range lines {
		switch r.IntN(6) {
		case 0: // drop
		case 1:
			out = append(out, "new"+strconv.Itoa(r.IntN(3))+"\n", l)
		default:
			out = append(out, l)
		}
	}
	if r.IntN(3) == 0 {
		out = append(out, "tail")
	}
	return strings.Join(out, "")
}

// applyDiff applies a unified diff made by unifiedDiff to a, checking
// each context and deleted line against it.
func applyDiff(t *testing.T, a, diff string) string {
	t.Helper()
	if diff == "" {
		return a
	}
	src := splitLines(a)
	var out []string
	next := 0 // index in src of the next line not yet copied
	lines := strings.SplitAfter(diff, "\n")
	for i := 2; i < len(lines) && lines[i] != ""; i++ {
		l := lines[i]
		if strings.HasPrefix(l, "@@ ") {
			var as, al, bs, bl int
			if _, err := fmt.Sscanf(strings.ReplaceAll(strings.ReplaceAll(l, ",", " "), "@@", ""), " -%d %d +%d %d", &as, &al, &bs, &bl); err != nil {
				// A range of one line has no length.
				fields := strings.Fields(l)
				as, _ = strconv.Atoi(strings.Split(strings.TrimPrefix(fields[1], "-"), ",")[0])
				if !strings.Contains(fields[1], ",") {
					al = 1
				}
			}
			start := as - 1
			if al == 0 {
				start = as
			}
			out = append(out, src[next:start]...)
			next = start
			continue
		}
		text := l[1:]
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], `\ No newline`) {
			text = strings.TrimSuffix(text, "\n")
			i++
		}
		switch l[0] {
		case ' ', '-':
			if next >= len(src) || src[next] != text {
				t.Fatalf("line %d of the diff %q does not match the file's line %d", i, l, next+1)
			}
			if l[0] == ' ' {
				out = append(out, text)
			}
			next++
		case '+':
			out = append(out, text)
		default:
			t.Fatalf("unexpected diff line %q", l)
		}
	}
	out = append(out, src[next:]...)
	return strings.Join(out, "")
}
