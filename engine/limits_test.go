package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/dsl"
)

// jsonSize is the length of what json.Marshal writes, without encoding.
func TestJSONSize(t *testing.T) {
	tests := []struct {
		name string
		v    any
	}{
		{"nil", nil},
		{"bools", []any{true, false}},
		{"numbers", []any{int64(-12), 3, 1.5, 1e21, 1e20, 0.000001, 1.5e-7, -2.5e-300, 0.0, 123456.789, int64(1) << 60}},
		{"escapes", "q\" b\\ n\n r\r t\t b\b f\f nul\x00 esc\x1b <a> & \u2028\u2029 é 日本 \xff"},
		{"empty", map[string]any{"m": map[string]any{}, "l": []any{}, "s": ""}},
		{"nested", map[string]any{"a": []any{map[string]any{"k<": "v"}, nil}, "b": map[string]any{"c": 1.25}}},
		{"bytes", []byte("hello, bytes")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if got := jsonSize(tc.v); got != int64(len(b)) {
				t.Errorf("jsonSize = %d, want %d (%s)", got, len(b), b)
			}
		})
	}
}

// Sizing an event's data allocates nothing: the run's budget is counted
// after every node.
func TestJSONSizeDoesNotAllocate(t *testing.T) {
	v := map[string]any{"output": map[string]any{"n": int64(12345), "s": "text <&>"}, "_duration_ms": int64(1234), "f": 1.5e-9, "l": []any{true, nil}}
	if n := testing.AllocsPerRun(100, func() { jsonSize(v) }); n != 0 {
		t.Errorf("jsonSize allocates %v times per call, want 0", n)
	}
}

func FuzzStringSize(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\\n\x00<>&", "\u2028日本\xff\xfe", strings.Repeat("é", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := stringSize(s); got != int64(len(b)) {
			t.Errorf("stringSize(%q) = %d, want %d", s, got, len(b))
		}
	})
}

// manyRefs is a template of 1,000 references to outputs.c.items, whose
// value the caller sets.
func manyRefs(t *testing.T) *dsl.Template {
	return compileTemplate(t, strings.Repeat("{{outputs.c.items}} ", 1000))
}

// 1,000 references to a 3 MB value: rendering stops at the cap, having
// built at most the cap (without it, 3 GB), and says what was too large.
func TestRenderStopsAtTheCap(t *testing.T) {
	tmpl := manyRefs(t)
	for _, tc := range []struct {
		name  string
		value any
		size  string
	}{
		{"text", strings.Repeat("a", 3_000_000), "2.9 MiB"},
		{"object", map[string]any{"text": strings.Repeat("a", 3_000_000)}, "2.9 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scope{outputs: map[string]map[string]any{"c": {"items": tc.value}}}
			var err error
			res := testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_, err = renderText(tmpl, s)
				}
			})
			var tooLarge *renderTooLargeError
			if !errors.As(err, &tooLarge) {
				t.Fatalf("renderText: err = %v, want a renderTooLargeError", err)
			}
			want := "the rendered text would pass 1.0 MiB (the most a prompt, command or message may hold) at " + tc.size + "; its largest reference is {{outputs.c.items}} (" + tc.size + ", used 1000 times)"
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("err = %q, want %q…", err, want)
			}
			if got := res.AllocedBytesPerOp(); got > 2<<20 {
				t.Errorf("rendering allocated %d bytes per call, want at most 2 MiB", got)
			}
			if _, _, err := renderCommand(tmpl, s); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("renderCommand: err = %v, want %q", err, want)
			}
		})
	}
}

// Under the cap, text renders as before; a cut of the shown form (human
// instructions) says why.
func TestRenderUnderTheCap(t *testing.T) {
	tmpl := manyRefs(t)
	s := &scope{outputs: map[string]map[string]any{"c": {"items": strings.Repeat("a", 1000)}}}
	got, err := renderText(tmpl, s)
	if err != nil || len(got) != 1000*1001 {
		t.Errorf("renderText: %d bytes, %v; want 1001000 bytes", len(got), err)
	}
	s.outputs["c"]["items"] = strings.Repeat("a", 2000)
	shown := render(tmpl, s)
	if len(shown) > maxRendered+1000 || !strings.Contains(shown, "…(cut: the rendered text would pass 1.0 MiB") {
		t.Errorf("render: %d bytes ending %q", len(shown), shown[max(0, len(shown)-200):])
	}
}

// historyStore serves History from memory; nothing else is used.
type historyStore struct {
	Store
	entries map[string][]HistoryEntry
}

func (s historyStore) History(_ context.Context, _, series string, from, limit int) ([]HistoryEntry, error) {
	var out []HistoryEntry
	for _, h := range s.entries[series] {
		if h.Index >= from && (limit <= 0 || len(out) < limit) {
			out = append(out, h)
		}
	}
	return out, nil
}

