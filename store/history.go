package store

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/iterion-bot/iterion/engine"
)

// historyPrefix is where a run's entries of one history series live. The
// series is path-escaped: a publish name may hold '/', and one series'
// prefix must not match another's keys.
func historyPrefix(run, series string) []byte {
	return []byte("hist/" + run + "/" + url.PathEscape(series) + "/")
}

func historyKey(run, series string, index int) []byte {
	return append(historyPrefix(run, series), pad(int64(index))...)
}

// historyRecord is the value of a history key.
type historyRecord struct {
	Series string          `json:"series"`
	Index  int             `json:"index"`
	Data   json.RawMessage `json:"data"`
}

// putHistory writes the history entries of a Commit.
func putHistory(txn *tx, runID string, entries []engine.HistoryEntry) error {
	for _, h := range entries {
		if h.Series == "" || h.Index < 0 {
			return fmt.Errorf("history entry %q/%d: want a series and an index >= 0", h.Series, h.Index)
		}
		if !json.Valid(h.Data) {
			return fmt.Errorf("history entry %s/%d: data is not JSON", h.Series, h.Index)
		}
		if err := put(txn, historyKey(runID, h.Series, h.Index), historyRecord{Series: h.Series, Index: h.Index, Data: h.Data}); err != nil {
			return err
		}
	}
	return nil
}

// History returns entries of a run's history series; see engine.Store.
func (db *DB) History(ctx context.Context, runID, series string, from, limit int) ([]engine.HistoryEntry, error) {
	var out []engine.HistoryEntry
	err := db.view(ctx, func(txn *tx) error {
		out = nil
		if _, err := getRun(txn, runID); err != nil {
			return err
		}
		return scan(txn, historyPrefix(runID, series), historyKey(runID, series, max(from, 0)), func(_ []byte, h *historyRecord) (bool, error) {
			out = append(out, engine.HistoryEntry{Series: h.Series, Index: h.Index, Data: h.Data})
			return limit <= 0 || len(out) < limit, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading history %s of run %s: %w", series, runID, err)
	}
	return out, nil
}
