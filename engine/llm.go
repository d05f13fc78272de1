package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/iterion-bot/iterion/engine/permission"
	"slices"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/dsl"
)

// resolveBackend picks a node's backend: the node's, the workflow's
// default, then the engine's default.
func (rs *runState) resolveBackend(n *dsl.Node) (string, Backend, error) {
	name := n.LLM.Backend
	if name == "" {
		name = rs.w.DefaultBackend
	}
	if name == "" {
		name = rs.e.defBack
	}
	b, ok := rs.e.backends[name]
	if !ok {
		// Preflight refuses such a workflow before it starts; a run resumed
		// on a build without the backend meets it here.
		return name, nil, failf(CodeExecutionFailed, "backend %q is not available in this build (available: %s)", name, backendList(rs.e.backends))
	}
	return name, b, nil
}

// llm runs an LLM node through its backend. An ask_user from the agent
// pauses the run; when the run resumes, the answer goes back into the same
// conversation.
func (rs *runState) llm(ctx context.Context, n *dsl.Node, input map[string]any, iteration int, branch string) (map[string]any, error) {
	name, b, err := rs.resolveBackend(n)
	if err != nil {
		return nil, err
	}
	async := n.LLM.Interaction == dsl.InteractionAsync
	if async && !b.Capabilities().AsyncQuestions {
		return nil, failf(CodeCapabilityUnsupported, "backend %q cannot serve interaction: async (ask_user_async and await_answers); use claw, claude_code or pi", name)
	}
	s := rs.scope(input)
	system, err := renderText(n.LLM.System, s)
	if err != nil {
		return nil, failf(CodeContextLengthExceeded, "system prompt: %v", err)
	}
	user, err := renderText(n.LLM.User, s)
	if err != nil {
		return nil, failf(CodeContextLengthExceeded, "prompt: %v", err)
	}
	task := &Task{
		RunID: rs.run.ID, NodeID: n.ID, Iteration: iteration,
		System: system, User: user,
		Model: n.LLM.Model, ReasoningEffort: n.LLM.ReasoningEffort, Tools: n.LLM.Tools, ToolMaxSteps: n.LLM.ToolMaxSteps, MaxTokens: n.LLM.MaxTokens,
		WorkDir: rs.workdir, Interaction: n.LLM.Interaction.String(), Network: declaredNetwork(rs.w.SandboxFor(n)),
		Permission: n.LLM.Permission, ReadOnly: n.LLM.ReadOnly,
	}
	for _, name := range n.LLM.MCPServers {
		if s := rs.w.MCPServer(name); s != nil {
			task.MCPServers = append(task.MCPServers, MCPServer{Name: s.Name, Transport: s.Transport.String(),
				Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL})
		}
	}
	if !n.LLM.PermissionModeSet && rs.e.permission != permission.Off {
		// The server's default mode, over the workflow's rules.
		p := permission.Policy{Mode: rs.e.permission}
		if n.LLM.Permission != nil {
			p = *n.LLM.Permission
			p.Mode = rs.e.permission
		}
		task.Permission = &p
	}
	if rs.e.sandbox != nil {
		task.Exec = func(ctx context.Context, argv []string) (*ProcessResult, error) {
			// Bounded here too: a backend cuts what it shows its model.
			return rs.e.sandbox.Run(ctx, &Process{Workflow: rs.w, Node: n, Argv: argv, Dir: rs.workdir, ReadOnly: n.LLM.ReadOnly, MaxStdout: 1 << 20, MaxStderr: 1 << 20})
		}
		task.Run = func(ctx context.Context, p *Process) (*ProcessResult, error) {
			q := *p
			q.Workflow, q.Node, q.Dir = rs.w, n, rs.workdir
			q.ReadOnly = q.ReadOnly || n.LLM.ReadOnly
			return rs.e.sandbox.Run(ctx, &q)
		}
	}
	if n.Output != nil {
		task.OutputSchema = n.Output.JSONSchema()
	}
	if n.Router != nil {
		// An llm router answers with the target it picks.
		var targets []any
		for _, e := range rs.w.Outgoing(n.ID) {
			targets = append(targets, e.To)
		}
		task.OutputSchema = map[string]any{"type": "object", "required": []any{"selected_route"}, "properties": map[string]any{
			"selected_route": map[string]any{"type": "string", "enum": targets},
			"reasoning":      map[string]any{"type": "string"},
		}}
	}
	// The run's bell rings at every change stored for it; the watch lasts
	// as long as the node's execution.
	wake, unwatch := rs.e.changes.watch(rs.run.ID)
	defer unwatch()
	task.InboxWake = wake
	task.InboxDrain = func(ctx context.Context) ([]string, error) {
		msgs, err := rs.e.store.DrainInbox(ctx, rs.run.ID, n.ID)
		if err != nil {
			return nil, err
		}
		texts := make([]string, len(msgs))
		for i, m := range msgs {
			texts[i] = m.Text
		}
		return texts, nil
	}
	if async {
		if branch != "" {
			rs.emit(Event{Type: EventBudgetWarning, NodeID: n.ID, BranchID: branch, Data: map[string]any{
				"reason": "async questions are disabled inside a fan-out branch: declare the async node on the trunk"}})
		} else {
			rs.asyncClosures(task, n)
		}
	}
	rs.mu.Lock()
	if p := rs.ck.Pause; p != nil && p.Node == n.ID {
		task.ResumeConversation, task.ResumePendingToolUseID = p.Conversation, p.PendingToolUseID
		rs.ck.Pause = nil
		rs.mu.Unlock()
		ix, err := rs.e.store.Interaction(ctx, rs.run.ID, p.InteractionID)
		if err != nil {
			return nil, fmt.Errorf("loading the answered question: %w", err)
		}
		if p.Kind == KindAwait {
			task.ResumeAnswer, err = rs.answersText(ctx, n.ID)
			if err != nil {
				return nil, err
			}
		} else {
			task.ResumeAnswer = ix.Answer()
		}
	} else {
		rs.mu.Unlock()
	}

	res, err := b.Execute(ctx, task)
	var need *NeedsInteractionError
	for errors.As(err, &need) && len(need.AwaitPending) > 0 && branch == "" {
		// The await_answers tool: re-check the store before pausing; if
		// everything got answered meanwhile, answer the tool call now.
		pending, perr := rs.e.store.Pending(ctx, rs.run.ID, n.ID)
		if perr != nil || len(pending) > 0 {
			break
		}
		text, terr := rs.answersText(ctx, n.ID)
		if terr != nil {
			return nil, terr
		}
		// The answers ride in the tool result: their queued copies would
		// reach the agent a second time.
		if _, derr := rs.e.store.DrainInbox(ctx, rs.run.ID, n.ID); derr != nil {
			return nil, derr
		}
		task.ResumeConversation, task.ResumePendingToolUseID, task.ResumeAnswer = need.Conversation, need.PendingToolUseID, text
		res, err = b.Execute(ctx, task)
	}
	switch {
	case errors.As(err, &need):
		if branch != "" {
			return nil, failf(CodeExecutionFailed, "ask_user inside a fan-out branch is not supported: a pause is run-global, put the question on the trunk")
		}
		return nil, rs.pauseForAgent(ctx, n, iteration, need)
	case err != nil:
		var be *BackendError
		if errors.As(err, &be) {
			return nil, &nodeFailure{code: be.Code, err: err}
		}
		return nil, failf(CodeExecutionFailed, "backend %s: %v", name, err)
	}
	rs.mu.Lock()
	rs.ck.Tokens += res.Tokens
	rs.ck.CostUSD += res.CostUSD
	rs.mu.Unlock()
	out := res.Output
	if out == nil {
		out = map[string]any{}
	}
	// Engine-stamped consumption, as upstream does.
	if res.Tokens > 0 {
		out["_tokens"] = res.Tokens
	}
	if res.CostUSD > 0 {
		out["_cost_usd"] = res.CostUSD
	}
	return out, nil
}

