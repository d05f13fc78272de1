package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// Delivery, QueuedLaunch and their states are the bot's contract types
// (bot/delivery), named here too for the store's callers.
type (
	Delivery     = delivery.Delivery
	QueuedLaunch = delivery.QueuedLaunch
)

// Delivery states.
const (
	DeliveryReceived = delivery.Received
	DeliveryDone     = delivery.Done
	DeliveryFailed   = delivery.Failed
)

// deliveryTTL is how long a handled delivery is kept to recognise a
// redelivery of it.
const deliveryTTL = 7 * 24 * time.Hour

func deliveryKey(source, id string) []byte { return []byte("dlv/" + source + "/" + id) }

// dlvPendingPrefix is the index of the deliveries still to handle, in the
// order received: dlvpend/<received, unix ns>/<source>/<id>. Listing and
// counting them read it alone, so their cost follows the backlog, not the
// week of handled deliveries kept beside it.
var dlvPendingPrefix = []byte("dlvpend/")

func dlvPendingKey(d *Delivery) []byte {
	return []byte("dlvpend/" + pad(d.ReceivedAt.UnixNano()) + "/" + d.Source + "/" + d.ID)
}

// pendingRef is the value of a dlvpend/ key.
type pendingRef struct {
	Source string    `json:"source"`
	ID     string    `json:"id"`
	NextAt time.Time `json:"next_at,omitzero"`
	Hold   string    `json:"hold,omitempty"`
}

func putPendingDelivery(txn *tx, d *Delivery) error {
	return put(txn, dlvPendingKey(d), pendingRef{Source: d.Source, ID: d.ID, NextAt: d.NextAt, Hold: d.Hold})
}

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
		if err := put(txn, deliveryKey(d.Source, d.ID), &d); err != nil {
			return err
		}
		return putPendingDelivery(txn, &d)
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
		out = nil
		return scan(txn, dlvPendingPrefix, nil, func(_ []byte, ref *pendingRef) (bool, error) {
			if ref.Hold != "" || ref.NextAt.After(now) {
				return true, nil
			}
			var d Delivery
			if err := get(txn, deliveryKey(ref.Source, ref.ID), &d); err != nil {
				return false, err
			}
			out = append(out, d)
			return limit <= 0 || len(out) < limit, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing pending deliveries: %w", err)
	}
	return out, nil
}

// DeliveryBacklog counts the deliveries still to handle, due and
// postponed, reading the pending index alone.
func (db *DB) DeliveryBacklog(ctx context.Context) (delivery.Backlog, error) {
	var b delivery.Backlog
	now := db.now()
	err := db.view(ctx, func(txn *tx) error {
		b = delivery.Backlog{}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: dlvPendingPrefix, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Seek(dlvPendingPrefix); it.ValidForPrefix(dlvPendingPrefix); it.Next() {
			item := it.Item()
			var ref pendingRef
			if err := item.Value(func(v []byte) error { return decode(item.Key(), v, &ref) }); err != nil {
				return err
			}
			switch {
			case ref.Hold != "":
				b.Held++
			case ref.NextAt.After(now):
				b.Postponed++
			default:
				b.Due++
			}
			if b.Oldest.IsZero() {
				// The index is in received order: the first is the oldest.
				ns, err := receivedOf(item.Key())
				if err != nil {
					return err
				}
				b.Oldest = time.Unix(0, ns).UTC()
			}
		}
		return nil
	})
	if err != nil {
		return delivery.Backlog{}, fmt.Errorf("counting pending deliveries: %w", err)
	}
	return b, nil
}

// receivedOf reads the received time out of a dlvpend/ key.
func receivedOf(key []byte) (int64, error) {
	rest := key[len(dlvPendingPrefix):]
	if len(rest) < 21 || rest[20] != '/' {
		return 0, fmt.Errorf("malformed pending-delivery key %q", key)
	}
	return strconv.ParseInt(string(rest[:20]), 10, 64)
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
		if d.State == DeliveryReceived {
			if err := txn.Delete(dlvPendingKey(&d)); err != nil {
				return err
			}
		}
		d.Attempts++
		d.UpdatedAt = db.now()
		d.State, d.Error, d.Payload, d.NextAt, d.Hold = DeliveryDone, "", nil, time.Time{}, ""
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
	return db.keepBack(ctx, "postponing", source, id, handleErr, func(d *Delivery) { d.NextAt = next.UTC() })
}

// HoldDelivery keeps a delivery back under hold until ReleaseDeliveries
// releases it: it stays received and counts the attempt and its error.
func (db *DB) HoldDelivery(ctx context.Context, source, id, hold string, handleErr error) error {
	if hold == "" {
		return fmt.Errorf("holding delivery %s/%s: no hold named", source, id)
	}
	return db.keepBack(ctx, "holding", source, id, handleErr, func(d *Delivery) { d.Hold = hold })
}

// keepBack records an attempt at a received delivery that leaves it
// received, with set applied to it, and its pending index entry updated;
// what names the intent for the error.
func (db *DB) keepBack(ctx context.Context, what, source, id string, handleErr error, set func(*Delivery)) error {
	err := db.write(ctx, bookkeeping, false, func(txn *tx) error {
		var d Delivery
		if err := get(txn, deliveryKey(source, id), &d); err != nil {
			return err
		}
		if d.State != DeliveryReceived {
			return fmt.Errorf("it is already %s", d.State)
		}
		d.Attempts++
		d.UpdatedAt = db.now()
		set(&d)
		if handleErr != nil {
			d.Error = handleErr.Error()
		}
		if err := put(txn, deliveryKey(source, id), &d); err != nil {
			return err
		}
		return putPendingDelivery(txn, &d)
	})
	if err != nil {
		return fmt.Errorf("%s delivery %s/%s: %w", what, source, id, err)
	}
	return nil
}

// ReleaseDeliveries makes the deliveries held under hold ("" for any)
// due now, in batches, reading the pending index alone.
func (db *DB) ReleaseDeliveries(ctx context.Context, hold string) (int, error) {
	released := 0
	for {
		n := 0
		err := db.write(ctx, bookkeeping, false, func(txn *tx) error {
			n = 0
			var keys [][]byte
			var refs []pendingRef
			err := scan(txn, dlvPendingPrefix, nil, func(key []byte, ref *pendingRef) (bool, error) {
				if ref.Hold != "" && (hold == "" || ref.Hold == hold) {
					keys, refs = append(keys, key), append(refs, *ref)
				}
				return len(keys) < batchSize, nil
			})
			if err != nil {
				return err
			}
			for i, ref := range refs {
				var d Delivery
				if err := get(txn, deliveryKey(ref.Source, ref.ID), &d); err != nil {
					return err
				}
				d.Hold, d.NextAt, d.UpdatedAt = "", time.Time{}, db.now()
				if err := put(txn, deliveryKey(ref.Source, ref.ID), &d); err != nil {
					return err
				}
				ref.Hold, ref.NextAt = "", time.Time{}
				if err := put(txn, keys[i], ref); err != nil {
					return err
				}
			}
			n = len(refs)
			return nil
		})
		if err != nil {
			return released, fmt.Errorf("releasing the deliveries held for %q: %w", hold, err)
		}
		released += n
		if n < batchSize {
			return released, nil
		}
	}
}
