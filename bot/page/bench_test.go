package page_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/bot/page"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// The pending page with 10,000 open questions across 1,000 runs (ten
// each, of runs on ten repositories' pull requests, in a store on disk
// with serve's settings): the server's time to render the first page of
// 100 rows, and the bytes sent. cpu-ms/op is the process's CPU time per
// page (garbage collection included), which a busy shared machine does
// not inflate as it does the wall clock's ns/op.
//
//	go test ./bot/page -run '^$' -bench '^BenchmarkPendingPage' -benchtime 50x -count 3
func BenchmarkPendingPage(b *testing.B) {
	db := bigStore(b)
	srv := newBenchPage(b, db)
	for _, bc := range []struct{ name, query string }{
		{"first-page", "/"},
		{"page-50", "/?page=50"},
		{"one-repo", "/?repo=acme/app-3"},
		{"asked-to-me", "/?mine=1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := srv.Handler()
			var bytes int
			cpu := cpuTime()
			for b.Loop() {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("GET", bc.query, nil)
				req.Header.Set("Authorization", "Bearer "+adminToken)
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s = %d", bc.query, rec.Code)
				}
				bytes = rec.Body.Len()
			}
			b.ReportMetric(float64(bytes), "bytes/page")
			if b.N > 0 {
				b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
			}
		})
	}
}

const (
	benchRuns      = 1000
	benchQuestions = 10
)

// bigStore is a store on disk holding benchRuns runs of benchQuestions
// open questions each.
func bigStore(b *testing.B) *store.DB {
	b.Helper()
	db, err := store.Open(b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	ctx := context.Background()
	base := time.Now().Add(-48 * time.Hour)
	for i := range benchRuns {
		details, _ := json.Marshal(map[string]any{"repo": fmt.Sprintf("acme/app-%d", i%10), "pr": i, "installation": 1})
		at := base.Add(time.Duration(i) * time.Minute)
		run := &engine.Run{ID: fmt.Sprintf("r-%04d", i), Workflow: "review", Status: engine.StatusRunning, CreatedAt: at, UpdatedAt: at,
			Trigger: engine.Trigger{Source: "github", Actor: "ana", Details: details}}
		if err := db.CreateRun(ctx, run, nil); err != nil {
			b.Fatal(err)
		}
		if run, err = db.Acquire(ctx, run.ID, "bench"); err != nil {
			b.Fatal(err)
		}
		for q := range benchQuestions {
			_, err := db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: fmt.Sprintf("agent%d", q),
				Questions: map[string]any{engine.QuestionKey: fmt.Sprintf("Question %d of run %d: should the docs be checked too?", q, i),
					engine.OptionsKey: []engine.Option{{ID: "yes", Label: "Yes"}, {ID: "no", Label: "No"}}}})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	return db
}

// repoPlace reads the repository of the benchmark's runs.
func repoPlace(run *engine.Run) api.Place {
	var o struct {
		Repo string `json:"repo"`
		PR   int    `json:"pr"`
	}
	if json.Unmarshal(run.Trigger.Details, &o) != nil {
		return api.Place{Channel: run.Trigger.Source}
	}
	return api.Place{Channel: run.Trigger.Source, Repo: o.Repo, PR: o.PR}
}

func newBenchPage(tb testing.TB, db *store.DB) *page.Server {
	tb.Helper()
	srv, err := page.New(page.Options{Store: db, Doors: engine.New(engine.Options{Store: db}), Place: repoPlace,
		AdminToken: adminToken, SessionKey: []byte(sessionKey)})
	if err != nil {
		tb.Fatal(err)
	}
	return srv
}

// An answer given in one tab, seen in another: from the POST of the
// answer to the row's update read on another page's event stream, through
// the engine's Answer door (synced on disk) and its event hook.
//
//	go test ./bot/page -run '^$' -bench '^BenchmarkAnswerSeenElsewhere$' -benchtime 200x -count 3
func BenchmarkAnswerSeenElsewhere(b *testing.B) {
	db, err := store.Open(b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	ctx := context.Background()
	var pg *page.Server
	e := engine.New(engine.Options{Store: db, OnEvent: func(ev engine.Event) { pg.OnEvent(ev) }})
	pg, err = page.New(page.Options{Store: db, Doors: e, AdminToken: adminToken, SessionKey: []byte(sessionKey)})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(pg.Handler())
	b.Cleanup(srv.Close)
	b.Cleanup(pg.Close)
	seen := openStream(b, srv.URL+"/events?view=questions")
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	i := 0
	for b.Loop() {
		b.StopTimer()
		// A run of its own for each answer: the stream re-reads the
		// questions of the run that changed.
		now := time.Now()
		run := &engine.Run{ID: fmt.Sprintf("r-%d", i), Workflow: "w", Status: engine.StatusRunning, CreatedAt: now, UpdatedAt: now, Trigger: engine.Trigger{Source: "cli"}}
		if err := db.CreateRun(ctx, run, nil); err != nil {
			b.Fatal(err)
		}
		run, err := db.Acquire(ctx, run.ID, "bench")
		if err != nil {
			b.Fatal(err)
		}
		ix, err := db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "ask",
			Questions: map[string]any{engine.QuestionKey: fmt.Sprintf("question %d", i)}})
		if err != nil {
			b.Fatal(err)
		}
		i++
		b.StartTimer()
		form := url.Values{"text": {"yes"}, "next": {"/"}}
		req, _ := http.NewRequest("POST", srv.URL+"/q/"+ix.ID+"/answer", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			b.Fatalf("answer = %d", resp.StatusCode)
		}
		seen(ix.ID)
	}
}

// openStream reads a page's event stream; the function it returns waits
// until the stream has shown question id answered.
func openStream(tb testing.TB, u string) func(id string) {
	tb.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	answered := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var d struct {
				ID   string `json:"id"`
				Open bool   `json:"open"`
				HTML string `json:"html"`
			}
			if json.Unmarshal([]byte(data), &d) == nil && d.ID != "" && !d.Open && strings.Contains(d.HTML, "Answered by") {
				answered <- d.ID
			}
		}
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	return func(id string) {
		timeout := time.After(10 * time.Second)
		for {
			select {
			case got := <-answered:
				if got == id {
					return
				}
			case <-timeout:
				tb.Fatalf("the stream did not show %s answered", id)
			}
		}
	}
}
