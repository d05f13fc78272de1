package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	gh "github.com/google/go-github/v62/github"
)

// CheckState is what a check run shows: Status queued, in_progress or
// completed, and for completed a Conclusion (success, failure, cancelled,
// action_required, …).
type CheckState struct {
	Status, Conclusion string
}

func (s CheckState) String() string {
	if s.Conclusion != "" {
		return s.Status + "/" + s.Conclusion
	}
	return s.Status
}

// Completed reports whether GitHub considers the check run done. A
// completed check run cannot be set back to in_progress; the bot opens a
// new one of the same name instead, and GitHub shows the newest.
func (s CheckState) Completed() bool { return s.Status == "completed" }

// CheckOutput is the text of a check run.
type CheckOutput struct {
	Title, Summary string
	DetailsURL     string
}

// ErrChecksForbidden is the error of a check run GitHub refuses to let the
// App write (403: the App lacks the Checks permission, or the repository
// disallows it). The status comment carries on without check runs.
var ErrChecksForbidden = errors.New("GitHub refuses the App's check runs: give the App the Checks (write) permission")

// checkErr classifies a check-run API error.
func checkErr(what string, resp *gh.Response, err error) error {
	// Rate limits never reach here as a 403 response: the App's transport
	// turns them into errors before go-github reads them.
	if resp != nil && resp.StatusCode == http.StatusForbidden {
		return fmt.Errorf("%s: %w", what, ErrChecksForbidden)
	}
	return classify(what, resp, err)
}

// maxCheckText is GitHub's limit on a check run's summary, in characters.
const maxCheckText = 65535

// EnsureCheckRun returns the id of the App's check run named name on sha
// whose external id is externalID, creating it in state when there is
// none (created reports which): a check run created just before a crash
// is found again instead of doubled.
func (c *Commenter) EnsureCheckRun(ctx context.Context, installationID int64, owner, repo, sha, name, externalID string, state CheckState, out CheckOutput) (id int64, created bool, err error) {
	client, err := c.client(installationID)
	if err != nil {
		return 0, false, err
	}
	opts := &gh.ListCheckRunsOptions{CheckName: gh.String(name), Filter: gh.String("all"), ListOptions: gh.ListOptions{PerPage: 100}}
	if c.appID != 0 {
		opts.AppID = gh.Int64(c.appID)
	}
	for {
		res, resp, err := client.Checks.ListCheckRunsForRef(ctx, owner, repo, sha, opts)
		if err != nil {
			return 0, false, checkErr(fmt.Sprintf("listing the check runs of %s/%s@%s", owner, repo, shortSHA(sha)), resp, err)
		}
		for _, cr := range res.CheckRuns {
			// Another App's check run may carry the same name and
			// external id: only the App's own is taken.
			if cr.GetExternalID() == externalID && c.appID != 0 && cr.GetApp().GetID() == c.appID {
				return cr.GetID(), false, nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if err := c.pace(ctx, installationID); err != nil {
		return 0, false, err
	}
	create := gh.CreateCheckRunOptions{
		Name: name, HeadSHA: sha, ExternalID: gh.String(externalID),
		Status: gh.String(state.Status), Output: c.checkOutput(out),
	}
	if out.DetailsURL != "" {
		create.DetailsURL = gh.String(out.DetailsURL)
	}
	if state.Completed() {
		create.Conclusion = gh.String(state.Conclusion)
		create.CompletedAt = &gh.Timestamp{Time: c.now()}
	}
	cr, resp, err := client.Checks.CreateCheckRun(ctx, owner, repo, create)
	if err != nil {
		return 0, false, checkErr(fmt.Sprintf("creating check run %q on %s/%s@%s", name, owner, repo, shortSHA(sha)), resp, err)
	}
	return cr.GetID(), true, nil
}

// UpdateCheckRun sets check run id to state and out.
func (c *Commenter) UpdateCheckRun(ctx context.Context, installationID int64, owner, repo string, id int64, name string, state CheckState, out CheckOutput) error {
	client, err := c.client(installationID)
	if err != nil {
		return err
	}
	if err := c.pace(ctx, installationID); err != nil {
		return err
	}
	update := gh.UpdateCheckRunOptions{Name: name, Status: gh.String(state.Status), Output: c.checkOutput(out)}
	if out.DetailsURL != "" {
		update.DetailsURL = gh.String(out.DetailsURL)
	}
	if state.Completed() {
		update.Conclusion = gh.String(state.Conclusion)
		update.CompletedAt = &gh.Timestamp{Time: c.now()}
	}
	_, resp, err := client.Checks.UpdateCheckRun(ctx, owner, repo, id, update)
	if err != nil {
		return checkErr(fmt.Sprintf("updating check run %d on %s/%s", id, owner, repo), resp, err)
	}
	return nil
}

// checkOutput is out as GitHub takes it: scrubbed, and cut to its limit.
func (c *Commenter) checkOutput(out CheckOutput) *gh.CheckRunOutput {
	out.Title, out.Summary = c.redactor.String(out.Title), c.redactor.String(out.Summary)
	summary := out.Summary
	if utf8.RuneCountInString(summary) > maxCheckText {
		r := []rune(summary)
		summary = string(r[:maxCheckText-len([]rune(truncatedNote))]) + truncatedNote
	}
	return &gh.CheckRunOutput{Title: gh.String(out.Title), Summary: gh.String(summary)}
}
