package engine_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/engine"
)

// newPEM returns a freshly generated private key as PEM text.
func newPEM(t testing.TB) string {
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

func TestRedactorString(t *testing.T) {
	key := newPEM(t)
	lines := strings.Split(strings.TrimSpace(key), "\n")
	quoted, _ := json.Marshal(map[string]string{"err": `pa"ss\wo<rd>&1`})
	token := "ghs_" + strings.Repeat("aB3", 12)
	tests := []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{"nothing to scrub", []string{"sk-ant-0123456789"}, "all clear", "all clear"},
		{"one secret", []string{"sk-ant-0123456789"}, "key=sk-ant-0123456789 failed", "key=[redacted] failed"},
		{"every occurrence", []string{"hunter2hunter2"}, "hunter2hunter2 and hunter2hunter2", "[redacted] and [redacted]"},
		{"the whole text", []string{"hunter2hunter2"}, "hunter2hunter2", "[redacted]"},
		{"at both ends", []string{"abcdefgh"}, "abcdefgh-abcdefgh", "[redacted]-[redacted]"},
		{"short values are ignored", []string{"abc", "1234567"}, "abc 1234567", "abc 1234567"},
		{"spaces around a value", []string{"  s3cr3t-value\n"}, "got s3cr3t-value", "got [redacted]"},
		{"overlapping secrets", []string{"AAAAbbbbCCCC", "CCCCddddEEEE"}, "x AAAAbbbbCCCCddddEEEE y", "x [redacted] y"},
		{"one inside another", []string{"sk-ant-LONGKEY-0001", "LONGKEY-0001"}, "sk-ant-LONGKEY-0001 / LONGKEY-0001", "[redacted] / [redacted]"},
		{"touching secrets", []string{"AAAAAAAA", "BBBBBBBB"}, "AAAAAAAABBBBBBBB", "[redacted]"},
		{"same first bytes", []string{"prefix00-one", "prefix00-another"}, "prefix00-another prefix00-one prefix00", "[redacted] [redacted] prefix00"},
		{"inside JSON", []string{`pa"ss\wo<rd>&1`}, string(quoted), `{"err":"[redacted]"}`},
		{"PEM whole", []string{key}, "key:\n" + key, "key:\n[redacted]\n"},
		{"PEM lines", []string{key}, "leaked " + lines[1] + " and " + lines[2], "leaked [redacted] and [redacted]"},
		{"PEM armour stays", []string{key}, lines[0], lines[0]},
		{"PEM in JSON", []string{key}, string(must(json.Marshal(key))), `"[redacted]\n"`},
		{"installation token", nil, "token " + token + ".", "token [redacted]."},
		{"personal token", nil, "github_pat_11ABCDEFG0_abcdefghijklmnopqrstuvwxyz", "[redacted]"},
		{"too short for a token", nil, "ghs_abc and ghp_", "ghs_abc and ghp_"},
		{"token next to a secret", []string{"sk-ant-0123456789"}, "sk-ant-0123456789" + token, "[redacted]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := engine.NewRedactor(tc.secrets...).String(tc.in); got != tc.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestRedactorNil(t *testing.T) {
	var r *engine.Redactor
	if got := r.String("ghs_" + strings.Repeat("x", 36)); got != "ghs_"+strings.Repeat("x", 36) {
		t.Errorf("nil Redactor changed text: %q", got)
	}
	if got := r.Map(map[string]any{"a": "b"}); got["a"] != "b" {
		t.Errorf("nil Redactor changed a map: %v", got)
	}
	var zero engine.Redactor
	if got := zero.String("ghs_" + strings.Repeat("x", 36)); got != engine.Redacted {
		t.Errorf("the zero Redactor left a token: %q", got)
	}
}

func TestRedactorValue(t *testing.T) {
	const s = "sk-live-0123456789"
	r := engine.NewRedactor(s)
	in := map[string]any{
		"text":    "key " + s,
		"n":       int64(3),
		"ok":      true,
		"list":    []any{s, 1.5, map[string]any{"deep": []string{s}}},
		"env":     map[string]string{"K": s},
		"rows":    []map[string]any{{"v": s}},
		"options": []engine.Option{{ID: "a", Label: s}},
		"raw":     json.RawMessage(`{"k":"` + s + `"}`),
		"when":    time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		s:         "keys stay",
	}
	want := map[string]any{
		"text":    "key [redacted]",
		"n":       int64(3),
		"ok":      true,
		"list":    []any{"[redacted]", 1.5, map[string]any{"deep": []string{"[redacted]"}}},
		"env":     map[string]string{"K": "[redacted]"},
		"rows":    []map[string]any{{"v": "[redacted]"}},
		"options": []engine.Option{{ID: "a", Label: "[redacted]"}},
		"raw":     json.RawMessage(`{"k":"[redacted]"}`),
		"when":    time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		s:         "keys stay",
	}
	before := fmt.Sprint(in)
	if diff := cmp.Diff(want, r.Map(in)); diff != "" {
		t.Errorf("Map (-want +got):\n%s", diff)
	}
	if after := fmt.Sprint(in); after != before {
		t.Errorf("Map changed its input:\n%s\nwas\n%s", after, before)
	}
}

// Add while others scrub: run with -race.
func TestRedactorConcurrentAdd(t *testing.T) {
	r := engine.NewRedactor()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				secret := fmt.Sprintf("secret-%02d-%03d", i, j)
				r.Add(secret)
				if got := r.String("x " + secret + " y"); got != "x [redacted] y" {
					t.Errorf("just added %q, got %q", secret, got)
					return
				}
			}
		})
	}
	wg.Wait()
	for i := range 8 {
		for j := range 50 {
			if s := fmt.Sprintf("secret-%02d-%03d", i, j); r.String(s) != engine.Redacted {
				t.Fatalf("%s was lost", s)
			}
		}
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

func TestRedactingHandler(t *testing.T) {
	const s = "sk-ant-0123456789"
	r := engine.NewRedactor(s)
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			h := slog.Handler(slog.NewTextHandler(&buf, nil))
			if format == "json" {
				h = slog.NewJSONHandler(&buf, nil)
			}
			log := slog.New(engine.RedactingHandler(h, r)).With("key", s).WithGroup("g")
			log.Error("starting "+s+" failed",
				"err", fmt.Errorf("calling the model: 401 for key %s", s),
				"str", s, "who", stringer(s), "body", []byte(s),
				"vars", map[string]any{"k": s}, "struct", struct{ K string }{s},
				slog.Group("inner", "v", s), "n", 3)
			out := buf.String()
			if strings.Contains(out, s) || strings.Contains(out, "0123456789") {
				t.Errorf("the log holds the secret:\n%s", out)
			}
			if n := strings.Count(out, "[redacted]"); n != 9 {
				t.Errorf("%d [redacted] in the log, want 9:\n%s", n, out)
			}
		})
	}
	if h := slog.NewTextHandler(&bytes.Buffer{}, nil); engine.RedactingHandler(h, nil) != slog.Handler(h) {
		t.Error("RedactingHandler with a nil Redactor wraps the handler")
	}
}

