package github

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/iterion-bot/iterion/engine"
)

// reconcileSlack widens the window of comments read at start-up, for
// clocks that disagree a little.
const reconcileSlack = time.Minute

// prKey names a pull request a run was started from.
type prKey struct {
	installation int64
	repo         string
	pr           int
}

// Reconcile applies the answers people wrote on pull requests while the
// server was down (GitHub does not redeliver a webhook that failed): for
// every pull request with a pending question, it reads the
// comments made since the oldest such question and handles those that
// answer one, as if their webhooks had arrived. Questions answered in the
// meantime are left alone; an answer also delivered normally is taken
// once. It returns the number of comments applied.
func (h *Handler) Reconcile(ctx context.Context) (int, error) {
	runs, err := h.runs.Runs(ctx, engine.RunFilter{})
	if err != nil {
		return 0, err
	}
	since := map[prKey]time.Time{}
	for _, r := range runs {
		t, ok := OriginOf(r)
		if !ok || t.Thread() == 0 || t.Installation == 0 || r.Status.Terminal() {
			continue
		}
		ixs, err := h.runs.Interactions(ctx, r.ID)
		if err != nil {
			return 0, err
		}
		for _, ix := range ixs {
			// Posted or not yet recorded as posted (the relay may record it
			// only after this start): comments since it was asked count.
			if !ix.Pending() || ix.Kind == engine.KindAwait {
				continue
			}
			k := prKey{t.Installation, t.Repo, t.Thread()}
			if at, ok := since[k]; !ok || ix.RequestedAt.Before(at) {
				since[k] = ix.RequestedAt
			}
		}
	}
	keys := make([]prKey, 0, len(since))
	for k := range since {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b prKey) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	// One pull request GitHub refuses (a revoked installation, a deleted
	// repository) does not keep the others' answers out.
	applied := 0
	var errs []error
	for _, k := range keys {
		n, err := h.reconcilePR(ctx, k, since[k].Add(-reconcileSlack))
		applied += n
		if err != nil {
			errs = append(errs, fmt.Errorf("%s#%d: %w", k.repo, k.pr, err))
		}
	}
	return applied, errors.Join(errs...)
}

// reconcilePR handles the answers among the comments on one pull request
// since a time, oldest first.
func (h *Handler) reconcilePR(ctx context.Context, k prKey, since time.Time) (int, error) {
	owner, repo, _ := strings.Cut(k.repo, "/")
	client, err := h.client(k.installation)
	if err != nil {
		return 0, err
	}
	info, resp, err := client.Repositories.Get(ctx, owner, repo)
	if err != nil {
		return 0, classify(fmt.Sprintf("reading %s", k.repo), resp, err)
	}
	opts := &gh.IssueListCommentsOptions{Since: &since, Sort: gh.String("created"), Direction: gh.String("asc"), ListOptions: gh.ListOptions{PerPage: 100}}
	applied := 0
	for {
		cms, resp, err := client.Issues.ListComments(ctx, owner, repo, k.pr, opts)
		if err != nil {
			return applied, classify(fmt.Sprintf("listing the comments of %s#%d", k.repo, k.pr), resp, err)
		}
		for _, cm := range cms {
			t, ok := answerTrigger(cm)
			if !ok {
				continue
			}
			t.InstallationID, t.Owner, t.Repo, t.DefaultBranch, t.PR = k.installation, owner, repo, info.GetDefaultBranch(), k.pr
			// Only answers to questions still open: the others were seen.
			if t, err = h.stillOpen(ctx, t); err != nil {
				return applied, err
			}
			if len(t.Commands) == 0 && t.Reply == nil {
				continue
			}
			if err := h.act(ctx, fmt.Sprintf("reconcile-%d", cm.GetID()), t); err != nil {
				return applied, err
			}
			applied++
		}
		if resp.NextPage == 0 {
			return applied, nil
		}
		opts.Page = resp.NextPage
	}
}

// answerTrigger turns a person's comment that answers questions (answer
// commands, or a quote reply) into the trigger its webhook would have
// been; other comments, and their other commands, are not replayed.
func answerTrigger(cm *gh.IssueComment) (Trigger, bool) {
	if cm.GetUser().GetType() == "Bot" {
		return Trigger{}, false
	}
	t := Trigger{Kind: TriggerComment, Sender: cm.GetUser().GetLogin(), CommentID: cm.GetID(), CommentBody: cm.GetBody()}
	// An edited comment is not replayed (edits never count, and its text
	// is no longer what was written then).
	if !cm.GetUpdatedAt().Time.Equal(cm.GetCreatedAt().Time) {
		return Trigger{}, false
	}
	t.CommentAt = cm.GetCreatedAt().Time
	cmds, _ := ParseComment(cm.GetBody())
	for _, c := range cmds {
		if c.Name == CmdAnswer {
			t.Commands = append(t.Commands, c)
		}
	}
	if len(cmds) == 0 {
		if r, ok := ParseReply(cm.GetBody()); ok {
			t.Reply = &r
		}
	}
	return t, len(t.Commands) > 0 || t.Reply != nil
}

// stillOpen keeps the parts of t that answer questions still pending and
// asked before the comment was written (a comment written before its
// question existed was refused then, and is no answer to it now).
func (h *Handler) stillOpen(ctx context.Context, t Trigger) (Trigger, error) {
	open := func(id string) (bool, error) {
		ix, err := h.answers.findQuestion(ctx, t, id)
		return ix != nil && ix.Pending() && !t.CommentAt.Before(ix.RequestedAt.Add(-reconcileSlack)), err
	}
	var cmds []Command
	for _, c := range t.Commands {
		ok, err := open(c.QuestionID)
		if err != nil {
			return t, err
		}
		if ok {
			cmds = append(cmds, c)
		}
	}
	t.Commands = cmds
	if t.Reply != nil {
		ok := len(t.Reply.Questions) == 1
		if ok {
			var err error
			if ok, err = open(fmt.Sprintf("Q%d", t.Reply.Questions[0])); err != nil {
				return t, err
			}
		}
		if !ok {
			t.Reply = nil
		}
	}
	return t, nil
}
