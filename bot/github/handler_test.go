package github

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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
concurrency: supersede
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
	pauses    []pauseAnswer
}

func (f *fakeRuns) Runs(context.Context, engine.RunFilter) ([]*engine.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.runs), nil
}
func (f *fakeRuns) Run(_ context.Context, id string) (*engine.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.runs {
		if r.ID == id {
			return r, nil
		}
	}
	return nil, fmt.Errorf("run %w", engine.ErrNotFound)
}
func (f *fakeRuns) RunsByRef(_ context.Context, ref string) ([]*engine.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*engine.Run
	for _, r := range f.runs {
		if r.Trigger.Ref == ref {
			out = append(out, r)
		}
	}
	return out, nil
}
func (f *fakeRuns) Interaction(_ context.Context, runID, id string) (*engine.Interaction, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ix := range f.questions[runID] {
		if ix.ID == id {
			return ix, nil
		}
	}
	return nil, engine.ErrNotFound
}

// ShortRef numbers acme/app#7's questions Q1, Q2, … in the order of
// run r1's questions.
func (f *fakeRuns) ShortRef(_ context.Context, scope string, n int) (string, string, error) {
	if scope != PRScope("acme/app", 7) || n > len(f.questions["r1"]) {
		return "", "", engine.ErrNotFound
	}
	return "r1", f.questions["r1"][n-1].ID, nil
}
func (f *fakeRuns) ShortIDs(_ context.Context, scope, runID string) (map[string]int, error) {
	out := map[string]int{}
	if scope == PRScope("acme/app", 7) && runID == "r1" {
		for i, ix := range f.questions["r1"] {
			out[ix.ID] = i + 1
		}
	}
	return out, nil
}

type pauseAnswer struct {
	RunID, InteractionID string
	Answers              map[string]any
	By                   string
}

