package schedule

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// fakeClock is a clock moved by hand; the waits end when it reaches
// their time. looked is the time of the loop's
// last look, which it reports through the scheduler's idle hook: once it
// reaches the time set, the loop has handled the move.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	looked  time.Time
	changed chan struct{}
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock(at time.Time) *fakeClock { return &fakeClock{now: at, changed: make(chan struct{})} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) At(t time.Time) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !t.After(c.now) {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: t, ch: ch})
	return ch
}

// idle is the scheduler's idle hook.
func (c *fakeClock) idle(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.After(c.looked) {
		c.looked = now
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// set moves the clock to t, waking the waits it passes.
func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(t) {
			w.ch <- t
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

// waitLook waits until the loop has looked at the clock's time.
func (c *fakeClock) waitLook(t testing.TB) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		c.mu.Lock()
		done, ch := !c.looked.Before(c.now), c.changed
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatal("the scheduler did not look at the time set within 30s")
		}
	}
}

// world is a scheduler over a real store, a fake clock and a launcher
// that starts a fake run per fire (running until finish), once per fire.
type world struct {
	t     *testing.T
	db    *store.DB
	clock *fakeClock
	log   *bytes.Buffer
	dir   string

	mu       sync.Mutex
	launches []string // schedule tick
	launched chan string
	panicky  bool
	// running keeps the runs started running until finish; else they
	// finish at once.
	running bool

	cancel func()
	done   chan struct{}
	s      *Scheduler
}

func newWorld(t *testing.T, at string) *world {
	w := &world{t: t, clock: newFakeClock(utc(at)), log: &bytes.Buffer{}, dir: filepath.Join(t.TempDir(), "st"), launched: make(chan string, 100)}
	w.open()
	t.Cleanup(func() {
		w.stop()
		w.db.Close()
	})
	return w
}

func (w *world) open() {
	db, err := store.Open(w.dir, store.Options{SmallMemory: true, Clock: w.clock.Now, GCInterval: -1})
	if err != nil {
		w.t.Fatal(err)
	}
	w.db = db
}

func runIDOf(f delivery.Fire) string {
	sum := sha256.Sum256([]byte(f.Schedule + "\x00" + f.Tick))
	return "r-" + hex.EncodeToString(sum[:6])
}

// Launch starts the fire's run, once: the same fire again returns it.
func (w *world) Launch(ctx context.Context, s delivery.Schedule, f delivery.Fire) (string, error) {
	w.mu.Lock()
	panicky, running := w.panicky, w.running
	w.mu.Unlock()
	if panicky {
		panic("the launcher fell over")
	}
	id := runIDOf(f)
	if _, err := w.db.Run(ctx, id); err == nil {
		return id, nil
	}
	now := w.clock.Now()
	status := engine.StatusFinished
	if running {
		status = engine.StatusRunning
	}
	run := &engine.Run{ID: id, Workflow: "wf", WorkflowHash: "h", Status: status, Trigger: engine.Trigger{Source: "cron"}, CreatedAt: now, UpdatedAt: now}
	if err := w.db.CreateRun(ctx, run, nil); err != nil {
		return "", err
	}
	w.mu.Lock()
	w.launches = append(w.launches, s.Name+" "+f.Tick)
	w.mu.Unlock()
	w.launched <- s.Name + " " + f.Tick
	return id, nil
}

// start runs a scheduler until stop.
func (w *world) start(failpoint func(string)) *Scheduler {
	w.t.Helper()
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: w.log}, nil))
	s := New(Options{Store: w.db, Launchers: map[string]Launcher{"server": w}, Clock: w.clock, Log: log, Failpoint: failpoint})
	s.idle = w.clock.idle
	if err := s.Load(w.t.Context()); err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done, w.s = cancel, make(chan struct{}), s
	go func() { defer close(w.done); s.Run(ctx) }()
	w.clock.waitLook(w.t)
	return s
}

func (w *world) stop() {
	if w.cancel != nil {
		w.cancel()
		<-w.done
		w.cancel = nil
	}
}

// restart stops the scheduler, moves the clock (the server down
// meanwhile) and starts another on the same store.
func (w *world) restart(at string) {
	w.stop()
	w.db.Close()
	w.clock.set(utc(at))
	w.open()
	w.start(nil)
}

// at moves the clock and waits for the loop to have looked.
func (w *world) at(t string) {
	w.t.Helper()
	w.clock.set(utc(t))
	w.clock.waitLook(w.t)
}

