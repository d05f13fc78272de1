// Package schedule starts runs on cron specs, for every channel: the
// server's own schedules (serve.yml) and those each repository declares
// (.iterion.yml). A channel declares its schedules with Set, a source at
// a time, and starts the runs of their fires through its Launcher.
//
// Every fire is a row of the store, recorded before its run starts, one
// per (schedule, tick): a restart never fires a tick twice, and a fire
// recorded but not started when the process died starts after the
// restart. Ticks are wall-clock slots of the schedule's zone (see Spec),
// so the hour repeated when daylight saving ends fires once, and a slot
// in the hour skipped when it starts fires once, right after the gap.
// After downtime, the latest tick missed fires if it came within the
// schedule's grace window, and no other. A tick that comes while the
// schedule's last run is still going (running, or waiting for answers)
// is skipped, or with overlap: queue waits for that run to end (one tick
// waits at most). A launcher that panics is recovered and logged.
//
// The scheduler reads the time from a Clock, so tests move it by hand.
package schedule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// Overlap rules: what a tick does while the last run is still going.
const (
	OverlapSkip  = "skip"
	OverlapQueue = "queue"
)

// DefaultGrace is how late a tick may fire after downtime when its
// schedule does not say.
const DefaultGrace = time.Hour

// FailScheduleFired is the failpoint right after a fire is recorded and
// before its run starts, for crash tests.
const FailScheduleFired = "schedule-fired"

// maxWait bounds a wait of the loop, so that a wall clock set forward
// (the wait runs on the monotonic clock) is noticed within it.
const maxWait = time.Minute

// retryIn is when a fire whose launch failed for a while is tried again,
// unless the channel said when.
const retryIn = 30 * time.Second

// Store is what the scheduler needs of the store: the schedules' part of
// delivery.Store, and runs (is the last one still going?).
type Store interface {
	PutSchedules(ctx context.Context, source string, defs []delivery.Schedule) ([]delivery.Schedule, error)
	Schedules(ctx context.Context) ([]delivery.Schedule, error)
	Schedule(ctx context.Context, name string) (*delivery.Schedule, error)
	AdvanceSchedule(ctx context.Context, name, cursor string) error
	ClaimFire(ctx context.Context, f delivery.Fire) (bool, error)
	StartFire(ctx context.Context, schedule, tick, runID string) error
	DropFire(ctx context.Context, schedule, tick, reason string) error
	PromoteFire(ctx context.Context, schedule, tick string) error
	PendingFires(ctx context.Context) ([]delivery.Fire, error)
	Run(ctx context.Context, id string) (*engine.Run, error)
}

// Launcher starts the run of a fire. Launching the same fire again (after
// a crash between the start and its record) starts no second run and
// returns the first one's id: run ids come from the schedule and the
// tick. An error that is a *delivery.RetryLater, or a delivery.Held,
// keeps the fire to be tried again within its grace window; any other
// drops it, its text recorded as the reason (the launcher tells the
// schedule's people itself).
type Launcher interface {
	Launch(ctx context.Context, s delivery.Schedule, f delivery.Fire) (runID string, err error)
}

// LauncherFunc is a function as a Launcher.
type LauncherFunc func(ctx context.Context, s delivery.Schedule, f delivery.Fire) (string, error)

// Launch calls f.
func (f LauncherFunc) Launch(ctx context.Context, s delivery.Schedule, fire delivery.Fire) (string, error) {
	return f(ctx, s, fire)
}

// Clock is the time a Scheduler reads and waits on.
type Clock interface {
	Now() time.Time
	// At returns a channel that receives once the time is t (at once
	// when it is past).
	At(t time.Time) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) At(t time.Time) <-chan time.Time { return time.After(time.Until(t)) }

// Definition is a schedule as its source declares it.
type Definition struct {
	// Name is the schedule's name within its source.
	Name string
	// Cron and Zone are the spec and its IANA zone ("" for UTC); see Parse.
	Cron, Zone string
	// Overlap is OverlapSkip ("" too) or OverlapQueue.
	Overlap string
	// Grace is how late a tick may fire after downtime; 0 means
	// DefaultGrace.
	Grace time.Duration
	// Target is the channel's description of what to run and where to
	// report, handed back to its Launcher.
	Target []byte
}

