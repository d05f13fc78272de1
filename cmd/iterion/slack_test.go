package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/backends/fakellm"
	slackbot "github.com/iterion-bot/iterion/bot/slack"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakeslack"
)

// slHarness is serve's world with GitHub and Slack: acme/app's
// .iterion.yml names the channel #iterion, and serve's config maps Slack's
// U1 to GitHub's ana (write permission on acme/app) and U2 to bo (none).
type slHarness struct {
	*ghHarness
	slack  *fakeslack.Server
	secret string
}

const slackSecret = "slack-signing-secret-for-tests"

func newSlackHarness(t testing.TB, files map[string]string, config string) *slHarness {
	t.Helper()
	h := &slHarness{ghHarness: newGHHarness(t, files), slack: fakeslack.New(t), secret: slackSecret}
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range h.fake.Comments(7) {
				t.Logf("PR comment by %s: %s", c.User, c.Body)
			}
			for _, e := range h.slack.Ephemerals("") {
				t.Logf("Slack ephemeral to %s: %s", e.User, e.Text)
			}
		}
	})
	h.fake.Files[".iterion.yml"] += "slack:\n  channel: \"#" + fakeslack.ChannelName + "\"\n"
	file := filepath.Join(t.TempDir(), "serve.yml")
	if err := os.WriteFile(file, []byte("slack:\n  users: {U1: ana, U2: bo}\n"+config), 0o600); err != nil {
		t.Fatal(err)
	}
	h.env = append(h.env, "ITERION_CONFIG="+file, "ITERION_SLACK_BOT_TOKEN="+fakeslack.BotToken,
		"ITERION_SLACK_SIGNING_SECRET="+slackSecret, "ITERION_SLACK_API_URL="+h.slack.URL())
	return h
}

// post sends a signed request to one of serve's Slack endpoints and
// returns its answer's body, wanting a 200.
func (h *slHarness) post(endpoint, contentType string, body []byte) string {
	h.t.Helper()
	resp, err := http.DefaultClient.Do(fakeslack.Signed(h.base+"/webhooks/slack/"+endpoint, h.secret, contentType, body, time.Now()))
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("POST /webhooks/slack/%s = %d %s", endpoint, resp.StatusCode, b)
	}
	return string(b)
}

func (h *slHarness) interact(payload []byte) string {
	h.t.Helper()
	return h.post("interactive", "application/x-www-form-urlencoded", fakeslack.Form(payload))
}

