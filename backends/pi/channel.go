package pi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/iterion-bot/iterion/backends/pi/extension"
	"github.com/iterion-bot/iterion/engine"
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
}

type extensionTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
}

// extensionEnv is the variable that configures the extension for task.
func (b *Backend) extensionEnv(task *engine.Task) string {
	cfg := extensionConfig{Contract: b.contract, Tools: []extensionTool{}}
	for _, t := range engine.AskTools(task.Interaction) {
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
	case engine.ToolAskUser:
		err = engine.AskUser(p.Input, p.ToolCallID)
	case engine.ToolAskUserAsync:
		text, err = engine.PostAsyncQuestion(ctx, task, p.Input)
	case engine.ToolAwaitAnswers:
		text, err = engine.AwaitAnswers(ctx, task, p.ToolCallID)
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
