package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/bot/delivery"
	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/bot/page"
	"github.com/iterion-bot/iterion/bot/schedule"
	slackbot "github.com/iterion-bot/iterion/bot/slack"
	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
)

func (a *App) newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve iterion: own the store, run workflows, answer questions over REST",
		Long: fmt.Sprintf(`Serve owns the store directory and runs until interrupted. It serves:

  /healthz, /readyz                     liveness and readiness
  /metrics                              Prometheus metrics: runs by status, pending deliveries,
                                        outbox rows, the Go runtime
  /api/…                                the run and question API, when $ITERION_API_TOKEN
                                        is set (requests carry Authorization: Bearer <token>;
                                        answers are recorded as $ITERION_API_TOKEN_NAME, default
                                        %q, via api); POST /api/runs {"file_path", "vars",
                                        "run_id"} starts a run
  POST /webhooks/github                 the GitHub App's webhooks, when an App id is set
                                        ($ITERION_GITHUB_APP_ID or github.app_id)
  POST /webhooks/slack/events           Slack's events, interactions and /iterion commands, when
       /webhooks/slack/interactive      $ITERION_SLACK_BOT_TOKEN is set and slack.transport is
       /webhooks/slack/commands         http (socket opens Socket Mode instead; docs/slack.md)
  /                                     the admin page (docs/page.md): the questions waiting
                                        for an answer across runs, and the runs; sign in with
                                        the admin token ($ITERION_ADMIN_TOKEN, else the file
                                        serve writes in the store and names at start) or with
                                        GitHub ($ITERION_GITHUB_CLIENT_ID and
                                        $ITERION_GITHUB_CLIENT_SECRET; page.allowed_orgs and
                                        page.allowed_teams say who may); its address as people
                                        reach it is $ITERION_PUBLIC_URL or page.public_url

on the listen address. The same API is served to other iterion commands of the same user on a
unix socket in a private directory ($ITERION_RUNTIME_DIR, else $XDG_RUNTIME_DIR/iterion, else
~/.cache/iterion/run), each request carrying the token in the 0600 file beside it; answers there
are recorded as the caller's OS user via cli. Runs a previous process left interrupted continue from their
checkpoints at start. On SIGINT or SIGTERM it stops accepting requests and gives the runs in
flight shutdown_grace (%s by default); the ones still running then continue at the next start.

Settings come from a YAML file (--config, else $ITERION_CONFIG; see docs/serve.md), environment
variables and flags. For each setting a flag wins over its environment variable, which wins
over the file, which wins over the default:

  listen address     --addr, $ITERION_ADDR, addr (default %s)
  store directory    --store-dir, $ITERION_STORE, store (default %s)
  GitHub App id      $ITERION_GITHUB_APP_ID, github.app_id
  GitHub REST base   $ITERION_GITHUB_API_URL, github.api_url (default github.com's)
  git clone base     $ITERION_GITHUB_URL, github.git_url (default %s)
  App private key    $ITERION_GITHUB_PRIVATE_KEY (PEM text, or a file path), github.private_key_file
  Slack API base     $ITERION_SLACK_API_URL (default Slack's)

The file alone sets log.level (debug, info, warn, error), log.format (text, json),
shutdown_grace, github.workers (default %d), github.keep_workspaces (%s), the slack section
(transport, channel, users, allowed, workflows, workers), and the bounds on
webhook bodies being read before their signature is checked: webhooks.memory_mb (%d MiB held
at most), webhooks.bodies (%d at once) and webhooks.body_timeout (%s each). Secrets come only
from the environment: $ITERION_GITHUB_WEBHOOK_SECRET, $ITERION_GITHUB_PRIVATE_KEY's PEM text,
$ITERION_API_TOKEN, $ITERION_ADMIN_TOKEN, $ITERION_GITHUB_CLIENT_SECRET and Slack's
$ITERION_SLACK_BOT_TOKEN, $ITERION_SLACK_SIGNING_SECRET and $ITERION_SLACK_APP_TOKEN; a file holding
one is refused. The values of those, of the model keys and
of the variables the file names under secrets: are scrubbed, as [redacted], from everything that
leaves a run: comments, check runs, events, API answers and the log. Relative paths in the file
are relative to its directory. A file with mistakes is reported, each at its line with what to
write instead, and nothing starts.`,
			defaultAPITokenName, durationText(defaultShutdownGrace), defaultAddr, defaultStoreDir, ghbot.DefaultGitURL,
			ghbot.DefaultWorkers, durationText(ghbot.DefaultKeepWorkspaces),
			delivery.DefaultBodyBytes>>20, delivery.DefaultBodies, durationText(delivery.DefaultBodyTimeout)),
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.serveSettings(f)
			if err != nil {
				return err
			}
			if f.check {
				return a.checkServeSettings(cmd.OutOrStdout(), cfg)
			}
			return a.serve(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg)
		},
	}
	cmd.Flags().StringVar(&f.config, "config", "", "YAML config file (default $ITERION_CONFIG; none: the defaults)")
	cmd.Flags().StringVar(&f.addr, "addr", "", "listen address (default $ITERION_ADDR, the file's addr, or "+defaultAddr+")")
	cmd.Flags().StringVar(&f.store, "store-dir", "", "store directory (default $ITERION_STORE, the file's store, or "+defaultStoreDir+")")
	cmd.Flags().BoolVar(&f.check, "check", false, "check the settings (the config file, the App's variables) and exit, starting nothing")
	return cmd
}