// Options configure a Scheduler. Store and Launchers are required.
type Options struct {
	Store Store
	// Launchers start the runs of fires, by the first part of their
	// schedule's source ("server", "github").
	Launchers map[string]Launcher
	// Clock is the time; nil means the system's.
	Clock Clock
	// Log receives the scheduler's logs; nil means none.
	Log *slog.Logger
	// Failpoint, when set, is called with FailScheduleFired, for crash
	// tests.
	Failpoint func(name string)
	// Launches bounds the launches in progress at once; 0 means 4.
	Launches int
}

// Scheduler fires the schedules stored, through their launchers.
type Scheduler struct {
	o     Options
	clock Clock
	log   *slog.Logger
	wake  chan struct{}
	slots chan struct{} // launches in progress
	jobs  sync.WaitGroup

	// idle, when set (tests), is told the time of each look of the loop
	// once it is done and the loop is about to wait.
	idle func(now time.Time)

	mu        sync.Mutex
	entries   map[string]*entry
	launching map[string]bool      // schedule → a launch of it is in progress
	retry     map[string]time.Time // "schedule\ntick" → when to try the fire again
}

// entry is a schedule as the loop knows it: what the store holds (its
// definition) and the next tick to come.
type entry struct {
	rec  delivery.Schedule
	spec *Spec
	next Tick
}

