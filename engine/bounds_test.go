package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"weak"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// countingStore counts the bytes the engine hands to the store, as JSON,
// and the size of every checkpoint it writes.
type countingStore struct {
	*store.DB
	mu          sync.Mutex
	handed      int64
	checkpoints []int
}

func (s *countingStore) Commit(ctx context.Context, c engine.Change) error {
	n := int64(len(c.Checkpoint))
	for _, ev := range c.Events {
		b, _ := json.Marshal(ev)
		n += int64(len(b))
	}
	for _, h := range c.History {
		n += int64(len(h.Data))
	}
	for _, ix := range c.Interactions {
		b, _ := json.Marshal(ix)
		n += int64(len(b))
	}
	for _, row := range c.Outbox {
		n += int64(len(row.Payload))
	}
	s.mu.Lock()
	s.handed += n
	if c.Checkpoint != nil {
		s.checkpoints = append(s.checkpoints, len(c.Checkpoint))
	}
	s.mu.Unlock()
	return s.DB.Commit(ctx, c)
}

// liveBytes is what the store holds for a run at the end, as JSON: its
// events, its history entries and its last checkpoint.
func liveBytes(t *testing.T, db *store.DB, runID string) int64 {
	t.Helper()
	ctx := context.Background()
	raw, err := db.Checkpoint(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(raw))
	evs, err := db.Events(ctx, runID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		n += int64(len(b))
	}
	var ck struct {
		Entries map[string]int `json:"entries"`
	}
	if err := json.Unmarshal(raw, &ck); err != nil {
		t.Fatal(err)
	}
	for series := range ck.Entries {
		hs, err := db.History(ctx, runID, series, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			n += int64(len(h.Data))
		}
	}
	return n
}

