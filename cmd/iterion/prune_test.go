package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// pruneStore makes a store in a new directory with, changed 40 days ago,
// a finished run (r-old) and a paused one (r-paused), and a run finished
// yesterday (r-recent); each with a workspace, .bot and .home under
// workspaces/. It returns the directory.
func pruneStore(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	at := time.Now().Add(-40 * 24 * time.Hour)
	db, err := store.Open(dir, store.Options{SmallMemory: true, Clock: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, r := range []struct {
		id     string
		status engine.Status
		ago    time.Duration
	}{
		{"r-old", engine.StatusFinished, 40 * 24 * time.Hour},
		{"r-paused", engine.StatusPausedWaitingHuman, 40 * 24 * time.Hour},
		{"r-recent", engine.StatusFinished, 24 * time.Hour},
	} {
		at = time.Now().Add(-r.ago)
		if err := db.CreateRun(t.Context(), &engine.Run{ID: r.id, Workflow: "wf", Status: engine.StatusRunning}, []engine.Event{{Type: engine.EventRunStarted}}); err != nil {
			t.Fatal(err)
		}
		if err := db.Commit(t.Context(), engine.Change{RunID: r.id, Status: r.status}); err != nil {
			t.Fatal(err)
		}
		for _, p := range workspacePaths(dir, r.id) {
			if err := os.MkdirAll(filepath.Join(p, "sub"), 0o700); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A tool made part of r-old's home read-only, as Go's module cache is.
	if err := os.Chmod(filepath.Join(workspacePaths(dir, "r-old")[2], "sub"), 0o500); err != nil {
		t.Fatal(err)
	}
	return dir
}

func workspacePaths(dir, id string) []string {
	ws := filepath.Join(dir, "workspaces", id)
	return []string{ws, ws + ".bot", ws + ".home"}
}

// storedRuns lists the ids of the runs in the store in dir.
func storedRuns(t *testing.T, dir string) []string {
	t.Helper()
	code, out, errs := runCLI(t, "runs", "list", "--store-dir", dir, "--json")
	if code != 0 {
		t.Fatalf("runs list: exit %d: %s", code, errs)
	}
	var got struct {
		Runs []engine.Run `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range got.Runs {
		ids = append(ids, r.ID)
	}
	return ids
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func TestRunsPrune(t *testing.T) {
	t.Parallel()
	dir := pruneStore(t)

	code, out, errs := runCLI(t, "runs", "prune", "--store-dir", dir, "--older-than", "30d", "--dry-run")
	if code != 0 {
		t.Fatalf("prune --dry-run: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "r-old") || strings.Contains(out, "r-paused") || strings.Contains(out, "r-recent") ||
		!strings.Contains(out, "would remove 1 run unchanged for 30d") {
		t.Errorf("prune --dry-run printed:\n%s\nwant r-old alone, as would be removed", out)
	}
	if got := storedRuns(t, dir); len(got) != 3 || !exists(workspacePaths(dir, "r-old")[0]) {
		t.Fatalf("after --dry-run the store holds %v and r-old's workspace exists=%v; want all three runs and the workspace", got, exists(workspacePaths(dir, "r-old")[0]))
	}

	code, out, errs = runCLI(t, "runs", "prune", "--store-dir", dir, "--older-than", "720h")
	if code != 0 {
		t.Fatalf("prune: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "r-old") || !strings.Contains(out, "removed 1 run unchanged for 720h, with their events, checkpoints and workspaces") {
		t.Errorf("prune printed:\n%s\nwant r-old as removed", out)
	}
	if got := strings.Join(storedRuns(t, dir), " "); got != "r-recent r-paused" {
		t.Errorf("after prune the store holds %q, want r-recent r-paused", got)
	}
	for _, p := range workspacePaths(dir, "r-old") {
		if exists(p) {
			t.Errorf("%s is still there after prune", p)
		}
	}
	for _, id := range []string{"r-paused", "r-recent"} {
		for _, p := range workspacePaths(dir, id) {
			if !exists(p) {
				t.Errorf("%s of a kept run was removed", p)
			}
		}
	}

	code, out, _ = runCLI(t, "runs", "prune", "--store-dir", dir, "--older-than", "30d")
	if code != 0 || !strings.Contains(out, "nothing to remove") {
		t.Errorf("second prune: exit %d, printed %q; want nothing to remove", code, out)
	}
}

func TestRunsPruneUsage(t *testing.T) {
	t.Parallel()
	dir := pruneStore(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no age", nil, "prune needs --older-than, like --older-than 30d"},
		{"bad unit", []string{"--older-than", "30x"}, `--older-than "30x": not a number of days or a duration; write a number of days like 30d, or a duration like 720h`},
		{"zero", []string{"--older-than", "0d"}, "not more than zero"},
		{"negative", []string{"--older-than", "-5h"}, "not more than zero"},
		{"too long", []string{"--older-than", "999999d"}, "more than 100000 days"},
		{"argument", []string{"--older-than", "30d", "r-old"}, `unexpected argument "r-old"`},
	}
	for _, tc := range tests {
		// Serial: the cases open the one store in turn.
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runCLI(t, append([]string{"runs", "prune", "--store-dir", dir}, tc.args...)...)
			if code != exitUsage || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 saying %q", code, errs, tc.want)
			}
		})
	}
	if got := storedRuns(t, dir); len(got) != 3 {
		t.Errorf("refused commands changed the store: it holds %v", got)
	}
}

// TestRunsPruneWithOwner refuses to prune a store a live process holds,
// pointing to serve's retention.
func TestRunsPruneWithOwner(t *testing.T) {
	t.Parallel()
	dir := pruneStore(t)
	b, _ := json.Marshal(ownerInfo{PID: os.Getpid(), Command: "serve", Since: time.Now()})
	if err := os.WriteFile(filepath.Join(dir, ownerFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, "runs", "prune", "--store-dir", dir, "--older-than", "30d")
	if code != exitError || !strings.Contains(errs, "held by iterion pid") || !strings.Contains(errs, "retention") {
		t.Errorf("exit %d, stderr %q; want exit 1 naming the owner and serve's retention", code, errs)
	}
	if !exists(workspacePaths(dir, "r-old")[0]) {
		t.Error("r-old's workspace was removed though the store is held")
	}
}

// TestRunsPruneDiskFull prunes a store on a disk fuller than its reserve:
// the workspaces of the runs to prune go first, as they free space
// without writing to the store; as the disk is still too full, the
// records stay and the error says why.
func TestRunsPruneDiskFull(t *testing.T) {
	t.Parallel()
	dir := pruneStore(t)
	var out bytes.Buffer
	p := pruneCommand{dir: dir, age: "30d", out: &out, opts: store.Options{SmallMemory: true, DiskReserve: 1 << 62}}
	err := p.run(t.Context(), time.Now().Add(-30*24*time.Hour))
	if !errors.Is(err, engine.ErrStorageFull) || !strings.Contains(err.Error(), "the workspaces of the runs to prune (1) were removed, but their records stay") {
		t.Fatalf("prune on a full disk: %v; want engine.ErrStorageFull saying what was done", err)
	}
	for _, p := range workspacePaths(dir, "r-old") {
		if exists(p) {
			t.Errorf("%s is still there", p)
		}
	}
	if got := storedRuns(t, dir); len(got) != 3 {
		t.Errorf("the store holds %v, want its three runs", got)
	}
}

func FuzzParseAge(f *testing.F) {
	for _, s := range []string{"30d", "720h", "1h30m", "0d", "-1h", "d", "1.5d", "99999999999999999999d", " 3d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseAge(s)
		if err != nil {
			return
		}
		if d <= 0 {
			t.Errorf("parseAge(%q) = %v, want more than zero", s, d)
		}
		if days, ok := strings.CutSuffix(s, "d"); ok && d%(24*time.Hour) != 0 {
			t.Errorf("parseAge(%q) = %v, not whole days of %q", s, d, days)
		}
	})
}
