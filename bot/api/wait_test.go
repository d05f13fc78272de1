package api_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// handlerTransport serves a client's requests with a handler in memory,
// so that a test in a synctest bubble runs client and server on its fake
// clock. A request whose context ends (the client's timeout) fails so.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	return rec.Result(), nil
}

// waitFixture is a store whose run "r-w" has one async question (event 1),
// its engine and its API, served in memory to a client whose requests
// time out after 30s, as the socket client's do.
type waitFixture struct {
	db     *store.DB
	engine *engine.Engine
	server *api.Server
	client *api.Client
}

func newWaitFixture(t *testing.T) *waitFixture {
	t.Helper()
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	now := time.Now()
	if err := db.CreateRun(ctx, &engine.Run{ID: "r-w", Workflow: "w", Status: engine.StatusRunning, CreatedAt: now, UpdatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	run, err := db.Acquire(ctx, "r-w", "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "draft", Questions: map[string]any{engine.QuestionKey: "Which licence?"}}); err != nil {
		t.Fatal(err)
	}
	f := &waitFixture{db: db, engine: engine.New(engine.Options{Store: db})}
	t.Cleanup(f.engine.Close)
	f.server = api.NewServer(f.engine, db, api.Options{})
	hc := &http.Client{Transport: handlerTransport{api.RequireToken(tcpToken, tcpName, f.server.Handler())}, Timeout: 30 * time.Second}
	f.client = api.NewClient("http://owner", api.ClientOptions{HTTP: hc, Token: tcpToken})
	return f
}

// eventsResult is what a long poll returned, and after how long.
type eventsResult struct {
	evs    []engine.Event
	err    error
	waited time.Duration
}

// poll long-polls the run's events after seq after in the background.
func (f *waitFixture) poll(after int64, wait time.Duration) <-chan eventsResult {
	done := make(chan eventsResult, 1)
	began := time.Now()
	go func() {
		evs, err := f.client.Events(context.Background(), "r-w", after, 100, wait)
		done <- eventsResult{evs, err, time.Since(began)}
	}()
	return done
}

// waiting reports whether the poll is still held, once all of the
// bubble is blocked.
func waiting(done <-chan eventsResult) bool {
	synctest.Wait()
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func types(evs []engine.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// An events request with wait answers at once when there are events
// after the caller's; otherwise it is held until the run changes (an
// answer, a Stop), and a run that is over answers at once.
func TestEventsWaitForTheNextChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newWaitFixture(t)
		ctx := t.Context()
		if got := <-f.poll(0, 30*time.Second); got.err != nil || got.waited != 0 || len(got.evs) != 1 {
			t.Fatalf("with an event there: %v after %s, %v; want it at once", types(got.evs), got.waited, got.err)
		}

		held := f.poll(1, 30*time.Second)
		if !waiting(held) {
			t.Fatal("the request answered though nothing was stored after event 1")
		}
		if _, err := f.engine.Answer(ctx, engine.AnswerRequest{RunID: "r-w", InteractionID: "r-w_draft_async_1", Text: "MIT", By: "ana", Via: "api"}); err != nil {
			t.Fatal(err)
		}
		got := <-held
		if got.err != nil || got.waited != 0 || strings.Join(types(got.evs), " ") != engine.EventInteractionAnswered {
			t.Fatalf("after the answer: %v after %s, %v; want interaction_answered at once", types(got.evs), got.waited, got.err)
		}

		held = f.poll(got.evs[0].Seq, 30*time.Second)
		if !waiting(held) {
			t.Fatal("the request answered though nothing was stored after the answer")
		}
		if _, err := f.engine.Stop(ctx, "r-w", "test"); err != nil {
			t.Fatal(err)
		}
		got = <-held
		if got.err != nil || len(got.evs) != 1 || got.evs[0].Type != engine.EventRunCancelled {
			t.Fatalf("after the Stop: %v, %v; want run_cancelled", types(got.evs), got.err)
		}
		// Over: nothing more comes, and the request says so at once.
		if got := <-f.poll(got.evs[0].Seq, 30*time.Second); got.err != nil || len(got.evs) != 0 || got.waited != 0 {
			t.Errorf("a run that is over: %v after %s, %v; want no events at once", types(got.evs), got.waited, got.err)
		}
	})
}

// A wait nothing ends answers an empty list when it passes, cut to
// MaxWait, though longer than the client's usual timeout.
func TestEventsWaitPasses(t *testing.T) {
	for _, tc := range []struct {
		name       string
		wait, want time.Duration
	}{
		{"45s, beyond the client's timeout of 30s", 45 * time.Second, 45 * time.Second},
		{"an hour, cut to MaxWait", time.Hour, api.MaxWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newWaitFixture(t)
				got := <-f.poll(1, tc.wait)
				if got.err != nil || got.evs == nil || len(got.evs) != 0 || got.waited != tc.want {
					t.Errorf("got %v (nil: %t) after %s, %v; want an empty list after %s", types(got.evs), got.evs == nil, got.waited, got.err, tc.want)
				}
			})
		})
	}
}

// A wait the server's Close ends answers 503 shutting_down, at once, and
// so do the waits asked for after it; requests that do not wait are
// served as before.
func TestEventsWaitEndsAtClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newWaitFixture(t)
		held := f.poll(1, 30*time.Second)
		if !waiting(held) {
			t.Fatal("the request answered though nothing was stored")
		}
		f.server.Close()
		for _, got := range []eventsResult{<-held, <-f.poll(1, 30*time.Second)} {
			var apiErr *api.Error
			if !errors.Is(got.err, api.ErrShuttingDown) || !errors.As(got.err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable || got.waited != 0 {
				t.Errorf("wait after Close: %v after %s; want 503 shutting_down at once", got.err, got.waited)
			}
		}
		if evs, err := f.client.Events(t.Context(), "r-w", 0, 100, 0); err != nil || len(evs) != 1 {
			t.Errorf("events without a wait after Close: %v, %v", types(evs), err)
		}
	})
}

// A malformed wait is refused with a 400 naming the parameter.
func TestEventsWaitRefusesMalformed(t *testing.T) {
	f := newFixture(t)
	for _, wait := range []string{"soon", "5", "-1s", "1h%2F2"} {
		req, _ := http.NewRequest("GET", f.base+"/api/runs/"+f.run.ID+"/events?wait="+wait, nil)
		req.Header.Set("Authorization", "Bearer "+tcpToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body.String(), "query parameter wait=") || !strings.Contains(body.String(), "30s") {
			t.Errorf("wait=%s: %d %s; want 400 naming wait and an example", wait, resp.StatusCode, body.String())
		}
	}
}
