package delivery

import (
	"testing"
	"time"
)

// FairOrder is fairOrder, for the tests of package delivery_test.
var FairOrder = fairOrder

// WaitBodies waits until cond holds of b's stats; a minute without it
// fails the test (a watchdog, not a wait).
func WaitBodies(t testing.TB, b *Bodies, what string, cond func(BodyStats) bool) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		ch := b.changes()
		if cond(b.Stats()) {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("waited a minute for %s: %+v", what, b.Stats())
		}
	}
}
