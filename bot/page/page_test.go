package page_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/bot/page"
	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

const (
	adminToken = "admin-token-0123456789"
	sessionKey = "session-key-0123456789-0123456789-abcdef"
)

// fakePerms lets the logins it lists do the acts listed, on any run.
type fakePerms map[string][]string

func (p fakePerms) May(_ context.Context, _ *engine.Run, login, act string, _ bool) (bool, string, error) {
	for _, a := range p[login] {
		if a == act {
			return true, "", nil
		}
	}
	return false, "you have no write permission on acme/app", nil
}

func (fakePerms) Who(context.Context, *engine.Run) (string, error) {
	return "people with write permission on acme/app", nil
}

// fakeSignIn signs in as who the code names ("as-<login>"); "refuse"
// refuses.
type fakeSignIn struct{}

var errNotMember = errors.New("bo is not an active member of acme")

func (fakeSignIn) AuthorizeURL(state, redirect string) string {
	return "https://github.example/login/oauth/authorize?" + url.Values{"state": {state}, "redirect_uri": {redirect}}.Encode()
}

func (fakeSignIn) SignIn(_ context.Context, code, _ string) (string, error) {
	if code == "refuse" {
		return "", errNotMember
	}
	return strings.TrimPrefix(code, "as-"), nil
}

// world is the page over a real store and engine, on an httptest server.
type world struct {
	t   *testing.T
	db  *store.DB
	e   *engine.Engine
	pg  *page.Server
	url string
}

func newWorld(t *testing.T, mod func(*page.Options)) *world {
	t.Helper()
	db, err := store.Open("", store.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w := &world{t: t, db: db}
	w.e = engine.New(engine.Options{Store: db, OnEvent: func(ev engine.Event) { w.pg.OnEvent(ev) },
		Workflow: func(context.Context, *engine.Run) (*dsl.Workflow, error) { return mustCompile(t, formWorkflow), nil }})
	t.Cleanup(func() {
		w.e.Close()
		_ = w.e.Wait(context.Background())
	})
	opts := page.Options{Store: db, Doors: w.e, Place: repoPlace, AdminToken: adminToken, SessionKey: []byte(sessionKey),
		Permissions: map[string]page.Permissions{"github": fakePerms{"ana": {page.ActAnswer, page.ActCancel}}},
		SignIn:      fakeSignIn{}, Refused: func(err error) bool { return errors.Is(err, errNotMember) },
		Links: map[string]page.Linker{"github": func(_ map[string]string, id string) page.Link {
			return page.Link{Label: "PR comment", URL: "https://github.example/acme/app/pull/7#issuecomment-" + id}
		}}}
	if mod != nil {
		mod(&opts)
	}
	if w.pg, err = page.New(opts); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w.pg.Handler())
	t.Cleanup(srv.Close)
	t.Cleanup(w.pg.Close)
	w.url = srv.URL
	return w
}

// run stores a running run, from GitHub when repo is set.
func (w *world) run(id, repo string) *engine.Run {
	w.t.Helper()
	now := time.Now()
	r := &engine.Run{ID: id, Workflow: "w", Status: engine.StatusRunning, CreatedAt: now, UpdatedAt: now, Trigger: engine.Trigger{Source: "cli"}}
	if repo != "" {
		r.Trigger = engine.Trigger{Source: "github", Actor: "ana", Details: json.RawMessage(`{"repo":"` + repo + `","pr":7}`)}
	}
	if err := w.db.CreateRun(context.Background(), r, nil); err != nil {
		w.t.Fatal(err)
	}
	r, err := w.db.Acquire(context.Background(), id, "test")
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

// ask posts an async question of run, with options.
func (w *world) ask(run *engine.Run, text string, options ...string) *engine.Interaction {
	w.t.Helper()
	qs := map[string]any{engine.QuestionKey: text}
	var opts []engine.Option
	for _, o := range options {
		opts = append(opts, engine.Option{ID: strings.ToLower(o), Label: o})
	}
	if len(opts) > 0 {
		qs[engine.OptionsKey] = opts
	}
	ix, err := w.db.PostQuestion(context.Background(), engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "review", Questions: qs})
	if err != nil {
		w.t.Fatal(err)
	}
	w.pg.OnEvent(engine.Event{Type: engine.EventHumanInputRequested, RunID: run.ID, NodeID: "review", Data: map[string]any{"interaction_id": ix.ID}})
	return ix
}

