package slack

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakeslack"
	"github.com/iterion-bot/iterion/store"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Slack's 429 postpones the row by its Retry-After, on the relay's
// clock: nothing is posted before, the row is performed after, once.
func TestRateLimitPostpones(t *testing.T) {
	fake := fakeslack.New(t)
	clk := &clock{t: time.Unix(1_900_000_000, 0)}
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true, Clock: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	run := &engine.Run{ID: "r-429", Workflow: "w", Status: engine.StatusRunning, Trigger: engine.Trigger{Source: "api"}, Channels: []string{"slack"},
		CreatedAt: clk.now(), UpdatedAt: clk.now()}
	if err := db.CreateRun(ctx, run, nil); err != nil {
		t.Fatal(err)
	}
	client := NewClient(ClientOptions{Token: fakeslack.BotToken, APIURL: fake.URL(), Pace: -1})
	r := NewRelay(RelayOptions{Store: db, Client: client, People: NewPeople(PeopleOptions{}), BotID: fakeslack.BotID,
		Channel: fakeslack.Channel, Clock: clk.now})
	fake.Limit("chat.postMessage", 30)
	r.Drain(ctx)
	if n := len(fake.BotMessages("")); n != 0 {
		t.Fatalf("%d messages posted over the limit", n)
	}
	rows, _ := db.DueOutbox(ctx, clk.now().Add(time.Hour), 0)
	if len(rows) != 1 || !rows[0].NextAt.Equal(clk.now().Add(30*time.Second)) {
		t.Fatalf("rows = %+v, want the card's postponed by Retry-After (30 s)", rows)
	}
	clk.add(29 * time.Second)
	r.Drain(ctx)
	if n := fake.CallCount("chat.postMessage"); n != 1 {
		t.Errorf("%d posts tried before Retry-After passed, want only the first", n)
	}
	clk.add(time.Second)
	r.Drain(ctx)
	if got := fake.BotMessages("iterion run r-429"); len(got) != 1 {
		t.Errorf("cards = %+v, want one after the wait", got)
	}
	if rows, _ := db.DueOutbox(ctx, clk.now().Add(time.Hour), 0); len(rows) != 0 {
		t.Errorf("rows left: %+v", rows)
	}
}

// Posts in one channel are spaced by the pace after a short burst, on
// the client's clock; another channel's are not held back.
func TestPacePerChannel(t *testing.T) {
	fake := fakeslack.New(t)
	other := fake.AddChannel("ops")
	clk := &clock{t: time.Unix(1_900_000_000, 0)}
	c := NewClient(ClientOptions{Token: fakeslack.BotToken, APIURL: fake.URL(), Pace: time.Second})
	var waits []string
	c.now = clk.now
	c.wait = func(_ context.Context, d time.Duration) error {
		waits = append(waits, d.String())
		clk.add(d)
		return nil
	}
	ctx := context.Background()
	for _, ch := range []string{fakeslack.Channel, fakeslack.Channel, other, fakeslack.Channel, fakeslack.Channel, other, fakeslack.Channel} {
		if _, _, err := c.Post(ctx, ch, message{text: "hello"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(waits, " "); got != "1s 1s" {
		t.Errorf("waits %q, want one second before each of the channel's posts after its first three", got)
	}
}
