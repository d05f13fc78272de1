package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/iterion-bot/iterion/engine"
)

// Delivery is an inbound event from a channel (a GitHub webhook, a Slack
// event), stored before it is acknowledged so that nothing acknowledged is
// lost, and keyed by its channel's id so that a redelivery has no second
// effect.
type Delivery struct {
	// Source names the channel and, where ids are only unique within it,
	// the sender: "github/<app id>", "slack/<team>".
	Source string `json:"source"`
	// ID is the channel's delivery id (X-GitHub-Delivery, event_id).
	ID string `json:"id"`
	// Event is the event type (X-GitHub-Event).
	Event   string `json:"event"`
	Payload []byte `json:"payload"`
	// State is received until a worker has handled it, then done or failed.
	State    string `json:"state"`
	Error    string `json:"error,omitempty"`
	Attempts int    `json:"attempts"`
	// NextAt, when set, holds a delivery GitHub asked us to retry later
	// back from the workers until then.
	NextAt     time.Time `json:"next_at,omitzero"`
	ReceivedAt time.Time `json:"received_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Delivery states.
const (
	DeliveryReceived = "received"
	DeliveryDone     = "done"
	DeliveryFailed   = "failed"
)

// deliveryTTL is how long a handled delivery is kept to recognise a
// redelivery of it.
const deliveryTTL = 7 * 24 * time.Hour

func deliveryKey(source, id string) []byte { return []byte("dlv/" + source + "/" + id) }

// RecordDelivery stores a new delivery, synced, and reports whether it was
// new: false means the same source and id were already recorded (a
// redelivery), and nothing was written.
func (db *DB) RecordDelivery(ctx context.Context, d Delivery) (bool, error) {
	if d.Source == "" || d.ID == "" {
		return false, errors.New("recording a delivery: source and id are required")
	}
	fresh := false
	err := db.update(ctx, true, func(txn *tx) error {
		fresh = false
		var old Delivery
		switch err := get(txn, deliveryKey(d.Source, d.ID), &old); {
		case err == nil:
			return nil // a redelivery
		case !errors.Is(err, engine.ErrNotFound):
			return err
		}
		now := db.now()
		d.State, d.ReceivedAt, d.UpdatedAt = DeliveryReceived, now, now
		fresh = true
		return put(txn, deliveryKey(d.Source, d.ID), &d)
	})
	if err != nil {
		return false, fmt.Errorf("recording delivery %s/%s: %w", d.Source, d.ID, err)
	}
	return fresh, nil
}

// PendingDeliveries returns up to limit deliveries still to handle
// (received, and due when postponed), oldest first; limit <= 0 means all.
// Workers call it at start to handle what was acknowledged before a crash.
func (db *DB) PendingDeliveries(ctx context.Context, limit int) ([]Delivery, error) {
	var out []Delivery
	now := db.now()
	err := db.view(ctx, func(txn *tx) error {
		return scan(txn, []byte("dlv/"), nil, func(_ []byte, d *Delivery) (bool, error) {
			if d.State == DeliveryReceived && !d.NextAt.After(now) {
				out = append(out, *d)
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing pending deliveries: %w", err)
	}
	slices.SortStableFunc(out, func(a, b Delivery) int { return a.ReceivedAt.Compare(b.ReceivedAt) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// FinishDelivery records the outcome of handling a delivery: done, or
// failed with its error. The record then expires after a week, long enough
// to recognise redeliveries.
func (db *DB) FinishDelivery(ctx context.Context, source, id string, handleErr error) error {
	err := db.write(ctx, bookkeeping, false, func(txn *tx) error {
		var d Delivery
		if err := get(txn, deliveryKey(source, id), &d); err != nil {
			return err
		}
		d.Attempts++
		d.UpdatedAt = db.now()
		d.State, d.Error = DeliveryDone, ""
		if handleErr != nil {
			d.State, d.Error = DeliveryFailed, handleErr.Error()
		}
		b, err := encode(&d)
		if err != nil {
			return err
		}
		return txn.SetEntry(badger.NewEntry(deliveryKey(source, id), b).WithTTL(deliveryTTL))
	})
	if err != nil {
		return fmt.Errorf("finishing delivery %s/%s: %w", source, id, err)
	}
	return nil
}

// RetryDelivery postpones a delivery whose handling must be tried again
// (GitHub rate-limited us, or was down): it stays received, counts the
// attempt and its error, and is pending again from next.
func (db *DB) RetryDelivery(ctx context.Context, source, id string, next time.Time, handleErr error) error {
	err := db.write(ctx, bookkeeping, false, func(txn *tx) error {
		var d Delivery
		if err := get(txn, deliveryKey(source, id), &d); err != nil {
			return err
		}
		d.Attempts++
		d.UpdatedAt = db.now()
		d.NextAt = next.UTC()
		if handleErr != nil {
			d.Error = handleErr.Error()
		}
		return put(txn, deliveryKey(source, id), &d)
	})
	if err != nil {
		return fmt.Errorf("postponing delivery %s/%s: %w", source, id, err)
	}
	return nil
}
