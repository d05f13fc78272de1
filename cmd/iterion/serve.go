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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/iterion-bot/iterion/bot/api"
	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
)

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve iterion: own the store, run workflows, answer questions over REST",
		Long: `Serve owns the store directory and runs until interrupted. It serves:

  /healthz, /readyz                     liveness and readiness
  /metrics                              Prometheus metrics: runs by status, pending deliveries,
                                        outbox rows, the Go runtime
  /api/…                                the run and question API, when $ITERION_API_TOKEN
                                        is set (requests carry Authorization: Bearer <token>;
                                        answers are recorded as $ITERION_API_TOKEN_NAME, default
                                        "api", via api); POST /api/runs {"file_path", "vars",
                                        "run_id"} starts a run
  POST /webhooks/github                 the GitHub App's webhooks, when an App id is set
                                        ($ITERION_GITHUB_APP_ID or github.app_id)

on the listen address. The same API is served to other iterion commands of the same user on a
unix socket in a private directory ($ITERION_RUNTIME_DIR, else $XDG_RUNTIME_DIR/iterion, else
~/.cache/iterion/run), each request carrying the token in the 0600 file beside it; answers there
are recorded as the caller's OS user via cli. Runs a previous process left interrupted continue from their
checkpoints at start. On SIGINT or SIGTERM it stops accepting requests and gives the runs in
flight shutdown_grace (30s by default); the ones still running then continue at the next start.

Settings come from a YAML file (--config, else $ITERION_CONFIG; see docs/serve.md), environment
variables and flags. For each setting a flag wins over its environment variable, which wins
over the file, which wins over the default:

  listen address     --addr, $ITERION_ADDR, addr (default :8080)
  store directory    --store-dir, $ITERION_STORE, store (default .iterion)
  GitHub App id      $ITERION_GITHUB_APP_ID, github.app_id
  GitHub REST base   $ITERION_GITHUB_API_URL, github.api_url (default github.com's)
  git clone base     $ITERION_GITHUB_URL, github.git_url (default https://github.com)
  App private key    $ITERION_GITHUB_PRIVATE_KEY (PEM text, or a file path), github.private_key_file

The file alone sets log.level (debug, info, warn, error), log.format (text, json),
shutdown_grace, github.workers (default 4) and github.keep_workspaces (168h). Secrets come only
from the environment: $ITERION_GITHUB_WEBHOOK_SECRET, $ITERION_GITHUB_PRIVATE_KEY's PEM text and
$ITERION_API_TOKEN; a file holding one is refused. The values of those, of the model keys and
of the variables the file names under secrets: are scrubbed, as [redacted], from everything that
leaves a run: comments, check runs, events, API answers and the log. Relative paths in the file
are relative to its directory. A file with mistakes is reported, each at its line with what to
write instead, and nothing starts.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := serveSettings(f)
			if err != nil {
				return err
			}
			return serve(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg)
		},
	}
	cmd.Flags().StringVar(&f.config, "config", "", "YAML config file (default $ITERION_CONFIG; none: the defaults)")
	cmd.Flags().StringVar(&f.addr, "addr", "", "listen address (default $ITERION_ADDR, the file's addr, or :8080)")
	cmd.Flags().StringVar(&f.store, "store-dir", "", "store directory (default $ITERION_STORE, the file's store, or .iterion)")
	return cmd
}

// runGroup tracks the runs this server executes, for a graceful stop.
type runGroup struct {
	wg  sync.WaitGroup
	ctx context.Context
}

// serve runs the server with cfg, from serveSettings, until ctx ends.
func serve(ctx context.Context, stdout, stderr io.Writer, cfg serveConfig) error {
	addr, dir := cfg.Addr, cfg.Store
	log := newServeLogger(stderr, cfg.Log)
	// Secrets are scrubbed from everything that leaves a run, logs too.
	redact := serveRedactor(cfg, log)
	log = slog.New(engine.RedactingHandler(log.Handler(), redact))
	ghCfg, withGitHub, err := githubSettings(cfg.GitHub, cfg.file)
	if err != nil {
		return err
	}
	if cfg.file != "" {
		log.Debug("config file read", "file", cfg.file)
	}
	sb, err := newSandboxes(cfg.Sandbox, "", dir, false, log)
	if err != nil {
		return err
	}
	defer sb.Close()
	opts, err := engineOptions(nil, sb, cfg.Sandbox.MaxParallelBranches)
	if err != nil {
		return err
	}
	opts.WorkspaceQuota = cfg.Sandbox.WorkspaceQuotaMB << 20
	opts.Logger = log
	opts.Redactor = redact
	ghCfg.redact = redact
	var relay atomic.Pointer[ghbot.Relay]
	// The API may be called, and runs may end, before becomeOwnerWith returns.
	var ready atomic.Pointer[owner]
	relayHook := func(engine.Event) {}
	if withGitHub {
		relayHook = relayOnEvent(&relay)
	}
	opts.OnEvent = func(ev engine.Event) {
		relayHook(ev)
		if ev.Type == engine.EventRunFinished || ev.Type == engine.EventRunFailed {
			removeEndedWorkspace(ready.Load(), ev.RunID, log)
		}
	}
	// Runs outlive the requests that start them, but not the server.
	runs := &runGroup{ctx: context.WithoutCancel(ctx)}
	launch := func(ctx context.Context, req api.LaunchRequest) (*engine.Run, error) {
		o := ready.Load()
		if o == nil {
			return nil, errors.New("the server is starting; try again")
		}
		c, _ := api.CallerFrom(ctx)
		return launchRun(o, runs, log, req, c.Name)
	}
	var afterAnswer atomic.Pointer[func(context.Context, *engine.AnswerResult) bool]
	after := func(ctx context.Context, res *engine.AnswerResult) bool {
		if f := afterAnswer.Load(); f != nil {
			return (*f)(ctx, res)
		}
		return false
	}
	o, err := becomeOwnerWith(dir, "iterion serve", opts, after, io.Discard, launch)
	if err != nil {
		return err
	}
	defer o.Close()
	res := &resumer{o: o, runs: runs, log: log}
	resume := res.released
	afterAnswer.Store(&resume)
	ready.Store(o)
	recoverInterrupted(o, runs, log)
	// Workspaces of runs stopped long ago go, GitHub's and the API's alike;
	// waited for before the store closes.
	var sweeping sync.WaitGroup
	defer sweeping.Wait()
	sweepCtx, stopSweep := context.WithCancel(ctx)
	defer stopSweep() // runs first: serve may return early, on an error
	sweeping.Go(func() { sweepWorkspaces(sweepCtx, o, cmp.Or(cfg.GitHub.KeepWorkspaces, 7*24*time.Hour), log) })

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.Handle("GET /metrics", metricsHandler(o.db, log))
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if _, err := o.db.Runs(r.Context(), engine.RunFilter{Limit: 1}); err != nil {
			http.Error(w, "store unavailable", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	if withGitHub {
		// The worker stops with ctx, before the store closes.
		workerDone, err := serveGitHub(ctx, ghCfg, o, runs, log, mux, after, res, &relay)
		if err != nil {
			return err
		}
		defer func() { <-workerDone }()
		log.Info("GitHub App webhooks served on POST /webhooks/github", "app_id", ghCfg.appID)
	} else {
		log.Info("GitHub App off: set ITERION_GITHUB_APP_ID (or github.app_id), the webhook secret and the private key to serve it")
	}
	if token := os.Getenv("ITERION_API_TOKEN"); token != "" {
		// Answers and launches through this token are recorded as its name.
		name := cmp.Or(strings.TrimSpace(os.Getenv("ITERION_API_TOKEN_NAME")), "api")
		mux.Handle("/api/", api.RequireToken(token, name, o.apiHandler))
		log.Info("the REST API is served on "+addr+" for requests with the token, and on the unix socket", "token_name", name)
	} else {
		log.Info("the REST API is served on the unix socket only; set ITERION_API_TOKEN to serve it on " + addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "iterion serve listening on http://%s (store %s)\n", ln.Addr(), dir)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.Info("stopping: no new requests; waiting for the runs in flight")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	_ = srv.Shutdown(sctx)
	done := make(chan struct{})
	go func() { runs.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-sctx.Done():
		log.Warn("runs still in flight continue at the next start")
	}
	return nil
}

// launchRun compiles a workflow, resolves its vars and starts it in the
// background, recording actor (the API's authenticated caller) as who
// started it.
func launchRun(o *owner, runs *runGroup, log *slog.Logger, req api.LaunchRequest, actor string) (*engine.Run, error) {
	bad := func(format string, args ...any) error { return &api.BadRequestError{Err: fmt.Errorf(format, args...)} }
	path := filepath.Clean(req.FilePath)
	if filepath.IsAbs(path) || strings.HasPrefix(path, "..") {
		return nil, bad("file_path %q must be relative to the server's directory", req.FilePath)
	}
	src, err := readWorkflow(path)
	if err != nil {
		return nil, bad("%v", err)
	}
	w, ds := dsl.CompileSource(path, src)
	if ds.HasErrors() {
		return nil, bad("%s has errors:\n%s", path, dsl.RenderString(ds, map[string][]byte{path: src}))
	}
	vars, err := engine.ResolveVars(w, req.Vars, req.Preset)
	if err != nil {
		return nil, bad("%s: %v", path, err)
	}
	id := req.RunID
	if id == "" {
		id = engine.NewRunID(time.Now())
	} else if !engine.ValidRunID(id) {
		return nil, bad("run_id %q: use 1 to 64 of a-z, 0-9 and -", id)
	}
	if _, err := o.db.Run(context.Background(), id); err == nil {
		return nil, bad("run %s already exists", id)
	}
	// Reported to the caller now, not logged after a 201.
	if err := o.engine.Preflight(w); err != nil {
		return nil, bad("%s cannot run on this server: %v", path, err)
	}
	// Its own empty workspace: never the server's directory.
	dir, err := prepareWorkDir(o, id)
	if err != nil {
		return nil, err
	}
	runs.wg.Go(func() {
		if _, err := o.engine.Start(runs.ctx, engine.StartRequest{Workflow: w, RunID: id, Vars: vars, Trigger: engine.Trigger{Source: "api", Actor: actor}, File: path, WorkDir: dir}); err != nil {
			log.Error("starting a run failed", "run", id, "err", err)
		}
	})
	return &engine.Run{ID: id, Status: engine.StatusRunning, Workflow: w.Name}, nil
}

// recoverInterrupted continues, in the background, every run a previous
// process left running.
func recoverInterrupted(o *owner, runs *runGroup, log *slog.Logger) {
	interrupted, err := o.db.Runs(context.Background(), engine.RunFilter{Status: engine.StatusRunning})
	if err != nil {
		log.Error("listing interrupted runs failed", "err", err)
		return
	}
	for _, r := range interrupted {
		w, err := loadWorkflow(io.Discard, r.File)
		if err != nil {
			log.Error("an interrupted run cannot continue", "run", r.ID, "err", err)
			continue
		}
		log.Info("continuing an interrupted run", "run", r.ID)
		runs.wg.Go(func() {
			if _, err := o.engine.Resume(runs.ctx, engine.ResumeRequest{Workflow: w, RunID: r.ID, Force: true, WorkDir: resumeDir(o, r), Via: "recovery", Expect: engine.StatusRunning}); err != nil {
				log.Error("continuing an interrupted run failed", "run", r.ID, "err", err)
			}
		})
	}
}
