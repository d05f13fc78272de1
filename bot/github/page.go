package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/iterion-bot/iterion/bot/repoconfig"
	"github.com/iterion-bot/iterion/engine"
)

// What the admin page asks of the GitHub channel: who may act on the App's
// runs (the same live checks as a PR comment's), links to the posts the
// App made, and the sign-in of people with their GitHub account (the App's
// user OAuth web flow).

// Acts a person may do on the admin page, as PagePermissions.May names
// them.
const (
	ActAnswer = "answer"
	ActCancel = "cancel"
	ActResume = "resume"
)

// permissionTTL is how long a permission read for showing a page is
// reused; an action always asks GitHub again.
const permissionTTL = time.Minute

// PagePermissions decides what a person signed in with their GitHub login
// may do with the App's runs, by the rules of the PR commands: answering
// needs write permission on the run's repository or a place under
// answerers in its .iterion.yml (read from the default branch);
// cancelling and resuming need write permission. Both are asked of GitHub
// live; for showing a page, an answer younger than a minute is reused.
type PagePermissions struct {
	perms  Permissions
	client func(installationID int64) (*gh.Client, error)
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]cachedPermission
}

type cachedPermission struct {
	write     bool
	answerers []string
	at        time.Time
}

// PagePermissions returns the App's PagePermissions.
func (s *Service) PagePermissions() *PagePermissions {
	return &PagePermissions{perms: s.app, client: s.app.Installation, now: s.now, cache: map[string]cachedPermission{}}
}

// May reports whether login may do act (ActAnswer, ActCancel, ActResume) on
// run, one of the App's, and when not, why, in words for that person.
// fresh asks GitHub now instead of reusing a recent answer: actions pass
// it, pages showing what one may do do not.
func (p *PagePermissions) May(ctx context.Context, run *engine.Run, login, act string, fresh bool) (bool, string, error) {
	o, ok := OriginOf(run)
	if !ok || o.Repo == "" {
		return false, "this run was not started from a GitHub repository", nil
	}
	c, err := p.read(ctx, o, login, act == ActAnswer, fresh)
	if err != nil {
		return false, "", err
	}
	switch {
	case c.write:
		return true, "", nil
	case act == ActAnswer && slices.Contains(c.answerers, login):
		return true, "", nil
	case act == ActAnswer:
		return false, fmt.Sprintf("you have no write permission on %s and are not under answerers in its %s", o.Repo, repoconfig.FileName), nil
	}
	verb := map[string]string{ActCancel: "cancelling", ActResume: "resuming"}[act]
	if verb == "" {
		verb = act
	}
	return false, fmt.Sprintf("%s a run needs write permission on %s, which you do not have", verb, o.Repo), nil
}

// Who says who may answer the questions of run, one of the App's.
func (p *PagePermissions) Who(ctx context.Context, run *engine.Run) (string, error) {
	o, ok := OriginOf(run)
	if !ok || o.Repo == "" {
		return "nobody on GitHub", nil
	}
	c, err := p.read(ctx, o, "", true, false)
	if err != nil {
		return "", err
	}
	who := "people with write permission on " + o.Repo
	if len(c.answerers) > 0 {
		who += ", and " + strings.Join(c.answerers, ", ") + " (answerers)"
	}
	return who, nil
}

