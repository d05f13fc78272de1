package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/backends/fakellm"
	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/bot/schedule"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakegithub"
)

// ghHarness is serve's world for GitHub tests: a fake GitHub serving
// acme/app (its .iterion.yml and workflows on the default branch, PR 7
// whose head is a real commit cloned over git's smart HTTP), the App's
// key, and a store directory. serve runs in this process (start) or as
// the real program in a child process (startChild) for crash tests.
type ghHarness struct {
	t     testing.TB
	fake  *fakegithub.Server
	store string
	env   []string
	base  string
	head  string
	// secret and token are the webhook secret and the API token.
	secret, token string
	// keyPEM is the App's private key; logs is serve's log (start).
	keyPEM string
	logs   *lockedBuffer
	// writePace is serve's GitHub write spacing (start); 0 means a
	// millisecond.
	writePace time.Duration
	// clock, when set, is the time serve's schedules fire by (start).
	clock schedule.Clock
}

const reviewWorkflow = `vars:
  pr_number: int = 0
  pr_title: string = ""

schema verdict:
  summary: string

prompt review_sys:
  You review pull requests.

prompt review_user:
  Review pull request {{vars.pr_number}}: {{vars.pr_title}}.

agent review:
  model: "anthropic/claude-test"
  interaction: async
  system: review_sys
  user: review_user
  output: verdict
  publish: review
  tools: [read_file]

workflow review:
  entry: review
  review -> done
`