// asyncClosures gives an async node its ask_user_async, pending and
// collect closures, all served by the store.
func (rs *runState) asyncClosures(task *Task, n *dsl.Node) {
	task.PostQuestion = func(ctx context.Context, q AsyncQuestion) (string, error) {
		text := strings.TrimSpace(q.Question)
		if text == "" {
			return "", errors.New("question is empty: ask_user_async needs a question")
		}
		questions := map[string]any{QuestionKey: text}
		if len(q.Options) > 0 {
			questions[OptionsKey] = q.Options
		}
		if q.AllowFreeText != nil {
			questions[FreeTextKey] = *q.AllowFreeText
		}
		if err := checkAsyncDefault(n, q); err != nil {
			return "", err
		}
		ix, err := rs.e.store.PostQuestion(ctx, PostRequest{RunID: rs.run.ID, Generation: rs.run.Generation, NodeID: n.ID, Questions: questions,
			AnswerOn: n.AnswerOn, Answerers: n.Answerers, FollowUp: followUpOf(n, rs.e.now())})
		if err != nil {
			return "", err
		}
		if ix.FollowUp != nil {
			rs.e.wakeFollowUps()
		}
		rs.e.notify(Event{Type: EventHumanInputRequested, RunID: rs.run.ID, NodeID: n.ID, Time: ix.RequestedAt,
			Data: map[string]any{"interaction_id": ix.ID, "questions": ix.Questions, "async": true}})
		return ix.ID, nil
	}
	task.PendingQuestions = func(ctx context.Context) ([]PendingQuestion, error) {
		pending, err := rs.e.store.Pending(ctx, rs.run.ID, n.ID)
		if err != nil {
			return nil, err
		}
		out := make([]PendingQuestion, len(pending))
		for i, ix := range pending {
			out[i] = PendingQuestion{InteractionID: ix.ID, Question: ix.Question()}
		}
		return out, nil
	}
	task.CollectAnswers = func(ctx context.Context) (string, error) { return rs.answersText(ctx, n.ID) }
}

