package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/iterion-bot/iterion/engine"
)

// Retention: Prune removes the runs that stopped long ago with everything
// stored for them. A run goes in two steps. First one transaction checks
// that it may go and removes its record and its index entries, so that
// from then on it does not exist for anyone (no resume can pick it up),
// and leaves a marker, prune/<run>. Then bounded transactions delete the
// rest (events, checkpoint, interactions, inbox, counters, posts, outbox
// rows, reply routes, short numbers) and, last, the marker. A Prune
// interrupted in between is finished by the next one.

func pruneKey(run string) []byte { return []byte("prune/" + run) }

var prunePrefix = []byte("prune/")

// pruneRecord is the value of a prune marker.
type pruneRecord struct {
	RunID string `json:"run_id"`
}

// batchSize is how many keys one transaction of a migration or a prune
// reads or deletes: far below what the smallest settings' transactions
// hold (about 1,900 small records).
const batchSize = 500

// runPrefixes are the prefixes of the keys of run id, every key that
// holds the run's id in its path: each must be listed here for Prune to
// remove it. Keys that hold the run's id only in their value (outbox/,
// ixref/, short/) are found by purgeReferences.
func runPrefixes(id string) [][]byte {
	return [][]byte{
		ckptKey(id), // exact key, no other run's: ids never contain "/"
		ixPrefix(id),
		pendPrefix(id),
		openqPrefix(id),
		inboxPrefix(id),
		evPrefix(id),
		[]byte("seq/" + id + "/"),
		runPostPrefix(id),
		[]byte("hist/" + id + "/"), // outputs, .history and artifact versions
	}
}

// prunable reports whether Prune may remove r at cutoff: it stopped
// (finished, failed, cancelled or failed_resumable; never running or
// paused waiting for a person) and has not changed since before cutoff.
func prunable(r *engine.Run, cutoff time.Time) bool {
	switch r.Status {
	case engine.StatusFinished, engine.StatusFailed, engine.StatusCancelled, engine.StatusFailedResumable:
		return r.UpdatedAt.Before(cutoff)
	}
	return false
}