func (f *fakeRuns) Interactions(_ context.Context, id string) ([]*engine.Interaction, error) {
	return f.questions[id], nil
}
func (f *fakeRuns) Answer(_ context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.Fields != nil {
		// A form, checked as the engine does.
		if a := req.Fields["approved"]; a != "yes" && a != "no" {
			return nil, &engine.InvalidAnswerError{InteractionID: req.InteractionID, Problems: []engine.AnswerProblem{
				{Field: "approved", Kind: engine.ProblemInvalid, Type: "bool", Detail: fmt.Sprintf("%q is not a yes/no answer", a)}}}
		}
		f.pauses = append(f.pauses, pauseAnswer{req.RunID, req.InteractionID, req.Fields, req.By})
		return &engine.AnswerResult{Resumed: true}, nil
	}
	for _, a := range f.answers {
		if a.InteractionID == req.InteractionID {
			return nil, &engine.AlreadyAnsweredError{InteractionID: a.InteractionID, AnsweredBy: a.By, Via: a.Via}
		}
	}
	f.answers = append(f.answers, req)
	return &engine.AnswerResult{}, nil
}
func (f *fakeRuns) Cancel(_ context.Context, id, reason string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = append(f.cancelled, id)
	for _, r := range f.runs {
		if r.ID == id {
			r.Status = engine.StatusCancelled
		}
	}
	return true, nil
}
func (f *fakeRuns) Launch(_ context.Context, l Launch) (string, error) {
	if l.Path == "workflows/fix.bot" {
		return "", &LaunchError{Msg: "workflows/fix.bot:3:1: unknown node kind"}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.launches = append(f.launches, l)
	// As engine.Launch does, the run's record is stored before it returns.
	id := fmt.Sprintf("run-%d", len(f.launches))
	f.runs = append(f.runs, &engine.Run{ID: id, Workflow: l.Workflow, Status: engine.StatusRunning,
		Trigger: Origin{Repo: l.Owner + "/" + l.Repo, PR: l.PR}.Trigger("")})
	return id, nil
}

const prJSON = `{"number": 7, "state": "open", "title": "Add a README", "body": "Closes #3.",
	"head": {"sha": "abc1234567", "ref": "feature", "repo": {"full_name": "acme/app"}}, "base": {"ref": "main", "repo": {"full_name": "acme/app"}}}`

func newHandler(t *testing.T, config string) (*Handler, *commentServer, *fakeRuns) {
	return newHandlerPR(t, config, prJSON)
}

func newHandlerPR(t *testing.T, config, pr string) (*Handler, *commentServer, *fakeRuns) {
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
			_, _ = w.Write([]byte(pr))
		})
	})
	app := &App{clients: map[int64]*gh.Client{42: client}}
	clock := newTestClock() // the commenter's and the store's
	now := clock.Now()
	runs := &fakeRuns{
		runs: []*engine.Run{
			{ID: "r1", Workflow: "review", Status: engine.StatusRunning, CreatedAt: now, Trigger: Origin{Repo: "acme/app", PR: 7, Installation: 42}.Trigger("")},
			{ID: "r0", Workflow: "review", Status: engine.StatusFinished, CreatedAt: now.Add(-time.Hour), Trigger: Origin{Repo: "acme/app", PR: 7, Installation: 42}.Trigger("")},
			{ID: "r2", Workflow: "review", Status: engine.StatusRunning, CreatedAt: now, Trigger: Origin{Repo: "acme/other", PR: 7, Installation: 42}.Trigger("")},
		},
		questions: map[string][]*engine.Interaction{
			"r1": {
				{ID: "r1_ask_async_1", RunID: "r1", Kind: engine.KindAsync, Questions: map[string]any{engine.QuestionKey: "Which\nlicense?"}},
				{ID: "r1_ask_async_2", RunID: "r1", Kind: engine.KindAsync, Questions: map[string]any{engine.QuestionKey: "Go version?",
					engine.OptionsKey: []any{map[string]any{"id": "new", "label": "1.26"}, map[string]any{"id": "old", "label": "1.25"}}},
					FollowUp: &engine.FollowUp{EscalateTo: []string{"@acme/maintainers", "Dora"}, Escalated: true}},
				{ID: "r1_approve", RunID: "r1", Kind: engine.KindBlocking, Questions: map[string]any{"_instructions": "Ship it?", "approved": "bool", "reason": "string"}},
				{ID: "r1_ask_async_3", RunID: "r1", Kind: engine.KindAsync, Questions: map[string]any{engine.QuestionKey: "Old?"},
					AnsweredAt: now, AnsweredBy: "dave", Via: "slack"},
				{ID: "r1_ask_async_4", RunID: "r1", Kind: engine.KindAsync, Questions: map[string]any{engine.QuestionKey: "Seen?"},
					Answers: map[string]any{engine.QuestionKey: "yes"}, AnsweredAt: now, AnsweredBy: "ana", Via: "github"},
			},
			"r2": {{ID: "r2_ask_async_1", RunID: "r2", Kind: engine.KindAsync, Questions: map[string]any{engine.QuestionKey: "Secret question"}}},
		},
	}
	cm, _ := newCommenter(client, clock.Now)
	return NewHandler(HandlerOptions{Client: app.Installation, Perms: app, Runs: runs, Actions: runs, Replies: cm, Queue: openStore(t, clock), Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}), cs, runs
}

// commentDelivery is the issue_comment delivery of body by sender, as
// comment 1001.
func commentDelivery(t *testing.T, id, sender, body string) store.Delivery {
	t.Helper()
	return commentDeliveryOf(t, id, 1001, sender, body)
}

