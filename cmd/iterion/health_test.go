package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// iterion health asks a real serve, then says what is wrong with a server
// that does not answer, answers an error, or an address that is not one.
func TestHealth(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.dir = t.TempDir()
	base, stop := startServe(t, c)
	addr := strings.TrimPrefix(base, "http://")
	c.setenv("ITERION_ADDR", addr)
	if code, out, errOut := c.run("health"); code != 0 || !strings.Contains(out, base+"/healthz: ok") {
		t.Errorf("health against serve: exit %d, %q, %q", code, out, errOut)
	}
	if code := stop(); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	if code, _, errOut := c.run("health"); code != 1 || !strings.Contains(errOut, "is iterion serve running and listening there?") {
		t.Errorf("health after serve stopped: exit %d, %q", code, errOut)
	}

	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "store unavailable\x1b[2J", http.StatusServiceUnavailable)
	}))
	defer broken.Close()
	code, _, errOut := c.run("health", "--url", broken.URL+"/healthz")
	if code != 1 || !strings.Contains(errOut, "503 Service Unavailable: store unavailable") || strings.Contains(errOut, "\x1b") {
		t.Errorf("health against a failing server: exit %d, %q", code, errOut)
	}
	c.setenv("ITERION_ADDR", "8080")
	if code, _, errOut := c.run("health"); code != 2 || !strings.Contains(errOut, `ITERION_ADDR="8080" is not host:port`) {
		t.Errorf("health with a bad address: exit %d, %q", code, errOut)
	}
}

func TestHealthURL(t *testing.T) {
	for addr, want := range map[string]string{
		"":               "http://127.0.0.1:8080/healthz",
		":9090":          "http://127.0.0.1:9090/healthz",
		"0.0.0.0:80":     "http://127.0.0.1:80/healthz",
		"[::]:80":        "http://127.0.0.1:80/healthz",
		"10.0.0.5:8080":  "http://10.0.0.5:8080/healthz",
		"[fd00::1]:8080": "http://[fd00::1]:8080/healthz",
	} {
		if got, err := healthURL(addr); err != nil || got != want {
			t.Errorf("healthURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
}
