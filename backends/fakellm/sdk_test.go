package fakellm_test

// These tests check the wire format with the official SDKs as clients:
// what they accumulate from a stream must be the scripted reply.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"

	"github.com/iterion-bot/iterion/backends/fakellm"
)

// sdkTurn is a reply with text and a tool call whose input needs several
// input_json_delta pieces and holds non-ASCII text and markup.
var sdkTurn = fakellm.Turn{
	Text: "I'll look at the files first — ça va? <ok>",
	ToolCalls: []fakellm.ToolCall{{
		ID:    "toolu_01abc",
		Name:  "bash",
		Input: map[string]any{"command": "ls -la && echo \"done\"", "timeout": float64(30), "env": map[string]any{"A": "é"}},
	}},
	Usage: fakellm.Usage{InputTokens: 42, OutputTokens: 17},
}

// blockView is what the test compares of an accumulated content block.
type blockView struct {
	Type, Text, ID, Name string
	Input                map[string]any
}

func newAnthropicClient(url string, retries int) anthropic.Client {
	return anthropic.NewClient(
		anthropicoption.WithBaseURL(url),
		anthropicoption.WithAPIKey("fake-key"),
		anthropicoption.WithMaxRetries(retries),
	)
}

func anthropicParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-fake",
		MaxTokens: 1024,
		System:    []anthropic.TextBlockParam{{Text: "You are the planner."}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("List the files."))},
	}
}

func viewAnthropic(t *testing.T, msg *anthropic.Message) []blockView {
	t.Helper()
	var out []blockView
	for _, b := range msg.Content {
		v := blockView{Type: b.Type, Text: b.Text, ID: b.ID, Name: b.Name}
		if b.Type == "tool_use" {
			if err := json.Unmarshal(b.Input, &v.Input); err != nil {
				t.Fatalf("tool_use input %q: %v", b.Input, err)
			}
		}
		out = append(out, v)
	}
	return out
}

func TestAnthropicSDK(t *testing.T) {
	wantBlocks := []blockView{
		{Type: "text", Text: sdkTurn.Text},
		{Type: "tool_use", ID: "toolu_01abc", Name: "bash", Input: sdkTurn.ToolCalls[0].Input},
	}
	for _, stream := range []bool{true, false} {
		name := map[bool]string{true: "stream", false: "message"}[stream]
		t.Run(name, func(t *testing.T) {
			srv, url := newServer(t, &fakellm.Script{Turns: []fakellm.Turn{sdkTurn}}, fakellm.Options{ChunkSize: 5})
			client := newAnthropicClient(url, 0)
			var msg anthropic.Message
			if stream {
				s := client.Messages.NewStreaming(context.Background(), anthropicParams())
				var events []string
				for s.Next() {
					ev := s.Current()
					events = append(events, ev.Type)
					if err := msg.Accumulate(ev); err != nil {
						t.Fatalf("Accumulate(%s): %v", ev.Type, err)
					}
				}
				if err := s.Err(); err != nil {
					t.Fatalf("stream: %v", err)
				}
				if events[0] != "message_start" || events[len(events)-2] != "message_delta" || events[len(events)-1] != "message_stop" {
					t.Errorf("events = %v, want message_start … message_delta, message_stop", events)
				}
			} else {
				m, err := client.Messages.New(context.Background(), anthropicParams())
				if err != nil {
					t.Fatalf("Messages.New: %v", err)
				}
				msg = *m
			}
			if diff := cmp.Diff(wantBlocks, viewAnthropic(t, &msg)); diff != "" {
				t.Errorf("content (-want +got):\n%s", diff)
			}
			if msg.StopReason != anthropic.StopReasonToolUse || msg.Usage.InputTokens != 42 || msg.Usage.OutputTokens != 17 ||
				msg.Model != "claude-fake" || msg.ID != "msg_01fake000001" || msg.Role != "assistant" {
				t.Errorf("message: stop %q usage %d/%d model %q id %q role %q, want tool_use 42/17 claude-fake msg_01fake000001 assistant",
					msg.StopReason, msg.Usage.InputTokens, msg.Usage.OutputTokens, msg.Model, msg.ID, msg.Role)
			}
			// The SDK's request, as recorded.
			r := srv.Requests()[0]
			if r.Stream != stream || r.System != "You are the planner." || r.Messages[0].Text != "List the files." || !hasKey(r.Header) {
				t.Errorf("recorded stream %v system %q text %q headers %v", r.Stream, r.System, r.Messages[0].Text, r.Header)
			}
		})
	}
}

