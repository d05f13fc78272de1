package schedule

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// Spec is a cron spec in a time zone: when a schedule's ticks come.
//
// A five-field spec (minute hour day-of-month month day-of-week, or a
// descriptor such as @daily) names wall-clock slots of its zone: each
// slot is one tick, keyed by the slot ("2026-10-25T02:30"), however the
// zone's clocks move. A slot the clocks skip (the hour lost when daylight
// saving starts) fires once, at the first instant after the gap; a slot
// the clocks show twice (the hour repeated when it ends) fires once, at
// its first occurrence. robfig/cron alone would skip the first and fire
// the second twice, so its parser and Next are used on the zone's wall
// clock read as UTC, where no hour is skipped or repeated, and the slots
// are then placed in the zone here.
//
// An @every spec names durations, not slots: its ticks follow each other
// by the duration in absolute time, keyed by their instant in UTC.
type Spec struct {
	text  string
	zone  *time.Location
	wall  cron.Schedule // on the wall clock read as UTC; nil for @every
	every time.Duration
}

// Tick is one coming of a schedule.
type Tick struct {
	// Slot is the wall-clock slot, read as UTC (for @every, the instant).
	Slot time.Time
	// At is when it fires.
	At time.Time
	// Key names the tick in the store: its slot, to the minute
	// ("2026-10-25T02:30"), or for @every its instant in UTC, to the
	// second ("2026-10-25T02:30:00Z").
	Key string
}

const (
	keyMinutes = "2006-01-02T15:04"
	keySeconds = "2006-01-02T15:04:05Z"
)

// Parse reads a cron spec (five fields, or a descriptor such as @daily or
// @every 6h) and an IANA zone name ("" means UTC). A spec may instead
// start with CRON_TZ=Area/City, as robfig/cron allows, when zone is "".
// Errors say what to write.
func Parse(spec, zone string) (*Spec, error) {
	text := strings.TrimSpace(spec)
	if text == "" {
		return nil, errors.New("the cron spec is empty: write five fields (minute hour day-of-month month day-of-week), like \"0 3 * * *\", or a descriptor like @daily")
	}
	if strings.HasPrefix(text, "TZ=") || strings.HasPrefix(text, "CRON_TZ=") {
		if zone != "" {
			return nil, errors.New("the cron spec names a zone (CRON_TZ=) and so does timezone: keep one")
		}
		prefix, rest, _ := strings.Cut(text, " ")
		_, zone, _ = strings.Cut(prefix, "=")
		text = strings.TrimSpace(rest)
	}
	loc := time.UTC
	if zone != "" {
		var err error
		if loc, err = loadZone(zone); err != nil || zone == "Local" {
			return nil, fmt.Errorf("unknown time zone %q: write an IANA name like Europe/Berlin or America/New_York", zone)
		}
	}
	if strings.HasPrefix(text, "@nightly") {
		return nil, errors.New("@nightly is not a descriptor: write @daily (midnight) or five fields like \"0 3 * * *\"")
	}
	sched, err := cron.ParseStandard(text)
	if err != nil {
		return nil, fmt.Errorf("%v: write five fields (minute hour day-of-month month day-of-week), like \"0 3 * * *\", or a descriptor like @daily or @every 6h", err)
	}
	s := &Spec{text: spec, zone: loc}
	switch c := sched.(type) {
	case *cron.SpecSchedule:
		wall := *c
		wall.Location = time.UTC
		s.wall = &wall
		if wall.Next(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
			return nil, fmt.Errorf("%q never fires (no such day): check the day-of-month and month", text)
		}
	case cron.ConstantDelaySchedule:
		s.every = c.Delay
	default:
		return nil, fmt.Errorf("%q is not a schedule iterion reads", text)
	}
	return s, nil
}

// MinGap is the shortest time between two of the spec's ticks, read on
// its wall clock over its first hundred ticks from 2001: a spec firing
// every minute in one hour of one day is seen as firing every minute
// (its ticks come together within the first hundred).
func (s *Spec) MinGap() time.Duration {
	if s.wall == nil {
		return s.every
	}
	gap := time.Duration(-1)
	from := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := s.wall.Next(from)
	for range 100 {
		next := s.wall.Next(prev)
		if next.IsZero() {
			break
		}
		if d := next.Sub(prev); gap < 0 || d < gap {
			gap = d
		}
		prev = next
	}
	if gap < 0 {
		return 365 * 24 * time.Hour // fires once
	}
	return gap
}

// String is the spec as written.
func (s *Spec) String() string { return s.text }

