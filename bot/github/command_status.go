package github

import (
	"context"
	"fmt"
	"strings"

	"github.com/iterion-bot/iterion/engine"
)

// helpCommand answers `/iterion help`.
type helpCommand struct{}

func (helpCommand) do(context.Context, request, Command) (outcome, error) {
	return outcome{text: HelpText}, nil
}

// statusReader is what `/iterion status` reads: a PR's runs and their
// open questions.
type statusReader interface {
	refRuns
	Interactions(ctx context.Context, runID string) ([]*engine.Interaction, error)
	ShortIDs(ctx context.Context, scope, runID string) (map[string]int, error)
}

// statusCommand answers `/iterion status`: the PR's runs, newest first,
// with their open questions. Anyone may ask.
type statusCommand struct{ runs statusReader }

func (s statusCommand) do(ctx context.Context, req request, _ Command) (outcome, error) {
	t := req.t
	runs, err := prRuns(ctx, s.runs, t)
	if err != nil {
		return outcome{}, err
	}
	switch {
	case len(runs) == 0 && t.OnIssue:
		return outcome{text: "no iterion runs on this issue: only a schedule's tracking issue shows runs."}, nil
	case len(runs) == 0:
		return outcome{text: "no iterion runs on this pull request yet; `/iterion run` starts one."}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "iterion runs on %s:\n", t.here())
	for _, r := range runs {
		fmt.Fprintf(&b, "- `%s` %s: %s\n", r.ID, r.Workflow, r.Status)
		ixs, err := s.runs.Interactions(ctx, r.ID)
		if err != nil {
			return outcome{}, err
		}
		numbers, err := s.runs.ShortIDs(ctx, PRScope(t.Owner+"/"+t.Repo, t.PR), r.ID)
		if err != nil {
			return outcome{}, err
		}
		for _, ix := range ixs {
			if !ix.Pending() || ix.Kind == engine.KindAwait || r.Status.Terminal() {
				continue
			}
			id := "`" + ix.ID + "`"
			if n := numbers[ix.ID]; n > 0 {
				id = fmt.Sprintf("Q%d (%s)", n, id)
			}
			fmt.Fprintf(&b, "  - open question %s: %s\n", id, Disarm(oneLine(questionText(ix), 200)))
		}
	}
	return outcome{text: b.String()}, nil
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}
