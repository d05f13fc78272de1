package api

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/engine"
)

// An answer's body is scrubbed whole, with its status and headers kept:
// a run record (its vars and error), events, an error reply, and a
// secret split across two writes. (Through the server, the end-to-end
// test in cmd/iterion reads every route.)
func TestScrubBodies(t *testing.T) {
	const secret = `sk-ant-api03-s3cr3t"0123456789`
	run := &engine.Run{ID: "leak", Status: engine.StatusFailed, Error: "key " + secret + " refused", Vars: map[string]any{"key": secret}}
	evs := []engine.Event{{Type: engine.EventRunFailed, Data: map[string]any{"error": secret}}}
	for _, tc := range []struct {
		name   string
		h      http.HandlerFunc
		status int
	}{
		{"run record", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, run) }, http.StatusOK},
		{"events", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"events": evs})
		}, http.StatusOK},
		{"error reply", func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, http.StatusBadRequest, errors.New("bad key "+secret))
		}, http.StatusBadRequest},
		{"split across writes", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `{"a": "`+secret[:10])
			_, _ = io.WriteString(w, secret[10:]+`"}`)
		}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			scrubBodies(engine.NewRedactor(secret), tc.h).ServeHTTP(rec, httptest.NewRequest("GET", "/api/runs/leak", nil))
			body := rec.Body.String()
			if rec.Code != tc.status || strings.Contains(body, "s3cr3t") || !strings.Contains(body, engine.Redacted) {
				t.Errorf("%d %s, want %d and the secret scrubbed", rec.Code, body, tc.status)
			}
		})
	}
}