// client is a browser without JavaScript: it keeps cookies, and does not
// follow redirects (the tests read them).
func (w *world) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// do sends a request as a page of the site would: same-origin.
func (w *world) do(c *http.Client, method, path string, form url.Values, header ...string) (*http.Response, string) {
	w.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, w.url+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// admin is a client signed in with the admin token through /login.
func (w *world) admin() *http.Client {
	w.t.Helper()
	c := w.client()
	resp, _ := w.do(c, "POST", "/login", url.Values{"token": {adminToken}, "next": {"/"}})
	if resp.StatusCode != http.StatusSeeOther {
		w.t.Fatalf("signing in: %s", resp.Status)
	}
	return c
}

// gitHubUser is a client signed in with GitHub as login.
func (w *world) gitHubUser(login string) *http.Client {
	w.t.Helper()
	c := w.client()
	resp, _ := w.do(c, "GET", "/auth/github?next=/", nil)
	to, _ := url.Parse(resp.Header.Get("Location"))
	resp, body := w.do(c, "GET", "/auth/github/callback?"+url.Values{"state": {to.Query().Get("state")}, "code": {"as-" + login}}.Encode(), nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		w.t.Fatalf("signing in as %s: %s %s\n%s", login, resp.Status, resp.Header.Get("Location"), body)
	}
	return c
}

func TestSignInWithTheAdminToken(t *testing.T) {
	w := newWorld(t, nil)
	c := w.client()
	resp, _ := w.do(c, "GET", "/runs?status=running", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next=%2Fruns%3Fstatus%3Drunning" {
		t.Errorf("a page without a session: %s to %q, want the sign-in, then back", resp.Status, resp.Header.Get("Location"))
	}
	resp, body := w.do(c, "POST", "/login", url.Values{"token": {"guess"}, "next": {"/runs"}})
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "That is not the admin token") || strings.Contains(body, adminToken) {
		t.Errorf("a wrong token: %s\n%s", resp.Status, body)
	}
	// Browsers drop a tab from an address, and read a backslash as a
	// slash: each of these would be another site's.
	for _, next := range []string{"/\t/evil.example/", "/\\evil.example/", "/\r\n/evil.example/", "/\x00/x"} {
		resp, _ = w.do(w.client(), "POST", "/login", url.Values{"token": {adminToken}, "next": {next}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
			t.Errorf("a sign-in sent to %q: %s to %q, want /", next, resp.Status, resp.Header.Get("Location"))
		}
	}
	resp, _ = w.do(c, "POST", "/login", url.Values{"token": {adminToken}, "next": {"https://evil.example/"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Errorf("a sign-in sent elsewhere: %s to %q, want /", resp.Status, resp.Header.Get("Location"))
	}
	cookie := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"iterion_session=", "Path=/", "HttpOnly", "SameSite=Lax"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("the session cookie %q lacks %s", cookie, want)
		}
	}
	if strings.Contains(cookie, "Secure") || strings.Contains(cookie, adminToken) {
		t.Errorf("the session cookie over plain HTTP: %q", cookie)
	}
	if resp, body := w.do(c, "GET", "/", nil); resp.StatusCode != 200 || !strings.Contains(body, "Signed in as <strong>admin</strong>") {
		t.Errorf("the list after signing in: %s", resp.Status)
	}
	// A bearer works on any page; a wrong one is told.
	if resp, _ := w.do(w.client(), "GET", "/runs", nil, "Authorization", "Bearer "+adminToken); resp.StatusCode != 200 {
		t.Errorf("the admin token as a bearer: %s", resp.Status)
	}
	if resp, body := w.do(w.client(), "GET", "/runs", nil, "Authorization", "Bearer nope"); resp.StatusCode != 401 || !strings.Contains(body, "not the admin token") {
		t.Errorf("a wrong bearer: %s", resp.Status)
	}
	// Signing out ends it.
	w.do(c, "POST", "/logout", url.Values{})
	if resp, _ := w.do(c, "GET", "/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after signing out: %s", resp.Status)
	}
	// Behind an https address, the cookie is Secure.
	ws := newWorld(t, func(o *page.Options) { o.PublicURL = "https://iterion.example.com/" })
	resp, _ = ws.do(ws.client(), "POST", "/login", url.Values{"token": {adminToken}})
	if c := resp.Header.Get("Set-Cookie"); !strings.Contains(c, "Secure") {
		t.Errorf("the session cookie behind https: %q, want Secure", c)
	}
}

