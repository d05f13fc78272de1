package github

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/iterion-bot/iterion/store"
)

// Deliveries stored before the worker starts (acknowledged, then a crash)
// and while it runs are each handled once, re-scans included; a failing
// handler leaves its delivery failed, not pending. (In a synctest bubble,
// so the test can wait for the outcomes to be stored and for re-scans.)
func TestWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
		w := NewWorker(db, 2, nil, func(_ context.Context, d store.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			handled[d.ID]++
			if d.ID == "during" {
				return errors.New("boom")
			}
			return nil
		})
		var gaveUp []string
		w.GiveUp = func(_ context.Context, d store.Delivery, err error) {
			mu.Lock()
			defer mu.Unlock()
			gaveUp = append(gaveUp, d.ID+": "+err.Error())
		}
		done := make(chan struct{})
		go func() { w.Run(ctx); close(done) }()
		if _, err := db.RecordDelivery(ctx, store.Delivery{Source: "github/1", ID: "during", Event: "pull_request", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		w.Wake()
		synctest.Wait()             // all three handled, their outcomes stored
		time.Sleep(2 * time.Minute) // re-scans come and go
		cancel()
		<-done
		if len(gaveUp) != 1 || gaveUp[0] != "during: boom" {
			t.Errorf("GiveUp calls %v, want one for the failed delivery", gaveUp)
		}
		if len(handled) != 3 {
			t.Errorf("handled %v, want the three deliveries", handled)
		}
		for id, n := range handled {
			if n != 1 {
				t.Errorf("delivery %s handled %d times", id, n)
			}
		}
		pending, _ := db.PendingDeliveries(context.Background(), 0)
		if len(pending) != 0 {
			t.Errorf("still pending: %+v", pending)
		}
	})
}

// A handler GitHub turned away (RetryLater) leaves its delivery postponed,
// not failed; it is handled again when GitHub said to come back (not at
// the next 30 s re-scan), and after MaxAttempts the failure is recorded.
// In a synctest bubble the back-off passes at once, on the clock the store
// reads too.
func TestWorkerRetryLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if _, err := db.RecordDelivery(ctx, store.Delivery{Source: "github/1", ID: "limited", Event: "issue_comment", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		const after = 7 * time.Second
		type attempt struct {
			earlier int // attempts the store counted before this one
			at      time.Time
		}
		attempts := make(chan attempt, MaxAttempts+1)
		w := NewWorker(db, 1, nil, func(_ context.Context, d store.Delivery) error {
			attempts <- attempt{d.Attempts, time.Now()}
			return &RetryLater{After: after, Err: errors.New("secondary rate limit")}
		})
		var gaveUp []error
		w.GiveUp = func(_ context.Context, _ store.Delivery, err error) { gaveUp = append(gaveUp, err) }
		done := make(chan struct{})
		go func() { w.Run(ctx); close(done) }()
		var prev time.Time
		for want := range MaxAttempts {
			got := <-attempts
			if got.earlier != want {
				t.Fatalf("attempt %d saw %d earlier attempts", want+1, got.earlier)
			}
			if gap := got.at.Sub(prev); want > 0 && gap != after {
				t.Errorf("attempt %d came %s after the one before, want the %s GitHub asked for", want+1, gap, after)
			}
			prev = got.at
		}
		synctest.Wait() // the last outcome is stored
		if p, _ := db.PendingDeliveries(ctx, 0); len(p) != 0 {
			t.Errorf("still pending after %d attempts: %+v", MaxAttempts, p)
		}
		if len(gaveUp) != 1 {
			t.Errorf("GiveUp called %d times, want once", len(gaveUp))
		}
		time.Sleep(2 * time.Minute) // re-scans come and go
		cancel()
		<-done
		if n := len(attempts); n != 0 {
			t.Errorf("%d attempts after the last", n)
		}
	})
}
