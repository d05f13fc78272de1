package store

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store/storetest"
)

// fakeDisk is a filesystem whose free space the test sets, and a clock
// for the guard's readings.
type fakeDisk struct {
	free  atomic.Int64
	reads atomic.Int64

	mu  sync.Mutex
	now time.Time
}

func newFakeDisk(free int64) *fakeDisk {
	d := &fakeDisk{now: time.Unix(0, 0)}
	d.free.Store(free)
	return d
}

func (d *fakeDisk) freeSpace(string) (int64, error) {
	d.reads.Add(1)
	return d.free.Load(), nil
}

func (d *fakeDisk) clock() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.now
}

func (d *fakeDisk) advance(by time.Duration) {
	d.mu.Lock()
	d.now = d.now.Add(by)
	d.mu.Unlock()
}

// set makes free bytes free, and the store's last reading old.
func (d *fakeDisk) set(free int64) {
	d.free.Store(free)
	d.advance(diskCheckEvery)
}

// options are store options on this disk with a reserve of 100 MiB.
func (d *fakeDisk) options() Options {
	return Options{SmallMemory: true, DiskReserve: 100 << 20, freeSpace: d.freeSpace, monotonic: d.clock, GCInterval: -1}
}

func TestDiskGuard(t *testing.T) {
	tests := []struct {
		name  string
		free  int64
		class writeClass
		want  bool // refused
	}{
		{"plenty", 1 << 30, newData, false},
		{"exactly the reserve", 100 << 20, newData, false},
		{"below the reserve", 100<<20 - 1, newData, true},
		{"bookkeeping below the reserve", 30 << 20, bookkeeping, false},
		{"bookkeeping at a quarter", 25 << 20, bookkeeping, false},
		{"bookkeeping below a quarter", 25<<20 - 1, bookkeeping, true},
		{"full", 0, bookkeeping, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newFakeDisk(tc.free)
			g := newDiskGuard("/srv/iterion", 100<<20, d.freeSpace, d.clock)
			err := g.check(tc.class)
			if refused := err != nil; refused != tc.want {
				t.Fatalf("check with %d bytes free: err=%v, want refused=%v", tc.free, err, tc.want)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, engine.ErrStorageFull) {
				t.Errorf("the refusal %v does not wrap engine.ErrStorageFull", err)
			}
			for _, want := range []string{"/srv/iterion", byteSize(tc.free) + " free", "iterion runs prune"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestDiskGuardReadings checks when the guard asks the filesystem: once
// per diskCheckEvery while the writes leave room, and again at once when
// what was written since might not fit.
func TestDiskGuardReadings(t *testing.T) {
	d := newFakeDisk(110 << 20)
	g := newDiskGuard("/srv/iterion", 100<<20, d.freeSpace, d.clock)
	for range 100 {
		if err := g.check(newData); err != nil {
			t.Fatal(err)
		}
	}
	if n := d.reads.Load(); n != 1 {
		t.Errorf("100 checks within a second read the free space %d times, want 1", n)
	}
	d.advance(diskCheckEvery)
	if err := g.check(newData); err != nil || d.reads.Load() != 2 {
		t.Errorf("after a second: err=%v, %d readings; want a second reading", err, d.reads.Load())
	}
	// 4 MiB written counts for 8, which the 10 MiB of headroom holds.
	g.wrote(4 << 20)
	if err := g.check(newData); err != nil || d.reads.Load() != 2 {
		t.Errorf("after writing 4 MiB of the 10 MiB left: err=%v, %d readings; want no new reading", err, d.reads.Load())
	}
	// 2 MiB more would not fit: the next check reads again, and the disk
	// has really filled.
	g.wrote(2 << 20)
	d.free.Store(99 << 20)
	if err := g.check(newData); err == nil || d.reads.Load() != 3 {
		t.Errorf("after writing 6 MiB of the 10 MiB left: err=%v, %d readings; want a refusal from a third reading", err, d.reads.Load())
	}
	// A refusal is never cached: space freed is seen at the next write.
	d.free.Store(1 << 30)
	if err := g.check(newData); err != nil {
		t.Errorf("after space was freed: %v", err)
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 bytes"},
		{1023, "1023 bytes"},
		{1 << 10, "1 KiB"},
		{1536, "1.5 KiB"},
		{256 << 20, "256 MiB"},
		{12<<20 + 512<<10, "12.5 MiB"},
		{3 << 30, "3 GiB"},
		{5 << 40, "5 TiB"},
	}
	for _, tc := range tests {
		if got := byteSize(tc.n); got != tc.want {
			t.Errorf("byteSize(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestWritesRefusedWhenDiskFull fills the disk under an open store: each
// kind of write is refused with engine.ErrStorageFull and writes nothing,
// reads go on, a run can still stop, and freeing space lets writes in
// again.
func TestWritesRefusedWhenDiskFull(t *testing.T) {
	ctx := t.Context()
	d := newFakeDisk(1 << 30)
	db := newDB(t, t.TempDir(), d.options())
	run := storetest.MustCreateRun(t, db, "r-full", 0, "github")
	ix := storetest.MustPost(t, db, run, "agent", "Which database?")
	before := takeSnapshot(t, db, run.ID)

	d.set(50 << 20) // below the reserve, above a quarter of it
	writes := []struct {
		name string
		do   func() error
	}{
		{"CreateRun", func() error { return db.CreateRun(ctx, &engine.Run{ID: "r-other"}, nil) }},
		{"Commit", func() error {
			return db.Commit(ctx, engine.Change{RunID: run.ID, Generation: run.Generation, Checkpoint: []byte("{}"), Events: []engine.Event{{Type: engine.EventNodeFinished}}})
		}},
		{"PostQuestion", func() error {
			_, err := db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "agent", Questions: map[string]any{engine.QuestionKey: "Another?"}})
			return err
		}},
		{"Answer", func() error {
			_, err := db.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: ix.ID, Text: "PostgreSQL"})
			return err
		}},
		{"Acquire", func() error { _, err := db.Acquire(ctx, run.ID, "me"); return err }},
		{"RecordDelivery", func() error {
			_, err := db.RecordDelivery(ctx, Delivery{Source: "github/1", ID: "d1", Event: "issue_comment", Payload: []byte("{}")})
			return err
		}},
		{"QueueLaunch", func() error { _, err := db.QueueLaunch(ctx, "pr", "k", nil); return err }},
	}
	for _, w := range writes {
		if err := w.do(); !errors.Is(err, engine.ErrStorageFull) {
			t.Errorf("%s on a full disk: err=%v, want engine.ErrStorageFull", w.name, err)
		}
	}
	if diff := cmp.Diff(before, takeSnapshot(t, db, run.ID)); diff != "" {
		t.Errorf("refused writes changed the run (-before +after):\n%s", diff)
	}
	if runs, err := db.Runs(ctx, engine.RunFilter{}); err != nil || len(runs) != 1 {
		t.Errorf("Runs on a full disk: %d runs, err=%v; want the one", len(runs), err)
	}

	// A run that stops can still say why, within the reserve.
	err := db.Commit(ctx, engine.Change{RunID: run.ID, Generation: run.Generation, Status: engine.StatusFailedResumable,
		FailureCode: engine.CodeStorageFull, Error: "disk full", Sync: true})
	if err != nil {
		t.Errorf("Commit of failed_resumable on a nearly full disk: %v", err)
	}
	d.set(10 << 20) // below a quarter: nothing at all
	if _, err := db.RequestStop(ctx, run.ID, "stop"); !errors.Is(err, engine.ErrStorageFull) {
		t.Errorf("RequestStop on a full disk: err=%v, want engine.ErrStorageFull", err)
	}

	d.set(1 << 30)
	if err := db.CreateRun(ctx, &engine.Run{ID: "r-other"}, nil); err != nil {
		t.Errorf("CreateRun once space was freed: %v", err)
	}
}

// TestOpenReadOnlyWhenDiskFull opens a store on a nearly full disk: it is
// read-only, reads work, writes say why and what to do, no collector
// runs; a new store is refused.
func TestOpenReadOnlyWhenDiskFull(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	d := newFakeDisk(1 << 30)
	db := newDB(t, dir, d.options())
	storetest.MustCreateRun(t, db, "r-1", 0)
	closeDB(t, db)

	d.set(1 << 20)
	db = newDB(t, dir, d.options())
	if db.ReadOnly() == nil {
		t.Fatal("ReadOnly() = nil on a full disk")
	}
	if db.gc != nil {
		t.Error("a read-only store started a collector")
	}
	if runs, err := db.Runs(ctx, engine.RunFilter{}); err != nil || len(runs) != 1 {
		t.Errorf("Runs: %d runs, err=%v; want the one", len(runs), err)
	}
	// Even once space is freed: Badger cannot write until reopened.
	d.set(1 << 30)
	err := db.CreateRun(ctx, &engine.Run{ID: "r-2"}, nil)
	if !errors.Is(err, engine.ErrStorageFull) {
		t.Fatalf("CreateRun on a read-only store: err=%v, want engine.ErrStorageFull", err)
	}
	for _, want := range []string{"opened read-only", dir, "1 MiB free", "100 MiB", "open the store again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	closeDB(t, db)
	db = newDB(t, dir, d.options())
	if db.ReadOnly() != nil {
		t.Errorf("ReadOnly() = %v once space was freed", db.ReadOnly())
	}
	closeDB(t, db)

	d.set(1 << 20)
	_, err = Open(t.TempDir(), d.options())
	if !errors.Is(err, engine.ErrStorageFull) || !strings.Contains(err.Error(), "creating the store") {
		t.Errorf("Open of a new store on a full disk: err=%v, want engine.ErrStorageFull creating it", err)
	}
	// A store to migrate cannot be read without writing.
	db = newDB(t, dir, Options{SmallMemory: true})
	setStoredLayout(t, db, 0)
	closeDB(t, db)
	_, err = Open(dir, d.options())
	if !errors.Is(err, engine.ErrStorageFull) || !strings.Contains(err.Error(), "must be migrated") {
		t.Errorf("Open of a store to migrate on a full disk: err=%v, want engine.ErrStorageFull naming the migration", err)
	}
}
