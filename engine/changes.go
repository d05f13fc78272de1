package engine

import (
	"context"
	"sync"
)

// WaitChange blocks until run runID changes in the store: until an event
// with Seq > after is stored for it, or its status moves from the one it
// had when WaitChange began. It returns nil then, and at once when the
// run already has such an event or is over (Status.Terminal: nothing more
// is stored for it unless someone resumes it). It fails with ErrNotFound
// for an unknown run and with ctx's error when ctx ends first; bound the
// wait with ctx.
//
// Every change this engine stores for a run (its events, a status, a stop
// request, a question or an answer) wakes the run's waiters, which then
// read the store again: nothing polls, and a wake-up missed costs latency,
// never correctness. Only changes stored through this engine wake it, so
// wait on the engine that owns the store. Once WaitChange returns, nothing
// of its wait is left behind.
func (e *Engine) WaitChange(ctx context.Context, runID string, after int64) error {
	next, stop := e.changes.watch(runID)
	defer stop()
	var began Status
	for first := true; ; first = false {
		// Taken before the store is read: a change stored after the read
		// rings this channel.
		ring := next()
		run, err := e.store.Run(ctx, runID)
		if err != nil {
			return err
		}
		if first {
			began = run.Status
		}
		if run.Status != began || run.Status.Terminal() {
			return nil
		}
		evs, err := e.store.Events(ctx, runID, after, 1)
		if err != nil {
			return err
		}
		if len(evs) > 0 {
			return nil
		}
		select {
		case <-ring:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// changeBells wake, run by run, the waiters of WaitChange. Only runs that
// have waiters have a bell; the last waiter to leave removes it, so the
// map holds no more entries than there are waits in progress.
type changeBells struct {
	mu   sync.Mutex
	runs map[string]*runBell
}

// runBell is one run's bell: ch is closed at its next ring.
type runBell struct {
	ch      chan struct{}
	waiters int
}

// watch registers a waiter of runID. next returns the channel closed at
// the run's next ring (take it before reading the store, then wait on
// it); stop, called once, unregisters the waiter.
func (b *changeBells) watch(runID string) (next func() <-chan struct{}, stop func()) {
	b.mu.Lock()
	if b.runs == nil {
		b.runs = map[string]*runBell{}
	}
	rb := b.runs[runID]
	if rb == nil {
		rb = &runBell{ch: make(chan struct{})}
		b.runs[runID] = rb
	}
	rb.waiters++
	b.mu.Unlock()
	next = func() <-chan struct{} {
		b.mu.Lock()
		defer b.mu.Unlock()
		return rb.ch
	}
	stop = func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if rb.waiters--; rb.waiters == 0 {
			delete(b.runs, runID)
		}
	}
	return next, stop
}

// ring wakes the waiters of runID, if it has any.
func (b *changeBells) ring(runID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rb := b.runs[runID]; rb != nil {
		close(rb.ch)
		rb.ch = make(chan struct{})
	}
}

// watched is how many runs have waiters.
func (b *changeBells) watched() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.runs)
}

// ringingStore rings a run's bell after each write of the run, whether or
// not it succeeded: a needless ring costs the waiters one read.
type ringingStore struct {
	Store
	bells *changeBells
}

func (s ringingStore) CreateRun(ctx context.Context, run *Run, events []Event) error {
	defer s.bells.ring(run.ID)
	return s.Store.CreateRun(ctx, run, events)
}

func (s ringingStore) Commit(ctx context.Context, c Change) error {
	defer s.bells.ring(c.RunID)
	return s.Store.Commit(ctx, c)
}

func (s ringingStore) RequestStop(ctx context.Context, runID, reason string) (*Run, error) {
	defer s.bells.ring(runID)
	return s.Store.RequestStop(ctx, runID, reason)
}

func (s ringingStore) PostQuestion(ctx context.Context, q PostRequest) (*Interaction, error) {
	defer s.bells.ring(q.RunID)
	return s.Store.PostQuestion(ctx, q)
}

func (s ringingStore) Answer(ctx context.Context, a AnswerRequest) (*AnswerResult, error) {
	defer s.bells.ring(a.RunID)
	return s.Store.Answer(ctx, a)
}
