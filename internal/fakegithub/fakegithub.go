// Package fakegithub is a fake of the GitHub REST API for tests, served
// by httptest on the real paths the bot uses: the App's installations and
// their repositories, installation tokens, contents, branches,
// collaborator permissions, issues, pull requests (read, listed,
// created), issue comments and their reactions, check runs,
// repositories over git's smart HTTP (the real git http-backend, fetches
// and pushes), and the App's user OAuth web flow with the calls a user
// token makes (who they are, their memberships). It keeps state like
// GitHub does, answers GitHub's documented errors (a missing permission,
// a validation failure), records
// every call, and fails the test on any call it does not serve.
package fakegithub

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Token is the installation token the fake hands out and requires,
// shaped like GitHub's (ghs_ and 36 letters and digits).
const Token = "ghs_FakeInstallationToken0123456789abcde"

// BotLogin is the App's login on comments it writes.
const BotLogin = "iterion[bot]"

// AppID is the id of the App the fake serves (GET /app), which owns the
// check runs the bot creates.
const AppID = 123

// InstallationID is the one installation of the App the fake serves,
// holding its one repository.
const InstallationID = 42

// Issue is an issue that is not a pull request.
type Issue struct {
	Title, Body string
	State       string // "open" (default) or "closed"
	// User opened it; the App's issues are BotLogin's.
	User string
}

// PR is a pull request.
type PR struct {
	State                string // "open" (default) or "closed"
	HeadSHA, HeadRef     string
	BaseRef, Title, Body string
	HeadRepo             string // "owner/repo" of the head; a fork's differs
	// HeadRepoDeleted makes head.repo null, as GitHub shows a PR whose
	// fork was deleted.
	HeadRepoDeleted bool
}

// OAuth is the fake's side of the App's user OAuth web flow.
type OAuth struct {
	// ClientID and ClientSecret are the App's credentials the flow
	// requires.
	ClientID, ClientSecret string
	// SignIn is who authorizes the App on GitHub's authorize page, as if
	// they had signed in there; "" makes the page answer 403.
	SignIn string
	// Orgs and Teams ("org/slug") list their active members by login.
	Orgs, Teams map[string][]string
}

// UserTokenPrefix starts the user access tokens the fake hands out, as
// GitHub's do (ghu_).
const UserTokenPrefix = "ghu_fake"

// Installation is what the token endpoint answers for the installation,
// as GitHub does.
type Installation int

const (
	// Installed mints tokens.
	Installed Installation = iota
	// Suspended answers 403: the installation was suspended.
	Suspended
	// Uninstalled answers 404: the App was uninstalled.
	Uninstalled
	// KeyRejected answers 401: the App's JWT is refused (a revoked key,
	// or the server's clock off).
	KeyRejected
)

// Comment is an issue comment.
type Comment struct {
	ID        int64
	PR        int
	User      string
	Bot       bool
	Body      string
	CreatedAt time.Time
	UpdatedAt time.Time // zero when never edited
	Edits     int
}

// CheckRun is a check run.
type CheckRun struct {
	ID                     int64
	Name, HeadSHA          string
	ExternalID, DetailsURL string
	Status, Conclusion     string
	Title, Summary         string
	// History is every status/conclusion the check run had, in order.
	History []string
	// AppID is the App that owns it: AppID for the bot's.
	AppID int64
}

// Call is one request the fake served.
type Call struct {
	Method, Path string
	Status       int
}

// Server is the fake. Set its fields before the first request; read its
// state through the methods, which lock.
type Server struct {
	t   testing.TB
	srv *httptest.Server

	// Owner/Repo is the one repository served, with its default branch.
	Owner, Repo, DefaultBranch string
	// Files are the default branch's files served by the contents API.
	Files map[string]string
	// Perms are collaborators' permissions (admin, write, read, none).
	Perms map[string]string
	// PRs are the pull requests by number.
	PRs map[int]*PR
	// Issues are the issues that are not pull requests, by number (PRs
	// and issues share the numbers, as on GitHub).
	Issues map[int]*Issue
	// OAuth is the App's user OAuth web flow, served on GitHub's paths
	// under the web address GitURL (/login/oauth/authorize and
	// /login/oauth/access_token) and the API's (/user, the memberships).
	OAuth OAuth
	// Clock gives the time of the comments the fake writes (the bot's,
	// and people's added "now"), which the bot reads back when it lists
	// comments since a time. A test that pins the bot's clock to a date
	// gives the fake the same one. nil means time.Now. (Installation
	// tokens expire by the real clock: the App's token cache reads it.)
	Clock func() time.Time

	mu           sync.Mutex
	installation Installation
	remaining    int // calls left in the rate-limit window
	fail         func(w http.ResponseWriter, r *http.Request) bool
	nextID       int64
	comments     []*Comment
	reactions    []string // "<comment id>:<content>"
	checks       []*CheckRun
	calls        []Call
	changed      chan struct{}
	gitRoot      string
	// perms are the installation's permissions (contents, pull_requests,
	// issues): write unless SetPermission says otherwise.
	perms      map[string]string
	codes      map[string]oauthCode // sign-in codes handed out, until exchanged
	userTokens map[string]oauthCode // user access token → who
}

// oauthCode is a code the authorize page (or SignIn) handed out.
type oauthCode struct {
	login, redirect string
	id              int64
}

