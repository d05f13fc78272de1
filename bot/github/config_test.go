package github

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	gh "github.com/google/go-github/v62/github"

	"github.com/iterion-bot/iterion/bot/repoconfig"
)

func TestFetchConfig(t *testing.T) {
	files := map[string]string{ // repo → .iterion.yml on main
		"good": "workflows:\n  review: workflows/review.bot\ndefault_workflow: review\n",
		"bad":  "workflows:\n  review: workflows/review.bot\nconcurency: queue\n",
		"huge": strings.Repeat("#", repoconfig.MaxSize+1),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/acme/{repo}/contents/.iterion.yml", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("ref") != "main" {
			t.Errorf("read at ref %q, want main", r.URL.Query().Get("ref"))
		}
		repo := r.PathValue("repo")
		switch repo {
		case "dir":
			_ = json.NewEncoder(w).Encode([]map[string]any{{"type": "file", "name": "a.yml", "path": ".iterion.yml/a.yml"}})
			return
		case "down":
			http.Error(w, "unicorn", http.StatusServiceUnavailable)
			return
		}
		text, ok := files[repo]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"Not Found"}`))
			return
		}
		out := map[string]any{"type": "file", "name": ".iterion.yml", "path": ".iterion.yml", "size": len(text), "encoding": "base64", "content": base64.StdEncoding.EncodeToString([]byte(text))}
		if repo == "huge" { // the API leaves large files' content out
			out["content"], out["encoding"] = "", "none"
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := gh.NewClient(nil)
	c.BaseURL, _ = url.Parse(srv.URL + "/")
	ctx := context.Background()

	cfg, found, err := FetchConfig(ctx, c, "acme", "good", "main")
	if err != nil || !found || cfg.DefaultWorkflow != "review" || cfg.Workflows["review"] != "workflows/review.bot" {
		t.Errorf("good: %+v, found %v, %v", cfg, found, err)
	}
	cfg, found, err = FetchConfig(ctx, c, "acme", "none", "main")
	if err != nil || found || cfg == nil || !cfg.CommentsEnabled() {
		t.Errorf("missing file: %+v, found %v, %v; want the defaults", cfg, found, err)
	}
	_, found, err = FetchConfig(ctx, c, "acme", "bad", "main")
	var perrs repoconfig.Errors
	if !found || !errors.As(err, &perrs) || !strings.Contains(err.Error(), ".iterion.yml:3:1:") {
		t.Errorf("bad file: found %v, err %v; want a positioned mistake on line 3", found, err)
	}
	_, _, err = FetchConfig(ctx, c, "acme", "huge", "main")
	if !errors.As(err, &perrs) || !strings.Contains(err.Error(), "more than the 262144 allowed") {
		t.Errorf("huge file: %v", err)
	}
	_, _, err = FetchConfig(ctx, c, "acme", "dir", "main")
	if err == nil || !strings.Contains(err.Error(), "a directory") {
		t.Errorf("directory: %v", err)
	}
	_, _, err = FetchConfig(ctx, c, "acme", "down", "main")
	var rl *RetryLater
	if !errors.As(err, &rl) {
		t.Errorf("outage: %v, want RetryLater", err)
	}
}
