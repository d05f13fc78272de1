package github

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakegithub"
	"github.com/iterion-bot/iterion/store"
)

func compile(t *testing.T, src string) *dsl.Workflow {
	t.Helper()
	w, ds := dsl.CompileSource("w.bot", []byte(src))
	if ds.HasErrors() {
		t.Fatal(dsl.RenderString(ds, map[string][]byte{"w.bot": []byte(src)}))
	}
	return w
}

// Runs started from a PR get one status comment and a check run, kept in
// line with the run from the outbox rows the engine wrote; a run from
// elsewhere gets nothing.
func TestRelayStatusAndChecks(t *testing.T) {
	world := newWorld(t)
	db, fake, e := world.db, world.fake, world.engine(t)
	ctx := context.Background()
	trig := Origin{Repo: "acme/app", PR: 7, Installation: 42, HeadSHA: "abc1234def"}.Trigger("ana")
	ok := compile(t, "schema out:\n  text: string\ntool t:\n  command: \"printf '{\\\"text\\\": \\\"ok @team\\\"}'\"\n  output: out\n  publish: report\nworkflow good:\n  entry: t\n  t -> done\n")
	bad := compile(t, "tool t:\n  command: \"echo broken >&2; exit 3\"\nworkflow bad:\n  entry: t\n  t -> done\n")
	for _, r := range []struct {
		w  *dsl.Workflow
		id string
		tr engine.Trigger
	}{{ok, "good-1", trig}, {bad, "bad-1", trig}, {ok, "cli-1", engine.Trigger{Source: "cli"}}} {
		var channels []string
		if r.tr.Source == "github" {
			channels = []string{"github"}
		}
		if _, err := e.Start(ctx, engine.StartRequest{Workflow: r.w, RunID: r.id, Trigger: r.tr, Channels: channels, WorkDir: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
		// The next run starts later: within one instant, the order of two
		// runs' outbox rows is left to chance.
		world.clock.Add(time.Second)
	}
	relay := world.relay(t, world.commenter())
	relay.Drain(ctx)
	relay.Drain(ctx) // nothing twice
	comments := fake.Comments(7)
	if len(comments) != 2 {
		t.Fatalf("%d comments, want one status comment per PR run: %+v", len(comments), comments)
	}
	for _, c := range comments {
		// Written once with its body: no edit of a new comment with the
		// body it was just written with.
		if c.Edits != 0 {
			t.Errorf("status comment %d edited %d times after it was written", c.ID, c.Edits)
		}
	}
	good, badc := comments[0].Body, comments[1].Body
	for _, want := range []string{"✅ **iterion** · run `good-1` of `good` on abc1234 · **Finished**", "Started by `ana`. 1 step done.", "**Published artifacts:**", "<code>report</code> (version 1)", "\"text\": \"ok @\u200bteam\"", Marker("status-good-1")} {
		if !strings.Contains(good, want) {
			t.Errorf("status comment of good-1 lacks %q:\n%s", want, good)
		}
	}
	for _, want := range []string{"❌ **iterion** · run `bad-1` of `bad`", "**Failed**", "Failure `EXECUTION_FAILED`", "broken"} {
		if !strings.Contains(badc, want) {
			t.Errorf("status comment of bad-1 lacks %q:\n%s", want, badc)
		}
	}
	checks := fake.CheckRuns()
	if len(checks) != 2 {
		t.Fatalf("%d check runs, want 2: %+v", len(checks), checks)
	}
	for i, want := range []struct{ name, ext, state string }{{"iterion / good", "good-1/1", "completed/success"}, {"iterion / bad", "bad-1/1", "completed/failure"}} {
		c := checks[i]
		if c.Name != want.name || c.ExternalID != want.ext || c.HeadSHA != "abc1234def" || c.History[len(c.History)-1] != want.state {
			t.Errorf("check run %d = %+v, want %+v", i, c, want)
		}
		if c.DetailsURL == "" || !strings.Contains(c.DetailsURL, "#issuecomment-") {
			t.Errorf("check run %d links %q, want the status comment", i, c.DetailsURL)
		}
	}
	if rows, _ := db.DueOutbox(ctx, world.clock.Now().Add(time.Hour), 0); len(rows) != 0 {
		t.Errorf("outbox rows left: %+v", rows)
	}
}

// A question gets a comment with its short id, options and how to
// answer; an answer given elsewhere edits it to say who answered, and
// the status comment lists the open questions with links.
func TestRelayQuestions(t *testing.T) {
	world := newWorld(t)
	db, fake := world.db, world.fake
	ctx := context.Background()
	run := createPRRun(t, db, "q-1")
	post := func(text string, opts ...engine.Option) *engine.Interaction {
		q := map[string]any{engine.QuestionKey: text}
		if len(opts) > 0 {
			q[engine.OptionsKey] = opts
		}
		ix, err := db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, NodeID: "draft", Questions: q})
		if err != nil {
			t.Fatal(err)
		}
		return ix
	}
	first := post("Which licence? cc @acme/legal", engine.Option{ID: "mit", Label: "MIT"}, engine.Option{ID: "apache", Label: "Apache-2.0"})
	relay := world.relay(t, world.commenter())
	relay.Drain(ctx)
	second := post("Minimum Go version?")
	relay.Drain(ctx)

	qs := fake.BotComments(7, "**Question Q")
	if len(qs) != 2 {
		t.Fatalf("%d question comments, want 2: %+v", len(qs), fake.Comments(7))
	}
	want := "**Question Q1** · from `draft` in run `q-1`\n\n> Which licence? cc @\u200bacme/legal\n\nOptions:\n1. MIT\n2. Apache-2.0\n\n**To answer**, reply quoting this comment with an option's number or label, or your own words, or comment:\n\n```\n/iterion answer Q1 <your answer>\n```\n"
	if !strings.HasPrefix(qs[0].Body, want) {
		t.Errorf("first question comment:\n%s\nwant it to start with:\n%s", qs[0].Body, want)
	}
	if !strings.Contains(qs[1].Body, "**Question Q2**") {
		t.Errorf("second question comment = %q", qs[1].Body)
	}
	// The bot's own comment never reads as a command, and a quote of it
	// names its question.
	if cmds, problems := ParseComment(qs[0].Body); len(cmds)+len(problems) != 0 {
		t.Errorf("the question comment parses as commands: %+v %+v", cmds, problems)
	}
	if r, ok := ParseReply(quoteAll(qs[0].Body) + "\n2"); !ok || len(r.Questions) != 1 || r.Questions[0] != 1 || r.Text != "2" {
		t.Errorf("a quote reply of Q1 reads as %+v, %v", r, ok)
	}
	for _, ix := range []*engine.Interaction{first, second} {
		got, _ := db.Interaction(ctx, run.ID, ix.ID)
		if got.Posts["github"] == "" {
			t.Errorf("%s: no comment recorded", ix.ID)
		}
	}
	status := fake.BotComments(7, Marker("status-q-1"))
	if len(status) != 1 || !strings.Contains(status[0].Body, "**Waiting for answers:**\n- [Q1](") || !strings.Contains(status[0].Body, "- [Q2](") {
		t.Fatalf("status comment = %+v", status)
	}
	checks := fake.CheckRuns()
	if len(checks) != 1 || checks[0].Status != "in_progress" {
		t.Errorf("check runs = %+v, want one in progress", checks)
	}

	if _, err := db.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: first.ID, Text: "MIT", By: "ana", Via: "slack"}); err != nil {
		t.Fatal(err)
	}
	relay.Drain(ctx)
	q1 := oneBotComment(t, fake, 7, "**Question Q1**")
	if !strings.Contains(q1.Body, "✅ Answered by `ana` via Slack:\n\n> MIT") || strings.Contains(q1.Body, "To answer") || q1.Edits != 1 {
		t.Errorf("answered question comment (%d edits):\n%s", q1.Edits, q1.Body)
	}
	status = fake.BotComments(7, Marker("status-q-1"))
	if strings.Contains(status[0].Body, "[Q1]") || !strings.Contains(status[0].Body, "[Q2]") {
		t.Errorf("status after the answer:\n%s", status[0].Body)
	}
	if n := len(fake.Comments(7)); n != 3 {
		t.Errorf("%d comments, want 3 (an answer edits, it does not post)", n)
	}
}