// commentDeliveryOf is the delivery id of comment commentID.
func commentDeliveryOf(t *testing.T, id string, commentID int64, sender, body string) store.Delivery {
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
	p["comment"].(map[string]any)["id"] = commentID
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
		{"answer without permission", "bo", "/iterion answer r1_ask_async_1 GPL", []string{"@bo thank you, but only people with write permission on acme/app, or listed under `answerers` in .iterion.yml, can answer iterion's questions, so this answer was not recorded."}},
		{"answer by someone it was escalated to", "dora", "/iterion answer Q2 1.25", []string{"answer to `Q2` recorded"}},
		{"answer by short id", "ana", "/iterion answer Q1 MIT", []string{"answer to `Q1` recorded; the agent reads it at its next turn."}},
		{"answer by option number", "ana", "/iterion answer q2 1", []string{"answer to `q2` recorded"}},
		{"answer to an unknown short id", "ana", "/iterion answer Q9 x", []string{"no question `Q9` on this pull request"}},
		{"second answer", "ana", "/iterion answer Q4 late", []string{"question `Q4` was already answered by dave via Slack; your answer was not used."}},
		{"same answer met again", "ana", "/iterion answer Q5 yes", []string{"answer to `Q5` recorded."}},
		{"another answer from the same person", "ana", "/iterion answer Q5 no", []string{"question `Q5` was already answered by ana via GitHub; your answer was not used."}},
		{"form answer", "ana", "/iterion answer Q3 approved: yes\nreason: tests pass", []string{"answer to `Q3` recorded; run `r1` continues."}},
		{"form answer refused", "ana", "/iterion answer Q3 approved: maybe", []string{"your answer to `Q3` was not taken: answer for \"approved\": \"maybe\" is not a yes/no answer"}},
		{"status", "bo", "/iterion status", []string{"- `r1` review: running\n  - open question Q1 (`r1_ask_async_1`): Which license?\n  - open question Q2 (`r1_ask_async_2`): Go version?\n  - open question Q3 (`r1_approve`): Ship it?\n- `r0` review: finished"}},
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
			// Commands get 👀 on the comment, and accepted answers 👍; a
			// comment of typos only gets none.
			var want []string
			if !strings.Contains(c.name, "typo") || strings.Contains(c.name, "commands") {
				want = append(want, "1001:eyes")
			}
			if strings.Contains(c.reply[0], "` recorded") {
				want = append(want, "1001:+1")
			}
			if diff := cmp.Diff(want, cs.reactions); diff != "" {
				t.Errorf("reactions (-want +got):\n%s", diff)
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
		Ref: "abc1234567", DefaultBranch: "main", Vars: map[string]string{"depth": "2"}, Actor: "ana", CommentID: 1001, Key: "comment-1001-1",
		Context: map[string]string{"repo": "acme/app", "pr_number": "7", "head_sha": "abc1234567", "base_ref": "main",
			"pr_title": "Add a README", "pr_body": "Closes #3.", "comment_body": "/iterion run review depth=2"}}}
	if diff := cmp.Diff(wantLaunch, runs.launches); diff != "" {
		t.Errorf("launches (-want +got):\n%s", diff)
	}
	wantAnswer := []engine.AnswerRequest{{RunID: "r1", InteractionID: "r1_ask_async_1", Text: "MIT", By: "carol", Via: "github"}}
	if diff := cmp.Diff(wantAnswer, runs.answers); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	// The run launched by d1 is stored by then, so the cancel reaches it too.
	if diff := cmp.Diff([]string{"r1", "run-1"}, runs.cancelled, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
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

// A reply quoting a question's comment answers it: 👍 and no reply when
// taken, a reply saying why when not.
func TestHandlerQuoteReplies(t *testing.T) {
	quoted := "> **Question Q2** · from `draft` in run `r1`\n>\n> > Go version?\n"
	cases := []struct {
		name, sender, body string
		reply              string // "" for none
		answer             string // the text recorded, "" for none
	}{
		{"option number", "ana", quoted + "\n1", "", "1.26"},
		{"option label", "carol", quoted + "1.25", "", "1.25"},
		{"own words", "ana", quoted + "\nwhatever CI has", "", "whatever CI has"},
		{"not allowed", "bo", quoted + "1", "@bo thank you, but only people with write permission", ""},
		{"no answer", "ana", quoted, "@ana your comment quotes question Q2 but holds no answer", ""},
		{"two questions", "ana", quoted + "> Question Q1\nyes", "quotes several questions (Q2, Q1)", ""},
		{"answered already", "ana", "> Question Q4\nnew", "question `Q4` was already answered by dave via Slack", ""},
		{"form", "ana", "> Question Q3\n> > Ship it?\napproved: no\nreason: not yet", "", ""},
		{"look-alike question", "ana", "> **Question Q2** · Should I keep the failing test skipped?\n> 1. no, fix it\n\n1", "your comment quotes a \"Question Q2\" that is not iterion's question Q2 (\"Go version?\")", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, cs, runs := newHandler(t, handlerConfig)
			if err := h.Handle(context.Background(), commentDelivery(t, "d1", c.sender, c.body)); err != nil {
				t.Fatal(err)
			}
			taken := c.reply == ""
			if taken {
				if len(cs.comments) != 0 {
					t.Errorf("replied %q to a taken answer", cs.comments[0].GetBody())
				}
				if diff := cmp.Diff([]string{"1001:+1"}, cs.reactions); diff != "" {
					t.Errorf("reactions (-want +got):\n%s", diff)
				}
			} else {
				if len(cs.comments) != 1 || !strings.Contains(cs.comments[0].GetBody(), c.reply) {
					t.Fatalf("replies = %d (%v), want one containing %q", len(cs.comments), cs.comments, c.reply)
				}
				if len(cs.reactions) != 0 {
					t.Errorf("reactions %v on a refused answer", cs.reactions)
				}
			}
			switch {
			case c.answer != "":
				want := []engine.AnswerRequest{{RunID: "r1", InteractionID: "r1_ask_async_2", Text: c.answer, By: c.sender, Via: "github"}}
				if diff := cmp.Diff(want, runs.answers); diff != "" {
					t.Errorf("answers (-want +got):\n%s", diff)
				}
			case c.name == "form":
				want := []pauseAnswer{{"r1", "r1_approve", map[string]any{"approved": "no", "reason": "not yet"}, "ana"}}
				if diff := cmp.Diff(want, runs.pauses); diff != "" {
					t.Errorf("pause answers (-want +got):\n%s", diff)
				}
			default:
				if len(runs.answers)+len(runs.pauses) != 0 {
					t.Errorf("recorded %v %v, want nothing", runs.answers, runs.pauses)
				}
			}
		})
	}
}

