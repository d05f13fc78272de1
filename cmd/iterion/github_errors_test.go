package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/internal/fakegithub"
)

// askingReview is the review agent's script: it asks one question, waits
// for its answer, then gives its verdict.
func askingReview() *fakellm.Script {
	has := true
	return &fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{System: "You review pull requests", HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: "ask_user_async", Input: map[string]any{"question": "Should I check the docs too?"}},
		}},
		{Name: "wait", Match: fakellm.Match{ToolResultFor: "ask_user_async"}, ToolCalls: []fakellm.ToolCall{{Name: "await_answers"}}},
		{Name: "verdict", Match: fakellm.Match{ToolResultFor: "await_answers", HasToolResult: &has}, Text: `{"summary": "LGTM"}`},
	}}
}

// deliverEvent posts a signed webhook of any event.
func (h *ghHarness) deliverEvent(event, id string, payload []byte) {
	h.t.Helper()
	req, _ := http.NewRequest("POST", h.base+"/webhooks/github", bytes.NewReader(payload))
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", fakegithub.Sign(h.secret, payload))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		h.t.Fatalf("webhook %s = %d, want 202", id, resp.StatusCode)
	}
}

func installationPayload(action string) []byte {
	p, _ := json.Marshal(map[string]any{
		"action":       action,
		"installation": map[string]any{"id": 42, "account": map[string]any{"login": "acme"}},
		"sender":       map[string]any{"login": "acme-admin", "type": "User"},
	})
	return p
}

// answerOverAPI answers a run's only pending question through REST.
func (h *ghHarness) answerOverAPI(runID, text string) {
	h.t.Helper()
	ids := h.pendingIDs(runID)
	if len(ids) != 1 {
		h.t.Fatalf("run %s has pending questions %v, want one", runID, ids)
	}
	body, _ := json.Marshal(map[string]string{"answer": text})
	req, _ := http.NewRequest("POST", h.base+"/api/runs/"+runID+"/interactions/"+ids[0]+"/answer", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+h.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("answer = %d: %s", resp.StatusCode, b)
	}
}

// pausedOnItsQuestion starts a review on PR 7 and waits until it waits for
// its question, shown on the PR with the check run asking for action.
func (h *ghHarness) pausedOnItsQuestion() string {
	h.t.Helper()
	h.comment("ana", "/iterion run review")
	runID := h.startedRun()
	h.botComment("**Question Q1**")
	h.fake.WaitFor(30*time.Second, "the check run to ask for action", func() bool {
		cr := h.fake.CheckRuns()
		return len(cr) > 0 && slices.Contains(cr[len(cr)-1].History, "completed/action_required")
	})
	return runID
}

// metric reads one line of serve's /metrics.
func (h *ghHarness) metric(name string) string {
	h.t.Helper()
	resp, err := http.Get(h.base + "/metrics")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Someone deletes the run's status comment mid-run: it is posted again
// with its new id, and the rest of the update goes on (the check run
// completes).
func TestServeGitHubStatusCommentDeleted(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, nil)
	h.model(askingReview())
	h.start()
	runID := h.pausedOnItsQuestion()
	status := h.botComment("<!-- iterion:status-" + runID + " -->")
	h.fake.DeleteComment(status.ID)

	h.answerOverAPI(runID, "yes")
	final := h.finished(runID)
	if final.ID == status.ID {
		t.Errorf("the final status is the deleted comment %d", status.ID)
	}
	h.fake.WaitFor(30*time.Second, "a successful check run", func() bool {
		cr := h.fake.CheckRuns()
		return cr[len(cr)-1].Conclusion == "success"
	})
	if n := len(h.fake.BotComments(7, "<!-- iterion:status-"+runID+" -->")); n != 1 {
		t.Errorf("%d status comments, want the one posted again", n)
	}
}

