// Package asktools is the one home of the interaction tools every backend
// offers its agent: ask_user (a blocking question that pauses the run),
// ask_user_async (post a question and keep working) and await_answers
// (the sync point), as upstream's ADR-081 defines them. It holds their
// names, descriptions, input schemas, the texts the model reads back and
// the section of the system prompt that explains them, and it runs the
// two tools whose outcome does not depend on the backend (posting, and
// awaiting when nothing is pending) over an engine.Task's closures.
//
// claw calls it in-process; the CLI backends reach it through the run's
// channel (package runchannel), whose server calls the same functions, so
// that a workflow's questions read and behave the same on every backend.
package asktools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/iterion-bot/iterion/engine"
)

// The tools' names, as the model calls them (Claude Code, which reaches
// them over MCP, sees them as mcp__iterion__<name>).
const (
	AskUser      = "ask_user"
	AskUserAsync = "ask_user_async"
	AwaitAnswers = "await_answers"
)

// The texts the model reads back (upstream's, ADR-081).
const (
	// PostedText answers ask_user_async; the question's id follows it as
	// " (question id: <id>)".
	PostedText = "Question posted. The operator's answer will arrive in your conversation as an operator message tagged with the question id — keep working on everything that does not depend on it. Call await_answers only when you cannot proceed without the pending answers."
	// SystemSection is added to the system prompt of an interaction:
	// async node, on every backend.
	SystemSection = `[ASYNC QUESTIONS]
You can ask the operator questions without stopping your work: call ask_user_async with the question.
Post your questions early, as soon as you see you will need an answer, then keep working on everything
that does not depend on them. Each answer arrives later in this conversation as an operator message
that starts with [Answer to question <id>]. Call await_answers only when you truly cannot go on without
the pending answers: it returns at once when everything is answered, otherwise the run pauses until the
operator replies. Use the blocking ask_user only for destructive or irreversible decisions.`
	// AnswerPrefix starts every inbox message that carries an answer.
	AnswerPrefix = "[Answer to question "
)

// Tool is an interaction tool as the model sees it.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the tool's input, an object. Each call
	// of For builds it anew: a caller may keep or change it.
	Schema map[string]any
}

// MaxOptions and MaxOptionLabel bound the offered answers of a question;
// entries beyond them, or malformed, are dropped.
const (
	MaxOptions     = 32
	MaxOptionLabel = 200
)

func questionSchema() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"question": map[string]any{"type": "string", "description": "The question for the operator."},
			"options": map[string]any{"type": "array", "maxItems": MaxOptions, "items": map[string]any{
				"type": "object", "properties": map[string]any{
					"id": map[string]any{"type": "string"}, "label": map[string]any{"type": "string", "maxLength": MaxOptionLabel},
				}, "required": []string{"id", "label"},
			}},
			"allow_free_text": map[string]any{"type": "boolean"},
		},
		"required": []string{"question"},
	}
}

// For returns the interaction tools of a node whose interaction mode is
// interaction (engine.Task.Interaction): ask_user when it may reach a
// person (anything but "" and "none"), and ask_user_async and
// await_answers when it is "async".
func For(interaction string) []Tool {
	var tools []Tool
	if Interactive(interaction) {
		tools = append(tools, Tool{Name: AskUser, Description: "Ask the operator a question and wait for the answer. The run pauses until they reply: use it only for decisions you must not take alone.", Schema: questionSchema()})
	}
	if interaction == "async" {
		tools = append(tools,
			Tool{Name: AskUserAsync, Description: "Post a question to the operator and keep working; the answer arrives later as an operator message tagged with the question id.", Schema: questionSchema()},
			Tool{Name: AwaitAnswers, Description: "Wait for the answers to your posted questions. Returns them at once if all are answered; otherwise the run pauses until they are.", Schema: map[string]any{"type": "object", "properties": map[string]any{"note": map[string]any{"type": "string"}}}},
		)
	}
	return tools
}

// Interactive reports whether a node of this interaction mode may ask a
// person: it is offered ask_user.
func Interactive(interaction string) bool {
	return interaction != "" && interaction != "none"
}

