package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/engine"
)

func TestServe(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	c.dir = dir
	c.setenv("ITERION_API_TOKEN", "tok")
	c.setenv("ITERION_API_TOKEN_NAME", "deploy-bot")
	writeAt := func(name, content string) {
		t.Helper()
		if err := writeFileAt(filepath.Join(dir, name), content); err != nil {
			t.Fatal(err)
		}
	}
	writeAt("w.bot", "vars:\n  n: int\ncompute c:\n  expr:\n    x: \"vars.n + 1\"\nworkflow w:\n  entry: c\n  c -> done\n")
	writeAt("m.bot", "schema out:\n  text: string\nagent a:\n  model: \"anthropic/claude-x\"\n  output: out\nworkflow m:\n  entry: a\n  a -> done\n")
	c.setenv("ANTHROPIC_API_KEY", "")
	base, stop := startServe(t, c)

	call := func(method, path, token, body string) (int, map[string]any) {
		t.Helper()
		return apiCall(t, base, method, path, token, body)
	}
	if code, _ := call("GET", "/healthz", "", ""); code != 200 {
		t.Errorf("healthz = %d", code)
	}
	if code, _ := call("GET", "/readyz", "", ""); code != 200 {
		t.Errorf("readyz = %d", code)
	}
	if code, _ := call("GET", "/api/runs", "wrong", ""); code != http.StatusUnauthorized {
		t.Errorf("wrong token = %d, want 401", code)
	}
	if code, out := call("POST", "/api/runs", "tok", `{"file_path": "w.bot"}`); code != 400 || !strings.Contains(out["error"].(string), `missing var "n"`) {
		t.Errorf("launch without the var = %d %v", code, out)
	}
	if code, out := call("POST", "/api/runs", "tok", `{"file_path": "m.bot"}`); code != 400 || !strings.Contains(out["error"].(string), "cannot run on this server") {
		t.Errorf("launch of a workflow the server has no model key for = %d %v", code, out)
	}
	if code, out := call("POST", "/api/runs", "tok", `{"file_path": "../x.bot"}`); code != 400 || !strings.Contains(out["error"].(string), "relative") {
		t.Errorf("launch outside = %d %v", code, out)
	}
	if code, out := call("POST", "/api/runs", "tok", `{"file_path": "w.bot", "vars": {"n": 4.5}}`); code != 400 || !strings.Contains(out["error"].(string), "var n: 4.5 is not a whole number") {
		t.Errorf("launch with a fractional int var = %d %v", code, out)
	}
	// A typed var takes a JSON number.
	code, out := call("POST", "/api/runs", "tok", `{"file_path": "w.bot", "run_id": "api-1", "vars": {"n": 41}}`)
	if code != http.StatusCreated || out["run_id"] != "api-1" {
		t.Fatalf("launch = %d %v", code, out)
	}
	// Launch stored the run's record before it answered.
	if code, _ := call("GET", "/api/runs/api-1", "tok", ""); code != http.StatusOK {
		t.Fatalf("the launched run is not stored yet: GET = %d", code)
	}
	waitRunStatus(t, base, "tok", "api-1", engine.StatusFinished)
	_, run := call("GET", "/api/runs/api-1", "tok", "")
	if trigger, _ := run["trigger"].(map[string]any); trigger["actor"] != "deploy-bot" {
		t.Errorf("run api-1 was started by %v, want the token's name deploy-bot", trigger["actor"])
	}
	// It worked in a directory of its own, not in the server's, removed
	// once the run is over (checked once serve stopped: its executor,
	// which removes it just after storing the end, has returned then).
	ws := filepath.Join(dir, "st", "workspaces", "api-1")
	if run["work_dir"] != ws {
		t.Errorf("run api-1 worked in %v, want its own directory under the store's workspaces/", run["work_dir"])
	}
	// Other commands reach the server on its socket, with its token.
	if code, out, errOut := c.run("runs", "list", "--store-dir", "st"); code != exitOK || !strings.Contains(out, "api-1") {
		t.Errorf("runs list through the socket: exit %d\n%s%s", code, out, errOut)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`iterion_runs{status="finished"} 1`, `iterion_runs{status="running"} 0`, "iterion_deliveries_pending 0", "iterion_deliveries_postponed 0", "iterion_deliveries_oldest_age_seconds 0", "iterion_outbox_rows 0", "iterion_outbox_oldest_age_seconds 0", `iterion_sandbox_available{driver="bwrap"} 1`, "go_goroutines"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code := stop(); code != exitOK {
		t.Errorf("serve exited %d", code)
	}
	if _, err := os.Stat(ws); !os.IsNotExist(err) {
		t.Errorf("the workspace of finished run api-1 is still there (%v)", err)
	}
}

func TestServeRefusesAppWithoutSecret(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.setenv("ITERION_GITHUB_APP_ID", "123")
	c.setenv("ITERION_GITHUB_WEBHOOK_SECRET", "")
	code, _, errOut := c.run("serve", "--addr", "127.0.0.1:0", "--store-dir", filepath.Join(t.TempDir(), "st"))
	if code != exitError || !strings.Contains(errOut, "ITERION_GITHUB_WEBHOOK_SECRET") {
		t.Errorf("exit %d, %s", code, errOut)
	}
	c.setenv("ITERION_GITHUB_WEBHOOK_SECRET", "s")
	for value, want := range map[string]string{
		"":                                "ITERION_GITHUB_PRIVATE_KEY is not set",
		"/nonexistent/app.pem":            "ITERION_GITHUB_PRIVATE_KEY names a file that cannot be read",
		"-----BEGIN RSA PRIVATE KEY-----": "ITERION_GITHUB_PRIVATE_KEY",
	} {
		c.setenv("ITERION_GITHUB_PRIVATE_KEY", value)
		code, _, errOut := c.run("serve", "--addr", "127.0.0.1:0", "--store-dir", filepath.Join(t.TempDir(), "st"))
		if code != exitError || !strings.Contains(errOut, want) {
			t.Errorf("key %q: exit %d, %s; want %q", value, code, errOut, want)
		}
	}
	c.setenv("ITERION_GITHUB_APP_ID", "my-app")
	if code, _, errOut := c.run("serve", "--addr", "127.0.0.1:0", "--store-dir", filepath.Join(t.TempDir(), "st")); code != exitError || !strings.Contains(errOut, "numeric id") {
		t.Errorf("non-numeric app id: exit %d, %s", code, errOut)
	}
}

func writeFileAt(path, content string) error {
	return os.WriteFile(path, []byte(content), 0o644)
}

// A human node's form, paused under serve, is listed with its fields and
// answered through REST and through iterion runs answer; either way the
// server resumes the run, which finishes.
func TestServeHumanForms(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	c.dir = dir
	c.setenv("ITERION_API_TOKEN", "tok")
	if err := writeFileAt(filepath.Join(dir, "h.bot"), humanWorkflow); err != nil {
		t.Fatal(err)
	}
	base, stop := startServe(t, c)
	call := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		return apiCall(t, base, method, path, "tok", body)
	}
	waitFor := func(id string, status engine.Status) {
		t.Helper()
		waitRunStatus(t, base, "tok", id, status)
	}
	for _, id := range []string{"form-rest", "form-cli"} {
		if code, out := call("POST", "/api/runs", `{"file_path": "h.bot", "run_id": "`+id+`", "vars": {"version": "2.0"}}`); code != http.StatusCreated {
			t.Fatalf("launch %s = %d %v", id, code, out)
		}
		waitFor(id, engine.StatusPausedWaitingHuman)
	}
	code, out := call("GET", "/api/runs/form-rest/interactions/pending", "")
	ixs, _ := out["interactions"].([]any)
	if code != 200 || len(ixs) != 1 {
		t.Fatalf("pending = %d %v, want the form", code, out)
	}
	fields, _ := ixs[0].(map[string]any)["fields"].([]any)
	if len(fields) != 2 {
		t.Errorf("the form lists fields %v, want approved and reason", fields)
	}
	path := "/api/runs/form-rest/interactions/form-rest_approve/answer"
	if code, out := call("POST", path, `{"answer": "yes", "answers": {"approved": true}}`); code != 400 {
		t.Errorf("answer and answers = %d %v, want 400", code, out)
	}
	if code, out := call("POST", path, `{"answers": {"approved": "perhaps", "reason": "x"}}`); code != 400 || !strings.Contains(out["error"].(string), `"perhaps" is not a yes/no answer`) {
		t.Errorf("bad answer = %d %v, want 400 naming the field", code, out)
	}
	if code, out := call("POST", path, `{"answers": {"approved": true, "reason": "tests pass"}}`); code != 200 || out["resumed"] != true {
		t.Fatalf("answer = %d %v", code, out)
	}
	waitFor("form-rest", engine.StatusFinished)

	if code, out, errOut := c.run("runs", "questions", "form-cli", "--store-dir", "st"); code != exitOK || !strings.Contains(out, `"name": "approved"`) {
		t.Errorf("runs questions: exit %d\n%s%s", code, out, errOut)
	}
	code, stdout, errOut := c.run("runs", "answer", "form-cli", "form-cli_approve", "approved=yes", "reason=ok", "--store-dir", "st")
	if code != exitOK || !strings.Contains(stdout, "run form-cli continues in the store's owner") {
		t.Fatalf("runs answer: exit %d\n%s%s", code, stdout, errOut)
	}
	waitFor("form-cli", engine.StatusFinished)
	if code, out, _ := c.run("runs", "cancel", "form-cli", "--store-dir", "st"); code != exitOK || !strings.Contains(out, "already over") {
		t.Errorf("cancel of a finished run: exit %d %s", code, out)
	}
	if code := stop(); code != exitOK {
		t.Errorf("serve exited %d", code)
	}
}

