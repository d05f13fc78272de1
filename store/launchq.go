package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/iterion-bot/iterion/engine"
)

// The launch queue holds runs asked for while another run of the same
// scope (a pull request) is active; the channel starts the oldest when the
// active run ends.

func launchqPrefix(scope string) []byte { return []byte("launchq/" + scope + "/q/") }
func launchqKey(scope string, seq int64) []byte {
	return []byte("launchq/" + scope + "/q/" + pad(seq))
}
func launchqByKey(scope, key string) []byte { return []byte("launchq/" + scope + "/k/" + key) }
func launchqCounter(scope string) []byte    { return []byte("launchq/" + scope + "/next") }

// QueueLaunch appends a launch to scope's queue, synced, once per key,
// and returns its 1-based position.
func (db *DB) QueueLaunch(ctx context.Context, scope, key string, payload []byte) (int, error) {
	var pos int
	err := db.update(ctx, true, func(txn *tx) error {
		pos = 0
		var seq counterRecord
		if err := get(txn, launchqByKey(scope, key), &seq); err == nil {
			return db.position(txn, scope, seq.N, &pos)
		} else if !errors.Is(err, engine.ErrNotFound) {
			return err
		}
		var next counterRecord
		if err := get(txn, launchqCounter(scope), &next); err != nil && !errors.Is(err, engine.ErrNotFound) {
			return err
		}
		next.N++
		if err := put(txn, launchqCounter(scope), next); err != nil {
			return err
		}
		q := QueuedLaunch{Key: key, Payload: payload, QueuedAt: db.now(), Seq: next.N}
		if err := put(txn, launchqKey(scope, next.N), q); err != nil {
			return err
		}
		if err := put(txn, launchqByKey(scope, key), counterRecord{N: next.N}); err != nil {
			return err
		}
		return db.position(txn, scope, next.N, &pos)
	})
	if err != nil {
		return 0, fmt.Errorf("queueing launch %s in %s: %w", key, scope, err)
	}
	return pos, nil
}

// position counts the queued launches up to and including seq.
func (db *DB) position(txn *tx, scope string, seq int64, pos *int) error {
	return scan(txn, launchqPrefix(scope), nil, func(_ []byte, q *QueuedLaunch) (bool, error) {
		if q.Seq > seq {
			return false, nil
		}
		*pos++
		return true, nil
	})
}

// QueuedLaunches returns scope's queue, oldest first.
func (db *DB) QueuedLaunches(ctx context.Context, scope string) ([]QueuedLaunch, error) {
	var out []QueuedLaunch
	err := db.view(ctx, func(txn *tx) error {
		return scan(txn, launchqPrefix(scope), nil, func(_ []byte, q *QueuedLaunch) (bool, error) {
			out = append(out, *q)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading the launch queue of %s: %w", scope, err)
	}
	return out, nil
}

// DropLaunch removes a launch from scope's queue, synced; removing one
// that is not queued is not an error.
func (db *DB) DropLaunch(ctx context.Context, scope, key string) error {
	err := db.write(ctx, bookkeeping, true, func(txn *tx) error {
		var seq counterRecord
		if err := get(txn, launchqByKey(scope, key), &seq); errors.Is(err, engine.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		if err := txn.Delete(launchqKey(scope, seq.N)); err != nil {
			return err
		}
		return txn.Delete(launchqByKey(scope, key))
	})
	if err != nil {
		return fmt.Errorf("dropping launch %s from %s: %w", key, scope, err)
	}
	return nil
}
