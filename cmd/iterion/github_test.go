package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const ghWorkflow = `schema out:
  text: string

tool mark:
  command: "pwd > where.txt; printf '{\"text\": \"ok\"}'"
  output: out

workflow w:
  entry: mark
  mark -> done
`

// TestServeGitHub drives serve as GitHub would: a signed issue_comment
// webhook asks for a run; serve reads .iterion.yml, checks the commenter's
// permission, clones the PR head over git's smart HTTP with the
// installation token, runs the workflow in that checkout and replies on
// the PR. The fake GitHub serves the real API paths.
func TestServeGitHub(t *testing.T) {
	root := t.TempDir()
	gitRun := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	work := filepath.Join(root, "work")
	gitRun(root, "init", "-q", "-b", "main", work)
	for name, text := range map[string]string{"README.md": "hello\n", "workflows/mark.bot": ghWorkflow} {
		_ = os.MkdirAll(filepath.Dir(filepath.Join(work, name)), 0o755)
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitRun(work, "add", ".")
	gitRun(work, "commit", "-qm", "feature")
	head := gitRun(work, "rev-parse", "HEAD")
	gitRun(root, "clone", "-q", "--bare", work, filepath.Join(root, "git", "acme", "app.git"))
	gitRun(filepath.Join(root, "git", "acme", "app.git"), "config", "uploadpack.allowAnySHA1InWant", "true")

	const token = "ghs_e2e_token"
	gitBackend := &cgi.Handler{
		Path: filepath.Join(gitRun(root, "--exec-path"), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + filepath.Join(root, "git"), "GIT_HTTP_EXPORT_ALL=1"},
	}
	replies := make(chan string, 10)
	config := "workflows:\n  mark: workflows/mark.bot\ndefault_workflow: mark\n"
	mux := http.NewServeMux()
	auth := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "token "+token {
				http.Error(w, "installation token required", http.StatusUnauthorized)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("POST /app/installations/42/access_tokens", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"token": token, "expires_at": time.Now().Add(time.Hour).Format(time.RFC3339)})
	})
	mux.HandleFunc("GET /repos/acme/app/contents/.iterion.yml", auth(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "file", "size": len(config), "encoding": "base64", "content": base64.StdEncoding.EncodeToString([]byte(config))})
	}))
	mux.HandleFunc("GET /repos/acme/app/collaborators/ana/permission", auth(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"permission": "write"})
	}))
	mux.HandleFunc("GET /repos/acme/app/pulls/7", auth(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"number": 7, "state": "open", "head": map[string]any{"sha": head, "ref": "feature"}})
	}))
	mux.HandleFunc("GET /repos/acme/app/issues/7/comments", auth(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("[]"))
	}))
	mux.HandleFunc("POST /repos/acme/app/issues/7/comments", auth(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Body string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		replies <- in.Body
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id": 5001}`))
	}))
	reactions := make(chan string, 10)
	mux.HandleFunc("POST /repos/acme/app/issues/comments/1001/reactions", auth(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Content string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		reactions <- in.Content
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id": 1}`))
	}))
	mux.HandleFunc("/git/", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token)) {
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		http.StripPrefix("/git", gitBackend).ServeHTTP(w, r)
	})
	gh := httptest.NewServer(mux)
	defer gh.Close()

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(root, "app.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ITERION_GITHUB_APP_ID", "123")
	t.Setenv("ITERION_GITHUB_WEBHOOK_SECRET", "whsec")
	t.Setenv("ITERION_GITHUB_PRIVATE_KEY", keyFile)
	t.Setenv("ITERION_GITHUB_API_URL", gh.URL+"/")
	t.Setenv("ITERION_GITHUB_URL", gh.URL+"/git")
	t.Setenv("ITERION_API_TOKEN", "tok")

	store := filepath.Join(root, "st")
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--store-dir", store}, pw, io.Discard)
		pw.Close()
		done <- code
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() || !strings.Contains(sc.Text(), "listening on ") {
		t.Fatalf("serve did not start: %q", sc.Text())
	}
	go io.Copy(io.Discard, pr)
	base := strings.Fields(strings.SplitAfter(sc.Text(), "listening on ")[1])[0]

	payload := []byte(`{"action": "created",
	  "issue": {"number": 7, "pull_request": {"url": "x"}},
	  "comment": {"id": 1001, "body": "Looks good.\n/iterion run", "user": {"login": "ana", "type": "User"}},
	  "repository": {"full_name": "acme/app", "name": "app", "owner": {"login": "acme"}, "default_branch": "main"},
	  "installation": {"id": 42}, "sender": {"login": "ana", "type": "User"}}`)
	mac := hmac.New(sha256.New, []byte("whsec"))
	mac.Write(payload)
	req, _ := http.NewRequest("POST", base+"/webhooks/github", bytes.NewReader(payload))
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", "e2e-1")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook = %d", resp.StatusCode)
	}

	select {
	case r := <-reactions:
		if r != "eyes" {
			t.Errorf("reaction %q, want eyes", r)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no reaction to the command")
	}
	var reply string
	select {
	case reply = <-replies:
	case <-time.After(60 * time.Second):
		t.Fatal("no reply on the PR")
	}
	m := regexp.MustCompile("started run `(gh-[0-9a-f]+)` of `mark`").FindStringSubmatch(reply)
	if m == nil {
		t.Fatalf("reply = %q", reply)
	}
	runID := m[1]
	// The run finishes in its own checkout.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for status := ""; status != "finished"; <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not finish (status %q)", runID, status)
		}
		r, _ := http.NewRequest("GET", base+"/api/runs/"+runID, nil)
		r.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		status, _ = out["status"].(string)
		if strings.HasPrefix(status, "failed") || status == "cancelled" {
			t.Fatalf("run %s ended %s: %v", runID, status, out["error"])
		}
	}
	ws := filepath.Join(store, "workspaces", runID)
	if where, err := os.ReadFile(filepath.Join(ws, "where.txt")); err != nil || strings.TrimSpace(string(where)) != ws {
		t.Errorf("the tool ran in %q (%v), want the checkout %s", where, err, ws)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "README.md")); string(b) != "hello\n" {
		t.Errorf("checkout README = %q", b)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("serve exited %d", code)
	}
}
