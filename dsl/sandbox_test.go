package dsl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSandboxFor checks which declaration each node runs under: its own,
// else the workflow's, else none (the server's default), and that each
// declaration keeps the range it was written at.
func TestSandboxFor(t *testing.T) {
	const withWorkflow = `tool own:
  command: "true"
  sandbox:
    image: "golang:1.26"
    env:
      GOFLAGS: "-count=1"

tool inherits:
  command: "true"

workflow w:
  entry: own
  sandbox: bwrap
  own -> inherits -> done
`
	const withoutWorkflow = `tool plain:
  command: "true"

workflow w:
  entry: plain
  plain -> done
`
	tests := []struct {
		name string
		src  string
		node string
		want *Sandbox
	}{
		{
			name: "own declaration",
			src:  withWorkflow, node: "own",
			want: &Sandbox{Mode: SandboxDocker, Image: "golang:1.26", Env: map[string]string{"GOFLAGS": "-count=1"},
				Range: Range{File: "w.bot", Start: posAt(withWorkflow, 3, 3), End: posAt(withWorkflow, 8, 1)}},
		},
		{
			name: "inherits the workflow's",
			src:  withWorkflow, node: "inherits",
			want: &Sandbox{Mode: SandboxBwrap,
				Range: Range{File: "w.bot", Start: posAt(withWorkflow, 13, 3), End: posAt(withWorkflow, 13, 17)}},
		},
		{
			name: "server default",
			src:  withoutWorkflow, node: "plain",
			want: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, ds := CompileSource("w.bot", []byte(tc.src))
			if len(ds) > 0 {
				t.Fatalf("diagnostics:\n%s", RenderString(ds, map[string][]byte{"w.bot": []byte(tc.src)}))
			}
			n := w.Node(tc.node)
			if n == nil {
				t.Fatalf("no node %q", tc.node)
			}
			if diff := cmp.Diff(tc.want, w.SandboxFor(n)); diff != "" {
				t.Errorf("SandboxFor(%s) mismatch (-want +got):\n%s", tc.node, diff)
			}
		})
	}
}

// posAt returns the Pos of line:col (ASCII source) in src.
func posAt(src string, line, col int) Pos {
	off := 0
	for l := 1; l < line; l++ {
		off += strings.IndexByte(src[off:], '\n') + 1
	}
	return Pos{Line: line, Col: col, Byte: off + col - 1}
}

func TestSandboxModeString(t *testing.T) {
	tests := []struct {
		name string
		mode SandboxMode
		want string
	}{
		{"zero", SandboxInvalid, "invalid"},
		{"auto", SandboxAuto, "auto"},
		{"host", SandboxHost, "host"},
		{"bwrap", SandboxBwrap, "bwrap"},
		{"docker", SandboxDocker, "docker"},
		{"out of range", SandboxDocker + 1, "invalid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.mode.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSandboxEnvValues covers what the golden files cannot write plainly:
// a NUL in a value (profile 2 decodes \u0000), which no environment holds.
func TestSandboxEnvValues(t *testing.T) {
	tests := []struct {
		name     string
		value    string
		wantCode Code
	}{
		{name: "plain", value: `"x y"`},
		{name: "nul", value: `"a\u0000b"`, wantCode: ErrInvalidValue},
		{name: "template", value: `"{{run.id}}"`, wantCode: ErrUnsupported},
		{name: "server env", value: `"${HOME}"`, wantCode: ErrUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "dsl: 2\ntool t:\n  command: \"true\"\n  sandbox:\n    mode: auto\n    env:\n      V: " + tc.value + "\n\nworkflow w:\n  entry: t\n  t -> done\n"
			_, ds := CompileSource("w.bot", []byte(src))
			var got Code
			for _, d := range ds {
				got = d.Code
			}
			if got != tc.wantCode || len(ds) > 1 {
				t.Errorf("codes = %v, want only %q", ds, tc.wantCode)
			}
		})
	}
}

// Past the diagnostic cap, a file of warnings alone still validates: the
// E092 summary of the warnings left out is a warning too; one error among
// them makes it an error.
func TestOverflowOfWarningsIsAWarning(t *testing.T) {
	file := func(withError bool) string {
		var b strings.Builder
		for i := range MaxDiagnostics + 10 {
			fmt.Fprintf(&b, "tool t%d:\n  command: \"true\"\n  sandbox: none\n", i)
		}
		if withError {
			b.WriteString("tool zz:\n  command: \"true\"\n  sandbox: podman\n")
		}
		b.WriteString("workflow w:\n  entry: t0\n")
		for i := range MaxDiagnostics + 9 {
			fmt.Fprintf(&b, "  t%d -> t%d\n", i, i+1)
		}
		if withError {
			fmt.Fprintf(&b, "  t%d -> zz\n  zz -> done\n", MaxDiagnostics+9)
		} else {
			fmt.Fprintf(&b, "  t%d -> done\n", MaxDiagnostics+9)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name      string
		withError bool
		wantSev   Severity
	}{
		{"warnings only", false, SevWarning},
		{"an error among them", true, SevError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ds := CompileSource("many.bot", []byte(file(tc.withError)))
			last := ds[len(ds)-1]
			if last.Code != ErrTooManyDiags || last.Severity != tc.wantSev {
				t.Fatalf("last diagnostic = %s %v, want E092 %v", last.Code, last.Severity, tc.wantSev)
			}
			if ds.HasErrors() != tc.withError {
				t.Errorf("HasErrors = %v, want %v", ds.HasErrors(), tc.withError)
			}
		})
	}
}
