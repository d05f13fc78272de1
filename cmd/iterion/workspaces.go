package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// Under serve every run works in a workspace of its own, the store's
// workspaces/<run> (with its sandbox's HOME beside it, <run>.home). The
// channels collect the workspaces of their runs (the GitHub App, its
// checkouts: ghbot.Service); serve collects those of the runs no channel
// is attached to, which it launched itself (the REST API) or continued
// for iterion run.

// workspacesDir holds the workspaces of the server's runs, one per run id:
// a GitHub run's checkout, an empty directory for the others.
func workspacesDir(o *owner) string {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		dir = o.dir
	}
	return filepath.Join(dir, "workspaces")
}

// prepareWorkDir returns the workspace of run id, creating it (empty)
// when missing: never the server's own directory, which may hold its
// config, key or store.
func prepareWorkDir(o *owner, id string) (string, error) {
	dir := filepath.Join(workspacesDir(o), id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating the workspace of run %s: %w", id, err)
	}
	return dir, nil
}

// serveCollects reports whether serve collects the workspace of run: one
// under workspaces/ of a run no channel is attached to (a run of iterion
// run keeps the directory it worked in, and a channel's run is its
// channel's).
func serveCollects(o *owner, run *engine.Run) bool {
	return len(run.Channels) == 0 && filepath.Dir(run.WorkDir) == workspacesDir(o)
}

// removeEndedWorkspace deletes the workspace of a run serve collects that
// just ended for good (finished, or failed without a way to resume); a run
// that may still continue keeps it.
func removeEndedWorkspace(o *owner, runID string, log *slog.Logger) {
	run, err := o.db.Run(context.Background(), runID)
	if err != nil || !serveCollects(o, run) || (run.Status != engine.StatusFinished && run.Status != engine.StatusFailed) {
		return
	}
	if err := removeRunWorkspace(o.dir, run.ID); err != nil {
		log.Warn("removing a finished run's workspace failed", "run", run.ID, "err", err)
	}
}

// sweep removes, at start and then every sweepEvery until ctx ends, the
// workspaces serve collects of runs that stopped resumably long ago (see
// sweepOnce) and the runs past the retention (see retire).
func sweep(ctx context.Context, o *owner, keep, retention time.Duration, log *slog.Logger) {
	tick := time.NewTicker(sweepEvery)
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

// sweepOnce removes the workspaces serve collects of runs that stopped
// resumably (cancelled, failed_resumable) and have not changed for keep
// at now: they are unlikely to be resumed. (Finished and failed runs lose
// theirs at once.)
func sweepOnce(ctx context.Context, o *owner, keep time.Duration, now time.Time, log *slog.Logger) {
	runs, err := o.db.Runs(ctx, engine.RunFilter{})
	if err != nil {
		if ctx.Err() == nil {
			log.Error("listing runs for old workspaces failed", "err", err)
		}
		return
	}
	for _, r := range runs {
		if (r.Status != engine.StatusCancelled && r.Status != engine.StatusFailedResumable) || now.Sub(r.UpdatedAt) < keep || !serveCollects(o, r) {
			continue
		}
		if _, err := os.Stat(r.WorkDir); err != nil {
			continue
		}
		log.Info("removing the workspace of a run stopped long ago", "run", r.ID, "status", r.Status, "updated", r.UpdatedAt)
		if err := removeRunWorkspace(o.dir, r.ID); err != nil {
			log.Warn("removing an old workspace failed", "run", r.ID, "err", err)
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
