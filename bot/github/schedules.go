package github

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v62/github"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/bot/repoconfig"
	"github.com/iterion-bot/iterion/bot/schedule"
)

// Schedules: each repository's .iterion.yml may declare schedules. The
// Service reads them from the default branch of every repository of the
// App's installations at start, and again from a repository at each push
// to its default branch, and declares them to the scheduler as the
// source github/<owner>/<repo>. A fire checks the default branch's head
// out and starts the workflow like a pull request's run; the run is
// shown on the schedule's tracking issue (a status comment, its
// questions, answered there) unless the schedule reports on Slack alone.

// Schedulers declares a source's schedules (*schedule.Scheduler).
type Schedulers interface {
	Set(ctx context.Context, source string, defs []schedule.Definition) ([]delivery.Schedule, error)
}

// postTrackingIssue is the name of a schedule's tracking issue number
// among its posts.
const postTrackingIssue = "github-issue"

// scheduleTarget is what a repository schedule's fire starts and where
// it reports, kept with the schedule in the store.
type scheduleTarget struct {
	Installation  int64             `json:"installation"`
	Owner         string            `json:"owner"`
	Repo          string            `json:"repo"`
	DefaultBranch string            `json:"default_branch"`
	Workflow      string            `json:"workflow"`
	Path          string            `json:"path"`
	Vars          map[string]string `json:"vars,omitempty"`
	Issue         bool              `json:"issue"`
	Slack         string            `json:"slack,omitempty"`
	Cron          string            `json:"cron"`
	Zone          string            `json:"zone,omitempty"`
}

// ScheduleSource is the scheduler's source of owner/repo's schedules.
func ScheduleSource(owner, repo string) string {
	return "github/" + strings.ToLower(owner) + "/" + strings.ToLower(repo)
}

// shortSchedule is a schedule's name within its repository.
func shortSchedule(name string) string { return name[strings.LastIndex(name, "/")+1:] }

// Definitions are the schedules cfg declares for owner/repo, as the
// scheduler takes them.
func Definitions(cfg *repoconfig.Config, installation int64, owner, repo, defaultBranch string) []schedule.Definition {
	var defs []schedule.Definition
	for _, s := range cfg.Schedules {
		target, _ := json.Marshal(scheduleTarget{ // strings and a number: it cannot fail
			Installation: installation, Owner: owner, Repo: repo, DefaultBranch: defaultBranch,
			Workflow: s.Workflow, Path: cfg.Workflows[s.Workflow], Vars: s.Vars,
			Issue: s.Report.IssueEnabled(), Slack: s.Report.Slack, Cron: s.Cron, Zone: s.Timezone,
		})
		defs = append(defs, schedule.Definition{Name: s.Name, Cron: s.Cron, Zone: s.Timezone, Overlap: s.Overlap, Grace: s.Grace, Target: target})
	}
	return defs
}