// New starts a fake serving owner/repo on branch main.
func New(t testing.TB, owner, repo string) *Server {
	s := &Server{
		t: t, Owner: owner, Repo: repo, DefaultBranch: "main",
		Files: map[string]string{}, Perms: map[string]string{}, PRs: map[int]*PR{}, Issues: map[int]*Issue{},
		nextID: 1000, changed: make(chan struct{}), remaining: rateLimit, perms: map[string]string{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the REST base, with its trailing slash (ITERION_GITHUB_API_URL).
func (s *Server) URL() string { return s.srv.URL + "/" }

// GitURL is the base repositories are cloned from (ITERION_GITHUB_URL).
func (s *Server) GitURL() string { return s.srv.URL + "/git" }

// Commit commits files (path → text) to the repository served over git
// at GitURL, creating it the first time, and returns the commit's SHA.
// Clones must present the installation token.
func (s *Server) Commit(files map[string]string) string {
	s.t.Helper()
	s.mu.Lock()
	if s.gitRoot == "" {
		s.gitRoot = s.t.TempDir()
	}
	root := s.gitRoot
	s.mu.Unlock()
	work := filepath.Join(root, "work")
	bare := filepath.Join(root, s.Owner, s.Repo+".git")
	if _, err := os.Stat(work); err != nil {
		s.run(root, "init", "-q", "-b", s.DefaultBranch, work)
		s.run(root, "init", "-q", "--bare", bare)
		s.run(bare, "config", "uploadpack.allowAnySHA1InWant", "true")
		// git http-backend takes pushes from authenticated users only; the
		// fake checks the token itself.
		s.run(bare, "config", "http.receivepack", "true")
	}
	for name, text := range files {
		path := filepath.Join(work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			s.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			s.t.Fatal(err)
		}
	}
	s.run(work, "add", "-A")
	s.run(work, "commit", "-q", "--allow-empty", "-m", "change")
	s.run(work, "push", "-q", bare, "HEAD:refs/heads/"+s.DefaultBranch)
	return s.run(work, "rev-parse", "HEAD")
}

// Branch returns the commit branch is at in the repository served over
// git, "" when there is no such branch.
func (s *Server) Branch(branch string) string {
	s.mu.Lock()
	root := s.gitRoot
	s.mu.Unlock()
	if root == "" {
		return ""
	}
	out, err := s.git2(filepath.Join(root, s.Owner, s.Repo+".git"), "rev-parse", "--verify", "-q", "refs/heads/"+branch)
	if err != nil {
		return ""
	}
	return out
}

// Git runs git in the repository served over git (a bare repository) and
// returns its output: a test reads a pushed commit with it.
func (s *Server) Git(args ...string) string {
	s.t.Helper()
	s.mu.Lock()
	root := s.gitRoot
	s.mu.Unlock()
	return s.run(filepath.Join(root, s.Owner, s.Repo+".git"), args...)
}

// git2 runs git in dir, returning the error instead of failing the test.
func (s *Server) git2(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// SetPermission sets the installation's permission name (contents,
// pull_requests, issues) to level (write, read or none); GitHub then
// refuses what it does not allow with 403 "Resource not accessible by
// integration", and git pushes without contents: write.
func (s *Server) SetPermission(name, level string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.perms[name] = level
}

func (s *Server) mayWrite(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	level, ok := s.perms[name]
	return !ok || level == "write"
}

// Pulls returns the pull requests, by number.
func (s *Server) Pulls() map[int]PR {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]PR{}
	for n, pr := range s.PRs {
		out[n] = *pr
	}
	return out
}

// IssueList returns the issues that are not pull requests, by number.
func (s *Server) IssueList() map[int]Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]Issue{}
	for n, is := range s.Issues {
		out[n] = *is
	}
	return out
}

// nextNumberLocked is the number of a new issue or pull request.
func (s *Server) nextNumberLocked() int {
	n := 0
	for k := range s.PRs {
		n = max(n, k)
	}
	for k := range s.Issues {
		n = max(n, k)
	}
	return n + 1
}

func (s *Server) run(dir string, args ...string) string {
	s.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// SetFail sets a hook that may answer a request instead of the fake (a
// 502, a 429): it returns true when it wrote the response. It may be set
// while requests are served.
func (s *Server) SetFail(f func(w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	s.fail = f
	s.mu.Unlock()
}

// SetInstallation sets what the token endpoint answers from now on. A
// token already handed out keeps working, as GitHub's does until it
// expires, unless the App was uninstalled or suspended, which revokes it.
func (s *Server) SetInstallation(st Installation) {
	s.mu.Lock()
	s.installation = st
	s.mu.Unlock()
}

// rateLimit is the fake's primary limit per window, an installation's
// minimum on github.com.
const rateLimit = 5000

// WritePrimaryLimit answers as GitHub does when the primary rate limit
// is used up: status 403 or 429, x-ratelimit-remaining 0 and the reset
// time.
func WritePrimaryLimit(w http.ResponseWriter, status int, reset time.Time) {
	h := w.Header()
	h.Set("X-Ratelimit-Limit", strconv.Itoa(rateLimit))
	h.Set("X-Ratelimit-Remaining", "0")
	h.Set("X-Ratelimit-Used", strconv.Itoa(rateLimit))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("X-Ratelimit-Resource", "core")
	writeError(w, status, "API rate limit exceeded for installation ID 42.", "rest/using-the-rest-api/rate-limits-for-the-rest-api#about-primary-rate-limits")
}

// WriteSecondaryLimit answers as GitHub does for a secondary rate limit:
// status 403 or 429, calls left in the primary window, and Retry-After
// when retryAfter is above 0 (GitHub does not always send it).
func WriteSecondaryLimit(w http.ResponseWriter, status int, retryAfter int) {
	h := w.Header()
	h.Set("X-Ratelimit-Limit", strconv.Itoa(rateLimit))
	h.Set("X-Ratelimit-Remaining", "4990")
	h.Set("X-Ratelimit-Used", "10")
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	h.Set("X-Ratelimit-Resource", "core")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	writeError(w, status, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", "rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits")
}

// AddCheckRun adds a check run on sha as another App (appID) made it,
// and returns its id.
func (s *Server) AddCheckRun(appID int64, sha, name, externalID, status, conclusion string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.checks = append(s.checks, &CheckRun{ID: s.nextID, Name: name, HeadSHA: sha, ExternalID: externalID, Status: status, Conclusion: conclusion, AppID: appID})
	s.changedLocked()
	return s.nextID
}

// DeleteComment deletes a comment, as someone with the rights can on
// GitHub; editing it then answers 404.
func (s *Server) DeleteComment(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.comments = slices.DeleteFunc(s.comments, func(c *Comment) bool { return c.ID == id })
	s.changedLocked()
}

// Sign returns the X-Hub-Signature-256 of payload under secret.
func Sign(secret string, payload []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(payload)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Comments returns the comments on pr, oldest first.
func (s *Server) Comments(pr int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.comments {
		if c.PR == pr {
			out = append(out, *c)
		}
	}
	return out
}

// BotComments returns the App's comments on pr containing substr.
func (s *Server) BotComments(pr int, substr string) []Comment {
	var out []Comment
	for _, c := range s.Comments(pr) {
		if c.Bot && strings.Contains(c.Body, substr) {
			out = append(out, c)
		}
	}
	return out
}

// AddComment writes a person's comment on pr, as if made on GitHub now,
// and returns it.
func (s *Server) AddComment(pr int, user, body string) Comment {
	return s.AddCommentAt(pr, user, body, s.now())
}

// AddCommentAt writes a person's comment on pr as if made at a time.
func (s *Server) AddCommentAt(pr int, user, body string, at time.Time) Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	c := &Comment{ID: s.nextID, PR: pr, User: user, Body: body, CreatedAt: at.UTC().Truncate(time.Second)}
	s.comments = append(s.comments, c)
	s.changedLocked()
	return *c
}

// EditCommentAt changes a person's comment as if edited at a time.
func (s *Server) EditCommentAt(id int64, body string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.comments {
		if c.ID == id {
			c.Body, c.UpdatedAt = body, at.UTC().Truncate(time.Second)
		}
	}
	s.changedLocked()
}

// Reactions returns "<comment id>:<content>" for each reaction made.
func (s *Server) Reactions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reactions)
}

// CheckRuns returns the check runs made, in order.
func (s *Server) CheckRuns() []CheckRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []CheckRun
	for _, c := range s.checks {
		cr := *c
		cr.History = slices.Clone(c.History)
		out = append(out, cr)
	}
	return out
}

// Calls returns the requests served, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// WaitFor waits until cond holds, re-checking it whenever the fake's
// state changes, and fails the test after timeout.
func (s *Server) WaitFor(timeout time.Duration, what string, cond func() bool) {
	s.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			s.t.Fatalf("waited %s for %s", timeout, what)
		}
	}
}

