package textdist

import (
	"strings"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"run", "run", 0},
		{"rnu", "run", 1},       // a swap of neighbours
		{"stauts", "status", 1}, // the same inside a word
		{"anwser", "answer", 1},
		{"cancle", "cancel", 1},
		{"help", "", 4},
		{"kitten", "sitting", 3},
		{"ab", "ba", 1},
		{"abc", "ca", 3}, // optimal string alignment, not full Damerau
		{strings.Repeat("a", MaxLen+1), "a", Far},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Distance(c.b, c.a); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetry)", c.b, c.a, got, c.want)
		}
	}
}
