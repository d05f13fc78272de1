package github

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/bot/repoconfig"
	"github.com/iterion-bot/iterion/engine"
)

// Changes back to the repository: a finished run of a workflow that
// .iterion.yml's changes: names proposes what it changed in its
// workspace. A scheduled run pushes a branch of its own and opens a pull
// request onto the default branch; a run asked for on a pull request
// pushes one commit onto the pull request's own branch, unless the pull
// request comes from a fork. The commit is made here, outside the
// sandbox, in a git directory of the server's (the workspace's own .git
// is the run's to write, and is never read), with the installation
// token, and only once every changed file passed the secrets scan: a
// file that holds a secret of this server stops the proposal. A run that
// changed nothing proposes nothing.

// postChanges is the name of what a run's proposal came to, among the
// run's posts: a pull request's address, a commit, or why nothing.
const postChanges = "github-changes"

// Bounds of a proposal: what an agent wrote is not all worth pushing.
const (
	maxChangedFiles = 1000
	maxChangedBytes = 50 << 20
)

// changeRefusal is a proposal refused for a reason the repository's
// people can act on; Msg says it.
type changeRefusal struct{ Msg string }

func (e *changeRefusal) Error() string { return e.Msg }

// proposeChanges proposes the changes of run, finished, when its
// repository asks for it. Only GitHub's "later" (and the store's
// failures) are errors, for the relay to try again; a proposal refused
// is said where the run is shown, and recorded, so it is not tried
// twice.
func (s *Service) proposeChanges(ctx context.Context, run *engine.Run) error {
	o, ok := OriginOf(run)
	if !ok || o.Installation == 0 || (o.PR == 0 && o.Schedule == "") {
		return nil
	}
	posts, err := s.db.RunPosts(ctx, run.ID)
	if err != nil {
		return err
	}
	if posts[postChanges] != "" {
		return nil // proposed (or refused) before
	}
	owner, repo := o.split()
	client, err := s.app.Installation(o.Installation)
	if err != nil {
		return err
	}
	info, resp, err := client.Repositories.Get(ctx, owner, repo)
	if err != nil {
		return classify(fmt.Sprintf("reading %s", o.Repo), resp, err)
	}
	cfg, _, err := FetchConfig(ctx, client, owner, repo, info.GetDefaultBranch())
	if errors.As(err, new(repoconfig.Errors)) {
		return s.changesSaid(ctx, run, o, "refused: .iterion.yml has mistakes",
			fmt.Sprintf("The changes of run `%s` were not proposed: %s on `%s` has mistakes.", run.ID, repoconfig.FileName, inert(info.GetDefaultBranch())))
	}
	if err != nil {
		return err
	}
	if !cfg.Proposes(run.Workflow) {
		return nil
	}
	dir := filepath.Join(s.opts.Workspaces, run.ID)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		s.log.Warn("a finished run's workspace is gone: its changes cannot be proposed", "run", run.ID)
		return nil
	}
	var branch string
	if o.PR != 0 {
		pr, resp, err := client.PullRequests.Get(ctx, owner, repo, o.PR)
		if err != nil {
			return classify(fmt.Sprintf("reading %s#%d", o.Repo, o.PR), resp, err)
		}
		if isFork(pr) {
			return s.changesSaid(ctx, run, o, "refused: fork",
				fmt.Sprintf("The changes of run `%s` were not pushed: this pull request comes from a fork, and iterion pushes only to branches of %s.", run.ID, o.Repo))
		}
		branch = pr.GetHead().GetRef()
		if branch == info.GetDefaultBranch() {
			// A pull request from the default branch onto another: a push
			// would land on the default branch unreviewed.
			return s.changesSaid(ctx, run, o, "refused: default branch",
				fmt.Sprintf("The changes of run `%s` were not pushed: this pull request's branch is `%s`, the default branch, which iterion never pushes to.", run.ID, inert(branch)))
		}
	} else {
		branch = cmp.Or(cfg.Changes.BranchPrefix, repoconfig.DefaultBranchPrefix) + shortSchedule(o.Schedule) + "/" + run.ID
	}
	if !validBranch(branch) {
		return s.changesSaid(ctx, run, o, "refused: branch", fmt.Sprintf("The changes of run `%s` were not pushed: `%s` is not a branch name git takes.", run.ID, inert(branch)))
	}
	token, err := s.app.Token(ctx, o.Installation)
	if err != nil {
		return err
	}
	ixs, err := s.db.Interactions(ctx, run.ID)
	if err != nil {
		return err
	}
	msg := commitMessage(run, o)
	p := proposal{dir: dir, gitDir: dir + ".changes.git", cloneURL: s.cloneURL(owner, repo), base: o.HeadSHA, token: token,
		message: msg, when: cmp.Or(run.FinishedAt, run.UpdatedAt), login: s.replies.login, redactor: s.opts.Redactor}
	defer os.RemoveAll(p.gitDir)
	commit, files, err := p.commit(ctx)
	var refused *changeRefusal
	switch {
	case errors.As(err, &refused):
		return s.changesSaid(ctx, run, o, "refused: "+oneLine(refused.Msg, 200), fmt.Sprintf("The changes of run `%s` were not proposed: %s", run.ID, refused.Msg))
	case err != nil:
		return err
	case commit == "":
		s.log.Info("a finished run changed nothing: nothing is proposed", "run", run.ID)
		return s.db.SetRunPost(ctx, run.ID, postChanges, "none")
	}
	if err := p.push(ctx, commit, branch); errors.As(err, &refused) {
		return s.changesSaid(ctx, run, o, "refused: "+oneLine(refused.Msg, 200), fmt.Sprintf("The changes of run `%s` were not pushed: %s", run.ID, refused.Msg))
	} else if err != nil {
		return err
	}
	if o.PR != 0 {
		s.log.Info("a run's changes are pushed to its pull request", "run", run.ID, "pr", o.PR, "commit", commit)
		return s.changesSaid(ctx, run, o, commit, fmt.Sprintf("Pushed %s to `%s` with the changes of run `%s` (%s).", shortSHA(commit), inert(branch), run.ID, fileCount(files)))
	}
	pr, err := s.openPull(ctx, client, run, o, info.GetDefaultBranch(), branch, files, ixs, posts)
	if errors.As(err, &refused) {
		return s.changesSaid(ctx, run, o, "refused: "+oneLine(refused.Msg, 200), fmt.Sprintf("The changes of run `%s` were pushed to `%s`, but no pull request was opened: %s", run.ID, inert(branch), refused.Msg))
	}
	if err != nil {
		return err
	}
	s.log.Info("a scheduled run's changes are proposed", "run", run.ID, "pull", pr.GetNumber())
	return s.changesSaid(ctx, run, o, pr.GetHTMLURL(), fmt.Sprintf("Run `%s` proposes its changes in #%d (%s).", run.ID, pr.GetNumber(), fileCount(files)))
}

