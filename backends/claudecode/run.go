package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/iterion-bot/iterion/backends/asktools"
	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/engine/permission"
	"github.com/iterion-bot/iterion/internal/agentcli"
)

// run is one node execution on one Claude Code process, driven by one
// loop that reads the CLI's lines in the order it printed them, sends the
// messages queued for the node as they are recorded, and decides when the
// node is done. The run channel's handlers (the MCP server's calls and the
// hook's) reach the loop only through pauses.
type run struct {
	b     *Backend
	task  *engine.Task
	inv   *invocation
	sess  *runchannel.Session
	saved *savedSession

	// pauses carries the blocking questions of the channel's handlers to
	// the loop; the first one pauses the run.
	pauses chan *pause

	grantMu sync.Mutex
	grant   *grantedCall // the call the operator allowed, once

	// The loop's state.
	stdin       io.WriteCloser
	started     bool
	session     string
	model       string
	cmds        map[string]string // our messages' ids → their lifecycle state
	seq         int               // lines read
	startedSeq  int               // the line of the last message that started
	resultSeq   int               // the line of the last result
	last        *event            // the last result
	tokens      int64
	cost        float64
	costSeen    float64 // the session's total cost at the last result
	toolUses    []block // the tool calls of the session, for a pause's tool_use id
	pause       *pause
	interrupted bool
	repaired    bool
	cancelling  bool
	errOut      *agentcli.Tail
}

// pause is a blocking question, from the channel's handlers.
type pause struct {
	kind string
	// tool is the name Claude Code calls the paused tool by.
	tool     string
	input    json.RawMessage
	question string
	need     *engine.NeedsInteractionError
}

// grantedCall is a call the operator allowed when the run paused on it.
type grantedCall struct {
	tool  string
	input string // canonical JSON
}

// outcome is how the node ended.
type outcome struct {
	res *engine.Result
	err error
}

func newRun(b *Backend, task *engine.Task, saved *savedSession) *run {
	r := &run{b: b, task: task, saved: saved, pauses: make(chan *pause), cmds: map[string]string{}, errOut: &agentcli.Tail{Max: 8 << 10}}
	if saved != nil && saved.Kind == pausePermission && asktools.PermissionAllowed(task.ResumeAnswer) {
		r.grant = &grantedCall{tool: saved.Tool, input: canonical(saved.Input)}
	}
	return r
}