// lastOutput is the output of node's last node_finished event.
func lastOutput(t *testing.T, db engine.Store, runID, node string) map[string]any {
	t.Helper()
	evs, err := db.Events(context.Background(), runID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	for _, ev := range evs {
		if ev.Type == engine.EventNodeFinished && ev.NodeID == node {
			out, _ = ev.Data["output"].(map[string]any)
		}
	}
	if out == nil {
		t.Fatalf("run %s: node %s never finished", runID, node)
	}
	return out
}

// selfHistoryLoop is a loop of n iterations of a node that reads its own
// history and outputs about 230 bytes.
func selfHistoryLoop(n int) string {
	return fmt.Sprintf(`compute c:
  expr:
    n: "length(outputs.c.history)"
    note: "'%s'"
workflow w:
  entry: c
  c -> c as l(%d)
  c -> done
`, strings.Repeat("x", 200), n-1)
}

// The store grew quadratically: a loop whose node read its own .history
// rewrote its whole history in every checkpoint, and every checkpoint
// carried every output of the run. Now each output is written once, as an
// entry, and the checkpoint keeps a count: over 500 iterations the engine
// hands the store at most 3 times what the store holds at the end (the
// events, the entries and the last checkpoint), and the checkpoint stays
// the same size. Before, the first case handed the store 28 MB for 0.49 MB
// of live data, 58 times.
func TestLoopStoreStaysWithinAMultipleOfLiveData(t *testing.T) {
	const iterations, multiple = 500, 3
	tests := []struct {
		name string
		src  string
		node string
		want any // the last output's n
	}{
		{"a node that reads its own history", selfHistoryLoop(iterations), "c", float64(iterations - 1)},
		{"a large output before the loop", fmt.Sprintf(`compute big:
  expr:
    text: "'%s'"
compute c:
  expr:
    n: "loop.l.iteration"
workflow w:
  entry: big
  big -> c
  c -> c as l(%d)
  c -> done
`, strings.Repeat("x", 4000), iterations-1), "c", float64(iterations - 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := newStore(t)
			cs := &countingStore{DB: db}
			e := newEngine(t, cs, nil)
			run := start(t, e, mustCompile(t, tc.src), nil)
			if run.Status != engine.StatusFinished {
				t.Fatalf("run = %s %s %s", run.Status, run.FailureCode, run.Error)
			}
			// In the first case the node read its whole history each time,
			// through the store's entries: at last the 499 outputs before it.
			if got := lastOutput(t, db, run.ID, tc.node)["n"]; got != tc.want {
				t.Errorf("last n = %v, want %v", got, tc.want)
			}
			live := liveBytes(t, db, run.ID)
			if cs.handed > multiple*live {
				t.Errorf("the engine handed the store %d bytes for %d bytes of live data: %.1f times, want at most %d", cs.handed, live, float64(cs.handed)/float64(live), multiple)
			}
			early, last := cs.checkpoints[10], cs.checkpoints[len(cs.checkpoints)-1]
			if last > early+64 || last > 1024 {
				t.Errorf("checkpoint: %d bytes at the 10th write, %d at the last; want no growth and at most 1 KiB", early, last)
			}
			t.Logf("handed %d bytes, live %d: %.2f times; checkpoint %d bytes", cs.handed, live, float64(cs.handed)/float64(live), last)
			outputs, err := engine.ReadOutputs(context.Background(), db, run.ID)
			if err != nil || outputs[tc.node]["n"] != int64(iterations-1) {
				t.Errorf("ReadOutputs = %v, %v; want %s's last output", outputs, err, tc.node)
			}
		})
	}
}

// A run resumed from its checkpoint reads its outputs and histories back
// from the store's entries: a human node in a loop, answered three times,
// each answer recorded (and the loop edge's with mapping, which reads the
// human node's history, rendered) before the run executes again.
func TestHistoryAcrossResumes(t *testing.T) {
	src := `
schema ok:
  ok: bool

compute c:
  expr:
    n: "length(outputs.c.history)"
    h: "length(outputs.h.history)"
    hs: "length(input.hs)"

human h:
  instructions: "iteration {{outputs.c.n}}"
  output: ok

workflow w:
  entry: c
  c -> h
  h -> c as l(2) with { hs: "{{outputs.h.history}}" }
  h -> done
`
	w := mustCompile(t, src)
	db := newStore(t)
	e := newEngine(t, db, nil)
	run := start(t, e, w, nil)
	for i := 0; run.Status == engine.StatusPausedWaitingHuman; i++ {
		if i == 3 {
			t.Fatal("the loop did not end")
		}
		// A new engine each time: nothing is carried over in memory.
		var err error
		run, err = newEngine(t, db, nil).Resume(context.Background(), engine.ResumeRequest{Workflow: w, RunID: run.ID, Answers: map[string]string{"ok": "yes"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if run.Status != engine.StatusFinished {
		t.Fatalf("run = %s %s %s", run.Status, run.FailureCode, run.Error)
	}
	out := lastOutput(t, db, run.ID, "c")
	for _, k := range []string{"n", "h", "hs"} {
		if out[k] != float64(2) {
			t.Errorf("last c: %s = %v, want 2 (output %v)", k, out[k], out)
		}
	}
}

// A run has a stored-bytes budget: a loop that would store more fails
// BUDGET_EXCEEDED before its next node, naming the node and the budget;
// an output that alone would pass it is refused before it is stored.
func TestStoredBytesBudget(t *testing.T) {
	ctx := context.Background()
	t.Run("loop", func(t *testing.T) {
		db := newStore(t)
		e := newEngine(t, db, nil)
		run, err := e.StartLimited(ctx, mustCompile(t, selfHistoryLoop(1000)), "budget-loop", t.TempDir(), 64<<10, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := "node c: the run has stored "
		if run.FailureCode != engine.CodeBudgetExceeded || !strings.HasPrefix(run.Error, want) || !strings.Contains(run.Error, "its budget of stored data (64.0 KiB)") {
			t.Fatalf("run = %s %s %q, want BUDGET_EXCEEDED %q… naming the 64.0 KiB budget", run.Status, run.FailureCode, run.Error, want)
		}
		if n := lastOutput(t, db, run.ID, "c")["n"].(float64); n < 20 || n > 200 {
			t.Errorf("the loop stopped after %v outputs; 64 KiB holds some 60 iterations", n)
		}
		if !strings.Contains(strings.Join(eventTypes(t, db, run.ID), " "), engine.EventBudgetExceeded) {
			t.Error("no budget_exceeded event")
		}
	})
	t.Run("one large output", func(t *testing.T) {
		db := newStore(t)
		e := newEngine(t, db, nil)
		src := "tool t:\n  command: `head -c 100000 /dev/zero | tr '\\0' a`\nworkflow w:\n  entry: t\n  t -> done\n"
		run, err := e.StartLimited(ctx, mustCompile(t, src), "budget-output", t.TempDir(), 64<<10, 0)
		if err != nil {
			t.Fatal(err)
		}
		if run.FailureCode != engine.CodeBudgetExceeded || !strings.Contains(run.Error, "node t: its output of 97.7 KiB, stored 2 times, would take the run past its budget of stored data (64.0 KiB") {
			t.Fatalf("run = %s %s %q", run.Status, run.FailureCode, run.Error)
		}
		if strings.Contains(strings.Join(eventTypes(t, db, run.ID), " "), "node_finished:t") {
			t.Error("the refused output was stored")
		}
	})
}

// What a run holds in memory for .history reads is bounded: past the
// cap, the node whose history is read fails, naming it and the cap.
func TestHistoryMemoryCap(t *testing.T) {
	db := newStore(t)
	e := newEngine(t, db, nil)
	run, err := e.StartLimited(context.Background(), mustCompile(t, selfHistoryLoop(1000)), "history-cap", t.TempDir(), 0, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	if run.FailureCode != engine.CodeBudgetExceeded || !strings.Contains(run.Error, "node c: outputs.c.history would hold 19 outputs of 4") || !strings.Contains(run.Error, "more than the 4.0 KiB a run keeps for .history reads") {
		t.Fatalf("run = %s %s %q", run.Status, run.FailureCode, run.Error)
	}
}

// 1,000 references to a 3 MB output: the prompt or command is refused at
// once, naming the node, the cap and the reference, and nothing reaches
// the model or the shell.
func TestRenderedSizeCap(t *testing.T) {
	refs := strings.Repeat("{{outputs.big.result}} ", 1000)
	big := "tool big:\n  command: `head -c 3000000 /dev/zero | tr '\\0' a`\n"
	tests := []struct {
		name, node, wantCode, want string
	}{
		{"prompt", "agent a:\n  model: \"m/x\"\n  user: \"" + refs + "\"\n", engine.CodeContextLengthExceeded, "node a: prompt: the rendered text would pass 1.0 MiB"},
		{"command", "tool a:\n  command: \"echo " + refs + "\"\n", engine.CodeToolFailedPermanent, "node a: command: the rendered text would pass 1.0 MiB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			called := false
			backend := &script{run: func(context.Context, *engine.Task) (*engine.Result, error) {
				called = true
				return &engine.Result{}, nil
			}}
			db, err := store.Open(t.TempDir(), store.Options{}) // a 3 MB output needs more than SmallMemory
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			e := newEngine(t, db, map[string]engine.Backend{"claw": backend})
			run := start(t, e, mustCompile(t, big+tc.node+"workflow w:\n  entry: big\n  big -> a\n  a -> done\n"), nil)
			if run.FailureCode != tc.wantCode || !strings.HasPrefix(run.Error, tc.want) ||
				!strings.Contains(run.Error, "its largest reference is {{outputs.big.result}} (2.9 MiB, used 1000 times)") {
				t.Fatalf("run = %s %s %q, want %s %q…", run.Status, run.FailureCode, run.Error, tc.wantCode, tc.want)
			}
			if called {
				t.Error("the model was called")
			}
		})
	}
}

// The output validators belong to the run, not to a process-global map:
// after 500 workflows are compiled and run, none of their schemas is kept.
func TestSchemaValidatorsAreNotKept(t *testing.T) {
	const runs = 500
	src := "schema v:\n  n: int\ncompute c:\n  output: v\n  expr:\n    n: \"1\"\nworkflow w:\n  entry: c\n  c -> done\n"
	db := newStore(t)
	e := newEngine(t, db, nil)
	schemas := make([]weak.Pointer[dsl.Schema], 0, runs)
	for i := range runs {
		w := mustCompile(t, src)
		schemas = append(schemas, weak.Make(w.Node("c").Output))
		if run := start(t, e, w, nil); run.Status != engine.StatusFinished {
			t.Fatalf("run %d = %s %s", i, run.Status, run.Error)
		}
	}
	runtime.GC()
	kept := 0
	for _, p := range schemas {
		if p.Value() != nil {
			kept++
		}
	}
	if kept > 0 {
		t.Errorf("%d of %d schemas are still referenced after their runs", kept, runs)
	}
}

// A tool node with an output schema must print a JSON object: anything
// else fails the node, quoting what it printed and its exit status. The
// {result: …} wrapping stays for nodes without a schema.
func TestToolOutputAgainstSchema(t *testing.T) {
	tests := []struct {
		name     string
		schema   bool
		command  string
		wantCode string
		want     string
	}{
		{name: "text without a schema", command: "echo hello", want: "hello"},
		{name: "object with a schema", schema: true, command: `echo '{"n": 3}'`},
		{name: "text with a schema", schema: true, command: "echo hello world", wantCode: engine.CodeSchemaValidation,
			want: `node t: command exited with status 0 and printed "hello world", which is not a JSON object: output schema v needs one with its fields`},
		{name: "a list with a schema", schema: true, command: "echo '[1, 2]'", wantCode: engine.CodeSchemaValidation,
			want: `printed "[1, 2]", which is not a JSON object`},
		{name: "broken JSON with a schema", schema: true, command: "echo '{n: 3}'", wantCode: engine.CodeSchemaValidation,
			want: `printed "{n: 3}", which is not a JSON object (invalid character 'n' looking for beginning of object key string)`},
		{name: "nothing with a schema", schema: true, command: "true", wantCode: engine.CodeSchemaValidation,
			want: "printed nothing, which is not a JSON object"},
		{name: "a long text is cut", schema: true, command: `head -c 500 /dev/zero | tr '\0' a`, wantCode: engine.CodeSchemaValidation,
			want: `printed "` + strings.Repeat("a", 200) + `"…, which`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "schema v:\n  n: int\ntool t:\n"
			if tc.schema {
				src += "  output: v\n"
			}
			src += "  command: `" + tc.command + "`\nworkflow w:\n  entry: t\n  t -> done\n"
			db := newStore(t)
			run := start(t, newEngine(t, db, nil), mustCompile(t, src), nil)
			if tc.wantCode == "" {
				if run.Status != engine.StatusFinished {
					t.Fatalf("run = %s %s %q", run.Status, run.FailureCode, run.Error)
				}
				if tc.want != "" {
					if got := toolResult(t, db, run.ID); got != tc.want {
						t.Errorf("result = %q, want %q", got, tc.want)
					}
				}
				return
			}
			if run.FailureCode != tc.wantCode || !strings.Contains(run.Error, tc.want) {
				t.Errorf("run = %s %s %q, want %s containing %q", run.Status, run.FailureCode, run.Error, tc.wantCode, tc.want)
			}
		})
	}
}