// New returns a scheduler over o.Store; Load reads what it holds.
func New(o Options) *Scheduler {
	s := &Scheduler{o: o, clock: o.Clock, log: o.Log, wake: make(chan struct{}, 1),
		slots:   make(chan struct{}, cmp.Or(o.Launches, 4)),
		entries: map[string]*entry{}, launching: map[string]bool{}, retry: map[string]time.Time{}}
	if s.clock == nil {
		s.clock = realClock{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Load reads the schedules the store holds (declared before a restart),
// so they fire before their sources are read again.
func (s *Scheduler) Load(ctx context.Context) error {
	recs, err := s.o.Store.Schedules(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.entries)
	for _, r := range recs {
		s.addLocked(r)
	}
	s.poke()
	return nil
}

// addLocked adds the stored schedule r to the loop; a spec this build
// cannot read (a zone its time zone database lacks) is logged and left
// out.
func (s *Scheduler) addLocked(r delivery.Schedule) {
	spec, err := Parse(r.Cron, r.Zone)
	if err != nil {
		s.log.Error("a stored schedule cannot be read; it does not fire", "schedule", r.Name, "err", err)
		delete(s.entries, r.Name)
		return
	}
	e := &entry{rec: r, spec: spec}
	e.next = spec.After(cursorOf(spec, r))
	s.entries[r.Name] = e
}

// cursorOf is the slot after which a stored schedule's next tick comes:
// its cursor, else (new, or a spec of another kind) the slot it was
// stored in.
func cursorOf(spec *Spec, r delivery.Schedule) time.Time {
	if c, ok := spec.ParseKey(r.Cursor); ok {
		return c
	}
	return spec.Slot(r.Since)
}

// Validate checks definitions as Set would, each error naming its
// schedule.
func Validate(defs []Definition) error {
	var errs []error
	seen := map[string]bool{}
	for _, d := range defs {
		if err := validate(d); err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", d.Name, err))
		}
		if seen[d.Name] {
			errs = append(errs, fmt.Errorf("schedule %s is declared twice: give each its own name", d.Name))
		}
		seen[d.Name] = true
	}
	return errors.Join(errs...)
}

func validate(d Definition) error {
	switch {
	case d.Name == "" || strings.ContainsAny(d.Name, "\n/"):
		return fmt.Errorf("name %q: write a name without / or newlines", d.Name)
	case d.Overlap != "" && d.Overlap != OverlapSkip && d.Overlap != OverlapQueue:
		return fmt.Errorf("overlap %q: use skip or queue", d.Overlap)
	case d.Grace < 0:
		return fmt.Errorf("grace %s: write a positive duration like 1h", d.Grace)
	}
	_, err := Parse(d.Cron, d.Zone)
	return err
}

// Set replaces the schedules of source ("server", "github/acme/app")
// with defs, in the store and in the loop, keeping the state of those
// already stored, and returns them as stored. A new schedule's first tick
// is the first after now: adding one fires nothing at once.
func (s *Scheduler) Set(ctx context.Context, source string, defs []Definition) ([]delivery.Schedule, error) {
	if err := Validate(defs); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	recs := make([]delivery.Schedule, 0, len(defs))
	for _, d := range defs {
		spec, _ := Parse(d.Cron, d.Zone) // validated
		recs = append(recs, delivery.Schedule{
			Name: source + "/" + d.Name, Source: source, Cron: d.Cron, Zone: d.Zone,
			Overlap: cmp.Or(d.Overlap, OverlapSkip), Grace: cmp.Or(d.Grace, DefaultGrace), Target: d.Target,
			Cursor: spec.Key(spec.Slot(now)), Since: now,
		})
	}
	stored, err := s.o.Store.PutSchedules(ctx, source, recs)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, e := range s.entries {
		if e.rec.Source == source {
			delete(s.entries, name)
		}
	}
	for _, r := range stored {
		s.addLocked(r)
	}
	s.poke()
	return stored, nil
}

// Wake asks the loop to look again now: a run ended, and a fire queued
// behind it may start. It never blocks.
func (s *Scheduler) Wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.poke()
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run fires the schedules until ctx ends, then waits for the launches in
// progress. The fires recorded before a restart and not started yet start
// first.
func (s *Scheduler) Run(ctx context.Context) {
	defer s.jobs.Wait()
	for {
		now := s.clock.Now()
		s.pending(ctx, now)
		for _, name := range s.due(now) {
			s.check(ctx, name, now)
		}
		timer := s.clock.At(s.until(now))
		if s.idle != nil {
			s.idle(now)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-timer:
		}
	}
}

// due returns the schedules whose next tick has come by now, by tick.
func (s *Scheduler) due(now time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for name, e := range s.entries {
		if !e.next.At.IsZero() && !e.next.At.After(now) {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(s.entries[a].next.At.Compare(s.entries[b].next.At), strings.Compare(a, b))
	})
	return names
}

// until is when the loop next looks after now: at the next tick or
// retry, at most maxWait later.
func (s *Scheduler) until(now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := now.Add(maxWait)
	for _, e := range s.entries {
		if !e.next.At.IsZero() && e.next.At.Before(next) {
			next = e.next.At
		}
	}
	for _, at := range s.retry {
		if at.Before(next) {
			next = at
		}
	}
	return next
}

// check fires schedule name if its tick has come, as its state in the
// store says.
func (s *Scheduler) check(ctx context.Context, name string, now time.Time) {
	defer s.recover("checking a schedule", name)
	rec, err := s.o.Store.Schedule(ctx, name)
	if errors.Is(err, engine.ErrNotFound) {
		s.mu.Lock()
		delete(s.entries, name) // removed meanwhile
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	e := s.entries[name]
	s.mu.Unlock()
	if err != nil || e == nil {
		if err != nil && ctx.Err() == nil {
			s.log.Error("reading a schedule failed; it is tried again", "schedule", name, "err", err)
			s.postpone(e, now.Add(retryIn))
		}
		return
	}
	latest, passed, cursor := e.spec.Due(cursorOf(e.spec, *rec), now, rec.Grace)
	next := e.spec.After(cursor)
	switch {
	case latest == nil && passed > 0:
		s.log.Warn("ticks came while the server was down, past the grace window: none fires", "schedule", name,
			"ticks", passed, "grace", rec.Grace, "next", next.At)
		s.advance(ctx, name, e.spec.Key(cursor))
		s.setNext(name, next)
		return
	case latest == nil:
		s.setNext(name, next)
		return
	case passed > 1:
		s.log.Warn("ticks came while the server was down: the latest fires, within the grace window", "schedule", name,
			"ticks", passed, "tick", latest.Key, "grace", rec.Grace)
	}
	state := delivery.FireClaimed
	if active, why := s.active(ctx, rec); active {
		queued, err := s.queued(ctx, name)
		if err != nil {
			s.log.Error("reading a schedule's queued fires failed; it is tried again", "schedule", name, "err", err)
			s.postpone(e, now.Add(retryIn))
			return
		}
		if rec.Overlap != OverlapQueue || queued {
			reason := "overlap: skip"
			if rec.Overlap == OverlapQueue {
				reason = "overlap: queue, and a tick already waits"
			}
			s.log.Info("tick skipped: the schedule's last run is still going", "schedule", name, "tick", latest.Key, "run", why, "rule", reason)
			s.advance(ctx, name, latest.Key)
			s.setNext(name, next)
			return
		}
		state = delivery.FireQueued
	}
	f := delivery.Fire{Schedule: name, Tick: latest.Key, At: latest.At, State: state}
	fresh, err := s.o.Store.ClaimFire(ctx, f)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("recording a fire failed; it is tried again", "schedule", name, "tick", latest.Key, "err", err)
			s.postpone(e, now.Add(retryIn))
		}
		return
	}
	s.setNext(name, next)
	if !fresh {
		// Fired before (a restart, the clock set back): not again.
		s.log.Info("tick already fired", "schedule", name, "tick", latest.Key)
		s.advance(ctx, name, latest.Key)
		return
	}
	if s.o.Failpoint != nil {
		s.o.Failpoint(FailScheduleFired)
	}
	if state == delivery.FireQueued {
		s.log.Info("tick queued behind the schedule's last run", "schedule", name, "tick", latest.Key)
		return
	}
	s.log.Info("schedule fired", "schedule", name, "tick", latest.Key, "at", latest.At)
	f.FiredAt = now
	s.launch(ctx, *rec, f)
}

func (s *Scheduler) setNext(name string, next Tick) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[name]; e != nil {
		e.next = next
	}
}

