package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServe(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("ITERION_API_TOKEN", "tok")
	t.Setenv("ITERION_API_TOKEN_NAME", "deploy-bot")
	writeAt := func(name, content string) {
		t.Helper()
		if err := writeFileAt(filepath.Join(dir, name), content); err != nil {
			t.Fatal(err)
		}
	}
	writeAt("w.bot", "vars:\n  n: int\ncompute c:\n  expr:\n    x: \"vars.n + 1\"\nworkflow w:\n  entry: c\n  c -> done\n")
	writeAt("m.bot", "schema out:\n  text: string\nagent a:\n  model: \"anthropic/claude-x\"\n  output: out\nworkflow m:\n  entry: a\n  a -> done\n")
	t.Setenv("ANTHROPIC_API_KEY", "")
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--store-dir", "st"}, pw, io.Discard)
		pw.Close()
		done <- code
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() || !strings.Contains(sc.Text(), "listening on ") {
		t.Fatalf("serve did not start: %q", sc.Text())
	}
	go io.Copy(io.Discard, pr)
	base := strings.Fields(strings.SplitAfter(sc.Text(), "listening on ")[1])[0]

	call := func(method, path, token, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
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
	code, out := call("POST", "/api/runs", "tok", `{"file_path": "w.bot", "run_id": "api-1", "vars": {"n": "41"}}`)
	if code != http.StatusCreated || out["run_id"] != "api-1" {
		t.Fatalf("launch = %d %v", code, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for status := ""; status != "finished"; <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("run api-1 did not finish (status %q)", status)
		}
		code, run := call("GET", "/api/runs/api-1", "tok", "")
		if code == http.StatusNotFound {
			continue // launched, its record not written yet
		}
		status, _ = run["status"].(string)
		if trigger, _ := run["trigger"].(map[string]any); trigger["actor"] != "deploy-bot" {
			t.Fatalf("run api-1 was started by %v, want the token's name deploy-bot", trigger["actor"])
		}
	}
	// It worked in a directory of its own, not in the server's, removed
	// once the run is over (just after its end is stored).
	ws := filepath.Join(dir, "st", "workspaces", "api-1")
	if _, run := call("GET", "/api/runs/api-1", "tok", ""); run["work_dir"] != ws {
		t.Errorf("run api-1 worked in %v, want its own directory under the store's workspaces/", run["work_dir"])
	}
	for _, err := os.Stat(ws); err == nil; _, err = os.Stat(ws) {
		if time.Now().After(deadline) {
			t.Fatalf("the workspace of finished run api-1 is still there")
		}
		<-tick.C
	}
	// Other commands reach the server on its socket, with its token.
	if code, out, errOut := runCLI(t, "runs", "list", "--store-dir", "st"); code != exitOK || !strings.Contains(out, "api-1") {
		t.Errorf("runs list through the socket: exit %d\n%s%s", code, out, errOut)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`iterion_runs{status="finished"} 1`, `iterion_runs{status="running"} 0`, "iterion_deliveries_pending 0", "iterion_outbox_rows 0", "go_goroutines"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("serve exited %d", code)
	}
}

func TestServeRefusesAppWithoutSecret(t *testing.T) {
	t.Setenv("ITERION_GITHUB_APP_ID", "123")
	t.Setenv("ITERION_GITHUB_WEBHOOK_SECRET", "")
	code, _, errOut := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--store-dir", filepath.Join(t.TempDir(), "st"))
	if code != exitError || !strings.Contains(errOut, "ITERION_GITHUB_WEBHOOK_SECRET") {
		t.Errorf("exit %d, %s", code, errOut)
	}
	t.Setenv("ITERION_GITHUB_WEBHOOK_SECRET", "s")
	for value, want := range map[string]string{
		"":                                "ITERION_GITHUB_PRIVATE_KEY is not set",
		"/nonexistent/app.pem":            "ITERION_GITHUB_PRIVATE_KEY names a file that cannot be read",
		"-----BEGIN RSA PRIVATE KEY-----": "ITERION_GITHUB_PRIVATE_KEY",
	} {
		t.Setenv("ITERION_GITHUB_PRIVATE_KEY", value)
		code, _, errOut := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--store-dir", filepath.Join(t.TempDir(), "st"))
		if code != exitError || !strings.Contains(errOut, want) {
			t.Errorf("key %q: exit %d, %s; want %q", value, code, errOut, want)
		}
	}
	t.Setenv("ITERION_GITHUB_APP_ID", "my-app")
	if code, _, errOut := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--store-dir", filepath.Join(t.TempDir(), "st")); code != exitError || !strings.Contains(errOut, "numeric id") {
		t.Errorf("non-numeric app id: exit %d, %s", code, errOut)
	}
}

func writeFileAt(path, content string) error {
	return os.WriteFile(path, []byte(content), 0o644)
}