// Zone is the spec's time zone.
func (s *Spec) Zone() *time.Location { return s.zone }

// Wall reports whether the spec names wall-clock slots (not @every).
func (s *Spec) Wall() bool { return s.wall != nil }

// Slot is the slot t falls in: its wall clock in the zone read as UTC,
// to the minute (for @every, t itself, to the second).
func (s *Spec) Slot(t time.Time) time.Time {
	if s.wall == nil {
		return t.UTC().Truncate(time.Second)
	}
	w := t.In(s.zone)
	return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), 0, 0, time.UTC)
}

// Key is the key of the tick at slot.
func (s *Spec) Key(slot time.Time) string {
	if s.wall == nil {
		return slot.UTC().Format(keySeconds)
	}
	return slot.Format(keyMinutes)
}

// ParseKey reads a tick key back into its slot; ok is false for a key of
// another kind of spec (a spec changed from @every to five fields).
func (s *Spec) ParseKey(key string) (time.Time, bool) {
	layout := keyMinutes
	if s.wall == nil {
		layout = keySeconds
	}
	t, err := time.ParseInLocation(layout, key, time.UTC)
	return t, err == nil
}

// After returns the first tick after slot. Slots placed at the same
// instant as the one before them (the slot after a skipped one) are the
// same fire and are passed over. Its At is zero when the spec fires no
// more.
func (s *Spec) After(slot time.Time) Tick {
	if s.wall == nil {
		next := s.everyNext(slot)
		return Tick{Slot: next, At: next, Key: s.Key(next)}
	}
	prev := s.place(slot)
	for i := 0; i < 4; i++ {
		next := s.wall.Next(slot)
		if next.IsZero() {
			return Tick{}
		}
		at := s.place(next)
		if at.After(prev) {
			return Tick{Slot: next, At: at, Key: s.Key(next)}
		}
		slot = next
	}
	return Tick{}
}

func (s *Spec) everyNext(t time.Time) time.Time {
	return t.Add(s.every - time.Duration(t.Nanosecond())).UTC()
}

// place returns when wall-clock slot (read as UTC) comes in the zone: its
// first occurrence, or, in a gap the clocks jump over, the first instant
// after the gap.
func (s *Spec) place(slot time.Time) time.Time {
	if s.wall == nil {
		return slot
	}
	var first time.Time
	// The offsets in force around the slot: a day before, at and after.
	for _, probe := range []time.Duration{-26 * time.Hour, 0, 26 * time.Hour} {
		_, off := slot.Add(probe).In(s.zone).Zone()
		t := slot.Add(-time.Duration(off) * time.Second)
		if s.Slot(t).Equal(slot) && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if !first.IsZero() {
		return first
	}
	// In a gap: read with the offset before it, the slot lands after the
	// gap, in the zone that starts where the gap ends.
	_, off := slot.Add(-26 * time.Hour).In(s.zone).Zone()
	t := slot.Add(-time.Duration(off) * time.Second)
	if start, _ := t.In(s.zone).ZoneBounds(); !start.IsZero() && !start.After(t) {
		return start.UTC()
	}
	return t.UTC()
}

// Due looks at the ticks after slot cursor that have come by now. latest
// is the last of them when it came within grace of now (the one tick
// that fires after downtime), nil otherwise; passed counts the ticks
// looked at (latest included); next is the slot of the last that came,
// from which the next tick is looked for. Ticks older than now less grace
// (and two days, for the clocks' changes) are passed over unseen: they
// could not fire anyway.
func (s *Spec) Due(cursor, now time.Time, grace time.Duration) (latest *Tick, passed int, next time.Time) {
	if floor := s.Slot(now.Add(-grace - 48*time.Hour)); cursor.Before(floor) {
		if s.wall != nil {
			cursor = floor
		} else {
			// @every keeps its phase: whole periods are passed over.
			cursor = cursor.Add(floor.Sub(cursor) / s.every * s.every)
		}
	}
	var last Tick
	for {
		t := s.After(cursor)
		if t.At.IsZero() || t.At.After(now) {
			break
		}
		last, cursor = t, t.Slot
		passed++
	}
	if !last.At.IsZero() && now.Sub(last.At) <= grace {
		return &last, passed, cursor
	}
	return nil, passed, cursor
}

// zones caches the zones loaded: time.LoadLocation reads the time zone
// database each time, and serve parses every spec at each start and each
// push. Only zones found are kept, so it holds at most the database.
var zones sync.Map // name → *time.Location

func loadZone(name string) (*time.Location, error) {
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, loc)
	return loc, nil
}
