package github

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gh "github.com/google/go-github/v62/github"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

const handlerConfig = `workflows:
  review: workflows/review.bot
  fix: workflows/fix.bot
default_workflow: review
triggers:
  pull_request:
    opened: review
answerers: [carol]
`

// fakeRuns holds runs and questions in memory and records what the
// handler does to them.
type fakeRuns struct {
	mu        sync.Mutex
	runs      []*engine.Run
	questions map[string][]*engine.Interaction
	answers   []engine.AnswerRequest
	cancelled []string
	launches  []Launch
}

func (f *fakeRuns) Runs(context.Context, engine.RunFilter) ([]*engine.Run, error) { return f.runs, nil }
func (f *fakeRuns) Interactions(_ context.Context, id string) ([]*engine.Interaction, error) {
	return f.questions[id], nil
}
func (f *fakeRuns) Answer(_ context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.answers {
		if a.InteractionID == req.InteractionID {
			return nil, &engine.AlreadyAnsweredError{InteractionID: a.InteractionID, AnsweredBy: a.By, Via: a.Via}
		}
	}
	f.answers = append(f.answers, req)
	return &engine.AnswerResult{}, nil
}
func (f *fakeRuns) Cancel(id string) bool {
	f.cancelled = append(f.cancelled, id)
	return true
}
func (f *fakeRuns) Launch(_ context.Context, l Launch) (string, error) {
	if l.Path == "workflows/fix.bot" {
		return "", &LaunchError{Msg: "workflows/fix.bot:3:1: unknown node kind"}
	}
	f.launches = append(f.launches, l)
	return fmt.Sprintf("run-%d", len(f.launches)), nil
}

func newHandler(t *testing.T, config string) (*Handler, *commentServer, *fakeRuns) {
	cs := &commentServer{}
	client := cs.serve(t, func(mux *http.ServeMux) {
		mux.HandleFunc("GET /repos/acme/app/contents/.iterion.yml", func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode(map[string]any{"type": "file", "size": len(config), "encoding": "base64", "content": base64.StdEncoding.EncodeToString([]byte(config))})
		})
		mux.HandleFunc("GET /repos/acme/app/collaborators/{user}/permission", func(w http.ResponseWriter, r *http.Request) {
			perm := map[string]string{"ana": "write"}[r.PathValue("user")]
			if perm == "" {
				perm = "read"
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"permission": perm})
		})
		mux.HandleFunc("GET /repos/acme/app/pulls/7", func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode(map[string]any{"number": 7, "state": "open", "title": "Add a README", "body": "Closes #3.",
				"head": map[string]any{"sha": "abc1234567", "ref": "feature"}, "base": map[string]any{"ref": "main"}})
		})
	})
	app := &App{clients: map[int64]*gh.Client{42: client}}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	runs := &fakeRuns{
		runs: []*engine.Run{
			{ID: "r1", Workflow: "review", Status: engine.StatusRunning, CreatedAt: now, Trigger: engine.Trigger{Source: "github", Repo: "acme/app", PR: 7}},
			{ID: "r0", Workflow: "review", Status: engine.StatusFinished, CreatedAt: now.Add(-time.Hour), Trigger: engine.Trigger{Source: "github", Repo: "acme/app", PR: 7}},
			{ID: "r2", Workflow: "review", Status: engine.StatusRunning, CreatedAt: now, Trigger: engine.Trigger{Source: "github", Repo: "acme/other", PR: 7}},
		},
		questions: map[string][]*engine.Interaction{
			"r1": {{ID: "r1_ask_async_1", RunID: "r1", Kind: engine.KindAsync, Questions: map[string]any{engine.QuestionKey: "Which\nlicense?"}}},
			"r2": {{ID: "r2_ask_async_1", RunID: "r2", Kind: engine.KindAsync, Questions: map[string]any{engine.QuestionKey: "Secret question"}}},
		},
	}
	cm, _ := newCommenter(client)
	return &Handler{Client: app.Installation, Perms: app, Runs: runs, Actions: runs, Replies: cm}, cs, runs
}