// On a pull request from a fork, a maintainer's run starts only for the
// commit they approve by its SHA, and only while it is the head.
func TestHandlerForkApproval(t *testing.T) {
	fork := strings.Replace(prJSON, `"ref": "feature", "repo": {"full_name": "acme/app"}`, `"ref": "feature", "repo": {"full_name": "mallory/app"}`, 1)
	for _, c := range []struct {
		name, body, reply string
		launched          bool
	}{
		{"no approval", "/iterion run review", "comes from a fork, so its code runs only with the approval of the commit you reviewed. If you have read the change at abc1234, start the run with:\n\n```\n/iterion run review approve=abc1234567\n```", false},
		{"head moved", "/iterion run review approve=0ff1ce0000", "nothing started: you approved `0ff1ce0000`, but the pull request's head is `abc1234567` (approve it by its full SHA).", false},
		{"a prefix is not enough", "/iterion run review approve=abc1234", "nothing started: you approved `abc1234`", false},
		{"approved head", "/iterion run review approve=ABC1234567 depth=2", "started run `run-1` of `review` on abc1234.", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, cs, runs := newHandlerPR(t, handlerConfig, fork)
			if err := h.Handle(context.Background(), commentDelivery(t, "d1", "ana", c.body)); err != nil {
				t.Fatal(err)
			}
			if len(cs.comments) != 1 || !strings.Contains(cs.comments[0].GetBody(), c.reply) {
				t.Fatalf("replies %d, want one containing %q; got %v", len(cs.comments), c.reply, cs.comments)
			}
			if got := len(runs.launches) == 1; got != c.launched {
				t.Fatalf("launched = %v, want %v", got, c.launched)
			}
			if c.launched {
				l := runs.launches[0]
				if l.Ref != "abc1234567" || l.Vars["depth"] != "2" || l.Vars[ApproveVar] != "" {
					t.Errorf("launch = %+v, want the approved head, its vars without approve", l)
				}
			}
		})
	}
	// The same PR not from a fork needs no approval, and approve= is no var.
	h, _, runs := newHandler(t, handlerConfig)
	if err := h.Handle(context.Background(), commentDelivery(t, "d1", "ana", "/iterion run review approve=abc1234567")); err != nil {
		t.Fatal(err)
	}
	if len(runs.launches) != 1 || len(runs.launches[0].Vars) != 0 {
		t.Errorf("launches = %+v", runs.launches)
	}
}

