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

// githubActions are the Handler's actions on this server's engine.
type githubActions struct {
	o       *owner
	launch  *ghbot.Launcher
	after   func(context.Context, *engine.AnswerResult) bool
	resumer *resumer
}

func (a githubActions) AnswerPause(ctx context.Context, runID, ixID string, answers map[string]string, by string) error {
	return a.resumer.answerPause(ctx, runID, ixID, answers, by)
}

func (a githubActions) Answer(ctx context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error) {
	res, err := a.o.engine.Answer(ctx, req)
	if err == nil {
		res.Resumed = a.after(ctx, res)
	}
	return res, err
}

func (a githubActions) Cancel(ctx context.Context, runID, reason string) (bool, error) {
	return a.o.engine.Stop(ctx, runID, reason)
}

func (a githubActions) Launch(ctx context.Context, l ghbot.Launch) (string, error) {
	return a.launch.Launch(ctx, l)
}

// serveGitHub mounts the App's webhook endpoint and starts the worker that
// acts on the deliveries and the relay that writes to GitHub; both stop
// with ctx. The relay is stored in relay for the engine's event hook.
func serveGitHub(ctx context.Context, cfg githubConfig, o *owner, runs *runGroup, log *slog.Logger, mux *http.ServeMux,
	after func(context.Context, *engine.AnswerResult) bool, res *resumer, relay *atomic.Pointer[ghbot.Relay]) (done <-chan struct{}, err error) {
	app, err := ghbot.NewApp(cfg.appID, cfg.key, cfg.apiURL, nil)
	if err != nil {
		return nil, err
	}
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
		Actions: githubActions{o: o, launch: launcher, after: after, resumer: res},
		Replies: commenter(ctx, app, log),
		Queue:   o.db,
		Log:     log,
	}
	h.Replies.Redactor = cfg.redact
	w := ghbot.NewWorker(o.db, cfg.workers, log, h.Handle)
	w.GiveUp = h.GiveUp
	mux.Handle("POST /webhooks/github", ghbot.NewIntake(strconv.FormatInt(cfg.appID, 10), cfg.secret, o.db, log, w.Wake))
	rl := ghbot.NewRelay(o.db, h.Replies, log)
	rl.Failpoint = failpoint()
	rl.OnEnded = func(ctx context.Context, run *engine.Run) error {
		removeWorkspace(o, run, log)
		return h.StartQueued(ctx, run)
	}
	w.Failpoint = failpoint()
	relay.Store(rl)

	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	wg.Go(func() { rl.Run(ctx) })
	// Answers written on PRs while this server was down.
	wg.Go(func() { reconcile(ctx, h, log) })
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	return stopped, nil
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
	login, err := app.Login(ctx)
	if err != nil {
		log.Warn("reading the App's login failed; the bot's comments are recognised by their markers alone", "err", err)
		return c
	}
	c.Login = login
	log.Info("GitHub App", "login", login)
	return c
}

// relayOnEvent is the engine's event hook while a relay may run: events
// that come with outbox rows (a start, a question, an answer, a pause, an
// end) wake it, and progress (steps starting and finishing) is shown at
// the pace the relay allows.
func relayOnEvent(relay *atomic.Pointer[ghbot.Relay]) func(engine.Event) {
	return func(ev engine.Event) {
		r := relay.Load()
		if r == nil {
			return
		}
		switch ev.Type {
		case engine.EventRunStarted, engine.EventRunFinished, engine.EventRunFailed, engine.EventRunCancelled, engine.EventRunPaused,
			engine.EventInteractionAnswered, engine.EventHumanInputRequested:
			r.Wake()
		case engine.EventNodeStarted, engine.EventNodeFinished, engine.EventRunResumed:
			r.Touch(ev.RunID)
		}
	}
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
	if o == nil {
		return
	}
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
func sweepWorkspaces(ctx context.Context, o *owner, keep time.Duration, log *slog.Logger) {
	tick := time.NewTicker(time.Hour)
	defer tick.Stop()
	for {
		sweepOnce(ctx, o, keep, time.Now(), log)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
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

// resumer continues paused runs in the background for serve: a run paused
// on the await_answers tool when its last question is answered, and a run
// paused on a blocking question when it is answered on GitHub. A run is
// resumed by one of them at a time.
type resumer struct {
	o    *owner
	runs *runGroup
	log  *slog.Logger
	busy sync.Map // run id → resuming
}

// released is serve's answer hook: an answer that leaves no question
// pending for a run paused on the await_answers tool resumes it. Two
// answers arriving together resume the run once.
func (rs *resumer) released(ctx context.Context, res *engine.AnswerResult) bool {
	runID := res.Interaction.RunID
	if _, busy := rs.busy.LoadOrStore(runID, true); busy {
		return true
	}
	release := func() { rs.busy.Delete(runID) }
	ready, err := rs.o.engine.AwaitReady(ctx, runID)
	if err != nil || !ready {
		release()
		return false
	}
	r, w, err := rs.load(ctx, runID)
	if err != nil {
		release()
		rs.log.Error("a released run cannot resume", "run", runID, "err", err)
		return false
	}
	rs.runs.wg.Go(func() {
		defer release()
		if _, err := rs.o.engine.Resume(rs.runs.ctx, engine.ResumeRequest{Workflow: w, RunID: runID, WorkDir: resumeDir(rs.o, r), Via: "answer", Expect: engine.StatusPausedWaitingHuman}); err != nil {
			rs.log.Error("resuming a released run failed", "run", runID, "err", err)
		}
	})
	return true
}

func (rs *resumer) load(ctx context.Context, runID string) (*engine.Run, *dsl.Workflow, error) {
	r, err := rs.o.db.Run(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	w, err := loadWorkflow(io.Discard, r.File)
	return r, w, err
}

// answerPause answers the blocking question run runID is paused on and
// resumes it in the background. It returns once the answers are stored
// (nil) or refused (*ghbot.AnswerError saying why).
func (rs *resumer) answerPause(ctx context.Context, runID, ixID string, answers map[string]string, by string) error {
	if _, busy := rs.busy.LoadOrStore(runID, true); busy {
		// Another answer is resuming it: look again in a moment (the
		// delivery is retried), when this one will have been seen.
		return &ghbot.RetryLater{After: 2 * time.Second, Err: fmt.Errorf("run %s is being resumed", runID)}
	}
	release := func() { rs.busy.Delete(runID) }
	r, w, err := rs.load(ctx, runID)
	if err != nil {
		release()
		return err
	}
	if r.Status != engine.StatusPausedWaitingHuman {
		release()
		return &ghbot.AnswerError{Msg: fmt.Sprintf("run %s is %s, not waiting for this answer", runID, r.Status)}
	}
	recorded := make(chan struct{})
	errc := make(chan error, 1)
	rs.runs.wg.Go(func() {
		defer release()
		_, err := rs.o.engine.Resume(rs.runs.ctx, engine.ResumeRequest{
			Workflow: w, RunID: runID, InteractionID: ixID, Answers: answers, By: by, Via: "github", WorkDir: resumeDir(rs.o, r), Force: true, Expect: engine.StatusPausedWaitingHuman,
			Recorded: func() { close(recorded) },
		})
		errc <- err
	})
	select {
	case <-recorded:
		return nil
	case err := <-errc:
		if err == nil {
			return nil
		}
		// Resume refuses answers before storing anything; its message says
		// which field is wrong.
		msg := err.Error()
		if _, rest, ok := strings.Cut(msg, runID+": "); ok {
			msg = rest
		}
		return &ghbot.AnswerError{Msg: msg}
	}
}
