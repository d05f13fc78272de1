package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/engine"
)

// newOwnerWithQuestion makes this process the owner of a fresh store
// holding run r-1 with one pending async question.
func newOwnerWithQuestion(t *testing.T) (o *owner, dir string, ix *engine.Interaction) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "st")
	a := newCLI(t).app(nil, io.Discard, io.Discard)
	t.Cleanup(func() { a.Close() })
	o, err := a.becomeOwner(dir, "test", engine.Options{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	run := &engine.Run{ID: "r-1", Workflow: "w", Status: engine.StatusRunning, CreatedAt: now, UpdatedAt: now}
	if err := o.db.CreateRun(ctx, run, nil); err != nil {
		t.Fatal(err)
	}
	if run, err = o.db.Acquire(ctx, run.ID, "test"); err != nil {
		t.Fatal(err)
	}
	ix, err = o.db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "draft", Questions: map[string]any{engine.QuestionKey: "Which licence?"}})
	if err != nil {
		t.Fatal(err)
	}
	return o, dir, ix
}

// hostileSocket listens on a unix socket outside the private directory
// and counts who connects.
func hostileSocket(t *testing.T) (path string, conns *atomic.Int32) {
	t.Helper()
	d, err := os.MkdirTemp("", "hostile")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	path = filepath.Join(d, "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	return path, conns
}

func writeOwnerFile(t *testing.T, dir, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// An owner.json naming another socket does not lead the CLI there: it
// reaches the real owner on the socket of its private directory, or opens
// the store itself when there is none, and the other socket sees nobody.
func TestHostileOwnerFileIgnored(t *testing.T) {
	t.Parallel()
	o, dir, _ := newOwnerWithQuestion(t)
	sock, conns := hostileSocket(t)
	hostile := `{"pid": ` + strconv.Itoa(os.Getpid()) + `, "socket": "` + sock + `", "command": "iterion serve", "since": "2026-01-01T00:00:00Z"}`
	writeOwnerFile(t, dir, hostile)
	code, out, errOut := runCLI(t, "runs", "list", "--store-dir", dir)
	if code != exitOK || !strings.Contains(out, "r-1") {
		t.Errorf("runs list with an owner: exit %d\n%s%s", code, out, errOut)
	}
	// No owner any more, but owner.json still names a live pid.
	o.Close()
	writeOwnerFile(t, dir, hostile)
	code, out, errOut = runCLI(t, "runs", "list", "--store-dir", dir)
	if code != exitOK || !strings.Contains(out, "r-1") {
		t.Errorf("runs list without an owner: exit %d\n%s%s", code, out, errOut)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the socket named in owner.json got %d connections, want none", n)
	}
}

// The owner's record no longer says where its socket is; the socket and
// the token are in the private directory, the token 0600.
func TestOwnerFiles(t *testing.T) {
	t.Parallel()
	_, dir, _ := newOwnerWithQuestion(t)
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if _, ok := rec["socket"]; ok || rec["pid"] != float64(os.Getpid()) || rec["command"] != "test" {
		t.Errorf("owner.json = %s, want pid, command and since only", b)
	}
	ep, err := api.LocalEndpoint(dir, newCLI(t).app(nil, nil, nil).localOptions())
	if err != nil {
		t.Fatal(err)
	}
	if rt := testRuntimeDir; ep.Dir != rt {
		t.Errorf("private directory %s, want $ITERION_RUNTIME_DIR %s", ep.Dir, rt)
	}
	fi, err := os.Lstat(ep.TokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v, %v; want mode 0600", fi, err)
	}
	if _, err := os.Lstat(ep.Socket); err != nil {
		t.Errorf("socket: %v", err)
	}
}

// runs answer through the owner is recorded as the OS user via cli,
// whatever --by says.
func TestRunsAnswerRecordsTheOSUser(t *testing.T) {
	t.Parallel()
	o, dir, ix := newOwnerWithQuestion(t)
	code, out, errOut := runCLI(t, "runs", "answer", "r-1", ix.ID, "MIT", "--by", "carol", "--store-dir", dir)
	if code != exitOK || !strings.Contains(out, "recorded") {
		t.Fatalf("runs answer: exit %d\n%s%s", code, out, errOut)
	}
	got, err := o.db.Interaction(context.Background(), "r-1", ix.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := api.UserName(os.Getuid()); got.AnsweredBy != want || got.Via != "cli" {
		t.Errorf("answered by %q via %q, want %q via cli", got.AnsweredBy, got.Via, want)
	}
}

// A command whose private directory is not the owner's cannot reach it,
// and says why.
func TestRunsWithAnotherRuntimeDir(t *testing.T) {
	t.Parallel()
	_, dir, _ := newOwnerWithQuestion(t)
	other, err := os.MkdirTemp("", "itrt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(other) })
	c := newCLI(t)
	c.setenv("ITERION_RUNTIME_DIR", filepath.Join(other, "run"))
	code, out, errOut := c.run("runs", "list", "--store-dir", dir)
	if code != exitError || !strings.Contains(errOut, "owns it") || !strings.Contains(errOut, "its owner's API did not answer either") {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
	// A private directory others can write to is refused, naming it.
	if err := os.Chmod(filepath.Join(other, "run"), 0o777); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = c.run("runs", "list", "--store-dir", dir)
	if code != exitError || !strings.Contains(errOut, "private directory "+filepath.Join(other, "run")+" is writable by other users") {
		t.Errorf("exit %d, %s", code, errOut)
	}
}