// slackMessage waits for the bot's Slack message carrying metadata of
// kind whose payload has key = value.
func (h *slHarness) slackMessage(kind, key, value string) fakeslack.Message {
	h.t.Helper()
	var got fakeslack.Message
	h.slack.WaitFor(60*time.Second, "a Slack "+kind+" message of "+value, func() bool {
		for _, m := range h.slack.Messages("") {
			if m.Metadata != nil && m.Metadata.EventType == kind && m.Metadata.EventPayload[key] == value {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

// question waits for run's first question in its Slack thread, recorded
// (so a click finds it).
func (h *slHarness) question(runID string) fakeslack.Message {
	h.t.Helper()
	ix := engine.AsyncInteractionID(runID, "review", 1)
	q := h.slackMessage("iterion_question", "question_id", ix)
	h.recorded(runID, q)
	return q
}

// recorded waits until run's card links its question q: the relay
// updates the card once the question's post is recorded, so a click then
// finds it.
func (h *slHarness) recorded(runID string, q fakeslack.Message) {
	h.t.Helper()
	card := h.slackMessage("iterion_run", "run_id", runID)
	link := "/p" + strings.ReplaceAll(q.TS, ".", "")
	h.slack.WaitFor(30*time.Second, "the card to link the question "+link+" in "+card.TS, func() bool {
		m, _ := h.slack.Message(card.Channel, card.TS)
		return strings.Contains(string(m.Blocks), link)
	})
}

// The end-to-end scenario through serve, with claw and the fake
// model, once per way to answer in Slack: an agent asks; the PR comment
// and the Slack thread reply both appear; a click (an option's button,
// the modal, or a reply in the thread) answers; the PR comment says
// "answered by … via Slack"; the agent receives the answer in its next
// turn; a PR answer afterwards is told it was already answered.
func TestServeSlackAnswers(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"button", "modal", "thread reply"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			h := newSlackHarness(t, nil, "")
			has := true
			model := h.model(&fakellm.Script{Turns: []fakellm.Turn{
				{Name: "ask", Match: fakellm.Match{System: "You review pull requests", HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
					{Name: "ask_user_async", Input: map[string]any{"question": "Should I check the docs too?", "options": []any{
						map[string]any{"id": "yes", "label": "Yes, the docs too"}, map[string]any{"id": "no", "label": "Code only"}}}},
				}},
				{Name: "wait", Match: fakellm.Match{ToolResultFor: "ask_user_async"}, ToolCalls: []fakellm.ToolCall{{Name: "await_answers"}}},
				{Name: "verdict", Match: fakellm.Match{ToolResultFor: "await_answers", HasToolResult: &has}, Text: `{"summary": "LGTM"}`},
			}})
			h.start()
			h.comment("ana", "/iterion run review")
			runID := h.startedRun()
			pr := h.botComment("**Question Q1**")
			q := h.question(runID)
			card := h.slackMessage("iterion_run", "run_id", runID)
			if q.ThreadTS != card.TS || !strings.Contains(string(q.Blocks), "Question Q1") || !strings.Contains(string(card.Blocks), "acme/app#7") {
				t.Fatalf("question %+v in card %+v", q, card)
			}
			if !strings.Contains(pr.Body, "Should I check the docs too?") {
				t.Errorf("PR question = %q", pr.Body)
			}
			want := "Yes, the docs too"
			switch how {
			case "button":
				h.interact(h.slack.Click("U1", q, slackbot.ActionOption+"0", "0"))
			case "modal":
				h.interact(h.slack.Click("U1", q, slackbot.ActionWords, "words"))
				views := h.slack.Views()
				if len(views) != 1 {
					t.Fatalf("views = %+v", views)
				}
				want = "Only the public API, please"
				if body := h.interact(h.slack.Submission("U1", views[0], map[string]string{"answer": want})); body != "" {
					t.Fatalf("the modal's submission = %s", body)
				}
			case "thread reply":
				reply := h.slack.Post(fakeslack.Channel, card.TS, "U1", "1")
				h.post("events", "application/json", fakeslack.MessageEvent(reply, "Ev-reply"))
			}
			h.fake.WaitFor(60*time.Second, "the PR comment to say who answered", func() bool {
				return len(h.fake.BotComments(7, "✅ Answered by `ana` via Slack:\n\n> "+want)) == 1
			})
			waitRunStatus(h.t, h.base, h.token, runID, engine.StatusFinished)
			var await string
			for _, req := range model.Requests() {
				for _, tr := range req.ToolResults {
					if tr.Name == "await_answers" {
						await = tr.Content
					}
				}
			}
			if !strings.Contains(await, "Q: Should I check the docs too? — A: "+want) {
				t.Errorf("await_answers gave %q, want the answer", await)
			}
			h.slackMessage("iterion_answered", "question_id", engine.AsyncInteractionID(runID, "review", 1))
			h.slack.WaitFor(60*time.Second, "the card to say the run finished", func() bool {
				m, _ := h.slack.Message(card.Channel, card.TS)
				return strings.Contains(string(m.Blocks), "*Finished*")
			})
			h.comment("ana", "/iterion answer Q1 Code only")
			h.botComment("question `Q1` was already answered by ana via Slack; your answer was not used.")
		})
	}
}

// A human node's form, answered in Slack's modal: one input per field,
// a wrong value refused in the modal, the paused run continuing with the
// good one; the PR comment says who answered, via Slack.
func TestServeSlackHumanForm(t *testing.T) {
	t.Parallel()
	h := newSlackHarness(t, map[string]string{"workflows/review.bot": `schema decision:
  approved: bool
  reason: string

schema out:
  text: string

human approve:
  instructions: "Ship the release?"
  output: decision

tool ship:
  command: "printf '{\"text\": \"shipped\"}'"
  output: out
  publish: shipped

workflow w:
  entry: approve
  approve -> ship when approved
  approve -> fail
  ship -> done
`}, "")
	h.start()
	h.comment("ana", "/iterion run")
	runID := h.startedRun()
	q := h.slackMessage("iterion_question", "question_id", runID+"_approve")
	h.recorded(runID, q)
	h.interact(h.slack.Click("U1", q, slackbot.ActionForm, "form"))
	views := h.slack.Views()
	if len(views) != 1 || !strings.Contains(string(views[0].View), `"block_id":"f/approved"`) {
		t.Fatalf("views = %+v", views)
	}
	refused := h.interact(h.slack.Submission("U1", views[0], map[string]string{"f/approved": "yes", "f/reason": ""}))
	var errs struct {
		Errors map[string]string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(refused), &errs); err != nil || errs.Errors["f/reason"] == "" {
		t.Errorf("a form without its reason = %s, want an error beside reason", refused)
	}
	if body := h.interact(h.slack.Submission("U1", views[0], map[string]string{"f/approved": "yes", "f/reason": "tests pass"})); body != "" {
		t.Fatalf("a good form = %s", body)
	}
	waitRunStatus(h.t, h.base, h.token, runID, engine.StatusFinished)
	h.fake.WaitFor(60*time.Second, "the form's comment to say who answered", func() bool {
		return len(h.fake.BotComments(7, "✅ Answered by `ana` via Slack:\n\n> approved: true\n> reason: tests pass")) == 1
	})
	h.slackMessage("iterion_answered", "question_id", runID+"_approve")
}

// Who may answer from Slack: someone serve cannot tell on GitHub is told
// how to be known; bo, known, has no write permission on acme/app and is
// told so; a click on a question answered on the PR a moment earlier is
// told who answered, and where.
func TestServeSlackWhoMayAnswer(t *testing.T) {
	t.Parallel()
	h := newSlackHarness(t, nil, "")
	h.model(&fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{System: "You review pull requests", HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: "ask_user_async", Input: map[string]any{"question": "Which branch?", "options": []any{map[string]any{"id": "main", "label": "main"}}}},
		}},
		{Name: "wait", Match: fakellm.Match{ToolResultFor: "ask_user_async"}, ToolCalls: []fakellm.ToolCall{{Name: "await_answers"}}},
		{Name: "verdict", Match: fakellm.Match{ToolResultFor: "await_answers"}, Text: `{"summary": "ok"}`},
	}})
	h.start()
	h.comment("ana", "/iterion run review")
	runID := h.startedRun()
	q := h.question(runID)
	h.interact(h.slack.Click("U9", q, slackbot.ActionOption+"0", "0"))
	h.slack.WaitFor(30*time.Second, "U9 told to be mapped", func() bool {
		return slices.ContainsFunc(h.slack.Ephemerals("U9"), func(e fakeslack.Ephemeral) bool {
			return strings.Contains(e.Text, "add `U9: <your GitHub login>` under `slack.users`")
		})
	})
	h.interact(h.slack.Click("U2", q, slackbot.ActionOption+"0", "0"))
	h.slack.WaitFor(30*time.Second, "bo told he may not", func() bool {
		return slices.ContainsFunc(h.slack.Ephemerals("U2"), func(e fakeslack.Ephemeral) bool {
			return strings.Contains(e.Text, "only people with write permission on acme/app") && strings.Contains(e.Text, "you are GitHub @bo")
		})
	})
	h.comment("ana", "/iterion answer Q1 main")
	waitRunStatus(h.t, h.base, h.token, runID, engine.StatusFinished)
	h.interact(h.slack.Click("U1", q, slackbot.ActionOption+"0", "0"))
	h.slack.WaitFor(30*time.Second, "ana told it was answered on GitHub", func() bool {
		return slices.ContainsFunc(h.slack.Ephemerals("U1"), func(e fakeslack.Ephemeral) bool {
			return strings.Contains(e.Text, "Q1 was already answered by `ana` via GitHub")
		})
	})
	h.slack.WaitFor(30*time.Second, "the Slack question to say who answered", func() bool {
		m, _ := h.slack.Message(q.Channel, q.TS)
		return strings.Contains(string(m.Blocks), "Answered by @ana via GitHub")
	})
}

