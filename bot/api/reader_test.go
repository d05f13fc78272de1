package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// questionsWorld is a store with the questions of runs of two
// repositories and a CLI run, served by the API with their places.
type questionsWorld struct {
	db   *store.DB
	base string
}

func newQuestionsWorld(t *testing.T) *questionsWorld {
	t.Helper()
	db, err := store.Open("", store.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	now := time.Now()
	mk := func(id, repo string, age time.Duration) *engine.Run {
		r := &engine.Run{ID: id, Workflow: "w", Status: engine.StatusRunning, CreatedAt: now.Add(-age), UpdatedAt: now,
			Trigger: engine.Trigger{Source: "cli"}}
		if repo != "" {
			r.Trigger = engine.Trigger{Source: "github", Details: json.RawMessage(`{"repo":"` + repo + `","pr":7}`)}
		}
		if err := db.CreateRun(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
		r, err := db.Acquire(ctx, id, "test")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	post := func(r *engine.Run, node, text string, opts ...engine.Option) *engine.Interaction {
		qs := map[string]any{engine.QuestionKey: text}
		if len(opts) > 0 {
			qs[engine.OptionsKey] = opts
		}
		ix, err := db.PostQuestion(ctx, engine.PostRequest{RunID: r.ID, Generation: r.Generation, NodeID: node, Questions: qs})
		if err != nil {
			t.Fatal(err)
		}
		return ix
	}
	app := mk("r-app", "acme/app", time.Hour)
	post(app, "review", "Check the docs too?", engine.Option{ID: "yes", Label: "Yes"}, engine.Option{ID: "no", Label: "No"})
	lib := mk("r-lib", "acme/lib", 2*time.Hour)
	ix := post(lib, "triage", "Which label?")
	if err := db.RecordPost(ctx, lib.ID, ix.ID, "github", "555"); err != nil {
		t.Fatal(err)
	}
	cli := mk("r-cli", "", 3*time.Hour)
	post(cli, "ask", "Go on?")
	place := func(r *engine.Run) api.Place {
		var o struct {
			Repo string `json:"repo"`
			PR   int    `json:"pr"`
		}
		if r.Trigger.Source != "github" || json.Unmarshal(r.Trigger.Details, &o) != nil {
			return api.Place{}
		}
		return api.Place{Channel: "github", Repo: o.Repo, PR: o.PR}
	}
	e := engine.New(engine.Options{Store: db})
	h := api.NewServer(e, db, api.Options{Place: place}).Handler()
	srv := httptest.NewServer(api.RequireToken(tcpToken, tcpName, h))
	t.Cleanup(srv.Close)
	return &questionsWorld{db: db, base: srv.URL}
}

// get reads path as JSON into v and returns the status.
func (w *questionsWorld) get(t *testing.T, path string, v any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", w.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+tcpToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode
}

func TestQuestionsAcrossRuns(t *testing.T) {
	w := newQuestionsWorld(t)
	tests := []struct {
		name  string
		query string
		want  []string // run ids, in order
		total int
	}{
		{"every open question, newest first", "", []string{"r-cli", "r-lib", "r-app"}, 3},
		{"one repository, any case", "?repo=ACME/app", []string{"r-app"}, 1},
		{"one run", "?run=r-lib", []string{"r-lib"}, 1},
		{"a page of one", "?limit=1&offset=1", []string{"r-lib"}, 3},
		{"past the end", "?offset=9", nil, 3},
		{"asked at least an hour ago", "?older_than=1h", nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var page struct {
				Questions []api.Question `json:"questions"`
				Total     int            `json:"total"`
			}
			if code := w.get(t, "/api/questions"+tc.query, &page); code != 200 {
				t.Fatalf("status %d", code)
			}
			var got []string
			for _, q := range page.Questions {
				got = append(got, q.RunID)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || page.Total != tc.total {
				t.Errorf("runs (-want +got):\n%s total = %d, want %d", diff, page.Total, tc.total)
			}
		})
	}
	var page struct {
		Questions []api.Question `json:"questions"`
	}
	w.get(t, "/api/questions?repo=acme/app", &page)
	q := page.Questions[0]
	if q.Text != "Check the docs too?" || len(q.Options) != 2 || q.Options[0].Label != "Yes" || q.Place.Repo != "acme/app" || q.Place.PR != 7 || q.AskedAt.IsZero() || !q.Pending() {
		t.Errorf("question = %+v", q)
	}
	var bad struct {
		Error string `json:"error"`
	}
	if code := w.get(t, "/api/questions?older_than=soon", &bad); code != 400 || !strings.Contains(bad.Error, "write one such as 30m") {
		t.Errorf("a bad duration: %d %q", code, bad.Error)
	}
}

func TestQuestionAudit(t *testing.T) {
	w := newQuestionsWorld(t)
	ctx := context.Background()
	id := "r-lib_triage_async_1"
	if _, err := w.db.Answer(ctx, engine.AnswerRequest{RunID: "r-lib", InteractionID: id, Text: "bug", By: "ana", Via: "page"}); err != nil {
		t.Fatal(err)
	}
	var q api.Question
	if code := w.get(t, "/api/runs/r-lib/interactions/"+id, &q); code != 200 {
		t.Fatalf("status %d", code)
	}
	var what []string
	for _, e := range q.Audit {
		what = append(what, e.What+" "+e.Channel+e.Post+e.By+"/"+e.Via)
	}
	if diff := cmp.Diff([]string{"asked /", "posted github555/", "answered ana/page"}, what); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	if q.Answer != "bug" || q.AnsweredBy != "ana" || q.Via != "page" || q.Pending() {
		t.Errorf("answered question = %+v", q)
	}
	var all struct {
		Interactions []api.Question `json:"interactions"`
	}
	if code := w.get(t, "/api/runs/r-lib/interactions", &all); code != 200 || len(all.Interactions) != 1 || len(all.Interactions[0].Audit) != 3 {
		t.Errorf("run's questions: %d %+v", code, all)
	}
	// The answered question has left the open ones.
	var page struct {
		Total int `json:"total"`
	}
	w.get(t, "/api/questions", &page)
	if page.Total != 2 {
		t.Errorf("open questions after an answer: %d, want 2", page.Total)
	}
}

func TestRunsFiltersAndResume(t *testing.T) {
	w := newQuestionsWorld(t)
	var page struct {
		Runs  []engine.Run `json:"runs"`
		Total int          `json:"total"`
	}
	if code := w.get(t, "/api/runs?repo=acme/lib", &page); code != 200 || page.Total != 1 || page.Runs[0].ID != "r-lib" {
		t.Errorf("runs of acme/lib: %d %+v", code, page)
	}
	if code := w.get(t, "/api/runs?channel=cli", &page); code != 200 || page.Total != 1 || page.Runs[0].ID != "r-cli" {
		t.Errorf("runs of the CLI: %d %+v", code, page)
	}
	var bad struct {
		Error, Code string
	}
	if code := w.get(t, "/api/runs?status=done", &bad); code != 400 || !strings.Contains(bad.Error, "paused_waiting_human") {
		t.Errorf("an unknown status: %d %+v", code, bad)
	}
	req, _ := http.NewRequest("POST", w.base+"/api/runs/r-app/resume", nil)
	req.Header.Set("Authorization", "Bearer "+tcpToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&bad)
	if resp.StatusCode != http.StatusConflict || bad.Code != "not_resumable" || !strings.Contains(bad.Error, "is running") {
		t.Errorf("resuming a running run: %d %+v", resp.StatusCode, bad)
	}
}

// A list's query string is hostile input: it parses or is refused with a
// message, never panics, and what it takes is never negative.
func FuzzParseQuestionFilter(f *testing.F) {
	for _, s := range []string{"", "repo=acme/app", "older_than=2h&deadline_within=30m", "offset=-1", "limit=x", "older_than=-1h", "run=%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		got, err := api.ParseQuestionFilter(q)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty refusal")
			}
			return
		}
		if got.Offset < 0 || got.Limit < 0 || got.OlderThan < 0 || got.DeadlineWithin < 0 {
			t.Fatalf("%q parsed to %+v", raw, got)
		}
	})
}

