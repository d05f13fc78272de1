package api_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// tcpToken and tcpName are the fixture's TCP token and its name.
const (
	tcpToken = "tok-0123456789"
	tcpName  = "deploy-bot"
)

// fixture is a real store with one run holding one async question, its
// API served on TCP behind a token and on a local socket.
type fixture struct {
	db       *store.DB
	engine   *engine.Engine
	client   *api.Client // on TCP, with the token
	base     string      // the TCP server's URL
	local    *api.LocalServer
	storeDir string
	opts     api.LocalOptions
	run      *engine.Run
	ix       *engine.Interaction
	launched chan api.Caller
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	storeDir := t.TempDir()
	db, err := store.Open(storeDir, store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	now := time.Now()
	run := &engine.Run{ID: "r-api", Workflow: "w", Status: engine.StatusRunning, CreatedAt: now, UpdatedAt: now}
	if err := db.CreateRun(ctx, run, nil); err != nil {
		t.Fatal(err)
	}
	run, err = db.Acquire(ctx, run.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	ix, err := db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "draft", Questions: map[string]any{engine.QuestionKey: "Which licence?"}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, storeDir: storeDir, run: run, ix: ix, launched: make(chan api.Caller, 4)}
	f.engine = engine.New(engine.Options{Store: db})
	launch := func(ctx context.Context, req api.LaunchRequest) (*engine.Run, error) {
		c, _ := api.CallerFrom(ctx)
		f.launched <- c
		return &engine.Run{ID: "r-new", Status: engine.StatusRunning}, nil
	}
	h := api.NewServer(f.engine, db, api.Options{Launch: launch, Backup: db.Backup}).Handler()
	srv := httptest.NewServer(api.RequireToken(tcpToken, tcpName, h))
	t.Cleanup(srv.Close)
	f.base = srv.URL
	f.client = api.NewClient(srv.URL, api.ClientOptions{HTTP: srv.Client(), Token: tcpToken})
	f.opts = api.LocalOptions{Dir: newRuntimeDir(t)}
	f.local, err = api.ServeLocal(storeDir, h, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.local.Close() })
	return f
}

// newRuntimeDir returns a short private directory: t.TempDir's paths can
// be too long for a unix socket.
func newRuntimeDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "itapi")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir + "/run"
}

// unixHTTP is a plain HTTP client of a unix socket, sending what a test
// tells it to.
func unixHTTP(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
}

func TestAnswerThroughAPI(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pending, err := f.client.Pending(ctx, f.run.ID)
	if err != nil || len(pending) != 1 || pending[0].ID != "r-api_draft_async_1" {
		t.Fatalf("pending = %v, %v", pending, err)
	}
	res, err := f.client.Answer(ctx, f.run.ID, f.ix.ID, api.AnswerBody{Answer: "MIT"})
	if err != nil || !res.Queued || res.InteractionID != f.ix.ID {
		t.Fatalf("answer = %+v, %v", res, err)
	}
	pending, _ = f.client.Pending(ctx, f.run.ID)
	if len(pending) != 0 {
		t.Errorf("answered question still pending: %v", pending)
	}
	ix, _ := f.db.Interaction(ctx, f.run.ID, f.ix.ID)
	if ix.AnsweredBy != tcpName || ix.Via != "api" || ix.Answer() != "MIT" {
		t.Errorf("stored interaction = %+v, want answered by %s via api", ix, tcpName)
	}
}

