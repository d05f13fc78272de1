package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/api"
	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakegithub"
	"github.com/iterion-bot/iterion/store"
)

// GitHub crash tests: serve runs as the real program in a child process
// (startChild), is stopped with SIGKILL at a failpoint of the GitHub
// channel or of the engine, and is started again on the same store. What
// GitHub shows afterwards is read from the fake: nothing acknowledged is
// lost and nothing is posted twice.

// computeWorkflow finishes at once and needs no backend, so serve may run
// it in this process too.
const computeWorkflow = `compute c:
  expr:
    x: "1"

workflow review:
  entry: c
  c -> done
`

// asyncWorkflow is a small examples/async-questions: in the child the
// scripted twoQuestions backend makes draft post "Which licence?" and
// "Minimum Go version?", the gate waits for both answers, and finalize
// returns its prompt (which holds the answers) as the readme artifact.
const asyncWorkflow = `schema draft_out:
  draft: string
  open_questions: string[]

schema final_out:
  readme: string

prompt draft_user:
  Draft the README.

prompt final_user:
  Here is the draft: {{outputs.draft.draft}}
  The operator answered: {{outputs.gate.answers}}

agent draft:
  model: "anthropic/claude-test"
  interaction: async
  user: draft_user
  output: draft_out

await_answers gate:
  from: draft
  timeout: "30m"

agent finalize:
  model: "anthropic/claude-test"
  user: final_user
  output: final_out
  publish: readme

workflow review:
  entry: draft
  draft -> gate
  gate -> finalize
  finalize -> done
`

