package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
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
		Kind: KindBlocking, Questions: questions, RequestedAt: rs.e.now(), Fields: FormFields(n),
		AnswerOn: n.AnswerOn, Answerers: n.Answerers,
		FollowUp: followUpOf(n, rs.e.now()),
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
	if ix.FollowUp != nil {
		rs.e.wakeFollowUps()
	}
	if !p.Deadline.IsZero() {
		rs.e.arm(rs.run.ID, ix.ID, p.Deadline)
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
	// Values, when set, are the answers already checked and typed (the
	// Answer door's); Answers is ignored then.
	Values map[string]any
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
		return nil, &WorkflowChangedError{RunID: run.ID, File: run.File}
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
		nw := &NotWaitingError{RunID: run.ID, InteractionID: req.InteractionID, Status: run.Status}
		if ck.Pause != nil {
			nw.WaitingFor = ck.Pause.InteractionID
		}
		return nil, nw
	}
	if run.Status == StatusPausedWaitingHuman && ck.Pause != nil {
		if err := e.answerPause(sctx, req, run, ck); err != nil {
			return nil, err
		}
	}
	ev := Event{Type: EventRunResumed, Time: e.now(), Data: map[string]any{"resumed_from": string(run.Status), "restart_node": ck.Node}}
	if req.By != "" {
		ev.Data["by"] = req.By
	}
	if req.Via != "" {
		ev.Data["via"] = req.Via
	}
	if err := e.store.Commit(sctx, Change{RunID: run.ID, Generation: run.Generation, Status: StatusRunning, Events: []Event{ev}}); err != nil {
		if errors.Is(err, ErrStopRequested) {
			return e.stoppedRun(sctx, run.ID) // a Stop won the race
		}
		return nil, fmt.Errorf("resuming run %s: %w", run.ID, err)
	}
	ev.RunID = run.ID
	e.notify(ev)
	if req.Recorded != nil {
		req.Recorded()
	}
	workdir := cmp.Or(req.WorkDir, run.WorkDir)
	if workdir == "" && e.workDir != nil {
		if workdir, err = e.workDir(run); err != nil {
			return nil, fmt.Errorf("resuming run %s: %w", run.ID, err)
		}
	}
	return e.drive(ctx, req.Workflow, run, ck, workdir)
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
	pending, err := e.store.Pending(ctx, runID, ck.Pause.scope())
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
		pending, err := e.store.Pending(ctx, run.ID, p.scope())
		if err != nil {
			return err
		}
		if len(pending) > 0 {
			var ids []string
			for _, q := range pending {
				ids = append(ids, q.ID)
			}
			return &UnansweredError{RunID: run.ID, Pending: ids}
		}
		// The resumed tool call carries every answer; the queued copies of
		// them would reach the agent a second time. A parked gate collects
		// them itself, and leaves the inbox to the agents.
		if !p.Gate {
			if _, err := e.store.DrainInbox(ctx, run.ID, p.Node); err != nil {
				return fmt.Errorf("resuming run %s: %w", run.ID, err)
			}
		}
	} else {
		values := req.Values
		if values == nil {
			values = map[string]any{}
			for k, v := range req.Answers {
				values[k] = v
			}
		}
		out, err := formValues(n, ix, "", values)
		if err != nil {
			return fmt.Errorf("resuming run %s: %w", run.ID, err)
		}
		answers = out
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
	} else if p.Gate {
		ck.Pause = nil // the gate runs again, finds nothing pending and opens
	} else {
		ck.Pause.PendingToolUseID = p.PendingToolUseID
	}
	b, err := ck.encode()
	if err != nil {
		return err
	}
	c := Change{RunID: run.ID, Generation: run.Generation, Checkpoint: b, Interactions: []*Interaction{ix}, Events: events, Sync: true}
	if p.Kind != KindAwait && len(run.Channels) > 0 {
		// Every channel that shows the question shows who answered it.
		c.Outbox = []OutboxRow{{Kind: OutboxQuestionAnswered, RunID: run.ID, InteractionID: ix.ID, Channels: run.Channels}}
	}
	if err := e.store.Commit(ctx, c); err != nil {
		return fmt.Errorf("recording the answers of run %s: %w", run.ID, err)
	}
	return nil
}

