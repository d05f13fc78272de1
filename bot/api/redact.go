package api

import (
	"bytes"
	"net/http"

	"github.com/iterion-bot/iterion/engine"
)

// scrubBodies returns h with the bodies of its answers scrubbed of the
// server's secrets: run records (their vars and errors), events,
// questions and error messages alike. The answers are JSON, and r scrubs
// the JSON forms of each secret too. A nil r returns h.
func scrubBodies(r *engine.Redactor, h http.Handler) http.Handler {
	if r == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		sw := &scrubWriter{ResponseWriter: w}
		h.ServeHTTP(sw, req)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		body := r.String(sw.body.String())
		w.Header().Del("Content-Length")
		w.WriteHeader(sw.status)
		_, _ = w.Write([]byte(body))
	})
}

// scrubWriter holds an answer's body until it can be scrubbed whole (a
// secret may straddle two writes).
type scrubWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *scrubWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *scrubWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}