// /iterion run starts a workflow of serve's configuration in the
// channel, for someone slack.allowed names: its card comes in the channel
// and shows its end. Someone else is refused; /iterion status lists what
// goes on in the channel.
func TestServeSlackRun(t *testing.T) {
	t.Parallel()
	h := newSlackHarness(t, nil, "  allowed: [ana]\n  workflows: {hello: hello.bot}\n")
	file := strings.TrimPrefix(h.env[slices.IndexFunc(h.env, func(kv string) bool { return strings.HasPrefix(kv, "ITERION_CONFIG=") })], "ITERION_CONFIG=")
	if err := os.WriteFile(filepath.Join(filepath.Dir(file), "hello.bot"), []byte(`vars:
  who: string = "world"

schema out:
  text: string

human confirm:
  instructions: "Say hello to {{vars.who}}?"
  output: out

workflow hello:
  entry: confirm
  confirm -> done
`), 0o600); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.post("commands", "application/x-www-form-urlencoded", h.slack.Command("U2", fakeslack.Channel, "run hello"))
	h.slack.WaitFor(30*time.Second, "bo refused", func() bool {
		return slices.ContainsFunc(h.slack.Ephemerals("U2"), func(e fakeslack.Ephemeral) bool {
			return strings.Contains(e.Text, "only the GitHub accounts listed under `slack.allowed`")
		})
	})
	h.post("commands", "application/x-www-form-urlencoded", h.slack.Command("U1", fakeslack.Channel, "run hello who=team"))
	var runID string
	h.slack.WaitFor(30*time.Second, "ana's run started", func() bool {
		for _, e := range h.slack.Ephemerals("U1") {
			if _, rest, ok := strings.Cut(e.Text, "started run `"); ok {
				runID, _, _ = strings.Cut(rest, "`")
				return true
			}
		}
		return false
	})
	q := h.slackMessage("iterion_question", "question_id", runID+"_confirm")
	if !strings.Contains(string(q.Blocks), "Say hello to team?") {
		t.Errorf("question = %s", q.Blocks)
	}
	h.recorded(runID, q)
	h.post("commands", "application/x-www-form-urlencoded", h.slack.Command("U1", fakeslack.Channel, "status"))
	h.slack.WaitFor(30*time.Second, "the channel's status", func() bool {
		return slices.ContainsFunc(h.slack.Ephemerals("U1"), func(e fakeslack.Ephemeral) bool {
			return strings.Contains(e.Text, "run `"+runID+"` of `hello`: Waiting for answers") && strings.Contains(e.Text, "Q1: Say hello to team?")
		})
	})
	reply := h.slack.Post(q.Channel, q.ThreadTS, "U1", "hello, team")
	h.post("events", "application/json", fakeslack.MessageEvent(reply, "Ev-hello"))
	waitRunStatus(h.t, h.base, h.token, runID, engine.StatusFinished)
	card := h.slackMessage("iterion_run", "run_id", runID)
	h.slack.WaitFor(30*time.Second, "the card to say the run finished", func() bool {
		m, _ := h.slack.Message(card.Channel, card.TS)
		return strings.Contains(string(m.Blocks), "*Finished*") && strings.Contains(string(m.Blocks), "Started by `ana` via Slack")
	})
}