// changesSaid records what run's proposal came to and says text where
// the run is shown (its pull request, its tracking issue).
func (s *Service) changesSaid(ctx context.Context, run *engine.Run, o Origin, record, text string) error {
	if n := o.Thread(); n != 0 {
		owner, repo := o.split()
		if _, err := s.replies.Post(ctx, o.Installation, owner, repo, n, "changes-"+run.ID, text); err != nil {
			return err
		}
	} else {
		s.log.Info("a run's changes", "run", run.ID, "outcome", text)
	}
	return s.db.SetRunPost(ctx, run.ID, postChanges, record)
}

func fileCount(files []string) string {
	if len(files) == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", len(files))
}

// cloneURL is where owner/repo is cloned from and pushed to.
func (s *Service) cloneURL(owner, repo string) string {
	return strings.TrimRight(cmp.Or(s.opts.GitURL, DefaultGitURL), "/") + "/" + owner + "/" + repo + ".git"
}

// commitMessage is the proposal's commit message; like the commit, it
// is the same each time the run's end is met again.
func commitMessage(run *engine.Run, o Origin) string {
	subject := fmt.Sprintf("iterion: the changes of run %s (%s)", run.ID, run.Workflow)
	if o.Schedule != "" {
		subject = fmt.Sprintf("iterion: schedule %s, tick %s", shortSchedule(o.Schedule), o.Tick)
	}
	return fmt.Sprintf("%s\n\nMade by iterion run %s of workflow %s.\n", oneLine(subject, 200), run.ID, oneLine(run.Workflow, 100))
}

