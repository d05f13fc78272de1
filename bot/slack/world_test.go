package slack_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/slack"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakeslack"
	"github.com/iterion-bot/iterion/store"
)

const secret = "signing-secret-for-tests"

// world is a Slack Service over a real store, against the fake Slack,
// served on its HTTP endpoints; the store's own Answer is the engine's
// door for async questions.
type world struct {
	t     *testing.T
	fake  *fakeslack.Server
	db    *store.DB
	svc   *slack.Service
	base  string
	stop  func()
	perms *fakePerms
	// doors, when set before start, is the engine's door instead of the
	// store's Answer.
	doors slack.Answerer
}

// fakePerms is a repository's permissions: the logins that may answer.
type fakePerms struct {
	mu  sync.Mutex
	may map[string]bool
}

func (p *fakePerms) MayAnswer(_ context.Context, _ *engine.Run, login string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.may[login], nil
}

// People of the world: U1 is GitHub ana (allowed, may answer on the
// repository), U2 bo (neither), U3 nobody iterion knows.
func newWorld(t *testing.T, mod func(*slack.ServiceOptions), doors ...slack.Answerer) *world {
	t.Helper()
	w := &world{t: t, fake: fakeslack.New(t), perms: &fakePerms{may: map[string]bool{"ana": true}}}
	if len(doors) > 0 {
		w.doors = doors[0]
	}
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w.db = db
	w.start(mod)
	return w
}

func (w *world) start(mod func(*slack.ServiceOptions)) {
	w.t.Helper()
	opts := slack.ServiceOptions{
		BotToken: fakeslack.BotToken, SigningSecret: secret, APIURL: w.fake.URL(), Channel: "#" + fakeslack.ChannelName,
		Users: map[string]string{"U1": "ana", "U2": "bo"}, Allowed: []string{"ana"}, GitHub: w.perms,
		Pace: -1, StatusEvery: time.Hour, Log: slog.New(slog.NewTextHandler(testLog{w.t}, nil)),
	}
	if mod != nil {
		mod(&opts)
	}
	svc, err := slack.NewService(context.Background(), w.db, opts)
	if err != nil {
		w.t.Fatal(err)
	}
	w.svc = svc
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/slack/events", svc.Events())
	mux.Handle("POST /webhooks/slack/interactive", svc.Interactive())
	mux.Handle("POST /webhooks/slack/commands", svc.Commands())
	srv := httptest.NewServer(mux)
	w.base = srv.URL
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var doors slack.Answerer = w.db
	if w.doors != nil {
		doors = w.doors
	}
	go func() { svc.Run(ctx, doors); close(done) }()
	<-svc.Started()
	stopped := false
	w.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
			srv.Close()
		}
	}
	w.t.Cleanup(w.stop)
}

// testLog writes the Service's log to the test's.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// post sends a signed request to a Slack endpoint and returns the
// status and body.
func (w *world) post(path, contentType string, body []byte, header map[string]string) (int, string) {
	w.t.Helper()
	req := fakeslack.Signed(w.base+path, secret, contentType, body, time.Now())
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// event delivers an Events API body and wants it taken.
func (w *world) event(body []byte, header map[string]string) {
	w.t.Helper()
	if code, resp := w.post("/webhooks/slack/events", "application/json", body, header); code != http.StatusOK {
		w.t.Fatalf("event: %d %s", code, resp)
	}
}

// interact delivers an interaction payload and returns the answer's body.
func (w *world) interact(payload []byte) string {
	w.t.Helper()
	code, resp := w.post("/webhooks/slack/interactive", "application/x-www-form-urlencoded", fakeslack.Form(payload), nil)
	if code != http.StatusOK {
		w.t.Fatalf("interaction: %d %s", code, resp)
	}
	return resp
}

// ask creates a run shown in Slack (not a repository's: slack.allowed
// decides) and posts an async question with options, then wakes the
// relay; it returns the run and the question.
func (w *world) ask(runID, text string, opts ...string) (*engine.Run, *engine.Interaction) {
	w.t.Helper()
	ctx := context.Background()
	run := &engine.Run{ID: runID, Workflow: "review", Status: engine.StatusRunning, Trigger: engine.Trigger{Source: "api", Actor: "ana"},
		Channels: []string{"slack"}, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := w.db.CreateRun(ctx, run, []engine.Event{{Type: engine.EventRunStarted}}); err != nil && !strings.Contains(err.Error(), "exists") {
		w.t.Fatal(err)
	}
	run, err := w.db.Run(ctx, runID)
	if err != nil {
		w.t.Fatal(err)
	}
	return run, w.question(run, text, opts...)
}

// question posts one more async question in run.
func (w *world) question(run *engine.Run, text string, opts ...string) *engine.Interaction {
	w.t.Helper()
	q := map[string]any{engine.QuestionKey: text}
	if len(opts) > 0 {
		var list []any
		for _, o := range opts {
			list = append(list, map[string]any{"id": strings.ToLower(o), "label": o})
		}
		q[engine.OptionsKey] = list
	}
	ix, err := w.db.PostQuestion(context.Background(), engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "review", Questions: q})
	if err != nil {
		w.t.Fatal(err)
	}
	w.svc.OnEvent(engine.Event{Type: engine.EventHumanInputRequested, RunID: run.ID})
	return ix
}

// message waits for the bot's message carrying metadata of kind for
// question (or run) id.
func (w *world) message(kind, key, id string) fakeslack.Message {
	w.t.Helper()
	var got fakeslack.Message
	w.fake.WaitFor(10*time.Second, kind+" message of "+id, func() bool {
		for _, m := range w.fake.Messages("") {
			if m.Metadata != nil && m.Metadata.EventType == kind && m.Metadata.EventPayload[key] == id {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

// interaction returns the question as stored.
func (w *world) interaction(run, id string) *engine.Interaction {
	w.t.Helper()
	ix, err := w.db.Interaction(context.Background(), run, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return ix
}

// ephemeral waits for an ephemeral message to user containing substr.
func (w *world) ephemeral(user, substr string) fakeslack.Ephemeral {
	w.t.Helper()
	var got fakeslack.Ephemeral
	w.fake.WaitFor(10*time.Second, "an ephemeral message to "+user+" saying "+substr, func() bool {
		for _, e := range w.fake.Ephemerals(user) {
			if strings.Contains(e.Text, substr) {
				got = e
				return true
			}
		}
		return false
	})
	return got
}

// blocksText is the text of a message's blocks, for assertions.
func blocksText(m fakeslack.Message) string {
	var blocks any
	_ = json.Unmarshal(m.Blocks, &blocks)
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if s, ok := x["text"].(string); ok {
				b.WriteString(s + "\n")
			}
			for k, vv := range x {
				if k != "text" {
					walk(vv)
				}
			}
			if t, ok := x["text"].(map[string]any); ok {
				walk(t)
			}
		case []any:
			for _, vv := range x {
				walk(vv)
			}
		}
	}
	walk(blocks)
	return b.String()
}

// slackWake is an event that wakes the relay for run.
func slackWake(runID string) engine.Event {
	return engine.Event{Type: engine.EventHumanInputRequested, RunID: runID}
}