// hasKey reports whether the SDK sent its key, as x-api-key or (this SDK
// version) a bearer token.
func hasKey(h http.Header) bool {
	return h.Get("X-Api-Key") == "fake-key" || h.Get("Authorization") == "Bearer fake-key"
}

func TestAnthropicSDKErrors(t *testing.T) {
	tests := []struct {
		name         string
		script       *fakellm.Script
		retries      int
		wantStatus   int // 0: success
		wantRequests int
	}{{
		name: "429 then success is retried",
		script: &fakellm.Script{Turns: []fakellm.Turn{
			{Status: 429, Error: "slow down", Headers: map[string]string{"Retry-After": "1", "Retry-After-Ms": "5"}},
			{Text: "ok"},
		}},
		retries:      2,
		wantRequests: 2,
	}, {
		name:         "401 is not retried",
		script:       &fakellm.Script{Turns: []fakellm.Turn{{Status: 401, Error: "invalid x-api-key"}, {Text: "never"}}},
		retries:      2,
		wantStatus:   401,
		wantRequests: 1,
	}, {
		name:         "no turn is not retried",
		script:       &fakellm.Script{},
		retries:      2,
		wantStatus:   500,
		wantRequests: 1,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, url := newServer(t, tc.script, fakellm.Options{})
			client := newAnthropicClient(url, tc.retries)
			_, err := client.Messages.New(context.Background(), anthropicParams())
			var apiErr *anthropic.Error
			switch {
			case tc.wantStatus == 0 && err != nil:
				t.Errorf("Messages.New: %v, want success", err)
			case tc.wantStatus != 0 && !errors.As(err, &apiErr):
				t.Errorf("Messages.New: %v, want an *anthropic.Error", err)
			case tc.wantStatus != 0 && apiErr.StatusCode != tc.wantStatus:
				t.Errorf("status = %d, want %d", apiErr.StatusCode, tc.wantStatus)
			}
			if n := len(srv.Requests()); n != tc.wantRequests {
				t.Errorf("%d requests, want %d", n, tc.wantRequests)
			}
		})
	}
}

func newOpenAIClient(url string, retries int) openai.Client {
	return openai.NewClient(
		openaioption.WithBaseURL(url+"/v1"),
		openaioption.WithAPIKey("fake-key"),
		openaioption.WithMaxRetries(retries),
	)
}

func openAIParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-fake",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are the coder."), openai.UserMessage("List the files.")},
	}
}

