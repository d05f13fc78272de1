package github

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const prOpened = `{
  "action": "opened", "number": 9,
  "pull_request": {"number": 9, "head": {"sha": "abc123", "ref": "feature", "repo": {"full_name": "acme/app"}}},
  "repository": {"full_name": "acme/app", "name": "app", "owner": {"login": "acme"}, "default_branch": "main"},
  "installation": {"id": 42}, "sender": {"login": "ana", "type": "User"}
}`

const pushMain = `{
  "ref": "refs/heads/main", "after": "def456", "deleted": false,
  "repository": {"full_name": "acme/app", "name": "app", "owner": {"name": "acme"}, "default_branch": "main"},
  "installation": {"id": 42}, "sender": {"login": "ana"}
}`

const checkRunRerequested = `{
  "action": "rerequested",
  "check_run": {"id": 5, "name": "iterion / review", "external_id": "gh-abc", "head_sha": "abc123", "pull_requests": [{"number": 9}]},
  "repository": {"full_name": "acme/app", "name": "app", "owner": {"login": "acme"}, "default_branch": "main"},
  "installation": {"id": 42}, "sender": {"login": "ana", "type": "User"}
}`

const checkSuiteRerequested = `{
  "action": "rerequested",
  "check_suite": {"id": 6, "head_sha": "abc123", "pull_requests": [{"number": 9}]},
  "repository": {"full_name": "acme/app", "name": "app", "owner": {"login": "acme"}, "default_branch": "main"},
  "installation": {"id": 42}, "sender": {"login": "ana", "type": "User"}
}`

const installationDeleted = `{
  "action": "deleted", "installation": {"id": 42, "account": {"login": "acme"}}, "sender": {"login": "root"}
}`

