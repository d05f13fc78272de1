package github

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/engine"
)

// existingLaunch is fakeRuns whose Launch, like the real Launcher, returns
// the run a key already started (Launcher.Exists) instead of a new one.
type existingLaunch struct {
	*fakeRuns
	started map[string]string // key → run id already in the store
}

func (e existingLaunch) Launch(ctx context.Context, l Launch) (string, error) {
	if id, ok := e.started[l.Key]; ok {
		return id, nil
	}
	return e.fakeRuns.Launch(ctx, l)
}

// A crash between startNext's launch and its DropLaunch leaves the head of
// the queue naming a run that exists. When that run ends, StartQueued
// drops the stale head and starts the next queued request, instead of
// "starting" the finished run again and stalling the queue.
func TestQueueSurvivesCrashBeforeDrop(t *testing.T) {
	h, _, runs := newHandler(t, strings.Replace(handlerConfig, "concurrency: supersede\n", "", 1))
	ctx := context.Background()
	scope := PRScope("acme/app", 7)
	for _, key := range []string{"k1", "k2"} {
		payload := fmt.Sprintf(`{"InstallationID": 42, "Owner": "acme", "Repo": "app", "PR": 7, "Workflow": "review", "Path": "workflows/review.bot", "Ref": "abc1234567", "Actor": "bo", "Key": %q}`, key)
		if _, err := h.Queue.QueueLaunch(ctx, scope, key, []byte(payload)); err != nil {
			t.Fatal(err)
		}
	}
	// k1's run was launched before the crash, ran, and has just ended.
	k1 := &engine.Run{ID: RunID("acme", "app", "k1"), Workflow: "review", Status: engine.StatusFinished, Trigger: Origin{Repo: "acme/app", PR: 7, Installation: 42}.Trigger("")}
	runs.runs[0].Status = engine.StatusFinished
	runs.runs = append(runs.runs, k1)
	h.Actions = existingLaunch{fakeRuns: runs, started: map[string]string{"k1": k1.ID}}
	if err := h.StartQueued(ctx, k1); err != nil {
		t.Fatal(err)
	}
	if len(runs.launches) != 1 || runs.launches[0].Key != "k2" {
		t.Errorf("after k1's run ended: new launches %+v, want k2's", runs.launches)
	}
}