// execute runs the node: the process, the loop, the stop.
func (r *run) execute(ctx context.Context) (*engine.Result, error) {
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	// Claude Code outlives ctx by the grace of a graceful stop: the loop
	// ends it (interrupt, stdin closed, then kill), and the kill ends it
	// whatever happens to the loop.
	procCtx, kill := context.WithCancel(context.WithoutCancel(ctx))
	defer kill()
	// The model-only network (the run channel's proxy and nothing else),
	// unless the node asks for the open one; the model calls go through
	// the proxy either way, so the real key stays outside.
	network := engine.NetworkDefault
	if r.task.Network == engine.NetworkOpen {
		network = engine.NetworkOpen
	}
	p, err := r.sess.Wrap(&engine.Process{
		Argv: r.inv.argv(), Env: r.inv.env, Mounts: r.inv.mounts(), ReadOnly: r.task.ReadOnly, Network: network,
		Stdin: stdinR, Stdout: stdoutW, Stderr: r.errOut,
	})
	if err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	var procRes *engine.ProcessResult
	var procErr error
	go func() {
		procRes, procErr = r.task.Run(procCtx, p)
		stdoutW.Close()
		stdinR.Close() // a write to a gone Claude Code fails instead of blocking
		close(exited)
	}()
	r.stdin = stdinW

	events := make(chan *event)
	readDone := make(chan error, 1)
	// stopRead, closed when the loop ends, makes the reader discard the
	// rest: the process cannot end while its output is not read.
	stopRead := make(chan struct{})
	go func() {
		lr := newLineReader(stdoutR)
		for {
			line, err := lr.next()
			if err != nil {
				readDone <- err
				_, _ = io.Copy(io.Discard, stdoutR) // let the process finish writing
				return
			}
			ev, err := parseEvent(line)
			if err != nil {
				r.b.log.Warn("Claude Code printed a line that is not stream-json", "run", r.task.RunID, "node", r.task.NodeID, "line", clip(string(line), 200))
				continue
			}
			select {
			case events <- ev:
			case <-stopRead:
				_, _ = io.Copy(io.Discard, stdoutR)
				return
			}
		}
	}()

	var wake <-chan struct{}
	if r.task.InboxWake != nil {
		wake = r.task.InboxWake()
	}
	startTimer := time.NewTimer(r.b.startTimeout)
	defer startTimer.Stop()
	var grace <-chan time.Time
	ctxDone := ctx.Done()
	var out *outcome
	if err := r.send(r.firstMessage()); err != nil {
		out = &outcome{err: err}
	} else if err := r.deliver(ctx); err != nil {
		out = &outcome{err: err}
	}
	for out == nil {
		select {
		case ev := <-events:
			out = r.handle(ctx, ev)
		case err := <-readDone:
			// Claude Code's output ended: it exited, or its output broke.
			switch {
			case r.pause != nil:
				out = &outcome{}
			case r.cancelling:
				out = &outcome{err: ctx.Err()}
			default:
				out = &outcome{err: r.died(exited, &procRes, &procErr, err)}
			}
		case <-wake:
			wake = r.task.InboxWake()
			if err := r.deliver(ctx); err != nil {
				out = &outcome{err: err}
			}
		case p := <-r.pauses:
			if r.pause != nil || r.cancelling {
				break // the run is stopping already
			}
			r.pause = p
			p.need.PendingToolUseID = r.toolUseID(p.tool)
			r.interrupt()
			grace = time.After(r.b.stopGrace)
		case <-startTimer.C:
			if !r.started {
				kill()
				<-exited
				return nil, engine.NewBackendError(engine.CodeExecutionFailed, true, fmt.Errorf(
					"Claude Code did not start its session within %s%s", r.b.startTimeout, r.errOut.Said("Claude Code")))
			}
		case <-ctxDone:
			// Cancelled or timed out: interrupt the turn so that its
			// transcript is whole, then stop.
			ctxDone, r.cancelling = nil, true
			if r.pause != nil || !r.busy() {
				out = &outcome{err: ctx.Err()}
				break
			}
			r.interrupt()
			grace = time.After(r.b.stopGrace)
		case <-grace:
			// The interrupted turn did not end in time.
			if r.cancelling {
				out = &outcome{err: ctx.Err()}
			} else {
				out = &outcome{}
			}
		}
	}
	// The node's outcome is known: stop Claude Code gracefully (the turn
	// a failure left running interrupted, stdin closed), and kill its tree
	// when it does not go.
	close(stopRead)
	if out.err != nil && r.pause == nil && r.busy() {
		r.interrupt()
	}
	r.stdin.Close()
	select {
	case <-exited:
	case <-time.After(r.b.stopGrace):
		kill()
		<-exited
	}
	if out.err == nil && r.pause != nil {
		out.err = r.savePause()
	}
	return out.res, out.err
}

// firstMessage is the node's prompt, or on a resumed session the answer
// it paused for.
func (r *run) firstMessage() string {
	if r.saved == nil {
		return r.task.User
	}
	answer := strings.TrimSpace(r.task.ResumeAnswer)
	switch r.saved.Kind {
	case pauseAsk:
		return fmt.Sprintf("The operator answered your %s question (the call was stopped while the run waited for them).\nQ: %s\nA: %s",
			asktools.AskUser, r.saved.Question, answer)
	case pauseAwait:
		return fmt.Sprintf("Your %s call was stopped while the run waited for the operator. %s", asktools.AwaitAnswers, answer)
	}
	if asktools.PermissionAllowed(answer) {
		return fmt.Sprintf("The operator allowed your call to %s with %s. Make the same call again now.", r.saved.Tool, callArgs(r.saved.Input))
	}
	return "Your call to " + r.saved.Tool + " was " + asktools.PermissionDeniedText(answer)
}

