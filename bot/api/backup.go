package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// backupPath is the route of the store's backup.
const backupPath = "/api/store/backup"

// serveBackup streams the store's backup to a caller on the local socket.
func (s *Server) serveBackup(w http.ResponseWriter, r *http.Request) {
	c, _ := CallerFrom(r.Context())
	switch {
	case s.backup == nil:
		writeJSON(w, http.StatusNotFound, errorBody{Error: "this server does not serve backups", Code: "not_found"})
		return
	case r.Method != http.MethodGet:
		w.Header().Set("Allow", http.MethodGet)
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: "use GET " + backupPath, Code: "bad_request"})
		return
	case c.Via != "cli":
		writeJSON(w, http.StatusForbidden, errorBody{
			Error: "a backup holds the whole store, so it is served only on the owner's local socket: run iterion store backup on the server's machine, as its user",
			Code:  "forbidden"})
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	// The status is sent with the first bytes: an error before them is an
	// error answer, one after them cuts the stream.
	sw := &startWriter{w: w}
	err := s.backup(r.Context(), sw)
	if err == nil {
		return
	}
	s.log.Error("api: backup failed", "err", err, "sent", sw.n)
	if sw.n == 0 {
		// The caller is the store's own user, who may read the detail.
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: err.Error(), Code: "internal"})
		return
	}
	// Ending the handler without the rest makes the chunked body end
	// without its last chunk, which the client reads as cut short.
	panic(http.ErrAbortHandler)
}

// startWriter counts what was written through it.
type startWriter struct {
	w io.Writer
	n int64
}

func (s *startWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.n += int64(n)
	return n, err
}

// Backup writes the store's backup, as the owner streams it, to w. It is
// served only on the local socket (a client of NewUnixClient). A stream
// cut short, by the owner or the connection, is an error: what w got
// then does not restore.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+backupPath, nil)
	if err != nil {
		return 0, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	// A backup lasts as long as the store is large: no overall timeout,
	// only ctx.
	hc := *c.http
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("calling the store owner: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, replyError(resp)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return n, fmt.Errorf("the store owner's backup stream was cut short after %d bytes (see the owner's log): %w", n, err)
		}
		return n, fmt.Errorf("reading the store owner's backup: %w", err)
	}
	return n, nil
}

// replyError reads an error reply.
func replyError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return decodeError(resp, data)
}