// Through the engine and a real store: an agent that publishes a secret,
// asks a question holding it, and fails with it in its error leaves it in
// no event, outbox row, question, artifact, error or log line; a stop
// reason holding it is scrubbed too.
func TestEngineScrubsSecrets(t *testing.T) {
	const apiKey = "sk-ant-api03-0123456789abcdef"
	key := newPEM(t)
	keyLine := strings.Split(key, "\n")[1]
	token := "ghs_" + strings.Repeat("Zz9", 12)
	secrets := []string{apiKey, key, keyLine, token}
	src := `
vars:
  key: string = ""
  stop: bool = false

schema report:
  text: string

agent leak:
  model: "anthropic/x"
  interaction: async
  output: report
  publish: report

agent boom:
  model: "anthropic/x"

human approve:
  instructions: "Use {{vars.key}}?"

workflow w:
  entry: leak
  leak -> approve when "vars.stop"
  leak -> boom
  approve -> done
  boom -> done
`
	b := &script{async: true, run: func(ctx context.Context, task *engine.Task) (*engine.Result, error) {
		if task.NodeID == "boom" {
			return nil, fmt.Errorf("model refused key %s (token %s):\n%s", apiKey, token, key)
		}
		if _, err := task.PostQuestion(ctx, engine.AsyncQuestion{Question: "Is " + apiKey + " yours?", Options: []engine.Option{{ID: "y", Label: "yes, " + keyLine}}}); err != nil {
			return nil, err
		}
		return &engine.Result{Output: map[string]any{"text": "found " + apiKey + " and " + token + " in the logs"}}, nil
	}}
	db := newStore(t)
	var logs bytes.Buffer
	var mu sync.Mutex
	var live []engine.Event
	e := engine.New(engine.Options{
		Store: db, Backends: map[string]engine.Backend{"claw": b}, Poll: time.Hour,
		Logger:   slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Redactor: engine.NewRedactor(apiKey, key),
		OnEvent:  func(ev engine.Event) { mu.Lock(); live = append(live, ev); mu.Unlock() },
	})
	w := mustCompile(t, src)
	ctx := context.Background()

	failed, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "leaky", WorkDir: t.TempDir(), Channels: []string{"github"}})
	if err != nil {
		t.Fatal(err)
	}
	if failed.Status != engine.StatusFailedResumable || !strings.Contains(failed.Error, "model refused key [redacted] (token [redacted])") {
		t.Errorf("run = %s %q, want failed_resumable with the error scrubbed", failed.Status, failed.Error)
	}
	// A paused run stopped for a reason holding a secret.
	paused, err := e.Start(ctx, engine.StartRequest{Workflow: w, RunID: "paused", Vars: map[string]any{"key": apiKey, "stop": true}, WorkDir: t.TempDir(), Channels: []string{"github"}})
	if err != nil {
		t.Fatal(err)
	}
	if paused.Status != engine.StatusPausedWaitingHuman {
		t.Fatalf("run = %s %q, want paused", paused.Status, paused.Error)
	}
	if ok, err := e.Stop(ctx, "paused", "stopped by ops: "+apiKey+" was rotated"); !ok || err != nil {
		t.Fatalf("Stop = %v, %v", ok, err)
	}

	var stored []string
	add := func(what string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, what+": "+string(b))
	}
	for _, id := range []string{"leaky", "paused"} {
		run, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		add("run error", run.Error)
		evs, _ := db.Events(ctx, id, 0, 0)
		add("events", evs)
		ixs, _ := db.Interactions(ctx, id)
		add("interactions", ixs)
		raw, _ := db.Checkpoint(ctx, id)
		snap, err := engine.ReadSnapshot(raw)
		if err != nil {
			t.Fatal(err)
		}
		add("artifacts", snap.Artifacts)
	}
	rows, _ := db.DueOutbox(ctx, time.Now().Add(time.Hour), 0)
	add("outbox", rows)
	mu.Lock()
	add("live events", live)
	mu.Unlock()
	stored = append(stored, "logs: "+logs.String())
	all := strings.Join(stored, "\n")
	for _, s := range secrets {
		if strings.Contains(all, s) || strings.Contains(all, string(must(json.Marshal(s)))) {
			t.Errorf("secret %.12q… was stored:\n%s", s, all)
		}
	}
	for _, want := range []string{
		`artifacts: {"report":{"text":"found [redacted] and [redacted] in the logs"}}`,
		`"ask_user_response":"Is [redacted] yours?"`,
		`"label":"yes, [redacted]"`,
		`"_instructions":"Use [redacted]?"`,
		`run error: "stopped by ops: [redacted] was rotated"`,
		`msg="run ended" run=leaky status=failed_resumable code=EXECUTION_FAILED error="node boom: backend claw: model refused key [redacted] (token [redacted]):\n[redacted]\n"`,
		`"error":"node boom: backend claw: model refused key [redacted] (token [redacted]):\n[redacted]\n"`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the stored records lack %s:\n%s", want, all)
		}
	}
}

