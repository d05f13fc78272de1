package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// A store with paused runs, their questions and an outbox row is backed
// up through the live serve that owns it; restored into a new directory,
// a serve on the restored store answers the questions and finishes the
// runs, and still has the outbox row to perform.
func TestBackupRestoreServeFinishes(t *testing.T) {
	t.Parallel()
	wf, err := filepath.Abs("../../examples/async-questions/main.bot")
	if err != nil {
		t.Fatal(err)
	}
	a := &asker{posted: make(chan []string, 2)}
	c := newCLI(t)
	c.dir = t.TempDir()
	c.useBackend(a)
	c.setenv("ITERION_API_TOKEN", "tok")
	questions := map[string][]string{}
	for _, id := range []string{"park-1", "park-2"} {
		if code, out, errOut := c.run("run", wf, "--store-dir", "st", "--run-id", id, "--no-interactive"); code != exitOK {
			t.Fatalf("run %s: exit %d\n%s%s", id, code, out, errOut)
		}
		questions[id] = <-a.posted
	}
	// A run of the github channel leaves an outbox row (its start, to
	// post), which no App performs here.
	db, err := store.Open(filepath.Join(c.dir, "st"), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateRun(context.Background(), &engine.Run{ID: "gh-1", Workflow: "w", Status: engine.StatusCancelled, Channels: []string{"github"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	_, stop := startServe(t, c)
	code, out, errOut := c.run("store", "backup", "b.backup", "--store-dir", "st")
	if code != exitOK || !strings.Contains(out, "taken by its owner, pid ") || !strings.Contains(out, "(iterion serve)") {
		t.Fatalf("backup through serve: exit %d\n%s%s", code, out, errOut)
	}
	backup := filepath.Join(c.dir, "b.backup")
	if st, err := os.Stat(backup); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the backup file: %v, %v; want it 0600", st, err)
	}
	if code, _, errOut := c.run("store", "backup", "b.backup", "--store-dir", "st"); code != exitError || !strings.Contains(errOut, "b.backup exists: choose another file") {
		t.Errorf("a second backup to the same file: exit %d, %s", code, errOut)
	}
	if code := stop(); code != exitOK {
		t.Fatalf("serve exited %d", code)
	}

	c2 := newCLI(t)
	c2.dir = t.TempDir()
	c2.useBackend(a)
	c2.setenv("ITERION_API_TOKEN", "tok")
	code, out, errOut = c2.run("store", "restore", backup, "--store", "st")
	if code != exitOK || !strings.Contains(out, "restored "+backup) || !strings.Contains(out, "serve it with: iterion serve --store-dir "+filepath.Join(c2.dir, "st")) {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := c2.run("store", "restore", backup, "--store-dir", "st"); code != exitError || !strings.Contains(errOut, "directory is not empty") {
		t.Errorf("restore over the restored store: exit %d, %s", code, errOut)
	}

	base, stop2 := startServe(t, c2)
	for _, id := range []string{"park-1", "park-2"} {
		for i, q := range questions[id] {
			code, out, errOut := c2.run("runs", "answer", id, q, []string{"MIT", "Go 1.26"}[i], "--store-dir", "st")
			if code != exitOK || !strings.Contains(out, "answer to "+q+" recorded") {
				t.Fatalf("answering %s on the restored store: exit %d\n%s%s", q, code, out, errOut)
			}
		}
		waitRunStatus(t, base, "tok", id, engine.StatusFinished)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), "iterion_outbox_rows 1\n") {
		t.Errorf("the restored store's outbox: /metrics lacks iterion_outbox_rows 1")
	}
	if code := stop2(); code != exitOK {
		t.Errorf("serve on the restored store exited %d", code)
	}
}

// Without an owner, backup opens the store itself; restore refuses what
// is not a backup, naming the file.
func TestBackupOfflineAndRefusals(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.dir = t.TempDir()
	if code, _, errOut := c.run("store", "backup", "b.backup", "--store-dir", "st"); code != exitError || !strings.Contains(errOut, "no iterion store at "+filepath.Join(c.dir, "st")) {
		t.Errorf("backup of no store: exit %d, %s", code, errOut)
	}
	wf := writeFile(t, "w.bot", "compute c:\n  expr:\n    x: \"1\"\nworkflow w:\n  entry: c\n  c -> done\n")
	if code, out, errOut := c.run("run", wf, "--store-dir", "st", "--run-id", "r1"); code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := c.run("store", "backup", "b.backup", "--store-dir", "st")
	if code != exitOK || !strings.Contains(out, "opened by this command: no process owns it") {
		t.Fatalf("offline backup: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := c.run("store", "restore", "b.backup", "--store-dir", "st2"); code != exitOK {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := c.run("runs", "list", "--store-dir", "st2"); code != exitOK || !strings.Contains(out, "r1") {
		t.Errorf("runs list on the restored store: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := c.run("store", "restore", wf, "--store-dir", "st3"); code != exitError || !strings.Contains(errOut, "restoring "+wf+": not an iterion store backup") {
		t.Errorf("restore of a workflow file: exit %d, %s", code, errOut)
	}
	if code, _, errOut := c.run("store", "restore", "--store-dir", "st3"); code != exitUsage || !strings.Contains(errOut, "restore needs the backup to read") {
		t.Errorf("restore without a file: exit %d, %s", code, errOut)
	}
}
