package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/iterion-bot/iterion/engine"
)

// seedLive writes n runs of the github channel into db, each paused on
// one async question: every run leaves its run_started and
// question_posted outbox rows.
func seedLive(t testing.TB, db *DB, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("%s-%04d", prefix, i)
		run := &engine.Run{ID: id, Workflow: "w", Status: engine.StatusRunning, Channels: []string{"github"}}
		if err := db.CreateRun(ctx, run, []engine.Event{{Type: engine.EventRunStarted}}); err != nil {
			t.Fatal(err)
		}
		run, err := db.Acquire(ctx, id, "test")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.PostQuestion(ctx, engine.PostRequest{RunID: id, Generation: run.Generation, NodeID: "draft",
			Questions: map[string]any{engine.QuestionKey: "Which licence for " + id + "?"}}); err != nil {
			t.Fatal(err)
		}
	}
}

// storeView is what a test compares of a store: its runs, their pending
// questions and the outbox.
type storeView struct {
	Runs    []*engine.Run
	Pending map[string][]*engine.Interaction
	Outbox  []engine.OutboxRow
}

func viewStore(t *testing.T, db *DB, keep func(runID string) bool) storeView {
	t.Helper()
	ctx := t.Context()
	runs, err := db.Runs(ctx, engine.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	s := storeView{Pending: map[string][]*engine.Interaction{}}
	for _, r := range runs {
		if !keep(r.ID) {
			continue
		}
		s.Runs = append(s.Runs, r)
		if s.Pending[r.ID], err = db.Pending(ctx, r.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := db.DueOutbox(ctx, time.Now().Add(time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if keep(row.RunID) {
			s.Outbox = append(s.Outbox, row)
		}
	}
	return s
}

// A backup taken while another goroutine keeps writing holds everything
// written before it began; restored into a new directory, the store has
// the same runs, pending questions and outbox rows, in the same order.
func TestBackupOfALiveStoreRestores(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := newDB(t, t.TempDir(), Options{SmallMemory: true})
	seedLive(t, db, "before", 40)
	before := func(id string) bool { return strings.HasPrefix(id, "before-") }
	want := viewStore(t, db, before)
	if len(want.Outbox) != 80 {
		t.Fatalf("%d outbox rows seeded, want 80", len(want.Outbox))
	}

	stop := make(chan struct{})
	var writing sync.WaitGroup
	writing.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			seedLive(t, db, fmt.Sprintf("during%d", i), 1)
		}
	})
	var buf bytes.Buffer
	err := db.Backup(ctx, &buf)
	close(stop)
	writing.Wait()
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte(fmt.Sprintf("iterion-store-backup 1 layout=%d\n", LayoutVersion()))) {
		t.Errorf("the backup starts with %q", buf.Bytes()[:min(60, buf.Len())])
	}

	dir := filepath.Join(t.TempDir(), "restored")
	info, err := Restore(dir, &buf, Options{SmallMemory: true})
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if info.Layout != LayoutVersion() {
		t.Errorf("restored layout %d, want %d", info.Layout, LayoutVersion())
	}
	got := viewStore(t, newDB(t, dir, Options{SmallMemory: true}), before)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the restored store differs (-before +restored):\n%s", diff)
	}
}

// Restore refuses what it must not restore, with what to do, and leaves
// the directory as it found it.
func TestRestoreRefusals(t *testing.T) {
	t.Parallel()
	db := newDB(t, t.TempDir(), Options{SmallMemory: true})
	seedLive(t, db, "r", 3)
	var good bytes.Buffer
	if err := db.Backup(t.Context(), &good); err != nil {
		t.Fatal(err)
	}
	newer := strings.Replace(good.String(), fmt.Sprintf("layout=%d", LayoutVersion()), fmt.Sprintf("layout=%d", LayoutVersion()+1), 1)
	tests := []struct {
		name    string
		backup  string
		full    bool // the directory holds a file already
		wantErr error
		want    string
	}{
		{name: "non-empty directory", backup: good.String(), full: true, wantErr: ErrNotEmpty, want: "(it holds notes.txt): restore into a new or empty directory"},
		{name: "not a backup", backup: "PK\x03\x04 a zip file\n", wantErr: ErrNotBackup, want: `it does not start with the line "iterion-store-backup …"`},
		{name: "empty file", backup: "", wantErr: ErrNotBackup, want: "does not start with"},
		{name: "newer layout", backup: newer, wantErr: ErrNewerLayout, want: "written by a newer iterion"},
		{name: "cut short", backup: good.String()[:good.Len()-7], want: "the backup is cut short"},
		{name: "unknown framing", backup: "iterion-store-backup 9 layout=1\n", want: "its framing is version 9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "st")
			if tc.full {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Restore(dir, strings.NewReader(tc.backup), Options{SmallMemory: true})
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("Restore = %v, want an error containing %q (is %v)", err, tc.want, tc.wantErr)
			}
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if wantNames := map[bool][]string{true: {"notes.txt"}}[tc.full]; !cmp.Equal(names, wantNames) {
				t.Errorf("the directory holds %v afterwards, want %v", names, wantNames)
			}
		})
	}
}

