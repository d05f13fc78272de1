package claw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/engine/permission"
)

// tool is a tool offered to the model and how to run it.
type tool struct {
	def ToolDef
	run func(ctx context.Context, task *engine.Task, conv *Conversation, call Block, input map[string]any) (string, error)
}

// The texts the model reads back (upstream's, ADR-081).
const (
	postedText   = "Question posted. The operator's answer will arrive in your conversation as an operator message tagged with the question id — keep working on everything that does not depend on it. Call await_answers only when you cannot proceed without the pending answers."
	asyncSection = `[ASYNC QUESTIONS]
You can ask the operator questions without stopping your work: call ask_user_async with the question.
Post your questions early, as soon as you see you will need an answer, then keep working on everything
that does not depend on them. Each answer arrives later in this conversation as an operator message
that starts with [Answer to question <id>]. Call await_answers only when you truly cannot go on without
the pending answers: it returns at once when everything is answered, otherwise the run pauses until the
operator replies. Use the blocking ask_user only for destructive or irreversible decisions.`
)

var questionSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"question": map[string]any{"type": "string", "description": "The question for the operator."},
		"options": map[string]any{"type": "array", "maxItems": 32, "items": map[string]any{
			"type": "object", "properties": map[string]any{
				"id": map[string]any{"type": "string"}, "label": map[string]any{"type": "string", "maxLength": 200},
			}, "required": []string{"id", "label"},
		}},
		"allow_free_text": map[string]any{"type": "boolean"},
	},
	"required": []string{"question"},
}

// toolsFor returns the tools of a task: the workspace tools its node
// lists, ask_user when it may interact, and the async pair when it is
// interaction: async (even with no other tools).
func (b *Backend) toolsFor(task *engine.Task) []tool {
	var tools []tool
	for _, name := range task.Tools {
		if task.ReadOnly && writes(name) {
			continue // a readonly node gets no tool that changes the workspace
		}
		if t, ok := b.workspaceTool(name); ok {
			tools = append(tools, t)
		}
	}
	if task.Interaction != "" && task.Interaction != "none" {
		tools = append(tools, tool{
			def: ToolDef{Name: "ask_user", Description: "Ask the operator a question and wait for the answer. The run pauses until they reply: use it only for decisions you must not take alone.", Schema: questionSchema},
			run: askUser,
		})
	}
	if task.Interaction == "async" {
		tools = append(tools,
			tool{def: ToolDef{Name: "ask_user_async", Description: "Post a question to the operator and keep working; the answer arrives later as an operator message tagged with the question id.", Schema: questionSchema}, run: askUserAsync},
			tool{def: ToolDef{Name: "await_answers", Description: "Wait for the answers to your posted questions. Returns them at once if all are answered; otherwise the run pauses until they are.", Schema: map[string]any{"type": "object", "properties": map[string]any{"note": map[string]any{"type": "string"}}}}, run: awaitAnswers},
		)
	}
	return tools
}

// runTool runs one tool call and returns its tool_result block. A blocking
// question comes back as the engine's NeedsInteractionError.
func (b *Backend) runTool(ctx context.Context, task *engine.Task, tools []tool, conv *Conversation, call Block) (Block, error) {
	var input map[string]any
	if len(call.Input) > 0 {
		if err := json.Unmarshal(call.Input, &input); err != nil {
			return toolResult(call.ID, fmt.Sprintf("invalid tool input: %v", err), true), nil
		}
	}
	for _, t := range tools {
		if t.def.Name != call.Name {
			continue
		}
		switch v := task.Permission.Decide(permission.Call{Tool: call.Name, Input: input}); v.Decision {
		case permission.Refuse:
			return toolResult(call.ID, refusedText(v.Reason(task.Permission.Mode)), true), nil
		case permission.AskPerson:
			conv.PermissionAsked = call.ID
			return Block{}, &engine.NeedsInteractionError{
				Question: permissionQuestion(call.Name, input, v.Reason(task.Permission.Mode)),
				Options:  permissionOptions, PendingToolUseID: call.ID,
			}
		}
		return runGranted(ctx, task, conv, t, call, input)
	}
	var names []string
	for _, t := range tools {
		names = append(names, t.def.Name)
	}
	return toolResult(call.ID, fmt.Sprintf("unknown tool %q; the tools here are: %s", call.Name, strings.Join(names, ", ")), true), nil
}

// runGranted runs a call the policy let through.
func runGranted(ctx context.Context, task *engine.Task, conv *Conversation, t tool, call Block, input map[string]any) (Block, error) {
	out, err := t.run(ctx, task, conv, call, input)
	var need *engine.NeedsInteractionError
	if errors.As(err, &need) {
		return Block{}, err
	}
	if err != nil {
		return toolResult(call.ID, err.Error(), true), nil
	}
	return toolResult(call.ID, out, false), nil
}

// writes reports whether a workspace tool can change the workspace.
func writes(name string) bool {
	switch name {
	case "write_file", "edit_file", "bash":
		return true
	}
	return false
}

// The options of a permission question; an answer that is not "allow"
// refuses the call.
var permissionOptions = []engine.Option{{ID: "allow", Label: "allow"}, {ID: "deny", Label: "deny"}}

// permissionQuestion asks a person whether the agent's call may run.
func permissionQuestion(tool string, input map[string]any, reason string) string {
	arg, _ := json.Marshal(input)
	if len(arg) > 2000 {
		arg = append(arg[:2000], "…"...)
	}
	return fmt.Sprintf("The agent asks to call %s with %s. The workflow's permission policy asks a person first (%s). Answer allow to let it run, or deny (with a reason, if you like) to refuse it.", tool, arg, reason)
}

