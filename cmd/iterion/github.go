package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

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
	return cfg, true, nil
}

// githubActions are the Handler's actions on this server's engine.
type githubActions struct {
	o      *owner
	launch *ghbot.Launcher
	after  func(context.Context, *engine.AnswerResult) bool
}

func (a githubActions) Answer(ctx context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error) {
	res, err := a.o.engine.Answer(ctx, req)
	if err == nil {
		res.Resumed = a.after(ctx, res)
	}
	return res, err
}

func (a githubActions) Cancel(runID string) bool { return a.o.engine.Cancel(runID) }

func (a githubActions) Launch(ctx context.Context, l ghbot.Launch) (string, error) {
	return a.launch.Launch(ctx, l)
}

// serveGitHub mounts the App's webhook endpoint and starts the worker that
// acts on the deliveries; the worker stops with ctx.
// wakeRelay receives the relay's wake-up for the engine's event hook.
func serveGitHub(ctx context.Context, cfg githubConfig, o *owner, runs *runGroup, log *slog.Logger, mux *http.ServeMux,
	after func(context.Context, *engine.AnswerResult) bool, wakeRelay *atomic.Pointer[func()]) (done <-chan struct{}, err error) {
	app, err := ghbot.NewApp(cfg.appID, cfg.key, cfg.apiURL, nil)
	if err != nil {
		return nil, err
	}
	launcher := &ghbot.Launcher{
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
		Start: func(req engine.StartRequest) {
			runs.wg.Go(func() {
				if _, err := o.engine.Start(runs.ctx, req); err != nil {
					log.Error("starting a run failed", "run", req.RunID, "err", err)
				}
			})
		},
	}
	h := &ghbot.Handler{
		Client:  app.Installation,
		Perms:   app,
		Runs:    o.db,
		Actions: githubActions{o: o, launch: launcher, after: after},
		Replies: ghbot.NewCommenter(app.Installation),
		Log:     log,
	}
	w := ghbot.NewWorker(o.db, cfg.workers, log, h.Handle)
	mux.Handle("POST /webhooks/github", ghbot.NewIntake(strconv.FormatInt(cfg.appID, 10), cfg.secret, o.db, log, w.Wake))
	relay := ghbot.NewRelay(o.db, h.Replies, log)
	wake := relay.Wake
	wakeRelay.Store(&wake)

	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	wg.Go(func() { relay.Run(ctx) })
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	return stopped, nil
}

// relayOnEvent is the engine's event hook while a relay may run: events
// that come with outbox rows (a question, an answer, a pause, an end) wake
// the relay stored in wake, once it runs.
func relayOnEvent(wake *atomic.Pointer[func()]) func(engine.Event) {
	return func(ev engine.Event) {
		switch ev.Type {
		case engine.EventRunFinished, engine.EventRunFailed, engine.EventRunCancelled, engine.EventRunPaused,
			engine.EventInteractionAnswered, engine.EventHumanInputRequested:
			if f := wake.Load(); f != nil {
				(*f)()
			}
		}
	}
}

// workspacesDir holds the checkouts of GitHub runs, one per run id.
func workspacesDir(o *owner) string { return filepath.Join(o.dir, "workspaces") }

// workDirOf is where a run works: its own checkout for a GitHub run, the
// server's directory otherwise.
func workDirOf(o *owner, r *engine.Run) string {
	if r.Trigger.Source == "github" {
		return filepath.Join(workspacesDir(o), r.ID)
	}
	return ""
}

// resumeReleased is serve's answer hook: an answer that leaves no question
// pending for a run paused on the await_answers tool resumes it in the
// background.
// Two answers arriving together resume the run once.
func resumeReleased(o *owner, runs *runGroup, log *slog.Logger) func(context.Context, *engine.AnswerResult) bool {
	var resuming sync.Map
	return func(ctx context.Context, res *engine.AnswerResult) bool {
		runID := res.Interaction.RunID
		if _, busy := resuming.LoadOrStore(runID, true); busy {
			return true
		}
		release := func() { resuming.Delete(runID) }
		ready, err := o.engine.AwaitReady(ctx, runID)
		if err != nil || !ready {
			release()
			return false
		}
		r, err := o.db.Run(ctx, runID)
		if err != nil {
			release()
			log.Error("reading a released run failed", "run", runID, "err", err)
			return false
		}
		w, err := loadWorkflow(io.Discard, r.File)
		if err != nil {
			release()
			log.Error("a released run cannot resume", "run", runID, "err", err)
			return false
		}
		runs.wg.Go(func() {
			defer release()
			if _, err := o.engine.Resume(runs.ctx, engine.ResumeRequest{Workflow: w, RunID: runID, WorkDir: workDirOf(o, r), Via: "answer"}); err != nil {
				log.Error("resuming a released run failed", "run", runID, "err", err)
			}
		})
		return true
	}
}
