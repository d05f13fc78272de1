package github

import (
	"net/url"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakegithub"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/internal/nodesandbox/nodesandboxtest"
	"github.com/iterion-bot/iterion/store"
)

// testClock is the one time of a test's world. It starts on a fixed date,
// so what a test sees never depends on today's, and only the test moves
// it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// world is a store and a fake GitHub serving acme/app, with PR 7 at head
// abc1234def, on one clock: the store, the fake and what the world's
// methods make (engine, commenter, relay) all read it.
type world struct {
	db    *store.DB
	fake  *fakegithub.Server
	clock *testClock
}

func newWorld(tb testing.TB) *world {
	clock := newTestClock()
	fake := fakegithub.New(tb, "acme", "app")
	fake.Clock = clock.Now
	fake.PRs[7] = &fakegithub.PR{HeadSHA: "abc1234def"}
	return &world{db: openStore(tb, clock), fake: fake, clock: clock}
}

// openStore opens a store in a temporary directory on clock.
func openStore(tb testing.TB, clock *testClock) *store.DB {
	db, err := store.Open(tb.TempDir(), store.Options{SmallMemory: true, Clock: clock.Now})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// engine is an engine on the world's store and clock.
func (w *world) engine(tb testing.TB) *engine.Engine {
	return engine.New(engine.Options{Store: w.db, Clock: w.clock.Now, Poll: time.Hour, Sandbox: nodesandboxtest.New(tb, nodesandbox.Options{})})
}

// commenter is a Commenter over the fake GitHub that records its pacing
// waits instead of sleeping.
func (w *world) commenter() *Commenter {
	c := gh.NewClient(nil).WithAuthToken(fakegithub.Token)
	c.BaseURL, _ = url.Parse(w.fake.URL())
	cm, _ := newCommenter(c, w.clock.Now)
	return cm
}

// relay is a relay over the world's store, posting with cm.
func (w *world) relay(t *testing.T, cm *Commenter) *Relay {
	r := NewRelay(RelayOptions{Store: w.db, Replies: cm, Log: testLog(t)})
	r.now = w.clock.Now
	return r
}
