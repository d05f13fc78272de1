package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// BotStore is a store with both parts of the contract: the engine's and
// the bot's. The bot's methods read and write records the engine's create
// (a post names an interaction; runs are found by their trigger's Ref).
type BotStore interface {
	engine.Store
	delivery.Store
}

// RunBot checks that a store implements the contract of delivery.Store:
// deliveries recorded once and handled or postponed, the launch queue,
// posts and the routes of replies to them, short question numbers, runs by
// channel reference, and the order of outbox rows. open has the same
// requirements as RunEngine's.
func RunBot(t *testing.T, open func(t *testing.T) BotStore) {
	tests := []struct {
		name string
		run  func(t *testing.T, s BotStore)
	}{
		{"RecordDelivery", testRecordDelivery},
		{"FinishDelivery", testFinishDelivery},
		{"RetryDelivery", testRetryDelivery},
		{"DeliveryBacklog", testDeliveryBacklog},
		{"HoldDelivery", testHoldDelivery},
		{"PendingDeliveriesLimit", testPendingDeliveriesLimit},
		{"LaunchQueue", testLaunchQueue},
		{"RecordPost", testRecordPost},
		{"ShortIDs", testShortIDs},
		{"ShortIDsConcurrent", testShortIDsConcurrent},
		{"RunPosts", testRunPosts},
		{"RunsByRef", testRunsByRef},
		{"OutboxOrder", testOutboxOrder},
		{"Links", testLinks},
		{"Nonces", testNonces},
		{"PutSchedules", testPutSchedules},
		{"ClaimFire", testClaimFire},
		{"ClaimFireConcurrent", testClaimFireConcurrent},
		{"FireLifecycle", testFireLifecycle},
		{"SchedulePosts", testSchedulePosts},
		{"OpenQuestions", testOpenQuestions},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, open(t))
		})
	}
}

// pendingIDs lists the ids of the pending deliveries, checking that they
// come oldest first.
func pendingIDs(t *testing.T, s BotStore, limit int) []string {
	t.Helper()
	pending, err := s.PendingDeliveries(t.Context(), limit)
	if err != nil {
		t.Fatalf("PendingDeliveries: %v", err)
	}
	var ids []string
	for i, d := range pending {
		if i > 0 && d.ReceivedAt.Before(pending[i-1].ReceivedAt) {
			t.Errorf("pending deliveries out of order: %s received at %s after %s at %s", d.ID, d.ReceivedAt, pending[i-1].ID, pending[i-1].ReceivedAt)
		}
		ids = append(ids, d.Source+" "+d.ID)
	}
	return ids
}

func testRecordDelivery(t *testing.T, s BotStore) {
	ctx := t.Context()
	d := delivery.Delivery{Source: "github/1", ID: "abc", Event: "issue_comment", Payload: []byte(`{"x":1}`)}
	// Twenty concurrent redeliveries of one id: exactly one is new.
	var fresh atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			ok, err := s.RecordDelivery(ctx, d)
			if err != nil {
				t.Error(err)
			}
			if ok {
				fresh.Add(1)
			}
		})
	}
	wg.Wait()
	if fresh.Load() != 1 {
		t.Fatalf("%d deliveries recorded as new, want 1", fresh.Load())
	}
	if ok, err := s.RecordDelivery(ctx, delivery.Delivery{Source: "github/2", ID: "abc", Event: "push"}); !ok || err != nil {
		t.Errorf("the same id from another source is another delivery: new = %t, %v", ok, err)
	}
	pending, err := s.PendingDeliveries(ctx, 0)
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending = %+v, %v; want both", pending, err)
	}
	got := pending[slices.IndexFunc(pending, func(p delivery.Delivery) bool { return p.Source == "github/1" })]
	if got.ID != "abc" || got.Event != "issue_comment" || string(got.Payload) != `{"x":1}` || got.State != delivery.Received ||
		got.Attempts != 0 || got.ReceivedAt.IsZero() || !got.UpdatedAt.Equal(got.ReceivedAt) {
		t.Errorf("recorded delivery = %+v", got)
	}
	for _, bad := range []delivery.Delivery{{Source: "github/1"}, {ID: "x"}} {
		if _, err := s.RecordDelivery(ctx, bad); err == nil {
			t.Errorf("a delivery without source or id was accepted: %+v", bad)
		}
	}
}