func (s *Server) now() time.Time {
	if s.Clock != nil {
		return s.Clock()
	}
	return time.Now()
}

func (s *Server) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		s.mu.Lock()
		s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, Status: rec.status})
		s.changedLocked()
		s.mu.Unlock()
	}()
	if strings.HasPrefix(r.URL.Path, "/git/login/oauth/") {
		s.oauth(rec, r, strings.TrimPrefix(r.URL.Path, "/git/login/oauth/"))
		return
	}
	if strings.HasPrefix(r.URL.Path, "/git/") {
		s.git(rec, r)
		return
	}
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer "+UserTokenPrefix) || strings.HasPrefix(a, "token "+UserTokenPrefix) {
		s.asUser(rec, r, a[strings.Index(a, " ")+1:])
		return
	}
	s.mu.Lock()
	fail := s.fail
	inst := s.installation
	s.remaining = max(s.remaining-1, 0)
	remaining := s.remaining
	s.mu.Unlock()
	if fail != nil && fail(rec, r) {
		return
	}
	// Every REST answer carries the primary limit's state, as GitHub's do.
	h := rec.Header()
	h.Set("X-Ratelimit-Limit", strconv.Itoa(rateLimit))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-Ratelimit-Used", strconv.Itoa(rateLimit-remaining))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Truncate(time.Hour).Unix(), 10))
	h.Set("X-Ratelimit-Resource", "core")
	if r.URL.Path == "/app" && r.Method == http.MethodGet {
		if inst == KeyRejected {
			writeError(rec, http.StatusUnauthorized, "A JSON web token could not be decoded", "rest")
			return
		}
		// Asked as the App (a JWT), not as an installation.
		writeJSON(rec, http.StatusOK, map[string]any{"id": AppID, "slug": strings.TrimSuffix(BotLogin, "[bot]"), "name": "iterion"})
		return
	}
	if r.URL.Path == "/app/installations" && r.Method == http.MethodGet {
		// Asked as the App (a JWT).
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") || inst == KeyRejected {
			writeError(rec, http.StatusUnauthorized, "A JSON web token could not be decoded", "rest/apps/apps#list-installations-for-the-authenticated-app")
			return
		}
		list := []map[string]any{}
		if inst != Uninstalled {
			list = append(list, map[string]any{"id": InstallationID, "app_id": AppID, "account": map[string]any{"login": s.Owner}})
		}
		writeJSON(rec, http.StatusOK, s.page(rec, r, list))
		return
	}
	if strings.HasPrefix(r.URL.Path, "/app/installations/") && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/access_tokens") {
		switch inst {
		case Suspended:
			writeError(rec, http.StatusForbidden, "This installation has been suspended", "rest/apps/apps#create-an-installation-access-token-for-an-app")
		case Uninstalled:
			writeError(rec, http.StatusNotFound, "Not Found", "rest/apps/apps#create-an-installation-access-token-for-an-app")
		case KeyRejected:
			writeError(rec, http.StatusUnauthorized, "'Issued at' claim ('iat') must be an Integer representing a time in the past", "rest")
		default:
			writeJSON(rec, http.StatusCreated, map[string]any{"token": Token, "expires_at": time.Now().Add(time.Hour).Format(time.RFC3339)})
		}
		return
	}
	if a := r.Header.Get("Authorization"); (a != "token "+Token && a != "Bearer "+Token) || inst == Suspended || inst == Uninstalled {
		writeError(rec, http.StatusUnauthorized, "Bad credentials", "rest")
		return
	}
	if r.URL.Path == "/installation/repositories" && r.Method == http.MethodGet {
		repos := []map[string]any{{"name": s.Repo, "full_name": s.Owner + "/" + s.Repo,
			"owner": map[string]any{"login": s.Owner}, "default_branch": s.DefaultBranch}}
		writeJSON(rec, http.StatusOK, map[string]any{"total_count": len(repos), "repositories": s.page(rec, r, repos)})
		return
	}
	prefix := "/repos/" + s.Owner + "/" + s.Repo + "/"
	if r.URL.Path == strings.TrimSuffix(prefix, "/") && r.Method == http.MethodGet {
		writeJSON(rec, http.StatusOK, map[string]any{"name": s.Repo, "full_name": s.Owner + "/" + s.Repo,
			"owner": map[string]any{"login": s.Owner}, "default_branch": s.DefaultBranch})
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok {
		s.unserved(rec, r)
		return
	}
	parts := strings.Split(rest, "/")
	switch {
	case parts[0] == "contents" && r.Method == http.MethodGet:
		s.contents(rec, r, strings.Join(parts[1:], "/"))
	case len(parts) == 3 && parts[0] == "collaborators" && parts[2] == "permission" && r.Method == http.MethodGet:
		s.mu.Lock()
		perm, ok := s.Perms[parts[1]]
		s.mu.Unlock()
		if !ok {
			// GitHub: 404 for a login that is not a user.
			writeError(rec, http.StatusNotFound, "Not Found", "rest/collaborators/collaborators#get-repository-permissions-for-a-user")
			return
		}
		writeJSON(rec, http.StatusOK, map[string]any{"permission": perm, "user": map[string]any{"login": parts[1]}})
	case len(parts) == 2 && parts[0] == "pulls" && r.Method == http.MethodGet:
		s.pull(rec, atoi(parts[1]))
	case len(parts) == 1 && parts[0] == "pulls" && r.Method == http.MethodGet:
		s.listPulls(rec, r)
	case len(parts) == 1 && parts[0] == "pulls" && r.Method == http.MethodPost:
		s.createPull(rec, r)
	case len(parts) >= 2 && parts[0] == "branches" && r.Method == http.MethodGet:
		s.branch(rec, strings.Join(parts[1:], "/"))
	case len(parts) == 1 && parts[0] == "issues" && r.Method == http.MethodGet:
		s.listIssues(rec, r)
	case len(parts) == 1 && parts[0] == "issues" && r.Method == http.MethodPost:
		s.createIssue(rec, r)
	case len(parts) == 2 && parts[0] == "issues" && r.Method == http.MethodGet:
		s.issue(rec, atoi(parts[1]))
	case len(parts) == 2 && parts[0] == "issues" && r.Method == http.MethodPatch:
		s.editIssue(rec, r, atoi(parts[1]))
	case len(parts) == 3 && parts[0] == "issues" && parts[2] == "comments" && r.Method == http.MethodGet:
		s.listComments(rec, r, atoi(parts[1]))
	case len(parts) == 3 && parts[0] == "issues" && parts[2] == "comments" && r.Method == http.MethodPost:
		s.createComment(rec, r, atoi(parts[1]))
	case len(parts) == 3 && parts[0] == "issues" && parts[1] == "comments" && r.Method == http.MethodPatch:
		s.editComment(rec, r, int64(atoi(parts[2])))
	case len(parts) == 4 && parts[0] == "issues" && parts[1] == "comments" && parts[3] == "reactions" && r.Method == http.MethodPost:
		s.react(rec, r, int64(atoi(parts[2])))
	case len(parts) == 3 && parts[0] == "commits" && parts[2] == "check-runs" && r.Method == http.MethodGet:
		s.listChecks(rec, r, parts[1])
	case len(parts) == 1 && parts[0] == "check-runs" && r.Method == http.MethodPost:
		s.createCheck(rec, r)
	case len(parts) == 2 && parts[0] == "check-runs" && r.Method == http.MethodPatch:
		s.updateCheck(rec, r, int64(atoi(parts[1])))
	default:
		s.unserved(rec, r)
	}
}