func TestAPIErrors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tests := []struct {
		name       string
		run, ix    string
		text       string
		wantStatus int
		wantErr    error
		wantText   string
	}{
		{"unknown run", "nope", f.ix.ID, "x", 404, engine.ErrNotFound, "not found"},
		{"unknown question", f.run.ID, "r-api_draft_async_9", "x", 404, engine.ErrNotFound, "not found"},
		{"empty answer", f.run.ID, f.ix.ID, "  ", 400, engine.ErrEmptyAnswer, "answer text is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.client.Answer(ctx, tc.run, tc.ix, api.AnswerBody{Answer: tc.text})
			var apiErr *api.Error
			if !errors.As(err, &apiErr) || apiErr.Status != tc.wantStatus || !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("err = %v (%+v), want %d %v containing %q", err, apiErr, tc.wantStatus, tc.wantErr, tc.wantText)
			}
		})
	}
	// The question is still pending after the refusals; then a double
	// answer conflicts, naming who answered first.
	if _, err := f.client.Answer(ctx, f.run.ID, f.ix.ID, api.AnswerBody{Answer: "MIT"}); err != nil {
		t.Fatal(err)
	}
	local, err := api.DialLocal(f.storeDir, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = local.Answer(ctx, f.run.ID, f.ix.ID, api.AnswerBody{Answer: "GPL"})
	if !errors.Is(err, engine.ErrAlreadyAnswered) || !strings.Contains(err.Error(), tcpName) {
		t.Errorf("double answer: err = %v, want a conflict naming %s", err, tcpName)
	}
	if _, err := f.client.Run(ctx, "missing"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("unknown run: err = %v", err)
	}
}

func TestRunsAndEvents(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	runs, err := f.client.Runs(ctx, engine.RunFilter{})
	if err != nil || len(runs) != 1 || runs[0].ID != f.run.ID {
		t.Fatalf("runs = %v, %v", runs, err)
	}
	evs, err := f.client.Events(ctx, f.run.ID, 0, 100, 0)
	if err != nil || len(evs) != 1 || evs[0].Type != engine.EventHumanInputRequested || evs[0].Data["async"] != true {
		t.Fatalf("events = %+v, %v", evs, err)
	}
	// The run is marked running but nothing executes it (its owner is
	// gone): Stop ends it, with the reason naming who stopped it.
	cancelled, err := f.client.Cancel(ctx, f.run.ID)
	if err != nil || !cancelled {
		t.Errorf("cancel of an interrupted run = %v, %v; want it stopped", cancelled, err)
	}
	if run, _ := f.db.Run(ctx, f.run.ID); run.Status != engine.StatusCancelled || run.Error != "cancelled by "+tcpName+" via api" {
		t.Errorf("after cancel: %s %q", run.Status, run.Error)
	}
}

