package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
