package github

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// Names of a run's own posts in the store (RunPosts).
const (
	postStatusComment = "github-status-comment"
	postStatusURL     = "github-status-url"
	postCheckRun      = "github-check-run"
	postCheckState    = "github-check-state"
	postCheckPhase    = "github-check-phase"
)

// PRScope is the scope of a pull request's short question numbers.
func PRScope(repo string, pr int) string {
	return "github/" + strings.ToLower(repo) + "#" + strconv.Itoa(pr)
}

// statusKey and questionKey are the markers of a run's status comment and
// of a question's comment.
func statusKey(runID string) string  { return "status-" + runID }
func questionKey(ixID string) string { return "question-" + ixID }

// view is what one sync of a run reads from the store.
type view struct {
	run     *engine.Run
	at      Origin // where on GitHub the run was started
	ixs     []*engine.Interaction
	done    int      // steps finished
	current []string // steps executing
	warning string   // the sandbox's warning, when it does not isolate
	snap    *engine.Snapshot
	numbers map[string]int // interaction id → short number on the PR
	posts   map[string]string
	page    string // the admin page's public address, "" when none
}

// pageLink is the admin page's address of path (/runs/<id>, /q/<id>), ""
// when the page has no public address.
func (v *view) pageLink(kind, id string) string {
	if v.page == "" {
		return ""
	}
	return v.page + "/" + kind + "/" + url.PathEscape(id)
}

func (r *Relay) read(ctx context.Context, runID string) (*view, error) {
	run, err := r.store.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	v := &view{run: run, page: r.pageURL}
	var ok bool
	if v.at, ok = OriginOf(run); !ok {
		return nil, fmt.Errorf("run %s was not started from GitHub", runID)
	}
	if v.ixs, err = r.store.Interactions(ctx, runID); err != nil {
		return nil, err
	}
	r.mu.Lock()
	p := r.progress[runID]
	if p == nil {
		if len(r.progress) > 10000 {
			clear(r.progress) // only a cache: a forgotten run reads its log again
		}
		p = newProgress()
		r.progress[runID] = p
	}
	after := p.after
	r.mu.Unlock()
	events, err := r.store.Events(ctx, runID, after, 0)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	p.add(events)
	v.done, v.current, v.warning = p.done, p.current(), p.warning
	r.mu.Unlock()
	raw, err := r.store.Checkpoint(ctx, runID)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return nil, err
	}
	if v.snap, err = engine.ReadSnapshot(raw); err != nil {
		// A checkpoint this build cannot read still has a status to show.
		r.log.Warn("reading a run's checkpoint for its status failed", "run", runID, "err", err)
		v.snap, _ = engine.ReadSnapshot(nil)
	}
	if v.numbers, err = r.store.ShortIDs(ctx, PRScope(v.at.Repo, v.at.Thread()), runID); err != nil {
		return nil, err
	}
	if v.posts, err = r.store.RunPosts(ctx, runID); err != nil {
		return nil, err
	}
	return v, nil
}

// commentURL links the bot's comment id on the run's PR: the status
// comment's address with another anchor, or an anchor on the PR page.
func (v *view) commentURL(id string) string {
	base, _, _ := strings.Cut(v.posts[postStatusURL], "#")
	return base + "#issuecomment-" + id
}

