package github

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/iterion-bot/iterion/store"
)

func newIntake(t *testing.T) (*Intake, *store.DB, *atomic.Int32) {
	t.Helper()
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var woken atomic.Int32
	return NewIntake("123", []byte("s3cret"), db, nil, func() { woken.Add(1) }), db, &woken
}

func deliver(t *testing.T, h http.Handler, id, event string, body []byte, sig string) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(body))
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-GitHub-Event", event)
	if sig != "" {
		req.Header.Set("X-Hub-Signature-256", sig)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func TestIntake(t *testing.T) {
	payload, err := os.ReadFile("testdata/issue_comment.json")
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("s3cret")
	tests := []struct {
		name      string
		id, event string
		body      []byte
		sig       string
		want      int
		stored    int // pending deliveries after the request
	}{
		{"signed delivery is stored then acknowledged", "d-1", "issue_comment", payload, Sign(secret, payload), http.StatusAccepted, 1},
		{"redelivery has no second effect", "d-1", "issue_comment", payload, Sign(secret, payload), http.StatusAccepted, 1},
		{"bad signature stores nothing", "d-2", "issue_comment", payload, Sign([]byte("wrong"), payload), http.StatusUnauthorized, 1},
		{"missing signature", "d-3", "issue_comment", payload, "", http.StatusUnauthorized, 1},
		{"SHA-1 signature is not accepted", "d-4", "issue_comment", payload, "sha1=0123", http.StatusUnauthorized, 1},
		{"malformed JSON with a valid signature", "d-5", "issue_comment", []byte("{oops"), Sign(secret, []byte("{oops")), http.StatusBadRequest, 1},
		{"unknown event is acknowledged and ignored", "d-6", "star", payload, Sign(secret, payload), http.StatusAccepted, 1},
		{"missing delivery id", "", "issue_comment", payload, Sign(secret, payload), http.StatusBadRequest, 1},
		{"another delivery", "d-7", "pull_request", payload, Sign(secret, payload), http.StatusAccepted, 2},
	}
	in, db, woken := newIntake(t)
	for _, tc := range tests {
		if got := deliver(t, in, tc.id, tc.event, tc.body, tc.sig); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
		pending, err := db.PendingDeliveries(context.Background(), 0)
		if err != nil || len(pending) != tc.stored {
			t.Errorf("%s: %d stored deliveries (%v), want %d", tc.name, len(pending), err, tc.stored)
		}
	}
	if woken.Load() != 2 {
		t.Errorf("the worker was woken %d times, want 2 (once per new delivery)", woken.Load())
	}
	// Each is stored with its installation, for the workers' turns.
	pending, _ := db.PendingDeliveries(context.Background(), 0)
	for _, d := range pending {
		if d.Group != "installation/42" {
			t.Errorf("delivery %s stored with group %q, want installation/42", d.ID, d.Group)
		}
	}
}

func TestIntakeLimits(t *testing.T) {
	in, _, _ := newIntake(t)
	big := []byte(`{"x":"` + strings.Repeat("a", MaxPayload) + `"}`)
	if got := deliver(t, in, "big", "issue_comment", big, Sign([]byte("s3cret"), big)); got != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized payload: status %d, want 413", got)
	}
	req := httptest.NewRequest(http.MethodGet, "/webhooks/github", nil)
	rec := httptest.NewRecorder()
	in.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: status %d, want 405", rec.Code)
	}
}

// slowBody opens a POST declaring length bytes and sends one, then holds
// the connection; it returns the connection, to read the answer from.
func slowBody(t *testing.T, addr string, length int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: slow\r\nContent-Length: %d\r\n\r\n{", length)
	return conn
}

// status reads the status code of the answer on conn.
func status(t *testing.T, conn net.Conn) int {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Unauthenticated bodies cannot take the intake's memory: bodies being
// read hold at most the small lane's slots and the large lane's budget,
// and a body beyond them is refused at once with 503, unread and holding
// nothing, while a small signed delivery still has its lane when large
// bodies hold theirs. (Slots are held here as slow bodies would hold
// them, without timing a real slow client.)
func TestIntakeBoundsBodies(t *testing.T) {
	in, db, _ := newIntake(t)
	in.SmallBodies, in.LargeBytes = 2, 30<<20
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")

	_, releaseLarge, ok := in.admit(20 << 20)
	if !ok {
		t.Fatal("a first large body was refused")
	}
	if _, _, ok := in.admit(20 << 20); ok {
		t.Error("a second 20 MiB body fits a 30 MiB budget")
	}
	if _, _, ok := in.admit(-1); ok {
		t.Error("a body of unknown length (25 MiB reserved) fits what is left")
	}
	// The small lane is separate: a signed delivery is taken.
	payload, _ := os.ReadFile("testdata/issue_comment.json")
	if code := deliver(t, in, "small", "issue_comment", payload, Sign([]byte("s3cret"), payload)); code != http.StatusAccepted {
		t.Errorf("a signed delivery beside a large body: %d", code)
	}
	_, release1, _ := in.admit(1000)
	_, release2, _ := in.admit(1000)
	// A third small body, sent slowly, is refused at once, unread.
	c := slowBody(t, addr, 1000)
	if code := status(t, c); code != http.StatusServiceUnavailable {
		t.Errorf("a body beyond the small lane: %d, want 503", code)
	}
	release1()
	release2()
	releaseLarge()
	if in.smallInUse != 0 || in.largeInUse != 0 {
		t.Errorf("after release: %d small, %d large bytes in use", in.smallInUse, in.largeInUse)
	}
	if code := deliver(t, in, "after", "issue_comment", payload, Sign([]byte("s3cret"), payload)); code != http.StatusAccepted {
		t.Errorf("a signed delivery after: %d", code)
	}
	if p, _ := db.PendingDeliveries(t.Context(), 0); len(p) != 2 {
		t.Errorf("%d stored, want the two signed ones", len(p))
	}
}
