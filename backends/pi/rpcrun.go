package pi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/backends/asktools"
	"github.com/iterion-bot/iterion/backends/pi/rpc"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/agentcli"
)

// rpcRun is one node session on `pi --mode rpc`: one process, driven by
// one loop that reads pi's events and responses in the order pi printed
// them, answers the extension's requests, steers answers in as they are
// recorded, and decides when the node is done.
type rpcRun struct {
	b    *Backend
	task *engine.Task
	inv  *invocation
	c    *rpc.Client

	purpose map[string]string // command id → what the loop sent it for
	started bool              // get_state answered, the prompt sent
	model   modelRef          // the model pi resolved
	session string            // pi's session id

	extReady   bool
	streaming  bool // between agent_start and agent_end
	retrying   bool // an auto_retry_start since the last agent_end
	retries    int
	endSeq     int // agent_ends seen
	endStats   *sessionStats
	endState   *rpcState
	baseline   tally
	last       *message
	repaired   bool
	pause      *engine.NeedsInteractionError
	pauseTool  string
	pauseCall  *toolCall // the call held for a person
	grant      *toolCall // the call a person allowed, let through once
	aborted    bool      // abort sent for the pause
	errOut     *agentcli.Tail
	cancelling bool
}

// rpcState is the part of get_state's response iterion reads.
type rpcState struct {
	Model *struct {
		Provider string `json:"provider"`
		ID       string `json:"id"`
	} `json:"model"`
	SessionID           string `json:"sessionId"`
	SessionFile         string `json:"sessionFile"`
	PendingMessageCount int    `json:"pendingMessageCount"`
}

// outcome is how a node session ended.
type outcome struct {
	res *engine.Result
	err error
}

// executeRPC runs the node on a long-lived `pi --mode rpc`.
func (b *Backend) executeRPC(ctx context.Context, task *engine.Task, inv *invocation) (*engine.Result, error) {
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	r := &rpcRun{b: b, task: task, inv: inv, purpose: map[string]string{}, errOut: &agentcli.Tail{Max: 8 << 10}}
	if s := inv.saved; s != nil && s.Tool == "permission" && asktools.PermissionAllowed(task.ResumeAnswer) {
		r.grant = s.Call
	}
	// pi's process outlives ctx by the grace of a graceful stop: the loop
	// ends it (abort, stdin closed, then kill), and the kill ends it
	// whatever happens to the loop.
	procCtx, kill := context.WithCancel(context.WithoutCancel(ctx))
	defer kill()
	p, err := inv.process(&engine.Process{
		Argv: inv.argv("rpc"), Env: inv.env(b.extensionEnv(task)), Mounts: inv.mounts(),
		Stdin: stdinR, Stdout: stdoutW, Stderr: r.errOut,
	})
	if err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		// How pi ended says nothing the events did not: it exits 0 on a
		// failed model call, and a crash shows as its output ending.
		_, _ = task.Run(procCtx, p)
		stdoutW.Close()
		stdinR.Close() // a write to a gone pi fails instead of blocking
		close(exited)
	}()
	r.c = rpc.New(stdinW, stdoutR)
	defer r.c.Close()

	events := make(chan rpc.Event)
	pumpDone := make(chan error, 1)
	pumpCtx, stopPump := context.WithCancel(context.Background())
	defer stopPump()
	go func() {
		for {
			ev, err := r.c.Next(pumpCtx)
			if err != nil {
				pumpDone <- err
				return
			}
			select {
			case events <- ev:
			case <-pumpCtx.Done():
				return
			}
		}
	}()

	var wake <-chan struct{}
	if task.InboxWake != nil {
		wake = task.InboxWake()
	}
	startTimer := time.NewTimer(b.startTimeout)
	defer startTimer.Stop()
	var grace <-chan time.Time
	ctxDone := ctx.Done()
	if err := r.send("get_state", nil, "start"); err != nil {
		return nil, r.died(exited, err)
	}
	var out *outcome
	for out == nil {
		select {
		case ev := <-events:
			out = r.handle(ctx, ev)
		case err := <-pumpDone:
			// pi's output ended: it exited (or its output broke).
			if r.cancelling {
				out = &outcome{err: ctx.Err()}
				break
			}
			return nil, r.died(exited, err)
		case <-wake:
			wake = task.InboxWake()
			if err := r.deliver(ctx); err != nil {
				out = &outcome{err: err}
			}
		case <-startTimer.C:
			if !r.started {
				kill()
				<-exited
				return nil, engine.NewBackendError(engine.CodeExecutionFailed, true, fmt.Errorf(
					"pi did not answer within %s of its start%s", b.startTimeout, r.errOut.Said("pi")))
			}
		case <-ctxDone:
			// Cancelled or timed out: abort the turn so that a partial
			// transcript lands (the agent_end ends the loop), then stop.
			ctxDone, r.cancelling = nil, true
			if !r.streaming {
				out = &outcome{err: ctx.Err()}
				break
			}
			_ = r.send("abort", nil, "abort")
			grace = time.After(b.stopGrace)
		case <-grace:
			out = &outcome{err: ctx.Err()} // the abort did not land in time
		}
	}
	// The node's outcome is known: stop pi gracefully (stdin closed), and
	// kill its tree when it does not go.
	r.c.Close()
	select {
	case <-exited:
	case <-time.After(b.stopGrace):
		kill()
		<-exited
	}
	if out.err == nil && r.pause != nil {
		out.err = r.savePause()
	}
	if r.retries > 0 {
		b.log.Warn("pi retried model calls itself despite set_auto_retry: their tokens are not all counted", "run", task.RunID, "node", task.NodeID, "retries", r.retries)
	}
	return out.res, out.err
}

