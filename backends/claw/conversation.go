package claw

import (
	"encoding/json"
	"fmt"
)

// Conversation is a node's exchange with a model, independent of the API
// dialect. It is what a paused node stores and a resumed node continues.
type Conversation struct {
	System   string    `json:"system"`
	Messages []Message `json:"messages"`
	// PermissionAsked is the id of the tool call the run paused on to ask
	// a person whether it may run; the answer decides it on resume.
	PermissionAsked string `json:"permission_asked,omitempty"`
}

// Message is one turn: role "user" or "assistant".
type Message struct {
	Role   string  `json:"role"`
	Blocks []Block `json:"blocks"`
}

// Block is a piece of a message: text, a tool call (tool_use) or the
// result of one (tool_result).
type Block struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// ID is the tool call id, on tool_use and tool_result blocks.
	ID      string          `json:"id,omitempty"`
	Name    string          `json:"name,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
	IsError bool            `json:"is_error,omitempty"`
}

func textBlock(s string) Block { return Block{Type: "text", Text: s} }

func toolResult(id, content string, isErr bool) Block {
	return Block{Type: "tool_result", ID: id, Text: content, IsError: isErr}
}

// add appends blocks to the conversation, merging into the last message
// when it has the same role (the APIs want roles to alternate).
func (c *Conversation) add(role string, blocks ...Block) {
	if n := len(c.Messages); n > 0 && c.Messages[n-1].Role == role {
		c.Messages[n-1].Blocks = append(c.Messages[n-1].Blocks, blocks...)
		return
	}
	c.Messages = append(c.Messages, Message{Role: role, Blocks: blocks})
}

func (c *Conversation) encode() []byte {
	b, _ := json.Marshal(c) // plain data: cannot fail
	return b
}

func decodeConversation(b []byte) (*Conversation, error) {
	var c Conversation
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("restoring the saved conversation: %w", err)
	}
	return &c, nil
}

// ToolDef describes a tool offered to the model.
type ToolDef struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the tool's input (an object).
	Schema map[string]any
}

// turnRequest is one request to a model.
type turnRequest struct {
	Model     string
	System    string
	Messages  []Message
	Tools     []ToolDef
	MaxTokens int
}

// turnResponse is a model's reply.
type turnResponse struct {
	Blocks       []Block
	StopReason   string
	InputTokens  int64
	OutputTokens int64
	// CostUSD is the cost the provider reported, 0 when it reports none.
	CostUSD float64
}

// text joins the text blocks of a reply.
func (r *turnResponse) text() string {
	var s string
	for _, b := range r.Blocks {
		if b.Type == "text" {
			s += b.Text
		}
	}
	return s
}

// toolCalls returns the tool_use blocks of a reply.
func (r *turnResponse) toolCalls() []Block {
	var calls []Block
	for _, b := range r.Blocks {
		if b.Type == "tool_use" {
			calls = append(calls, b)
		}
	}
	return calls
}
