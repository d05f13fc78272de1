package pi_test

import (
	"testing"

	"github.com/iterion-bot/iterion/backends/fakellm"
)

func TestSmoke(t *testing.T) {
	h := newHarness(t, &fakellm.Script{Turns: []fakellm.Turn{
		{ToolCalls: []fakellm.ToolCall{{Name: "bash", Input: map[string]any{"command": "echo hi"}}}},
		{Match: fakellm.Match{ToolResultFor: "bash"}, Text: "DONE"},
	}})
	res, err := h.backend().Execute(watchdog(t), h.task("fake/fake-claude", "Run it."))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
}