// send sends a command whose response comes among the events.
func (r *rpcRun) send(typ string, fields map[string]any, purpose string) error {
	id, err := r.c.Send(typ, fields)
	if err != nil {
		return err
	}
	r.purpose[id] = purpose
	return nil
}

// died is the error of a pi that exited before the node was done.
func (r *rpcRun) died(exited <-chan struct{}, cause error) error {
	<-exited
	return engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("pi exited before the node was done (%v)%s", cause, r.errOut.Said("pi")))
}

// handle takes one event; a non-nil outcome ends the session.
func (r *rpcRun) handle(ctx context.Context, ev rpc.Event) *outcome {
	switch ev.Type {
	case rpc.TypeResponse:
		return r.response(ctx, ev)
	case "extension_ui_request":
		return r.ui(ctx, ev)
	case "agent_start":
		r.streaming, r.retrying = true, false
	case "turn_start":
		if r.pause != nil && !r.aborted {
			// pi goes on after the pausing call (a sibling call, a queued
			// message): the turn is not wanted.
			r.aborted = true
			_ = r.send("abort", nil, "abort")
		}
	case "tool_execution_end", "turn_end":
		if err := r.deliver(ctx); err != nil {
			return &outcome{err: err}
		}
	case "auto_retry_start":
		r.retrying = true
		r.retries++
	case "extension_error":
		r.b.log.Warn("a pi extension failed", "run", r.task.RunID, "node", r.task.NodeID, "event", string(ev.Raw))
	case "agent_end":
		var end struct {
			Messages []message `json:"messages"`
		}
		if err := ev.Decode(&end); err != nil {
			return &outcome{err: fmt.Errorf("decoding pi's agent_end: %w", err)}
		}
		if m := lastAssistant(end.Messages); m != nil {
			r.last = m
		}
		r.streaming = false
		if r.cancelling {
			return &outcome{err: ctx.Err()}
		}
		r.endSeq++
		r.endStats, r.endState = nil, nil
		seq := fmt.Sprint(r.endSeq)
		if err := r.send("get_session_stats", nil, "end-stats "+seq); err != nil {
			return &outcome{err: err}
		}
		if err := r.send("get_state", nil, "end-state "+seq); err != nil {
			return &outcome{err: err}
		}
	}
	return nil
}

// response takes the response to one of our commands.
func (r *rpcRun) response(ctx context.Context, ev rpc.Event) *outcome {
	resp, err := ev.Response()
	if err != nil {
		return nil
	}
	purpose := r.purpose[resp.ID]
	delete(r.purpose, resp.ID)
	if !resp.Success {
		cerr := &rpc.CommandError{Command: resp.Command, Message: resp.Error}
		switch {
		case purpose == "prompt":
			return &outcome{err: promptRefused(cerr)}
		case purpose == "abort" || purpose == "setting":
			r.b.log.Warn("pi refused a command", "run", r.task.RunID, "node", r.task.NodeID, "err", cerr)
			return nil
		}
		return &outcome{err: engine.NewBackendError(engine.CodeExecutionFailed, false, cerr)}
	}
	kind, seq, _ := strings.Cut(purpose, " ")
	switch kind {
	case "start":
		return r.start(ctx, resp.Data)
	case "baseline":
		var s sessionStats
		if err := json.Unmarshal(resp.Data, &s); err == nil {
			r.baseline = s.tally()
		}
	case "end-stats", "end-state":
		if seq != fmt.Sprint(r.endSeq) {
			return nil // an earlier agent_end's
		}
		if kind == "end-stats" {
			var s sessionStats
			if err := json.Unmarshal(resp.Data, &s); err != nil {
				return &outcome{err: fmt.Errorf("decoding pi's session stats: %w", err)}
			}
			r.endStats = &s
		} else {
			var s rpcState
			if err := json.Unmarshal(resp.Data, &s); err != nil {
				return &outcome{err: fmt.Errorf("decoding pi's state: %w", err)}
			}
			r.endState = &s
		}
		if r.endStats != nil && r.endState != nil {
			return r.idle(ctx)
		}
	}
	return nil
}

