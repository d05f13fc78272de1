package github

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

var shaPattern = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// Checkout puts commit sha of the repository at cloneURL into dir (which
// must not exist yet), authenticating with an installation token. The
// token travels in an HTTP header set through git's environment: it is in
// no command line, no URL, no .git/config and no error message, so the
// workflow's tools and agents working in dir never see it.
func Checkout(ctx context.Context, dir, cloneURL, sha, token string) error {
	if !shaPattern.MatchString(sha) {
		return fmt.Errorf("checkout: %q is not a full commit id", sha)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir, // no user or system git configuration applies
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=http.extraHeader",
		"GIT_CONFIG_VALUE_0=Authorization: Basic " + auth,
	}
	steps := [][]string{
		{"init", "-q"},
		// GitHub serves any commit it has by id, a PR head from a fork too.
		{"fetch", "-q", "--depth=1", "--no-tags", cloneURL, sha},
		{"checkout", "-q", "--detach", "FETCH_HEAD"},
	}
	for _, args := range steps {
		// git runs here, outside the sandbox, on purpose: it holds the
		// installation token, which no sandboxed process may see, and it
		// only fetches and checks out: a fresh repository has no hooks, and
		// a checkout runs no filter the server's own git config does not
		// name.
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			msg := strings.TrimSpace(strings.ReplaceAll(out.String(), token, "***"))
			msg = strings.ReplaceAll(msg, auth, "***")
			return fmt.Errorf("checkout of %s at %s: git %s: %v: %s", cloneURL, sha[:7], args[0], err, msg)
		}
	}
	return nil
}