// Every route refuses a request without the right token, on TCP and on
// the socket, with a JSON error that never repeats the token; with it,
// the same requests get through.
func TestAPIRefusesWithoutToken(t *testing.T) {
	f := newFixture(t)
	localToken, err := os.ReadFile(f.local.Endpoint.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	routes := []struct{ method, path, body string }{
		{"GET", "/api/runs", ""},
		{"GET", "/api/runs/r-api", ""},
		{"GET", "/api/runs/r-api/events", ""},
		{"GET", "/api/runs/r-api/interactions/pending", ""},
		{"POST", "/api/runs/r-api/interactions/r-api_draft_async_1/answer", `{"answer": "MIT"}`},
		{"POST", "/api/runs/r-api/cancel", "{}"},
		{"POST", "/api/runs", `{"file_path": "w.bot"}`},
		{"GET", "/api/store/backup", ""},
		{"GET", "/api/nowhere", ""},
	}
	transports := []struct {
		name   string
		base   string
		client *http.Client
		token  string
	}{
		{"tcp", f.base, http.DefaultClient, tcpToken},
		{"socket", "http://owner", unixHTTP(f.local.Endpoint.Socket), string(localToken)},
	}
	auths := []struct{ name, header string }{
		{"no header", ""},
		{"wrong token", "Bearer wrong"},
		{"empty bearer", "Bearer "},
		{"the other transport's token", "other"},
		{"not bearer", "Basic dXNlcjpwYXNz"},
	}
	send := func(t *testing.T, client *http.Client, method, url, body, auth string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tr := range transports {
		other := string(localToken)
		if tr.name == "socket" {
			other = tcpToken
		}
		for _, rt := range routes {
			for _, a := range auths {
				t.Run(tr.name+" "+rt.method+" "+rt.path+" "+a.name, func(t *testing.T) {
					header := a.header
					if header == "other" {
						header = "Bearer " + other
					}
					code, body := send(t, tr.client, rt.method, tr.base+rt.path, rt.body, header)
					if code != http.StatusUnauthorized || !strings.Contains(body, `"code":"unauthorized"`) {
						t.Errorf("status %d %s, want 401 unauthorized", code, body)
					}
					if strings.Contains(body, tcpToken) || strings.Contains(body, string(localToken)) {
						t.Errorf("the refusal repeats a token: %s", body)
					}
				})
			}
		}
		t.Run(tr.name+" with the token", func(t *testing.T) {
			for _, rt := range routes[:4] {
				if code, body := send(t, tr.client, rt.method, tr.base+rt.path, rt.body, "Bearer "+tr.token); code != http.StatusOK {
					t.Errorf("%s %s = %d %s, want 200", rt.method, rt.path, code, body)
				}
			}
		})
	}
	// The routes alone, mounted without authentication, let nobody in.
	bare := httptest.NewServer(api.NewServer(f.engine, f.db, api.Options{}).Handler())
	defer bare.Close()
	if code, body := send(t, bare.Client(), "GET", bare.URL+"/api/runs", "", "Bearer "+tcpToken); code != http.StatusUnauthorized {
		t.Errorf("unauthenticated handler = %d %s, want 401", code, body)
	}
}

// Who answers is the caller the server authenticated: "by" and "via" in
// the body are ignored, on TCP and on the socket.
func TestAnswerIgnoresByAndVia(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name            string
		socket          bool
		wantBy, wantVia string
	}{
		{"tcp", false, tcpName, "api"},
		{"socket", true, api.UserName(os.Getuid()), "cli"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			client, base, token := http.DefaultClient, f.base, tcpToken
			if tc.socket {
				b, err := os.ReadFile(f.local.Endpoint.TokenFile)
				if err != nil {
					t.Fatal(err)
				}
				client, base, token = unixHTTP(f.local.Endpoint.Socket), "http://owner", string(b)
			}
			req, _ := http.NewRequest("POST", base+"/api/runs/r-api/interactions/"+f.ix.ID+"/answer",
				strings.NewReader(`{"answer": "MIT", "by": "carol", "via": "github"}`))
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("answer = %d", resp.StatusCode)
			}
			ix, err := f.db.Interaction(ctx, f.run.ID, f.ix.ID)
			if err != nil {
				t.Fatal(err)
			}
			if ix.AnsweredBy != tc.wantBy || ix.Via != tc.wantVia || ix.Answer() != "MIT" {
				t.Errorf("stored: %q by %q via %q, want MIT by %q via %q", ix.Answer(), ix.AnsweredBy, ix.Via, tc.wantBy, tc.wantVia)
			}
		})
	}
}

// A launch sees who asks for it, whatever the body says.
func TestLaunchSeesTheCaller(t *testing.T) {
	f := newFixture(t)
	localToken, err := os.ReadFile(f.local.Endpoint.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		client *http.Client
		base   string
		token  string
		want   api.Caller
	}{
		{"tcp", http.DefaultClient, f.base, tcpToken, api.Caller{Name: tcpName, Via: "api"}},
		{"socket", unixHTTP(f.local.Endpoint.Socket), "http://owner", string(localToken), api.Caller{Name: api.UserName(os.Getuid()), Via: "cli"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", tc.base+"/api/runs", strings.NewReader(`{"file_path": "w.bot", "by": "carol", "via": "github"}`))
			req.Header.Set("Authorization", "Bearer "+tc.token)
			resp, err := tc.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("launch = %d", resp.StatusCode)
			}
			if got := <-f.launched; got != tc.want {
				t.Errorf("caller = %+v, want %+v", got, tc.want)
			}
		})
	}
}
