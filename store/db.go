package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/iterion-bot/iterion/engine"
)

var _ engine.Store = (*DB)(nil)

// Errors of this package; the engine's errors (engine.ErrNotFound and the
// others) come back wrapped as they are.
var (
	// ErrLocked means another process has the store directory open.
	ErrLocked = errors.New("store directory is locked")
	// ErrUnknownVersion means a record was written in a format this build
	// cannot read (by a newer iterion, or damaged).
	ErrUnknownVersion = errors.New("unknown record format version")
	// ErrClosed means the DB was used after Close.
	ErrClosed = errors.New("store is closed")
)

// Options configure Open. The zero value gives the production settings.
type Options struct {
	// InMemory keeps everything in memory and nothing on disk, for tests;
	// the directory passed to Open is then ignored. No record may exceed
	// 1 MiB, and memtables are at least 8 MiB so that such a record fits.
	// Zero means on disk.
	InMemory bool
	// SmallMemory shrinks Badger's memory use further (2 MiB memtables, no
	// block cache and so no compression, 16 MiB value-log files) so that
	// many databases can be open at once, as in tests under -race. Values
	// above 64 KiB go to the value log, no record may exceed 16 MiB, and
	// one transaction holds about 300 KiB: some 1,900 small records. Zero
	// means the production settings, themselves bounded: see
	// "Memory" in the package comment.
	SmallMemory bool
	// Logger receives Badger's warnings and errors, and the store's own
	// notices (a migration, a read-only open). Nil means discard.
	Logger *slog.Logger
	// Clock gives the time for every timestamp the store assigns. Nil means
	// time.Now.
	Clock func() time.Time
	// DiskReserve is how many bytes the store leaves free on its
	// filesystem: a write that finds less free is refused with
	// engine.ErrStorageFull, and Open opens the store read-only. The
	// writes that record what happened (a run that stops, a stop
	// requested, a post made, an outbox row done) and deletions may go on
	// until a quarter of it is left. Zero means 256 MiB; negative means no
	// check. Not used in memory. Linux only: elsewhere nothing is checked.
	DiskReserve int64
	// GCInterval is how often the value log's garbage is collected: the
	// files whose values are mostly overwritten or deleted are rewritten
	// and removed. A collection also starts whenever two value-log files'
	// worth (128 MiB in production) was written since the last. Zero
	// means every 5 minutes; negative means never. Not used in memory or
	// read-only.
	GCInterval time.Duration

	// syncWrites makes Badger sync every transaction itself instead of the
	// store syncing only the acknowledged ones; for the benchmark that
	// compares the two.
	syncWrites bool
	// badgerDefaults uses Badger's own, unbounded, settings instead of the
	// production ones; for the benchmark that compares their memory.
	badgerDefaults bool
	// freeSpace replaces the filesystem's free-space query, for tests.
	freeSpace func(dir string) (int64, error)
	// monotonic replaces time.Now where the store measures intervals (how
	// old a free-space reading is), for tests.
	monotonic func() time.Time
	// gcTicks replaces the GC interval's ticker, and gcRan is told the
	// outcome of each collection; for tests.
	gcTicks <-chan time.Time
	gcRan   func(rewritten int, err error)
	// gcAfterBytes replaces the bytes written that start a collection
	// before the interval is up, for tests.
	gcAfterBytes int64
	// migrations replaces the layout migrations, for tests.
	migrations []migration
}

// DB is the Badger store. Its methods are safe for concurrent use.
type DB struct {
	bdb        *badger.DB
	dir        string // "" in memory
	clock      func() time.Time
	log        *slog.Logger
	syncWrites bool
	unlock     func() error // releases the directory lock; nil in memory
	maxValue   int          // the largest value Badger accepts

	// disk refuses writes when the filesystem is nearly full; nil in
	// memory or when the check is off.
	disk *diskGuard
	// readOnly, when set, says why Badger was opened read-only (the disk
	// was nearly full at Open); every write returns it.
	readOnly *diskFullError

	// outboxIDs numbers outbox rows so that they are performed in the
	// order they were written, even within one millisecond.
	outboxIDs engine.IDSequence

	// mu makes Close wait for operations in flight and later operations
	// fail with ErrClosed instead of panicking inside Badger.
	mu     sync.RWMutex
	closed bool

	syncs syncGroup // shares db.bdb.Sync among concurrent callers
	gc    *collector
}