// BenchmarkRedact scrubs a 64 KiB log-like text with ten secrets (and a
// PEM key's 40-odd forms): clean text, the common case, and the same text
// with a secret every 4 KiB.
func BenchmarkRedact(b *testing.B) {
	var secrets []string
	for i := range 10 {
		secrets = append(secrets, fmt.Sprintf("sk-test-%02d-%s", i, strings.Repeat("q7Zx", 8)))
	}
	line := "2026-11-30T12:00:00Z level=INFO msg=\"node finished\" run=gh-4f2a node=review tokens=1234 ghost_text=go\n"
	var clean strings.Builder
	for clean.Len() < 64<<10 {
		clean.WriteString(line)
	}
	text := clean.String()[:64<<10]
	var dirty strings.Builder
	for i := 0; i < len(text); i += 4 << 10 {
		secret := secrets[i/(4<<10)%len(secrets)]
		dirty.WriteString(text[i : i+4<<10-len(secret)])
		dirty.WriteString(secret)
	}
	for _, bc := range []struct {
		name    string
		secrets []string
		text    string
	}{
		{"clean", secrets, text},
		{"clean+pem", append(slices.Clone(secrets), newPEM(b)), text},
		{"16-hits", secrets, dirty.String()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := engine.NewRedactor(bc.secrets...)
			b.SetBytes(int64(len(bc.text)))
			b.ReportAllocs()
			for b.Loop() {
				r.String(bc.text)
			}
		})
	}
}
