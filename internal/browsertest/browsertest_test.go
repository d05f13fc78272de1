package browsertest_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/iterion-bot/iterion/internal/browsertest"
)

// The scan finds what it is for: a page without lang breaks html-has-lang,
// and the same page with it breaks nothing.
func TestAxeFindsViolations(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lang := ` lang="en"`
		if r.URL.Path == "/bad" {
			lang = ""
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'")
		_, _ = w.Write([]byte(`<!doctype html><html` + lang + `><head><title>t</title></head><body><main><h1>Hello</h1></main></body></html>`))
	}))
	defer srv.Close()
	ctx := browsertest.New(t)
	for path, want := range map[string][]string{"/bad": {"html-has-lang"}, "/good": nil} {
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+path)); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range browsertest.Axe(t, ctx) {
			got = append(got, v.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: violations %v, want %v", path, got, want)
		}
	}
}
