package claw_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
)

// BenchmarkTurn measures a model turn through claw and the engine against
// the fake model server on loopback: 50 turns of an agent that calls the
// await_answers tool (answered inline, no tool time), then answers. The
// time per turn includes the HTTP round trip and the fake server's work,
// so it bounds claw's own overhead from above.
func BenchmarkTurn(b *testing.B) {
	const turns = 50
	script := &fakellm.Script{}
	for i := range turns {
		script.Turns = append(script.Turns, fakellm.Turn{Name: fmt.Sprint(i), ToolCalls: []fakellm.ToolCall{{Name: "await_answers"}}})
	}
	script.Turns = append(script.Turns, fakellm.Turn{Name: "final", Text: "done"})
	w, ds := dsl.CompileSource("t.bot", []byte("agent a:\n  model: \"anthropic/m\"\n  interaction: async\n  tool_max_steps: 100\nworkflow w:\n  entry: a\n  a -> done\n"))
	if ds.HasErrors() {
		b.Fatal(ds)
	}
	f := newFixture(b, script, "anthropic")
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		f.fake.Reset()
		run, err := f.engine.Start(ctx, engine.StartRequest{Workflow: w, RunID: fmt.Sprintf("b%d", i), WorkDir: b.TempDir()})
		if err != nil || run.Status != engine.StatusFinished {
			b.Fatalf("run %+v %v", run, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*(turns+1)), "µs/turn")
}
