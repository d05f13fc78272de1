package main

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/bot/api"
	slackbot "github.com/iterion-bot/iterion/bot/slack"
	"github.com/iterion-bot/iterion/engine"
)

// BenchmarkServeSlackQuestionAndClick measures, through serve on loopback
// against the fakes, the two latencies of issue 13: from the agent's
// question (its human_input_requested event) to the question visible on
// both the PR (the fake GitHub's comment) and in the Slack thread (the
// fake Slack's message), reported as question-ms; and from a button
// click's 200 to the answer stored and queued for the agent (its
// interaction_answered event), reported as click-ms. Each iteration is a
// run of its own, answered from Slack, to its end.
func BenchmarkServeSlackQuestionAndClick(b *testing.B) {
	h := newSlackHarness(b, nil, "")
	h.model(&fakellm.Script{Turns: []fakellm.Turn{
		{Name: "ask", Match: fakellm.Match{System: "You review pull requests", HasToolResult: new(bool)}, Repeat: true, ToolCalls: []fakellm.ToolCall{
			{Name: "ask_user_async", Input: map[string]any{"question": "Should I check the docs too?", "options": []any{
				map[string]any{"id": "yes", "label": "Yes"}, map[string]any{"id": "no", "label": "No"}}}},
		}},
		{Name: "wait", Match: fakellm.Match{ToolResultFor: "ask_user_async"}, Repeat: true, ToolCalls: []fakellm.ToolCall{{Name: "await_answers"}}},
		{Name: "verdict", Match: fakellm.Match{ToolResultFor: "await_answers"}, Repeat: true, Text: `{"summary": "ok"}`},
	}})
	h.start()
	c := api.NewClient(h.base, api.ClientOptions{Token: h.token})
	event := func(runID, typ string) engine.Event {
		b.Helper()
		evs, err := c.Events(context.Background(), runID, 0, 1000, 0)
		if err != nil {
			b.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type == typ {
				return ev
			}
		}
		b.Fatalf("run %s has no %s event", runID, typ)
		return engine.Event{}
	}
	var question, click time.Duration
	n := 0
	for i := 0; b.Loop(); i++ {
		id := h.comment("ana", "/iterion run review")
		reply := h.botComment(fmt.Sprintf("<!-- iterion:comment-%d -->", id))
		m := regexp.MustCompile("started run `(gh-[0-9a-f]+)`").FindStringSubmatch(reply.Body)
		if m == nil {
			b.Fatalf("reply = %q", reply.Body)
		}
		runID := m[1]
		pr := h.botComment("<!-- iterion:question-" + runID + "_review_async_1 -->")
		q := h.question(runID)
		asked := event(runID, engine.EventHumanInputRequested).Time
		seen := pr.CreatedAt
		if q.At.After(seen) {
			seen = q.At
		}
		question += seen.Sub(asked)
		h.interact(h.slack.Click("U1", q, slackbot.ActionOption+"0", "0"))
		acked := time.Now()
		waitRunStatus(b, h.base, h.token, runID, engine.StatusFinished)
		click += event(runID, engine.EventInteractionAnswered).Time.Sub(acked)
		n++
	}
	b.ReportMetric(float64(question.Milliseconds())/float64(n), "question-ms")
	b.ReportMetric(float64(click.Microseconds())/1000/float64(n), "click-ms")
}
