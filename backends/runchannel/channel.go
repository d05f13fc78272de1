package runchannel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/iterion-bot/iterion/backends/asktools"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/engine/permission"
)

// The channel's protocol: POST requests with a JSON body under
// channelPrefix, each carrying the session's token as a bearer token and
// the run and node it is for in X-Iterion-Run and X-Iterion-Node. Errors
// of the protocol (a wrong token, another run, a malformed body) are HTTP
// errors with {"error": "…"}; a tool's own failure is a Reply with
// is_error, which the model reads.
const (
	channelPrefix = "/channel/v1/"

	// pathTools answers the node's interaction tools: {"tools": [ToolDef]}.
	pathTools = "tools"
	// pathCall + a tool's name runs it: {"input": {…}} → Reply.
	pathCall = "call/"
	// pathPending answers the node's pending async questions: {"pending":
	// [{"interaction_id", "question"}]}.
	pathPending = "pending"
	// pathInbox drains the node's inbox: {"messages": ["…"]}.
	pathInbox = "inbox"
	// pathPermission decides a tool call: PermissionRequest →
	// PermissionDecision.
	pathPermission = "permission"

	headerRun  = "X-Iterion-Run"
	headerNode = "X-Iterion-Node"
)

// maxChannelBody bounds a request to the channel.
const maxChannelBody = 1 << 20

// Reply is a tool call's outcome: the text the model reads, and whether it
// reads it as the tool's error.
type Reply struct {
	Text    string `json:"text"`
	IsError bool   `json:"is_error,omitempty"`
}