// openPull opens the pull request of a scheduled run's branch onto base,
// or finds the one opened before.
func (s *Service) openPull(ctx context.Context, client *gh.Client, run *engine.Run, o Origin, base, branch string, files []string, ixs []*engine.Interaction, posts map[string]string) (*gh.PullRequest, error) {
	owner, repo := o.split()
	existing, resp, err := client.PullRequests.List(ctx, owner, repo, &gh.PullRequestListOptions{Head: owner + ":" + branch, State: "all"})
	if err != nil {
		return nil, classify(fmt.Sprintf("listing the pull requests of %s", branch), resp, err)
	}
	if len(existing) > 0 {
		return existing[0], nil
	}
	title := fmt.Sprintf("iterion: %s (schedule %s)", run.Workflow, shortSchedule(o.Schedule))
	body := s.opts.Redactor.String(pullBody(run, o, files, ixs, s.runLink(run.ID, posts)))
	if len(body) > MaxCommentBytes {
		body = body[:MaxCommentBytes-len(truncatedNote)] + truncatedNote
	}
	pr, resp, err := client.PullRequests.Create(ctx, owner, repo, &gh.NewPullRequest{Title: &title, Head: &branch, Base: &base, Body: &body})
	if resp != nil && resp.StatusCode == http.StatusForbidden {
		return nil, &changeRefusal{Msg: fmt.Sprintf("GitHub refused it (%s): the App needs the *Pull requests: write* permission on %s.", resp.Status, o.Repo)}
	}
	if err != nil {
		return nil, classify(fmt.Sprintf("opening the pull request of %s", branch), resp, err)
	}
	return pr, nil
}

// runLink is the address of run id: on the admin page when the server
// has a public address, else its status comment.
func (s *Service) runLink(id string, posts map[string]string) string {
	if u := strings.TrimRight(s.opts.PublicURL, "/"); u != "" {
		return u + "/runs/" + id
	}
	return posts[postStatusURL]
}

// pullBody is a scheduled run's pull request: the run, linked, the
// questions it asked and who answered them, and the files changed.
func pullBody(run *engine.Run, o Origin, files []string, ixs []*engine.Interaction, link string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Changes proposed by iterion run `%s` of workflow `%s`, started by schedule `%s` (tick %s).\n\n",
		inert(run.ID), inert(run.Workflow), inert(shortSchedule(o.Schedule)), inert(o.Tick))
	if link != "" {
		fmt.Fprintf(&b, "The run: %s\n\n", link)
	}
	var answered []*engine.Interaction
	for _, ix := range ixs {
		if ix.Kind != engine.KindAwait && !ix.Pending() {
			answered = append(answered, ix)
		}
	}
	if len(answered) == 0 {
		b.WriteString("The run asked no question that was answered.\n")
	} else {
		b.WriteString("**Questions answered during the run:**\n\n")
		for _, ix := range answered {
			fmt.Fprintf(&b, "- from `%s`, answered by `%s` via %s:\n\n%s\n\n  Answer:\n\n%s\n\n", inert(ix.NodeID), inert(cmp.Or(ix.AnsweredBy, "someone")),
				plain(delivery.ViaWords(ix.Via), 100), indent(quote(questionText(ix))), indent(quote(answerText(ix))))
		}
	}
	b.WriteString("\n**Files changed:**\n\n")
	for i, f := range files {
		if i == 100 {
			fmt.Fprintf(&b, "- and %d more\n", len(files)-100)
			break
		}
		fmt.Fprintf(&b, "- `%s`\n", inert(f))
	}
	return b.String()
}

func indent(text string) string {
	return "  " + strings.ReplaceAll(text, "\n", "\n  ")
}

// proposal makes and pushes the commit of a workspace's changes.
type proposal struct {
	dir, gitDir string // the workspace and the server's git directory for it
	cloneURL    string
	base        string // the commit the run started from
	token       string
	message     string
	when        time.Time
	login       string
	redactor    *engine.Redactor
}

