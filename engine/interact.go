package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/dsl"
)

// pauseForHuman stores a blocking interaction for a human node and pauses
// the run: interaction, human_input_requested, run_paused, status and
// checkpoint in one synced transaction.
func (rs *runState) pauseForHuman(ctx context.Context, n *dsl.Node, input map[string]any, iteration int) error {
	questions := map[string]any{}
	if n.Human.Instructions != nil {
		questions["_instructions"] = render(n.Human.Instructions, rs.scope(input))
	}
	if n.Output != nil {
		for _, f := range n.Output.Fields {
			q := f.Type.String()
			if len(f.Enum) > 0 {
				q += " (one of: " + strings.Join(f.Enum, ", ") + ")"
			}
			questions[f.Name] = q
		}
	}
	ix := &Interaction{
		ID: PauseInteractionID(rs.run.ID, n.ID, iteration), RunID: rs.run.ID, NodeID: n.ID,
		Kind: KindBlocking, Questions: questions, RequestedAt: rs.e.now(),
	}
	return rs.pause(ctx, ix, &pauseState{InteractionID: ix.ID, Node: n.ID, Kind: KindBlocking}, map[string]any{})
}

// pause stores ix and the pause state, and sets the run's status.
func (rs *runState) pause(ctx context.Context, ix *Interaction, p *pauseState, extra map[string]any) error {
	rs.mu.Lock()
	rs.ck.Pause = p
	rs.ck.Node = p.Node
	rs.mu.Unlock()
	data := map[string]any{"interaction_id": ix.ID, "questions": ix.Questions}
	for k, v := range extra {
		data[k] = v
	}
	c := Change{
		Status:       StatusPausedWaitingHuman,
		Interactions: []*Interaction{ix},
		Events: []Event{
			rs.event(Event{Type: EventHumanInputRequested, NodeID: p.Node, Data: data}),
			rs.event(Event{Type: EventRunPaused, NodeID: p.Node, Data: map[string]any{"interaction_id": ix.ID}}),
		},
		Outbox: rs.outbox(OutboxRunPaused, ix.ID, map[string]any{"node": p.Node, "questions": ix.Questions}),
		Sync:   true,
	}
	if err := rs.commit(ctx, c); err != nil {
		return err
	}
	return errPaused
}

// ResumeRequest continues a paused, failed_resumable or cancelled run.
type ResumeRequest struct {
	Workflow *dsl.Workflow
	RunID    string
	// Answers answer a blocking pause: field name → text, coerced to the
	// paused node's output schema (ask_user_response for an agent's ask_user).
	Answers map[string]string
	// Force resumes even when the workflow changed since the run started.
	Force bool
	// WorkDir is where the run continues; "" means where it started (the
	// run's WorkDir), else the current directory.
	WorkDir string
	// By and Via record who answered.
	By, Via string
	// InteractionID, when set, is the question the answers are for: a run
	// now paused on another question refuses them (ErrStatusChanged).
	InteractionID string
	// Expect, when set, is the status the caller saw: the run resumes only
	// if it still has it (an answer's resume expects it paused, recovery
	// expects it running), so a run cancelled meanwhile is not revived;
	// otherwise Resume fails with ErrStatusChanged.
	Expect Status
	// Recorded, when set, is called once the answers are stored and the
	// run is marked running again, before it executes: a caller resuming in
	// the background learns that the answers were taken (or, from Resume's
	// error, why not) without waiting for the run.
	Recorded func()
}