// api GETs path from serve's REST API into out.
func (h *ghHarness) api(path string, out any) {
	h.t.Helper()
	req, _ := http.NewRequest("GET", h.base+path, nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		h.t.Fatalf("GET %s = %d: %s", path, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
}

// events returns the run's events over the REST API.
func (h *ghHarness) events(runID string) []engine.Event {
	h.t.Helper()
	var out struct {
		Events []engine.Event `json:"events"`
	}
	h.api("/api/runs/"+runID+"/events", &out)
	return out.Events
}

// waitNodeStarted waits until node has started in the run. Nothing on the
// fake GitHub shows it in time (progress reaches the status comment at
// most every 10 s), so it waits on the run's events over the REST API,
// long-polled. A minute without it fails the test: a watchdog, not a wait.
func (h *ghHarness) waitNodeStarted(runID, node string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := api.NewClient(h.base, api.ClientOptions{Token: h.token})
	var after int64
	for {
		evs, err := c.Events(ctx, runID, after, 1000, 30*time.Second)
		if err != nil {
			h.t.Fatalf("node %s of run %s did not start: %v", node, runID, err)
		}
		for _, ev := range evs {
			if ev.Type == engine.EventNodeStarted && ev.NodeID == node {
				return
			}
			after = ev.Seq
		}
	}
}

// pendingIDs lists the run's unanswered questions over the REST API.
func (h *ghHarness) pendingIDs(runID string) []string {
	h.t.Helper()
	var out struct {
		Interactions []engine.Interaction `json:"interactions"`
	}
	h.api("/api/runs/"+runID+"/interactions/pending", &out)
	var ids []string
	for _, ix := range out.Interactions {
		ids = append(ids, ix.ID)
	}
	return ids
}

// finished waits for the run's status comment to say it finished and
// returns that comment.
func (h *ghHarness) finished(runID string) fakegithub.Comment {
	h.t.Helper()
	var got fakegithub.Comment
	h.fake.WaitFor(30*time.Second, "the final status comment of "+runID, func() bool {
		for _, c := range h.fake.BotComments(7, "<!-- iterion:status-"+runID+" -->") {
			if strings.Contains(c.Body, "**Finished**") {
				got = c
				return true
			}
		}
		return false
	})
	return got
}

// countCalls counts the requests the fake served with method on path and, when
// status is not 0, that status.
func countCalls(fake *fakegithub.Server, method, path string, status int) int {
	n := 0
	for _, c := range fake.Calls() {
		if c.Method == method && c.Path == path && (status == 0 || c.Status == status) {
			n++
		}
	}
	return n
}

const commentsPath = "/repos/acme/app/issues/7/comments"

// forwarded marks the requests createOnFake makes, which the Fail hooks
// let through.
const forwarded = "X-Test-Forwarded"

// Marker prefixes of the relay's comments.
const (
	statusMarker   = "<!-- iterion:status-"
	questionMarker = "<!-- iterion:question-"
)

// newPost reports whether r posts a new comment holding marker; it reads
// the body and puts it back for the fake.
func newPost(r *http.Request, marker string) (body []byte, ok bool) {
	if r.Method != http.MethodPost || r.URL.Path != commentsPath || r.Header.Get(forwarded) != "" {
		return nil, false
	}
	body, _ = io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, bytes.Contains(body, []byte(marker))
}

// createOnFake makes the comment r asks for on the fake itself, as GitHub
// does when a proxy in front of it answers 502 after the write.
func createOnFake(t *testing.T, url string, r *http.Request, body []byte) {
	req, _ := http.NewRequest(http.MethodPost, strings.TrimSuffix(url, "/")+r.URL.Path, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	req.Header.Set(forwarded, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("creating the comment behind the 502: %v", err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("creating the comment behind the 502: %d", resp.StatusCode)
	}
}

// holdPost makes the first POST of a comment holding marker wait until
// release is called (at the latest when the test ends); held is closed
// when it arrives. Holding the relay lets a test decide what the run has
// done before the outbox rows are performed. The held POST then goes on
// to the fake, or, with written, is written on the fake at once and
// answered 502 once released, as when the process that sent it died
// before GitHub answered.
func holdPost(t *testing.T, fake *fakegithub.Server, marker string, written bool) (held <-chan struct{}, release func()) {
	arrived, gate := make(chan struct{}), make(chan struct{})
	var first, once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	// Cleanups run last-in first-out: this one runs before the fake's
	// Close, which waits for the held request.
	t.Cleanup(release)
	url := fake.URL()
	fake.SetFail(func(w http.ResponseWriter, r *http.Request) bool {
		body, ok := newPost(r, marker)
		if !ok {
			return false
		}
		answered := false
		first.Do(func() {
			if written {
				createOnFake(t, url, r, body)
			}
			close(arrived)
			<-gate
			if written {
				w.WriteHeader(http.StatusBadGateway)
				answered = true
			}
		})
		return answered
	})
	return arrived, release
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("waited 30s for %s", what)
	}
}

// serve dies after answering a delivery 202 and before handling it; the
// restarted serve handles it exactly once.
func TestGitHubCrashAfterDeliveryAcknowledged(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, map[string]string{"workflows/review.bot": computeWorkflow})
	wait := h.startChild(ghbot.FailDeliveryHandling)
	cmd := h.comment("ana", "/iterion run review") // checks the 202
	if !wait() {
		t.Fatal("serve was not killed before handling the delivery")
	}
	if cs := h.fake.BotComments(7, ""); len(cs) != 0 || len(h.fake.Reactions()) != 0 {
		t.Fatalf("the delivery was handled before the failpoint: comments %v, reactions %v", cs, h.fake.Reactions())
	}

	// Restarted (in this process, on the same store), serve finds the
	// stored delivery by itself: GitHub does not redeliver an acknowledged
	// webhook.
	stop := h.start()
	runID := h.startedRun()
	h.finished(runID)
	if n := len(h.fake.BotComments(7, "started run `")); n != 1 {
		t.Errorf("%d \"started run\" replies, want 1", n)
	}
	if n := countCalls(h.fake, "POST", fmt.Sprintf("/repos/acme/app/issues/comments/%d/reactions", cmd), 0); n != 1 || !slices.Contains(h.fake.Reactions(), fmt.Sprintf("%d:eyes", cmd)) {
		t.Errorf("%d reactions to the command (%v), want one 👀", n, h.fake.Reactions())
	}
	var list struct {
		Runs []engine.Run `json:"runs"`
	}
	h.api("/api/runs", &list)
	if len(list.Runs) != 1 || list.Runs[0].ID != runID || list.Runs[0].Status != engine.StatusFinished {
		t.Errorf("runs = %+v, want %s alone, finished", list.Runs, runID)
	}
	if n := len(h.fake.BotComments(7, "<!-- iterion:status-")); n != 1 {
		t.Errorf("%d status comments, want 1", n)
	}

	// The delivery is recorded as handled: another start would not handle
	// it again.
	stop()
	db, err := store.Open(h.store, store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pending, err := db.PendingDeliveries(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range pending {
		t.Errorf("delivery %s is still pending after the run (attempts %d)", d.ID, d.Attempts)
	}
}

// serve dies right after storing an answer given on the PR, before
// acknowledging it; after the restart the answer is still there, and the
// run finishes with both answers once the other question is answered.
func TestGitHubCrashAfterAnswerCommitted(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, map[string]string{"workflows/review.bot": asyncWorkflow})
	wait := h.startChild(engine.FailAnswerCommitted)
	h.comment("ana", "/iterion run review")
	runID := h.startedRun()
	h.botComment("**Question Q2**")
	// At the gate the draft node is done: the restart does not run it
	// (and ask its questions) again.
	h.waitNodeStarted(runID, "gate")
	ans := h.comment("ana", "/iterion answer Q1 MIT")
	if !wait() {
		t.Fatal("serve was not killed after storing the answer")
	}
	if slices.Contains(h.fake.Reactions(), fmt.Sprintf("%d:+1", ans)) || len(h.fake.BotComments(7, "answer to `Q1`")) != 0 {
		t.Fatal("the answer was acknowledged on the PR although serve died first")
	}

	h.startChild("")
	q1, q2 := runID+"_draft_async_1", runID+"_draft_async_2"
	if got := h.pendingIDs(runID); !slices.Equal(got, []string{q2}) {
		t.Errorf("pending after the restart = %v, want only %s", got, q2)
	}
	h.fake.WaitFor(30*time.Second, "Q1's comment to say it was answered", func() bool {
		cs := h.fake.BotComments(7, "<!-- iterion:question-"+q1+" -->")
		return len(cs) == 1 && strings.Contains(cs[0].Body, "✅ Answered by `ana` via GitHub:\n\n> MIT")
	})
	// The delivery that brought the answer was not marked handled, so the
	// restarted serve handles it again: it takes no second answer, and it
	// tells the person their answer was taken, not that it was refused.
	redo := h.botComment(fmt.Sprintf("<!-- iterion:comment-%d -->", ans))
	if !strings.Contains(redo.Body, "answer to `Q1` recorded") {
		t.Errorf("the answer handled again got the reply:\n%s\nwant one saying it was recorded", redo.Body)
	}
	if !slices.Contains(h.fake.Reactions(), fmt.Sprintf("%d:+1", ans)) {
		t.Errorf("no 👍 on the answer handled again: %v", h.fake.Reactions())
	}

	h.comment("ana", "/iterion answer Q2 1.26")
	final := h.finished(runID)
	var readme string
	for _, ev := range h.events(runID) {
		if ev.Type == engine.EventNodeFinished && ev.NodeID == "finalize" {
			out, _ := ev.Data["output"].(map[string]any)
			readme, _ = out["readme"].(string)
		}
	}
	for _, want := range []string{"Which licence?", "MIT", "Minimum Go version?", "1.26"} {
		if !strings.Contains(readme, want) {
			t.Errorf("finalize's input lacks %q:\n%s", want, readme)
		}
		if !strings.Contains(final.Body, want) {
			t.Errorf("the published readme lacks %q:\n%s", want, final.Body)
		}
	}
	if strings.Count(readme, "MIT") != 1 {
		t.Errorf("finalize got the answer to Q1 %d times:\n%s", strings.Count(readme, "MIT"), readme)
	}
	for _, q := range []string{"**Question Q1**", "**Question Q2**", "<!-- iterion:status-"} {
		if n := len(h.fake.BotComments(7, q)); n != 1 {
			t.Errorf("%d comments with %q, want 1", n, q)
		}
	}
	if n := len(h.fake.BotComments(7, "**Question Q3**")); n != 0 {
		t.Errorf("questions asked again after the restart: %d", n)
	}
}

// GitHub answers 502 to the first POST of the run's status comment:
// the row is postponed, and the run still ends up with exactly one status
// comment, also when GitHub had written the comment behind the 502.
//
// The postponed row itself is retried after 30 s (classify gives every
// 5xx 30 s and ignores Retry-After), too long for this test: the status
// comment is posted by the sync of the run's next row (run_finished),
// which looks for the marker first, exactly as the retried row does.
func TestGitHubStatusCommentAfter502(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		created bool // GitHub wrote the comment before the 502
	}{
		{name: "comment not written"},
		{name: "comment written behind the 502", created: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newGHHarness(t, map[string]string{"workflows/review.bot": computeWorkflow})
			url := h.fake.URL()
			var once sync.Once
			h.fake.SetFail(func(w http.ResponseWriter, r *http.Request) bool {
				body, ok := newPost(r, statusMarker)
				if !ok {
					return false
				}
				failed := false
				once.Do(func() {
					if tc.created {
						createOnFake(t, url, r, body)
					}
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(http.StatusBadGateway)
					failed = true
				})
				return failed
			})
			h.start()
			h.comment("ana", "/iterion run review")
			runID := h.startedRun()
			h.finished(runID)
			h.fake.WaitFor(30*time.Second, "a successful check run", func() bool {
				cr := h.fake.CheckRuns()
				return len(cr) > 0 && cr[len(cr)-1].Conclusion == "success"
			})
			if s, e := h.runStatus(runID); s != "finished" {
				t.Fatalf("run %s is %s (%s)", runID, s, e)
			}
			if n := len(h.fake.BotComments(7, "<!-- iterion:status-"+runID+" -->")); n != 1 {
				t.Errorf("%d status comments, want 1", n)
			}
			if n := countCalls(h.fake, "POST", commentsPath, http.StatusBadGateway); n != 1 {
				t.Errorf("%d POSTs answered 502, want 1", n)
			}
			// The reply to the command and the status comment: written by
			// the next row's POST, or behind the 502 and then found.
			if n := countCalls(h.fake, "POST", commentsPath, http.StatusCreated); n != 2 {
				t.Errorf("%d comments created, want 2", n)
			}
			if cr := h.fake.CheckRuns(); len(cr) != 1 || cr[0].Conclusion != "success" {
				t.Errorf("check runs = %+v, want one, successful", cr)
			}
		})
	}
}

// serve dies after an outbox row's comments are posted and before the
// row is marked done: the row is performed again after the restart and
// finds what it posted, so every comment is there once.
func TestGitHubCrashAfterOutboxPerformed(t *testing.T) {
	t.Parallel()
	// The rows are performed in order: run_started (the status comment and
	// the check run), then question_posted for Q1 and for Q2.
	for _, n := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("row %d", n), func(t *testing.T) {
			t.Parallel()
			h := newGHHarness(t, map[string]string{"workflows/review.bot": asyncWorkflow})
			held, release := holdPost(t, h.fake, statusMarker, false)
			wait := h.startChild(fmt.Sprintf("%s:%d", ghbot.FailOutboxPerformed, n))
			h.comment("ana", "/iterion run review")
			runID := h.startedRun()
			// The relay is held on the status comment until both questions
			// are stored and the draft node is done, so the rows are the
			// same each time and the restart does not ask again.
			waitClosed(t, held, "the status comment's POST")
			h.waitNodeStarted(runID, "gate")
			release()
			if !wait() {
				t.Fatalf("serve was not killed after performing row %d", n)
			}
			before := len(h.fake.BotComments(7, ""))

			h.startChild("")
			h.botComment("**Question Q1**")
			h.botComment("**Question Q2**")
			h.comment("ana", "/iterion answer Q1 MIT")
			h.comment("ana", "/iterion answer Q2 1.26")
			h.finished(runID)
			assertPostedOnce(t, h, runID)
			// The reply, the status comment and the questions of the rows
			// before n: the crash came right after row n.
			if before != 1+n {
				t.Errorf("%d bot comments before the crash at row %d, want %d", before, n, 1+n)
			}
		})
	}
	// Killed between GitHub writing a comment and the store recording it
	// (no failpoint there: the POST is held while an answer given over the
	// API stops serve), the restart finds the comment by its marker alone.
	for _, tc := range []struct {
		name, marker string
		// before is answered over the API to stop serve, after on the PR
		// once it is back.
		before, after string
	}{
		{name: "status comment written, not recorded", marker: statusMarker, before: "1", after: "Q2"},
		{name: "question comment written, not recorded", marker: questionMarker, before: "2", after: "Q1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newGHHarness(t, map[string]string{"workflows/review.bot": asyncWorkflow})
			held, release := holdPost(t, h.fake, tc.marker, true)
			wait := h.startChild(engine.FailAnswerCommitted)
			h.comment("ana", "/iterion run review")
			runID := h.startedRun()
			waitClosed(t, held, "the comment's POST")
			h.waitNodeStarted(runID, "gate")
			body := strings.NewReader(`{"answer": "an answer"}`)
			req, _ := http.NewRequest("POST", h.base+"/api/runs/"+runID+"/interactions/"+runID+"_draft_async_"+tc.before+"/answer", body)
			req.Header.Set("Authorization", "Bearer tok")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
			if !wait() {
				t.Fatal("serve was not killed after storing the answer")
			}
			release()
			if n := len(h.fake.BotComments(7, tc.marker)); n != 1 {
				t.Fatalf("%d comments with %q before the restart, want the one written", n, tc.marker)
			}

			h.startChild("")
			h.botComment("**Question Q2**")
			h.comment("ana", "/iterion answer "+tc.after+" yes")
			h.finished(runID)
			assertPostedOnce(t, h, runID)
		})
	}
}

