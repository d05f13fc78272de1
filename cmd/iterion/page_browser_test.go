package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/browsertest"
	"github.com/iterion-bot/iterion/internal/fakegithub"
)

// pageHarness is serve with the GitHub App and its OAuth client on the
// fake, and the review agent scripted to ask a question with options and
// wait for it.
func pageHarness(t *testing.T) *ghHarness {
	t.Helper()
	h := newGHHarness(t, nil)
	h.fake.OAuth = fakegithub.OAuth{ClientID: "Iv1.page", ClientSecret: "oauth-secret-0123456789", SignIn: "ana",
		Orgs: map[string][]string{"acme": {"ana"}}}
	h.env = append(h.env, "ITERION_GITHUB_CLIENT_ID=Iv1.page", "ITERION_GITHUB_CLIENT_SECRET=oauth-secret-0123456789",
		"ITERION_ADMIN_TOKEN=admin-token-0123456789")
	has := true
	h.model(&fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{System: "You review pull requests", HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
			{Name: "ask_user_async", Input: map[string]any{"question": "Should I check the docs <b>too</b>?", "options": []any{
				map[string]any{"id": "yes", "label": "Yes, the docs too"}, map[string]any{"id": "no", "label": "Code only"}}}},
		}},
		{Name: "wait", Match: fakellm.Match{ToolResultFor: "ask_user_async"}, ToolCalls: []fakellm.ToolCall{{Name: "await_answers"}}},
		{Name: "verdict", Match: fakellm.Match{ToolResultFor: "await_answers", HasToolResult: &has}, Text: `{"summary": "LGTM, docs included"}`},
	}})
	return h
}

