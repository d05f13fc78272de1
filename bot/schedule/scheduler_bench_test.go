package schedule

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/store"
)

// benchSchedules stores n schedules of spec(i) in a new store on clock
// and returns it.
func benchSchedules(b *testing.B, clock *fakeClock, n int, spec func(i int) string) *store.DB {
	b.Helper()
	db, err := store.Open(filepath.Join(b.TempDir(), "st"), store.Options{SmallMemory: true, Clock: clock.Now, GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	// Ten repositories of a hundred schedules each, in Berlin.
	s := New(Options{Store: db, Clock: clock})
	for r := range 10 {
		var defs []Definition
		for i := r * n / 10; i < (r+1)*n/10; i++ {
			defs = append(defs, Definition{Name: fmt.Sprintf("s%d", i), Cron: spec(i), Zone: "Europe/Berlin", Target: []byte(`{"workflow":"nightly"}`)})
		}
		if _, err := s.Set(b.Context(), fmt.Sprintf("github/acme/repo%d", r), defs); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// yearly(i) fires once a year, on January 1st, at a minute of its own.
func yearly(i int) string { return fmt.Sprintf("%d %d 1 1 *", i%60, (i/60)%24) }

// BenchmarkSchedulerLoad1000 reads 1,000 stored schedules and computes
// their next ticks, as serve does at start.
func BenchmarkSchedulerLoad1000(b *testing.B) {
	clock := newFakeClock(utc("2026-01-05T12:00:00Z"))
	db := benchSchedules(b, clock, 1000, yearly)
	for b.Loop() {
		s := New(Options{Store: db, Clock: clock})
		if err := s.Load(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSchedulerIdleMinute1000 is the scheduler's work in a minute
// when none of its 1,000 schedules is due: the loop wakes once a minute
// (maxWait) at most, lists the fires still to start, finds no tick due
// and waits again. An op is one minute of the clock.
func BenchmarkSchedulerIdleMinute1000(b *testing.B) {
	clock := newFakeClock(utc("2026-01-05T12:00:00Z"))
	db := benchSchedules(b, clock, 1000, yearly)
	s := New(Options{Store: db, Clock: clock, Launchers: map[string]Launcher{"github": LauncherFunc(func(context.Context, delivery.Schedule, delivery.Fire) (string, error) {
		b.Fatal("a schedule fired")
		return "", nil
	})}})
	s.idle = clock.idle
	if err := s.Load(b.Context()); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	clock.waitLook(b)
	now := clock.Now()
	for b.Loop() {
		now = now.Add(time.Minute)
		clock.set(now)
		clock.waitLook(b)
	}
}

// BenchmarkSchedulerTick1000 fires 1,000 schedules due at the same
// minute: each fire is read, recorded before its launch (a launcher that
// does nothing) and its run recorded, on the real store. An op is the
// whole tick.
func BenchmarkSchedulerTick1000(b *testing.B) {
	clock := newFakeClock(utc("2026-01-05T12:00:30Z"))
	db := benchSchedules(b, clock, 1000, func(int) string { return "0 * * * *" })
	var fired atomic.Int64
	tick := make(chan struct{}, 1)
	s := New(Options{Store: db, Clock: clock, Launches: 4, Launchers: map[string]Launcher{"github": LauncherFunc(func(_ context.Context, sc delivery.Schedule, f delivery.Fire) (string, error) {
		if fired.Add(1)%1000 == 0 {
			tick <- struct{}{}
		}
		return "run-" + f.Tick, nil
	})}})
	s.idle = clock.idle
	if err := s.Load(b.Context()); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	clock.waitLook(b)
	now := utc("2026-01-05T12:00:00Z")
	for b.Loop() {
		now = now.Add(time.Hour)
		clock.set(now)
		select {
		case <-tick:
		case <-time.After(5 * time.Minute):
			b.Fatalf("%d fires, want a multiple of 1000", fired.Load())
		}
		s.jobs.Wait()
	}
}
