package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// ReadStore is what the Reader reads: the engine's records and the open
// questions' index (*store.DB).
type ReadStore interface {
	engine.Store
	OpenQuestions(ctx context.Context) ([]delivery.OpenQuestion, error)
}

// Place is where a run belongs, as its channel names it: the repository
// and pull request of a GitHub run, the schedule of a nightly one.
type Place struct {
	// Channel is the run's trigger source: github, slack, cron, api, cli.
	Channel  string `json:"channel"`
	Repo     string `json:"repo,omitempty"` // owner/name
	PR       int    `json:"pr,omitempty"`
	Schedule string `json:"schedule,omitempty"`
}

// Question is a question to a person as the API and the admin page show
// it: what it asks and how it is answered, where its run belongs, its
// deadline and, once answered, who answered through which channel.
type Question struct {
	ID     string                 `json:"id"`
	RunID  string                 `json:"run_id"`
	NodeID string                 `json:"node_id"`
	Kind   engine.InteractionKind `json:"kind"`
	// Text is what it asks: the agent's question, or a form's
	// instructions. It is model output: show it escaped.
	Text string `json:"question"`
	// Options are the answers offered; FreeText says whether other words
	// are taken too.
	Options  []engine.Option `json:"options,omitempty"`
	FreeText bool            `json:"free_text"`
	// Fields, for a form, are its fields, with Hints their descriptions.
	Fields []engine.FormField `json:"fields,omitempty"`
	Hints  map[string]string  `json:"hints,omitempty"`
	// AskedAt is when it was asked; Deadline, when set, when its run stops
	// waiting for it. NextReminder and EscalatedTo are those of its
	// reminders, when it has some.
	AskedAt      time.Time `json:"asked_at"`
	Deadline     time.Time `json:"deadline,omitzero"`
	NextReminder time.Time `json:"next_reminder,omitzero"`
	EscalatedTo  []string  `json:"escalated_to,omitempty"`
	// Run is the question's run; Place where it belongs.
	Run   *engine.Run `json:"-"`
	Place Place       `json:"place"`
	// Posts are the channels' posts that carry it (channel → external
	// id: a PR comment id, a Slack channel/ts).
	Posts map[string]string `json:"posts,omitempty"`
	// AnsweredAt, AnsweredBy, Via and Answer say, once it is answered, when,
	// by whom, through which channel and what.
	AnsweredAt time.Time `json:"answered_at,omitzero"`
	AnsweredBy string    `json:"answered_by,omitempty"`
	Via        string    `json:"via,omitempty"`
	Answer     string    `json:"answer,omitempty"`
	// Audit, when read, is its trail: asked, posted, reminded, answered.
	Audit []AuditEntry `json:"audit,omitempty"`
}

// Pending reports whether q still waits for its answer.
func (q Question) Pending() bool { return q.AnsweredAt.IsZero() }

// AuditEntry is one step of a question's life.
type AuditEntry struct {
	// At is when it happened; zero when the store does not tell (a post's
	// time).
	At time.Time `json:"at,omitzero"`
	// What is asked, posted, answered, or the type of an event of the run
	// that names the question (a reminder's, an expiry's).
	What string `json:"what"`
	// By and Via are who and which channel, for an answer; Channel and
	// Post the channel and its external id, for a post.
	By      string `json:"by,omitempty"`
	Via     string `json:"via,omitempty"`
	Channel string `json:"channel,omitempty"`
	Post    string `json:"post,omitempty"`
	// Detail is what else the entry says (the answer, an event's data).
	Detail string `json:"detail,omitempty"`
}

// QuestionFilter selects open questions. Zero fields select everything.
type QuestionFilter struct {
	// Repo keeps the questions of runs of that repository (owner/name,
	// any case).
	Repo string
	// RunID keeps one run's questions.
	RunID string
	// OlderThan keeps the questions asked at least that long ago.
	OlderThan time.Duration
	// DeadlineWithin keeps the questions whose deadline is at most that
	// far from now (passed ones included).
	DeadlineWithin time.Duration
	// Allow, when set, keeps the questions of the runs it accepts (the
	// page's "asked to me").
	Allow func(ctx context.Context, run *engine.Run, p Place) bool
	// Offset skips that many; Limit returns at most that many (0 means
	// DefaultLimit, more than MaxLimit is cut to it).
	Offset, Limit int
}

// Page sizes of the questions' lists.
const (
	DefaultLimit = 100
	MaxLimit     = 500
)

// QuestionPage is one page of open questions, newest first.
type QuestionPage struct {
	Questions []Question `json:"questions"`
	// Total is how many questions the filter selects, over every page.
	Total  int `json:"total"`
	Offset int `json:"offset"`
}

