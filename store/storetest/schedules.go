package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// mustPutSchedules stores defs as source's schedules.
func mustPutSchedules(t *testing.T, s BotStore, source string, defs ...delivery.Schedule) []delivery.Schedule {
	t.Helper()
	out, err := s.PutSchedules(t.Context(), source, defs)
	if err != nil {
		t.Fatalf("PutSchedules(%s): %v", source, err)
	}
	return out
}

func mustSchedule(t *testing.T, s BotStore, name string) *delivery.Schedule {
	t.Helper()
	sc, err := s.Schedule(t.Context(), name)
	if err != nil {
		t.Fatalf("Schedule(%s): %v", name, err)
	}
	return sc
}

func testPutSchedules(t *testing.T, s BotStore) {
	ctx := t.Context()
	repo := "github/acme/app"
	a := delivery.Schedule{Name: repo + "/nightly", Source: repo, Cron: "0 3 * * *", Zone: "Europe/Berlin", Cursor: "2026-01-01T12:00", Target: []byte(`{"w":1}`)}
	b := delivery.Schedule{Name: repo + "/weekly", Source: repo, Cron: "@weekly", Cursor: "2026-01-01T11:00"}
	got := mustPutSchedules(t, s, repo, b, a)
	if len(got) != 2 || got[0].Name != a.Name || got[1].Name != b.Name {
		t.Fatalf("PutSchedules returned %+v, want nightly then weekly", got)
	}
	if got[0].Since.IsZero() || got[0].UpdatedAt.IsZero() {
		t.Errorf("a new schedule has no Since or UpdatedAt: %+v", got[0])
	}
	// The state moves on: a fire, a run, a post.
	if ok, err := s.ClaimFire(ctx, delivery.Fire{Schedule: a.Name, Tick: "2026-01-02T03:00", At: time.Date(2026, 1, 2, 2, 0, 0, 0, time.UTC), State: delivery.FireClaimed}); !ok || err != nil {
		t.Fatalf("ClaimFire = %v, %v", ok, err)
	}
	if err := s.StartFire(ctx, a.Name, "2026-01-02T03:00", "r-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSchedulePost(ctx, a.Name, "github-issue", "12"); err != nil {
		t.Fatal(err)
	}
	before := mustSchedule(t, s, a.Name)

	// Read again with another spec, same zone: the state stays.
	a2 := a
	a2.Cron, a2.Cursor, a2.Target = "0 4 * * *", "2030-01-01T00:00", []byte(`{"w":2}`)
	mustPutSchedules(t, s, repo, a2, b)
	after := mustSchedule(t, s, a.Name)
	if after.Cron != "0 4 * * *" || string(after.Target) != `{"w":2}` {
		t.Errorf("the definition was not replaced: %+v", after)
	}
	if after.Cursor != "2026-01-02T03:00" || !after.Since.Equal(before.Since) || after.LastRun != "r-1" || after.LastFire != "2026-01-02T03:00" || after.Posts["github-issue"] != "12" {
		t.Errorf("the state was not kept: %+v, was %+v", after, before)
	}
	// Another zone: the cursor given is taken, the rest of the state kept.
	a3 := a2
	a3.Zone, a3.Cursor = "America/New_York", "2026-01-02T09:00"
	mustPutSchedules(t, s, repo, a3, b)
	if sc := mustSchedule(t, s, a.Name); sc.Cursor != "2026-01-02T09:00" || sc.LastRun != "r-1" || sc.Posts["github-issue"] != "12" {
		t.Errorf("after a zone change: %+v, want the new cursor and the old run and posts", sc)
	}

	// A source's schedules are replaced together; others stay.
	srv := delivery.Schedule{Name: "server/docs", Source: "server", Cron: "@daily", Cursor: "2026-01-01T00:00"}
	mustPutSchedules(t, s, "server", srv)
	if ok, err := s.ClaimFire(ctx, delivery.Fire{Schedule: b.Name, Tick: "2026-01-04T00:00", State: delivery.FireQueued}); !ok || err != nil {
		t.Fatalf("ClaimFire(weekly) = %v, %v", ok, err)
	}
	mustPutSchedules(t, s, repo, a3)
	all, err := s.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sc := range all {
		names = append(names, sc.Name)
	}
	if diff := cmp.Diff([]string{a.Name, srv.Name}, names); diff != "" {
		t.Errorf("schedules after weekly was removed (-want +got):\n%s", diff)
	}
	if _, err := s.Schedule(ctx, b.Name); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Schedule(removed) error = %v, want ErrNotFound", err)
	}
	// Its queued fire went with it.
	if p, err := s.PendingFires(ctx); len(p) != 0 || err != nil {
		t.Errorf("pending fires of a removed schedule = %+v, %v", p, err)
	}
	fs, err := s.Fires(ctx, b.Name, 0)
	if err != nil || len(fs) != 1 || fs[0].State != delivery.FireDropped || fs[0].Error == "" {
		t.Errorf("the removed schedule's fire = %+v, %v; want dropped, saying why", fs, err)
	}

	// Mistakes change nothing.
	for _, tc := range []struct {
		name   string
		source string
		defs   []delivery.Schedule
	}{
		{"another source's name", "server", []delivery.Schedule{{Name: a.Name, Source: "server", Cron: "@daily"}}},
		{"a def of another source", repo, []delivery.Schedule{{Name: repo + "/x", Source: "server", Cron: "@daily"}}},
		{"a name twice", repo, []delivery.Schedule{a3, a3}},
		{"an empty name", repo, []delivery.Schedule{{Source: repo, Cron: "@daily"}}},
	} {
		if _, err := s.PutSchedules(ctx, tc.source, tc.defs); err == nil {
			t.Errorf("PutSchedules with %s: no error", tc.name)
		}
	}
	if sc := mustSchedule(t, s, a.Name); sc.Source != repo || sc.Zone != "America/New_York" {
		t.Errorf("a refused PutSchedules changed %s: %+v", a.Name, sc)
	}
	if _, err := s.Schedule(ctx, "nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Schedule(unknown) error = %v, want ErrNotFound", err)
	}
}