// postpone moves e's next look to at (the store failed).
func (s *Scheduler) postpone(e *entry, at time.Time) {
	if e == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e.next.At = at
}

func (s *Scheduler) advance(ctx context.Context, name, cursor string) {
	if err := s.o.Store.AdvanceSchedule(ctx, name, cursor); err != nil && ctx.Err() == nil {
		// The cursor is a shortcut: the fires' rows still keep a tick from
		// firing twice.
		s.log.Warn("recording a schedule's cursor failed", "schedule", name, "err", err)
	}
}

// active reports whether rec's last run is still going (running, or
// waiting for answers), or a fire of it is being launched; why names it.
func (s *Scheduler) active(ctx context.Context, rec *delivery.Schedule) (bool, string) {
	s.mu.Lock()
	launching := s.launching[rec.Name]
	s.mu.Unlock()
	if launching {
		return true, "(starting)"
	}
	if rec.LastRun == "" {
		return false, ""
	}
	run, err := s.o.Store.Run(ctx, rec.LastRun)
	if err != nil {
		return false, "" // pruned, or unreadable: nothing to wait for
	}
	return run.Status == engine.StatusRunning || run.Status == engine.StatusPausedWaitingHuman, run.ID
}

// queued reports whether a fire of schedule name waits behind its run.
func (s *Scheduler) queued(ctx context.Context, name string) (bool, error) {
	fires, err := s.o.Store.PendingFires(ctx)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(fires, func(f delivery.Fire) bool { return f.Schedule == name && f.State == delivery.FireQueued }), nil
}

