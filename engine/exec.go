package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/iterion-bot/iterion/dsl"
)

// runState is one run being executed: the IR, the run record and the
// checkpoint, plus the events and outbox rows waiting for the next commit.
// Branches of a fan-out share it; mu guards the checkpoint and the queue.
type runState struct {
	e       *Engine
	w       *dsl.Workflow
	run     *Run
	workdir string

	mu     sync.Mutex
	ck     *checkpoint
	events []Event
	began  time.Time
	// commitMu serializes the run's commits, so branches never race each
	// other in the store (a conflict there costs a retry).
	commitMu sync.Mutex
	// history lists the nodes whose .history something reads; only their
	// past outputs are kept.
	history map[string]bool
	limits  runLimits
	// schemas holds the output validators of the run's workflow.
	schemas validators
}

// nodeFailure is a node's failure with its failure code.
type nodeFailure struct {
	code string
	err  error
}

func (f *nodeFailure) Error() string { return f.err.Error() }
func (f *nodeFailure) Unwrap() error { return f.err }

func failf(code, format string, args ...any) error {
	return &nodeFailure{code: code, err: fmt.Errorf(format, args...)}
}

// errPaused reports that the run paused for a human; the pause is stored.
var errPaused = errors.New("run paused")

// errStopped reports that a status change met an acknowledged Stop and the
// run was stored cancelled instead.
var errStopped = errors.New("run stopped")

// drive executes a run from its checkpoint until it stops, and returns the
// run as stored.
func (e *Engine) drive(ctx context.Context, w *dsl.Workflow, run *Run, ck *checkpoint, workdir string) (*Run, error) {
	return e.driveLimited(ctx, w, run, ck, workdir, e.limits())
}

// driveLimited is drive under the given limits.
func (e *Engine) driveLimited(ctx context.Context, w *dsl.Workflow, run *Run, ck *checkpoint, workdir string, limits runLimits) (*Run, error) {
	// Taken even when ctx is already cancelled, so the loop below records
	// the cancellation.
	acquired, err := e.store.Acquire(context.WithoutCancel(ctx), run.ID, e.owner)
	if err != nil {
		return nil, fmt.Errorf("taking run %s: %w", run.ID, err)
	}
	if acquired.Status != StatusRunning {
		// Stopped (engine.Stop) between its start and here.
		return acquired, nil
	}
	run = acquired
	if run.StopRequested != "" {
		// A stop acknowledged before a crash, or before this resume.
		return e.stoppedRun(context.WithoutCancel(ctx), run.ID)
	}

	if workdir == "" {
		if workdir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("finding the work directory: %w", err)
		}
	}
	rs := &runState{e: e, w: w, run: run, ck: ck, workdir: workdir, began: e.now(), history: historyReaders(w), limits: limits}
	log := e.log.With("run", run.ID)
	if err := rs.load(ctx); err != nil {
		var nf *nodeFailure
		if errors.As(err, &nf) {
			return rs.finish(ctx, StatusFailedResumable, nf.code, nf.err.Error())
		}
		return nil, fmt.Errorf("resuming run %s: %w", run.ID, err)
	}
	for {
		next := rs.ck.Node
		switch next {
		case dsl.TargetDone:
			return rs.finish(context.WithoutCancel(ctx), StatusFinished, "", "")
		case dsl.TargetFail:
			return rs.finish(context.WithoutCancel(ctx), StatusFailed, CodeFailNode, "workflow reached fail node")
		}
		if ctx.Err() != nil {
			return rs.finish(context.WithoutCancel(ctx), StatusCancelled, CodeCancelled, rs.stopReason(ctx))
		}
		n := w.Node(next)
		if n == nil {
			return rs.finish(ctx, StatusFailed, CodeNodeNotFound, fmt.Sprintf("node %q not found in workflow %q", next, w.Name))
		}
		out, err := rs.step(ctx, n, rs.ck.Input, "")
		if err == nil {
			var target string
			var input map[string]any
			target, input, err = rs.advance(ctx, n, out, "")
			if err == nil {
				rs.mu.Lock()
				rs.ck.Node, rs.ck.Input = target, input
				rs.mu.Unlock()
				if err = rs.commit(ctx, Change{}); err != nil {
					if errors.Is(err, ErrStorageFull) {
						return rs.storageFull(ctx, err)
					}
					return nil, err
				}
				e.failAt(FailBetweenNodes)
				continue
			}
		}
		switch {
		case errors.Is(err, ErrStorageFull):
			// The disk is (nearly) full: the run stops where it is, and
			// continues from its checkpoint once space is freed.
			return rs.storageFull(ctx, err)
		case errors.Is(err, errPaused):
			log.Info("run paused", "node", n.ID)
			return e.store.Run(context.WithoutCancel(ctx), run.ID)
		case errors.Is(err, errStopped):
			return e.store.Run(context.WithoutCancel(ctx), run.ID)
		case ctx.Err() != nil:
			return rs.finish(context.WithoutCancel(ctx), StatusCancelled, CodeCancelled, rs.stopReason(ctx))
		}
		var nf *nodeFailure
		if errors.As(err, &nf) {
			if nf.code == CodeFailNode {
				status := StatusFailed
				if n.Fail.Resumable {
					status = StatusFailedResumable
				}
				return rs.finish(ctx, status, n.Fail.Code, nf.err.Error())
			}
			// A node that failed can run again on resume (its checkpoint
			// still points at it), unless the graph itself has no way on.
			status := StatusFailedResumable
			switch nf.code {
			case CodeNodeNotFound, CodeNoOutgoingEdge, CodeLoopExhausted, CodeJoinFailed:
				status = StatusFailed
			}
			return rs.finish(ctx, status, nf.code, fmt.Sprintf("node %s: %v", n.ID, nf.err))
		}
		return nil, err
	}
}