func (s *Server) unserved(w http.ResponseWriter, r *http.Request) {
	s.t.Errorf("fake GitHub: unexpected call %s %s", r.Method, r.URL)
	writeError(w, http.StatusNotFound, "Not Found", "rest")
}

// writeError answers an error as GitHub does: a message and the
// documentation's address.
func writeError(w http.ResponseWriter, code int, message, doc string) {
	writeJSON(w, code, map[string]any{"message": message, "documentation_url": "https://docs.github.com/" + doc})
}

type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func (s *Server) contents(w http.ResponseWriter, r *http.Request, path string) {
	if ref := r.URL.Query().Get("ref"); ref != "" && ref != s.DefaultBranch {
		s.t.Errorf("fake GitHub: %s read from ref %q, want the default branch %q", path, ref, s.DefaultBranch)
	}
	s.mu.Lock()
	text, ok := s.Files[path]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", "rest")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"type": "file", "path": path, "size": len(text), "encoding": "base64", "content": base64.StdEncoding.EncodeToString([]byte(text))})
}

func (s *Server) pull(w http.ResponseWriter, n int) {
	s.mu.Lock()
	pr, ok := s.PRs[n]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", "rest")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, s.pullJSON(n, pr))
}

func (s *Server) commentJSON(c *Comment) map[string]any {
	typ := "User"
	if c.Bot {
		typ = "Bot"
	}
	return map[string]any{
		"id": c.ID, "body": c.Body, "user": map[string]any{"login": c.User, "type": typ},
		"html_url":   fmt.Sprintf("%s/%s/%s/pull/%d#issuecomment-%d", s.srv.URL, s.Owner, s.Repo, c.PR, c.ID),
		"created_at": c.CreatedAt.Format(time.RFC3339), "updated_at": cmp.Or(c.UpdatedAt, c.CreatedAt).Format(time.RFC3339),
	}
}