// Answer is the one door for every kind of question, from every channel.
// An async question's first answer is stored and delivered to the asking
// agent at its next turn; when it is the last one a paused await waits
// for, the engine resumes the run. A blocking question's answer (a human
// node's form, an agent's ask_user) is checked against the form, stored,
// and resumes the run. Either way the run resumes once, in the engine's
// run group, and Answer returns once the answer is stored.
//
// Refusals are typed: ErrNotFound; *AlreadyAnsweredError (who answered
// first, and where); *InvalidAnswerError (field by field); ErrEmptyAnswer;
// ErrTextAndFields; *NotWaitingError; *AwaitError for the await itself;
// ErrRunEnded; *WorkflowChangedError.
func (e *Engine) Answer(ctx context.Context, req AnswerRequest) (*AnswerResult, error) {
	if req.Text != "" && len(req.Fields) > 0 {
		return nil, ErrTextAndFields
	}
	ix, err := e.store.Interaction(ctx, req.RunID, req.InteractionID)
	if err != nil {
		return nil, err
	}
	if err := answerAllowed(ix, req); err != nil {
		return nil, err
	}
	switch ix.Kind {
	case KindAsync:
		if len(req.Fields) > 0 {
			text, ok := req.Fields[QuestionKey].(string)
			if !ok || len(req.Fields) != 1 {
				return nil, &InvalidAnswerError{InteractionID: ix.ID, Fields: questionFields(),
					Problems: []AnswerProblem{{Field: QuestionKey, Kind: ProblemMissing, Type: "string"}}}
			}
			req.Text, req.Fields = text, nil
		}
		return e.answerAsync(ctx, req)
	case KindAwait:
		pending, err := e.store.Pending(ctx, req.RunID, "")
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, q := range pending {
			ids = append(ids, q.ID)
		}
		return nil, &AwaitError{InteractionID: ix.ID, Pending: ids}
	}
	return e.answerBlocking(ctx, req)
}

// answerAllowed refuses an answer from a channel or a person the
// question's node leaves out (answer_on, answerers). A timer's expiry is
// no one's answer and always passes; the answerers are GitHub logins, so
// they bind the channels where people are GitHub accounts.
func answerAllowed(ix *Interaction, req AnswerRequest) error {
	if req.Via == "timer" || !ix.Pending() {
		return nil // an answered question says who answered first
	}
	if !ix.AnswerableOn(req.Via) {
		return &ChannelRefusedError{InteractionID: ix.ID, Via: req.Via, AnswerOn: ix.AnswerOn}
	}
	switch req.Via {
	case "github", "slack", "page":
		if !ix.MayAnswer(req.By) {
			return &AnswererRefusedError{InteractionID: ix.ID, By: req.By, Answerers: ix.Answerers}
		}
	}
	return nil
}

// answerAsync stores an async question's answer, wakes the gates that may
// wait for it and releases a run paused on them.
func (e *Engine) answerAsync(ctx context.Context, req AnswerRequest) (*AnswerResult, error) {
	res, err := e.store.Answer(ctx, req)
	if err != nil {
		return nil, err
	}
	e.failAt(FailAnswerCommitted)
	e.bell.ring()
	e.notify(Event{Type: EventInteractionAnswered, RunID: req.RunID, NodeID: res.Interaction.NodeID, Time: res.Interaction.AnsweredAt,
		Data: map[string]any{"interaction_id": req.InteractionID, "async": true, "answer": res.Interaction.Answer(), "by": req.By, "via": req.Via}})
	res.Resumed = e.releaseIfReady(req.RunID)
	return res, nil
}

// answerBlocking answers the blocking question a paused run waits on and
// resumes the run in the run group. Answers to one run are taken one at a
// time: a second answer to the same question learns who answered first.
func (e *Engine) answerBlocking(ctx context.Context, req AnswerRequest) (*AnswerResult, error) {
	unlock := e.answers.lock(req.RunID)
	defer unlock()
	ix, err := e.store.Interaction(ctx, req.RunID, req.InteractionID)
	if err != nil {
		return nil, err
	}
	if !ix.Pending() {
		return nil, &AlreadyAnsweredError{InteractionID: ix.ID, AnsweredBy: ix.AnsweredBy, Via: ix.Via, AnsweredAt: ix.AnsweredAt}
	}
	run, err := e.store.Run(ctx, req.RunID)
	if err != nil {
		return nil, err
	}
	switch {
	case run.Status == StatusFinished || run.Status == StatusFailed:
		return nil, ErrRunEnded
	case run.Status != StatusPausedWaitingHuman:
		return nil, &NotWaitingError{RunID: run.ID, InteractionID: ix.ID, Status: run.Status}
	}
	// Paused, its executor may still be on its way out.
	if err := e.waitIdle(ctx, run.ID); err != nil {
		return nil, err
	}
	w, err := e.workflowOf(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("loading the workflow of run %s: %w", run.ID, err)
	}
	if w.Hash != run.WorkflowHash {
		return nil, &WorkflowChangedError{RunID: run.ID, File: run.File}
	}
	n := w.Node(ix.NodeID)
	if n == nil {
		return nil, fmt.Errorf("run %s: the question's node %q is not in the workflow", run.ID, ix.NodeID)
	}
	values, err := formValues(n, ix, req.Text, req.Fields)
	if err != nil {
		return nil, err
	}
	recorded := make(chan struct{})
	errc := make(chan error, 1)
	e.group.wg.Go(func() {
		_, err := e.Resume(context.Background(), ResumeRequest{
			Workflow: w, RunID: run.ID, InteractionID: ix.ID, Values: values, By: req.By, Via: req.Via,
			Expect: StatusPausedWaitingHuman, Recorded: func() { close(recorded) },
		})
		errc <- err
	})
	select {
	case <-recorded:
	case err := <-errc:
		select {
		case <-recorded: // taken; the run stopped on its own afterwards
		default:
			if err == nil {
				// Resume returned without taking the answers: a stop won.
				err = &NotWaitingError{RunID: run.ID, InteractionID: ix.ID, Status: StatusCancelled}
			}
			return nil, err
		}
	}
	ix.Answers, ix.AnsweredAt, ix.AnsweredBy, ix.Via = values, e.now(), req.By, req.Via
	return &AnswerResult{Interaction: ix, Resumed: true}, nil
}