// A store written by the previous layout is migrated at Open, which
// first writes a backup of it as it was, with the old layout number in
// its name, and logs where; restored, that backup is the old store, which
// the restore migrates in turn.
func TestMigrationBacksUpFirst(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	db := newDB(t, dir, Options{SmallMemory: true})
	seedLive(t, db, "r", 5)
	// As layout 3 left a delivery still to handle: not indexed.
	if _, err := db.RecordDelivery(ctx, Delivery{Source: "github/1", ID: "d1", Event: "push", Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if err := db.deletePrefix(ctx, dlvPendingPrefix); err != nil {
		t.Fatal(err)
	}
	// Layout 3, before deliveries to handle were indexed: the migration
	// from it indexes d1, whatever later layouts add.
	old := 3
	setStoredLayout(t, db, old)
	closeDB(t, db)

	var logged bytes.Buffer
	clock := func() time.Time { return time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC) }
	db = newDB(t, dir, Options{SmallMemory: true, Clock: clock, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if got := storedLayout(t, db); got != LayoutVersion() {
		t.Fatalf("layout %d after Open, want %d", got, LayoutVersion())
	}
	backup := filepath.Join(dir, BackupsDir, fmt.Sprintf("layout-%d-20300506T070809Z.backup", old))
	st, err := os.Stat(backup)
	if err != nil {
		t.Fatalf("no backup before the migration: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("the backup's mode is %v, want 0600", st.Mode().Perm())
	}
	if !strings.Contains(logged.String(), "migrating the layout; backed up first") || !strings.Contains(logged.String(), backup) {
		t.Errorf("the log does not say where the backup is:\n%s", logged.String())
	}
	want := viewStore(t, db, func(string) bool { return true })

	f, err := os.Open(backup)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	restored := filepath.Join(t.TempDir(), "st")
	info, err := Restore(restored, f, Options{SmallMemory: true})
	if err != nil {
		t.Fatalf("restoring the automatic backup: %v", err)
	}
	if info.Layout != old {
		t.Errorf("the automatic backup says layout %d, want %d", info.Layout, old)
	}
	rdb := newDB(t, restored, Options{SmallMemory: true})
	if diff := cmp.Diff(want, viewStore(t, rdb, func(string) bool { return true })); diff != "" {
		t.Errorf("the restored backup differs from the migrated store (-migrated +restored):\n%s", diff)
	}
	if pending, err := rdb.PendingDeliveries(ctx, 0); err != nil || len(pending) != 1 {
		t.Errorf("%d deliveries to handle in the restored store, %v; want the one, indexed by its migration", len(pending), err)
	}
}

// When the backup before a migration cannot be written, the store is not
// migrated and Open says why.
func TestMigrationRefusedWithoutBackup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := newDB(t, dir, Options{SmallMemory: true})
	seedLive(t, db, "r", 1)
	// Layout 3, before deliveries to handle were indexed: the migration
	// from it indexes d1, whatever later layouts add.
	old := 3
	setStoredLayout(t, db, old)
	closeDB(t, db)
	// A file where the backups' directory goes.
	if err := os.WriteFile(filepath.Join(dir, BackupsDir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, Options{SmallMemory: true})
	if err == nil || !strings.Contains(err.Error(), "backing it up first failed, so nothing was changed") {
		t.Fatalf("Open = %v, want the migration refused for want of its backup", err)
	}
	if err := os.Remove(filepath.Join(dir, BackupsDir)); err != nil {
		t.Fatal(err)
	}
	db = newDB(t, dir, Options{SmallMemory: true})
	if got := storedLayout(t, db); got != LayoutVersion() {
		t.Errorf("layout %d once the backup could be written, want %d", got, LayoutVersion())
	}
}

// A backup stops when its context is done.
func TestBackupCancelled(t *testing.T) {
	t.Parallel()
	db := newDB(t, t.TempDir(), Options{SmallMemory: true})
	seedLive(t, db, "r", 3)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := db.Backup(ctx, &bytes.Buffer{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Backup = %v, want context.Canceled", err)
	}
}
