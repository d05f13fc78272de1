package github

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// The App's defaults, for ServiceOptions' zero values and for the
// server's configuration, which states them.
const (
	// DefaultGitURL is where repositories are cloned from.
	DefaultGitURL = "https://github.com"
	// DefaultWorkers is how many deliveries are handled at once.
	DefaultWorkers = 4
	// DefaultKeepWorkspaces is how long the checkout of a run that stopped
	// resumably (cancelled, failed_resumable) is kept: a week.
	DefaultKeepWorkspaces = 7 * 24 * time.Hour
	// DefaultWritePace spaces the App's writes to one installation: GitHub
	// asks for a second between content-creating requests.
	DefaultWritePace = time.Second
	// SweepEvery is how often the checkouts kept too long are looked for.
	SweepEvery = time.Hour
)

// reconcileAttempts bounds the reading of the answers written while the
// server was down, when GitHub keeps asking for patience.
const reconcileAttempts = 5

// Doors are the engine's doors the App's runs go through; *engine.Engine
// has them.
type Doors interface {
	Launch(ctx context.Context, req engine.StartRequest) (*engine.Run, error)
	Answer(ctx context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error)
	Stop(ctx context.Context, runID, reason string) (bool, error)
	Preflight(w *dsl.Workflow) error
}

// ServiceOptions configure a Service. A zero optional field means the
// default it names.
type ServiceOptions struct {
	// AppID and PrivateKey (PEM) identify the App; WebhookSecret signs its
	// webhooks. All three are required.
	AppID         int64
	PrivateKey    []byte
	WebhookSecret []byte
	// APIURL is the REST base ("" means github.com's); GitURL is where
	// repositories are cloned from ("" means DefaultGitURL).
	APIURL, GitURL string
	// Workers is how many deliveries are handled at once; 0 means
	// DefaultWorkers.
	Workers int
	// Workspaces is the directory of the runs' checkouts, one per run id.
	Workspaces string
	// KeepWorkspaces is how long the checkout of a run that stopped
	// resumably is kept after the run's last change; 0 means
	// DefaultKeepWorkspaces.
	KeepWorkspaces time.Duration
	// RemoveWorkspace removes everything of a run's workspace: its
	// checkout, the workflow file beside it, and whatever the server keeps
	// with it (its sandbox's HOME). nil means the checkout and the workflow
	// file.
	RemoveWorkspace func(runID string) error
	// WritePace spaces the writes to one installation; 0 means
	// DefaultWritePace.
	WritePace time.Duration
	// Redactor scrubs the server's secrets from everything written on
	// GitHub. nil means nothing is scrubbed.
	Redactor *engine.Redactor
	// Log receives the App's logs. nil means none.
	Log *slog.Logger
	// Failpoint, when set, is called at the named points of the worker and
	// the relay, for crash tests.
	Failpoint func(name string)
	// Transport carries the App's requests to GitHub; nil means
	// http.DefaultTransport.
	Transport http.RoundTripper
	// Clock is the time the sweep compares the runs' last changes with;
	// nil means time.Now.
	Clock func() time.Time
	// DSL compiles the runs' workflows; its Env is what they may read of
	// the environment.
	DSL dsl.Options
	// Bodies is the pool the webhooks' bodies are read into before their
	// signature is checked, shared with the server's other channels; nil
	// means one of the App's own, with delivery.BodyOptions' defaults.
	Bodies *delivery.Bodies
	// Slack says the server has Slack: a run whose repository's
	// .iterion.yml names a Slack channel, or whose schedule reports to
	// one, is shown there too.
	Slack bool
	// Revoked, when set, is told of a person who revoked their
	// authorization of the App (github_app_authorization), by GitHub id.
	Revoked func(ctx context.Context, githubID int64) error
	// Schedules takes the schedules the repositories declare (read at
	// start and at each push to a default branch); the scheduler starts
	// their runs through ScheduleLauncher. nil means repositories'
	// schedules are not read.
	Schedules Schedulers
	// PublicURL, when set, is the server's address people reach
	// (ITERION_PUBLIC_URL): a pull request of a run's changes links the
	// run there.
	PublicURL string
	// PageURL, when set, is the admin page's public address: the runs'
	// posts link their pages there (RelayOptions.PageURL).
	PageURL string
}

