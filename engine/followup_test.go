package engine_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

const followUpWorkflow = `schema decision:
  approved: bool
  reason: string

prompt ask:
  Approve the release?

human approve:
  instructions: ask
  output: decision
  remind: "2m"
  escalate: {after: "5m", to: ["@acme/maintainers", "alice"]}
  expire: "9m"
%s

workflow w:
  entry: approve
  approve -> done when approved
  approve -> done
`

// eventsOf returns the run's stored events of type typ.
func eventsOf(t *testing.T, db engine.Store, runID, typ string) []engine.Event {
	t.Helper()
	all, err := db.Events(t.Context(), runID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []engine.Event
	for _, ev := range all {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// A human node's question is reminded every 2m, escalated at 5m and, at
// 9m, answered with its default by expiry via timer: the run goes on.
// On the bubble's clock, the store's timer rows drive it all.
func TestQuestionRemindedEscalatedExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := mustCompile(t, strings.Replace(followUpWorkflow, "%s", `  default: {approved: false, reason: "nobody answered"}`, 1))
		db := newStore(t)
		e, ev := lifecycleEngine(t, db, w, nil, nil)
		ctx := t.Context()
		began := time.Now()
		run, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "fu", WorkDir: t.TempDir()})
		if err != nil || run.Status != engine.StatusPausedWaitingHuman {
			t.Fatalf("run = %+v, %v; want paused", run, err)
		}
		ix, err := db.Interaction(ctx, run.ID, "fu_approve")
		if err != nil || ix.FollowUp == nil || !ix.FollowUp.NextReminder.Equal(began.Add(2*time.Minute)) || !ix.FollowUp.ExpireAt.Equal(began.Add(9*time.Minute)) {
			t.Fatalf("question = %+v, %v; want its follow-up at absolute times", ix, err)
		}
		ev.wait(t, run.ID, engine.EventRunFinished)
		if took := time.Since(began); took != 9*time.Minute {
			t.Errorf("the run finished after %s, want at the expiry, 9m", took)
		}
		reminders := eventsOf(t, db, run.ID, engine.EventQuestionReminded)
		if len(reminders) != 4 {
			t.Fatalf("%d reminders, want 4 (2m, 4m, 6m, 8m): %+v", len(reminders), reminders)
		}
		for i, r := range reminders {
			if at := r.Time.Sub(began); at != time.Duration(2*(i+1))*time.Minute || r.Data["interaction_id"] != "fu_approve" {
				t.Errorf("reminder %d at %s: %+v", i+1, at, r)
			}
		}
		esc := eventsOf(t, db, run.ID, engine.EventQuestionEscalated)
		if len(esc) != 1 || esc[0].Time.Sub(began) != 5*time.Minute {
			t.Fatalf("escalations = %+v, want one at 5m", esc)
		}
		if to, _ := esc[0].Data["to"].([]any); len(to) != 2 || to[0] != "@acme/maintainers" {
			t.Errorf("escalated to %v", esc[0].Data["to"])
		}
		ix, _ = db.Interaction(ctx, run.ID, "fu_approve")
		if ix.AnsweredBy != engine.ExpiryBy || ix.Via != "timer" || ix.Answers["approved"] != false || ix.Answers["reason"] != "nobody answered" {
			t.Errorf("answered by %q via %q: %v, want the default by expiry via timer", ix.AnsweredBy, ix.Via, ix.Answers)
		}
		if !ix.FollowUp.Escalated || ix.FollowUp.Reminders != 4 {
			t.Errorf("follow-up after = %+v", ix.FollowUp)
		}
		if next, ok, err := db.NextTimer(ctx); ok || err != nil {
			t.Errorf("a timer is left: %+v, %v", next, err)
		}
	})
}