// Reader reads questions and runs for the API and the admin page: the
// open questions across every run with their filters, one question with
// its audit trail, a run's questions.
type Reader struct {
	store ReadStore
	place func(*engine.Run) Place
	now   func() time.Time
}

// NewReader returns a Reader over s. place says where a run belongs (nil
// means nowhere but its channel); now is the clock ages and deadlines are
// measured by (nil means time.Now).
func NewReader(s ReadStore, place func(*engine.Run) Place, now func() time.Time) *Reader {
	if now == nil {
		now = time.Now
	}
	return &Reader{store: s, place: place, now: now}
}

// Place is where run belongs.
func (r *Reader) Place(run *engine.Run) Place {
	if r.place != nil {
		if p := r.place(run); p.Channel != "" {
			return p
		}
	}
	return Place{Channel: run.Trigger.Source}
}

// Questions returns the page of open questions f selects, newest first.
func (r *Reader) Questions(ctx context.Context, f QuestionFilter) (QuestionPage, error) {
	open, err := r.store.OpenQuestions(ctx)
	if err != nil {
		return QuestionPage{}, err
	}
	now := r.now()
	places := map[string]Place{}
	allowed := map[string]bool{}
	deadlines := map[string]runDeadlines{}
	keep := make([]int, 0, len(open)) // indexes into open
	for i, q := range open {
		if f.RunID != "" && q.RunID != f.RunID || f.OlderThan > 0 && now.Sub(q.RequestedAt) < f.OlderThan {
			continue
		}
		p, seen := places[q.RunID]
		if !seen {
			p = r.Place(q.Run)
			places[q.RunID] = p
			allowed[q.RunID] = f.Allow == nil || f.Allow(ctx, q.Run, p)
		}
		if f.Repo != "" && !strings.EqualFold(p.Repo, f.Repo) || !allowed[q.RunID] {
			continue
		}
		if f.DeadlineWithin > 0 {
			d, err := r.deadlines(ctx, deadlines, q.Run)
			if err != nil {
				return QuestionPage{}, err
			}
			if at := d.of(q.Kind); at.IsZero() || at.Sub(now) > f.DeadlineWithin {
				// The question's own expiry, which only its record holds.
				ix, err := r.store.Interaction(ctx, q.RunID, q.InteractionID)
				if err != nil && !errors.Is(err, engine.ErrNotFound) {
					return QuestionPage{}, err
				}
				if ix == nil || ix.FollowUp == nil || ix.FollowUp.ExpireAt.IsZero() || ix.FollowUp.ExpireAt.Sub(now) > f.DeadlineWithin {
					continue
				}
			}
		}
		keep = append(keep, i)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	page := QuestionPage{Total: len(keep), Offset: f.Offset, Questions: []Question{}}
	if f.Offset >= len(keep) {
		return page, nil
	}
	for _, i := range keep[f.Offset:min(len(keep), f.Offset+limit)] {
		q := open[i]
		ix, err := r.store.Interaction(ctx, q.RunID, q.InteractionID)
		if errors.Is(err, engine.ErrNotFound) {
			continue // pruned since the list was read
		}
		if err != nil {
			return QuestionPage{}, err
		}
		d, err := r.deadlines(ctx, deadlines, q.Run)
		if err != nil {
			return QuestionPage{}, err
		}
		page.Questions = append(page.Questions, r.question(ix, q.Run, places[q.RunID], d))
	}
	return page, nil
}

// Question returns one question of a run, with its audit trail.
func (r *Reader) Question(ctx context.Context, runID, ixID string) (Question, error) {
	run, err := r.store.Run(ctx, runID)
	if err != nil {
		return Question{}, err
	}
	ix, err := r.store.Interaction(ctx, runID, ixID)
	if err != nil {
		return Question{}, err
	}
	d, err := r.deadlines(ctx, map[string]runDeadlines{}, run)
	if err != nil {
		return Question{}, err
	}
	q := r.question(ix, run, r.Place(run), d)
	evs, err := r.store.Events(ctx, runID, 0, 0)
	if err != nil {
		return Question{}, err
	}
	q.Audit = audit(ix, evs)
	return q, nil
}

// RunQuestions returns every question of a run, oldest first, with their
// audit trails; the waits of agents (await) are left out, their
// questions being listed themselves.
func (r *Reader) RunQuestions(ctx context.Context, run *engine.Run) ([]Question, error) {
	ixs, err := r.store.Interactions(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	d, err := r.deadlines(ctx, map[string]runDeadlines{}, run)
	if err != nil {
		return nil, err
	}
	evs, err := r.store.Events(ctx, run.ID, 0, 0)
	if err != nil {
		return nil, err
	}
	p := r.Place(run)
	out := []Question{}
	for _, ix := range ixs {
		if ix.Kind == engine.KindAwait {
			continue
		}
		q := r.question(ix, run, p, d)
		q.Audit = audit(ix, evs)
		out = append(out, q)
	}
	return out, nil
}

// RunFilter selects runs. Zero fields select everything.
type RunFilter struct {
	Status engine.Status
	// Repo keeps the runs of a repository (owner/name, any case); Channel
	// those a channel started.
	Repo, Channel string
	// Offset skips that many; Limit returns at most that many (0 means
	// DefaultLimit, more than MaxLimit is cut to it).
	Offset, Limit int
}

// RunPage is one page of runs, newest first.
type RunPage struct {
	Runs   []*engine.Run `json:"runs"`
	Total  int           `json:"total"`
	Offset int           `json:"offset"`
}

// Runs returns the page of runs f selects, newest first.
func (r *Reader) Runs(ctx context.Context, f RunFilter) (RunPage, error) {
	all, err := r.store.Runs(ctx, engine.RunFilter{Status: f.Status})
	if err != nil {
		return RunPage{}, err
	}
	var keep []*engine.Run
	for _, run := range all {
		if f.Channel != "" && run.Trigger.Source != f.Channel {
			continue
		}
		if f.Repo != "" && !strings.EqualFold(r.Place(run).Repo, f.Repo) {
			continue
		}
		keep = append(keep, run)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	page := RunPage{Total: len(keep), Offset: f.Offset, Runs: []*engine.Run{}}
	if f.Offset < len(keep) {
		page.Runs = keep[f.Offset:min(len(keep), f.Offset+limit)]
	}
	return page, nil
}

// runDeadlines are a run's deadlines, from its checkpoint.
type runDeadlines struct {
	gate  time.Time // the earliest parked await_answers gate's
	pause time.Time // the pause's, when it has one
}

// of returns the deadline of a question of kind k: an async question
// waits until the earliest gate or pause deadline; a blocking one until
// its pause's.
func (d runDeadlines) of(k engine.InteractionKind) time.Time {
	if k != engine.KindAsync {
		return d.pause
	}
	switch {
	case d.gate.IsZero():
		return d.pause
	case d.pause.IsZero() || d.gate.Before(d.pause):
		return d.gate
	}
	return d.pause
}

// deadlines reads run's deadlines, once per run through cache.
func (r *Reader) deadlines(ctx context.Context, cache map[string]runDeadlines, run *engine.Run) (runDeadlines, error) {
	if d, ok := cache[run.ID]; ok {
		return d, nil
	}
	var d runDeadlines
	raw, err := r.store.Checkpoint(ctx, run.ID)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return d, fmt.Errorf("reading the deadlines of run %s: %w", run.ID, err)
	}
	if snap, err := engine.ReadSnapshot(raw); err == nil {
		// A checkpoint this build cannot read has no deadline to show.
		for _, at := range snap.Gates {
			if d.gate.IsZero() || at.Before(d.gate) {
				d.gate = at
			}
		}
		d.pause = snap.PauseDeadline
	}
	cache[run.ID] = d
	return d, nil
}

// question shows interaction ix of run.
func (r *Reader) question(ix *engine.Interaction, run *engine.Run, p Place, d runDeadlines) Question {
	q := Question{
		ID: ix.ID, RunID: run.ID, NodeID: ix.NodeID, Kind: ix.Kind, AskedAt: ix.RequestedAt, Run: run, Place: p,
		Posts: maps.Clone(ix.Posts), AnsweredAt: ix.AnsweredAt, AnsweredBy: ix.AnsweredBy, Via: ix.Via,
	}
	q.Text = ix.Question()
	if q.Text == "" {
		q.Text, _ = ix.Questions["_instructions"].(string)
	}
	q.Options = options(ix.Questions[engine.OptionsKey])
	if free, ok := ix.Questions[engine.FreeTextKey].(bool); ok {
		q.FreeText = free
	} else {
		// Upstream's default: free text when no options are offered; the
		// channels take words besides the options too.
		q.FreeText = true
	}
	if ix.Kind == engine.KindBlocking && ix.Question() == "" {
		q.Fields = formFields(ix)
		q.Hints = map[string]string{}
		for _, f := range q.Fields {
			if h, ok := ix.Questions[f.Name].(string); ok {
				q.Hints[f.Name] = h
			}
		}
	}
	if q.Pending() {
		q.Deadline = d.of(ix.Kind)
		if f := ix.FollowUp; f != nil {
			if !f.ExpireAt.IsZero() && (q.Deadline.IsZero() || f.ExpireAt.Before(q.Deadline)) {
				q.Deadline = f.ExpireAt
			}
			q.NextReminder = f.NextReminder
			if f.Escalated {
				q.EscalatedTo = slices.Clone(f.EscalateTo)
			}
		}
	} else {
		q.Answer = answerText(ix)
	}
	return q
}

// formFields are a form's fields: those the engine recorded, else (a
// record of an older build) the question's own keys, as text.
func formFields(ix *engine.Interaction) []engine.FormField {
	if len(ix.Fields) > 0 {
		return slices.Clone(ix.Fields)
	}
	var out []engine.FormField
	for _, k := range slices.Sorted(maps.Keys(ix.Questions)) {
		if !strings.HasPrefix(k, "_") {
			out = append(out, engine.FormField{Name: k, Type: "string"})
		}
	}
	return out
}

// options reads the offered options as stored: engine.Options when the
// record was just made, JSON objects once read back.
func options(v any) []engine.Option {
	var out []engine.Option
	switch opts := v.(type) {
	case []engine.Option:
		out = slices.Clone(opts)
	case []any:
		for _, o := range opts {
			m, ok := o.(map[string]any)
			if !ok {
				continue
			}
			id, _ := m["id"].(string)
			label, _ := m["label"].(string)
			if id != "" || label != "" {
				out = append(out, engine.Option{ID: id, Label: cmp.Or(label, id)})
			}
		}
	}
	return out
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

// audit is the trail of ix: its asking, its posts, the events of the run
// that name it (a reminder's, an expiry's), and its answer.
func audit(ix *engine.Interaction, evs []engine.Event) []AuditEntry {
	out := []AuditEntry{{At: ix.RequestedAt, What: "asked", Detail: "by node " + ix.NodeID}}
	for _, ch := range slices.Sorted(maps.Keys(ix.Posts)) {
		out = append(out, AuditEntry{What: "posted", Channel: ch, Post: ix.Posts[ch]})
	}
	answered := false
	for _, ev := range evs {
		if id, _ := ev.Data["interaction_id"].(string); id != ix.ID {
			continue
		}
		switch ev.Type {
		case engine.EventHumanInputRequested, engine.EventRunPaused:
			// The asking is the first entry; a pause is the run's.
		case engine.EventInteractionAnswered, engine.EventHumanAnswers:
			if !answered && !ix.Pending() {
				answered = true
				out = append(out, answeredEntry(ix))
			}
		case engine.EventQuestionReminded:
			out = append(out, AuditEntry{At: ev.Time, What: "reminded", Detail: fmt.Sprintf("reminder %v", ev.Data["reminder"])})
		case engine.EventQuestionEscalated:
			to, _ := ev.Data["to"].([]any)
			var names []string
			for _, n := range to {
				names = append(names, fmt.Sprint(n))
			}
			if ss, ok := ev.Data["to"].([]string); ok {
				names = ss
			}
			out = append(out, AuditEntry{At: ev.Time, What: "escalated", Detail: "to " + strings.Join(names, ", ")})
		default:
			e := AuditEntry{At: ev.Time, What: ev.Type}
			e.By, _ = ev.Data["by"].(string)
			e.Via, _ = ev.Data["via"].(string)
			e.Channel, _ = ev.Data["channel"].(string)
			e.Detail = eventDetail(ev.Data)
			out = append(out, e)
		}
	}
	if !answered && !ix.Pending() {
		out = append(out, answeredEntry(ix))
	}
	return out
}

// Expired reports whether q was answered by its default, at its expiry.
func (q Question) Expired() bool { return q.AnsweredBy == engine.ExpiryBy && q.Via == "timer" }

// answeredEntry is the trail's entry of ix's answer: an expired
// question's default says so.
func answeredEntry(ix *engine.Interaction) AuditEntry {
	if ix.AnsweredBy == engine.ExpiryBy && ix.Via == "timer" {
		return AuditEntry{At: ix.AnsweredAt, What: "expired, default used", Detail: answerText(ix)}
	}
	return AuditEntry{At: ix.AnsweredAt, What: "answered", By: ix.AnsweredBy, Via: ix.Via, Detail: answerText(ix)}
}

// eventDetail writes an event's data but the keys an audit entry shows
// apart, key=value, sorted.
func eventDetail(data map[string]any) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(data)) {
		switch k {
		case "interaction_id", "by", "via", "channel":
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%v", k, data[k]))
	}
	return strings.Join(parts, " ")
}