// listComments pages comments like GitHub: oldest first, always (the
// endpoint has no sort or direction), and only those updated at or after
// since.
func (s *Server) listComments(w http.ResponseWriter, r *http.Request, pr int) {
	q := r.URL.Query()
	var since time.Time
	if v := q.Get("since"); v != "" {
		var err error
		if since, err = time.Parse(time.RFC3339, v); err != nil {
			writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\nsince: "+err.Error(), "rest/issues/comments#list-issue-comments")
			return
		}
	}
	s.mu.Lock()
	var list []map[string]any
	for _, c := range s.comments {
		if c.PR == pr && !cmp.Or(c.UpdatedAt, c.CreatedAt).Before(since.Truncate(time.Second)) {
			list = append(list, s.commentJSON(c))
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, s.page(w, r, list))
}

// page cuts list to the page asked (per_page, at most 100, default 30;
// page from 1) and links the next page as GitHub does.
func (s *Server) page(w http.ResponseWriter, r *http.Request, list []map[string]any) []map[string]any {
	q := r.URL.Query()
	per := min(cmp.Or(atoi(q.Get("per_page")), 30), 100)
	page := max(atoi(q.Get("page")), 1)
	lo, hi := min((page-1)*per, len(list)), min(page*per, len(list))
	if hi < len(list) {
		next := *r.URL
		nq := next.Query()
		nq.Set("page", strconv.Itoa(page+1))
		next.RawQuery = nq.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, s.srv.URL, next.RequestURI()))
	}
	out := list[lo:hi]
	if out == nil {
		out = []map[string]any{}
	}
	return out
}

func (s *Server) createComment(w http.ResponseWriter, r *http.Request, pr int) {
	var in struct{ Body string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed: body is required", "rest/issues/comments#create-an-issue-comment")
		return
	}
	if len(in.Body) > 65536 {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed: Body is too long (maximum is 65536 characters)", "rest/issues/comments#create-an-issue-comment")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.PRs[pr]; !ok {
		if _, ok := s.Issues[pr]; !ok {
			writeError(w, http.StatusNotFound, "Not Found", "rest")
			return
		}
	}
	s.nextID++
	c := &Comment{ID: s.nextID, PR: pr, User: BotLogin, Bot: true, Body: in.Body, CreatedAt: s.now().UTC()}
	s.comments = append(s.comments, c)
	writeJSON(w, http.StatusCreated, s.commentJSON(c))
}

func (s *Server) editComment(w http.ResponseWriter, r *http.Request, id int64) {
	var in struct{ Body string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" || len(in.Body) > 65536 {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed: body is invalid", "rest/issues/comments#update-an-issue-comment")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.comments {
		if c.ID == id {
			if !c.Bot {
				writeError(w, http.StatusForbidden, "Resource not accessible by integration", "rest/issues/comments#update-an-issue-comment")
				return
			}
			c.Body = in.Body
			c.Edits++
			c.UpdatedAt = s.now().UTC()
			writeJSON(w, http.StatusOK, s.commentJSON(c))
			return
		}
	}
	writeError(w, http.StatusNotFound, "Not Found", "rest")
}

