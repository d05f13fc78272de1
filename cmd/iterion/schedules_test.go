package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/bot/schedule"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakegithub"
	"github.com/iterion-bot/iterion/store"
)

// nightlyWorkflow asks a person, then writes VERSION in its workspace.
const nightlyWorkflow = `schema decision:
  approved: bool

schema out:
  text: string

human approve:
  instructions: "Bump the version to 2.0?"
  output: decision

tool bump:
  command: "printf '2.0\n' > VERSION && printf '{\"text\": \"bumped\"}'"
  output: out

workflow nightly:
  entry: approve
  approve -> bump when approved
  approve -> fail
  bump -> done
`

const nightlyConfig = `workflows:
  nightly: workflows/nightly.bot
schedules:
  - name: nightly
    cron: "0 3 * * *"
    timezone: Europe/Berlin
    workflow: nightly
changes:
  workflows: [nightly]
`

// cli runs an iterion command against the harness's serve (its socket)
// and returns its exit status and outputs.
func (h *ghHarness) cli(args ...string) (int, string, string) {
	h.t.Helper()
	c := newCLI(h.t)
	for _, kv := range h.env {
		k, v, _ := strings.Cut(kv, "=")
		c.setenv(k, v)
	}
	return c.run(append(args, "--store-dir", h.store)...)
}