// formValues checks the answers of a blocking question against its form
// and converts them to the fields' types: a human node's output schema,
// or the one text of an agent's ask_user. text answers a one-field form.
func formValues(n *dsl.Node, ix *Interaction, text string, given map[string]any) (map[string]any, error) {
	if n.Kind != dsl.NodeHuman {
		if text == "" && len(given) == 1 {
			text, _ = given[QuestionKey].(string)
		}
		if strings.TrimSpace(text) == "" {
			return nil, &InvalidAnswerError{InteractionID: ix.ID, Fields: questionFields(),
				Problems: []AnswerProblem{{Field: QuestionKey, Kind: ProblemMissing, Type: "string"}}}
		}
		return map[string]any{QuestionKey: strings.TrimSpace(text)}, nil
	}
	fields := FormFields(n)
	if n.Output == nil {
		if text != "" {
			return nil, &InvalidAnswerError{InteractionID: ix.ID, Problems: []AnswerProblem{{Field: "answer", Kind: ProblemUnknown}}}
		}
		return maps.Clone(given), nil
	}
	if text != "" {
		if len(n.Output.Fields) != 1 {
			bad := &InvalidAnswerError{InteractionID: ix.ID, Fields: fields}
			for _, f := range fields {
				bad.Problems = append(bad.Problems, AnswerProblem{Field: f.Name, Kind: ProblemMissing, Type: f.Type})
			}
			return nil, bad
		}
		given = map[string]any{n.Output.Fields[0].Name: text}
	}
	out := map[string]any{}
	bad := &InvalidAnswerError{InteractionID: ix.ID, Fields: fields}
	for _, f := range n.Output.Fields {
		v, ok := given[f.Name]
		if !ok {
			bad.Problems = append(bad.Problems, AnswerProblem{Field: f.Name, Kind: ProblemMissing, Type: f.Type.String()})
			continue
		}
		val, err := coerceValue(v, *f)
		if err != nil {
			bad.Problems = append(bad.Problems, AnswerProblem{Field: f.Name, Kind: ProblemInvalid, Type: f.Type.String(), Detail: err.Error()})
			continue
		}
		out[f.Name] = val
	}
	for _, k := range slices.Sorted(maps.Keys(given)) {
		if n.Output.Field(k) == nil {
			bad.Problems = append(bad.Problems, AnswerProblem{Field: k, Kind: ProblemUnknown})
		}
	}
	if len(bad.Problems) > 0 {
		return nil, bad
	}
	return out, nil
}

// FormFields lists the fields a blocking question of node n asks for.
func FormFields(n *dsl.Node) []FormField {
	if n.Kind != dsl.NodeHuman {
		return questionFields()
	}
	if n.Output == nil {
		return nil
	}
	var out []FormField
	for _, f := range n.Output.Fields {
		out = append(out, FormField{Name: f.Name, Type: f.Type.String(), Enum: f.Enum})
	}
	return out
}

