package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// /metrics counts a postponed delivery among the pending ones, says how
// many are postponed, and how old the oldest is.
func TestMetricsCountPostponedDeliveries(t *testing.T) {
	t.Parallel()
	received := time.Now().Add(-time.Hour)
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true, Clock: func() time.Time { return received }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	for _, id := range []string{"a", "b"} {
		if _, err := db.RecordDelivery(ctx, store.Delivery{Source: "github/1", ID: id, Event: "issue_comment"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RetryDelivery(ctx, "github/1", "b", received.Add(24*time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	metricsHandler(db, slog.New(slog.DiscardHandler)).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{"\niterion_deliveries_pending 2\n", "\niterion_deliveries_postponed 1\n"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
	var age float64
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "iterion_deliveries_oldest_age_seconds "); ok {
			if _, err := fmt.Sscan(v, &age); err != nil {
				t.Fatal(err)
			}
		}
	}
	if age < 3600 {
		t.Errorf("oldest age %v s, want at least an hour", age)
	}
}

// /metrics says how old the oldest side effect waiting in the outbox is,
// and whether the sandbox can run processes.
func TestMetricsOutboxAgeAndSandbox(t *testing.T) {
	t.Parallel()
	written := time.Now().Add(-2 * time.Hour)
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true, Clock: func() time.Time { return written }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	if err := db.CreateRun(ctx, &engine.Run{ID: "r", Channels: []string{"github"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Commit(ctx, engine.Change{RunID: "r", Outbox: []engine.OutboxRow{{Kind: engine.OutboxRunFinished}}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		available error
		want      string
	}{
		{nil, `iterion_sandbox_available{driver="bwrap"} 1`},
		{errors.New("bubblewrap is not installed"), `iterion_sandbox_available{driver="bwrap"} 0`},
	} {
		rec := httptest.NewRecorder()
		h := metricsHandler(db, slog.New(slog.DiscardHandler), newSandboxCollector("bwrap", func() error { return tc.available }))
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body := rec.Body.String()
		if !strings.Contains(body, "\n"+tc.want+"\n") {
			t.Errorf("/metrics lacks %s", tc.want)
		}
		var age float64
		for line := range strings.Lines(body) {
			if v, ok := strings.CutPrefix(line, "iterion_outbox_oldest_age_seconds "); ok {
				if _, err := fmt.Sscan(v, &age); err != nil {
					t.Fatal(err)
				}
			}
		}
		if age < 2*3600 {
			t.Errorf("oldest outbox row %v s old, want at least two hours", age)
		}
	}
}
