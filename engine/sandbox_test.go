package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// A workspace past its quota after a node fails the run SANDBOX_LIMIT,
// saying what to do; under the quota the same node passes.
func TestWorkspaceQuota(t *testing.T) {
	w := mustCompile(t, "tool fill:\n  command: \"head -c 300000 /dev/zero > big\"\nworkflow w:\n  entry: fill\n  fill -> done\n")
	for _, tc := range []struct {
		name       string
		quota      int64
		wantStatus engine.Status
	}{
		{"over", 200_000, engine.StatusFailedResumable},
		{"under", 1 << 20, engine.StatusFinished},
		{"none", 0, engine.StatusFinished},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := engine.New(engine.Options{Store: newStore(t), Sandbox: testSandbox(t), Poll: time.Hour, WorkspaceQuota: tc.quota})
			run, err := e.Start(context.Background(), engine.StartRequest{Workflow: w, WorkDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != tc.wantStatus {
				t.Fatalf("status = %s (%s %s), want %s", run.Status, run.FailureCode, run.Error, tc.wantStatus)
			}
			if tc.wantStatus != engine.StatusFinished && (run.FailureCode != engine.CodeSandboxLimit || !strings.Contains(run.Error, "more than its quota of 195.3 KiB")) {
				t.Errorf("failure = %s %q, want SANDBOX_LIMIT naming the quota", run.FailureCode, run.Error)
			}
		})
	}
}

// An engine without a sandbox refuses a workflow with tool nodes before
// the first node, saying so; nothing runs on the host by default.
func TestNoSandboxRefusesTools(t *testing.T) {
	w := mustCompile(t, "tool t:\n  command: \"true\"\nworkflow w:\n  entry: t\n  t -> done\n")
	e := engine.New(engine.Options{Store: newStore(t), Poll: time.Hour})
	_, err := e.Start(context.Background(), engine.StartRequest{Workflow: w, WorkDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "no sandbox to run processes in") {
		t.Fatalf("Start = %v, want a refusal naming the missing sandbox", err)
	}
}
