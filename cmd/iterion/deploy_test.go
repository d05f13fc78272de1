package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The deployment files agree with the program (the Helm chart itself is
// tested in tools/deploy, with the pinned helm).

// deploy/serve.yml, the file the compose setup mounts, is one serve
// takes.
func TestDeployServeConfig(t *testing.T) {
	t.Parallel()
	path, err := filepath.Abs(filepath.Join("..", "..", "deploy", "serve.yml"))
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "serve", "--check", "--config", path)
	if code != 0 || !strings.Contains(out, "serve.yml: ok (listen on :8080, store /data)") {
		t.Errorf("serve --check on deploy/serve.yml: exit %d, %q, %q", code, out, errOut)
	}
}

// Every metric the alert rules use is one serve exports.
func TestAlertRulesUseServedMetrics(t *testing.T) {
	t.Parallel()
	rules, err := os.ReadFile(filepath.Join("..", "..", "deploy", "helm", "iterion", "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := newCLI(t)
	c.dir = t.TempDir()
	base, stop := startServe(t, c)
	defer stop()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	served := map[string]bool{}
	for line := range strings.Lines(string(body)) {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			served[strings.Fields(name)[0]] = true
		}
	}
	used := 0
	for _, m := range regexp.MustCompile(`expr: .*`).FindAllString(string(rules), -1) {
		for _, name := range regexp.MustCompile(`iterion_[a-z_]+`).FindAllString(m, -1) {
			used++
			if !served[name] {
				t.Errorf("the alert rules use %s, which serve's /metrics does not export", name)
			}
		}
	}
	if used < 5 {
		t.Errorf("the alert rules use %d of iterion's metrics: the test read them wrong", used)
	}
}