// storageFull ends a run the store refused a write of for lack of disk
// space: failed_resumable, STORAGE_FULL (the store lets that last write
// through, from its reserve).
func (rs *runState) storageFull(ctx context.Context, err error) (*Run, error) {
	return rs.finish(context.WithoutCancel(ctx), StatusFailedResumable, CodeStorageFull, err.Error())
}

// step executes one node with its budget check and events, and records
// its output. branch is the fan-out branch id ("" on the trunk).
func (rs *runState) step(ctx context.Context, n *dsl.Node, input map[string]any, branch string) (map[string]any, error) {
	if err := rs.checkBudget(); err != nil {
		return nil, err
	}
	if err := rs.checkStored(0, 0); err != nil {
		return nil, err
	}
	rs.mu.Lock()
	rs.ck.Visits[n.ID]++
	rs.ck.Iterations++
	iteration := rs.ck.Visits[n.ID] - 1
	rs.mu.Unlock()
	rs.emit(Event{Type: EventNodeStarted, NodeID: n.ID, BranchID: branch, Data: map[string]any{"kind": n.Kind.String(), "iteration": iteration}})

	if n.LLM != nil || n.Kind == dsl.NodeTool {
		// A model or tool node may run long, and a model node may post
		// questions, which the store logs at once: node_started is stored
		// (and shown: the CLI's ▶, the PR's running step) when it starts.
		if err := rs.commitEvents(ctx); err != nil {
			return nil, err
		}
	}
	nctx := ctx
	if n.Timeout > 0 && n.Kind != dsl.NodeAwaitAnswers && n.Kind != dsl.NodeWait {
		var cancel context.CancelFunc
		nctx, cancel = context.WithTimeout(ctx, n.Timeout)
		defer cancel()
	}
	start := rs.e.now()
	out, err := rs.execNode(nctx, n, input, iteration, branch)
	rs.e.failAt(FailAfterExec)
	if err == nil {
		err = rs.checkQuota(n)
	}
	if err != nil {
		var nf *nodeFailure
		limit := errors.As(err, &nf) && nf.code == CodeSandboxLimit // the cause, met before the timeout
		if nctx.Err() == context.DeadlineExceeded && ctx.Err() == nil && !limit {
			return nil, failf(CodeTimeout, "timed out after %s", n.Timeout)
		}
		return nil, err
	}
	if n.Output != nil && n.Kind != dsl.NodeAwaitAnswers {
		if err := rs.schemas.validate(n.Output, out); err != nil {
			return nil, failf(CodeSchemaValidation, "output does not match schema %s: %v", n.Output.Name, err)
		}
	}
	// A secret a node printed must not reach its artifact, a later
	// node's input or the checkpoint.
	out = rs.e.redact.Map(out)
	// The output is stored in node_finished, as the node's entry and,
	// when published, as an artifact version.
	copies := int64(2)
	if n.Publish != "" {
		copies++
	}
	if err := rs.checkStored(jsonSize(out), copies); err != nil {
		return nil, err
	}
	if err := rs.record(n, out); err != nil {
		return nil, err
	}
	data := map[string]any{"output": out, "_duration_ms": rs.e.now().Sub(start).Milliseconds()}
	rs.emit(Event{Type: EventNodeFinished, NodeID: n.ID, BranchID: branch, Data: data})
	return out, nil
}

