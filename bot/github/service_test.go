package github

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakegithub"
	"github.com/iterion-bot/iterion/store"
)

// storeDoors answer on a real store; the Service's tests need no other
// door.
type storeDoors struct{ db *store.DB }

func (d storeDoors) Answer(ctx context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error) {
	return d.db.Answer(ctx, req)
}
func (storeDoors) Launch(context.Context, engine.StartRequest) (*engine.Run, error) {
	return nil, errors.New("not in this test")
}
func (storeDoors) Stop(context.Context, string, string) (bool, error) {
	return false, errors.New("not in this test")
}
func (storeDoors) Preflight(*dsl.Workflow) error { return nil }

// synctestEpoch is where a synctest bubble's time starts.
var synctestEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// newTestService is the App's Service over db, talking to fake.
func newTestService(t *testing.T, db *store.DB, fake *fakegithub.Server, opts ServiceOptions) *Service {
	t.Helper()
	opts.AppID, opts.PrivateKey, opts.WebhookSecret = 123, testKey(t), []byte("whsec")
	opts.APIURL, opts.GitURL, opts.Log = fake.URL(), fake.GitURL(), testLog(t)
	// No connection waits idle for the next request: in a synctest bubble,
	// its reader would keep the bubble's time from moving.
	opts.Transport = &http.Transport{DisableKeepAlives: true}
	s, err := NewService(context.Background(), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.replies.login != fakegithub.BotLogin {
		t.Errorf("the Service comments as %q, want the App's login %q", s.replies.login, fakegithub.BotLogin)
	}
	return s
}

// runService runs s until the test's end, when it waits for it to stop.
func runService(t *testing.T, s *Service, doors Doors) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx, doors); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// The checkouts of the App's runs that stopped resumably are swept at
// start and then every SweepEvery, once unchanged for KeepWorkspaces;
// running, paused and recent ones stay, and so do the server's other runs
// (the API's), which are not the App's to collect. In a synctest bubble the
// time passes at once, on the clock the store reads too; the sweeps come
// every minute rather than every hour, so that the store's own timers fire
// less often while it passes.
func TestServiceSweepsOldCheckouts(t *testing.T) {
	fake := fakegithub.New(t, "acme", "app")
	synctest.Test(t, func(t *testing.T) {
		db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() }) // after the Service stops
		ws := t.TempDir()
		var removed []string
		const every = time.Minute
		s := newTestService(t, db, fake, ServiceOptions{Workspaces: ws, KeepWorkspaces: 2 * every,
			RemoveWorkspace: func(id string) error {
				removed = append(removed, id)
				return os.RemoveAll(filepath.Join(ws, id))
			}})
		s.sweepEvery = every
		ctx := context.Background()
		add := func(id, source string, status engine.Status) {
			t.Helper()
			now := time.Now()
			trigger := Origin{Repo: "acme/app", PR: 7, Installation: 42}.Trigger("")
			if source != "github" {
				trigger = engine.Trigger{Source: source}
			}
			run := &engine.Run{ID: id, Status: status, Trigger: trigger, CreatedAt: now, UpdatedAt: now}
			if err := db.CreateRun(ctx, run, nil); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(ws, id, "src"), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		add("cancelled", "github", engine.StatusCancelled)
		add("failed-resumable", "github", engine.StatusFailedResumable)
		add("paused", "github", engine.StatusPausedWaitingHuman)
		add("api-cancelled", "api", engine.StatusCancelled)
		time.Sleep(3 * every) // before the server starts: swept at start
		add("recent", "github", engine.StatusCancelled)

		runService(t, s, storeDoors{db})
		synctest.Wait()
		kept := func(want map[string]bool) {
			t.Helper()
			for id, wantKept := range want {
				_, err := os.Stat(filepath.Join(ws, id))
				if got := err == nil; got != wantKept {
					t.Errorf("%s: kept = %v, want %v", id, got, wantKept)
				}
			}
		}
		kept(map[string]bool{"cancelled": false, "failed-resumable": false, "paused": true, "api-cancelled": true, "recent": true})
		time.Sleep(every) // recent is one sweep old: kept
		kept(map[string]bool{"recent": true})
		time.Sleep(every) // two: gone at this sweep
		synctest.Wait()
		kept(map[string]bool{"recent": false, "paused": true, "api-cancelled": true})
		slices.Sort(removed)
		if got := strings.Join(removed, " "); got != "cancelled failed-resumable recent" {
			t.Errorf("removed %q, want each old checkout once, through RemoveWorkspace", got)
		}
	})
}

