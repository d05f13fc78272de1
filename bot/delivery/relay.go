package delivery

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// Outbox is what a relay needs of the store's outbox (engine.Store's).
type Outbox interface {
	DueOutbox(ctx context.Context, now time.Time, limit int) ([]engine.OutboxRow, error)
	AckOutbox(ctx context.Context, id string) error
	RetryOutbox(ctx context.Context, id string, next time.Time) error
}

// MaxOutboxAttempts bounds the tries of a row the channel keeps refusing
// (a deleted PR, a refused body); the last error is logged. A RetryLater
// or a Held row is never given up.
const MaxOutboxAttempts = 10

// HeldRecheck is how long a row refused for a Held reason waits before it
// is tried again without a release.
const HeldRecheck = time.Hour

// Relay performs one channel's outbox rows, oldest first: a row performed
// is acknowledged; a *RetryLater postpones it by its wait; a Held error by
// HeldRecheck (or until Release); any other error backs off, doubling up
// to ten minutes, and is given up after MaxOutboxAttempts. Perform must be
// safe to run again for a row (a crash between it and the
// acknowledgement): channels render from the store and mark their posts.
type Relay struct {
	// Channel names the rows the relay performs (OutboxRow.Channels).
	Channel string
	Store   Outbox
	Perform func(ctx context.Context, row engine.OutboxRow) error
	Log     *slog.Logger
	// Failpoint, when set, is called after each row is performed, before
	// it is acknowledged, for crash tests.
	Failpoint func()
	// Now is the relay's clock; nil means time.Now.
	Now func() time.Time
}

func (r *Relay) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Relay) log() *slog.Logger {
	if r.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Log
}

// Drain performs every row of the channel due now, in order, up to 100.
func (r *Relay) Drain(ctx context.Context) {
	rows, err := r.Store.DueOutbox(ctx, r.now(), 100)
	if err != nil {
		if ctx.Err() == nil {
			r.log().Error("reading the outbox failed", "err", err)
		}
		return
	}
	for _, row := range rows {
		if ctx.Err() != nil {
			return
		}
		if !slices.Contains(row.Channels, r.Channel) {
			continue
		}
		err := r.Perform(ctx, row)
		if err == nil && r.Failpoint != nil {
			r.Failpoint()
		}
		if err == nil {
			if err := r.Store.AckOutbox(ctx, row.ID); err != nil {
				r.log().Error("acknowledging an outbox row failed", "row", row.ID, "err", err)
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		var later *RetryLater
		var held Held
		wait := min(time.Duration(1<<min(row.Attempts, 10))*time.Second, 10*time.Minute)
		switch {
		case errors.As(err, &held):
			// Said once by whoever knows the reason; looked at again hourly
			// in case its release was missed.
			r.log().Debug("an outbox row is held", "channel", r.Channel, "row", row.ID, "run", row.RunID, "hold", held.Hold())
			wait = HeldRecheck
		case errors.As(err, &later):
			wait = later.After
			r.log().Warn("an outbox row is postponed", "channel", r.Channel, "row", row.ID, "kind", row.Kind, "run", row.RunID, "retry_in", wait, "err", err)
		case row.Attempts+1 >= MaxOutboxAttempts:
			r.log().Error("an outbox row could not be performed; giving up", "channel", r.Channel, "row", row.ID, "kind", row.Kind, "run", row.RunID, "attempts", row.Attempts+1, "err", err)
			if err := r.Store.AckOutbox(ctx, row.ID); err != nil {
				r.log().Error("acknowledging an outbox row failed", "row", row.ID, "err", err)
			}
			continue
		default:
			r.log().Warn("an outbox row is postponed", "channel", r.Channel, "row", row.ID, "kind", row.Kind, "run", row.RunID, "retry_in", wait, "err", err)
		}
		if err := r.Store.RetryOutbox(ctx, row.ID, r.now().Add(wait)); err != nil {
			r.log().Error("postponing an outbox row failed", "row", row.ID, "err", err)
		}
	}
}

// Release makes the postponed rows of the channel that mine selects due
// now (their hold was released).
func (r *Relay) Release(ctx context.Context, mine func(row engine.OutboxRow) (bool, error)) error {
	rows, err := r.Store.DueOutbox(ctx, r.now().Add(100*365*24*time.Hour), 0)
	if err != nil {
		return err
	}
	now := r.now()
	for _, row := range rows {
		if !slices.Contains(row.Channels, r.Channel) || !row.NextAt.After(now) {
			continue
		}
		ok, err := mine(row)
		if err != nil {
			return err
		}
		if ok {
			if err := r.Store.RetryOutbox(ctx, row.ID, now); err != nil {
				return err
			}
		}
	}
	return nil
}