// The App is uninstalled mid-run, then installed again. Meanwhile the
// run's comments and a new comment's handling are held: nothing is asked
// of GitHub, /metrics says so, and it is logged once. The installation
// event releases them, and the run's end reaches the PR.
func TestServeGitHubUninstalledThenReinstalled(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, nil)
	h.model(askingReview())
	h.start()
	runID := h.pausedOnItsQuestion()

	h.fake.SetInstallation(fakegithub.Uninstalled)
	h.deliverEvent("installation", "inst-deleted", installationPayload("deleted"))
	h.logs.waitFor(t, 30*time.Second, "GitHub installation refused")
	if got := h.metric(`iterion_github_installations_refused{status="404"}`); got != "1" {
		t.Errorf("refused installations (404) = %q, want 1", got)
	}
	before := len(h.fake.Calls())
	h.answerOverAPI(runID, "yes")
	h.logs.waitFor(t, 30*time.Second, `msg="run ended" run=`+runID+" status=finished")
	h.comment("ana", "/iterion status")
	h.logs.waitFor(t, 30*time.Second, `msg="delivery held until its hold is released"`)
	if got := h.metric("iterion_deliveries_held"); got != "1" {
		t.Errorf("iterion_deliveries_held = %q, want 1", got)
	}
	for _, c := range h.fake.Calls()[before:] {
		if !strings.HasPrefix(c.Path, "/git/") {
			t.Errorf("a call to GitHub while uninstalled: %s %s", c.Method, c.Path)
		}
	}
	if n := strings.Count(h.logs.String(), "GitHub installation refused"); n != 1 {
		t.Errorf("the refusal was logged %d times, want once", n)
	}

	h.fake.SetInstallation(fakegithub.Installed)
	h.deliverEvent("installation", "inst-created", installationPayload("created"))
	h.finished(runID)
	h.fake.WaitFor(30*time.Second, "a successful check run", func() bool {
		cr := h.fake.CheckRuns()
		return cr[len(cr)-1].Conclusion == "success"
	})
	h.botComment("run `" + runID + "`") // the held /iterion status answered
	if h.metric(`iterion_github_installations_refused{status="404"}`) != "0" {
		t.Error("the installation is still counted as refused")
	}
}

// A check run of another App with the same name and external id is not
// taken for the bot's: the bot makes its own, and leaves the other alone.
func TestServeGitHubForeignCheckRun(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, nil)
	h.model(askingReview())
	h.start()
	h.comment("ana", "/iterion run review")
	runID := h.startedRun()
	foreign := h.fake.AddCheckRun(77, h.head, "iterion / review", runID, "in_progress", "")
	h.botComment("**Question Q1**")
	h.answerOverAPI(runID, "yes")
	h.finished(runID)
	h.fake.WaitFor(30*time.Second, "the bot's successful check run", func() bool {
		for _, cr := range h.fake.CheckRuns() {
			if cr.AppID == fakegithub.AppID && cr.Conclusion == "success" {
				return true
			}
		}
		return false
	})
	for _, cr := range h.fake.CheckRuns() {
		if cr.ID == foreign && (cr.Status != "in_progress" || len(cr.History) != 0) {
			t.Errorf("the other App's check run was changed: %+v", cr)
		}
	}
}

// Rate limits through serve: a secondary limit without Retry-After
// postpones the write by a minute, and a 429 primary limit until its
// reset; neither is given up.
func TestServeGitHubRateLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		write func(w http.ResponseWriter)
		retry string
	}{
		{"secondary without Retry-After", func(w http.ResponseWriter) { fakegithub.WriteSecondaryLimit(w, http.StatusForbidden, 0) }, "(retry in 1m0s)"},
		{"429 primary", func(w http.ResponseWriter) {
			fakegithub.WritePrimaryLimit(w, http.StatusTooManyRequests, time.Now().Add(30*time.Minute))
		}, "GitHub's rate limit (429), until"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newGHHarness(t, nil)
			var limited atomic.Int32
			h.fake.SetFail(func(w http.ResponseWriter, r *http.Request) bool {
				// The first comment the bot writes is refused.
				if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/comments") && limited.Add(1) == 1 {
					tc.write(w)
					return true
				}
				return false
			})
			h.start()
			h.comment("ana", "/iterion help")
			h.logs.waitFor(t, 30*time.Second, tc.retry)
			h.logs.waitFor(t, 30*time.Second, "handling a delivery postponed")
			// Postponed, not failed: it is still to handle.
			if got := h.metric("iterion_deliveries_postponed"); got != "1" {
				t.Errorf("iterion_deliveries_postponed = %q, want 1", got)
			}
			if n := limited.Load(); n != 1 {
				t.Errorf("%d writes made while limited, want 1", n)
			}
		})
	}
}