func quoteAll(s string) string {
	return "> " + strings.ReplaceAll(s, "\n", "\n> ")
}

// A PR GitHub refuses to comment on is retried with back-off, doubling
// from a second on the relay's clock, then given up.
func TestRelayRetries(t *testing.T) {
	world := newWorld(t)
	db, fake := world.db, world.fake
	ctx := context.Background()
	w := compile(t, "compute c:\n  expr:\n    x: \"1\"\nworkflow w:\n  entry: c\n  c -> done\n")
	// PR 8 does not exist on the fake: every post is a 404.
	if _, err := world.engine(t).Start(ctx, engine.StartRequest{Workflow: w, RunID: "gone-1", Channels: []string{"github"},
		Trigger: Origin{Repo: "acme/app", PR: 8, Installation: 42}.Trigger("")}); err != nil {
		t.Fatal(err)
	}
	relay := world.relay(t, world.commenter())
	wait := time.Second
	for attempt := 1; attempt <= MaxOutboxAttempts; attempt++ {
		relay.Drain(ctx)
		now := world.clock.Now()
		rows, err := db.DueOutbox(ctx, now.Add(24*time.Hour), 0)
		if err != nil {
			t.Fatal(err)
		}
		if attempt == MaxOutboxAttempts {
			if len(rows) != 0 {
				t.Fatalf("after %d attempts the row is still there: %+v", attempt, rows)
			}
			break
		}
		if len(rows) != 2 || rows[0].Attempts != attempt || rows[1].Attempts != attempt || !rows[0].NextAt.Equal(now.Add(wait)) {
			t.Fatalf("after attempt %d: %+v, want the run's two rows postponed by %s with %d attempts", attempt, rows, wait, attempt)
		}
		world.clock.Add(wait - time.Millisecond)
		if due, _ := db.DueOutbox(ctx, world.clock.Now(), 0); len(due) != 0 {
			t.Fatalf("after attempt %d the row is due before its %s back-off", attempt, wait)
		}
		world.clock.Add(time.Millisecond)
		wait *= 2
	}
	if n := len(fake.Comments(8)); n != 0 {
		t.Errorf("%d comments on a PR that does not exist", n)
	}
}

