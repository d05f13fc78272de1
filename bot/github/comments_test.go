package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	gh "github.com/google/go-github/v62/github"

	"github.com/iterion-bot/iterion/internal/fakegithub"
)

// commentServer is a fake of GitHub's issue-comment endpoints: it keeps
// the comments of acme/app#7, pages them newest first like the real API
// with sort=created&direction=desc, and can be told to refuse writes.
type commentServer struct {
	mu        sync.Mutex
	comments  []*gh.IssueComment
	posts     int
	reactions []string // "<comment id>:<content>"
	refuse    func(w http.ResponseWriter) bool
}

func (s *commentServer) serve(t *testing.T, more ...func(*http.ServeMux)) *gh.Client {
	mux := http.NewServeMux()
	for _, f := range more {
		f(mux)
	}
	mux.HandleFunc("GET /repos/acme/app/issues/7/comments", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.URL.Query().Get("direction") != "desc" {
			t.Errorf("comments listed %s, want newest first", r.URL.RawQuery)
		}
		per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		page = max(page, 1)
		var desc []*gh.IssueComment
		for i := len(s.comments) - 1; i >= 0; i-- {
			desc = append(desc, s.comments[i])
		}
		lo, hi := min((page-1)*per, len(desc)), min(page*per, len(desc))
		if hi < len(desc) {
			next := *r.URL
			q := next.Query()
			q.Set("page", strconv.Itoa(page+1))
			next.RawQuery = q.Encode()
			w.Header().Set("Link", fmt.Sprintf(`<http://%s%s>; rel="next"`, r.Host, next.RequestURI()))
		}
		_ = json.NewEncoder(w).Encode(desc[lo:hi])
	})
	mux.HandleFunc("POST /repos/acme/app/issues/comments/{id}/reactions", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		var in struct{ Content string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.reactions = append(s.reactions, r.PathValue("id")+":"+in.Content)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id": 1, "content": "` + in.Content + `"}`))
	})
	mux.HandleFunc("POST /repos/acme/app/issues/7/comments", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.refuse != nil && s.refuse(w) {
			return
		}
		var in gh.IssueComment
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.posts++
		cm := &gh.IssueComment{ID: gh.Int64(int64(1000 + len(s.comments))), Body: in.Body, User: &gh.User{Login: gh.String("iterion[bot]"), Type: gh.String("Bot")}}
		s.comments = append(s.comments, cm)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(cm)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := gh.NewClient(nil)
	c.BaseURL, _ = url.Parse(srv.URL + "/")
	return c
}

// newCommenter returns a Commenter over c on clock that records its
// pacing waits instead of sleeping.
func newCommenter(c *gh.Client, clock func() time.Time) (*Commenter, *[]time.Duration) {
	var waits []time.Duration
	var mu sync.Mutex
	cm := NewCommenter(CommenterOptions{Client: func(int64) (*gh.Client, error) { return c, nil }, AppID: fakegithub.AppID, Pace: time.Second})
	cm.now = clock
	cm.wait = func(_ context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, d)
		return nil
	}
	return cm, &waits
}

func TestCommenterIdempotent(t *testing.T) {
	srv := &commentServer{}
	for i := range 150 { // older comments fill more than one page
		srv.comments = append(srv.comments, &gh.IssueComment{ID: gh.Int64(int64(i + 1)), Body: gh.String(fmt.Sprintf("comment %d", i))})
	}
	srv.comments[3].Body = gh.String("posted before a crash\n\n" + Marker("outbox-old"))
	srv.comments[3].User = &gh.User{Login: gh.String("iterion[bot]"), Type: gh.String("Bot")}
	// A person who copies a marker cannot stop the bot's comment.
	srv.comments[140].Body = gh.String("quiet please " + Marker("outbox-1"))
	srv.comments[140].User = &gh.User{Login: gh.String("mallory"), Type: gh.String("User")}
	cm, waits := newCommenter(srv.serve(t), newTestClock().Now)
	ctx := context.Background()

	id, err := cm.Post(ctx, 42, "acme", "app", 7, "outbox-1", "**Question** from the agent")
	if err != nil {
		t.Fatal(err)
	}
	again, err := cm.Post(ctx, 42, "acme", "app", 7, "outbox-1", "**Question** from the agent")
	if err != nil || again != id {
		t.Fatalf("second post = %d, %v; want the first comment %d", again, err, id)
	}
	old, err := cm.Post(ctx, 42, "acme", "app", 7, "outbox-old", "posted before a crash")
	if err != nil || old != 4 {
		t.Fatalf("post of a row performed before a crash = %d, %v; want the existing comment 4 (on the second page)", old, err)
	}
	if srv.posts != 1 {
		t.Errorf("%d comments created, want 1", srv.posts)
	}
	if got := srv.comments[len(srv.comments)-1].GetBody(); !strings.HasPrefix(got, "**Question** from the agent") || !strings.HasSuffix(got, Marker("outbox-1")) {
		t.Errorf("posted body %q lacks the text or the marker", got)
	}
	if len(*waits) != 0 {
		t.Errorf("first write waited %v", *waits)
	}

	// A second new comment right away is paced a second after the first.
	if _, err := cm.Post(ctx, 42, "acme", "app", 7, "outbox-2", "next"); err != nil {
		t.Fatal(err)
	}
	if len(*waits) != 1 || (*waits)[0] != time.Second {
		t.Errorf("pacing waits = %v, want [1s]", *waits)
	}
}

