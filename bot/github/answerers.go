package github

import (
	"context"
	"errors"
	"slices"

	"github.com/iterion-bot/iterion/bot/repoconfig"
	"github.com/iterion-bot/iterion/engine"
)

// MayAnswer reports whether the GitHub user login may answer the
// questions of run, a run of one of the App's repositories, wherever the
// answer comes from (Slack, the admin page): the check a PR answer gets,
// asked live of the API. login may answer with write permission on the
// repository, or when the repository's .iterion.yml on its default branch
// lists it under answerers. A run GitHub did not start is false: its
// repository's permissions say nothing of it.
func (s *Service) MayAnswer(ctx context.Context, run *engine.Run, login string) (bool, error) {
	o, ok := OriginOf(run)
	if !ok || o.Installation == 0 || !ValidLogin(login) {
		return false, nil
	}
	owner, repo := o.split()
	if ok, err := s.app.CanWrite(ctx, o.Installation, owner, repo, login); err != nil || ok {
		return ok, err
	}
	c, err := s.app.Installation(o.Installation)
	if err != nil {
		return false, err
	}
	cfg, _, err := FetchConfig(ctx, c, owner, repo, "")
	var bad repoconfig.Errors
	if errors.As(err, &bad) {
		return false, nil // a file with mistakes names no answerers
	}
	if err != nil {
		return false, err
	}
	return slices.Contains(cfg.Answerers, login), nil
}

// ValidLogin reports whether login is a person's GitHub login (no App's
// bot), as the server's configuration and account links name them.
func ValidLogin(login string) bool { return accountName.MatchString(login) }
