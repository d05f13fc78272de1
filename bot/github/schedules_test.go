package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/bot/schedule"
	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakegithub"
	"github.com/iterion-bot/iterion/store"
)

// recordedSchedules is a Schedulers that stores the schedules as the
// scheduler does and records each Set.
type recordedSchedules struct {
	db *store.DB
	mu sync.Mutex
	// sets are "source: name cron, …" per Set.
	sets []string
}

func (r *recordedSchedules) Set(ctx context.Context, source string, defs []schedule.Definition) ([]delivery.Schedule, error) {
	var parts []string
	var recs []delivery.Schedule
	for _, d := range defs {
		parts = append(parts, d.Name+" "+d.Cron)
		recs = append(recs, delivery.Schedule{Name: source + "/" + d.Name, Source: source, Cron: d.Cron, Zone: d.Zone, Overlap: d.Overlap, Grace: d.Grace, Target: d.Target})
	}
	r.mu.Lock()
	r.sets = append(r.sets, source+": "+strings.Join(parts, ", "))
	r.mu.Unlock()
	return r.db.PutSchedules(ctx, source, recs)
}

func (r *recordedSchedules) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.sets...)
}

const scheduleConfig = `workflows:
  nightly: nightly.bot
schedules:
  - name: nightly
    cron: "0 3 * * *"
    timezone: Europe/Berlin
    workflow: nightly
    vars: {depth: "2"}
`