// start follows pi's first answer: the extension must have said it is
// ready (its notification was printed before), then the prompt goes.
func (r *rpcRun) start(ctx context.Context, data json.RawMessage) *outcome {
	var st rpcState
	if err := json.Unmarshal(data, &st); err != nil {
		return &outcome{err: fmt.Errorf("decoding pi's state: %w", err)}
	}
	if !r.extReady {
		return &outcome{err: errContract("it never said it was ready" + r.errOut.Said("pi"))}
	}
	r.started = true
	if st.Model != nil {
		r.model = modelRef{provider: st.Model.Provider, id: st.Model.ID}
	}
	r.session = st.SessionID
	if want := r.inv.model; want.id != "" && (want.id != r.model.id || want.provider != "" && want.provider != r.model.provider) {
		r.b.log.Warn("pi resolved another model than the node asked for", "run", r.task.RunID, "node", r.task.NodeID, "asked", want.String(), "effective", r.model.String())
	}
	if !r.inv.proxied(r.model.provider) && r.b.subscriptionOnly(r.model.provider, r.inv.agentDir, true) {
		if r.b.env("ITERION_FORBID_SUBSCRIPTION_OAUTH") == "1" {
			return &outcome{err: engine.NewBackendError("AUTH_FAILED", false, errors.New(forbiddenSubscription))}
		}
		r.b.log.Warn(SubscriptionOAuthNotice, "run", r.task.RunID, "node", r.task.NodeID)
	}
	for _, c := range []struct {
		typ     string
		fields  map[string]any
		purpose string
	}{
		{"set_auto_retry", map[string]any{"enabled": false}, "setting"},
		// Every message queued at a turn boundary goes to the next model
		// call together (pi's default hands them over one call at a time).
		{"set_steering_mode", map[string]any{"mode": "all"}, "setting"},
		{"set_follow_up_mode", map[string]any{"mode": "all"}, "setting"},
		{"get_session_stats", nil, "baseline"},
		{"prompt", map[string]any{"message": firstMessage(r.task)}, "prompt"},
	} {
		if err := r.send(c.typ, c.fields, c.purpose); err != nil {
			return &outcome{err: err}
		}
	}
	return nil
}

// guardSlash keeps a message that starts with "/" from being taken for
// one of pi's commands or prompt templates.
func guardSlash(s string) string {
	if strings.HasPrefix(s, "/") {
		return " " + s
	}
	return s
}

// deliver steers the messages queued for the node into the turn in
// progress: pi hands them to the model before its next call.
func (r *rpcRun) deliver(ctx context.Context) error {
	if !r.streaming || r.pause != nil || r.cancelling || r.task.InboxDrain == nil {
		return nil
	}
	msgs, err := r.task.InboxDrain(ctx)
	if err != nil {
		return fmt.Errorf("reading the inbox: %w", err)
	}
	for _, m := range msgs {
		if err := r.send("prompt", map[string]any{"message": guardSlash(m), "streamingBehavior": "steer"}, "prompt"); err != nil {
			return err
		}
	}
	return nil
}

// idle follows an agent_end that no retry followed: the node pauses,
// fails, takes one more turn (messages that arrived, an invalid answer),
// or is done.
func (r *rpcRun) idle(ctx context.Context) *outcome {
	if r.streaming || r.retrying {
		return nil
	}
	if r.pause != nil {
		return &outcome{}
	}
	if r.endState.PendingMessageCount > 0 {
		return r.prompt(flushText)
	}
	if r.task.InboxDrain != nil {
		msgs, err := r.task.InboxDrain(ctx)
		if err != nil {
			return &outcome{err: fmt.Errorf("reading the inbox: %w", err)}
		}
		if len(msgs) > 0 {
			// A late message forces one more turn.
			return r.prompt(strings.Join(msgs, "\n\n"))
		}
	}
	out, invalid, err := finalOutput(r.last, r.task.OutputSchema)
	if err != nil {
		return &outcome{err: err}
	}
	if invalid != nil {
		if r.repaired {
			return &outcome{err: engine.NewBackendError(engine.CodeSchemaValidation, false, fmt.Errorf("the final answer is not valid output after a repair turn: %v", invalid))}
		}
		r.repaired = true
		return r.prompt(engine.OutputRepairPrompt(invalid))
	}
	res := &engine.Result{Output: out, SessionID: r.session, EffectiveModel: r.model.String()}
	r.b.account(res, r.endStats.tally().minus(r.baseline), res.EffectiveModel)
	return &outcome{res: res}
}