func TestDecode(t *testing.T) {
	comment, err := os.ReadFile("testdata/issue_comment.json")
	if err != nil {
		t.Fatal(err)
	}
	withBody := func(body string) string {
		return strings.Replace(string(comment), `"/iterion run review"`, body, 1)
	}
	cases := []struct {
		name, event, payload string
		want                 Trigger
		ignored              string // substring of the reason
		err                  string
	}{
		{name: "comment", event: "issue_comment", payload: string(comment), want: Trigger{
			Kind: TriggerComment, InstallationID: 42, Owner: "acme", Repo: "app", DefaultBranch: "main",
			Sender: "ana", PR: 7, CommentID: 1001, CommentBody: "/iterion run review",
			Commands: []Command{{Name: CmdRun, Line: 1, Workflow: "review", Vars: map[string]string{}}},
		}},
		{name: "near miss is kept for a reply", event: "issue_comment", payload: withBody(`"/iterion rnu"`), want: Trigger{
			Kind: TriggerComment, InstallationID: 42, Owner: "acme", Repo: "app", DefaultBranch: "main",
			Sender: "ana", PR: 7, CommentID: 1001, CommentBody: "/iterion rnu",
			Problems: []Problem{{Line: 1, Message: `unknown command "rnu"`, Suggestion: "/iterion run"}},
		}},
		{name: "plain comment", event: "issue_comment", payload: withBody(`"LGTM"`), ignored: "no /iterion command"},
		{name: "edited", event: "issue_comment", payload: strings.Replace(string(comment), `"created"`, `"edited"`, 1), ignored: "comment edited"},
		{name: "on an issue (a schedule's tracking issue)", event: "issue_comment", payload: strings.Replace(string(comment), `, "pull_request": {"url": "https://api.github.test/repos/acme/app/pulls/7"}`, "", 1), want: Trigger{
			Kind: TriggerComment, InstallationID: 42, Owner: "acme", Repo: "app", DefaultBranch: "main",
			Sender: "ana", PR: 7, OnIssue: true, CommentID: 1001, CommentBody: "/iterion run review",
			Commands: []Command{{Name: CmdRun, Line: 1, Workflow: "review", Vars: map[string]string{}}},
		}},
		{name: "bot comment", event: "issue_comment", payload: strings.ReplaceAll(string(comment), `"type": "User"`, `"type": "Bot"`), ignored: "by the bot"},
		{name: "sender is no login", event: "issue_comment", payload: strings.ReplaceAll(string(comment), `"login": "ana"`, `"login": "../../../orgs/acme"`), ignored: "is no GitHub login"},
		{name: "pr by a bot", event: "pull_request", payload: strings.Replace(prOpened, `"login": "ana", "type": "User"`, `"login": "dependabot[bot]", "type": "Bot"`, 1), want: Trigger{
			Kind: TriggerPullRequest, InstallationID: 42, Owner: "acme", Repo: "app", DefaultBranch: "main",
			Sender: "dependabot[bot]", PR: 9, Action: "opened", HeadSHA: "abc123", HeadRef: "feature",
		}},
		{name: "no installation", event: "issue_comment", payload: strings.Replace(string(comment), `"installation": {"id": 42},`, "", 1), ignored: "a repository webhook"},
		{name: "pr opened", event: "pull_request", payload: prOpened, want: Trigger{
			Kind: TriggerPullRequest, InstallationID: 42, Owner: "acme", Repo: "app", DefaultBranch: "main",
			Sender: "ana", PR: 9, Action: "opened", HeadSHA: "abc123", HeadRef: "feature",
		}},
		{name: "pr from fork", event: "pull_request", payload: strings.Replace(prOpened, `"repo": {"full_name": "acme/app"}`, `"repo": {"full_name": "mallory/app"}`, 1), want: Trigger{
			Kind: TriggerPullRequest, InstallationID: 42, Owner: "acme", Repo: "app", DefaultBranch: "main",
			Sender: "ana", PR: 9, Action: "opened", HeadSHA: "abc123", HeadRef: "feature", Fork: true,
		}},
		{name: "pr ready for review", event: "pull_request", payload: strings.Replace(prOpened, `"opened"`, `"ready_for_review"`, 1), want: Trigger{
			Kind: TriggerPullRequest, InstallationID: 42, Owner: "acme", Repo: "app", DefaultBranch: "main",
			Sender: "ana", PR: 9, Action: "ready_for_review", HeadSHA: "abc123", HeadRef: "feature",
		}},
		{name: "pr closed", event: "pull_request", payload: strings.Replace(prOpened, `"opened"`, `"closed"`, 1), ignored: "pull_request closed"},
		{name: "push", event: "push", payload: pushMain, want: Trigger{
			Kind: TriggerPush, InstallationID: 42, Owner: "acme", Repo: "app", DefaultBranch: "main",
			Sender: "ana", HeadSHA: "def456", HeadRef: "main",
		}},
		{name: "tag push", event: "push", payload: strings.Replace(pushMain, "refs/heads/main", "refs/tags/v1", 1), ignored: "not a branch"},
		{name: "branch deleted", event: "push", payload: strings.Replace(pushMain, `"deleted": false`, `"deleted": true`, 1), ignored: "deleted"},
		{name: "re-run of a check run", event: "check_run", payload: checkRunRerequested, want: Trigger{
			Kind: TriggerRerun, InstallationID: 42, Owner: "acme", Repo: "app", DefaultBranch: "main",
			Sender: "ana", PR: 9, HeadSHA: "abc123", RerunID: "gh-abc",
		}},
		{name: "re-run of a fork's check run", event: "check_run", payload: strings.Replace(checkRunRerequested, `[{"number": 9}]`, `[]`, 1), want: Trigger{
			Kind: TriggerRerun, InstallationID: 42, Owner: "acme", Repo: "app", DefaultBranch: "main",
			Sender: "ana", HeadSHA: "abc123", RerunID: "gh-abc",
		}},
		{name: "check run created", event: "check_run", payload: strings.Replace(checkRunRerequested, `"rerequested"`, `"created"`, 1), ignored: "check_run created"},
		{name: "check run without external id", event: "check_run", payload: strings.Replace(checkRunRerequested, `"gh-abc"`, `""`, 1), ignored: "without an external id"},
		{name: "re-run of a suite", event: "check_suite", payload: checkSuiteRerequested, want: Trigger{
			Kind: TriggerRerun, InstallationID: 42, Owner: "acme", Repo: "app", DefaultBranch: "main",
			Sender: "ana", PR: 9, HeadSHA: "abc123",
		}},
		{name: "re-run of a suite without its PR", event: "check_suite", payload: strings.Replace(checkSuiteRerequested, `[{"number": 9}]`, `[]`, 1), ignored: "without a pull request"},
		{name: "uninstalled", event: "installation", payload: installationDeleted, want: Trigger{
			Kind: TriggerInstallation, InstallationID: 42, Owner: "acme", Sender: "root", Action: "deleted",
		}},
		{name: "installation of some repositories", event: "installation", payload: strings.Replace(installationDeleted, `"deleted"`, `"unknown_action"`, 1), ignored: "installation unknown_action"},
		{name: "traversal in the owner", event: "issue_comment", payload: strings.Replace(string(comment), `"login": "acme"`, `"login": "../../etc"`, 1), ignored: "no GitHub name"},
		{name: "traversal in the repository", event: "pull_request", payload: strings.Replace(prOpened, `"name": "app"`, `"name": ".."`, 1), ignored: "no GitHub name"},
		{name: "slash in the repository", event: "check_run", payload: strings.Replace(checkRunRerequested, `"name": "app"`, `"name": "app/../../x"`, 1), ignored: "no GitHub name"},
		{name: "encoded traversal", event: "push", payload: strings.Replace(pushMain, `"name": "acme"`, `"name": "%2e%2e"`, 1), ignored: "no GitHub name"},
		{name: "authorization revoked", event: "github_app_authorization", payload: `{"action": "revoked", "sender": {"login": "ana", "id": 42, "type": "User"}}`,
			want: Trigger{Kind: TriggerRevoked, Sender: "ana", SenderID: 42}},
		{name: "authorization of no one", event: "github_app_authorization", payload: `{"action": "revoked", "sender": {"login": "ana"}}`, ignored: "github_app_authorization"},
		{name: "ping", event: "ping", payload: `{"zen": "Keep it logically awesome."}`, ignored: "ping"},
		{name: "other event", event: "star", payload: `{}`, ignored: `"star"`},
		{name: "broken json", event: "push", payload: `{"ref": `, err: "decode the push payload"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decode(c.event, []byte(c.payload))
			switch {
			case c.ignored != "":
				if !IsIgnored(err) || !strings.Contains(err.Error(), c.ignored) {
					t.Fatalf("err = %v, want ignored: …%s…", err, c.ignored)
				}
			case c.err != "":
				if err == nil || IsIgnored(err) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want an error with %q", err, c.err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(c.want, got, cmpopts.IgnoreFields(Trigger{}, "PullRequest")); diff != "" {
					t.Errorf("trigger (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// FuzzDecode feeds hostile payloads: Decode must return a trigger with its
// identity filled in, or an error, and never panic.
func FuzzDecode(f *testing.F) {
	comment, err := os.ReadFile("testdata/issue_comment.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("issue_comment", string(comment))
	f.Add("pull_request", prOpened)
	f.Add("push", pushMain)
	f.Add("push", `{"ref":"refs/heads/"}`)
	f.Add("check_run", checkRunRerequested)
	f.Add("check_suite", checkSuiteRerequested)
	f.Add("installation", installationDeleted)
	f.Fuzz(func(t *testing.T, event, payload string) {
		got, err := Decode(event, []byte(payload))
		if err != nil {
			return
		}
		// An installation event is about an account, not a repository.
		if got.Kind == "" || got.InstallationID == 0 || (got.Kind != TriggerInstallation && (got.Owner == "" || got.Repo == "")) {
			t.Fatalf("accepted trigger lacks its identity: %+v", got)
		}
		if got.Kind != TriggerInstallation && !validRepo(got.Owner, got.Repo) {
			t.Fatalf("accepted a repository that is no GitHub name: %q/%q", got.Owner, got.Repo)
		}
		if got.Kind == TriggerRerun && (got.HeadSHA == "" || (got.RerunID == "" && got.PR == 0)) {
			t.Fatalf("re-run trigger names nothing to run again: %+v", got)
		}
		if got.Kind == TriggerComment && len(got.Commands)+len(got.Problems) == 0 {
			t.Fatalf("comment trigger without commands: %+v", got)
		}
	})
}

// BenchmarkDecodeComment measures a comment delivery from its bytes to a
// trigger with its parsed commands: the worker's cost before any API call.
func BenchmarkDecodeComment(b *testing.B) {
	payload, err := os.ReadFile("testdata/issue_comment.json")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := Decode("issue_comment", payload); err != nil {
			b.Fatal(err)
		}
	}
}