// startServe runs iterion serve in this process, a command of c, on a
// free loopback port with the store st of c's directory, and returns its
// base URL and the stop that ends it and returns its exit status.
func startServe(t *testing.T, c *testCLI) (base string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := c.exec(ctx, nil, pw, io.Discard, "serve", "--addr", "127.0.0.1:0", "--store-dir", "st")
		pw.Close()
		done <- code
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() || !strings.Contains(sc.Text(), "listening on ") {
		cancel()
		t.Fatalf("serve did not start: %q", sc.Text())
	}
	go io.Copy(io.Discard, pr)
	base = strings.Fields(strings.SplitAfter(sc.Text(), "listening on ")[1])[0]
	return base, func() int { cancel(); return <-done }
}

// waitRunStatus waits until serve's run id is status, on the API's
// long-polled events, as iterion runs wait does. A minute without it
// fails the test: a watchdog, not a wait.
func waitRunStatus(t testing.TB, base, token, id string, status engine.Status) {
	t.Helper()
	want, err := untilState(string(status))
	if err != nil {
		t.Fatal(err)
	}
	c := api.NewClient(base, api.ClientOptions{Token: token})
	var line bytes.Buffer
	if err := waitRun(context.Background(), &line, ownerAPI{&storeAccess{client: c}}, id, want, time.Minute); err != nil {
		t.Fatalf("waiting for run %s to be %s: %v", id, status, err)
	}
}

// apiCall sends a request to serve's API with token ("" for none) and
// returns the status and the decoded JSON body.
func apiCall(t *testing.T, base, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}