func (s *Server) react(w http.ResponseWriter, r *http.Request, id int64) {
	var in struct{ Content string }
	_ = json.NewDecoder(r.Body).Decode(&in)
	switch in.Content {
	case "+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes":
	default:
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed: content is not included in the list", "rest/reactions/reactions#create-reaction-for-an-issue-comment")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strconv.FormatInt(id, 10) + ":" + in.Content
	if slices.Contains(s.reactions, key) {
		writeJSON(w, http.StatusOK, map[string]any{"id": 1, "content": in.Content})
		return
	}
	s.reactions = append(s.reactions, key)
	writeJSON(w, http.StatusCreated, map[string]any{"id": 1, "content": in.Content})
}

type checkIn struct {
	Name       string `json:"name"`
	HeadSHA    string `json:"head_sha"`
	ExternalID string `json:"external_id"`
	DetailsURL string `json:"details_url"`
	Status     string `json:"status"`
	Conclusion string `json:"conclusion"`
	Output     *struct {
		Title   string `json:"title"`
		Summary string `json:"summary"`
	} `json:"output"`
}

func (s *Server) checkJSON(c *CheckRun) map[string]any {
	app := map[string]any{"id": AppID, "slug": "iterion"}
	if c.AppID != AppID {
		app = map[string]any{"id": c.AppID, "slug": fmt.Sprintf("other-app-%d", c.AppID)}
	}
	return map[string]any{
		"id": c.ID, "name": c.Name, "head_sha": c.HeadSHA, "external_id": c.ExternalID,
		"status": c.Status, "conclusion": c.Conclusion, "details_url": c.DetailsURL, "app": app,
	}
}

// listChecks lists a commit's check runs as GitHub does: newest first,
// by check_name and app_id when given, only the latest of each name and
// App unless filter=all, paged.
func (s *Server) listChecks(w http.ResponseWriter, r *http.Request, ref string) {
	q := r.URL.Query()
	name := q.Get("check_name")
	app := int64(atoi(q.Get("app_id")))
	filter := cmp.Or(q.Get("filter"), "latest")
	if filter != "latest" && filter != "all" {
		writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\nfilter must be latest or all", "rest/checks/runs#list-check-runs-for-a-git-reference")
		return
	}
	s.mu.Lock()
	var runs []map[string]any
	seen := map[string]bool{}
	for _, c := range slices.Backward(s.checks) {
		if c.HeadSHA != ref || (name != "" && c.Name != name) || (app != 0 && c.AppID != app) {
			continue
		}
		key := fmt.Sprint(c.AppID, "/", c.Name)
		if filter == "latest" && seen[key] {
			continue
		}
		seen[key] = true
		runs = append(runs, s.checkJSON(c))
	}
	s.mu.Unlock()
	total := len(runs)
	writeJSON(w, http.StatusOK, map[string]any{"total_count": total, "check_runs": s.page(w, r, runs)})
}

func (s *Server) applyCheck(c *CheckRun, in checkIn, creating bool) string {
	if in.Status != "" {
		if c.Status == "completed" && in.Status != "completed" {
			return "a completed check run cannot be set back to " + in.Status
		}
		c.Status = in.Status
	}
	if c.Status == "completed" && in.Conclusion == "" && c.Conclusion == "" {
		return "conclusion is required with status completed"
	}
	if in.Conclusion == "action_required" && cmp.Or(in.DetailsURL, c.DetailsURL) == "" {
		return "details_url is required with conclusion action_required"
	}
	if in.Conclusion != "" {
		c.Conclusion = in.Conclusion
	}
	c.DetailsURL = cmp.Or(in.DetailsURL, c.DetailsURL)
	if in.Output != nil {
		switch {
		case creating && in.Output.Title == "":
			return "output.title is required"
		case in.Output.Summary == "":
			return "output.summary is required"
		case len([]rune(in.Output.Summary)) > 65535:
			return "output.summary is too long (maximum is 65535 characters)"
		}
		c.Title, c.Summary = in.Output.Title, in.Output.Summary
	}
	c.History = append(c.History, strings.TrimSuffix(c.Status+"/"+c.Conclusion, "/"))
	return ""
}

func (s *Server) createCheck(w http.ResponseWriter, r *http.Request) {
	var in checkIn
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Name == "" || in.HeadSHA == "" {
		writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\nname and head_sha are required", "rest/checks/runs#create-a-check-run")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	c := &CheckRun{ID: s.nextID, Name: in.Name, HeadSHA: in.HeadSHA, ExternalID: in.ExternalID, Status: "queued", AppID: AppID}
	if msg := s.applyCheck(c, in, true); msg != "" {
		writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\n"+msg, "rest/checks/runs#create-a-check-run")
		return
	}
	s.checks = append(s.checks, c)
	writeJSON(w, http.StatusCreated, s.checkJSON(c))
}

func (s *Server) updateCheck(w http.ResponseWriter, r *http.Request, id int64) {
	var in checkIn
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusUnprocessableEntity, "Problems parsing JSON", "rest/checks/runs#update-a-check-run")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.checks {
		if c.ID == id {
			if c.AppID != AppID {
				writeError(w, http.StatusForbidden, "Resource not accessible by integration", "rest/checks/runs#update-a-check-run")
				return
			}
			next := *c
			next.History = slices.Clone(c.History)
			if msg := s.applyCheck(&next, in, false); msg != "" {
				writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\n"+msg, "rest/checks/runs#update-a-check-run")
				return
			}
			*c = next
			writeJSON(w, http.StatusOK, s.checkJSON(c))
			return
		}
	}
	writeError(w, http.StatusNotFound, "Not Found", "rest")
}

func (s *Server) git(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	root := s.gitRoot
	s.mu.Unlock()
	if root == "" {
		s.unserved(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte("x-access-token:"+Token)) {
		w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	push := strings.HasSuffix(r.URL.Path, "/git-receive-pack") || r.URL.Query().Get("service") == "git-receive-pack"
	if push && !s.mayWrite("contents") {
		// What GitHub answers a push without Contents: write.
		http.Error(w, fmt.Sprintf("Permission to %s/%s.git denied to %s.", s.Owner, s.Repo, BotLogin), http.StatusForbidden)
		return
	}
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	http.StripPrefix("/git", backend).ServeHTTP(w, r)
}

// notAccessible is GitHub's answer to a call the installation's
// permissions do not allow.
func notAccessible(w http.ResponseWriter, doc string) {
	writeError(w, http.StatusForbidden, "Resource not accessible by integration", doc)
}

// validationFailed is GitHub's 422 with one error of a field.
func validationFailed(w http.ResponseWriter, resource, field, code, message, doc string) {
	e := map[string]any{"resource": resource, "field": field, "code": code}
	if message != "" {
		e["message"] = message
	}
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": []any{e},
		"documentation_url": "https://docs.github.com/" + doc})
}

func (s *Server) branch(w http.ResponseWriter, name string) {
	sha := s.Branch(name)
	if sha == "" {
		writeError(w, http.StatusNotFound, "Branch not found", "rest/branches/branches#get-a-branch")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "commit": map[string]any{"sha": sha}, "protected": false})
}

func (s *Server) issueJSON(n int, is *Issue) map[string]any {
	typ := "User"
	if is.User == BotLogin {
		typ = "Bot"
	}
	return map[string]any{"number": n, "title": is.Title, "body": is.Body, "state": cmp.Or(is.State, "open"),
		"user":     map[string]any{"login": is.User, "type": typ},
		"html_url": fmt.Sprintf("%s/%s/%s/issues/%d", s.srv.URL, s.Owner, s.Repo, n)}
}

func (s *Server) prIssueJSON(n int, pr *PR) map[string]any {
	return map[string]any{"number": n, "title": pr.Title, "body": pr.Body, "state": cmp.Or(pr.State, "open"),
		"user":         map[string]any{"login": "someone", "type": "User"},
		"pull_request": map[string]any{"url": fmt.Sprintf("%s/repos/%s/%s/pulls/%d", s.srv.URL, s.Owner, s.Repo, n)},
		"html_url":     fmt.Sprintf("%s/%s/%s/pull/%d", s.srv.URL, s.Owner, s.Repo, n)}
}