// commentDelivery is the issue_comment delivery of body by sender.
func commentDelivery(t *testing.T, id, sender, body string) store.Delivery {
	t.Helper()
	raw, err := os.ReadFile("testdata/issue_comment.json")
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	p["comment"].(map[string]any)["body"] = body
	p["comment"].(map[string]any)["user"].(map[string]any)["login"] = sender
	p["sender"].(map[string]any)["login"] = sender
	out, _ := json.Marshal(p)
	return store.Delivery{ID: id, Event: "issue_comment", Payload: out}
}

func TestHandlerComments(t *testing.T) {
	cases := []struct {
		name, sender, body string
		reply              []string // substrings of the reply
	}{
		{"run with vars", "ana", "/iterion run review depth=2", []string{"@ana started run `run-1` of `review` on abc1234."}},
		{"default workflow", "ana", "/iterion run", []string{"started run `run-1` of `review`"}},
		{"unknown workflow", "ana", "/iterion run deploy", []string{"no workflow `deploy` in .iterion.yml; the workflows are `fix`, `review`."}},
		{"workflow that does not compile", "ana", "/iterion run fix", []string{"could not start `fix`: workflows/fix.bot:3:1: unknown node kind"}},
		{"run without permission", "bo", "/iterion run", []string{"@bo `/iterion run` needs write permission on acme/app"}},
		{"answer by an answerer", "carol", "/iterion answer r1_ask_async_1 MIT,\nand keep the header", []string{"answer to `r1_ask_async_1` recorded"}},
		{"answer of another repository's question", "ana", "/iterion answer r2_ask_async_1 leak", []string{"no question `r2_ask_async_1` on this pull request"}},
		{"answer without permission", "bo", "/iterion answer r1_ask_async_1 GPL", []string{"needs write permission"}},
		{"status", "bo", "/iterion status", []string{"- `r1` review: running\n  - open question `r1_ask_async_1`: Which license?\n- `r0` review: finished"}},
		{"cancel", "ana", "/iterion cancel", []string{"run `r1` cancelled."}},
		{"cancel ended run", "ana", "/iterion cancel r0", []string{"run `r0` already ended (finished)."}},
		{"typo", "bo", "/iterion stauts", []string{"line 1: unknown command \"stauts\". Did you mean `/iterion status`?"}},
		{"typo echoed without mentions", "bo", "/iterion @acme/everyone", []string{"@\u200bacme/everyone"}},
		{"two commands and a typo", "ana", "/iterion help\n/iterion rnu\n/iterion status", []string{"line 2: unknown command \"rnu\"", "iterion commands", "iterion runs on this pull request"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, cs, runs := newHandler(t, handlerConfig)
			d := commentDelivery(t, "d1", c.sender, c.body)
			if err := h.Handle(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			if len(cs.comments) != 1 {
				t.Fatalf("%d replies, want one", len(cs.comments))
			}
			// Commands get 👀 on the comment; a comment of typos only does not.
			commands := !strings.Contains(c.name, "typo") || strings.Contains(c.name, "commands")
			if got := len(cs.reactions) == 1 && cs.reactions[0] == "1001:eyes"; got != commands {
				t.Errorf("reactions %v, want 👀 %v", cs.reactions, commands)
			}
			for _, want := range c.reply {
				if got := cs.comments[0].GetBody(); !strings.Contains(got, want) {
					t.Errorf("reply = %q, want it to contain %q", got, want)
				}
			}
			// A delivery handled again (a crash before it was marked done)
			// does not reply twice, and names the same launch key.
			if err := h.Handle(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			if len(cs.comments) != 1 {
				t.Errorf("handled again: %d replies, want still one", len(cs.comments))
			}
			if len(runs.launches) == 2 && runs.launches[0].Key != runs.launches[1].Key {
				t.Errorf("launch keys %q and %q differ for one delivery", runs.launches[0].Key, runs.launches[1].Key)
			}
		})
	}
}

func TestHandlerEffects(t *testing.T) {
	h, _, runs := newHandler(t, handlerConfig)
	ctx := context.Background()
	for i, d := range []store.Delivery{
		commentDelivery(t, "d1", "ana", "/iterion run review depth=2"),
		commentDelivery(t, "d2", "carol", "/iterion answer r1_ask_async_1 MIT"),
		commentDelivery(t, "d3", "ana", "/iterion cancel"),
	} {
		if err := h.Handle(ctx, d); err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	wantLaunch := []Launch{{InstallationID: 42, Owner: "acme", Repo: "app", PR: 7, Workflow: "review", Path: "workflows/review.bot",
		Ref: "abc1234567", Vars: map[string]string{"depth": "2"}, Actor: "ana", CommentID: 1001, Key: "d1-1",
		Context: map[string]string{"repo": "acme/app", "pr_number": "7", "head_sha": "abc1234567", "base_ref": "main",
			"pr_title": "Add a README", "pr_body": "Closes #3.", "comment_body": "/iterion run review depth=2"}}}
	if diff := cmp.Diff(wantLaunch, runs.launches); diff != "" {
		t.Errorf("launches (-want +got):\n%s", diff)
	}
	wantAnswer := []engine.AnswerRequest{{RunID: "r1", InteractionID: "r1_ask_async_1", Text: "MIT", By: "carol", Via: "github"}}
	if diff := cmp.Diff(wantAnswer, runs.answers); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"r1"}, runs.cancelled); diff != "" {
		t.Errorf("cancelled (-want +got):\n%s", diff)
	}
}

func TestHandlerPullRequest(t *testing.T) {
	h, cs, runs := newHandler(t, handlerConfig)
	ctx := context.Background()
	pr := strings.ReplaceAll(prOpened, `"number": 9`, `"number": 7`)
	if err := h.Handle(ctx, store.Delivery{ID: "p1", Event: "pull_request", Payload: []byte(pr)}); err != nil {
		t.Fatal(err)
	}
	if len(runs.launches) != 1 || runs.launches[0].Ref != "abc123" || runs.launches[0].Workflow != "review" || runs.launches[0].Key != "p1" {
		t.Fatalf("opened PR launches = %+v, want review at abc123", runs.launches)
	}
	// synchronize is not configured: nothing happens.
	if err := h.Handle(ctx, store.Delivery{ID: "p2", Event: "pull_request", Payload: []byte(strings.Replace(pr, `"opened"`, `"synchronize"`, 1))}); err != nil {
		t.Fatal(err)
	}
	// A fork's PR does not start; the bot says how to start it, once.
	fork := strings.Replace(pr, `"repo": {"full_name": "acme/app"}`, `"repo": {"full_name": "mallory/app"}`, 1)
	for _, id := range []string{"p3", "p4"} {
		if err := h.Handle(ctx, store.Delivery{ID: id, Event: "pull_request", Payload: []byte(fork)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(runs.launches) != 1 {
		t.Errorf("launches = %+v, want only the first", runs.launches)
	}
	if len(cs.comments) != 1 || !strings.Contains(cs.comments[0].GetBody(), "comes from a fork") {
		t.Errorf("fork replies = %d, want 1 explaining the approval", len(cs.comments))
	}
}

// A repository whose .iterion.yml has mistakes gets them on the PR, at
// their lines, instead of silence; one with comments off gets nothing.
func TestHandlerConfigMistakes(t *testing.T) {
	h, cs, runs := newHandler(t, "workflows:\n  review: workflows/review.bot\nconcurency: reject\n")
	if err := h.Handle(context.Background(), commentDelivery(t, "d1", "ana", "/iterion run review")); err != nil {
		t.Fatal(err)
	}
	if len(cs.comments) != 1 {
		t.Fatalf("%d replies, want one", len(cs.comments))
	}
	if got := cs.comments[0].GetBody(); !strings.Contains(got, "has mistakes") || !strings.Contains(got, ".iterion.yml:3:1:") {
		t.Errorf("reply %q, want the positioned mistake", got)
	}
	if len(runs.launches) != 0 {
		t.Errorf("a run started under a broken configuration")
	}

	h, cs, runs = newHandler(t, "workflows:\n  review: workflows/review.bot\ntriggers:\n  comments: false\n")
	if err := h.Handle(context.Background(), commentDelivery(t, "d2", "ana", "/iterion run review")); err != nil {
		t.Fatal(err)
	}
	if len(cs.comments)+len(cs.reactions)+len(runs.launches) != 0 {
		t.Errorf("comments off, yet %d replies, %d reactions, %d launches", len(cs.comments), len(cs.reactions), len(runs.launches))
	}
}