// read asks GitHub (or the cache, unless fresh) for login's permission on
// o's repository and, when answerers, the repository's answerers. An
// empty login reads the answerers alone.
func (p *PagePermissions) read(ctx context.Context, o Origin, login string, answerers, fresh bool) (cachedPermission, error) {
	key := strings.ToLower(o.Repo) + "\x00" + login + "\x00" + strconv.FormatBool(answerers)
	now := p.now()
	p.mu.Lock()
	c, ok := p.cache[key]
	p.mu.Unlock()
	if ok && !fresh && now.Sub(c.at) < permissionTTL {
		return c, nil
	}
	owner, repo := o.split()
	c = cachedPermission{at: now}
	if login != "" {
		write, err := p.perms.CanWrite(ctx, o.Installation, owner, repo, login)
		if err != nil {
			return c, err
		}
		c.write = write
	}
	if answerers && !c.write {
		client, err := p.client(o.Installation)
		if err != nil {
			return c, err
		}
		cfg, _, err := FetchConfig(ctx, client, owner, repo, "")
		var cfgErrs repoconfig.Errors
		switch {
		case errors.As(err, &cfgErrs):
			// A config with mistakes names no answerer: write permission
			// alone answers, as on the PR.
		case err != nil:
			return c, err
		default:
			c.answerers = cfg.Answerers
		}
	}
	p.mu.Lock()
	if len(p.cache) > 10000 {
		clear(p.cache) // only a cache
	}
	p.cache[key] = c
	p.mu.Unlock()
	return c, nil
}

// PostURL links the App's post extID of a question of run (a PR comment
// id) on GitHub, given the run's posts (store RunPosts); "" when the run's
// status comment, whose address it is built from, is not posted yet.
func PostURL(runPosts map[string]string, extID string) string {
	base, _, _ := strings.Cut(runPosts[postStatusURL], "#")
	if base == "" || extID == "" {
		return ""
	}
	return base + "#issuecomment-" + extID
}

// StatusURL is the address of run's status comment on its PR, "" before
// it is posted.
func StatusURL(runPosts map[string]string) string { return runPosts[postStatusURL] }

// UserAuthOptions configure a UserAuth.
type UserAuthOptions struct {
	// ClientID and ClientSecret are the App's OAuth credentials
	// (ITERION_GITHUB_CLIENT_ID, ITERION_GITHUB_CLIENT_SECRET).
	ClientID, ClientSecret string
	// WebURL is GitHub's web address, where people authorize the App
	// ("" means https://github.com); APIURL the REST base ("" means
	// github.com's).
	WebURL, APIURL string
	// Orgs and Teams are who may sign in: members of one of the
	// organizations, or of one of the teams ("org/team-slug"). Both empty
	// means any GitHub user (the page still checks each action on the
	// repository).
	Orgs, Teams []string
	// HTTP carries the requests; nil means http.DefaultClient.
	HTTP *http.Client
}

// UserAuth is the App's user OAuth web flow: people are sent to GitHub to
// authorize the App, come back with a code, which is exchanged for a user
// access token; the token is used once, to read who they are and whether
// they are in an allowed organization or team (Members: read), and then
// dropped.
type UserAuth struct {
	opts UserAuthOptions
	http *http.Client
}

// NewUserAuth returns the flow o describes.
func NewUserAuth(o UserAuthOptions) *UserAuth {
	if o.WebURL == "" {
		o.WebURL = DefaultGitURL
	}
	o.WebURL = strings.TrimRight(o.WebURL, "/")
	if o.APIURL == "" {
		o.APIURL = "https://api.github.com/"
	}
	if !strings.HasSuffix(o.APIURL, "/") {
		o.APIURL += "/"
	}
	c := o.HTTP
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second}
	}
	return &UserAuth{opts: o, http: c}
}

// AuthorizeURL is where to send a person to sign in: GitHub's authorize
// page, which sends them back to redirect with a code and state.
func (u *UserAuth) AuthorizeURL(state, redirect string) string {
	q := url.Values{"client_id": {u.opts.ClientID}, "redirect_uri": {redirect}, "state": {state}, "allow_signup": {"false"}}
	return u.opts.WebURL + "/login/oauth/authorize?" + q.Encode()
}

// SignInError is a sign-in refused for a reason the person can act on:
// the message is for them.
type SignInError struct{ Reason string }

func (e *SignInError) Error() string { return e.Reason }

