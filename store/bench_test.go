package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/iterion-bot/iterion/engine"
)

// The durability modes BENCHMARKS.md compares: Badger syncing every
// transaction (SyncWrites) against the store syncing only the
// acknowledged ones.
var durabilityModes = []struct {
	name       string
	syncWrites bool
}{
	{"explicit-sync", false},
	{"sync-writes", true},
}

// benchRun creates a run for a benchmark and returns its generation.
func benchRun(b *testing.B, db *DB, id string) int64 {
	b.Helper()
	run := &engine.Run{ID: id, Workflow: "bench", Status: engine.StatusRunning, Channels: []string{"github"}}
	if err := db.CreateRun(b.Context(), run, []engine.Event{{Type: engine.EventRunStarted}}); err != nil {
		b.Fatalf("CreateRun: %v", err)
	}
	return run.Generation
}

// BenchmarkAnswer measures Answer, an acknowledged (synced) intent: the
// compare-and-set, inbox message, event and outbox row.
func BenchmarkAnswer(b *testing.B) {
	for _, mode := range durabilityModes {
		b.Run(mode.name, func(b *testing.B) {
			db := newDB(b, b.TempDir(), Options{syncWrites: mode.syncWrites})
			gen := benchRun(b, db, "r-bench")
			// Each question is posted just before its answer, outside the
			// timer: posting checks the node's pending questions for the
			// same one, so posting all first would cost b.N squared.
			for i := range b.N {
				b.StopTimer()
				ix, err := db.PostQuestion(b.Context(), engine.PostRequest{RunID: "r-bench", Generation: gen, NodeID: "agent",
					Questions: map[string]any{engine.QuestionKey: fmt.Sprintf("Which database should service %d use?", i)}})
				if err != nil {
					b.Fatalf("PostQuestion: %v", err)
				}
				b.StartTimer()
				if _, err := db.Answer(b.Context(), engine.AnswerRequest{RunID: "r-bench", InteractionID: ix.ID, Text: "PostgreSQL", By: "alice", Via: "github"}); err != nil {
					b.Fatalf("Answer: %v", err)
				}
			}
		})
	}
}

// BenchmarkCommit measures the checkpoint written after every node: a 4
// KiB checkpoint and two events, not synced (Sync: false) and synced.
func BenchmarkCommit(b *testing.B) {
	checkpoint := []byte(`{"outputs":"` + strings.Repeat("x", 4<<10) + `"}`)
	for _, sync := range []bool{false, true} {
		for _, mode := range durabilityModes {
			if sync && mode.syncWrites {
				continue // the same as without Sync
			}
			name := mode.name
			if sync {
				name += "/Sync"
			}
			b.Run(name, func(b *testing.B) {
				db := newDB(b, b.TempDir(), Options{syncWrites: mode.syncWrites})
				gen := benchRun(b, db, "r-bench")
				b.ResetTimer()
				for i := range b.N {
					err := db.Commit(b.Context(), engine.Change{RunID: "r-bench", Generation: gen, Checkpoint: checkpoint, Sync: sync,
						Events: []engine.Event{
							{Type: engine.EventNodeFinished, NodeID: fmt.Sprint("n", i)},
							{Type: engine.EventEdgeSelected, NodeID: fmt.Sprint("n", i)},
						}})
					if err != nil {
						b.Fatalf("Commit: %v", err)
					}
				}
			})
		}
	}
}

