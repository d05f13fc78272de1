package main

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// failpoint returns the engine's failpoint hook for crash tests:
// ITERION_FAILPOINT=name or name:N kills this process with SIGKILL at the
// N-th time (default the first) execution reaches that point. Unset, it
// does nothing.
func (a *App) failpoint() func(string) {
	spec := a.getenv("ITERION_FAILPOINT")
	if spec == "" {
		return nil
	}
	name, nth, _ := strings.Cut(spec, ":")
	want, err := strconv.Atoi(nth)
	if err != nil || want < 1 {
		want = 1
	}
	var mu sync.Mutex
	hits := 0
	return func(point string) {
		if point != name {
			return
		}
		mu.Lock()
		hits++
		n := hits
		mu.Unlock()
		if n == want {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}