func checkRunPayload(action, runID, sha, sender string, pr int) []byte {
	prs := []any{}
	if pr != 0 {
		prs = append(prs, map[string]any{"number": pr})
	}
	p, _ := json.Marshal(map[string]any{
		"action": action,
		"check_run": map[string]any{"id": 1, "name": "iterion / review", "external_id": runID, "head_sha": sha,
			"status": "completed", "conclusion": "success", "app": map[string]any{"id": fakegithub.AppID}, "pull_requests": prs},
		"repository":   map[string]any{"full_name": "acme/app", "name": "app", "owner": map[string]any{"login": "acme"}, "default_branch": "main"},
		"installation": map[string]any{"id": 42},
		"sender":       map[string]any{"login": sender, "type": "User"},
	})
	return p
}

// The check run's Re-run button starts the same workflow again on the
// same head, for someone with write permission; anyone else is told why
// not. A fork's check run names no PR: the run it belongs to does.
func TestServeGitHubRerun(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, nil)
	h.model(&fakellm.Script{Fallback: &fakellm.Turn{Text: `{"summary": "LGTM"}`}})
	h.start()
	h.comment("ana", "/iterion run review")
	first := h.startedRun()
	h.finished(first)

	h.deliverEvent("check_run", "rerun-bo", checkRunPayload("rerequested", first, h.head, "bo", 7))
	h.botComment("@bo re-running a check needs write permission on acme/app")

	h.deliverEvent("check_run", "rerun-ana", checkRunPayload("rerequested", first, h.head, "ana", 0))
	reply := h.botComment("@ana Re-run of `" + first + "`: started run `")
	m := regexp.MustCompile("started run `(gh-[0-9a-f]+)` of `review` on " + h.head[:7]).FindStringSubmatch(reply.Body)
	if m == nil || m[1] == first {
		t.Fatalf("re-run reply = %q", reply.Body)
	}
	h.finished(m[1])
	// A redelivery of the click starts nothing more.
	h.deliverEvent("check_run", "rerun-ana", checkRunPayload("rerequested", first, h.head, "ana", 0))
	// A click on a check run of a head the run was not on is ignored.
	h.deliverEvent("check_run", "rerun-other", checkRunPayload("rerequested", first, strings.Repeat("0", 40), "ana", 7))
	h.comment("ana", "/iterion status")
	h.botComment("`" + m[1] + "`")
	if n := len(h.fake.BotComments(7, "Re-run of")); n != 1 {
		t.Errorf("%d re-run replies, want 1", n)
	}
}

// A signed comment sent again under new delivery ids (the header is not
// signed) starts nothing more: what a comment does is keyed by the
// comment.
func TestServeGitHubReplayedComment(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, nil)
	h.model(&fakellm.Script{Fallback: &fakellm.Turn{Text: `{"summary": "LGTM"}`}})
	h.start()
	c := h.fake.AddComment(7, "ana", "/iterion run review")
	payload := commentPayload(c.ID, "ana", c.Body)
	for _, id := range []string{"replay-1", "replay-2", "replay-3"} {
		h.deliverEvent("issue_comment", id, payload)
	}
	runID := h.startedRun()
	h.finished(runID)
	h.comment("ana", "/iterion status") // handled after the replays
	h.botComment("`" + runID + "`")
	if n := len(h.fake.BotComments(7, "started run `")); n != 1 {
		t.Errorf("%d runs started by one comment delivered three times, want 1", n)
	}
	var list struct {
		Runs []struct{ ID string } `json:"runs"`
	}
	h.api("/api/runs", &list)
	if len(list.Runs) != 1 {
		t.Errorf("runs = %+v, want one", list.Runs)
	}
}