// record stores a node's output, its history and its published artifact:
// in memory, and as entries the next checkpoint commit stores.
func (rs *runState) record(n *dsl.Node, out map[string]any) error {
	data, err := json.Marshal(out)
	if err != nil {
		return failf(CodeExecutionFailed, "its output cannot be stored: %v", err)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	ck := rs.ck
	series := outputSeries(n.ID)
	switch {
	case rs.history[n.ID]:
		if size, max := ck.historyBytes+int64(len(data)), rs.maxHistory(); size > max {
			return historyTooLarge(n.ID, ck.Entries[series]+1, size, max)
		}
		index := ck.Entries[series]
		ck.History[n.ID] = append(ck.History[n.ID], out)
		ck.historyBytes += int64(len(data))
		ck.Entries[series] = index + 1
		ck.unstore(HistoryEntry{Series: series, Index: index, Data: data})
		delete(ck.Small, n.ID)
	case len(data) <= maxInlineOutput:
		ck.Small[n.ID] = data
		delete(ck.Entries, series)
	default:
		// Nobody reads its history: the latest output alone is kept.
		ck.Entries[series] = 1
		ck.unstore(HistoryEntry{Series: series, Index: 0, Data: data})
		delete(ck.Small, n.ID)
	}
	ck.Outputs[n.ID] = out
	if n.Publish != "" {
		series := artifactSeries(n.Publish)
		version := ck.Entries[series]
		ck.Entries[series] = version + 1
		ck.unstore(HistoryEntry{Series: series, Index: version, Data: data})
		ck.Artifacts[n.Publish] = out
		rs.events = append(rs.events, rs.event(Event{Type: EventArtifactWritten, NodeID: n.ID, Data: map[string]any{"publish": n.Publish, "version": version}}))
	}
	return nil
}

// unstore queues h for the next checkpoint commit, replacing an entry of
// the same series and index queued before.
func (c *checkpoint) unstore(h HistoryEntry) {
	for i := range c.Unstored {
		if c.Unstored[i].Series == h.Series && c.Unstored[i].Index == h.Index {
			c.Unstored[i] = h
			return
		}
	}
	c.Unstored = append(c.Unstored, h)
}

func (rs *runState) maxHistory() int64 {
	if rs.limits.historyBytes > 0 {
		return rs.limits.historyBytes
	}
	return maxHistoryBytes
}

// load reads the outputs of a decoded checkpoint from the store, once.
func (rs *runState) load(ctx context.Context) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.ck.load(context.WithoutCancel(ctx), rs.e.store, rs.run.ID, rs.history, rs.maxHistory())
}

