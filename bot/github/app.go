package github

import (
	"context"
	"fmt"
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

	mu         sync.Mutex
	clients    map[int64]*gh.Client
	transports map[int64]*ghinstallation.Transport
}

// NewApp returns the App with id and private key (PEM). baseURL is the REST
// base used verbatim ("https://api.github.com/", or a GitHub Enterprise
// "https://ghe.example.com/api/v3/"); "" means github.com. rt is the
// transport under the authentication (nil means the default).
func NewApp(id int64, privateKeyPEM []byte, baseURL string, rt http.RoundTripper) (*App, error) {
	if rt == nil {
		rt = http.DefaultTransport
	}
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
	return &App{id: id, key: privateKeyPEM, baseURL: baseURL, rt: rt, clients: map[int64]*gh.Client{}, transports: map[int64]*ghinstallation.Transport{}}, nil
}

// Installation returns the API client acting as an installation.
func (a *App) Installation(installationID int64) (*gh.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clients[installationID]; ok {
		return c, nil
	}
	tr, err := ghinstallation.New(a.rt, a.id, installationID, a.key)
	if err != nil {
		return nil, fmt.Errorf("authenticating installation %d: %w", installationID, err)
	}
	tr.BaseURL = strings.TrimRight(a.baseURL, "/")
	c := gh.NewClient(&http.Client{Transport: tr})
	base, _ := url.Parse(a.baseURL)
	c.BaseURL = base
	a.clients[installationID] = c
	a.transports[installationID] = tr
	return c, nil
}

// Token returns a current installation token, for git over HTTPS; it is
// the cached one until it nears expiry.
func (a *App) Token(ctx context.Context, installationID int64) (string, error) {
	if _, err := a.Installation(installationID); err != nil {
		return "", err
	}
	a.mu.Lock()
	tr := a.transports[installationID]
	a.mu.Unlock()
	tok, err := tr.Token(ctx)
	if err != nil {
		return "", fmt.Errorf("getting a token for installation %d: %w", installationID, err)
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
