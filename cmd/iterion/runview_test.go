package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/engine"
)

// scripted is an agent that returns out, after posting question when set.
type scripted struct {
	out      map[string]any
	question string
}

func (s scripted) Capabilities() engine.Capabilities {
	return engine.Capabilities{AsyncQuestions: true}
}
func (s scripted) Execute(ctx context.Context, task *engine.Task) (*engine.Result, error) {
	if s.question != "" && task.PostQuestion != nil {
		if _, err := task.PostQuestion(ctx, engine.AsyncQuestion{Question: s.question}); err != nil {
			return nil, err
		}
	}
	return &engine.Result{Output: s.out}, nil
}

// agentWorkflow is one agent node, a, publishing its output as report.
const agentWorkflow = "agent a:\n  model: \"anthropic/x\"\n  interaction: async\n  publish: report\nworkflow w:\n  entry: a\n  a -> done\n"

// iterion run ends with the output of the run's last node, cut after 20
// lines with where to read the rest.
func TestRunEndsWithItsOutput(t *testing.T) {
	t.Parallel()
	var long []string
	for i := 1; i <= 30; i++ {
		long = append(long, fmt.Sprintf("line %d", i))
	}
	c := newCLI(t)
	c.useBackend(scripted{out: map[string]any{"text": strings.Join(long, "\n"), "words": 60}})
	st := filepath.Join(t.TempDir(), "st")
	tests := []struct {
		name, workflow, want string
	}{
		{"short", "compute c:\n  expr:\n    x: \"1 + 1\"\nworkflow w:\n  entry: c\n  c -> done\n", "run r finished\noutput of c:\n  x: 2\n"},
		{"long", agentWorkflow, "run r finished\noutput of a:\n  text: |\n    line 1\n" +
			"    line 2\n    line 3\n    line 4\n    line 5\n    line 6\n    line 7\n    line 8\n    line 9\n    line 10\n" +
			"    line 11\n    line 12\n    line 13\n    line 14\n    line 15\n    line 16\n    line 17\n    line 18\n    line 19\n" +
			"  … 12 more lines (the whole output: iterion runs show r --json --store-dir " + st + ")\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := st + "-" + tc.name
			tc.want = strings.ReplaceAll(tc.want, "--store-dir "+filepath.Dir(st)+"/st)", "--store-dir "+st+")")
			code, out, errOut := c.run("run", writeFile(t, "w.bot", tc.workflow), "--store-dir", st, "--run-id", "r")
			if code != exitOK || out != tc.want {
				t.Errorf("exit %d, stdout:\n%s\nwant:\n%s\nstderr:\n%s", code, out, tc.want, errOut)
			}
		})
	}
}

