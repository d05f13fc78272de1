package github

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v62/github"

	"github.com/iterion-bot/iterion/bot/repoconfig"
)

// pullReader reads a trigger's pull request.
type pullReader func(ctx context.Context, t Trigger) (*gh.PullRequest, error)

// runCommand answers `/iterion run [WORKFLOW] [k=v…]`: it starts the
// workflow on the PR's head, under the PR's concurrency rule. It needs
// write permission, and on a PR from a fork the approval of the head
// commit by its full SHA.
type runCommand struct {
	perms Permissions
	pulls pullReader
	queue *prQueue
}

func (r runCommand) do(ctx context.Context, req request, c Command) (outcome, error) {
	t, cfg := req.t, req.cfg
	if t.OnIssue {
		return say("`/iterion run` starts runs on pull requests; on an issue there is nothing to run on. A schedule's runs start by its cron spec (%s's `schedules:`).", repoconfig.FileName), nil
	}
	if refusal, err := mayChange(ctx, r.perms, t, cfg, CmdRun); err != nil || refusal != "" {
		return outcome{text: refusal}, err
	}
	name := c.Workflow
	if name == "" {
		name = cfg.DefaultWorkflow
	}
	if name == "" {
		return say("name a workflow (`/iterion run <workflow>`) or set `default_workflow` in %s.", repoconfig.FileName), nil
	}
	path, ok := cfg.Workflows[name]
	if !ok {
		return outcome{text: unknownWorkflow(name, t, cfg)}, nil
	}
	pr, err := r.pulls(ctx, t)
	if err != nil {
		return outcome{}, err
	}
	if pr.GetState() != "open" {
		return outcome{text: "this pull request is closed; reopen it to run workflows on it."}, nil
	}
	head := pr.GetHead().GetSHA()
	vars := maps.Clone(c.Vars)
	approved := vars[ApproveVar]
	delete(vars, ApproveVar)
	if isFork(pr) {
		// The approval is for the commit the maintainer read: code pushed
		// after it does not run on the strength of it.
		// The whole SHA: a prefix can be matched by a commit made for it.
		switch {
		case approved == "":
			return say("this pull request comes from a fork, so its code runs only with the approval of the commit you reviewed. If you have read the change at %s, start the run with:\n\n```\n/iterion run %s %s=%s\n```", shortSHA(head), name, ApproveVar, head), nil
		case !strings.EqualFold(head, approved):
			return say("nothing started: you approved `%s`, but the pull request's head is `%s` (approve it by its full SHA). Read the commits up to it, then start the run with `/iterion run %s %s=%s`.", inert(approved), inert(head), name, ApproveVar, inert(head)), nil
		}
	}
	return r.queue.start(ctx, t, cfg, Launch{
		InstallationID: t.InstallationID, Owner: t.Owner, Repo: t.Repo, PR: t.PR,
		Workflow: name, Path: path, Ref: head, DefaultBranch: t.DefaultBranch, Vars: vars,
		Context: prContext(t, pr), Actor: t.Sender, CommentID: t.CommentID, Key: req.key,
	})
}

// unknownWorkflow says that cfg has no workflow name, and which it has.
func unknownWorkflow(name string, t Trigger, cfg *repoconfig.Config) string {
	names := make([]string, 0, len(cfg.Workflows))
	for n := range cfg.Workflows {
		names = append(names, "`"+n+"`")
	}
	slices.Sort(names)
	if len(names) == 0 {
		return fmt.Sprintf("no workflow `%s`: %s on `%s` lists no workflows.", inert(name), repoconfig.FileName, inert(t.DefaultBranch))
	}
	return fmt.Sprintf("no workflow `%s` in %s; the workflows are %s.", inert(name), repoconfig.FileName, strings.Join(names, ", "))
}

// pullRequest starts the workflow .iterion.yml maps the PR's action to.
// A PR from a fork carries code the repository's owners have not
// reviewed: it runs only when someone with write permission asks with
// `/iterion run`, and the bot says so once per PR head.
func (h *Handler) pullRequest(ctx context.Context, id string, t Trigger, cfg *repoconfig.Config) error {
	name := cfg.Triggers.PullRequest[t.Action]
	if name == "" {
		h.log.Debug("pull_request action not configured", "delivery", id, "action", t.Action)
		return nil
	}
	if t.Fork {
		_, err := h.replies.Post(ctx, t.InstallationID, t.Owner, t.Repo, t.PR, "fork-"+t.HeadSHA,
			fmt.Sprintf("This pull request comes from a fork, so workflow `%s` does not start by itself. A maintainer who has read the change at %s can start it with `/iterion run %s %s=%s`.", inert(name), inert(shortSHA(t.HeadSHA)), inert(name), ApproveVar, inert(t.HeadSHA)))
		return err
	}
	out, err := h.queue.start(ctx, t, cfg, Launch{
		InstallationID: t.InstallationID, Owner: t.Owner, Repo: t.Repo, PR: t.PR,
		Workflow: name, Path: cfg.Workflows[name], Ref: t.HeadSHA, DefaultBranch: t.DefaultBranch, Actor: t.Sender, Key: id,
		Context: prContext(t, t.PullRequest),
	})
	if err != nil {
		return err
	}
	if out.started != "" {
		// A run the PR's own event started needs no reply: its status
		// comment says it all.
		h.log.Info("run started", "workflow", name, "repo", t.Owner+"/"+t.Repo, "pr", t.PR, "action", t.Action, "run", out.started)
		return nil
	}
	return h.reply(ctx, id, t, fmt.Sprintf("workflow `%s` (on pull_request %s): %s", name, t.Action, out.text))
}

// prContext is the PR's context vars; comment_body is the triggering
// comment's, when a comment started the run.
func prContext(t Trigger, pr *gh.PullRequest) map[string]string {
	ctx := map[string]string{
		"repo":      t.Owner + "/" + t.Repo,
		"pr_number": strconv.Itoa(t.PR),
		"head_sha":  pr.GetHead().GetSHA(),
		"base_ref":  pr.GetBase().GetRef(),
		"pr_title":  pr.GetTitle(),
		"pr_body":   pr.GetBody(),
	}
	if t.Kind == TriggerComment {
		ctx["comment_body"] = t.CommentBody
	}
	return ctx
}

// LaunchError is a launch failure the commenter can fix (a workflow that
// does not compile, a missing file); Msg says what to fix.
type LaunchError struct{ Msg string }

func (e *LaunchError) Error() string { return e.Msg }

func shortSHA(s string) string {
	if len(s) > 7 {
		return s[:7]
	}
	return s
}

// ApproveVar is the argument of `/iterion run` that names the commit a
// maintainer approves on a pull request from a fork.
const ApproveVar = "approve"

// isFork reports whether pr's head lives in another repository; a head
// whose repository is gone (a deleted fork) counts as one.
func isFork(pr *gh.PullRequest) bool {
	head := pr.GetHead().GetRepo().GetFullName()
	return head == "" || !strings.EqualFold(head, pr.GetBase().GetRepo().GetFullName())
}
