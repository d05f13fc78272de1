package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/dsl"
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
}

// githubSettings completes the App's settings from the config file (f,
// read from file; "" when there is none) with the environment, whose
// variables win, and which alone holds the secrets. ok is false when no
// App is configured (no App id). Each missing or malformed setting is
// named.
func githubSettings(f githubFile, file string) (cfg githubConfig, ok bool, err error) {
	idFrom := "ITERION_GITHUB_APP_ID"
	if id := os.Getenv("ITERION_GITHUB_APP_ID"); id != "" {
		if cfg.appID, err = strconv.ParseInt(id, 10, 64); err != nil || cfg.appID <= 0 {
			return cfg, false, fmt.Errorf("ITERION_GITHUB_APP_ID=%q: set it to the App's numeric id (the App's settings page, \"App ID\")", id)
		}
	} else {
		cfg.appID, idFrom = f.AppID, "github.app_id in "+file
	}
	if cfg.appID == 0 {
		return cfg, false, nil
	}
	cfg.secret = []byte(os.Getenv("ITERION_GITHUB_WEBHOOK_SECRET"))
	if len(cfg.secret) == 0 {
		return cfg, false, fmt.Errorf("a GitHub App is configured (%s) but ITERION_GITHUB_WEBHOOK_SECRET is not set: set it to the App's webhook secret", idFrom)
	}
	key := os.Getenv("ITERION_GITHUB_PRIVATE_KEY")
	switch {
	case strings.HasPrefix(strings.TrimSpace(key), "-----BEGIN"):
		cfg.key = []byte(key)
	case key != "":
		if cfg.key, err = os.ReadFile(key); err != nil {
			return cfg, false, fmt.Errorf("ITERION_GITHUB_PRIVATE_KEY names a file that cannot be read: %w", err)
		}
	case f.PrivateKeyFile != "":
		if cfg.key, err = os.ReadFile(f.PrivateKeyFile); err != nil {
			return cfg, false, fmt.Errorf("github.private_key_file in %s names a file that cannot be read: %w", file, err)
		}
	default:
		return cfg, false, errors.New("a GitHub App is configured but ITERION_GITHUB_PRIVATE_KEY is not set: set it to the App's private key (PEM text, or the path of the .pem file), or write the file's path as github.private_key_file in the config file")
	}
	cfg.apiURL = cmp.Or(os.Getenv("ITERION_GITHUB_API_URL"), f.APIURL)
	cfg.gitURL = strings.TrimRight(cmp.Or(os.Getenv("ITERION_GITHUB_URL"), f.GitURL, "https://github.com"), "/")
	cfg.workers = cmp.Or(f.Workers, 4)
	cfg.keepWorkspaces = cmp.Or(f.KeepWorkspaces, 7*24*time.Hour)
	return cfg, true, nil
}

// githubActions are the Handler's actions: the engine's doors.
type githubActions struct {
	o      *owner
	launch *ghbot.Launcher
}

func (a githubActions) Answer(ctx context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error) {
	return a.o.engine.Answer(ctx, req)
}

func (a githubActions) Cancel(ctx context.Context, runID, reason string) (bool, error) {
	return a.o.engine.Stop(ctx, runID, reason)
}

func (a githubActions) Launch(ctx context.Context, l ghbot.Launch) (string, error) {
	return a.launch.Launch(ctx, l)
}

// githubApp is the GitHub App's part of serve: made before the engine
// (whose events wake the relay), served once the engine exists.
type githubApp struct {
	cfg     githubConfig
	app     *ghbot.App
	replies *ghbot.Commenter
	relay   *ghbot.Relay
	log     *slog.Logger
}

// newGitHubApp reads the App's identity and makes the relay that writes
// the runs' progress to GitHub; nothing runs until serve.
func newGitHubApp(ctx context.Context, cfg githubConfig, o *owner, log *slog.Logger) (*githubApp, error) {
	app, err := ghbot.NewApp(cfg.appID, cfg.key, cfg.apiURL, nil)
	if err != nil {
		return nil, err
	}
	app.Installations().Log = log
	replies := commenter(ctx, app, log)
	replies.Redactor = cfg.redact
	rl := ghbot.NewRelay(o.db, replies, log)
	rl.Failpoint = failpoint()
	return &githubApp{cfg: cfg, app: app, replies: replies, relay: rl, log: log}, nil
}

// onEvent is the engine's event hook for the App: events that come with
// outbox rows (a start, a question, an answer, a pause, an end) wake the
// relay, and progress (steps starting and finishing) is shown at the pace
// the relay allows.
func (g *githubApp) onEvent(ev engine.Event) {
	switch ev.Type {
	case engine.EventRunStarted, engine.EventRunFinished, engine.EventRunFailed, engine.EventRunCancelled, engine.EventRunPaused,
		engine.EventInteractionAnswered, engine.EventHumanInputRequested:
		g.relay.Wake()
	case engine.EventNodeStarted, engine.EventNodeFinished, engine.EventRunResumed:
		g.relay.Touch(ev.RunID)
	}
}

