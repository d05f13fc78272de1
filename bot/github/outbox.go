package github

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// OutboxStore is what the relay needs of the store.
type OutboxStore interface {
	DueOutbox(ctx context.Context, now time.Time, limit int) ([]engine.OutboxRow, error)
	AckOutbox(ctx context.Context, id string) error
	RetryOutbox(ctx context.Context, id string, next time.Time) error
	Run(ctx context.Context, id string) (*engine.Run, error)
	Interaction(ctx context.Context, runID, id string) (*engine.Interaction, error)
	Interactions(ctx context.Context, runID string) ([]*engine.Interaction, error)
	Events(ctx context.Context, runID string, after int64, limit int) ([]engine.Event, error)
	Checkpoint(ctx context.Context, runID string) ([]byte, error)
	RecordPost(ctx context.Context, runID, ixID, channel, extID string) error
	ShortID(ctx context.Context, scope, runID, ixID string) (int, error)
	ShortIDs(ctx context.Context, scope, runID string) (map[string]int, error)
	SetRunPost(ctx context.Context, runID, name, value string) error
	RunPosts(ctx context.Context, runID string) (map[string]string, error)
}

// MaxOutboxAttempts bounds the tries of a post GitHub keeps refusing (a
// deleted PR); the last error is logged (delivery.MaxOutboxAttempts).
const MaxOutboxAttempts = delivery.MaxOutboxAttempts

// Relay performs the GitHub side of outbox rows. For a run started from a
// pull request it keeps one status comment and a check run on the head
// commit, posts a comment for each question (an agent's async question,
// a human node's form, an agent's blocking question) and edits it when
// the question is answered. Comments carry a marker, so a row performed
// just before a crash is not posted twice; everything else is rendered
// from the store, so performing a row again is harmless.
type Relay struct {
	store       OutboxStore
	replies     *Commenter
	log         *slog.Logger
	poll        time.Duration
	statusEvery time.Duration
	onEnded     func(ctx context.Context, run *engine.Run) error
	failpoint   func(name string)
	wake        chan struct{}
	now         func() time.Time
	pageURL     string

	checksRefused atomic.Bool // GitHub refused a check run; said once

	mu      sync.Mutex
	written map[string]string    // marker key → body this process last wrote
	touched map[string]bool      // runs with progress not yet shown
	synced  map[string]time.Time // when each run's status was last synced
	// progress folds each run's event log as it grows.
	progress map[string]*progress
}

// RelayOptions configure a Relay. Store and Replies are required.
type RelayOptions struct {
	Store   OutboxStore
	Replies *Commenter
	// Log receives the relay's logs; nil means none.
	Log *slog.Logger
	// Poll is how often due rows are looked for (rows retried later
	// become due without a wake-up); 0 means a second.
	Poll time.Duration
	// StatusEvery bounds the edits of a run's status comment for progress
	// (steps done): at most one per StatusEvery; 0 means 10 seconds. State
	// changes (a question, a pause, the end) come through the outbox and
	// are shown at once.
	StatusEvery time.Duration
	// OnEnded, when set, is called for each end of a PR run once the end
	// is shown (serve clears the workspace and starts the next queued run);
	// an error retries the row.
	OnEnded func(ctx context.Context, run *engine.Run) error
	// Failpoint, when set, is called with FailOutboxPerformed after each
	// row is performed, before it is marked done, for crash tests.
	Failpoint func(name string)
	// PageURL, when set, is the admin page's public address
	// (ITERION_PUBLIC_URL): the status comment and the check run link the
	// run's page there, and each question comment the question's.
	PageURL string
}

// The relay's pace by default.
const (
	defaultRelayPoll   = time.Second
	defaultStatusEvery = 10 * time.Second
)

// NewRelay returns the relay of one App's outbox rows.
func NewRelay(o RelayOptions) *Relay {
	return &Relay{
		store: o.Store, replies: o.Replies, log: cmpLog(o.Log),
		poll: cmp.Or(o.Poll, defaultRelayPoll), statusEvery: cmp.Or(o.StatusEvery, defaultStatusEvery),
		onEnded: o.OnEnded, failpoint: o.Failpoint, pageURL: strings.TrimRight(o.PageURL, "/"),
		wake: make(chan struct{}, 1), now: time.Now,
		written: map[string]string{}, touched: map[string]bool{}, synced: map[string]time.Time{}, progress: map[string]*progress{},
	}
}

// Touch says run runID made progress; its status comment shows it at the
// next sync StatusEvery allows. It never blocks.
func (r *Relay) Touch(runID string) {
	r.mu.Lock()
	r.touched[runID] = true
	r.mu.Unlock()
}