// sync brings the run's status comment, its question comments and its
// check run in line with the store. Each is rendered from the store and
// written only when it differs from what this process last wrote, so a
// sync repeated after a crash or a retry is harmless.
func (r *Relay) sync(ctx context.Context, runID string) error {
	v, err := r.read(ctx, runID)
	if err != nil {
		return err
	}
	// The status comment first: its address is the check run's details
	// link and the base of the question links.
	body := renderStatus(v)
	if id := v.posts[postStatusComment]; id == "" {
		if err := r.postStatus(ctx, v, body); err != nil {
			return err
		}
	} else if err := r.edit(ctx, v, atoi64(id), statusKey(v.run.ID), body); errors.Is(err, ErrCommentGone) {
		// Someone deleted the status comment: it is posted again, and the
		// rest of the update goes on.
		r.log.Info("the run's status comment was deleted; posting it again", "run", v.run.ID, "comment", id)
		if err := r.postStatus(ctx, v, body); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	for _, ix := range v.ixs {
		id := ix.Posts["github"]
		if id == "" {
			continue
		}
		err := r.edit(ctx, v, atoi64(id), questionKey(ix.ID), renderQuestion(v, ix))
		if errors.Is(err, ErrCommentGone) {
			r.log.Info("a question's comment was deleted; posting it again", "run", v.run.ID, "question", ix.ID, "comment", id)
			err = r.postQuestion(ctx, v.run, ix)
		}
		if err != nil {
			return err
		}
	}
	err = r.syncCheck(ctx, v)
	if errors.Is(err, ErrChecksForbidden) {
		// Check runs are the lesser half: say it once, keep the comments.
		if r.checksRefused.CompareAndSwap(false, true) {
			r.log.Warn("check runs are skipped", "err", err)
		}
		return nil
	}
	return err
}

// postStatus posts the run's status comment (or finds the one a crash
// left) and records its id and address.
func (r *Relay) postStatus(ctx context.Context, v *view, body string) error {
	t := v.at
	owner, repo := t.split()
	key := statusKey(v.run.ID)
	cm, err := r.replies.PostComment(ctx, t.Installation, owner, repo, t.Thread(), key, body)
	if err != nil {
		return err
	}
	id := strconv.FormatInt(cm.GetID(), 10)
	if err := r.store.SetRunPost(ctx, v.run.ID, postStatusComment, id); err != nil {
		return err
	}
	v.posts[postStatusComment] = id
	if cm.GetHTMLURL() != "" {
		if err := r.store.SetRunPost(ctx, v.run.ID, postStatusURL, cm.GetHTMLURL()); err != nil {
			return err
		}
		v.posts[postStatusURL] = cm.GetHTMLURL()
	}
	if cm.GetBody() == r.replies.text(key, body) {
		r.remember(key, body) // just written: no edit with the same body
		return nil
	}
	// A status comment found by its marker after a crash may be stale.
	return r.edit(ctx, v, cm.GetID(), key, body)
}

// edit writes body to comment id unless this process last wrote it there.
func (r *Relay) edit(ctx context.Context, v *view, id int64, key, body string) error {
	r.mu.Lock()
	same := r.written[key] == body
	r.mu.Unlock()
	if same {
		return nil
	}
	t := v.at
	owner, repo := t.split()
	if err := r.replies.Edit(ctx, t.Installation, owner, repo, id, key, body); err != nil {
		return err
	}
	r.remember(key, body)
	return nil
}

func (r *Relay) remember(key, body string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.written) > 10000 {
		clear(r.written) // only a cache: a forgotten body costs one edit
	}
	r.written[key] = body
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// checkFor is the check run state of a run status.
func checkFor(s engine.Status) CheckState {
	switch s {
	case engine.StatusPausedWaitingHuman:
		return CheckState{"completed", "action_required"}
	case engine.StatusFinished:
		return CheckState{"completed", "success"}
	case engine.StatusFailed, engine.StatusFailedResumable:
		return CheckState{"completed", "failure"}
	case engine.StatusCancelled:
		return CheckState{"completed", "cancelled"}
	}
	return CheckState{Status: "in_progress"}
}

// syncCheck keeps the run's check run on its head commit in line with the
// run. A check run GitHub completed cannot go back to in_progress, so a
// run that continues after waiting for answers gets a new check run (a
// new phase) of the same name; GitHub shows the newest.
func (r *Relay) syncCheck(ctx context.Context, v *view) error {
	t := v.at
	if t.HeadSHA == "" || t.PR == 0 {
		return nil // a scheduled run's commit is the default branch's: no check there
	}
	owner, repo := t.split()
	want := checkFor(v.run.Status)
	have := v.posts[postCheckState]
	if v.posts[postCheckRun] != "" && have == want.String() {
		return nil
	}
	name := "iterion / " + v.run.Workflow
	title, _ := statusLook(v.run.Status)
	out := CheckOutput{Title: title, Summary: renderStatus(v), DetailsURL: cmp.Or(v.pageLink("runs", v.run.ID), v.posts[postStatusURL])}
	phase := max(atoi64(v.posts[postCheckPhase]), 1)
	id := atoi64(v.posts[postCheckRun])
	if id != 0 && strings.HasPrefix(have, "completed") {
		phase++
		id = 0
	}
	created := false
	if id == 0 {
		var err error
		ext := v.run.ID + "/" + strconv.FormatInt(phase, 10)
		if id, created, err = r.replies.EnsureCheckRun(ctx, t.Installation, owner, repo, t.HeadSHA, name, ext, want, out); err != nil {
			return err
		}
		// The id first: after a crash between the two, the old phase leads
		// to this check run again by its external id.
		if err := r.store.SetRunPost(ctx, v.run.ID, postCheckRun, strconv.FormatInt(id, 10)); err != nil {
			return err
		}
		if err := r.store.SetRunPost(ctx, v.run.ID, postCheckPhase, strconv.FormatInt(phase, 10)); err != nil {
			return err
		}
	}
	// A check run found after a crash may be in an older state.
	if !created {
		if err := r.replies.UpdateCheckRun(ctx, t.Installation, owner, repo, id, name, want, out); err != nil {
			return err
		}
	}
	return r.store.SetRunPost(ctx, v.run.ID, postCheckState, want.String())
}

// statusLook is how a status is shown: a title and its icon.
func statusLook(s engine.Status) (title, icon string) {
	switch s {
	case engine.StatusPausedWaitingHuman:
		return "Waiting for answers", "⏸️"
	case engine.StatusFinished:
		return "Finished", "✅"
	case engine.StatusFailed, engine.StatusFailedResumable:
		return "Failed", "❌"
	case engine.StatusCancelled:
		return "Cancelled", "⏹️"
	}
	return "Running", "⏳"
}

// renderStatus is the run's status comment. It holds nothing that
// changes by itself (no "x seconds ago"), so an unchanged run renders the
// same text and costs no edit.
func renderStatus(v *view) string {
	run := v.run
	var b strings.Builder
	title, icon := statusLook(run.Status)
	fmt.Fprintf(&b, "%s **iterion** · run `%s` of `%s`", icon, inert(run.ID), inert(run.Workflow))
	if sha := v.at.HeadSHA; sha != "" {
		fmt.Fprintf(&b, " on %s", shortSHA(sha))
	}
	fmt.Fprintf(&b, " · **%s**\n\n", title)
	if link := v.pageLink("runs", run.ID); link != "" {
		fmt.Fprintf(&b, "[See the run on iterion's admin page](%s). ", link)
	}
	switch a := run.Trigger.Actor; {
	case v.at.Schedule != "" && strings.HasPrefix(v.at.Tick, "manual-"):
		fmt.Fprintf(&b, "Started by schedule `%s`, fired by hand. ", inert(shortSchedule(v.at.Schedule)))
	case v.at.Schedule != "":
		fmt.Fprintf(&b, "Started by schedule `%s`, tick %s. ", inert(shortSchedule(v.at.Schedule)), inert(v.at.Tick))
	case a != "":
		fmt.Fprintf(&b, "Started by `%s`. ", inert(a))
	}
	done, current := v.done, v.current
	if v.warning != "" {
		fmt.Fprintf(&b, "⚠️ %s.\n\n", Disarm(v.warning))
	}
	fmt.Fprintf(&b, "%d step%s done", done, plural(done))
	if !run.Status.Terminal() && len(current) > 0 {
		fmt.Fprintf(&b, "; now at %s", codeList(current, 3))
	}
	b.WriteString(".\n")
	if open := openQuestions(v); len(open) > 0 {
		b.WriteString("\n**Waiting for answers:**\n")
		for _, line := range open {
			b.WriteString(line + "\n")
		}
		if at, ok := earliest(v.snap.Gates); ok {
			fmt.Fprintf(&b, "\nThe run waits for them until %s.\n", at.UTC().Format("2006-01-02 15:04 UTC"))
		}
	}
	b.WriteString(endSummary(v))
	return b.String()
}

// progress is what a run's event log says of its steps, folded as the
// log grows: a sync reads only the events since the last.
type progress struct {
	after   int64  // the last event folded
	warning string // the sandbox's warning, from run_started
	done    int
	running map[string]bool
	order   []string // nodes in the order first started, each once
}

func newProgress() *progress { return &progress{running: map[string]bool{}} }

func (p *progress) add(events []engine.Event) {
	for _, ev := range events {
		if ev.Seq <= p.after {
			continue
		}
		p.after = ev.Seq
		switch ev.Type {
		case engine.EventRunStarted:
			p.warning, _ = ev.Data["sandbox_warning"].(string)
		case engine.EventNodeStarted:
			if _, seen := p.running[ev.NodeID]; !seen {
				p.order = append(p.order, ev.NodeID)
			}
			p.running[ev.NodeID] = true
		case engine.EventNodeFinished:
			p.done++
			p.running[ev.NodeID] = false
		case engine.EventRunResumed, engine.EventRunPaused:
			for n := range p.running {
				p.running[n] = false
			}
		}
	}
}

// current names the nodes executing, in the order they first started.
func (p *progress) current() []string {
	var out []string
	for _, n := range p.order {
		if p.running[n] {
			out = append(out, n)
		}
	}
	return out
}

func codeList(names []string, max int) string {
	var parts []string
	for i, n := range names {
		if i == max {
			parts = append(parts, fmt.Sprintf("%d more", len(names)-max))
			break
		}
		parts = append(parts, "`"+n+"`")
	}
	return strings.Join(parts, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func earliest(m map[string]time.Time) (time.Time, bool) {
	var at time.Time
	for _, t := range m {
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	return at, !at.IsZero()
}

// openQuestions lists the run's pending questions that have a comment,
// each linked to it.
func openQuestions(v *view) []string {
	var lines []string
	for _, ix := range v.ixs {
		if !ix.Pending() || ix.Kind == engine.KindAwait {
			continue
		}
		label := "question"
		if n := v.numbers[ix.ID]; n > 0 {
			label = "Q" + strconv.Itoa(n)
		}
		if id := ix.Posts["github"]; id != "" {
			label = fmt.Sprintf("[%s](%s)", label, v.commentURL(id))
		}
		lines = append(lines, fmt.Sprintf("- %s: %s", label, plain(questionText(ix), 200)))
	}
	return lines
}

// endSummary is the ending of a finished or failed run: how it ended, the
// tokens it used and its published artifacts.
func endSummary(v *view) string {
	run := v.run
	if !run.Status.Terminal() && run.Status != engine.StatusFailedResumable {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n")
	if !run.FinishedAt.IsZero() {
		fmt.Fprintf(&b, "Took %s", run.FinishedAt.Sub(run.CreatedAt).Round(time.Second))
	} else {
		b.WriteString("Ended")
	}
	if v.snap.Tokens > 0 {
		fmt.Fprintf(&b, ", %d tokens", v.snap.Tokens)
	}
	if v.snap.CostUSD > 0 {
		fmt.Fprintf(&b, " ($%.4f)", v.snap.CostUSD)
	}
	b.WriteString(".\n")
	if run.Status != engine.StatusFinished {
		if run.FailureCode != "" {
			fmt.Fprintf(&b, "\nFailure `%s`", run.FailureCode)
		} else {
			b.WriteString("\nStopped")
		}
		if run.Error != "" {
			fmt.Fprintf(&b, ":\n\n```\n%s\n```\n", strings.ReplaceAll(oneLine(Disarm(run.Error), 2000), "```", "'''"))
		} else {
			b.WriteString(".\n")
		}
	}
	names := slices.Sorted(maps.Keys(v.snap.Artifacts))
	if len(names) > 0 {
		b.WriteString("\n**Published artifacts:**\n")
	}
	for _, name := range names {
		data, err := json.MarshalIndent(v.snap.Artifacts[name], "", "  ")
		if err != nil {
			continue
		}
		text := strings.ReplaceAll(Disarm(string(data)), "```", "'''")
		if len(text) > 8000 {
			text = text[:8000] + "\n…"
		}
		fmt.Fprintf(&b, "\n<details><summary><code>%s</code> (version %d)</summary>\n\n```json\n%s\n```\n\n</details>\n",
			html.EscapeString(oneLine(name, 100)), v.snap.Versions[name], text)
	}
	return b.String()
}

// questionText is what a question asks: an agent's question, or a human
// node's instructions.
func questionText(ix *engine.Interaction) string {
	if q := ix.Question(); q != "" {
		return q
	}
	if s, ok := ix.Questions["_instructions"].(string); ok && s != "" {
		return s
	}
	return "input for `" + ix.NodeID + "`"
}

// options returns the labels a question offers, in order.
func options(ix *engine.Interaction) []string {
	var labels []string
	switch opts := ix.Questions[engine.OptionsKey].(type) {
	case []engine.Option:
		for _, o := range opts {
			labels = append(labels, cmp.Or(o.Label, o.ID))
		}
	case []any:
		for _, o := range opts {
			if m, ok := o.(map[string]any); ok {
				label, _ := m["label"].(string)
				id, _ := m["id"].(string)
				if l := cmp.Or(label, id); l != "" {
					labels = append(labels, l)
				}
			}
		}
	}
	return labels
}

// formFields are the fields of a human node's form, sorted; nil for a
// question answered with one text.
func formFields(ix *engine.Interaction) []string {
	if ix.Kind != engine.KindBlocking || ix.Question() != "" {
		return nil
	}
	var fields []string
	for k := range ix.Questions {
		if !strings.HasPrefix(k, "_") {
			fields = append(fields, k)
		}
	}
	slices.Sort(fields)
	return fields
}

// followUpLines say what is to come of an unanswered question: its next
// reminder, its escalation, its expiry.
func followUpLines(f *engine.FollowUp) string {
	if f == nil {
		return ""
	}
	at := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }
	var b strings.Builder
	if !f.NextReminder.IsZero() {
		fmt.Fprintf(&b, "🔔 Next reminder at %s.\n", at(f.NextReminder))
	}
	switch {
	case f.Escalated:
		fmt.Fprintf(&b, "⬆️ Escalated: %s may answer too.\n", names(f.EscalateTo))
	case !f.EscalateAt.IsZero():
		fmt.Fprintf(&b, "⬆️ At %s, %s may answer too.\n", at(f.EscalateAt), names(f.EscalateTo))
	}
	if !f.ExpireAt.IsZero() {
		if len(f.Default) > 0 {
			fmt.Fprintf(&b, "⌛ Expires at %s, then answered with its default: %s.\n", at(f.ExpireAt), plain(defaultText(f.Default), 300))
		} else {
			fmt.Fprintf(&b, "⌛ Expires at %s; then the run fails, this question unanswered.\n", at(f.ExpireAt))
		}
	}
	return b.String()
}

// names lists people and teams as code, never as mentions.
func names(who []string) string {
	var out []string
	for _, w := range who {
		out = append(out, "`"+inert(w)+"`")
	}
	return strings.Join(out, ", ")
}

// defaultText writes a default answer: its text, or field: value pairs.
func defaultText(d map[string]string) string {
	if text, ok := d[engine.QuestionKey]; ok && len(d) == 1 {
		return text
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(d)) {
		parts = append(parts, k+": "+d[k])
	}
	return strings.Join(parts, ", ")
}

// renderFollowUp is the comment of a question's reminder or escalation,
// and its marker's key.
func renderFollowUp(v *view, ix *engine.Interaction, kind string, reminder int) (body, key string) {
	qid := "Q" + strconv.Itoa(v.numbers[ix.ID])
	link := qid
	if id := ix.Posts["github"]; id != "" && v.posts[postStatusURL] != "" {
		link = "[" + qid + "](" + v.commentURL(id) + ")"
	}
	var b strings.Builder
	if kind == engine.OutboxQuestionEscalated {
		fmt.Fprintf(&b, "⬆️ Question %s from `%s` in run `%s` is escalated: %s may answer it too.\n", link, inert(ix.NodeID), inert(v.run.ID), names(ix.FollowUp.EscalateTo))
		key = questionKey(ix.ID) + "-escalated"
	} else {
		who := "Reminder"
		if actor := v.run.Trigger.Actor; actor != "" && validLogin(actor) {
			who = "@" + actor + ", a reminder"
		}
		fmt.Fprintf(&b, "🔔 %s: question %s from `%s` in run `%s` still waits for an answer.\n", who, link, inert(ix.NodeID), inert(v.run.ID))
		key = questionKey(ix.ID) + "-reminder-" + strconv.Itoa(reminder)
	}
	if l := v.pageLink("q", ix.ID); l != "" {
		fmt.Fprintf(&b, "\nAnswer it there, or on [iterion's admin page](%s).\n", l)
	}
	b.WriteString("\n" + followUpLines(ix.FollowUp))
	return b.String(), key
}

// validLogin reports whether s can be a GitHub login, and so be
// mentioned.
func validLogin(s string) bool {
	if s == "" || len(s) > 39 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// renderQuestion is a question's PR comment: the short id people type and
// quote, the text, the options, how to answer and the deadline; once
// answered, who answered.
func renderQuestion(v *view, ix *engine.Interaction) string {
	qid := "Q" + strconv.Itoa(v.numbers[ix.ID])
	var b strings.Builder
	fmt.Fprintf(&b, "**Question %s** · from `%s` in run `%s`\n\n%s\n", qid, inert(ix.NodeID), inert(v.run.ID), quote(questionText(ix)))
	fields := formFields(ix)
	if len(fields) > 0 {
		b.WriteString("\nFields:\n")
		for _, f := range fields {
			desc, _ := ix.Questions[f].(string)
			fmt.Fprintf(&b, "- `%s`: %s\n", inert(f), plain(desc, 500))
		}
	}
	labels := options(ix)
	if len(labels) > 0 {
		b.WriteString("\nOptions:\n")
		for i, l := range labels {
			fmt.Fprintf(&b, "%d. %s\n", i+1, plain(l, 200))
		}
	}
	if !ix.Pending() && ix.AnsweredBy == engine.ExpiryBy && ix.Via == "timer" {
		fmt.Fprintf(&b, "\n⌛ Expired, default used:\n\n%s\n", quote(answerText(ix)))
		return b.String()
	}
	if !ix.Pending() {
		who := cmp.Or(ix.AnsweredBy, "someone")
		fmt.Fprintf(&b, "\n✅ Answered by `%s` via %s:\n\n%s\n", inert(who), plain(delivery.ViaWords(ix.Via), 100), quote(answerText(ix)))
		return b.String()
	}
	if v.run.Status.Terminal() {
		fmt.Fprintf(&b, "\nThe run ended (%s) before this question was answered.\n", v.run.Status)
		return b.String()
	}
	if !ix.AnswerableOn("github") {
		fmt.Fprintf(&b, "\nThis question can be answered only through %s (its workflow's `answer_on`), not on GitHub.\n", delivery.ViaList(ix.AnswerOn))
		return b.String()
	}
	b.WriteString("\n**To answer**, reply quoting this comment")
	switch {
	case len(fields) > 0:
		b.WriteString(" with one `field: value` line per field")
	case len(labels) > 0:
		b.WriteString(" with an option's number or label, or your own words")
	default:
		b.WriteString(" with your answer")
	}
	fmt.Fprintf(&b, ", or comment:\n\n```\n/iterion answer %s <your answer>\n```\n", qid)
	if link := v.pageLink("q", ix.ID); link != "" {
		fmt.Fprintf(&b, "\nOr answer it on [iterion's admin page](%s).\n", link)
	}
	if ix.Kind == engine.KindAsync {
		b.WriteString("\nThe agent keeps working meanwhile and reads the answer at its next turn.\n")
	} else {
		b.WriteString("\nThe run is paused until this is answered.\n")
	}
	if at, ok := earliest(v.snap.Gates); ok && ix.Kind == engine.KindAsync {
		fmt.Fprintf(&b, "⏰ Answer by %s; after that the run stops waiting.\n", at.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if len(ix.Answerers) > 0 {
		names := make([]string, len(ix.Answerers))
		for i, a := range ix.Answerers {
			names[i] = "`" + inert(a) + "`"
		}
		fmt.Fprintf(&b, "Only %s may answer it (the workflow's `answerers`).\n", strings.Join(names, ", "))
	}
	b.WriteString(followUpLines(ix.FollowUp))
	return b.String()
}

// answerText is an answer as people read it: the text, or the form's
// fields one per line.
func answerText(ix *engine.Interaction) string {
	if s := ix.Answer(); s != "" {
		return s
	}
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(ix.Answers)) {
		lines = append(lines, fmt.Sprintf("%s: %v", k, ix.Answers[k]))
	}
	return strings.Join(lines, "\n")
}
