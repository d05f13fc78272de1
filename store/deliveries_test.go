package store

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// rawDelivery reads a delivery's record and its expiry as stored.
func rawDelivery(t *testing.T, db *DB, source, id string) (Delivery, uint64) {
	t.Helper()
	var d Delivery
	var expires uint64
	err := db.bdb.View(func(txn *badger.Txn) error {
		item, err := txn.Get(deliveryKey(source, id))
		if err != nil {
			return err
		}
		expires = item.ExpiresAt()
		return item.Value(func(v []byte) error { return decode(item.Key(), v, &d) })
	})
	if err != nil {
		t.Fatal(err)
	}
	return d, expires
}

// countKeys counts the keys under prefix.
func countKeys(t *testing.T, db *DB, prefix string) int {
	t.Helper()
	n := 0
	err := db.bdb.View(func(txn *badger.Txn) error {
		n = len(keysUnder(&tx{Txn: txn}, []byte(prefix), 1<<20))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A handled delivery keeps no payload and expires; the pending index
// holds only the deliveries still to handle.
func TestHandledDeliveryDropsItsPayload(t *testing.T) {
	ctx := t.Context()
	db := newDB(t, "", Options{SmallMemory: true})
	for _, id := range []string{"done", "failed", "later", "left"} {
		if _, err := db.RecordDelivery(ctx, Delivery{Source: "github/1", ID: id, Event: "push", Payload: []byte(`{"big":"payload"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishDelivery(ctx, "github/1", "done", nil); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishDelivery(ctx, "github/1", "failed", errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	if err := db.RetryDelivery(ctx, "github/1", "later", time.Now().Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"done", "failed"} {
		d, expires := rawDelivery(t, db, "github/1", id)
		if d.Payload != nil || expires == 0 {
			t.Errorf("handled delivery %s: payload %q, expiry %d; want none and set", id, d.Payload, expires)
		}
	}
	if d, _ := rawDelivery(t, db, "github/1", "later"); string(d.Payload) != `{"big":"payload"}` {
		t.Errorf("postponed delivery lost its payload: %q", d.Payload)
	}
	if n := countKeys(t, db, "dlvpend/"); n != 2 {
		t.Errorf("%d pending-index entries, want 2 (later, left)", n)
	}
	if err := db.RetryDelivery(ctx, "github/1", "done", time.Now(), nil); err == nil {
		t.Error("postponing a handled delivery: no error")
	}
}

// A store of layout 3 has deliveries without the pending index: opening
// it indexes those still received and drops the payloads of the others,
// keeping their expiry.
func TestDeliveriesIndexedByMigration(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	db := newDB(t, dir, Options{SmallMemory: true})
	const n = 1200 // more than a batch
	for i := range n {
		if _, err := db.RecordDelivery(ctx, Delivery{Source: "github/1", ID: fmt.Sprint(i), Event: "push", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	// As layout 3 left them: handled ones with their payload.
	err := db.bdb.Update(func(txn *badger.Txn) error {
		keys := keysUnder(&tx{Txn: txn}, dlvPendingPrefix, 1<<20)
		for _, k := range keys {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n / 2 {
		key := deliveryKey("github/1", fmt.Sprint(i))
		err := db.bdb.Update(func(txn *badger.Txn) error {
			d := Delivery{Source: "github/1", ID: fmt.Sprint(i), Event: "push", Payload: []byte("{}"), State: DeliveryDone}
			b, err := encode(&d)
			if err != nil {
				return err
			}
			return txn.SetEntry(badger.NewEntry(key, b).WithTTL(deliveryTTL))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setStoredLayout(t, db, 3)
	closeDB(t, db)

	db = newDB(t, dir, Options{SmallMemory: true})
	pending, err := db.PendingDeliveries(ctx, 0)
	if err != nil || len(pending) != n/2 {
		t.Fatalf("%d pending after migrating, %v; want %d", len(pending), err, n/2)
	}
	d, expires := rawDelivery(t, db, "github/1", "0")
	if d.Payload != nil || expires == 0 || d.State != DeliveryDone {
		t.Errorf("a handled delivery after migrating: %+v, expiry %d; want no payload, its expiry kept", d, expires)
	}
}