// SyncTouched syncs the status of the runs touched since their last sync
// that StatusEvery allows now.
func (r *Relay) SyncTouched(ctx context.Context) {
	r.mu.Lock()
	now := r.now()
	var due []string
	for id := range r.touched {
		if now.Sub(r.synced[id]) >= r.statusEvery {
			due = append(due, id)
			delete(r.touched, id)
		}
	}
	r.mu.Unlock()
	slices.Sort(due)
	for _, id := range due {
		run, err := r.store.Run(ctx, id)
		if err != nil || !onThread(run) {
			continue
		}
		if err := r.syncNow(ctx, id); err != nil && ctx.Err() == nil {
			// Progress is best effort; the next state change syncs again.
			r.log.Warn("updating a run's status comment failed", "run", id, "err", err)
		}
	}
}

// syncNow syncs a run and notes when.
func (r *Relay) syncNow(ctx context.Context, runID string) error {
	err := r.sync(ctx, runID)
	r.mu.Lock()
	r.synced[runID] = r.now()
	if len(r.synced) > 10000 {
		clear(r.synced)
	}
	r.mu.Unlock()
	return err
}

// onThread reports whether run is shown on a pull request or a tracking
// issue.
func onThread(run *engine.Run) bool {
	o, ok := OriginOf(run)
	return ok && strings.Contains(o.Repo, "/") && o.Thread() != 0 && o.Installation != 0
}

// Release makes the postponed outbox rows of installation's runs due now
// (it is back: App.Installations' OnRelease), and wakes the relay.
func (r *Relay) Release(ctx context.Context, installation int64) error {
	core := delivery.Relay{Channel: "github", Store: r.store, Now: r.now}
	runs := map[string]bool{}
	err := core.Release(ctx, func(row engine.OutboxRow) (bool, error) {
		mine, seen := runs[row.RunID]
		if !seen {
			run, err := r.store.Run(ctx, row.RunID)
			if err != nil && !errors.Is(err, engine.ErrNotFound) {
				return false, err
			}
			if run != nil {
				o, ok := OriginOf(run)
				mine = ok && o.Installation == installation
			}
			runs[row.RunID] = mine
		}
		return mine, nil
	})
	r.Wake()
	return err
}

// Wake asks for a look at the outbox now; it never blocks.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run performs due rows until ctx ends.
func (r *Relay) Run(ctx context.Context) {
	tick := time.NewTicker(r.poll)
	defer tick.Stop()
	for {
		r.Drain(ctx)
		r.SyncTouched(ctx)
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-tick.C:
		}
	}
}

// Drain performs every row due now, in order (delivery.Relay).
func (r *Relay) Drain(ctx context.Context) {
	core := delivery.Relay{Channel: "github", Store: r.store, Perform: r.perform, Log: r.log, Now: r.now}
	if r.failpoint != nil {
		core.Failpoint = func() { r.failpoint(FailOutboxPerformed) }
	}
	core.Drain(ctx)
}

// perform does row's side of GitHub for the run's pull request (or its
// schedule's tracking issue): the question's comment for a question or a
// blocking pause, then a sync of the status comment, the question
// comments and the check run. Rows of runs shown on neither are done,
// but for the end of a scheduled run (OnEnded).
func (r *Relay) perform(ctx context.Context, row engine.OutboxRow) error {
	run, err := r.store.Run(ctx, row.RunID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	ended := row.Kind == engine.OutboxRunFinished || row.Kind == engine.OutboxRunFailed
	if !onThread(run) {
		if o, ok := OriginOf(run); ok && o.Schedule != "" && ended && r.onEnded != nil {
			return r.onEnded(ctx, run) // a schedule reporting on Slack alone
		}
		return nil
	}
	if row.InteractionID != "" && (row.Kind == engine.OutboxQuestionPosted || row.Kind == engine.OutboxRunPaused) {
		ix, err := r.store.Interaction(ctx, row.RunID, row.InteractionID)
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			return err
		}
		// An await pause is the agent waiting for questions already posted.
		if ix != nil && ix.Kind != engine.KindAwait && ix.Posts["github"] == "" {
			if err := r.postQuestion(ctx, run, ix); err != nil {
				return err
			}
		}
	}
	if row.InteractionID != "" && (row.Kind == engine.OutboxQuestionReminded || row.Kind == engine.OutboxQuestionEscalated) {
		if err := r.postFollowUp(ctx, run, row); err != nil {
			return err
		}
	}
	// The run's own end is shown first: what follows it (the next queued
	// run) must not hold it back.
	if err := r.syncNow(ctx, run.ID); err != nil {
		return err
	}
	if r.onEnded != nil && ended {
		return r.onEnded(ctx, run)
	}
	return nil
}