// questionFields is the form of a question answered with one text.
func questionFields() []FormField {
	return []FormField{{Name: QuestionKey, Type: "string"}}
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
	// it, and so does a parked one, so a resume re-arms the same deadline.
	parked := false
	defer func() {
		if ctx.Err() == nil && !parked {
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
		if rs.e.parkGates && branch == "" {
			parked = true
			return nil, rs.parkGate(ctx, n, pending, deadline)
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

// parkGate pauses the run on an await_answers gate instead of waiting in
// this process (Options.ParkGates): an await interaction listing the
// pending questions, with the gate's deadline stored and armed. Answering
// the last of them resumes the run at the gate.
func (rs *runState) parkGate(ctx context.Context, n *dsl.Node, pending []*Interaction, deadline time.Time) error {
	var lines []string
	var list []any
	for _, q := range pending {
		lines = append(lines, fmt.Sprintf("- [%s] %s", q.ID, q.Question()))
		list = append(list, map[string]any{"interaction_id": q.ID, "question": q.Question()})
	}
	rs.mu.Lock()
	iteration := rs.ck.Visits[n.ID] - 1
	rs.mu.Unlock()
	id := PauseInteractionID(rs.run.ID, n.ID, iteration) + "_await"
	ix := &Interaction{ID: id, RunID: rs.run.ID, NodeID: n.ID, Kind: KindAwait, RequestedAt: rs.e.now(), Questions: map[string]any{
		QuestionKey:     "The run waits for the answer(s) to continue:\n" + strings.Join(lines, "\n"),
		AwaitPendingKey: list,
	}}
	p := &pauseState{InteractionID: id, Node: n.ID, Kind: KindAwait, Gate: true, From: n.AwaitAnswers.From, Deadline: deadline}
	return rs.pause(ctx, ix, p, map[string]any{"await": true, "deadline": deadline})
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

// ValidateAnswer tells, before anything is recorded, whether Answer would
// take text or fields as the answer to ix by the question's own schema:
// an async question or an agent's ask_user take a text, a human node's
// form the fields it lists (ix.Fields), each of its type. A channel that
// must say so within its request (a Slack modal's errors, shown beside
// each field) checks with it; Answer checks again with the workflow. The
// refusal is the *InvalidAnswerError Answer would give, or
// ErrTextAndFields.
func ValidateAnswer(ix *Interaction, text string, fields map[string]any) error {
	if text != "" && len(fields) > 0 {
		return ErrTextAndFields
	}
	if ix.Kind != KindBlocking || ix.Question() != "" || len(ix.Fields) == 0 {
		if text == "" && len(fields) == 1 {
			text, _ = fields[QuestionKey].(string)
		}
		if strings.TrimSpace(text) == "" {
			return &InvalidAnswerError{InteractionID: ix.ID, Fields: questionFields(),
				Problems: []AnswerProblem{{Field: QuestionKey, Kind: ProblemMissing, Type: "string"}}}
		}
		return nil
	}
	if text != "" {
		if len(ix.Fields) != 1 {
			bad := &InvalidAnswerError{InteractionID: ix.ID, Fields: ix.Fields}
			for _, f := range ix.Fields {
				bad.Problems = append(bad.Problems, AnswerProblem{Field: f.Name, Kind: ProblemMissing, Type: f.Type})
			}
			return bad
		}
		fields = map[string]any{ix.Fields[0].Name: text}
	}
	bad := &InvalidAnswerError{InteractionID: ix.ID, Fields: ix.Fields}
	for _, f := range ix.Fields {
		v, ok := fields[f.Name]
		if !ok {
			bad.Problems = append(bad.Problems, AnswerProblem{Field: f.Name, Kind: ProblemMissing, Type: f.Type})
			continue
		}
		if _, err := coerceValue(v, dslField(f)); err != nil {
			bad.Problems = append(bad.Problems, AnswerProblem{Field: f.Name, Kind: ProblemInvalid, Type: f.Type, Detail: err.Error()})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.ContainsFunc(ix.Fields, func(f FormField) bool { return f.Name == k }) {
			bad.Problems = append(bad.Problems, AnswerProblem{Field: k, Kind: ProblemUnknown})
		}
	}
	if len(bad.Problems) > 0 {
		return bad
	}
	return nil
}

// dslField is the DSL field a form field describes (FormFields' inverse).
func dslField(f FormField) dsl.Field {
	name, list := strings.CutSuffix(f.Type, "[]")
	t := dsl.Type{List: list}
	switch name {
	case "string":
		t.Kind = dsl.TypeString
	case "bool":
		t.Kind = dsl.TypeBool
	case "int":
		t.Kind = dsl.TypeInt
	case "float":
		t.Kind = dsl.TypeFloat
	case "json":
		t.Kind = dsl.TypeJSON
	case "file":
		t.Kind = dsl.TypeFile
	}
	return dsl.Field{Name: f.Name, Type: t, Enum: f.Enum}
}
