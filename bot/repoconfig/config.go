// Package repoconfig reads a repository's .iterion.yml: its workflows,
// the events that start them, who may answer questions, how runs of one
// pull request share it, where to talk, its schedules, and which runs
// propose their changes back to the repository. The bot reads the file from
// the repository's default branch only, never from a pull request's
// branch, since a PR may be written by anyone.
//
// Every mistake is reported at its line and column, with what to write
// instead, so the bot can post it on the PR instead of ignoring the file.
package repoconfig

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/iterion-bot/iterion/bot/schedule"
)

// FileName is where the configuration lives in a repository.
const FileName = ".iterion.yml"

// MaxSize bounds the file, which comes from repositories the bot does not own.
const MaxSize = 256 << 10

// Concurrency rules: what a run asked for on a PR does while another of
// the PR's runs is active.
const (
	ConcurrencyQueue     = "queue"     // wait for the runs before it to end
	ConcurrencySupersede = "supersede" // cancel them and start
	ConcurrencyReject    = "reject"    // refuse to start
)

// Config is a repository's configuration.
type Config struct {
	// Workflows maps names to .bot files of the repository.
	Workflows map[string]string `yaml:"workflows"`
	// DefaultWorkflow is what a bare `/iterion run` starts.
	DefaultWorkflow string `yaml:"default_workflow"`
	// Triggers are the events that start runs.
	Triggers Triggers `yaml:"triggers"`
	// Answerers may answer questions besides users with write permission.
	Answerers []string `yaml:"answerers"`
	// Concurrency is what a new run of a PR does when one is running:
	// queue (the default), supersede (cancel the running one) or reject.
	Concurrency string `yaml:"concurrency"`
	// Slack names the channel questions and results are posted to.
	Slack struct {
		Channel string `yaml:"channel"`
	} `yaml:"slack"`
	// Schedules start runs on cron specs.
	Schedules []Schedule `yaml:"schedules"`
	// Changes says which runs propose their workspace's changes back to
	// the repository.
	Changes Changes `yaml:"changes"`
}

// Changes turns on, for some workflows, the proposal of a run's changes
// when it finishes: a branch and a pull request for a scheduled run, a
// commit pushed to the pull request's own branch for a run asked for on
// a pull request (not from a fork). It needs the App's Contents: write
// and Pull requests: write permissions on the repository.
type Changes struct {
	// Workflows are the workflows whose runs propose their changes; none
	// by default.
	Workflows []string `yaml:"workflows"`
	// BranchPrefix starts the branches of scheduled runs' pull requests;
	// "" means DefaultBranchPrefix.
	BranchPrefix string `yaml:"branch_prefix"`
}

// DefaultBranchPrefix starts the branches of scheduled runs' changes.
const DefaultBranchPrefix = "iterion/"

// Proposes reports whether runs of workflow name propose their changes.
func (c *Config) Proposes(name string) bool { return slices.Contains(c.Changes.Workflows, name) }

// Triggers say which events start which workflow.
type Triggers struct {
	// PullRequest maps pull_request actions (opened, synchronize,
	// reopened, ready_for_review, labeled) to a workflow name.
	PullRequest map[string]string `yaml:"pull_request"`
	// Comments turns the /iterion comment commands on (the default) or off.
	Comments *bool `yaml:"comments"`
}

// Schedule is a run started on a cron spec.
type Schedule struct {
	// Name names the schedule in the repository: letters, digits, - and _.
	Name string `yaml:"name"`
	// Cron is five fields (minute hour day-of-month month day-of-week) or
	// a descriptor (@daily, @every 6h); a repository's ticks come at most
	// every MinInterval.
	Cron string `yaml:"cron"`
	// Timezone is the IANA zone the spec's hours are in; "" means UTC.
	Timezone string `yaml:"timezone"`
	// Workflow names one of Workflows; Vars are its vars.
	Workflow string            `yaml:"workflow"`
	Vars     map[string]string `yaml:"vars"`
	// Overlap is what a tick does while the schedule's last run is still
	// going: skip (the default) or queue.
	Overlap string `yaml:"overlap"`
	// Grace is how late a tick may still fire after the server was down;
	// 0 means schedule.DefaultGrace, at most MaxGrace.
	Grace time.Duration `yaml:"grace"`
	// Report is where the schedule's runs are shown.
	Report Report `yaml:"report"`
}

// Report is where a schedule's runs are shown: a tracking issue of the
// repository (the default), a Slack channel, or both.
type Report struct {
	// Issue keeps one tracking issue for the schedule, with a status
	// comment per run; nil means true.
	Issue *bool `yaml:"issue"`
	// Slack names a channel for a card per run.
	Slack string `yaml:"slack"`
}