// send writes one user message, with an id of its own whose lifecycle
// the loop follows.
func (r *run) send(text string) error {
	if strings.HasPrefix(text, "/") {
		text = " " + text // never one of Claude Code's commands
	}
	id := newUUID()
	line, err := userLine(id, text)
	if err != nil {
		return err
	}
	r.cmds[id] = "sent"
	if _, err := r.stdin.Write(line); err != nil {
		return fmt.Errorf("sending a message to Claude Code: %w", err)
	}
	return nil
}

// interrupt asks Claude Code to stop the turn in progress.
func (r *run) interrupt() {
	if r.interrupted {
		return
	}
	r.interrupted = true
	_, _ = r.stdin.Write(interruptLine("iterion-interrupt"))
}

// deliver sends the messages queued for the node now: Claude Code folds
// them into the turn in progress, or answers them with a new turn.
func (r *run) deliver(ctx context.Context) error {
	if r.pause != nil || r.cancelling || r.task.InboxDrain == nil {
		return nil
	}
	msgs, err := r.task.InboxDrain(ctx)
	if err != nil {
		return fmt.Errorf("reading the inbox: %w", err)
	}
	for _, m := range msgs {
		if err := r.send(m); err != nil {
			return err
		}
	}
	return nil
}

// busy reports whether a message of ours is not done yet: Claude Code
// has not said it completed or cancelled it.
func (r *run) busy() bool {
	for _, state := range r.cmds {
		if state != "completed" && state != "cancelled" {
			return true
		}
	}
	return false
}

// handle takes one line; a non-nil outcome ends the run.
func (r *run) handle(ctx context.Context, ev *event) *outcome {
	r.seq++
	switch ev.Type {
	case "system":
		switch ev.Subtype {
		case "init":
			if !r.started {
				r.started = true
				if err := r.checkInit(ev); err != nil {
					return &outcome{err: err}
				}
			}
			r.session, r.model = ev.SessionID, ev.Model
		case "api_retry":
			if ev.ErrorStatus == 401 || ev.ErrorStatus == 403 {
				// A refused key fails at once: Claude Code would retry it.
				return &outcome{err: engine.NewBackendError("AUTH_FAILED", false, fmt.Errorf(
					"the model API refused the key (HTTP %d, %s): check ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) in the server's environment", ev.ErrorStatus, clip(ev.Error, 200)))}
			}
			r.b.log.Warn("Claude Code retries a model request", "run", r.task.RunID, "node", r.task.NodeID,
				"attempt", ev.Attempt, "max_retries", ev.MaxRetries, "status", ev.ErrorStatus)
		}
	case "assistant":
		if ev.Message != nil {
			if m := ev.Message.Model; m != "" && !strings.HasPrefix(m, "<") {
				r.model = m // not Claude Code's own "<synthetic>" messages
			}
			for _, c := range ev.Message.Content {
				if c.Type == "tool_use" {
					r.toolUses = append(r.toolUses, c)
				}
			}
		}
	case "command_lifecycle":
		if _, ours := r.cmds[ev.CommandUUID]; ours {
			r.cmds[ev.CommandUUID] = ev.State
			if ev.State == "started" {
				r.startedSeq = r.seq
			}
		}
	case "result":
		r.last, r.resultSeq = ev, r.seq
		r.account(ev)
		if ev.SessionID != "" {
			r.session = ev.SessionID
		}
		switch {
		case r.pause != nil:
			return &outcome{} // the turn the pause interrupted
		case r.cancelling:
			return &outcome{err: ctx.Err()}
		case ev.IsError || ev.Subtype != "success":
			return &outcome{err: failure(ev)}
		}
	}
	return r.idle(ctx)
}

