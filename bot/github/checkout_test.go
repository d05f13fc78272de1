package github

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitServer serves a bare repository over git's smart HTTP protocol with
// the real git http-backend, admitting only the installation token.
func gitServer(t *testing.T, token string, files map[string]string) (url, head, older string) {
	root := t.TempDir()
	work := filepath.Join(root, "work")
	git(t, root, "init", "-q", "-b", "main", work)
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, work, "add", ".")
	git(t, work, "commit", "-qm", "one")
	older = git(t, work, "rev-parse", "HEAD")
	files["README.md"] = "two\n"
	for name, text := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, work, "add", ".")
	git(t, work, "commit", "-qm", "two")
	head = git(t, work, "rev-parse", "HEAD")
	return serveBare(t, token, root, work), head, older
}

// serveBare serves a bare clone of the repository work (in root) over
// git's smart HTTP with the real git http-backend, admitting only token.
func serveBare(t *testing.T, token, root, work string) (url string) {
	git(t, root, "clone", "-q", "--bare", work, filepath.Join(root, "app.git"))
	git(t, filepath.Join(root, "app.git"), "config", "uploadpack.allowAnySHA1InWant", "true")

	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(git(t, root, "--exec-path")), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/app.git"
}

// With the PR's base branch, the checkout has it as a local branch and
// enough history for the merge base, however far the PR's commits and
// the base moved apart: `git diff base...HEAD` is the PR's change.
func TestCheckoutFetchesTheBase(t *testing.T) {
	const token = "ghs_secret_token_value"
	root := t.TempDir()
	work := filepath.Join(root, "work")
	git(t, root, "init", "-q", "-b", "main", work)
	commit := func(name, text string) {
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		git(t, work, "add", ".")
		git(t, work, "commit", "-qm", name+" "+text)
	}
	commit("README.md", "start\n")
	git(t, work, "checkout", "-q", "-b", "feature")
	for i := range 120 { // past the first depths tried
		commit("feature.txt", fmt.Sprintf("%d\n", i))
	}
	head := git(t, work, "rev-parse", "HEAD")
	git(t, work, "checkout", "-q", "main")
	for i := range 70 {
		commit("main.txt", fmt.Sprintf("%d\n", i))
	}
	url := serveBare(t, token, root, work)

	dir := filepath.Join(t.TempDir(), "ws")
	if err := Checkout(context.Background(), dir, url, head, "main", token); err != nil {
		t.Fatal(err)
	}
	if got := git(t, dir, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD = %s, want the PR head %s", got, head)
	}
	if got := git(t, dir, "diff", "--name-only", "main...HEAD"); got != "feature.txt" {
		t.Errorf("git diff main...HEAD names %q, want only the PR's feature.txt", got)
	}
	if err := Checkout(context.Background(), filepath.Join(t.TempDir(), "ws"), url, head, "--upload-pack=touch /tmp/x", token); err == nil || !strings.Contains(err.Error(), "not a branch name") {
		t.Errorf("a base that is an option: %v", err)
	}
}

func TestCheckout(t *testing.T) {
	const token = "ghs_secret_token_value"
	url, head, older := gitServer(t, token, map[string]string{})
	ctx := context.Background()

	dir := filepath.Join(t.TempDir(), "ws")
	if err := Checkout(ctx, dir, url, older, "", token); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "README.md")); string(b) != "one\n" {
		t.Errorf("README at the older commit = %q", b)
	}
	if got := git(t, dir, "rev-parse", "HEAD"); got != older {
		t.Errorf("HEAD = %s, want %s", got, older)
	}
	// The token is nowhere in the workspace.
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && (strings.Contains(string(b), token) || strings.Contains(string(b), base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token)))) {
			t.Errorf("%s holds the token", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	dir2 := filepath.Join(t.TempDir(), "ws")
	if err := Checkout(ctx, dir2, url, head, "", token); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir2, "README.md")); string(b) != "two\n" {
		t.Errorf("README at head = %q", b)
	}

	err = Checkout(ctx, filepath.Join(t.TempDir(), "ws"), url, head, "", "wrong-token")
	if err == nil || strings.Contains(err.Error(), "wrong-token") || !strings.Contains(err.Error(), "git fetch") {
		t.Errorf("bad token: %v; want a fetch error without the token", err)
	}
	if err := Checkout(ctx, filepath.Join(t.TempDir(), "ws"), url, "main; rm -rf /", "", token); err == nil || !strings.Contains(err.Error(), "not a full commit id") {
		t.Errorf("ref that is not a commit id: %v", err)
	}
}