// IssueEnabled reports whether the schedule keeps a tracking issue.
func (r Report) IssueEnabled() bool { return r.Issue == nil || *r.Issue }

// MinInterval is how often a repository's schedule may fire at most:
// every tick costs a checkout. MaxGrace bounds its grace window.
const (
	MinInterval = 10 * time.Minute
	// MaxSchedules is how many schedules a repository may declare.
	MaxSchedules = 50
	MaxGrace     = 7 * 24 * time.Hour
)

// CommentsEnabled reports whether comment commands are on.
func (c *Config) CommentsEnabled() bool { return c.Triggers.Comments == nil || *c.Triggers.Comments }

// Error is a mistake in the file, at a line and column (1-based).
type Error struct {
	Line, Column int
	Message      string
}

func (e Error) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", FileName, e.Line, e.Column, e.Message)
}

// Errors is every mistake found.
type Errors []Error

func (es Errors) Error() string {
	var lines []string
	for _, e := range es {
		lines = append(lines, e.Error())
	}
	return strings.Join(lines, "\n")
}

var (
	concurrencies = []string{ConcurrencyQueue, ConcurrencySupersede, ConcurrencyReject}
	prActions     = []string{"opened", "synchronize", "reopened", "ready_for_review", "labeled"}
)

// Parse reads a configuration. On mistakes it returns Errors, each at its
// position; an empty file is a valid configuration with the defaults.
func Parse(data []byte) (*Config, error) {
	if len(data) > MaxSize {
		return nil, Errors{{Line: 1, Column: 1, Message: fmt.Sprintf("the file is larger than %d bytes", MaxSize)}}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, Errors{yamlError(err)}
	}
	cfg := &Config{}
	if len(root.Content) == 0 {
		cfg.Concurrency = ConcurrencyQueue
		return cfg, nil
	}
	doc := root.Content[0]
	var errs Errors
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, msg := range te.Errors {
				errs = append(errs, typeError(msg))
			}
			return nil, errs
		}
		return nil, Errors{yamlError(err)}
	}
	at := func(keys ...string) (int, int) { return position(doc, keys...) }
	add := func(keys []string, format string, args ...any) {
		l, c := at(keys...)
		errs = append(errs, Error{Line: l, Column: c, Message: fmt.Sprintf(format, args...)})
	}
	for name, file := range cfg.Workflows {
		switch {
		case !validName(name):
			add([]string{"workflows", name}, "workflow name %q: use letters, digits, - and _", name)
		case strings.HasPrefix(file, "/") || strings.HasPrefix(path.Clean(file), ".."):
			add([]string{"workflows", name}, "workflow %s: %q must be a path inside the repository", name, file)
		case !strings.HasSuffix(file, ".bot") && !strings.HasSuffix(file, ".iter"):
			add([]string{"workflows", name}, "workflow %s: %q is not a .bot file", name, file)
		}
	}
	known := func(keys []string, name string) {
		if name != "" && cfg.Workflows[name] == "" {
			add(keys, "unknown workflow %q: declare it under workflows:", name)
		}
	}
	known([]string{"default_workflow"}, cfg.DefaultWorkflow)
	for action, name := range cfg.Triggers.PullRequest {
		if !slices.Contains(prActions, action) {
			add([]string{"triggers", "pull_request", action}, "unknown pull_request action %q: use one of %s", action, strings.Join(prActions, ", "))
			continue
		}
		known([]string{"triggers", "pull_request", action}, name)
	}
	if cfg.Concurrency == "" {
		cfg.Concurrency = ConcurrencyQueue
	} else if !slices.Contains(concurrencies, cfg.Concurrency) {
		add([]string{"concurrency"}, "concurrency %q: use queue, supersede or reject", cfg.Concurrency)
	}
	if len(cfg.Schedules) > MaxSchedules {
		add([]string{"schedules"}, "%d schedules: a repository may declare at most %d (each fire checks the repository out and runs a workflow)", len(cfg.Schedules), MaxSchedules)
	}
	names := map[string]bool{}
	for i, s := range cfg.Schedules {
		idx := fmt.Sprint(i)
		if s.Name == "" || s.Cron == "" || s.Workflow == "" {
			add([]string{"schedules", idx}, "schedule %d needs name, cron and workflow", i+1)
			continue
		}
		if !validName(s.Name) {
			add([]string{"schedules", idx, "name"}, "schedule name %q: use letters, digits, - and _", s.Name)
		} else if names[s.Name] {
			add([]string{"schedules", idx, "name"}, "schedule %s is declared twice: give each its own name", s.Name)
		}
		names[s.Name] = true
		spec, err := schedule.Parse(s.Cron, s.Timezone)
		switch {
		case err != nil && strings.Contains(err.Error(), "time zone"):
			add([]string{"schedules", idx, "timezone"}, "schedule %s: %v", s.Name, err)
		case err != nil:
			add([]string{"schedules", idx, "cron"}, "schedule %s: cron %q: %v", s.Name, s.Cron, err)
		default:
			if gap := spec.MinGap(); gap < MinInterval {
				add([]string{"schedules", idx, "cron"}, "schedule %s: cron %q fires every %s; a repository's schedule may fire at most every %s", s.Name, s.Cron, gap, MinInterval)
			}
		}
		known([]string{"schedules", idx, "workflow"}, s.Workflow)
		if s.Overlap != "" && s.Overlap != schedule.OverlapSkip && s.Overlap != schedule.OverlapQueue {
			add([]string{"schedules", idx, "overlap"}, "schedule %s: overlap %q: use skip (the default: a tick while the last run goes on is skipped) or queue (it waits for that run)", s.Name, s.Overlap)
		}
		if s.Grace < 0 || s.Grace > MaxGrace {
			add([]string{"schedules", idx, "grace"}, "schedule %s: grace %s: write a duration from 1m to %s, like 1h", s.Name, s.Grace, MaxGrace)
		}
		if !s.Report.IssueEnabled() && s.Report.Slack == "" {
			add([]string{"schedules", idx, "report"}, "schedule %s reports nowhere: keep its tracking issue (issue: true) or name a Slack channel (slack: \"#channel\")", s.Name)
		}
	}
	for i, name := range cfg.Changes.Workflows {
		known([]string{"changes", "workflows", fmt.Sprint(i)}, name)
	}
	if p := cfg.Changes.BranchPrefix; p != "" && !validPrefix(p) {
		add([]string{"changes", "branch_prefix"}, "branch_prefix %q: write the start of a branch name, like iterion/ (letters, digits, -, _, . and /)", p)
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b Error) int { return (a.Line-b.Line)*1000 + a.Column - b.Column })
		return nil, errs
	}
	return cfg, nil
}