// pending starts the fires recorded and not started: those a restart
// interrupted (within their grace window), those whose launch is to be
// tried again, and the queued ones whose run before them ended.
func (s *Scheduler) pending(ctx context.Context, now time.Time) {
	defer s.recover("starting the pending fires", "")
	fires, err := s.o.Store.PendingFires(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("listing the fires still to start failed", "err", err)
		}
		return
	}
	for _, f := range fires {
		key := f.Schedule + "\n" + f.Tick
		s.mu.Lock()
		busy := s.launching[f.Schedule]
		at, later := s.retry[key]
		s.mu.Unlock()
		if busy || later && at.After(now) {
			continue
		}
		rec, err := s.o.Store.Schedule(ctx, f.Schedule)
		if errors.Is(err, engine.ErrNotFound) {
			s.drop(ctx, f, "its schedule is gone")
			continue
		}
		if err != nil {
			continue // the next look tries again
		}
		if f.State == delivery.FireQueued {
			if active, _ := s.active(ctx, rec); active {
				continue
			}
			if err := s.o.Store.PromoteFire(ctx, f.Schedule, f.Tick); err != nil {
				s.log.Error("starting a queued fire failed", "schedule", f.Schedule, "tick", f.Tick, "err", err)
				continue
			}
			s.log.Info("the schedule's last run ended: its queued tick starts", "schedule", f.Schedule, "tick", f.Tick)
			f.State, f.UpdatedAt = delivery.FireClaimed, now
		} else if now.Sub(f.UpdatedAt) > rec.Grace {
			// Recorded before the server went down, or GitHub refused it,
			// for longer than the grace window: too late now.
			reason := fmt.Sprintf("the server was down past the schedule's grace window (%s) before the run could start", rec.Grace)
			if later {
				reason = fmt.Sprintf("the run could not start within the schedule's grace window (%s)", rec.Grace)
			}
			s.drop(ctx, f, reason)
			s.mu.Lock()
			delete(s.retry, key)
			s.mu.Unlock()
			continue
		}
		s.mu.Lock()
		delete(s.retry, key)
		s.mu.Unlock()
		s.launch(ctx, *rec, f)
	}
}

func (s *Scheduler) drop(ctx context.Context, f delivery.Fire, reason string) {
	s.log.Warn("a fire starts no run", "schedule", f.Schedule, "tick", f.Tick, "reason", reason)
	if err := s.o.Store.DropFire(ctx, f.Schedule, f.Tick, reason); err != nil && ctx.Err() == nil {
		s.log.Error("recording a dropped fire failed", "schedule", f.Schedule, "tick", f.Tick, "err", err)
	}
}

// launch starts fire f's run as a job of its own, at most Launches at
// once.
func (s *Scheduler) launch(ctx context.Context, rec delivery.Schedule, f delivery.Fire) {
	s.mu.Lock()
	if s.launching[rec.Name] {
		s.mu.Unlock()
		return
	}
	s.launching[rec.Name] = true
	s.mu.Unlock()
	s.jobs.Go(func() {
		defer func() {
			s.mu.Lock()
			delete(s.launching, rec.Name)
			s.mu.Unlock()
			s.Wake() // a queued fire, a retry, may be next
		}()
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		case <-ctx.Done():
			return
		}
		s.start(ctx, rec, f)
	})
}

// start launches f's run and records what came of it.
func (s *Scheduler) start(ctx context.Context, rec delivery.Schedule, f delivery.Fire) {
	defer s.recover("starting a scheduled run", rec.Name)
	runID, err := s.safeLaunch(ctx, rec, f)
	var later *delivery.RetryLater
	var held delivery.Held
	switch {
	case err == nil:
		if err := s.o.Store.StartFire(ctx, rec.Name, f.Tick, runID); err != nil && ctx.Err() == nil {
			s.log.Error("recording a scheduled run failed", "schedule", rec.Name, "tick", f.Tick, "run", runID, "err", err)
		}
		s.log.Info("scheduled run started", "schedule", rec.Name, "tick", f.Tick, "run", runID)
	case ctx.Err() != nil:
		// Stopping: the fire stays recorded, and starts after the restart.
	case errors.As(err, &later) || errors.As(err, &held):
		after := retryIn
		if later != nil {
			after = max(later.After, time.Second)
		}
		s.log.Warn("starting a scheduled run is postponed", "schedule", rec.Name, "tick", f.Tick, "retry_in", after, "err", err)
		s.mu.Lock()
		s.retry[rec.Name+"\n"+f.Tick] = s.clock.Now().Add(after)
		s.mu.Unlock()
	default:
		s.drop(ctx, f, err.Error())
	}
}

// safeLaunch calls the launcher of rec's source, a panic in it being its
// error.
func (s *Scheduler) safeLaunch(ctx context.Context, rec delivery.Schedule, f delivery.Fire) (runID string, err error) {
	kind, _, _ := strings.Cut(rec.Source, "/")
	l := s.o.Launchers[kind]
	if l == nil {
		return "", fmt.Errorf("no channel of this server starts runs for %s schedules", kind)
	}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("a schedule's launcher panicked", "schedule", rec.Name, "tick", f.Tick, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("the launch panicked: %v", p)
		}
	}()
	return l.Launch(ctx, rec, f)
}

