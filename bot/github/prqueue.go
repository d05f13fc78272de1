package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/iterion-bot/iterion/bot/repoconfig"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// launcher starts runs and stops those a newer one supersedes.
type launcher interface {
	// Launch starts a run and returns its id; errors a user can fix are
	// *LaunchError, saying what to fix.
	Launch(ctx context.Context, l Launch) (string, error)
	canceller
}

// prQueue decides, one request at a time per pull request, whether a run
// asked for starts now, waits in the PR's queue, supersedes the runs
// before it or is refused, as .iterion.yml's concurrency says; and it
// starts a PR's next queued run when the one before it ends.
type prQueue struct {
	runs    refRuns
	queue   LaunchQueue
	actions launcher
	replies poster
	pulls   pullReader
	log     *slog.Logger

	mu    sync.Mutex
	locks map[string]*prLock
	jobs  sync.WaitGroup
}

// start launches l under the PR's concurrency rule: with another run of
// the PR active, queue (the default) keeps l until the runs before it
// end, supersede cancels them, reject refuses l. Two requests arriving
// together cannot both find the PR idle.
func (q *prQueue) start(ctx context.Context, t Trigger, cfg *repoconfig.Config, l Launch) (outcome, error) {
	scope := PRScope(t.Owner+"/"+t.Repo, t.PR)
	defer q.lock(scope)()
	if l.Slack == "" {
		l.Slack = cfg.Slack.Channel
	}
	id := RunID(l.Owner, l.Repo, l.Key)
	active, seen, err := q.active(ctx, t)
	if err != nil {
		return outcome{}, err
	}
	if seen[id] {
		// Asked again (a redelivery): it already started.
		return outcome{text: fmt.Sprintf("started run `%s` of `%s` on %s.", id, l.Workflow, shortSHA(l.Ref)), started: id}, nil
	}
	queued, err := q.queue.QueuedLaunches(ctx, scope)
	if err != nil {
		return outcome{}, err
	}
	if len(active) == 0 && len(queued) > 0 {
		// A queue whose turn came while nothing was there to start it.
		if err := q.startNext(ctx, t, scope); err != nil {
			return outcome{}, err
		}
		if active, _, err = q.active(ctx, t); err != nil {
			return outcome{}, err
		}
		if queued, err = q.queue.QueuedLaunches(ctx, scope); err != nil {
			return outcome{}, err
		}
	}
	switch cfg.Concurrency {
	case repoconfig.ConcurrencyReject:
		if len(active) > 0 {
			return say("nothing started: run `%s` of `%s` is still %s on this pull request, and %s allows one at a time (`concurrency: reject`). Cancel it with `/iterion cancel`, or ask again when it ends.",
				active[0].ID, active[0].Workflow, active[0].Status, repoconfig.FileName), nil
		}
	case repoconfig.ConcurrencySupersede:
		for _, r := range active {
			if _, err := q.actions.Cancel(ctx, r.ID, fmt.Sprintf("superseded by a newer run asked for by %s", l.Actor)); err != nil {
				return outcome{}, err
			}
		}
		for _, ql := range queued {
			if err := q.drop(ctx, t, scope, ql, fmt.Sprintf("a newer run asked for by %s superseded it", l.Actor)); err != nil {
				return outcome{}, err
			}
		}
	default:
		if len(active) > 0 || len(queued) > 0 {
			payload, err := json.Marshal(l)
			if err != nil {
				return outcome{}, err
			}
			pos, err := q.queue.QueueLaunch(ctx, scope, l.Key, payload)
			if err != nil {
				return outcome{}, err
			}
			ahead := "the run before it ends"
			if len(active) > 0 {
				ahead = fmt.Sprintf("run `%s` ends", active[0].ID)
			}
			return say("queued `%s` on %s (position %d): it starts when %s, as %s asks (`concurrency: queue`).", l.Workflow, shortSHA(l.Ref), pos, ahead, repoconfig.FileName), nil
		}
	}
	id, err = q.actions.Launch(ctx, l)
	if err != nil {
		var user *LaunchError
		if errors.As(err, &user) {
			return say("could not start `%s`: %s", l.Workflow, user.Msg), nil
		}
		return outcome{}, err
	}
	out := outcome{text: fmt.Sprintf("started run `%s` of `%s` on %s.", id, l.Workflow, shortSHA(l.Ref)), started: id}
	if cfg.Concurrency == repoconfig.ConcurrencySupersede && len(active) > 0 {
		out.text += fmt.Sprintf(" It supersedes run `%s`, cancelled.", active[0].ID)
	}
	return out, nil
}

// lock serializes the decisions about one PR's runs; it returns the
// unlock.
func (q *prQueue) lock(scope string) func() {
	q.mu.Lock()
	if q.locks == nil {
		q.locks = map[string]*prLock{}
	}
	l := q.locks[scope]
	if l == nil {
		l = &prLock{}
		q.locks[scope] = l
	}
	l.users++
	q.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		q.mu.Lock()
		// Kept only while someone holds or waits for it: the map has an
		// entry per PR being acted on, not per PR ever seen.
		if l.users--; l.users == 0 {
			delete(q.locks, scope)
		}
		q.mu.Unlock()
	}
}

// prLock is one PR's lock and how many hold or wait for it.
type prLock struct {
	mu    sync.Mutex
	users int
}