func newGHHarness(t testing.TB, files map[string]string) *ghHarness {
	t.Helper()
	h := &ghHarness{t: t, fake: fakegithub.New(t, "acme", "app"), store: filepath.Join(t.TempDir(), "st"), secret: "whsec", token: "tok"}
	h.fake.Files[".iterion.yml"] = "workflows:\n  review: workflows/review.bot\ndefault_workflow: review\n"
	h.fake.Files["workflows/review.bot"] = reviewWorkflow
	for name, text := range files {
		h.fake.Files[name] = text
	}
	h.fake.Perms["ana"] = "write"
	h.head = h.fake.Commit(map[string]string{"README.md": "hello from the PR\n"})
	h.fake.PRs[7] = &fakegithub.PR{HeadSHA: h.head, HeadRef: "feature", Title: "Add docs", Body: "Please review."}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	h.keyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	if err := os.WriteFile(keyFile, []byte(h.keyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	h.env = []string{
		"ITERION_GITHUB_APP_ID=123",
		"ITERION_GITHUB_WEBHOOK_SECRET=whsec",
		"ITERION_GITHUB_PRIVATE_KEY=" + keyFile,
		"ITERION_GITHUB_API_URL=" + h.fake.URL(),
		"ITERION_GITHUB_URL=" + h.fake.GitURL(),
		"ITERION_API_TOKEN=tok",
		// Answers over the API are recorded as the token's name: ana's.
		"ITERION_API_TOKEN_NAME=ana",
	}
	return h
}

// model serves script as the Anthropic API for the runs.
func (h *ghHarness) model(script *fakellm.Script) *fakellm.Server {
	fake := fakellm.New(script, fakellm.Options{})
	srv := httptest.NewServer(fake.Handler())
	h.t.Cleanup(srv.Close)
	h.env = append(h.env, "ANTHROPIC_BASE_URL="+srv.URL, "ANTHROPIC_API_KEY=test-key")
	return fake
}

// start runs serve in this process, with the harness's environment, until
// the test ends (or stop).
func (h *ghHarness) start() (stop func()) {
	h.t.Helper()
	c := newCLI(h.t)
	c.writePace = h.writePace
	c.clock = h.clock
	for _, kv := range h.env {
		k, v, _ := strings.Cut(kv, "=")
		c.setenv(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	logs := &lockedBuffer{}
	h.logs = logs
	go func() {
		code := c.exec(ctx, nil, pw, logs, "serve", "--addr", "127.0.0.1:0", "--store-dir", h.store)
		pw.Close()
		done <- code
	}()
	h.t.Cleanup(func() {
		if h.t.Failed() {
			h.t.Logf("serve's log:\n%s", logs.String())
		}
	})
	h.base = listenAddr(h.t, pr)
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if code := <-done; code != exitOK {
			h.t.Errorf("serve exited %d", code)
		}
	}
	h.t.Cleanup(stop)
	return stop
}

// startChild runs serve as the real program in a child process, stopped
// with SIGKILL at failpoint (if any); wait returns whether it was killed.
func (h *ghHarness) startChild(failpoint string) (wait func() bool) {
	h.t.Helper()
	cmd := child(h.t, failpoint, "serve", "--addr", "127.0.0.1:0", "--store-dir", h.store)
	cmd.Env = append(cmd.Env, h.env...)
	logs := &lockedBuffer{}
	h.logs = logs
	cmd.Stderr = logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.base = listenAddr(h.t, out)
	waited := false
	var killed bool
	wait = func() bool {
		if !waited {
			waited = true
			err := cmd.Wait()
			var exit *exec.ExitError
			killed = errors.As(err, &exit) && exit.String() == "signal: killed"
			if h.t.Failed() {
				h.t.Logf("serve's log:\n%s", logs.String())
			}
		}
		return killed
	}
	h.t.Cleanup(func() {
		if !waited {
			_ = cmd.Process.Kill()
			wait()
		}
	})
	return wait
}

func listenAddr(t testing.TB, r io.Reader) string {
	t.Helper()
	sc := bufio.NewScanner(r)
	if !sc.Scan() || !strings.Contains(sc.Text(), "listening on ") {
		t.Fatalf("serve did not start: %q", sc.Text())
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	return strings.Fields(strings.SplitAfter(sc.Text(), "listening on ")[1])[0]
}

// comment writes user's comment on PR 7 on the fake and delivers its
// webhook; it returns the comment's id.
func (h *ghHarness) comment(user, body string) int64 {
	h.t.Helper()
	c := h.fake.AddComment(7, user, body)
	h.deliver(fmt.Sprintf("c-%d", c.ID), commentPayload(c.ID, user, body))
	return c.ID
}

func commentPayload(id int64, user, body string) []byte {
	p, _ := json.Marshal(map[string]any{
		"action":       "created",
		"issue":        map[string]any{"number": 7, "pull_request": map[string]any{"url": "x"}},
		"comment":      map[string]any{"id": id, "body": body, "user": map[string]any{"login": user, "type": "User"}},
		"repository":   map[string]any{"full_name": "acme/app", "name": "app", "owner": map[string]any{"login": "acme"}, "default_branch": "main"},
		"installation": map[string]any{"id": 42},
		"sender":       map[string]any{"login": user, "type": "User"},
	})
	return p
}

// deliver posts a signed issue_comment webhook and checks it was taken.
func (h *ghHarness) deliver(id string, payload []byte) {
	h.t.Helper()
	req, _ := http.NewRequest("POST", h.base+"/webhooks/github", bytes.NewReader(payload))
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", fakegithub.Sign(h.secret, payload))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		h.t.Fatalf("webhook %s = %d, want 202", id, resp.StatusCode)
	}
}

// runStatus reads a run's status over the REST API.
func (h *ghHarness) runStatus(id string) (status, errText string) {
	req, _ := http.NewRequest("GET", h.base+"/api/runs/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err.Error()
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	status, _ = out["status"].(string)
	errText, _ = out["error"].(string)
	return status, errText
}

// botComment waits for the App's comment on PR 7 containing substr.
func (h *ghHarness) botComment(substr string) fakegithub.Comment {
	h.t.Helper()
	var got fakegithub.Comment
	h.fake.WaitFor(60*time.Second, "a bot comment containing "+substr, func() bool {
		cs := h.fake.BotComments(7, substr)
		if len(cs) > 0 {
			got = cs[len(cs)-1]
		}
		return len(cs) > 0
	})
	return got
}

// startedRun waits for the reply naming the run a comment started.
func (h *ghHarness) startedRun() string {
	h.t.Helper()
	reply := h.botComment("started run `")
	m := regexp.MustCompile("started run `(gh-[0-9a-f]+)`").FindStringSubmatch(reply.Body)
	if m == nil {
		h.t.Fatalf("reply = %q", reply.Body)
	}
	return m[1]
}

// The end-to-end scenario: `/iterion run review` on a PR starts
// the review agent (claw against the fake model) in a checkout of the PR
// head; a status comment and a check run appear; the agent posts a
// question with options and waits for it; the question appears on the PR;
// a quote reply answering "1" reaches the agent; the run finishes with the
// final status comment, its artifact and a successful check run.
func TestServeGitHubReviewEndToEnd(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, nil)
	has := true
	model := h.model(&fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{System: "You review pull requests", HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: "read_file", Input: map[string]any{"path": "README.md"}},
			{Name: "ask_user_async", Input: map[string]any{"question": "Should I check the docs too?", "options": []any{
				map[string]any{"id": "yes", "label": "Yes, the docs too"}, map[string]any{"id": "no", "label": "Code only"}}}},
		}},
		{Name: "wait", Match: fakellm.Match{ToolResultFor: "ask_user_async"}, ToolCalls: []fakellm.ToolCall{{Name: "await_answers"}}},
		{Name: "verdict", Match: fakellm.Match{ToolResultFor: "await_answers", HasToolResult: &has}, Text: `{"summary": "LGTM, docs included"}`},
	}})
	h.start()

	cmd := h.comment("ana", "Please have a look.\n/iterion run review")
	runID := h.startedRun()
	h.fake.WaitFor(30*time.Second, "👀 on the command", func() bool { return slices.Contains(h.fake.Reactions(), fmt.Sprintf("%d:eyes", cmd)) })

	// 1. A status comment and a check run on the head commit.
	h.botComment("<!-- iterion:status-" + runID + " -->")
	// (The relay shows the run as it is when it gets to it: a run that
	// paused first gets its check run straight in action_required.)
	h.fake.WaitFor(30*time.Second, "a check run", func() bool {
		cr := h.fake.CheckRuns()
		return len(cr) > 0 && cr[0].HeadSHA == h.head && cr[0].Name == "iterion / review"
	})
	// 2–3. The agent's question, as a PR comment with its options.
	q := h.botComment("**Question Q1**")
	for _, want := range []string{"> Should I check the docs too?", "1. Yes, the docs too\n2. Code only", "/iterion answer Q1 <your answer>"} {
		if !strings.Contains(q.Body, want) {
			t.Errorf("question comment lacks %q:\n%s", want, q.Body)
		}
	}
	// The agent waits for it: the run pauses and the check asks for action.
	h.fake.WaitFor(30*time.Second, "the check run to ask for action", func() bool {
		cr := h.fake.CheckRuns()
		return len(cr) > 0 && slices.Contains(cr[0].History, "completed/action_required")
	})
	h.fake.WaitFor(30*time.Second, "the status comment to list the waiting question", func() bool {
		cs := h.fake.BotComments(7, "<!-- iterion:status-"+runID+" -->")
		return len(cs) == 1 && strings.Contains(cs[0].Body, "**Waiting for answers**") && strings.Contains(cs[0].Body, "- [Q1](")
	})

	// 4. A quote reply with an option's number answers it.
	reply := h.comment("ana", "> **Question Q1** · from `review`\n> > Should I check the docs too?\n\n1")
	h.fake.WaitFor(60*time.Second, "👍 on the reply", func() bool { return slices.Contains(h.fake.Reactions(), fmt.Sprintf("%d:+1", reply)) })

	// 5. The run finishes: final status comment, successful check run.
	h.fake.WaitFor(60*time.Second, "the final status comment", func() bool {
		cs := h.fake.BotComments(7, "<!-- iterion:status-"+runID+" -->")
		return len(cs) == 1 && strings.Contains(cs[0].Body, "**Finished**")
	})
	if s, e := h.runStatus(runID); s != "finished" {
		t.Fatalf("run %s is %s (%s)", runID, s, e)
	}
	final := h.botComment("<!-- iterion:status-" + runID + " -->")
	for _, want := range []string{"✅ **iterion** · run `" + runID + "` of `review` on " + h.head[:7], "Started by `ana`.", "**Published artifacts:**", "LGTM, docs included"} {
		if !strings.Contains(final.Body, want) {
			t.Errorf("final status lacks %q:\n%s", want, final.Body)
		}
	}
	h.fake.WaitFor(30*time.Second, "a successful check run", func() bool {
		cr := h.fake.CheckRuns()
		return len(cr) == 2 && cr[1].Status == "completed" && cr[1].Conclusion == "success"
	})
	h.fake.WaitFor(30*time.Second, "the question comment to say who answered", func() bool {
		return len(h.fake.BotComments(7, "✅ Answered by `ana` via GitHub:\n\n> Yes, the docs too")) == 1
	})
	// The finished run's checkout goes; the store keeps its record.
	ws := filepath.Join(h.store, "workspaces", runID)
	gone := func() bool {
		for _, p := range []string{ws, ws + ".bot"} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				return false
			}
		}
		return true
	}
	// The relay removes it after the end's last post, and nothing tells:
	// it is neither a change of the run nor a call to GitHub, and stopping
	// serve first could cancel the relay before it gets there. So this one
	// loop reads the file system, bounded.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(30 * time.Second); !gone(); <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("the checkout %s is left after the run finished", ws)
		}
	}
	// The agent read the PR head and received the answer.
	var readme, await string
	for _, req := range model.Requests() {
		for _, tr := range req.ToolResults {
			switch tr.Name {
			case "read_file":
				readme = tr.Content
			case "await_answers":
				await = tr.Content
			}
		}
	}
	if !strings.Contains(readme, "hello from the PR") {
		t.Errorf("read_file gave %q, want the PR head's README", readme)
	}
	if !strings.Contains(await, "Q: Should I check the docs too? — A: Yes, the docs too") {
		t.Errorf("await_answers gave %q, want the answer", await)
	}
	// One status comment, one question, the reply to the command: nothing
	// posted twice.
	if n := len(h.fake.BotComments(7, "")); n != 3 {
		for _, c := range h.fake.BotComments(7, "") {
			t.Logf("comment %d: %s", c.ID, c.Body)
		}
		t.Errorf("%d bot comments, want 3", n)
	}
}

