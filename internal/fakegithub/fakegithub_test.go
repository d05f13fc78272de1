package fakegithub

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
)

func client(t *testing.T, s *Server) *gh.Client {
	c := gh.NewClient(nil).WithAuthToken(Token)
	c.BaseURL, _ = url.Parse(s.URL())
	return c
}

// The fake keeps GitHub's rules that the bot must live with.
func TestFakeKeepsGitHubsRules(t *testing.T) {
	s := New(t, "acme", "app")
	s.PRs[7] = &PR{HeadSHA: "abc"}
	c := client(t, s)
	ctx := context.Background()

	// A completed check run cannot go back to in_progress;
	// action_required needs a details URL.
	cr, _, err := c.Checks.CreateCheckRun(ctx, "acme", "app", gh.CreateCheckRunOptions{Name: "n", HeadSHA: "abc", Status: gh.String("in_progress")})
	if err != nil {
		t.Fatal(err)
	}
	_, resp, err := c.Checks.UpdateCheckRun(ctx, "acme", "app", cr.GetID(), gh.UpdateCheckRunOptions{Name: "n", Status: gh.String("completed"), Conclusion: gh.String("action_required")})
	if err == nil || resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("action_required without details_url: %v", err)
	}
	if _, _, err := c.Checks.UpdateCheckRun(ctx, "acme", "app", cr.GetID(), gh.UpdateCheckRunOptions{Name: "n", Status: gh.String("completed"), Conclusion: gh.String("success")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Checks.UpdateCheckRun(ctx, "acme", "app", cr.GetID(), gh.UpdateCheckRunOptions{Name: "n", Status: gh.String("in_progress")}); err == nil {
		t.Error("a completed check run went back to in_progress")
	}
	if got := s.CheckRuns()[0].History; len(got) != 2 || got[0] != "in_progress" || got[1] != "completed/success" {
		t.Errorf("history = %v", got)
	}

	// The App edits only its own comments; comments page newest first
	// with direction=desc and filter by since.
	mine, _, err := c.Issues.CreateComment(ctx, "acme", "app", 7, &gh.IssueComment{Body: gh.String("bot")})
	if err != nil {
		t.Fatal(err)
	}
	theirs := s.AddComment(7, "ana", "person")
	if _, _, err := c.Issues.EditComment(ctx, "acme", "app", theirs.ID, &gh.IssueComment{Body: gh.String("x")}); err == nil {
		t.Error("the App edited a person's comment")
	}
	if _, _, err := c.Issues.EditComment(ctx, "acme", "app", mine.GetID(), &gh.IssueComment{Body: gh.String("edited")}); err != nil {
		t.Fatal(err)
	}
	list, _, err := c.Issues.ListComments(ctx, "acme", "app", 7, &gh.IssueListCommentsOptions{Direction: gh.String("desc")})
	if err != nil || len(list) != 2 || list[0].GetID() != theirs.ID || list[1].GetBody() != "edited" {
		t.Errorf("list = %v, %v", list, err)
	}
	future := time.Now().Add(time.Hour)
	if list, _, _ := c.Issues.ListComments(ctx, "acme", "app", 7, &gh.IssueListCommentsOptions{Since: &future}); len(list) != 0 {
		t.Errorf("since an hour from now: %d comments", len(list))
	}
	// Without the installation token nothing is served.
	anon := gh.NewClient(nil)
	anon.BaseURL, _ = url.Parse(s.URL())
	if _, resp, _ := anon.PullRequests.Get(ctx, "acme", "app", 7); resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a request without the token was served")
	}
}

// Comments the fake writes are dated by its Clock, which since filters by.
func TestFakeClock(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := New(t, "acme", "app")
	s.Clock = func() time.Time { return at }
	s.PRs[7] = &PR{HeadSHA: "abc"}
	c := client(t, s)
	ctx := context.Background()
	if _, _, err := c.Issues.CreateComment(ctx, "acme", "app", 7, &gh.IssueComment{Body: gh.String("bot")}); err != nil {
		t.Fatal(err)
	}
	s.AddComment(7, "ana", "person")
	for _, cm := range s.Comments(7) {
		if !cm.CreatedAt.Equal(at) {
			t.Errorf("comment %q written at %s, want the fake's clock %s", cm.Body, cm.CreatedAt, at)
		}
	}
	for _, tc := range []struct {
		since time.Time
		want  int
	}{{at, 2}, {at.Add(time.Second), 0}} {
		list, _, err := c.Issues.ListComments(ctx, "acme", "app", 7, &gh.IssueListCommentsOptions{Since: &tc.since})
		if err != nil || len(list) != tc.want {
			t.Errorf("since %s: %d comments, %v; want %d", tc.since, len(list), err, tc.want)
		}
	}
}