// testLog logs to the test's output.
func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Progress reaches the status comment at most once per StatusEvery per
// run; a run whose status did not change costs no edit.
func TestRelayProgressPace(t *testing.T) {
	// The relay and the store read one clock: outbox rows are due, and
	// progress is paced, by the same time.
	world := newWorld(t)
	db, fake := world.db, world.fake
	ctx := context.Background()
	run := createPRRun(t, db, "p-1")
	relay := world.relay(t, world.commenter())
	relay.Drain(ctx) // run_started: the status comment
	edits := func() int { return oneBotComment(t, fake, 7, Marker("status-p-1")).Edits }
	base := edits()
	step := func(node string) {
		t.Helper()
		if err := db.Commit(ctx, engine.Change{RunID: run.ID, Events: []engine.Event{
			{Type: engine.EventNodeStarted, NodeID: node}, {Type: engine.EventNodeFinished, NodeID: node}}}); err != nil {
			t.Fatal(err)
		}
		relay.Touch(run.ID)
	}
	step("a")
	world.clock.Add(time.Second)
	relay.SyncTouched(ctx)
	if edits() != base {
		t.Fatalf("progress edited %d times within StatusEvery of the last sync", edits()-base)
	}
	step("b")
	world.clock.Add(relay.statusEvery)
	relay.SyncTouched(ctx)
	if edits() != base+1 {
		t.Fatalf("%d edits after StatusEvery, want 1", edits()-base)
	}
	if body := oneBotComment(t, fake, 7, Marker("status-p-1")).Body; !strings.Contains(body, "2 steps done") {
		t.Errorf("status = %q, want the two steps", body)
	}
	// Touched without a change: nothing to edit.
	relay.Touch(run.ID)
	world.clock.Add(relay.statusEvery)
	relay.SyncTouched(ctx)
	if edits() != base+1 {
		t.Errorf("an unchanged status was edited")
	}
}

