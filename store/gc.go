package store

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Badger keeps values above its ValueThreshold (a checkpoint, a long
// event) in value-log files and never reclaims them by itself: an
// overwritten checkpoint stays on disk until its file is collected. A run
// that checkpoints after every node would fill the disk with dead
// checkpoints; the collector rewrites the files that are mostly dead.

// defaultGCInterval is how often the value log is collected unless
// Options.GCInterval says otherwise.
const defaultGCInterval = 5 * time.Minute

// gcAfterFiles is how many value-log files' worth of writes start a
// collection before the interval is up: a run looping fast writes
// gigabytes in minutes, and what it overwrites is garbage at once.
const gcAfterFiles = 2

// gcDiscardRatio is the share of dead values that makes a value-log file
// worth rewriting: Badger's recommended 0.5 rewrites at most as many bytes
// as it frees.
const gcDiscardRatio = 0.5

// collector collects the value log of a DB periodically, on its own
// goroutine, until stopped.
type collector struct {
	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	// written counts the bytes written since the last collection; past
	// after, wake is signalled to collect now.
	written atomic.Int64
	after   int64
	wake    chan struct{}
}

// startCollector collects db's value log every interval, or at each tick
// when ticks is set, and whenever after bytes were written since the last
// collection; it tells ran (when set) the outcome of each collection.
func startCollector(db *DB, interval time.Duration, ticks <-chan time.Time, after int64, ran func(int, error)) *collector {
	c := &collector{quit: make(chan struct{}), done: make(chan struct{}), after: after, wake: make(chan struct{}, 1)}
	go func() {
		defer close(c.done)
		if ticks == nil {
			t := time.NewTicker(interval)
			defer t.Stop()
			ticks = t.C
		}
		for {
			select {
			case <-c.quit:
				return
			case <-ticks:
			case <-c.wake:
			}
			c.written.Store(0)
			n, err := db.collectGarbage(c.quit)
			if err != nil {
				db.log.Warn("store: collecting the value log failed", "rewritten", n, "err", err)
			} else if n > 0 {
				db.log.Info("store: value log collected", "rewritten", n)
			}
			if ran != nil {
				ran(n, err)
			}
		}
	}()
	return c
}

// wrote counts n bytes written, and wakes the collector when they add up
// to its threshold. A nil collector counts nothing.
func (c *collector) wrote(n int64) {
	if c == nil || c.written.Add(n) < c.after {
		return
	}
	select {
	case c.wake <- struct{}{}:
	default: // already woken
	}
}

// stop ends the collection, waiting for one under way; a nil collector
// (none started) is already stopped.
func (c *collector) stop() {
	if c == nil {
		return
	}
	c.stopOnce.Do(func() { close(c.quit) })
	<-c.done
}

// collectGarbage rewrites the value-log files Badger finds worth it, one
// at a time, until it finds none or quit is closed, and returns how many
// it rewrote. A rewrite copies the file's live values first, so none runs
// when the disk is nearly full: that would fill it.
func (db *DB) collectGarbage(quit <-chan struct{}) (int, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return 0, ErrClosed
	}
	for n := 0; ; n++ {
		select {
		case <-quit:
			return n, nil
		default:
		}
		if err := db.disk.check(bookkeeping); err != nil {
			return n, err
		}
		err := db.bdb.RunValueLogGC(gcDiscardRatio)
		switch {
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected):
			// Nothing (more) worth rewriting, or a collection already
			// running.
			return n, nil
		case err != nil:
			return n, err
		}
	}
}