// ToolDef is an interaction tool as the channel lists it.
type ToolDef struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"input_schema"`
}

// PermissionRequest asks whether a tool call may run.
type PermissionRequest struct {
	// Tool is the tool's name as the CLI calls it (bash, Write,
	// mcp__iterion__ask_user).
	Tool string `json:"tool"`
	// Input is the call's input, as the model wrote it.
	Input json.RawMessage `json:"input,omitempty"`
}

// maxToolName bounds PermissionRequest.Tool.
const maxToolName = 256

// PermissionDecision answers a PermissionRequest.
type PermissionDecision struct {
	Allow bool `json:"allow"`
	// Reason is what the model reads when the call is denied.
	Reason string `json:"reason,omitempty"`
}

type callRequest struct {
	Input map[string]any `json:"input"`
}

type pendingWire struct {
	InteractionID string `json:"interaction_id"`
	Question      string `json:"question"`
}

type toolsReply struct {
	Tools []ToolDef `json:"tools"`
}

type pendingReply struct {
	Pending []pendingWire `json:"pending"`
}

type inboxReply struct {
	Messages []string `json:"messages"`
}

type errorReply struct {
	Error string `json:"error"`
}

// serveChannel serves one call of the node's channel.
func (s *Session) serveChannel(w http.ResponseWriter, r *http.Request) {
	if !bearer(r, s.token) {
		channelError(w, http.StatusUnauthorized, "the run channel accepts only the token of its session ("+EnvToken+")")
		return
	}
	if run, node := r.Header.Get(headerRun), r.Header.Get(headerNode); run != s.task.RunID || node != s.task.NodeID {
		channelError(w, http.StatusForbidden, fmt.Sprintf("this channel serves run %s, node %s only: the call for run %q, node %q is refused",
			s.task.RunID, s.task.NodeID, clip(run, 80), clip(node, 80)))
		return
	}
	if r.Method != http.MethodPost {
		channelError(w, http.StatusMethodNotAllowed, "the run channel answers POST only")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxChannelBody))
	if err != nil {
		channelError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the call's body is over %d bytes", maxChannelBody))
		return
	}
	ctx := r.Context()
	path := strings.TrimPrefix(r.URL.Path, channelPrefix)
	switch {
	case path == pathTools:
		var defs []ToolDef
		for _, t := range asktools.For(s.task.Interaction) {
			defs = append(defs, ToolDef{Name: t.Name, Description: t.Description, InputSchema: t.Schema})
		}
		writeJSON(w, toolsReply{Tools: defs})
	case strings.HasPrefix(path, pathCall):
		name := strings.TrimPrefix(path, pathCall)
		if !s.offers(name) {
			channelError(w, http.StatusNotFound, fmt.Sprintf("tool %q is not one of this node's interaction tools (%s)", clip(name, 80), strings.Join(s.toolNames(), ", ")))
			return
		}
		var req callRequest
		if err := DecodeRequest(body, &req); err != nil {
			channelError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, s.call(ctx, name, req.Input))
	case path == pathPending:
		if s.task.PendingQuestions == nil {
			channelError(w, http.StatusConflict, "this node has no async questions: it is not interaction: async, or it runs in a fan-out branch")
			return
		}
		pending, err := s.task.PendingQuestions(ctx)
		if err != nil {
			s.failed(w, ctx, "listing the pending questions", err)
			return
		}
		out := pendingReply{Pending: []pendingWire{}}
		for _, p := range pending {
			out.Pending = append(out.Pending, pendingWire{InteractionID: p.InteractionID, Question: p.Question})
		}
		writeJSON(w, out)
	case path == pathInbox:
		out := inboxReply{Messages: []string{}}
		if s.task.InboxDrain != nil {
			msgs, err := s.task.InboxDrain(ctx)
			if err != nil {
				s.failed(w, ctx, "draining the inbox", err)
				return
			}
			out.Messages = append(out.Messages, msgs...)
		}
		writeJSON(w, out)
	case path == pathPermission:
		var req PermissionRequest
		if err := DecodeRequest(body, &req); err != nil {
			channelError(w, http.StatusBadRequest, err.Error())
			return
		}
		if req.Tool == "" || len(req.Tool) > maxToolName {
			channelError(w, http.StatusBadRequest, fmt.Sprintf("a permission request names its tool (at most %d bytes)", maxToolName))
			return
		}
		writeJSON(w, s.permission(ctx, req))
	default:
		channelError(w, http.StatusNotFound, fmt.Sprintf("the run channel has no call %q: its calls are tools, call/<tool>, pending, inbox and permission", clip(path, 80)))
	}
}

// offers reports whether name is one of the node's interaction tools.
func (s *Session) offers(name string) bool {
	for _, t := range asktools.For(s.task.Interaction) {
		if t.Name == name {
			return true
		}
	}
	return false
}

func (s *Session) toolNames() []string {
	names := []string{}
	for _, t := range asktools.For(s.task.Interaction) {
		names = append(names, t.Name)
	}
	if len(names) == 0 {
		names = append(names, "none: the node has interaction: none")
	}
	return names
}

// call runs an interaction tool as claw does, the backend's hooks doing
// what only a backend can: suspending the run.
func (s *Session) call(ctx context.Context, name string, input map[string]any) Reply {
	fail := func(err error) Reply { return Reply{Text: err.Error(), IsError: true} }
	switch name {
	case asktools.AskUser:
		q, err := asktools.Ask(input)
		if err != nil {
			return fail(err)
		}
		if s.opts.Ask == nil {
			return fail(errors.New("ask_user cannot be served on this node: its backend does not pause runs for a blocking question"))
		}
		text, err := s.opts.Ask(ctx, q)
		if err != nil {
			return fail(err)
		}
		return Reply{Text: text}
	case asktools.AskUserAsync:
		text, err := asktools.Post(ctx, s.task, input)
		if err != nil {
			return fail(err)
		}
		return Reply{Text: text}
	case asktools.AwaitAnswers:
		text, pending, err := asktools.Await(ctx, s.task)
		switch {
		case err != nil:
			return fail(err)
		case len(pending) == 0:
			return Reply{Text: text}
		case s.opts.AwaitPending == nil:
			ids := make([]string, len(pending))
			for i, p := range pending {
				ids[i] = p.InteractionID
			}
			return fail(fmt.Errorf("await_answers cannot wait on this node: questions %s are still pending; keep working and their answers arrive as operator messages", strings.Join(ids, ", ")))
		}
		text, err = s.opts.AwaitPending(ctx, pending)
		if err != nil {
			return fail(err)
		}
		return Reply{Text: text}
	}
	return fail(fmt.Errorf("unknown tool %q", name)) // offers() let it through: a tool without a case here
}

// permission decides req: the backend's hook, else the node's policy; a
// failing hook denies (fail closed).
func (s *Session) permission(ctx context.Context, req PermissionRequest) PermissionDecision {
	if s.opts.Permission == nil {
		return s.decide(req)
	}
	d, err := s.opts.Permission(ctx, req)
	if err != nil {
		s.log.Warn("permission check failed: the call is denied", "tool", req.Tool, "err", err)
		return PermissionDecision{Reason: fmt.Sprintf("%s is denied: the permission check failed (%v)", req.Tool, err)}
	}
	return d
}

// decide applies the node's permission: policy to req. A call the policy
// would hold for a person is refused: without the backend's hook nobody
// can be asked, and an unanswered call fails closed.
func (s *Session) decide(req PermissionRequest) PermissionDecision {
	pol := s.task.Permission
	if !pol.Gated() {
		return PermissionDecision{Allow: true}
	}
	var input map[string]any
	if len(req.Input) > 0 {
		if err := json.Unmarshal(req.Input, &input); err != nil {
			return PermissionDecision{Reason: fmt.Sprintf("%s is denied: its input is not a JSON object (%v)", req.Tool, err)}
		}
	}
	v := pol.Decide(permission.Call{Tool: req.Tool, Input: input})
	switch v.Decision {
	case permission.Refuse:
		return PermissionDecision{Reason: permission.RefusedText(v.Reason(pol.Mode))}
	case permission.AskPerson:
		return PermissionDecision{Reason: permission.RefusedText(v.Reason(pol.Mode) + ", which asks a person first, and this backend cannot ask one")}
	}
	return PermissionDecision{Allow: true}
}

// failed answers a call whose closure failed: 500, unless the session or
// the caller ended (nobody reads it then).
func (s *Session) failed(w http.ResponseWriter, ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		channelError(w, http.StatusServiceUnavailable, "the node's execution ended")
		return
	}
	s.log.Warn("run channel call failed", "call", what, "err", err)
	channelError(w, http.StatusInternalServerError, what+": "+err.Error())
}

// DecodeRequest decodes the JSON body of a channel call into v, a pointer
// to a request struct: one object, with no field v lacks and nothing after
// it. An empty body is an empty object.
func DecodeRequest(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the call's body is not the JSON object expected: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("the call's body holds more than one JSON value")
	}
	return nil
}

// bearer reports whether r carries token as its bearer token.
func bearer(r *http.Request, token string) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && equal(strings.TrimSpace(tok), token)
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		channelError(w, http.StatusInternalServerError, "encoding the answer: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func channelError(w http.ResponseWriter, status int, msg string) {
	body := marshal(errorReply{Error: msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// pendingOf converts the wire's pending questions.
func pendingOf(in []pendingWire) []engine.PendingQuestion {
	out := make([]engine.PendingQuestion, len(in))
	for i, p := range in {
		out[i] = engine.PendingQuestion{InteractionID: p.InteractionID, Question: p.Question}
	}
	return out
}
