package shell

import (
	"strings"
	"testing"
	"time"
)

// TestScanIsLinear scans 1 MiB commands built to make a careless scanner
// quadratic or deep (the largest template a workflow file can hold). It
// compares the time of a quarter of the input with the whole: linear work
// takes about 4 times as long, quadratic 16; a ratio, unlike a deadline,
// does not depend on how loaded the machine is.
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
			quarter := strings.Repeat(tc.unit, size/4/len(tc.unit))
			cmd := strings.Repeat(tc.unit, size/len(tc.unit))
			// The fastest of a few scans of each size: a scheduler or a
			// collector pausing one of them (a loaded machine) only makes
			// it slower, so the minimum is the scan's own time.
			fastest := func(src string) (time.Duration, []Use) {
				var best time.Duration
				var uses []Use
				for i := range 5 {
					start := time.Now()
					uses = Scan(pieces(src))
					if d := time.Since(start); i == 0 || d < best {
						best = d
					}
				}
				return best, uses
			}
			small, _ := fastest(quarter)
			whole, uses := fastest(cmd)
			// Four times the input takes four times as long when linear,
			// sixteen when quadratic. Below a few milliseconds the ratio is
			// noise.
			if whole > 50*time.Millisecond && whole > 10*small {
				t.Errorf("scanning %d bytes took %v, %.1f times the %v of a quarter of it: not linear", len(cmd), whole, float64(whole)/float64(small), small)
			}
			if want := strings.Count(cmd, "{{x}}"); len(uses) != want {
				t.Errorf("%d uses, want %d", len(uses), want)
			}
		})
	}
}