func testFinishDelivery(t *testing.T, s BotStore) {
	ctx := t.Context()
	for _, id := range []string{"ok", "bad", "left"} {
		if _, err := s.RecordDelivery(ctx, delivery.Delivery{Source: "github/1", ID: id, Event: "push", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.FinishDelivery(ctx, "github/1", "ok", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishDelivery(ctx, "github/1", "bad", errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"github/1 left"}, pendingIDs(t, s, 0)); diff != "" {
		t.Errorf("pending after finishing two (-want +got):\n%s", diff)
	}
	for _, id := range []string{"ok", "bad"} {
		if ok, err := s.RecordDelivery(ctx, delivery.Delivery{Source: "github/1", ID: id, Event: "push"}); ok || err != nil {
			t.Errorf("a redelivery of handled delivery %s: new = %t, %v; want recognised", id, ok, err)
		}
	}
	if err := s.FinishDelivery(ctx, "github/1", "missing", nil); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("finishing an unknown delivery: err = %v, want ErrNotFound", err)
	}
}

func testRetryDelivery(t *testing.T, s BotStore) {
	ctx := t.Context()
	if _, err := s.RecordDelivery(ctx, delivery.Delivery{Source: "github/1", ID: "r", Event: "issue_comment"}); err != nil {
		t.Fatal(err)
	}
	// Far from whatever clock the store has.
	if err := s.RetryDelivery(ctx, "github/1", "r", time.Now().Add(24*time.Hour), errors.New("rate limited")); err != nil {
		t.Fatal(err)
	}
	if ids := pendingIDs(t, s, 0); len(ids) != 0 {
		t.Fatalf("a postponed delivery is pending before its time: %v", ids)
	}
	if ok, err := s.RecordDelivery(ctx, delivery.Delivery{Source: "github/1", ID: "r", Event: "issue_comment"}); ok || err != nil {
		t.Errorf("a redelivery of a postponed delivery: new = %t, %v; want recognised", ok, err)
	}
	if err := s.RetryDelivery(ctx, "github/1", "r", time.Now().Add(-24*time.Hour), errors.New("rate limited again")); err != nil {
		t.Fatal(err)
	}
	p, err := s.PendingDeliveries(ctx, 0)
	if err != nil || len(p) != 1 || p[0].Attempts != 2 || p[0].Error != "rate limited again" || p[0].State != delivery.Received {
		t.Fatalf("due delivery = %+v, %v; want pending after 2 attempts with the last error", p, err)
	}
	if err := s.RetryDelivery(ctx, "github/1", "missing", time.Now(), nil); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("postponing an unknown delivery: err = %v, want ErrNotFound", err)
	}
	if err := s.FinishDelivery(ctx, "github/1", "r", nil); err != nil {
		t.Fatal(err)
	}
	if ids := pendingIDs(t, s, 0); len(ids) != 0 {
		t.Errorf("a postponed delivery finished is still pending: %v", ids)
	}
}

func testDeliveryBacklog(t *testing.T, s BotStore) {
	ctx := t.Context()
	b, err := s.DeliveryBacklog(ctx)
	if err != nil || b != (delivery.Backlog{}) {
		t.Fatalf("backlog of an empty store = %+v, %v; want zero", b, err)
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		if _, err := s.RecordDelivery(ctx, delivery.Delivery{Source: "slack/T1", ID: id, Event: "message"}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.PendingDeliveries(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	oldest := all[0].ReceivedAt
	if err := s.RetryDelivery(ctx, "slack/T1", "b", time.Now().Add(24*time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishDelivery(ctx, "slack/T1", "c", nil); err != nil {
		t.Fatal(err)
	}
	b, err = s.DeliveryBacklog(ctx)
	if want := (delivery.Backlog{Due: 2, Postponed: 1, Oldest: oldest}); err != nil || b.Due != want.Due || b.Postponed != want.Postponed || !b.Oldest.Equal(want.Oldest) {
		t.Errorf("backlog = %+v, %v; want %+v", b, err, want)
	}
}

func testHoldDelivery(t *testing.T, s BotStore) {
	ctx := t.Context()
	for _, id := range []string{"a", "b", "c", "d"} {
		if _, err := s.RecordDelivery(ctx, delivery.Delivery{Source: "github/1", ID: id, Event: "issue_comment"}); err != nil {
			t.Fatal(err)
		}
	}
	for id, hold := range map[string]string{"a": "installation/1", "b": "installation/2", "c": "installation/1"} {
		if err := s.HoldDelivery(ctx, "github/1", id, hold, errors.New("uninstalled")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.HoldDelivery(ctx, "github/1", "d", "", nil); err == nil {
		t.Error("HoldDelivery without a hold: no error")
	}
	if err := s.HoldDelivery(ctx, "github/1", "missing", "x", nil); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("holding an unknown delivery: err = %v, want ErrNotFound", err)
	}
	if diff := cmp.Diff([]string{"github/1 d"}, pendingIDs(t, s, 0)); diff != "" {
		t.Errorf("pending with three held (-want +got):\n%s", diff)
	}
	if b, err := s.DeliveryBacklog(ctx); err != nil || b.Due != 1 || b.Held != 3 || b.Postponed != 0 {
		t.Errorf("backlog = %+v, %v; want 1 due and 3 held", b, err)
	}
	n, err := s.ReleaseDeliveries(ctx, "installation/1")
	if err != nil || n != 2 {
		t.Fatalf("ReleaseDeliveries(installation/1) = %d, %v; want 2", n, err)
	}
	got := pendingIDs(t, s, 0)
	slices.Sort(got)
	if diff := cmp.Diff([]string{"github/1 a", "github/1 c", "github/1 d"}, got); diff != "" {
		t.Errorf("pending after releasing installation/1 (-want +got):\n%s", diff)
	}
	p, _ := s.PendingDeliveries(ctx, 0)
	for _, d := range p {
		if d.ID == "a" && (d.Attempts != 1 || d.Error != "uninstalled" || d.Hold != "") {
			t.Errorf("released delivery = %+v, want its attempt and error kept, no hold", d)
		}
	}
	if n, err := s.ReleaseDeliveries(ctx, ""); err != nil || n != 1 {
		t.Errorf("ReleaseDeliveries(\"\") = %d, %v; want the last one", n, err)
	}
	if n, err := s.ReleaseDeliveries(ctx, "installation/9"); err != nil || n != 0 {
		t.Errorf("releasing a hold nobody has = %d, %v", n, err)
	}
	if err := s.FinishDelivery(ctx, "github/1", "b", nil); err != nil {
		t.Fatal(err)
	}
	if b, err := s.DeliveryBacklog(ctx); err != nil || b.Due != 3 || b.Held != 0 {
		t.Errorf("backlog at the end = %+v, %v; want 3 due", b, err)
	}
}

func testPendingDeliveriesLimit(t *testing.T, s BotStore) {
	ctx := t.Context()
	for i := range 5 {
		if _, err := s.RecordDelivery(ctx, delivery.Delivery{Source: "github/1", ID: fmt.Sprint(i), Event: "push"}); err != nil {
			t.Fatal(err)
		}
	}
	// A postponed one does not count against the limit.
	all := pendingIDs(t, s, 0)
	if err := s.RetryDelivery(ctx, "github/1", all[0][len("github/1 "):], time.Now().Add(24*time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	if got := pendingIDs(t, s, 3); len(got) != 3 || !slices.Equal(got, all[1:4]) {
		t.Errorf("PendingDeliveries(3) = %v, want the oldest three due of %v", got, all)
	}
}

func testLaunchQueue(t *testing.T, s BotStore) {
	ctx := t.Context()
	const pr = "github/acme/app#7"
	for i, key := range []string{"d1", "d2", "d1", "d3"} {
		pos, err := s.QueueLaunch(ctx, pr, key, []byte(`{"k":"`+key+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{1, 2, 1, 3}[i]; pos != want {
			t.Errorf("QueueLaunch(%s) position %d, want %d", key, pos, want)
		}
	}
	if pos, err := s.QueueLaunch(ctx, "github/acme/app#8", "d1", nil); pos != 1 || err != nil {
		t.Errorf("another scope's first launch: position %d, %v; want 1", pos, err)
	}
	if err := s.DropLaunch(ctx, pr, "d2"); err != nil {
		t.Fatal(err)
	}
	if err := s.DropLaunch(ctx, pr, "never"); err != nil {
		t.Errorf("dropping an unknown launch: %v", err)
	}
	q, err := s.QueuedLaunches(ctx, pr)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range q {
		keys = append(keys, l.Key+" "+string(l.Payload))
		if l.QueuedAt.IsZero() {
			t.Errorf("launch %s has no QueuedAt", l.Key)
		}
	}
	if diff := cmp.Diff([]string{`d1 {"k":"d1"}`, `d3 {"k":"d3"}`}, keys); diff != "" {
		t.Errorf("queue mismatch (-want +got):\n%s", diff)
	}
	if pos, _ := s.QueueLaunch(ctx, pr, "d3", nil); pos != 2 {
		t.Errorf("d3 after d2 left: position %d, want 2", pos)
	}
	if q, err := s.QueuedLaunches(ctx, "github/acme/app#9"); len(q) != 0 || err != nil {
		t.Errorf("an empty scope's queue = %v, %v", q, err)
	}
}

func testRecordPost(t *testing.T, s BotStore) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-posts", 0, "github")
	ix := MustPost(t, s, run, "plan", "Which licence?")
	if _, _, err := s.PostRef(ctx, "github", "123"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("PostRef before any post: err = %v, want ErrNotFound", err)
	}
	if err := s.RecordPost(ctx, run.ID, ix.ID, "github", "123"); err != nil {
		t.Fatalf("RecordPost: %v", err)
	}
	if err := s.RecordPost(ctx, run.ID, ix.ID, "slack", "C1/1700000000.1"); err != nil {
		t.Fatalf("RecordPost: %v", err)
	}
	got, err := s.Interaction(ctx, run.ID, ix.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"github": "123", "slack": "C1/1700000000.1"}, got.Posts); diff != "" {
		t.Errorf("Posts mismatch (-want +got):\n%s", diff)
	}
	r, i, err := s.PostRef(ctx, "slack", "C1/1700000000.1")
	if err != nil || r != run.ID || i != ix.ID {
		t.Errorf("PostRef = %q %q %v, want %q %q", r, i, err, run.ID, ix.ID)
	}
	if err := s.RecordPost(ctx, run.ID, "nope", "github", "9"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("RecordPost of an unknown interaction: err = %v, want ErrNotFound", err)
	}
	for _, channel := range []string{"", "git/hub"} {
		if err := s.RecordPost(ctx, run.ID, ix.ID, channel, "9"); err == nil {
			t.Errorf("RecordPost with channel %q: no error", channel)
		}
	}
	if err := s.RecordPost(ctx, run.ID, ix.ID, "github", ""); err == nil {
		t.Error("RecordPost without an external id: no error")
	}
	// The run's own post (a Slack card) routes its thread to the run.
	if err := s.RecordThread(ctx, run.ID, "slack", "C1/1700000000.0"); err != nil {
		t.Fatalf("RecordThread: %v", err)
	}
	r, i, err = s.PostRef(ctx, "slack", "C1/1700000000.0")
	if err != nil || r != run.ID || i != "" {
		t.Errorf("PostRef of the run's thread = %q %q %v, want %q and no interaction", r, i, err, run.ID)
	}
	if err := s.RecordThread(ctx, "r-nope", "slack", "C1/1.0"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("RecordThread of an unknown run: err = %v, want ErrNotFound", err)
	}
	for _, bad := range [][2]string{{"", "C1/2.0"}, {"sl/ack", "C1/2.0"}, {"slack", ""}} {
		if err := s.RecordThread(ctx, run.ID, bad[0], bad[1]); err == nil {
			t.Errorf("RecordThread(%q, %q): no error", bad[0], bad[1])
		}
	}
	got, err = s.Interaction(ctx, run.ID, ix.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Posts["slack"] != "C1/1700000000.1" {
		t.Errorf("RecordThread changed the question's post: %v", got.Posts)
	}
}

func testShortIDs(t *testing.T, s BotStore) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-short", 0, "github")
	a := MustPost(t, s, run, "plan", "a?")
	b := MustPost(t, s, run, "plan", "b?")
	const pr = "github/o/r#1"
	n1, err := s.ShortID(ctx, pr, run.ID, a.ID)
	if err != nil || n1 != 1 {
		t.Fatalf("ShortID(a) = %d, %v; want 1", n1, err)
	}
	n2, _ := s.ShortID(ctx, pr, run.ID, b.ID)
	again, _ := s.ShortID(ctx, pr, run.ID, a.ID)
	other, _ := s.ShortID(ctx, "github/o/r#2", run.ID, b.ID)
	if n2 != 2 || again != 1 || other != 1 {
		t.Errorf("ShortID: b=%d a again=%d b in another scope=%d; want 2, 1, 1", n2, again, other)
	}
	all, err := s.ShortIDs(ctx, pr, run.ID)
	if diff := cmp.Diff(map[string]int{a.ID: 1, b.ID: 2}, all); err != nil || diff != "" {
		t.Errorf("ShortIDs mismatch (-want +got), err %v:\n%s", err, diff)
	}
	r, i, err := s.ShortRef(ctx, pr, 2)
	if err != nil || r != run.ID || i != b.ID {
		t.Errorf("ShortRef(2) = %q %q %v", r, i, err)
	}
	if _, _, err := s.ShortRef(ctx, pr, 3); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("ShortRef(3): err = %v, want ErrNotFound", err)
	}
	if _, err := s.ShortID(ctx, "", run.ID, a.ID); err == nil {
		t.Error("ShortID without a scope: no error")
	}
}

// Concurrent askers of one scope never share a number.
func testShortIDsConcurrent(t *testing.T, s BotStore) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-conc", 0, "github")
	const n = 20
	ids := make([]string, n)
	for i := range ids {
		ids[i] = MustPost(t, s, run, "plan", fmt.Sprintf("question %d?", i)).ID
	}
	got := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var err error
			if got[i], err = s.ShortID(ctx, "scope", run.ID, ids[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, k := range got {
		if k < 1 || k > n || seen[k] {
			t.Fatalf("numbers %v: want each of 1..%d once", got, n)
		}
		seen[k] = true
	}
}

func testRunPosts(t *testing.T, s BotStore) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-rp", 0, "github")
	if got, err := s.RunPosts(ctx, run.ID); len(got) != 0 || err != nil {
		t.Errorf("RunPosts before any = %v, %v; want none", got, err)
	}
	for _, p := range [][2]string{{"github-status-comment", "77"}, {"github-check-run", "5"}, {"github-check-run", "6"}} {
		if err := s.SetRunPost(ctx, run.ID, p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.RunPosts(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"github-status-comment": "77", "github-check-run": "6"}, got); diff != "" {
		t.Errorf("RunPosts mismatch (-want +got):\n%s", diff)
	}
	if err := s.SetRunPost(ctx, "r-none", "x", "1"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("SetRunPost on an unknown run: err = %v, want ErrNotFound", err)
	}
}

func testRunsByRef(t *testing.T, s BotStore) {
	ctx := t.Context()
	for _, r := range []*engine.Run{
		{ID: "a", Status: engine.StatusRunning, Trigger: engine.Trigger{Source: "github", Ref: "github/acme/app#7", Details: json.RawMessage(`{"pr":7}`)}},
		{ID: "b", Status: engine.StatusRunning, Trigger: engine.Trigger{Source: "github", Ref: "github/acme/app#7"}},
		{ID: "c", Status: engine.StatusRunning, Trigger: engine.Trigger{Source: "github", Ref: "github/acme/app#70"}},
		// A ref that extends another past a separator.
		{ID: "d", Status: engine.StatusRunning, Trigger: engine.Trigger{Source: "slack", Ref: "github/acme/app#7/x"}},
		{ID: "e", Status: engine.StatusRunning, Trigger: engine.Trigger{Source: "cli"}},
	} {
		if err := s.CreateRun(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	for ref, want := range map[string][]string{
		"github/acme/app#7":   {"a", "b"},
		"github/acme/app#70":  {"c"},
		"github/acme/app#7/x": {"d"},
		"github/Acme/App#7":   nil, // exactly as written: the channel normalizes
		"":                    nil,
	} {
		runs, err := s.RunsByRef(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		slices.Sort(ids)
		if diff := cmp.Diff(want, ids); diff != "" {
			t.Errorf("RunsByRef(%q) mismatch (-want +got):\n%s", ref, diff)
		}
		if ref == "github/acme/app#7" && len(runs) == 2 {
			a := runs[slices.IndexFunc(runs, func(r *engine.Run) bool { return r.ID == "a" })]
			if string(a.Trigger.Details) != `{"pr":7}` {
				t.Errorf("run a's trigger details = %s, want them as written", a.Trigger.Details)
			}
		}
	}
}

// Outbox rows written by one commit after another are performed in the
// order they were written (a question posted, then the run paused on it),
// however close together.
func testOutboxOrder(t *testing.T, s BotStore) {
	ctx := t.Context()
	MustCreateRun(t, s, "r-order", 0, "github")
	run, err := s.Acquire(ctx, "r-order", "suite")
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := range n {
		b, _ := json.Marshal(i)
		MustCommit(t, s, engine.Change{RunID: run.ID, Generation: run.Generation, Outbox: []engine.OutboxRow{{Kind: engine.OutboxRunPaused, Payload: b}}})
	}
	rows, err := s.DueOutbox(ctx, time.Now().Add(24*time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	for _, row := range rows {
		if row.RunID != run.ID || row.Kind != engine.OutboxRunPaused {
			continue // the run's start
		}
		var i int
		if err := json.Unmarshal(row.Payload, &i); err != nil || i != next {
			t.Fatalf("row %d of the outbox carries %s, want %d: rows out of the order they were written", next, row.Payload, next)
		}
		next++
	}
	if next != n {
		t.Errorf("%d rows, want %d", next, n)
	}
}

func testLinks(t *testing.T, s BotStore) {
	ctx := t.Context()
	if _, err := s.Link(ctx, "T1", "U1"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Link before any: err = %v, want ErrNotFound", err)
	}
	for _, l := range []delivery.Link{
		{Team: "T1", User: "U1", GitHubID: 7, Login: "ana", LinkedAt: suiteTime(1)},
		{Team: "T2", User: "U9", GitHubID: 7, Login: "ana", LinkedAt: suiteTime(2)}, // the same person, another workspace
		{Team: "T1", User: "U2", GitHubID: 8, Login: "bo", LinkedAt: suiteTime(3)},
	} {
		if err := s.SetLink(ctx, l); err != nil {
			t.Fatalf("SetLink(%+v): %v", l, err)
		}
	}
	got, err := s.Link(ctx, "T1", "U1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(delivery.Link{Team: "T1", User: "U1", GitHubID: 7, Login: "ana", LinkedAt: suiteTime(1)}, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("Link mismatch (-want +got):\n%s", diff)
	}
	// U2 links another account: the link to 8 is gone with it.
	if err := s.SetLink(ctx, delivery.Link{Team: "T1", User: "U2", GitHubID: 9, Login: "carol"}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DropLinks(ctx, 8); err != nil || n != 0 {
		t.Errorf("DropLinks(8) after U2 moved = %d, %v; want 0", n, err)
	}
	if n, err := s.DropLinks(ctx, 7); err != nil || n != 2 {
		t.Errorf("DropLinks(7) = %d, %v; want both of ana's links", n, err)
	}
	for _, u := range [][2]string{{"T1", "U1"}, {"T2", "U9"}} {
		if _, err := s.Link(ctx, u[0], u[1]); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("Link(%s/%s) after DropLinks: err = %v, want ErrNotFound", u[0], u[1], err)
		}
	}
	if got, err := s.Link(ctx, "T1", "U2"); err != nil || got.Login != "carol" || got.LinkedAt.IsZero() {
		t.Errorf("U2's link = %+v, %v; want carol's, dated", got, err)
	}
	for _, bad := range []delivery.Link{{Team: "T/1", User: "U", GitHubID: 1, Login: "x"}, {Team: "T", User: "", GitHubID: 1, Login: "x"}, {Team: "T", User: "U", Login: "x"}} {
		if err := s.SetLink(ctx, bad); err == nil {
			t.Errorf("SetLink(%+v): no error", bad)
		}
	}
}

func testNonces(t *testing.T, s BotStore) {
	ctx := t.Context()
	exp := time.Now().Add(time.Hour)
	var fresh atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			ok, err := s.UseNonce(ctx, "n-1", exp)
			if err != nil {
				t.Errorf("UseNonce: %v", err)
			}
			if ok {
				fresh.Add(1)
			}
		})
	}
	wg.Wait()
	if n := fresh.Load(); n != 1 {
		t.Errorf("%d of ten uses of a nonce were its first, want 1", n)
	}
	if ok, err := s.UseNonce(ctx, "n-2", exp); err != nil || !ok {
		t.Errorf("another nonce = %v, %v; want unused", ok, err)
	}
	if _, err := s.UseNonce(ctx, "", exp); err == nil {
		t.Error("an empty nonce: no error")
	}
}

func testOpenQuestions(t *testing.T, s BotStore) {
	ctx := t.Context()
	// a: two async questions, one answered.
	a := MustCreateRun(t, s, "a", 0, "github")
	MustAnswer(t, s, a.ID, MustPost(t, s, a, "ask", "First?").ID, "yes", "ana")
	a2 := MustPost(t, s, a, "other", "Second?")
	// b: paused on a human node's form, then answered and running again.
	b := MustCreateRun(t, s, "b", 0)
	form := &engine.Interaction{ID: "b_approve", NodeID: "approve", Kind: engine.KindBlocking, Questions: map[string]any{"approved": "bool"}}
	MustCommit(t, s, engine.Change{RunID: b.ID, Generation: b.Generation, Status: engine.StatusPausedWaitingHuman, Interactions: []*engine.Interaction{form}})
	// c: an async question of a run cancelled, which a resume reads.
	c := MustCreateRun(t, s, "c", 0)
	c1 := MustPost(t, s, c, "ask", "Still there?")
	MustCommit(t, s, engine.Change{RunID: c.ID, Generation: c.Generation, Status: engine.StatusCancelled})
	// d: an async question of a finished run: nobody can answer it.
	d := MustCreateRun(t, s, "d", 0)
	MustPost(t, s, d, "ask", "Too late?")
	MustCommit(t, s, engine.Change{RunID: d.ID, Generation: d.Generation, Status: engine.StatusFinished})
	// e: paused on the await_answers tool (no question of its own), with
	// its async question open; f: a form of a cancelled run, which only a
	// paused run takes.
	e := MustCreateRun(t, s, "e", 0)
	e1 := MustPost(t, s, e, "agent", "Which branch?")
	await := &engine.Interaction{ID: "e_agent", NodeID: "agent", Kind: engine.KindAwait, Questions: map[string]any{engine.QuestionKey: "waiting"}}
	MustCommit(t, s, engine.Change{RunID: e.ID, Generation: e.Generation, Status: engine.StatusPausedWaitingHuman, Interactions: []*engine.Interaction{await}})
	f := MustCreateRun(t, s, "f", 0)
	ffrom := &engine.Interaction{ID: "f_approve", NodeID: "approve", Kind: engine.KindBlocking, Questions: map[string]any{"approved": "bool"}}
	MustCommit(t, s, engine.Change{RunID: f.ID, Generation: f.Generation, Status: engine.StatusPausedWaitingHuman, Interactions: []*engine.Interaction{ffrom}})
	MustCommit(t, s, engine.Change{RunID: f.ID, Generation: f.Generation, Status: engine.StatusCancelled})

	open := func() []delivery.OpenQuestion {
		t.Helper()
		qs, err := s.OpenQuestions(ctx)
		if err != nil {
			t.Fatalf("OpenQuestions: %v", err)
		}
		for i := 1; i < len(qs); i++ {
			if qs[i].RequestedAt.After(qs[i-1].RequestedAt) {
				t.Errorf("open questions not newest first: %s at %s after %s at %s", qs[i].InteractionID, qs[i].RequestedAt, qs[i-1].InteractionID, qs[i-1].RequestedAt)
			}
		}
		return qs
	}
	ids := func(qs []delivery.OpenQuestion) []string {
		var out []string
		for _, q := range qs {
			out = append(out, q.RunID+" "+q.InteractionID)
		}
		slices.Sort(out)
		return out
	}
	qs := open()
	want := []string{"a " + a2.ID, "b b_approve", "c " + c1.ID, "e " + e1.ID}
	if diff := cmp.Diff(want, ids(qs)); diff != "" {
		t.Fatalf("open questions (-want +got):\n%s", diff)
	}
	for _, q := range qs {
		if q.Run == nil || q.Run.ID != q.RunID || q.RequestedAt.IsZero() {
			t.Errorf("open question %s: run %v, requested %s", q.InteractionID, q.Run, q.RequestedAt)
		}
		if q.InteractionID == "b_approve" && (q.Kind != engine.KindBlocking || q.Run.Status != engine.StatusPausedWaitingHuman) {
			t.Errorf("the form: kind %q, run %s", q.Kind, q.Run.Status)
		}
	}
	// The form answered, its run running again; the async question of e
	// answered too.
	answered := *form
	answered.Answers, answered.AnsweredAt, answered.AnsweredBy, answered.Via = map[string]any{"approved": true}, time.Now(), "ana", "page"
	MustCommit(t, s, engine.Change{RunID: b.ID, Generation: b.Generation, Status: engine.StatusRunning, Interactions: []*engine.Interaction{&answered}})
	MustAnswer(t, s, e.ID, e1.ID, "main", "ana")
	if diff := cmp.Diff([]string{"a " + a2.ID, "c " + c1.ID}, ids(open())); diff != "" {
		t.Errorf("open questions after two answers (-want +got):\n%s", diff)
	}
	// A run that fails leaves none.
	MustCommit(t, s, engine.Change{RunID: a.ID, Generation: a.Generation, Status: engine.StatusFailed})
	if diff := cmp.Diff([]string{"c " + c1.ID}, ids(open())); diff != "" {
		t.Errorf("open questions after run a failed (-want +got):\n%s", diff)
	}
}