// schedules lists serve's schedules with iterion schedules list --json.
func (h *ghHarness) schedules() []schedule.Status {
	h.t.Helper()
	code, out, errOut := h.cli("schedules", "list", "--json")
	if code != exitOK {
		h.t.Fatalf("schedules list: exit %d: %s", code, errOut)
	}
	var list struct {
		Schedules []schedule.Status `json:"schedules"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		h.t.Fatalf("schedules list: %v\n%s", err, out)
	}
	return list.Schedules
}

// issueComment writes user's comment on issue n (not a pull request) and
// delivers its webhook.
func (h *ghHarness) issueComment(n int, user, body string) int64 {
	h.t.Helper()
	c := h.fake.AddComment(n, user, body)
	p, _ := json.Marshal(map[string]any{
		"action":       "created",
		"issue":        map[string]any{"number": n},
		"comment":      map[string]any{"id": c.ID, "body": body, "user": map[string]any{"login": user, "type": "User"}},
		"repository":   map[string]any{"full_name": "acme/app", "name": "app", "owner": map[string]any{"login": "acme"}, "default_branch": "main"},
		"installation": map[string]any{"id": 42},
		"sender":       map[string]any{"login": user, "type": "User"},
	})
	h.deliverEvent("issue_comment", fmt.Sprintf("ic-%d", c.ID), p)
	return c.ID
}

// push delivers a push of branch of acme/app.
func (h *ghHarness) push(id, branch string) {
	h.t.Helper()
	p, _ := json.Marshal(map[string]any{
		"ref": "refs/heads/" + branch, "after": strings.Repeat("a", 40), "deleted": false,
		"repository":   map[string]any{"full_name": "acme/app", "name": "app", "owner": map[string]any{"login": "acme", "name": "acme"}, "default_branch": "main"},
		"installation": map[string]any{"id": 42}, "sender": map[string]any{"login": "ana", "type": "User"},
	})
	h.deliverEvent("push", id, p)
}

// A repository's nightly schedule, fired by hand: its run is shown on
// the schedule's tracking issue, its question is posted there and
// answered there by a comment, and once finished it proposes its change
// as a pull request that lists the answer and who gave it; schedules
// list shows the run and the next tick, in the schedule's zone.
func TestServeScheduleEndToEnd(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, map[string]string{".iterion.yml": nightlyConfig, "workflows/nightly.bot": nightlyWorkflow})
	h.start()
	h.logs.waitFor(t, 30*time.Second, "the repositories' schedules are read")
	list := h.schedules()
	if len(list) != 1 || list[0].Name != "github/acme/app/nightly" || list[0].Cron != "0 3 * * *" || list[0].Zone != "Europe/Berlin" || list[0].LastRun != "" {
		t.Fatalf("schedules = %+v", list)
	}

	code, out, errOut := h.cli("schedules", "run", "nightly")
	if code != exitOK {
		t.Fatalf("schedules run: exit %d: %s%s", code, out, errOut)
	}
	m := regexp.MustCompile(`schedule github/acme/app/nightly fired: run (gh-[0-9a-f]+) started`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("schedules run said %q", out)
	}
	runID := m[1]
	issues := h.fake.IssueList()
	if len(issues) != 1 {
		t.Fatalf("issues = %+v, want the tracking issue", issues)
	}
	var issue int
	for n := range issues {
		issue = n
	}
	var q fakegithub.Comment
	h.fake.WaitFor(30*time.Second, "the question on the tracking issue", func() bool {
		cs := h.fake.BotComments(issue, "**Question Q1**")
		if len(cs) > 0 {
			q = cs[0]
		}
		return len(cs) > 0
	})
	if !strings.Contains(q.Body, "> Bump the version to 2.0?") {
		t.Errorf("the question's comment:\n%s", q.Body)
	}
	h.fake.WaitFor(30*time.Second, "the status comment to say it waits", func() bool {
		cs := h.fake.BotComments(issue, "<!-- iterion:status-"+runID+" -->")
		return len(cs) == 1 && strings.Contains(cs[0].Body, "Started by schedule `nightly`, fired by hand.") && strings.Contains(cs[0].Body, "**Waiting for answers**")
	})

	ans := h.issueComment(issue, "ana", "/iterion answer Q1 approved: yes")
	h.fake.WaitFor(30*time.Second, "👍 on the answer", func() bool {
		return len(h.fake.Reactions()) > 0 && strings.Contains(strings.Join(h.fake.Reactions(), " "), fmt.Sprintf("%d:+1", ans))
	})
	waitRunStatus(t, h.base, h.token, runID, engine.StatusFinished)

	var pr fakegithub.PR
	var prNum int
	h.fake.WaitFor(30*time.Second, "the pull request of the run's changes", func() bool {
		for n, p := range h.fake.Pulls() {
			if strings.HasPrefix(p.HeadRef, "iterion/nightly/") {
				pr, prNum = p, n
				return true
			}
		}
		return false
	})
	if pr.HeadRef != "iterion/nightly/"+runID || pr.BaseRef != "main" {
		t.Errorf("pull request = %+v", pr)
	}
	for _, want := range []string{"iterion run `" + runID + "` of workflow `nightly`", "answered by `ana` via GitHub", "> Bump the version to 2.0?", "> approved: true", "- `VERSION`"} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("the pull request's body lacks %q:\n%s", want, pr.Body)
		}
	}
	if got := h.fake.Git("show", pr.HeadRef+":VERSION"); got != "2.0" {
		t.Errorf("VERSION on the branch = %q", got)
	}
	h.fake.WaitFor(30*time.Second, "the tracking issue to link the pull request", func() bool {
		return len(h.fake.BotComments(issue, fmt.Sprintf("proposes its changes in #%d", prNum))) == 1
	})

	list = h.schedules()
	if len(list) != 1 || list[0].LastRun != runID || list[0].LastRunStatus != engine.StatusFinished || !strings.HasPrefix(list[0].LastFire, "manual-") {
		t.Errorf("schedules after the run = %+v", list)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if next := list[0].Next.In(berlin); next.Hour() != 3 || next.Minute() != 0 || !next.After(time.Now()) {
		t.Errorf("next fire %s, want the next 03:00 in Berlin", next)
	}
	code, out, _ = h.cli("schedules", "list")
	if code != exitOK || !strings.Contains(out, "github/acme/app/nightly  0 3 * * * (Europe/Berlin)") || !strings.Contains(out, runID+" finished") || !strings.Contains(out, "by hand") {
		t.Errorf("schedules list printed:\n%s", out)
	}
	if code, _, errOut := h.cli("schedules", "run", "weekly"); code != exitError || !strings.Contains(errOut, `no schedule "weekly"`) {
		t.Errorf("schedules run of an unknown schedule: exit %d, %s", code, errOut)
	}
}

// A push to the default branch changes the repository's schedules; a
// push to another branch does not.
func TestServeSchedulesFollowPushes(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, map[string]string{".iterion.yml": nightlyConfig, "workflows/nightly.bot": nightlyWorkflow})
	h.start()
	h.logs.waitFor(t, 30*time.Second, "the repositories' schedules are read")
	h.fake.Files[".iterion.yml"] = strings.Replace(nightlyConfig, `"0 3 * * *"`, `"30 4 * * 1-5"`, 1)
	h.push("p1", "feature")
	h.waitDeliveriesHandled()
	if list := h.schedules(); len(list) != 1 || list[0].Cron != "0 3 * * *" {
		t.Errorf("after a push to feature: %+v", list)
	}
	h.push("p2", "main")
	h.waitDeliveriesHandled()
	list := h.schedules()
	if len(list) != 1 || list[0].Cron != "30 4 * * 1-5" {
		t.Fatalf("after a push to main: %+v", list)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if next := list[0].Next.In(berlin); next.Hour() != 4 || next.Minute() != 30 || next.Weekday() == time.Saturday || next.Weekday() == time.Sunday {
		t.Errorf("next fire %s, want a weekday's 04:30 in Berlin", next)
	}
	h.fake.Files[".iterion.yml"] = "workflows:\n  nightly: workflows/nightly.bot\n"
	h.push("p3", "main")
	h.waitDeliveriesHandled()
	if list := h.schedules(); len(list) != 0 {
		t.Errorf("after the schedule was removed: %+v", list)
	}
}

// serve dies (SIGKILL) right after recording a tick's fire and before
// starting its run; the restarted serve starts that run once, and fires
// no tick twice.
func TestServeScheduleCrashAtFirePoint(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, nil)
	dir := t.TempDir()
	wf := filepath.Join(dir, "tick.bot")
	if err := os.WriteFile(wf, []byte(computeWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "serve.yml")
	if err := os.WriteFile(cfg, []byte("schedules:\n  - name: tick\n    cron: \"@every 2s\"\n    workflow: tick.bot\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.env = append(h.env, "ITERION_CONFIG="+cfg)
	wait := h.startChild(schedule.FailScheduleFired)
	if !wait() {
		t.Fatal("serve was not killed at the fire point")
	}
	db, err := store.Open(h.store, store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	fires, err := db.Fires(context.Background(), "server/tick", 0)
	db.Close()
	if err != nil || len(fires) != 1 || fires[0].State != delivery.FireClaimed {
		t.Fatalf("fires after the crash = %+v, %v; want one, claimed", fires, err)
	}
	killed := fires[0]

	stop := h.start()
	id := cronRunID("server/tick", killed.Tick)
	h.logs.waitFor(t, 30*time.Second, "tick="+killed.Tick+" run="+id)
	waitRunStatus(t, h.base, h.token, id, engine.StatusFinished)
	stop()
	db, err = store.Open(h.store, store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	fires, err = db.Fires(ctx, "server/tick", 0)
	if err != nil {
		t.Fatal(err)
	}
	ticks := map[string]bool{}
	started := 0
	for _, f := range fires {
		if ticks[f.Tick] {
			t.Errorf("tick %s fired twice", f.Tick)
		}
		ticks[f.Tick] = true
		if f.Tick == killed.Tick && (f.State != delivery.FireStarted || f.RunID != cronRunID("server/tick", f.Tick)) {
			t.Errorf("the fire recorded before the crash is %+v, want started with its run", f)
		}
		if f.State != delivery.FireStarted {
			continue
		}
		started++
		evs, err := db.Events(ctx, f.RunID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range evs {
			if ev.Type == engine.EventRunStarted {
				n++
			}
		}
		if n != 1 {
			t.Errorf("run %s of tick %s started %d times, want once", f.RunID, f.Tick, n)
		}
	}
	runs, err := db.Runs(ctx, engine.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != started {
		t.Errorf("%d runs for %d started fires", len(runs), started)
	}
	if !ticks[killed.Tick] {
		t.Errorf("the fire recorded before the crash is gone: %+v", fires)
	}
}

// manualClock is a schedule.Clock moved by hand.
type manualClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []clockWaiter
}

type clockWaiter struct {
	at time.Time
	ch chan time.Time
}

func newManualClock(now time.Time) *manualClock { return &manualClock{now: now} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) At(t time.Time) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !t.After(c.now) {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, clockWaiter{t, ch})
	return ch
}

// Set moves the clock to t, waking the waits that came.
func (c *manualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(t) {
			kept = append(kept, w)
			continue
		}
		w.ch <- t
	}
	c.waiters = kept
}

// The nightly example, started by its schedule in serve.yml on a clock
// moved by hand: the tick of 03:00 in Berlin fires it once, and it runs
// green. Restarted the next day after 04:00, past the one-hour grace
// window, the missed tick does not fire; restarted two days later with a
// grace window of 30h, the latest of the two ticks missed fires, alone.
func TestServeNightlyExampleStartedBySchedule(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, nil)
	example, err := filepath.Abs("../../examples/nightly/main.bot")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "serve.yml")
	config := func(grace string) {
		t.Helper()
		text := fmt.Sprintf("schedules:\n  - name: nightly\n    cron: \"0 3 * * *\"\n    timezone: Europe/Berlin\n    workflow: %s\n    vars:\n      test_command: \"true\"\n    grace: %s\n", example, grace)
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	config("1h")
	// The example checks the model key before its first node, even on a
	// green night that calls no model.
	h.env = append(h.env, "ITERION_CONFIG="+cfg, "ANTHROPIC_API_KEY=unused")
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(day, hour, minute int) time.Time { return time.Date(2026, 3, day, hour, minute, 0, 0, berlin) }
	const name = "server/nightly"

	clock := newManualClock(at(2, 2, 59))
	h.clock = clock
	stop := h.start()
	if list := h.schedules(); len(list) != 1 || list[0].Name != name || list[0].LastFire != "" || !list[0].Next.Equal(at(2, 3, 0)) {
		t.Fatalf("schedules before the tick = %+v", list)
	}
	clock.Set(at(2, 3, 0).Add(10 * time.Second))
	first := cronRunID(name, "2026-03-02T03:00")
	h.logs.waitFor(t, 30*time.Second, "run="+first)
	waitRunStatus(t, h.base, h.token, first, engine.StatusFinished)
	list := h.schedules()
	if len(list) != 1 || list[0].LastRun != first || list[0].LastRunStatus != engine.StatusFinished || list[0].LastFire != "2026-03-02T03:00" || !list[0].Next.Equal(at(3, 3, 0)) {
		t.Errorf("schedules after the tick = %+v", list)
	}
	stop()

	// Down over the next tick, back 90 minutes after it: too late.
	clock = newManualClock(at(3, 4, 30))
	h.clock = clock
	stop = h.start()
	h.logs.waitFor(t, 30*time.Second, "past the grace window: none fires")
	if list := h.schedules(); len(list) != 1 || list[0].LastRun != first || !list[0].Next.Equal(at(4, 3, 0)) {
		t.Errorf("schedules after the late start = %+v", list)
	}
	stop()

	// Down over two ticks, the first 25½ hours ago and the second 1½:
	// within 30h both, and the latest fires.
	config("30h")
	clock = newManualClock(at(5, 4, 30))
	h.clock = clock
	stop = h.start()
	latest := cronRunID(name, "2026-03-05T03:00")
	h.logs.waitFor(t, 30*time.Second, "run="+latest)
	waitRunStatus(t, h.base, h.token, latest, engine.StatusFinished)
	stop()

	db, err := store.Open(h.store, store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	fires, err := db.Fires(ctx, name, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fires {
		got = append(got, f.Tick+" "+string(f.State)+" "+f.RunID)
	}
	slices.Sort(got)
	want := []string{"2026-03-02T03:00 " + string(delivery.FireStarted) + " " + first, "2026-03-05T03:00 " + string(delivery.FireStarted) + " " + latest}
	if !slices.Equal(got, want) {
		t.Errorf("fires = %q, want %q", got, want)
	}
	for _, id := range []string{first, latest} {
		run, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if run.Workflow != "nightly" || run.Trigger.Source != "cron" || run.Trigger.Actor != "schedule nightly" || run.Status != engine.StatusFinished {
			t.Errorf("run %s = %+v", id, run)
		}
	}
	if runs, err := db.Runs(ctx, engine.RunFilter{}); err != nil || len(runs) != 2 {
		t.Errorf("%d runs (%v), want the two fired", len(runs), err)
	}
}
