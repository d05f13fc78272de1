package github

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"
)

// Trigger kinds: what a delivery asks of the bot.
const (
	TriggerComment     = "comment"      // a PR comment with /iterion commands (or near misses)
	TriggerPullRequest = "pull_request" // a PR opened, updated or reopened
	TriggerPush        = "push"         // a branch push
	// TriggerRerun is a click on a check run's (or suite's) Re-run.
	TriggerRerun = "rerun"
	// TriggerInstallation is the App installed, uninstalled, suspended or
	// unsuspended on an account (Action says which).
	TriggerInstallation = "installation"
	// TriggerRevoked is a person revoking their authorization of the App
	// (github_app_authorization): their account links go (SenderID).
	TriggerRevoked = "revoked"
)

// Trigger is a delivery decoded into what the bot acts on. Only the fields
// of its Kind are set.
type Trigger struct {
	Kind           string
	InstallationID int64
	Owner, Repo    string
	DefaultBranch  string
	// Sender is the login that caused the event; SenderID its numeric id
	// (set for TriggerRevoked).
	Sender   string
	SenderID int64
	// PR is the pull request's number (comment and pull_request), or for
	// a comment on an issue, the issue's.
	PR int
	// OnIssue is set for a comment on an issue that is no pull request
	// (a schedule's tracking issue, where its runs' questions are
	// answered like on a pull request).
	OnIssue bool
	// Action is the pull_request action (opened, synchronize, reopened,
	// ready_for_review, labeled).
	Action string
	// HeadSHA and HeadRef are the PR head (pull_request) or, for a push,
	// the pushed commit and branch (without refs/heads/).
	HeadSHA, HeadRef string
	// Fork is set when the PR head lives in another repository: its code
	// is not the repository owners' and runs only after approval.
	Fork bool
	// CommentID, Commands and Problems come from a comment.
	CommentID   int64
	CommentBody string
	Commands    []Command
	Problems    []Problem
	// Reply is set for a comment without commands that quotes questions.
	Reply *Reply
	// CommentAt is when the comment was written (set for comments read
	// back at start-up).
	CommentAt time.Time
	// PullRequest is the pull request a pull_request event carries.
	PullRequest *gh.PullRequest
	// RerunID is the run a Re-run click on its check run asks to run
	// again (the check run's external id); empty for a whole suite's.
	RerunID string
}

// here names t's place in a reply: "this pull request", "this issue".
func (t Trigger) here() string {
	if t.OnIssue {
		return "this issue"
	}
	return "this pull request"
}

// Ignored is the error of a delivery the bot has nothing to do with; its
// reason goes to the debug log, never to GitHub.
type Ignored struct{ Reason string }

func (e *Ignored) Error() string { return "ignored: " + e.Reason }

// IsIgnored reports whether err says the delivery needs nothing.
func IsIgnored(err error) bool {
	var ig *Ignored
	return errors.As(err, &ig)
}

func ignored(format string, args ...any) error {
	return &Ignored{Reason: fmt.Sprintf(format, args...)}
}

// Decode turns a stored delivery's event type and payload into a Trigger.
// Events and actions the bot does not act on, comments by bots (its own
// included), and comments without any /iterion line come back as
// *Ignored; a payload that does not parse is an ordinary error.
func Decode(event string, payload []byte) (Trigger, error) {
	switch event {
	case "issue_comment", "pull_request", "push", "ping", "installation", "check_run", "check_suite", "github_app_authorization":
	default:
		return Trigger{}, ignored("event %q is not one iterion acts on", event)
	}
	ev, err := gh.ParseWebHook(event, payload)
	if err != nil {
		return Trigger{}, fmt.Errorf("decode the %s payload: %w", event, err)
	}
	t, err := decode(event, ev)
	if err == nil && t.Sender != "" && !validSender(t.Sender) {
		// The sender's login reaches API paths too (the permission check).
		return Trigger{}, ignored("the payload's sender %q is no GitHub login", t.Sender)
	}
	return t, err
}

// decode turns a parsed payload into its trigger.
func decode(event string, ev any) (Trigger, error) {
	switch e := ev.(type) {
	case *gh.IssueCommentEvent:
		return decodeComment(e)
	case *gh.PullRequestEvent:
		return decodePullRequest(e)
	case *gh.PushEvent:
		return decodePush(e)
	case *gh.PingEvent:
		return Trigger{}, ignored("ping")
	case *gh.InstallationEvent:
		return decodeInstallation(e)
	case *gh.CheckRunEvent:
		return decodeCheckRun(e)
	case *gh.CheckSuiteEvent:
		return decodeCheckSuite(e)
	case *gh.GitHubAppAuthorizationEvent:
		if e.GetAction() != "revoked" || e.GetSender().GetID() == 0 {
			return Trigger{}, ignored("github_app_authorization %s", e.GetAction())
		}
		return Trigger{Kind: TriggerRevoked, Sender: e.GetSender().GetLogin(), SenderID: e.GetSender().GetID()}, nil
	default:
		return Trigger{}, ignored("event %q is not one iterion acts on", event)
	}
}

