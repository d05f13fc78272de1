package github

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// OutboxStore is what the relay needs of the store.
type OutboxStore interface {
	DueOutbox(ctx context.Context, now time.Time, limit int) ([]engine.OutboxRow, error)
	AckOutbox(ctx context.Context, id string) error
	RetryOutbox(ctx context.Context, id string, next time.Time) error
	Run(ctx context.Context, id string) (*engine.Run, error)
	Interaction(ctx context.Context, runID, id string) (*engine.Interaction, error)
}

// MaxOutboxAttempts bounds the tries of a post GitHub keeps refusing (a
// deleted PR, a revoked installation); the last error is logged.
const MaxOutboxAttempts = 10

// Relay performs the GitHub side of outbox rows: a PR comment for each
// question an agent posts, each answer given elsewhere, each pause and
// each end of a run. Comments carry the row id as their marker, so a row
// performed just before a crash is not posted twice.
type Relay struct {
	Store   OutboxStore
	Replies *Commenter
	Log     *slog.Logger
	// Poll is how often due rows are looked for (rows retried later
	// become due without a wake-up).
	Poll time.Duration
	wake chan struct{}
	now  func() time.Time
}

// NewRelay returns a relay polling every second.
func NewRelay(st OutboxStore, replies *Commenter, log *slog.Logger) *Relay {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Relay{Store: st, Replies: replies, Log: log, Poll: time.Second, wake: make(chan struct{}, 1), now: time.Now}
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
	tick := time.NewTicker(r.Poll)
	defer tick.Stop()
	for {
		r.Drain(ctx)
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-tick.C:
		}
	}
}

// Drain performs every row due now, in order.
func (r *Relay) Drain(ctx context.Context) {
	rows, err := r.Store.DueOutbox(ctx, r.now(), 100)
	if err != nil {
		if ctx.Err() == nil {
			r.Log.Error("reading the outbox failed", "err", err)
		}
		return
	}
	for _, row := range rows {
		if ctx.Err() != nil {
			return
		}
		if !slices.Contains(row.Channels, "github") {
			continue
		}
		err := r.perform(ctx, row)
		if err == nil {
			if err := r.Store.AckOutbox(ctx, row.ID); err != nil {
				r.Log.Error("acknowledging an outbox row failed", "row", row.ID, "err", err)
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		var later *RetryLater
		wait := min(time.Duration(1<<min(row.Attempts, 10))*time.Second, 10*time.Minute)
		if errors.As(err, &later) {
			wait = later.After
		} else if row.Attempts+1 >= MaxOutboxAttempts {
			r.Log.Error("a PR comment could not be posted; giving up", "row", row.ID, "kind", row.Kind, "run", row.RunID, "attempts", row.Attempts+1, "err", err)
			if err := r.Store.AckOutbox(ctx, row.ID); err != nil {
				r.Log.Error("acknowledging an outbox row failed", "row", row.ID, "err", err)
			}
			continue
		}
		r.Log.Warn("a PR comment is postponed", "row", row.ID, "kind", row.Kind, "run", row.RunID, "retry_in", wait, "err", err)
		if err := r.Store.RetryOutbox(ctx, row.ID, r.now().Add(wait)); err != nil {
			r.Log.Error("postponing an outbox row failed", "row", row.ID, "err", err)
		}
	}
}

// perform posts row's comment on the run's pull request. Rows of runs
// not started from a PR, and kinds with nothing to say there, are done.
func (r *Relay) perform(ctx context.Context, row engine.OutboxRow) error {
	run, err := r.Store.Run(ctx, row.RunID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	t := run.Trigger
	owner, repo, ok := strings.Cut(t.Repo, "/")
	if t.Source != "github" || !ok || t.PR == 0 || t.Installation == 0 {
		return nil
	}
	var ix *engine.Interaction
	if row.InteractionID != "" {
		if ix, err = r.Store.Interaction(ctx, row.RunID, row.InteractionID); err != nil && !errors.Is(err, engine.ErrNotFound) {
			return err
		}
	}
	body := commentFor(row, run, ix)
	if body == "" {
		return nil
	}
	_, err = r.Replies.Post(ctx, t.Installation, owner, repo, t.PR, "outbox-"+row.ID, body)
	return err
}

// commentFor is the PR comment of an outbox row; "" for none.
func commentFor(row engine.OutboxRow, run *engine.Run, ix *engine.Interaction) string {
	switch row.Kind {
	case engine.OutboxQuestionPosted:
		if ix == nil {
			return ""
		}
		return fmt.Sprintf("**Question** from `%s` (run `%s`):\n\n%s\n\nAnswer with a comment; the agent keeps working meanwhile and reads the answer at its next turn:\n\n```\n/iterion answer %s <your answer>\n```",
			ix.NodeID, run.ID, quote(ix.Question()), ix.ID)
	case engine.OutboxQuestionAnswered:
		// An answer given on GitHub was confirmed in the reply to it.
		if ix == nil || ix.Via == "github" {
			return ""
		}
		who := ix.AnsweredBy
		if who == "" {
			who = "someone"
		}
		return fmt.Sprintf("Question `%s` was answered by %s (via %s):\n\n%s", ix.ID, who, ix.Via, quote(ix.Answer()))
	case engine.OutboxRunPaused:
		return fmt.Sprintf("Run `%s` of `%s` is waiting for answers; `/iterion status` lists the open questions.", run.ID, run.Workflow)
	case engine.OutboxRunFinished:
		return fmt.Sprintf("Run `%s` of `%s` finished.", run.ID, run.Workflow)
	case engine.OutboxRunFailed:
		var p struct {
			Status, Error string
			Code          string `json:"failure_code"`
		}
		_ = json.Unmarshal(row.Payload, &p)
		text := fmt.Sprintf("Run `%s` of `%s` ended %s", run.ID, run.Workflow, cmp.Or(p.Status, string(run.Status)))
		if p.Code != "" {
			text += " [" + p.Code + "]"
		}
		if p.Error != "" {
			text += ":\n\n```\n" + oneLine(Disarm(p.Error), 2000) + "\n```"
		}
		return text
	}
	return ""
}

// Disarm keeps text that others wrote (a comment's words echoed back, an
// agent's question, an answer from Slack) from mentioning people or teams
// in the bot's comments: a zero-width space after each @ leaves it
// readable but not a mention.
func Disarm(text string) string { return strings.ReplaceAll(text, "@", "@\u200b") }

// quote renders text as a Markdown quote, so a question cannot pose as
// the bot's own words or as a command, and with its mentions disarmed.
func quote(text string) string {
	lines := strings.Split(strings.TrimSpace(Disarm(text)), "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}