// checkStored refuses a node once the run has stored its budget, or when
// its output, stored copies times, would take the run past it.
func (rs *runState) checkStored(output, copies int64) error {
	budget := rs.limits.storedBytes
	if budget <= 0 {
		return nil
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	used := rs.ck.StoredBytes
	if used+output*copies < budget {
		return nil
	}
	rs.events = append(rs.events, rs.event(Event{Type: EventBudgetExceeded, Data: map[string]any{"dimension": "stored_bytes", "used": used, "output": output, "limit": budget}}))
	if output == 0 {
		return failf(CodeBudgetExceeded, "the run has stored %s, its budget of stored data (%s): no new node starts; bound the loop or make outputs smaller", byteSize(used), byteSize(budget))
	}
	return failf(CodeBudgetExceeded, "its output of %s, stored %d times, would take the run past its budget of stored data (%s, of which %s used): bound the loop or make the output smaller", byteSize(output), copies, byteSize(budget), byteSize(used))
}

// emit queues an event for the next commit.
func (rs *runState) emit(ev Event) {
	rs.mu.Lock()
	rs.events = append(rs.events, rs.event(ev))
	rs.mu.Unlock()
}

func (rs *runState) event(ev Event) Event {
	ev.RunID = rs.run.ID
	if ev.Time.IsZero() {
		ev.Time = rs.e.now()
	}
	return ev
}

// commit writes the checkpoint and the queued events, plus whatever c
// adds, in one store transaction.
func (rs *runState) commit(ctx context.Context, c Change) error {
	return rs.write(ctx, c, true)
}

// commitEvents writes the queued events alone. Branches use it: a crash
// during a fan-out re-runs the fan-out from its router, so a branch's
// progress needs no checkpoint, only its events.
func (rs *runState) commitEvents(ctx context.Context) error {
	return rs.write(ctx, Change{}, false)
}

func (rs *runState) write(ctx context.Context, c Change, checkpoint bool) error {
	rs.commitMu.Lock()
	defer rs.commitMu.Unlock()
	rs.mu.Lock()
	events := append(rs.events, c.Events...)
	rs.events = nil
	var b []byte
	var err error
	if checkpoint {
		// The entries recorded since the last checkpoint go with this one,
		// so that the stored entries always match a stored checkpoint.
		c.History = append(c.History, rs.ck.Unstored...)
		rs.ck.Unstored = nil
		rs.ck.StoredBytes += changeSize(events, c)
		rs.ck.ElapsedNS += int64(rs.e.now().Sub(rs.began))
		rs.began = rs.e.now()
		b, err = rs.ck.encode()
		rs.ck.StoredBytes += int64(len(b))
	} else {
		rs.ck.StoredBytes += changeSize(events, c)
	}
	rs.mu.Unlock()
	if err != nil {
		return err
	}
	queued := events[:len(events)-len(c.Events)]
	c.RunID, c.Generation, c.Checkpoint, c.Events = rs.run.ID, rs.run.Generation, b, events
	if err := rs.e.store.Commit(context.WithoutCancel(ctx), c); err != nil {
		if errors.Is(err, ErrStopRequested) && c.Status != StatusCancelled {
			// An acknowledged Stop wins over the end or pause this change
			// would have stored: the run ends cancelled, and the events
			// queued before this change are kept.
			return rs.endStopped(ctx, b, c.History, queued)
		}
		return fmt.Errorf("saving run %s: %w", rs.run.ID, err)
	}
	if rs.e.onEvent != nil {
		for _, ev := range events {
			rs.e.onEvent(ev)
		}
	}
	return nil
}

// changeSize is what c, with events, hands to the store besides its
// checkpoint.
func changeSize(events []Event, c Change) int64 {
	var n int64
	for _, ev := range events {
		// The fields around the data: type, run, node, branch, seq, time.
		n += 120 + int64(len(ev.Type)+len(ev.RunID)+len(ev.NodeID)+len(ev.BranchID)) + jsonSize(ev.Data)
	}
	for _, h := range c.History {
		n += 40 + int64(len(h.Series)+len(h.Data))
	}
	for _, ix := range c.Interactions {
		n += 200 + jsonSize(ix.Questions) + jsonSize(ix.Answers)
	}
	for _, row := range c.Outbox {
		n += 100 + int64(len(row.Payload))
	}
	return n
}

// endStopped stores the run cancelled for the Stop recorded on it, with
// checkpoint, its history entries and the queued events, and returns
// errStopped. The caller holds commitMu.
func (rs *runState) endStopped(ctx context.Context, checkpoint []byte, history []HistoryEntry, queued []Event) error {
	c := cancelChange(rs.run, rs.stopReason(ctx))
	c.Checkpoint, c.History = checkpoint, history
	c.Events = append(queued, rs.event(c.Events[0]))
	if err := rs.e.store.Commit(context.WithoutCancel(ctx), c); err != nil {
		return fmt.Errorf("saving run %s: %w", rs.run.ID, err)
	}
	if rs.e.onEvent != nil {
		for _, ev := range c.Events {
			rs.e.onEvent(ev)
		}
	}
	rs.e.log.Info("run ended", "run", rs.run.ID, "status", StatusCancelled, "code", CodeCancelled)
	return errStopped
}

// stopReason is the reason of the Stop recorded on the run, or a plain
// "run cancelled" when the run was cancelled otherwise.
func (rs *runState) stopReason(ctx context.Context) string {
	if run, err := rs.e.store.Run(context.WithoutCancel(ctx), rs.run.ID); err == nil && run.StopRequested != "" {
		return run.StopRequested
	}
	return "run cancelled"
}

// finish ends the run with status, writes the outbox row the outside world
// needs, synced, and returns the stored run.
func (rs *runState) finish(ctx context.Context, status Status, code, msg string) (*Run, error) {
	ev := Event{Type: EventRunFinished}
	kind := OutboxRunFinished
	switch status {
	case StatusFailed, StatusFailedResumable:
		ev = Event{Type: EventRunFailed, Data: map[string]any{"error": msg, "code": code}}
		kind = OutboxRunFailed
	case StatusCancelled:
		ev = Event{Type: EventRunCancelled}
		kind = OutboxRunFailed
	}
	c := Change{Status: status, FailureCode: code, Error: msg, Events: []Event{rs.event(ev)}, Sync: true}
	c.Outbox = rs.outbox(kind, "", map[string]any{"status": string(status), "failure_code": code, "error": msg})
	if err := rs.commit(ctx, c); err != nil {
		if errors.Is(err, errStopped) {
			return rs.e.store.Run(context.WithoutCancel(ctx), rs.run.ID)
		}
		return nil, err
	}
	rs.e.log.Info("run ended", "run", rs.run.ID, "status", status, "code", code, "error", msg)
	return rs.e.store.Run(context.WithoutCancel(ctx), rs.run.ID)
}

// outbox returns the row announcing kind to the run's channels, or none
// when the run is attached to no channel.
func (rs *runState) outbox(kind, interactionID string, payload map[string]any) []OutboxRow {
	if len(rs.run.Channels) == 0 {
		return nil
	}
	return []OutboxRow{{Kind: kind, RunID: rs.run.ID, InteractionID: interactionID, Channels: rs.run.Channels, Payload: mustJSON(payload)}}
}

// checkBudget refuses to start a node once any cap is 90% spent.
func (rs *runState) checkBudget() error {
	b := rs.w.Budget
	rs.mu.Lock()
	defer rs.mu.Unlock()
	elapsed := time.Duration(rs.ck.ElapsedNS) + rs.e.now().Sub(rs.began)
	type dim struct {
		name        string
		used, limit float64
	}
	for _, d := range []dim{
		{"iterations", float64(rs.ck.Iterations), float64(b.MaxIterations)},
		{"tokens", float64(rs.ck.Tokens), float64(b.MaxTokens)},
		{"cost_usd", rs.ck.CostUSD, b.MaxCostUSD},
		{"duration", elapsed.Seconds(), b.MaxDuration.Seconds()},
	} {
		if d.limit > 0 && d.used >= 0.9*d.limit {
			rs.events = append(rs.events, rs.event(Event{Type: EventBudgetExceeded, Data: map[string]any{"dimension": d.name, "used": d.used, "limit": d.limit}}))
			return failf(CodeBudgetExceeded, "budget %s is %.0f%% spent (%g of %g): no new node starts past 90%%", d.name, 100*d.used/d.limit, d.used, d.limit)
		}
	}
	return nil
}

// advance chooses the edge to follow after n produced out, and returns the
// target with its input. A fan-out router runs its branches here and
// returns the node where they converge.
func (rs *runState) advance(ctx context.Context, n *dsl.Node, out map[string]any, branch string) (string, map[string]any, error) {
	// A resume that records a human node's answers advances from a
	// checkpoint it decoded: its outputs are read first.
	if err := rs.load(ctx); err != nil {
		return "", nil, err
	}
	if n.Router != nil && n.Router.Mode == dsl.RouterFanOutAll {
		if branch != "" {
			return "", nil, failf(CodeExecutionFailed, "a fan-out inside a fan-out branch is not supported yet")
		}
		return rs.fanOut(ctx, n, out)
	}
	e, err := rs.selectEdge(n, out)
	if err != nil {
		return "", nil, err
	}
	return rs.take(e, out, branch)
}

// take crosses edge e: it counts loop crossings, renders the with mapping
// into the target's input and records the choice.
func (rs *runState) take(e *dsl.Edge, out map[string]any, branch string) (string, map[string]any, error) {
	s := rs.scope(out)
	input := map[string]any{}
	for _, m := range e.With {
		v, err := renderValue(m.Value, s)
		if err != nil {
			return "", nil, failf(CodeExecutionFailed, "edge %s: with %s: %v", e.ID(), m.Key, err)
		}
		input[m.Key] = v
	}
	data := map[string]any{"from": e.From, "to": e.To}
	rs.mu.Lock()
	if e.Loop != nil {
		rs.ck.Loops[e.Loop.Name]++
		rs.ck.LoopPrev[e.Loop.Name] = out
		data["loop"] = e.Loop.Name
		data["iteration"] = rs.ck.Loops[e.Loop.Name]
	}
	rs.mu.Unlock()
	if e.When != nil {
		if e.When.Expr != nil {
			data["expression"] = e.When.Expr.Source()
		} else {
			data["condition"] = e.When.Field
			data["negated"] = e.When.Not
		}
	}
	rs.emit(Event{Type: EventEdgeSelected, NodeID: e.From, BranchID: branch, Data: data})
	return e.To, input, nil
}

// selectEdge picks the outgoing edge of n: the first guard that holds
// (skipping exhausted loops), else the else edge, else an unconditional
// loop edge with crossings left, else the plain edge (which is also the
// exit of a spent loop).
func (rs *runState) selectEdge(n *dsl.Node, out map[string]any) (*dsl.Edge, error) {
	edges := rs.w.Outgoing(n.ID)
	if len(edges) == 0 {
		return nil, failf(CodeNoOutgoingEdge, "node %q has no outgoing edge", n.ID)
	}
	if n.Router != nil && n.Router.Mode == dsl.RouterRoundRobin {
		var plain []*dsl.Edge
		for _, e := range edges {
			if e.When == nil && !e.Else {
				plain = append(plain, e)
			}
		}
		rs.mu.Lock()
		i := rs.ck.RoundRobin[n.ID] % len(plain)
		rs.ck.RoundRobin[n.ID]++
		rs.mu.Unlock()
		return plain[i], nil
	}
	if n.Router != nil && n.Router.Mode == dsl.RouterLLM {
		return rs.llmRoute(n, out, edges)
	}
	exhausted := false
	s := rs.scope(out)
	for _, e := range edges {
		if e.When == nil {
			continue
		}
		ok, err := rs.guard(e, out, s)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if e.Loop != nil && !rs.loopOpen(e.Loop) {
			exhausted = true
			continue
		}
		return e, nil
	}
	var elseEdge, loopEdge, plain *dsl.Edge
	for _, e := range edges {
		switch {
		case e.When != nil:
		case e.Else:
			elseEdge = e
		case e.Loop != nil:
			if rs.loopOpen(e.Loop) {
				loopEdge = e
			} else {
				exhausted = true
			}
		default:
			plain = e
		}
	}
	for _, e := range []*dsl.Edge{elseEdge, loopEdge, plain} {
		if e != nil {
			return e, nil
		}
	}
	if exhausted {
		return nil, failf(CodeLoopExhausted, "node %q: its loop is spent and no other edge applies", n.ID)
	}
	return nil, failf(CodeNoOutgoingEdge, "node %q: no outgoing edge applies to its output", n.ID)
}

// loopOpen reports whether loop l may be crossed once more.
func (rs *runState) loopOpen(l *dsl.Loop) bool {
	max := l.Max
	if l.MaxExpr != nil {
		v, err := l.MaxExpr.Eval(rs.scope(nil))
		n, ok := asInt(v)
		if err != nil || !ok || n < 0 {
			return false
		}
		max = int(n)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.ck.Loops[l.Name] < max
}

// guard evaluates an edge's when clause against the source's output.
func (rs *runState) guard(e *dsl.Edge, out map[string]any, s *scope) (bool, error) {
	c := e.When
	if c.Expr == nil {
		return truthyField(out[c.Field]) != c.Not, nil
	}
	ok, err := c.Expr.EvalBool(s)
	if err != nil {
		return false, failf(CodeExpressionFailed, "edge %s: when %q: %v", e.ID(), c.Expr.Source(), err)
	}
	return ok != c.Not, nil
}

func truthyField(v any) bool {
	b, ok := v.(bool)
	return ok && b
}

// scope builds what templates and expressions read; input is the given
// map (the node's input, or in a guard or with mapping the source output).
func (rs *runState) scope(input map[string]any) *scope {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	s := &scope{
		vars: rs.run.Vars, input: input,
		outputs: maps.Clone(rs.ck.Outputs), history: maps.Clone(rs.ck.History),
		artifacts: map[string]any{}, loops: map[string]map[string]any{},
		run: map[string]any{
			"id": rs.run.ID, "iterations": rs.ck.Iterations, "tokens": rs.ck.Tokens, "cost_usd": rs.ck.CostUSD,
			"elapsed_seconds": (time.Duration(rs.ck.ElapsedNS) + rs.e.now().Sub(rs.began)).Seconds(),
			"max_iterations":  rs.w.Budget.MaxIterations, "max_tokens": rs.w.Budget.MaxTokens,
			"max_cost_usd": rs.w.Budget.MaxCostUSD, "max_duration_seconds": rs.w.Budget.MaxDuration.Seconds(),
		},
	}
	maps.Copy(s.artifacts, rs.ck.Artifacts)
	for _, l := range rs.w.Loops {
		s.loops[l.Name] = map[string]any{"iteration": int64(rs.ck.Loops[l.Name]), "max": int64(l.Max), "previous_output": rs.ck.LoopPrev[l.Name]}
	}
	return s
}

// branchResult is where one fan-out branch ended.
type branchResult struct {
	id     string
	arrive *dsl.Edge // the edge into the convergence node; nil at a terminal
	out    map[string]any
	err    error
}

// fanOut runs one branch per outgoing edge of a fan_out_all router, each on
// its own goroutine under the max_parallel_branches semaphore, until they
// reach the node where they converge, and returns that node with the
// merged input of the arriving edges.
func (rs *runState) fanOut(ctx context.Context, router *dsl.Node, out map[string]any) (string, map[string]any, error) {
	edges := rs.w.Outgoing(router.ID)
	limit := rs.w.Budget.MaxParallelBranches
	if limit <= 0 {
		limit = rs.e.parallel
	}
	limit = min(limit, len(edges))
	sem := make(chan struct{}, limit)
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]branchResult, len(edges))
	var wg sync.WaitGroup
	for i, e := range edges {
		id := "branch_" + router.ID + "_" + e.To
		wg.Go(func() {
			results[i] = rs.branch(bctx, e, out, id, sem)
			if results[i].err != nil {
				if j := rs.joinOf(results[i]); j == nil || j.Await != dsl.AwaitBestEffort {
					cancel() // wait_all: one failure stops the siblings
				}
			}
		})
	}
	wg.Wait()

	var join string
	input := map[string]any{}
	var failed []any
	var firstErr error
	for _, r := range results {
		if errors.Is(r.err, errStopped) {
			return "", nil, r.err // the run is stored cancelled already
		}
		if r.err != nil {
			failed = append(failed, map[string]any{"branch": r.id, "error": r.err.Error()})
			if firstErr == nil && !errors.Is(r.err, context.Canceled) {
				firstErr = r.err
			}
			continue
		}
		if r.arrive == nil {
			continue // the branch reached done
		}
		if join != "" && join != r.arrive.To {
			return "", nil, failf(CodeJoinFailed, "branches of %q converge on different nodes (%s and %s)", router.ID, join, r.arrive.To)
		}
		join = r.arrive.To
		_, in, _ := rs.take(r.arrive, r.out, r.id)
		maps.Copy(input, in)
	}
	if firstErr == nil && len(failed) > 0 && ctx.Err() != nil {
		return "", nil, ctx.Err()
	}
	if len(failed) > 0 {
		j := rs.w.Node(join)
		if j == nil || j.Await != dsl.AwaitBestEffort {
			if errors.Is(firstErr, errPaused) {
				return "", nil, failf(CodeExecutionFailed, "a human pause inside a fan-out branch is not supported yet: move the human node to the trunk")
			}
			var nf *nodeFailure
			if errors.As(firstErr, &nf) {
				return "", nil, &nodeFailure{code: nf.code, err: fmt.Errorf("branch failed under await: wait_all: %w", nf.err)}
			}
			return "", nil, failf(CodeJoinFailed, "branch failed under await: wait_all: %v", firstErr)
		}
		input["_failed_branches"] = failed
	}
	if join == "" {
		return dsl.TargetDone, nil, nil
	}
	rs.emit(Event{Type: EventJoinReady, NodeID: join, Data: map[string]any{"router": router.ID, "failed": len(failed)}})
	return join, input, nil
}