// serve mounts the App's webhook endpoint and starts the worker that acts
// on the deliveries and the relay; both stop with ctx, and done is closed
// then.
func (g *githubApp) serve(ctx context.Context, o *owner, mux *http.ServeMux) (done <-chan struct{}) {
	cfg, app, log := g.cfg, g.app, g.log
	launcher := &ghbot.Launcher{
		Fetch: func(ctx context.Context, inst int64, owner, repo, path, ref string) ([]byte, error) {
			c, err := app.Installation(inst)
			if err != nil {
				return nil, err
			}
			return ghbot.FetchFile(ctx, c, owner, repo, path, ref, dsl.MaxFileSize)
		},
		Token:      app.Token,
		CloneURL:   func(owner, repo string) string { return cfg.gitURL + "/" + owner + "/" + repo + ".git" },
		Workspaces: workspacesDir(o),
		Exists: func(ctx context.Context, id string) (bool, error) {
			_, err := o.db.Run(ctx, id)
			if errors.Is(err, engine.ErrNotFound) {
				return false, nil
			}
			return err == nil, err
		},
		Check: o.engine.Preflight,
		Start: o.engine.Launch,
	}
	h := &ghbot.Handler{
		Client:  app.Installation,
		Perms:   app,
		Runs:    o.db,
		Actions: githubActions{o: o, launch: launcher},
		Replies: g.replies,
		Queue:   o.db,
		Log:     log,

		Installations: app.Installations(),
	}
	w := ghbot.NewWorker(o.db, cfg.workers, log, h.Handle)
	// An installation back (an installation event) takes up its held
	// deliveries and comments; so does a start, since a previous process
	// may have held work for an installation that came back meanwhile.
	app.Installations().OnRelease(func(id int64) {
		if _, err := o.db.ReleaseDeliveries(ctx, ghbot.InstallationHold(id)); err != nil {
			log.Error("releasing the deliveries of an installation failed", "installation", id, "err", err)
		}
		w.Wake()
		if err := g.relay.Release(ctx, id); err != nil {
			log.Error("releasing the PR comments of an installation failed", "installation", id, "err", err)
		}
	})
	if n, err := o.db.ReleaseDeliveries(ctx, ""); err != nil {
		log.Error("releasing held deliveries failed", "err", err)
	} else if n > 0 {
		log.Info("deliveries held by the previous process are tried again", "deliveries", n)
	}
	w.GiveUp = h.GiveUp
	w.Failpoint = failpoint()
	mux.Handle("POST /webhooks/github", ghbot.NewIntake(strconv.FormatInt(cfg.appID, 10), cfg.secret, o.db, log, w.Wake))
	g.relay.OnEnded = func(ctx context.Context, run *engine.Run) error {
		removeWorkspace(o, run, log)
		return h.StartQueued(ctx, run)
	}
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	// The relay alone starts the jobs that start a PR's queued run (at a
	// run's end); they end with ctx, once it has stopped.
	wg.Go(func() { g.relay.Run(ctx); h.WaitJobs() })
	// Answers written on PRs while this server was down.
	wg.Go(func() { reconcile(ctx, h, log) })
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select { // before webhooks are taken in: see Worker.Started
	case <-w.Started():
	case <-ctx.Done():
	}
	return stopped
}

// writePace spaces the App's writes to one installation (GitHub asks for
// a second between content-creating requests); tests shorten it.
var writePace = time.Second

// commenter writes as the App. Knowing the App's login, it takes only the
// App's comments for its own; without it (GitHub unreachable at start),
// any bot's comment ending with the bot's marker.
func commenter(ctx context.Context, app *ghbot.App, log *slog.Logger) *ghbot.Commenter {
	c := ghbot.NewCommenter(app.Installation)
	c.Pace = writePace
	c.AppID = app.ID()
	login, err := app.Login(ctx)
	if err != nil {
		log.Warn("reading the App's login failed; the bot's comments are recognised by their markers alone", "err", err)
		return c
	}
	c.Login = login
	log.Info("GitHub App", "login", login)
	return c
}

// reconcile applies the answers written on pull requests while the server
// was down, trying again while GitHub asks for patience (a comment already
// applied is not applied twice).
func reconcile(ctx context.Context, h *ghbot.Handler, log *slog.Logger) {
	for attempt := 1; ; attempt++ {
		n, err := h.Reconcile(ctx)
		if n > 0 {
			log.Info("applied answers written on pull requests while the server was down", "comments", n)
		}
		var later *ghbot.RetryLater
		switch {
		case err == nil || ctx.Err() != nil:
			return
		case errors.As(err, &later) && attempt < 5:
			log.Warn("reading the answers written while the server was down is postponed", "retry_in", later.After, "err", err)
			t := time.NewTimer(later.After)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		default:
			log.Error("applying the answers written while the server was down failed", "err", err)
			return
		}
	}
}

