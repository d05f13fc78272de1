package pi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/iterion-bot/iterion/backends/asktools"
	"github.com/iterion-bot/iterion/backends/pi/extension"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/engine/permission"
)

// The Go side of the extension's channel (see extension/src/index.ts):
// pi's extension-UI sub-protocol carries our requests as input dialogs
// whose title is a JSON payload marked "__iterion" with the contract
// version, answered with a JSON value; one-way messages are notify.

// contractVersion is the contract this iterion speaks.
const contractVersion = extension.Contract

// mark is the key every payload of ours carries.
const mark = "__iterion"

var extensionJS = extension.JS

// extensionConfig is the extension's configuration, in
// ITERION_PI_EXTENSION: the tools to register, with engine's texts.
type extensionConfig struct {
	Contract int             `json:"__iterion"`
	Tools    []extensionTool `json:"tools"`
	// Gate: every other tool call is asked about (the permission policy).
	Gate bool `json:"gate,omitempty"`
}

type extensionTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
}

// extensionEnv is the variable that configures the extension for task.
func (b *Backend) extensionEnv(task *engine.Task) string {
	cfg := extensionConfig{Contract: b.contract, Tools: []extensionTool{}, Gate: task.Permission.Gated()}
	for _, t := range asktools.For(task.Interaction) {
		cfg.Tools = append(cfg.Tools, extensionTool{Name: t.Name, Description: t.Description, Parameters: t.Schema})
	}
	data, _ := json.Marshal(cfg)
	return "ITERION_PI_EXTENSION=" + string(data)
}

// uiRequest is an extension_ui_request event.
type uiRequest struct {
	ID         string `json:"id"`
	Method     string `json:"method"`
	Title      string `json:"title"`
	Message    string `json:"message"`
	NotifyType string `json:"notifyType"`
}

// payload is a request or notification of the extension.
type payload struct {
	Contract   *int           `json:"__iterion"`
	Op         string         `json:"op"`
	Provider   string         `json:"provider"`
	Tool       string         `json:"tool"`
	ToolCallID string         `json:"toolCallId"`
	Input      map[string]any `json:"input"`
	Tools      []string       `json:"tools"`
	Configured string         `json:"configured"`
	Message    string         `json:"message"`
}

// reply is our answer to a request.
type reply struct {
	Contract  int               `json:"__iterion"`
	Text      string            `json:"text,omitempty"`
	IsError   bool              `json:"isError,omitempty"`
	Terminate bool              `json:"terminate,omitempty"`
	Block     bool              `json:"block,omitempty"`
	Keys      map[string]string `json:"keys,omitempty"`
}

// ours decodes text as one of our payloads: ok is false for anything
// unmarked (another extension's dialog or notification).
func ours(text string) (payload, bool) {
	var p payload
	if json.Unmarshal([]byte(text), &p) != nil || p.Contract == nil {
		return payload{}, false
	}
	return p, true
}

// errContract is the failure of a node whose extension speaks another
// contract: the bundle and the binary were not built together.
func errContract(detail string) error {
	return engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf(
		"iterion's pi extension did not start: %s; it registered no tool, so the node cannot run (the embedded extension and iterion must come from the same build: rebuild with make pi-extension)", detail))
}

// The texts of a pause. The model is not told "error": it is told the
// run waits for a person and resumes with the reply, so that it does not
// ask again in a loop (ADR-085).
const (
	pausedAskText   = "The run is now paused: your question is with the operator. This conversation resumes with their reply; do nothing more until then."
	pausedAwaitText = "The run is now paused until the operator answers the pending questions. This conversation resumes with their answers; do nothing more until then."
	notRunText      = "not run: the run paused for the operator's answer first; call it again if you still need it"
	resumeAskPrefix = "The operator answered your ask_user question: "
	pausedPermText  = "Held: the workflow's permission policy asks a person about this call, and the run is now paused. This conversation resumes with their decision; do nothing more until then."
	// resumeAllowedText is followed by the tool's name.
	resumeAllowedText = "The operator allowed the call you asked for; make it again now, exactly as before: "
	// flushText makes pi take the operator messages it queued as the
	// agent stopped (pi holds them until its next prompt).
	flushText = "Operator messages arrived as you finished; they follow."
)

// decide answers one tool call of the extension with engine's decision.
// A pause becomes need (the first one of a turn wins: the other calls of
// that turn are not run).
func decide(ctx context.Context, task *engine.Task, p payload, paused bool) (r reply, need *engine.NeedsInteractionError) {
	r.Contract = contractVersion
	fail := func(err error) (reply, *engine.NeedsInteractionError) {
		r.Text, r.IsError = err.Error(), true
		return r, nil
	}
	if paused {
		return fail(errors.New(notRunText))
	}
	var text string
	var err error
	switch p.Tool {
	case asktools.AskUser:
		var q engine.AsyncQuestion
		if q, err = asktools.Ask(p.Input); err == nil {
			err = &engine.NeedsInteractionError{Question: q.Question, Options: q.Options, PendingToolUseID: p.ToolCallID}
		}
	case asktools.AskUserAsync:
		text, err = asktools.Post(ctx, task, p.Input)
	case asktools.AwaitAnswers:
		var pending []engine.PendingQuestion
		if text, pending, err = asktools.Await(ctx, task); err == nil && len(pending) > 0 {
			err = &engine.NeedsInteractionError{AwaitPending: pending, PendingToolUseID: p.ToolCallID}
		}
	default:
		err = fmt.Errorf("unknown tool %q", p.Tool)
	}
	if errors.As(err, &need) {
		r.Text, r.Terminate = pausedAskText, true
		if len(need.AwaitPending) > 0 {
			r.Text = pausedAwaitText
		}
		return r, need
	}
	if err != nil {
		return fail(err)
	}
	r.Text = text
	return r, nil
}

// toolCall is a call the run paused to ask about, kept in the checkpoint:
// when the person allows it, that call (same tool, same input) passes
// the gate once.
type toolCall struct {
	Tool  string         `json:"tool"`
	Input map[string]any `json:"input"`
}

func (c *toolCall) is(tool string, input map[string]any) bool {
	if c == nil || c.Tool != tool {
		return false
	}
	a, _ := json.Marshal(c.Input)
	b, _ := json.Marshal(input)
	return string(a) == string(b)
}

// permit is the permission gate's verdict on a call of one of pi's tools
// (or another extension's): allowed, refused with the text the agent
// reads, or held, which pauses the run on a question (the first pause of
// a turn wins; calls after it are not run).
func permit(task *engine.Task, p payload, grant **toolCall, paused bool) (r reply, need *engine.NeedsInteractionError, held *toolCall) {
	r.Contract = contractVersion
	if (*grant).is(p.Tool, p.Input) {
		*grant = nil
		return r, nil, nil
	}
	v := task.Permission.Decide(permission.Call{Tool: p.Tool, Input: p.Input})
	switch {
	case v.Decision == permission.Refuse:
		r.Block, r.Text = true, permission.RefusedText(v.Reason(task.Permission.Mode))
	case v.Decision == permission.AskPerson && paused:
		r.Block, r.Text = true, notRunText
	case v.Decision == permission.AskPerson:
		r.Block, r.Text = true, pausedPermText
		need = &engine.NeedsInteractionError{Question: asktools.PermissionQuestion(p.Tool, p.Input, v.Reason(task.Permission.Mode)),
			Options: asktools.PermissionOptions(), PendingToolUseID: p.ToolCallID}
		held = &toolCall{Tool: p.Tool, Input: p.Input}
	}
	return r, need, held
}