func (rs *runState) joinOf(r branchResult) *dsl.Node {
	if r.arrive == nil {
		return nil
	}
	return rs.w.Node(r.arrive.To)
}

// isJoin reports whether branches stop at n: it declares await:, or more
// than one node leads to it.
func (rs *runState) isJoin(n *dsl.Node) bool {
	if n.Await != dsl.AwaitUnset {
		return true
	}
	preds := map[string]bool{}
	for _, e := range rs.w.Incoming(n.ID) {
		if e.Loop == nil {
			preds[e.From] = true
		}
	}
	return len(preds) > 1
}

// branch walks one fan-out branch from edge e until it arrives at a
// convergence node or a terminal.
func (rs *runState) branch(ctx context.Context, e *dsl.Edge, routerOut map[string]any, id string, sem chan struct{}) branchResult {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return branchResult{id: id, err: ctx.Err()}
	}
	held := true
	defer func() {
		if held {
			<-sem
		}
	}()
	rs.emit(Event{Type: EventBranchStarted, BranchID: id, Data: map[string]any{"to": e.To}})
	target, input, err := rs.take(e, routerOut, id)
	if err != nil {
		return branchResult{id: id, err: err}
	}
	slot := &branchSlot{sem: sem, held: &held}
	for {
		switch target {
		case dsl.TargetDone:
			rs.emit(Event{Type: EventBranchFinished, BranchID: id})
			return branchResult{id: id}
		case dsl.TargetFail:
			return branchResult{id: id, err: failf(CodeFailNode, "branch %s reached fail", id)}
		}
		n := rs.w.Node(target)
		if n == nil {
			return branchResult{id: id, err: failf(CodeNodeNotFound, "node %q not found", target)}
		}
		out, err := rs.stepInBranch(ctx, n, input, id, slot)
		if err != nil {
			return branchResult{id: id, err: err}
		}
		edge, err := rs.selectEdge(n, out)
		if err != nil {
			return branchResult{id: id, err: err}
		}
		if next := rs.w.Node(edge.To); next != nil && rs.isJoin(next) {
			rs.emit(Event{Type: EventBranchFinished, BranchID: id, Data: map[string]any{"join": edge.To}})
			return branchResult{id: id, arrive: edge, out: out}
		}
		if n.Router != nil && n.Router.Mode == dsl.RouterFanOutAll {
			return branchResult{id: id, err: failf(CodeExecutionFailed, "a fan-out inside a fan-out branch is not supported yet")}
		}
		target, input, err = rs.take(edge, out, id)
		if err != nil {
			return branchResult{id: id, err: err}
		}
	}
}

// branchSlot lets a node parked in a branch give its semaphore slot back
// while it waits, and take one again when it wakes.
type branchSlot struct {
	sem  chan struct{}
	held *bool
}

func (s *branchSlot) release() {
	if s != nil && *s.held {
		<-s.sem
		*s.held = false
	}
}

func (s *branchSlot) acquire(ctx context.Context) error {
	if s == nil || *s.held {
		return nil
	}
	select {
	case s.sem <- struct{}{}:
		*s.held = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stepInBranch is step with the branch's slot available to parking nodes.
func (rs *runState) stepInBranch(ctx context.Context, n *dsl.Node, input map[string]any, id string, slot *branchSlot) (map[string]any, error) {
	ctx = context.WithValue(ctx, slotKey{}, slot)
	out, err := rs.step(ctx, n, input, id)
	if err == nil {
		if cerr := rs.commitEvents(ctx); cerr != nil {
			return nil, cerr
		}
	}
	return out, err
}

type slotKey struct{}

func slotFrom(ctx context.Context) *branchSlot {
	s, _ := ctx.Value(slotKey{}).(*branchSlot)
	return s
}

// mustJSON encodes an outbox payload built from JSON-safe values.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{}`)
	}
	return b
}
