package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/iterion-bot/iterion/bot/repoconfig"
	"github.com/iterion-bot/iterion/engine"
)

// contextVars are the vars the bot fills from the pull request
// (prContext): a re-run takes them fresh, not from the run it repeats.
var contextVars = []string{"repo", "pr_number", "head_sha", "base_ref", "pr_title", "pr_body", "comment_body"}

// rerun answers a Re-run click: the workflow of the run whose check run
// was clicked (or of every run on the suite's head) starts again on the
// same head with the same vars, asked for by the person who clicked, who
// needs write permission as for `/iterion run`. The reply goes on the PR.
func (h *Handler) rerun(ctx context.Context, id string, t Trigger, cfg *repoconfig.Config) error {
	runs, err := h.rerunOf(ctx, &t)
	if err != nil || len(runs) == 0 {
		return err
	}
	ok, err := h.perms.CanWrite(ctx, t.InstallationID, t.Owner, t.Repo, t.Sender)
	if err != nil {
		return err
	}
	if !ok {
		return h.reply(ctx, id, t, fmt.Sprintf("re-running a check needs write permission on %s/%s, which you do not have.", t.Owner, t.Repo))
	}
	pr, err := h.pull(ctx, t)
	if err != nil {
		return err
	}
	if pr.GetState() != "open" {
		return h.reply(ctx, id, t, "this pull request is closed; reopen it to run workflows on it.")
	}
	var parts []string
	for i, run := range runs {
		path, ok := cfg.Workflows[run.Workflow]
		if !ok {
			parts = append(parts, fmt.Sprintf("workflow `%s` is no longer in %s on `%s`: nothing started for run `%s`.", run.Workflow, repoconfig.FileName, t.DefaultBranch, run.ID))
			continue
		}
		out, err := h.queue.start(ctx, t, cfg, Launch{
			InstallationID: t.InstallationID, Owner: t.Owner, Repo: t.Repo, PR: t.PR,
			Workflow: run.Workflow, Path: path, Ref: t.HeadSHA, DefaultBranch: t.DefaultBranch,
			Vars: rerunVars(run), Context: prContext(t, pr), Actor: t.Sender, Key: fmt.Sprintf("%s-%d", id, i+1),
		})
		if err != nil {
			return err
		}
		parts = append(parts, fmt.Sprintf("Re-run of `%s`: %s", run.ID, out.text))
	}
	return h.reply(ctx, id, t, strings.Join(parts, "\n\n"))
}

// rerunOf returns the runs a Re-run click repeats, setting t.PR when
// the event did not say it (a fork's check run). A run that is not this
// repository's, or not on the clicked head, is not re-run.
func (h *Handler) rerunOf(ctx context.Context, t *Trigger) ([]*engine.Run, error) {
	repo := t.Owner + "/" + t.Repo
	if t.RerunID != "" {
		if !engine.ValidRunID(t.RerunID) {
			h.log.Debug("re-run of a check run that is not a run's", "external_id", t.RerunID)
			return nil, nil
		}
		run, err := h.runs.Run(ctx, t.RerunID)
		if errors.Is(err, engine.ErrNotFound) {
			h.log.Info("re-run of a run this server does not have", "run", t.RerunID, "repo", repo)
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		o, ok := OriginOf(run)
		if !ok || !strings.EqualFold(o.Repo, repo) || o.Installation != t.InstallationID || o.PR == 0 || !strings.EqualFold(o.HeadSHA, t.HeadSHA) {
			h.log.Info("re-run of a run started elsewhere; ignored", "run", run.ID, "repo", repo)
			return nil, nil
		}
		t.PR = o.PR
		return []*engine.Run{run}, nil
	}
	all, err := prRuns(ctx, h.runs, *t)
	if err != nil {
		return nil, err
	}
	// The newest run of each workflow on the suite's head.
	var out []*engine.Run
	for _, r := range all {
		o, ok := OriginOf(r)
		if ok && strings.EqualFold(o.HeadSHA, t.HeadSHA) && !slices.ContainsFunc(out, func(x *engine.Run) bool { return x.Workflow == r.Workflow }) {
			out = append(out, r)
		}
	}
	return out, nil
}

// rerunVars are the vars run was given, without those the PR fills, as
// text (how a command gives them).
func rerunVars(run *engine.Run) map[string]string {
	vars := map[string]string{}
	for k, v := range run.Vars {
		if slices.Contains(contextVars, k) {
			continue
		}
		if s, ok := v.(string); ok {
			vars[k] = s
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			continue
		}
		vars[k] = string(b)
	}
	return vars
}