// expectLaunch waits for the next launches, in any order (they run at
// once), checks them and waits for them to be recorded.
func (w *world) expectLaunch(want ...string) {
	w.t.Helper()
	var got []string
	for range want {
		select {
		case l := <-w.launched:
			got = append(got, l)
		case <-time.After(30 * time.Second):
			w.t.Fatalf("launched %v within 30s, want %v; log:\n%s", got, want, w.log)
		}
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if diff := cmp.Diff(want, got); diff != "" {
		w.t.Errorf("launches (-want +got):\n%s", diff)
	}
	w.settle()
}

// fires lists the schedule's fires as "tick state", oldest first.
func (w *world) fires(name string) []string {
	w.t.Helper()
	fs, err := w.db.Fires(w.t.Context(), name, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, f := range slices.Backward(fs) {
		out = append(out, f.Tick+" "+f.State)
	}
	return out
}

// settle waits for the launches in progress to be recorded.
func (w *world) settle() {
	w.t.Helper()
	w.s.jobs.Wait()
}

func (w *world) set(defs ...Definition) {
	w.t.Helper()
	if _, err := w.s.Set(w.t.Context(), "server", defs); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) finish(runID string) {
	w.t.Helper()
	run, err := w.db.Run(w.t.Context(), runID)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.db.Commit(w.t.Context(), engine.Change{RunID: runID, Generation: run.Generation, Status: engine.StatusFinished}); err != nil {
		w.t.Fatal(err)
	}
	w.s.Wake()
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A schedule in Berlin fires on time, and across both of 2026's clock
// changes: the 02:30 slot skipped in March fires once at 03:00 CEST, the
// one repeated in October once, at its first coming, even through a
// restart during the repeated hour.
func TestSchedulerFiresOnTimeAcrossDST(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "2026-03-27T12:00:00Z")
	w.start(nil)
	w.set(Definition{Name: "nightly", Cron: "30 2 * * *", Zone: "Europe/Berlin"})
	const name = "server/nightly"

	w.at("2026-03-28T01:29:59Z")
	if got := w.fires(name); len(got) != 0 {
		t.Fatalf("fired before 02:30 CET: %v", got)
	}
	w.at("2026-03-28T01:30:00Z")
	w.expectLaunch(name + " 2026-03-28T02:30")

	// Spring forward: 02:00 CET is 03:00 CEST.
	w.at("2026-03-29T00:59:59Z")
	if got := w.fires(name); len(got) != 1 {
		t.Fatalf("fired in the gap's lead: %v", got)
	}
	w.at("2026-03-29T01:00:00Z")
	w.expectLaunch(name + " 2026-03-29T02:30")
	w.at("2026-03-29T02:00:00Z")
	w.at("2026-03-30T00:30:00Z")
	w.expectLaunch(name + " 2026-03-30T02:30")

	// Fall back: 02:30 CEST (00:30Z) and 02:30 CET (01:30Z).
	w.at("2026-10-24T00:30:00Z")
	w.expectLaunch(name + " 2026-10-24T02:30")
	w.at("2026-10-25T00:30:00Z")
	w.expectLaunch(name + " 2026-10-25T02:30")
	w.settle()
	w.restart("2026-10-25T01:10:00Z") // 02:10 CET: the repeated hour
	w.at("2026-10-25T01:30:00Z")
	w.at("2026-10-25T02:00:00Z")
	w.settle()
	want := []string{"2026-03-28T02:30 started", "2026-03-29T02:30 started", "2026-03-30T02:30 started", "2026-10-24T02:30 started", "2026-10-25T02:30 started"}
	if diff := cmp.Diff(want, w.fires(name)); diff != "" {
		t.Errorf("fires (-want +got):\n%s", diff)
	}
	w.at("2026-10-26T01:30:00Z") // 02:30 CET
	w.expectLaunch(name + " 2026-10-26T02:30")
}

// A tick that comes while the last run is still going is skipped, or with
// overlap: queue waits for it and starts when it ends; one tick waits at
// most.
func TestSchedulerOverlap(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "2026-01-05T08:00:30Z")
	w.running = true
	w.start(nil)
	w.set(Definition{Name: "skip", Cron: "0 * * * *"}, Definition{Name: "queue", Cron: "0 * * * *", Overlap: OverlapQueue})

	w.at("2026-01-05T09:00:00Z")
	w.expectLaunch("server/queue 2026-01-05T09:00", "server/skip 2026-01-05T09:00")
	w.settle()
	w.at("2026-01-05T10:00:00Z") // both runs still going
	w.at("2026-01-05T11:00:00Z")
	w.settle()
	if diff := cmp.Diff([]string{"2026-01-05T09:00 started"}, w.fires("server/skip")); diff != "" {
		t.Errorf("skip's fires while its run goes on (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"2026-01-05T09:00 started", "2026-01-05T10:00 queued"}, w.fires("server/queue")); diff != "" {
		t.Errorf("queue's fires while its run goes on (-want +got):\n%s", diff)
	}
	if !strings.Contains(w.log.String(), "tick skipped: the schedule's last run is still going") {
		t.Errorf("the skips are not logged:\n%s", w.log)
	}

	// The queued tick starts when the run before it ends.
	w.finish(runIDOf(delivery.Fire{Schedule: "server/queue", Tick: "2026-01-05T09:00"}))
	w.expectLaunch("server/queue 2026-01-05T10:00")
	w.finish(runIDOf(delivery.Fire{Schedule: "server/skip", Tick: "2026-01-05T09:00"}))
	w.at("2026-01-05T12:00:00Z")
	w.expectLaunch("server/skip 2026-01-05T12:00")
	w.settle()
	if diff := cmp.Diff([]string{"2026-01-05T09:00 started", "2026-01-05T10:00 started", "2026-01-05T12:00 queued"}, w.fires("server/queue")); diff != "" {
		t.Errorf("queue's fires at noon (-want +got):\n%s", diff)
	}
}

// After downtime the latest missed tick fires when it came within the
// grace window, and no other; past the window none fires.
func TestSchedulerCatchUpAfterDowntime(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "2026-01-05T08:00:30Z")
	w.start(nil)
	w.set(Definition{Name: "hourly", Cron: "0 * * * *", Grace: 30 * time.Minute}, Definition{Name: "daily", Cron: "0 3 * * *", Grace: 2 * time.Hour})

	// Down from 08:00:30 to 11:20: 09:00, 10:00 and 11:00 came; 11:00 is
	// within the half hour.
	w.restart("2026-01-05T11:20:00Z")
	w.expectLaunch("server/hourly 2026-01-05T11:00")
	w.settle()
	if diff := cmp.Diff([]string{"2026-01-05T11:00 started"}, w.fires("server/hourly")); diff != "" {
		t.Errorf("hourly after downtime (-want +got):\n%s", diff)
	}
	// Down again until 13:40: 12:00 and 13:00 came, 13:00 forty minutes
	// ago, past the grace: none fires; 14:00 does.
	w.restart("2026-01-05T13:40:00Z")
	w.settle()
	if diff := cmp.Diff([]string{"2026-01-05T11:00 started"}, w.fires("server/hourly")); diff != "" {
		t.Errorf("hourly after downtime past its grace (-want +got):\n%s", diff)
	}
	if !strings.Contains(w.log.String(), "past the grace window: none fires") {
		t.Errorf("the missed ticks are not logged:\n%s", w.log)
	}
	w.at("2026-01-05T14:00:00Z")
	w.expectLaunch("server/hourly 2026-01-05T14:00")
	// Down three days, back at 04:30: the daily 03:00 of the last fires,
	// once.
	w.settle()
	w.restart("2026-01-09T04:30:00Z")
	w.expectLaunch("server/daily 2026-01-09T03:00", "server/hourly 2026-01-09T04:00")
	w.settle()
	if diff := cmp.Diff([]string{"2026-01-09T03:00 started"}, w.fires("server/daily")); diff != "" {
		t.Errorf("daily after three days down (-want +got):\n%s", diff)
	}
}

// A process that dies after recording a fire and before starting its run
// (here, its context ends at the failpoint) leaves the fire recorded; the
// next process starts its run once and fires the tick no second time.
func TestSchedulerFireRecordedBeforeStart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "2026-01-05T08:00:30Z")
	var killed sync.Once
	w.start(func(name string) {
		if name == FailScheduleFired {
			killed.Do(w.cancel)
		}
	})
	w.set(Definition{Name: "hourly", Cron: "0 * * * *"})
	w.clock.set(utc("2026-01-05T09:00:00Z"))
	<-w.done
	if diff := cmp.Diff([]string{"2026-01-05T09:00 claimed"}, w.fires("server/hourly")); diff != "" {
		t.Fatalf("fires after the crash (-want +got):\n%s", diff)
	}
	w.restart("2026-01-05T09:05:00Z")
	w.expectLaunch("server/hourly 2026-01-05T09:00")
	w.settle()
	// And once more, with the clock set back a few minutes.
	w.restart("2026-01-05T08:59:00Z")
	w.at("2026-01-05T09:00:00Z")
	w.settle()
	if diff := cmp.Diff([]string{"2026-01-05T09:00 started"}, w.fires("server/hourly")); diff != "" {
		t.Errorf("fires after the restarts (-want +got):\n%s", diff)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.launches) != 1 {
		t.Errorf("launches = %v, want one", w.launches)
	}
}

