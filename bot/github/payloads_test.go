package github

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every event and action the App subscribes to, as GitHub shapes them
// (testdata/payloads, named <event>.<action>[.<variant>].json; null
// bodies, a deleted fork's null head repo, a repository webhook without
// an installation), decodes without an error: each is acted on or
// ignored, never stored as failed.
func TestPayloadCorpusDecodes(t *testing.T) {
	files, err := filepath.Glob("testdata/payloads/*.json")
	if err != nil || len(files) < 25 {
		t.Fatalf("payload corpus: %d files, %v", len(files), err)
	}
	want := map[string]string{ // file → the trigger kind; absent: ignored
		"issue_comment.created":                 TriggerComment,
		"issue_comment.created.on_issue":        TriggerComment,
		"pull_request.opened":                   TriggerPullRequest,
		"pull_request.synchronize":              TriggerPullRequest,
		"pull_request.reopened":                 TriggerPullRequest,
		"pull_request.ready_for_review":         TriggerPullRequest,
		"pull_request.labeled":                  TriggerPullRequest,
		"pull_request.opened.deleted_fork":      TriggerPullRequest,
		"installation.created":                  TriggerInstallation,
		"installation.deleted":                  TriggerInstallation,
		"installation.suspend":                  TriggerInstallation,
		"installation.unsuspend":                TriggerInstallation,
		"installation.new_permissions_accepted": TriggerInstallation,
		"check_run.rerequested":                 TriggerRerun,
		"check_run.rerequested.fork":            TriggerRerun,
		"check_suite.rerequested":               TriggerRerun,
		"push.default_branch":                   TriggerPush,
		"push.feature":                          TriggerPush,
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			payload, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			event, _, _ := strings.Cut(name, ".")
			got, err := Decode(event, payload)
			kind := want[name]
			switch {
			case kind == "" && !IsIgnored(err):
				t.Errorf("Decode = %+v, %v; want it ignored", got, err)
			case kind != "" && err != nil:
				t.Errorf("Decode: %v; want a %s trigger", err, kind)
			case kind != "" && got.Kind != kind:
				t.Errorf("Decode kind = %q, want %q", got.Kind, kind)
			}
			if name == "pull_request.opened.deleted_fork" && !got.Fork {
				t.Error("a PR whose head repository is gone is not taken for a fork's")
			}
		})
	}
}
