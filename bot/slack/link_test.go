package slack_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/slack"
	"github.com/iterion-bot/iterion/internal/fakegithub"
	"github.com/iterion-bot/iterion/internal/fakeslack"
)

// A Slack user links their GitHub account by signing in to GitHub: the
// link /iterion link gives carries a signed state naming them; GitHub
// sends them back to the callback, which records the link, keyed on the
// account's id; then their clicks answer as that account. The link works
// once. A revoked authorization drops the link.
func TestLinkByGitHubSignIn(t *testing.T) {
	gh := fakegithub.New(t, "acme", "app")
	gh.OAuth = fakegithub.OAuth{ClientID: "Iv1.fakeclientid", ClientSecret: "fake-client-secret-0123456789"}
	var callback http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { callback.ServeHTTP(w, r) }))
	defer srv.Close()
	w := newWorld(t, func(o *slack.ServiceOptions) {
		o.GitURL = gh.GitURL()
		o.SignIn = &slack.SignIn{ClientID: gh.OAuth.ClientID, ClientSecret: gh.OAuth.ClientSecret, APIURL: gh.URL(), PublicURL: srv.URL}
	})
	callback = w.svc.Callback()
	run, ix := w.ask("r-link", "Ship it?", "yes", "no")
	q := w.message("iterion_question", "question_id", ix.ID)
	w.fake.WaitFor(10*time.Second, "the question's post recorded", func() bool { return w.interaction(run.ID, ix.ID).Posts["slack"] != "" })

	// U5 is nobody iterion knows: told to link, with the link.
	w.interact(w.fake.Click("U5", q, slack.ActionOption+"0", "0"))
	told := w.ephemeral("U5", "Link your GitHub account")
	signIn := regexp.MustCompile(`<([^|>]+)\|Link your GitHub account>`).FindStringSubmatch(told.Text)
	if signIn == nil {
		t.Fatalf("no sign-in link in %q", told.Text)
	}
	u, err := url.Parse(signIn[1])
	if err != nil || u.Path != "/git/login/oauth/authorize" || u.Query().Get("client_id") != gh.OAuth.ClientID {
		t.Fatalf("sign-in link %q", signIn[1])
	}
	redirect, state := u.Query().Get("redirect_uri"), u.Query().Get("state")
	if redirect != srv.URL+slack.CallbackPath {
		t.Errorf("redirect_uri = %q", redirect)
	}
	// GitHub sends the browser back with a code for ana (id 42).
	back := func(code, state string) (int, string) {
		t.Helper()
		resp, err := http.Get(redirect + "?" + url.Values{"code": {code}, "state": {state}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := back(gh.SignIn("ana", 42, redirect), state+"x"); code != http.StatusBadRequest || !strings.Contains(body, "not made by this iterion server") {
		t.Errorf("a forged state = %d %s", code, body)
	}
	code, body := back(gh.SignIn("ana", 42, redirect), state)
	confirm := regexp.MustCompile(`<pre>/iterion link ([A-Za-z0-9_.-]+)</pre>`).FindStringSubmatch(body)
	if code != http.StatusOK || confirm == nil || !strings.Contains(body, "signed in to GitHub as @ana") {
		t.Fatalf("the callback = %d %s", code, body)
	}
	if code, body := back(gh.SignIn("ana", 42, redirect), state); code != http.StatusBadRequest || !strings.Contains(body, "used already") {
		t.Errorf("the same link again = %d %s", code, body)
	}
	// Signed in, not linked yet: the link could have been passed on. The
	// confirmation works only for U5, once, and not forged.
	w.interact(w.fake.Click("U5", q, slack.ActionOption+"0", "0"))
	w.fake.WaitFor(10*time.Second, "U5 told to link again", func() bool {
		return strings.Count(fmt.Sprint(w.fake.Ephemerals("U5")), "Link your GitHub account") >= 2
	})
	w.post("/webhooks/slack/commands", "application/x-www-form-urlencoded", w.fake.Command("U1", fakeslack.Channel, "link "+confirm[1]), nil)
	w.ephemeral("U1", "made for another Slack user")
	w.post("/webhooks/slack/commands", "application/x-www-form-urlencoded", w.fake.Command("U5", fakeslack.Channel, "link "+confirm[1]+"x"), nil)
	w.ephemeral("U5", "not a confirmation this iterion server made")
	w.post("/webhooks/slack/commands", "application/x-www-form-urlencoded", w.fake.Command("U5", fakeslack.Channel, "link "+confirm[1]), nil)
	w.ephemeral("U5", "now linked to GitHub @ana")
	w.post("/webhooks/slack/commands", "application/x-www-form-urlencoded", w.fake.Command("U5", fakeslack.Channel, "link "+confirm[1]), nil)
	w.ephemeral("U5", "used already")
	if !w.interaction(run.ID, ix.ID).Pending() {
		t.Fatal("answered before the link was confirmed")
	}
	// Now U5 is ana, and may answer.
	w.interact(w.fake.Click("U5", q, slack.ActionOption+"0", "0"))
	w.fake.WaitFor(10*time.Second, "U5's answer", func() bool { return !w.interaction(run.ID, ix.ID).Pending() })
	if got := w.interaction(run.ID, ix.ID); got.AnsweredBy != "ana" || got.Answer() != "yes" {
		t.Errorf("answered by %q: %q", got.AnsweredBy, got.Answer())
	}
	// /iterion link says who U5 is.
	w.post("/webhooks/slack/commands", "application/x-www-form-urlencoded", w.fake.Command("U5", fakeslack.Channel, "link"), nil)
	w.ephemeral("U5", "you are linked to GitHub @ana")

	// ana revokes the App's authorization on GitHub: the link goes.
	if err := w.svc.Revoked(context.Background(), 42); err != nil {
		t.Fatal(err)
	}
	_, q2 := w.ask("r-link", "And the docs?", "yes", "no")
	m2 := w.message("iterion_question", "question_id", q2.ID)
	w.fake.WaitFor(10*time.Second, "the second post recorded", func() bool { return w.interaction(run.ID, q2.ID).Posts["slack"] != "" })
	before := len(w.fake.Ephemerals("U5"))
	w.interact(w.fake.Click("U5", m2, slack.ActionOption+"0", "0"))
	w.fake.WaitFor(10*time.Second, "U5 told to link again", func() bool { return len(w.fake.Ephemerals("U5")) > before })
	if e := w.fake.Ephemerals("U5"); !strings.Contains(e[len(e)-1].Text, "Link your GitHub account") {
		t.Errorf("after the revocation U5 is told %q", e[len(e)-1].Text)
	}
}
