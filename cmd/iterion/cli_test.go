package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/bot/schedule"
	"github.com/iterion-bot/iterion/engine"
)

// testCLI runs the program in-process for one test: each of its
// commands is an App with the test's own environment (over the
// process's, which no test changes), working directory and backends, so
// tests run in parallel.
type testCLI struct {
	t   testing.TB
	env map[string]string
	// dir is the working directory of the commands; "" is the process's.
	dir      string
	backends func(getenv func(string) string) (map[string]engine.Backend, error)
	// writePace is the App's GitHub write spacing; 0 means a millisecond.
	writePace time.Duration
	// clock, when set, is the time serve's schedules fire by.
	clock schedule.Clock
}

// newCLI is the test's command line: the owners' sockets in the tests'
// private directory, and none of the developer's own settings.
func newCLI(t testing.TB) *testCLI {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ITERION_") || strings.HasPrefix(k, "ANTHROPIC_") || strings.HasPrefix(k, "OPENAI_") {
			env[k] = ""
		}
	}
	env["ITERION_RUNTIME_DIR"] = testRuntimeDir
	return &testCLI{t: t, env: env}
}

// setenv sets a variable for the commands run after it.
func (c *testCLI) setenv(name, value string) { c.env[name] = value }

// useBackend makes the commands run their agents on b.
func (c *testCLI) useBackend(b engine.Backend) {
	c.backends = func(func(string) string) (map[string]engine.Backend, error) {
		return map[string]engine.Backend{"claw": b}, nil
	}
}

// app is the App of one command. GitHub's write spacing would make the
// GitHub tests wait a second per write; the pacing itself is tested in
// bot/github on a fake clock.
func (c *testCLI) app(stdin io.Reader, stdout, stderr io.Writer, args ...string) *App {
	return &App{Args: args, Stdin: stdin, Stdout: stdout, Stderr: stderr, Env: maps.Clone(c.env), Dir: c.dir,
		Backends: c.backends, WritePace: c.pace(), ScheduleClock: c.clock}
}

// exec runs one command to its end, reading stdin (nil: the process's),
// and returns its exit status.
func (c *testCLI) exec(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, args ...string) int {
	a := c.app(stdin, stdout, stderr, args...)
	defer a.Close()
	return a.Run(ctx)
}

// run runs one command and returns its exit status and outputs.
func (c *testCLI) run(args ...string) (code int, stdout, stderr string) {
	c.t.Helper()
	var out, errb bytes.Buffer
	code = c.exec(context.Background(), nil, &out, &errb, args...)
	return code, out.String(), errb.String()
}