// A new admin token ends the sessions the old one opened, even with the
// same session key: a leaked token, once replaced, opens nothing.
func TestNewAdminTokenEndsItsSessions(t *testing.T) {
	old := newWorld(t, nil)
	resp, _ := old.do(old.client(), "POST", "/login", url.Values{"token": {adminToken}})
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "iterion_session" {
			session = c
		}
	}
	if session == nil {
		t.Fatalf("signing in set no session: %v", resp.Header)
	}
	get := func(w *world) *http.Response {
		req, _ := http.NewRequest("GET", w.url+"/runs", nil)
		req.AddCookie(session)
		resp, err := w.client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := get(old); resp.StatusCode != http.StatusOK {
		t.Fatalf("the session with its own token: %s", resp.Status)
	}
	renewed := newWorld(t, func(o *page.Options) { o.AdminToken = "another-admin-token-9876543210" })
	if resp := get(renewed); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Errorf("the old token's session once the token changed: %s to %q, want the sign-in", resp.Status, resp.Header.Get("Location"))
	}
}

func TestSignInWithGitHub(t *testing.T) {
	w := newWorld(t, nil)
	c := w.client()
	resp, _ := w.do(c, "GET", "/auth/github?next=/runs", nil)
	to, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil || to.Host != "github.example" || to.Query().Get("state") == "" ||
		to.Query().Get("redirect_uri") != w.url+"/auth/github/callback" {
		t.Fatalf("to GitHub: %s %q", resp.Status, resp.Header.Get("Location"))
	}
	state := to.Query().Get("state")
	// Another state (a forged link, another browser's) is refused.
	other := w.client()
	if resp, _ := w.do(other, "GET", "/auth/github/callback?state="+state+"&code=as-mallory", nil); resp.Header.Get("Location") != "/login?error=state" {
		t.Errorf("a callback without the state cookie: %s %q", resp.Status, resp.Header.Get("Location"))
	}
	resp, _ = w.do(c, "GET", "/auth/github/callback?state="+state+"&code=as-ana", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/runs" {
		t.Fatalf("the callback: %s %q", resp.Status, resp.Header.Get("Location"))
	}
	if _, body := w.do(c, "GET", "/", nil); !strings.Contains(body, "Signed in as <strong>ana</strong>") || strings.Contains(body, "(admin)") {
		t.Error("the page does not say ana is signed in, or says she is the admin")
	}
	// The state is used once.
	if resp, _ := w.do(c, "GET", "/auth/github/callback?state="+state+"&code=as-ana", nil); resp.Header.Get("Location") != "/login?error=state" {
		t.Errorf("a state used twice: %q", resp.Header.Get("Location"))
	}
	// Someone GitHub vouches for but not allowed here is told why.
	d := w.client()
	resp, _ = w.do(d, "GET", "/auth/github", nil)
	to, _ = url.Parse(resp.Header.Get("Location"))
	resp, body := w.do(d, "GET", "/auth/github/callback?state="+to.Query().Get("state")+"&code=refuse", nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "You cannot sign in here: bo is not an active member of acme.") {
		t.Errorf("a refused sign-in: %s\n%s", resp.Status, body)
	}
}