// answersText is what the await_answers tool reads back.
func (rs *runState) answersText(ctx context.Context, node string) (string, error) {
	all, err := rs.e.store.Interactions(ctx, rs.run.ID)
	if err != nil {
		return "", err
	}
	var lines []string
	for _, ix := range all {
		if ix.Kind == KindAsync && ix.NodeID == node && !ix.Pending() {
			lines = append(lines, fmt.Sprintf("- [%s] Q: %s — A: %s", ix.ID, ix.Question(), ix.Answer()))
		}
	}
	if len(lines) == 0 {
		return "No async questions were posted (nothing to wait for).", nil
	}
	return "All posted questions are answered:\n" + strings.Join(lines, "\n"), nil
}

// pauseForAgent turns an agent's blocking question into a pause: ask_user
// (kind "") or the await_answers tool with questions pending (kind await).
func (rs *runState) pauseForAgent(ctx context.Context, n *dsl.Node, iteration int, need *NeedsInteractionError) error {
	p := &pauseState{Node: n.ID, Conversation: need.Conversation, PendingToolUseID: need.PendingToolUseID}
	questions := map[string]any{}
	extra := map[string]any{}
	if len(need.AwaitPending) > 0 {
		p.Kind = KindAwait
		var lines []string
		var list []any
		for _, q := range need.AwaitPending {
			lines = append(lines, fmt.Sprintf("- [%s] %s", q.InteractionID, q.Question))
			list = append(list, map[string]any{"interaction_id": q.InteractionID, "question": q.Question})
		}
		questions[QuestionKey] = "The agent is waiting for your answer(s) to continue:\n" + strings.Join(lines, "\n")
		questions[AwaitPendingKey] = list
		extra["await"] = true
		// Bounded by the node's timeout (ADR-081): the stored deadline
		// fails the run with the questions still unanswered, whichever
		// process owns the store then.
		if at, ok := ctx.Deadline(); ok {
			p.Deadline = rs.e.now().Add(time.Until(at))
			extra["deadline"] = p.Deadline
		}
	} else {
		questions[QuestionKey] = need.Question
		if len(need.Options) > 0 {
			questions[OptionsKey] = need.Options
		}
	}
	id := PauseInteractionID(rs.run.ID, n.ID, iteration)
	if p.Kind == KindAwait {
		id += "_await"
	}
	p.InteractionID = id
	ix := &Interaction{ID: id, RunID: rs.run.ID, NodeID: n.ID, Kind: p.Kind, Questions: questions, RequestedAt: rs.e.now()}
	if p.Kind != KindAwait {
		ix.AnswerOn, ix.Answerers = n.AnswerOn, n.Answerers
	}
	if p.Kind == KindBlocking {
		ix.Fields = questionFields()
	}
	return rs.pause(ctx, ix, p, extra)
}

// llmRoute asks the router's backend which edge to take.
func (rs *runState) llmRoute(n *dsl.Node, out map[string]any, edges []*dsl.Edge) (*dsl.Edge, error) {
	pick, _ := out["selected_route"].(string)
	for _, e := range edges {
		if e.To == pick {
			return e, nil
		}
	}
	var targets []string
	for _, e := range edges {
		targets = append(targets, e.To)
	}
	slices.Sort(targets)
	return nil, failf(CodeExecutionFailed, "llm router %q chose %q, which is none of its targets (%s)", n.ID, pick, strings.Join(targets, ", "))
}