// PruneCandidates returns the runs Prune would remove at cutoff, least
// recently changed first: those that stopped (finished, failed, cancelled
// or failed_resumable) and have not changed since before cutoff, except
// those whose end is still to be told to their channels (an outbox row
// pending). Paused and running runs are never among them.
func (db *DB) PruneCandidates(ctx context.Context, cutoff time.Time) ([]*engine.Run, error) {
	var out []*engine.Run
	err := db.view(ctx, func(txn *tx) error {
		out = nil
		told, err := outboxRuns(txn)
		if err != nil {
			return err
		}
		return scan(txn, runPrefix, nil, func(_ []byte, r *engine.Run) (bool, error) {
			if prunable(r, cutoff) && !told[r.ID] {
				out = append(out, r)
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing the runs to prune: %w", err)
	}
	slices.SortFunc(out, func(a, b *engine.Run) int {
		if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// outboxRuns returns the runs that have outbox rows.
func outboxRuns(txn *tx) (map[string]bool, error) {
	runs := map[string]bool{}
	err := scan(txn, outboxPrefix, nil, func(_ []byte, row *engine.OutboxRow) (bool, error) {
		runs[row.RunID] = true
		return true, nil
	})
	return runs, err
}

// Prune removes the runs of PruneCandidates(cutoff), each checked again as
// it goes, and everything stored for them, and returns those removed.
// removed, when set, is called for each run once its record is gone (for
// the caller to remove what it keeps outside the store, a workspace); an
// error it returns is reported, and the run stays removed. Prune first
// finishes the removals an interrupted Prune left.
//
// Its writes may use some of the disk reserve (they free space, once
// compacted); on a store opened read-only, or a disk fuller than that,
// they are refused with engine.ErrStorageFull and nothing is removed.
func (db *DB) Prune(ctx context.Context, cutoff time.Time, removed func(*engine.Run) error) ([]*engine.Run, error) {
	ids, err := db.pendingPrunes(ctx)
	if err != nil {
		return nil, err
	}
	candidates, err := db.PruneCandidates(ctx, cutoff)
	if err != nil {
		return nil, err
	}
	var gone []*engine.Run
	var errs []error
	for _, r := range candidates {
		ok, err := db.unlinkRun(ctx, r.ID, cutoff)
		if err != nil {
			errs = append(errs, err)
			if errors.Is(err, engine.ErrStorageFull) || ctx.Err() != nil {
				break // so will the others be
			}
			continue
		}
		if !ok {
			continue // it changed since it was listed
		}
		gone = append(gone, r)
		ids = append(ids, r.ID)
		if removed != nil {
			if err := removed(r); err != nil {
				errs = append(errs, fmt.Errorf("run %s: %w", r.ID, err))
			}
		}
	}
	if err := db.purge(ctx, ids); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return gone, fmt.Errorf("pruning runs: %w", err)
	}
	return gone, nil
}

// pendingPrunes returns the runs whose removal was started and not
// finished.
func (db *DB) pendingPrunes(ctx context.Context) ([]string, error) {
	var ids []string
	err := db.view(ctx, func(txn *tx) error {
		ids = nil
		return scan(txn, prunePrefix, nil, func(_ []byte, rec *pruneRecord) (bool, error) {
			ids = append(ids, rec.RunID)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing unfinished prunes: %w", err)
	}
	return ids, nil
}

// unlinkRun removes run id's record and its pull-request index entry, and
// marks the run for purge, in one transaction, if it is still prunable at
// cutoff and has no outbox row; it reports whether it did.
func (db *DB) unlinkRun(ctx context.Context, id string, cutoff time.Time) (bool, error) {
	ok := false
	err := db.write(ctx, bookkeeping, true, func(txn *tx) error {
		ok = false
		run, err := getRun(txn, id)
		if errors.Is(err, engine.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		told, err := outboxRuns(txn)
		if err != nil || !prunable(run, cutoff) || told[id] {
			return err
		}
		if err := txn.Delete(runKey(id)); err != nil {
			return err
		}
		if ref := run.Trigger.Ref; ref != "" {
			if err := txn.Delete(append(refIndexPrefix(ref), id...)); err != nil {
				return err
			}
		}
		ok = true
		return put(txn, pruneKey(id), pruneRecord{RunID: id})
	})
	if err != nil {
		return false, fmt.Errorf("removing run %s: %w", id, err)
	}
	return ok, nil
}

// purge deletes what is left of the unlinked runs ids, then their markers.
func (db *DB) purge(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if err := db.purgeReferences(ctx, ids); err != nil {
		return err
	}
	for _, id := range ids {
		for _, prefix := range runPrefixes(id) {
			if err := db.deletePrefix(ctx, prefix); err != nil {
				return fmt.Errorf("removing the records of run %s: %w", id, err)
			}
		}
		if err := db.write(ctx, bookkeeping, false, func(txn *tx) error { return txn.Delete(pruneKey(id)) }); err != nil {
			return fmt.Errorf("removing run %s: %w", id, err)
		}
	}
	return nil
}

// deletePrefix deletes every key under prefix, batchSize keys per
// transaction.
func (db *DB) deletePrefix(ctx context.Context, prefix []byte) error {
	for {
		more := false
		err := db.write(ctx, bookkeeping, false, func(txn *tx) error {
			keys := keysUnder(txn, prefix, batchSize+1)
			more = len(keys) > batchSize
			for _, k := range keys[:min(len(keys), batchSize)] {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil || !more {
			return err
		}
	}
}

// keysUnder returns up to n keys under prefix, in order.
func keysUnder(txn *tx, prefix []byte, n int) [][]byte {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	var keys [][]byte
	for it.Seek(prefix); it.ValidForPrefix(prefix) && len(keys) < n; it.Next() {
		keys = append(keys, it.Item().KeyCopy(nil))
	}
	return keys
}

// runRef is the part of a value that names a run: outbox rows, reply
// routes (ixRef) and short numbers' targets.
type runRef struct {
	RunID         string `json:"run_id"`
	InteractionID string `json:"interaction_id"`
}

// purgeReferences deletes the keys whose values name one of the runs ids:
// their outbox rows, the routes of replies to their posts (ixref/), and
// the short numbers of their questions (short/<scope>/n/<n> and
// short/<scope>/ix/<run>/<interaction>; the scope's counter stays, so a
// number is never handed out again).
func (db *DB) purgeReferences(ctx context.Context, ids []string) error {
	gone := map[string]bool{}
	for _, id := range ids {
		gone[id] = true
	}
	var keys [][]byte
	err := db.view(ctx, func(txn *tx) error {
		keys = nil
		for _, prefix := range [][]byte{outboxPrefix, []byte("ixref/"), []byte("short/"), timerPrefix} {
			err := scan(txn, prefix, nil, func(key []byte, ref *runRef) (bool, error) {
				if !gone[ref.RunID] {
					return true, nil
				}
				keys = append(keys, key)
				// short/<scope>/n/<n>: the scope may hold "/n/", the number not.
				if i := bytes.LastIndex(key, []byte("/n/")); i > 0 && bytes.HasPrefix(key, []byte("short/")) {
					keys = append(keys, shortIxKey(string(key[len("short/"):i]), ref.RunID, ref.InteractionID))
				}
				return true, nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("finding the records naming pruned runs: %w", err)
	}
	for len(keys) > 0 {
		batch := keys[:min(len(keys), batchSize)]
		keys = keys[len(batch):]
		err := db.write(ctx, bookkeeping, false, func(txn *tx) error {
			for _, k := range batch {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("removing the records naming pruned runs: %w", err)
		}
	}
	return nil
}
