package engine

import "sync"

// doorbell wakes waiters when something they may be waiting for changed
// (an answer, an emitted event). It carries no state: a waiter re-checks
// the store after every ring, so a missed ring costs latency, never
// correctness.
type doorbell struct {
	mu sync.Mutex
	ch chan struct{}
}

func newDoorbell() *doorbell { return &doorbell{ch: make(chan struct{})} }

// wait returns a channel closed at the next ring. Take it before checking
// the condition, then select on it.
func (d *doorbell) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ch
}

// ring wakes every current waiter.
func (d *doorbell) ring() {
	d.mu.Lock()
	defer d.mu.Unlock()
	close(d.ch)
	d.ch = make(chan struct{})
}
