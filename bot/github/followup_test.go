package github

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// A question's reminder is a comment on its PR mentioning who started the
// run, once; its escalation a comment naming whom it widens to, without
// pinging them; its expiry edits the question's comment: "Expired,
// default used".
func TestRelayFollowUps(t *testing.T) {
	world := newWorld(t)
	db, fake := world.db, world.fake
	ctx := context.Background()
	run := &engine.Run{ID: "fu-1", Workflow: "review", Status: engine.StatusRunning, Channels: []string{"github"},
		Trigger: Origin{Repo: "acme/app", PR: 7, Installation: 42, HeadSHA: "abc1234def"}.Trigger("octocat")}
	if err := db.CreateRun(ctx, run, nil); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	fu := &engine.FollowUp{Remind: time.Hour, NextReminder: at, EscalateAt: at, EscalateTo: []string{"@acme/maintainers", "alice"},
		ExpireAt: at.Add(5 * time.Hour), Default: map[string]string{engine.QuestionKey: "MIT"}}
	ix, err := db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, NodeID: "draft", Questions: map[string]any{engine.QuestionKey: "Which licence?"}, FollowUp: fu})
	if err != nil {
		t.Fatal(err)
	}
	relay := world.relay(t, world.commenter())
	relay.Drain(ctx)
	q := oneBotComment(t, fake, 7, "**Question Q1**")
	for _, want := range []string{"🔔 Next reminder at 2026-03-01 09:00 UTC.", "⬆️ At 2026-03-01 09:00 UTC, `@\u200bacme/maintainers`, `alice` may answer too.",
		"⌛ Expires at 2026-03-01 14:00 UTC, then answered with its default: MIT."} {
		if !strings.Contains(q.Body, want) {
			t.Errorf("the question's comment lacks %q:\n%s", want, q.Body)
		}
	}

	fire := func(what string, f engine.FollowUp, kind string, data map[string]any) {
		t.Helper()
		data["interaction_id"] = ix.ID
		if _, fired, err := db.FireTimer(ctx, engine.Timer{Due: at, RunID: run.ID, InteractionID: ix.ID, What: what}, &engine.TimerFire{FollowUp: &f,
			Outbox: []engine.OutboxRow{{Kind: kind, InteractionID: ix.ID, Payload: jsonOf(t, data)}}}); err != nil || !fired {
			t.Fatalf("firing %s: %v %v", what, fired, err)
		}
		relay.Drain(ctx)
		relay.Drain(ctx) // a second look posts nothing more
	}
	reminded := *fu
	reminded.Reminders, reminded.NextReminder = 1, at.Add(time.Hour)
	fire(engine.TimerRemind, reminded, engine.OutboxQuestionReminded, map[string]any{"reminder": 1})
	rem := oneBotComment(t, fake, 7, "🔔 @octocat, a reminder: question [Q1](")
	if !strings.Contains(rem.Body, "still waits for an answer") || !strings.Contains(rem.Body, "Next reminder at 2026-03-01 10:00 UTC") {
		t.Errorf("reminder comment:\n%s", rem.Body)
	}
	escalated := reminded
	escalated.Escalated = true
	fire(engine.TimerEscalate, escalated, engine.OutboxQuestionEscalated, map[string]any{"to": fu.EscalateTo})
	esc := oneBotComment(t, fake, 7, "⬆️ Question [Q1](")
	if !strings.Contains(esc.Body, "is escalated: `@\u200bacme/maintainers`, `alice` may answer it too.") || strings.Contains(esc.Body, " @acme") {
		t.Errorf("escalation comment:\n%s", esc.Body)
	}

	if _, err := db.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: ix.ID, Text: "MIT", By: engine.ExpiryBy, Via: "timer"}); err != nil {
		t.Fatal(err)
	}
	relay.Drain(ctx)
	q = oneBotComment(t, fake, 7, "**Question Q1**")
	if !strings.Contains(q.Body, "⌛ Expired, default used:\n\n> MIT") || strings.Contains(q.Body, "Answered by") {
		t.Errorf("the expired question's comment:\n%s", q.Body)
	}
	if n := len(fake.BotComments(7, "🔔 @octocat, a reminder")); n != 1 {
		t.Errorf("%d reminder comments, want 1", n)
	}
}

func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
