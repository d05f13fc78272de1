package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/iterion-bot/iterion/engine"
)

// Timers: timer/<due>/<run>/<interaction>/<what>, due in unix nanoseconds
// zero-padded to 20 digits, so that the first key is the timer due first.
// The value is the engine.Timer; Prune finds a run's timers by it
// (purgeReferences).

var timerPrefix = []byte("timer/")

func timerKey(t engine.Timer) []byte {
	return fmt.Appendf(nil, "timer/%020d/%s/%s/%s", max(t.Due.UnixNano(), 0), t.RunID, t.InteractionID, t.What)
}

// timerRecord is a stored timer; run_id is where purgeReferences reads
// whose it is.
type timerRecord struct {
	engine.Timer
}

// putTimers stores the timers still to come of a pending question.
func putTimers(txn *tx, ix *engine.Interaction) error {
	if ix == nil || !ix.Pending() {
		return nil
	}
	return putTimerRows(txn, ix.FollowUp.Timers(ix.RunID, ix.ID))
}

func putTimerRows(txn *tx, ts []engine.Timer) error {
	for _, t := range ts {
		if t.RunID == "" || t.InteractionID == "" || t.What == "" {
			return fmt.Errorf("timer %+v: run, interaction and what are required", t)
		}
		if err := put(txn, timerKey(t), timerRecord{Timer: t}); err != nil {
			return err
		}
	}
	return nil
}

// NextTimer returns the stored timer due first.
func (db *DB) NextTimer(ctx context.Context) (engine.Timer, bool, error) {
	var t engine.Timer
	var ok bool
	err := db.view(ctx, func(txn *tx) error {
		ok = false
		return scan(txn, timerPrefix, nil, func(_ []byte, rec *timerRecord) (bool, error) {
			t, ok = rec.Timer, true
			return false, nil
		})
	})
	if err != nil {
		return engine.Timer{}, false, fmt.Errorf("reading the next timer: %w", err)
	}
	return t, ok, nil
}

// FireTimer removes t and, when its question still waits and f is set,
// writes what f says, in one synced transaction.
func (db *DB) FireTimer(ctx context.Context, t engine.Timer, f *engine.TimerFire) ([]engine.Event, bool, error) {
	var stored []engine.Event
	var fired bool
	err := db.write(ctx, bookkeeping, true, func(txn *tx) error {
		stored, fired = nil, false
		key := timerKey(t)
		var rec timerRecord
		switch err := get(txn, key, &rec); {
		case errors.Is(err, engine.ErrNotFound):
			return nil // fired already
		case err != nil:
			return err
		}
		if err := txn.Delete(key); err != nil {
			return err
		}
		if f == nil {
			return nil
		}
		ixr, err := getInteraction(txn, t.RunID, t.InteractionID)
		if errors.Is(err, engine.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if !ixr.Pending() {
			return nil
		}
		run, err := getRun(txn, t.RunID)
		if err != nil {
			return err
		}
		now := db.now()
		ixr.FollowUp = f.FollowUp
		if err := put(txn, ixKey(t.RunID, t.InteractionID), ixr); err != nil {
			return err
		}
		if err := putTimerRows(txn, f.Next); err != nil {
			return err
		}
		first, err := nextEventSeq(txn, run.ID)
		if err != nil {
			return err
		}
		if err := appendEvents(txn, run.ID, f.Events, now); err != nil {
			return err
		}
		for i, ev := range f.Events {
			ev.Seq, ev.RunID = first+int64(i), run.ID
			if ev.Time.IsZero() {
				ev.Time = now
			}
			stored = append(stored, ev)
		}
		fired = true
		return putOutbox(txn, run, f.Outbox, now)
	})
	if err != nil {
		return nil, false, fmt.Errorf("firing the %s timer of question %s in run %s: %w", t.What, t.InteractionID, t.RunID, err)
	}
	return stored, fired, nil
}

// nextEventSeq is the seq the run's next event gets.
func nextEventSeq(txn *tx, runID string) (int64, error) {
	var rec counterRecord
	if err := get(txn, counterKey(runID, counterEvents), &rec); err != nil && !errors.Is(err, engine.ErrNotFound) {
		return 0, err
	}
	return rec.N + 1, nil
}
