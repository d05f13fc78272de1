package repoconfig

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const full = `# .iterion.yml
workflows:
  review: .iterion/review.bot
  nightly: .iterion/nightly.bot
default_workflow: review
triggers:
  pull_request:
    opened: review
    synchronize: review
  comments: true
answerers: [alice, bob]
concurrency: supersede
slack:
  channel: "#iterion"
schedules:
  - name: nightly
    cron: "0 3 * * *"
    workflow: nightly
    vars:
      branch: main
`

func TestParseFull(t *testing.T) {
	cfg, err := Parse([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workflows["review"] != ".iterion/review.bot" || cfg.DefaultWorkflow != "review" || cfg.Concurrency != "supersede" ||
		!cfg.CommentsEnabled() || cfg.Slack.Channel != "#iterion" || len(cfg.Schedules) != 1 || cfg.Schedules[0].Vars["branch"] != "main" {
		t.Errorf("config = %+v", cfg)
	}
	if diff := cmp.Diff([]string{"alice", "bob"}, cfg.Answerers); diff != "" {
		t.Errorf("answerers (-want +got):\n%s", diff)
	}
}

func TestParseDefaults(t *testing.T) {
	cfg, err := Parse(nil)
	if err != nil || cfg.Concurrency != "queue" || !cfg.CommentsEnabled() {
		t.Errorf("empty file: %+v, %v", cfg, err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // "line:col: message substring"
	}{
		{"unknown key", "workflows:\n  a: a.bot\nconcurency: queue\n", []string{"3:1: unknown key \"concurency\""}},
		{"unknown workflow in a trigger", "workflows:\n  a: a.bot\ntriggers:\n  pull_request:\n    opened: b\n", []string{"5:5: unknown workflow \"b\""}},
		{"bad action", "workflows:\n  a: a.bot\ntriggers:\n  pull_request:\n    merged: a\n", []string{"5:5: unknown pull_request action \"merged\""}},
		{"path outside the repository", "workflows:\n  a: ../../etc/x.bot\n", []string{"2:3: workflow a: \"../../etc/x.bot\" must be a path inside the repository"}},
		{"not a .bot file", "workflows:\n  a: a.yaml\n", []string{"2:3: workflow a: \"a.yaml\" is not a .bot file"}},
		{"bad concurrency", "concurrency: sometimes\n", []string{"1:1: concurrency \"sometimes\""}},
		{"schedule without cron", "workflows:\n  a: a.bot\nschedules:\n  - name: n\n    workflow: a\n", []string{"4:5: schedule 1 needs name, cron and workflow"}},
		{"bad cron", "workflows:\n  a: a.bot\nschedules:\n  - name: n\n    cron: \"61 * * * *\"\n    workflow: a\n", []string{"5:5: schedule n: cron \"61 * * * *\""}},
		{"syntax error", "workflows:\n  a: [unclosed\n", []string{":1: "}},
		{"wrong type", "answerers: 3\n", []string{"1:1: "}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src))
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("err = %v, want Errors", err)
			}
			got := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("errors %q lack %q", got, w)
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(full))
	f.Add([]byte("workflows: [\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err == nil && cfg == nil {
			t.Fatal("no config and no error")
		}
		var errs Errors
		if errors.As(err, &errs) {
			for _, e := range errs {
				if e.Line < 1 || e.Column < 1 || e.Message == "" {
					t.Fatalf("bad error %+v", e)
				}
			}
		}
	})
}
