package agentcli

import (
	"strings"
	"testing"
)

func TestTail(t *testing.T) {
	tail := &Tail{Max: 8}
	if got := tail.Said("pi"); got != "" {
		t.Errorf("nothing written: %q", got)
	}
	for _, s := range []string{"first line\n", "second\n", " end \n"} {
		if n, err := tail.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if got := tail.Said("pi"); got != "; pi said: d\n end" || strings.Contains(got, "first") {
		t.Errorf("Said = %q, want the last 8 bytes, trimmed", got)
	}
}
