package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/iterion-bot/iterion/engine"
)

// fullDisk is a store whose filesystem fills up: while full is set it
// refuses the writes of a running run (as store.DB does below its reserve)
// but lets a run's end be recorded.
type fullDisk struct {
	engine.Store
	full atomic.Bool
}

func (f *fullDisk) Commit(ctx context.Context, c engine.Change) error {
	if f.full.Load() && c.Status == "" {
		return fmt.Errorf("store /srv/st: 12 MiB free, less than the 256 MiB reserve: %w", engine.ErrStorageFull)
	}
	return f.Store.Commit(ctx, c)
}

// A full disk stops a run failed_resumable, STORAGE_FULL; once space is
// freed it continues from its checkpoint.
func TestStorageFullStopsTheRunResumably(t *testing.T) {
	w := mustCompile(t, chainWorkflow(3))
	db := &fullDisk{Store: newStore(t)}
	nodes := 0
	e := engine.New(engine.Options{Store: db, Sandbox: testSandbox(t), OnEvent: func(ev engine.Event) {
		if ev.Type == engine.EventNodeFinished {
			if nodes++; nodes == 1 {
				db.full.Store(true)
			}
		}
	}})
	ctx := t.Context()
	run, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "full", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatalf("Start: %v (want the run stopped, not an error)", err)
	}
	if run.Status != engine.StatusFailedResumable || run.FailureCode != engine.CodeStorageFull {
		t.Fatalf("run = %s %s %q, want failed_resumable STORAGE_FULL", run.Status, run.FailureCode, run.Error)
	}
	db.full.Store(false)
	run, err = e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: "full"})
	if err != nil || run.Status != engine.StatusFinished {
		t.Fatalf("resume after space was freed: %v %+v", err, run)
	}
}