func TestOpenAISDK(t *testing.T) {
	turn := sdkTurn
	turn.ToolCalls = append([]fakellm.ToolCall(nil), sdkTurn.ToolCalls...)
	turn.ToolCalls[0].ID = "call_abc"
	turn.ToolCalls = append(turn.ToolCalls, fakellm.ToolCall{Name: "read", Input: map[string]any{"path": "a.txt"}})
	type callView struct {
		ID, Name string
		Args     map[string]any
	}
	wantCalls := []callView{
		{ID: "call_abc", Name: "bash", Args: sdkTurn.ToolCalls[0].Input},
		{ID: "call_fake000002", Name: "read", Args: map[string]any{"path": "a.txt"}},
	}
	for _, stream := range []bool{true, false} {
		name := map[bool]string{true: "stream", false: "completion"}[stream]
		t.Run(name, func(t *testing.T) {
			srv, url := newServer(t, &fakellm.Script{Turns: []fakellm.Turn{turn}}, fakellm.Options{ChunkSize: 7})
			client := newOpenAIClient(url, 0)
			var cc openai.ChatCompletion
			var finished []string
			if stream {
				params := openAIParams()
				params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				s := client.Chat.Completions.NewStreaming(context.Background(), params)
				var acc openai.ChatCompletionAccumulator
				for s.Next() {
					if !acc.AddChunk(s.Current()) {
						t.Fatalf("AddChunk rejected %s", s.Current().RawJSON())
					}
					if c, ok := acc.JustFinishedContent(); ok {
						finished = append(finished, "content:"+c)
					}
					if tc, ok := acc.JustFinishedToolCall(); ok {
						finished = append(finished, "tool:"+tc.Name+":"+tc.Arguments)
					}
				}
				if err := s.Err(); err != nil {
					t.Fatalf("stream: %v", err)
				}
				cc = acc.ChatCompletion
			} else {
				c, err := client.Chat.Completions.New(context.Background(), openAIParams())
				if err != nil {
					t.Fatalf("Completions.New: %v", err)
				}
				cc = *c
			}
			if len(cc.Choices) != 1 {
				t.Fatalf("%d choices, want 1", len(cc.Choices))
			}
			msg := cc.Choices[0].Message
			var calls []callView
			for _, c := range msg.ToolCalls {
				v := callView{ID: c.ID, Name: c.Function.Name}
				if err := json.Unmarshal([]byte(c.Function.Arguments), &v.Args); err != nil {
					t.Fatalf("arguments %q: %v", c.Function.Arguments, err)
				}
				calls = append(calls, v)
			}
			if diff := cmp.Diff(wantCalls, calls); diff != "" {
				t.Errorf("tool calls (-want +got):\n%s", diff)
			}
			if msg.Content != turn.Text || cc.Choices[0].FinishReason != "tool_calls" || string(msg.Role) != "assistant" {
				t.Errorf("content %q finish %q role %q, want %q tool_calls assistant", msg.Content, cc.Choices[0].FinishReason, msg.Role, turn.Text)
			}
			if u := cc.Usage; u.PromptTokens != 42 || u.CompletionTokens != 17 || u.TotalTokens != 59 {
				t.Errorf("usage %d/%d/%d, want 42/17/59", u.PromptTokens, u.CompletionTokens, u.TotalTokens)
			}
			if cc.ID != "chatcmpl-fake000001" || cc.Model != "gpt-fake" {
				t.Errorf("id %q model %q", cc.ID, cc.Model)
			}
			if stream {
				want := []string{"content:" + turn.Text, "tool:bash:" + `{"command":"ls -la && echo \"done\"","env":{"A":"é"},"timeout":30}`, "tool:read:" + `{"path":"a.txt"}`}
				if diff := cmp.Diff(want, finished); diff != "" {
					t.Errorf("finished parts (-want +got):\n%s", diff)
				}
			}
			r := srv.Requests()[0]
			if r.Stream != stream || r.System != "You are the coder." || r.Messages[0].Text != "List the files." || r.Header.Get("Authorization") != "Bearer fake-key" {
				t.Errorf("recorded stream %v system %q text %q auth %q", r.Stream, r.System, r.Messages[0].Text, r.Header.Get("Authorization"))
			}
		})
	}
}

func TestOpenAISDKErrors(t *testing.T) {
	tests := []struct {
		name         string
		turns        []fakellm.Turn
		wantStatus   int
		wantRequests int
	}{
		{"429 then success is retried", []fakellm.Turn{{Status: 429, Headers: map[string]string{"Retry-After-Ms": "5"}}, {Text: "ok"}}, 0, 2},
		{"401 is not retried", []fakellm.Turn{{Status: 401, Error: "Incorrect API key provided"}}, http.StatusUnauthorized, 1},
		{"no turn is not retried", nil, http.StatusInternalServerError, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, url := newServer(t, &fakellm.Script{Turns: tc.turns}, fakellm.Options{})
			client := newOpenAIClient(url, 2)
			c, err := client.Chat.Completions.New(context.Background(), openAIParams())
			var apiErr *openai.Error
			switch {
			case tc.wantStatus == 0 && (err != nil || c.Choices[0].Message.Content != "ok"):
				t.Errorf("Completions.New: %v, want ok", err)
			case tc.wantStatus != 0 && !errors.As(err, &apiErr):
				t.Errorf("Completions.New: %v, want an *openai.Error", err)
			case tc.wantStatus != 0 && apiErr.StatusCode != tc.wantStatus:
				t.Errorf("status = %d, want %d", apiErr.StatusCode, tc.wantStatus)
			}
			if n := len(srv.Requests()); n != tc.wantRequests {
				t.Errorf("%d requests, want %d", n, tc.wantRequests)
			}
		})
	}
}

func TestSDKMalformedStream(t *testing.T) {
	_, url := newServer(t, &fakellm.Script{Turns: []fakellm.Turn{
		{RawSSE: "event: message_start\ndata: {\"type\":\n\n"},
		{RawSSE: "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\n\n"},
	}}, fakellm.Options{})

	client := newAnthropicClient(url, 0)
	s := client.Messages.NewStreaming(context.Background(), anthropicParams())
	for s.Next() {
	}
	if s.Err() == nil {
		t.Error("anthropic stream: no error for a malformed event")
	}

	oc := newOpenAIClient(url, 0)
	os := oc.Chat.Completions.NewStreaming(context.Background(), openAIParams())
	for os.Next() {
	}
	if os.Err() == nil {
		t.Error("openai stream: no error for a malformed chunk")
	}
}
