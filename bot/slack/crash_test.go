package slack_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/bot/slack"
)

// A crash between posting a message and recording its ts (the relay's
// goroutine ends there, as the process would) leaves the outbox row to
// do again; the next start finds the message by its metadata instead of
// posting it twice: the card among the channel's messages, the question
// in the card's thread.
func TestCrashBetweenPostAndRecord(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash int // the post after which the crash comes: 1 the card, 2 the question
	}{{"card", 1}, {"question", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			posts := 0
			crashed := make(chan struct{})
			crash := func(o *slack.ServiceOptions) {
				o.Failpoint = func(name string) {
					if name != slack.FailPosted {
						return
					}
					mu.Lock()
					posts++
					n := posts
					mu.Unlock()
					if n == tc.crash {
						close(crashed)
						runtime.Goexit()
					}
				}
			}
			w := newWorld(t, crash)
			run, ix := w.ask("r-crash-"+tc.name, "Which licence?", "MIT", "Apache-2.0")
			select {
			case <-crashed:
			case <-time.After(10 * time.Second):
				t.Fatal("the relay never posted")
			}
			w.stop()
			w.start(nil)
			w.svc.OnEvent(slackWake(run.ID))
			q := w.message("iterion_question", "question_id", ix.ID)
			w.fake.WaitFor(10*time.Second, "the question's post recorded", func() bool {
				return w.interaction(run.ID, ix.ID).Posts["slack"] == q.Channel+"/"+q.TS
			})
			if n := len(w.fake.BotMessages("iterion run " + run.ID)); n != 1 {
				t.Errorf("%d cards, want 1", n)
			}
			if n := len(w.fake.BotMessages("Which licence?")); n != 2 { // the card lists it, and its question
				t.Errorf("%d messages with the question, want the card and the question", n)
			}
			// The question still answers by its buttons.
			w.interact(w.fake.Click("U1", q, slack.ActionOption+"0", "0"))
			w.fake.WaitFor(10*time.Second, "the answer", func() bool { return w.interaction(run.ID, ix.ID).Answer() == "MIT" })
		})
	}
}
