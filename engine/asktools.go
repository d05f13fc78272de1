package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The interaction tools (ask_user, ask_user_async, await_answers) are the
// same on every backend: their names, input schemas, descriptions and the
// texts the model reads back live here, with the decisions they make, so
// that each backend only carries them to its model (claw as API tools, pi
// through its extension, claude_code through MCP) and the wording has one
// home (ADR-081).

// AskTool is one interaction tool as a model is offered it.
type AskTool struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the tool's input.
	Schema map[string]any
}

// The interaction tools' names.
const (
	ToolAskUser      = "ask_user"
	ToolAskUserAsync = "ask_user_async"
	ToolAwaitAnswers = "await_answers"
)

// The texts the model reads (upstream's, ADR-081).
const (
	// AsyncQuestionPostedText is the result of ask_user_async, followed by
	// the question id.
	AsyncQuestionPostedText = "Question posted. The operator's answer will arrive in your conversation as an operator message tagged with the question id — keep working on everything that does not depend on it. Call await_answers only when you cannot proceed without the pending answers."
	// AsyncQuestionsSection is appended to the system prompt of an
	// interaction: async node.
	AsyncQuestionsSection = `[ASYNC QUESTIONS]
You can ask the operator questions without stopping your work: call ask_user_async with the question.
Post your questions early, as soon as you see you will need an answer, then keep working on everything
that does not depend on them. Each answer arrives later in this conversation as an operator message
that starts with [Answer to question <id>]. Call await_answers only when you truly cannot go on without
the pending answers: it returns at once when everything is answered, otherwise the run pauses until the
operator replies. Use the blocking ask_user only for destructive or irreversible decisions.`
)

// answerPrefix starts every inbox message that delivers an async answer
// (see AnswerMessage).
const answerPrefix = "[Answer to question "

func questionSchema() map[string]any {
	return map[string]any{
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
}

// AskTools are the interaction tools of a node whose interaction mode is
// interaction: ask_user when it may reach a person at all, and the async
// pair when it is async.
func AskTools(interaction string) []AskTool {
	var tools []AskTool
	if interaction != "" && interaction != "none" {
		tools = append(tools, AskTool{Name: ToolAskUser, Description: "Ask the operator a question and wait for the answer. The run pauses until they reply: use it only for decisions you must not take alone.", Schema: questionSchema()})
	}
	if interaction == "async" {
		tools = append(tools,
			AskTool{Name: ToolAskUserAsync, Description: "Post a question to the operator and keep working; the answer arrives later as an operator message tagged with the question id.", Schema: questionSchema()},
			AskTool{Name: ToolAwaitAnswers, Description: "Wait for the answers to your posted questions. Returns them at once if all are answered; otherwise the run pauses until they are.", Schema: map[string]any{"type": "object", "properties": map[string]any{"note": map[string]any{"type": "string"}}}},
		)
	}
	return tools
}

// SystemPromptSections are the protocol sections a node's system prompt
// needs beyond its own text: the async questions' when it is async, and
// the output format when it has an output schema.
func SystemPromptSections(task *Task) []string {
	var parts []string
	if task.Interaction == "async" {
		parts = append(parts, AsyncQuestionsSection)
	}
	if task.OutputSchema != nil {
		schema, _ := json.Marshal(task.OutputSchema)
		parts = append(parts, "[OUTPUT]\nWhen you are done, reply with only a JSON object matching this JSON Schema, and nothing else:\n"+string(schema))
	}
	return parts
}

// QuestionInput reads the input of ask_user and ask_user_async: the
// question (trimmed), its options (malformed entries skipped, at most 32)
// and allow_free_text when given.
func QuestionInput(input map[string]any) (string, []Option, *bool) {
	q, _ := input["question"].(string)
	var opts []Option
	if list, ok := input["options"].([]any); ok {
		for _, o := range list {
			m, _ := o.(map[string]any)
			id, _ := m["id"].(string)
			label, _ := m["label"].(string)
			if id == "" || label == "" || len(label) > 200 || len(opts) >= 32 {
				continue
			}
			opts = append(opts, Option{ID: id, Label: label})
		}
	}
	var free *bool
	if v, ok := input["allow_free_text"].(bool); ok {
		free = &v
	}
	return strings.TrimSpace(q), opts, free
}

// AskUser is the decision of the blocking ask_user: the
// *NeedsInteractionError that pauses the run on toolUseID, or an error for
// the model when the question is empty.
func AskUser(input map[string]any, toolUseID string) error {
	q, opts, _ := QuestionInput(input)
	if q == "" {
		return errors.New("question is empty: ask_user needs a question")
	}
	return &NeedsInteractionError{Question: q, Options: opts, PendingToolUseID: toolUseID}
}

// PostAsyncQuestion is ask_user_async: it posts the question and returns
// the text the model reads back. Its errors are for the model.
func PostAsyncQuestion(ctx context.Context, task *Task, input map[string]any) (string, error) {
	if task.PostQuestion == nil {
		return "", errors.New("ask_user_async is not available here (inside a fan-out branch questions cannot be posted: the async node belongs on the trunk)")
	}
	q, opts, free := QuestionInput(input)
	if q == "" {
		return "", errors.New("question is empty: ask_user_async needs a question")
	}
	id, err := task.PostQuestion(ctx, AsyncQuestion{Question: q, Options: opts, AllowFreeText: free})
	if err != nil {
		return "", fmt.Errorf("posting the question: %w", err)
	}
	return AsyncQuestionPostedText + " (question id: " + id + ")", nil
}

// AwaitAnswers is the await_answers tool: with nothing pending, the text
// of the answers (and of the other operator messages queued meanwhile,
// whose answer copies it drops: they are in the text); with questions
// pending, the *NeedsInteractionError that pauses the run on toolUseID.
// Other errors are for the model.
func AwaitAnswers(ctx context.Context, task *Task, toolUseID string) (string, error) {
	if task.PendingQuestions == nil {
		return "", errors.New("await_answers cannot pause inside a fan-out branch (a pause is run-global): put an await_answers node in the graph instead")
	}
	pending, err := task.PendingQuestions(ctx)
	if err != nil {
		return "", err
	}
	if len(pending) > 0 {
		return "", &NeedsInteractionError{AwaitPending: pending, PendingToolUseID: toolUseID}
	}
	text, err := task.CollectAnswers(ctx)
	if err != nil {
		return "", err
	}
	if task.InboxDrain != nil {
		msgs, err := task.InboxDrain(ctx)
		if err != nil {
			return "", err
		}
		var others []string
		for _, m := range msgs {
			if !strings.HasPrefix(m, answerPrefix) {
				others = append(others, m)
			}
		}
		if len(others) > 0 {
			text += "\n\nOperator messages:\n" + strings.Join(others, "\n")
		}
	}
	return text, nil
}

// PermissionOptions are the options of a permission question: an answer
// that is not allow refuses the call.
func PermissionOptions() []Option {
	return []Option{{ID: "allow", Label: "allow"}, {ID: "deny", Label: "deny"}}
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

// PermissionRefusedText is what the agent reads of a call the policy
// refused, for reason.
func PermissionRefusedText(reason string) string {
	return fmt.Sprintf("refused by the workflow's permission policy (%s). Do not try to reach the same effect another way; do the rest of the task, and say in your answer what you could not do.", reason)
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
