package claw

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// openaiProvider speaks the OpenAI chat-completions API (and the
// OpenAI-compatible providers of the config) through the official SDK.
type openaiProvider struct {
	client openai.Client
	// hint is said with a 404: what to change in the base URL.
	hint string
}

// newOpenAI builds a client of the chat-completions API at baseURL ("" is
// OpenAI's own); setting names where baseURL was set, for the hint that a
// 404 gets when the URL lacks the /v1 under which such servers answer.
func newOpenAI(baseURL, setting, apiKey string, hc *http.Client) *openaiProvider {
	opts := []option.RequestOption{option.WithAPIKey(apiKey), option.WithMaxRetries(0)}
	if baseURL != "" {
		opts = append(opts, option.WithBaseURL(baseURL))
	}
	if hc != nil {
		opts = append(opts, option.WithHTTPClient(hc))
	}
	p := &openaiProvider{client: openai.NewClient(opts...)}
	if u := strings.TrimRight(baseURL, "/"); u != "" && !strings.HasSuffix(u, "/v1") {
		p.hint = fmt.Sprintf("%s is %s, without /v1: OpenAI-compatible servers answer under /v1, so try %s/v1", setting, u, u)
	}
	return p
}

// notFoundHint says what may be wrong with the base URL when the API
// answers 404.
func (p *openaiProvider) notFoundHint() string { return p.hint }

func (p *openaiProvider) turn(ctx context.Context, req turnRequest) (*turnResponse, error) {
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(req.Model)}
	if req.MaxTokens > 0 {
		params.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
	}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			a := openai.ChatCompletionAssistantMessageParam{}
			text := ""
			for _, b := range m.Blocks {
				switch b.Type {
				case "text":
					text += b.Text
				case "tool_use":
					args := string(b.Input)
					if args == "" {
						args = "{}"
					}
					a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
						OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
							ID:       b.ID,
							Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: args},
						},
					})
				}
			}
			if text != "" {
				a.Content.OfString = openai.String(text)
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
			continue
		}
		// A user turn: tool results become tool messages, text a user message.
		text := ""
		for _, b := range m.Blocks {
			switch b.Type {
			case "tool_result":
				params.Messages = append(params.Messages, openai.ToolMessage(b.Text, b.ID))
			case "text":
				if text != "" {
					text += "\n\n"
				}
				text += b.Text
			}
		}
		if text != "" {
			params.Messages = append(params.Messages, openai.UserMessage(text))
		}
	}
	for _, t := range req.Tools {
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: shared.FunctionParameters(t.Schema),
		}))
	}
	params.StreamOptions.IncludeUsage = openai.Bool(true)
	stream := p.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		return nil, classifyStreamErr(err)
	}
	resp := &acc.ChatCompletion
	res := &turnResponse{InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens}
	// OpenAI-compatible gateways (OpenRouter and others) report the cost
	// of the call as usage.cost.
	if f, ok := resp.Usage.JSON.ExtraFields["cost"]; ok {
		if c, err := strconv.ParseFloat(f.Raw(), 64); err == nil && c > 0 {
			res.CostUSD = c
		}
	}
	if len(resp.Choices) == 0 {
		return res, nil
	}
	choice := resp.Choices[0]
	res.StopReason = choice.FinishReason
	if choice.Message.Content != "" {
		res.Blocks = append(res.Blocks, textBlock(choice.Message.Content))
	}
	for _, tc := range choice.Message.ToolCalls {
		input := json.RawMessage(tc.Function.Arguments)
		if !json.Valid(input) {
			input = json.RawMessage("{}")
		}
		res.Blocks = append(res.Blocks, Block{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input})
	}
	return res, nil
}

// openaiStatus extracts the HTTP status of an OpenAI API error.
func openaiStatus(err error) (int, string, bool) {
	var oe *openai.Error
	if asError(err, &oe) {
		retryAfter := ""
		if oe.Response != nil {
			retryAfter = oe.Response.Header.Get("Retry-After")
		}
		return oe.StatusCode, retryAfter, true
	}
	return 0, "", false
}