// A launcher that panics is recovered and logged: the fire is dropped,
// saying so, and the scheduler goes on.
func TestSchedulerRecoversPanics(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "2026-01-05T08:00:30Z")
	w.start(nil)
	w.set(Definition{Name: "hourly", Cron: "0 * * * *"})
	w.mu.Lock()
	w.panicky = true
	w.mu.Unlock()
	w.at("2026-01-05T09:00:00Z")
	w.settle()
	if !strings.Contains(w.log.String(), "a schedule's launcher panicked") || !strings.Contains(w.log.String(), "the launcher fell over") {
		t.Errorf("the panic is not logged:\n%s", w.log)
	}
	fs, err := w.db.Fires(t.Context(), "server/hourly", 0)
	if err != nil || len(fs) != 1 || fs[0].State != delivery.FireDropped || !strings.Contains(fs[0].Error, "panicked") {
		t.Errorf("fires = %+v, %v; want one dropped, saying it panicked", fs, err)
	}
	w.mu.Lock()
	w.panicky = false
	w.mu.Unlock()
	w.at("2026-01-05T10:00:00Z")
	w.expectLaunch("server/hourly 2026-01-05T10:00")
}

// Set replaces a source's schedules: a changed spec fires on its new
// ticks, a removed schedule fires no more, a new one not at once.
func TestSchedulerSetReplaces(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "2026-01-05T08:00:30Z")
	w.start(nil)
	w.set(Definition{Name: "a", Cron: "0 9 * * *"}, Definition{Name: "b", Cron: "0 9 * * *"})
	w.set(Definition{Name: "a", Cron: "30 8 * * *"}, Definition{Name: "c", Cron: "* * * * *"})
	w.at("2026-01-05T08:01:00Z")
	w.expectLaunch("server/c 2026-01-05T08:01")
	w.at("2026-01-05T08:30:00Z")
	w.expectLaunch("server/a 2026-01-05T08:30", "server/c 2026-01-05T08:30")
	w.at("2026-01-05T09:00:00Z")
	w.settle()
	if got := w.fires("server/b"); len(got) != 0 {
		t.Errorf("removed schedule b fired: %v", got)
	}
	if err := Validate([]Definition{{Name: "x", Cron: "@nightly"}, {Name: "x/y", Cron: "@daily"}, {Name: "z", Cron: "@daily", Overlap: "sometimes"}}); err == nil ||
		!strings.Contains(err.Error(), "schedule x: @nightly") || !strings.Contains(err.Error(), `name "x/y"`) || !strings.Contains(err.Error(), `overlap "sometimes"`) {
		t.Errorf("Validate = %v", err)
	}
}

