package github

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakegithub"
	"github.com/iterion-bot/iterion/store"
)

// storeActions answers on a real store; the reconciliation needs nothing else.
type storeActions struct{ db *store.DB }

func (a storeActions) Answer(ctx context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error) {
	return a.db.Answer(ctx, req)
}
func (storeActions) Cancel(context.Context, string, string) (bool, error) {
	return false, errors.New("not in this test")
}
func (storeActions) Launch(context.Context, Launch) (string, error) {
	return "", errors.New("not in this test")
}

// Answers written while the server was down are applied on every PR that
// GitHub lets the bot read, even when another PR's cannot be read; a
// question answered meanwhile is left alone.
func TestReconcile(t *testing.T) {
	world := newWorld(t)
	db, fake := world.db, world.fake
	ctx := context.Background()
	fake.Files[".iterion.yml"] = "workflows:\n  review: r.bot\n"
	fake.Perms["ana"] = "write"
	// PR 8's comments cannot be listed (say, GitHub hides them).
	fake.SetFail(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/issues/8/comments") {
			http.Error(w, `{"message": "Forbidden"}`, http.StatusForbidden)
			return true
		}
		return false
	})
	ask := func(runID string, pr int, texts ...string) []*engine.Interaction {
		run := &engine.Run{ID: runID, Workflow: "review", Status: engine.StatusRunning, Channels: []string{"github"},
			Trigger: Origin{Repo: "acme/app", PR: pr, Installation: 42}.Trigger("")}
		if err := db.CreateRun(ctx, run, nil); err != nil {
			t.Fatal(err)
		}
		var out []*engine.Interaction
		for _, text := range texts {
			ix, err := db.PostQuestion(ctx, engine.PostRequest{RunID: runID, NodeID: "draft", Questions: map[string]any{engine.QuestionKey: text}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.ShortID(ctx, PRScope("acme/app", pr), runID, ix.ID); err != nil {
				t.Fatal(err)
			}
			out = append(out, ix)
		}
		return out
	}
	on7 := ask("r7", 7, "Which licence?", "Which Go?")
	ask("r8", 8, "Which colour?")
	fake.PRs[7] = &fakegithub.PR{HeadSHA: "abc"}
	// Q2 was answered before the crash; its comment must not be replayed.
	if _, err := db.Answer(ctx, engine.AnswerRequest{RunID: "r7", InteractionID: on7[1].ID, Text: "1.26", By: "ana", Via: "github"}); err != nil {
		t.Fatal(err)
	}
	fake.AddComment(7, "ana", "/iterion answer Q2 1.26")
	answer := fake.AddComment(7, "ana", "> **Question Q1**\n> > Which licence?\n\nMIT")

	c := gh.NewClient(nil).WithAuthToken(fakegithub.Token)
	c.BaseURL, _ = url.Parse(fake.URL())
	app := &App{clients: map[int64]*gh.Client{42: c}}
	h := NewHandler(HandlerOptions{Client: app.Installation, Perms: app, Runs: db, Actions: storeActions{db}, Replies: world.commenter(), Queue: db, Log: testLog(t)})
	n, err := h.Reconcile(ctx)
	if n != 1 || err == nil || !strings.Contains(err.Error(), "acme/app#8") {
		t.Fatalf("Reconcile = %d, %v; want 1 applied and PR 8's error", n, err)
	}
	got, _ := db.Interaction(ctx, "r7", on7[0].ID)
	if got.Answer() != "MIT" || got.AnsweredBy != "ana" || got.Via != "github" {
		t.Errorf("Q1 = %+v, want MIT by ana via github", got)
	}
	if !slices.Contains(fake.Reactions(), strconv.FormatInt(answer.ID, 10)+":+1") {
		t.Errorf("no 👍 on the applied answer: %v", fake.Reactions())
	}
	if n := len(fake.BotComments(7, "")); n != 0 {
		t.Errorf("%d bot comments, want none (Q2's old command is not replayed)", n)
	}
}

// Read back at start-up, a comment written before the question it names
// existed (refused then) is no answer to it, and an edited comment is not
// replayed.
func TestReconcileSkipsStaleComments(t *testing.T) {
	world := newWorld(t)
	db, fake, clock := world.db, world.fake, world.clock
	ctx := context.Background()
	fake.Files[".iterion.yml"] = "workflows:\n  review: r.bot\n"
	fake.Perms["ana"] = "write"
	fake.PRs[7] = &fakegithub.PR{HeadSHA: "abc"}
	run := &engine.Run{ID: "r7", Workflow: "review", Status: engine.StatusRunning, Channels: []string{"github"},
		Trigger: Origin{Repo: "acme/app", PR: 7, Installation: 42}.Trigger("")}
	if err := db.CreateRun(ctx, run, nil); err != nil {
		t.Fatal(err)
	}
	ask := func(text string) *engine.Interaction {
		ix, err := db.PostQuestion(ctx, engine.PostRequest{RunID: "r7", NodeID: "draft", Questions: map[string]any{engine.QuestionKey: text}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ShortID(ctx, PRScope("acme/app", 7), "r7", ix.ID); err != nil {
			t.Fatal(err)
		}
		return ix
	}
	q1 := ask("Which licence?")
	fake.AddCommentAt(7, "ana", "/iterion answer Q2 drop the tables", clock.Now().Add(10*time.Minute))
	clock.Add(20 * time.Minute)
	q2 := ask("What may the migration do?")
	edited := fake.AddCommentAt(7, "ana", "/iterion answer Q1 GPL", clock.Now().Add(10*time.Minute))
	fake.EditCommentAt(edited.ID, "/iterion answer Q1 AGPL", clock.Now().Add(11*time.Minute))
	clock.Add(15 * time.Minute) // the server starts again

	c := gh.NewClient(nil).WithAuthToken(fakegithub.Token)
	c.BaseURL, _ = url.Parse(fake.URL())
	app := &App{clients: map[int64]*gh.Client{42: c}}
	h := NewHandler(HandlerOptions{Client: app.Installation, Perms: app, Runs: db, Actions: storeActions{db}, Replies: world.commenter(), Queue: db, Log: testLog(t)})
	if n, err := h.Reconcile(ctx); n != 0 || err != nil {
		t.Errorf("Reconcile = %d, %v; want nothing applied", n, err)
	}
	for _, ix := range []*engine.Interaction{q1, q2} {
		if got, _ := db.Interaction(ctx, "r7", ix.ID); !got.Pending() {
			t.Errorf("%s answered with %q", ix.ID, got.Answer())
		}
	}
}