// Open opens (creating it if needed) the store in directory dir. A
// directory another process has open fails with an error naming it that
// wraps ErrLocked. A store of an older layout is migrated first; one of a
// newer layout is refused (ErrNewerLayout). On a filesystem with less free
// space than Options.DiskReserve, an existing store is opened read-only
// (see ReadOnly) and a new one is refused, both with engine.ErrStorageFull.
func Open(dir string, opts Options) (*DB, error) {
	db := &DB{clock: opts.Clock, syncWrites: opts.syncWrites, log: opts.Logger}
	if db.clock == nil {
		db.clock = time.Now
	}
	if db.log == nil {
		db.log = slog.New(slog.DiscardHandler)
	}
	where := "in memory"
	var bo badger.Options
	if opts.InMemory {
		bo = badger.DefaultOptions("").WithInMemory(true)
	} else {
		if dir == "" {
			return nil, errors.New("opening store: no directory given")
		}
		db.dir, where = dir, dir
		bo = badger.DefaultOptions(dir)
	}
	bo = tune(bo, opts)
	db.maxValue = int(bo.ValueLogFileSize)
	if opts.InMemory {
		// In memory there is no value log: Badger refuses values above
		// ValueThreshold, which it caps at 1 MiB and 15% of MemTableSize.
		if bo.MemTableSize < 8<<20 {
			bo = bo.WithMemTableSize(8 << 20)
		}
		bo = bo.WithValueThreshold(1 << 20)
		db.maxValue = 1 << 20
	} else {
		if err := db.prepareDir(dir, opts); err != nil {
			return nil, fmt.Errorf("opening store %s: %w", dir, err)
		}
		if db.readOnly != nil {
			bo = bo.WithReadOnly(true)
		}
	}

	bdb, err := badger.Open(bo)
	if err != nil {
		if db.unlock != nil {
			_ = db.unlock()
		}
		// Badger formats the errors of its recovery with %+v, so the
		// sentinel is only found in the text.
		if db.readOnly != nil && strings.Contains(err.Error(), badger.ErrTruncateNeeded.Error()) {
			// A process holding the store stopped without closing it, and
			// what Badger does to recover writes.
			full := *db.readOnly
			full.readOnly = false
			return nil, fmt.Errorf("opening store %s: it was not closed cleanly (its process was killed, or the disk filled), and recovering it needs to write, but %w", dir, &full)
		}
		return nil, fmt.Errorf("opening store %s: %w", where, err)
	}
	db.bdb = bdb
	if err := db.upgradeLayout(context.Background(), opts.migrations); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("opening store %s: %w", where, err)
	}
	if !opts.InMemory && db.readOnly == nil && opts.GCInterval >= 0 {
		after := cmp.Or(opts.gcAfterBytes, gcAfterFiles*bo.ValueLogFileSize)
		db.gc = startCollector(db, cmp.Or(opts.GCInterval, defaultGCInterval), opts.gcTicks, after, opts.gcRan)
	}
	return db, nil
}

// prepareDir creates and locks the store directory, and decides whether
// Badger may write there: it opens read-only, and only an existing store,
// when the filesystem is nearly full.
func (db *DB) prepareDir(dir string, opts Options) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// Badger's own lock error loses its cause and talks about Badger;
	// our lock comes first and says who to look for.
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	db.unlock = unlock
	if opts.DiskReserve >= 0 {
		db.disk = newDiskGuard(dir, cmp.Or(opts.DiskReserve, defaultDiskReserve), opts.freeSpace, opts.monotonic)
	}
	if full := db.disk.check(newData); full != nil {
		if _, err := os.Stat(filepath.Join(dir, badger.ManifestFilename)); err != nil {
			_ = unlock()
			return fmt.Errorf("creating the store: %w", full)
		}
		// Reading must not crash either; see trimTrailingHoles.
		if err := trimTrailingHoles(dir); err != nil {
			db.log.Warn("store: trimming the unallocated end of Badger's logs failed", "dir", dir, "err", err)
		}
		full.readOnly = true
		db.readOnly = full
		db.log.Warn("store opened read-only: its filesystem is nearly full", "dir", dir, "free", full.free, "reserve", full.need)
		return nil
	}
	// A store in a project's directory (.iterion) is never committed.
	if err := writeGitignore(dir); err != nil {
		_ = unlock()
		return err
	}
	return nil
}

// ReadOnly returns, when Open found the filesystem nearly full and opened
// the store read-only, the error every write returns (wrapping
// engine.ErrStorageFull); nil when the store is writable. Free space, then
// open the store again.
func (db *DB) ReadOnly() error {
	if db.readOnly == nil {
		return nil
	}
	return db.readOnly
}

// The production settings of Badger; the package comment says why.
const (
	prodMemTableSize   = 16 << 20
	prodMemtables      = 3
	prodValueThreshold = 4 << 10
	prodBlockCache     = 32 << 20
	prodIndexCache     = 16 << 20
	prodValueLogFile   = 64 << 20
)

// tune sets the Badger options of the store's modes.
func tune(bo badger.Options, opts Options) badger.Options {
	bo = bo.WithSyncWrites(opts.syncWrites).WithMetricsEnabled(false)
	if opts.Logger != nil {
		bo = bo.WithLogger(badgerLogger{opts.Logger})
	} else {
		bo = bo.WithLogger(nil)
	}
	switch {
	case opts.SmallMemory:
		return bo.
			WithMemTableSize(2 << 20).
			// Badger refuses a ValueThreshold above 15% of MemTableSize.
			WithValueThreshold(64 << 10).
			WithNumMemtables(2).
			WithBaseTableSize(1 << 20).
			// Without a block cache Badger panics if compression is on.
			WithBlockCacheSize(0).
			WithCompression(options.None).
			WithValueLogFileSize(16 << 20).
			WithNumCompactors(2).
			WithNumGoroutines(2)
	case opts.badgerDefaults:
		return bo
	}
	// The production settings: see "Memory" in the package comment.
	return bo.
		WithMemTableSize(prodMemTableSize).
		WithNumMemtables(prodMemtables).
		WithNumLevelZeroTables(1).
		WithValueThreshold(prodValueThreshold).
		WithBlockCacheSize(prodBlockCache).
		WithIndexCacheSize(prodIndexCache).
		WithValueLogFileSize(prodValueLogFile).
		WithNumCompactors(2)
}

