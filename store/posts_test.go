package store

import (
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/engine"
)

// A trigger's Ref is part of a key: one too long is refused, naming it.
// (RunsByRef itself is in the conformance suite, store/storetest.)
func TestLongRefRefused(t *testing.T) {
	db := newDB(t, "", Options{SmallMemory: true})
	long := &engine.Run{ID: "f", Trigger: engine.Trigger{Source: "x", Ref: strings.Repeat("r", maxRefLen+1)}}
	if err := db.CreateRun(t.Context(), long, nil); err == nil || !strings.Contains(err.Error(), "ref has 1025 bytes") {
		t.Errorf("CreateRun with a %d-byte ref: err = %v, want it refused", maxRefLen+1, err)
	}
}