// assertPostedOnce checks a finished run of asyncWorkflow left one status
// comment, one comment per question, each answered, and one check run.
func assertPostedOnce(t *testing.T, h *ghHarness, runID string) {
	t.Helper()
	// The status comment is synced first; the question comments and the
	// check run follow.
	h.fake.WaitFor(30*time.Second, "both questions answered and a successful check run", func() bool {
		cr := h.fake.CheckRuns()
		return len(cr) > 0 && cr[len(cr)-1].Conclusion == "success" &&
			len(h.fake.BotComments(7, "✅ Answered by `ana`")) >= 2
	})
	if n := len(h.fake.BotComments(7, "<!-- iterion:status-"+runID+" -->")); n != 1 {
		t.Errorf("%d status comments, want 1", n)
	}
	for _, q := range []string{"Q1", "Q2"} {
		cs := h.fake.BotComments(7, "**Question "+q+"**")
		if len(cs) != 1 {
			t.Errorf("%d comments for %s, want 1", len(cs), q)
			continue
		}
		if !strings.Contains(cs[0].Body, "✅ Answered by `ana`") {
			t.Errorf("%s's comment does not say it was answered:\n%s", q, cs[0].Body)
		}
	}
	if n := len(h.fake.BotComments(7, "**Question Q3**")); n != 0 {
		t.Errorf("questions asked again after the restart: %d", n)
	}
	if cr := h.fake.CheckRuns(); len(cr) != 1 || cr[0].Name != "iterion / review" || cr[0].Conclusion != "success" {
		t.Errorf("check runs = %+v, want one, successful", cr)
	}
}

