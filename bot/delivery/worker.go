package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Queue is what the worker needs of the store.
type Queue interface {
	PendingDeliveries(ctx context.Context, limit int) ([]Delivery, error)
	FinishDelivery(ctx context.Context, source, id string, handleErr error) error
	RetryDelivery(ctx context.Context, source, id string, next time.Time, handleErr error) error
	HoldDelivery(ctx context.Context, source, id, hold string, handleErr error) error
}

// RetryLater is the error of handling the channel asked us to repeat
// later (a rate limit, an outage); After is how long to wait. The worker
// postpones the delivery by After instead of failing it.
type RetryLater struct {
	After time.Duration
	// Limited says the channel itself asked for the wait (a rate limit):
	// the work is postponed as long as it keeps asking, never dropped.
	Limited bool
	Err     error
}

func (e *RetryLater) Error() string {
	return fmt.Sprintf("%v (retry in %s)", e.Err, e.After.Round(time.Second))
}

func (e *RetryLater) Unwrap() error { return e.Err }

// Held is an error that no wait lifts (an installation the channel
// refuses): the worker holds the delivery under Hold() until the hold is
// released (Store.ReleaseDeliveries).
type Held interface {
	error
	Hold() string
}

// FailDeliveryHandling is the failpoint of a delivery acknowledged to its
// channel and about to be handled, for crash tests.
const FailDeliveryHandling = "delivery-handling"

// MaxAttempts bounds how often a delivery is tried when handling keeps
// failing for a while (an outage); the last failure is recorded. A rate
// limit (RetryLater.Limited) is waited out however often it comes.
const MaxAttempts = 5

// Worker handles stored deliveries in a bounded pool. It reads them from
// the store, not from the request that brought them, so a delivery
// acknowledged just before a crash is handled after the restart.
type Worker struct {
	queue  Queue
	handle func(ctx context.Context, d Delivery) error
	size   int
	log    *slog.Logger
	wake   chan struct{}
	// poll is the period of the safety re-scan; a missed wake-up costs at
	// most this much latency.
	poll time.Duration
	// Failpoint, when set, is called with FailDeliveryHandling before each
	// delivery is handled, for crash tests.
	Failpoint func(name string)
	// GiveUp, when set, is called when a delivery failed for good (an
	// error, or GitHub still asking for patience after MaxAttempts), so the
	// people who asked hear of it.
	GiveUp func(ctx context.Context, d Delivery, err error)
	// Source, when set, is the channel whose deliveries the worker takes:
	// those whose Source is it or begins with it and "/" ("github" takes
	// "github/123"). The store holds every channel's, each channel's
	// worker handles its own. Empty takes them all.
	Source string

	mu       sync.Mutex
	inFlight map[string]bool
	// groups holds the groups with a delivery in flight.
	groups map[string]bool
	// started is closed once Run has taken up what was stored before it.
	started     chan struct{}
	startedOnce sync.Once
	// finished holds deliveries handled since the last listing began: a
	// listing taken before their outcome was stored must not dispatch them
	// again. (A handler stores its outcome, then moves its delivery from
	// inFlight to finished, and finished is cleared only before a listing:
	// a listing that saw the delivery pending finds it in one or the
	// other.)
	finished map[string]bool
}

