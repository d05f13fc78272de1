package claw_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
)

// The workflow's permission policy decides each of the agent's calls: a
// denied call is refused with the rule named, an allowed one runs, and a
// call the policy asks about pauses the run on a question whose answer
// runs it or refuses it.
func TestPermissionPolicy(t *testing.T) {
	const src = `agent a:
  model: "anthropic/m"
  tools: [read_file, write_file]
  permission: ask
  allow: ["Read(**)"]
  deny: ["Write(secrets/**)"]
workflow w:
  entry: a
  a -> done
`
	for _, tc := range []struct {
		answer  string
		written bool
		result  string
	}{
		{answer: "allow", written: true, result: "wrote notes.txt"},
		{answer: "not before the release", written: false, result: "refused by the operator: not before the release"},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			has := true
			f := newFixture(t, &fakellm.Script{Turns: []fakellm.Turn{
				{Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: []fakellm.ToolCall{
					{ID: "t_secret", Name: "write_file", Input: map[string]any{"path": "secrets/key", "content": "x"}},
					{ID: "t_read", Name: "read_file", Input: map[string]any{"path": "README"}},
					{ID: "t_notes", Name: "write_file", Input: map[string]any{"path": "notes.txt", "content": "hello"}},
				}},
				{Match: fakellm.Match{HasToolResult: &has}, Text: "done"},
			}}, "anthropic")
			w, ds := dsl.CompileSource("t.bot", []byte(src))
			if ds.HasErrors() {
				t.Fatal(ds)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "README"), []byte("readme text"), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			run, err := f.engine.Start(ctx, engine.StartRequest{Workflow: w, RunID: "perm", WorkDir: dir})
			if err != nil || run.Status != engine.StatusPausedWaitingHuman {
				t.Fatalf("run = %+v, %v; want paused on the permission question", run, err)
			}
			ixs, err := f.db.Interactions(ctx, "perm")
			if err != nil || len(ixs) != 1 {
				t.Fatalf("interactions = %v, %v", ixs, err)
			}
			if q, _ := ixs[0].Questions[engine.QuestionKey].(string); !strings.Contains(q, "write_file") || !strings.Contains(q, "notes.txt") {
				t.Errorf("the question does not say what the agent asks to do: %q", q)
			}
			if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err == nil {
				t.Fatal("the call asked about ran before the answer")
			}
			run, err = f.engine.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: "perm", Answers: map[string]string{engine.QuestionKey: tc.answer}})
			if err != nil || run.Status != engine.StatusFinished {
				t.Fatalf("resume = %+v, %v", run, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "notes.txt")); (err == nil) != tc.written {
				t.Errorf("notes.txt written = %v, want %v", err == nil, tc.written)
			}
			if _, err := os.Stat(filepath.Join(dir, "secrets", "key")); err == nil {
				t.Error("a denied write happened")
			}
			results := map[string]string{}
			for _, r := range f.fake.Requests() {
				for _, tr := range r.ToolResults {
					results[tr.ToolCallID] = tr.Content
				}
			}
			if got := results["t_secret"]; !strings.Contains(got, "refused by the workflow's permission policy (the rule Write(secrets/**))") {
				t.Errorf("denied call's result = %q", got)
			}
			if got := results["t_read"]; got != "readme text" {
				t.Errorf("allowed read's result = %q", got)
			}
			if got := results["t_notes"]; !strings.Contains(got, tc.result) {
				t.Errorf("asked call's result = %q, want %q", got, tc.result)
			}
		})
	}
}

// A readonly node is offered no tool that writes.
func TestReadOnlyOffersNoWrites(t *testing.T) {
	f := newFixture(t, &fakellm.Script{Turns: []fakellm.Turn{{Text: "ok"}}}, "anthropic")
	w, ds := dsl.CompileSource("t.bot", []byte("agent a:\n  model: \"anthropic/m\"\n  tools: [read_file, write_file, edit_file, bash, grep]\n  readonly: true\nworkflow w:\n  entry: a\n  a -> done\n"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	if _, err := f.engine.Start(context.Background(), engine.StartRequest{Workflow: w, RunID: "ro", WorkDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	reqs := f.fake.Requests()
	if len(reqs) == 0 {
		t.Fatal("no model request")
	}
	got := strings.Join(reqs[0].Tools, ",")
	if got != "read_file,grep" {
		t.Errorf("tools offered = %s, want read_file,grep", got)
	}
}
