package engine

import (
	"context"

	"github.com/iterion-bot/iterion/dsl"
)

// StartLimited is Start with a stored-bytes budget and a .history cap of
// the test's choosing, until Options carries them (see Engine.limits).
func (e *Engine) StartLimited(ctx context.Context, w *dsl.Workflow, runID, workdir string, storedBytes, historyBytes int64) (*Run, error) {
	now := e.now()
	run := &Run{ID: runID, Workflow: w.Name, WorkflowHash: w.Hash, Status: StatusRunning, WorkDir: workdir, Vars: map[string]any{}, CreatedAt: now, UpdatedAt: now}
	if err := e.store.CreateRun(ctx, run, []Event{{Type: EventRunStarted, Time: now}}); err != nil {
		return nil, err
	}
	return e.driveLimited(ctx, w, run, newCheckpoint(w), workdir, runLimits{storedBytes: storedBytes, historyBytes: historyBytes})
}

// WatchedRuns is how many runs have WaitChange waiters.
func (e *Engine) WatchedRuns() int { return e.changes.watched() }