// serve checks Slack's token with auth.test before it serves anything: a
// token Slack refuses, a missing secret for the transport, stop it with
// what to fix; a good one is said at start, with the transport on.
func TestServeSlackStart(t *testing.T) {
	t.Parallel()
	fake := fakeslack.New(t)
	for _, tc := range []struct {
		name string
		env  map[string]string
		code int
		want string
	}{
		{"a token Slack refuses", map[string]string{"ITERION_SLACK_BOT_TOKEN": "xoxb-revoked", "ITERION_SLACK_SIGNING_SECRET": "s"}, exitError,
			"Slack refuses the bot token (invalid_auth): set ITERION_SLACK_BOT_TOKEN"},
		{"not a bot token", map[string]string{"ITERION_SLACK_BOT_TOKEN": "xoxp-user", "ITERION_SLACK_SIGNING_SECRET": "s"}, exitError,
			"ITERION_SLACK_BOT_TOKEN is not a bot token"},
		{"HTTP without the signing secret", map[string]string{"ITERION_SLACK_BOT_TOKEN": fakeslack.BotToken}, exitError,
			"Slack over HTTP needs ITERION_SLACK_SIGNING_SECRET"},
		{"Socket Mode", map[string]string{"ITERION_SLACK_BOT_TOKEN": fakeslack.BotToken, "ITERION_SLACK_APP_TOKEN": fakeslack.AppToken, "ITERION_CONFIG": "socket"}, exitOK,
			"Slack on over Socket Mode (no public URL needed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			c.setenv("ITERION_SLACK_API_URL", fake.URL())
			for k, v := range tc.env {
				if k == "ITERION_CONFIG" {
					v = writeFile(t, "serve.yml", "slack:\n  transport: "+v+"\n")
				}
				c.setenv(k, v)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			logs := &lockedBuffer{}
			pr, pw := io.Pipe()
			done := make(chan int, 1)
			go func() {
				code := c.exec(ctx, nil, pw, logs, "serve", "--addr", "127.0.0.1:0", "--store-dir", filepath.Join(t.TempDir(), "st"))
				pw.Close()
				done <- code
			}()
			if tc.code == exitOK {
				listenAddr(t, pr)
				cancel()
			} else {
				go func() { _, _ = io.Copy(io.Discard, pr) }()
			}
			if code := <-done; code != tc.code {
				t.Errorf("serve exited %d, want %d:\n%s", code, tc.code, logs.String())
			}
			if !strings.Contains(logs.String(), tc.want) {
				t.Errorf("serve's log lacks %q:\n%s", tc.want, logs.String())
			}
		})
	}
}

