package fakellm

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// Recorded is one model request the server received, decoded for
// assertions. Probes (models, count_tokens, health) are not recorded.
type Recorded struct {
	// Seq is the request's 1-based arrival number since New or Reset.
	Seq int
	// Dialect is the API the request spoke.
	Dialect Dialect
	// Method, Path and RawQuery are from the request line; Claude Code
	// sends "?beta=true", which is ignored for routing.
	Method, Path, RawQuery string
	// Header is the request's headers.
	Header http.Header
	// Body is the decoded JSON body; nil when it was not a JSON object.
	// Shared with the server's copy: do not modify.
	Body map[string]any

	// Model is the body's model.
	Model string
	// Stream is whether the body asked for a stream.
	Stream bool
	// System is the system prompt: the Anthropic system field, or the
	// OpenAI system and developer messages, joined by newlines.
	System string
	// Messages are the conversation's messages, system messages excluded.
	Messages []Message
	// Tools are the names of the tools the request offers.
	Tools []string
	// ToolResults are all tool results in Messages, in order.
	ToolResults []ToolResult

	// Turn is the index in Script.Turns of the turn that answered,
	// FallbackTurn, or NoTurn when nothing answered (an invalid body or no
	// matching turn).
	Turn int
	// Status is the HTTP status of the response.
	Status int
}

// Special values of Recorded.Turn.
const (
	// FallbackTurn marks a request answered by Script.Fallback.
	FallbackTurn = -1
	// NoTurn marks a request that no turn answered.
	NoTurn = -2
)

// Message is one message of a recorded request, flattened.
type Message struct {
	// Role is the message's role as sent: "user", "assistant", and in the
	// OpenAI dialect "tool".
	Role string
	// Text is the message's text: string content, text blocks and the
	// content of tool results, joined by newlines.
	Text string
	// ToolCalls are the tool calls of an assistant message.
	ToolCalls []ToolCall
	// ToolResults are the tool results the message carries.
	ToolResults []ToolResult
}

// ToolResult is a tool result seen in a request.
type ToolResult struct {
	// ToolCallID is the id of the tool call it answers (tool_use_id or
	// tool_call_id).
	ToolCallID string
	// Name is the tool's name, found through the earlier tool call with
	// that id; empty when there is none.
	Name string
	// Content is the result's text.
	Content string
	// IsError is the Anthropic is_error flag.
	IsError bool
}

// LastUserTurn returns the messages after the last assistant message: what
// the client sent since the model's last reply (see Match).
func (r *Recorded) LastUserTurn() []Message {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "assistant" {
			return r.Messages[i+1:]
		}
	}
	return r.Messages
}

// decodeRequest fills the convenience fields of r from body.
func (r *Recorded) decodeRequest(body map[string]any) {
	r.Body = body
	r.Model, _ = body["model"].(string)
	r.Stream, _ = body["stream"].(bool)
	for _, t := range asSlice(body["tools"]) {
		tm, _ := t.(map[string]any)
		name, _ := tm["name"].(string)
		if fn, ok := tm["function"].(map[string]any); ok {
			name, _ = fn["name"].(string)
		}
		if name != "" {
			r.Tools = append(r.Tools, name)
		}
	}
	if r.Dialect == Anthropic {
		r.System = flattenContent(body["system"])
		for _, m := range asSlice(body["messages"]) {
			r.Messages = append(r.Messages, flattenAnthropic(m))
		}
	} else {
		var system []string
		for _, m := range asSlice(body["messages"]) {
			mm, _ := m.(map[string]any)
			switch role, _ := mm["role"].(string); role {
			case "system", "developer":
				system = append(system, flattenContent(mm["content"]))
			default:
				r.Messages = append(r.Messages, flattenOpenAI(mm))
			}
		}
		r.System = strings.Join(system, "\n")
	}
	names := map[string]string{}
	for i := range r.Messages {
		m := &r.Messages[i]
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Name
		}
		for j := range m.ToolResults {
			res := &m.ToolResults[j]
			res.Name = names[res.ToolCallID]
			r.ToolResults = append(r.ToolResults, *res)
		}
	}
}