// FireNow fires a schedule at once, whatever its spec and its last run,
// moving no cursor; List shows last and next fires and the last run.
func TestSchedulerFireNowAndList(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "2026-01-05T08:00:30Z")
	w.running = true
	s := w.start(nil)
	w.set(Definition{Name: "daily", Cron: "0 3 * * *", Zone: "Europe/Berlin", Overlap: OverlapQueue})
	id, err := s.FireNow(t.Context(), "server/daily")
	if err != nil {
		t.Fatal(err)
	}
	w.expectLaunch("server/daily manual-2026-01-05T08:00:30Z")
	if _, err := s.FireNow(t.Context(), "server/nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("FireNow(unknown) = %v, want ErrNotFound", err)
	}
	list, err := List(t.Context(), w.db, w.clock.Now())
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	got := list[0]
	if got.Name != "server/daily" || got.LastRun != id || got.LastRunStatus != engine.StatusRunning || got.LastFire != "manual-2026-01-05T08:00:30Z" ||
		got.NextTick != "2026-01-06T03:00" || !got.Next.Equal(utc("2026-01-06T02:00:00Z")) || got.Target != nil {
		t.Errorf("List = %+v", got)
	}
	// The next tick still comes on time, queued behind the manual run.
	w.at("2026-01-06T02:00:00Z")
	w.settle()
	if diff := cmp.Diff([]string{"manual-2026-01-05T08:00:30Z started", "2026-01-06T03:00 queued"}, w.fires("server/daily")); diff != "" {
		t.Errorf("fires (-want +got):\n%s", diff)
	}
}