// serve is killed (SIGKILL) between posting a Slack message and recording
// its ts: after the restart the relay finds the message by its metadata,
// so the card and each question are in Slack once, and still answer.
func TestServeSlackCrashBetweenPostAndRecord(t *testing.T) {
	t.Parallel()
	// The relay posts the card, then Q1, then Q2.
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("post %d", n), func(t *testing.T) {
			t.Parallel()
			h := newSlackHarness(t, map[string]string{"workflows/review.bot": asyncWorkflow}, "")
			wait := h.startChild(fmt.Sprintf("%s:%d", slackbot.FailPosted, n))
			h.comment("ana", "/iterion run review")
			runID := h.startedRun()
			if !wait() {
				t.Fatalf("serve was not killed after Slack post %d", n)
			}
			h.startChild("")
			q1 := h.slackMessage("iterion_question", "question_id", runID+"_draft_async_1")
			h.slackMessage("iterion_question", "question_id", runID+"_draft_async_2")
			h.recorded(runID, q1)
			h.interact(h.slack.Click("U1", q1, slackbot.ActionWords, "words"))
			views := h.slack.Views()
			if len(views) != 1 {
				t.Fatalf("views = %+v", views)
			}
			h.interact(h.slack.Submission("U1", views[0], map[string]string{"answer": "MIT"}))
			h.comment("ana", "/iterion answer Q2 1.26")
			h.finished(runID)
			for _, m := range []string{"iterion run " + runID, "Which licence?", "Minimum Go version?"} {
				// The card's text, then each question's: the card also lists
				// the questions in its blocks, not in its text.
				var n int
				for _, msg := range h.slack.BotMessages("") {
					if strings.Contains(msg.Text, m) {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%d Slack messages say %q, want 1", n, m)
				}
			}
			h.fake.WaitFor(30*time.Second, "Q1 answered via Slack on the PR", func() bool {
				return len(h.fake.BotComments(7, "✅ Answered by `ana` via Slack:\n\n> MIT")) == 1
			})
		})
	}
}
