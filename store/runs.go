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

// CreateRun stores a new run and its first events, synced, with a
// run_started outbox row when the run has channels. The run's CreatedAt
// and UpdatedAt default to now. It fails with engine.ErrRunExists when the
// id is taken.
func (db *DB) CreateRun(ctx context.Context, run *engine.Run, events []engine.Event) error {
	if !engine.ValidRunID(run.ID) {
		return fmt.Errorf("creating run %q: invalid run id (want [a-z0-9-]{1,64})", run.ID)
	}
	if len(run.Trigger.Ref) > maxRefLen {
		return fmt.Errorf("creating run %s: its trigger's ref has %d bytes, more than %d", run.ID, len(run.Trigger.Ref), maxRefLen)
	}
	err := db.update(ctx, true, func(txn *tx) error {
		if _, err := txn.Get(runKey(run.ID)); err == nil {
			return engine.ErrRunExists
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		now := db.now()
		r := *run
		if r.CreatedAt.IsZero() {
			r.CreatedAt = now
		}
		if r.UpdatedAt.IsZero() {
			r.UpdatedAt = r.CreatedAt
		}
		if err := put(txn, runKey(r.ID), &r); err != nil {
			return err
		}
		if err := putRefIndex(txn, &r); err != nil {
			return err
		}
		if err := appendEvents(txn, r.ID, events, now); err != nil {
			return err
		}
		return putOutbox(txn, &r, []engine.OutboxRow{{Kind: engine.OutboxRunStarted}}, now)
	})
	if err != nil {
		return fmt.Errorf("creating run %s: %w", run.ID, err)
	}
	return nil
}

// Run returns a run.
func (db *DB) Run(ctx context.Context, id string) (*engine.Run, error) {
	var run *engine.Run
	err := db.view(ctx, func(txn *tx) error {
		var err error
		run, err = getRun(txn, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading run %s: %w", id, err)
	}
	return run, nil
}

// Runs lists runs newest first by CreatedAt, ties broken by id (greater
// first). It reads every run record: fine for the thousands of runs one
// machine keeps, and the place for a by-time index when that changes.
func (db *DB) Runs(ctx context.Context, f engine.RunFilter) ([]*engine.Run, error) {
	var runs []*engine.Run
	err := db.view(ctx, func(txn *tx) error {
		runs = nil
		return scan(txn, runPrefix, nil, func(_ []byte, r *engine.Run) (bool, error) {
			if f.Status == "" || r.Status == f.Status {
				runs = append(runs, r)
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	slices.SortFunc(runs, func(a, b *engine.Run) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	if f.Limit > 0 && len(runs) > f.Limit {
		runs = runs[:f.Limit]
	}
	return runs, nil
}

// Acquire takes the owner lease of a run: the generation goes up by one,
// so that writes naming an earlier generation are refused. Synced, so a
// crash cannot hand the same generation out twice.
func (db *DB) Acquire(ctx context.Context, runID, owner string) (*engine.Run, error) {
	var run *engine.Run
	err := db.update(ctx, true, func(txn *tx) error {
		var err error
		if run, err = getRun(txn, runID); err != nil {
			return err
		}
		run.Generation++
		run.Owner = owner
		run.UpdatedAt = db.now()
		return put(txn, runKey(runID), run)
	})
	if err != nil {
		return nil, fmt.Errorf("acquiring run %s for %s: %w", runID, owner, err)
	}
	return run, nil
}

// RequestStop marks a run that is not over to end cancelled; see
// engine.Store.
func (db *DB) RequestStop(ctx context.Context, runID, reason string) (*engine.Run, error) {
	if reason == "" {
		reason = "stopped"
	}
	var run *engine.Run
	err := db.write(ctx, bookkeeping, true, func(txn *tx) error {
		var err error
		if run, err = getRun(txn, runID); err != nil {
			return err
		}
		if run.Status.Terminal() || run.Status == engine.StatusFailedResumable || run.StopRequested != "" {
			return nil
		}
		run.StopRequested = reason
		run.UpdatedAt = db.now()
		return put(txn, runKey(runID), run)
	})
	if err != nil {
		return nil, fmt.Errorf("requesting a stop of run %s: %w", runID, err)
	}
	return run, nil
}

// checkOwner refuses a write that names a generation other than the run's.
func checkOwner(run *engine.Run, generation int64) error {
	if run.Generation != generation {
		return fmt.Errorf("generation %d is stale, the run is at %d: %w", generation, run.Generation, engine.ErrStaleOwner)
	}
	return nil
}

// failureStatus reports whether a run in status s keeps a failure code and
// error: failed, failed_resumable and cancelled (whose reason is kept).
func failureStatus(s engine.Status) bool {
	switch s {
	case engine.StatusFailed, engine.StatusFailedResumable, engine.StatusCancelled:
		return true
	}
	return false
}

// Commit applies one state change of a run in one transaction:
//
//   - Status, when set, replaces the run's; FailureCode and Error are written
//     with a failure status (failed, failed_resumable, cancelled) and cleared
//     with any other. FinishedAt is set when the status becomes terminal and
//     cleared when it stops being terminal (a resume).
//   - Checkpoint, when not nil, replaces the checkpoint.
//   - History entries are written under hist/<run>/<series>/<index>,
//     replacing an entry of the same series and index.
//   - Events are appended with the next Seq numbers; RunID is the change's,
//     and a zero Time becomes now.
//   - Interactions are stored as given (RunID defaulting to the change's),
//     keeping their creation order when they already exist. Async
//     interactions are refused: PostQuestion and Answer own them, and a put
//     could undo an answer.
//   - Outbox rows get an id (engine.NewID, in the order given), CreatedAt and
//     NextAt (now) when zero, and the run's channels when they name none; a
//     row left without channels is dropped, as a run with no channels has
//     no one to tell.
//
// It fails with engine.ErrStaleOwner unless the run's generation is
// c.Generation. With c.Sync the change is on disk when Commit returns.
func (db *DB) Commit(ctx context.Context, c engine.Change) error {
	// A run that stops must be able to say so on a nearly full disk, or it
	// would stay running; its change may use some of the reserve.
	class := newData
	if c.Status.Terminal() {
		class = bookkeeping
	}
	err := db.write(ctx, class, c.Sync, func(txn *tx) error {
		run, err := getRun(txn, c.RunID)
		if err != nil {
			return err
		}
		if err := checkOwner(run, c.Generation); err != nil {
			return err
		}
		now := db.now()
		if c.Status != "" && run.StopRequested != "" {
			if c.Status != engine.StatusCancelled {
				return fmt.Errorf("setting %s: %w (%s)", c.Status, engine.ErrStopRequested, run.StopRequested)
			}
			run.StopRequested = ""
		}
		if c.Status != "" {
			wasTerminal := run.Status.Terminal()
			run.Status = c.Status
			run.FailureCode, run.Error = "", ""
			if failureStatus(c.Status) {
				run.FailureCode, run.Error = c.FailureCode, c.Error
			}
			switch {
			case !c.Status.Terminal():
				run.FinishedAt = time.Time{}
			case !wasTerminal || run.FinishedAt.IsZero():
				run.FinishedAt = now
			}
		}
		run.UpdatedAt = now
		if err := put(txn, runKey(run.ID), run); err != nil {
			return err
		}
		if c.Checkpoint != nil {
			if err := put(txn, ckptKey(run.ID), checkpointRecord{Data: c.Checkpoint}); err != nil {
				return err
			}
		}
		if err := putHistory(txn, run.ID, c.History); err != nil {
			return err
		}
		if err := appendEvents(txn, run.ID, c.Events, now); err != nil {
			return err
		}
		for _, ix := range c.Interactions {
			if err := putInteraction(txn, run.ID, ix, now); err != nil {
				return err
			}
		}
		if run.Status == engine.StatusFinished || run.Status == engine.StatusFailed {
			// Nobody can answer its questions any more.
			if err := dropOpenQuestions(txn, run.ID); err != nil {
				return err
			}
		}
		return putOutbox(txn, run, c.Outbox, now)
	})
	if err != nil {
		return fmt.Errorf("committing to run %s: %w", c.RunID, err)
	}
	return nil
}

// putInteraction stores a blocking or await interaction for Commit.
func putInteraction(txn *tx, runID string, in *engine.Interaction, now time.Time) error {
	if in == nil || in.ID == "" {
		return errors.New("interaction without id")
	}
	ix := *in
	switch {
	case ix.RunID == "":
		ix.RunID = runID
	case ix.RunID != runID:
		return fmt.Errorf("interaction %s belongs to run %s", ix.ID, ix.RunID)
	}
	if ix.Kind == engine.KindAsync {
		return fmt.Errorf("interaction %s is async: only PostQuestion and Answer write those", ix.ID)
	}
	if ix.RequestedAt.IsZero() {
		ix.RequestedAt = now
	}
	rec := ixRecord{Interaction: &ix}
	old, err := getInteraction(txn, runID, ix.ID)
	var replaced *engine.Interaction
	switch {
	case err == nil:
		replaced = old.Interaction
		if old.Kind == engine.KindAsync {
			return fmt.Errorf("interaction %s is async: only PostQuestion and Answer write those", ix.ID)
		}
		rec.Order = old.Order
	case errors.Is(err, engine.ErrNotFound):
		if rec.Order, err = reserve(txn, runID, counterInteractions, 1); err != nil {
			return err
		}
	default:
		return err
	}
	if err := put(txn, ixKey(runID, ix.ID), rec); err != nil {
		return err
	}
	if err := putTimers(txn, &ix); err != nil {
		return err
	}
	return putOpenQuestion(txn, runID, &ix, replaced)
}

// appendEvents writes events after the run's last one.
func appendEvents(txn *tx, runID string, events []engine.Event, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	seq, err := reserve(txn, runID, counterEvents, int64(len(events)))
	if err != nil {
		return err
	}
	for i, ev := range events {
		ev.Seq = seq + int64(i)
		ev.RunID = runID
		if ev.Time.IsZero() {
			ev.Time = now
		}
		if err := put(txn, evKey(runID, ev.Seq), &ev); err != nil {
			return err
		}
	}
	return nil
}

// putOutbox writes outbox rows of a run, completing them as Commit says.
// A row for several channels is stored as one row per channel, each
// performed, acknowledged and postponed by its channel alone: a channel
// waiting out a rate limit holds no other back.
func putOutbox(txn *tx, run *engine.Run, rows []engine.OutboxRow, now time.Time) error {
	// The store's sequence keeps rows in the order they are written, within
	// one transaction and across transactions of the same millisecond.
	for _, row := range rows {
		channels := row.Channels
		if len(channels) == 0 {
			channels = run.Channels
		}
		given := row.ID
		for _, ch := range channels {
			one := row
			one.Channels = []string{ch}
			switch {
			case given == "":
				one.ID = txn.ids.Next(now)
			case len(channels) > 1:
				one.ID = given + "." + ch
			}
			if one.RunID == "" {
				one.RunID = run.ID
			}
			if one.CreatedAt.IsZero() {
				one.CreatedAt = now
			}
			if one.NextAt.IsZero() {
				one.NextAt = now
			}
			if err := put(txn, outboxKey(one.ID), &one); err != nil {
				return err
			}
		}
	}
	return nil
}

// Checkpoint returns the run's last checkpoint, nil when it has none.
func (db *DB) Checkpoint(ctx context.Context, runID string) ([]byte, error) {
	var data []byte
	err := db.view(ctx, func(txn *tx) error {
		data = nil
		if _, err := getRun(txn, runID); err != nil {
			return err
		}
		var rec checkpointRecord
		err := get(txn, ckptKey(runID), &rec)
		if errors.Is(err, engine.ErrNotFound) {
			return nil
		}
		data = rec.Data
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint of run %s: %w", runID, err)
	}
	return data, nil
}
