package agentcli

import (
	"strings"
	"sync"
)

// Tail keeps the last Max bytes written to it: an agent CLI's stderr, for
// the error of a CLI that failed. Safe for concurrent use.
type Tail struct {
	Max int

	mu sync.Mutex
	b  []byte
}

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.Max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.Max:]...)
	}
	return len(p), nil
}

// Said is "; <who> said: <what it wrote>", or "" when it wrote nothing,
// to end an error with; "" too for a nil Tail.
func (t *Tail) Said(who string) string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return ""
	}
	return "; " + who + " said: " + s
}