// Answers written on the PR while serve was down are found at the next
// start and applied: the waiting run continues.
func TestServeGitHubReconcilesAnswersMadeWhileDown(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, nil)
	has := true
	h.model(&fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{System: "You review pull requests", HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: "ask_user_async", Input: map[string]any{"question": "Which branch do you deploy?"}},
		}},
		{Name: "wait", Match: fakellm.Match{ToolResultFor: "ask_user_async"}, ToolCalls: []fakellm.ToolCall{{Name: "await_answers"}}},
		{Name: "verdict", Match: fakellm.Match{ToolResultFor: "await_answers", HasToolResult: &has}, Text: `{"summary": "ok"}`},
	}})
	stop := h.start()
	h.comment("ana", "/iterion run")
	runID := h.startedRun()
	h.botComment("**Question Q1**")
	waitRunStatus(h.t, h.base, h.token, runID, engine.StatusPausedWaitingHuman)
	stop()

	// While serve is down: an answer by quote reply, an earlier unrelated
	// comment, and a comment by someone who may not answer.
	h.fake.AddComment(7, "bo", "> Question Q1\n> Which branch do you deploy?\nmain, surely")
	h.fake.AddComment(7, "ana", "Thanks for the review.")
	answer := h.fake.AddComment(7, "ana", "> **Question Q1** · from `review`\n> > Which branch do you deploy?\n\nrelease")

	h.start()
	h.fake.WaitFor(60*time.Second, "👍 on the answer written while down", func() bool {
		return slices.Contains(h.fake.Reactions(), fmt.Sprintf("%d:+1", answer.ID))
	})
	waitRunStatus(h.t, h.base, h.token, runID, engine.StatusFinished)
	h.botComment("Answered by `ana` via GitHub:\n\n> release")
	refusals := h.fake.BotComments(7, "@bo thank you, but only people with write permission")
	if len(refusals) != 1 {
		t.Errorf("%d refusals to bo, want 1", len(refusals))
	}
}

