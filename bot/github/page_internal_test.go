package github

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// The page's permissions are the PR commands': write permission answers,
// cancels and resumes; an answerer of .iterion.yml answers only; others
// are told why not. A page's look reuses a recent answer, an action asks
// again.
func TestPagePermissions(t *testing.T) {
	app, fake := appOnFake(t)
	fake.Files[".iterion.yml"] = "answerers: [bo]\n"
	fake.Perms["bo"] = "read"
	fake.Perms["cy"] = "read"
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &PagePermissions{perms: app, client: app.Installation, now: func() time.Time { return now }, cache: map[string]cachedPermission{}}
	run := &engine.Run{ID: "r", Trigger: Origin{Repo: "acme/app", PR: 7, Installation: 42}.Trigger("ana")}
	ctx := context.Background()
	tests := []struct {
		login, act string
		ok         bool
		why        string
	}{
		{"ana", ActAnswer, true, ""},
		{"ana", ActCancel, true, ""},
		{"bo", ActAnswer, true, ""},
		{"bo", ActResume, false, "resuming a run needs write permission on acme/app, which you do not have"},
		{"cy", ActAnswer, false, "you have no write permission on acme/app and are not under answerers in its .iterion.yml"},
	}
	for _, tc := range tests {
		ok, why, err := p.May(ctx, run, tc.login, tc.act, false)
		if err != nil || ok != tc.ok || why != tc.why {
			t.Errorf("May(%s, %s) = %v %q %v, want %v %q", tc.login, tc.act, ok, why, err, tc.ok, tc.why)
		}
	}
	who, err := p.Who(ctx, run)
	if err != nil || who != "people with write permission on acme/app, and bo (answerers)" {
		t.Errorf("Who = %q, %v", who, err)
	}
	// Taken away on GitHub: a look within the minute still shows it, an
	// action does not.
	fake.Perms["ana"] = "read"
	if ok, _, _ := p.May(ctx, run, "ana", ActCancel, false); !ok {
		t.Error("a look within a minute asked GitHub again")
	}
	if ok, why, _ := p.May(ctx, run, "ana", ActCancel, true); ok || !strings.Contains(why, "needs write permission") {
		t.Errorf("an action used the cached permission: %v %q", ok, why)
	}
	cli := &engine.Run{ID: "c", Trigger: engine.Trigger{Source: "cli"}}
	if ok, why, _ := p.May(ctx, cli, "ana", ActAnswer, true); ok || why != "this run was not started from a GitHub repository" {
		t.Errorf("a CLI run: %v %q", ok, why)
	}
}

// With the admin page's public address, the status comment and the check
// run link the run's page, and the question comment the question's.
func TestRelayLinksThePage(t *testing.T) {
	world := newWorld(t)
	db, fake := world.db, world.fake
	ctx := context.Background()
	run := createPRRun(t, db, "q-page")
	ix, err := db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, NodeID: "draft", Questions: map[string]any{engine.QuestionKey: "Which licence?"}})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRelay(RelayOptions{Store: db, Replies: world.commenter(), Log: testLog(t), PageURL: "https://iterion.example.com/"})
	r.now = world.clock.Now
	r.Drain(ctx)
	status := fake.BotComments(7, Marker("status-q-page"))
	if len(status) != 1 || !strings.Contains(status[0].Body, "[See the run on iterion's admin page](https://iterion.example.com/runs/q-page)") {
		t.Errorf("status comment = %+v", status)
	}
	q := fake.BotComments(7, "**Question Q1**")
	if len(q) != 1 || !strings.Contains(q[0].Body, "Or answer it on [iterion's admin page](https://iterion.example.com/q/"+ix.ID+")") {
		t.Errorf("question comment = %+v", q)
	}
	if cr := fake.CheckRuns(); len(cr) != 1 || cr[0].DetailsURL != "https://iterion.example.com/runs/q-page" {
		t.Errorf("check runs = %+v, want the run's page as details", cr)
	}
}
