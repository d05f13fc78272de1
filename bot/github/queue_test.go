package github

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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
		if _, err := h.queue.queue.QueueLaunch(ctx, scope, key, []byte(payload)); err != nil {
			t.Fatal(err)
		}
	}
	// k1's run was launched before the crash, ran, and has just ended.
	k1 := &engine.Run{ID: RunID("acme", "app", "k1"), Workflow: "review", Status: engine.StatusFinished, Trigger: Origin{Repo: "acme/app", PR: 7, Installation: 42}.Trigger("")}
	runs.runs[0].Status = engine.StatusFinished
	runs.runs = append(runs.runs, k1)
	o := h.options()
	o.Actions = existingLaunch{fakeRuns: runs, started: map[string]string{"k1": k1.ID}}
	h = NewHandler(o)
	if err := h.StartQueued(ctx, k1); err != nil {
		t.Fatal(err)
	}
	h.WaitJobs()
	if len(runs.launches) != 1 || runs.launches[0].Key != "k2" {
		t.Errorf("after k1's run ended: new launches %+v, want k2's", runs.launches)
	}
}

// queueTwo queues two launches, by bo, on PR 7.
func queueTwo(t *testing.T, h *Handler) {
	t.Helper()
	for _, key := range []string{"k1", "k2"} {
		payload := fmt.Sprintf(`{"InstallationID": 42, "Owner": "acme", "Repo": "app", "PR": 7, "Workflow": "review", "Path": "workflows/review.bot", "Ref": "abc1234567", "Actor": "bo", "Key": %q}`, key)
		if _, err := h.queue.queue.QueueLaunch(t.Context(), PRScope("acme/app", 7), key, []byte(payload)); err != nil {
			t.Fatal(err)
		}
	}
}

// A PR closed while runs were queued on it: when its turn comes, each is
// dropped with a note to whoever asked, and nothing starts.
func TestQueueOfAClosedPRIsDropped(t *testing.T) {
	h, cs, runs := newHandlerPR(t, strings.Replace(handlerConfig, "concurrency: supersede\n", "", 1), strings.Replace(prJSON, `"open"`, `"closed"`, 1))
	queueTwo(t, h)
	runs.runs[0].Status = engine.StatusFinished
	if err := h.StartQueued(t.Context(), runs.runs[0]); err != nil {
		t.Fatal(err)
	}
	h.WaitJobs()
	if len(runs.launches) != 0 {
		t.Errorf("launches on a closed PR: %+v", runs.launches)
	}
	if q, _ := h.queue.queue.QueuedLaunches(t.Context(), PRScope("acme/app", 7)); len(q) != 0 {
		t.Errorf("still queued: %+v", q)
	}
	notes := 0
	for _, c := range cs.comments {
		if strings.HasPrefix(c.GetBody(), "@bo the queued run of `review` was dropped: the pull request was closed") {
			notes++
		}
	}
	if notes != 2 {
		t.Errorf("%d notes of a dropped launch, want 2", notes)
	}
}

// blockingLaunch holds each launch until released.
type blockingLaunch struct {
	*fakeRuns
	entered, release chan struct{}
}

func (b blockingLaunch) Launch(ctx context.Context, l Launch) (string, error) {
	b.entered <- struct{}{}
	<-b.release
	return b.fakeRuns.Launch(ctx, l)
}

// StartQueued returns while the queued run's launch (a checkout being
// cloned) is still going: the relay that calls it is not held up.
func TestStartQueuedDoesNotWaitForTheLaunch(t *testing.T) {
	h, _, runs := newHandler(t, strings.Replace(handlerConfig, "concurrency: supersede\n", "", 1))
	queueTwo(t, h)
	b := blockingLaunch{fakeRuns: runs, entered: make(chan struct{}), release: make(chan struct{})}
	o := h.options()
	o.Actions = b
	h = NewHandler(o)
	runs.runs[0].Status = engine.StatusFinished
	returned := make(chan error, 1)
	go func() { returned <- h.StartQueued(t.Context(), runs.runs[0]) }()
	<-b.entered // the launch is under way
	select {
	case err := <-returned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // a watchdog, not a wait
		t.Fatal("StartQueued waits for the launch")
	}
	close(b.release)
	h.WaitJobs()
	if len(runs.launches) != 1 || runs.launches[0].Key != "k1" {
		t.Errorf("launches %+v, want k1's", runs.launches)
	}
}