func refusedText(reason string) string {
	return fmt.Sprintf("refused by the workflow's permission policy (%s). Do not try to reach the same effect another way; do the rest of the task, and say in your answer what you could not do.", reason)
}

// resumePermission decides the call a run paused on to ask about: runs
// it when the answer allows it, refuses it otherwise with the person's
// words, and returns its tool_result.
func (b *Backend) resumePermission(ctx context.Context, task *engine.Task, tools []tool, conv *Conversation) (Block, error) {
	id := conv.PermissionAsked
	conv.PermissionAsked = ""
	var call *Block
	for m := len(conv.Messages) - 1; m >= 0 && call == nil; m-- {
		for i, blk := range conv.Messages[m].Blocks {
			if blk.Type == "tool_use" && blk.ID == id {
				call = &conv.Messages[m].Blocks[i]
			}
		}
	}
	answer := strings.TrimSpace(task.ResumeAnswer)
	if call == nil {
		return toolResult(id, "not run: the call asked about is not in the conversation", true), nil
	}
	if !strings.EqualFold(answer, "allow") && !strings.EqualFold(answer, "yes") {
		text := "refused by the operator"
		if answer != "" && !strings.EqualFold(answer, "deny") && !strings.EqualFold(answer, "no") {
			text += ": " + answer
		}
		return toolResult(id, text+". Do not try to reach the same effect another way; do the rest of the task, and say in your answer what you could not do.", true), nil
	}
	var input map[string]any
	if len(call.Input) > 0 {
		if err := json.Unmarshal(call.Input, &input); err != nil {
			return toolResult(id, fmt.Sprintf("invalid tool input: %v", err), true), nil
		}
	}
	for _, t := range tools {
		if t.def.Name == call.Name {
			// Refused since (the workflow changed) stays refused.
			if v := task.Permission.Decide(permission.Call{Tool: call.Name, Input: input}); v.Decision == permission.Refuse {
				return toolResult(id, refusedText(v.Reason(task.Permission.Mode)), true), nil
			}
			return runGranted(ctx, task, conv, t, *call, input)
		}
	}
	return toolResult(id, fmt.Sprintf("unknown tool %q", call.Name), true), nil
}

func questionInput(input map[string]any) (string, []engine.Option, *bool) {
	q, _ := input["question"].(string)
	var opts []engine.Option
	if list, ok := input["options"].([]any); ok {
		for _, o := range list {
			m, _ := o.(map[string]any)
			id, _ := m["id"].(string)
			label, _ := m["label"].(string)
			if id == "" || label == "" || len(label) > 200 || len(opts) >= 32 {
				continue // malformed entries are skipped
			}
			opts = append(opts, engine.Option{ID: id, Label: label})
		}
	}
	var free *bool
	if v, ok := input["allow_free_text"].(bool); ok {
		free = &v
	}
	return strings.TrimSpace(q), opts, free
}

func askUser(_ context.Context, _ *engine.Task, conv *Conversation, call Block, input map[string]any) (string, error) {
	q, opts, _ := questionInput(input)
	if q == "" {
		return "", fmt.Errorf("question is empty: ask_user needs a question")
	}
	return "", &engine.NeedsInteractionError{Question: q, Options: opts, PendingToolUseID: call.ID}
}

func askUserAsync(ctx context.Context, task *engine.Task, _ *Conversation, _ Block, input map[string]any) (string, error) {
	if task.PostQuestion == nil {
		return "", fmt.Errorf("ask_user_async is not available here (inside a fan-out branch questions cannot be posted: the async node belongs on the trunk)")
	}
	q, opts, free := questionInput(input)
	if q == "" {
		return "", fmt.Errorf("question is empty: ask_user_async needs a question")
	}
	id, err := task.PostQuestion(ctx, engine.AsyncQuestion{Question: q, Options: opts, AllowFreeText: free})
	if err != nil {
		return "", fmt.Errorf("posting the question: %w", err)
	}
	return postedText + " (question id: " + id + ")", nil
}

func awaitAnswers(ctx context.Context, task *engine.Task, conv *Conversation, call Block, _ map[string]any) (string, error) {
	if task.PendingQuestions == nil {
		return "", fmt.Errorf("await_answers cannot pause inside a fan-out branch (a pause is run-global): put an await_answers node in the graph instead")
	}
	pending, err := task.PendingQuestions(ctx)
	if err != nil {
		return "", err
	}
	if len(pending) == 0 {
		text, err := task.CollectAnswers(ctx)
		if err != nil {
			return "", err
		}
		// The answers are in this result: their queued copies would reach
		// the agent a second time. Other operator messages ride along.
		if task.InboxDrain != nil {
			msgs, err := task.InboxDrain(ctx)
			if err != nil {
				return "", err
			}
			var others []string
			for _, m := range msgs {
				if !strings.HasPrefix(m, "[Answer to question ") {
					others = append(others, m)
				}
			}
			if len(others) > 0 {
				text += "\n\nOperator messages:\n" + strings.Join(others, "\n")
			}
		}
		return text, nil
	}
	return "", &engine.NeedsInteractionError{AwaitPending: pending, PendingToolUseID: call.ID}
}

// systemPrompt is the node's system prompt with the protocol sections its
// tools need.
func systemPrompt(task *engine.Task) string {
	var parts []string
	if task.System != "" {
		parts = append(parts, task.System)
	}
	if task.Interaction == "async" {
		parts = append(parts, asyncSection)
	}
	if task.OutputSchema != nil {
		schema, _ := json.Marshal(task.OutputSchema)
		parts = append(parts, "[OUTPUT]\nWhen you are done, reply with only a JSON object matching this JSON Schema, and nothing else:\n"+string(schema))
	}
	return strings.Join(parts, "\n\n")
}
