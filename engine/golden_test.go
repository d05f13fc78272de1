package engine_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/iterion-bot/iterion/engine"
)

var update = flag.Bool("update", false, "rewrite the golden event logs under testdata/events")

// TestGoldenEvents runs each testdata/events/*.txtar workflow (in.bot) with
// the answers in "answers" (field=value lines for a pause; async questions
// are answered in order with "async=" lines) and compares the event log,
// with ids, times and durations masked, to out/events.
func TestGoldenEvents(t *testing.T) {
	files, _ := filepath.Glob("testdata/events/*.txtar")
	if len(files) == 0 {
		t.Fatal("no golden event logs")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			files := map[string]string{}
			for _, f := range ar.Files {
				files[f.Name] = string(f.Data)
			}
			got := runGolden(t, files["in.bot"], files["answers"])
			if *update {
				var kept []txtar.File
				for _, f := range ar.Files {
					if f.Name != "out/events" {
						kept = append(kept, f)
					}
				}
				ar.Files = append(kept, txtar.File{Name: "out/events", Data: []byte(got)})
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(files["out/events"], got); diff != "" {
				t.Errorf("events (-want +got):\n%s\n(go test ./engine -run TestGoldenEvents -update rewrites them)", diff)
			}
		})
	}
}

// runGolden runs the workflow to its end, answering as told, and returns
// the masked event log.
func runGolden(t *testing.T, src, answers string) string {
	t.Helper()
	var asyncAnswers []string
	pause := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(answers), "\n") {
		k, v, ok := strings.Cut(line, "=")
		switch {
		case !ok:
		case k == "async":
			asyncAnswers = append(asyncAnswers, v)
		default:
			pause[k] = v
		}
	}
	db := newStore(t)
	ctx := context.Background()
	var e *engine.Engine
	// The scripted agent posts one question per async answer, answers them
	// itself through the engine (as an operator would, while it works), and
	// returns an output with every field of its schema as a string.
	agent := &script{async: true, run: func(ctx context.Context, task *engine.Task) (*engine.Result, error) {
		out := map[string]any{}
		if task.PostQuestion != nil {
			for i, a := range asyncAnswers {
				id, err := task.PostQuestion(ctx, engine.AsyncQuestion{Question: fmt.Sprintf("question %d?", i+1)})
				if err != nil {
					return nil, err
				}
				if _, err := e.Answer(ctx, engine.AnswerRequest{RunID: task.RunID, InteractionID: id, Text: a, By: "op", Via: "test"}); err != nil {
					return nil, err
				}
			}
			msgs, err := task.InboxDrain(ctx)
			if err != nil {
				return nil, err
			}
			out["inbox"] = strings.Join(msgs, " | ")
		}
		if props, ok := task.OutputSchema["properties"].(map[string]any); ok {
			for name := range props {
				if _, set := out[name]; !set {
					out[name] = "from " + task.NodeID
				}
			}
		}
		return &engine.Result{Output: out, Tokens: 10}, nil
	}}
	e = engine.New(engine.Options{Store: db, Sandbox: testSandbox(t), Backends: map[string]engine.Backend{"claw": agent}})
	w := mustCompile(t, src)
	run, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "golden", WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status == engine.StatusPausedWaitingHuman && len(pause) > 0 {
		if run, err = e.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: run.ID, Answers: pause, By: "op", Via: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := db.Events(ctx, run.ID, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%3d %s", ev.Seq, ev.Type)
		if ev.NodeID != "" {
			fmt.Fprintf(&b, " node=%s", ev.NodeID)
		}
		if ev.BranchID != "" {
			fmt.Fprintf(&b, " branch=%s", ev.BranchID)
		}
		if len(ev.Data) > 0 {
			fmt.Fprintf(&b, " %s", maskedJSON(ev.Data))
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "status=%s failure_code=%s error=%q\n", run.Status, run.FailureCode, run.Error)
	return b.String()
}

var maskTime = regexp.MustCompile(`"_duration_ms":\d+`)

// maskedJSON prints data with sorted keys and durations masked.
func maskedJSON(data map[string]any) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		v, _ := json.Marshal(data[k])
		parts = append(parts, fmt.Sprintf("%q:%s", k, v))
	}
	return maskTime.ReplaceAllString("{"+strings.Join(parts, ",")+"}", `"_duration_ms":"*"`)
}
