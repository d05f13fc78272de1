package github

import (
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/engine"
)

// A server that runs workflows on the host says so in every run's status
// comment, from the warning its run_started event carries.
func TestStatusShowsSandboxWarning(t *testing.T) {
	p := newProgress()
	p.add([]engine.Event{{Seq: 1, Type: engine.EventRunStarted, Data: map[string]any{"sandbox_warning": "this server runs workflow processes on the host, without a sandbox"}}})
	v := &view{run: &engine.Run{ID: "r-1", Workflow: "review", Status: engine.StatusRunning}, warning: p.warning}
	if body := renderStatus(v); !strings.Contains(body, "⚠️ this server runs workflow processes on the host, without a sandbox.") {
		t.Errorf("status comment lacks the warning:\n%s", body)
	}
	v.warning = ""
	if body := renderStatus(v); strings.Contains(body, "⚠️") {
		t.Errorf("status comment warns without a warning:\n%s", body)
	}
}
