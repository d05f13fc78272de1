package github

import "context"

// canceller stops runs.
type canceller interface {
	// Cancel stops a run that is not over (executing or paused) and
	// reports whether it did.
	Cancel(ctx context.Context, runID, reason string) (bool, error)
}

// cancelCommand answers `/iterion cancel [RUN]`: it stops the PR's run
// named, or its newest one still going. It needs write permission.
type cancelCommand struct {
	perms  Permissions
	runs   refRuns
	runner canceller
}

func (c cancelCommand) do(ctx context.Context, req request, cmd Command) (outcome, error) {
	t := req.t
	if refusal, err := mayChange(ctx, c.perms, t, req.cfg, CmdCancel); err != nil || refusal != "" {
		return outcome{text: refusal}, err
	}
	runs, err := prRuns(ctx, c.runs, t)
	if err != nil {
		return outcome{}, err
	}
	for _, r := range runs {
		if cmd.RunID != "" && r.ID != cmd.RunID {
			continue
		}
		if cmd.RunID == "" && r.Status.Terminal() {
			continue
		}
		if r.Status.Terminal() {
			return say("run `%s` already ended (%s).", r.ID, r.Status), nil
		}
		stopped, err := c.runner.Cancel(ctx, r.ID, "cancelled by "+t.Sender+" on GitHub")
		if err != nil {
			return outcome{}, err
		}
		if !stopped {
			return say("run `%s` is %s; there is nothing to cancel.", r.ID, r.Status), nil
		}
		return say("run `%s` cancelled.", r.ID), nil
	}
	if cmd.RunID != "" {
		return say("no run `%s` on %s; `/iterion status` lists them.", inert(cmd.RunID), t.here()), nil
	}
	return say("no run in progress on %s.", t.here()), nil
}
