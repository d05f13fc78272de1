package shell

import (
	"strings"
	"testing"
	"time"
)

// TestScanIsLinear scans 1 MiB commands built to make a careless scanner
// quadratic or deep (the largest template a workflow file can hold).
func TestScanIsLinear(t *testing.T) {
	const size = 1 << 20
	for _, tc := range []struct{ name, unit string }{
		{"holes", "{{x}} "},
		{"long pipeline into shells", "echo {{x}} | sh "},
		{"nested command substitutions", "$(echo {{x}} "},
		{"nested parameter expansions", "${a:-{{x}} "},
		{"nested shells", "bash -c \"eval '{{x}} "},
		{"evals", "eval echo {{x}}; "},
		{"heredocs", "cat <<EOF\n{{x}}\n"},
		{"heredoc lines", "{{x}}\n"},
		{"arithmetic", "$(( ({{x}} "},
		{"one long word", "a"},
		{"compound arrays", "a=( [{{x}}]=1 "},
		{"tests", "[[ {{x}} -eq "},
		{"cases", "case {{x}} in a) "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := strings.Repeat(tc.unit, size/len(tc.unit))
			start := time.Now()
			uses := Scan(pieces(cmd))
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("scanning %d bytes took %v", len(cmd), d)
			}
			if want := strings.Count(cmd, "{{x}}"); len(uses) != want {
				t.Errorf("%d uses, want %d", len(uses), want)
			}
		})
	}
}