// The variants through the real server: hostile and broken
// webhooks store nothing, a duplicate delivery has one effect, a command
// in a code block is ignored, someone without write permission is told,
// and a fork's PR runs only for the commit a maintainer approves.
func TestServeGitHubVariants(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, map[string]string{
		"workflows/review.bot": "schema out:\n  text: string\ntool t:\n  command: \"printf '{\\\"text\\\": \\\"ok\\\"}'\"\n  output: out\nworkflow w:\n  entry: t\n  t -> done\n",
	})
	h.start()
	post := func(id, sig string, body []byte) int {
		t.Helper()
		req, _ := http.NewRequest("POST", h.base+"/webhooks/github", bytes.NewReader(body))
		req.Header.Set("X-GitHub-Event", "issue_comment")
		req.Header.Set("X-GitHub-Delivery", id)
		req.Header.Set("X-Hub-Signature-256", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	run := commentPayload(1, "ana", "/iterion run")
	if code := post("bad-sig", fakegithub.Sign("not the secret", run), run); code != http.StatusUnauthorized {
		t.Errorf("bad signature: %d, want 401", code)
	}
	big := bytes.Repeat([]byte(" "), 25<<20+1)
	if code := post("big", fakegithub.Sign("whsec", big), big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized: %d, want 413", code)
	}
	broken := []byte(`{"action": "created", "comment": `)
	if code := post("broken", fakegithub.Sign("whsec", broken), broken); code != http.StatusBadRequest {
		t.Errorf("malformed JSON: %d, want 400", code)
	}
	// None of them reached the store: GitHub was not called (but for
	// serve's own reading at start: the App's login, and its
	// repositories' schedules).
	for _, c := range h.fake.Calls() {
		switch {
		case c.Method == "GET" && (c.Path == "/app" || c.Path == "/app/installations" || c.Path == "/installation/repositories" || c.Path == "/repos/acme/app/contents/.iterion.yml"),
			c.Method == "POST" && c.Path == "/app/installations/42/access_tokens":
		default:
			t.Errorf("refused webhooks called GitHub: %+v", c)
		}
	}

	// A duplicate delivery: one run, one reply.
	c := h.fake.AddComment(7, "ana", "/iterion run")
	payload := commentPayload(c.ID, "ana", "/iterion run")
	h.deliver("dup", payload)
	h.deliver("dup", payload)
	runID := h.startedRun()
	waitRunStatus(h.t, h.base, h.token, runID, engine.StatusFinished)
	// In a code block: ignored. Without permission: told so.
	code := h.comment("ana", "To start one, write:\n```\n/iterion run\n```")
	h.comment("bo", "/iterion run")
	h.botComment("@bo `/iterion run` needs write permission on acme/app")
	h.waitDeliveriesHandled()
	if n := len(h.fake.BotComments(7, "started run")); n != 1 {
		t.Errorf("%d 'started run' replies, want 1 (duplicate delivery)", n)
	}
	if n := len(h.fake.BotComments(7, fmt.Sprintf("iterion:comment-%d ", code))); n != 0 || slices.Contains(h.fake.Reactions(), fmt.Sprintf("%d:eyes", code)) {
		t.Errorf("the command in a code block was acted on")
	}

	// A fork: the maintainer approves the head by its SHA.
	h.fake.PRs[7].HeadRepo = "mallory/app"
	h.comment("ana", "/iterion run")
	h.botComment("this pull request comes from a fork")
	h.comment("ana", "/iterion run review approve="+h.head[:7])
	h.botComment("approve it by its full SHA")
	h.comment("ana", "/iterion run review approve="+h.head)
	h.fake.WaitFor(30*time.Second, "the approved run", func() bool { return len(h.fake.BotComments(7, "started run")) == 2 })
}

// waitDeliveriesHandled waits until serve has no delivery left to handle,
// reading its metrics. A delivery that changes nothing (an ignored
// comment) has no event to wait on, neither a run's change nor a call to
// GitHub, so this reads the metrics until none is pending, bounded.
func (h *ghHarness) waitDeliveriesHandled() {
	h.t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for ; time.Now().Before(deadline); <-tick.C {
		resp, err := http.Get(h.base + "/metrics")
		if err != nil {
			h.t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "\niterion_deliveries_pending 0\n") {
			return
		}
	}
	h.t.Fatal("deliveries still pending after 30s")
}

// A human node's form is posted as a question; a reply quoting it with
// `field: value` lines answers it and the paused run continues; a reply
// with a wrong value is told what to fix and changes nothing.
func TestServeGitHubHumanForm(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, map[string]string{"workflows/review.bot": `schema decision:
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
`})
	h.start()
	h.comment("ana", "/iterion run")
	runID := h.startedRun()
	q := h.botComment("**Question Q1**")
	for _, want := range []string{"> Ship the release?", "Fields:\n- `approved`: bool\n- `reason`: string", "with one `field: value` line per field", "The run is paused until this is answered."} {
		if !strings.Contains(q.Body, want) {
			t.Errorf("form comment lacks %q:\n%s", want, q.Body)
		}
	}
	bad := h.comment("ana", "> **Question Q1**\n> > Ship the release?\n\napproved: perhaps\nreason: tests pass")
	h.botComment(fmt.Sprintf("your answer to `Q1` was not taken: answer for \"approved\": \"perhaps\" is not a yes/no answer"))
	if slices.Contains(h.fake.Reactions(), fmt.Sprintf("%d:+1", bad)) {
		t.Error("a refused answer got 👍")
	}
	good := h.comment("ana", "> **Question Q1**\n> > Ship the release?\n\napproved: yes\nreason: tests pass")
	h.fake.WaitFor(30*time.Second, "👍 on the form's answer", func() bool { return slices.Contains(h.fake.Reactions(), fmt.Sprintf("%d:+1", good)) })
	waitRunStatus(h.t, h.base, h.token, runID, engine.StatusFinished)
	h.fake.WaitFor(30*time.Second, "the form's comment to say who answered", func() bool {
		return len(h.fake.BotComments(7, "✅ Answered by `ana` via GitHub:\n\n> approved: true\n> reason: tests pass")) == 1
	})
	h.fake.WaitFor(30*time.Second, "the final status", func() bool {
		cs := h.fake.BotComments(7, "<!-- iterion:status-"+runID+" -->")
		return len(cs) == 1 && strings.Contains(cs[0].Body, "**Finished**") && strings.Contains(cs[0].Body, "shipped")
	})
}