func (r *rpcRun) prompt(text string) *outcome {
	if err := r.send("prompt", map[string]any{"message": guardSlash(text), "streamingBehavior": "steer"}, "prompt"); err != nil {
		return &outcome{err: err}
	}
	return nil
}

// ui answers an extension_ui_request: ours are decided here, every other
// dialog is cancelled (an unmarked request could be another extension
// posing as ours).
func (r *rpcRun) ui(ctx context.Context, ev rpc.Event) *outcome {
	var req uiRequest
	if err := ev.Decode(&req); err != nil {
		return nil
	}
	dialog := req.Method == "input" || req.Method == "select" || req.Method == "confirm" || req.Method == "editor"
	text := req.Title
	if req.Method == "notify" {
		text = req.Message
	}
	p, mine := ours(text)
	switch {
	case !mine && dialog:
		r.b.log.Warn("a pi extension opened a dialog nobody answers: cancelled", "run", r.task.RunID, "node", r.task.NodeID, "method", req.Method)
		_ = r.c.RespondUI(req.ID, map[string]any{"cancelled": true})
		return nil
	case !mine:
		return nil // another extension's status or notification
	case *p.Contract != contractVersion || p.Op == "mismatch":
		if dialog {
			_ = r.c.RespondUI(req.ID, map[string]any{"cancelled": true})
		}
		detail := fmt.Sprintf("it speaks contract %d, iterion %d", *p.Contract, contractVersion)
		if p.Op == "mismatch" {
			detail = fmt.Sprintf("it speaks contract %d and was configured with %s", *p.Contract, p.Configured)
		}
		r.b.log.Error("iterion's pi extension refused its configuration: it registered nothing", "run", r.task.RunID, "node", r.task.NodeID, "detail", detail)
		return &outcome{err: errContract(detail)}
	case p.Op == "ready":
		var want []string
		for _, t := range asktools.For(r.task.Interaction) {
			want = append(want, t.Name)
		}
		if !slices.Equal(p.Tools, want) && !(len(p.Tools) == 0 && len(want) == 0) {
			return &outcome{err: errContract(fmt.Sprintf("it registered the tools %v, iterion configured %v", p.Tools, want))}
		}
		r.extReady = true
		return nil
	case !dialog:
		return nil
	}
	var rep reply
	switch p.Op {
	case "hello":
		rep = reply{Contract: contractVersion}
		if key := r.b.runtimeKey(r.inv, p.Provider); key != "" {
			rep.Keys = map[string]string{p.Provider: key}
		}
	case "tool":
		var need *engine.NeedsInteractionError
		rep, need = decide(ctx, r.task, p, r.pause != nil)
		if need != nil {
			r.pause, r.pauseTool = need, p.Tool
		}
	case "permission":
		var need *engine.NeedsInteractionError
		var held *toolCall
		rep, need, held = permit(r.task, p, &r.grant, r.pause != nil)
		if need != nil {
			r.pause, r.pauseTool, r.pauseCall = need, "permission", held
		}
	default:
		rep = reply{Contract: contractVersion, IsError: true, Text: fmt.Sprintf("unknown request %q", p.Op)}
	}
	value, _ := json.Marshal(rep)
	if err := r.c.RespondUI(req.ID, map[string]any{"value": string(value)}); err != nil {
		return &outcome{err: err}
	}
	return nil
}

// savePause puts the paused session into the pause's conversation, for
// the checkpoint: pi has exited, so its session file is complete.
func (r *rpcRun) savePause() error {
	files, _ := filepath.Glob(filepath.Join(r.inv.sessionDir, "*.jsonl"))
	if r.inv.resumeFile != "" {
		files = []string{r.inv.resumeFile}
	}
	if len(files) != 1 {
		return engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("pi paused without one session file to resume (found %d)", len(files)))
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		return fmt.Errorf("reading the paused pi session: %w", err)
	}
	if len(data) > maxSession {
		return engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("the paused pi session holds %d MiB, more than the %d MiB a checkpoint keeps", len(data)>>20, maxSession>>20))
	}
	r.pause.Conversation, _ = json.Marshal(savedSession{V: 1, File: filepath.Base(files[0]), Session: string(data), Tool: r.pauseTool, Call: r.pauseCall})
	return r.pause
}