// Close flushes and closes the database and releases the directory. It
// stops the value-log collection (waiting for a collection under way) and
// waits for operations in flight; later calls return nil.
func (db *DB) Close() error {
	db.gc.stop()
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	err := db.bdb.Close()
	if db.unlock != nil {
		err = errors.Join(err, db.unlock())
	}
	if err != nil {
		return fmt.Errorf("closing store: %w", err)
	}
	return nil
}

// now is the store's clock in UTC without a monotonic reading, as it reads
// back from JSON.
func (db *DB) now() time.Time { return db.clock().UTC().Round(0) }

// maxAttempts bounds the retries of a conflicting transaction. Every round
// of conflicting transactions lets at least one commit; with six writers
// hammering one run under -race the worst case seen was 11 attempts.
const maxAttempts = 64

// update runs fn in a read-write transaction, re-running all of it when
// Badger reports a conflict (a key fn read was written meanwhile), and
// syncs to disk afterwards when sync is set. fn must start from scratch on
// each call: assign its results, never append to them. The write is
// refused first when the disk is nearly full (see diskGuard).
func (db *DB) update(ctx context.Context, sync bool, fn func(txn *tx) error) error {
	return db.write(ctx, newData, sync, fn)
}

// write is update for a write of class c.
func (db *DB) write(ctx context.Context, c writeClass, sync bool, fn func(txn *tx) error) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	if db.readOnly != nil {
		return db.readOnly
	}
	if err := db.disk.check(c); err != nil {
		return err
	}
	var written int64
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := db.bdb.Update(func(txn *badger.Txn) error {
			t := &tx{Txn: txn, maxValue: db.maxValue, ids: &db.outboxIDs}
			err := fn(t)
			written = t.written
			return err
		})
		if err == nil {
			break
		}
		if !errors.Is(err, badger.ErrConflict) {
			return err
		}
		if attempt == maxAttempts {
			return fmt.Errorf("%d attempts conflicted with other writers: %w", attempt, err)
		}
		// A random pause, growing to at most 6.4ms, spreads the retries of
		// writers that collided.
		pause := time.Duration(rand.Int64N(int64(50*time.Microsecond) << min(attempt, 7)))
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	db.disk.wrote(written)
	db.gc.wrote(written)
	if sync && !db.syncWrites {
		if err := db.syncs.sync(db.bdb.Sync); err != nil {
			return fmt.Errorf("syncing to disk: %w", err)
		}
	}
	return nil
}

// tx is a Badger transaction with what put needs to know.
type tx struct {
	*badger.Txn
	maxValue int
	// ids numbers the outbox rows, in the order they are written.
	ids     *engine.IDSequence
	written int64 // bytes of the keys and values put
}

// view runs fn in a read-only transaction.
func (db *DB) view(ctx context.Context, fn func(txn *tx) error) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return db.bdb.View(func(txn *badger.Txn) error { return fn(&tx{Txn: txn, maxValue: db.maxValue}) })
}

// badgerLogger passes Badger's warnings and errors to slog and drops its
// info and debug chatter.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(format string, args ...any) {
	b.l.Error("badger error", "detail", strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (b badgerLogger) Warningf(format string, args ...any) {
	b.l.Warn("badger warning", "detail", strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}

// syncGroup lets concurrent callers share syncs (group commit). A caller
// needs a sync that started after its commit returned; while one runs, the
// callers wait for it to end and the first of them to wake starts the next
// one for all. With 8 writers this made acknowledged writes 35% faster
// (BENCHMARKS.md).
type syncGroup struct {
	mu      sync.Mutex
	cond    sync.Cond // on mu
	running bool
	started uint64 // syncs started so far
	done    uint64 // number of the last finished sync
	err     error  // its result
}

// sync returns once a call of do that started after sync was called has
// finished, with its error (or the error of a later one).
func (g *syncGroup) sync(do func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cond.L == nil {
		g.cond.L = &g.mu
	}
	need := g.started + 1
	for g.done < need {
		if g.running {
			g.cond.Wait()
			continue
		}
		g.running = true
		g.started++
		n := g.started
		g.mu.Unlock()
		err := do()
		g.mu.Lock()
		g.running = false
		g.done, g.err = n, err
		g.cond.Broadcast()
	}
	return g.err
}

// writeGitignore puts a .gitignore that ignores everything in the store
// directory, once: a store made in a checkout (iterion run's .iterion) is
// not added to the repository by a careless git add.
func writeGitignore(dir string) error {
	path := filepath.Join(dir, ".gitignore")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = f.WriteString("# iterion's store: runs, questions, checkouts. Not for the repository.\n*\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