func TestSecurityHeadersAndCrossSite(t *testing.T) {
	w := newWorld(t, nil)
	run := w.run("r-1", "acme/app")
	ix := w.ask(run, "Merge?")
	for _, path := range []string{"/login", "/static/page.js", "/", "/nope"} {
		resp, _ := w.do(w.client(), "GET", path, nil)
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", path)
		}
	}
	c := w.admin()
	for _, site := range []string{"cross-site", "same-site"} {
		resp, body := w.do(c, "POST", "/q/"+ix.ID+"/answer", url.Values{"text": {"yes"}}, "Sec-Fetch-Site", site)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "came from another site, so it was refused") {
			t.Errorf("a %s POST: %s", site, resp.Status)
		}
	}
	resp, _ := w.do(c, "POST", "/q/"+ix.ID+"/answer", url.Values{"text": {"yes"}}, "Sec-Fetch-Site", "", "Origin", "https://evil.example")
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a POST from another origin: %s", resp.Status)
	}
	if got, _ := w.db.Interaction(context.Background(), run.ID, ix.ID); !got.Pending() {
		t.Error("a refused POST answered the question")
	}
}

func TestAnswerWithoutJavaScript(t *testing.T) {
	w := newWorld(t, nil)
	run := w.run("r-1", "acme/app")
	ix := w.ask(run, "Ship <script>alert(1)</script> now?", "Yes", "No")
	c := w.admin()
	_, body := w.do(c, "GET", "/", nil)
	for _, want := range []string{
		`Ship &lt;script&gt;alert(1)&lt;/script&gt; now?`, `<fieldset>`, `<legend>Options</legend>`, `type="radio" name="option" value="Yes"`,
		`<label for="f-` + ix.ID + `-text">Or your own words</label>`, `acme/app #7`, `people with write permission on acme/app; the server&#39;s admin`,
		`action="/q/` + ix.ID + `/answer"`, `<caption><span id="total">1</span> question(s) waiting for an answer, newest first</caption>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the list lacks %s", want)
		}
	}
	if strings.Contains(body, "<script>alert") {
		t.Error("the model's text is not escaped")
	}
	resp, body := w.do(c, "POST", "/q/"+ix.ID+"/answer", url.Values{"next": {"/"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "Write an answer, or pick an option, before sending.") {
		t.Errorf("an empty answer: %s", resp.Status)
	}
	resp, _ = w.do(c, "POST", "/q/"+ix.ID+"/answer", url.Values{"option": {"Yes"}, "next": {"/?repo=acme/app"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?done=answered&id="+ix.ID+"&repo=acme%2Fapp" {
		t.Fatalf("the answer: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	got, _ := w.db.Interaction(context.Background(), run.ID, ix.ID)
	if got.Answer() != "Yes" || got.AnsweredBy != "admin" || got.Via != "page" {
		t.Errorf("stored answer %q by %q via %q", got.Answer(), got.AnsweredBy, got.Via)
	}
	_, body = w.do(c, "GET", resp.Header.Get("Location"), nil)
	if !strings.Contains(body, "Your answer to "+ix.ID+" was recorded.") || strings.Contains(body, `id="q-`+ix.ID+`"`) {
		t.Error("after the answer the list does not say so, or still shows the question")
	}
	// The first answer wins, on every channel.
	resp, body = w.do(c, "POST", "/q/"+ix.ID+"/answer", url.Values{"text": {"No"}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "already answered by admin via the admin page") {
		t.Errorf("a second answer: %s", resp.Status)
	}
	// Its page shows the audit trail.
	_, body = w.do(c, "GET", "/q/"+ix.ID, nil)
	for _, want := range []string{"Answered by <strong>admin</strong> via the admin page: <q>Yes</q>", "<strong>asked</strong>", "<strong>answered</strong> by admin via the admin page"} {
		if !strings.Contains(body, want) {
			t.Errorf("the question's page lacks %s", want)
		}
	}
	if resp, _ := w.do(c, "GET", "/q/nope", nil); resp.StatusCode != 404 {
		t.Errorf("an unknown question: %s", resp.Status)
	}
}

func TestWhoMayAnswer(t *testing.T) {
	w := newWorld(t, nil)
	gh := w.ask(w.run("r-gh", "acme/app"), "From GitHub?")
	cli := w.ask(w.run("r-cli", ""), "From the CLI?")
	bo := w.gitHubUser("bo")
	_, body := w.do(bo, "GET", "/", nil)
	for _, want := range []string{"You may not answer this: you have no write permission on acme/app.",
		"You may not answer this: this run was started from cli, where only the server&#39;s admin may act on it."} {
		if !strings.Contains(body, want) {
			t.Errorf("bo's list lacks %q", want)
		}
	}
	if strings.Contains(body, `<form class="answer"`) {
		t.Error("bo is offered a form")
	}
	if resp, body := w.do(bo, "POST", "/q/"+gh.ID+"/answer", url.Values{"text": {"yes"}}); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "You may not answer this question") {
		t.Errorf("bo's answer: %s", resp.Status)
	}
	ana := w.gitHubUser("ana")
	_, body = w.do(ana, "GET", "/?mine=1", nil)
	if !strings.Contains(body, `id="q-`+gh.ID+`"`) || strings.Contains(body, `id="q-`+cli.ID+`"`) {
		t.Error("ana's questions (mine=1) are not the GitHub run's alone")
	}
	if resp, _ := w.do(ana, "POST", "/q/"+gh.ID+"/answer", url.Values{"text": {"yes"}, "next": {"/"}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("ana's answer: %s", resp.Status)
	}
	if got, _ := w.db.Interaction(context.Background(), "r-gh", gh.ID); got.AnsweredBy != "ana" || got.Via != "page" {
		t.Errorf("ana's answer recorded by %q via %q", got.AnsweredBy, got.Via)
	}
}

const formWorkflow = `
schema decision:
  approved: bool
  reason: string
  risk: string

prompt ask:
  Approve the release?

human approve:
  instructions: ask
  output: decision

workflow w:
  entry: approve
  approve -> done when approved
  approve -> fail
`

func mustCompile(t testing.TB, src string) *dsl.Workflow {
	t.Helper()
	w, ds := dsl.CompileSource("w.bot", []byte(src))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	return w
}

// A human node's form is typed from its schema; the engine's validation
// answers a wrong value, and a right one resumes the run.
func TestAnswerAForm(t *testing.T) {
	w := newWorld(t, nil)
	ctx := context.Background()
	run, err := w.e.Launch(ctx, engine.StartRequest{Workflow: mustCompile(t, formWorkflow), RunID: "form-1", WorkDir: t.TempDir(), Trigger: engine.Trigger{Source: "cli"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	id := run.ID + "_approve"
	c := w.admin()
	_, body := w.do(c, "GET", "/q/"+id, nil)
	for _, want := range []string{`<legend>approved <span class="hint">bool</span></legend>`, `name="f.approved" value="true"`, `name="f.approved" value="false"`,
		`<label for="f-` + id + `-reason">reason</label>`, `name="f.risk"`, "Approve the release?"} {
		if !strings.Contains(body, want) {
			t.Errorf("the form lacks %s", want)
		}
	}
	resp, body := w.do(c, "POST", "/q/"+id+"/answer", url.Values{"f.approved": {"maybe"}, "f.reason": {"tests pass"}, "f.risk": {"low"}, "next": {"/"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "is not a yes/no answer") || !strings.Contains(body, `value="tests pass"`) {
		t.Errorf("a wrong value: %s (want the engine's words and the form filled again)", resp.Status)
	}
	resp, _ = w.do(c, "POST", "/q/"+id+"/answer", url.Values{"f.approved": {"true"}, "f.reason": {"tests pass"}, "f.risk": {"low"}, "next": {"/runs/" + run.ID}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the form's answer: %s", resp.Status)
	}
	if err := w.e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.db.Run(ctx, run.ID); got.Status != engine.StatusFinished {
		t.Errorf("after the answer the run is %s, want finished", got.Status)
	}
	_, body = w.do(c, "GET", "/runs/"+run.ID, nil)
	for _, want := range []string{"Status: <span class=\"status status-finished\">finished</span>", "human_answers_recorded", "run_finished", "approved: true"} {
		if !strings.Contains(body, want) {
			t.Errorf("the run's page lacks %s", want)
		}
	}
}

func TestCancelResumeAndBulkCancel(t *testing.T) {
	w := newWorld(t, nil)
	ctx := context.Background()
	w.run("r-a", "")
	w.run("r-b", "acme/app")
	c := w.admin()
	resp, body := w.do(c, "POST", "/runs/cancel", url.Values{"run": {"r-a", "r-b", "r-none"}})
	for _, want := range []string{"Cancel these 2 run(s)?", `name="run" value="r-a"`, `name="run" value="r-b"`, "r-none: no such run", `name="confirm" value="yes"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the confirm step lacks %s", want)
		}
	}
	if resp.StatusCode != 200 {
		t.Errorf("the confirm step: %s", resp.Status)
	}
	if got, _ := w.db.Run(ctx, "r-a"); got.Status != engine.StatusRunning {
		t.Fatal("the confirm step cancelled a run")
	}
	resp, _ = w.do(c, "POST", "/runs/cancel", url.Values{"run": {"r-a", "r-b"}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "n=2") {
		t.Errorf("the bulk cancel: %s %q", resp.Status, resp.Header.Get("Location"))
	}
	for _, id := range []string{"r-a", "r-b"} {
		if got, _ := w.db.Run(ctx, id); got.Status != engine.StatusCancelled || !strings.Contains(got.Error, "cancelled by admin via the admin page") {
			t.Errorf("run %s: %s %q", id, got.Status, got.Error)
		}
	}
	_, body = w.do(c, "GET", "/runs?done=bulk&id=runs&n=2", nil)
	if !strings.Contains(body, "2 run(s) cancelled.") {
		t.Error("the list does not say how many were cancelled")
	}
	// A GitHub user without write permission may not resume.
	bo := w.gitHubUser("bo")
	_, body = w.do(bo, "GET", "/runs/r-b", nil)
	if !strings.Contains(body, "You may not resume it: you have no write permission on acme/app.") {
		t.Error("bo's view of the run does not say why he may not resume it")
	}
	if resp, _ := w.do(bo, "POST", "/runs/r-b/resume", url.Values{}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("bo's resume: %s", resp.Status)
	}
	if resp, _ := w.do(c, "GET", "/runs?status=done", nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown status filter: %s", resp.Status)
	}
}