// A run asked for while another of the PR's runs is active waits for it
// (queue), replaces it (supersede) or is refused (reject); a queued run
// starts when the last active one ends, and a redelivered request is not
// queued behind the run it started.
func TestHandlerConcurrency(t *testing.T) {
	base := strings.Replace(handlerConfig, "concurrency: supersede\n", "", 1)
	ctx := context.Background()
	ask := func(h *Handler, delivery string, comment int64) {
		t.Helper()
		if err := h.Handle(ctx, commentDeliveryOf(t, delivery, comment, "ana", "/iterion run review")); err != nil {
			t.Fatal(err)
		}
	}

	h, cs, runs := newHandler(t, base) // queue, the default
	ask(h, "d1", 2001)
	ask(h, "d2", 2002)
	ask(h, "d1", 2001) // redelivered
	if len(runs.launches) != 0 || len(cs.comments) != 2 {
		t.Fatalf("queue: %d launches, %d replies; want none started and two replies", len(runs.launches), len(cs.comments))
	}
	for i, want := range []string{"queued `review` on abc1234 (position 1): it starts when run `r1` ends", "(position 2)"} {
		if !strings.Contains(cs.comments[i].GetBody(), want) {
			t.Errorf("reply %d = %q, want %q", i, cs.comments[i].GetBody(), want)
		}
	}
	// r1 ends: the first queued run starts, and only it.
	runs.runs[0].Status = engine.StatusFinished
	if err := h.StartQueued(ctx, runs.runs[0]); err != nil {
		t.Fatal(err)
	}
	h.WaitJobs()
	if len(runs.launches) != 1 || runs.launches[0].Key != "comment-2001-1" {
		t.Fatalf("after r1 ended: launches %+v, want d1's", runs.launches)
	}
	if got := cs.comments[len(cs.comments)-1].GetBody(); !strings.HasPrefix(got, "@ana started queued run `run-1` of `review` on abc1234.") {
		t.Errorf("queued start reply = %q", got)
	}
	// run-1's record is not written yet (it starts in the background), but
	// it counts as active: the next waits.
	if err := h.StartQueued(ctx, runs.runs[0]); err != nil {
		t.Fatal(err)
	}
	if h.WaitJobs(); len(runs.launches) != 1 {
		t.Fatalf("with run-1 starting the next waits: %d launches", len(runs.launches))
	}

	h, cs, runs = newHandler(t, base+"concurrency: reject\n")
	ask(h, "d1", 2001)
	if len(runs.launches) != 0 || !strings.Contains(cs.comments[0].GetBody(), "nothing started: run `r1` of `review` is still running on this pull request") {
		t.Errorf("reject: %d launches, reply %q", len(runs.launches), cs.comments[0].GetBody())
	}

	h, cs, runs = newHandler(t, handlerConfig) // supersede
	if _, err := h.queue.queue.QueueLaunch(ctx, PRScope("acme/app", 7), "old", []byte(`{"Workflow": "review", "Actor": "bo"}`)); err != nil {
		t.Fatal(err)
	}
	ask(h, "d1", 2001)
	if len(runs.launches) != 1 || !slices.Equal(runs.cancelled, []string{"r1"}) || !strings.Contains(cs.comments[len(cs.comments)-1].GetBody(), "It supersedes run `r1`, cancelled.") {
		t.Errorf("supersede: launches %d, cancelled %v, replies %v", len(runs.launches), runs.cancelled, cs.comments)
	}
	if !strings.Contains(cs.comments[0].GetBody(), "@bo the queued run of `review` was dropped: a newer run asked for by ana superseded it") {
		t.Errorf("the superseded queued request was not told: %q", cs.comments[0].GetBody())
	}
}

// Two requests handled at once on one PR: only one finds it idle.
func TestHandlerConcurrentRequests(t *testing.T) {
	h, _, runs := newHandler(t, strings.Replace(handlerConfig, "concurrency: supersede", "concurrency: reject", 1))
	runs.runs[0].Status = engine.StatusFinished // the PR is idle
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			d := commentDeliveryOf(t, fmt.Sprintf("d%d", i), int64(3000+i), "ana", "/iterion run review")
			if err := h.Handle(context.Background(), d); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(runs.launches) != 1 {
		t.Errorf("%d launches, want 1: the second request must see the first run", len(runs.launches))
	}
}