// SignIn exchanges the code GitHub sent back to redirect for a user access
// token, and returns the login of its user when they may sign in; a
// *SignInError says why not.
func (u *UserAuth) SignIn(ctx context.Context, code, redirect string) (string, error) {
	_, login, c, err := u.identify(ctx, code, redirect)
	if err != nil {
		return "", err
	}
	if len(u.opts.Orgs) == 0 && len(u.opts.Teams) == 0 {
		return login, nil
	}
	for _, org := range u.opts.Orgs {
		m, resp, err := c.Organizations.GetOrgMembership(ctx, "", org)
		if err == nil && m.GetState() == "active" {
			return login, nil
		}
		if err != nil && (resp == nil || resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusForbidden) {
			return "", classify("reading "+login+"'s membership of "+org, resp, err)
		}
	}
	for _, team := range u.opts.Teams {
		org, slug, _ := strings.Cut(team, "/")
		m, resp, err := c.Teams.GetTeamMembershipBySlug(ctx, org, slug, login)
		if err == nil && m.GetState() == "active" {
			return login, nil
		}
		if err != nil && (resp == nil || resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusForbidden) {
			return "", classify("reading "+login+"'s membership of team "+team, resp, err)
		}
	}
	var allowed []string
	allowed = append(allowed, u.opts.Orgs...)
	allowed = append(allowed, u.opts.Teams...)
	return "", &SignInError{Reason: fmt.Sprintf("%s is not an active member of %s, whose members alone may sign in here (a membership shown as private needs the App's Members: read permission)",
		login, strings.Join(allowed, " or "))}
}

// Identify exchanges the code GitHub sent back to redirect for a user
// access token, and returns the account it is: its numeric id, which a
// rename does not change, and its login. The token is used for that call
// alone and kept nowhere. No organization or team is asked of the
// account (Slack's account links use it: what a linked person may do is
// checked at each answer).
func (u *UserAuth) Identify(ctx context.Context, code, redirect string) (int64, string, error) {
	id, login, _, err := u.identify(ctx, code, redirect)
	return id, login, err
}

// identify is Identify, with the client holding the user token.
func (u *UserAuth) identify(ctx context.Context, code, redirect string) (int64, string, *gh.Client, error) {
	token, err := u.exchange(ctx, code, redirect)
	if err != nil {
		return 0, "", nil, err
	}
	c := gh.NewClient(u.http).WithAuthToken(token)
	c.BaseURL, _ = url.Parse(u.opts.APIURL)
	user, resp, err := c.Users.Get(ctx, "")
	if err != nil {
		return 0, "", nil, classify("reading the signed-in user", resp, err)
	}
	if user.GetLogin() == "" || user.GetID() == 0 {
		return 0, "", nil, errors.New("GitHub named no login or id for the signed-in user")
	}
	return user.GetID(), user.GetLogin(), c, nil
}

// exchange trades the code for a user access token at
// /login/oauth/access_token.
func (u *UserAuth) exchange(ctx context.Context, code, redirect string) (string, error) {
	form := url.Values{"client_id": {u.opts.ClientID}, "client_secret": {u.opts.ClientSecret}, "code": {code}, "redirect_uri": {redirect}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.opts.WebURL+"/login/oauth/access_token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := u.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("exchanging the sign-in code: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return "", fmt.Errorf("exchanging the sign-in code: GitHub answered %s, not JSON: %w", resp.Status, err)
	}
	switch {
	case out.Error == "bad_verification_code":
		return "", &SignInError{Reason: "GitHub refused the sign-in code (it expired, or was used already): sign in again"}
	case out.Error != "":
		// The description is GitHub's; the secret is never in it.
		return "", fmt.Errorf("exchanging the sign-in code: %s: %s", out.Error, out.Description)
	case resp.StatusCode != http.StatusOK || out.AccessToken == "":
		return "", fmt.Errorf("exchanging the sign-in code: GitHub answered %s without a token", resp.Status)
	}
	return out.AccessToken, nil
}