// git runs git on the proposal's git directory and work tree, outside
// the sandbox, with no configuration but what it sets: no hooks, no
// filters, no fsmonitor the workspace could name. The token travels in
// a header, as for the checkout, and is scrubbed from every message.
func (p *proposal) git(ctx context.Context, stdin []byte, extraEnv []string, args ...string) ([]byte, error) {
	auth := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + p.token))
	cmd := exec.CommandContext(ctx, "git", append([]string{
		"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.autocrlf=false", "-c", "core.symlinks=true",
		"--git-dir=" + p.gitDir, "--work-tree=" + p.dir,
	}, args...)...)
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + p.gitDir,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=http.extraHeader",
		"GIT_CONFIG_VALUE_0=Authorization: Basic " + auth,
	}, extraEnv...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(errOut.String(), p.token, "***"), auth, "***"))
		return out.Bytes(), &gitError{args: args[0], err: err, msg: msg}
	}
	return out.Bytes(), nil
}

// gitError is a git command that failed, with what it said.
type gitError struct {
	args string
	err  error
	msg  string
}

func (e *gitError) Error() string { return fmt.Sprintf("git %s: %v: %s", e.args, e.err, e.msg) }

// commit stages the workspace over the base commit's tree in the
// server's git directory and commits it: "" when nothing changed. Every
// changed file is read back from the index and scanned for the server's
// secrets (and for GitHub tokens); one that holds any, a nested
// repository, or changes past the bounds refuse the proposal. The commit
// is the same for the same workspace, base, message and time, so making
// it again after a crash pushes nothing new.
func (p *proposal) commit(ctx context.Context) (string, []string, error) {
	if !shaPattern.MatchString(p.base) {
		return "", nil, &changeRefusal{Msg: fmt.Sprintf("the run did not start from a known commit (%q).", p.base)}
	}
	if err := os.RemoveAll(p.gitDir); err != nil {
		return "", nil, err
	}
	steps := [][]string{
		{"init", "-q"},
		{"fetch", "-q", "--depth=1", "--no-tags", p.cloneURL, p.base},
		{"read-tree", p.base},
		// .git of the workspace, at any depth, is never staged: git passes
		// over directories of that name.
		{"add", "-A", "--", "."},
	}
	for _, args := range steps {
		_, err := p.git(ctx, nil, nil, args...)
		var ge *gitError
		if args[0] == "add" && errors.As(err, &ge) && ctx.Err() == nil {
			// What the run left in its workspace (a path git refuses, like
			// .GIT/config, a repository without a commit) stops git here
			// each time: it is said, never tried again.
			return "", nil, &changeRefusal{Msg: fmt.Sprintf("git refused what the run left in its workspace (%s). Nothing was pushed.", p.gitSaid(ge.msg))}
		}
		if err != nil {
			return "", nil, fmt.Errorf("staging the changes of %s: %w", p.dir, err)
		}
	}
	raw, err := p.git(ctx, nil, nil, "diff", "--cached", "--raw", "-z", "--no-renames", p.base)
	if err != nil {
		return "", nil, fmt.Errorf("listing the changes of %s: %w", p.dir, err)
	}
	changes := parseRaw(raw)
	if len(changes) == 0 {
		return "", nil, nil
	}
	if len(changes) > maxChangedFiles {
		return "", nil, &changeRefusal{Msg: fmt.Sprintf("the run changed %d files, more than the %d a proposal may hold.", len(changes), maxChangedFiles)}
	}
	redactor := p.redactor
	if redactor == nil {
		redactor = engine.NewRedactor() // GitHub's tokens, at least
	}
	var files, secret []string
	total := 0
	for _, c := range changes {
		files = append(files, c.path)
		if redactor.String(c.path) != c.path {
			secret = append(secret, "(a file name)")
			continue
		}
		if ciPath(c.path) {
			// A branch of the repository runs its CI workflows with the
			// repository's secrets: an agent's output never writes them.
			return "", nil, &changeRefusal{Msg: fmt.Sprintf("the run changed `%s`, a CI workflow of the repository, which a proposal never carries (it would run with the repository's secrets). Nothing was pushed; change it by hand.", inert(c.path))}
		}
		switch c.mode {
		case "160000":
			return "", nil, &changeRefusal{Msg: fmt.Sprintf("`%s` is a repository inside the workspace, which a proposal does not carry.", inert(c.path))}
		case "000000":
			continue // deleted
		}
		data, err := p.git(ctx, nil, nil, "cat-file", "blob", c.blob)
		if err != nil {
			return "", nil, fmt.Errorf("reading %s back: %w", c.path, err)
		}
		if total += len(data); total > maxChangedBytes {
			return "", nil, &changeRefusal{Msg: fmt.Sprintf("the changed files hold more than %d MiB, more than a proposal may.", maxChangedBytes>>20)}
		}
		if redactor.String(string(data)) != string(data) {
			secret = append(secret, "`"+inert(c.path)+"`")
		}
	}
	if len(secret) > 0 {
		slices.Sort(secret)
		return "", nil, &changeRefusal{Msg: "the secrets scan found a secret of this server in " + strings.Join(slices.Compact(secret), ", ") + ". Nothing was pushed; the run's workspace holds what it wrote."}
	}
	tree, err := p.git(ctx, nil, nil, "write-tree")
	if err != nil {
		return "", nil, fmt.Errorf("writing the tree of %s: %w", p.dir, err)
	}
	name := cmp.Or(p.login, "iterion[bot]")
	email := strings.TrimSuffix(name, "[bot]") + "[bot]@users.noreply.github.com"
	date := fmt.Sprintf("@%d +0000", p.when.Unix())
	env := []string{"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + email, "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=" + name, "GIT_COMMITTER_EMAIL=" + email, "GIT_COMMITTER_DATE=" + date}
	out, err := p.git(ctx, []byte(p.message), env, "commit-tree", strings.TrimSpace(string(tree)), "-p", p.base, "-F", "-")
	if err != nil {
		return "", nil, fmt.Errorf("committing the changes of %s: %w", p.dir, err)
	}
	return strings.TrimSpace(string(out)), files, nil
}

// push puts commit at branch of the repository, fast-forward only: a
// branch that moved since the run started refuses it.
func (p *proposal) push(ctx context.Context, commit, branch string) error {
	_, err := p.git(ctx, nil, nil, "push", "-q", "--no-verify", p.cloneURL, commit+":refs/heads/"+branch)
	var ge *gitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case !errors.As(err, &ge):
		return err
	case strings.Contains(ge.msg, "403") || strings.Contains(ge.msg, "denied"):
		return &changeRefusal{Msg: "GitHub refused the push: the App needs the *Contents: write* permission on the repository (and *Pull requests: write* for a scheduled run's pull request)."}
	case strings.Contains(ge.msg, "`workflows` permission"):
		return &changeRefusal{Msg: "GitHub refused the push: it changes a CI workflow, which needs the *Workflows* permission the App does not have (and a proposal should not carry)."}
	case strings.Contains(ge.msg, "non-fast-forward") || strings.Contains(ge.msg, "fetch first") || strings.Contains(ge.msg, "rejected"):
		return &changeRefusal{Msg: fmt.Sprintf("`%s` moved on since the run started from %s; push again by hand, or run the workflow again on the new head.", inert(branch), shortSHA(p.base))}
	}
	return &RetryLater{After: 30 * time.Second, Err: fmt.Errorf("pushing the changes to %s: %w", branch, err)}
}

