package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/iterion-bot/iterion/bot/delivery"
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
		w := delivery.NewWorker(db, 2, nil, func(_ context.Context, d store.Delivery) error {
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

// A handler GitHub turned away (delivery.RetryLater) leaves its delivery postponed,
// not failed; it is handled again when GitHub said to come back (not at
// the next 30 s re-scan), and after delivery.MaxAttempts the failure is recorded.
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
		attempts := make(chan attempt, delivery.MaxAttempts+1)
		w := delivery.NewWorker(db, 1, nil, func(_ context.Context, d store.Delivery) error {
			attempts <- attempt{d.Attempts, time.Now()}
			return &delivery.RetryLater{After: after, Err: errors.New("secondary rate limit")}
		})
		var gaveUp []error
		w.GiveUp = func(_ context.Context, _ store.Delivery, err error) { gaveUp = append(gaveUp, err) }
		done := make(chan struct{})
		go func() { w.Run(ctx); close(done) }()
		var prev time.Time
		for want := range delivery.MaxAttempts {
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
			t.Errorf("still pending after %d attempts: %+v", delivery.MaxAttempts, p)
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

// One installation flooding the bot does not hold up another: a group's
// deliveries go one at a time, and the groups take turns, so B's one
// delivery is handled at once though A's ten each wait out a second of
// write pacing in their handler. (Fake time, in a synctest bubble.)
func TestWorkerIsFairAcrossInstallations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		record := func(id, group string) {
			if _, err := db.RecordDelivery(ctx, store.Delivery{Source: "github/1", ID: id, Event: "issue_comment", Payload: []byte("{}"), Group: group}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 10 {
			record(fmt.Sprintf("a-%d", i), "installation/1")
		}
		record("b-0", "installation/2")
		start := time.Now()
		var mu sync.Mutex
		handledAt := map[string]time.Duration{}
		w := delivery.NewWorker(db, 4, nil, func(_ context.Context, d store.Delivery) error {
			time.Sleep(time.Second) // the installation's write pacing
			mu.Lock()
			defer mu.Unlock()
			handledAt[d.ID] = time.Since(start)
			return nil
		})
		done := make(chan struct{})
		go func() { w.Run(ctx); close(done) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		cancel()
		<-done
		if got := handledAt["b-0"]; got != time.Second {
			t.Errorf("installation 2's delivery handled after %s, want 1s (beside installation 1's first)", got)
		}
		for i := range 10 {
			if got, want := handledAt[fmt.Sprintf("a-%d", i)], time.Duration(i+1)*time.Second; got != want {
				t.Errorf("a-%d handled after %s, want %s: one at a time, in order", i, got, want)
			}
		}
	})
}

func TestFairOrder(t *testing.T) {
	var in []store.Delivery
	for _, id := range []string{"a1", "a2", "a3", "b1", "c1", "b2"} {
		in = append(in, store.Delivery{ID: id, Group: id[:1]})
	}
	var got []string
	for _, d := range delivery.FairOrder(in) {
		got = append(got, d.ID)
	}
	if want := []string{"a1", "b1", "c1", "a2", "b2", "a3"}; !slices.Equal(got, want) {
		t.Errorf("fairOrder = %v, want %v", got, want)
	}
}

// Started closes once Run has listed what was stored before it, and not
// before: a server takes webhooks in only after it.
func TestWorkerStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.RecordDelivery(context.Background(), store.Delivery{Source: "github/1", ID: "old", Event: "issue_comment", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		var handled []string
		w := delivery.NewWorker(db, 1, nil, func(_ context.Context, d store.Delivery) error { handled = append(handled, d.ID); return nil })
		select {
		case <-w.Started():
			t.Fatal("Started before Run")
		default:
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { w.Run(ctx); close(done) }()
		<-w.Started()
		synctest.Wait()
		cancel()
		<-done
		if !slices.Equal(handled, []string{"old"}) {
			t.Errorf("handled %v, want the delivery stored before Run", handled)
		}
	})
}

// Two channels' workers over one store each handle their own channel's
// deliveries only, and leave the other's pending for it.
func TestWorkerSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for _, d := range []store.Delivery{{Source: "github/1", ID: "g"}, {Source: "slack/T1", ID: "s"}, {Source: "githubber", ID: "x"}} {
			d.Event, d.Payload = "e", []byte("{}")
			if _, err := db.RecordDelivery(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		var got []string
		handle := func(_ context.Context, d store.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, d.Source+" "+d.ID)
			return nil
		}
		gw, sw := delivery.NewWorker(db, 1, nil, handle), delivery.NewWorker(db, 1, nil, handle)
		gw.Source, sw.Source = "github", "slack"
		done := make(chan struct{}, 2)
		go func() { gw.Run(ctx); done <- struct{}{} }()
		go func() { sw.Run(ctx); done <- struct{}{} }()
		synctest.Wait()
		cancel()
		<-done
		<-done
		slices.Sort(got)
		if want := []string{"github/1 g", "slack/T1 s"}; !slices.Equal(got, want) {
			t.Errorf("handled %v, want %v", got, want)
		}
		pending, _ := db.PendingDeliveries(context.Background(), 0)
		if len(pending) != 1 || pending[0].ID != "x" {
			t.Errorf("pending %+v, want the delivery of neither channel", pending)
		}
	})
}
