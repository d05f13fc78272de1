package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	gh "github.com/google/go-github/v62/github"

	"github.com/iterion-bot/iterion/bot/repoconfig"
)

// FetchConfig reads owner/repo's .iterion.yml at ref (a branch, tag or
// commit; the default branch for PR comments, so a PR cannot change the
// rules it runs under). A repository without the file gets the defaults
// and found false. A file with mistakes returns repoconfig.Errors, each
// at its line and column, for the bot to reply with.
func FetchConfig(ctx context.Context, c *gh.Client, owner, repo, ref string) (cfg *repoconfig.Config, found bool, err error) {
	file, _, resp, err := c.Repositories.GetContents(ctx, owner, repo, repoconfig.FileName, &gh.RepositoryContentGetOptions{Ref: ref})
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		defaults, perr := repoconfig.Parse(nil)
		return defaults, false, perr
	}
	if err != nil {
		return nil, false, classify(fmt.Sprintf("reading %s of %s/%s at %s", repoconfig.FileName, owner, repo, ref), resp, err)
	}
	if file == nil {
		return nil, false, fmt.Errorf("%s of %s/%s is a directory, not a file", repoconfig.FileName, owner, repo)
	}
	if file.GetSize() > repoconfig.MaxSize {
		return nil, true, repoconfig.Errors{{Line: 1, Column: 1, Message: fmt.Sprintf("the file is %d bytes, more than the %d allowed", file.GetSize(), repoconfig.MaxSize)}}
	}
	text, err := file.GetContent()
	if err != nil {
		return nil, true, fmt.Errorf("decoding %s of %s/%s: %w", repoconfig.FileName, owner, repo, err)
	}
	cfg, err = repoconfig.Parse([]byte(text))
	return cfg, true, err
}

// ErrNoFile is FetchFile's error for a path the repository does not hold
// at the ref.
var ErrNoFile = errors.New("no such file")

// FetchFile reads a file of owner/repo at ref through the contents API, up
// to max bytes.
func FetchFile(ctx context.Context, c *gh.Client, owner, repo, path, ref string, max int) ([]byte, error) {
	file, _, resp, err := c.Repositories.GetContents(ctx, owner, repo, path, &gh.RepositoryContentGetOptions{Ref: ref})
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return nil, ErrNoFile
	}
	if err != nil {
		return nil, classify(fmt.Sprintf("reading %s of %s/%s at %s", path, owner, repo, ref), resp, err)
	}
	if file == nil {
		return nil, fmt.Errorf("%s is a directory, not a file", path)
	}
	if file.GetSize() > max {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d allowed", path, file.GetSize(), max)
	}
	text, err := file.GetContent()
	if err != nil {
		return nil, fmt.Errorf("decoding %s of %s/%s: %w", path, owner, repo, err)
	}
	return []byte(text), nil
}