// checkServeSettings is serve --check: the settings as serve would take
// them, reported, and nothing started (no store opened, nothing
// listening), for a deployment to check a config before it restarts.
func (a *App) checkServeSettings(out io.Writer, cfg serveConfig) error {
	if _, _, err := a.githubSettings(cfg.GitHub, cfg.file); err != nil {
		return err
	}
	what := "the defaults and the environment"
	if cfg.file != "" {
		what = cfg.file
	}
	fmt.Fprintf(out, "%s: ok (listen on %s, store %s)\n", what, cfg.Addr, a.path(cfg.Store))
	return nil
}

// serve runs the server with cfg, from serveSettings, until ctx ends.
func (a *App) serve(ctx context.Context, stdout, stderr io.Writer, cfg serveConfig) error {
	addr, dir := cfg.Addr, a.path(cfg.Store)
	log := newServeLogger(stderr, cfg.Log)
	// Secrets are scrubbed from everything that leaves a run, logs too.
	redact := a.serveRedactor(cfg, log)
	a.workflowAllow, a.workflowSecrets = cfg.WorkflowEnv, cfg.Secrets
	log = slog.New(engine.RedactingHandler(log.Handler(), redact))
	// The admin page's token and session key, from the environment or the
	// store directory; a token serve made is a secret like the others.
	secrets, err := a.pageSecrets(dir)
	if err != nil {
		return err
	}
	redact.Add(secrets.token)
	public, err := a.publicURL(cfg)
	if err != nil {
		return err
	}
	ghCfg, withGitHub, err := a.githubSettings(cfg.GitHub, cfg.file)
	if err != nil {
		return err
	}
	slCfg, withSlack, err := a.slackSettings(cfg.Slack, cfg.file, public, a.githubClientID(cfg))
	if err != nil {
		return err
	}
	if cfg.file != "" {
		log.Debug("config file read", "file", cfg.file)
	}
	sb, err := a.newSandboxes(cfg.Sandbox, "", dir, false, log)
	if err != nil {
		return err
	}
	opts, err := a.engineOptions(nil, sb, cfg.Sandbox.MaxParallelBranches)
	if err != nil {
		return err
	}
	opts.WorkspaceQuota = cfg.Sandbox.WorkspaceQuotaMB << 20
	opts.Logger = log
	opts.Redactor = redact
	ghCfg.redact = redact
	ghCfg.slack = withSlack
	slCfg.redact, slCfg.gitURL = redact, cmp.Or(ghCfg.gitURL, ghbot.DefaultGitURL)
	if slCfg.signIn != nil {
		slCfg.signIn.APIURL = ghCfg.apiURL
	}
	// A revoked GitHub authorization drops the Slack links to the account
	// (the Slack service is made after the App's, which tells of it).
	var sl *slackbot.Service
	ghCfg.revoked = func(ctx context.Context, githubID int64) error {
		if sl == nil {
			return nil
		}
		return sl.Revoked(ctx, githubID)
	}
	ghCfg.pageURL = public

	o, err := a.openOwner(dir, "iterion serve", io.Discard, log)
	if err != nil {
		return err
	}
	// A store opened read-only (its disk nearly full) would refuse every
	// run and delivery: say so now rather than fail each request.
	if err := o.db.ReadOnly(); err != nil {
		return fmt.Errorf("serve needs to write to its store: %w", err)
	}
	// A run launched or continued without a workspace gets its own empty
	// one: never the server's directory.
	opts.WorkDir = func(r *engine.Run) (string, error) { return prepareWorkDir(o, r.ID) }
	// The webhooks' bodies, of every channel, are read into one pool.
	bodies := delivery.NewBodies(delivery.BodyOptions{Bytes: cfg.Webhooks.MemoryMB << 20, Bodies: cfg.Webhooks.Bodies,
		Timeout: cfg.Webhooks.BodyTimeout})
	if withGitHub && cfg.Webhooks.MemoryMB < minWebhookMemoryMB {
		log.Warn(fmt.Sprintf("webhooks.memory_mb is below %d: GitHub's largest payloads (25 MiB) will be refused with 503", minWebhookMemoryMB),
			"memory_mb", cfg.Webhooks.MemoryMB)
	}
	// The schedules of the config file, and of the repositories once the
	// App reads them; their fires are recorded in the store.
	launchers := map[string]schedule.Launcher{}
	sched, err := a.newScheduler(ctx, o, cfg.Schedules, launchers, withSlack, log)
	if err != nil {
		return err
	}
	now := time.Now
	if a.ScheduleClock != nil {
		now = a.ScheduleClock.Now
	}
	o.schedules = scheduleAPI{s: sched, db: o.db, now: now}
	var gh *ghbot.Service
	if withGitHub {
		if gh, err = a.newGitHubService(ctx, ghCfg, o, bodies, sched, log); err != nil {
			return err
		}
		launchers["github"] = gh.ScheduleLauncher()
	}
	if withSlack {
		if sl, err = a.newSlackService(ctx, slCfg, o, gh, bodies, log); err != nil {
			return err
		}
	}
	// The page is made once the engine is, before any run goes on.
	var pg *page.Server
	opts.OnEvent = func(ev engine.Event) {
		if gh != nil {
			gh.OnEvent(ev)
		}
		if sl != nil {
			sl.OnEvent(ev)
		}
		if pg != nil {
			pg.OnEvent(ev)
		}
		switch ev.Type {
		case engine.EventRunFinished, engine.EventRunFailed:
			removeEndedWorkspace(o, ev.RunID, log)
			sched.Wake() // a tick may wait for this run
		case engine.EventRunCancelled, engine.EventRunPaused:
			sched.Wake()
		}
	}
	// Runs launched over the API are shown in the server's Slack channel,
	// when it has one.
	var apiChannels []string
	if sl != nil && slCfg.file.Channel != "" {
		apiChannels = []string{"slack"}
	}
	launch := func(ctx context.Context, req api.LaunchRequest) (*engine.Run, error) {
		c, _ := api.CallerFrom(ctx)
		return a.launchRun(ctx, o, req, c.Name, apiChannels)
	}
	o.place = runPlace
	if err := o.start(opts, launch); err != nil {
		return err
	}
	if pg, err = a.newPage(cfg, ghCfg, gh, o, secrets, public, log); err != nil {
		return err
	}
	// Runs go on in the engine's run group; at the end the server gives
	// them shutdown_grace and leaves the rest to the next start.
	if _, err := o.engine.Recover(ctx); err != nil {
		log.Error("recovering the runs of the previous process failed", "err", err)
	}
	// Everything started here stops with bg, and is waited for before the
	// store closes (App.Close); bg ends with ctx, or first when serve
	// returns early, on an error.
	bg, stopBG := context.WithCancel(ctx)
	var background sync.WaitGroup
	defer background.Wait()
	defer stopBG()
	// The workspaces serve collects, and the runs past the retention.
	background.Go(func() { sweep(bg, o, ghCfg.keepWorkspaces, cfg.Retention, log) })

	mux := http.NewServeMux()
	pageHandler := pg.Handler()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	channelMetrics := []prometheus.Collector{bodies, newSandboxCollector(sb.Default().Name(), sb.Default().Available)}
	if gh != nil {
		channelMetrics = append(channelMetrics, gh.Collector())
	}
	mux.Handle("GET /metrics", metricsHandler(o.db, log, channelMetrics...))
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if _, err := o.db.Runs(r.Context(), engine.RunFilter{Limit: 1}); err != nil {
			http.Error(w, "store unavailable", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	if gh != nil {
		mux.Handle("POST /webhooks/github", gh)
		background.Go(func() { gh.Run(bg, o.engine) })
		select { // webhooks are taken in after: see Service.Started
		case <-gh.Started():
		case <-ctx.Done():
		}
		log.Info("GitHub App webhooks served on POST /webhooks/github", "app_id", ghCfg.appID)
	} else {
		log.Info("GitHub App off: set ITERION_GITHUB_APP_ID (or github.app_id), the webhook secret and the private key to serve it")
	}
	if sl != nil {
		serveSlack(mux, sl)
		serveSignIn(mux, sl, pageHandler)
		background.Go(func() { sl.Run(bg, o.engine) })
		select { // as GitHub's: see Service.Started
		case <-sl.Started():
		case <-ctx.Done():
		}
		id := sl.Identity()
		if sl.Transport() == slackbot.TransportSocket {
			log.Info("Slack on over Socket Mode (no public URL needed)", "team", id.Team, "team_id", id.TeamID, "bot", id.User, "channel", slCfg.file.Channel)
		} else {
			log.Info("Slack on over HTTP: POST /webhooks/slack/events, /webhooks/slack/interactive and /webhooks/slack/commands",
				"team", id.Team, "team_id", id.TeamID, "bot", id.User, "channel", slCfg.file.Channel)
		}
	} else {
		log.Info("Slack off: set ITERION_SLACK_BOT_TOKEN, and ITERION_SLACK_SIGNING_SECRET (HTTP) or ITERION_SLACK_APP_TOKEN (Socket Mode), to serve it")
	}
	// Fires start once the channels they launch through run.
	background.Go(func() { sched.Run(bg) })
	if token := a.getenv("ITERION_API_TOKEN"); token != "" {
		// Answers and launches through this token are recorded as its name.
		name := cmp.Or(strings.TrimSpace(a.getenv("ITERION_API_TOKEN_NAME")), defaultAPITokenName)
		mux.Handle("/api/", api.RequireToken(token, name, o.apiHandler))
		log.Info("the REST API is served on "+addr+" for requests with the token, and on the unix socket", "token_name", name)
	} else {
		log.Info("the REST API is served on the unix socket only; set ITERION_API_TOKEN to serve it on " + addr)
	}
	// The admin page: everything the routes above do not serve.
	mux.Handle("/", pageHandler)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	// No client holds a connection for long: headers in readHeaderTimeout,
	// a request in 30 s (a webhook's body has its own deadline,
	// webhooks.body_timeout from the end of its headers), an answer in 90 s
	// (a REST long-poll waits up to api.MaxWait), idle keep-alives 2
	// minutes.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: 30 * time.Second,
		WriteTimeout: api.MaxWait + 30*time.Second, IdleTimeout: 2 * time.Minute}
	fmt.Fprintf(stdout, "iterion serve listening on http://%s (store %s)\n", ln.Addr(), cfg.Store)
	if secrets.tokenFile != "" {
		fmt.Fprintf(stdout, "admin page: sign in with the admin token in %s\n", secrets.tokenFile)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.Info("stopping: no new requests; waiting for the runs in flight")
	// Waiting clients are told now: Shutdown would wait for them.
	o.api.Close()
	pg.Close()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if o.engine.Wait(sctx) != nil {
		log.Warn("runs still in flight continue at the next start")
	}
	return nil
}

// launchRun compiles a workflow file of the server's directory and
// launches it through the engine, in a workspace of its own, recording
// actor (the API's authenticated caller) as who started it. The engine's
// refusals, and what is wrong with the request itself, are
// *api.BadRequestError saying what to fix.
func (a *App) launchRun(ctx context.Context, o *owner, req api.LaunchRequest, actor string, channels []string) (*engine.Run, error) {
	bad := func(format string, args ...any) error { return &api.BadRequestError{Err: fmt.Errorf(format, args...)} }
	path := filepath.Clean(req.FilePath)
	if filepath.IsAbs(path) || strings.HasPrefix(path, "..") {
		return nil, bad("file_path %q must be relative to the server's directory", req.FilePath)
	}
	src, err := a.readWorkflow(path)
	if err != nil {
		return nil, bad("%v", err)
	}
	w, ds := a.dslOptions().CompileSource(path, src)
	if ds.HasErrors() {
		return nil, bad("%s has errors:\n%s", path, dsl.RenderString(ds, map[string][]byte{path: src}))
	}
	// No WorkDir: the engine makes the run's own (Options.WorkDir) once
	// the launch is valid.
	run, err := o.engine.Launch(ctx, engine.StartRequest{Workflow: w, RunID: req.RunID, Vars: req.Vars, Preset: req.Preset,
		Trigger: engine.Trigger{Source: "api", Actor: actor}, Channels: channels, File: path})
	var badID *engine.InvalidRunIDError
	var verr *engine.VarsError
	var preset *engine.PresetError
	var pre *engine.PreflightError
	switch {
	case errors.As(err, &badID):
		return nil, bad("run_id %q: use 1 to 64 of a-z, 0-9 and -", req.RunID)
	case errors.As(err, &verr), errors.As(err, &preset):
		return nil, bad("%s: %v", path, err)
	case errors.As(err, &pre):
		return nil, bad("%s cannot run on this server: %v", path, err)
	case errors.Is(err, engine.ErrRunExists):
		return nil, bad("run %s already exists", req.RunID)
	}
	return run, err
}