// validPrefix reports whether p can start a branch name.
func validPrefix(p string) bool {
	if len(p) > 100 || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "-") || strings.Contains(p, "..") || strings.Contains(p, "//") {
		return false
	}
	for _, r := range p {
		if !(r == '-' || r == '_' || r == '.' || r == '/' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// position finds the node at a path of mapping keys (or sequence indexes)
// and returns its line and column; the deepest found when the path ends
// early.
func position(n *yaml.Node, keys ...string) (int, int) {
	line, col := n.Line, n.Column
	for _, k := range keys {
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == k {
					line, col = n.Content[i].Line, n.Content[i].Column
					next = n.Content[i+1]
				}
			}
		case yaml.SequenceNode:
			var idx int
			if _, err := fmt.Sscan(k, &idx); err == nil && idx >= 0 && idx < len(n.Content) {
				next = n.Content[idx]
				line, col = next.Line, next.Column
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return max(line, 1), max(col, 1)
}

// yamlError turns a syntax error ("yaml: line 3: …") into a positioned one.
func yamlError(err error) Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if _, scanErr := fmt.Sscanf(msg, "line %d:", &line); scanErr == nil {
		msg = strings.TrimSpace(msg[strings.Index(msg, ":")+1:])
	}
	return Error{Line: line, Column: 1, Message: msg}
}

// typeError turns a decoding error ("line 4: field foo not found in type
// repoconfig.Config") into a positioned one that names what is allowed.
func typeError(msg string) Error {
	line := 1
	if _, err := fmt.Sscanf(msg, "line %d:", &line); err == nil {
		msg = strings.TrimSpace(msg[strings.Index(msg, ":")+1:])
	}
	if f, typ, ok := strings.Cut(strings.TrimPrefix(msg, "field "), " not found in type "); ok && strings.HasPrefix(msg, "field ") {
		keys, ok := keysOf[strings.TrimPrefix(typ, "repoconfig.")]
		switch {
		case strings.HasPrefix(typ, "struct"):
			keys = "channel" // slack:
		case !ok:
			keys = keysOf["Config"]
		}
		msg = fmt.Sprintf("unknown key %q (keys here: %s)", f, keys)
	}
	return Error{Line: line, Column: 1, Message: msg}
}

// keysOf lists the keys of each part of the file, for the message of an
// unknown key.
var keysOf = map[string]string{
	"Config":   "workflows, default_workflow, triggers, answerers, concurrency, slack, schedules, changes",
	"Triggers": "pull_request, comments",
	"Schedule": "name, cron, timezone, workflow, vars, overlap, grace, report",
	"Report":   "issue, slack",
	"Changes":  "workflows, branch_prefix",
}