// The live view: a question posted shows as an open row on the stream, its
// answer elsewhere as the answered row; the stream needs a session.
func TestLiveRows(t *testing.T) {
	w := newWorld(t, nil)
	run := w.run("r-live", "acme/app")
	if resp, _ := w.do(w.client(), "GET", "/events?view=questions", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the stream without a session: %s", resp.Status)
	}
	req, _ := http.NewRequest("GET", w.url+"/events?view=questions&repo=acme/app", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("the stream's type: %q", ct)
	}
	events := make(chan [2]string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var name string
		for sc.Scan() {
			line := sc.Text()
			if n, ok := strings.CutPrefix(line, "event: "); ok {
				name = n
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				events <- [2]string{name, d}
			}
		}
		close(events)
	}()
	next := func(want string) map[string]any {
		t.Helper()
		for ev := range events {
			if ev[0] == want {
				var d map[string]any
				if err := json.Unmarshal([]byte(ev[1]), &d); err != nil {
					t.Fatal(err)
				}
				return d
			}
		}
		t.Fatalf("the stream ended before a %s event", want)
		return nil
	}
	next("hello")
	ix := w.ask(run, "Live <i>question</i>?")
	d := next("row")
	if d["id"] != ix.ID || d["open"] != true || !strings.Contains(d["html"].(string), "Live &lt;i&gt;question&lt;/i&gt;?") {
		t.Errorf("the open row = %v", d)
	}
	if _, err := w.e.Answer(context.Background(), engine.AnswerRequest{RunID: run.ID, InteractionID: ix.ID, Text: "sure", By: "bo", Via: "github"}); err != nil {
		t.Fatal(err)
	}
	d = next("row")
	if d["id"] != ix.ID || d["open"] != false || !strings.Contains(d["html"].(string), "Answered by <strong>bo</strong> via GitHub: <q>sure</q>") {
		t.Errorf("the answered row = %v", d)
	}
}