// issue answers an issue by number; a pull request is an issue too, as
// GitHub has it.
func (s *Server) issue(w http.ResponseWriter, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if is, ok := s.Issues[n]; ok {
		writeJSON(w, http.StatusOK, s.issueJSON(n, is))
		return
	}
	if pr, ok := s.PRs[n]; ok {
		writeJSON(w, http.StatusOK, s.prIssueJSON(n, pr))
		return
	}
	writeError(w, http.StatusNotFound, "Not Found", "rest/issues/issues#get-an-issue")
}

// listIssues lists issues and pull requests as GitHub does, by number
// descending (created, newest first), filtered by state (default open)
// and creator.
func (s *Server) listIssues(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := cmp.Or(q.Get("state"), "open")
	if state != "open" && state != "closed" && state != "all" {
		validationFailed(w, "Issue", "state", "invalid", "", "rest/issues/issues#list-repository-issues")
		return
	}
	creator := q.Get("creator")
	s.mu.Lock()
	var nums []int
	for n := range s.Issues {
		nums = append(nums, n)
	}
	for n := range s.PRs {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	var list []map[string]any
	for _, n := range slices.Backward(nums) {
		var item map[string]any
		if is, ok := s.Issues[n]; ok {
			item = s.issueJSON(n, is)
		} else {
			item = s.prIssueJSON(n, s.PRs[n])
		}
		if (state != "all" && item["state"] != state) || (creator != "" && item["user"].(map[string]any)["login"] != creator) {
			continue
		}
		list = append(list, item)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, s.page(w, r, list))
}

func (s *Server) createIssue(w http.ResponseWriter, r *http.Request) {
	const doc = "rest/issues/issues#create-an-issue"
	var in struct{ Title, Body string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON", doc)
		return
	}
	if !s.mayWrite("issues") {
		notAccessible(w, doc)
		return
	}
	if strings.TrimSpace(in.Title) == "" {
		validationFailed(w, "Issue", "title", "missing_field", "", doc)
		return
	}
	if len(in.Body) > 65536 {
		validationFailed(w, "Issue", "body", "custom", "body is too long (maximum is 65536 characters)", doc)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nextNumberLocked()
	is := &Issue{Title: in.Title, Body: in.Body, User: BotLogin}
	s.Issues[n] = is
	s.changedLocked()
	writeJSON(w, http.StatusCreated, s.issueJSON(n, is))
}

func (s *Server) editIssue(w http.ResponseWriter, r *http.Request, n int) {
	const doc = "rest/issues/issues#update-an-issue"
	var in struct {
		Title, Body, State *string
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON", doc)
		return
	}
	if !s.mayWrite("issues") {
		notAccessible(w, doc)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	is, ok := s.Issues[n]
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", doc)
		return
	}
	if in.State != nil && *in.State != "open" && *in.State != "closed" {
		validationFailed(w, "Issue", "state", "invalid", "", doc)
		return
	}
	if in.Title != nil {
		is.Title = *in.Title
	}
	if in.Body != nil {
		is.Body = *in.Body
	}
	if in.State != nil {
		is.State = *in.State
	}
	s.changedLocked()
	writeJSON(w, http.StatusOK, s.issueJSON(n, is))
}

func (s *Server) pullJSON(n int, pr *PR) map[string]any {
	full := s.Owner + "/" + s.Repo
	var headRepo any = map[string]any{"full_name": cmp.Or(pr.HeadRepo, full)}
	if pr.HeadRepoDeleted {
		headRepo = nil
	}
	return map[string]any{
		"number": n, "state": cmp.Or(pr.State, "open"), "title": pr.Title, "body": pr.Body,
		"html_url": fmt.Sprintf("%s/%s/pull/%d", s.srv.URL, full, n),
		"head":     map[string]any{"sha": pr.HeadSHA, "ref": pr.HeadRef, "repo": headRepo},
		"base":     map[string]any{"ref": cmp.Or(pr.BaseRef, s.DefaultBranch), "repo": map[string]any{"full_name": full}},
	}
}

// listPulls lists pull requests by state (default open), head
// ("owner:branch") and base, newest first.
func (s *Server) listPulls(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := cmp.Or(q.Get("state"), "open")
	head, base := q.Get("head"), q.Get("base")
	s.mu.Lock()
	var nums []int
	for n := range s.PRs {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	var list []map[string]any
	for _, n := range slices.Backward(nums) {
		pr := s.PRs[n]
		if (state != "all" && cmp.Or(pr.State, "open") != state) || (head != "" && s.Owner+":"+pr.HeadRef != head) ||
			(base != "" && cmp.Or(pr.BaseRef, s.DefaultBranch) != base) {
			continue
		}
		list = append(list, s.pullJSON(n, pr))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, s.page(w, r, list))
}

// createPull opens a pull request of a branch of the repository onto
// another, with GitHub's checks: both branches exist, the head has
// commits the base lacks, and no open pull request has the same head and
// base.
func (s *Server) createPull(w http.ResponseWriter, r *http.Request) {
	const doc = "rest/pulls/pulls#create-a-pull-request"
	var in struct {
		Title, Head, Base, Body string
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON", doc)
		return
	}
	if !s.mayWrite("pull_requests") {
		notAccessible(w, doc)
		return
	}
	head := strings.TrimPrefix(in.Head, s.Owner+":")
	headSHA, baseSHA := s.Branch(head), s.Branch(in.Base)
	switch {
	case strings.TrimSpace(in.Title) == "":
		validationFailed(w, "PullRequest", "title", "missing_field", "", doc)
		return
	case headSHA == "":
		validationFailed(w, "PullRequest", "head", "invalid", "", doc)
		return
	case baseSHA == "":
		validationFailed(w, "PullRequest", "base", "invalid", "", doc)
		return
	}
	s.mu.Lock()
	bare := filepath.Join(s.gitRoot, s.Owner, s.Repo+".git")
	s.mu.Unlock()
	if _, err := s.git2(bare, "merge-base", "--is-ancestor", headSHA, baseSHA); err == nil {
		validationFailed(w, "PullRequest", "", "custom", fmt.Sprintf("No commits between %s and %s", in.Base, head), doc)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pr := range s.PRs {
		if cmp.Or(pr.State, "open") == "open" && pr.HeadRef == head && cmp.Or(pr.BaseRef, s.DefaultBranch) == in.Base {
			validationFailed(w, "PullRequest", "", "custom", fmt.Sprintf("A pull request already exists for %s:%s.", s.Owner, head), doc)
			return
		}
	}
	n := s.nextNumberLocked()
	pr := &PR{HeadSHA: headSHA, HeadRef: head, BaseRef: in.Base, Title: in.Title, Body: in.Body}
	s.PRs[n] = pr
	s.changedLocked()
	writeJSON(w, http.StatusCreated, s.pullJSON(n, pr))
}

// SignIn is the person login (GitHub id id) authorizing the App on
// GitHub's authorize page for redirect, whoever OAuth.SignIn names: it
// returns the code GitHub sends the browser back with, which the App
// exchanges once.
func (s *Server) SignIn(login string, id int64, redirect string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.codes == nil {
		s.codes, s.userTokens = map[string]oauthCode{}, map[string]oauthCode{}
	}
	s.nextID++
	code := fmt.Sprintf("code%d", s.nextID)
	s.codes[code] = oauthCode{login: login, id: id, redirect: redirect}
	return code
}

// userID is the numeric id the fake gives the account login when none was
// named: stable, and positive like GitHub's.
func userID(login string) int64 {
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(login)))
	return int64(h.Sum32()>>1) + 1
}

// oauth serves GitHub's web side of the user OAuth flow: the authorize
// page (which, as if OAuth.SignIn had signed in and approved, sends the
// browser back with a code) and the exchange of the code for a token.
func (s *Server) oauth(w http.ResponseWriter, r *http.Request, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.codes == nil {
		s.codes, s.userTokens = map[string]oauthCode{}, map[string]oauthCode{}
	}
	switch {
	case what == "authorize" && r.Method == http.MethodGet:
		q := r.URL.Query()
		if q.Get("client_id") != s.OAuth.ClientID || s.OAuth.ClientID == "" {
			http.Error(w, "The client_id is not that of an App", http.StatusNotFound)
			return
		}
		if s.OAuth.SignIn == "" {
			http.Error(w, "The user did not authorize the App", http.StatusForbidden)
			return
		}
		redirect, err := url.Parse(q.Get("redirect_uri"))
		if err != nil || redirect.Host == "" {
			http.Error(w, "The redirect_uri is missing or not absolute", http.StatusBadRequest)
			return
		}
		s.nextID++
		code := fmt.Sprintf("code%d", s.nextID)
		s.codes[code] = oauthCode{login: s.OAuth.SignIn, id: userID(s.OAuth.SignIn), redirect: redirect.String()}
		back := redirect.Query()
		back.Set("code", code)
		back.Set("state", q.Get("state"))
		redirect.RawQuery = back.Encode()
		http.Redirect(w, r, redirect.String(), http.StatusFound)
	case what == "access_token" && r.Method == http.MethodPost:
		if err := r.ParseForm(); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "bad_request"})
			return
		}
		if r.Header.Get("Accept") != "application/json" {
			s.t.Errorf("fake GitHub: the token exchange asks for %q, not application/json", r.Header.Get("Accept"))
		}
		if r.PostForm.Get("client_id") != s.OAuth.ClientID || r.PostForm.Get("client_secret") != s.OAuth.ClientSecret {
			// GitHub answers 200 with the error.
			writeJSON(w, http.StatusOK, map[string]any{"error": "incorrect_client_credentials", "error_description": "The client_id and/or client_secret passed are incorrect."})
			return
		}
		c, ok := s.codes[r.PostForm.Get("code")]
		if !ok || c.redirect != r.PostForm.Get("redirect_uri") {
			writeJSON(w, http.StatusOK, map[string]any{"error": "bad_verification_code", "error_description": "The code passed is incorrect or expired."})
			return
		}
		delete(s.codes, r.PostForm.Get("code"))
		s.nextID++
		token := fmt.Sprintf("%s%036d", UserTokenPrefix, s.nextID)
		s.userTokens[token] = c
		writeJSON(w, http.StatusOK, map[string]any{"access_token": token, "token_type": "bearer", "scope": "", "expires_in": 28800})
	default:
		s.unserved(w, r)
	}
}