// serve dies after acknowledging an answer comment and before handling
// it. At the restart two paths meet the same comment at once: the worker
// handles the stored delivery, and the start-up reconciliation reads the
// comments written since the question was asked. The answer is recorded
// once, the comment gets one 👍, and no reply is written twice.
func TestGitHubRestartBetweenAnswerDeliveryAndReconciliation(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, map[string]string{"workflows/review.bot": asyncWorkflow})
	// The run command is the first delivery handled, the answer the second.
	wait := h.startChild(ghbot.FailDeliveryHandling + ":2")
	h.comment("ana", "/iterion run review")
	runID := h.startedRun()
	h.botComment("**Question Q2**")
	h.waitNodeStarted(runID, "gate")
	ans := h.comment("ana", "/iterion answer Q1 MIT")
	if !wait() {
		t.Fatal("serve was not killed before handling the answer")
	}
	if slices.Contains(h.fake.Reactions(), fmt.Sprintf("%d:+1", ans)) {
		t.Fatal("the answer was handled before the failpoint")
	}

	h.startChild("")
	// Both paths have acted once the reconciliation says it is done and
	// the stored delivery is handled.
	h.logs.waitFor(t, 30*time.Second, "answers written on pull requests while the server was down are applied")
	h.fake.WaitFor(30*time.Second, "👍 on the answer", func() bool {
		return slices.Contains(h.fake.Reactions(), fmt.Sprintf("%d:+1", ans))
	})
	h.waitDeliveriesHandled()
	q1 := runID + "_draft_async_1"
	if got := h.pendingIDs(runID); slices.Contains(got, q1) {
		t.Fatalf("Q1 still pending after the restart: %v", got)
	}
	reactions := 0
	for _, r := range h.fake.Reactions() {
		if r == fmt.Sprintf("%d:+1", ans) {
			reactions++
		}
	}
	if reactions != 1 {
		t.Errorf("%d 👍 on the answer, want 1 (%v)", reactions, h.fake.Reactions())
	}
	if n := len(h.fake.BotComments(7, fmt.Sprintf("<!-- iterion:comment-%d -->", ans))); n != 1 {
		t.Errorf("%d replies to the answer comment, want 1", n)
	}
	answered := 0
	for _, ev := range h.events(runID) {
		if ev.Type == engine.EventInteractionAnswered && ev.Data["interaction_id"] == q1 {
			answered++
		}
	}
	if answered != 1 {
		t.Errorf("Q1 answered %d times in the run's events, want 1", answered)
	}

	h.comment("ana", "/iterion answer Q2 1.26")
	final := h.finished(runID)
	if strings.Count(final.Body, "MIT") != 1 {
		t.Errorf("the published readme holds the answer to Q1 %d times:\n%s", strings.Count(final.Body, "MIT"), final.Body)
	}
}
