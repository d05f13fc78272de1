package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakegithub"
	"github.com/iterion-bot/iterion/store"
)

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// setEnv sets name=value in env, replacing an earlier setting.
func setEnv(env *[]string, name, value string) {
	for i, kv := range *env {
		if strings.HasPrefix(kv, name+"=") {
			(*env)[i] = name + "=" + value
			return
		}
	}
	*env = append(*env, name+"="+value)
}

// leaks lists what of secrets text holds: a secret, its JSON form, or a
// line of one, or a 16-byte piece of such a line (a cut secret).
func leaks(text string, secrets []string) []string {
	var found []string
	for _, s := range secrets {
		quoted, _ := json.Marshal(s)
		forms := []string{s, string(quoted[1 : len(quoted)-1])}
		for line := range strings.Lines(s) {
			line = strings.TrimSpace(line)
			if len(line) >= 16 && !strings.HasPrefix(line, "-----") {
				forms = append(forms, line, line[:16], line[len(line)-16:], line[len(line)/2-8:len(line)/2+8])
			}
		}
		for _, f := range forms {
			if strings.Contains(text, f) {
				found = append(found, fmt.Sprintf("%.24q…", f))
			}
		}
	}
	return found
}

// The security test: a tool prints every secret of the server
// (the model key, the API token, the webhook secret, the App's private
// key, the live installation token, a secret named in the config's
// secrets:) on stdout and stderr and fails; another prints them into a
// published artifact. Nothing of them reaches the PR (status comments,
// check runs), the REST API's answers, the log or the store (run errors,
// events, questions, artifacts, outbox rows): [redacted] does.
func TestServeScrubsSecrets(t *testing.T) {
	t.Parallel()
	model := "sk-ant-api03-" + randomHex(t, 24)
	token := "iterion-api-" + randomHex(t, 16)
	webhook := "whsec-" + randomHex(t, 16)
	deploy := "acme-deploy-" + randomHex(t, 16)

	h := newGHHarness(t, nil)
	h.secret, h.token = webhook, token
	cfgFile := filepath.Join(t.TempDir(), "serve.yml")
	if err := os.WriteFile(cfgFile, []byte("secrets: [ACME_DEPLOY_TOKEN, ACME_UNSET]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{
		"ANTHROPIC_API_KEY": model, "ITERION_API_TOKEN": token, "ITERION_GITHUB_WEBHOOK_SECRET": webhook,
		"ACME_DEPLOY_TOKEN": deploy, "ACME_UNSET": "", "ITERION_CONFIG": cfgFile,
	} {
		setEnv(&h.env, name, v)
	}
	secrets := []string{model, token, webhook, deploy, h.keyPEM, fakegithub.Token}
	// The key twice first, so the 2,000 bytes of stderr a failure keeps
	// begin inside it.
	printed := h.keyPEM + h.keyPEM + strings.Join(secrets, "\n") + "\n"
	b64 := base64.StdEncoding.EncodeToString([]byte(printed))
	artifact, _ := json.Marshal(map[string]string{"text": "found:\n" + printed})
	h.fake.Files[".iterion.yml"] = "workflows:\n  leak: workflows/leak.bot\n  publish: workflows/publish.bot\ndefault_workflow: leak\n"
	h.fake.Files["workflows/leak.bot"] = "tool leak:\n  command: \"echo " + b64 + " | base64 -d; echo " + b64 + " | base64 -d >&2; exit 1\"\n" +
		"workflow leak:\n  entry: leak\n  leak -> done\n"
	h.fake.Files["workflows/publish.bot"] = "schema out:\n  text: string\ntool dump:\n  command: \"echo " + base64.StdEncoding.EncodeToString(artifact) + " | base64 -d\"\n" +
		"  output: out\n  publish: dump\nworkflow publish:\n  entry: dump\n  dump -> done\n"
	stop := h.start()

	status := func(runID string) string { return "<!-- iterion:status-" + runID + " -->" }
	runIDs := func(n int) []string {
		t.Helper()
		h.fake.WaitFor(60*time.Second, fmt.Sprintf("%d started runs", n), func() bool { return len(h.fake.BotComments(7, "started run `")) == n })
		var ids []string
		for _, c := range h.fake.BotComments(7, "started run `") {
			ids = append(ids, regexp.MustCompile("started run `(gh-[0-9a-f]+)`").FindStringSubmatch(c.Body)[1])
		}
		return ids
	}
	h.comment("ana", "/iterion run leak")
	failed := runIDs(1)[0]
	h.fake.WaitFor(60*time.Second, "the failure on the status comment", func() bool {
		cs := h.fake.BotComments(7, status(failed))
		return len(cs) == 1 && strings.Contains(cs[0].Body, "Failure `EXECUTION_FAILED`")
	})
	h.comment("ana", "/iterion run publish")
	published := runIDs(2)[1]
	h.fake.WaitFor(60*time.Second, "the artifact on the status comment", func() bool {
		cs := h.fake.BotComments(7, status(published))
		return len(cs) == 1 && strings.Contains(cs[0].Body, "**Published artifacts:**")
	})
	h.fake.WaitFor(30*time.Second, "both check runs completed", func() bool {
		cr := h.fake.CheckRuns()
		return len(cr) == 2 && cr[0].Status == "completed" && cr[1].Status == "completed"
	})

	// What GitHub received, and what the REST API answers.
	seen := map[string]string{}
	for _, c := range h.fake.BotComments(7, "") {
		seen[fmt.Sprintf("comment %d", c.ID)] = c.Body
	}
	for _, cr := range h.fake.CheckRuns() {
		seen["check run "+cr.ExternalID] = cr.Title + "\n" + cr.Summary
	}
	for _, path := range []string{"/api/runs", "/api/runs/" + failed, "/api/runs/" + failed + "/events", "/api/runs/" + published, "/api/runs/" + published + "/events", "/api/runs/" + published + "/interactions/pending"} {
		seen["GET "+path] = h.get(path)
	}
	wantRedacted := map[string]string{
		"status comment of the failed run":   h.botComment(status(failed)).Body,
		"status comment of the artifact":     h.botComment(status(published)).Body,
		"the failed run over the API":        seen["GET /api/runs/"+failed],
		"the events of the artifact run":     seen["GET /api/runs/"+published+"/events"],
		"check run of the failed run":        seen["check run "+failed+"/1"],
		"check run of the artifact":          seen["check run "+published+"/1"],
		"the log (the run's end, its error)": "",
	}
	stop()
	seen["log"] = h.logs.String()
	wantRedacted["the log (the run's end, its error)"] = seen["log"]
	if !strings.Contains(seen["log"], "ACME_UNSET") {
		t.Errorf("the log does not warn of the unset secret ACME_UNSET:\n%s", seen["log"])
	}

	// What the store keeps.
	db, err := store.Open(h.store, store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for _, id := range []string{failed, published} {
		run, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		seen["stored error of "+id] = run.Error
		evs, _ := db.Events(ctx, id, 0, 0)
		ixs, _ := db.Interactions(ctx, id)
		raw, _ := db.Checkpoint(ctx, id)
		snap, err := engine.ReadSnapshot(raw)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal([]any{evs, ixs, snap.Artifacts})
		seen["stored records of "+id] = string(b)
	}
	rows, _ := db.DueOutbox(ctx, time.Now().Add(24*time.Hour), 0)
	b, _ := json.Marshal(rows)
	seen["outbox"] = string(b)
	wantRedacted["the stored error"] = seen["stored error of "+failed]
	wantRedacted["the stored artifact"] = seen["stored records of "+published]

	for what, text := range seen {
		if l := leaks(text, secrets); len(l) > 0 {
			t.Errorf("%s holds %s:\n%s", what, strings.Join(l, ", "), text)
		}
	}
	for what, text := range wantRedacted {
		if !strings.Contains(text, engine.Redacted) {
			t.Errorf("%s shows no %s:\n%s", what, engine.Redacted, text)
		}
	}
	if run := seen["stored error of "+failed]; !strings.HasPrefix(run, "node leak: command exited with status 1: ") {
		t.Errorf("stored error = %q, want the tool's failure", run)
	}
}

// get reads path of serve's REST API with the token.
func (h *ghHarness) get(path string) string {
	h.t.Helper()
	req, _ := http.NewRequest("GET", h.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		h.t.Errorf("GET %s = %d: %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// The Redactor a command builds from its environment and serve's config:
// the model keys, the providers' keys, the API token, the webhook secret,
// the App's key (PEM text, or the file a path names) and the variables
// named under secrets:.
func TestServeRedactor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := newPEMKey(t)
	keyFile := filepath.Join(dir, "app.pem")
	if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	otherKey := newPEMKey(t)
	otherFile := filepath.Join(dir, "other.pem")
	if err := os.WriteFile(otherFile, []byte(otherKey), 0o600); err != nil {
		t.Fatal(err)
	}
	providers := filepath.Join(dir, "providers.json")
	if err := os.WriteFile(providers, []byte(`{"providers": {"groq": {"base_url": "http://x", "api_key_env": "GROQ_KEY"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"ANTHROPIC_API_KEY": "sk-ant-0000000001", "ANTHROPIC_AUTH_TOKEN": "sk-ant-oat-0000002", "OPENAI_API_KEY": "sk-openai-0000003",
		"GROQ_KEY": "gsk-0000000004", "ITERION_PROVIDERS": providers,
		"ITERION_API_TOKEN": "api-token-0000005", "ITERION_GITHUB_WEBHOOK_SECRET": "webhook-0000006",
		"ITERION_GITHUB_PRIVATE_KEY": keyFile, "SLACK_BOT_TOKEN": "xoxb-0000000007", "SHORT": "abc",
	}
	c := newCLI(t)
	for k, v := range env {
		c.setenv(k, v)
	}
	a := c.app(nil, nil, nil)
	var logs strings.Builder
	cfg := defaultServeConfig()
	cfg.Secrets = []string{"SLACK_BOT_TOKEN", "SHORT"}
	cfg.GitHub.PrivateKeyFile = otherFile
	r := a.serveRedactor(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	for _, name := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "GROQ_KEY", "ITERION_API_TOKEN", "ITERION_GITHUB_WEBHOOK_SECRET", "SLACK_BOT_TOKEN"} {
		if got := r.String("x " + env[name] + " y"); got != "x [redacted] y" {
			t.Errorf("%s: %q, want it scrubbed", name, got)
		}
	}
	for _, k := range []string{key, otherKey} {
		if got := r.String(k); strings.Contains(got, strings.Split(k, "\n")[1]) {
			t.Errorf("a key's line is left: %q", got)
		}
	}
	if got := r.String(keyFile); got != keyFile {
		t.Errorf("the key's path was scrubbed: %q", got)
	}
	if !strings.Contains(logs.String(), "name=SHORT") {
		t.Errorf("no warning about the short secret SHORT: %q", logs.String())
	}
	// Commands other than serve know the environment's secrets alone.
	if got := a.envRedactor().String(env["SLACK_BOT_TOKEN"] + " " + env["OPENAI_API_KEY"]); got != env["SLACK_BOT_TOKEN"]+" [redacted]" {
		t.Errorf("envRedactor: %q", got)
	}
}

func TestServeConfigSecrets(t *testing.T) {
	t.Parallel()
	cfg := defaultServeConfig()
	if err := parseServeConfig("serve.yml", []byte("secrets:\n  - SLACK_BOT_TOKEN\n  - DB_PASSWORD\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Secrets, ","); got != "SLACK_BOT_TOKEN,DB_PASSWORD" {
		t.Errorf("Secrets = %q", got)
	}
}

// newPEMKey returns a freshly generated private key as PEM text.
func newPEMKey(t testing.TB) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}
