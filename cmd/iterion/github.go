package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/bot/delivery"
	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/engine"
)

// githubConfig is the GitHub App's settings, from the environment and
// the config file.
type githubConfig struct {
	appID   int64
	key     []byte
	secret  []byte
	apiURL  string // REST base
	gitURL  string // where repositories are cloned from
	workers int
	// keepWorkspaces is how long a resumable stopped run keeps its checkout.
	keepWorkspaces time.Duration
	// redact scrubs the server's secrets from whatever the App writes on
	// GitHub; serve sets it.
	redact *engine.Redactor
	// slack says the server has Slack, where a repository's runs are shown
	// too when its .iterion.yml names a channel; serve sets it.
	slack bool
	// revoked is told of a revoked authorization of the App (the account
	// links go); serve sets it.
	revoked func(ctx context.Context, githubID int64) error
	// pageURL is the admin page's public address, which the App's posts
	// link; serve sets it.
	pageURL string
}

// githubSettings completes the App's settings from the config file (f,
// read from file; "" when there is none) with the environment, whose
// variables win, and which alone holds the secrets. ok is false when no
// App is configured (no App id). Each missing or malformed setting is
// named.
func (a *App) githubSettings(f githubFile, file string) (cfg githubConfig, ok bool, err error) {
	idFrom := "ITERION_GITHUB_APP_ID"
	if id := a.getenv("ITERION_GITHUB_APP_ID"); id != "" {
		if cfg.appID, err = strconv.ParseInt(id, 10, 64); err != nil || cfg.appID <= 0 {
			return cfg, false, fmt.Errorf("ITERION_GITHUB_APP_ID=%q: set it to the App's numeric id (the App's settings page, \"App ID\")", id)
		}
	} else {
		cfg.appID, idFrom = f.AppID, "github.app_id in "+file
	}
	if cfg.appID == 0 {
		return cfg, false, nil
	}
	cfg.secret = []byte(a.getenv("ITERION_GITHUB_WEBHOOK_SECRET"))
	if len(cfg.secret) == 0 {
		return cfg, false, fmt.Errorf("a GitHub App is configured (%s) but ITERION_GITHUB_WEBHOOK_SECRET is not set: set it to the App's webhook secret", idFrom)
	}
	key := a.getenv("ITERION_GITHUB_PRIVATE_KEY")
	switch {
	case strings.HasPrefix(strings.TrimSpace(key), "-----BEGIN"):
		cfg.key = []byte(key)
	case key != "":
		if cfg.key, err = os.ReadFile(a.path(key)); err != nil {
			return cfg, false, fmt.Errorf("ITERION_GITHUB_PRIVATE_KEY names a file that cannot be read: %w", err)
		}
	case f.PrivateKeyFile != "":
		if cfg.key, err = os.ReadFile(a.path(f.PrivateKeyFile)); err != nil {
			return cfg, false, fmt.Errorf("github.private_key_file in %s names a file that cannot be read: %w", file, err)
		}
	default:
		return cfg, false, errors.New("a GitHub App is configured but ITERION_GITHUB_PRIVATE_KEY is not set: set it to the App's private key (PEM text, or the path of the .pem file), or write the file's path as github.private_key_file in the config file")
	}
	cfg.apiURL = cmp.Or(a.getenv("ITERION_GITHUB_API_URL"), f.APIURL)
	cfg.gitURL = strings.TrimRight(cmp.Or(a.getenv("ITERION_GITHUB_URL"), f.GitURL, ghbot.DefaultGitURL), "/")
	cfg.workers = cmp.Or(f.Workers, ghbot.DefaultWorkers)
	cfg.keepWorkspaces = cmp.Or(f.KeepWorkspaces, ghbot.DefaultKeepWorkspaces)
	return cfg, true, nil
}

// newGitHubService wires the GitHub App's part of serve over the store of
// o: made before the engine, whose events wake its relay; served by Run
// once the engine exists.
func (a *App) newGitHubService(ctx context.Context, cfg githubConfig, o *owner, bodies *delivery.Bodies, sched ghbot.Schedulers, log *slog.Logger) (*ghbot.Service, error) {
	return ghbot.NewService(ctx, o.db, ghbot.ServiceOptions{
		Schedules: sched, PublicURL: cmp.Or(cfg.pageURL, a.getenv("ITERION_PUBLIC_URL")),
		AppID: cfg.appID, PrivateKey: cfg.key, WebhookSecret: cfg.secret, APIURL: cfg.apiURL, GitURL: cfg.gitURL,
		Workers: cfg.workers, KeepWorkspaces: cfg.keepWorkspaces, WritePace: a.WritePace,
		Workspaces:      workspacesDir(o),
		RemoveWorkspace: func(id string) error { return removeRunWorkspace(o.dir, id) },
		Redactor:        cfg.redact, Log: log, Failpoint: a.failpoint(), Bodies: bodies, Slack: cfg.slack, Revoked: cfg.revoked, PageURL: cfg.pageURL,
		DSL: a.dslOptions(),
	})
}
