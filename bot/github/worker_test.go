package github

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/iterion-bot/iterion/store"
)

// Deliveries stored before the worker starts (acknowledged, then a crash)
// and while it runs are each handled once; a failing handler leaves its
// delivery failed, not pending.
func TestWorker(t *testing.T) {
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, id := range []string{"before-1", "before-2"} {
		if _, err := db.RecordDelivery(ctx, store.Delivery{Source: "github/1", ID: id, Event: "issue_comment", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	handled := map[string]int{}
	all := make(chan struct{})
	w := NewWorker(db, 2, nil, func(_ context.Context, d store.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		handled[d.ID]++
		if len(handled) == 3 {
			close(all)
		}
		if d.ID == "during" {
			return errors.New("boom")
		}
		return nil
	})
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	if _, err := db.RecordDelivery(ctx, store.Delivery{Source: "github/1", ID: "during", Event: "pull_request", Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	w.Wake()
	<-all
	cancel()
	<-done
	for id, n := range handled {
		if n != 1 {
			t.Errorf("delivery %s handled %d times", id, n)
		}
	}
	pending, _ := db.PendingDeliveries(context.Background(), 0)
	if len(pending) != 0 {
		t.Errorf("still pending: %+v", pending)
	}
}