// An App without the Checks permission still gets its status comments;
// the refused check runs fail no outbox row.
func TestRelayWithoutChecksPermission(t *testing.T) {
	world := newWorld(t)
	db, fake := world.db, world.fake
	ctx := context.Background()
	fake.SetFail(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "check-runs") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"message": "Resource not accessible by integration"}`))
			return true
		}
		return false
	})
	createPRRun(t, db, "nc-1")
	world.relay(t, world.commenter()).Drain(ctx)
	if n := len(fake.BotComments(7, Marker("status-nc-1"))); n != 1 {
		t.Errorf("%d status comments, want 1", n)
	}
	if rows, _ := db.DueOutbox(ctx, world.clock.Now().Add(24*time.Hour), 0); len(rows) != 0 {
		t.Errorf("rows left to retry: %+v", rows)
	}
}

// The event log folds into steps done and steps running, the same in one
// read or in pieces; a node run again in a loop is named once.
func TestProgressFold(t *testing.T) {
	evs := []engine.Event{
		{Seq: 1, Type: engine.EventNodeStarted, NodeID: "a"}, {Seq: 2, Type: engine.EventNodeFinished, NodeID: "a"},
		{Seq: 3, Type: engine.EventNodeStarted, NodeID: "b"}, {Seq: 4, Type: engine.EventNodeStarted, NodeID: "c"},
		{Seq: 5, Type: engine.EventNodeFinished, NodeID: "b"}, {Seq: 6, Type: engine.EventNodeStarted, NodeID: "a"},
		{Seq: 7, Type: engine.EventNodeStarted, NodeID: "d"}, {Seq: 8, Type: engine.EventRunPaused},
		{Seq: 9, Type: engine.EventRunResumed}, {Seq: 10, Type: engine.EventNodeStarted, NodeID: "d"},
	}
	whole := newProgress()
	whole.add(evs)
	pieces := newProgress()
	pieces.add(evs[:4])
	pieces.add(evs[2:7]) // overlapping reads fold each event once
	pieces.add(evs[7:])
	for name, p := range map[string]*progress{"whole": whole, "pieces": pieces} {
		if p.done != 2 || !slices.Equal(p.current(), []string{"d"}) {
			t.Errorf("%s: done %d, current %v; want 2 and [d]", name, p.done, p.current())
		}
	}
	mid := newProgress()
	mid.add(evs[:7])
	if !slices.Equal(mid.current(), []string{"a", "c", "d"}) {
		t.Errorf("current %v, want a, c, d in the order first started", mid.current())
	}
}

// createPRRun stores a running run of "review" started from acme/app#7.
func createPRRun(tb testing.TB, db *store.DB, id string) *engine.Run {
	run := &engine.Run{ID: id, Workflow: "review", Status: engine.StatusRunning, Channels: []string{"github"},
		Trigger: Origin{Repo: "acme/app", PR: 7, Installation: 42, HeadSHA: "abc1234def"}.Trigger("")}
	if err := db.CreateRun(context.Background(), run, nil); err != nil {
		tb.Fatal(err)
	}
	return run
}

// oneBotComment is the one bot comment on pr that contains substr; the test
// fails, saying what it found, when there is not exactly one.
func oneBotComment(tb testing.TB, fake *fakegithub.Server, pr int, substr string) fakegithub.Comment {
	tb.Helper()
	found := fake.BotComments(pr, substr)
	if len(found) != 1 {
		var bodies []string
		for _, c := range fake.Comments(pr) {
			bodies = append(bodies, fmt.Sprintf("%q", c.Body))
		}
		tb.Fatalf("%d bot comments on #%d contain %q, want 1; the PR has: %s", len(found), pr, substr, strings.Join(bodies, ", "))
	}
	return found[0]
}
