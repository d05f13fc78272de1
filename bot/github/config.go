package github

import (
	"context"
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
