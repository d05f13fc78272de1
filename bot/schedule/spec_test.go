package schedule

import (
	"strings"
	"testing"
	"time"
)

func mustParse(t testing.TB, spec, zone string) *Spec {
	t.Helper()
	s, err := Parse(spec, zone)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", spec, zone, err)
	}
	return s
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// ticks lists the keys and instants of the n ticks after from.
func ticks(s *Spec, from time.Time, n int) []string {
	var out []string
	cursor := s.Slot(from)
	for range n {
		tk := s.After(cursor)
		out = append(out, tk.Key+" "+tk.At.UTC().Format(time.RFC3339))
		cursor = tk.Slot
	}
	return out
}

func TestSpecTicks(t *testing.T) {
	tests := []struct {
		name, spec, zone, from string
		want                   []string
	}{
		{"daily in a zone", "0 3 * * *", "America/New_York", "2026-06-01T12:00:00Z",
			[]string{"2026-06-02T03:00 2026-06-02T07:00:00Z", "2026-06-03T03:00 2026-06-03T07:00:00Z"}},
		{"UTC when no zone", "0 3 * * *", "", "2026-06-01T12:00:00Z",
			[]string{"2026-06-02T03:00 2026-06-02T03:00:00Z"}},
		// Europe/Berlin jumps from 02:00 to 03:00 on 2026-03-29: the 02:30
		// slot fires once, at 03:00 CEST, right after the gap.
		{"spring forward: the skipped slot fires after the gap", "30 2 * * *", "Europe/Berlin", "2026-03-27T12:00:00Z",
			[]string{"2026-03-28T02:30 2026-03-28T01:30:00Z", "2026-03-29T02:30 2026-03-29T01:00:00Z", "2026-03-30T02:30 2026-03-30T00:30:00Z"}},
		// It goes from 03:00 back to 02:00 on 2026-10-25: 02:30 comes twice
		// and fires once, at its first coming.
		{"fall back: the repeated slot fires once", "30 2 * * *", "Europe/Berlin", "2026-10-23T12:00:00Z",
			[]string{"2026-10-24T02:30 2026-10-24T00:30:00Z", "2026-10-25T02:30 2026-10-25T00:30:00Z", "2026-10-26T02:30 2026-10-26T01:30:00Z"}},
		// Hourly: the 02:00 slot fires at 03:00 CEST; the 03:00 slot, at
		// the same instant, is the same fire.
		{"spring forward hourly", "0 * * * *", "Europe/Berlin", "2026-03-28T23:30:00Z",
			[]string{"2026-03-29T01:00 2026-03-29T00:00:00Z", "2026-03-29T02:00 2026-03-29T01:00:00Z", "2026-03-29T04:00 2026-03-29T02:00:00Z"}},
		{"fall back hourly", "0 * * * *", "Europe/Berlin", "2026-10-24T23:30:00Z",
			[]string{"2026-10-25T02:00 2026-10-25T00:00:00Z", "2026-10-25T03:00 2026-10-25T02:00:00Z"}},
		{"every: durations in absolute time", "@every 90m", "Europe/Berlin", "2026-10-24T23:30:00Z",
			[]string{"2026-10-25T01:00:00Z 2026-10-25T01:00:00Z", "2026-10-25T02:30:00Z 2026-10-25T02:30:00Z"}},
		{"a descriptor", "@weekly", "", "2026-06-01T12:00:00Z", // a Monday
			[]string{"2026-06-07T00:00 2026-06-07T00:00:00Z"}},
		{"CRON_TZ in the spec", "CRON_TZ=Asia/Tokyo 0 9 * * 1-5", "", "2026-06-05T12:00:00Z", // a Friday
			[]string{"2026-06-08T09:00 2026-06-08T00:00:00Z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.spec, tc.zone)
			got := ticks(s, utc(tc.from), len(tc.want))
			for i := range tc.want {
				if got[i] != tc.want[i] {
					t.Errorf("tick %d = %s, want %s", i+1, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestSpecDue(t *testing.T) {
	s := mustParse(t, "0 * * * *", "")
	tests := []struct {
		name       string
		cursor     string // slot key
		now        string
		grace      time.Duration
		wantLatest string // "" for none
		wantPassed int
		wantCursor string
	}{
		{"nothing yet", "2026-01-01T10:00", "2026-01-01T10:59:59Z", time.Hour, "", 0, "2026-01-01T10:00"},
		{"on time", "2026-01-01T10:00", "2026-01-01T11:00:00Z", time.Hour, "2026-01-01T11:00", 1, "2026-01-01T11:00"},
		{"three missed, the latest within grace", "2026-01-01T10:00", "2026-01-01T13:20:00Z", 30 * time.Minute, "2026-01-01T13:00", 3, "2026-01-01T13:00"},
		{"three missed, the latest past grace", "2026-01-01T10:00", "2026-01-01T13:40:00Z", 30 * time.Minute, "", 3, "2026-01-01T13:00"},
		{"grace boundary is inside", "2026-01-01T10:00", "2026-01-01T11:30:00Z", 30 * time.Minute, "2026-01-01T11:00", 1, "2026-01-01T11:00"},
		{"a month down: old ticks passed unseen", "2026-01-01T10:00", "2026-02-01T10:10:00Z", 30 * time.Minute, "2026-02-01T10:00", 49, "2026-02-01T10:00"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cursor, _ := s.ParseKey(tc.cursor)
			latest, passed, next := s.Due(cursor, utc(tc.now), tc.grace)
			got := ""
			if latest != nil {
				got = latest.Key
			}
			if got != tc.wantLatest || passed != tc.wantPassed || s.Key(next) != tc.wantCursor {
				t.Errorf("Due = %q, %d, %s; want %q, %d, %s", got, passed, s.Key(next), tc.wantLatest, tc.wantPassed, tc.wantCursor)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ spec, zone, want string }{
		{"", "", "the cron spec is empty"},
		{"@nightly", "", "@nightly is not a descriptor: write @daily"},
		{"0 0 3 * * *", "", "expected exactly 5 fields, found 6"},
		{"61 * * * *", "", "end of range (61) above maximum (59)"},
		{"0 3 * * *", "Nope/Zone", `unknown time zone "Nope/Zone": write an IANA name`},
		{"0 3 * * *", "Local", `unknown time zone "Local"`},
		{"CRON_TZ=Nope/Zone 0 3 * * *", "", `unknown time zone "Nope/Zone"`},
		{"CRON_TZ=Europe/Berlin 0 3 * * *", "Europe/Paris", "keep one"},
		{"0 0 30 2 *", "", "never fires"},
	}
	for _, tc := range tests {
		_, err := Parse(tc.spec, tc.zone)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q, %q) = %v, want an error containing %q", tc.spec, tc.zone, err, tc.want)
		}
	}
}

// FuzzSpec: any spec parses or is refused with a message, and the ticks
// of one that parses come in order, each after the one before.
func FuzzSpec(f *testing.F) {
	for _, s := range []string{"30 2 * * *", "0 * * * *", "@every 90m", "@daily", "CRON_TZ=Europe/Berlin 0 3 * * 1-5", "*/7 1-4 */2 * SUN"} {
		f.Add(s, "Europe/Berlin", int64(1774569600))
	}
	f.Fuzz(func(t *testing.T, spec, zone string, from int64) {
		s, err := Parse(spec, zone)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		start := time.Unix(from%(1<<33), 0)
		cursor := s.Slot(start)
		var prev time.Time
		for range 5 {
			tk := s.After(cursor)
			if tk.At.IsZero() {
				return
			}
			if !tk.Slot.After(cursor) || (!prev.IsZero() && !tk.At.After(prev)) {
				t.Fatalf("tick %s (at %s) after cursor %s, previous at %s", tk.Key, tk.At, cursor, prev)
			}
			if back, ok := s.ParseKey(tk.Key); !ok || !back.Equal(tk.Slot) {
				t.Fatalf("key %q reads back as %s, %v; want %s", tk.Key, back, ok, tk.Slot)
			}
			prev, cursor = tk.At, tk.Slot
		}
	})
}