// GitHub's names: an account is letters, digits and single hyphens, at
// most 39, not starting or ending with a hyphen (older accounts may have
// more hyphens, which stay valid); a repository is letters, digits, '.',
// '-' and '_', at most 100, and never "." or "..". A payload naming
// anything else is refused before a name reaches an API path, where
// go-github would not escape it ("../../etc").
var (
	accountName = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?$`)
	repoName    = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
)

// validSender reports whether login is a GitHub login: an account's, or
// an App's bot ("dependabot[bot]").
func validSender(login string) bool {
	return accountName.MatchString(strings.TrimSuffix(login, "[bot]"))
}

// validRepo reports whether owner/name are names GitHub gives.
func validRepo(owner, name string) bool {
	return accountName.MatchString(owner) && repoName.MatchString(name) && name != "." && name != ".."
}

func base(repo *gh.Repository, inst *gh.Installation) (Trigger, error) {
	if repo == nil || repo.GetOwner().GetLogin() == "" || repo.GetName() == "" {
		return Trigger{}, errors.New("the payload names no repository")
	}
	if !validRepo(repo.GetOwner().GetLogin(), repo.GetName()) {
		return Trigger{}, ignored("the payload names a repository %q/%q that is no GitHub name", repo.GetOwner().GetLogin(), repo.GetName())
	}
	if inst.GetID() == 0 {
		// A repository's own webhook pointed at the bot, not the App's.
		return Trigger{}, ignored("the payload names no installation (a repository webhook, not the App's)")
	}
	return Trigger{
		InstallationID: inst.GetID(),
		Owner:          repo.GetOwner().GetLogin(),
		Repo:           repo.GetName(),
		DefaultBranch:  repo.GetDefaultBranch(),
	}, nil
}

func decodeComment(e *gh.IssueCommentEvent) (Trigger, error) {
	if e.GetAction() != "created" {
		// Edits would run a command twice; deletions take nothing back.
		return Trigger{}, ignored("comment %s", e.GetAction())
	}
	// IsPullRequest dereferences its receiver: a payload without an issue
	// must not reach it.
	if e.Issue == nil || e.Issue.GetNumber() <= 0 {
		return Trigger{}, ignored("comment without its issue")
	}
	if e.GetComment().GetUser().GetType() == "Bot" || e.GetSender().GetType() == "Bot" {
		return Trigger{}, ignored("comment by the bot %s", e.GetSender().GetLogin())
	}
	t, err := base(e.GetRepo(), e.GetInstallation())
	if err != nil {
		return Trigger{}, err
	}
	cmds, problems := ParseComment(e.GetComment().GetBody())
	if len(cmds) == 0 && len(problems) == 0 {
		// A comment quoting an iterion question answers it.
		r, ok := ParseReply(e.GetComment().GetBody())
		if !ok {
			return Trigger{}, ignored("no /iterion command in the comment")
		}
		t.Reply = &r
	}
	t.Kind = TriggerComment
	t.Sender = e.GetComment().GetUser().GetLogin()
	t.PR = e.GetIssue().GetNumber()
	t.OnIssue = !e.Issue.IsPullRequest()
	t.CommentID = e.GetComment().GetID()
	t.CommentBody = e.GetComment().GetBody()
	t.Commands, t.Problems = cmds, problems
	return t, nil
}

func decodePullRequest(e *gh.PullRequestEvent) (Trigger, error) {
	switch e.GetAction() {
	// The actions .iterion.yml can map to a workflow (repoconfig); the
	// repository's configuration decides which of them start a run.
	case "opened", "synchronize", "reopened", "ready_for_review", "labeled":
	default:
		return Trigger{}, ignored("pull_request %s", e.GetAction())
	}
	t, err := base(e.GetRepo(), e.GetInstallation())
	if err != nil {
		return Trigger{}, err
	}
	pr := e.GetPullRequest()
	t.PullRequest = pr
	t.Kind = TriggerPullRequest
	t.Sender = e.GetSender().GetLogin()
	t.PR = e.GetNumber()
	t.Action = e.GetAction()
	t.HeadSHA = pr.GetHead().GetSHA()
	t.HeadRef = pr.GetHead().GetRef()
	t.Fork = pr.GetHead().GetRepo().GetFullName() != e.GetRepo().GetFullName()
	return t, nil
}

// decodeCheckRun reads a Re-run click on one of the App's check runs.
// GitHub sends check_run events to the App that made the check run only;
// the run it names is checked against the repository when handled.
func decodeCheckRun(e *gh.CheckRunEvent) (Trigger, error) {
	if e.GetAction() != "rerequested" {
		return Trigger{}, ignored("check_run %s", e.GetAction())
	}
	t, err := base(e.GetRepo(), e.GetInstallation())
	if err != nil {
		return Trigger{}, err
	}
	cr := e.GetCheckRun()
	if cr == nil || cr.GetExternalID() == "" || cr.GetHeadSHA() == "" {
		return Trigger{}, ignored("check_run rerequested without an external id or head")
	}
	t.Kind, t.Sender, t.HeadSHA, t.RerunID = TriggerRerun, e.GetSender().GetLogin(), cr.GetHeadSHA(), cr.GetExternalID()
	if prs := cr.PullRequests; len(prs) > 0 {
		t.PR = prs[0].GetNumber()
	}
	return t, nil
}

// decodeCheckSuite reads a Re-run click on a whole check suite: every
// workflow the App ran on its head runs again.
func decodeCheckSuite(e *gh.CheckSuiteEvent) (Trigger, error) {
	if e.GetAction() != "rerequested" {
		return Trigger{}, ignored("check_suite %s", e.GetAction())
	}
	t, err := base(e.GetRepo(), e.GetInstallation())
	if err != nil {
		return Trigger{}, err
	}
	cs := e.GetCheckSuite()
	if cs == nil || cs.GetHeadSHA() == "" {
		return Trigger{}, ignored("check_suite rerequested without its suite or head")
	}
	t.Kind, t.Sender, t.HeadSHA = TriggerRerun, e.GetSender().GetLogin(), cs.GetHeadSHA()
	if prs := cs.PullRequests; len(prs) > 0 {
		t.PR = prs[0].GetNumber()
	}
	if t.PR == 0 {
		// A fork's head is not matched to its PR by the Checks API; the
		// suite's runs are found by their PR, so there is nothing to find.
		return Trigger{}, ignored("check_suite rerequested without a pull request")
	}
	return t, nil
}

// decodeInstallation reads the installation events that change whether
// GitHub mints the App tokens for the installation.
func decodeInstallation(e *gh.InstallationEvent) (Trigger, error) {
	switch e.GetAction() {
	case "created", "deleted", "suspend", "unsuspend", "new_permissions_accepted":
	default:
		return Trigger{}, ignored("installation %s", e.GetAction())
	}
	if e.GetInstallation().GetID() == 0 {
		return Trigger{}, ignored("installation %s without an installation id", e.GetAction())
	}
	return Trigger{
		Kind: TriggerInstallation, InstallationID: e.GetInstallation().GetID(),
		Owner: e.GetInstallation().GetAccount().GetLogin(), Sender: e.GetSender().GetLogin(), Action: e.GetAction(),
	}, nil
}

func decodePush(e *gh.PushEvent) (Trigger, error) {
	const heads = "refs/heads/"
	ref := e.GetRef()
	if len(ref) <= len(heads) || ref[:len(heads)] != heads {
		return Trigger{}, ignored("push to %s, not a branch", ref)
	}
	if e.GetDeleted() {
		return Trigger{}, ignored("branch %s deleted", ref[len(heads):])
	}
	owner := e.GetRepo().GetOwner().GetLogin()
	if owner == "" {
		// Push payloads name the owner under "name" in older deliveries.
		owner = e.GetRepo().GetOwner().GetName()
	}
	if owner == "" || e.GetRepo().GetName() == "" {
		return Trigger{}, errors.New("the payload names no repository")
	}
	if !validRepo(owner, e.GetRepo().GetName()) {
		return Trigger{}, ignored("the payload names a repository %q/%q that is no GitHub name", owner, e.GetRepo().GetName())
	}
	if e.GetInstallation().GetID() == 0 {
		return Trigger{}, errors.New("the payload names no installation")
	}
	return Trigger{
		Kind:           TriggerPush,
		InstallationID: e.GetInstallation().GetID(),
		Owner:          owner,
		Repo:           e.GetRepo().GetName(),
		DefaultBranch:  e.GetRepo().GetDefaultBranch(),
		Sender:         e.GetSender().GetLogin(),
		HeadSHA:        e.GetAfter(),
		HeadRef:        ref[len(heads):],
	}, nil
}