// runCLI runs one command of a test that sets nothing of its own.
func runCLI(t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return newCLI(t).run(args...)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const badWorkflow = `agent draft:
  model: "anthropic/claude-sonnet-4-6"
  interaction: async

await_answers gate:
  from: draft

workflow w:
  entry: draft
  draft -> gate
  gate -> done
`

func TestValidateExamples(t *testing.T) {
	t.Parallel()
	examples, err := filepath.Glob("../../examples/*/main.bot")
	if err != nil || len(examples) < 3 {
		t.Fatalf("examples: %v %v", examples, err)
	}
	code, out, errOut := runCLI(t, append([]string{"validate"}, examples...)...)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if got := strings.Count(out, ": ok: workflow"); got != len(examples) {
		t.Errorf("ok lines = %d, want %d:\n%s", got, len(examples), out)
	}
}

func TestValidateErrors(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "bad.bot", badWorkflow)
	code, out, _ := runCLI(t, "validate", path)
	if code != exitError {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{
		path + ":5:15: error [C241]: await_answers \"gate\" has no positive timeout",
		"    5 | await_answers gate:\n      |               ^^^^\n",
		"  fix: add timeout: \"30m\"",
		path + ": 1 error, 0 warnings",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestValidateWarningsOnlyExitZero(t *testing.T) {
	t.Parallel()
	src := strings.Replace(badWorkflow, "  from: draft\n", "  from: nobody\n  timeout: \"30m\"\n", 1)
	path := writeFile(t, "warn.bot", src)
	code, out, _ := runCLI(t, "validate", path)
	if code != exitOK {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	if !strings.Contains(out, "warning [C242]") || !strings.Contains(out, "1 warning") {
		t.Errorf("warning not reported:\n%s", out)
	}
}

func TestValidateJSON(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "bad.bot", badWorkflow)
	code, out, _ := runCLI(t, "validate", "--json", path)
	if code != exitError {
		t.Fatalf("exit %d, want 1", code)
	}
	var got struct {
		Diagnostics []map[string]any `json:"diagnostics"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	want := []map[string]any{{
		"source": "compile", "code": "C241", "severity": "error", "file": path,
		"line": float64(5), "column": float64(15),
		"message": `await_answers "gate" has no positive timeout: a mandatory bound is required (the no-silent-infinity invariant)`,
		"hint":    `add timeout: "30m" (a positive Go duration); the gate fails with the unanswered question ids when it expires`,
		"node_id": "", "edge_id": "",
	}}
	if diff := cmp.Diff(want, got.Diagnostics); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
}

func TestValidateJSONClean(t *testing.T) {
	t.Parallel()
	code, out, _ := runCLI(t, "validate", "--json", "../../examples/async-questions/main.bot")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if strings.TrimSpace(out) != "{\n  \"diagnostics\": []\n}" {
		t.Errorf("got %q", out)
	}
}

func TestValidateUsageAndIO(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "pipe.bot")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	dirBot := filepath.Join(t.TempDir(), "dir.bot")
	if err := os.Mkdir(dirBot, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "no files", args: []string{"validate"}, wantCode: exitUsage, wantStderr: "validate needs at least one workflow file"},
		{name: "unknown flag", args: []string{"validate", "--jsn", "x.bot"}, wantCode: exitUsage, wantStderr: "unknown flag: --jsn"},
		{name: "missing file", args: []string{"validate", "/nonexistent/x.bot"}, wantCode: exitError, wantStdout: "no such file or directory"},
		{name: "wrong extension", args: []string{"validate", "workflow.yaml"}, wantCode: exitError, wantStdout: `unsupported workflow extension ".yaml"`},
		// Nothing writes to the FIFO: reading it would never return.
		{name: "a FIFO", args: []string{"validate", fifo}, wantCode: exitError, wantStdout: "not a regular file"},
		{name: "a directory", args: []string{"validate", dirBot}, wantCode: exitError, wantStdout: "not a regular file"},
		{name: "version extra arg", args: []string{"version", "x"}, wantCode: exitUsage, wantStderr: `unexpected argument "x"`},
		{name: "version", args: []string{"version"}, wantCode: exitOK, wantStdout: "iterion "},
		{name: "unknown command", args: []string{"validat", "x.bot"}, wantCode: exitUsage, wantStderr: `unknown command "validat" for "iterion": did you mean "validate"?`},
		{name: "unknown subcommand", args: []string{"runs", "lsit"}, wantCode: exitUsage, wantStderr: `unknown command "lsit" for "iterion runs": did you mean "list"?` + "\nRun 'iterion runs --help' for usage."},
		{name: "a group alone is its help", args: []string{"runs"}, wantCode: exitOK, wantStdout: "Available Commands"},
		{name: "bad status", args: []string{"runs", "list", "--status", "bogus"}, wantCode: exitUsage, wantStderr: `--status "bogus": use one of running, paused_waiting_human, finished`},
		{name: "negative limit", args: []string{"runs", "list", "--limit", "-1"}, wantCode: exitUsage, wantStderr: "--limit -1: use a positive number of runs"},
		{name: "zero limit", args: []string{"runs", "list", "--limit", "0"}, wantCode: exitUsage, wantStderr: "--limit 0: use a positive number"},
		{name: "limit not a number", args: []string{"runs", "list", "--limit", "ten"}, wantCode: exitUsage, wantStderr: `invalid argument "ten" for "--limit"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runCLI(t, tc.args...)
			if code != tc.wantCode {
				t.Errorf("exit = %d, want %d (stdout %q, stderr %q)", code, tc.wantCode, out, errOut)
			}
			if !strings.Contains(out, tc.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", out, tc.wantStdout)
			}
			if !strings.Contains(errOut, tc.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tc.wantStderr)
			}
		})
	}
}

