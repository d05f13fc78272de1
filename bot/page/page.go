// Package page is iterion's admin page, served by iterion serve under /:
// the questions that wait for a person across every run, answered in
// place, and the runs, each with its timeline, outputs, artifacts and
// questions, cancelled and resumed from there.
//
// It is server-rendered html/template over embedded assets (embed.FS) and
// one small plain-JavaScript file, with no CDN and no build step, and it
// works without JavaScript: every action is a form that posts and
// redirects. With JavaScript, rows and the run's timeline change live,
// from server-sent events (GET /events) fed by the engine's event hook
// (OnEvent): nothing polls. The same templates render a page and each
// live update.
//
// Routes:
//
//	GET  /                          the open questions, newest first; filters in the URL:
//	                                repo, run, mine (asked to me), older_than, deadline_within, page
//	GET  /q/{id}                    one question: its form, its run, its audit trail
//	POST /q/{id}/answer             answer it (303 back, or the form again with what to fix)
//	GET  /runs                      the runs, with status and repo filters; bulk cancel
//	POST /runs/cancel               bulk cancel: a confirm step listing the runs, then cancel
//	POST /runs/apply-default        bulk apply-default: the same, answering the runs' open
//	                                questions with their defaults
//	GET  /runs/{id}                 a run: timeline, the running step, outputs, artifacts, questions
//	POST /runs/{id}/cancel|resume   cancel or resume it
//	GET  /events                    server-sent events for the page that asks (its filters)
//	GET  /login, POST /login        sign in: with GitHub, or with the admin token
//	GET  /auth/github[/callback]    the GitHub App's user OAuth web flow
//	POST /logout
//	GET  /static/…                  the stylesheet and the script
//
// Who may do what: the admin token (Authorization: Bearer on any request,
// or the /login form, which sets the session) may do everything. A person
// signed in with GitHub may see every run, and act on a run as its
// channel's Permissions say (for GitHub's runs, the PR commands' live
// check of write permission, or answerers); a run no channel of theirs
// vouches for is the admin's alone. Answers are recorded as the person's
// login via "page".
//
// Security: the session cookie is HttpOnly, SameSite=Lax, Secure behind
// TLS (or a public https address), signed, and expires; state changes only
// by POST, behind http.CrossOriginProtection; every response carries a
// CSP of default-src 'self' and no inline script; everything a model
// wrote (questions, outputs, events) is escaped by html/template.
package page

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/engine"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Acts a person may do, as Permissions.May names them.
const (
	ActAnswer = "answer"
	ActCancel = "cancel"
	ActResume = "resume"
)

// Via is the channel the page records on answers and stops.
const Via = "page"

// AdminName is who the admin token acts as.
const AdminName = "admin"

// Store is what the page reads: the Reader's records and the channels'
// posts of runs.
type Store interface {
	api.ReadStore
	RunPosts(ctx context.Context, runID string) (map[string]string, error)
}

// Doors are the engine's doors the page acts through (*engine.Engine).
type Doors interface {
	Answer(ctx context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error)
	Stop(ctx context.Context, runID, reason string) (bool, error)
	Continue(ctx context.Context, runID, by, via string) (*engine.Run, error)
}

// Permissions decide what a person signed in with an outside account may
// do with the runs a channel started (bot/github's PagePermissions).
type Permissions interface {
	// May reports whether login may do act on run and, when not, why, in
	// words for them; fresh asks the channel now rather than reuse a
	// recent answer (actions pass it).
	May(ctx context.Context, run *engine.Run, login, act string, fresh bool) (bool, string, error)
	// Who says who may answer run's questions.
	Who(ctx context.Context, run *engine.Run) (string, error)
}

// SignIn is the sign-in with an outside account: GitHub's user OAuth web
// flow (bot/github's UserAuth).
type SignIn interface {
	// AuthorizeURL is where to send a person to sign in; they come back to
	// redirect with a code and state.
	AuthorizeURL(state, redirect string) string
	// SignIn exchanges the code for who they are, or refuses them with an
	// error whose text is for them when SignInRefusal says so.
	SignIn(ctx context.Context, code, redirect string) (string, error)
}

// Link says where a channel's post is.
type Link struct {
	// Label names the post for people ("PR comment", "Slack thread").
	Label string
	// URL is its address; "" when it has none to link.
	URL string
}

// Linker links a channel's post of a question (extID, the id the channel
// recorded on the question), given the channel's posts of its run (store
// RunPosts).
type Linker func(runPosts map[string]string, extID string) Link