// BenchmarkPostAndAnswerParallel measures acknowledged writes from 8
// goroutines, each posting and answering questions in its own run, where
// SyncWrites can group the syncs of concurrent transactions.
func BenchmarkPostAndAnswerParallel(b *testing.B) {
	for _, mode := range durabilityModes {
		b.Run(mode.name, func(b *testing.B) {
			db := newDB(b, b.TempDir(), Options{syncWrites: mode.syncWrites})
			const parallelism = 4
			b.SetParallelism(parallelism)
			var runs []string
			for i := range parallelism * runtime.GOMAXPROCS(0) {
				runs = append(runs, fmt.Sprintf("r-bench-%d", i))
				benchRun(b, db, runs[i])
			}
			var next atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id, gen := runs[next.Add(1)-1], int64(0)
				for pb.Next() {
					ix, err := db.PostQuestion(b.Context(), engine.PostRequest{RunID: id, Generation: gen, NodeID: "agent",
						Questions: map[string]any{engine.QuestionKey: "Which database?"}})
					if err != nil {
						b.Errorf("PostQuestion: %v", err)
						return
					}
					if _, err := db.Answer(b.Context(), engine.AnswerRequest{RunID: id, InteractionID: ix.ID, Text: "PostgreSQL", By: "alice", Via: "github"}); err != nil {
						b.Errorf("Answer: %v", err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkMemory measures the heap Badger holds under a stream of
// commits (a 4 KiB checkpoint and a 16 KiB node output each), with the
// production settings and with Badger's own defaults: the heap's peak
// while writing (sampled every 100 commits) and what stays live after a
// garbage collection at the end. Run it with a fixed count, as the figures
// grow with the data written until the memtables and caches are full:
//
//	go test ./store -run '^$' -bench Memory -benchtime 20000x
func BenchmarkMemory(b *testing.B) {
	modes := []struct {
		name string
		opts Options
	}{
		{"production", Options{}},
		{"badger-defaults", Options{badgerDefaults: true}},
	}
	checkpoint := []byte(`{"outputs":"` + strings.Repeat("c", 4<<10) + `"}`)
	output := strings.Repeat("o", 16<<10)
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			runtime.GC()
			db := newDB(b, b.TempDir(), mode.opts)
			gen := benchRun(b, db, "r-bench")
			sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
			var peak uint64
			b.ResetTimer()
			for i := range b.N {
				err := db.Commit(b.Context(), engine.Change{RunID: "r-bench", Generation: gen, Checkpoint: checkpoint,
					Events: []engine.Event{{Type: engine.EventNodeFinished, NodeID: fmt.Sprint("n", i), Data: map[string]any{"output": output}}}})
				if err != nil {
					b.Fatalf("Commit: %v", err)
				}
				if i%100 == 0 {
					metrics.Read(sample)
					peak = max(peak, sample[0].Value.Uint64())
				}
			}
			b.StopTimer()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-heap-MiB")
		})
	}
}

// BenchmarkCheckpointLoop measures the disk a looping run takes with the
// production settings: every commit overwrites its 8 KiB checkpoint (11
// KiB stored) and adds two events, and the store's collector runs as in
// production (here: after every 128 MiB written, as the interval never
// comes). It reports the value log's size at the end and its peak
// (sampled every 1,000 commits), against the 11 KiB that is live.
//
//	go test ./store -run '^$' -bench CheckpointLoop -benchtime 60000x
func BenchmarkCheckpointLoop(b *testing.B) {
	dir := b.TempDir()
	db := newDB(b, dir, Options{})
	gen := benchRun(b, db, "r-bench")
	checkpoint := []byte(`{"outputs":"` + strings.Repeat("c", 8<<10) + `"}`)
	var peak int64
	b.ResetTimer()
	for i := range b.N {
		err := db.Commit(b.Context(), engine.Change{RunID: "r-bench", Generation: gen, Checkpoint: checkpoint,
			Events: []engine.Event{{Type: engine.EventNodeFinished, NodeID: fmt.Sprint("n", i)}, {Type: engine.EventEdgeSelected}}})
		if err != nil {
			b.Fatalf("Commit: %v", err)
		}
		if i%1000 == 999 {
			peak = max(peak, filesBytes(b, dir, "*.vlog"))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(filesBytes(b, dir, "*.vlog"))/(1<<20), "vlog-MiB")
	b.ReportMetric(float64(max(peak, filesBytes(b, dir, "*.vlog")))/(1<<20), "peak-vlog-MiB")
	b.ReportMetric(float64(filesBytes(b, dir, "*.sst"))/(1<<20), "sst-MiB")
}

// BenchmarkDeliveryBacklog measures what a /metrics scrape and a worker's
// wake-up read of the deliveries, with 10 pending beside 0 or 15,000
// handled ones (a week of a busy installation): the cost follows the
// pending ones alone.
func BenchmarkDeliveryBacklog(b *testing.B) {
	for _, handled := range []int{0, 15000} {
		b.Run(fmt.Sprintf("handled=%d", handled), func(b *testing.B) {
			ctx := b.Context()
			db := newDB(b, b.TempDir(), Options{SmallMemory: true})
			payload := []byte(strings.Repeat("x", 8<<10)) // a typical webhook body
			for i := range handled + 10 {
				id := fmt.Sprint(i)
				if _, err := db.RecordDelivery(ctx, Delivery{Source: "github/1", ID: id, Event: "issue_comment", Payload: payload}); err != nil {
					b.Fatal(err)
				}
				if i < handled {
					if err := db.FinishDelivery(ctx, "github/1", id, nil); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ResetTimer()
			for b.Loop() {
				backlog, err := db.DeliveryBacklog(ctx)
				if err != nil || backlog.Due != 10 {
					b.Fatalf("backlog %+v, %v", backlog, err)
				}
				if p, err := db.PendingDeliveries(ctx, 0); err != nil || len(p) != 10 {
					b.Fatalf("pending %d, %v", len(p), err)
				}
			}
		})
	}
}

// seedBench writes n runs of the github channel, each with its start
// event, one pending question and their outbox rows, in the production
// settings, and returns the store's directory.
func seedBench(b *testing.B, n int) string {
	b.Helper()
	dir := b.TempDir()
	db, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	seedLive(b, db, "r", n)
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkBackup10kRuns measures Backup of a store of 10,000 runs (each
// with an event, a pending question and two outbox rows), to a file.
func BenchmarkBackup10kRuns(b *testing.B) {
	dir := seedBench(b, 10_000)
	db := newDB(b, dir, Options{})
	out := filepath.Join(b.TempDir(), "b.backup")
	var size int64
	for b.Loop() {
		f, err := os.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		if err := db.Backup(b.Context(), f); err != nil {
			b.Fatal(err)
		}
		st, _ := f.Stat()
		size = st.Size()
		f.Close()
	}
	b.ReportMetric(float64(size)/(1<<20), "MiB")
}

// BenchmarkRestore10kRuns measures Restore of that backup into a new
// directory, the opening that checks it included.
func BenchmarkRestore10kRuns(b *testing.B) {
	dir := seedBench(b, 10_000)
	db := newDB(b, dir, Options{})
	var buf bytes.Buffer
	if err := db.Backup(b.Context(), &buf); err != nil {
		b.Fatal(err)
	}
	parent := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		if _, err := Restore(filepath.Join(parent, fmt.Sprint(i)), bytes.NewReader(buf.Bytes()), Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len())/(1<<20), "MiB")
}