// A push to the default branch reads the repository's schedules again; a
// push elsewhere does not; a file with mistakes keeps those declared.
func TestPushRefreshesSchedules(t *testing.T) {
	t.Parallel()
	fake := fakegithub.New(t, "acme", "app")
	fake.Files[".iterion.yml"] = scheduleConfig
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rec := &recordedSchedules{db: db}
	s := newTestService(t, db, fake, ServiceOptions{Workspaces: t.TempDir(), Schedules: rec})
	ctx := context.Background()
	push := func(file string) {
		t.Helper()
		payload, err := os.ReadFile("testdata/payloads/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.handler.Handle(ctx, store.Delivery{ID: file, Event: "push", Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	push("push.default_branch.json")
	fake.Files[".iterion.yml"] = strings.Replace(scheduleConfig, `"0 3 * * *"`, `"30 4 * * 1-5"`, 1)
	push("push.feature.json")
	push("push.default_branch.json")
	fake.Files[".iterion.yml"] = strings.Replace(scheduleConfig, `"0 3 * * *"`, `"@nightly"`, 1)
	push("push.default_branch.json")
	delete(fake.Files, ".iterion.yml")
	push("push.default_branch.json")
	want := []string{
		"github/acme/app: nightly 0 3 * * *",
		"github/acme/app: nightly 30 4 * * 1-5",
		"github/acme/app: ",
	}
	if diff := cmp.Diff(want, rec.got()); diff != "" {
		t.Errorf("schedules set (-want +got):\n%s", diff)
	}
	if list, _ := db.Schedules(ctx); len(list) != 0 {
		t.Errorf("schedules after .iterion.yml is gone: %+v", list)
	}

	// At start, every repository of every installation is read, and the
	// schedules of a repository the App no longer has go.
	fake.Files[".iterion.yml"] = scheduleConfig
	if _, err := db.PutSchedules(ctx, "github/acme/gone", []delivery.Schedule{{Name: "github/acme/gone/x", Source: "github/acme/gone", Cron: "@daily"}}); err != nil {
		t.Fatal(err)
	}
	s.loadSchedules(ctx)
	list, err := db.Schedules(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "github/acme/app/nightly" {
		t.Errorf("schedules after the start's reading = %+v, %v", list, err)
	}
	var tg scheduleTarget
	if err := json.Unmarshal(list[0].Target, &tg); err != nil || tg.Installation != fakegithub.InstallationID || tg.Path != "nightly.bot" || tg.Vars["depth"] != "2" || !tg.Issue || tg.Zone != "Europe/Berlin" {
		t.Errorf("target = %+v, %v", tg, err)
	}
}

// launchDoors record the runs launched and store them.
type launchDoors struct {
	storeDoors
	mu   sync.Mutex
	reqs []engine.StartRequest
}

func (d *launchDoors) Launch(ctx context.Context, req engine.StartRequest) (*engine.Run, error) {
	d.mu.Lock()
	d.reqs = append(d.reqs, req)
	d.mu.Unlock()
	now := time.Now()
	run := &engine.Run{ID: req.RunID, Workflow: req.Workflow.Name, Status: engine.StatusRunning, Trigger: req.Trigger, CreatedAt: now, UpdatedAt: now}
	if err := d.db.CreateRun(ctx, run, nil); err != nil {
		if errors.Is(err, engine.ErrRunExists) {
			return nil, err
		}
		return nil, err
	}
	return run, nil
}

func (d *launchDoors) Preflight(*dsl.Workflow) error { return nil }

const computeBot = `vars:
  depth: int = 1

compute c:
  expr:
    x: "1"

workflow nightly:
  entry: c
  c -> done
`

// A fire checks the default branch's head out and starts the workflow
// read from it, shown on the schedule's tracking issue, opened once and
// found again by its marker; the same fire again starts nothing more.
func TestScheduledRunOnItsTrackingIssue(t *testing.T) {
	t.Parallel()
	fake := fakegithub.New(t, "acme", "app")
	fake.Files[".iterion.yml"] = scheduleConfig
	fake.Files["nightly.bot"] = computeBot
	head := fake.Commit(map[string]string{"README.md": "hi\n"})
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rec := &recordedSchedules{db: db}
	s := newTestService(t, db, fake, ServiceOptions{Workspaces: t.TempDir(), Schedules: rec})
	s.replies.wait = func(context.Context, time.Duration) error { return nil }
	doors := &launchDoors{storeDoors: storeDoors{db}}
	s.actions.doors = doors
	ctx := context.Background()
	if err := s.RefreshSchedules(ctx, fakegithub.InstallationID, "acme", "app", "main"); err != nil {
		t.Fatal(err)
	}
	sc, err := db.Schedule(ctx, "github/acme/app/nightly")
	if err != nil {
		t.Fatal(err)
	}
	fire := delivery.Fire{Schedule: sc.Name, Tick: "2026-03-02T03:00", State: delivery.FireClaimed}
	id, err := s.launchScheduled(ctx, *sc, fire)
	if err != nil {
		t.Fatal(err)
	}
	issues := fake.IssueList()
	if len(issues) != 1 {
		t.Fatalf("issues = %+v, want the tracking issue", issues)
	}
	var num int
	for n, is := range issues {
		num = n
		if is.Title != "iterion: schedule nightly" || !strings.Contains(is.Body, "workflow `nightly` (`nightly.bot`) on cron `0 3 * * *` (Europe/Berlin)") ||
			!strings.HasSuffix(is.Body, "<!-- iterion:schedule-github/acme/app/nightly -->") {
			t.Errorf("tracking issue = %+v", is)
		}
	}
	req := doors.reqs[0]
	o, _ := OriginOf(&engine.Run{Trigger: req.Trigger})
	if req.RunID != id || o.Issue != num || o.Schedule != sc.Name || o.Tick != fire.Tick || o.HeadSHA != head || o.PR != 0 ||
		req.Trigger.Ref != PRScope("acme/app", num) || req.Trigger.Actor != "schedule nightly" {
		t.Errorf("launched %+v at %+v", req, o)
	}
	if sc, _ := db.Schedule(ctx, sc.Name); sc.Posts[postTrackingIssue] == "" {
		t.Errorf("the tracking issue is not recorded: %+v", sc.Posts)
	}

	// The same fire again (a restart between the start and its record).
	if again, err := s.launchScheduled(ctx, *sc, fire); err != nil || again != id || len(doors.reqs) != 1 {
		t.Errorf("the fire again = %s, %v (%d launches), want %s once", again, err, len(doors.reqs), id)
	}
	// The issue's record lost (a crash before it was stored): the marker
	// finds it, and a changed spec edits its body.
	fake.Files[".iterion.yml"] = strings.Replace(scheduleConfig, `"0 3 * * *"`, `"0 4 * * *"`, 1)
	if err := s.RefreshSchedules(ctx, fakegithub.InstallationID, "acme", "app", "main"); err != nil {
		t.Fatal(err)
	}
	sc, _ = db.Schedule(ctx, sc.Name)
	sc.Posts = nil
	if _, err := s.launchScheduled(ctx, *sc, delivery.Fire{Schedule: sc.Name, Tick: "2026-03-03T04:00"}); err != nil {
		t.Fatal(err)
	}
	if issues := fake.IssueList(); len(issues) != 1 || !strings.Contains(issues[num].Body, "on cron `0 4 * * *`") {
		t.Errorf("issues after the lost record = %+v", issues)
	}

	// A workflow that does not compile is said on the issue, and the fire
	// is dropped with the reason.
	fake.Files["nightly.bot"] = "workflow nightly:\n  entry: nope\n"
	_, err = s.launchScheduled(ctx, *sc, delivery.Fire{Schedule: sc.Name, Tick: "2026-03-04T04:00"})
	if err == nil || !strings.Contains(err.Error(), "does not compile") {
		t.Errorf("a broken workflow's launch: %v", err)
	}
	if said := fake.BotComments(num, "The run of tick 2026-03-04T04:00 could not start"); len(said) != 1 {
		t.Errorf("the tracking issue was not told: %+v", fake.Comments(num))
	}
}

// Questions of a scheduled run are answered on its tracking issue like on
// a pull request: a comment on an issue reaches the answer command, and
// `/iterion run` there says where runs start.
func TestAnswerOnTrackingIssue(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	w.fake.Perms["ana"] = "write"
	w.fake.Issues[12] = &fakegithub.Issue{Title: "iterion: schedule nightly", User: fakegithub.BotLogin}
	o := Origin{Repo: "acme/app", Installation: 42, HeadSHA: "abc", Schedule: "github/acme/app/nightly", Tick: "2026-03-02T03:00", Issue: 12}
	now := w.clock.Now()
	run := &engine.Run{ID: "gh-sched", Workflow: "nightly", Status: engine.StatusRunning, Trigger: o.Trigger("schedule nightly"), CreatedAt: now, UpdatedAt: now}
	if err := w.db.CreateRun(ctx, run, nil); err != nil {
		t.Fatal(err)
	}
	ix, err := w.db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "plan", Questions: map[string]any{engine.QuestionKey: "Which licence?"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.ShortID(ctx, PRScope("acme/app", 12), run.ID, ix.ID); err != nil {
		t.Fatal(err)
	}
	fake := w.fake
	s := newTestService(t, w.db, fake, ServiceOptions{Workspaces: t.TempDir()})
	s.replies.wait = func(context.Context, time.Duration) error { return nil }
	s.actions.doors = storeDoors{w.db}
	payload := func(id int64, body string) []byte {
		p, _ := json.Marshal(map[string]any{
			"action":       "created",
			"issue":        map[string]any{"number": 12},
			"comment":      map[string]any{"id": id, "body": body, "user": map[string]any{"login": "ana", "type": "User"}},
			"repository":   map[string]any{"full_name": "acme/app", "name": "app", "owner": map[string]any{"login": "acme"}, "default_branch": "main"},
			"installation": map[string]any{"id": 42},
			"sender":       map[string]any{"login": "ana", "type": "User"},
		})
		return p
	}
	// Someone without write permission answers first, on the tracking
	// issue; someone with it answers on an issue of their own: neither
	// is taken.
	w.fake.Perms["mallory"] = "read"
	w.fake.Issues[13] = &fakegithub.Issue{Title: "iterion: schedule nightly", User: "ana"}
	for _, c := range []struct {
		issue int
		user  string
	}{{12, "mallory"}, {13, "ana"}} {
		cm := fake.AddComment(c.issue, c.user, "/iterion answer Q1 GPL")
		p, _ := json.Marshal(map[string]any{
			"action":       "created",
			"issue":        map[string]any{"number": c.issue},
			"comment":      map[string]any{"id": cm.ID, "body": cm.Body, "user": map[string]any{"login": c.user, "type": "User"}},
			"repository":   map[string]any{"full_name": "acme/app", "name": "app", "owner": map[string]any{"login": "acme"}, "default_branch": "main"},
			"installation": map[string]any{"id": 42},
			"sender":       map[string]any{"login": c.user, "type": "User"},
		})
		if err := s.handler.Handle(ctx, store.Delivery{ID: fmt.Sprintf("x%d", c.issue), Event: "issue_comment", Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := w.db.Interaction(ctx, run.ID, ix.ID); err != nil || !got.Pending() {
		t.Fatalf("the question after the refused answers: %+v, %v", got, err)
	}
	if len(fake.BotComments(12, "only people with write permission on acme/app")) != 1 || len(fake.BotComments(13, "no question `Q1` on this issue")) != 1 {
		t.Errorf("the refusals: on the tracking issue %+v; elsewhere %+v", fake.Comments(12), fake.Comments(13))
	}

	for i, body := range []string{"/iterion answer Q1 MIT", "/iterion run nightly", "/iterion status"} {
		c := fake.AddComment(12, "ana", body)
		if err := s.handler.Handle(ctx, store.Delivery{ID: "d" + string(rune('0'+i)), Event: "issue_comment", Payload: payload(c.ID, body)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := w.db.Interaction(ctx, run.ID, ix.ID)
	if err != nil || got.Pending() || got.Answer() != "MIT" || got.AnsweredBy != "ana" || got.Via != "github" {
		t.Errorf("the question after the issue comment: %+v, %v", got, err)
	}
	for _, want := range []string{"answer to `Q1` recorded", "`/iterion run` starts runs on pull requests", "iterion runs on this issue:\n- `gh-sched` nightly: running"} {
		if len(fake.BotComments(12, want)) != 1 {
			t.Errorf("no reply with %q on the issue: %+v", want, fake.Comments(12))
		}
	}
}

// A pull request cannot change the schedules: they are read from the
// default branch alone. Its events, a push to its branch (whose
// .iterion.yml declares a schedule every ten minutes and changes the
// nightly one), and a comment on it read no schedule; the fake GitHub
// fails the test if .iterion.yml is read from any ref but main.
func TestPullRequestCannotChangeSchedules(t *testing.T) {
	t.Parallel()
	fake := fakegithub.New(t, "acme", "app")
	fake.Files[".iterion.yml"] = scheduleConfig
	fake.Files["nightly.bot"] = computeBot
	head := fake.Commit(map[string]string{".iterion.yml": strings.Replace(scheduleConfig, `"0 3 * * *"`, `"*/10 * * * *"`, 1) +
		"  - name: exfiltrate\n    cron: \"*/10 * * * *\"\n    workflow: nightly\n"})
	fake.Git("branch", "feature", head)
	fake.PRs[7] = &fakegithub.PR{HeadSHA: head, HeadRef: "feature"}
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rec := &recordedSchedules{db: db}
	s := newTestService(t, db, fake, ServiceOptions{Workspaces: t.TempDir(), Schedules: rec})
	s.replies.wait = func(context.Context, time.Duration) error { return nil }
	s.actions.doors = &launchDoors{storeDoors: storeDoors{db}}
	ctx := context.Background()
	if err := s.RefreshSchedules(ctx, fakegithub.InstallationID, "acme", "app", "main"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct{ event, file string }{
		{"pull_request", "pull_request.opened.json"},
		{"pull_request", "pull_request.synchronize.json"},
		{"push", "push.feature.json"},
		{"issue_comment", "issue_comment.created.json"},
	} {
		payload, err := os.ReadFile("testdata/payloads/" + d.file)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.handler.Handle(ctx, store.Delivery{ID: d.file, Event: d.event, Payload: payload}); err != nil {
			var ign *Ignored
			if !errors.As(err, &ign) {
				t.Fatalf("%s: %v", d.file, err)
			}
		}
	}
	if got := rec.got(); len(got) != 1 || got[0] != "github/acme/app: nightly 0 3 * * *" {
		t.Errorf("schedules set: %q, want the default branch's once", got)
	}
	list, err := db.Schedules(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "github/acme/app/nightly" || list[0].Cron != "0 3 * * *" {
		t.Errorf("schedules = %+v, %v", list, err)
	}
}