// Options configure a Server. Store, Doors, AdminToken and SessionKey are
// required; a zero optional field means the default it names.
type Options struct {
	Store Store
	Doors Doors
	// Place says where a run belongs (its repository and PR); nil means
	// nowhere but its channel.
	Place func(*engine.Run) api.Place
	// Permissions, by the channel that started a run (its trigger's
	// source: "github"), decide what people signed in with that channel's
	// accounts may do with its runs. A run of a channel not here is the
	// admin's alone.
	Permissions map[string]Permissions
	// Links link the posts of questions, by channel ("github" → PR
	// comment). A channel not here shows its name, unlinked.
	Links map[string]Linker
	// RunLinks link a run's own post on its channel (its status
	// comment), by channel.
	RunLinks map[string]func(runPosts map[string]string) Link
	// SignIn, when set, offers "Sign in with GitHub"; Refused tells its
	// refusals meant for the person (bot/github's *SignInError).
	SignIn  SignIn
	Refused func(error) bool
	// AdminToken is the bootstrap admin's token.
	AdminToken string
	// SessionKey signs session cookies (at least 32 bytes, kept across
	// restarts so that sessions outlive them).
	SessionKey []byte
	// PublicURL is the page's address as people reach it
	// (ITERION_PUBLIC_URL): the OAuth callback is under it, and an https
	// one makes cookies Secure. "" means the address each request came
	// to.
	PublicURL string
	// SessionTTL is how long a sign-in lasts; 0 means 12 hours.
	SessionTTL time.Duration
	// Logger receives request errors; nil means none.
	Logger *slog.Logger
	// Now is the clock of ages, deadlines and sessions; nil means time.Now.
	Now func() time.Time
}

// DefaultSessionTTL is how long a sign-in lasts by default.
const DefaultSessionTTL = 12 * time.Hour

// Server is the admin page.
type Server struct {
	opts   Options
	store  Store
	doors  Doors
	reader *api.Reader
	tmpl   *template.Template
	log    *slog.Logger
	now    func() time.Time
	hub    hub
	public string // PublicURL without its trailing slash
}

// ErrNoSecrets refuses a Server without its store, doors, admin token or
// session key.
var ErrNoSecrets = errors.New("the admin page needs its store, the engine's doors, an admin token and a session key of at least 32 bytes")

// New returns the admin page o describes.
func New(o Options) (*Server, error) {
	if o.AdminToken == "" || len(o.SessionKey) < 32 || o.Store == nil || o.Doors == nil {
		return nil, ErrNoSecrets
	}
	s := &Server{opts: o, store: o.Store, doors: o.Doors, log: o.Logger, now: o.Now, public: strings.TrimRight(o.PublicURL, "/")}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.opts.SessionTTL = cmp.Or(o.SessionTTL, DefaultSessionTTL)
	s.reader = api.NewReader(o.Store, o.Place, s.now)
	t, err := template.New("page").Funcs(s.funcs()).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	s.tmpl = t
	s.hub.subs = map[*subscriber]struct{}{}
	return s, nil
}

// OnEvent is the engine's event hook for the page: it hands the event to
// the live views open, without blocking.
func (s *Server) OnEvent(ev engine.Event) { s.hub.publish(ev) }

// Close ends the live views open, and refuses new ones: call it when the
// server starts shutting down, before http.Server.Shutdown, which would
// otherwise wait for them.
func (s *Server) Close() { s.hub.close() }

// Handler returns the page's routes, mounted at /.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.loginToken)
	mux.HandleFunc("POST /logout", s.logout)
	mux.HandleFunc("GET /auth/github", s.githubStart)
	mux.HandleFunc("GET /auth/github/callback", s.githubCallback)
	mux.Handle("GET /{$}", s.signedIn(s.questionsPage))
	mux.Handle("GET /q/{id}", s.signedIn(s.questionPage))
	mux.Handle("POST /q/{id}/answer", s.signedIn(s.answer))
	mux.Handle("GET /runs", s.signedIn(s.runsPage))
	mux.Handle("POST /runs/cancel", s.signedIn(s.bulkCancel))
	mux.Handle("POST /runs/apply-default", s.signedIn(s.applyDefaults))
	mux.Handle("GET /runs/{id}", s.signedIn(s.runPage))
	mux.Handle("POST /runs/{id}/cancel", s.signedIn(s.cancelRun))
	mux.Handle("POST /runs/{id}/resume", s.signedIn(s.resumeRun))
	mux.Handle("GET /events", s.signedIn(s.events))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, "There is no such page.")
	})
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusForbidden, "This request came from another site, so it was refused: the admin page takes changes only from its own pages.")
	}))
	return securityHeaders(cop.Handler(mux))
}

