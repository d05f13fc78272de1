package github

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v62/github"
)

// App is iterion's GitHub App: it authenticates as the App, then as each
// installation with an installation token that ghinstallation caches and
// renews. The token lives in memory only.
type App struct {
	id      int64
	key     []byte
	baseURL string
	rt      http.RoundTripper

	installations *Installations

	mu         sync.Mutex
	clients    map[int64]*gh.Client
	transports map[int64]*ghinstallation.Transport
}

// AppOptions configure an App. ID and PrivateKey are required.
type AppOptions struct {
	// ID is the App's id, PrivateKey its private key (PEM).
	ID         int64
	PrivateKey []byte
	// APIURL is the REST base used verbatim ("https://api.github.com/", or
	// a GitHub Enterprise "https://ghe.example.com/api/v3/"); "" means
	// github.com.
	APIURL string
	// Transport is the transport under the authentication (nil means the
	// default), under which the App reads GitHub's rate limits itself
	// (rateLimiter).
	Transport http.RoundTripper
	// Log receives what the App says of its installations; nil means none.
	Log *slog.Logger
}

// NewApp returns the App o describes; a private key that does not parse
// is an error naming the variable it comes from.
func NewApp(o AppOptions) (*App, error) {
	id, privateKeyPEM, baseURL, rt := o.ID, o.PrivateKey, o.APIURL, o.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	rt = newRateLimiter(rt)
	if baseURL == "" {
		baseURL = "https://api.github.com/"
	}
	if !strings.HasSuffix(baseURL, "/") {
		baseURL += "/"
	}
	if _, err := url.Parse(baseURL); err != nil {
		return nil, fmt.Errorf("GitHub API URL %q: %w", baseURL, err)
	}
	// Parse the key once now, so a bad key stops the server at start.
	if _, err := ghinstallation.NewAppsTransport(rt, id, privateKeyPEM); err != nil {
		return nil, fmt.Errorf("GitHub App private key (ITERION_GITHUB_PRIVATE_KEY): %w", err)
	}
	return &App{id: id, key: privateKeyPEM, baseURL: baseURL, rt: rt, installations: newInstallations(o.Log),
		clients: map[int64]*gh.Client{}, transports: map[int64]*ghinstallation.Transport{}}, nil
}

// Installations is the App's registry of the installations GitHub
// refuses tokens for.
func (a *App) Installations() *Installations { return a.installations }

// ID is the App's id, which owns its check runs.
func (a *App) ID() int64 { return a.id }

// forget drops an installation's client and cached token.
func (a *App) forget(installationID int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.clients, installationID)
	delete(a.transports, installationID)
}

// Installation returns the API client acting as an installation.
func (a *App) Installation(installationID int64) (*gh.Client, error) {
	c, _, err := a.installation(installationID)
	return c, err
}

// installation returns the installation's client and its transport,
// made on first use.
func (a *App) installation(installationID int64) (*gh.Client, *ghinstallation.Transport, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clients[installationID]; ok {
		return c, a.transports[installationID], nil
	}
	tr, err := ghinstallation.New(a.rt, a.id, installationID, a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("authenticating installation %d: %w", installationID, err)
	}
	tr.BaseURL = strings.TrimRight(a.baseURL, "/")
	c := gh.NewClient(&http.Client{Transport: &installTransport{app: a, id: installationID, tr: tr}})
	base, _ := url.Parse(a.baseURL)
	c.BaseURL = base
	a.clients[installationID] = c
	a.transports[installationID] = tr
	return c, tr, nil
}

// Token returns a current installation token, for git over HTTPS; it is
// the cached one until it nears expiry.
func (a *App) Token(ctx context.Context, installationID int64) (string, error) {
	if e := a.installations.Blocked(installationID); e != nil {
		return "", e
	}
	_, tr, err := a.installation(installationID)
	if err != nil {
		return "", err
	}
	tok, err := tr.Token(ctx)
	if e := installationError(installationID, err); e != nil {
		return "", a.installations.Block(e)
	}
	if err != nil {
		return "", classify(fmt.Sprintf("getting a token for installation %d", installationID), nil, err)
	}
	return tok, nil
}

// CanWrite reports whether user has write (or maintain, or admin)
// permission on owner/repo, asked live of the API: never trusted from a
// webhook's author_association.
func (a *App) CanWrite(ctx context.Context, installationID int64, owner, repo, user string) (bool, error) {
	c, err := a.Installation(installationID)
	if err != nil {
		return false, err
	}
	perm, resp, err := c.Repositories.GetPermissionLevel(ctx, owner, repo, user)
	if resp != nil && resp.StatusCode == http.StatusNotFound && err != nil {
		// GitHub answers 404 for a login that is no user (a deleted
		// account, a ghost): no permission, not an outage.
		return false, nil
	}
	if err != nil {
		// Rate limits and outages retry the delivery instead of failing it.
		return false, classify(fmt.Sprintf("checking %s's permission on %s/%s", user, owner, repo), resp, err)
	}
	switch perm.GetPermission() {
	case "admin", "maintain", "write":
		return true, nil
	}
	return false, nil
}

// Login returns the login the App comments under ("<slug>[bot]"), asked
// of the API as the App.
func (a *App) Login(ctx context.Context) (string, error) {
	tr, err := ghinstallation.NewAppsTransport(a.rt, a.id, a.key)
	if err != nil {
		return "", err
	}
	tr.BaseURL = strings.TrimRight(a.baseURL, "/")
	c := gh.NewClient(&http.Client{Transport: tr})
	c.BaseURL, _ = url.Parse(a.baseURL)
	app, resp, err := c.Apps.Get(ctx, "")
	if err != nil {
		return "", classify("reading the App's own record", resp, err)
	}
	if app.GetSlug() == "" {
		return "", fmt.Errorf("GitHub returned no slug for App %d", a.id)
	}
	return app.GetSlug() + "[bot]", nil
}
