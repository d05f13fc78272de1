package main

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/iterion-bot/iterion/bot/api"
	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/bot/page"
	"github.com/iterion-bot/iterion/engine"
)

// The admin page's secrets, kept in the store directory when the
// environment gives none: the admin token (its path is printed at start,
// never the token) and the key signing the session cookies, so that
// sessions outlive a restart.
const (
	adminTokenFile = "admin-token"
	sessionKeyFile = "page-session.key"
	// minAdminToken is the shortest admin token taken from the
	// environment.
	minAdminToken = 16
)

// pageSecrets are the admin page's secrets and where the token is.
type pageSecrets struct {
	token, tokenFile string
	sessionKey       []byte
}

// pageSecrets reads the admin token ($ITERION_ADMIN_TOKEN, else the file
// in the store directory dir, made at the first start) and the session key
// (the file beside it, likewise).
func (a *App) pageSecrets(dir string) (pageSecrets, error) {
	var ps pageSecrets
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ps, fmt.Errorf("creating store directory %s: %w", dir, err)
	}
	if t := strings.TrimSpace(a.getenv("ITERION_ADMIN_TOKEN")); t != "" {
		if len(t) < minAdminToken {
			return ps, fmt.Errorf("ITERION_ADMIN_TOKEN is %d characters: set it to at least %d (say, the output of openssl rand -hex 32), or unset it and use the token serve writes in %s", len(t), minAdminToken, filepath.Join(dir, adminTokenFile))
		}
		ps.token = t
	} else {
		ps.tokenFile = filepath.Join(dir, adminTokenFile)
		b, err := secretFile(ps.tokenFile, func() []byte { return []byte(newSecret(32) + "\n") })
		if err != nil {
			return ps, err
		}
		ps.token = strings.TrimSpace(string(b))
		if len(ps.token) < minAdminToken {
			return ps, fmt.Errorf("the admin token in %s is shorter than %d characters: remove the file, and serve writes a new one", ps.tokenFile, minAdminToken)
		}
	}
	key, err := secretFile(filepath.Join(dir, sessionKeyFile), func() []byte { return []byte(newSecret(32)) })
	if err != nil {
		return ps, err
	}
	ps.sessionKey = key
	return ps, nil
}

// secretFile reads the secret in file path, writing make's first (0600)
// when there is none. A file others may read is refused: its secret may
// have leaked.
func secretFile(path string, make func() []byte) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, werr := f.Write(make())
		if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("creating %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s may be read by others (mode %v): run chmod 600 %s, or remove it for serve to write a new secret", path, st.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%s is empty: remove it, and serve writes a new one", path)
	}
	return b, nil
}

func newSecret(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand does not fail
	return hex.EncodeToString(b)
}

// runPlace is where a run belongs, for the page and the API: a GitHub
// run's repository and pull request.
func runPlace(run *engine.Run) api.Place {
	if o, ok := ghbot.OriginOf(run); ok {
		return api.Place{Channel: "github", Repo: o.Repo, PR: o.PR}
	}
	return api.Place{Channel: run.Trigger.Source}
}

// githubClientID is the App's OAuth client id: $ITERION_GITHUB_CLIENT_ID,
// else the file's github.client_id; "" when neither.
func (a *App) githubClientID(cfg serveConfig) string {
	return cmp.Or(strings.TrimSpace(a.getenv("ITERION_GITHUB_CLIENT_ID")), cfg.GitHub.ClientID)
}

// publicURL is the page's public address: $ITERION_PUBLIC_URL, else the
// file's page.public_url; "" when neither.
func (a *App) publicURL(cfg serveConfig) (string, error) {
	u := strings.TrimRight(cmp.Or(strings.TrimSpace(a.getenv("ITERION_PUBLIC_URL")), cfg.Page.PublicURL), "/")
	if u == "" {
		return "", nil
	}
	if msg := checkURL("ITERION_PUBLIC_URL", u, "https://iterion.example.com"); msg != "" {
		return "", errors.New(msg + " (the page's address as people reach it)")
	}
	return u, nil
}

// newPage wires the admin page over o's store and engine: GitHub's
// permissions, links and sign-in when the App and its OAuth client are
// set.
func (a *App) newPage(cfg serveConfig, gh githubConfig, svc *ghbot.Service, o *owner, ps pageSecrets, public string, log *slog.Logger) (*page.Server, error) {
	opts := page.Options{
		Store: o.db, Doors: o.engine, Place: runPlace,
		AdminToken: ps.token, SessionKey: ps.sessionKey, PublicURL: public, SessionTTL: cfg.Page.SessionTTL, Logger: log,
		Links: map[string]page.Linker{
			"github": func(runPosts map[string]string, ext string) page.Link {
				return page.Link{Label: "PR comment", URL: ghbot.PostURL(runPosts, ext)}
			},
		},
		RunLinks: map[string]func(map[string]string) page.Link{
			"github": func(runPosts map[string]string) page.Link { return page.Link{URL: ghbot.StatusURL(runPosts)} },
		},
		Permissions: map[string]page.Permissions{},
	}
	if svc != nil {
		opts.Permissions["github"] = svc.PagePermissions()
	}
	id := a.githubClientID(cfg)
	secret := a.getenv("ITERION_GITHUB_CLIENT_SECRET")
	switch {
	case id != "" && secret == "":
		return nil, errors.New("ITERION_GITHUB_CLIENT_ID is set but ITERION_GITHUB_CLIENT_SECRET is not: set it to the App's client secret (the App's settings page, \"Client secrets\"), or unset the id to sign in with the admin token only")
	case id == "" && secret != "":
		return nil, errors.New("ITERION_GITHUB_CLIENT_SECRET is set but the client id is not: set ITERION_GITHUB_CLIENT_ID (or github.client_id) to the App's client id")
	case id != "":
		opts.SignIn = ghbot.NewUserAuth(ghbot.UserAuthOptions{ClientID: id, ClientSecret: secret,
			WebURL: cmp.Or(gh.gitURL, strings.TrimRight(cmp.Or(a.getenv("ITERION_GITHUB_URL"), cfg.GitHub.GitURL), "/")),
			APIURL: cmp.Or(gh.apiURL, a.getenv("ITERION_GITHUB_API_URL"), cfg.GitHub.APIURL),
			Orgs:   cfg.Page.AllowedOrgs, Teams: cfg.Page.AllowedTeams})
		opts.Refused = func(err error) bool {
			var refused *ghbot.SignInError
			return errors.As(err, &refused)
		}
	}
	return page.New(opts)
}
