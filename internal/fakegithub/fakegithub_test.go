package fakegithub

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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

	// The App edits only its own comments; comments come oldest first
	// whatever the direction asked (the endpoint has none) and filter by
	// since.
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
	if err != nil || len(list) != 2 || list[0].GetBody() != "edited" || list[1].GetID() != theirs.ID {
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

// The fake answers as GitHub documents: errors with a message and the
// documentation's address, rate-limit headers on every answer, the token
// endpoint's failures, edits that move updated_at, check runs of other
// Apps, the latest filter and paging, required output fields, a deleted
// fork, and unknown users.
func TestFakeAnswersAsDocumented(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := at
	s := New(t, "acme", "app")
	s.Clock = func() time.Time { return now }
	s.PRs[7] = &PR{HeadSHA: "abc", HeadRepoDeleted: true}
	s.Perms["ana"] = "write"
	c := client(t, s)
	ctx := context.Background()

	_, resp, err := c.PullRequests.Get(ctx, "acme", "app", 99)
	var er *gh.ErrorResponse
	if !errors.As(err, &er) || er.Message != "Not Found" || !strings.HasPrefix(er.DocumentationURL, "https://docs.github.com/") {
		t.Errorf("a missing PR: %v, want a message and a documentation_url", err)
	}
	for _, h := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Used", "X-Ratelimit-Reset", "X-Ratelimit-Resource"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("an answer without %s", h)
		}
	}
	if resp.Rate.Limit != 5000 || resp.Rate.Remaining >= 5000 {
		t.Errorf("rate = %+v", resp.Rate)
	}
	if pr, _, err := c.PullRequests.Get(ctx, "acme", "app", 7); err != nil || pr.GetHead().Repo != nil {
		t.Errorf("a PR of a deleted fork: head.repo = %v, %v; want null", pr.GetHead().Repo, err)
	}
	if _, resp, err := c.Repositories.GetPermissionLevel(ctx, "acme", "app", "nobody"); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown user's permission: %v, want 404", err)
	}

	// Tokens: each failure as GitHub answers it.
	for st, want := range map[Installation]int{Installed: 201, Suspended: 403, Uninstalled: 404, KeyRejected: 401} {
		s.SetInstallation(st)
		resp, err := http.Post(s.URL()+"app/installations/42/access_tokens", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("token with installation state %d: %d, want %d", st, resp.StatusCode, want)
		}
	}
	s.SetInstallation(Uninstalled)
	if _, resp, _ := c.PullRequests.Get(ctx, "acme", "app", 7); resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Error("a token of an uninstalled App still works")
	}
	s.SetInstallation(Installed)

	// An edit moves updated_at.
	cm, _, err := c.Issues.CreateComment(ctx, "acme", "app", 7, &gh.IssueComment{Body: gh.String("bot")})
	if err != nil {
		t.Fatal(err)
	}
	now = at.Add(time.Minute)
	edited, _, err := c.Issues.EditComment(ctx, "acme", "app", cm.GetID(), &gh.IssueComment{Body: gh.String("again")})
	if err != nil || !edited.GetUpdatedAt().Time.Equal(now) || !edited.GetCreatedAt().Time.Equal(at) {
		t.Errorf("edited comment: created %v updated %v, %v; want %v and %v", edited.GetCreatedAt(), edited.GetUpdatedAt(), err, at, now)
	}
	s.DeleteComment(cm.GetID())
	if _, resp, _ := c.Issues.EditComment(ctx, "acme", "app", cm.GetID(), &gh.IssueComment{Body: gh.String("x")}); resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Error("editing a deleted comment did not answer 404")
	}

	// Check runs: another App's are listed but not ours to update;
	// output needs a title on create and a summary on update.
	foreign := s.AddCheckRun(77, "abc", "iterion", "run-1", "in_progress", "")
	if _, _, err := c.Checks.UpdateCheckRun(ctx, "acme", "app", foreign, gh.UpdateCheckRunOptions{Name: "iterion", Status: gh.String("completed"), Conclusion: gh.String("success")}); err == nil {
		t.Error("updated another App's check run")
	}
	if _, _, err := c.Checks.CreateCheckRun(ctx, "acme", "app", gh.CreateCheckRunOptions{Name: "iterion", HeadSHA: "abc", Output: &gh.CheckRunOutput{Summary: gh.String("s")}}); err == nil {
		t.Error("created a check run whose output has no title")
	}
	first, _, err := c.Checks.CreateCheckRun(ctx, "acme", "app", gh.CreateCheckRunOptions{Name: "iterion", HeadSHA: "abc", ExternalID: gh.String("run-1"), Status: gh.String("in_progress")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Checks.UpdateCheckRun(ctx, "acme", "app", first.GetID(), gh.UpdateCheckRunOptions{Name: "iterion", Output: &gh.CheckRunOutput{Title: gh.String("t")}}); err == nil {
		t.Error("updated a check run's output without a summary")
	}
	second, _, err := c.Checks.CreateCheckRun(ctx, "acme", "app", gh.CreateCheckRunOptions{Name: "iterion", HeadSHA: "abc", ExternalID: gh.String("run-1"), Status: gh.String("in_progress")})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(opts *gh.ListCheckRunsOptions) []int64 {
		t.Helper()
		res, _, err := c.Checks.ListCheckRunsForRef(ctx, "acme", "app", "abc", opts)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, cr := range res.CheckRuns {
			out = append(out, cr.GetID())
		}
		return out
	}
	if got := ids(&gh.ListCheckRunsOptions{}); !slices.Equal(got, []int64{second.GetID(), foreign}) {
		t.Errorf("latest check runs = %v, want the newest of each App: %d, %d", got, second.GetID(), foreign)
	}
	if got := ids(&gh.ListCheckRunsOptions{Filter: gh.String("all"), AppID: gh.Int64(AppID)}); !slices.Equal(got, []int64{second.GetID(), first.GetID()}) {
		t.Errorf("all of this App's check runs = %v", got)
	}
	res, resp, err := c.Checks.ListCheckRunsForRef(ctx, "acme", "app", "abc", &gh.ListCheckRunsOptions{Filter: gh.String("all"), ListOptions: gh.ListOptions{PerPage: 2}})
	if err != nil || len(res.CheckRuns) != 2 || res.GetTotal() != 3 || resp.NextPage != 2 {
		t.Errorf("a first page of 2: %d runs of %d, next page %d, %v", len(res.CheckRuns), res.GetTotal(), resp.NextPage, err)
	}
}

// Issues, branches, pull requests, installations and pushes behave as on
// GitHub, with GitHub's errors.
func TestFakeIssuesPullsAndPushes(t *testing.T) {
	s := New(t, "acme", "app")
	base := s.Commit(map[string]string{"a.txt": "a\n"})
	s.PRs[7] = &PR{HeadSHA: base, HeadRef: "feature"}
	c := client(t, s)
	ctx := context.Background()

	// Issues share their numbers with pull requests.
	is, _, err := c.Issues.Create(ctx, "acme", "app", &gh.IssueRequest{Title: gh.String("Nightly"), Body: gh.String("b")})
	if err != nil || is.GetNumber() != 8 || is.GetUser().GetLogin() != BotLogin {
		t.Fatalf("Create = %+v, %v; want #8 by the App", is, err)
	}
	if _, resp, err := c.Issues.Create(ctx, "acme", "app", &gh.IssueRequest{Title: gh.String(" ")}); err == nil || resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("an issue without a title: %v", err)
	}
	got, _, err := c.Issues.Get(ctx, "acme", "app", 8)
	if err != nil || got.GetTitle() != "Nightly" || got.IsPullRequest() {
		t.Errorf("Get(8) = %+v, %v", got, err)
	}
	if pr, _, err := c.Issues.Get(ctx, "acme", "app", 7); err != nil || !pr.IsPullRequest() {
		t.Errorf("Get(7), a pull request = %+v, %v", pr, err)
	}
	if _, resp, _ := c.Issues.Get(ctx, "acme", "app", 99); resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown issue was served")
	}
	if _, _, err := c.Issues.Edit(ctx, "acme", "app", 8, &gh.IssueRequest{State: gh.String("closed")}); err != nil {
		t.Fatal(err)
	}
	list, _, err := c.Issues.ListByRepo(ctx, "acme", "app", &gh.IssueListByRepoOptions{Creator: BotLogin, State: "all"})
	if err != nil || len(list) != 1 || list[0].GetNumber() != 8 || list[0].GetState() != "closed" {
		t.Errorf("the App's issues = %+v, %v", list, err)
	}
	if list, _, _ := c.Issues.ListByRepo(ctx, "acme", "app", nil); len(list) != 1 || list[0].GetNumber() != 7 {
		t.Errorf("open issues = %+v, want PR 7 alone", list)
	}
	if _, _, err := c.Issues.CreateComment(ctx, "acme", "app", 8, &gh.IssueComment{Body: gh.String("on the issue")}); err != nil || len(s.Comments(8)) != 1 {
		t.Errorf("a comment on the issue: %v", err)
	}

	// Branches.
	if b, _, err := c.Repositories.GetBranch(ctx, "acme", "app", "main", 0); err != nil || b.GetCommit().GetSHA() != base {
		t.Errorf("GetBranch(main) = %+v, %v", b, err)
	}
	if _, resp, _ := c.Repositories.GetBranch(ctx, "acme", "app", "nope", 0); resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Error("an unknown branch was served")
	}

	// A push over git, then a pull request of it.
	work := t.TempDir()
	gitIn := func(args ...string) error {
		cmd := exec.Command("git", append([]string{"-C", work}, args...)...)
		auth := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + Token))
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader",
			"GIT_CONFIG_VALUE_0=Authorization: Basic "+auth, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@e")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v: %s", args, err, out)
		}
		return nil
	}
	url := s.GitURL() + "/acme/app.git"
	for _, args := range [][]string{{"init", "-q"}, {"fetch", "-q", url, "main"}, {"checkout", "-q", "FETCH_HEAD"}} {
		if err := gitIn(args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "b.txt"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := gitIn("add", "b.txt"); err != nil {
		t.Fatal(err)
	}
	if err := gitIn("commit", "-q", "-m", "b"); err != nil {
		t.Fatal(err)
	}
	s.SetPermission("contents", "read")
	if err := gitIn("push", "-q", url, "HEAD:refs/heads/iterion/b"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a push without contents: write: %v", err)
	}
	s.SetPermission("contents", "write")
	if err := gitIn("push", "-q", url, "HEAD:refs/heads/iterion/b"); err != nil {
		t.Fatal(err)
	}
	if s.Branch("iterion/b") == "" || s.Git("show", "iterion/b:b.txt") != "b" {
		t.Fatalf("the pushed branch is not there")
	}
	s.SetPermission("pull_requests", "read")
	if _, resp, _ := c.PullRequests.Create(ctx, "acme", "app", &gh.NewPullRequest{Title: gh.String("t"), Head: gh.String("iterion/b"), Base: gh.String("main")}); resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Error("a pull request without pull_requests: write was opened")
	}
	s.SetPermission("pull_requests", "write")
	pr, _, err := c.PullRequests.Create(ctx, "acme", "app", &gh.NewPullRequest{Title: gh.String("t"), Head: gh.String("iterion/b"), Base: gh.String("main"), Body: gh.String("body")})
	if err != nil || pr.GetNumber() != 9 || pr.GetHead().GetRef() != "iterion/b" {
		t.Fatalf("Create PR = %+v, %v", pr, err)
	}
	for _, tc := range []struct{ name, head, want string }{
		{"the same again", "iterion/b", "A pull request already exists"},
		{"no commits between", "main", "No commits between"},
		{"no such head", "nope", "invalid"},
	} {
		_, _, err := c.PullRequests.Create(ctx, "acme", "app", &gh.NewPullRequest{Title: gh.String("t"), Head: gh.String(tc.head), Base: gh.String("main")})
		var er *gh.ErrorResponse
		if !errors.As(err, &er) || er.Response.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(er.Errors), tc.want) {
			t.Errorf("%s: %v, want 422 %q", tc.name, err, tc.want)
		}
	}
	pulls, _, err := c.PullRequests.List(ctx, "acme", "app", &gh.PullRequestListOptions{Head: "acme:iterion/b", State: "all"})
	if err != nil || len(pulls) != 1 || pulls[0].GetNumber() != 9 {
		t.Errorf("pulls of iterion/b = %+v, %v", pulls, err)
	}

	// The App's installations, as the App, and their repositories.
	apps := gh.NewClient(nil).WithAuthToken("a.jwt")
	apps.BaseURL = c.BaseURL
	insts, _, err := apps.Apps.ListInstallations(ctx, nil)
	if err != nil || len(insts) != 1 || insts[0].GetID() != InstallationID {
		t.Errorf("installations = %+v, %v", insts, err)
	}
	repos, _, err := c.Apps.ListRepos(ctx, nil)
	if err != nil || len(repos.Repositories) != 1 || repos.Repositories[0].GetFullName() != "acme/app" {
		t.Errorf("repositories = %+v, %v", repos, err)
	}
}
