package github

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

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
	<-all
	cancel()
	<-done
	if len(gaveUp) != 1 || gaveUp[0] != "during: boom" {
		t.Errorf("GiveUp calls %v, want one for the failed delivery", gaveUp)
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
}

// signalQueue tells the test about each listing and outcome the worker
// stores, so the test waits on them instead of on time.
type signalQueue struct {
	*store.DB
	listed  chan struct{}
	outcome chan string
}

func (q *signalQueue) PendingDeliveries(ctx context.Context, limit int) ([]store.Delivery, error) {
	d, err := q.DB.PendingDeliveries(ctx, limit)
	select {
	case q.listed <- struct{}{}:
	default:
	}
	return d, err
}

func (q *signalQueue) RetryDelivery(ctx context.Context, source, id string, next time.Time, handleErr error) error {
	err := q.DB.RetryDelivery(ctx, source, id, next, handleErr)
	q.outcome <- "retry"
	return err
}

func (q *signalQueue) FinishDelivery(ctx context.Context, source, id string, handleErr error) error {
	err := q.DB.FinishDelivery(ctx, source, id, handleErr)
	q.outcome <- "finish"
	return err
}

// A handler GitHub turned away (RetryLater) leaves its delivery postponed,
// not failed; once due it is handled again, and after MaxAttempts the
// failure is recorded.
func TestWorkerRetryLater(t *testing.T) {
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
	q := &signalQueue{DB: db, listed: make(chan struct{}, 1), outcome: make(chan string, 1)}
	attempts := make(chan int, MaxAttempts+1)
	w := NewWorker(q, 1, nil, func(_ context.Context, d store.Delivery) error {
		attempts <- d.Attempts
		// Due at once, so the test need not wait out a real back-off.
		return &RetryLater{After: 0, Err: errors.New("secondary rate limit")}
	})
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	for want := range MaxAttempts {
		got := <-attempts
		if got != want {
			t.Fatalf("attempt %d saw %d earlier attempts", want+1, got)
		}
		outcome := <-q.outcome
		if last := want == MaxAttempts-1; (outcome == "finish") != last {
			t.Fatalf("attempt %d ended in %s", want+1, outcome)
		}
		if want == MaxAttempts-1 {
			break
		}
		// The worker lists again on a wake-up (its poll is 30 s); the
		// listing right after an outcome skips it by design, so wake it
		// until the retry comes.
		for len(attempts) == 0 {
			w.Wake()
			<-q.listed
		}
	}
	cancel()
	<-done
	if n := len(attempts); n != 0 {
		t.Errorf("%d attempts after the last", n)
	}
	if p, _ := db.PendingDeliveries(context.Background(), 0); len(p) != 0 {
		t.Errorf("still pending after %d attempts: %+v", MaxAttempts, p)
	}
}