// Service is the GitHub App's part of a server: the webhook intake, the
// worker acting on the stored deliveries, the relay showing runs on their
// pull requests, the answers written while the server was down, and the
// checkouts of the App's runs. NewService makes it before the engine (whose
// events wake its relay, see OnEvent); Run serves it with the engine's
// doors. The server only wires it.
type Service struct {
	opts     ServiceOptions
	db       *store.DB
	app      *App
	replies  *Commenter
	relay    *Relay
	worker   *delivery.Worker
	intake   *delivery.Intake
	launcher *Launcher
	actions  *doorActions
	handler  *Handler
	log      *slog.Logger
	now      func() time.Time
	// sweepEvery is SweepEvery; tests shorten it on their own Service.
	sweepEvery time.Duration
}

// NewService reads the App's identity (its login, asked of GitHub: without
// it, the bot's comments are recognised by their markers alone) and makes
// the parts that run once Run is called, over db.
func NewService(ctx context.Context, db *store.DB, opts ServiceOptions) (*Service, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	app, err := NewApp(AppOptions{ID: opts.AppID, PrivateKey: opts.PrivateKey, APIURL: opts.APIURL, Transport: opts.Transport, Log: log})
	if err != nil {
		return nil, err
	}
	s := &Service{opts: opts, db: db, app: app, log: log, now: opts.Clock, sweepEvery: SweepEvery}
	if s.now == nil {
		s.now = time.Now
	}
	login, err := app.Login(ctx)
	if err != nil {
		log.Warn("reading the App's login failed; the bot's comments are recognised by their markers alone", "err", err)
	} else {
		log.Info("GitHub App", "login", login)
	}
	s.replies = NewCommenter(CommenterOptions{Client: app.Installation, Pace: cmp.Or(opts.WritePace, DefaultWritePace),
		Login: login, AppID: app.ID(), Redactor: opts.Redactor})
	s.relay = NewRelay(RelayOptions{Store: db, Replies: s.replies, Log: log, OnEnded: s.ended, Failpoint: opts.Failpoint, PageURL: opts.PageURL})
	gitURL := strings.TrimRight(cmp.Or(opts.GitURL, DefaultGitURL), "/")
	// The engine's doors reach the launcher and the handler once Run is
	// given them, before the first delivery is handled.
	s.actions = &doorActions{}
	s.launcher = NewLauncher(LauncherOptions{
		Fetch: func(ctx context.Context, inst int64, owner, repo, path, ref string) ([]byte, error) {
			c, err := app.Installation(inst)
			if err != nil {
				return nil, err
			}
			return FetchFile(ctx, c, owner, repo, path, ref, dsl.MaxFileSize)
		},
		Token:      app.Token,
		CloneURL:   func(owner, repo string) string { return gitURL + "/" + owner + "/" + repo + ".git" },
		Workspaces: opts.Workspaces,
		Exists: func(ctx context.Context, id string) (bool, error) {
			_, err := db.Run(ctx, id)
			if errors.Is(err, engine.ErrNotFound) {
				return false, nil
			}
			return err == nil, err
		},
		DSL:   opts.DSL,
		Check: func(w *dsl.Workflow) error { return s.actions.doors.Preflight(w) },
		Start: func(ctx context.Context, req engine.StartRequest) (*engine.Run, error) {
			return s.actions.doors.Launch(ctx, req)
		},
		Slack: opts.Slack,
	})
	s.actions.launch = s.launcher
	s.handler = NewHandler(HandlerOptions{Client: app.Installation, Perms: app, Runs: db, Actions: s.actions, Replies: s.replies,
		Queue: db, Log: log, Installations: app.Installations(), OnPush: s.onPush, Revoked: opts.Revoked})
	s.worker = delivery.NewWorker(db, cmp.Or(opts.Workers, DefaultWorkers), log, s.handler.Handle)
	s.worker.GiveUp = s.handler.GiveUp
	s.worker.Failpoint = opts.Failpoint
	s.worker.Source = "github"
	s.intake = NewIntake(IntakeOptions{AppID: opts.AppID, WebhookSecret: opts.WebhookSecret, Store: db, Bodies: opts.Bodies,
		Wake: s.worker.Wake, Log: log})
	return s, nil
}

