package claw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/iterion-bot/iterion/backends/asktools"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/engine/permission"
)

// tool is a tool offered to the model and how to run it.
type tool struct {
	def ToolDef
	run func(ctx context.Context, task *engine.Task, conv *Conversation, call Block, input map[string]any) (string, error)
}

// toolsFor returns the tools of a task: the workspace tools its node
// lists, and the interaction tools of its interaction mode (ask_user when
// it may interact, the async pair when it is interaction: async, even
// with no other tools), as every backend offers them.
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
	runs := map[string]func(context.Context, *engine.Task, *Conversation, Block, map[string]any) (string, error){
		asktools.AskUser: askUser, asktools.AskUserAsync: askUserAsync, asktools.AwaitAnswers: awaitAnswers,
	}
	for _, t := range asktools.For(task.Interaction) {
		tools = append(tools, tool{def: ToolDef{Name: t.Name, Description: t.Description, Schema: t.Schema}, run: runs[t.Name]})
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
			return toolResult(call.ID, permission.RefusedText(v.Reason(task.Permission.Mode)), true), nil
		case permission.AskPerson:
			conv.PermissionAsked = call.ID
			return Block{}, &engine.NeedsInteractionError{
				Question: asktools.PermissionQuestion(call.Name, input, v.Reason(task.Permission.Mode)),
				Options:  asktools.PermissionOptions(), PendingToolUseID: call.ID,
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
	if !asktools.PermissionAllowed(answer) {
		return toolResult(id, asktools.PermissionDeniedText(answer), true), nil
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
				return toolResult(id, permission.RefusedText(v.Reason(task.Permission.Mode)), true), nil
			}
			return runGranted(ctx, task, conv, t, *call, input)
		}
	}
	return toolResult(id, fmt.Sprintf("unknown tool %q", call.Name), true), nil
}

func askUser(_ context.Context, _ *engine.Task, _ *Conversation, call Block, input map[string]any) (string, error) {
	q, err := asktools.Ask(input)
	if err != nil {
		return "", err
	}
	return "", &engine.NeedsInteractionError{Question: q.Question, Options: q.Options, PendingToolUseID: call.ID}
}

func askUserAsync(ctx context.Context, task *engine.Task, _ *Conversation, _ Block, input map[string]any) (string, error) {
	return asktools.Post(ctx, task, input)
}

func awaitAnswers(ctx context.Context, task *engine.Task, _ *Conversation, call Block, _ map[string]any) (string, error) {
	text, pending, err := asktools.Await(ctx, task)
	if err != nil || len(pending) == 0 {
		return text, err
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
		parts = append(parts, asktools.SystemSection)
	}
	if task.OutputSchema != nil {
		parts = append(parts, engine.OutputSection(task.OutputSchema))
	}
	return strings.Join(parts, "\n\n")
}