// removeWorkspace deletes the workspace of a run that is over for good
// (finished, or failed without a way to resume), with its workflow files
// and its sandbox's HOME; a run that may still continue keeps them.
func removeWorkspace(o *owner, run *engine.Run, log *slog.Logger) {
	if run.Status != engine.StatusFinished && run.Status != engine.StatusFailed {
		return
	}
	dir := workDirOf(o, run)
	for _, p := range []string{dir, dir + ".bot", dir + ".home"} {
		if err := os.RemoveAll(p); err != nil {
			log.Warn("removing a finished run's workspace failed", "run", run.ID, "path", p, "err", err)
		}
	}
}

// removeEndedWorkspace deletes the workspace of a run of the API (or of
// iterion run, continued here) that just ended for good. A GitHub run's
// is deleted by the relay once its end is shown on the PR.
func removeEndedWorkspace(o *owner, runID string, log *slog.Logger) {
	run, err := o.db.Run(context.Background(), runID)
	if err != nil || run.Trigger.Source == "github" || filepath.Dir(run.WorkDir) != workspacesDir(o) {
		return // a run of iterion run keeps the directory it worked in
	}
	removeWorkspace(o, run, log)
}

// sweepWorkspaces deletes, at start and then hourly, the checkouts of
// GitHub runs that stopped resumably (cancelled, failed_resumable) and
// have not changed for keep: they are unlikely to be resumed, and each
// holds a copy of a repository. (Finished and failed runs lose theirs at
// once.)
func sweepWorkspaces(ctx context.Context, o *owner, keep, retention time.Duration, log *slog.Logger) {
	tick := time.NewTicker(time.Hour)
	defer tick.Stop()
	for {
		now := time.Now()
		sweepOnce(ctx, o, keep, now, log)
		retire(ctx, o, retention, now, log)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// retire removes the stopped runs unchanged for retention (0: none),
// with everything stored for them and their workspaces (pruneRuns).
func retire(ctx context.Context, o *owner, retention time.Duration, now time.Time, log *slog.Logger) {
	if retention <= 0 {
		return
	}
	gone, err := pruneRuns(ctx, o.db, o.dir, now.Add(-retention), log)
	switch {
	case err != nil && ctx.Err() == nil:
		log.Error("removing runs past the retention failed", "err", err)
	case len(gone) > 0:
		log.Info("removed runs past the retention", "runs", len(gone), "retention", retention)
	}
}

func sweepOnce(ctx context.Context, o *owner, keep time.Duration, now time.Time, log *slog.Logger) {
	runs, err := o.db.Runs(ctx, engine.RunFilter{})
	if err != nil {
		if ctx.Err() == nil {
			log.Error("listing runs for old workspaces failed", "err", err)
		}
		return
	}
	for _, r := range runs {
		if (r.Status != engine.StatusCancelled && r.Status != engine.StatusFailedResumable) || now.Sub(r.UpdatedAt) < keep {
			continue
		}
		dir := workDirOf(o, r)
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		if r.Trigger.Source != "github" && filepath.Dir(r.WorkDir) != workspacesDir(o) {
			continue // a run of iterion run works in its developer's directory
		}
		log.Info("removing the workspace of a run stopped long ago", "run", r.ID, "status", r.Status, "updated", r.UpdatedAt)
		for _, p := range []string{dir, dir + ".bot", dir + ".home"} {
			if err := os.RemoveAll(p); err != nil {
				log.Warn("removing an old workspace failed", "run", r.ID, "path", p, "err", err)
			}
		}
	}
}

// workspacesDir holds the workspaces of the server's runs, one per run id:
// a GitHub run's checkout, an empty directory for the others.
func workspacesDir(o *owner) string {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		dir = o.dir
	}
	return filepath.Join(dir, "workspaces")
}

// workDirOf is where a run works under serve: its own directory of
// workspaces/, never the server's own directory (which may hold its
// config, key or store).
func workDirOf(o *owner, r *engine.Run) string {
	return filepath.Join(workspacesDir(o), r.ID)
}

// prepareWorkDir returns the workspace of run id, creating it (empty)
// when missing.
func prepareWorkDir(o *owner, id string) (string, error) {
	dir := filepath.Join(workspacesDir(o), id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating the workspace of run %s: %w", id, err)
	}
	return dir, nil
}

// resumeDir is the workspace a run continues in under serve. A GitHub
// run's is its checkout, which is never made up again: one removed long
// ago fails the run, saying so. Any other run continues where it started
// (a run of iterion run, in its developer's directory), or, when it did
// not record where, in an empty directory of its own.
func resumeDir(o *owner, r *engine.Run) string {
	if r.Trigger.Source == "github" {
		return workDirOf(o, r)
	}
	if r.WorkDir != "" {
		return r.WorkDir
	}
	dir, err := prepareWorkDir(o, r.ID)
	if err != nil {
		return workDirOf(o, r) // the sandbox says what is missing
	}
	return dir
}
