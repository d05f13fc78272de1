package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/google/go-cmp/cmp"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store/storetest"
)

// storedLayout reads the layout version stored in db, 0 when none.
func storedLayout(t *testing.T, db *DB) int {
	t.Helper()
	var rec layoutRecord
	err := db.view(t.Context(), func(txn *tx) error { return get(txn, layoutKey, &rec) })
	if errors.Is(err, engine.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatalf("reading the layout version: %v", err)
	}
	return rec.Layout
}

// setStoredLayout writes version as the layout version, 0 removing it.
func setStoredLayout(t *testing.T, db *DB, version int) {
	t.Helper()
	err := db.bdb.Update(func(txn *badger.Txn) error {
		if version == 0 {
			return txn.Delete(layoutKey)
		}
		return put(&tx{Txn: txn, maxValue: db.maxValue}, layoutKey, layoutRecord{Layout: version})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// closeDB closes db, failing the test on error.
func closeDB(t *testing.T, db *DB) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// countingStep is a migration step that counts its runs and writes a key
// of its own, failing the first fail runs after writing it.
type countingStep struct {
	name string
	runs int
	fail int
}

func (s *countingStep) migration() migration {
	return migration{name: s.name, run: func(ctx context.Context, db *DB) error {
		s.runs++
		err := db.update(ctx, false, func(txn *tx) error {
			return put(txn, []byte("test/"+s.name), counterRecord{N: int64(s.runs)})
		})
		if err != nil {
			return err
		}
		if s.runs <= s.fail {
			return fmt.Errorf("step %s interrupted", s.name)
		}
		return nil
	}}
}

func TestNewStoreGetsCurrentLayout(t *testing.T) {
	step := &countingStep{name: "never"}
	db := newDB(t, t.TempDir(), Options{SmallMemory: true, migrations: []migration{step.migration()}})
	if got := storedLayout(t, db); got != 2 {
		t.Errorf("layout of a new store = %d, want 2", got)
	}
	if step.runs != 0 {
		t.Errorf("a new store ran a migration %d times", step.runs)
	}
	if LayoutVersion() != len(migrations)+1 {
		t.Errorf("LayoutVersion() = %d, want %d", LayoutVersion(), len(migrations)+1)
	}
}

// TestVersion1Migrated opens a store without a layout version, as every
// store before versions was: it is at version 1, and is migrated.
func TestVersion1Migrated(t *testing.T) {
	dir := t.TempDir()
	db := newDB(t, dir, Options{SmallMemory: true})
	storetest.MustCreateRun(t, db, "r-old", 0)
	setStoredLayout(t, db, 0)
	closeDB(t, db)

	a, b := &countingStep{name: "a"}, &countingStep{name: "b"}
	db = newDB(t, dir, Options{SmallMemory: true, migrations: []migration{a.migration(), b.migration()}})
	if a.runs != 1 || b.runs != 1 {
		t.Errorf("migrations ran %d and %d times, want once each", a.runs, b.runs)
	}
	if got := storedLayout(t, db); got != 3 {
		t.Errorf("layout after migrating = %d, want 3", got)
	}
	if _, err := db.Run(t.Context(), "r-old"); err != nil {
		t.Errorf("the run is not readable after the migration: %v", err)
	}
	closeDB(t, db)
	db = newDB(t, dir, Options{SmallMemory: true, migrations: []migration{a.migration(), b.migration()}})
	if a.runs != 1 || b.runs != 1 {
		t.Errorf("after reopening, migrations ran %d and %d times, want once each", a.runs, b.runs)
	}
}

// TestInterruptedMigrationRunsAgain fails the second of two steps once:
// Open fails naming it, the first step's version stays recorded, and the
// next Open runs the second step again, not the first.
func TestInterruptedMigrationRunsAgain(t *testing.T) {
	dir := t.TempDir()
	db := newDB(t, dir, Options{SmallMemory: true})
	storetest.MustCreateRun(t, db, "r-old", 0)
	setStoredLayout(t, db, 0)
	closeDB(t, db)

	a, b := &countingStep{name: "a"}, &countingStep{name: "b", fail: 1}
	steps := []migration{a.migration(), b.migration()}
	_, err := Open(dir, Options{SmallMemory: true, migrations: steps})
	if err == nil {
		t.Fatal("Open succeeded though a migration failed")
	}
	for _, want := range []string{dir, "from version 2 to 3", "(b)", "step b interrupted"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open: error %q does not say %q", err, want)
		}
	}
	// The directory is free again, and the first step's version stayed.
	db = newDB(t, dir, Options{SmallMemory: true, migrations: steps[:1]})
	if got := storedLayout(t, db); got != 2 {
		t.Errorf("layout after the interrupted migration = %d, want 2", got)
	}
	closeDB(t, db)

	db = newDB(t, dir, Options{SmallMemory: true, migrations: steps})
	if a.runs != 1 || b.runs != 2 {
		t.Errorf("steps ran %d and %d times, want 1 and 2", a.runs, b.runs)
	}
	if got := storedLayout(t, db); got != 3 {
		t.Errorf("layout after the second Open = %d, want 3", got)
	}
}

func TestNewerLayoutRefused(t *testing.T) {
	dir := t.TempDir()
	db := newDB(t, dir, Options{SmallMemory: true})
	storetest.MustCreateRun(t, db, "r-new", 0)
	setStoredLayout(t, db, LayoutVersion()+1)
	closeDB(t, db)

	_, err := Open(dir, Options{SmallMemory: true})
	if !errors.Is(err, ErrNewerLayout) {
		t.Fatalf("Open: err=%v, want ErrNewerLayout", err)
	}
	for _, want := range []string{
		dir,
		fmt.Sprintf("layout is version %d", LayoutVersion()+1),
		fmt.Sprintf("versions up to %d", LayoutVersion()),
		"upgrade iterion", "--store-dir",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open: error %q does not say %q", err, want)
		}
	}
	// The refusal released the directory and wrote nothing.
	db = newDB(t, dir, Options{SmallMemory: true, migrations: make([]migration, LayoutVersion())})
	if got := storedLayout(t, db); got != LayoutVersion()+1 {
		t.Errorf("layout after the refusal = %d, want %d", got, LayoutVersion()+1)
	}
}

// TestLegacyGitHubTriggersMigrated opens stores of layouts 1 and 2 whose
// run records keep GitHub's details in the trigger itself, as they were
// written: the details move to the trigger's Details, under the names
// bot/github reads, the runs of a pull request get its Ref and are found
// by it, and the old index is gone.
func TestLegacyGitHubTriggersMigrated(t *testing.T) {
	for _, layout := range []int{1, 2} {
		t.Run(fmt.Sprintf("layout %d", layout), func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			db := newDB(t, dir, Options{SmallMemory: true})
			legacy := map[string]string{
				"run/a": `{"v":1,"id":"a","workflow":"review","status":"finished","trigger":{"source":"github","repo":"Acme/App","pr":7,"comment_id":5,"installation":42,"head_sha":"abc1234","actor":"ana"},"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}`,
				"run/b": `{"v":1,"id":"b","workflow":"review","status":"running","trigger":{"source":"github","repo":"acme/app","pr":7,"installation":42},"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}`,
				"run/c": `{"v":1,"id":"c","workflow":"push","status":"finished","trigger":{"source":"github","repo":"acme/app","installation":42,"head_sha":"def"},"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}`,
				"run/d": `{"v":1,"id":"d","workflow":"local","status":"finished","trigger":{"source":"cli"},"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}`,
			}
			if layout == 2 {
				legacy["runpr/acme/app#7/a"] = `{"v":1,"run_id":"a"}`
				legacy["runpr/acme/app#7/b"] = `{"v":1,"run_id":"b"}`
			}
			err := db.bdb.Update(func(txn *badger.Txn) error {
				for k, v := range legacy {
					if err := txn.Set([]byte(k), []byte(v)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if layout == 1 {
				setStoredLayout(t, db, 0) // layout 1 had no version key
			} else {
				setStoredLayout(t, db, layout)
			}
			closeDB(t, db)

			db = newDB(t, dir, Options{SmallMemory: true})
			if got := storedLayout(t, db); got != LayoutVersion() {
				t.Errorf("layout after migrating = %d, want %d", got, LayoutVersion())
			}
			want := map[string]engine.Trigger{
				"a": {Source: "github", Actor: "ana", Ref: "github/acme/app#7",
					Details: json.RawMessage(`{"repo":"Acme/App","pr":7,"comment_id":5,"installation":42,"head_sha":"abc1234"}`)},
				"b": {Source: "github", Ref: "github/acme/app#7", Details: json.RawMessage(`{"repo":"acme/app","pr":7,"installation":42}`)},
				"c": {Source: "github", Details: json.RawMessage(`{"repo":"acme/app","installation":42,"head_sha":"def"}`)},
				"d": {Source: "cli"},
			}
			for id, tr := range want {
				run, err := db.Run(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tr, run.Trigger, cmp.Transformer("json", func(m json.RawMessage) string { return string(m) })); diff != "" {
					t.Errorf("run %s's trigger after migrating (-want +got):\n%s", id, diff)
				}
			}
			runs, err := db.RunsByRef(ctx, "github/acme/app#7")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"a", "b"}, runIDs(runs)); diff != "" {
				t.Errorf("RunsByRef after migrating (-want +got):\n%s", diff)
			}
			err = db.bdb.View(func(txn *badger.Txn) error {
				if keys := keysUnder(&tx{Txn: txn}, []byte("runpr/"), 10); len(keys) != 0 {
					t.Errorf("the pull-request index is left: %q", keys)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A store of layout 4 gets its open questions indexed: the pending
// questions of runs that have not ended, but the waits of agents; the
// index is then kept by the intents as usual.
func TestOpenQuestionsMigrated(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	db := newDB(t, dir, Options{SmallMemory: true})
	open := storetest.MustCreateRun(t, db, "r-open", 0)
	q1 := storetest.MustPost(t, db, open, "ask", "Which licence?")
	storetest.MustAnswer(t, db, open.ID, storetest.MustPost(t, db, open, "ask", "Which year?").ID, "2026", "ana")
	ended := storetest.MustCreateRun(t, db, "r-ended", 0)
	storetest.MustPost(t, db, ended, "ask", "Too late?")
	paused := storetest.MustCreateRun(t, db, "r-paused", 0)
	storetest.MustCommit(t, db, engine.Change{RunID: paused.ID, Generation: paused.Generation, Status: engine.StatusPausedWaitingHuman,
		Interactions: []*engine.Interaction{{ID: "r-paused_approve", NodeID: "approve", Questions: map[string]any{"approved": "bool"}}}})
	storetest.MustCommit(t, db, engine.Change{RunID: ended.ID, Generation: ended.Generation, Status: engine.StatusFinished})
	// Layout 4 had no index: remove it, as such a store would be.
	if err := db.deletePrefix(ctx, openqAll); err != nil {
		t.Fatal(err)
	}
	if qs, _ := db.OpenQuestions(ctx); len(qs) != 0 {
		t.Fatalf("%d open questions left after removing the index", len(qs))
	}
	setStoredLayout(t, db, 4)
	closeDB(t, db)

	db = newDB(t, dir, Options{SmallMemory: true})
	if got := storedLayout(t, db); got != LayoutVersion() {
		t.Errorf("layout after migrating = %d, want %d", got, LayoutVersion())
	}
	qs, err := db.OpenQuestions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range qs {
		got = append(got, q.InteractionID)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{q1.ID, "r-paused_approve"}, got); diff != "" {
		t.Errorf("open questions after the migration (-want +got):\n%s", diff)
	}
	// No entry of the ended run was written: its prefix is empty.
	err = db.view(ctx, func(txn *tx) error {
		if keys := keysUnder(txn, openqPrefix(ended.ID), 1); len(keys) > 0 {
			t.Errorf("the ended run has index entries: %s", keys)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
