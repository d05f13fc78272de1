package fakellm

import (
	"encoding/json"
	"net/http"
)

// The OpenAI chat-completions wire types, in the field order the real API
// sends.

type openAICompletion struct {
	ID                string         `json:"id"`
	Object            string         `json:"object"`
	Created           int64          `json:"created"`
	Model             string         `json:"model"`
	SystemFingerprint string         `json:"system_fingerprint"`
	Choices           []openAIChoice `json:"choices"`
	// Usage is an *openAIUsage, json null (a stream chunk when usage was
	// asked for), or nil to leave it out.
	Usage any `json:"usage,omitempty"`
}

// openAIChoice has Message in a completion and Delta in a chunk.
type openAIChoice struct {
	Index        int            `json:"index"`
	Message      *openAIMessage `json:"message,omitempty"`
	Delta        *openAIDelta   `json:"delta,omitempty"`
	Logprobs     *struct{}      `json:"logprobs"`
	FinishReason *string        `json:"finish_reason"`
}

type openAIMessage struct {
	Role      string           `json:"role"`
	Content   *string          `json:"content"`
	Refusal   *string          `json:"refusal"`
	ToolCalls []openAIToolCall `json:"tool_calls,omitempty"`
}

// openAIDelta leaves out what a chunk does not change. Content is a string,
// json null, or nil to leave it out.
type openAIDelta struct {
	Role      string           `json:"role,omitempty"`
	Content   any              `json:"content,omitempty"`
	ToolCalls []openAIToolCall `json:"tool_calls,omitempty"`
}

// openAIToolCall is a whole call in a completion; in a chunk the first
// piece of a call has Index, ID, Type and the name, later pieces Index and
// an arguments piece.
type openAIToolCall struct {
	Index    *int           `json:"index,omitempty"`
	ID       string         `json:"id,omitempty"`
	Type     string         `json:"type,omitempty"`
	Function openAIFunction `json:"function"`
}

type openAIFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type openAIUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type openAIError struct {
	Error openAIErrorDetail `json:"error"`
}

type openAIErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// openAIErrorType is the error type and code the API uses with an HTTP
// status.
func openAIErrorType(status int) (typ string, code *string) {
	str := func(s string) *string { return &s }
	switch {
	case status == 401:
		return "invalid_request_error", str("invalid_api_key")
	case status == 429:
		return "requests", str("rate_limit_exceeded")
	case status >= 500:
		return "server_error", nil
	}
	return "invalid_request_error", nil
}

// openAIFinishReason maps the Anthropic stop reasons; other values pass
// through.
func openAIFinishReason(s string) string {
	switch s {
	case "end_turn", "stop_sequence":
		return "stop"
	case "tool_use":
		return "tool_calls"
	case "max_tokens":
		return "length"
	}
	return s
}

var jsonNull = json.RawMessage("null")

func (rp *reply) openAIUsage() *openAIUsage {
	return &openAIUsage{
		PromptTokens:     rp.usage.InputTokens,
		CompletionTokens: rp.usage.OutputTokens,
		TotalTokens:      rp.usage.InputTokens + rp.usage.OutputTokens,
	}
}

// openAIResponse is the non-streaming reply. Content is null when the
// turn has tool calls and no text, as from the real API.
func openAIResponse(rp *reply) openAICompletion {
	msg := &openAIMessage{Role: "assistant"}
	if t := rp.turn.Text; t != "" || len(rp.calls) == 0 {
		msg.Content = &t
	}
	for i, c := range rp.calls {
		msg.ToolCalls = append(msg.ToolCalls, openAIToolCall{ID: c.ID, Type: "function", Function: openAIFunction{Name: c.Name, Arguments: rp.inputs[i]}})
	}
	finish := openAIFinishReason(rp.stop)
	return openAICompletion{
		ID: rp.msgID, Object: "chat.completion", Created: rp.created, Model: rp.model,
		SystemFingerprint: "fp_fakellm",
		Choices:           []openAIChoice{{Index: 0, Message: msg, FinishReason: &finish}},
		Usage:             rp.openAIUsage(),
	}
}

// streamOpenAI writes the reply as "data: {chunk}" events:
//
//	{"role":"assistant","content":""}   when there is text, then content pieces
//	per tool call: a piece with index, id, type and name (and, when there
//	               is no text, role and content null), then arguments pieces
//	{} with finish_reason
//	{"choices":[], "usage":{…}}          only with stream_options.include_usage
//	[DONE]
//
// With include_usage every other chunk has "usage": null, as from the
// real API.
func (s *Server) streamOpenAI(w http.ResponseWriter, rp *reply, withUsage bool) {
	sse := newSSE(w)
	chunk := func(delta openAIDelta, finish *string) {
		c := openAICompletion{
			ID: rp.msgID, Object: "chat.completion.chunk", Created: rp.created, Model: rp.model,
			SystemFingerprint: "fp_fakellm",
			Choices:           []openAIChoice{{Index: 0, Delta: &delta, FinishReason: finish}},
		}
		if withUsage {
			c.Usage = jsonNull
		}
		sse.event("", c)
	}
	text := rp.turn.Text
	if text != "" || len(rp.calls) == 0 {
		chunk(openAIDelta{Role: "assistant", Content: ""}, nil)
		for _, piece := range chunks(text, s.chunk) {
			chunk(openAIDelta{Content: piece}, nil)
		}
	}
	for i, c := range rp.calls {
		first := openAIDelta{ToolCalls: []openAIToolCall{{Index: &i, ID: c.ID, Type: "function", Function: openAIFunction{Name: c.Name}}}}
		if i == 0 && text == "" {
			first.Role, first.Content = "assistant", jsonNull
		}
		chunk(first, nil)
		for _, piece := range chunks(rp.inputs[i], s.chunk) {
			chunk(openAIDelta{ToolCalls: []openAIToolCall{{Index: &i, Function: openAIFunction{Arguments: piece}}}}, nil)
		}
	}
	finish := openAIFinishReason(rp.stop)
	chunk(openAIDelta{}, &finish)
	if withUsage {
		sse.event("", openAICompletion{
			ID: rp.msgID, Object: "chat.completion.chunk", Created: rp.created, Model: rp.model,
			SystemFingerprint: "fp_fakellm",
			Choices:           []openAIChoice{},
			Usage:             rp.openAIUsage(),
		})
	}
	sse.raw("", "[DONE]")
}