// postQuestion numbers a question on its PR, posts its comment and
// records the comment on the interaction.
func (r *Relay) postQuestion(ctx context.Context, run *engine.Run, ix *engine.Interaction) error {
	t, ok := OriginOf(run)
	if !ok {
		return fmt.Errorf("run %s was not started from GitHub", run.ID)
	}
	owner, repo := t.split()
	scope := PRScope(t.Repo, t.Thread())
	if _, err := r.store.ShortID(ctx, scope, run.ID, ix.ID); err != nil {
		return err
	}
	v, err := r.read(ctx, run.ID)
	if err != nil {
		return err
	}
	body := renderQuestion(v, ix)
	cm, err := r.replies.PostComment(ctx, t.Installation, owner, repo, t.Thread(), questionKey(ix.ID), body)
	if err != nil {
		return err
	}
	if err := r.store.RecordPost(ctx, run.ID, ix.ID, "github", strconv.FormatInt(cm.GetID(), 10)); err != nil {
		return err
	}
	// A comment found by its marker (written before a crash) may say
	// less; the sync that follows edits it then.
	if cm.GetBody() == CommentBody(questionKey(ix.ID), body) {
		r.remember(questionKey(ix.ID), body)
	}
	return nil
}

// postFollowUp posts a question's reminder, which mentions the person who
// started the run, or its escalation, which names whom it widens to,
// disarmed (the names come from the workflow, which a pull request may
// change: they never ping anyone). Each is posted once, by its marker.
func (r *Relay) postFollowUp(ctx context.Context, run *engine.Run, row engine.OutboxRow) error {
	ix, err := r.store.Interaction(ctx, row.RunID, row.InteractionID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !ix.Pending() || ix.FollowUp == nil {
		return nil // answered meanwhile: the question's comment says so
	}
	t, ok := OriginOf(run)
	if !ok {
		return nil
	}
	v, err := r.read(ctx, run.ID)
	if err != nil {
		return err
	}
	var data struct {
		Reminder int `json:"reminder"`
	}
	_ = json.Unmarshal(row.Payload, &data) // written by the engine
	body, key := renderFollowUp(v, ix, row.Kind, data.Reminder)
	owner, repo := t.split()
	_, err = r.replies.PostComment(ctx, t.Installation, owner, repo, t.PR, key, body)
	return err
}

// Disarm keeps text that others wrote (a comment's words echoed back, an
// agent's question, an answer from Slack) from mentioning people or teams
// in the bot's comments: a zero-width space after each @ leaves it
// readable but not a mention.
func Disarm(text string) string {
	// Idempotent: text disarmed once is not changed again.
	return strings.ReplaceAll(strings.ReplaceAll(text, "@\u200b", "@"), "@", "@\u200b")
}

// quote renders text as a Markdown quote, so a question or an answer
// (from a PR, an agent or the REST API) cannot pose as the bot's own words
// or as a command: its mentions are disarmed, every line stays inside the
// quote (a lone CR ends a line in Markdown too) and no HTML tag in it can
// close the quote or hide text.
func quote(text string) string {
	text = strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(text)
	lines := strings.Split(strings.TrimSpace(noTags(Disarm(text))), "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}

// noTags keeps HTML in text from being HTML: a zero-width space after
// each < that could open a tag, a comment or a marker leaves it readable.
// Idempotent, like Disarm.
func noTags(text string) string {
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		b.WriteByte(text[i])
		if text[i] == '<' && i+1 < len(text) {
			if c := text[i+1]; c == '/' || c == '!' || c == '?' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') {
				b.WriteString("\u200b")
			}
		}
	}
	return b.String()
}

// plain renders caller text (an agent's question or option, a field's
// description, who answered and through what) as plain text on one line
// of the bot's own Markdown, outside a code span: its lines are joined (so
// no heading, list or "approved by" line of its own), its mentions
// disarmed, and each character that Markdown or HTML would read as markup
// escaped with a backslash, which Markdown drops: no link, image,
// emphasis, code span, tag, entity, strikethrough, math or issue
// reference. At most max characters are kept. Idempotent, like Disarm.
func plain(text string, max int) string {
	text = Disarm(oneLine(text, max))
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == '\\' && i+1 < len(text) && strings.IndexByte(markup, text[i+1]) >= 0 {
			b.WriteString(text[i : i+2]) // escaped already
			i++
			continue
		}
		// An underscore inside a word (snake_case) cannot emphasise.
		intraword := c == '_' && i > 0 && i+1 < len(text) && isASCIIAlnum(text[i-1]) && isASCIIAlnum(text[i+1])
		if strings.IndexByte(markup, c) >= 0 && !intraword {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

func isASCIIAlnum(c byte) bool { return isASCIILetter(c) || '0' <= c && c <= '9' }

// markup are the characters plain escapes.
const markup = "\\`*_[]<>&~$#|"

// unfenced keeps text (a diagnostic quoting a file's lines, an error)
// inside the ``` block the bot puts it in: no line of it can close the
// block.
func unfenced(text string) string {
	return strings.ReplaceAll(Disarm(text), "```", "'''")
}

// inert renders a name from the store (who answered, and through what,
// which API callers once chose themselves) as one line of plain text fit
// for a code span: no mentions, no HTML, no backticks.
func inert(name string) string {
	return strings.ReplaceAll(noTags(Disarm(oneLine(name, 100))), "`", "'")
}

func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
