package claw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// provider sends one turn to a model API.
type provider interface {
	turn(ctx context.Context, req turnRequest) (*turnResponse, error)
	// notFoundHint is what to check in the provider's settings when the
	// API answers 404, or "".
	notFoundHint() string
}

// anthropicProvider speaks the Anthropic Messages API through the official
// SDK. The SDK's own retries are off: the loop retries with its own policy
// and clock.
type anthropicProvider struct {
	client anthropic.Client
	hint   string // said with a 404
}

// newAnthropic builds a client of the Messages API at baseURL ("" is
// Anthropic's own). The SDK adds /v1 itself: a base URL ending in /v1
// gets a hint with the 404 it causes.
func newAnthropic(baseURL, apiKey string, hc *http.Client) *anthropicProvider {
	opts := []option.RequestOption{option.WithAPIKey(apiKey), option.WithMaxRetries(0)}
	if baseURL != "" {
		opts = append(opts, option.WithBaseURL(baseURL))
	}
	if hc != nil {
		opts = append(opts, option.WithHTTPClient(hc))
	}
	p := &anthropicProvider{client: anthropic.NewClient(opts...)}
	if u := strings.TrimRight(baseURL, "/"); strings.HasSuffix(u, "/v1") {
		p.hint = fmt.Sprintf("ANTHROPIC_BASE_URL is %s: the client adds /v1 itself, so try %s", u, strings.TrimSuffix(u, "/v1"))
	}
	return p
}

func (p *anthropicProvider) notFoundHint() string { return p.hint }

func (p *anthropicProvider) turn(ctx context.Context, req turnRequest) (*turnResponse, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: int64(req.MaxTokens),
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, m := range req.Messages {
		var blocks []anthropic.ContentBlockParamUnion
		for _, b := range m.Blocks {
			switch b.Type {
			case "text":
				blocks = append(blocks, anthropic.NewTextBlock(b.Text))
			case "tool_use":
				var input any = map[string]any{}
				if len(b.Input) > 0 {
					input = json.RawMessage(b.Input)
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(b.ID, input, b.Name))
			case "tool_result":
				blocks = append(blocks, anthropic.NewToolResultBlock(b.ID, b.Text, b.IsError))
			}
		}
		if m.Role == "assistant" {
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
		} else {
			params.Messages = append(params.Messages, anthropic.NewUserMessage(blocks...))
		}
	}
	for _, t := range req.Tools {
		schema := anthropic.ToolInputSchemaParam{Properties: t.Schema["properties"]}
		if req, ok := t.Schema["required"].([]string); ok {
			schema.Required = req
		}
		tool := &anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		tool.Description = anthropic.String(t.Description)
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: tool})
	}
	// The reply is streamed, so a cancelled run stops the request at once,
	// and accumulated into the whole message.
	stream := p.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			return nil, &malformedError{err}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, classifyStreamErr(err)
	}
	res := &turnResponse{StopReason: string(msg.StopReason), InputTokens: msg.Usage.InputTokens, OutputTokens: msg.Usage.OutputTokens}
	for _, c := range msg.Content {
		switch c.Type {
		case "text":
			res.Blocks = append(res.Blocks, textBlock(c.Text))
		case "tool_use":
			res.Blocks = append(res.Blocks, Block{Type: "tool_use", ID: c.ID, Name: c.Name, Input: append(json.RawMessage(nil), c.Input...)})
		}
	}
	return res, nil
}

// malformedError is a reply stream that could not be read as the API's
// events: retrying would not help.
type malformedError struct{ err error }

func (e *malformedError) Error() string {
	return "the model's response stream is malformed: " + e.err.Error()
}
func (e *malformedError) Unwrap() error { return e.err }

// classifyStreamErr marks decoding failures of a stream as malformed;
// status and network errors pass through.
func classifyStreamErr(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) {
		return &malformedError{err}
	}
	return err
}

// httpStatus extracts the HTTP status and Retry-After header of an API
// error, for the retry policy.
func httpStatus(err error) (status int, retryAfter string, ok bool) {
	var ae *anthropic.Error
	if asError(err, &ae) {
		if ae.Response != nil {
			retryAfter = ae.Response.Header.Get("Retry-After")
		}
		return ae.StatusCode, retryAfter, true
	}
	return openaiStatus(err)
}