// securityHeaders sets, on every response, the CSP (no inline script, no
// framing, nothing from elsewhere) and the headers that go with it.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("X-Frame-Options", "DENY")
		h.ServeHTTP(w, r)
	})
}

// viewerKey carries the signed-in viewer in a request's context.
type viewerKey struct{}

// sinceKey carries the hub's event count at the request's start.
type sinceKey struct{}

// liveSince is the event count r started at.
func liveSince(r *http.Request) int64 {
	n, _ := r.Context().Value(sinceKey{}).(int64)
	return n
}

// Viewer is who looks at the page.
type Viewer struct {
	// Login is their name: a GitHub login, or AdminName.
	Login string
	// Admin is set for the admin token, which may do everything.
	Admin bool
}

func viewerOf(r *http.Request) Viewer {
	v, _ := r.Context().Value(viewerKey{}).(Viewer)
	return v
}

// signedIn serves h to a signed-in viewer: the admin token as a bearer,
// or a session. Others are sent to /login (a page) or refused (a POST,
// the events).
func (s *Server) signedIn(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, ok, problem := s.viewer(r)
		if !ok {
			if problem != "" {
				s.fail(w, r, http.StatusUnauthorized, problem)
				return
			}
			if r.Method == http.MethodGet && r.URL.Path != "/events" {
				http.Redirect(w, r, "/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			s.fail(w, r, http.StatusUnauthorized, "Sign in first.")
			return
		}
		ctx := context.WithValue(r.Context(), viewerKey{}, v)
		// The events published so far, read before the page reads the
		// store: its stream replays those that follow.
		ctx = context.WithValue(ctx, sinceKey{}, s.hub.current())
		h(w, r.WithContext(ctx))
	})
}

// may reports whether the viewer may do act on run, and why not. fresh
// asks the run's channel now.
func (s *Server) may(ctx context.Context, v Viewer, run *engine.Run, act string, fresh bool) (bool, string) {
	if v.Admin {
		return true, ""
	}
	p := s.opts.Permissions[run.Trigger.Source]
	if p == nil {
		return false, "this run was started from " + cmp.Or(run.Trigger.Source, "elsewhere") + ", where only the server's admin may act on it"
	}
	ok, why, err := p.May(ctx, run, v.Login, act, fresh)
	if err != nil {
		s.log.Warn("checking a permission failed", "run", run.ID, "login", v.Login, "act", act, "err", err)
		return false, "your permission could not be checked just now; try again in a moment"
	}
	return ok, why
}

// who says who may answer run's questions.
func (s *Server) who(ctx context.Context, run *engine.Run) string {
	const admin = "the server's admin"
	p := s.opts.Permissions[run.Trigger.Source]
	if p == nil {
		return admin
	}
	who, err := p.Who(ctx, run)
	if err != nil {
		s.log.Warn("reading who may answer failed", "run", run.ID, "err", err)
		return admin + ", and people the run's channel allows"
	}
	return who + "; " + admin
}

// permissionCache remembers, for one rendering, what the viewer may do
// with each run and who may answer it.
type permissionCache struct {
	mu   sync.Mutex
	may  map[string]decision
	whos map[string]string
}

type decision struct {
	OK  bool
	Why string
}

func newPermissionCache() *permissionCache {
	return &permissionCache{may: map[string]decision{}, whos: map[string]string{}}
}

func (s *Server) cachedMay(ctx context.Context, c *permissionCache, v Viewer, run *engine.Run, act string) decision {
	key := run.ID + "\x00" + act
	c.mu.Lock()
	d, ok := c.may[key]
	c.mu.Unlock()
	if ok {
		return d
	}
	d.OK, d.Why = s.may(ctx, v, run, act, false)
	c.mu.Lock()
	c.may[key] = d
	c.mu.Unlock()
	return d
}

func (s *Server) cachedWho(ctx context.Context, c *permissionCache, run *engine.Run) string {
	c.mu.Lock()
	w, ok := c.whos[run.ID]
	c.mu.Unlock()
	if ok {
		return w
	}
	w = s.who(ctx, run)
	c.mu.Lock()
	c.whos[run.ID] = w
	c.mu.Unlock()
	return w
}