// A version 1 checkpoint, with every output, history and artifact
// version inline, decodes into counts and unstored entries, reads as it
// did, and loads its outputs without the store.
func TestCheckpointV1(t *testing.T) {
	v1 := `{"v":1,"ir":` + jsonText(dsl.IRVersion) + `,"node":"c",
		"outputs":{"c":{"n":2},"once":{"x":"y"}},
		"history":{"c":[{"n":0},{"n":1},{"n":2}]},
		"artifacts":{"report":[{"text":"first"},{"text":"second"}]},
		"loops":{"l":2},"visits":{"c":3,"once":1}}`
	ck, err := decodeCheckpoint([]byte(v1))
	if err != nil {
		t.Fatal(err)
	}
	wantEntries := map[string]int{"outputs.c": 3, "outputs.once": 1, "artifacts.report": 2}
	if diff := cmp.Diff(wantEntries, ck.Entries); diff != "" {
		t.Errorf("Entries (-want +got):\n%s", diff)
	}
	if ck.V != checkpointVersion || len(ck.Unstored) != 6 || ck.Loops["l"] != 2 {
		t.Errorf("checkpoint = v%d with %d unstored entries, loops %v", ck.V, len(ck.Unstored), ck.Loops)
	}
	snap, err := ReadSnapshot([]byte(v1))
	if err != nil || snap.Versions["report"] != 2 || snap.Artifacts["report"].(map[string]any)["text"] != "second" {
		t.Errorf("ReadSnapshot = %+v, %v; want report version 2, second", snap, err)
	}
	if err := ck.load(context.Background(), historyStore{}, "r", map[string]bool{"c": true}, 1<<20); err != nil {
		t.Fatal(err)
	}
	wantHistory := []any{map[string]any{"n": int64(0)}, map[string]any{"n": int64(1)}, map[string]any{"n": int64(2)}}
	if diff := cmp.Diff(wantHistory, ck.History["c"]); diff != "" {
		t.Errorf("history of c (-want +got):\n%s", diff)
	}
	if ck.Outputs["once"]["x"] != "y" || ck.Outputs["c"]["n"] != int64(2) {
		t.Errorf("outputs = %v", ck.Outputs)
	}
}

// load merges stored and unstored entries and the small outputs the
// checkpoint carries, reads only the latest output of a node whose
// history nobody reads, and refuses a missing entry.
func TestCheckpointLoad(t *testing.T) {
	entry := func(series string, i int, data string) HistoryEntry {
		return HistoryEntry{Series: series, Index: i, Data: json.RawMessage(data)}
	}
	st := historyStore{entries: map[string][]HistoryEntry{
		"outputs.h": {entry("outputs.h", 0, `{"i":0}`), entry("outputs.h", 1, `{"i":1}`), entry("outputs.h", 2, `{"i":"stale"}`)},
		"outputs.o": {entry("outputs.o", 0, `{"i":"old"}`)},
		"outputs.m": {entry("outputs.m", 0, `{"i":0}`), entry("outputs.m", 2, `{"i":2}`)},
	}}
	ck := newCheckpoint(&dsl.Workflow{})
	ck.loaded = false
	ck.Entries = map[string]int{"outputs.h": 3, "outputs.o": 1}
	ck.Unstored = []HistoryEntry{entry("outputs.h", 2, `{"i":2}`), entry("outputs.o", 0, `{"i":"new"}`)}
	ck.Small = map[string]json.RawMessage{"s": json.RawMessage(`{"i":3}`)}
	if err := ck.load(context.Background(), st, "r", map[string]bool{"h": true}, 1<<20); err != nil {
		t.Fatal(err)
	}
	want := []any{map[string]any{"i": int64(0)}, map[string]any{"i": int64(1)}, map[string]any{"i": int64(2)}}
	if diff := cmp.Diff(want, ck.History["h"]); diff != "" {
		t.Errorf("history of h (-want +got):\n%s", diff)
	}
	if ck.Outputs["o"]["i"] != "new" || ck.Outputs["h"]["i"] != int64(2) || ck.Outputs["s"]["i"] != int64(3) || ck.History["o"] != nil {
		t.Errorf("outputs = %v, history = %v", ck.Outputs, ck.History)
	}

	missing := newCheckpoint(&dsl.Workflow{})
	missing.loaded = false
	missing.Entries = map[string]int{"outputs.m": 3}
	if err := missing.load(context.Background(), st, "r", map[string]bool{"m": true}, 1<<20); err == nil || !strings.Contains(err.Error(), "entry 1 of 3 is missing") {
		t.Errorf("load with a gap: err = %v", err)
	}
	over := newCheckpoint(&dsl.Workflow{})
	over.loaded = false
	over.Entries = map[string]int{"outputs.h": 2}
	if err := over.load(context.Background(), st, "r", map[string]bool{"h": true}, 10); err == nil || !strings.Contains(err.Error(), "outputs.h.history would hold 2 outputs") {
		t.Errorf("load past the cap: err = %v", err)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// BenchmarkRenderCap renders 1,000 references to a 3 MB output: refused
// at the first one. BENCHMARKS.md records the result.
func BenchmarkRenderCap(b *testing.B) {
	tmpl := compileTemplate(b, strings.Repeat("{{outputs.c.items}} ", 1000))
	s := &scope{outputs: map[string]map[string]any{"c": {"items": strings.Repeat("a", 3_000_000)}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := renderText(tmpl, s); err == nil {
			b.Fatal("rendered past the cap")
		}
	}
}