// do runs steps in a tab, failing the test with what step of what it was.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Read in one evaluation: a live update may replace the element
	// between a query of its node and a read of it, never within a
	// script's turn.
	if err := chromedp.Do(tctx, chromedp.WaitReady(chromedp.CSS(css))); err != nil {
		t.Fatalf("waiting for %s: %v", css, err)
	}
	s, err := chromedp.Run(tctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).innerText`, css)))
	if err != nil {
		t.Fatalf("reading %s: %v", css, err)
	}
	return s
}

// The browser tests, in Debian's headless Chromium against the
// real server: sign in with GitHub (the fake's OAuth flow); a question a
// running workflow posts appears live in two tabs; it is answered in one,
// with the keyboard; the other sees its row leave the open ones, the run
// goes on and the PR comment says who answered via the admin page; a
// cross-site POST is refused; axe finds no WCAG 2.1 AA violation on the
// pages.
func TestPageInBrowser(t *testing.T) {
	t.Parallel()
	h := pageHarness(t)
	h.start()
	a := browsertest.New(t)

	// 1. Sign in: / sends to /login, "Sign in with GitHub" goes through
	// GitHub's authorize page and back.
	do(t, a, "signing in", chromedp.Navigate(h.base+"/"), chromedp.Click(chromedp.CSS(`a[href^="/auth/github"]`)),
		chromedp.WaitReady(chromedp.CSS(`body[data-connected]`)))
	if who := text(t, a, ".who span"); !strings.Contains(who, "Signed in as ana") {
		t.Fatalf("after the sign-in the page says %q", who)
	}
	b := browsertest.Tab(t, a)
	do(t, b, "opening the second tab", chromedp.Navigate(h.base+"/"), chromedp.WaitReady(chromedp.CSS(`body[data-connected]`)))

	// 2. A running workflow posts a question: both tabs show it, live.
	h.comment("ana", "/iterion run review")
	runID := h.startedRun()
	qid := runID + "_review_async_1"
	row := `tr[id="q-` + qid + `"]`
	for name, tab := range map[string]context.Context{"first tab": a, "second tab": b} {
		do(t, tab, "the question appearing in the "+name, chromedp.WaitReady(chromedp.CSS(row+`[data-open]`)))
	}
	if n := text(t, b, "#total"); n != "1" {
		t.Errorf("the second tab counts %s questions waiting, want 1", n)
	}
	q := text(t, a, row+" .qtext")
	if q != "Should I check the docs <b>too</b>?" {
		t.Errorf("the question reads %q: the model's text must show as written, escaped", q)
	}
	for _, want := range []string{"acme/app #7", "people with write permission on acme/app"} {
		if got := text(t, a, row); !strings.Contains(got, want) {
			t.Errorf("the row lacks %q:\n%s", want, got)
		}
	}
	if dir := os.Getenv("ITERION_SCREENSHOTS"); dir != "" {
		screenshot(t, a, filepath.Join(dir, "page-questions.png"))
	}

	// 3. Answer it in the first tab with the keyboard: j to the row, 1
	// for the first option, Ctrl+Enter to send.
	do(t, a, "answering with the keyboard", chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`),
		chromedp.KeyEvent("j"), chromedp.KeyEvent("1"))
	if checked, err := chromedp.Run(a, chromedp.Evaluate[bool](`document.querySelector('`+row+` input[value="Yes, the docs too"]').checked`)); err != nil || !checked {
		t.Fatalf("1 did not pick the first option: %v %v", checked, err)
	}
	// The second tab notes, by the browser's clock, when the row changes.
	do(t, b, "watching the row", chromedp.Evaluate[chromedp.Void](`new MutationObserver(() => {
		if (!window.seenAt && document.querySelector('`+row+`.done')) window.seenAt = Date.now();
	}).observe(document.querySelector("tbody"), {childList: true, subtree: true})`))
	sent, err := chromedp.Run(a, chromedp.Evaluate[float64](`Date.now()`))
	if err != nil {
		t.Fatal(err)
	}
	do(t, a, "sending with Ctrl+Enter", chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	// 5. The second tab sees the row leave the open ones: answered, by
	// whom, through which channel.
	do(t, b, "the answered row in the second tab", chromedp.WaitReady(chromedp.CSS(row+`.done`)))
	if seen, err := chromedp.Run(b, chromedp.Evaluate[float64](`window.seenAt`)); err == nil {
		t.Logf("answered in one tab (Ctrl+Enter), shown in the other %.0f ms later", seen-sent)
	}
	if got := text(t, b, row+" .answered"); got != "Answered by ana via the admin page: Yes, the docs too" {
		t.Errorf("the second tab's row says %q", got)
	}
	if n, err := chromedp.Run(b, chromedp.Evaluate[int](`document.querySelectorAll('tr[data-open]').length`)); err != nil || n != 0 {
		t.Errorf("%d open rows left in the second tab (%v), want none", n, err)
	}
	if n := text(t, b, "#total"); n != "0" {
		t.Errorf("the second tab counts %s questions waiting after the answer, want 0", n)
	}
	do(t, a, "the notice", chromedp.WaitReady(chromedp.CSS(`#notice:not(:empty)`)))
	if got := text(t, a, "#notice"); got != "Your answer to "+qid+" was recorded." {
		t.Errorf("the notice says %q", got)
	}

	// 4. The run goes on and the PR comment names the page.
	waitRunStatus(t, h.base, h.token, runID, engine.StatusFinished)
	h.fake.WaitFor(30*time.Second, "the question comment to say it was answered on the page", func() bool {
		return len(h.fake.BotComments(7, "✅ Answered by `ana` via the admin page:\n\n> Yes, the docs too")) == 1
	})

	// The question's page links its PR comment, and lists its audit
	// trail.
	comment := h.botComment("**Question Q1**")
	do(t, a, "the question's page", chromedp.Navigate(h.base+"/q/"+qid))
	href, err := chromedp.Run(a, chromedp.Evaluate[string](`document.querySelector('.card a.post').href`))
	if want := fmt.Sprintf("#issuecomment-%d", comment.ID); err != nil || !strings.HasSuffix(href, want) {
		t.Errorf("the question's PR comment link is %q (%v), want one ending %s", href, err, want)
	}
	for _, want := range []string{"asked", "posted on GitHub", "answered by ana via the admin page"} {
		if got := text(t, a, ".audit"); !strings.Contains(got, want) {
			t.Errorf("the audit trail lacks %q:\n%s", want, got)
		}
	}
	// The run's page: its status, timeline, outputs.
	do(t, a, "the run's page", chromedp.Navigate(h.base+"/runs/"+runID), chromedp.WaitReady(chromedp.CSS(`body[data-connected]`)))
	page, err := chromedp.Run(a, chromedp.TextContent(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Status: finished", "run_finished", "LGTM, docs included", "Answered by ana via the admin page"} {
		if !strings.Contains(page, want) {
			t.Errorf("the run's page lacks %q", want)
		}
	}
	if dir := os.Getenv("ITERION_SCREENSHOTS"); dir != "" {
		screenshot(t, a, filepath.Join(dir, "page-run.png"))
	}

	// 7. No WCAG 2.1 AA violation on the pages.
	for _, path := range []string{"/", "/q/" + qid, "/runs", "/runs/" + runID, "/login"} {
		do(t, a, "opening "+path, chromedp.Navigate(h.base+path))
		for _, v := range browsertest.Axe(t, a) {
			t.Errorf("%s: %s", path, v)
		}
	}

	// 6. A form on another site posting to the page is refused.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><title>evil</title><form method="post" action="%s/runs/%s/resume"><button id="go">Win a prize</button></form>`, h.base, runID)
	}))
	defer evil.Close()
	// The other site must be another site to the browser, not another
	// port of the same host: localhost against 127.0.0.1.
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	do(t, a, "posting from another site", chromedp.Navigate(evilURL), chromedp.Click(chromedp.ID("go")),
		chromedp.WaitReady(chromedp.CSS(`p.error`)))
	if got := text(t, a, "p.error"); !strings.Contains(got, "came from another site, so it was refused") {
		t.Errorf("the cross-site POST got %q", got)
	}
}

// screenshot writes the whole page of ctx to path, as PNG.
func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