// Where a form says to go back to is a path of this site, or /: a crafted
// form cannot send people elsewhere, nor break the redirect.
func TestAnswerGoesBackHome(t *testing.T) {
	w := newWorld(t, nil)
	run := w.run("r-1", "")
	c := w.admin()
	for next, want := range map[string]string{
		"https://evil.example/": "/?done=answered&id=",
		"//evil.example/":       "/?done=answered&id=",
		"/%zz":                  "/?done=answered&id=",
		"/\t/evil.example/":     "/?done=answered&id=",
		"/\\evil.example/":      "/?done=answered&id=",
		"/\n/evil.example/":     "/?done=answered&id=",
		"/runs/r-1":             "/runs/r-1?done=answered&id=",
	} {
		ix := w.ask(run, "Go on? "+next)
		resp, _ := w.do(c, "POST", "/q/"+ix.ID+"/answer", url.Values{"text": {"yes"}, "next": {next}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want+ix.ID {
			t.Errorf("next %q: %s to %q, want %q", next, resp.Status, resp.Header.Get("Location"), want+ix.ID)
		}
	}
}

// A question escalated to a login may be answered by that person, who
// could not before; the row says whom it was escalated to, with its next
// reminder and its expiry as its deadline.
func TestEscalatedQuestion(t *testing.T) {
	w := newWorld(t, nil)
	run := w.run("r-esc", "acme/app")
	now := time.Now()
	ix, err := w.db.PostQuestion(context.Background(), engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "review",
		Questions: map[string]any{engine.QuestionKey: "Ship?"},
		FollowUp:  &engine.FollowUp{Remind: time.Hour, NextReminder: now.Add(time.Hour), EscalateTo: []string{"Bo"}, Escalated: true, ExpireAt: now.Add(3 * time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	carl := w.gitHubUser("carl")
	if resp, _ := w.do(carl, "POST", "/q/"+ix.ID+"/answer", url.Values{"text": {"no"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("carl, to whom it was not escalated: %s", resp.Status)
	}
	bo := w.gitHubUser("bo")
	_, body := w.do(bo, "GET", "/q/"+ix.ID, nil)
	for _, want := range []string{`<form class="answer"`, "escalated to Bo", "reminder <time", ">in 2 h</time>"} {
		if !strings.Contains(body, want) {
			t.Errorf("bo's page of the question lacks %q", want)
		}
	}
	if resp, _ := w.do(bo, "POST", "/q/"+ix.ID+"/answer", url.Values{"text": {"yes"}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("bo's answer once escalated to: %s", resp.Status)
	}
	if got, _ := w.db.Interaction(context.Background(), run.ID, ix.ID); got.AnsweredBy != "bo" || got.Via != page.Via {
		t.Errorf("answered by %q via %q", got.AnsweredBy, got.Via)
	}
}

// Bulk apply-default lists the selected runs' open questions with their
// defaults, and only its confirm answers them, as the viewer via the page.
func TestBulkApplyDefault(t *testing.T) {
	w := newWorld(t, nil)
	run := w.run("r-def", "acme/app")
	ix, err := w.db.PostQuestion(context.Background(), engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "review",
		Questions: map[string]any{engine.QuestionKey: "Licence <b>?</b>"},
		FollowUp:  &engine.FollowUp{ExpireAt: time.Now().Add(time.Hour), Default: map[string]string{engine.QuestionKey: "MIT"}}})
	if err != nil {
		t.Fatal(err)
	}
	plain := w.ask(w.run("r-nodef", ""), "No default?")
	c := w.admin()
	if _, body := w.do(c, "GET", "/runs", nil); !strings.Contains(body, `formaction="/runs/apply-default"`) {
		t.Error("the runs list offers no apply-default")
	}
	resp, body := w.do(c, "POST", "/runs/apply-default", url.Values{"run": {run.ID, "r-nodef", "r-gone"}})
	for _, want := range []string{ix.ID, "Licence &lt;b&gt;?&lt;/b&gt;", "default <q>MIT</q>", `name="confirm" value="yes"`,
		"r-nodef: no open question with a default", "r-gone: no such run"} {
		if !strings.Contains(body, want) {
			t.Errorf("the confirm step (%s) lacks %q:\n%s", resp.Status, want, body)
		}
	}
	if got, _ := w.db.Interaction(context.Background(), run.ID, ix.ID); !got.Pending() {
		t.Fatal("the confirm step answered already")
	}
	resp, _ = w.do(c, "POST", "/runs/apply-default", url.Values{"run": {run.ID}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/runs?done=defaults&id=runs&n=1" {
		t.Errorf("confirmed: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	if got, _ := w.db.Interaction(context.Background(), run.ID, ix.ID); got.Answer() != "MIT" || got.AnsweredBy != page.AdminName || got.Via != page.Via {
		t.Errorf("answered %q by %q via %q", got.Answer(), got.AnsweredBy, got.Via)
	}
	if got, _ := w.db.Interaction(context.Background(), "r-nodef", plain.ID); !got.Pending() {
		t.Error("a question without a default was answered")
	}
	// ana may answer, bo may not: bo's confirm step leaves the run alone.
	bo := w.gitHubUser("bo")
	if _, body := w.do(bo, "POST", "/runs/apply-default", url.Values{"run": {run.ID}}); !strings.Contains(body, "no write permission on acme/app") {
		t.Errorf("bo's confirm step:\n%s", body)
	}
}

// A question posted between a page's rendering and its stream's start is
// not lost: the page's stream, from the count of events the page was
// rendered at, replays it first.
func TestLiveReplaysWhatCameBeforeTheStream(t *testing.T) {
	w := newWorld(t, nil)
	run := w.run("r-gap", "acme/app")
	c := w.admin()
	_, body := w.do(c, "GET", "/", nil)
	_, rest, ok := strings.Cut(body, `data-live="`)
	live, _, _ := strings.Cut(rest, `"`)
	live = strings.ReplaceAll(live, "&amp;", "&")
	if !ok || !strings.Contains(live, "since=") {
		t.Fatalf("the page's live address = %q", live)
	}
	ix := w.ask(run, "Asked while the page loads?")
	req, _ := http.NewRequest("GET", w.url+live, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var name string
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && name == "row" {
			if !strings.Contains(d, ix.ID) || !strings.Contains(d, `"open":true`) {
				t.Errorf("the replayed row = %s", d)
			}
			return
		}
	}
	t.Fatal("the stream ended without replaying the row")
}

// Both bulk actions refuse an empty selection and one too large, each
// naming what to do, before touching a run.
func TestBulkSelectionRefused(t *testing.T) {
	w := newWorld(t, nil)
	c := w.admin()
	many := make([]string, api.MaxLimit+1)
	for i := range many {
		many[i] = fmt.Sprintf("r-%d", i)
	}
	for _, tc := range []struct {
		path string
		form url.Values
		says string
	}{
		{"/runs/cancel", url.Values{}, "tick the runs to cancel on the runs list first"},
		{"/runs/apply-default", url.Values{}, "tick the runs whose questions get their defaults on the runs list first"},
		{"/runs/cancel", url.Values{"run": many}, fmt.Sprintf("%d runs selected; cancel at most %d at once", len(many), api.MaxLimit)},
		{"/runs/apply-default", url.Values{"run": many}, fmt.Sprintf("apply the defaults of at most %d at once", api.MaxLimit)},
	} {
		resp, body := w.do(c, "POST", tc.path, tc.form)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, tc.says) {
			t.Errorf("POST %s with %d runs: %s, want 400 saying %q", tc.path, len(tc.form["run"]), resp.Status, tc.says)
		}
	}
}
