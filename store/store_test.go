package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/google/go-cmp/cmp"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store/storetest"
)

// newDB opens a store that is closed when the test ends: in dir, or in
// memory when dir is empty.
func newDB(tb testing.TB, dir string, opts Options) *DB {
	tb.Helper()
	opts.InMemory = dir == ""
	db, err := Open(dir, opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return db
}

func TestConformance(t *testing.T) {
	tests := []struct {
		name   string
		onDisk bool
	}{
		{"disk", true},
		{"memory", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			open := func(t *testing.T) *DB {
				dir := ""
				if tc.onDisk {
					dir = t.TempDir()
				}
				return newDB(t, dir, Options{SmallMemory: true})
			}
			t.Run("engine", func(t *testing.T) {
				storetest.RunEngine(t, func(t *testing.T) engine.Store { return open(t) })
			})
			t.Run("bot", func(t *testing.T) {
				storetest.RunBot(t, func(t *testing.T) storetest.BotStore { return open(t) })
			})
		})
	}
}

// snapshot is everything the store holds about one run, as read through
// the interface.
type snapshot struct {
	Run          *engine.Run
	Checkpoint   []byte
	Interactions []*engine.Interaction
	Pending      []*engine.Interaction
	Events       []engine.Event
	Outbox       []engine.OutboxRow
}

func takeSnapshot(t *testing.T, s engine.Store, runID string) snapshot {
	t.Helper()
	ctx := t.Context()
	var snap snapshot
	var err error
	if snap.Run, err = s.Run(ctx, runID); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if snap.Checkpoint, err = s.Checkpoint(ctx, runID); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	if snap.Interactions, err = s.Interactions(ctx, runID); err != nil {
		t.Fatalf("Interactions: %v", err)
	}
	if snap.Pending, err = s.Pending(ctx, runID, ""); err != nil {
		t.Fatalf("Pending: %v", err)
	}
	if snap.Events, err = s.Events(ctx, runID, 0, 0); err != nil {
		t.Fatalf("Events: %v", err)
	}
	if snap.Outbox, err = s.DueOutbox(ctx, time.Now().Add(time.Hour), 0); err != nil {
		t.Fatalf("DueOutbox: %v", err)
	}
	return snap
}

func TestReopenKeepsEverything(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	db, err := Open(dir, Options{SmallMemory: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	run := &engine.Run{ID: "r-reopen", Workflow: "wf", Status: engine.StatusRunning, Channels: []string{"github"}}
	if err := db.CreateRun(ctx, run, []engine.Event{{Type: engine.EventRunStarted}}); err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	owned, err := db.Acquire(ctx, run.ID, "server")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	asked := 0
	post := func(s engine.Store, node string) *engine.Interaction {
		t.Helper()
		asked++
		ix, err := s.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, Generation: owned.Generation, NodeID: node, Questions: map[string]any{engine.QuestionKey: fmt.Sprintf("question %d?", asked)}})
		if err != nil {
			t.Fatalf("PostQuestion: %v", err)
		}
		return ix
	}
	answered := post(db, "a")
	post(db, "a")
	if _, err := db.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: answered.ID, Text: "yes", By: "alice", Via: "cli"}); err != nil {
		t.Fatalf("Answer: %v", err)
	}
	// Not synced: Close must still flush it.
	if err := db.Commit(ctx, engine.Change{RunID: run.ID, Generation: owned.Generation, Status: engine.StatusPausedWaitingHuman, Checkpoint: []byte(`{"node":"a"}`),
		Events: []engine.Event{{Type: engine.EventRunPaused}}}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	before := takeSnapshot(t, db, run.ID)
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	db = newDB(t, dir, Options{SmallMemory: true})
	after := takeSnapshot(t, db, run.ID)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("after reopening (-before +after):\n%s", diff)
	}
	msgs, err := db.DrainInbox(ctx, run.ID, "a")
	if err != nil {
		t.Fatalf("DrainInbox: %v", err)
	}
	if len(msgs) != 1 || msgs[0].InteractionID != answered.ID {
		t.Errorf("DrainInbox after reopening=%+v, want the answer to %s", msgs, answered.ID)
	}
	// The counters are in the store too.
	if ix := post(db, "a"); ix.Seq != 3 {
		t.Errorf("next question after reopening: Seq=%d, want 3", ix.Seq)
	}
	evs, err := db.Events(ctx, run.ID, 0, 0)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if last := evs[len(evs)-1]; last.Seq != int64(len(before.Events)+1) {
		t.Errorf("next event after reopening: Seq=%d, want %d", last.Seq, len(before.Events)+1)
	}
}

func TestOpenLockedDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	first, err := Open(dir, Options{SmallMemory: true})
	if err != nil {
		t.Fatalf("first Open: %v", err)
	}
	second, err := Open(dir, Options{SmallMemory: true})
	if err == nil {
		second.Close()
		t.Fatal("second Open of a directory in use succeeded")
	}
	if !errors.Is(err, ErrLocked) {
		t.Errorf("second Open: err=%v, want ErrLocked", err)
	}
	for _, want := range []string{dir, "another iterion process", "owns it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("second Open: error %q does not say %q", err, want)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	newDB(t, dir, Options{SmallMemory: true}) // free again
}

func TestUnknownFormatVersion(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		wantErr error
		wantMsg string
	}{
		{"newer version", `{"v":2,"id":"r-v","status":"running"}`, ErrUnknownVersion, "format version 2, this build reads 1"},
		{"no version", `{"id":"r-v","status":"running"}`, ErrUnknownVersion, "no format version"},
		{"not json", `run r-v`, nil, "decoding run/r-v"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := newDB(t, "", Options{SmallMemory: true})
			err := db.bdb.Update(func(txn *badger.Txn) error { return txn.Set(runKey("r-v"), []byte(tc.value)) })
			if err != nil {
				t.Fatalf("writing the record: %v", err)
			}
			_, err = db.Run(t.Context(), "r-v")
			if err == nil {
				t.Fatal("Run succeeded, want an error")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("Run: err=%v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("Run: error %q does not say %q", err, tc.wantMsg)
			}
			if _, err := db.Runs(t.Context(), engine.RunFilter{}); err == nil {
				t.Error("Runs succeeded over an unreadable record, want an error")
			}
		})
	}
}