// Commands a reader cannot see start nothing, through serve: in an HTML
// comment, in <pre>, and in a four-backtick fence a three-backtick line
// does not close.
func TestServeGitHubHiddenCommands(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, nil)
	h.start()
	for _, body := range []string{
		"LGTM <!--\n/iterion run review\n-->",
		"<pre>\n/iterion run review\n</pre>",
		"````\n```\n/iterion run review\n````",
	} {
		h.comment("ana", body)
	}
	// Handled after them, one installation's deliveries going in order.
	h.comment("ana", "/iterion help")
	h.botComment("iterion commands, each on its own line")
	if cs := h.fake.BotComments(7, "run"); len(cs) != 1 {
		t.Errorf("bot comments after hidden commands: %d, want the help reply alone: %+v", len(cs), cs)
	}
	if n := len(h.fake.Reactions()); n != 1 {
		t.Errorf("%d reactions, want the help command's 👀 alone: %v", n, h.fake.Reactions())
	}
}

// A payload naming a repository or a sender that is no GitHub name
// ("../../etc") is acknowledged and ignored: nothing reaches an API path
// with the token.
func TestServeGitHubTraversalInRepoName(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, nil)
	h.start()
	payload := bytes.Replace(commentPayload(4242, "ana", "/iterion run review"), []byte(`"login":"acme"`), []byte(`"login":"../../etc"`), 1)
	if bytes.Equal(payload, commentPayload(4242, "ana", "/iterion run review")) {
		t.Fatal("the payload was not changed")
	}
	h.deliverEvent("issue_comment", "traversal", payload)
	// The sender's login reaches the permission check's path.
	sender := bytes.ReplaceAll(commentPayload(4243, "ana", "/iterion run review"), []byte(`"login":"ana"`), []byte(`"login":"../../../etc"`))
	h.deliverEvent("issue_comment", "traversal-sender", sender)
	h.comment("ana", "/iterion help") // handled after them
	h.botComment("iterion commands, each on its own line")
	for _, c := range h.fake.Calls() {
		if strings.Contains(c.Path, "..") || strings.Contains(c.Path, "/etc") {
			t.Errorf("a call reached %s %s", c.Method, c.Path)
		}
	}
}

// One installation flooding the bot does not hold up another: with
// GitHub's write spacing on, twenty comments on installation 42 take
// seconds to answer, and a comment on installation 43 made after them is
// answered while most of 42's still wait (the workers never sleep in one
// installation's spacing while another has work).
func TestServeGitHubInstallationsServedFairly(t *testing.T) {
	t.Parallel()
	h := newGHHarness(t, nil)
	h.writePace = 100 * time.Millisecond // each help reply is two writes: 👀 and the reply
	h.start()
	const flood = 20
	var flooded []int64
	for range flood {
		flooded = append(flooded, h.comment("ana", "/iterion help"))
	}
	other := h.fake.AddComment(7, "ana", "/iterion status")
	payload := bytes.Replace(commentPayload(other.ID, "ana", "/iterion status"), []byte(`"installation":{"id":42}`), []byte(`"installation":{"id":43}`), 1)
	if bytes.Equal(payload, commentPayload(other.ID, "ana", "/iterion status")) {
		t.Fatal("the payload still names installation 42")
	}
	h.deliver(fmt.Sprintf("c-%d", other.ID), payload)
	h.botComment(fmt.Sprintf("<!-- iterion:comment-%d -->", other.ID))
	answered := 0
	for _, id := range flooded {
		if len(h.fake.BotComments(7, fmt.Sprintf("<!-- iterion:comment-%d -->", id))) > 0 {
			answered++
		}
	}
	t.Logf("installation 43 answered after %d of installation 42's %d", answered, flood)
	if answered >= flood/2 {
		t.Errorf("installation 43's comment was answered after %d of installation 42's %d: it waited behind the flood", answered, flood)
	}
}