func testClaimFire(t *testing.T, s BotStore) {
	ctx := t.Context()
	name := "server/nightly"
	mustPutSchedules(t, s, "server", delivery.Schedule{Name: name, Source: "server", Cron: "30 2 * * *", Cursor: "2026-10-24T12:00"})
	at := time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC)
	f := delivery.Fire{Schedule: name, Tick: "2026-10-25T02:30", At: at, State: delivery.FireClaimed}
	if ok, err := s.ClaimFire(ctx, f); !ok || err != nil {
		t.Fatalf("first ClaimFire = %v, %v; want new", ok, err)
	}
	// The same tick again (a restart, the hour repeated) is not new.
	if ok, err := s.ClaimFire(ctx, f); ok || err != nil {
		t.Errorf("second ClaimFire = %v, %v; want not new", ok, err)
	}
	sc := mustSchedule(t, s, name)
	if sc.Cursor != f.Tick || sc.LastFire != f.Tick || !sc.LastFireAt.Equal(at) {
		t.Errorf("after the fire: cursor %q, last fire %q at %s", sc.Cursor, sc.LastFire, sc.LastFireAt)
	}
	// A manual fire moves no cursor.
	m := delivery.Fire{Schedule: name, Tick: "manual-2026-10-25T09:00:00Z", At: at.Add(8 * time.Hour), Manual: true, State: delivery.FireClaimed}
	if ok, err := s.ClaimFire(ctx, m); !ok || err != nil {
		t.Fatalf("manual ClaimFire = %v, %v", ok, err)
	}
	if sc := mustSchedule(t, s, name); sc.Cursor != f.Tick || sc.LastFire != m.Tick {
		t.Errorf("after a manual fire: cursor %q (want %q), last fire %q", sc.Cursor, f.Tick, sc.LastFire)
	}
	// The cursor never moves back.
	if err := s.AdvanceSchedule(ctx, name, "2026-10-20T02:30"); err != nil {
		t.Fatal(err)
	}
	if err := s.AdvanceSchedule(ctx, name, "2026-10-26T02:30"); err != nil {
		t.Fatal(err)
	}
	if sc := mustSchedule(t, s, name); sc.Cursor != "2026-10-26T02:30" {
		t.Errorf("cursor %q, want 2026-10-26T02:30", sc.Cursor)
	}
	if ok, err := s.ClaimFire(ctx, delivery.Fire{Schedule: name, Tick: "2026-10-25T02:00", State: delivery.FireClaimed}); !ok || err != nil {
		t.Fatalf("ClaimFire of an older tick = %v, %v", ok, err)
	}
	if sc := mustSchedule(t, s, name); sc.Cursor != "2026-10-26T02:30" {
		t.Errorf("an older fire moved the cursor back to %q", sc.Cursor)
	}

	for _, bad := range []delivery.Fire{
		{Schedule: "nope", Tick: "t", State: delivery.FireClaimed},
		{Schedule: name, State: delivery.FireClaimed},
		{Schedule: name, Tick: "t", State: delivery.FireStarted},
	} {
		if ok, err := s.ClaimFire(ctx, bad); ok || err == nil {
			t.Errorf("ClaimFire(%+v) = %v, %v; want an error", bad, ok, err)
		}
	}
	if err := s.AdvanceSchedule(ctx, "nope", "x"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("AdvanceSchedule(unknown) = %v, want ErrNotFound", err)
	}
}