func TestRecordFormat(t *testing.T) {
	db := newDB(t, "", Options{SmallMemory: true})
	run := &engine.Run{ID: "r-fmt", Status: engine.StatusRunning}
	if err := db.CreateRun(t.Context(), run, nil); err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	ix, err := db.PostQuestion(t.Context(), engine.PostRequest{RunID: run.ID, NodeID: "a", Questions: map[string]any{engine.QuestionKey: "q?"}})
	if err != nil {
		t.Fatalf("PostQuestion: %v", err)
	}
	tests := []struct {
		key  string
		want string // prefix of the stored value
	}{
		{"run/r-fmt", `{"v":1,"id":"r-fmt",`},
		{"ix/r-fmt/" + ix.ID, `{"v":1,"id":"r-fmt_a_async_1",`},
		{"ixpend/r-fmt/00000000000000000001/" + ix.ID, `{"v":1,"interaction_id":"r-fmt_a_async_1","node_id":"a"}`},
		{"ev/r-fmt/00000000000000000001", `{"v":1,"seq":1,`},
		{"seq/r-fmt/ev", `{"v":1,"n":1}`},
		{"seq/r-fmt/ix", `{"v":1,"n":1}`},
		{"seq/r-fmt/async/a", `{"v":1,"n":1}`},
	}
	err = db.bdb.View(func(txn *badger.Txn) error {
		for _, tc := range tests {
			item, err := txn.Get([]byte(tc.key))
			if err != nil {
				t.Errorf("key %s: %v", tc.key, err)
				continue
			}
			val, _ := item.ValueCopy(nil)
			if !bytes.HasPrefix(val, []byte(tc.want)) {
				t.Errorf("key %s holds %s, want it to start with %s", tc.key, val, tc.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestDrainInboxMessagesForAnyNode(t *testing.T) {
	ctx := t.Context()
	db := newDB(t, "", Options{SmallMemory: true})
	if err := db.CreateRun(ctx, &engine.Run{ID: "r-any", Status: engine.StatusRunning}, nil); err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	// No intent queues a message for no node yet; write two as one would.
	err := db.update(ctx, false, func(txn *tx) error {
		for _, m := range []engine.InboxMessage{
			{ID: "m1", RunID: "r-any", Text: "to anyone", Status: engine.InboxQueued},
			{ID: "m2", RunID: "r-any", NodeID: "b", Text: "to b", Status: engine.InboxQueued},
		} {
			seq, err := reserve(txn, "r-any", counterInbox, 1)
			if err != nil {
				return err
			}
			m.Seq = seq
			if err := put(txn, inboxKey("r-any", seq), &m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("queueing: %v", err)
	}
	steps := []struct {
		node string
		want []string
	}{
		{"a", []string{"m1"}},
		{"b", []string{"m2"}},
		{"a", []string{}},
	}
	for i, step := range steps {
		msgs, err := db.DrainInbox(ctx, "r-any", step.node)
		if err != nil {
			t.Fatalf("DrainInbox: %v", err)
		}
		got := []string{}
		for _, m := range msgs {
			got = append(got, m.ID)
		}
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("step %d: DrainInbox(%s) mismatch (-want +got):\n%s", i, step.node, diff)
		}
	}
}

func TestClock(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2030, 5, 6, 7, 8, 9, 0, time.FixedZone("CEST", 2*3600))
	db := newDB(t, "", Options{SmallMemory: true, Clock: func() time.Time { return now }})
	if err := db.CreateRun(ctx, &engine.Run{ID: "r-clock"}, []engine.Event{{Type: engine.EventRunStarted}}); err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	ix, err := db.PostQuestion(ctx, engine.PostRequest{RunID: "r-clock", NodeID: "a", Questions: map[string]any{engine.QuestionKey: "q?"}})
	if err != nil {
		t.Fatalf("PostQuestion: %v", err)
	}
	res, err := db.Answer(ctx, engine.AnswerRequest{RunID: "r-clock", InteractionID: ix.ID, Text: "a"})
	if err != nil {
		t.Fatalf("Answer: %v", err)
	}
	run, err := db.Run(ctx, "r-clock")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	evs, err := db.Events(ctx, "r-clock", 0, 0)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	times := map[string]time.Time{
		"Run.CreatedAt":           run.CreatedAt,
		"Run.UpdatedAt":           run.UpdatedAt,
		"Interaction.RequestedAt": ix.RequestedAt,
		"Interaction.AnsweredAt":  res.Interaction.AnsweredAt,
		"Message.QueuedAt":        res.Message.QueuedAt,
		"Event.Time":              evs[0].Time,
	}
	for name, got := range times {
		if !got.Equal(now) || got.Location() != time.UTC {
			t.Errorf("%s=%v, want %v in UTC", name, got, now.UTC())
		}
	}
}

func TestInvalidRunID(t *testing.T) {
	db := newDB(t, "", Options{SmallMemory: true})
	for _, id := range []string{"", "R-UPPER", "r/slash", strings.Repeat("a", 65)} {
		if err := db.CreateRun(t.Context(), &engine.Run{ID: id}, nil); err == nil {
			t.Errorf("CreateRun(%q) succeeded, want an error", id)
		}
	}
}

func TestClosed(t *testing.T) {
	db, err := Open("", Options{InMemory: true, SmallMemory: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := db.Run(t.Context(), "r-x"); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: err=%v, want ErrClosed", err)
	}
	if err := db.CreateRun(t.Context(), &engine.Run{ID: "r-x"}, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateRun after Close: err=%v, want ErrClosed", err)
	}
}

func TestCanceledContext(t *testing.T) {
	db := newDB(t, "", Options{SmallMemory: true})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := db.CreateRun(ctx, &engine.Run{ID: "r-x"}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("CreateRun with a canceled context: err=%v, want context.Canceled", err)
	}
}

// TestConflictRetryRereads checks that a transaction that loses a race is
// run again from the start and sees the winner's write.
func TestConflictRetryRereads(t *testing.T) {
	ctx := t.Context()
	db := newDB(t, "", Options{SmallMemory: true})
	key := []byte("test/counter")
	var once sync.Once
	calls := 0
	err := db.update(ctx, false, func(txn *tx) error {
		calls++
		var rec counterRecord
		if err := get(txn, key, &rec); err != nil && !errors.Is(err, engine.ErrNotFound) {
			return err
		}
		// On the first attempt another writer commits in between.
		once.Do(func() {
			if err := db.bdb.Update(func(bt *badger.Txn) error { return put(&tx{Txn: bt, maxValue: db.maxValue}, key, counterRecord{N: 10}) }); err != nil {
				t.Errorf("competing write: %v", err)
			}
		})
		rec.N++
		return put(txn, key, rec)
	})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if calls != 2 {
		t.Errorf("closure ran %d times, want 2", calls)
	}
	var rec counterRecord
	if err := db.view(ctx, func(txn *tx) error { return get(txn, key, &rec) }); err != nil {
		t.Fatal(err)
	}
	if rec.N != 11 {
		t.Errorf("counter=%d, want 11 (the retry must re-read)", rec.N)
	}
}

// TestSyncGroup checks the group commit: every caller returns only after a
// sync that started after it called, and gets that sync's error.
func TestSyncGroup(t *testing.T) {
	var (
		g        syncGroup
		started  atomic.Int64 // syncs started
		finished atomic.Int64 // highest start number among finished syncs
		failing  = int64(3)   // this sync fails
	)
	do := func() error {
		n := started.Add(1)
		for range 100 {
			runtime.Gosched()
		}
		for {
			f := finished.Load()
			if n <= f || finished.CompareAndSwap(f, n) {
				break
			}
		}
		if n == failing {
			return errors.New("disk on fire")
		}
		return nil
	}
	const callers, calls = 16, 50
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				before := started.Load()
				err := g.sync(do)
				if f := finished.Load(); f <= before {
					t.Errorf("caller %d call %d returned when the last finished sync was %d, want one after %d", c, i, f, before)
				}
				if err != nil && err.Error() != "disk on fire" {
					t.Errorf("caller %d: err=%v", c, err)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d syncs for %d calls", started.Load(), callers*calls)
}

func TestBadgerLogger(t *testing.T) {
	var buf bytes.Buffer
	l := badgerLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	l.Errorf("table %d is broken\n", 7)
	l.Warningf("compaction slow")
	l.Infof("replaying %d entries", 3)
	l.Debugf("noise")
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`level=ERROR msg="badger error" detail="table 7 is broken"`,
		`level=WARN msg="badger warning" detail="compaction slow"`,
	}
	if len(got) != len(want) {
		t.Fatalf("logged %q, want %d lines", got, len(want))
	}
	for i := range want {
		if !strings.HasSuffix(got[i], want[i]) {
			t.Errorf("line %d=%q, want it to end with %q", i, got[i], want[i])
		}
	}
}

// TestLargeChange checks that the small-memory settings still take a large
// checkpoint (it goes to the value log) and a long batch of events.
func TestLargeChange(t *testing.T) {
	ctx := t.Context()
	db := newDB(t, t.TempDir(), Options{SmallMemory: true})
	if err := db.CreateRun(ctx, &engine.Run{ID: "r-large"}, nil); err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	checkpoint := bytes.Repeat([]byte("x"), 1<<20)
	events := make([]engine.Event, 1000)
	for i := range events {
		events[i] = engine.Event{Type: engine.EventNodeFinished, NodeID: fmt.Sprint("node", i)}
	}
	if err := db.Commit(ctx, engine.Change{RunID: "r-large", Checkpoint: checkpoint, Events: events, Sync: true}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	got, err := db.Checkpoint(ctx, "r-large")
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	if !bytes.Equal(got, checkpoint) {
		t.Errorf("Checkpoint has %d bytes, want the %d written", len(got), len(checkpoint))
	}
	evs, err := db.Events(ctx, "r-large", 990, 0)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if len(evs) != 10 || evs[9].Seq != 1000 {
		t.Errorf("Events after 990: %d events, last %+v; want 10 up to 1000", len(evs), evs[len(evs)-1])
	}
}

func TestRecordSizeLimit(t *testing.T) {
	tests := []struct {
		name     string
		onDisk   bool
		size     int
		wantFail bool
	}{
		{"memory, 512 KiB", false, 512 << 10, false},
		{"memory, 2 MiB", false, 2 << 20, true},
		{"disk, 2 MiB", true, 2 << 20, false},
		{"disk, 13 MiB", true, 13 << 20, true}, // 17.3 MB in base64
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := ""
			if tc.onDisk {
				dir = t.TempDir()
			}
			db := newDB(t, dir, Options{SmallMemory: true})
			if err := db.CreateRun(t.Context(), &engine.Run{ID: "r-big"}, nil); err != nil {
				t.Fatalf("CreateRun: %v", err)
			}
			err := db.Commit(t.Context(), engine.Change{RunID: "r-big", Checkpoint: make([]byte, tc.size)})
			if failed := err != nil; failed != tc.wantFail {
				t.Fatalf("Commit of a %d-byte checkpoint: err=%v, want failure=%v", tc.size, err, tc.wantFail)
			}
			if err != nil {
				if msg := err.Error(); !strings.Contains(msg, "more than the store's limit") || len(msg) > 200 {
					t.Errorf("error %q, want a short one naming the limit", msg)
				}
				return
			}
			got, err := db.Checkpoint(t.Context(), "r-big")
			if err != nil || len(got) != tc.size {
				t.Errorf("Checkpoint: %d bytes, err=%v; want %d", len(got), err, tc.size)
			}
		})
	}
}

// TestZeroLimit checks this store's reading of limit <= 0: no limit.
func TestZeroLimit(t *testing.T) {
	ctx := t.Context()
	db := newDB(t, "", Options{SmallMemory: true})
	if err := db.CreateRun(ctx, &engine.Run{ID: "r-lim", Channels: []string{"github"}}, []engine.Event{{Type: "a"}, {Type: "b"}, {Type: "c"}}); err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	if err := db.Commit(ctx, engine.Change{RunID: "r-lim", Outbox: []engine.OutboxRow{{Kind: "x"}, {Kind: "y"}, {Kind: "z"}}}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	for _, limit := range []int{0, -1} {
		evs, err := db.Events(ctx, "r-lim", 0, limit)
		if err != nil || len(evs) != 3 {
			t.Errorf("Events(limit %d): %d events, err=%v; want 3", limit, len(evs), err)
		}
		rows, err := db.DueOutbox(ctx, time.Now().Add(time.Hour), limit)
		if err != nil {
			t.Fatalf("DueOutbox: %v", err)
		}
		// Rows of one commit keep the order given.
		var kinds []string
		for _, r := range rows {
			kinds = append(kinds, r.Kind)
		}
		// run_started comes from CreateRun, before the commit.
		if diff := cmp.Diff([]string{"run_started", "x", "y", "z"}, kinds); diff != "" {
			t.Errorf("DueOutbox(limit %d) mismatch (-want +got):\n%s", limit, diff)
		}
	}
}

func TestAnswerRefusedOnEndedRun(t *testing.T) {
	db, err := Open(t.TempDir(), Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	now := time.Now()
	if err := db.CreateRun(ctx, &engine.Run{ID: "ended", Workflow: "w", Status: engine.StatusRunning, CreatedAt: now, UpdatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	run, _ := db.Acquire(ctx, "ended", "t")
	ix, err := db.PostQuestion(ctx, engine.PostRequest{RunID: "ended", Generation: run.Generation, NodeID: "a", Questions: map[string]any{engine.QuestionKey: "q?"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Commit(ctx, engine.Change{RunID: "ended", Generation: run.Generation, Status: engine.StatusFinished}); err != nil {
		t.Fatal(err)
	}
	_, err = db.Answer(ctx, engine.AnswerRequest{RunID: "ended", InteractionID: ix.ID, Text: "late"})
	if !errors.Is(err, engine.ErrRunEnded) {
		t.Errorf("err = %v, want ErrRunEnded", err)
	}
}

// A store directory ignores itself in git, and a .gitignore someone wrote
// there is kept.
func TestStoreWritesGitignore(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	b, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	if err != nil || !strings.Contains(string(b), "\n*\n") {
		t.Fatalf(".gitignore = %q, %v; want it to ignore everything", b, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if b, _ := os.ReadFile(filepath.Join(dir, ".gitignore")); string(b) != "mine\n" {
		t.Errorf(".gitignore rewritten: %q", b)
	}
}
