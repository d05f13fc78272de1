package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// Schedule and Fire are the bot's contract types (bot/delivery), named
// here too for the store's callers.
type (
	Schedule = delivery.Schedule
	Fire     = delivery.Fire
)

// fireTTL is how long a fire that started its run, or was dropped, is
// kept: long past any grace window, so a tick met again is recognised.
const fireTTL = 8 * 24 * time.Hour

// Schedules are stored under their name, path-escaped so that a name's
// "/" cannot reach into another's keys:
//
//	sched/<name>                         the schedule (delivery.Schedule)
//	fires/<name>/<tick>                  a fire of it (delivery.Fire)
//	firepend/<fired, unix ns>/<name>/<tick>  the fires queued or claimed, oldest first
func schedKey(name string) []byte { return []byte("sched/" + url.PathEscape(name)) }
func firePrefix(name string) []byte {
	return []byte("fires/" + url.PathEscape(name) + "/")
}
func fireKey(name, tick string) []byte {
	return []byte("fires/" + url.PathEscape(name) + "/" + url.PathEscape(tick))
}
func firePendKey(f *Fire) []byte {
	return []byte("firepend/" + pad(f.FiredAt.UnixNano()) + "/" + url.PathEscape(f.Schedule) + "/" + url.PathEscape(f.Tick))
}

var (
	schedPrefix    = []byte("sched/")
	firePendPrefix = []byte("firepend/")
)

// fireRef is the value of a firepend/ key.
type fireRef struct {
	Schedule string `json:"schedule"`
	Tick     string `json:"tick"`
}