// ServeHTTP is the webhook endpoint (POST /webhooks/github): it stores each
// signed delivery, then acknowledges it. The deliveries are acted on once
// Run is called; a server takes webhooks in only after Started.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.intake.ServeHTTP(w, r) }

// Started is closed once Run has taken up the deliveries stored before it
// (acknowledged before a crash): a server takes webhooks in after it, so a
// delivery it acknowledges is never one that first listing took up while
// the acknowledgement was still being sent (Worker.Started).
func (s *Service) Started() <-chan struct{} { return s.worker.Started() }

// Collector is the App's metrics (the installations GitHub refuses), for
// the server's /metrics.
func (s *Service) Collector() prometheus.Collector { return s.app.Installations().Collector() }

// OnEvent is the engine's event hook for the App: events that come with
// outbox rows (a start, a question, an answer, a pause, an end) wake the
// relay, and progress (steps starting and finishing) is shown at the pace
// the relay allows. It never blocks.
func (s *Service) OnEvent(ev engine.Event) {
	switch ev.Type {
	case engine.EventRunStarted, engine.EventRunFinished, engine.EventRunFailed, engine.EventRunCancelled, engine.EventRunPaused,
		engine.EventInteractionAnswered, engine.EventHumanInputRequested:
		s.relay.Wake()
	case engine.EventNodeStarted, engine.EventNodeFinished, engine.EventRunResumed:
		s.relay.Touch(ev.RunID)
	}
}

// Owns reports whether run is one of the App's, whose workspace the
// Service collects.
func (*Service) Owns(run *engine.Run) bool { return run.Trigger.Source == "github" }

// Run acts on the deliveries, relays the runs' progress, applies the
// answers written on pull requests while the server was down and sweeps
// old checkouts, all through doors, until ctx ends; it returns once they
// have all stopped. It is called once.
func (s *Service) Run(ctx context.Context, doors Doors) {
	s.actions.doors = doors
	// An installation back (an installation event) takes up its held
	// deliveries and comments; so does a start, since a previous process
	// may have held work for an installation that came back meanwhile.
	s.app.Installations().OnRelease(func(id int64) {
		if _, err := s.db.ReleaseDeliveries(ctx, InstallationHold(id)); err != nil {
			s.log.Error("releasing the deliveries of an installation failed", "installation", id, "err", err)
		}
		s.worker.Wake()
		if err := s.relay.Release(ctx, id); err != nil {
			s.log.Error("releasing the PR comments of an installation failed", "installation", id, "err", err)
		}
		s.refreshInstallation(ctx, id)
	})
	if n, err := s.db.ReleaseDeliveries(ctx, ""); err != nil {
		s.log.Error("releasing held deliveries failed", "err", err)
	} else if n > 0 {
		s.log.Info("deliveries held by the previous process are tried again", "deliveries", n)
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.worker.Run(ctx) })
	// The relay alone starts the jobs that start a PR's queued run (at a
	// run's end); they end with ctx, once it has stopped.
	wg.Go(func() { s.relay.Run(ctx); s.handler.WaitJobs() })
	wg.Go(func() { s.reconcile(ctx) })
	wg.Go(func() { s.sweep(ctx) })
	wg.Go(func() { s.loadSchedules(ctx) })
	wg.Wait()
}

// doorActions are the Handler's actions: the engine's doors.
type doorActions struct {
	doors  Doors
	launch *Launcher
}

func (a *doorActions) Answer(ctx context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error) {
	return a.doors.Answer(ctx, req)
}