// NewWorker returns a worker running at most size handlers at once.
func NewWorker(q Queue, size int, log *slog.Logger, handle func(ctx context.Context, d Delivery) error) *Worker {
	if size < 1 {
		size = 1
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Worker{queue: q, handle: handle, size: size, log: log, wake: make(chan struct{}, 1), poll: 30 * time.Second, inFlight: map[string]bool{}, groups: map[string]bool{}, finished: map[string]bool{}, started: make(chan struct{})}
}

// fairOrder interleaves the groups' deliveries, each group's oldest
// first: the first delivery of every group, then the second of each, and
// so on, groups in the order of their oldest delivery.
func fairOrder(pending []Delivery) []Delivery {
	var order []string
	byGroup := map[string][]Delivery{}
	for _, d := range pending {
		if _, ok := byGroup[d.Group]; !ok {
			order = append(order, d.Group)
		}
		byGroup[d.Group] = append(byGroup[d.Group], d)
	}
	out := make([]Delivery, 0, len(pending))
	for round := 0; len(out) < len(pending); round++ {
		for _, g := range order {
			if ds := byGroup[g]; round < len(ds) {
				out = append(out, ds[round])
			}
		}
	}
	return out
}

// mine reports whether d is of the worker's Source.
func (w *Worker) mine(d Delivery) bool {
	return w.Source == "" || d.Source == w.Source || strings.HasPrefix(d.Source, w.Source+"/")
}

// Started is closed once Run has listed the deliveries stored before it
// (acknowledged before a crash), to hand them out. A server accepts new
// webhooks after it, so a delivery it acknowledges is never one Run's
// first listing took up while the acknowledgement was still being sent.
func (w *Worker) Started() <-chan struct{} { return w.started }

// Wake tells the worker a delivery was stored; it never blocks (the
// Intake's wake hook).
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run handles deliveries until ctx ends, then waits for the handlers in
// flight (they get ctx's cancellation).
func (w *Worker) Run(ctx context.Context) {
	sem := make(chan struct{}, w.size)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(w.poll)
	defer tick.Stop()
	for {
		// Outcomes stored before this listing are in it; forget them.
		w.mu.Lock()
		clear(w.finished)
		w.mu.Unlock()
		pending, err := w.queue.PendingDeliveries(ctx, 0)
		if err != nil && ctx.Err() == nil {
			w.log.Error("listing pending deliveries failed", "err", err)
		}
		w.startedOnce.Do(func() { close(w.started) })
		for _, d := range fairOrder(pending) {
			if !w.mine(d) {
				continue
			}
			key := d.Source + "/" + d.ID
			w.mu.Lock()
			// One delivery of a group at a time: a group's handler may wait
			// for its installation's write pacing or rate limit, and must
			// not keep the other groups' deliveries waiting for workers.
			skip := w.inFlight[key] || w.finished[key] || (d.Group != "" && w.groups[d.Group])
			if !skip {
				w.inFlight[key] = true
				if d.Group != "" {
					w.groups[d.Group] = true
				}
			}
			w.mu.Unlock()
			if skip {
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				retryIn := time.Duration(-1)
				defer func() { <-sem }()
				defer func() {
					w.mu.Lock()
					delete(w.inFlight, key)
					delete(w.groups, d.Group)
					w.finished[key] = true
					w.mu.Unlock()
					if d.Group != "" {
						w.Wake() // the group's next delivery may go
					}
					// Armed once the delivery is no longer in flight, so the
					// listing this wakes can dispatch it. A wake-up after Run
					// ended is harmless.
					if retryIn >= 0 {
						time.AfterFunc(retryIn, w.Wake)
					}
				}()
				if w.Failpoint != nil {
					w.Failpoint(FailDeliveryHandling)
				}
				herr := w.handle(ctx, d)
				if ctx.Err() != nil {
					return // stopped: the delivery stays pending for the next start
				}
				var held Held
				if errors.As(herr, &held) {
					// No retry can help: it waits for its hold's release.
					// Channels send little while refused (GitHub sends no
					// webhooks to an uninstalled App): each is worth its line.
					if err := w.queue.HoldDelivery(context.WithoutCancel(ctx), d.Source, d.ID, held.Hold(), herr); err != nil {
						w.log.Error("holding a delivery failed", "delivery", d.ID, "err", err)
						return
					}
					w.log.Info("delivery held until its hold is released", "delivery", d.ID, "event", d.Event, "hold", held.Hold())
					return
				}
				var later *RetryLater
				// The channel's own "wait" is never given up on.
				if errors.As(herr, &later) && (later.Limited || d.Attempts+1 < MaxAttempts) {
					// Due by the time package's clock, which the store reads
					// by default and the wake-up timer runs on (tests run the
					// worker in a testing/synctest bubble, where both are fake).
					if err := w.queue.RetryDelivery(context.WithoutCancel(ctx), d.Source, d.ID, time.Now().Add(later.After), herr); err != nil {
						w.log.Error("postponing a delivery failed", "delivery", d.ID, "err", err)
						return // still due: the next listing takes it
					}
					// Said once it is stored, so the log never runs ahead of
					// the store.
					w.log.Warn("handling a delivery postponed", "delivery", d.ID, "event", d.Event, "retry_in", later.After, "err", herr)
					retryIn = later.After
					return
				}
				if herr != nil {
					w.log.Error("handling a delivery failed", "delivery", d.ID, "event", d.Event, "err", herr)
					if w.GiveUp != nil {
						w.GiveUp(context.WithoutCancel(ctx), d, herr)
					}
				}
				if err := w.queue.FinishDelivery(context.WithoutCancel(ctx), d.Source, d.ID, herr); err != nil {
					w.log.Error("recording a handled delivery failed", "delivery", d.ID, "err", err)
				}
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-tick.C:
		}
	}
}
