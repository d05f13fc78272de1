package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

const formWorkflow = `
schema decision:
  approved: bool
  reason: string

human approve:
  instructions: "Ship it?"
  output: decision

workflow w:
  entry: approve
  approve -> done when approved
  approve -> fail
`

// A human node's form, paused, is listed with its fields and answered
// through REST with {"answers": …}; the engine resumes the run.
func TestFormThroughAPI(t *testing.T) {
	w, ds := dsl.CompileSource("form.bot", []byte(formWorkflow))
	if ds.HasErrors() {
		t.Fatal(dsl.RenderString(ds, nil))
	}
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := engine.New(engine.Options{Store: db, Workflow: func(context.Context, *engine.Run) (*dsl.Workflow, error) { return w, nil }})
	ctx := t.Context()
	run, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "form", WorkDir: t.TempDir()})
	if err != nil || run.Status != engine.StatusPausedWaitingHuman {
		t.Fatalf("start: %+v, %v", run, err)
	}
	srv := httptest.NewServer(api.RequireToken(tcpToken, tcpName, api.NewServer(e, db, api.Options{}).Handler()))
	t.Cleanup(srv.Close)
	client := api.NewClient(srv.URL, api.ClientOptions{HTTP: srv.Client(), Token: tcpToken})

	pending, err := client.Pending(ctx, run.ID)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending = %v, %v; want the form", pending, err)
	}
	want := []engine.FormField{{Name: "approved", Type: "bool"}, {Name: "reason", Type: "string"}}
	if diff := cmp.Diff(want, pending[0].Fields); diff != "" {
		t.Errorf("the form's fields (-want +got):\n%s", diff)
	}
	ixID := pending[0].ID

	for _, c := range []struct {
		name string
		body api.AnswerBody
		code string
		want string
	}{
		{"both", api.AnswerBody{Answer: "yes", Answers: map[string]any{"approved": true}}, "bad_request", "not both"},
		{"text for a two-field form", api.AnswerBody{Answer: "yes"}, "invalid_answer", `missing answer for "approved" (bool)`},
		{"wrong type", api.AnswerBody{Answers: map[string]any{"approved": "maybe", "reason": "r"}}, "invalid_answer", `answer for "approved": "maybe" is not a yes/no answer`},
	} {
		_, err := client.Answer(ctx, run.ID, ixID, c.body)
		var apiErr *api.Error
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Code != c.code || !strings.Contains(apiErr.Message, c.want) {
			t.Errorf("%s: err = %#v, want 400 %s saying %q", c.name, err, c.code, c.want)
		}
		if c.code == "invalid_answer" && len(apiErr.Fields) != 2 {
			t.Errorf("%s: the error lists fields %v, want the form's two", c.name, apiErr.Fields)
		}
	}

	res, err := client.Answer(ctx, run.ID, ixID, api.AnswerBody{Answers: map[string]any{"approved": true, "reason": "tests pass"}})
	if err != nil || !res.Resumed {
		t.Fatalf("answer = %+v, %v; want it taken and the run resumed", res, err)
	}
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := db.Run(ctx, run.ID)
	ix, _ := db.Interaction(ctx, run.ID, ixID)
	if got.Status != engine.StatusFinished || ix.AnsweredBy != tcpName || ix.Via != "api" {
		t.Errorf("run %s; answered by %q via %q; want finished, by %s via api", got.Status, ix.AnsweredBy, ix.Via, tcpName)
	}
	_, err = client.Answer(ctx, run.ID, ixID, api.AnswerBody{Answers: map[string]any{"approved": false, "reason": "no"}})
	if !errors.Is(err, engine.ErrAlreadyAnswered) {
		t.Errorf("second answer: err = %v, want already answered", err)
	}
}
