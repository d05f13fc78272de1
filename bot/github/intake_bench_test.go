package github

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakegithub"
	"github.com/iterion-bot/iterion/store"
)

// BenchmarkIntakeLoad drives the webhook intake over loopback HTTP as
// GitHub would at a burst: 200 connections at once, each delivery signed,
// stored synced on a Badger store on disk (Badger's default memory, as in
// serve) and acknowledged. It reports deliveries per second and the
// 50th and 99th percentiles of the acknowledgement latency.
func BenchmarkIntakeLoad(b *testing.B) {
	db, err := store.Open(b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	intake := NewIntake(IntakeOptions{AppID: 123, WebhookSecret: []byte("s3cret"), Store: db})
	srv := httptest.NewServer(intake)
	defer srv.Close()
	payload, err := os.ReadFile("testdata/issue_comment.json")
	if err != nil {
		b.Fatal(err)
	}
	sig := Sign([]byte("s3cret"), payload)
	const conns = 200
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range conns {
		wg.Go(func() {
			var mine []time.Duration
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					break
				}
				req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(payload))
				req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("load-%d-%d", b.N, n))
				req.Header.Set("X-GitHub-Event", "issue_comment")
				req.Header.Set("X-Hub-Signature-256", sig)
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				resp.Body.Close()
				mine = append(mine, time.Since(t0))
				if resp.StatusCode != http.StatusAccepted {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkRelaySync measures one sync of a PR run's GitHub side: read the
// run, its 3 questions and its event log (200 events, growing by 2 per
// iteration: run it with -benchtime 300x) from Badger, render
// the status and question comments, and edit the status comment on the
// fake GitHub over loopback (each iteration adds a step, so the status
// changes and one edit is made); the check run is unchanged.
func BenchmarkRelaySync(b *testing.B) {
	world := newWorld(b)
	db, fake := world.db, world.fake
	ctx := context.Background()
	run := createPRRun(b, db, "bench-1")
	for i := range 3 {
		if _, err := db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, NodeID: "draft", Questions: map[string]any{engine.QuestionKey: fmt.Sprintf("Question %d?", i)}}); err != nil {
			b.Fatal(err)
		}
	}
	step := func(i int) {
		node := fmt.Sprintf("n%d", i)
		if err := db.Commit(ctx, engine.Change{RunID: run.ID, Events: []engine.Event{{Type: engine.EventNodeStarted, NodeID: node}, {Type: engine.EventNodeFinished, NodeID: node}}}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 100 {
		step(i)
	}
	c := gh.NewClient(nil).WithAuthToken(fakegithub.Token)
	c.BaseURL, _ = url.Parse(fake.URL())
	cm := NewCommenter(CommenterOptions{Client: func(int64) (*gh.Client, error) { return c, nil }, Pace: -1})
	cm.now = world.clock.Now
	relay := NewRelay(RelayOptions{Store: db, Replies: cm})
	relay.now = world.clock.Now
	relay.Drain(ctx) // the status comment, the questions, the check run
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		step(100 + i)
		b.StartTimer()
		if err := relay.sync(ctx, run.ID); err != nil {
			b.Fatal(err)
		}
	}
}
