package repoconfig

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

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
    timezone: Europe/Berlin
    workflow: nightly
    vars:
      branch: main
    overlap: queue
    grace: 2h
    report:
      slack: "#nightly"
changes:
  workflows: [nightly]
  branch_prefix: bots/iterion/
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
	s := cfg.Schedules[0]
	if s.Timezone != "Europe/Berlin" || s.Overlap != "queue" || s.Grace != 2*time.Hour || !s.Report.IssueEnabled() || s.Report.Slack != "#nightly" {
		t.Errorf("schedule = %+v", s)
	}
	if !cfg.Proposes("nightly") || cfg.Proposes("review") || cfg.Changes.BranchPrefix != "bots/iterion/" {
		t.Errorf("changes = %+v", cfg.Changes)
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
		{"bad time zone", sched("timezone: Mars/Olympus"), []string{`6:5: schedule n: unknown time zone "Mars/Olympus": write an IANA name`}},
		{"@nightly", "workflows:\n  a: a.bot\nschedules:\n  - name: n\n    cron: \"@nightly\"\n    workflow: a\n", []string{"5:5: schedule n: cron \"@nightly\": @nightly is not a descriptor: write @daily"}},
		{"six fields", "workflows:\n  a: a.bot\nschedules:\n  - name: n\n    cron: \"0 0 3 * * *\"\n    workflow: a\n", []string{"expected exactly 5 fields, found 6"}},
		{"too often", "workflows:\n  a: a.bot\nschedules:\n  - name: n\n    cron: \"*/5 * * * *\"\n    workflow: a\n", []string{"5:5: schedule n: cron \"*/5 * * * *\" fires every 5m0s; a repository's schedule may fire at most every 10m0s"}},
		{"too many", "workflows:\n  a: a.bot\nschedules:\n" + manySchedules(MaxSchedules+1), []string{"3:1: 51 schedules: a repository may declare at most 50"}},
		{"every second", "workflows:\n  a: a.bot\nschedules:\n  - name: n\n    cron: \"@every 1s\"\n    workflow: a\n", []string{"fires every 1s"}},
		{"bad overlap", sched("overlap: cancel"), []string{`6:5: schedule n: overlap "cancel": use skip`}},
		{"bad grace", sched("grace: 720h"), []string{"6:5: schedule n: grace 720h0m0s: write a duration from 1m to 168h0m0s"}},
		{"grace not a duration", sched("grace: soon"), []string{"6:"}},
		{"reports nowhere", sched("report:\n      issue: false"), []string{"6:5: schedule n reports nowhere"}},
		{"bad schedule name", "workflows:\n  a: a.bot\nschedules:\n  - name: \"a b\"\n    cron: \"@daily\"\n    workflow: a\n", []string{`4:5: schedule name "a b"`}},
		{"a schedule twice", "workflows:\n  a: a.bot\nschedules:\n  - name: n\n    cron: \"@daily\"\n    workflow: a\n  - name: n\n    cron: \"@daily\"\n    workflow: a\n", []string{"7:5: schedule n is declared twice"}},
		{"unknown key in a schedule", sched("timezon: UTC"), []string{`6:1: unknown key "timezon" (keys here: name, cron, timezone, workflow, vars, overlap, grace, report)`}},
		{"changes of an unknown workflow", "workflows:\n  a: a.bot\nchanges:\n  workflows: [a, b]\n", []string{`4:18: unknown workflow "b"`}},
		{"bad branch prefix", "changes:\n  branch_prefix: \"../x\"\n", []string{`2:3: branch_prefix "../x"`}},
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

// sched is a file with one schedule n of workflow a, plus extra, a key
// and its value at line 6.
func sched(extra string) string {
	return "workflows:\n  a: a.bot\nschedules:\n  - name: n\n    cron: \"@daily\"\n    " + extra + "\n    workflow: a\n"
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

// The example of docs/config.md is a file the bot accepts, schedules and
// changes: included.
func TestDocsExample(t *testing.T) {
	b, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "```yaml\n")
	example, _, _ := strings.Cut(block, "```")
	if !ok {
		t.Fatal("docs/config.md has no yaml example")
	}
	cfg, err := Parse([]byte(example))
	if err != nil {
		t.Fatalf("docs/config.md's example: %v", err)
	}
	if len(cfg.Schedules) != 1 || cfg.Schedules[0].Timezone != "Europe/Berlin" || !cfg.Proposes("nightly") {
		t.Errorf("docs/config.md's example read as %+v", cfg)
	}
}

// manySchedules is a schedules: list of n daily schedules.
func manySchedules(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - {name: n%d, cron: \"@daily\", workflow: a}\n", i)
	}
	return b.String()
}
