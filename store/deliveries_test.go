package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

func TestDeliveries(t *testing.T) {
	db, err := Open(t.TempDir(), Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	d := Delivery{Source: "github/1", ID: "abc", Event: "issue_comment", Payload: []byte(`{"x":1}`)}

	// Twenty concurrent redeliveries of one id: exactly one is new.
	var fresh atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			ok, err := db.RecordDelivery(ctx, d)
			if err != nil {
				t.Error(err)
			}
			if ok {
				fresh.Add(1)
			}
		})
	}
	wg.Wait()
	if fresh.Load() != 1 {
		t.Fatalf("%d deliveries recorded as new, want 1", fresh.Load())
	}
	if ok, _ := db.RecordDelivery(ctx, Delivery{Source: "github/2", ID: "abc", Event: "push"}); !ok {
		t.Error("the same id from another source is a different delivery")
	}
	pending, err := db.PendingDeliveries(ctx, 0)
	if err != nil || len(pending) != 2 || pending[0].ID != "abc" || string(pending[0].Payload) != `{"x":1}` {
		t.Fatalf("pending = %+v, %v", pending, err)
	}
	if err := db.FinishDelivery(ctx, "github/1", "abc", nil); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishDelivery(ctx, "github/2", "abc", errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	if pending, _ := db.PendingDeliveries(ctx, 0); len(pending) != 0 {
		t.Errorf("handled deliveries still pending: %+v", pending)
	}
	if ok, _ := db.RecordDelivery(ctx, d); ok {
		t.Error("a redelivery of a handled delivery was recorded again")
	}
	if _, err := db.RecordDelivery(ctx, Delivery{Source: "github/1"}); err == nil {
		t.Error("a delivery without id was accepted")
	}
}

func TestRetryDelivery(t *testing.T) {
	db, err := Open(t.TempDir(), Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.RecordDelivery(ctx, Delivery{Source: "github/1", ID: "r", Event: "issue_comment"}); err != nil {
		t.Fatal(err)
	}
	if err := db.RetryDelivery(ctx, "github/1", "r", time.Now().Add(time.Hour), errors.New("rate limited")); err != nil {
		t.Fatal(err)
	}
	if p, _ := db.PendingDeliveries(ctx, 0); len(p) != 0 {
		t.Fatalf("a postponed delivery is pending before its time: %+v", p)
	}
	if err := db.RetryDelivery(ctx, "github/1", "r", time.Now().Add(-time.Second), errors.New("rate limited again")); err != nil {
		t.Fatal(err)
	}
	p, _ := db.PendingDeliveries(ctx, 0)
	if len(p) != 1 || p[0].Attempts != 2 || p[0].Error != "rate limited again" {
		t.Fatalf("due delivery = %+v, want pending after 2 attempts with the last error", p)
	}
	if err := db.RetryDelivery(ctx, "github/1", "missing", time.Now(), nil); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("postponing an unknown delivery: %v", err)
	}
}