// ciPath reports whether path is under .github/workflows or
// .github/actions (any case), whose files GitHub runs on a push.
func ciPath(path string) bool {
	l := strings.ToLower(path)
	return strings.HasPrefix(l, ".github/workflows/") || strings.HasPrefix(l, ".github/actions/")
}

// gitSaid is what git said, fit for a comment: its error lines, the
// server's paths left out, at most 300 characters.
func (p *proposal) gitSaid(msg string) string {
	var lines []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "error:") || strings.HasPrefix(l, "fatal:") {
			lines = append(lines, l)
		}
	}
	text := strings.Join(lines, "; ")
	for _, dir := range []string{p.gitDir, p.dir} {
		text = strings.ReplaceAll(text, dir+"/", "")
		text = strings.ReplaceAll(text, dir, "the workspace")
	}
	return "git said: `" + strings.ReplaceAll(noTags(Disarm(oneLine(cmp.Or(text, "nothing"), 300))), "`", "'") + "`"
}

// rawChange is a line of git diff --raw: the new mode and blob of a path.
type rawChange struct {
	mode, blob, path string
}

// parseRaw reads git diff --raw -z: ":old new oldsha newsha status\0path\0".
func parseRaw(raw []byte) []rawChange {
	var out []rawChange
	fields := strings.Split(string(raw), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		meta := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(meta) < 5 {
			break
		}
		out = append(out, rawChange{mode: meta[1], blob: meta[3], path: fields[i+1]})
	}
	return out
}
