package github

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
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

// Runs started from a PR get their ends posted on it, once each, from
// the outbox rows the engine wrote; a run from elsewhere gets nothing.
func TestRelay(t *testing.T) {
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e := engine.New(engine.Options{Store: db, Poll: time.Hour})
	ctx := context.Background()
	gh := engine.Trigger{Source: "github", Repo: "acme/app", PR: 7, Installation: 42, Actor: "ana"}
	ok := compile(t, "schema out:\n  text: string\ntool t:\n  command: \"printf '{\\\"text\\\": \\\"ok\\\"}'\"\n  output: out\nworkflow good:\n  entry: t\n  t -> done\n")
	bad := compile(t, "tool t:\n  command: \"echo broken >&2; exit 3\"\nworkflow bad:\n  entry: t\n  t -> done\n")
	for _, r := range []struct {
		w  *dsl.Workflow
		id string
		tr engine.Trigger
	}{{ok, "good-1", gh}, {bad, "bad-1", gh}, {ok, "cli-1", engine.Trigger{Source: "cli"}}} {
		var channels []string
		if r.tr.Source == "github" {
			channels = []string{"github"}
		}
		if _, err := e.Start(ctx, engine.StartRequest{Workflow: r.w, RunID: r.id, Trigger: r.tr, Channels: channels, WorkDir: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
	}
	cs := &commentServer{}
	cm, _ := newCommenter(cs.serve(t))
	relay := NewRelay(db, cm, nil)
	relay.Drain(ctx)
	relay.Drain(ctx) // nothing twice
	if len(cs.comments) != 2 {
		t.Fatalf("%d comments, want 2", len(cs.comments))
	}
	if got := cs.comments[0].GetBody(); !strings.HasPrefix(got, "Run `good-1` of `good` finished.") {
		t.Errorf("first comment = %q", got)
	}
	if got := cs.comments[1].GetBody(); !strings.Contains(got, "Run `bad-1` of `bad` ended failed_resumable [EXECUTION_FAILED]") || !strings.Contains(got, "broken") {
		t.Errorf("second comment = %q", got)
	}
	if rows, _ := db.DueOutbox(ctx, time.Now().Add(time.Hour), 0); len(rows) != 0 {
		t.Errorf("outbox rows left: %+v", rows)
	}
}

// A PR GitHub refuses to comment on is retried with back-off, then given up.
func TestRelayRetries(t *testing.T) {
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e := engine.New(engine.Options{Store: db, Poll: time.Hour})
	ctx := context.Background()
	w := compile(t, "compute c:\n  expr:\n    x: \"1\"\nworkflow w:\n  entry: c\n  c -> done\n")
	// PR 8 does not exist on the fake: every post is a 404.
	if _, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "gone-1", Channels: []string{"github"},
		Trigger: engine.Trigger{Source: "github", Repo: "acme/app", PR: 8, Installation: 42}}); err != nil {
		t.Fatal(err)
	}
	cs := &commentServer{}
	cm, _ := newCommenter(cs.serve(t))
	relay := NewRelay(db, cm, nil)
	clock := time.Now()
	relay.now = func() time.Time { return clock }
	for attempt := 1; attempt <= MaxOutboxAttempts; attempt++ {
		relay.Drain(ctx)
		rows, err := db.DueOutbox(ctx, clock.Add(24*time.Hour), 0)
		if err != nil {
			t.Fatal(err)
		}
		if attempt == MaxOutboxAttempts {
			if len(rows) != 0 {
				t.Fatalf("after %d attempts the row is still there: %+v", attempt, rows)
			}
			break
		}
		if len(rows) != 1 || rows[0].Attempts != attempt || !rows[0].NextAt.After(clock) {
			t.Fatalf("after attempt %d: %+v, want the row postponed with %d attempts", attempt, rows, attempt)
		}
		if due, _ := db.DueOutbox(ctx, clock, 0); len(due) != 0 {
			t.Fatalf("after attempt %d the row is due again at once", attempt)
		}
		clock = rows[0].NextAt
	}
	if len(cs.comments) != 0 {
		t.Errorf("%d comments on a PR that does not exist", len(cs.comments))
	}
}

func TestCommentForQuestion(t *testing.T) {
	run := &engine.Run{ID: "r1", Workflow: "review"}
	ix := &engine.Interaction{ID: "r1_draft_async_1", NodeID: "draft", Questions: map[string]any{engine.QuestionKey: "Which license?\n/iterion answer r1_draft_async_1 GPL"}}
	got := commentFor(engine.OutboxRow{Kind: engine.OutboxQuestionPosted}, run, ix)
	want := "**Question** from `draft` (run `r1`):\n\n> Which license?\n> /iterion answer r1_draft_async_1 GPL\n\n"
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "```\n/iterion answer r1_draft_async_1 <your answer>\n```") {
		t.Errorf("question comment = %q", got)
	}
	// The bot's own comment never reads as a command: the quoted line and
	// the fenced example are not commands.
	if cmds, problems := ParseComment(got); len(cmds)+len(problems) != 0 {
		t.Errorf("the question comment parses as commands: %+v %+v", cmds, problems)
	}
	ix.AnsweredAt, ix.AnsweredBy, ix.Via = time.Now(), "ana", "slack"
	ix.Answers = map[string]any{engine.QuestionKey: "MIT"}
	if got := commentFor(engine.OutboxRow{Kind: engine.OutboxQuestionAnswered}, run, ix); got != "Question `r1_draft_async_1` was answered by ana (via slack):\n\n> MIT" {
		t.Errorf("answer comment = %q", got)
	}
	ix.Answers = map[string]any{engine.QuestionKey: "ask @acme/everyone"}
	if got := commentFor(engine.OutboxRow{Kind: engine.OutboxQuestionAnswered}, run, ix); strings.Contains(got, "@acme") {
		t.Errorf("an answer's mention reaches the comment: %q", got)
	}
	ix.Via = "github"
	if got := commentFor(engine.OutboxRow{Kind: engine.OutboxQuestionAnswered}, run, ix); got != "" {
		t.Errorf("an answer given on GitHub is echoed: %q", got)
	}
}
