package api_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// On the local socket the owner streams the store's backup, which
// restores; on TCP the route is refused whatever the token.
func TestBackupOnTheSocketOnly(t *testing.T) {
	f := newFixture(t)
	c, err := api.DialLocal(f.storeDir, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := c.Backup(t.Context(), &buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("Backup = %d bytes, %v; got %d", n, err, buf.Len())
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := store.Restore(dir, &buf, store.Options{SmallMemory: true}); err != nil {
		t.Fatalf("restoring the owner's backup: %v", err)
	}
	db, err := store.Open(dir, store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if pending, err := db.Pending(t.Context(), f.run.ID, ""); err != nil || len(pending) != 1 || pending[0].ID != f.ix.ID {
		t.Errorf("the restored store's pending questions = %v, %v; want %s", pending, err, f.ix.ID)
	}

	_, err = f.client.Backup(t.Context(), io.Discard)
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden || !strings.Contains(apiErr.Message, "served only on the owner's local socket") {
		t.Errorf("Backup on TCP = %v, want 403 naming the socket", err)
	}
}

// A backup that fails before its first byte is an error answer; one that
// fails midway cuts the stream, which the client reports rather than
// taking what it got for a backup.
func TestBackupFailures(t *testing.T) {
	tests := []struct {
		name   string
		backup func(ctx context.Context, w io.Writer) error
		want   string
	}{
		{name: "before the first byte", backup: func(context.Context, io.Writer) error { return store.ErrClosed }, want: "store is closed"},
		{name: "midway", backup: func(_ context.Context, w io.Writer) error {
			if _, err := w.Write(bytes.Repeat([]byte("x"), 64<<10)); err != nil {
				return err
			}
			return errors.New("disk read error")
		}, want: "cut short after"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db, err := store.Open("", store.Options{InMemory: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			h := api.NewServer(engine.New(engine.Options{Store: db}), db, api.Options{Backup: tc.backup, Logger: slog.New(slog.DiscardHandler)}).Handler()
			storeDir, opts := t.TempDir(), api.LocalOptions{Dir: newRuntimeDir(t)}
			ls, err := api.ServeLocal(storeDir, h, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer ls.Close()
			c, err := api.DialLocal(storeDir, opts)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Backup(t.Context(), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Backup = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
