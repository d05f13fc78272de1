package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/iterion-bot/iterion/dsl"
)

// Question follow-ups: a question's reminders, escalation and expiry
// (issue 14, item 2) are timer rows in the store, written with the
// question (PostQuestion, or the pause's Commit) at absolute times. One
// loop per engine waits for the row due first on a time.Timer, woken
// when rows are added; nothing polls. Firing a row removes it in the same
// synced transaction as what it does, so a restart neither loses nor
// repeats a reminder or an escalation. An expiry answers through the
// engine's Answer door, whose first-answer-wins rule makes it happen once
// too; or, with no default, fails the run.

// followUpLoop is the state of the engine's timer loop.
type followUpLoop struct {
	mu      sync.Mutex
	running bool
	closed  bool
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// followUpOf is the follow-up of a question node n asks at now.
func followUpOf(n *dsl.Node, now time.Time) *FollowUp {
	f := n.FollowUp
	if f == nil {
		return nil
	}
	out := &FollowUp{Remind: f.Remind, EscalateTo: slices.Clone(f.EscalateTo), Default: maps.Clone(f.Default)}
	if text, ok := f.Default[dsl.AsyncDefaultKey]; ok && n.Kind != dsl.NodeHuman {
		out.Default = map[string]string{QuestionKey: text}
	}
	if f.Remind > 0 {
		out.NextReminder = now.Add(f.Remind)
	}
	if f.EscalateAfter > 0 {
		out.EscalateAt = now.Add(f.EscalateAfter)
	}
	if f.Expire > 0 {
		out.ExpireAt = now.Add(f.Expire)
	}
	return out
}

// checkAsyncDefault refuses, at once, an async question whose node's
// default is not among the options it offers options-only.
func checkAsyncDefault(n *dsl.Node, q AsyncQuestion) error {
	if n.FollowUp == nil || n.FollowUp.Default == nil || len(q.Options) == 0 {
		return nil
	}
	if q.AllowFreeText == nil || *q.AllowFreeText {
		return nil // other words are taken: any default is one
	}
	def := n.FollowUp.Default[dsl.AsyncDefaultKey]
	var labels []string
	for _, o := range q.Options {
		if o.Label == def || o.ID == def {
			return nil
		}
		labels = append(labels, o.Label)
	}
	return fmt.Errorf("the question was not posted: node %s answers an expired question with %q, which is not one of its options (%s); offer %q among them, or allow free text", n.ID, def, strings.Join(labels, ", "), def)
}

// wakeFollowUps makes the timer loop look at the rows again, starting it
// when it is not running.
func (e *Engine) wakeFollowUps() {
	l := &e.followUps
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if !l.running {
		l.running = true
		l.wake, l.stop, l.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		go e.followUpTimers(l.wake, l.stop, l.done)
		return
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// stopFollowUps ends the timer loop and waits for it.
func (e *Engine) stopFollowUps() {
	l := &e.followUps
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	running, stop, done := l.running, l.stop, l.done
	l.mu.Unlock()
	if running {
		close(stop)
		<-done
	}
}

// followUpRetry is how long the loop waits after the store failed it.
const followUpRetry = 5 * time.Second

// followUpTimers fires the stored timers as they come due. It returns
// when no row is left (a new row starts it again) or at stop.
func (e *Engine) followUpTimers(wake, stop, done chan struct{}) {
	defer close(done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-done:
		}
	}()
	for {
		t, ok, err := e.store.NextTimer(ctx)
		var due <-chan time.Time
		var timer *time.Timer
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			e.log.Error("reading the questions' timers failed", "err", err)
			due = time.After(followUpRetry)
		case !ok:
			l := &e.followUps
			l.mu.Lock()
			select {
			case <-wake: // a row came meanwhile
				l.mu.Unlock()
				continue
			default:
			}
			l.running = false
			l.mu.Unlock()
			return
		default:
			if wait := t.Due.Sub(e.now()); wait > 0 {
				timer = time.NewTimer(wait)
				due = timer.C
			} else {
				if err := e.fireFollowUp(ctx, t); err != nil && ctx.Err() == nil {
					e.log.Error("a question's timer failed", "run", t.RunID, "question", t.InteractionID, "what", t.What, "err", err)
					due = time.After(followUpRetry)
					break
				}
				continue
			}
		}
		select {
		case <-stop:
		case <-wake:
		case <-due:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// fireFollowUp does what timer t says, and removes it.
func (e *Engine) fireFollowUp(ctx context.Context, t Timer) error {
	drop := func() error { _, _, err := e.store.FireTimer(ctx, t, nil); return err }
	ix, err := e.store.Interaction(ctx, t.RunID, t.InteractionID)
	if errors.Is(err, ErrNotFound) {
		return drop()
	}
	if err != nil {
		return err
	}
	run, err := e.store.Run(ctx, t.RunID)
	if errors.Is(err, ErrNotFound) {
		return drop()
	}
	if err != nil {
		return err
	}
	f := ix.FollowUp
	if !ix.Pending() || !f.Due(t) || run.Status.Terminal() || ix.Kind == KindBlocking && run.Status != StatusPausedWaitingHuman {
		// Answered, re-asked since, or no longer asked.
		return drop()
	}
	switch t.What {
	case TimerRemind, TimerEscalate:
		return e.remindOrEscalate(ctx, run, ix, t)
	case TimerExpire:
		if err := e.expireQuestion(ctx, run, ix); err != nil {
			return err
		}
		return drop()
	}
	return drop()
}

// remindOrEscalate sends the reminder or the escalation of t.
func (e *Engine) remindOrEscalate(ctx context.Context, run *Run, ix *Interaction, t Timer) error {
	f := *ix.FollowUp
	fire := &TimerFire{FollowUp: &f}
	data := map[string]any{"interaction_id": ix.ID}
	kind, ev := OutboxQuestionReminded, EventQuestionReminded
	if t.What == TimerRemind {
		f.Reminders++
		data["reminder"] = f.Reminders
		f.NextReminder = time.Time{}
		// Reminders missed while no process owned the store are one, now.
		next := t.Due.Add(f.Remind)
		for now := e.now(); f.Remind > 0 && !next.After(now); {
			next = next.Add(f.Remind)
		}
		if f.Remind > 0 && (f.ExpireAt.IsZero() || next.Before(f.ExpireAt)) {
			f.NextReminder = next
			fire.Next = []Timer{{Due: next, RunID: run.ID, InteractionID: ix.ID, What: TimerRemind}}
		}
		if !f.NextReminder.IsZero() {
			data["next_reminder"] = f.NextReminder.UTC().Format(time.RFC3339)
		}
	} else {
		f.Escalated = true
		data["to"] = slices.Clone(f.EscalateTo)
		kind, ev = OutboxQuestionEscalated, EventQuestionEscalated
	}
	fire.Events = []Event{{Type: ev, NodeID: ix.NodeID, Time: e.now(), Data: data}}
	if len(run.Channels) > 0 {
		fire.Outbox = []OutboxRow{{Kind: kind, RunID: run.ID, InteractionID: ix.ID, Channels: run.Channels, Payload: mustJSON(data)}}
	}
	stored, fired, err := e.store.FireTimer(ctx, t, fire)
	if err != nil {
		return err
	}
	if fired {
		for _, ev := range stored {
			e.notify(ev)
		}
		e.wakeFollowUps()
	}
	return nil
}

// expireQuestion answers ix with its default, via "timer", or, with no
// default, fails a run paused on it.
func (e *Engine) expireQuestion(ctx context.Context, run *Run, ix *Interaction) error {
	def := ix.FollowUp.Default
	if len(def) == 0 {
		if ix.Kind == KindAsync {
			return nil // its gate's timeout says what is unanswered
		}
		return e.failExpired(ctx, run.ID, ix)
	}
	req := AnswerRequest{RunID: run.ID, InteractionID: ix.ID, By: ExpiryBy, Via: "timer"}
	if ix.Kind == KindAsync {
		req.Text = def[QuestionKey]
	} else {
		req.Fields = map[string]any{}
		for k, v := range def {
			req.Fields[k] = v
		}
	}
	_, err := e.Answer(ctx, req)
	var already *AlreadyAnsweredError
	var notWaiting *NotWaitingError
	switch {
	case errors.As(err, &already), errors.As(err, &notWaiting), errors.Is(err, ErrRunEnded):
		return nil // answered, or no longer asked: nothing to expire
	case err != nil:
		return fmt.Errorf("answering expired question %s with its default: %w", ix.ID, err)
	}
	e.log.Info("a question expired: its default answered it", "run", run.ID, "question", ix.ID)
	return nil
}

// failExpired fails, resumably, a run still paused on blocking question
// ix, which expired unanswered.
func (e *Engine) failExpired(ctx context.Context, runID string, ix *Interaction) error {
	unlock := e.answers.lock(runID)
	defer unlock()
	if e.isExecuting(runID) {
		return nil
	}
	raw, err := e.store.Checkpoint(ctx, runID)
	if err != nil || raw == nil {
		return err
	}
	ck, err := decodeCheckpoint(raw)
	if err != nil || ck.Pause == nil || ck.Pause.InteractionID != ix.ID {
		return err
	}
	run, err := e.store.Acquire(ctx, runID, e.owner)
	if err != nil {
		return err
	}
	if run.Status != StatusPausedWaitingHuman {
		return nil
	}
	msg := fmt.Sprintf("node %s: question %s expired unanswered at %s (1 unanswered question(s): %s)", ix.NodeID, ix.ID, ix.FollowUp.ExpireAt.UTC().Format(time.RFC3339), ix.ID)
	data := map[string]any{"failure_code": CodeTimeout, "error": msg, "unanswered": []string{ix.ID}, "expired": ix.ID}
	c := Change{
		RunID: run.ID, Generation: run.Generation, Status: StatusFailedResumable, FailureCode: CodeTimeout, Error: msg,
		Events: []Event{{Type: EventRunFailed, NodeID: ix.NodeID, Time: e.now(), Data: data}},
		Sync:   true,
	}
	if len(run.Channels) > 0 {
		c.Outbox = []OutboxRow{{Kind: OutboxRunFailed, RunID: run.ID, Channels: run.Channels,
			Payload: mustJSON(map[string]any{"status": string(StatusFailedResumable), "failure_code": CodeTimeout, "error": msg})}}
	}
	if err := e.store.Commit(ctx, c); err != nil {
		if errors.Is(err, ErrStopRequested) {
			_, err = e.endIfStopped(ctx, runID)
		}
		return err
	}
	e.log.Info("run ended", "run", runID, "status", StatusFailedResumable, "code", CodeTimeout, "expired", ix.ID)
	e.notify(Event{Type: EventRunFailed, RunID: runID, NodeID: ix.NodeID, Time: e.now(), Data: data})
	return nil
}
