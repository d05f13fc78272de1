package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// Outbox rows written by one transaction after another within the same
// millisecond are performed in the order they were written (a question
// posted, then the run paused on it).
func TestOutboxOrderWithinAMillisecond(t *testing.T) {
	now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	db, err := Open(t.TempDir(), Options{SmallMemory: true, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	if err := db.CreateRun(ctx, &engine.Run{ID: "r", Status: engine.StatusRunning, Channels: []string{"github"}, CreatedAt: now, UpdatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	run, err := db.Acquire(ctx, "r", "test")
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		b, _ := json.Marshal(i)
		if err := db.Commit(ctx, engine.Change{RunID: "r", Generation: run.Generation, Outbox: []engine.OutboxRow{{Kind: engine.OutboxRunPaused, Payload: b}}}); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := db.DueOutbox(ctx, now.Add(time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	for _, row := range rows {
		if row.Kind != engine.OutboxRunPaused {
			continue // the run's start
		}
		var i int
		if err := json.Unmarshal(row.Payload, &i); err != nil || i != next {
			t.Fatalf("row %d of the outbox carries %s, want %d: rows out of the order they were written", next, row.Payload, next)
		}
		next++
	}
	if next != n {
		t.Errorf("%d rows, want %d", next, n)
	}
}