// active returns the PR's runs that are running or waiting for answers,
// newest first; seen holds every run id of the PR. (A launched run's
// record is stored before Launch returns, so none is missed.)
func (q *prQueue) active(ctx context.Context, t Trigger) (active []*engine.Run, seen map[string]bool, err error) {
	runs, err := prRuns(ctx, q.runs, t)
	if err != nil {
		return nil, nil, err
	}
	seen = map[string]bool{}
	for _, r := range runs {
		seen[r.ID] = true
		if r.Status == engine.StatusRunning || r.Status == engine.StatusPausedWaitingHuman {
			active = append(active, r)
		}
	}
	return active, seen, nil
}

// startQueued starts, as a job of its own, the next run queued on the
// pull request of run, an ended run, unless another of the PR's runs is
// still active. The relay calls it for each end of a PR run and goes on
// at once: a checkout being cloned for one PR holds up no other PR's
// comments. The job waits out GitHub's "later" and tries again; a queue
// it leaves (the server stopping) is taken up by the PR's next command
// or run end.
func (q *prQueue) startQueued(ctx context.Context, run *engine.Run) {
	o, ok := OriginOf(run)
	if !ok || o.PR == 0 {
		return // not a pull request's run: nothing queues behind it
	}
	owner, repo := o.split()
	t := Trigger{InstallationID: o.Installation, Owner: owner, Repo: repo, PR: o.PR}
	scope := PRScope(o.Repo, o.PR)
	q.jobs.Go(func() {
		for {
			unlock := q.lock(scope)
			err := q.startNext(ctx, t, scope)
			unlock()
			var later *RetryLater
			switch {
			case err == nil || ctx.Err() != nil:
				return
			case errors.As(err, &later):
				q.log.Warn("starting a PR's queued run is postponed", "pr", scope, "retry_in", later.After, "err", err)
				timer := time.NewTimer(later.After)
				select {
				case <-timer.C:
				case <-ctx.Done():
					timer.Stop()
					return
				}
			default:
				q.log.Error("starting a PR's queued run failed; the queue waits for the PR's next command or run end", "pr", scope, "err", err)
				return
			}
		}
	})
}

// startNext starts the oldest queued launch of the PR when none of its
// runs is active. A launch that cannot start is reported to whoever asked
// for it and dropped, and the next is tried; only GitHub's "later" is an
// error. The caller holds the PR's lock.
func (q *prQueue) startNext(ctx context.Context, t Trigger, scope string) error {
	for {
		queued, err := q.queue.QueuedLaunches(ctx, scope)
		if err != nil || len(queued) == 0 {
			return err
		}
		active, seen, err := q.active(ctx, t)
		if err != nil || len(active) > 0 {
			return err // the end of the active run starts the next
		}
		pr, err := q.pulls(ctx, t)
		if err != nil {
			return err
		}
		if pr.GetState() != "open" {
			for _, ql := range queued {
				if err := q.drop(ctx, t, scope, ql, "the pull request was closed before its turn came; reopen it and ask again"); err != nil {
					return err
				}
			}
			return nil
		}
		next := queued[0]
		var l Launch
		if err := json.Unmarshal(next.Payload, &l); err != nil {
			q.log.Error("a queued launch cannot be read; dropped", "pr", scope, "key", next.Key, "err", err)
			if err := q.queue.DropLaunch(ctx, scope, next.Key); err != nil {
				return err
			}
			continue
		}
		if seen[RunID(l.Owner, l.Repo, l.Key)] {
			// Started before a crash kept it queued; it has run since.
			if err := q.queue.DropLaunch(ctx, scope, next.Key); err != nil {
				return err
			}
			continue
		}
		id, err := q.actions.Launch(ctx, l)
		var later *RetryLater
		if errors.As(err, &later) {
			return err
		}
		if err != nil {
			var user *LaunchError
			reason := "something went wrong; ask again with `/iterion run`"
			if errors.As(err, &user) {
				reason = user.Msg
			} else {
				q.log.Error("starting a queued run failed", "pr", scope, "key", next.Key, "err", err)
			}
			if err := q.drop(ctx, t, scope, next, "it could not start: "+reason); err != nil {
				return err
			}
			continue
		}
		// Dropped first: a post GitHub refuses must not leave the started
		// launch at the head of the queue.
		if err := q.queue.DropLaunch(ctx, scope, next.Key); err != nil {
			return err
		}
		text := fmt.Sprintf("@%s started queued run `%s` of `%s` on %s.", l.Actor, id, l.Workflow, shortSHA(l.Ref))
		_, err = q.replies.Post(ctx, t.InstallationID, t.Owner, t.Repo, t.PR, "queued-"+l.Key, text)
		return err
	}
}

// drop removes a queued launch and tells whoever asked for it why.
func (q *prQueue) drop(ctx context.Context, t Trigger, scope string, ql store.QueuedLaunch, why string) error {
	var l Launch
	if err := json.Unmarshal(ql.Payload, &l); err == nil && l.Actor != "" {
		text := fmt.Sprintf("@%s the queued run of `%s` was dropped: %s", l.Actor, l.Workflow, Disarm(why))
		if _, err := q.replies.Post(ctx, t.InstallationID, t.Owner, t.Repo, t.PR, "queued-"+ql.Key, text); err != nil {
			return err
		}
	}
	return q.queue.DropLaunch(ctx, scope, ql.Key)
}