// Question reads the input of ask_user or ask_user_async: the question,
// trimmed, and its well-formed options (malformed entries are dropped, as
// are entries past MaxOptions).
func Question(input map[string]any) engine.AsyncQuestion {
	q, _ := input["question"].(string)
	var opts []engine.Option
	if list, ok := input["options"].([]any); ok {
		for _, o := range list {
			m, _ := o.(map[string]any)
			id, _ := m["id"].(string)
			label, _ := m["label"].(string)
			if id == "" || label == "" || len(label) > MaxOptionLabel || len(opts) >= MaxOptions {
				continue
			}
			opts = append(opts, engine.Option{ID: id, Label: label})
		}
	}
	var free *bool
	if v, ok := input["allow_free_text"].(bool); ok {
		free = &v
	}
	return engine.AsyncQuestion{Question: strings.TrimSpace(q), Options: opts, AllowFreeText: free}
}

// Ask reads the input of ask_user, failing with the text the model reads
// when it holds no question. Pausing the run is the backend's to do.
func Ask(input map[string]any) (engine.AsyncQuestion, error) {
	q := Question(input)
	if q.Question == "" {
		return q, errors.New("question is empty: ask_user needs a question")
	}
	return q, nil
}

// Post runs ask_user_async over the task's PostQuestion and returns the
// text the model reads. Its errors are texts for the model too.
func Post(ctx context.Context, task *engine.Task, input map[string]any) (string, error) {
	if task.PostQuestion == nil {
		return "", errors.New("ask_user_async is not available here (inside a fan-out branch questions cannot be posted: the async node belongs on the trunk)")
	}
	q := Question(input)
	if q.Question == "" {
		return "", errors.New("question is empty: ask_user_async needs a question")
	}
	id, err := task.PostQuestion(ctx, q)
	if err != nil {
		return "", fmt.Errorf("posting the question: %w", err)
	}
	return PostedText + " (question id: " + id + ")", nil
}

// Await runs await_answers over the task's closures. When nothing is
// pending it returns the answers' text, with the node's other operator
// messages after them (the inbox is drained: the answers' queued copies
// would reach the agent a second time). Otherwise it returns the pending
// questions, and suspending the node until they are answered is the
// backend's to do (claw returns an engine.NeedsInteractionError with
// AwaitPending).
func Await(ctx context.Context, task *engine.Task) (string, []engine.PendingQuestion, error) {
	if task.PendingQuestions == nil || task.CollectAnswers == nil {
		return "", nil, errors.New("await_answers cannot pause inside a fan-out branch (a pause is run-global): put an await_answers node in the graph instead")
	}
	pending, err := task.PendingQuestions(ctx)
	if err != nil {
		return "", nil, err
	}
	if len(pending) > 0 {
		return "", pending, nil
	}
	text, err := task.CollectAnswers(ctx)
	if err != nil {
		return "", nil, err
	}
	if task.InboxDrain != nil {
		msgs, err := task.InboxDrain(ctx)
		if err != nil {
			return "", nil, err
		}
		var others []string
		for _, m := range msgs {
			if !strings.HasPrefix(m, AnswerPrefix) {
				others = append(others, m)
			}
		}
		if len(others) > 0 {
			text += "\n\nOperator messages:\n" + strings.Join(others, "\n")
		}
	}
	return text, nil, nil
}

// PermissionOptions are the options of a permission question (a call the
// node's permission: policy holds for a person): an answer that is not
// allow refuses the call.
func PermissionOptions() []engine.Option {
	return []engine.Option{{ID: "allow", Label: "allow"}, {ID: "deny", Label: "deny"}}
}

// PermissionQuestion asks a person whether the agent's call of tool with
// input may run; reason is why the policy asks.
func PermissionQuestion(tool string, input map[string]any, reason string) string {
	arg, _ := json.Marshal(input)
	if len(arg) > 2000 {
		arg = append(arg[:2000], "…"...)
	}
	return fmt.Sprintf("The agent asks to call %s with %s. The workflow's permission policy asks a person first (%s). Answer allow to let it run, or deny (with a reason, if you like) to refuse it.", tool, arg, reason)
}

// PermissionAllowed reports whether a person's answer to a permission
// question allows the call.
func PermissionAllowed(answer string) bool {
	answer = strings.TrimSpace(answer)
	return strings.EqualFold(answer, "allow") || strings.EqualFold(answer, "yes")
}

// PermissionDeniedText is what the agent reads of a call a person
// refused, with their words when they gave more than "deny".
func PermissionDeniedText(answer string) string {
	answer = strings.TrimSpace(answer)
	text := "refused by the operator"
	if answer != "" && !strings.EqualFold(answer, "deny") && !strings.EqualFold(answer, "no") {
		text += ": " + answer
	}
	return text + ". Do not try to reach the same effect another way; do the rest of the task, and say in your answer what you could not do."
}
