package github

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeGitHub serves the App endpoints the bot uses, checking the
// credentials of each call.
func fakeGitHub(t *testing.T, tokens *atomic.Int32) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /app/installations/42/access_tokens", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			http.Error(w, "app JWT required", http.StatusUnauthorized)
			return
		}
		tokens.Add(1)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"token": "ghs_test", "expires_at": time.Now().Add(time.Hour).Format(time.RFC3339)})
	})
	mux.HandleFunc("GET /repos/acme/app/collaborators/{user}/permission", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "token ghs_test" {
			http.Error(w, "installation token required", http.StatusUnauthorized)
			return
		}
		perm := map[string]string{"ana": "write", "bo": "read", "root": "admin"}[r.PathValue("user")]
		if perm == "" {
			perm = "none"
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"permission": perm, "user": map[string]any{"login": r.PathValue("user")}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func testKey(t *testing.T) []byte {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}

func TestAppPermissions(t *testing.T) {
	var tokens atomic.Int32
	srv := fakeGitHub(t, &tokens)
	app, err := NewApp(AppOptions{ID: 123, PrivateKey: testKey(t), APIURL: srv.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for user, want := range map[string]bool{"ana": true, "root": true, "bo": false, "eve": false} {
		got, err := app.CanWrite(ctx, 42, "acme", "app", user)
		if err != nil || got != want {
			t.Errorf("CanWrite(%s) = %v, %v; want %v", user, got, err, want)
		}
	}
	if tok, err := app.Token(ctx, 42); err != nil || tok != "ghs_test" {
		t.Errorf("Token = %q, %v; want the installation token", tok, err)
	}
	if tokens.Load() != 1 {
		t.Errorf("%d installation tokens requested, want 1 (cached)", tokens.Load())
	}
}

func TestAppBadKey(t *testing.T) {
	if _, err := NewApp(AppOptions{ID: 1, PrivateKey: []byte("not a key")}); err == nil || !strings.Contains(err.Error(), "ITERION_GITHUB_PRIVATE_KEY") {
		t.Errorf("err = %v, want one naming ITERION_GITHUB_PRIVATE_KEY", err)
	}
}
