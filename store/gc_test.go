package store

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/iterion-bot/iterion/engine"
)

// vlogBytes is the disk space the value-log files of the store in dir
// take (allocated, not their sparse size).
func vlogBytes(t *testing.T, dir string) int64 {
	t.Helper()
	return filesBytes(t, dir, "*.vlog")
}

// filesBytes is the disk space the files of dir matching pattern take.
func filesBytes(t testing.TB, dir, pattern string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Sys().(*syscall.Stat_t).Blocks * 512
	}
	return n
}

// gcHarness opens a store whose collector runs at each tick sent and
// reports each collection.
type gcHarness struct {
	db    *DB
	ticks chan time.Time
	ran   chan gcResult
}

type gcResult struct {
	rewritten int
	err       error
}

func newGCHarness(t *testing.T, dir string, after int64) *gcHarness {
	t.Helper()
	h := &gcHarness{ticks: make(chan time.Time), ran: make(chan gcResult, 1)}
	h.db = newDB(t, dir, Options{SmallMemory: true, gcTicks: h.ticks, gcAfterBytes: after, gcRan: func(n int, err error) { h.ran <- gcResult{n, err} }})
	return h
}

// collect makes the collector run once and returns what it did.
func (h *gcHarness) collect(t *testing.T) gcResult {
	t.Helper()
	if h.db.gc == nil {
		t.Fatal("Open started no collector")
	}
	h.ticks <- time.Time{}
	return <-h.ran
}

// TestGCShrinksOverwrittenCheckpoints overwrites a run's 50 KiB
// checkpoint 120 times (8 MB of value log, as the stored value is 68 KiB
// of JSON, for 68 KiB live) and checks that the periodic collection gives
// the space back.
func TestGCShrinksOverwrittenCheckpoints(t *testing.T) {
	dir := t.TempDir()
	checkpoint := bytes.Repeat([]byte("c"), 50<<10)
	// Six sessions leave six tables in level 0, more than Badger keeps
	// there: the compaction that merges them finds the dead checkpoints,
	// which is what tells the collector which files are worth rewriting.
	for session := range 6 {
		db := newDB(t, dir, Options{SmallMemory: true, GCInterval: -1})
		if session == 0 {
			if err := db.CreateRun(t.Context(), &engine.Run{ID: "r-loop", Status: engine.StatusRunning}, nil); err != nil {
				t.Fatal(err)
			}
		}
		for range 20 {
			if err := db.Commit(t.Context(), engine.Change{RunID: "r-loop", Checkpoint: checkpoint}); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	h := newGCHarness(t, dir, 0)
	if err := h.db.bdb.Flatten(1); err != nil {
		t.Fatal(err)
	}
	before := vlogBytes(t, dir)
	if before < 7<<20 {
		t.Fatalf("the value log holds %d bytes before collection, want the 8 MB written", before)
	}
	got := h.collect(t)
	if got.err != nil || got.rewritten == 0 {
		t.Fatalf("collection: rewrote %d files, err=%v; want some rewritten", got.rewritten, got.err)
	}
	after := vlogBytes(t, dir)
	if after > 1<<20 {
		t.Errorf("the value log holds %d bytes after collection (%d before), want at most 1 MiB for a 68 KiB checkpoint", after, before)
	}
	ck, err := h.db.Checkpoint(t.Context(), "r-loop")
	if err != nil || !bytes.Equal(ck, checkpoint) {
		t.Errorf("Checkpoint after collection: %d bytes, err=%v; want the last one written", len(ck), err)
	}
}

// TestCloseStopsGC checks that Close ends the collector's goroutine, and
// that a collection found nothing to do is not an error.
func TestCloseStopsGC(t *testing.T) {
	h := newGCHarness(t, t.TempDir(), 0)
	if got := h.collect(t); got.err != nil || got.rewritten != 0 {
		t.Errorf("collection of an empty store: rewrote %d, err=%v; want nothing and no error", got.rewritten, got.err)
	}
	c := h.db.gc
	if err := h.db.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	default:
		t.Fatal("the collector is still running after Close")
	}
	select {
	case h.ticks <- time.Time{}:
		t.Fatal("a tick was taken after Close")
	default:
	}
}

// TestGCAfterWrites checks that writing the collector's threshold starts a
// collection without waiting for the interval.
func TestGCAfterWrites(t *testing.T) {
	h := newGCHarness(t, t.TempDir(), 256<<10)
	if err := h.db.CreateRun(t.Context(), &engine.Run{ID: "r-loop", Status: engine.StatusRunning}, nil); err != nil {
		t.Fatal(err)
	}
	checkpoint := bytes.Repeat([]byte("c"), 50<<10) // 68 KiB stored
	for i := range 3 {
		if err := h.db.Commit(t.Context(), engine.Change{RunID: "r-loop", Checkpoint: checkpoint}); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-h.ran:
			t.Fatalf("a collection (%+v) started after %d KiB written, before the 256 KiB threshold", got, (i+1)*68)
		default:
		}
	}
	if err := h.db.Commit(t.Context(), engine.Change{RunID: "r-loop", Checkpoint: checkpoint}); err != nil {
		t.Fatal(err)
	}
	// The fourth commit crossed the threshold: the collector was woken.
	// (The timeout only keeps a broken build from hanging the suite.)
	select {
	case got := <-h.ran:
		if got.err != nil {
			t.Errorf("the collection failed: %v", got.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("no collection a minute after writing past the threshold")
	}
}

func TestGCNotStarted(t *testing.T) {
	tests := []struct {
		name string
		dir  string
		opts Options
	}{
		{"disabled", t.TempDir(), Options{SmallMemory: true, GCInterval: -1}},
		{"in memory", "", Options{SmallMemory: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if db := newDB(t, tc.dir, tc.opts); db.gc != nil {
				t.Error("a collector was started")
			}
		})
	}
}

// TestProductionMemoryBounded checks the production settings' memory
// bounds: memtables, block cache and index cache together at most 96 MiB
// (Badger's defaults: 576 MiB, and every table index in memory).
func TestProductionMemoryBounded(t *testing.T) {
	bo := tune(badger.DefaultOptions(t.TempDir()), Options{})
	total := int64(bo.NumMemtables)*bo.MemTableSize + bo.BlockCacheSize + bo.IndexCacheSize
	if total > 96<<20 {
		t.Errorf("memtables %d × %d + block cache %d + index cache %d = %d bytes, want at most 96 MiB",
			bo.NumMemtables, bo.MemTableSize, bo.BlockCacheSize, bo.IndexCacheSize, total)
	}
	if bo.IndexCacheSize <= 0 {
		t.Error("IndexCacheSize is 0: Badger then keeps every table's index in memory, without bound")
	}
	// Values above the threshold stay out of compactions, whose table
	// builders held over 1 GiB when 16 KiB events stayed inline.
	if bo.ValueThreshold > 4<<10 {
		t.Errorf("ValueThreshold = %d, want at most 4 KiB", bo.ValueThreshold)
	}
}
