package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/iterion-bot/iterion/engine"
)

// testHistory: entries are kept per series in index order (numeric, not
// textual), an entry given again replaces the first, a refused Commit
// writes none, and from and limit page through a series.
func testHistory(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-history", 0)
	entry := func(series string, i int) engine.HistoryEntry {
		return engine.HistoryEntry{Series: series, Index: i, Data: json.RawMessage(fmt.Sprintf(`{"series":%q,"i":%d}`, series, i))}
	}
	var first []engine.HistoryEntry
	for _, i := range []int{10, 2, 0, 1} {
		first = append(first, entry("outputs.n", i))
	}
	// "a/b" must not be read as part of series "a", nor "outputs.nn" of "outputs.n".
	first = append(first, entry("artifacts.a", 0), entry("artifacts.a/b", 0), entry("outputs.nn", 0))
	MustCommit(t, s, engine.Change{RunID: run.ID, Generation: run.Generation, History: first})
	replaced := engine.HistoryEntry{Series: "outputs.n", Index: 1, Data: json.RawMessage(`{"replaced":true}`)}
	MustCommit(t, s, engine.Change{RunID: run.ID, Generation: run.Generation, History: []engine.HistoryEntry{replaced}})
	if err := s.Commit(ctx, engine.Change{RunID: run.ID, Generation: run.Generation - 1, History: []engine.HistoryEntry{entry("outputs.n", 3)}}); !errors.Is(err, engine.ErrStaleOwner) {
		t.Fatalf("stale Commit: err=%v, want ErrStaleOwner", err)
	}

	indexes := func(es []engine.HistoryEntry) []int {
		out := []int{}
		for _, e := range es {
			out = append(out, e.Index)
		}
		return out
	}
	tests := []struct {
		name        string
		series      string
		from, limit int
		want        []int
	}{
		{"all, in index order", "outputs.n", 0, 0, []int{0, 1, 2, 10}},
		{"from", "outputs.n", 2, 0, []int{2, 10}},
		{"limit", "outputs.n", 0, 2, []int{0, 1}},
		{"from and limit", "outputs.n", 1, 2, []int{1, 2}},
		{"past the end", "outputs.n", 11, 0, []int{}},
		{"a series with a slash is its own", "artifacts.a", 0, 0, []int{0}},
		{"a longer name is its own", "outputs.nn", 0, 0, []int{0}},
		{"unknown series", "outputs.none", 0, 0, []int{}},
	}
	for _, tc := range tests {
		got, err := s.History(ctx, run.ID, tc.series, tc.from, tc.limit)
		if err != nil {
			t.Fatalf("%s: History: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, indexes(got)); diff != "" {
			t.Errorf("%s: indexes (-want +got):\n%s", tc.name, diff)
		}
		for _, e := range got {
			if e.Series != tc.series {
				t.Errorf("%s: entry %d has series %q", tc.name, e.Index, e.Series)
			}
		}
	}
	got, err := s.History(ctx, run.ID, "outputs.n", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || string(got[1].Data) != `{"replaced":true}` || string(got[3].Data) != string(entry("outputs.n", 10).Data) {
		t.Errorf("History data = %+v, want entry 1 replaced and the others as written", got)
	}
	if _, err := s.History(ctx, "r-nobody", "outputs.n", 0, 0); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("History of an unknown run: err=%v, want ErrNotFound", err)
	}
	if err := s.Commit(ctx, engine.Change{RunID: run.ID, Generation: run.Generation, History: []engine.HistoryEntry{{Series: "outputs.n", Index: 4, Data: json.RawMessage("not json")}}}); err == nil {
		t.Errorf("Commit of an entry whose data is not JSON: no error")
	}
}