// runs show tells where a paused run is and what it waits for, with the
// form's fields and the outputs so far.
func TestRunsShowPausedForm(t *testing.T) {
	t.Parallel()
	st := filepath.Join(t.TempDir(), "st")
	wf := writeFile(t, "release.bot", humanWorkflow)
	if code, out, errOut := runCLI(t, "run", wf, "--store-dir", st, "--run-id", "rel-1", "--no-interactive", "--var", "version=2.0"); code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runCLI(t, "runs", "show", "rel-1", "--store-dir", st)
	if code != exitOK {
		t.Fatalf("runs show: exit %d\n%s", code, errOut)
	}
	for _, want := range []string{
		"run rel-1: workflow release (" + wf + ")\nstatus: paused_waiting_human\nnode: approve (paused)\n",
		"run rel-1 paused at node approve, waiting for the answers of rel-1_approve:\n  Approve the release of 2.0?\nfields:\n  approved: bool\n  reason: string\n",
		"answer with: iterion runs answer rel-1 rel-1_approve approved=… reason=… --store-dir " + st + "\n",
		"outputs:\n  prep:\n    v: 2.0\n",
		"\nstarted from: cli\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("runs show lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, "runs", "show", "rel-1", "--store-dir", st, "--json")
	var v struct {
		Status  string                    `json:"status"`
		Pause   *pauseView                `json:"pause"`
		Outputs map[string]map[string]any `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(out), &v); code != exitOK || err != nil {
		t.Fatalf("runs show --json: exit %d, %v\n%s", code, err, out)
	}
	if v.Status != "paused_waiting_human" || v.Pause == nil || v.Pause.Node != "approve" || v.Pause.Questions["approved"] != "bool" || v.Outputs["prep"]["v"] != "2.0" {
		t.Errorf("runs show --json = %+v", v)
	}
}

// runs artifact prints an artifact a run published; a name or version it
// lacks is refused with those it has.
func TestRunsArtifact(t *testing.T) {
	t.Parallel()
	st := filepath.Join(t.TempDir(), "st")
	wf := writeFile(t, "loop.bot", "compute c:\n  expr:\n    x: \"1 + 1\"\n    note: \"'two words'\"\n  publish: sum\nworkflow w:\n  entry: c\n  c -> done\n")
	if code, out, errOut := runCLI(t, "run", wf, "--store-dir", st, "--run-id", "a-1"); code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"latest", []string{"a-1", "sum"}, exitOK, "note: two words\nx: 2\n", ""},
		{"version 0", []string{"a-1", "sum", "--version", "0"}, exitOK, "x: 2\n", ""},
		{"as JSON", []string{"a-1", "sum", "--json"}, exitOK, "{\n  \"note\": \"two words\",\n  \"x\": 2\n}\n", ""},
		{"no such version", []string{"a-1", "sum", "--version", "1"}, exitError, "", "artifact sum of run a-1 has no version 1 (its versions: 0 to 0)"},
		{"bad version", []string{"a-1", "sum", "--version", "-2"}, exitUsage, "", "--version -2: use a version number, 0 for the first"},
		{"no such artifact", []string{"a-1", "summ"}, exitError, "", `run a-1 has no artifact "summ" (its artifacts: sum)`},
		{"no such run", []string{"nope", "sum"}, exitError, "", "list runs with iterion runs list"},
		{"no name", []string{"a-1"}, exitUsage, "", "artifact needs a run id and an artifact name"},
	}
	for _, tc := range tests {
		// Serial: the cases open the one store in turn.
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append([]string{"runs", "artifact", "--store-dir", st}, tc.args...)...)
			if code != tc.wantCode || !strings.Contains(out, tc.wantOut) || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, out, errOut, tc.wantCode, tc.wantOut, tc.wantErr)
			}
		})
	}
	code, out, _ := runCLI(t, "runs", "show", "a-1", "--store-dir", st)
	if want := "artifacts:\n  sum: version 0, from c (print it with: iterion runs artifact a-1 sum --store-dir " + st + ")\n"; code != exitOK || !strings.Contains(out, want) {
		t.Errorf("runs show lacks %q:\n%s", want, out)
	}
}

// hostile is agent text that would clear the screen, retitle the window,
// overwrite the line with a fake status and reverse the text after it.
const hostile = "ok\x1b[2J\x1b]0;pwned\x07\rrun r finished\u202eevil\u009b31m"

// Agent output and questions are printed with their control characters
// escaped: in the outcome, the progress, runs show and runs artifact, as
// text and as JSON (which still decodes to the text itself).
func TestHostileOutputCannotRewriteTheTerminal(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.useBackend(scripted{out: map[string]any{"summary": hostile}, question: "which?" + hostile})
	st := filepath.Join(t.TempDir(), "st")
	wf := writeFile(t, "w.bot", agentWorkflow)
	code, runOut, runErr := c.run("run", wf, "--store-dir", st, "--run-id", "r")
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, runOut, runErr)
	}
	escaped := `ok\x1b[2J\x1b]0;pwned\x07\rrun r finished\u202eevil\u009b31m`
	printed := map[string]string{"run's outcome": runOut, "run's progress": runErr}
	for name, args := range map[string][]string{
		"runs show":          {"runs", "show", "r"},
		"runs artifact":      {"runs", "artifact", "r", "report"},
		"runs show --json":   {"runs", "show", "r", "--json"},
		"runs artifact json": {"runs", "artifact", "r", "report", "--json"},
		"runs events":        {"runs", "events", "r"},
		"runs questions":     {"runs", "questions", "r"},
	} {
		code, out, errOut := c.run(append(args, "--store-dir", st)...)
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s", name, code, errOut)
		}
		printed[name] = out
	}
	for name, out := range printed {
		if i := strings.IndexFunc(out, func(r rune) bool { return r != '\n' && unsafeRune(r, true) }); i >= 0 {
			t.Errorf("%s prints %q raw:\n%q", name, []rune(out[i:])[0], out)
		}
	}
	for _, name := range []string{"run's outcome", "run's progress", "runs show", "runs artifact"} {
		if !strings.Contains(printed[name], escaped) {
			t.Errorf("%s does not show the text escaped, %s:\n%s", name, escaped, printed[name])
		}
	}
	var art map[string]any
	if err := json.Unmarshal([]byte(printed["runs artifact json"]), &art); err != nil || art["summary"] != hostile {
		t.Errorf("runs artifact --json decodes to %q (%v), want the agent's text", art["summary"], err)
	}
}

// runs show says where a run was started: the channel, its place there
// (the ref the channel gave it) and who started it.
func TestRunsShowWhereItStarted(t *testing.T) {
	t.Parallel()
	st := filepath.Join(t.TempDir(), "st")
	a := newCLI(t).app(nil, io.Discard, io.Discard)
	defer a.Close()
	o, err := a.becomeOwner(st, "test", engine.Options{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	run := &engine.Run{ID: "gh-1", Workflow: "review", Status: engine.StatusFinished,
		Trigger: ghbot.Origin{Repo: "acme/app", PR: 7, Installation: 42}.Trigger("ana")}
	if err := o.db.CreateRun(t.Context(), run, nil); err != nil {
		t.Fatal(err)
	}
	o.Close()
	code, out, errOut := runCLI(t, "runs", "show", "gh-1", "--store-dir", st)
	if want := "\nstarted from: github (github/acme/app#7), by ana\n"; code != exitOK || !strings.Contains(out, want) {
		t.Errorf("runs show: exit %d, lacks %q:\n%s%s", code, want, out, errOut)
	}
}

// termLine escapes every control character but tab; termText keeps
// newlines too; text without them is left alone.
func TestTermEscape(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, line, text string }{
		{"plain text, tabs\tand ünïcödé", "plain text, tabs\tand ünïcödé", "plain text, tabs\tand ünïcödé"},
		{"two\nlines\r\n", `two\nlines\r\n`, "two\nlines\\r\n"},
		{"\x1b[31mred\x1b[0m\x07", `\x1b[31mred\x1b[0m\x07`, `\x1b[31mred\x1b[0m\x07`},
		{"del\x7f c1\u0085\u009b bidi\u202e\u2066 sep\u2028", `del\x7f c1\u0085\u009b bidi\u202e\u2066 sep\u2028`, `del\x7f c1\u0085\u009b bidi\u202e\u2066 sep\u2028`},
		{"bad \xff utf-8 \ufffd", `bad \xff utf-8 ` + "\ufffd", `bad \xff utf-8 ` + "\ufffd"},
	}
	for _, tc := range tests {
		if got := termLine(tc.in); got != tc.line {
			t.Errorf("termLine(%q) = %q, want %q", tc.in, got, tc.line)
		}
		if got := termText(tc.in); got != tc.text {
			t.Errorf("termText(%q) = %q, want %q", tc.in, got, tc.text)
		}
	}
}

// Whatever the text, the escaped forms hold no character a terminal acts
// on, and JSON made safe decodes to the same value.
func FuzzTermEscape(f *testing.F) {
	for _, s := range []string{"", "plain", hostile, "a\nb\tc", "\xff\xfe", "\u2028\u202e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{termLine(s), termText(s)} {
			if strings.ContainsFunc(out, func(r rune) bool { return r != '\n' && unsafeRune(r, true) }) {
				t.Fatalf("escaped %q is %q, still with a control character", s, out)
			}
		}
		if strings.Contains(termLine(s), "\n") {
			t.Fatalf("termLine(%q) has a newline", s)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		safe := jsonSafe(b)
		if strings.ContainsFunc(string(safe), func(r rune) bool { return unsafeRune(r, false) && r != '\t' }) {
			t.Fatalf("jsonSafe(%s) = %s, still with a control character", b, safe)
		}
		var back, want string
		if err := json.Unmarshal(safe, &back); err != nil {
			t.Fatalf("jsonSafe(%s) = %s, not JSON: %v", b, safe, err)
		}
		_ = json.Unmarshal(b, &want)
		if back != want {
			t.Fatalf("jsonSafe(%s) decodes to %q, want %q", b, back, want)
		}
	})
}

// events is a run's record and event log, for viewRun.
type events struct {
	run *engine.Run
	log []engine.Event
}

func (e events) Run(context.Context, string) (*engine.Run, error) { return e.run, nil }

// Events returns at most three events at a time, as a server capping its
// pages would.
func (e events) Events(_ context.Context, _ string, after int64, limit int) ([]engine.Event, error) {
	var out []engine.Event
	for _, ev := range e.log {
		if ev.Seq > after && len(out) < min(limit, 3) {
			out = append(out, ev)
		}
	}
	return out, nil
}
func (e events) Pending(context.Context, string) ([]*engine.Interaction, error) { return nil, nil }

// Each artifact version is the output of the finish its node wrote in the
// same commit: after the artifact for model and tool nodes, before it for
// human nodes, a loop's iterations each their own.
func TestViewArtifactsAreTheirNodesOutputs(t *testing.T) {
	t.Parallel()
	var log []engine.Event
	add := func(typ, node string, data map[string]any) {
		log = append(log, engine.Event{Seq: int64(len(log) + 1), Type: typ, NodeID: node, Data: data})
	}
	out := func(n int) map[string]any { return map[string]any{"n": float64(n)} }
	for i := range 3 { // a looping agent: artifact, then its finish
		add(engine.EventNodeStarted, "draft", map[string]any{"kind": "agent"})
		add(engine.EventArtifactWritten, "draft", map[string]any{"publish": "doc", "version": float64(i)})
		add(engine.EventNodeFinished, "draft", map[string]any{"output": out(i)})
		add(engine.EventEdgeSelected, "draft", nil)
	}
	// A human node: its finish, then its artifact.
	add(engine.EventHumanAnswers, "ok", nil)
	add(engine.EventNodeFinished, "ok", map[string]any{"output": out(10)})
	add(engine.EventArtifactWritten, "ok", map[string]any{"publish": "decision", "version": float64(0)})
	add(engine.EventEdgeSelected, "ok", nil)
	add(engine.EventRunResumed, "", nil)
	add(engine.EventNodeStarted, "ok", map[string]any{"kind": "human"})
	add(engine.EventNodeFinished, "ok", map[string]any{"output": out(11)})
	add(engine.EventArtifactWritten, "ok", map[string]any{"publish": "decision", "version": float64(1)})
	add(engine.EventRunFinished, "", nil)

	v, err := viewRun(context.Background(), events{run: &engine.Run{ID: "r", Status: engine.StatusFinished}, log: log}, "r", storeInfo{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		version int
		want    float64
	}{
		{"doc", 0, 0}, {"doc", 1, 1}, {"doc", 2, 2}, {"doc", -1, 2},
		{"decision", 0, 10}, {"decision", 1, 11}, {"decision", -1, 11},
	}
	for _, tc := range tests {
		a, err := v.artifact(tc.name, tc.version)
		if err != nil {
			t.Errorf("artifact(%s, %d): %v", tc.name, tc.version, err)
			continue
		}
		if got := a.Data.(map[string]any)["n"]; got != tc.want {
			t.Errorf("artifact(%s, %d) = %v, want %v", tc.name, tc.version, got, tc.want)
		}
	}
	if len(v.Nodes) != 0 || v.Output == nil || v.Output.Node != "ok" {
		t.Errorf("nodes %v, output %+v; want none executing and the output of ok", v.Nodes, v.Output)
	}
	if want := []string{"draft", "ok"}; !slices.Equal(v.order, want) {
		t.Errorf("outputs in order %v, want %v", v.order, want)
	}
}
