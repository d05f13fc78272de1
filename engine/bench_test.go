package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
)

// The engine's own overhead per node, under the durability rule (a Badger
// store on disk; pauses and ends synced, checkpoints group-committed).
// BENCHMARKS.md records the results.

func chainWorkflow(n int) string {
	var b strings.Builder
	b.WriteString("schema v:\n  n: int\n\n")
	for i := range n {
		fmt.Fprintf(&b, "compute c%d:\n  output: v\n  expr:\n    n: \"%s\"\n\n", i, map[bool]string{true: "0", false: fmt.Sprintf("outputs.c%d.n + 1", i-1)}[i == 0])
	}
	b.WriteString("workflow w:\n  entry: c0\n")
	for i := 0; i+1 < n; i++ {
		fmt.Fprintf(&b, "  c%d -> c%d\n", i, i+1)
	}
	fmt.Fprintf(&b, "  c%d -> done\n", n-1)
	return b.String()
}

func loopWorkflow(n int) string {
	return fmt.Sprintf("compute c:\n  expr:\n    n: \"loop.l.iteration\"\nworkflow w:\n  entry: c\n  c -> c as l(%d)\n  c -> done\n", n-1)
}

func fanOutWorkflow(n int) string {
	var b strings.Builder
	b.WriteString("router split:\n  mode: fan_out_all\n\n")
	for i := range n {
		fmt.Fprintf(&b, "compute b%d:\n  expr:\n    n: \"%d\"\n\n", i, i)
	}
	b.WriteString("compute join:\n  await: wait_all\n  expr:\n    ok: \"true\"\n\nworkflow w:\n  entry: split\n")
	for i := range n {
		fmt.Fprintf(&b, "  split -> b%d\n  b%d -> join\n", i, i)
	}
	b.WriteString("  join -> done\n")
	return b.String()
}

func benchRuns(b *testing.B, src string, nodes int) {
	w := mustCompile(b, src)
	db := newStore(b)
	e := newEngine(b, db, nil)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		run, err := e.Start(ctx, engine.StartRequest{Workflow: w})
		if err != nil || run.Status != engine.StatusFinished {
			b.Fatalf("run: %v %+v", err, run)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nodes)/1e3, "µs/node")
}

func BenchmarkChain100(b *testing.B)  { benchRuns(b, chainWorkflow(100), 100) }
func BenchmarkLoop1000(b *testing.B)  { benchRuns(b, loopWorkflow(1000), 1000) }
func BenchmarkFanOut100(b *testing.B) { benchRuns(b, fanOutWorkflow(100), 102) }

// BenchmarkAnswerReleasesGate measures, in process, the time from an
// answer to the parked await_answers gate letting its run finish.
func BenchmarkAnswerReleasesGate(b *testing.B) {
	src := "agent ask:\n  model: \"m/x\"\n  interaction: async\nawait_answers gate:\n  from: ask\n  timeout: \"1h\"\nworkflow w:\n  entry: ask\n  ask -> gate\n  gate -> done\n"
	w := mustCompile(b, src)
	db := newStore(b)
	posted := make(chan string, 1)
	asker := &script{async: true, run: func(ctx context.Context, t *engine.Task) (*engine.Result, error) {
		id, err := t.PostQuestion(ctx, engine.AsyncQuestion{Question: "go?"})
		if err != nil {
			return nil, err
		}
		posted <- id
		return &engine.Result{}, nil
	}}
	e := newEngine(b, db, map[string]engine.Backend{"claw": asker})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		runID := fmt.Sprintf("gate-%d", i)
		done := make(chan *engine.Run, 1)
		go func() {
			run, _ := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: runID})
			done <- run
		}()
		id := <-posted
		if _, err := e.Answer(ctx, engine.AnswerRequest{RunID: runID, InteractionID: id, Text: "yes"}); err != nil {
			b.Fatal(err)
		}
		if run := <-done; run.Status != engine.StatusFinished {
			b.Fatalf("run %+v", run)
		}
	}
}

// A chain of 100 tool nodes running true, on each sandbox driver: what
// the sandbox adds to a run of real processes.
func BenchmarkToolChainSandbox(b *testing.B) {
	var src strings.Builder
	for i := range 100 {
		fmt.Fprintf(&src, "tool t%d:\n  command: \"true\"\n", i)
	}
	src.WriteString("workflow w:\n  entry: t0\n")
	for i := range 99 {
		fmt.Fprintf(&src, "  t%d -> t%d\n", i, i+1)
	}
	src.WriteString("  t99 -> done\n")
	w := mustCompile(b, src.String())
	for _, driver := range []string{"host", "bwrap"} {
		b.Run(driver, func(b *testing.B) {
			sb, err := nodesandbox.New(nodesandbox.Options{Driver: driver})
			if err != nil {
				b.Fatal(err)
			}
			e := engine.New(engine.Options{Store: newStore(b), Sandbox: sb})
			dir := b.TempDir()
			for b.Loop() {
				run, err := e.Start(context.Background(), engine.StartRequest{Workflow: w, WorkDir: dir})
				if err != nil || run.Status != engine.StatusFinished {
					b.Fatalf("run: %v %+v", err, run)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/100/1000, "ms/node")
		})
	}
}
