package delivery_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// memOutbox is an outbox in memory, with the store's semantics: due rows
// in id order, a retry counts an attempt.
type memOutbox struct {
	mu   sync.Mutex
	rows map[string]*engine.OutboxRow
}

func (o *memOutbox) DueOutbox(_ context.Context, now time.Time, _ int) ([]engine.OutboxRow, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []engine.OutboxRow
	for _, r := range o.rows {
		if !r.NextAt.After(now) {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b engine.OutboxRow) int { return cmpString(a.ID, b.ID) })
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (o *memOutbox) AckOutbox(_ context.Context, id string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.rows, id)
	return nil
}

func (o *memOutbox) RetryOutbox(_ context.Context, id string, next time.Time) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r := o.rows[id]; r != nil {
		r.NextAt, r.Attempts = next, r.Attempts+1
	}
	return nil
}

type heldErr struct{}

func (heldErr) Error() string { return "refused" }
func (heldErr) Hold() string  { return "github/installation/42" }

// The relay performs its channel's rows alone, acknowledges what was done,
// postpones what the channel asked to wait for (a rate limit) or refused
// for a held reason, backs off on other errors and gives up on them after
// MaxOutboxAttempts; a release makes held rows due again.
func TestRelayOutcomes(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	o := &memOutbox{rows: map[string]*engine.OutboxRow{}}
	for _, id := range []string{"1-ok", "2-slack", "3-later", "4-held", "5-broken"} {
		ch := "github"
		if id == "2-slack" {
			ch = "slack"
		}
		o.rows[id] = &engine.OutboxRow{ID: id, RunID: "r", Channels: []string{ch}, NextAt: now}
	}
	o.rows["5-broken"].Attempts = delivery.MaxOutboxAttempts - 2
	var performed []string
	r := &delivery.Relay{Channel: "github", Store: o, Now: func() time.Time { return now }, Perform: func(_ context.Context, row engine.OutboxRow) error {
		performed = append(performed, row.ID)
		switch row.ID {
		case "3-later":
			if row.Attempts > 0 {
				return nil // the wait is over
			}
			return &delivery.RetryLater{After: 7 * time.Minute, Limited: true, Err: errors.New("rate limited")}
		case "4-held":
			return heldErr{}
		case "5-broken":
			return errors.New("refused body")
		}
		return nil
	}}
	ctx := context.Background()
	r.Drain(ctx)
	if diff := cmp.Diff([]string{"1-ok", "3-later", "4-held", "5-broken"}, performed); diff != "" {
		t.Errorf("performed (-want +got):\n%s", diff)
	}
	next := map[string]time.Duration{}
	for id, row := range o.rows {
		next[id] = row.NextAt.Sub(now)
	}
	want := map[string]time.Duration{"2-slack": 0, "3-later": 7 * time.Minute, "4-held": delivery.HeldRecheck, "5-broken": 256 * time.Second}
	if diff := cmp.Diff(want, next); diff != "" {
		t.Errorf("rows left and their waits (-want +got):\n%s", diff)
	}
	// The broken row's last try: given up.
	now = now.Add(time.Hour + time.Minute)
	performed = nil
	r.Drain(ctx)
	if _, ok := o.rows["5-broken"]; ok {
		t.Error("a row refused MaxOutboxAttempts times is still there")
	}
	if _, ok := o.rows["3-later"]; ok {
		t.Error("the rate-limited row was not performed once its wait was over")
	}
	// The held row, held again, is released at once.
	if err := r.Release(ctx, func(row engine.OutboxRow) (bool, error) { return row.ID == "4-held", nil }); err != nil {
		t.Fatal(err)
	}
	if got := o.rows["4-held"].NextAt; got.After(now) {
		t.Errorf("released row due at %s, want now (%s)", got, now)
	}
}