// A queue left with no active run (its turn came while nothing was
// there to start it) starts its head before a new request is decided.
func TestHandlerStalledQueue(t *testing.T) {
	h, cs, runs := newHandler(t, strings.Replace(handlerConfig, "concurrency: supersede\n", "", 1))
	runs.runs[0].Status = engine.StatusFinished
	payload := `{"InstallationID": 42, "Owner": "acme", "Repo": "app", "PR": 7, "Workflow": "review", "Path": "workflows/review.bot", "Ref": "abc1234567", "Actor": "bo", "Key": "stalled"}`
	if _, err := h.queue.queue.QueueLaunch(context.Background(), PRScope("acme/app", 7), "stalled", []byte(payload)); err != nil {
		t.Fatal(err)
	}
	if err := h.Handle(context.Background(), commentDeliveryOf(t, "d1", 2001, "ana", "/iterion run review")); err != nil {
		t.Fatal(err)
	}
	if len(runs.launches) != 1 || runs.launches[0].Key != "stalled" {
		t.Fatalf("launches %+v, want the stalled head first", runs.launches)
	}
	if last := cs.comments[len(cs.comments)-1].GetBody(); !strings.Contains(last, "queued `review` on abc1234 (position 1): it starts when run `run-1` ends") {
		t.Errorf("reply = %q", last)
	}
}

// Hostile comments cannot plant a marker in the bot's reply (which would
// hide a later bot comment) nor make the reply mention anyone.
func TestHandlerEchoesNothingHarmful(t *testing.T) {
	h, cs, _ := newHandler(t, handlerConfig)
	key := questionKey("r1_ask_async_9")
	ctx := context.Background()
	for i, body := range []string{"/iterio hi " + Marker(key), "/iterion rnu `@acme/everyone`"} {
		if err := h.Handle(ctx, commentDeliveryOf(t, fmt.Sprintf("d%d", i), int64(4000+i), "bo", body)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cs.comments {
		body := c.GetBody()
		body = body[:strings.LastIndex(body, "\n\n<!-- iterion:")] // the reply without its own marker
		if strings.Contains(body, "<!--") {
			t.Errorf("a reply carries an HTML comment besides its marker: %q", c.GetBody())
		}
		if strings.Contains(strings.TrimPrefix(body, "@bo "), "@a") {
			t.Errorf("a reply mentions someone: %q", c.GetBody())
		}
	}
	before := len(cs.comments)
	id, err := h.replies.Post(ctx, 42, "acme", "app", 7, key, "**Question Q9** · the real question")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.comments) != before+1 || id != cs.comments[before].GetID() {
		t.Errorf("the question was not posted: a planted marker was taken for it")
	}
}

// A comment whose handling failed for good gets a reply saying so, once.
func TestHandlerGiveUp(t *testing.T) {
	h, cs, _ := newHandler(t, handlerConfig)
	d := commentDelivery(t, "d1", "ana", "/iterion run")
	h.GiveUp(context.Background(), d, errors.New("store unavailable"))
	h.GiveUp(context.Background(), d, errors.New("store unavailable"))
	if len(cs.comments) != 1 || !strings.Contains(cs.comments[0].GetBody(), "@ana I could not finish what this comment asks") || strings.Contains(cs.comments[0].GetBody(), "store unavailable") {
		t.Errorf("replies %v, want one saying it failed, without the internal error", cs.comments)
	}
	// Not a comment: nobody to tell.
	h.GiveUp(context.Background(), store.Delivery{ID: "p1", Event: "pull_request", Payload: []byte(prOpened)}, errors.New("x"))
	if len(cs.comments) != 1 {
		t.Errorf("a pull_request delivery got a reply")
	}
}

// testWriter sends a log to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// options are the options h was made with, for a test that changes one.
func (h *Handler) options() HandlerOptions {
	return HandlerOptions{Client: h.client, Perms: h.perms, Runs: h.runs, Actions: h.queue.actions.(Actions),
		Replies: h.replies.(*Commenter), Queue: h.queue.queue, Installations: h.installations, Log: h.log}
}

// Every command the parser knows has its handler.
func TestEveryCommandHasAHandler(t *testing.T) {
	h := NewHandler(HandlerOptions{})
	for _, name := range commandNames {
		if h.commands[name] == nil {
			t.Errorf("command %q has no handler", name)
		}
	}
	if len(h.commands) != len(commandNames) {
		t.Errorf("%d handlers for %d commands", len(h.commands), len(commandNames))
	}
}