func TestValidateJSONUnreadable(t *testing.T) {
	t.Parallel()
	code, out, _ := runCLI(t, "validate", "--json", "/nonexistent/x.bot")
	if code != exitError {
		t.Fatalf("exit %d, want 1", code)
	}
	var got struct {
		Diagnostics []map[string]any `json:"diagnostics"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Diagnostics) != 1 {
		t.Fatalf("output %q: %v", out, err)
	}
	if d := got.Diagnostics[0]; d["source"] != "file" || d["severity"] != "error" || !strings.Contains(d["message"].(string), "no such file") {
		t.Errorf("diagnostic = %v", d)
	}
}

func TestValidateIterExtension(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../examples/async-questions/main.bot")
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "legacy.iter", string(src))
	if code, out, _ := runCLI(t, "validate", path); code != exitOK {
		t.Errorf("exit %d for a .iter file:\n%s", code, out)
	}
}

func TestValidateSeveralFilesOneBad(t *testing.T) {
	t.Parallel()
	bad := writeFile(t, "bad.bot", badWorkflow)
	code, out, _ := runCLI(t, "validate", "../../examples/nightly/main.bot", bad)
	if code != exitError {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(out, "nightly/main.bot: ok") || !strings.Contains(out, "[C241]") {
		t.Errorf("output:\n%s", out)
	}
}

// pace is the App's GitHub write spacing: writePace, else a millisecond.
func (c *testCLI) pace() time.Duration {
	if c.writePace > 0 {
		return c.writePace
	}
	return time.Millisecond
}

// validate reads ${NAME:-default} by its default; --env takes what a run
// here would: only the variables ITERION_WORKFLOW_ENV allows, never a
// secret's, whatever the list says.
func TestValidateEnvironmentReferences(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	wf := writeFile(t, "w.bot", `prompt p:
  Work.

agent a:
  model: "anthropic/${ITERION_X_MODEL:-claude-sonnet-4-6}"
  reasoning_effort: "${ITERION_X_EFFORT:-high}"
  timeout: "${ITERION_API_KEY:-20m}"
  user: p

workflow w:
  entry: a
  a -> done
`)
	c.setenv("ITERION_X_EFFORT", "low")
	c.setenv("ITERION_API_KEY", "5m")
	c.setenv("ITERION_X_MODEL", "other")
	code, out, errOut := c.run("validate", wf)
	if code != exitOK || !strings.Contains(out, `reasoning_effort ${ITERION_X_EFFORT:-high} = "high" (its default)`) {
		t.Fatalf("validate: exit %d\n%s%s", code, out, errOut)
	}
	c.setenv("ITERION_WORKFLOW_ENV", "ITERION_X_EFFORT, ITERION_API_*")
	code, out, errOut = c.run("validate", "--env", wf)
	if code != exitOK {
		t.Fatalf("validate --env: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`reasoning_effort ${ITERION_X_EFFORT:-high} = "low" (from ITERION_X_EFFORT)`,
		`timeout ${ITERION_API_KEY:-20m} = "20m" (its default: ITERION_API_KEY unset, or not allowed`,
		`model anthropic/${ITERION_X_MODEL:-claude-sonnet-4-6} = "anthropic/claude-sonnet-4-6" (its default: ITERION_X_MODEL unset, or not allowed`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate --env lacks %q:\n%s", want, out)
		}
	}
}

// validate --compat walks a tree: one line per file, then the summary.
func TestValidateCompat(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	files := map[string]string{
		"a/ok.bot":      "compute c:\n  expr:\n    x: \"1\"\n\nworkflow w:\n  entry: c\n  c -> done\n",
		"a/warn.bot":    "tool t:\n  command: \"true\"\n  permission: ask\n\nworkflow w:\n  entry: t\n  t -> done\n",
		"b/broken.iter": "workflow w:\n  entry: nowhere\n",
		"notes.txt":     "not a workflow",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ := c.run("validate", "--compat", dir)
	if code != exitError {
		t.Errorf("exit %d, want %d for a tree with errors", code, exitError)
	}
	for _, want := range []string{
		filepath.Join(dir, "a/ok.bot") + ": ok\n",
		filepath.Join(dir, "a/warn.bot") + ": ok with 1 warning: 3:3: warning [C112]",
		filepath.Join(dir, "b/broken.iter") + ": 1 error: ",
		"3 files: 1 ok, 1 with warnings, 1 with errors\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = c.run("validate", "--compat", dir, "--json")
	var res struct {
		Files []struct {
			File, Verdict string
		}
		Summary map[string]int
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitError {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}
	if len(res.Files) != 3 || res.Summary["errors"] != 1 || res.Summary["ok"] != 1 {
		t.Errorf("--json = %+v", res)
	}
}