// A question's reminders, escalation and expiry show on it: its deadline
// (the expiry, which deadline_within filters by), its next reminder,
// whom it was escalated to, and in its audit trail, ending with its
// default when it expired.
func TestQuestionFollowUp(t *testing.T) {
	w := newQuestionsWorld(t)
	ctx := context.Background()
	now := time.Now()
	r := &engine.Run{ID: "r-fu", Workflow: "w", Status: engine.StatusRunning, CreatedAt: now, UpdatedAt: now, Trigger: engine.Trigger{Source: "cli"}}
	if err := w.db.CreateRun(ctx, r, nil); err != nil {
		t.Fatal(err)
	}
	fu := &engine.FollowUp{Remind: 10 * time.Minute, NextReminder: now.Add(-time.Second), EscalateAt: now.Add(-time.Second), EscalateTo: []string{"alice"},
		ExpireAt: now.Add(30 * time.Minute), Default: map[string]string{engine.QuestionKey: "skip"}}
	ix, err := w.db.PostQuestion(ctx, engine.PostRequest{RunID: r.ID, NodeID: "ask", Questions: map[string]any{engine.QuestionKey: "Which port?"}, FollowUp: fu})
	if err != nil {
		t.Fatal(err)
	}
	reminded, escalated := *fu, *fu
	reminded.Reminders, reminded.NextReminder = 1, now.Add(10*time.Minute)
	escalated.Reminders, escalated.NextReminder, escalated.Escalated = 1, now.Add(10*time.Minute), true
	for _, step := range []struct {
		what string
		f    *engine.FollowUp
		ev   engine.Event
	}{
		{engine.TimerRemind, &reminded, engine.Event{Type: engine.EventQuestionReminded, Data: map[string]any{"interaction_id": ix.ID, "reminder": 1}}},
		{engine.TimerEscalate, &escalated, engine.Event{Type: engine.EventQuestionEscalated, Data: map[string]any{"interaction_id": ix.ID, "to": []string{"alice"}}}},
	} {
		if _, fired, err := w.db.FireTimer(ctx, engine.Timer{Due: now.Add(-time.Second), RunID: r.ID, InteractionID: ix.ID, What: step.what},
			&engine.TimerFire{FollowUp: step.f, Events: []engine.Event{step.ev}}); err != nil || !fired {
			t.Fatalf("firing the %s: %v %v", step.what, fired, err)
		}
	}
	var page struct {
		Questions []api.Question `json:"questions"`
	}
	w.get(t, "/api/questions?deadline_within=1h", &page)
	if len(page.Questions) != 1 || page.Questions[0].ID != ix.ID {
		t.Fatalf("deadline_within=1h keeps %+v, want the expiring question alone", page.Questions)
	}
	q := page.Questions[0]
	if !q.Deadline.Equal(fu.ExpireAt) || !q.NextReminder.Equal(now.Add(10*time.Minute)) || !slices.Equal(q.EscalatedTo, []string{"alice"}) {
		t.Errorf("deadline %s, next reminder %s, escalated to %v", q.Deadline, q.NextReminder, q.EscalatedTo)
	}
	if _, err := w.db.Answer(ctx, engine.AnswerRequest{RunID: r.ID, InteractionID: ix.ID, Text: "skip", By: engine.ExpiryBy, Via: "timer"}); err != nil {
		t.Fatal(err)
	}
	w.get(t, "/api/runs/r-fu/interactions/"+ix.ID, &q)
	var trail []string
	for _, e := range q.Audit {
		trail = append(trail, e.What+": "+e.Detail)
	}
	want := []string{"asked: by node ask", "reminded: reminder 1", "escalated: to alice", "expired, default used: skip"}
	if diff := cmp.Diff(want, trail); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	if !q.Expired() {
		t.Errorf("the question does not say it expired: %+v", q)
	}
}