// PutSchedules replaces the schedules of source with defs, synced,
// keeping the state of those already stored (see delivery.Store).
func (db *DB) PutSchedules(ctx context.Context, source string, defs []Schedule) ([]Schedule, error) {
	var out []Schedule
	err := db.update(ctx, true, func(txn *tx) error {
		out = nil
		now := db.now()
		keep := map[string]bool{}
		for _, d := range defs {
			switch {
			case d.Source != source:
				return fmt.Errorf("schedule %q is of source %q, not %q", d.Name, d.Source, source)
			case d.Name == "" || strings.ContainsAny(d.Name, "\n"):
				return fmt.Errorf("schedule name %q: write a name without newlines", d.Name)
			case keep[d.Name]:
				return fmt.Errorf("schedule %q is declared twice", d.Name)
			}
			keep[d.Name] = true
			var old Schedule
			err := get(txn, schedKey(d.Name), &old)
			switch {
			case err == nil && old.Source != source:
				return fmt.Errorf("schedule %q is already declared by %s", d.Name, old.Source)
			case err == nil && old.Zone == d.Zone:
				d.Cursor, d.Since, d.LastFire, d.LastFireAt, d.LastRun = old.Cursor, old.Since, old.LastFire, old.LastFireAt, old.LastRun
				d.Posts = old.Posts
			case err == nil:
				d.LastFire, d.LastFireAt, d.LastRun, d.Posts = old.LastFire, old.LastFireAt, old.LastRun, old.Posts
			case !errors.Is(err, engine.ErrNotFound):
				return err
			}
			if d.Since.IsZero() {
				d.Since = now
			}
			d.UpdatedAt = now
			if err := put(txn, schedKey(d.Name), &d); err != nil {
				return err
			}
			out = append(out, d)
		}
		var gone []string
		err := scan(txn, schedPrefix, nil, func(_ []byte, s *Schedule) (bool, error) {
			if s.Source == source && !keep[s.Name] {
				gone = append(gone, s.Name)
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		for _, name := range gone {
			if err := db.dropPending(txn, name, "the schedule was removed from its configuration"); err != nil {
				return err
			}
			if err := txn.Delete(schedKey(name)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storing the schedules of %s: %w", source, err)
	}
	slices.SortFunc(out, func(a, b Schedule) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// dropPending drops the fires of schedule name still to start.
func (db *DB) dropPending(txn *tx, name, reason string) error {
	var refs []fireRef
	var keys [][]byte
	err := scan(txn, firePendPrefix, nil, func(key []byte, ref *fireRef) (bool, error) {
		if ref.Schedule == name {
			refs, keys = append(refs, *ref), append(keys, key)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	for i, ref := range refs {
		if err := txn.Delete(keys[i]); err != nil {
			return err
		}
		var f Fire
		if err := get(txn, fireKey(ref.Schedule, ref.Tick), &f); err != nil {
			if errors.Is(err, engine.ErrNotFound) {
				continue
			}
			return err
		}
		f.State, f.Error, f.UpdatedAt = delivery.FireDropped, reason, db.now()
		if err := putFire(txn, &f); err != nil {
			return err
		}
	}
	return nil
}

// putFire stores f; a fire done (started or dropped) expires after fireTTL.
func putFire(txn *tx, f *Fire) error {
	if f.State == delivery.FireQueued || f.State == delivery.FireClaimed {
		return put(txn, fireKey(f.Schedule, f.Tick), f)
	}
	b, err := encode(f)
	if err != nil {
		return err
	}
	key := fireKey(f.Schedule, f.Tick)
	txn.written += int64(len(key) + len(b))
	return txn.SetEntry(badger.NewEntry(key, b).WithTTL(fireTTL))
}

// Schedules returns every schedule, by name.
func (db *DB) Schedules(ctx context.Context) ([]Schedule, error) {
	var out []Schedule
	err := db.view(ctx, func(txn *tx) error {
		out = nil
		return scan(txn, schedPrefix, nil, func(_ []byte, s *Schedule) (bool, error) {
			out = append(out, *s)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing schedules: %w", err)
	}
	slices.SortFunc(out, func(a, b Schedule) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Schedule returns one schedule.
func (db *DB) Schedule(ctx context.Context, name string) (*Schedule, error) {
	var s Schedule
	err := db.view(ctx, func(txn *tx) error { return get(txn, schedKey(name), &s) })
	if err != nil {
		return nil, fmt.Errorf("reading schedule %q: %w", name, err)
	}
	return &s, nil
}

// AdvanceSchedule moves a schedule's cursor forward to cursor.
func (db *DB) AdvanceSchedule(ctx context.Context, name, cursor string) error {
	err := db.write(ctx, bookkeeping, false, func(txn *tx) error {
		var s Schedule
		if err := get(txn, schedKey(name), &s); err != nil {
			return err
		}
		if cursor <= s.Cursor {
			return nil
		}
		s.Cursor, s.UpdatedAt = cursor, db.now()
		return put(txn, schedKey(name), &s)
	})
	if err != nil {
		return fmt.Errorf("advancing schedule %q: %w", name, err)
	}
	return nil
}

// ClaimFire records a fire before its run starts, synced, once per tick.
func (db *DB) ClaimFire(ctx context.Context, f Fire) (bool, error) {
	if f.Schedule == "" || f.Tick == "" || (f.State != delivery.FireQueued && f.State != delivery.FireClaimed) {
		return false, fmt.Errorf("claiming a fire: schedule %q and tick %q are required, state %q must be queued or claimed", f.Schedule, f.Tick, f.State)
	}
	fresh := false
	err := db.update(ctx, true, func(txn *tx) error {
		fresh = false
		var s Schedule
		if err := get(txn, schedKey(f.Schedule), &s); err != nil {
			return err
		}
		var old Fire
		switch err := get(txn, fireKey(f.Schedule, f.Tick), &old); {
		case err == nil:
			return nil
		case !errors.Is(err, engine.ErrNotFound):
			return err
		}
		now := db.now()
		f.FiredAt, f.UpdatedAt, f.RunID, f.Error = now, now, "", ""
		if err := putFire(txn, &f); err != nil {
			return err
		}
		if err := put(txn, firePendKey(&f), fireRef{Schedule: f.Schedule, Tick: f.Tick}); err != nil {
			return err
		}
		s.LastFire, s.LastFireAt, s.UpdatedAt = f.Tick, f.At, now
		if !f.Manual && f.Tick > s.Cursor {
			s.Cursor = f.Tick
		}
		fresh = true
		return put(txn, schedKey(f.Schedule), &s)
	})
	if err != nil {
		return false, fmt.Errorf("recording fire %s of schedule %q: %w", f.Tick, f.Schedule, err)
	}
	return fresh, nil
}

// finishFire moves a pending fire to state with fn's changes, out of the
// pending index.
func (db *DB) finishFire(ctx context.Context, schedule, tick string, fn func(txn *tx, f *Fire) error) error {
	return db.write(ctx, bookkeeping, false, func(txn *tx) error {
		var f Fire
		if err := get(txn, fireKey(schedule, tick), &f); err != nil {
			if errors.Is(err, engine.ErrNotFound) {
				return fmt.Errorf("fire %w", engine.ErrNotFound)
			}
			return err
		}
		pending := f.State == delivery.FireQueued || f.State == delivery.FireClaimed
		if err := fn(txn, &f); err != nil {
			return err
		}
		f.UpdatedAt = db.now()
		if err := putFire(txn, &f); err != nil {
			return err
		}
		if pending && f.State != delivery.FireQueued && f.State != delivery.FireClaimed {
			return txn.Delete(firePendKey(&f))
		}
		return nil
	})
}

// StartFire records that a fire started its run.
func (db *DB) StartFire(ctx context.Context, schedule, tick, runID string) error {
	err := db.finishFire(ctx, schedule, tick, func(txn *tx, f *Fire) error {
		f.State, f.RunID, f.Error = delivery.FireStarted, runID, ""
		var s Schedule
		switch err := get(txn, schedKey(schedule), &s); {
		case errors.Is(err, engine.ErrNotFound):
			return nil // removed meanwhile: the fire still says what it did
		case err != nil:
			return err
		}
		s.LastRun, s.UpdatedAt = runID, db.now()
		return put(txn, schedKey(schedule), &s)
	})
	if err != nil {
		return fmt.Errorf("recording the run of fire %s of schedule %q: %w", tick, schedule, err)
	}
	return nil
}

// DropFire records that a fire starts no run.
func (db *DB) DropFire(ctx context.Context, schedule, tick, reason string) error {
	err := db.finishFire(ctx, schedule, tick, func(_ *tx, f *Fire) error {
		if f.State == delivery.FireStarted {
			return nil // it started: nothing to drop
		}
		f.State, f.Error = delivery.FireDropped, reason
		return nil
	})
	if err != nil {
		return fmt.Errorf("dropping fire %s of schedule %q: %w", tick, schedule, err)
	}
	return nil
}

// PromoteFire turns a queued fire into a claimed one.
func (db *DB) PromoteFire(ctx context.Context, schedule, tick string) error {
	err := db.finishFire(ctx, schedule, tick, func(_ *tx, f *Fire) error {
		if f.State == delivery.FireQueued {
			f.State = delivery.FireClaimed
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("promoting fire %s of schedule %q: %w", tick, schedule, err)
	}
	return nil
}

// PendingFires returns the fires queued or claimed, oldest first.
func (db *DB) PendingFires(ctx context.Context) ([]Fire, error) {
	var out []Fire
	err := db.view(ctx, func(txn *tx) error {
		out = nil
		return scan(txn, firePendPrefix, nil, func(_ []byte, ref *fireRef) (bool, error) {
			var f Fire
			if err := get(txn, fireKey(ref.Schedule, ref.Tick), &f); err != nil {
				if errors.Is(err, engine.ErrNotFound) {
					return true, nil
				}
				return false, err
			}
			out = append(out, f)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing the fires still to start: %w", err)
	}
	return out, nil
}

// Fires returns a schedule's fires, newest fired first, at most limit.
func (db *DB) Fires(ctx context.Context, schedule string, limit int) ([]Fire, error) {
	var out []Fire
	err := db.view(ctx, func(txn *tx) error {
		out = nil
		return scan(txn, firePrefix(schedule), nil, func(_ []byte, f *Fire) (bool, error) {
			out = append(out, *f)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing the fires of schedule %q: %w", schedule, err)
	}
	slices.SortStableFunc(out, func(a, b Fire) int { return cmp.Or(b.FiredAt.Compare(a.FiredAt), strings.Compare(b.Tick, a.Tick)) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// SetSchedulePost records an external id of a schedule's own post.
func (db *DB) SetSchedulePost(ctx context.Context, schedule, name, value string) error {
	err := db.write(ctx, bookkeeping, true, func(txn *tx) error {
		var s Schedule
		if err := get(txn, schedKey(schedule), &s); err != nil {
			return err
		}
		s.Posts = maps.Clone(s.Posts)
		if s.Posts == nil {
			s.Posts = map[string]string{}
		}
		s.Posts[name] = value
		s.UpdatedAt = db.now()
		return put(txn, schedKey(schedule), &s)
	})
	if err != nil {
		return fmt.Errorf("recording post %s of schedule %q: %w", name, schedule, err)
	}
	return nil
}
