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
//
// When base names a branch (the PR's base), it is fetched too, as the
// local branch of that name, with enough history on both sides for their
// merge base: `git diff base...HEAD` shows the PR's change. Both are
// fetched shallow and deepened until the merge base is there (or the
// whole history is).
func Checkout(ctx context.Context, dir, cloneURL, sha, base, token string) error {
	if !shaPattern.MatchString(sha) {
		return fmt.Errorf("checkout: %q is not a full commit id", sha)
	}
	if base != "" && !validBranch(base) {
		return fmt.Errorf("checkout: %q is not a branch name", base)
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
	// git runs here, outside the sandbox, on purpose: it holds the
	// installation token, which no sandboxed process may see, and it only
	// fetches and checks out: a fresh repository has no hooks, and a
	// checkout runs no filter the server's own git config does not name.
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			msg := strings.TrimSpace(strings.ReplaceAll(out.String(), token, "***"))
			msg = strings.ReplaceAll(msg, auth, "***")
			return fmt.Errorf("checkout of %s at %s: git %s: %v: %s", cloneURL, sha[:7], args[0], err, msg)
		}
		return nil
	}
	// GitHub serves any commit it has by id, a PR head from a fork too.
	refs := []string{sha}
	if base != "" {
		refs = append(refs, "+refs/heads/"+base+":refs/heads/"+base)
	}
	// A branch of its own, so the base fetched as its own branch is never
	// the one checked out.
	if err := run("init", "-q", "--initial-branch=iterion-checkout"); err != nil {
		return err
	}
	if err := run(append([]string{"fetch", "-q", "--depth=1", "--no-tags", cloneURL}, refs...)...); err != nil {
		return err
	}
	if err := run("checkout", "-q", "--detach", sha); err != nil {
		return err
	}
	if base == "" {
		return nil
	}
	for depth := 50; ; depth *= 4 {
		if run("merge-base", sha, "refs/heads/"+base) == nil {
			return nil
		}
		if depth > 50<<8 {
			// Past 3,200 commits: the whole history.
			return run(append([]string{"fetch", "-q", "--unshallow", "--no-tags", cloneURL}, refs...)...)
		}
		if err := run(append([]string{"fetch", "-q", fmt.Sprintf("--deepen=%d", depth), "--no-tags", cloneURL}, refs...)...); err != nil {
			return err
		}
	}
}

// validBranch reports whether name is a branch name git and GitHub take,
// and nothing an option or a refspec could be read from.
func validBranch(name string) bool {
	if name == "" || len(name) > 255 || strings.HasPrefix(name, "-") || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") ||
		strings.HasSuffix(name, ".lock") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.Contains(name, "//") {
		return false
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f || strings.ContainsRune("~^:?*[\\", r) {
			return false
		}
	}
	return true
}
