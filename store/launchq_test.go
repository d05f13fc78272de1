package store

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLaunchQueue(t *testing.T) {
	ctx := t.Context()
	db := newDB(t, "", Options{SmallMemory: true})
	const pr = "github/acme/app#7"
	for i, key := range []string{"d1", "d2", "d1", "d3"} {
		pos, err := db.QueueLaunch(ctx, pr, key, []byte(`{"k":"`+key+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{1, 2, 1, 3}[i]; pos != want {
			t.Errorf("QueueLaunch(%s) position %d, want %d", key, pos, want)
		}
	}
	if _, err := db.QueueLaunch(ctx, "github/acme/app#8", "d1", nil); err != nil {
		t.Fatal(err)
	}
	if err := db.DropLaunch(ctx, pr, "d2"); err != nil {
		t.Fatal(err)
	}
	if err := db.DropLaunch(ctx, pr, "never"); err != nil {
		t.Errorf("dropping an unknown launch: %v", err)
	}
	q, err := db.QueuedLaunches(ctx, pr)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range q {
		keys = append(keys, l.Key+" "+string(l.Payload))
	}
	if diff := cmp.Diff([]string{`d1 {"k":"d1"}`, `d3 {"k":"d3"}`}, keys); diff != "" {
		t.Errorf("queue mismatch (-want +got):\n%s", diff)
	}
	if pos, _ := db.QueueLaunch(ctx, pr, "d3", nil); pos != 2 {
		t.Errorf("d3 after d2 left: position %d, want 2", pos)
	}
}