// At start the Service applies the answers written on pull requests while
// the server was down, trying again when GitHub asks for patience, after
// the wait GitHub names, at most reconcileAttempts times. In a synctest
// bubble GitHub's waits pass at once.
func TestServiceReconcilesAtStart(t *testing.T) {
	for _, tc := range []struct {
		name         string
		refusals     int // 429s before GitHub lists the comments
		wantAttempts int32
		wantAnswered bool
	}{
		{"GitHub at once", 0, 1, true},
		{"GitHub after two rate limits", 2, 3, true},
		{"GitHub rate limiting every attempt", 100, reconcileAttempts, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakegithub.New(t, "acme", "app")
			fake.Files[".iterion.yml"] = "workflows:\n  review: r.bot\n"
			fake.Perms["ana"] = "write"
			fake.PRs[7] = &fakegithub.PR{HeadSHA: "abc1234def"}
			var attempts atomic.Int32
			fake.SetFail(func(w http.ResponseWriter, r *http.Request) bool {
				// The reconciliation's listing, oldest first (the relay lists
				// the comments too, newest first, looking for its own).
				if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/issues/7/comments") || r.URL.Query().Get("direction") != "asc" {
					return false
				}
				if n := attempts.Add(1); int(n) <= tc.refusals {
					w.Header().Set("Retry-After", "7")
					http.Error(w, `{"message": "slow down"}`, http.StatusTooManyRequests)
					return true
				}
				return false
			})
			// Written while the server was down, when the question was asked:
			// at the start of the bubble's time. (The fake is changed only
			// from outside the bubble, where it serves.)
			fake.AddCommentAt(7, "ana", "/iterion answer Q1 MIT", synctestEpoch)
			synctest.Test(t, func(t *testing.T) {
				if !time.Now().Equal(synctestEpoch) {
					t.Fatalf("the bubble starts at %s, want %s", time.Now(), synctestEpoch)
				}
				db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() }) // after the Service stops
				ctx := context.Background()
				run := &engine.Run{ID: "r7", Workflow: "review", Status: engine.StatusRunning, Channels: []string{"github"},
					Trigger: Origin{Repo: "acme/app", PR: 7, Installation: 42}.Trigger("")}
				if err := db.CreateRun(ctx, run, nil); err != nil {
					t.Fatal(err)
				}
				ix, err := db.PostQuestion(ctx, engine.PostRequest{RunID: "r7", NodeID: "draft", Questions: map[string]any{engine.QuestionKey: "Which licence?"}})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := db.ShortID(ctx, PRScope("acme/app", 7), "r7", ix.ID); err != nil {
					t.Fatal(err)
				}
				runService(t, newTestService(t, db, fake, ServiceOptions{Workspaces: t.TempDir()}), storeDoors{db})
				// reconcileAttempts-1 waits of 7 s, and the applying, pass.
				time.Sleep(time.Minute)
				if got := attempts.Load(); got != tc.wantAttempts {
					t.Errorf("GitHub was asked for the comments %d times, want %d", got, tc.wantAttempts)
				}
				got, err := db.Interaction(ctx, "r7", ix.ID)
				if err != nil {
					t.Fatal(err)
				}
				if answered := !got.Pending(); answered != tc.wantAnswered || (answered && (got.Answer() != "MIT" || got.AnsweredBy != "ana")) {
					t.Errorf("Q1 = %+v, want answered %v (MIT by ana)", got, tc.wantAnswered)
				}
			})
		})
	}
}