// asUser serves the API calls made with a user access token: who the user
// is, and their memberships.
func (s *Server) asUser(w http.ResponseWriter, r *http.Request, token string) {
	s.mu.Lock()
	who, ok := s.userTokens[token]
	login := who.login
	orgs, teams := s.OAuth.Orgs, s.OAuth.Teams
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusUnauthorized, "Bad credentials", "rest")
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	member := func(list []string) bool { return slices.Contains(list, login) }
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/user":
		writeJSON(w, http.StatusOK, map[string]any{"login": login, "id": who.id, "type": "User"})
	case r.Method == http.MethodGet && len(parts) == 4 && parts[0] == "user" && parts[1] == "memberships" && parts[2] == "orgs":
		if !member(orgs[parts[3]]) {
			writeError(w, http.StatusNotFound, "Not Found", "rest/orgs/members#get-an-organization-membership-for-the-authenticated-user")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"state": "active", "role": "member", "organization": map[string]any{"login": parts[3]}})
	case r.Method == http.MethodGet && len(parts) == 6 && parts[0] == "orgs" && parts[2] == "teams" && parts[4] == "memberships":
		if !slices.Contains(teams[parts[1]+"/"+parts[3]], parts[5]) {
			writeError(w, http.StatusNotFound, "Not Found", "rest/teams/members#get-team-membership-for-a-user")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"state": "active", "role": "member"})
	default:
		s.unserved(w, r)
	}
}