// checkInit refuses a session without iterion's MCP server: the node's
// interaction tools would be missing.
func (r *run) checkInit(ev *event) error {
	if r.inv.mcpConfig == "" {
		return nil
	}
	for _, s := range ev.MCPServers {
		if s.Name == "iterion" {
			if s.Status == "connected" {
				return nil
			}
			return engine.NewBackendError(engine.CodeExecutionFailed, true, fmt.Errorf(
				"iterion's MCP server (iterion mcp-ask-user) is %s in Claude Code's session, so the node's interaction tools are missing%s", s.Status, r.errOut.Said("Claude Code")))
		}
	}
	return engine.NewBackendError(engine.CodeExecutionFailed, false, errors.New(
		"Claude Code's session lists no iterion MCP server, so the node's interaction tools are missing"))
}

// idle decides, when Claude Code has done every message and its last
// result is the latest line of note, whether the node is done: a message
// that arrived meanwhile forces one more turn, an answer that is not the
// output asked for gets one repair turn.
func (r *run) idle(ctx context.Context) *outcome {
	if r.last == nil || r.pause != nil || r.cancelling || r.busy() || r.resultSeq < r.startedSeq {
		return nil
	}
	if r.task.InboxDrain != nil {
		msgs, err := r.task.InboxDrain(ctx)
		if err != nil {
			return &outcome{err: fmt.Errorf("reading the inbox: %w", err)}
		}
		if len(msgs) > 0 {
			for _, m := range msgs {
				if err := r.send(m); err != nil {
					return &outcome{err: err}
				}
			}
			return nil
		}
	}
	out, invalid := engine.ParseOutput(r.last.Result, r.task.OutputSchema)
	if invalid != nil {
		if r.repaired {
			return &outcome{err: engine.NewBackendError(engine.CodeSchemaValidation, false, fmt.Errorf("the final answer is not valid output after a repair turn: %v", invalid))}
		}
		r.repaired = true
		if err := r.send(engine.OutputRepairPrompt(invalid)); err != nil {
			return &outcome{err: err}
		}
		return nil
	}
	res := &engine.Result{Output: out, Tokens: r.tokens, CostUSD: r.cost, SessionID: r.session, EffectiveModel: r.effectiveModel()}
	return &outcome{res: res}
}

// effectiveModel is the model Claude Code used, as the node names models
// ("anthropic/…"); a model other than the one asked for is logged.
func (r *run) effectiveModel() string {
	if r.model == "" {
		return r.task.Model
	}
	if r.inv.model != "" && r.model != r.inv.model {
		r.b.log.Warn("Claude Code used another model than the node asked for", "run", r.task.RunID, "node", r.task.NodeID, "asked", r.inv.model, "effective", r.model)
	}
	return "anthropic/" + r.model
}

// toolUseID is the id of the latest call of tool, for the pause.
func (r *run) toolUseID(tool string) string {
	for i := len(r.toolUses) - 1; i >= 0; i-- {
		if r.toolUses[i].Name == tool {
			return r.toolUses[i].ID
		}
	}
	return tool
}

// died is the error of a Claude Code that exited before the node was done.
func (r *run) died(exited <-chan struct{}, res **engine.ProcessResult, perr *error, cause error) error {
	<-exited
	if *perr != nil {
		return *perr
	}
	code := -1
	if *res != nil {
		code = (*res).ExitCode
	}
	if errors.Is(cause, io.EOF) {
		cause = errors.New("its output ended")
	}
	return engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("Claude Code exited (status %d) before the node was done: %v%s", code, cause, r.errOut.Said("Claude Code")))
}

// savePause puts the paused session into the pause's conversation, for
// the checkpoint: Claude Code has exited, so its transcript is complete.
func (r *run) savePause() error {
	if r.session == "" {
		return engine.NewBackendError(engine.CodeExecutionFailed, false, errors.New("Claude Code paused before its session started"))
	}
	data, err := r.inv.transcript(r.session)
	if err != nil {
		return engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("saving the paused Claude Code session: %w", err))
	}
	if len(data) > maxSaved {
		return engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("the paused Claude Code session holds %d MiB, more than the %d MiB a checkpoint keeps", len(data)>>20, maxSaved>>20))
	}
	p := r.pause
	s := savedSession{V: 1, SessionID: r.session, Transcript: string(data), Kind: p.kind, Question: p.question, Tool: p.tool, Input: p.input}
	p.need.Conversation, err = json.Marshal(s)
	if err != nil {
		return err
	}
	return p.need
}

