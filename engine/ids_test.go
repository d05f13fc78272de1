package engine

import (
	"slices"
	"testing"
	"time"
)

func TestNewIDSortable(t *testing.T) {
	base := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 200 {
		ids = append(ids, NewID(base.Add(time.Duration(i)*time.Millisecond)))
	}
	if !slices.IsSorted(ids) {
		t.Errorf("ids are not in creation order: %v", ids[:5])
	}
	if a, b := NewID(base), NewID(base); a == b {
		t.Errorf("two ids in one millisecond are equal: %s", a)
	}
	for _, id := range ids {
		if len(id) != 26 {
			t.Fatalf("len(%q) = %d, want 26", id, len(id))
		}
	}
}

func TestRunIDs(t *testing.T) {
	id := NewRunID(time.Now())
	if !ValidRunID(id) {
		t.Errorf("generated run id %q is not valid", id)
	}
	tests := []struct {
		id   string
		want bool
	}{
		{"nightly-2026-11-30", true},
		{"a", true},
		{"", false},
		{"Upper", false},
		{"has space", false},
		{"../etc", false},
		{string(make([]byte, 65)), false},
	}
	for _, tc := range tests {
		if got := ValidRunID(tc.id); got != tc.want {
			t.Errorf("ValidRunID(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}

func TestInteractionIDsAndMessage(t *testing.T) {
	if got, want := AsyncInteractionID("r-1", "draft", 2), "r-1_draft_async_2"; got != want {
		t.Errorf("AsyncInteractionID = %q, want %q", got, want)
	}
	if got, want := PauseInteractionID("r-1", "approve", 0), "r-1_approve"; got != want {
		t.Errorf("PauseInteractionID = %q, want %q", got, want)
	}
	if got, want := PauseInteractionID("r-1", "approve", 3), "r-1_approve_3"; got != want {
		t.Errorf("PauseInteractionID = %q, want %q", got, want)
	}
	got := AnswerMessage("r-1_draft_async_1", `Which "licence"?`, "MIT")
	want := `[Answer to question r-1_draft_async_1] Q: "Which \"licence\"?" — A: MIT`
	if got != want {
		t.Errorf("AnswerMessage = %q, want %q", got, want)
	}
}

// Ids of one sequence sort in the order they were handed out, within one
// millisecond too, and stay NewID-shaped.
func TestIDSequenceIsMonotonic(t *testing.T) {
	var q IDSequence
	now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	prev := ""
	for i := range 10000 {
		at := now
		if i >= 9000 {
			at = now.Add(time.Millisecond)
		}
		id := q.Next(at)
		if len(id) != 26 || id <= prev {
			t.Fatalf("id %d = %q after %q: want 26 characters, sorting after it", i, id, prev)
		}
		prev = id
	}
	if early := NewID(now.Add(-time.Millisecond)); early >= q.Next(now) {
		t.Errorf("an id of an earlier millisecond sorts after the sequence's")
	}
}
