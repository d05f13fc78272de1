package store

import (
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// A question's timers are stored with it, due first first; firing one
// removes it with what it writes, once: firing it again, or after the
// answer, writes nothing.
func TestTimers(t *testing.T) {
	ctx := t.Context()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	db := newDB(t, "", Options{Clock: func() time.Time { return t0 }})
	run := &engine.Run{ID: "r-1", Status: engine.StatusRunning, Channels: []string{"github"}}
	if err := db.CreateRun(ctx, run, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := db.NextTimer(ctx); ok || err != nil {
		t.Fatalf("an empty store has a timer: %v %v", ok, err)
	}
	fu := &engine.FollowUp{Remind: 2 * time.Hour, NextReminder: t0.Add(2 * time.Hour), EscalateAt: t0.Add(time.Hour), EscalateTo: []string{"alice"}, ExpireAt: t0.Add(10 * time.Hour)}
	ix, err := db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, NodeID: "a", Questions: map[string]any{engine.QuestionKey: "Port?"}, FollowUp: fu})
	if err != nil {
		t.Fatal(err)
	}
	next, ok, err := db.NextTimer(ctx)
	if !ok || err != nil || next.What != engine.TimerEscalate || !next.Due.Equal(t0.Add(time.Hour)) || next.InteractionID != ix.ID {
		t.Fatalf("next timer = %+v %v %v, want the escalation at 1h", next, ok, err)
	}
	after := *fu
	after.Escalated = true
	fire := &engine.TimerFire{FollowUp: &after, Events: []engine.Event{{Type: engine.EventQuestionEscalated, Data: map[string]any{"interaction_id": ix.ID}}},
		Outbox: []engine.OutboxRow{{Kind: engine.OutboxQuestionEscalated, InteractionID: ix.ID}}}
	evs, fired, err := db.FireTimer(ctx, next, fire)
	if err != nil || !fired || len(evs) != 1 || evs[0].Seq == 0 || evs[0].RunID != run.ID {
		t.Fatalf("firing: %+v %v %v", evs, fired, err)
	}
	if _, fired, err := db.FireTimer(ctx, next, fire); fired || err != nil {
		t.Errorf("firing it again: fired %v, %v", fired, err)
	}
	if got, _ := db.Events(ctx, run.ID, 0, 0); len(got) != 2 { // human_input_requested, then the escalation
		t.Errorf("events = %+v, want the question's and one escalation", got)
	}
	if got, _ := db.Interaction(ctx, run.ID, ix.ID); !got.FollowUp.Escalated {
		t.Errorf("the question's follow-up was not replaced: %+v", got.FollowUp)
	}
	rows, _ := db.DueOutbox(ctx, t0, 0)
	escalated := 0
	for _, r := range rows {
		if r.Kind == engine.OutboxQuestionEscalated {
			escalated++
		}
	}
	if escalated != 1 {
		t.Errorf("%d escalation outbox rows, want 1", escalated)
	}

	// Answered: the reminder is removed and writes nothing.
	if _, err := db.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: ix.ID, Text: "8080", By: "ana", Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	next, _, _ = db.NextTimer(ctx)
	if next.What != engine.TimerRemind {
		t.Fatalf("next = %+v, want the reminder", next)
	}
	if _, fired, err := db.FireTimer(ctx, next, &engine.TimerFire{FollowUp: fu, Events: []engine.Event{{Type: engine.EventQuestionReminded}}}); fired || err != nil {
		t.Errorf("a reminder of an answered question: fired %v, %v", fired, err)
	}
	if got := eventsNamed(t, db, run.ID, engine.EventQuestionReminded); got != 0 {
		t.Errorf("%d reminders written for an answered question", got)
	}
	next, _, _ = db.NextTimer(ctx)
	if next.What != engine.TimerExpire {
		t.Fatalf("next = %+v, want the expiry", next)
	}
	if _, _, err := db.FireTimer(ctx, next, nil); err != nil {
		t.Fatal(err)
	}
	if next, ok, _ := db.NextTimer(ctx); ok {
		t.Errorf("a timer is left: %+v", next)
	}
}

func eventsNamed(t *testing.T, db *DB, runID, typ string) int {
	t.Helper()
	evs, err := db.Events(t.Context(), runID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}
