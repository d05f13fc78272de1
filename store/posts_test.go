package store

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/engine"
)

func TestRecordPostRoutesReplies(t *testing.T) {
	ctx := t.Context()
	db := newDB(t, "", Options{SmallMemory: true})
	run := mustCreateRun(t, db, "r-posts", 0, "github")
	ix := mustPost(t, db, run, "plan", "Which licence?")
	if _, _, err := db.PostRef(ctx, "github", "123"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("PostRef before any post: err = %v, want ErrNotFound", err)
	}
	if err := db.RecordPost(ctx, run.ID, ix.ID, "github", "123"); err != nil {
		t.Fatalf("RecordPost: %v", err)
	}
	if err := db.RecordPost(ctx, run.ID, ix.ID, "slack", "C1/1700000000.1"); err != nil {
		t.Fatalf("RecordPost: %v", err)
	}
	got, err := db.Interaction(ctx, run.ID, ix.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"github": "123", "slack": "C1/1700000000.1"}, got.Posts); diff != "" {
		t.Errorf("Posts mismatch (-want +got):\n%s", diff)
	}
	r, i, err := db.PostRef(ctx, "slack", "C1/1700000000.1")
	if err != nil || r != run.ID || i != ix.ID {
		t.Errorf("PostRef = %q %q %v, want %q %q", r, i, err, run.ID, ix.ID)
	}
	if err := db.RecordPost(ctx, run.ID, "nope", "github", "9"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("RecordPost of an unknown interaction: err = %v, want ErrNotFound", err)
	}
	if err := db.RecordPost(ctx, run.ID, ix.ID, "", "9"); err == nil {
		t.Error("RecordPost without a channel: no error")
	}
}

func TestShortIDsPerScope(t *testing.T) {
	ctx := t.Context()
	db := newDB(t, "", Options{SmallMemory: true})
	run := mustCreateRun(t, db, "r-short", 0, "github")
	a := mustPost(t, db, run, "plan", "a?")
	b := mustPost(t, db, run, "plan", "b?")
	const pr = "github/o/r#1"
	n1, err := db.ShortID(ctx, pr, run.ID, a.ID)
	if err != nil || n1 != 1 {
		t.Fatalf("ShortID(a) = %d, %v; want 1", n1, err)
	}
	n2, _ := db.ShortID(ctx, pr, run.ID, b.ID)
	again, _ := db.ShortID(ctx, pr, run.ID, a.ID)
	other, _ := db.ShortID(ctx, "github/o/r#2", run.ID, b.ID)
	if n2 != 2 || again != 1 || other != 1 {
		t.Errorf("ShortID: b=%d a again=%d b in another scope=%d; want 2, 1, 1", n2, again, other)
	}
	all, err := db.ShortIDs(ctx, pr, run.ID)
	if diff := cmp.Diff(map[string]int{a.ID: 1, b.ID: 2}, all); err != nil || diff != "" {
		t.Errorf("ShortIDs mismatch (-want +got), err %v:\n%s", err, diff)
	}
	r, i, err := db.ShortRef(ctx, pr, 2)
	if err != nil || r != run.ID || i != b.ID {
		t.Errorf("ShortRef(2) = %q %q %v", r, i, err)
	}
	if _, _, err := db.ShortRef(ctx, pr, 3); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("ShortRef(3): err = %v, want ErrNotFound", err)
	}
}

// Concurrent askers of one scope never share a number.
func TestShortIDsConcurrent(t *testing.T) {
	ctx := t.Context()
	db := newDB(t, "", Options{SmallMemory: true})
	run := mustCreateRun(t, db, "r-conc", 0, "github")
	const n = 20
	ids := make([]string, n)
	for i := range ids {
		ids[i] = mustPost(t, db, run, "plan", fmt.Sprintf("question %d?", i)).ID
	}
	got := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var err error
			if got[i], err = db.ShortID(ctx, "scope", run.ID, ids[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, k := range got {
		if k < 1 || k > n || seen[k] {
			t.Fatalf("numbers %v: want each of 1..%d once", got, n)
		}
		seen[k] = true
	}
}

func TestRunPosts(t *testing.T) {
	ctx := t.Context()
	db := newDB(t, "", Options{SmallMemory: true})
	run := mustCreateRun(t, db, "r-rp", 0, "github")
	if err := db.SetRunPost(ctx, run.ID, "github-status-comment", "77"); err != nil {
		t.Fatal(err)
	}
	if err := db.SetRunPost(ctx, run.ID, "github-check-run", "5"); err != nil {
		t.Fatal(err)
	}
	if err := db.SetRunPost(ctx, run.ID, "github-check-run", "6"); err != nil {
		t.Fatal(err)
	}
	got, err := db.RunPosts(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"github-status-comment": "77", "github-check-run": "6"}, got); diff != "" {
		t.Errorf("RunPosts mismatch (-want +got):\n%s", diff)
	}
	if err := db.SetRunPost(ctx, "r-none", "x", "1"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("SetRunPost on an unknown run: err = %v, want ErrNotFound", err)
	}
}

func TestRunsByRef(t *testing.T) {
	ctx := t.Context()
	db := newDB(t, t.TempDir(), Options{SmallMemory: true})
	for _, r := range []*engine.Run{
		{ID: "a", Trigger: engine.Trigger{Source: "github", Ref: "github/acme/app#7"}},
		{ID: "b", Trigger: engine.Trigger{Source: "github", Ref: "github/acme/app#7"}},
		{ID: "c", Trigger: engine.Trigger{Source: "github", Ref: "github/acme/app#70"}},
		// A ref that is a prefix of another once a separator is added.
		{ID: "d", Trigger: engine.Trigger{Source: "slack", Ref: "github/acme/app#7/x"}},
		{ID: "e", Trigger: engine.Trigger{Source: "cli"}},
	} {
		if err := db.CreateRun(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	for ref, want := range map[string][]string{
		"github/acme/app#7":   {"a", "b"},
		"github/acme/app#70":  {"c"},
		"github/acme/app#7/x": {"d"},
		"github/Acme/App#7":   nil, // exactly as written: the channel normalizes
		"":                    nil,
	} {
		runs, err := db.RunsByRef(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, runIDs(runs)); diff != "" {
			t.Errorf("RunsByRef(%q) mismatch (-want +got):\n%s", ref, diff)
		}
	}
	long := &engine.Run{ID: "f", Trigger: engine.Trigger{Source: "x", Ref: strings.Repeat("r", maxRefLen+1)}}
	if err := db.CreateRun(ctx, long, nil); err == nil || !strings.Contains(err.Error(), "ref has 1025 bytes") {
		t.Errorf("CreateRun with a %d-byte ref: err = %v, want it refused", maxRefLen+1, err)
	}
}
