package github

import (
	"encoding/json"
	"strings"

	"github.com/iterion-bot/iterion/engine"
)

// Origin is where on GitHub a run was started. The engine keeps it as the
// run's trigger Details without reading it, and the runs of a pull
// request (or of a schedule's tracking issue) carry its PRScope as their
// trigger Ref, by which the store indexes them. The first names are also
// those the store's layout 3 migration gives the details it moves out of
// older run records.
type Origin struct {
	Repo         string `json:"repo,omitempty"` // owner/name
	PR           int    `json:"pr,omitempty"`
	CommentID    int64  `json:"comment_id,omitempty"`
	Installation int64  `json:"installation,omitempty"`
	HeadSHA      string `json:"head_sha,omitempty"`
	// Schedule is the schedule that started the run (its full name,
	// github/<owner>/<repo>/<name>) and Tick its tick.
	Schedule string `json:"schedule,omitempty"`
	Tick     string `json:"tick,omitempty"`
	// Issue is the schedule's tracking issue, where the run is shown; 0
	// when it reports on Slack alone.
	Issue int `json:"issue,omitempty"`
	// Slack is the Slack channel the run is also shown in (its
	// schedule's, or the one its repository's .iterion.yml names); set
	// only when the server has Slack.
	Slack string `json:"slack,omitempty"`
}

// Thread is the number of the pull request or issue the run is shown
// on: its PR, else its schedule's tracking issue; 0 for none.
func (o Origin) Thread() int {
	if o.PR != 0 {
		return o.PR
	}
	return o.Issue
}

// ScheduleRef is the trigger Ref of a scheduled run shown on no issue.
func ScheduleRef(schedule string) string { return "schedule/" + schedule }

// Trigger is the engine trigger of a run started at o by actor.
func (o Origin) Trigger(actor string) engine.Trigger {
	details, _ := json.Marshal(o) // cannot fail: strings and numbers
	t := engine.Trigger{Source: "github", Actor: actor, Details: details}
	switch {
	case o.Repo != "" && o.Thread() != 0:
		t.Ref = PRScope(o.Repo, o.Thread())
	case o.Schedule != "":
		t.Ref = ScheduleRef(o.Schedule)
	}
	return t
}

// split returns the owner and the name of o's repository.
func (o Origin) split() (owner, repo string) {
	owner, repo, _ = strings.Cut(o.Repo, "/")
	return owner, repo
}

// OriginOf returns where on GitHub run was started. It is false for a
// run that GitHub did not start, and for details it cannot read (a run
// record written by a newer iterion), which the bot then leaves alone.
func OriginOf(run *engine.Run) (Origin, bool) {
	var o Origin
	if run.Trigger.Source != "github" || len(run.Trigger.Details) == 0 {
		return o, false
	}
	if err := json.Unmarshal(run.Trigger.Details, &o); err != nil {
		return Origin{}, false
	}
	return o, true
}