// ask serves a blocking ask_user: the run pauses on it.
func (r *run) ask(ctx context.Context, q engine.AsyncQuestion) (string, error) {
	return r.suspend(ctx, &pause{kind: pauseAsk, tool: mcpPrefix + asktools.AskUser, question: q.Question,
		need: &engine.NeedsInteractionError{Question: q.Question, Options: q.Options}})
}

// awaitPending serves await_answers with questions pending: the run
// pauses until they are answered.
func (r *run) awaitPending(ctx context.Context, pending []engine.PendingQuestion) (string, error) {
	return r.suspend(ctx, &pause{kind: pauseAwait, tool: mcpPrefix + asktools.AwaitAnswers,
		need: &engine.NeedsInteractionError{AwaitPending: pending}})
}

// suspend hands a pause to the loop and holds the call until the session
// ends: the loop interrupts the turn, and Claude Code never reads the
// answer.
func (r *run) suspend(ctx context.Context, p *pause) (string, error) {
	select {
	case r.pauses <- p:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	<-ctx.Done()
	return "", errors.New("the run paused for the operator's answer")
}

// permission decides a tool call for the hook: the workflow's policy
// (nil allows everything), a call the operator allowed on the pause it
// resumes from, and a question to a person (the run pauses) when the
// policy asks for one.
func (r *run) permission(ctx context.Context, req runchannel.PermissionRequest) (runchannel.PermissionDecision, error) {
	var input map[string]any
	if len(req.Input) > 0 {
		if err := json.Unmarshal(req.Input, &input); err != nil {
			return runchannel.PermissionDecision{}, fmt.Errorf("the call's input is not a JSON object: %v", err)
		}
	}
	if r.takeGrant(req.Tool, req.Input) {
		return runchannel.PermissionDecision{Allow: true}, nil
	}
	pol := r.task.Permission
	v := pol.Decide(permission.Call{Tool: req.Tool, Input: r.workspacePaths(input)})
	switch v.Decision {
	case permission.Allow:
		return runchannel.PermissionDecision{Allow: true}, nil
	case permission.Refuse:
		return runchannel.PermissionDecision{Reason: permission.RefusedText(v.Reason(pol.Mode))}, nil
	}
	q := asktools.PermissionQuestion(req.Tool, input, v.Reason(pol.Mode))
	_, err := r.suspend(ctx, &pause{kind: pausePermission, tool: req.Tool, input: req.Input,
		need: &engine.NeedsInteractionError{Question: q, Options: asktools.PermissionOptions()}})
	return runchannel.PermissionDecision{Reason: "not run: the run paused to ask the operator"}, err
}

// takeGrant reports, once, whether a call is the one the operator allowed.
func (r *run) takeGrant(tool string, input json.RawMessage) bool {
	r.grantMu.Lock()
	defer r.grantMu.Unlock()
	if r.grant == nil || r.grant.tool != tool || r.grant.input != canonical(input) {
		return false
	}
	r.grant = nil
	return true
}

// workspacePaths makes a call's absolute paths inside the workspace
// relative to it, as the policy's path rules are written.
func (r *run) workspacePaths(input map[string]any) map[string]any {
	if input == nil {
		return nil
	}
	out := make(map[string]any, len(input))
	for k, v := range input {
		out[k] = v
		s, ok := v.(string)
		if !ok || !filepath.IsAbs(s) || (k != "file_path" && k != "path" && k != "notebook_path") {
			continue
		}
		if rel, err := filepath.Rel(r.inv.workDir, filepath.Clean(s)); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			out[k] = rel
		}
	}
	return out
}

// canonical is a JSON value re-encoded with sorted keys, for comparing
// calls.
func canonical(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// callArgs is a call's input for a person or the model, cut at 2000
// bytes.
func callArgs(raw json.RawMessage) string {
	s := canonical(raw)
	if s == "" || s == "null" {
		s = "{}"
	}
	return clip(s, 2000)
}
