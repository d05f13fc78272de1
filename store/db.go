package store

import (
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
	// SmallMemory shrinks Badger's memory use (2 MiB memtables, no block
	// cache and so no compression, 16 MiB value-log files) so that many
	// databases can be open at once, as in tests under -race. Values above
	// 64 KiB go to the value log, no record may exceed 16 MiB, and one
	// transaction holds about 300 KiB: some 1,900 small records. Zero means
	// Badger's defaults (64 MiB memtables, whose transactions hold about
	// 9 MiB, a 256 MiB block cache, Snappy compression).
	SmallMemory bool
	// Logger receives Badger's warnings and errors. Nil means discard.
	Logger *slog.Logger
	// Clock gives the time for every timestamp the store assigns. Nil means
	// time.Now.
	Clock func() time.Time

	// syncWrites makes Badger sync every transaction itself instead of the
	// store syncing only the acknowledged ones; for the benchmark that
	// compares the two.
	syncWrites bool
}

// DB is the Badger store. Its methods are safe for concurrent use.
type DB struct {
	bdb        *badger.DB
	clock      func() time.Time
	syncWrites bool
	unlock     func() error // releases the directory lock; nil in memory
	maxValue   int          // the largest value Badger accepts

	// mu makes Close wait for operations in flight and later operations
	// fail with ErrClosed instead of panicking inside Badger.
	mu     sync.RWMutex
	closed bool

	syncs syncGroup // shares db.bdb.Sync among concurrent callers
}

// Open opens (creating it if needed) the store in directory dir. A
// directory another process has open fails with an error naming it that
// wraps ErrLocked.
func Open(dir string, opts Options) (*DB, error) {
	db := &DB{clock: opts.Clock, syncWrites: opts.syncWrites}
	if db.clock == nil {
		db.clock = time.Now
	}

	var bo badger.Options
	if opts.InMemory {
		bo = badger.DefaultOptions("").WithInMemory(true)
	} else {
		if dir == "" {
			return nil, errors.New("opening store: no directory given")
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("opening store %s: %w", dir, err)
		}
		// Badger's own lock error loses its cause and talks about Badger;
		// our lock comes first and says who to look for.
		unlock, err := lockDir(dir)
		if err != nil {
			return nil, fmt.Errorf("opening store %s: %w", dir, err)
		}
		db.unlock = unlock
		// A store in a project's directory (.iterion) is never committed.
		if err := writeGitignore(dir); err != nil {
			unlock()
			return nil, fmt.Errorf("opening store %s: %w", dir, err)
		}
		bo = badger.DefaultOptions(dir)
	}
	bo = bo.WithSyncWrites(opts.syncWrites).WithMetricsEnabled(false)
	if opts.Logger != nil {
		bo = bo.WithLogger(badgerLogger{opts.Logger})
	} else {
		bo = bo.WithLogger(nil)
	}
	if opts.SmallMemory {
		bo = bo.
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
	}
	db.maxValue = int(bo.ValueLogFileSize)
	if opts.InMemory {
		// In memory there is no value log: Badger refuses values above
		// ValueThreshold, which it caps at 1 MiB and 15% of MemTableSize.
		if bo.MemTableSize < 8<<20 {
			bo = bo.WithMemTableSize(8 << 20)
		}
		bo = bo.WithValueThreshold(1 << 20)
		db.maxValue = 1 << 20
	}

	bdb, err := badger.Open(bo)
	if err != nil {
		if db.unlock != nil {
			_ = db.unlock()
		}
		if opts.InMemory {
			return nil, fmt.Errorf("opening store in memory: %w", err)
		}
		return nil, fmt.Errorf("opening store %s: %w", dir, err)
	}
	db.bdb = bdb
	if err := db.indexPRRuns(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("opening store %s: indexing the runs of pull requests: %w", dir, err)
	}
	return db, nil
}

// Close flushes and closes the database and releases the directory. It
// waits for operations in flight; later calls return nil.
func (db *DB) Close() error {
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
// each call: assign its results, never append to them.
func (db *DB) update(ctx context.Context, sync bool, fn func(txn *tx) error) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := db.bdb.Update(func(txn *badger.Txn) error { return fn(&tx{txn, db.maxValue}) })
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
	return db.bdb.View(func(txn *badger.Txn) error { return fn(&tx{txn, db.maxValue}) })
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