// recover logs a panic of the loop's own work on a schedule, which goes
// on with the others.
func (s *Scheduler) recover(what, name string) {
	if p := recover(); p != nil {
		s.log.Error("a schedule's job panicked", "job", what, "schedule", name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	}
}

// FireNow fires schedule name now, whatever its spec and its last run,
// and returns the run it started. The fire is recorded first, as a tick
// is, but moves no cursor.
func (s *Scheduler) FireNow(ctx context.Context, name string) (runID string, err error) {
	rec, err := s.o.Store.Schedule(ctx, name)
	if err != nil {
		return "", err
	}
	now := s.clock.Now()
	f := delivery.Fire{Schedule: name, Tick: "manual-" + now.UTC().Format(time.RFC3339Nano), At: now, Manual: true, State: delivery.FireClaimed}
	if _, err := s.o.Store.ClaimFire(ctx, f); err != nil {
		return "", err
	}
	if s.o.Failpoint != nil {
		s.o.Failpoint(FailScheduleFired)
	}
	s.mu.Lock()
	s.launching[name] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.launching, name)
		s.mu.Unlock()
		s.Wake()
	}()
	runID, err = s.safeLaunch(ctx, *rec, f)
	if err != nil {
		s.drop(context.WithoutCancel(ctx), f, err.Error())
		return "", err
	}
	if err := s.o.Store.StartFire(ctx, name, f.Tick, runID); err != nil {
		return runID, err
	}
	s.log.Info("schedule fired by hand", "schedule", name, "run", runID)
	return runID, nil
}

// Find returns the full name of the schedule called name in list: its
// name, or, when no schedule has it, the end of the one name (after a
// "/") that ends so. No match, or several, is an error naming them.
func Find(list []Status, name string) (string, error) {
	var ends []string
	for _, s := range list {
		if s.Name == name {
			return name, nil
		}
		if strings.HasSuffix(s.Name, "/"+name) {
			ends = append(ends, s.Name)
		}
	}
	switch len(ends) {
	case 1:
		return ends[0], nil
	case 0:
		if len(list) == 0 {
			return "", fmt.Errorf("no schedule %q: this server has no schedules (declare them in serve.yml or a repository's .iterion.yml)", name)
		}
		return "", fmt.Errorf("no schedule %q: iterion schedules list shows them", name)
	}
	return "", fmt.Errorf("%q names several schedules (%s): write the full name", name, strings.Join(ends, ", "))
}

// Status is a schedule as iterion schedules list shows it.
type Status struct {
	delivery.Schedule
	// Next is when the next tick comes (now, when one is due); zero when
	// the spec fires no more, or cannot be read (Problem says why).
	Next     time.Time `json:"next,omitzero"`
	NextTick string    `json:"next_tick,omitempty"`
	// LastRunStatus is the last run's status; "" when it is gone.
	LastRunStatus engine.Status `json:"last_run_status,omitempty"`
	Problem       string        `json:"problem,omitempty"`
}

// List returns every schedule st holds with its next tick after now and
// its last run's status. It needs no Scheduler: the store says it all.
func List(ctx context.Context, st Store, now time.Time) ([]Status, error) {
	recs, err := st.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(recs))
	for _, r := range recs {
		r.Target = nil // the channel's own
		v := Status{Schedule: r}
		if spec, err := Parse(r.Cron, r.Zone); err != nil {
			v.Problem = err.Error()
		} else {
			next := NextTick(spec, r, now)
			v.Next, v.NextTick = next.At, next.Key
		}
		if r.LastRun != "" {
			if run, err := st.Run(ctx, r.LastRun); err == nil {
				v.LastRunStatus = run.Status
			} else if !errors.Is(err, engine.ErrNotFound) {
				return nil, err
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// NextTick is the tick of stored schedule r that fires next, as of now:
// one due now (within its grace window), else the first to come.
func NextTick(spec *Spec, r delivery.Schedule, now time.Time) Tick {
	latest, _, cursor := spec.Due(cursorOf(spec, r), now, r.Grace)
	if latest != nil {
		return *latest
	}
	return spec.After(cursor)
}
