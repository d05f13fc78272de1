package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
)

// BenchmarkLaunchToFirstNode measures what a channel waits for between
// asking for a run and seeing it start: Launch validates, stores the run's
// record (synced) and returns; the run's first node then starts in the
// engine's run group. Reported: launch-ns (until Launch returns, the id in
// hand) and first-node-ns (until the first node_started event).
func BenchmarkLaunchToFirstNode(b *testing.B) {
	w := mustCompile(b, "compute c:\n  expr:\n    x: \"1\"\nworkflow w:\n  entry: c\n  c -> done\n")
	db := newStore(b)
	started := make(chan string, 1)
	e := engine.New(engine.Options{Store: db, Poll: time.Hour, Sandbox: testSandbox(b),
		Workflow: func(context.Context, *engine.Run) (*dsl.Workflow, error) { return w, nil },
		OnEvent: func(ev engine.Event) {
			if ev.Type == engine.EventNodeStarted {
				started <- ev.RunID
			}
		}})
	ctx := context.Background()
	var launchNS, firstNS time.Duration
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		t0 := time.Now()
		run, err := e.Launch(ctx, engine.StartRequest{Workflow: w, RunID: fmt.Sprintf("l-%d", i), WorkDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		launchNS += time.Since(t0)
		if got := <-started; got != run.ID {
			b.Fatalf("first node of %s, want %s", got, run.ID)
		}
		firstNS += time.Since(t0)
		if err := e.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(launchNS.Nanoseconds())/float64(i), "launch-ns")
	b.ReportMetric(float64(firstNS.Nanoseconds())/float64(i), "first-node-ns")
}
