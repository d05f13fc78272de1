package github

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/store"
)

func newIntake(t *testing.T) (*delivery.Intake, *store.DB, *atomic.Int32) {
	t.Helper()
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var woken atomic.Int32
	return NewIntake(IntakeOptions{AppID: 123, WebhookSecret: []byte("s3cret"), Store: db, Wake: func() { woken.Add(1) }}), db, &woken
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
	noInstallation := []byte(strings.Replace(string(payload), `"installation": {"id": 42},`, "", 1))
	// Larger than a chunk of the pool, so the signature runs over several.
	large := []byte(strings.Replace(string(payload), `"/iterion run review"`, `"/iterion run review `+strings.Repeat("x", 3*delivery.DefaultChunk)+`"`, 1))
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
		{"signature not hex", "d-4b", "issue_comment", payload, "sha256=zz", http.StatusUnauthorized, 1},
		{"malformed JSON with a valid signature", "d-5", "issue_comment", []byte("{oops"), Sign(secret, []byte("{oops")), http.StatusBadRequest, 1},
		{"unknown event is acknowledged and ignored", "d-6", "star", payload, Sign(secret, payload), http.StatusAccepted, 1},
		{"ping is acknowledged and ignored", "d-6b", "ping", []byte(`{"zen": "Keep it logically awesome."}`), Sign(secret, []byte(`{"zen": "Keep it logically awesome."}`)), http.StatusAccepted, 1},
		{"a repository webhook (no installation) is acknowledged and ignored", "d-6c", "issue_comment", noInstallation, Sign(secret, noInstallation), http.StatusAccepted, 1},
		{"missing delivery id", "", "issue_comment", payload, Sign(secret, payload), http.StatusBadRequest, 1},
		{"another delivery", "d-7", "pull_request", payload, Sign(secret, payload), http.StatusAccepted, 2},
		{"a delivery of several chunks", "d-8", "issue_comment", large, Sign(secret, large), http.StatusAccepted, 3},
		{"several chunks, signed for another body", "d-9", "issue_comment", large, Sign(secret, payload), http.StatusUnauthorized, 3},
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
	if woken.Load() != 3 {
		t.Errorf("the worker was woken %d times, want 3 (once per new delivery)", woken.Load())
	}
	// Each is stored as received, with its installation, for the workers'
	// turns.
	pending, _ := db.PendingDeliveries(context.Background(), 0)
	for _, d := range pending {
		if d.Group != "installation/42" {
			t.Errorf("delivery %s stored with group %q, want installation/42", d.ID, d.Group)
		}
		if d.ID == "d-8" && !bytes.Equal(d.Payload, large) {
			t.Errorf("delivery d-8 stored %d bytes, want the %d received", len(d.Payload), len(large))
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