// The workspaces serve collects itself, those of the runs no channel is
// attached to, are kept for keep_workspaces when the run stopped
// resumably, then removed; running, paused and recent ones stay, and so do
// a GitHub run's checkout (the App collects it: ghbot.Service) and the
// directory a run of iterion run worked in.
func TestSweepWorkspaces(t *testing.T) {
	t.Parallel()
	a := newCLI(t).app(nil, io.Discard, io.Discard)
	defer a.Close()
	o, err := a.becomeOwner(t.TempDir(), "test", engine.Options{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old := now.Add(-8 * 24 * time.Hour)
	developers := t.TempDir()
	runs := []struct {
		id       string
		status   engine.Status
		at       time.Time
		channels []string
		kept     bool
	}{
		{"old-cancelled", engine.StatusCancelled, old, nil, false},
		{"old-failed-resumable", engine.StatusFailedResumable, old, nil, false},
		{"new-cancelled", engine.StatusCancelled, now.Add(-time.Hour), nil, true},
		{"old-paused", engine.StatusPausedWaitingHuman, old, nil, true},
		{"old-github", engine.StatusCancelled, old, []string{"github"}, true},
		{"old-of-iterion-run", engine.StatusCancelled, old, nil, true},
	}
	for _, r := range runs {
		dir := filepath.Join(workspacesDir(o), r.id)
		if r.id == "old-of-iterion-run" {
			dir = filepath.Join(developers, r.id)
		}
		run := &engine.Run{ID: r.id, Status: r.status, Channels: r.channels, WorkDir: dir, CreatedAt: r.at, UpdatedAt: r.at}
		if r.channels != nil {
			run.Trigger = ghbot.Origin{Repo: "acme/app", PR: 7}.Trigger("")
		}
		if err := o.db.CreateRun(context.Background(), run, nil); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "src"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sweepOnce(context.Background(), o, 7*24*time.Hour, now, slog.New(slog.DiscardHandler))
	for _, r := range runs {
		dir := filepath.Join(workspacesDir(o), r.id)
		if r.id == "old-of-iterion-run" {
			dir = filepath.Join(developers, r.id)
		}
		_, err := os.Stat(dir)
		if kept := err == nil; kept != r.kept {
			t.Errorf("%s: kept = %v, want %v", r.id, kept, r.kept)
		}
	}
}

// serve's retention removes stopped runs unchanged for longer than it,
// with their workspaces; paused and recent runs stay, and 0 keeps all.
func TestRetention(t *testing.T) {
	t.Parallel()
	a := newCLI(t).app(nil, io.Discard, io.Discard)
	defer a.Close()
	o, err := a.becomeOwner(t.TempDir(), "test", engine.Options{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, r := range []struct {
		id     string
		status engine.Status
	}{{"done", engine.StatusFinished}, {"waiting", engine.StatusPausedWaitingHuman}} {
		now := time.Now()
		if err := o.db.CreateRun(ctx, &engine.Run{ID: r.id, Status: r.status, CreatedAt: now, UpdatedAt: now}, nil); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(workspacesDir(o), r.id), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.DiscardHandler)
	later := time.Now().Add(31 * 24 * time.Hour)
	retire(ctx, o, 0, later, log) // 0 keeps every run
	retire(ctx, o, 30*24*time.Hour, time.Now(), log)
	for _, id := range []string{"done", "waiting"} {
		if _, err := o.db.Run(ctx, id); err != nil {
			t.Fatalf("run %s removed before its time: %v", id, err)
		}
	}
	retire(ctx, o, 30*24*time.Hour, later, log)
	if _, err := o.db.Run(ctx, "done"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("finished run past the retention: err = %v, want it removed", err)
	}
	if _, err := os.Stat(filepath.Join(workspacesDir(o), "done")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("its workspace: %v, want it removed", err)
	}
	if _, err := o.db.Run(ctx, "waiting"); err != nil {
		t.Errorf("paused run: %v, want it kept", err)
	}
}