// RefreshSchedules reads owner/repo's .iterion.yml from its default
// branch and declares its schedules: a file without schedules (or no
// file) removes them. A file with mistakes keeps the schedules declared
// before, and says so in the log: the file's mistakes are told on the
// next comment that needs it.
func (s *Service) RefreshSchedules(ctx context.Context, installation int64, owner, repo, defaultBranch string) error {
	if s.opts.Schedules == nil {
		return nil
	}
	client, err := s.app.Installation(installation)
	if err != nil {
		return err
	}
	cfg, _, err := FetchConfig(ctx, client, owner, repo, defaultBranch)
	var cfgErrs repoconfig.Errors
	if errors.As(err, &cfgErrs) {
		s.log.Warn("the repository's .iterion.yml has mistakes; its schedules stay as they were", "repo", owner+"/"+repo, "branch", defaultBranch, "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	stored, err := s.opts.Schedules.Set(ctx, ScheduleSource(owner, repo), Definitions(cfg, installation, owner, repo, defaultBranch))
	if err != nil {
		return err
	}
	if len(stored) > 0 {
		s.log.Info("schedules of a repository read", "repo", owner+"/"+repo, "schedules", len(stored))
	}
	return nil
}

// onPush is the Handler's hook for a push: one to the default branch
// reads the repository's schedules again.
func (s *Service) onPush(ctx context.Context, t Trigger) error {
	if t.HeadRef != t.DefaultBranch || t.DefaultBranch == "" {
		return nil
	}
	return s.RefreshSchedules(ctx, t.InstallationID, t.Owner, t.Repo, t.DefaultBranch)
}

// loadSchedules reads the schedules of every repository of the App's
// installations, trying again while GitHub asks for patience, and
// removes those of repositories the App no longer has.
func (s *Service) loadSchedules(ctx context.Context) {
	if s.opts.Schedules == nil {
		return
	}
	for attempt := 1; ; attempt++ {
		err := s.loadSchedulesOnce(ctx)
		var later *RetryLater
		switch {
		case err == nil:
			return
		case ctx.Err() != nil:
			return
		case errors.As(err, &later) && attempt < reconcileAttempts:
			s.log.Warn("reading the repositories' schedules is postponed", "retry_in", later.After, "err", err)
			if sleepCtx(ctx, later.After) != nil {
				return
			}
		default:
			s.log.Error("reading the repositories' schedules failed; those stored before fire as they were", "err", err)
			return
		}
	}
}

// refreshInstallation reads the schedules of installation's
// repositories (it came back, or was installed).
func (s *Service) refreshInstallation(ctx context.Context, installation int64) {
	if s.opts.Schedules == nil {
		return
	}
	repos, err := s.app.Repos(ctx, installation)
	if err != nil {
		s.log.Warn("reading the schedules of an installation failed; they are read again at the next push or start", "installation", installation, "err", err)
		return
	}
	for _, r := range repos {
		if owner, name := r.GetOwner().GetLogin(), r.GetName(); validRepo(owner, name) {
			if err := s.RefreshSchedules(ctx, installation, owner, name, r.GetDefaultBranch()); err != nil {
				s.log.Warn("reading a repository's schedules failed", "repo", owner+"/"+name, "err", err)
			}
		}
	}
}

func (s *Service) loadSchedulesOnce(ctx context.Context) error {
	insts, err := s.app.ListInstallations(ctx)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var errs []error
	for _, inst := range insts {
		repos, err := s.app.Repos(ctx, inst)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range repos {
			owner, name := r.GetOwner().GetLogin(), r.GetName()
			if !validRepo(owner, name) {
				continue
			}
			seen[ScheduleSource(owner, name)] = true
			if err := s.RefreshSchedules(ctx, inst, owner, name, r.GetDefaultBranch()); err != nil {
				errs = append(errs, fmt.Errorf("%s/%s: %w", owner, name, err))
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Every installation listed: a repository not seen is no longer the
	// App's, and its schedules go.
	stored, err := s.db.Schedules(ctx)
	if err != nil {
		return err
	}
	gone := map[string]bool{}
	for _, sc := range stored {
		if strings.HasPrefix(sc.Source, "github/") && !seen[sc.Source] {
			gone[sc.Source] = true
		}
	}
	for source := range gone {
		s.log.Info("the App no longer has a repository: its schedules are removed", "source", source)
		if _, err := s.opts.Schedules.Set(ctx, source, nil); err != nil {
			return err
		}
	}
	s.log.Info("the repositories' schedules are read", "installations", len(insts), "repositories", len(seen))
	return nil
}

// ScheduleLauncher starts the runs of the repositories' schedules.
func (s *Service) ScheduleLauncher() schedule.Launcher {
	return schedule.LauncherFunc(s.launchScheduled)
}

// launchScheduled starts the run of fire f of repository schedule rec:
// the workflow read from the default branch, on its head, shown on the
// schedule's tracking issue (opened the first time). A run that cannot
// start is said on the issue.
func (s *Service) launchScheduled(ctx context.Context, rec delivery.Schedule, f delivery.Fire) (string, error) {
	var tg scheduleTarget
	if err := json.Unmarshal(rec.Target, &tg); err != nil || !validRepo(tg.Owner, tg.Repo) {
		return "", fmt.Errorf("schedule %s has no repository this build reads (%v)", rec.Name, err)
	}
	client, err := s.app.Installation(tg.Installation)
	if err != nil {
		return "", err
	}
	br, resp, err := client.Repositories.GetBranch(ctx, tg.Owner, tg.Repo, tg.DefaultBranch, 0)
	if err != nil {
		return "", classify(fmt.Sprintf("reading branch %s of %s/%s", tg.DefaultBranch, tg.Owner, tg.Repo), resp, err)
	}
	sha := br.GetCommit().GetSHA()
	issue := 0
	if tg.Issue {
		n, _ := atoiOK(rec.Posts[postTrackingIssue])
		issue, err = s.replies.EnsureIssue(ctx, tg.Installation, tg.Owner, tg.Repo, n, "schedule-"+rec.Name,
			fmt.Sprintf("iterion: schedule %s", shortSchedule(rec.Name)), trackingBody(rec, tg))
		if err != nil {
			return "", err
		}
		if issue != n {
			if err := s.db.SetSchedulePost(ctx, rec.Name, postTrackingIssue, fmt.Sprint(issue)); err != nil {
				return "", err
			}
		}
	}
	short := shortSchedule(rec.Name)
	id, err := s.launcher.Launch(ctx, Launch{
		InstallationID: tg.Installation, Owner: tg.Owner, Repo: tg.Repo,
		Workflow: tg.Workflow, Path: tg.Path, Ref: sha, DefaultBranch: tg.DefaultBranch, Vars: tg.Vars,
		Context: map[string]string{"repo": tg.Owner + "/" + tg.Repo, "head_sha": sha, "schedule": short, "tick": f.Tick},
		Actor:   "schedule " + short, Key: "schedule-" + rec.Name + "-" + f.Tick,
		Schedule: rec.Name, Tick: f.Tick, Issue: issue, Slack: tg.Slack,
	})
	var user *LaunchError
	if errors.As(err, &user) {
		if issue != 0 {
			text := fmt.Sprintf("The run of tick %s could not start: %s", inert(f.Tick), user.Msg)
			if _, perr := s.replies.Post(ctx, tg.Installation, tg.Owner, tg.Repo, issue, "schedule-fail-"+rec.Name+"-"+f.Tick, text); perr != nil {
				s.log.Warn("telling a tracking issue that its run could not start failed", "schedule", rec.Name, "err", perr)
			}
		}
		return "", fmt.Errorf("the run could not start: %s", user.Msg)
	}
	return id, err
}

// trackingBody is a tracking issue's body: what the schedule runs, and
// how to answer its runs' questions here.
func trackingBody(rec delivery.Schedule, tg scheduleTarget) string {
	zone := cmp.Or(tg.Zone, "UTC")
	var b strings.Builder
	fmt.Fprintf(&b, "**iterion schedule `%s`**, declared in %s on `%s`: workflow `%s` (`%s`) on cron `%s` (%s)",
		inert(shortSchedule(rec.Name)), repoconfig.FileName, inert(tg.DefaultBranch), inert(tg.Workflow), inert(tg.Path), inert(tg.Cron), inert(zone))
	if rec.Overlap == schedule.OverlapQueue {
		b.WriteString("; a tick while a run goes on waits for it")
	} else {
		b.WriteString("; a tick while a run goes on is skipped")
	}
	fmt.Fprintf(&b, ", and after downtime the latest missed tick fires within %s.\n\n", rec.Grace)
	b.WriteString("Each run is shown here in a status comment of its own. The questions a run asks are posted here and answered here, " +
		"as on a pull request: reply quoting the question, or comment `/iterion answer Q1 <your answer>`; `/iterion status` lists the runs " +
		"and `/iterion cancel` stops one. Closing this issue does not stop the schedule: remove it from " + repoconfig.FileName + " for that.\n")
	return b.String()
}

func atoiOK(s string) (int, bool) {
	var n int
	_, err := fmt.Sscan(s, &n)
	return n, err == nil && n > 0
}

// ListInstallations returns the ids of the App's installations (asked
// as the App), those GitHub refuses tokens for left out.
func (a *App) ListInstallations(ctx context.Context) ([]int64, error) {
	tr, err := ghinstallation.NewAppsTransport(a.rt, a.id, a.key)
	if err != nil {
		return nil, err
	}
	tr.BaseURL = strings.TrimRight(a.baseURL, "/")
	c := gh.NewClient(&http.Client{Transport: tr})
	c.BaseURL, _ = url.Parse(a.baseURL)
	var ids []int64
	opts := &gh.ListOptions{PerPage: 100}
	for {
		list, resp, err := c.Apps.ListInstallations(ctx, opts)
		if err != nil {
			return nil, classify("listing the App's installations", resp, err)
		}
		for _, inst := range list {
			if inst.GetSuspendedAt().IsZero() && a.installations.Blocked(inst.GetID()) == nil {
				ids = append(ids, inst.GetID())
			}
		}
		if resp.NextPage == 0 {
			return ids, nil
		}
		opts.Page = resp.NextPage
	}
}

// Repos returns the repositories installation may act on.
func (a *App) Repos(ctx context.Context, installation int64) ([]*gh.Repository, error) {
	c, err := a.Installation(installation)
	if err != nil {
		return nil, err
	}
	var out []*gh.Repository
	opts := &gh.ListOptions{PerPage: 100}
	for {
		list, resp, err := c.Apps.ListRepos(ctx, opts)
		if err != nil {
			return nil, classify(fmt.Sprintf("listing the repositories of installation %d", installation), resp, err)
		}
		out = append(out, list.Repositories...)
		if resp.NextPage == 0 || len(out) >= 10000 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}
