package main

import (
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
	var addr, storeFlag string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve iterion: own the store, run workflows, answer questions over REST",
		Long: `Serve owns the store directory (--store-dir, else $ITERION_STORE, else .iterion)
and runs until interrupted. It serves:

  /healthz, /readyz                     liveness and readiness
  /metrics                              Prometheus metrics: runs by status, pending deliveries,
                                        outbox rows, the Go runtime
  /api/…                                the run and question API, when $ITERION_API_TOKEN
                                        is set (requests carry Authorization: Bearer <token>);
                                        POST /api/runs {"file_path", "vars", "run_id"} starts a run
  POST /webhooks/github                 the GitHub App's webhooks, when $ITERION_GITHUB_APP_ID is
                                        set (with $ITERION_GITHUB_WEBHOOK_SECRET and
                                        $ITERION_GITHUB_PRIVATE_KEY, PEM text or a file path;
                                        $ITERION_GITHUB_API_URL and $ITERION_GITHUB_URL for
                                        GitHub Enterprise)

on --addr (else $ITERION_ADDR, else :8080), and the same API without a token on the store's
unix socket for other iterion commands on this machine. Runs a previous process left
interrupted continue from their checkpoints at start. On SIGINT or SIGTERM it stops accepting
requests and gives the runs in flight 30 seconds; the ones still running then continue at
the next start.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if addr == "" {
				addr = os.Getenv("ITERION_ADDR")
			}
			if addr == "" {
				addr = ":8080"
			}
			return serve(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), addr, storeDir(storeFlag))
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "", "listen address (default $ITERION_ADDR or :8080)")
	cmd.Flags().StringVar(&storeFlag, "store-dir", "", "store directory (default $ITERION_STORE or .iterion)")
	return cmd
}

// runGroup tracks the runs this server executes, for a graceful stop.
type runGroup struct {
	wg  sync.WaitGroup
	ctx context.Context
}

func serve(ctx context.Context, stdout, stderr io.Writer, addr, dir string) error {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	ghCfg, withGitHub, err := githubFromEnv()
	if err != nil {
		return err
	}
	opts, err := engineOptions(nil)
	if err != nil {
		return err
	}
	opts.Logger = log
	var relay atomic.Pointer[ghbot.Relay]
	if withGitHub {
		opts.OnEvent = relayOnEvent(&relay)
	}
	// Runs outlive the requests that start them, but not the server.
	runs := &runGroup{ctx: context.WithoutCancel(ctx)}
	// The API may be called before becomeOwnerWith returns.
	var ready atomic.Pointer[owner]
	launch := func(_ context.Context, req api.LaunchRequest) (*engine.Run, error) {
		o := ready.Load()
		if o == nil {
			return nil, errors.New("the server is starting; try again")
		}
		return launchRun(o, runs, log, req)
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
	}
	if token := os.Getenv("ITERION_API_TOKEN"); token != "" {
		mux.Handle("/api/", api.RequireToken(token, o.apiHandler))
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
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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
// background.
func launchRun(o *owner, runs *runGroup, log *slog.Logger, req api.LaunchRequest) (*engine.Run, error) {
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
	runs.wg.Go(func() {
		if _, err := o.engine.Start(runs.ctx, engine.StartRequest{Workflow: w, RunID: id, Vars: vars, Trigger: engine.Trigger{Source: "api"}, File: path}); err != nil {
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
			if _, err := o.engine.Resume(runs.ctx, engine.ResumeRequest{Workflow: w, RunID: r.ID, Force: true, WorkDir: workDirOf(o, r), Via: "recovery"}); err != nil {
				log.Error("continuing an interrupted run failed", "run", r.ID, "err", err)
			}
		})
	}
}