// Resume continues a run that stopped resumably and executes it until it
// stops again.
func (e *Engine) Resume(ctx context.Context, req ResumeRequest) (*Run, error) {
	run, err := e.store.Run(ctx, req.RunID)
	if err != nil {
		return nil, fmt.Errorf("resuming run %s: %w", req.RunID, err)
	}
	// A run still marked running was interrupted (its owner died: the
	// caller holds the store, so nobody else executes it); it continues
	// from its checkpoint, re-running the node that was executing.
	if !run.Status.Resumable() && run.Status != StatusRunning {
		return nil, fmt.Errorf("run %s is %s and cannot be resumed", run.ID, run.Status)
	}
	// The run counts as executing from here: a second resume is refused
	// and Cancel reaches it even before it runs a node. The lease is taken
	// at once, so a Stop that read the run before is refused (stale) and
	// retries into Cancel.
	ctx, done, err := e.register(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	defer done()
	sctx := context.WithoutCancel(ctx)
	if run, err = e.store.Acquire(sctx, req.RunID, e.owner); err != nil {
		return nil, fmt.Errorf("resuming run %s: %w", req.RunID, err)
	}
	if run.StopRequested != "" {
		// A stop acknowledged before a crash or before this resume: the
		// run ends cancelled instead of running on.
		return e.stoppedRun(sctx, run.ID)
	}
	if req.Expect != "" && run.Status != req.Expect {
		return nil, fmt.Errorf("run %s is %s, no longer %s: %w", run.ID, run.Status, req.Expect, ErrStatusChanged)
	}
	if run.WorkflowHash != req.Workflow.Hash && !req.Force {
		return nil, fmt.Errorf("the workflow file changed since run %s started: resume with --force to run the new version", run.ID)
	}
	raw, err := e.store.Checkpoint(sctx, run.ID)
	if err != nil {
		return nil, fmt.Errorf("resuming run %s: %w", run.ID, err)
	}
	var ck *checkpoint
	if raw == nil {
		ck = newCheckpoint(req.Workflow)
	} else if ck, err = decodeCheckpoint(raw); err != nil {
		return nil, fmt.Errorf("resuming run %s: %w", run.ID, err)
	}
	if req.InteractionID != "" && (ck.Pause == nil || ck.Pause.InteractionID != req.InteractionID) {
		return nil, fmt.Errorf("run %s is no longer waiting for %s: %w", run.ID, req.InteractionID, ErrStatusChanged)
	}
	if run.Status == StatusPausedWaitingHuman && ck.Pause != nil {
		if err := e.answerPause(sctx, req, run, ck); err != nil {
			return nil, err
		}
	}
	ev := Event{Type: EventRunResumed, Time: e.now(), Data: map[string]any{"resumed_from": string(run.Status), "restart_node": ck.Node}}
	if err := e.store.Commit(sctx, Change{RunID: run.ID, Generation: run.Generation, Status: StatusRunning, Events: []Event{ev}}); err != nil {
		if errors.Is(err, ErrStopRequested) {
			return e.stoppedRun(sctx, run.ID) // a Stop won the race
		}
		return nil, fmt.Errorf("resuming run %s: %w", run.ID, err)
	}
	if req.Recorded != nil {
		req.Recorded()
	}
	return e.drive(ctx, req.Workflow, run, ck, cmp.Or(req.WorkDir, run.WorkDir))
}

// stoppedRun ends a run that a Stop was recorded on and returns it.
func (e *Engine) stoppedRun(ctx context.Context, runID string) (*Run, error) {
	if _, err := e.endIfStopped(ctx, runID); err != nil {
		return nil, err
	}
	return e.store.Run(ctx, runID)
}

// AwaitReady reports whether a run paused on the await_answers tool can
// continue: every async question of the paused node is answered. The owner
// of the run resumes it then, so answering the last question releases the
// agent without anyone calling resume.
func (e *Engine) AwaitReady(ctx context.Context, runID string) (bool, error) {
	run, err := e.store.Run(ctx, runID)
	if err != nil || run.Status != StatusPausedWaitingHuman {
		return false, err
	}
	raw, err := e.store.Checkpoint(ctx, runID)
	if err != nil || raw == nil {
		return false, err
	}
	ck, err := decodeCheckpoint(raw)
	if err != nil || ck.Pause == nil || ck.Pause.Kind != KindAwait {
		return false, err
	}
	pending, err := e.store.Pending(ctx, runID, ck.Pause.Node)
	return err == nil && len(pending) == 0, err
}

// answerPause records the answers of a blocking pause. For a human node
// they become its output; for an LLM node they are handed back to the
// backend when the node runs again.
func (e *Engine) answerPause(ctx context.Context, req ResumeRequest, run *Run, ck *checkpoint) error {
	p := ck.Pause
	ix, err := e.store.Interaction(ctx, run.ID, p.InteractionID)
	if err != nil {
		return fmt.Errorf("resuming run %s: %w", run.ID, err)
	}
	n := req.Workflow.Node(p.Node)
	if n == nil {
		return fmt.Errorf("resuming run %s: paused node %q is not in the workflow", run.ID, p.Node)
	}
	answers := map[string]any{}
	if p.Kind == KindAwait {
		pending, err := e.store.Pending(ctx, run.ID, p.Node)
		if err != nil {
			return err
		}
		if len(pending) > 0 {
			var ids []string
			for _, q := range pending {
				ids = append(ids, q.ID)
			}
			return fmt.Errorf("cannot resume run %s: %d async question(s) still unanswered: %s (answer them with iterion runs answer)", run.ID, len(pending), strings.Join(ids, ", "))
		}
		// The resumed tool call carries every answer; the queued copies of
		// them would reach the agent a second time.
		if _, err := e.store.DrainInbox(ctx, run.ID, p.Node); err != nil {
			return fmt.Errorf("resuming run %s: %w", run.ID, err)
		}
	} else if n.Kind == dsl.NodeHuman {
		out, err := coerceAnswers(n, req.Answers)
		if err != nil {
			return fmt.Errorf("resuming run %s: %w", run.ID, err)
		}
		answers = out
	} else {
		text := strings.TrimSpace(req.Answers[QuestionKey])
		if text == "" {
			return fmt.Errorf("resuming run %s: the agent asked %q: answer with --answer %s=…", run.ID, ix.Question(), QuestionKey)
		}
		answers[QuestionKey] = text
	}
	ix.Answers, ix.AnsweredAt, ix.AnsweredBy, ix.Via = answers, e.now(), req.By, req.Via
	events := []Event{{Type: EventHumanAnswers, NodeID: p.Node, Time: e.now(), Data: map[string]any{"interaction_id": ix.ID, "answers": answers}}}
	if n.Kind == dsl.NodeHuman && p.Kind == KindBlocking {
		// The answers are the node's output; the run goes on from its edges.
		rs := &runState{e: e, w: req.Workflow, run: run, ck: ck, began: e.now(), history: historyReaders(req.Workflow)}
		rs.record(n, answers)
		events = append(events, Event{Type: EventNodeFinished, NodeID: n.ID, Time: e.now(), Data: map[string]any{"output": answers}})
		target, input, err := rs.advance(ctx, n, answers, "")
		if err != nil {
			return fmt.Errorf("resuming run %s: %w", run.ID, err)
		}
		ck.Node, ck.Input = target, input
		events = append(events, rs.events...)
		ck.Pause = nil
	} else {
		ck.Pause.PendingToolUseID = p.PendingToolUseID
	}
	b, err := ck.encode()
	if err != nil {
		return err
	}
	c := Change{RunID: run.ID, Generation: run.Generation, Checkpoint: b, Interactions: []*Interaction{ix}, Events: events, Sync: true}
	if err := e.store.Commit(ctx, c); err != nil {
		return fmt.Errorf("recording the answers of run %s: %w", run.ID, err)
	}
	return nil
}

// coerceAnswers converts a human node's text answers to its output schema.
func coerceAnswers(n *dsl.Node, given map[string]string) (map[string]any, error) {
	out := map[string]any{}
	if n.Output == nil {
		for k, v := range given {
			out[k] = v
		}
		return out, nil
	}
	var problems []string
	for _, f := range n.Output.Fields {
		text, ok := given[f.Name]
		if !ok {
			problems = append(problems, fmt.Sprintf("missing answer for %q (%s): pass --answer %s=…", f.Name, f.Type, f.Name))
			continue
		}
		v, err := coerce(text, *f)
		if err != nil {
			problems = append(problems, fmt.Sprintf("answer for %q: %v", f.Name, err))
			continue
		}
		out[f.Name] = v
	}
	for k := range given {
		if n.Output.Field(k) == nil {
			problems = append(problems, fmt.Sprintf("%q is not a field of %s (fields: %s)", k, n.Output.Name, fieldNames(n.Output)))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return out, nil
}

func fieldNames(s *dsl.Schema) string {
	var names []string
	for _, f := range s.Fields {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

// Answer answers an async question: the store records it (first answer
// wins) and queues it for the asking node, and the doorbell wakes every
// gate that may be waiting for it.
func (e *Engine) Answer(ctx context.Context, req AnswerRequest) (*AnswerResult, error) {
	res, err := e.store.Answer(ctx, req)
	if err == nil {
		e.failAt(FailAnswerCommitted)
	}
	if err != nil {
		if errors.Is(err, ErrNotAsync) {
			return nil, fmt.Errorf("%w: %s is a blocking question; answer it with iterion resume --run-id %s --answer …", err, req.InteractionID, req.RunID)
		}
		return nil, err
	}
	e.bell.ring()
	e.notify(Event{Type: EventInteractionAnswered, RunID: req.RunID, NodeID: res.Interaction.NodeID, Time: res.Interaction.AnsweredAt,
		Data: map[string]any{"interaction_id": req.InteractionID, "async": true, "answer": res.Interaction.Answer()}})
	return res, nil
}

// notify hands an event the store wrote by itself (a posted question, an
// answer) to the OnEvent hook.
func (e *Engine) notify(ev Event) {
	if e.onEvent != nil {
		e.onEvent(ev)
	}
}

// awaitAnswers is the await_answers node: level-triggered on "no pending
// async question in scope", re-checked at every doorbell ring, every poll
// tick (answers through another process) and at the deadline, which is
// stored in the checkpoint so a restart keeps it.
func (rs *runState) awaitAnswers(ctx context.Context, n *dsl.Node, branch string) (map[string]any, error) {
	key := branch + "/" + n.ID
	rs.mu.Lock()
	deadline, rearmed := rs.ck.Gates[key]
	if !rearmed {
		deadline = rs.e.now().Add(n.Timeout)
		rs.ck.Gates[key] = deadline
	}
	rs.mu.Unlock()
	if err := rs.commit(ctx, Change{Sync: true}); err != nil {
		return nil, err
	}
	rs.e.failAt(FailGateParked)
	// The gate is cleared when it opens or times out; a cancelled run keeps
	// it, so a resume re-arms the same deadline.
	defer func() {
		if ctx.Err() == nil {
			rs.mu.Lock()
			delete(rs.ck.Gates, key)
			rs.mu.Unlock()
		}
	}()
	from := n.AwaitAnswers.From
	slot := slotFrom(ctx)
	defer func() { _ = slot.acquire(ctx) }()
	poll := time.NewTicker(rs.e.poll)
	defer poll.Stop()
	for {
		ring := rs.e.bell.wait()
		pending, err := rs.e.store.Pending(ctx, rs.run.ID, from)
		if err != nil {
			return nil, fmt.Errorf("checking pending questions: %w", err)
		}
		if len(pending) == 0 {
			return rs.collectAnswers(ctx, from)
		}
		wait := deadline.Sub(rs.e.now())
		if wait <= 0 {
			var ids []string
			for _, q := range pending {
				ids = append(ids, q.ID)
			}
			return nil, failf(CodeTimeout, "await_answers %q timed out after %s with %d unanswered question(s): %s", n.ID, n.Timeout, len(ids), strings.Join(ids, ", "))
		}
		slot.release()
		timer := time.NewTimer(wait)
		select {
		case <-ring:
		case <-poll.C:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
		timer.Stop()
	}
}

// collectAnswers returns every answered async question in scope, oldest
// first, as the await_answers output.
func (rs *runState) collectAnswers(ctx context.Context, from string) (map[string]any, error) {
	all, err := rs.e.store.Interactions(ctx, rs.run.ID)
	if err != nil {
		return nil, fmt.Errorf("collecting answers: %w", err)
	}
	answers := []any{}
	for _, ix := range all {
		if ix.Kind != KindAsync || ix.Pending() || (from != "" && ix.NodeID != from) {
			continue
		}
		answers = append(answers, map[string]any{
			"interaction_id": ix.ID, "node": ix.NodeID, "question": ix.Question(), "answer": ix.Answer(),
		})
	}
	return map[string]any{"answers": answers}, nil
}
