package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/google/go-cmp/cmp"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store/storetest"
)

// settableClock is a store clock the test moves.
type settableClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *settableClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *settableClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// pruneT0 is when the prune tests' runs are made; they prune 30 days
// later.
var pruneT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// mustFullRun stores a run of a pull request with something under every
// key a run has: events, checkpoint, an answered and a pending question
// (inbox message, pending index), the posts of both (reply routes, short
// numbers, the run's own posts) and outbox rows, all performed unless
// keepOutbox; then it ends the run with status at the clock's time.
func mustFullRun(t *testing.T, db *DB, clock *settableClock, id string, status engine.Status, keepOutbox bool) {
	t.Helper()
	ctx := t.Context()
	run := &engine.Run{ID: id, Status: engine.StatusRunning, Channels: []string{"github"},
		Trigger: engine.Trigger{Source: "github", Ref: "github/acme/app#7"}}
	if err := db.CreateRun(ctx, run, []engine.Event{{Type: engine.EventRunStarted}}); err != nil {
		t.Fatal(err)
	}
	answered := storetest.MustPost(t, db, run, "agent", "Which database?")
	pending := storetest.MustPost(t, db, run, "agent", "Which port?")
	// A question with reminders: its timer rows go with the run.
	if _, err := db.PostQuestion(ctx, engine.PostRequest{RunID: id, NodeID: "agent", Questions: map[string]any{engine.QuestionKey: "Which host?"},
		FollowUp: &engine.FollowUp{Remind: time.Hour, NextReminder: clock.Now().Add(time.Hour), ExpireAt: clock.Now().Add(48 * time.Hour), Default: map[string]string{engine.QuestionKey: "localhost"}}}); err != nil {
		t.Fatal(err)
	}
	storetest.MustAnswer(t, db, id, answered.ID, "PostgreSQL", "alice")
	for i, ix := range []*engine.Interaction{answered, pending} {
		if err := db.RecordPost(ctx, id, ix.ID, "github", fmt.Sprintf("%s-comment-%d", id, i)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ShortID(ctx, "github/acme/app#7", id, ix.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.SetRunPost(ctx, id, "github-status-comment", "123"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DrainInbox(ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	storetest.MustCommit(t, db, engine.Change{RunID: id, Status: status, Checkpoint: []byte(`{"node":"agent"}`),
		History: []engine.HistoryEntry{{Series: "agent", Index: 0, Data: []byte(`{"text":"kept as an entry"}`)}},
		Events:  []engine.Event{{Type: engine.EventNodeFinished, NodeID: "agent"}}, Outbox: []engine.OutboxRow{{Kind: engine.OutboxRunFinished}}})
	if keepOutbox {
		return
	}
	rows, err := db.DueOutbox(ctx, clock.Now().Add(time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if row.RunID == id {
			if err := db.AckOutbox(ctx, row.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// keysNaming returns the keys of db whose key or value holds id.
func keysNaming(t *testing.T, db *DB, id string) []string {
	t.Helper()
	var out []string
	err := db.bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			val, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if key := it.Item().Key(); bytes.Contains(key, []byte(id)) || bytes.Contains(val, []byte(id)) {
				out = append(out, string(key))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runIDs(runs []*engine.Run) []string {
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	return ids
}

func TestPrune(t *testing.T) {
	ctx := t.Context()
	clock := &settableClock{now: pruneT0}
	db := newDB(t, t.TempDir(), Options{SmallMemory: true, Clock: clock.Now})
	old := []struct {
		id         string
		status     engine.Status
		keepOutbox bool
	}{
		{"r-gone-finished", engine.StatusFinished, false},
		{"r-gone-failed", engine.StatusFailed, false},
		{"r-gone-cancelled", engine.StatusCancelled, false},
		{"r-gone-resumable", engine.StatusFailedResumable, false},
		{"r-kept-paused", engine.StatusPausedWaitingHuman, false},
		{"r-kept-running", engine.StatusRunning, false},
		{"r-kept-untold", engine.StatusFinished, true}, // its end is not posted yet
	}
	for _, r := range old {
		mustFullRun(t, db, clock, r.id, r.status, r.keepOutbox)
	}
	clock.set(pruneT0.Add(20 * 24 * time.Hour))
	mustFullRun(t, db, clock, "r-kept-recent", engine.StatusFinished, false)
	kept := []string{"r-kept-paused", "r-kept-recent", "r-kept-running", "r-kept-untold"}
	before := map[string]snapshot{}
	for _, id := range kept {
		before[id] = takeSnapshot(t, db, id)
	}

	cutoff := pruneT0.Add(10 * 24 * time.Hour)
	candidates, err := db.PruneCandidates(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	wantGone := []string{"r-gone-cancelled", "r-gone-failed", "r-gone-finished", "r-gone-resumable"}
	if diff := cmp.Diff(wantGone, runIDs(candidates)); diff != "" {
		t.Errorf("PruneCandidates (-want +got):\n%s", diff)
	}
	var told []*engine.Run
	gone, err := db.Prune(ctx, cutoff, func(r *engine.Run) error {
		told = append(told, r)
		return nil
	})
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	if diff := cmp.Diff(wantGone, runIDs(gone)); diff != "" {
		t.Errorf("Prune removed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantGone, runIDs(told)); diff != "" {
		t.Errorf("Prune called back for (-want +got):\n%s", diff)
	}
	for _, id := range wantGone {
		if keys := keysNaming(t, db, id); len(keys) != 0 {
			t.Errorf("after Prune, keys still name %s: %q", id, keys)
		}
		if _, err := db.Run(ctx, id); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("Run(%s) after Prune: err=%v, want ErrNotFound", id, err)
		}
	}
	for _, id := range kept {
		if diff := cmp.Diff(before[id], takeSnapshot(t, db, id)); diff != "" {
			t.Errorf("Prune changed the kept run %s (-before +after):\n%s", id, diff)
		}
	}
	prRuns, err := db.RunsByRef(ctx, "github/acme/app#7")
	if err != nil {
		t.Fatalf("RunsByRef after Prune: %v", err)
	}
	if diff := cmp.Diff(kept, runIDs(prRuns)); diff != "" {
		t.Errorf("RunsByRef after Prune (-want +got):\n%s", diff)
	}
	// A short number is never handed out again.
	n, err := db.ShortID(ctx, "github/acme/app#7", "r-kept-recent", "r-kept-recent_agent_async_3")
	if err != nil || n != 2*len(old)+2+1 {
		t.Errorf("next short number after Prune = %d, err=%v; want %d", n, err, 2*len(old)+2+1)
	}
	if again, err := db.Prune(ctx, cutoff, nil); err != nil || len(again) != 0 {
		t.Errorf("second Prune: removed %v, err=%v; want nothing", runIDs(again), err)
	}
}

// TestPruneFinishesInterrupted leaves a run unlinked but not purged, as a
// Prune interrupted by a crash would: the next Prune purges it.
func TestPruneFinishesInterrupted(t *testing.T) {
	ctx := t.Context()
	clock := &settableClock{now: pruneT0}
	db := newDB(t, t.TempDir(), Options{SmallMemory: true, Clock: clock.Now})
	mustFullRun(t, db, clock, "r-gone", engine.StatusFinished, false)
	cutoff := pruneT0.Add(time.Hour)
	if ok, err := db.unlinkRun(ctx, "r-gone", cutoff); !ok || err != nil {
		t.Fatalf("unlinkRun: %v, %v", ok, err)
	}
	if keys := keysNaming(t, db, "r-gone"); len(keys) < 10 {
		t.Fatalf("after unlinking only, %d keys name the run, want its records still there", len(keys))
	}
	gone, err := db.Prune(ctx, cutoff, nil)
	if err != nil || len(gone) != 0 {
		t.Fatalf("Prune: removed %v, err=%v; want no new run and no error", runIDs(gone), err)
	}
	if keys := keysNaming(t, db, "r-gone"); len(keys) != 0 {
		t.Errorf("after Prune, keys still name the interrupted run: %q", keys)
	}
}

// TestPruneLongRun removes a run with more events than one transaction of
// the small-memory settings can delete.
func TestPruneLongRun(t *testing.T) {
	ctx := t.Context()
	clock := &settableClock{now: pruneT0}
	db := newDB(t, t.TempDir(), Options{SmallMemory: true, Clock: clock.Now})
	storetest.MustCreateRun(t, db, "r-long", 0)
	for range 6 {
		events := make([]engine.Event, 1000)
		for i := range events {
			events[i] = engine.Event{Type: engine.EventNodeFinished, NodeID: "loop"}
		}
		storetest.MustCommit(t, db, engine.Change{RunID: "r-long", Events: events})
	}
	storetest.MustCommit(t, db, engine.Change{RunID: "r-long", Status: engine.StatusFinished})
	gone, err := db.Prune(ctx, pruneT0.Add(time.Hour), nil)
	if err != nil || len(gone) != 1 {
		t.Fatalf("Prune: removed %v, err=%v; want r-long", runIDs(gone), err)
	}
	if keys := keysNaming(t, db, "r-long"); len(keys) != 0 {
		t.Errorf("after Prune, %d keys still name the run, the first %q", len(keys), keys[0])
	}
}

func TestPruneRefusedWhenDiskFull(t *testing.T) {
	ctx := t.Context()
	clock := &settableClock{now: pruneT0}
	d := newFakeDisk(1 << 30)
	opts := d.options()
	opts.Clock = clock.Now
	db := newDB(t, t.TempDir(), opts)
	mustFullRun(t, db, clock, "r-old", engine.StatusFinished, false)
	d.set(1 << 20)
	called := false
	gone, err := db.Prune(ctx, pruneT0.Add(time.Hour), func(*engine.Run) error { called = true; return nil })
	if !errors.Is(err, engine.ErrStorageFull) || len(gone) != 0 || called {
		t.Errorf("Prune on a full disk: removed %v, called back %v, err=%v; want nothing and engine.ErrStorageFull", runIDs(gone), called, err)
	}
	if _, err := db.Run(ctx, "r-old"); err != nil {
		t.Errorf("the run is gone after a refused Prune: %v", err)
	}
}