func TestCommentBodyLimit(t *testing.T) {
	body := strings.Repeat("é", MaxCommentBytes) // 2 bytes each
	got := CommentBody("k", body)
	if len(got) > MaxCommentBytes || !utf8.ValidString(got) {
		t.Fatalf("cut body: %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
	if !strings.HasSuffix(got, truncatedNote+"\n\n"+Marker("k")) {
		t.Errorf("cut body does not end with the note and marker: …%q", got[len(got)-120:])
	}
	if short := CommentBody("k", "hi"); short != "hi\n\n"+Marker("k") {
		t.Errorf("short body = %q", short)
	}
}

func TestCommenterErrors(t *testing.T) {
	cases := []struct {
		name   string
		refuse func(w http.ResponseWriter) bool
		retry  time.Duration // 0: permanent
		msg    string
	}{
		{"429 with Retry-After", func(w http.ResponseWriter) bool {
			w.Header().Set("Retry-After", "7")
			http.Error(w, `{"message":"slow down"}`, http.StatusTooManyRequests)
			return true
		}, 7 * time.Second, "secondary rate limit (429)"},
		{"primary limit", func(w http.ResponseWriter) bool {
			fakegithub.WritePrimaryLimit(w, http.StatusForbidden, time.Now().Add(40*time.Second))
			return true
		}, 40 * time.Second, "rate limit"},
		{"primary limit, 429", func(w http.ResponseWriter) bool {
			fakegithub.WritePrimaryLimit(w, http.StatusTooManyRequests, time.Now().Add(20*time.Second))
			return true
		}, 20 * time.Second, "rate limit (429)"},
		{"secondary limit without Retry-After or documentation link", func(w http.ResponseWriter) bool {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"message":"You have exceeded a secondary rate limit."}`))
			return true
		}, time.Minute, "secondary rate limit (403)"},
		{"permission refused", func(w http.ResponseWriter) bool {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest"}`))
			return true
		}, 0, "Resource not accessible by integration"},
		{"secondary limit", func(w http.ResponseWriter) bool {
			w.Header().Set("Retry-After", "30")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`))
			return true
		}, 30 * time.Second, "secondary rate limit"},
		{"outage", func(w http.ResponseWriter) bool {
			http.Error(w, "unicorn", http.StatusBadGateway)
			return true
		}, 30 * time.Second, "502"},
		{"outage with Retry-After", func(w http.ResponseWriter) bool {
			w.Header().Set("Retry-After", "3")
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return true
		}, 3 * time.Second, "503"},
		{"refused body", func(w http.ResponseWriter) bool {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"message":"Validation Failed","errors":[{"message":"Body is too long"}]}`))
			return true
		}, 0, "commenting on acme/app#7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := &commentServer{refuse: c.refuse}
			cm, _ := newCommenter(srv.serve(t), newTestClock().Now)
			_, err := cm.Post(context.Background(), 42, "acme", "app", 7, "outbox-1", "hello")
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want one naming %q", err, c.msg)
			}
			var rl *RetryLater
			if got := errors.As(err, &rl); got != (c.retry != 0) {
				t.Fatalf("retryable = %v, want %v (%v)", got, c.retry != 0, err)
			}
			if rl != nil && (rl.After < c.retry-2*time.Second || rl.After > c.retry) {
				t.Errorf("retry after %v, want about %v", rl.After, c.retry)
			}
		})
	}
}

// With the App's login known, another bot's comment ending with the
// bot's marker is not taken for the bot's own.
func TestCommenterOnlyItsOwnComments(t *testing.T) {
	srv := &commentServer{}
	srv.comments = append(srv.comments, &gh.IssueComment{ID: gh.Int64(1), Body: gh.String("echo\n\n" + Marker("outbox-1")),
		User: &gh.User{Login: gh.String("other-app[bot]"), Type: gh.String("Bot")}})
	cm, _ := newCommenter(srv.serve(t), newTestClock().Now)
	cm.login = "iterion[bot]"
	id, err := cm.Post(context.Background(), 42, "acme", "app", 7, "outbox-1", "the real one")
	if err != nil || id == 1 || srv.posts != 1 {
		t.Errorf("Post = %d, %v (%d posts); want a new comment", id, err, srv.posts)
	}
}

// Two posters of one key at once (a redelivered comment and the start-up
// reconciliation acting together) write one comment: the second gets the
// first's.
func TestCommenterConcurrentPostersOfAKey(t *testing.T) {
	srv := &commentServer{}
	cm, _ := newCommenter(srv.serve(t), newTestClock().Now)
	const n = 10
	ids := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var err error
			if ids[i], err = cm.Post(context.Background(), 42, "acme", "app", 7, "comment-1001", "@ana done."); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	srv.mu.Lock()
	created := len(srv.comments)
	srv.mu.Unlock()
	if created != 1 {
		t.Fatalf("%d comments written for one key, want 1", created)
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Errorf("posters got comments %v, want the same one", ids)
			break
		}
	}
}
