package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/iterion-bot/iterion/engine"
)

// DueOutbox returns up to limit outbox rows whose NextAt is not after now,
// oldest first (by CreatedAt, then id); limit <= 0 means all of them. It
// reads the whole outbox, which holds only the side effects not yet
// performed.
func (db *DB) DueOutbox(ctx context.Context, now time.Time, limit int) ([]engine.OutboxRow, error) {
	var rows []engine.OutboxRow
	err := db.view(ctx, func(txn *tx) error {
		rows = nil
		return scan(txn, outboxPrefix, nil, func(_ []byte, row *engine.OutboxRow) (bool, error) {
			if !row.NextAt.After(now) {
				rows = append(rows, *row)
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading due outbox rows: %w", err)
	}
	slices.SortFunc(rows, func(a, b engine.OutboxRow) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	return rows, nil
}

// AckOutbox deletes a performed outbox row.
func (db *DB) AckOutbox(ctx context.Context, id string) error {
	err := db.write(ctx, bookkeeping, false, func(txn *tx) error {
		if _, err := txn.Get(outboxKey(id)); err != nil {
			if errors.Is(err, badger.ErrKeyNotFound) {
				return fmt.Errorf("outbox row %w", engine.ErrNotFound)
			}
			return err
		}
		return txn.Delete(outboxKey(id))
	})
	if err != nil {
		return fmt.Errorf("acknowledging outbox row %s: %w", id, err)
	}
	return nil
}

// RetryOutbox counts a failed attempt of an outbox row and postpones it to
// next.
func (db *DB) RetryOutbox(ctx context.Context, id string, next time.Time) error {
	err := db.write(ctx, bookkeeping, false, func(txn *tx) error {
		var row engine.OutboxRow
		if err := get(txn, outboxKey(id), &row); err != nil {
			if errors.Is(err, engine.ErrNotFound) {
				return fmt.Errorf("outbox row %w", engine.ErrNotFound)
			}
			return err
		}
		row.Attempts++
		row.NextAt = next.UTC().Round(0)
		return put(txn, outboxKey(id), &row)
	})
	if err != nil {
		return fmt.Errorf("retrying outbox row %s: %w", id, err)
	}
	return nil
}
