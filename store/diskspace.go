package store

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// Badger writes its logs and tables through mmap, into files it first
// extends without allocating them. When the filesystem fills, the kernel
// has no page to give a write, and the process dies of SIGBUS inside
// Badger: no error, no deferred function, nothing logged. So the store
// refuses to write well before the disk is full, leaving room for what
// Badger writes on its own afterwards (a memtable's flush, compactions, the
// value-log collection).

// defaultDiskReserve is the free space a store leaves on its filesystem
// unless Options.DiskReserve says otherwise: room for several flushes of
// the production memtables (16 MiB) and the compactions that follow them,
// and for the collection of a value-log file (64 MiB).
const defaultDiskReserve = 256 << 20

// diskCheckEvery is how long a reading of the free space is trusted before
// the filesystem is asked again; meanwhile the bytes written are counted
// against it.
const diskCheckEvery = time.Second

// writeAmplification is how many bytes a written byte is counted for
// against the free space: Badger writes it to its log, then to a table.
const writeAmplification = 2

// writeClass says how much of the reserve a write may use.
type writeClass int

const (
	// newData is the ordinary write: a run's progress, a new question, a
	// delivery received. It needs the whole reserve free.
	newData writeClass = iota + 1
	// bookkeeping records what already happened or frees space: a run
	// that stops (so that it ends failed_resumable, saying why, rather
	// than stay running), a stop requested, a post made or an outbox row
	// done (so that it is not made again), a deletion. It may use three
	// quarters of the reserve.
	bookkeeping
)

// diskGuard refuses writes when the free space of the store's filesystem
// is below the reserve.
type diskGuard struct {
	dir     string
	reserve int64
	free    func(dir string) (int64, error)
	now     func() time.Time

	mu      sync.Mutex
	at      time.Time // when avail was read; zero: never
	avail   int64     // free bytes then
	written int64     // bytes written since
}

// newDiskGuard returns the guard of the store in dir; free and now nil
// mean the filesystem's own figure and time.Now.
func newDiskGuard(dir string, reserve int64, free func(string) (int64, error), now func() time.Time) *diskGuard {
	if free == nil {
		free = freeSpace
	}
	if now == nil {
		now = time.Now
	}
	return &diskGuard{dir: dir, reserve: reserve, free: free, now: now}
}

// need is the free space a write of class c needs.
func (g *diskGuard) need(c writeClass) int64 {
	if c == bookkeeping {
		return g.reserve / 4
	}
	return g.reserve
}

// check returns a *diskFullError when a write of class c would leave less
// free space than it needs. It reads the free space again when the last
// reading is older than diskCheckEvery or, less what was written since,
// would refuse: a refusal is always based on a fresh reading. A
// filesystem that cannot say how much is free is not refused.
func (g *diskGuard) check(c writeClass) *diskFullError {
	if g == nil {
		return nil
	}
	need := g.need(c)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.at.IsZero() && g.now().Sub(g.at) < diskCheckEvery && g.avail-writeAmplification*g.written >= need {
		return nil
	}
	avail, err := g.free(g.dir)
	if err != nil || avail < 0 {
		return nil
	}
	g.at, g.avail, g.written = g.now(), avail, 0
	if avail >= need {
		return nil
	}
	return &diskFullError{dir: g.dir, free: avail, need: need}
}

// wrote counts n bytes written since the last reading.
func (g *diskGuard) wrote(n int64) {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.written += n
	g.mu.Unlock()
}

// diskFullError is the refusal of a write for lack of free space; it wraps
// engine.ErrStorageFull.
type diskFullError struct {
	dir        string
	free, need int64
	// readOnly is set when the store was opened read-only because of it.
	readOnly bool
}

func (e *diskFullError) Error() string {
	s := fmt.Sprintf("the filesystem of %s has %s free, less than the %s the store keeps free", e.dir, byteSize(e.free), byteSize(e.need))
	if e.readOnly {
		s = "the store was opened read-only: " + s
	}
	s += "; free space there (iterion runs prune --older-than 30d removes old runs and their workspaces)"
	if e.readOnly {
		s += ", then open the store again (run the command again, or restart the server)"
	}
	return s
}

func (e *diskFullError) Unwrap() error { return engine.ErrStorageFull }

// byteSize writes n bytes for people: 300 bytes, 12.5 MiB, 1 GiB.
func byteSize(n int64) string {
	if n < 1<<10 {
		return fmt.Sprintf("%d bytes", n)
	}
	f, unit := float64(n)/(1<<10), "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if f < 1<<10 {
			break
		}
		f, unit = f/(1<<10), u
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", f), ".0") + " " + unit
}