// With no default, the expiry fails the run, resumably, naming the
// question; an answer before a timer leaves nothing to fire.
func TestQuestionExpiresWithoutDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := mustCompile(t, strings.Replace(followUpWorkflow, "%s", "", 1))
		db := newStore(t)
		e, ev := lifecycleEngine(t, db, w, nil, nil)
		ctx := t.Context()
		began := time.Now()
		run, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "nodef", WorkDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		ev.wait(t, run.ID, engine.EventRunFailed)
		if took := time.Since(began); took != 9*time.Minute {
			t.Errorf("failed after %s, want 9m", took)
		}
		got, _ := db.Run(ctx, run.ID)
		if got.Status != engine.StatusFailedResumable || got.FailureCode != engine.CodeTimeout || !strings.Contains(got.Error, "1 unanswered question(s): nodef_approve") {
			t.Errorf("run = %s %s %q", got.Status, got.FailureCode, got.Error)
		}

		// Answered within the first minute: no reminder, no escalation.
		run, err = e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "quick", WorkDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		if _, err := e.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: "quick_approve", Fields: map[string]any{"approved": "true", "reason": "fine"}, By: "ana", Via: "cli"}); err != nil {
			t.Fatal(err)
		}
		ev.wait(t, run.ID, engine.EventRunFinished)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if n := len(eventsOf(t, db, run.ID, engine.EventQuestionReminded)) + len(eventsOf(t, db, run.ID, engine.EventQuestionEscalated)); n != 0 {
			t.Errorf("%d reminders or escalations of an answered question", n)
		}
		if next, ok, _ := db.NextTimer(ctx); ok {
			t.Errorf("a timer is left: %+v", next)
		}
	})
}

// Timers are rows in the store: a restart loses none and repeats none.
// Reminders due while no engine ran are sent once, at the recovery, and
// the next ones keep their pace.
func TestQuestionTimersThroughARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := mustCompile(t, strings.Replace(followUpWorkflow, "%s", `  default: {approved: true, reason: "default"}`, 1))
		db := newStore(t)
		first, ev := lifecycleEngine(t, db, w, nil, nil)
		ctx := t.Context()
		began := time.Now()
		run, err := first.Start(ctx, engine.StartRequest{Workflow: w, RunID: "rs", WorkDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		ev.wait(t, run.ID, engine.EventQuestionReminded) // 2m
		first.Close()
		time.Sleep(5 * time.Minute) // down from 2m to 7m: the 4m and 6m reminders, the 5m escalation, missed
		synctest.Wait()
		if n := len(eventsOf(t, db, run.ID, engine.EventQuestionReminded)); n != 1 {
			t.Fatalf("%d reminders while down, want only the first", n)
		}
		second, ev2 := lifecycleEngine(t, db, w, nil, nil)
		if _, err := second.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		ev2.wait(t, run.ID, engine.EventRunFinished)
		rem := eventsOf(t, db, run.ID, engine.EventQuestionReminded)
		var at []time.Duration
		for _, r := range rem {
			at = append(at, r.Time.Sub(began))
		}
		if want := []time.Duration{2 * time.Minute, 7 * time.Minute, 8 * time.Minute}; len(at) != len(want) || at[0] != want[0] || at[1] != want[1] || at[2] != want[2] {
			t.Errorf("reminders at %v, want %v: one at the recovery for the missed ones, then on pace", at, want)
		}
		if esc := eventsOf(t, db, run.ID, engine.EventQuestionEscalated); len(esc) != 1 || esc[0].Time.Sub(began) != 7*time.Minute {
			t.Errorf("escalations = %+v, want one, at the recovery", esc)
		}
		ix, _ := db.Interaction(ctx, run.ID, "rs_approve")
		if ix.AnsweredBy != engine.ExpiryBy || ix.AnsweredAt.Sub(began) != 9*time.Minute {
			t.Errorf("answered by %q at %s, want by expiry at 9m", ix.AnsweredBy, ix.AnsweredAt.Sub(began))
		}
	})
}

// The questions' timers fire on time only: nothing is sent before its
// time, so a test can stop the clock just before and see nothing.
func TestQuestionTimerNotEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := mustCompile(t, strings.Replace(followUpWorkflow, "%s", "", 1))
		db := newStore(t)
		e, _ := lifecycleEngine(t, db, w, nil, nil)
		run, err := e.Start(t.Context(), engine.StartRequest{Workflow: w, RunID: "early", WorkDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2*time.Minute - time.Nanosecond)
		synctest.Wait()
		if n := len(eventsOf(t, db, run.ID, engine.EventQuestionReminded)); n != 0 {
			t.Errorf("%d reminders before 2m", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if n := len(eventsOf(t, db, run.ID, engine.EventQuestionReminded)); n != 1 {
			t.Errorf("%d reminders at 2m, want 1", n)
		}
	})
}