// flattenAnthropic flattens {"role", "content": string | [blocks]}.
func flattenAnthropic(v any) Message {
	mm, _ := v.(map[string]any)
	m := Message{}
	m.Role, _ = mm["role"].(string)
	var texts []string
	if s, ok := mm["content"].(string); ok {
		texts = append(texts, s)
	}
	for _, b := range asSlice(mm["content"]) {
		bm, _ := b.(map[string]any)
		switch typ, _ := bm["type"].(string); typ {
		case "text":
			if s, ok := bm["text"].(string); ok {
				texts = append(texts, s)
			}
		case "tool_use":
			c := ToolCall{}
			c.ID, _ = bm["id"].(string)
			c.Name, _ = bm["name"].(string)
			c.Input, _ = bm["input"].(map[string]any)
			m.ToolCalls = append(m.ToolCalls, c)
		case "tool_result":
			res := ToolResult{Content: flattenContent(bm["content"])}
			res.ToolCallID, _ = bm["tool_use_id"].(string)
			res.IsError, _ = bm["is_error"].(bool)
			m.ToolResults = append(m.ToolResults, res)
			texts = append(texts, res.Content)
		}
	}
	m.Text = strings.Join(texts, "\n")
	return m
}

// flattenOpenAI flattens a chat-completions message.
func flattenOpenAI(mm map[string]any) Message {
	m := Message{Text: flattenContent(mm["content"])}
	m.Role, _ = mm["role"].(string)
	for _, tc := range asSlice(mm["tool_calls"]) {
		tcm, _ := tc.(map[string]any)
		fn, _ := tcm["function"].(map[string]any)
		c := ToolCall{}
		c.ID, _ = tcm["id"].(string)
		c.Name, _ = fn["name"].(string)
		if args, ok := fn["arguments"].(string); ok && args != "" {
			// Arguments that are not a JSON object leave Input nil; the
			// raw body still has them.
			_ = json.Unmarshal([]byte(args), &c.Input)
		}
		m.ToolCalls = append(m.ToolCalls, c)
	}
	if m.Role == "tool" {
		res := ToolResult{Content: m.Text}
		res.ToolCallID, _ = mm["tool_call_id"].(string)
		m.ToolResults = append(m.ToolResults, res)
	}
	return m
}

// flattenContent joins the text of a string, a block list or a single
// block; tool_result blocks nest their own content.
func flattenContent(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []any:
		var texts []string
		for _, b := range v {
			if s := flattenContent(b); s != "" {
				texts = append(texts, s)
			}
		}
		return strings.Join(texts, "\n")
	case map[string]any:
		if s, ok := v["text"].(string); ok {
			return s
		}
		if c, ok := v["content"]; ok {
			return flattenContent(c)
		}
	}
	return ""
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// matches reports whether m holds for r.
func (m *Match) matches(r *Recorded) bool {
	switch {
	case m.Dialect != "" && m.Dialect != r.Dialect,
		m.Model != "" && m.Model != r.Model,
		m.System != "" && !strings.Contains(r.System, m.System),
		m.Tool != "" && !slices.Contains(r.Tools, m.Tool):
		return false
	}
	if m.Contains != "" && !strings.Contains(r.System, m.Contains) && !anyText(r.Messages, m.Contains) {
		return false
	}
	last := r.LastUserTurn()
	if m.LastUserContains != "" && !anyText(last, m.LastUserContains) {
		return false
	}
	if m.HasToolResult != nil || m.ToolResultFor != "" {
		var results []ToolResult
		for _, msg := range last {
			results = append(results, msg.ToolResults...)
		}
		if m.HasToolResult != nil && *m.HasToolResult != (len(results) > 0) {
			return false
		}
		if m.ToolResultFor != "" && !resultFor(results, m.ToolResultFor) {
			return false
		}
	}
	return true
}

func anyText(msgs []Message, sub string) bool {
	for _, m := range msgs {
		if strings.Contains(m.Text, sub) {
			return true
		}
	}
	return false
}

func resultFor(results []ToolResult, name string) bool {
	for _, r := range results {
		if r.Name == name {
			return true
		}
	}
	return false
}
