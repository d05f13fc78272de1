package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/nodesandbox/nodesandboxtest"
)

// A tool node's command tries each escape a hostile pull request would:
// every one is refused or contained, and a limit it meets is the run's
// failure.
func TestToolNodeEscapes(t *testing.T) {
	sb := nodesandboxtest.Sandboxes(t)
	nodesandboxtest.RunEscapes(t, func(t *testing.T, workspace, command string, timeout time.Duration) (string, string) {
		w := mustCompile(t, fmt.Sprintf("vars:\n  script: string\ntool attempt:\n  command: \"{{!vars.script}}\"\n  timeout: \"%s\"\nworkflow w:\n  entry: attempt\n  attempt -> done\n", timeout))
		db := newStore(t)
		e := engine.New(engine.Options{Store: db, Sandbox: sb, Poll: time.Hour})
		run, err := e.Start(context.Background(), engine.StartRequest{Workflow: w, Vars: map[string]any{"script": command}, WorkDir: workspace})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		evs, err := db.Events(context.Background(), run.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type == engine.EventNodeFinished {
				fmt.Fprint(&out, ev.Data["output"])
			}
		}
		if run.Status == engine.StatusFinished {
			return out.String(), ""
		}
		return out.String(), run.FailureCode + ": " + run.Error
	})
}