// Twenty processes' worth of claims of one tick: exactly one is new.
func testClaimFireConcurrent(t *testing.T, s BotStore) {
	ctx := t.Context()
	name := "server/race"
	mustPutSchedules(t, s, "server", delivery.Schedule{Name: name, Source: "server", Cron: "* * * * *"})
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Go(func() {
			ok, err := s.ClaimFire(ctx, delivery.Fire{Schedule: name, Tick: "2026-01-01T00:00", State: delivery.FireClaimed})
			if err != nil {
				t.Errorf("ClaimFire: %v", err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Errorf("%d claims of one tick were new, want 1", n)
	}
}

func testFireLifecycle(t *testing.T, s BotStore) {
	ctx := t.Context()
	name := "github/acme/app/deps"
	mustPutSchedules(t, s, "github/acme/app", delivery.Schedule{Name: name, Source: "github/acme/app", Cron: "@hourly"})
	for i, state := range []string{delivery.FireClaimed, delivery.FireQueued, delivery.FireClaimed} {
		f := delivery.Fire{Schedule: name, Tick: fmt.Sprintf("2026-01-01T0%d:00", i), State: state}
		if ok, err := s.ClaimFire(ctx, f); !ok || err != nil {
			t.Fatalf("ClaimFire(%s) = %v, %v", f.Tick, ok, err)
		}
	}
	pendingTicks := func() []string {
		t.Helper()
		p, err := s.PendingFires(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for i, f := range p {
			if i > 0 && f.FiredAt.Before(p[i-1].FiredAt) {
				t.Errorf("pending fires out of order: %s fired at %s after %s at %s", f.Tick, f.FiredAt, p[i-1].Tick, p[i-1].FiredAt)
			}
			out = append(out, f.Tick+" "+f.State)
		}
		return out
	}
	want := []string{"2026-01-01T00:00 claimed", "2026-01-01T01:00 queued", "2026-01-01T02:00 claimed"}
	if diff := cmp.Diff(want, pendingTicks()); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	if err := s.StartFire(ctx, name, "2026-01-01T00:00", "r-0"); err != nil {
		t.Fatal(err)
	}
	if err := s.PromoteFire(ctx, name, "2026-01-01T01:00"); err != nil {
		t.Fatal(err)
	}
	if err := s.DropFire(ctx, name, "2026-01-01T02:00", "the tick is past its grace"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"2026-01-01T01:00 claimed"}, pendingTicks()); diff != "" {
		t.Errorf("pending after start, promote and drop (-want +got):\n%s", diff)
	}
	// Dropping a started fire leaves it started.
	if err := s.DropFire(ctx, name, "2026-01-01T00:00", "late"); err != nil {
		t.Fatal(err)
	}
	if sc := mustSchedule(t, s, name); sc.LastRun != "r-0" {
		t.Errorf("LastRun = %q, want r-0", sc.LastRun)
	}
	fs, err := s.Fires(ctx, name, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fs {
		got = append(got, fmt.Sprintf("%s %s %s %s", f.Tick, f.State, f.RunID, f.Error))
		if f.FiredAt.IsZero() || f.UpdatedAt.IsZero() {
			t.Errorf("fire %s lacks FiredAt or UpdatedAt", f.Tick)
		}
	}
	want = []string{"2026-01-01T02:00 dropped  the tick is past its grace", "2026-01-01T01:00 claimed  ", "2026-01-01T00:00 started r-0 "}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fires, newest first (-want +got):\n%s", diff)
	}
	if fs, _ := s.Fires(ctx, name, 1); len(fs) != 1 || fs[0].Tick != "2026-01-01T02:00" {
		t.Errorf("Fires(limit 1) = %+v", fs)
	}
	for _, op := range []error{s.StartFire(ctx, name, "nope", "r"), s.DropFire(ctx, name, "nope", "x"), s.PromoteFire(ctx, name, "nope")} {
		if !errors.Is(op, engine.ErrNotFound) {
			t.Errorf("an unknown fire: %v, want ErrNotFound", op)
		}
	}
}

func testSchedulePosts(t *testing.T, s BotStore) {
	ctx := t.Context()
	name := "github/acme/app/docs"
	mustPutSchedules(t, s, "github/acme/app", delivery.Schedule{Name: name, Source: "github/acme/app", Cron: "@daily"})
	if err := s.SetSchedulePost(ctx, name, "github-issue", "3"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSchedulePost(ctx, name, "github-issue", "4"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSchedulePost(ctx, name, "slack", "C1/1.2"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"github-issue": "4", "slack": "C1/1.2"}, mustSchedule(t, s, name).Posts); diff != "" {
		t.Errorf("posts (-want +got):\n%s", diff)
	}
	if err := s.SetSchedulePost(ctx, "nope", "x", "1"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("SetSchedulePost(unknown) = %v, want ErrNotFound", err)
	}
}
