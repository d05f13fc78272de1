package slack

import (
	"encoding/json"
	"strconv"
	"strings"

	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/engine"
)

// Origin is where in Slack a run was started (/iterion run): the engine
// keeps it as the run's trigger Details without reading it, and the run's
// trigger Ref is its channel's ChannelRef.
type Origin struct {
	Team    string `json:"team"`
	Channel string `json:"channel"` // the channel's id
	User    string `json:"user"`    // the Slack user who started it
}

// ChannelRef is the trigger Ref of the runs started in a Slack channel.
func ChannelRef(channel string) string { return "slack/" + channel }

// Trigger is the engine trigger of a run started at o by actor (the
// GitHub login of o.User).
func (o Origin) Trigger(actor string) engine.Trigger {
	details, _ := json.Marshal(o) // cannot fail: strings
	return engine.Trigger{Source: "slack", Actor: actor, Ref: ChannelRef(o.Channel), Details: details}
}

// OriginOf returns where in Slack run was started; false for a run Slack
// did not start, and for details it cannot read.
func OriginOf(run *engine.Run) (Origin, bool) {
	var o Origin
	if run.Trigger.Source != "slack" || len(run.Trigger.Details) == 0 {
		return o, false
	}
	if err := json.Unmarshal(run.Trigger.Details, &o); err != nil || o.Channel == "" {
		return Origin{}, false
	}
	return o, true
}

// scopeOf is the scope of a run's short question ids: its pull request's
// for a PR's run (Q3 is the same question on the PR and in Slack), else
// the run's own.
func scopeOf(run *engine.Run) string {
	if o, ok := ghbot.OriginOf(run); ok && o.Repo != "" && o.PR != 0 {
		return ghbot.PRScope(o.Repo, o.PR)
	}
	return "run/" + run.ID
}

// prOf names a run's pull request ("acme/app#7") and its address on
// gitURL (GitHub's web base), "" for a run of none.
func prOf(run *engine.Run, gitURL string) (name, url string) {
	o, ok := ghbot.OriginOf(run)
	if !ok || o.Repo == "" || o.PR == 0 {
		return "", ""
	}
	n := strconv.Itoa(o.PR)
	return o.Repo + "#" + n, strings.TrimRight(gitURL, "/") + "/" + o.Repo + "/pull/" + n
}

// pickOption turns a bare option number or label into the option's label;
// other text is the answer as written.
func pickOption(text string, labels []string) string {
	if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(text), ".")); err == nil && n >= 1 && n <= len(labels) {
		return labels[n-1]
	}
	for _, l := range labels {
		if strings.EqualFold(l, strings.TrimSpace(text)) {
			return l
		}
	}
	return text
}
