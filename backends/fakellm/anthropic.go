package fakellm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// The Anthropic Messages API wire types, in the field order the real API
// sends.

type anthropicMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

// anthropicBlock is a text block (Text set, possibly to "") or a tool_use
// block (ID, Name, Input set).
type anthropicBlock struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

type anthropicError struct {
	Type  string               `json:"type"`
	Error anthropicErrorDetail `json:"error"`
}

type anthropicErrorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// anthropicErrorType is the error type the API uses with an HTTP status.
func anthropicErrorType(status int) string {
	switch status {
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 504:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// anthropicStopReason maps the OpenAI finish reasons back; other values
// pass through.
func anthropicStopReason(s string) string {
	switch s {
	case "stop":
		return "end_turn"
	case "tool_calls":
		return "tool_use"
	case "length":
		return "max_tokens"
	}
	return s
}

func textBlock(s string) anthropicBlock { return anthropicBlock{Type: "text", Text: &s} }

// anthropicResponse is the non-streaming reply: text first, then the tool
// calls.
func anthropicResponse(rp *reply) anthropicMessage {
	stop := anthropicStopReason(rp.stop)
	m := anthropicMessage{
		ID: rp.msgID, Type: "message", Role: "assistant", Model: rp.model,
		Content:    []anthropicBlock{},
		StopReason: &stop,
		Usage:      anthropicUsage{InputTokens: rp.usage.InputTokens, OutputTokens: rp.usage.OutputTokens},
	}
	if rp.turn.Text != "" {
		m.Content = append(m.Content, textBlock(rp.turn.Text))
	}
	for i, c := range rp.calls {
		m.Content = append(m.Content, anthropicBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: json.RawMessage(rp.inputs[i])})
	}
	return m
}

// The stream's events.
type (
	messageStartEvent struct {
		Type    string           `json:"type"`
		Message anthropicMessage `json:"message"`
	}
	blockStartEvent struct {
		Type         string         `json:"type"`
		Index        int            `json:"index"`
		ContentBlock anthropicBlock `json:"content_block"`
	}
	blockDeltaEvent struct {
		Type  string     `json:"type"`
		Index int        `json:"index"`
		Delta blockDelta `json:"delta"`
	}
	// blockDelta is a text_delta (Text) or an input_json_delta
	// (PartialJSON).
	blockDelta struct {
		Type        string  `json:"type"`
		Text        *string `json:"text,omitempty"`
		PartialJSON *string `json:"partial_json,omitempty"`
	}
	blockStopEvent struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	messageDeltaEvent struct {
		Type  string         `json:"type"`
		Delta messageDelta   `json:"delta"`
		Usage anthropicUsage `json:"usage"`
	}
	messageDelta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}
	messageStopEvent struct {
		Type string `json:"type"`
	}
)

// streamAnthropic writes the reply as the API's event stream:
//
//	message_start (usage with the input tokens)
//	per block: content_block_start, content_block_delta (text_delta or
//	           input_json_delta pieces), content_block_stop
//	message_delta (stop_reason and the final usage)
//	message_stop
//
// Every event has an "event:" line (pi drops events without one) and
// message_delta always carries usage (pi fails without it).
func (s *Server) streamAnthropic(w http.ResponseWriter, rp *reply) {
	sse := newSSE(w)
	start := anthropicResponse(rp)
	start.Content = []anthropicBlock{}
	start.StopReason = nil
	start.Usage.OutputTokens = min(1, rp.usage.OutputTokens)
	sse.event("message_start", messageStartEvent{Type: "message_start", Message: start})

	index := 0
	block := func(b anthropicBlock, deltas []blockDelta) {
		sse.event("content_block_start", blockStartEvent{Type: "content_block_start", Index: index, ContentBlock: b})
		for _, d := range deltas {
			sse.event("content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: index, Delta: d})
		}
		sse.event("content_block_stop", blockStopEvent{Type: "content_block_stop", Index: index})
		index++
	}
	if rp.turn.Text != "" {
		var deltas []blockDelta
		for _, piece := range chunks(rp.turn.Text, s.chunk) {
			deltas = append(deltas, blockDelta{Type: "text_delta", Text: &piece})
		}
		block(textBlock(""), deltas)
	}
	for i, c := range rp.calls {
		var deltas []blockDelta
		for _, piece := range chunks(rp.inputs[i], s.chunk) {
			deltas = append(deltas, blockDelta{Type: "input_json_delta", PartialJSON: &piece})
		}
		block(anthropicBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: json.RawMessage("{}")}, deltas)
	}

	sse.event("message_delta", messageDeltaEvent{
		Type:  "message_delta",
		Delta: messageDelta{StopReason: anthropicStopReason(rp.stop)},
		Usage: anthropicUsage{InputTokens: rp.usage.InputTokens, OutputTokens: rp.usage.OutputTokens},
	})
	sse.event("message_stop", messageStopEvent{Type: "message_stop"})
}

// sse writes server-sent events, flushing each so clients see the stream
// as it goes. After a write error (the client left) it writes nothing
// more.
type sse struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w)}
}

// event writes "event: name" (omitted when name is empty) and the JSON data
// line.
func (e *sse) event(name string, v any) {
	e.raw(name, string(marshal(v)))
}

func (e *sse) raw(name, data string) {
	if e.err != nil {
		return
	}
	if name != "" {
		_, e.err = fmt.Fprintf(e.w, "event: %s\n", name)
	}
	if e.err == nil {
		_, e.err = io.WriteString(e.w, "data: "+data+"\n\n")
	}
	if e.err == nil {
		// A writer that cannot flush still delivers at the end.
		_ = e.rc.Flush()
	}
}