func (a *doorActions) Cancel(ctx context.Context, runID, reason string) (bool, error) {
	return a.doors.Stop(ctx, runID, reason)
}

func (a *doorActions) Launch(ctx context.Context, l Launch) (string, error) {
	return a.launch.Launch(ctx, l)
}

// reconcile applies the answers written on pull requests while the server
// was down, trying again while GitHub asks for patience, at most
// reconcileAttempts times (a comment already applied is not applied
// twice).
func (s *Service) reconcile(ctx context.Context) {
	reconcileAtStart(ctx, s.handler, s.log)
}

func reconcileAtStart(ctx context.Context, h *Handler, log *slog.Logger) {
	for attempt := 1; ; attempt++ {
		n, err := h.Reconcile(ctx)
		var later *RetryLater
		switch {
		case err == nil:
			log.Info("answers written on pull requests while the server was down are applied", "comments", n)
			return
		case ctx.Err() != nil:
			return
		case errors.As(err, &later) && attempt < reconcileAttempts:
			log.Warn("reading the answers written while the server was down is postponed", "retry_in", later.After, "err", err)
			if sleepCtx(ctx, later.After) != nil {
				return
			}
		default:
			log.Error("applying the answers written while the server was down failed", "err", err)
			return
		}
	}
}

// ended is the relay's hook for the end of a PR run (or a scheduled
// run), once shown: a finished run proposes its changes when its
// repository asks for it, a run over for good loses its checkout, and the
// PR's next queued run starts.
func (s *Service) ended(ctx context.Context, run *engine.Run) error {
	if run.Status == engine.StatusFinished {
		if err := s.proposeChanges(ctx, run); err != nil {
			return err
		}
	}
	if run.Status == engine.StatusFinished || run.Status == engine.StatusFailed {
		if err := s.removeWorkspace(run.ID); err != nil {
			s.log.Warn("removing a finished run's workspace failed", "run", run.ID, "err", err)
		}
	}
	return s.handler.StartQueued(ctx, run)
}

// removeWorkspace removes a run's checkout with RemoveWorkspace, by
// default the checkout and the workflow file beside it.
func (s *Service) removeWorkspace(runID string) error {
	if s.opts.RemoveWorkspace != nil {
		return s.opts.RemoveWorkspace(runID)
	}
	dir := filepath.Join(s.opts.Workspaces, runID)
	return errors.Join(os.RemoveAll(dir), os.RemoveAll(dir+".bot"))
}

// sweep removes, at start and then every SweepEvery, the checkouts kept too
// long (see sweepOnce) until ctx ends.
func (s *Service) sweep(ctx context.Context) {
	tick := time.NewTicker(s.sweepEvery)
	defer tick.Stop()
	for {
		s.sweepOnce(ctx, s.now())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sweepOnce removes the checkouts of the App's runs that stopped resumably
// (cancelled, failed_resumable) and have not changed for KeepWorkspaces at
// now: they are unlikely to be resumed, and each holds a copy of a
// repository. (A run over for good loses its checkout once its end is
// shown; running and paused runs keep theirs.)
func (s *Service) sweepOnce(ctx context.Context, now time.Time) {
	keep := cmp.Or(s.opts.KeepWorkspaces, DefaultKeepWorkspaces)
	runs, err := s.db.Runs(ctx, engine.RunFilter{})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("listing runs for old checkouts failed", "err", err)
		}
		return
	}
	for _, r := range runs {
		if !s.Owns(r) || (r.Status != engine.StatusCancelled && r.Status != engine.StatusFailedResumable) || now.Sub(r.UpdatedAt) < keep {
			continue
		}
		if _, err := os.Stat(filepath.Join(s.opts.Workspaces, r.ID)); err != nil {
			continue
		}
		s.log.Info("removing the checkout of a run stopped long ago", "run", r.ID, "status", r.Status, "updated", r.UpdatedAt)
		if err := s.removeWorkspace(r.ID); err != nil {
			s.log.Warn("removing an old checkout failed", "run", r.ID, "err", err)
		}
	}
}
