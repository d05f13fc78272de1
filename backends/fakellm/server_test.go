package fakellm_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/iterion-bot/iterion/backends/fakellm"
)

func fixedNow() time.Time { return time.Unix(1700000000, 0) }

// newServer serves script over real HTTP on 127.0.0.1 and returns the
// server and its base URL.
func newServer(tb testing.TB, script *fakellm.Script, opts fakellm.Options) (*fakellm.Server, string) {
	tb.Helper()
	if opts.Now == nil {
		opts.Now = fixedNow
	}
	srv := fakellm.New(script, opts)
	ts := httptest.NewServer(srv.Handler())
	tb.Cleanup(ts.Close)
	return srv, ts.URL
}

type response struct {
	status int
	header http.Header
	body   string
}

func do(tb testing.TB, method, url, body string) response {
	tb.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(data)}
}

func post(tb testing.TB, url, body string) response {
	tb.Helper()
	return do(tb, http.MethodPost, url, body)
}

// Requests in the shape Claude Code and pi send them.
const (
	// anthropicToolResult is a Claude Code request after a Bash call: a
	// system array, reminders before the prompt and inside the tool
	// result.
	anthropicToolResult = `{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,
 "system":[{"type":"text","text":"x-anthropic-billing-header: abc"},{"type":"text","text":"You are the planner."}],
 "tools":[{"name":"Bash","input_schema":{"type":"object"}}],
 "messages":[
  {"role":"user","content":[{"type":"text","text":"<system-reminder>r</system-reminder>"},{"type":"text","text":"Plan it."}]},
  {"role":"assistant","content":[{"type":"text","text":"Running."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},
  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"a.txt"},{"type":"text","text":"<system-reminder>left</system-reminder>"}],"is_error":false}]}
 ]}`
	// openAIToolResult is a pi request after a bash call.
	openAIToolResult = `{"model":"fake-gpt","stream":true,"stream_options":{"include_usage":true},
 "tools":[{"type":"function","function":{"name":"bash","parameters":{}}}],
 "messages":[
  {"role":"system","content":"You are the coder."},
  {"role":"user","content":[{"type":"text","text":"Fix it."}]},
  {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"make\"}"}}]},
  {"role":"tool","tool_call_id":"call_1","content":"ok"}
 ]}`
	anthropicAnswer = `{"model":"claude-sonnet-4-5","max_tokens":100,"system":"You are the writer.",
 "messages":[{"role":"user","content":"Write it."},{"role":"assistant","content":"Which licence?"},
  {"role":"user","content":"[Answer to question r-1_a_1] Q: \"Which licence?\" — A: MIT"}]}`
	openAIHello = `{"model":"fake-gpt","messages":[{"role":"user","content":"hello"}]}`
)

func TestAnthropicWire(t *testing.T) {
	turn := fakellm.Turn{
		Text:      "Hello, wörld! <ok>",
		ToolCalls: []fakellm.ToolCall{{Name: "bash", Input: map[string]any{"command": "echo hi", "n": 2}}},
		Usage:     fakellm.Usage{InputTokens: 25, OutputTokens: 12},
		Repeat:    true,
	}
	textOnly := fakellm.Turn{Match: fakellm.Match{Model: "text"}, Text: "DONE", StopReason: "max_tokens", Usage: fakellm.Usage{InputTokens: 5, OutputTokens: 1}}
	tests := []struct {
		name  string
		model string
		body  string
		want  string
	}{{
		name:  "stream with text and a tool call",
		model: "m",
		body:  `"stream":true`,
		want: `event: message_start
data: {"type":"message_start","message":{"id":"msg_01fake000001","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, wö"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"rld! <ok>"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01fake000002","name":"bash","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":":\"echo hi\""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":",\"n\":2}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":12}}

event: message_stop
data: {"type":"message_stop"}

`,
	}, {
		name:  "stream with text only",
		model: "text",
		body:  `"stream":true`,
		want: `event: message_start
data: {"type":"message_start","message":{"id":"msg_01fake000001","type":"message","role":"assistant","model":"text","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"DONE"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"input_tokens":5,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}

event: message_stop
data: {"type":"message_stop"}

`,
	}, {
		name:  "message with text and a tool call",
		model: "m",
		body:  `"stream":false`,
		want:  `{"id":"msg_01fake000001","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Hello, wörld! <ok>"},{"type":"tool_use","id":"toolu_01fake000002","name":"bash","input":{"command":"echo hi","n":2}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":12}}` + "\n",
	}, {
		name:  "message with text only",
		model: "text",
		body:  `"max_tokens":1`,
		want:  `{"id":"msg_01fake000001","type":"message","role":"assistant","model":"text","content":[{"type":"text","text":"DONE"}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":5,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}` + "\n",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, url := newServer(t, &fakellm.Script{Turns: []fakellm.Turn{textOnly, turn}}, fakellm.Options{ChunkSize: 10})
			got := post(t, url+"/v1/messages?beta=true", `{"model":"`+tc.model+`",`+tc.body+`,"messages":[{"role":"user","content":"hi"}]}`)
			if got.status != http.StatusOK {
				t.Fatalf("status = %d, want 200; body %s", got.status, got.body)
			}
			wantType := "application/json"
			if strings.HasPrefix(tc.want, "event:") {
				wantType = "text/event-stream"
			}
			if ct := got.header.Get("Content-Type"); ct != wantType {
				t.Errorf("Content-Type = %q, want %q", ct, wantType)
			}
			if diff := cmp.Diff(tc.want, got.body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpenAIWire(t *testing.T) {
	turn := fakellm.Turn{
		Text:      "Hi <b>",
		ToolCalls: []fakellm.ToolCall{{Name: "bash", Input: map[string]any{"command": "make"}}, {ID: "call_x", Name: "read"}},
		Usage:     fakellm.Usage{InputTokens: 25, OutputTokens: 12},
		Repeat:    true,
	}
	toolOnly := fakellm.Turn{Match: fakellm.Match{Model: "tool"}, ToolCalls: []fakellm.ToolCall{{Name: "bash"}}, Usage: fakellm.Usage{InputTokens: 5, OutputTokens: 2}}
	const chunk = `data: {"id":"chatcmpl-fake000001","object":"chat.completion.chunk","created":1700000000,"model":"m","system_fingerprint":"fp_fakellm","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]%s}` + "\n\n"
	chunks := func(usage string, deltas ...string) string {
		var b strings.Builder
		for i, d := range deltas {
			finish := "null"
			if i == len(deltas)-1 {
				finish = `"tool_calls"`
			}
			fmt.Fprintf(&b, chunk, d, finish, usage)
		}
		return b.String()
	}
	deltas := []string{
		`{"role":"assistant","content":""}`,
		`{"content":"Hi <b>"}`,
		`{"tool_calls":[{"index":0,"id":"call_fake000002","type":"function","function":{"name":"bash","arguments":""}}]}`,
		`{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\":\""}}]}`,
		`{"tool_calls":[{"index":0,"function":{"arguments":"make\"}"}}]}`,
		`{"tool_calls":[{"index":1,"id":"call_x","type":"function","function":{"name":"read","arguments":""}}]}`,
		`{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}`,
		`{}`,
	}
	tests := []struct {
		name  string
		model string
		body  string
		want  string
	}{{
		name:  "stream",
		model: "m",
		body:  `"stream":true`,
		want:  chunks("", deltas...) + "data: [DONE]\n\n",
	}, {
		name:  "stream with usage",
		model: "m",
		body:  `"stream":true,"stream_options":{"include_usage":true}`,
		want: chunks(`,"usage":null`, deltas...) +
			`data: {"id":"chatcmpl-fake000001","object":"chat.completion.chunk","created":1700000000,"model":"m","system_fingerprint":"fp_fakellm","choices":[],"usage":{"prompt_tokens":25,"completion_tokens":12,"total_tokens":37}}` + "\n\n" +
			"data: [DONE]\n\n",
	}, {
		name:  "stream with a tool call only",
		model: "tool",
		body:  `"stream":true`,
		want: strings.ReplaceAll(chunks("",
			`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_fake000002","type":"function","function":{"name":"bash","arguments":""}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`,
			`{}`,
		), `"model":"m"`, `"model":"tool"`) + "data: [DONE]\n\n",
	}, {
		name:  "completion",
		model: "m",
		body:  `"stream":false`,
		want:  `{"id":"chatcmpl-fake000001","object":"chat.completion","created":1700000000,"model":"m","system_fingerprint":"fp_fakellm","choices":[{"index":0,"message":{"role":"assistant","content":"Hi <b>","refusal":null,"tool_calls":[{"id":"call_fake000002","type":"function","function":{"name":"bash","arguments":"{\"command\":\"make\"}"}},{"id":"call_x","type":"function","function":{"name":"read","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":25,"completion_tokens":12,"total_tokens":37}}` + "\n",
	}, {
		name:  "completion with a tool call only",
		model: "tool",
		body:  `"n":1`,
		want:  `{"id":"chatcmpl-fake000001","object":"chat.completion","created":1700000000,"model":"tool","system_fingerprint":"fp_fakellm","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_fake000002","type":"function","function":{"name":"bash","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}` + "\n",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, url := newServer(t, &fakellm.Script{Turns: []fakellm.Turn{toolOnly, turn}}, fakellm.Options{ChunkSize: 12})
			got := post(t, url+"/v1/chat/completions", `{"model":"`+tc.model+`",`+tc.body+`,"messages":[{"role":"user","content":"hi"}]}`)
			if got.status != http.StatusOK {
				t.Fatalf("status = %d, want 200; body %s", got.status, got.body)
			}
			if diff := cmp.Diff(tc.want, got.body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpenAITextStream(t *testing.T) {
	_, url := newServer(t, &fakellm.Script{Turns: []fakellm.Turn{{Text: "DONE", Usage: fakellm.Usage{InputTokens: 3, OutputTokens: 1}}}}, fakellm.Options{})
	got := post(t, url+"/v1/chat/completions", `{"model":"g","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	const head = `data: {"id":"chatcmpl-fake000001","object":"chat.completion.chunk","created":1700000000,"model":"g","system_fingerprint":"fp_fakellm","choices":[{"index":0,"delta":`
	want := head + `{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		head + `{"content":"DONE"},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		head + `{},"logprobs":null,"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	if diff := cmp.Diff(want, got.body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func ptr[T any](v T) *T { return &v }

func TestMatch(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		request string
		match   fakellm.Match
		want    bool
	}{
		{"empty match", "/v1/messages", anthropicToolResult, fakellm.Match{}, true},
		{"system in a system block", "/v1/messages", anthropicToolResult, fakellm.Match{System: "the planner"}, true},
		{"system not there", "/v1/messages", anthropicToolResult, fakellm.Match{System: "the coder"}, false},
		{"system is not the messages", "/v1/messages", anthropicToolResult, fakellm.Match{System: "Plan it."}, false},
		{"openai system message", "/v1/chat/completions", openAIToolResult, fakellm.Match{System: "the coder"}, true},
		{"contains in the system prompt", "/v1/messages", anthropicToolResult, fakellm.Match{Contains: "billing-header"}, true},
		{"contains in an early message", "/v1/messages", anthropicToolResult, fakellm.Match{Contains: "Plan it."}, true},
		{"contains in a reminder block", "/v1/messages", anthropicToolResult, fakellm.Match{Contains: "<system-reminder>r"}, true},
		{"contains in a tool result", "/v1/messages", anthropicToolResult, fakellm.Match{Contains: "a.txt"}, true},
		{"contains nowhere", "/v1/messages", anthropicToolResult, fakellm.Match{Contains: "b.txt"}, false},
		{"last user turn holds the tool result", "/v1/messages", anthropicToolResult, fakellm.Match{LastUserContains: "a.txt"}, true},
		{"last user turn is not the first message", "/v1/messages", anthropicToolResult, fakellm.Match{LastUserContains: "Plan it."}, false},
		{"answer to a question", "/v1/messages", anthropicAnswer, fakellm.Match{LastUserContains: "[Answer to question"}, true},
		{"openai last user turn is the tool message", "/v1/chat/completions", openAIToolResult, fakellm.Match{LastUserContains: "ok"}, true},
		{"openai earlier user message", "/v1/chat/completions", openAIToolResult, fakellm.Match{LastUserContains: "Fix it."}, false},
		{"first message is the last user turn", "/v1/chat/completions", openAIHello, fakellm.Match{LastUserContains: "hello"}, true},
		{"has a tool result", "/v1/messages", anthropicToolResult, fakellm.Match{HasToolResult: ptr(true)}, true},
		{"has no tool result, but has", "/v1/messages", anthropicToolResult, fakellm.Match{HasToolResult: ptr(false)}, false},
		{"has a tool result, but has none", "/v1/messages", anthropicAnswer, fakellm.Match{HasToolResult: ptr(true)}, false},
		{"has no tool result", "/v1/messages", anthropicAnswer, fakellm.Match{HasToolResult: ptr(false)}, true},
		{"openai has a tool result", "/v1/chat/completions", openAIToolResult, fakellm.Match{HasToolResult: ptr(true)}, true},
		{"tool result for Bash", "/v1/messages", anthropicToolResult, fakellm.Match{ToolResultFor: "Bash"}, true},
		{"tool result for another tool", "/v1/messages", anthropicToolResult, fakellm.Match{ToolResultFor: "Read"}, false},
		{"openai tool result for bash", "/v1/chat/completions", openAIToolResult, fakellm.Match{ToolResultFor: "bash"}, true},
		{"offers a tool", "/v1/messages", anthropicToolResult, fakellm.Match{Tool: "Bash"}, true},
		{"openai offers a tool", "/v1/chat/completions", openAIToolResult, fakellm.Match{Tool: "bash"}, true},
		{"does not offer the tool", "/v1/chat/completions", openAIHello, fakellm.Match{Tool: "bash"}, false},
		{"model", "/v1/chat/completions", openAIHello, fakellm.Match{Model: "fake-gpt"}, true},
		{"model is exact", "/v1/chat/completions", openAIHello, fakellm.Match{Model: "fake"}, false},
		{"dialect", "/v1/chat/completions", openAIHello, fakellm.Match{Dialect: fakellm.OpenAI}, true},
		{"other dialect", "/v1/messages", anthropicAnswer, fakellm.Match{Dialect: fakellm.OpenAI}, false},
		{"every condition holds", "/v1/messages", anthropicToolResult,
			fakellm.Match{System: "planner", Contains: "Plan", LastUserContains: "left", HasToolResult: ptr(true), ToolResultFor: "Bash", Tool: "Bash", Model: "claude-sonnet-4-5", Dialect: fakellm.Anthropic}, true},
		{"one condition fails", "/v1/messages", anthropicToolResult,
			fakellm.Match{System: "planner", Contains: "Plan", Model: "claude-opus"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, url := newServer(t, &fakellm.Script{
				Turns:    []fakellm.Turn{{Match: tc.match, Text: "hit"}},
				Fallback: &fakellm.Turn{Text: "miss"},
			}, fakellm.Options{})
			if got := post(t, url+tc.path, tc.request); got.status != http.StatusOK {
				t.Fatalf("status = %d, want 200; body %s", got.status, got.body)
			}
			want := fakellm.FallbackTurn
			if tc.want {
				want = 0
			}
			if got := srv.Requests()[0].Turn; got != want {
				t.Errorf("Turn = %d, want %d", got, want)
			}
		})
	}
}

// replyText returns the text of a non-streaming reply in either dialect.
func replyText(tb testing.TB, body string) string {
	tb.Helper()
	var r struct {
		Content []struct{ Text string }
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		tb.Fatalf("decoding %s: %v", body, err)
	}
	var texts []string
	for _, c := range r.Content {
		texts = append(texts, c.Text)
	}
	for _, c := range r.Choices {
		texts = append(texts, c.Message.Content)
	}
	return strings.Join(texts, "")
}

func TestTurnOrder(t *testing.T) {
	script := &fakellm.Script{
		Turns: []fakellm.Turn{
			{Match: fakellm.Match{Contains: "X"}, Text: "x1"},
			{Text: "any"},
			{Match: fakellm.Match{Contains: "X"}, Text: "x2"},
			{Match: fakellm.Match{Contains: "R"}, Text: "r", Repeat: true},
		},
		Fallback: &fakellm.Turn{Text: "fallback"},
	}
	srv, url := newServer(t, script, fakellm.Options{})
	steps := []struct {
		prompt   string
		wantText string
		wantTurn int
	}{
		{"X", "x1", 0},
		{"X", "any", 1}, // the first unused turn that matches, not the best
		{"R", "r", 3},
		{"X", "x2", 2},
		{"X", "fallback", fakellm.FallbackTurn},
		{"R", "r", 3}, // repeat turns answer again
		{"Y", "fallback", fakellm.FallbackTurn},
	}
	for i, s := range steps {
		got := post(t, url+"/v1/chat/completions", `{"model":"g","messages":[{"role":"user","content":"`+s.prompt+`"}]}`)
		if text := replyText(t, got.body); text != s.wantText {
			t.Errorf("step %d (%s): text = %q, want %q", i, s.prompt, text, s.wantText)
		}
	}
	var turns []int
	for _, r := range srv.Requests() {
		turns = append(turns, r.Turn)
	}
	var want []int
	for _, s := range steps {
		want = append(want, s.wantTurn)
	}
	if diff := cmp.Diff(want, turns); diff != "" {
		t.Errorf("turns (-want +got):\n%s", diff)
	}
	if got := srv.Unused(); len(got) != 0 {
		t.Errorf("Unused() = %v, want none", got)
	}

	srv.Reset()
	if got := srv.Requests(); len(got) != 0 {
		t.Errorf("after Reset, %d requests, want 0", len(got))
	}
	if diff := cmp.Diff([]int{0, 1, 2}, srv.Unused()); diff != "" {
		t.Errorf("after Reset, Unused() (-want +got):\n%s", diff)
	}
	got := post(t, url+"/v1/messages", `{"model":"a","messages":[{"role":"user","content":"X"}]}`)
	if text := replyText(t, got.body); text != "x1" {
		t.Errorf("after Reset, text = %q, want x1", text)
	}
	if id := srv.Requests()[0].Seq; id != 1 {
		t.Errorf("after Reset, Seq = %d, want 1", id)
	}
}

func TestNoTurn(t *testing.T) {
	tests := []struct {
		name string
		path string
		body string
		want string
	}{{
		name: "anthropic",
		path: "/v1/messages",
		body: anthropicToolResult,
		want: `{"type":"error","error":{"type":"api_error","message":"fakellm: the script has no turn for request #2 (anthropic, model \"claude-sonnet-4-5\", last user turn \"a.txt\\n<system-reminder>left</system-reminder>\", tool result for Bash); no unused turn matches it (unused: 1 \"writer\"); add a matching turn or a fallback"}}` + "\n",
	}, {
		name: "openai",
		path: "/v1/chat/completions",
		body: openAIHello,
		want: `{"error":{"message":"fakellm: the script has no turn for request #2 (openai, model \"fake-gpt\", last user turn \"hello\"); no unused turn matches it (unused: 1 \"writer\"); add a matching turn or a fallback","type":"server_error","param":null,"code":null}}` + "\n",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, url := newServer(t, &fakellm.Script{Turns: []fakellm.Turn{
				{Text: "first"},
				{Name: "writer", Match: fakellm.Match{System: "writer"}, Text: "second"},
			}}, fakellm.Options{})
			post(t, url+tc.path, tc.body)
			got := post(t, url+tc.path, tc.body)
			if got.status != http.StatusInternalServerError {
				t.Errorf("status = %d, want 500", got.status)
			}
			if h := got.header.Get("X-Should-Retry"); h != "false" {
				t.Errorf("X-Should-Retry = %q, want false", h)
			}
			if diff := cmp.Diff(tc.want, got.body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 || reqs[1].Turn != fakellm.NoTurn || reqs[1].Status != 500 {
				t.Errorf("recorded %+v, want a second request with Turn NoTurn and Status 500", reqs)
			}
		})
	}
}

func TestEmptyScript(t *testing.T) {
	_, url := newServer(t, nil, fakellm.Options{})
	got := post(t, url+"/v1/messages", anthropicAnswer)
	if got.status != 500 || !strings.Contains(got.body, "every turn is used") {
		t.Errorf("got %d %s, want 500 saying every turn is used", got.status, got.body)
	}
}

func TestRecorded(t *testing.T) {
	srv, url := newServer(t, &fakellm.Script{Fallback: &fakellm.Turn{Text: "ok"}}, fakellm.Options{})
	post(t, url+"/v1/messages?beta=true", anthropicToolResult)
	post(t, url+"/v1/chat/completions", openAIToolResult)
	bashResult := fakellm.ToolResult{ToolCallID: "toolu_1", Name: "Bash", Content: "a.txt\n<system-reminder>left</system-reminder>"}
	makeResult := fakellm.ToolResult{ToolCallID: "call_1", Name: "bash", Content: "ok"}
	want := []fakellm.Recorded{{
		Seq: 1, Dialect: fakellm.Anthropic, Method: "POST", Path: "/v1/messages", RawQuery: "beta=true",
		Model: "claude-sonnet-4-5", Stream: true,
		System: "x-anthropic-billing-header: abc\nYou are the planner.",
		Messages: []fakellm.Message{
			{Role: "user", Text: "<system-reminder>r</system-reminder>\nPlan it."},
			{Role: "assistant", Text: "Running.", ToolCalls: []fakellm.ToolCall{{ID: "toolu_1", Name: "Bash", Input: map[string]any{"command": "ls"}}}},
			{Role: "user", Text: bashResult.Content, ToolResults: []fakellm.ToolResult{bashResult}},
		},
		Tools:       []string{"Bash"},
		ToolResults: []fakellm.ToolResult{bashResult},
		Turn:        fakellm.FallbackTurn, Status: 200,
	}, {
		Seq: 2, Dialect: fakellm.OpenAI, Method: "POST", Path: "/v1/chat/completions",
		Model: "fake-gpt", Stream: true,
		System: "You are the coder.",
		Messages: []fakellm.Message{
			{Role: "user", Text: "Fix it."},
			{Role: "assistant", ToolCalls: []fakellm.ToolCall{{ID: "call_1", Name: "bash", Input: map[string]any{"command": "make"}}}},
			{Role: "tool", Text: "ok", ToolResults: []fakellm.ToolResult{makeResult}},
		},
		Tools:       []string{"bash"},
		ToolResults: []fakellm.ToolResult{makeResult},
		Turn:        fakellm.FallbackTurn, Status: 200,
	}}
	got := srv.Requests()
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(fakellm.Recorded{}, "Header", "Body")); diff != "" {
		t.Errorf("Requests() (-want +got):\n%s", diff)
	}
	if len(got) == 2 {
		if got[0].Body["max_tokens"] != float64(32000) {
			t.Errorf("Body[max_tokens] = %v, want 32000", got[0].Body["max_tokens"])
		}
		if ct := got[1].Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Header Content-Type = %q", ct)
		}
	}
}

func TestScriptedErrors(t *testing.T) {
	tests := []struct {
		name       string
		turn       fakellm.Turn
		path       string
		wantStatus int
		wantHeader map[string]string
		wantBody   string
	}{{
		name:       "anthropic 429 with Retry-After",
		turn:       fakellm.Turn{Status: 429, Error: "slow down", Headers: map[string]string{"Retry-After": "3"}},
		path:       "/v1/messages",
		wantStatus: 429,
		wantHeader: map[string]string{"Retry-After": "3", "Content-Type": "application/json"},
		wantBody:   `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}` + "\n",
	}, {
		name:       "anthropic 401",
		turn:       fakellm.Turn{Status: 401, Error: "invalid x-api-key"},
		path:       "/v1/messages",
		wantStatus: 401,
		wantBody:   `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}` + "\n",
	}, {
		name:       "anthropic 529",
		turn:       fakellm.Turn{Status: 529},
		path:       "/v1/messages",
		wantStatus: 529,
		wantBody:   `{"type":"error","error":{"type":"overloaded_error","message":"scripted error"}}` + "\n",
	}, {
		name:       "openai 429 with Retry-After",
		turn:       fakellm.Turn{Status: 429, Error: "Rate limit reached", Headers: map[string]string{"retry-after": "1"}},
		path:       "/v1/chat/completions",
		wantStatus: 429,
		wantHeader: map[string]string{"Retry-After": "1"},
		wantBody:   `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}` + "\n",
	}, {
		name:       "openai 401",
		turn:       fakellm.Turn{Status: 401, Error: "Incorrect API key provided"},
		path:       "/v1/chat/completions",
		wantStatus: 401,
		wantBody:   `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}` + "\n",
	}, {
		name:       "openai 500",
		turn:       fakellm.Turn{Status: 500, Error: "boom"},
		path:       "/v1/chat/completions",
		wantStatus: 500,
		wantBody:   `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}` + "\n",
	}, {
		name:       "malformed stream",
		turn:       fakellm.Turn{RawSSE: "event: message_start\ndata: {\"type\":\n\n"},
		path:       "/v1/messages",
		wantStatus: 200,
		wantHeader: map[string]string{"Content-Type": "text/event-stream"},
		wantBody:   "event: message_start\ndata: {\"type\":\n\n",
	}, {
		name:       "stream cut with an error status",
		turn:       fakellm.Turn{RawSSE: "data: {\"id\":\"x\"", Status: 502},
		path:       "/v1/chat/completions",
		wantStatus: 502,
		wantBody:   "data: {\"id\":\"x\"",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, url := newServer(t, &fakellm.Script{Turns: []fakellm.Turn{tc.turn, {Text: "after"}}}, fakellm.Options{})
			got := post(t, url+tc.path, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			if got.status != tc.wantStatus {
				t.Errorf("status = %d, want %d", got.status, tc.wantStatus)
			}
			for k, v := range tc.wantHeader {
				if h := got.header.Get(k); h != v {
					t.Errorf("header %s = %q, want %q", k, h, v)
				}
			}
			if diff := cmp.Diff(tc.wantBody, got.body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			// An error turn is used up like any other: a retry gets the next.
			again := post(t, url+tc.path, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
			if text := replyText(t, again.body); again.status != 200 || text != "after" {
				t.Errorf("retry: %d %q, want 200 \"after\"", again.status, text)
			}
			if r := srv.Requests()[0]; r.Status != tc.wantStatus || r.Turn != 0 {
				t.Errorf("recorded Status %d Turn %d, want %d 0", r.Status, r.Turn, tc.wantStatus)
			}
		})
	}
}

func TestInvalidBody(t *testing.T) {
	srv, url := newServer(t, &fakellm.Script{Fallback: &fakellm.Turn{Text: "ok"}}, fakellm.Options{})
	for _, body := range []string{"{", "null", "[1]"} {
		got := post(t, url+"/v1/messages", body)
		if got.status != 400 || !strings.Contains(got.body, `"invalid_request_error"`) || !strings.Contains(got.body, "not a JSON object") {
			t.Errorf("body %q: got %d %s, want 400 invalid_request_error", body, got.status, got.body)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || reqs[0].Turn != fakellm.NoTurn || reqs[0].Status != 400 {
		t.Errorf("recorded %+v, want 3 requests with NoTurn and 400", reqs)
	}
}

func TestProbes(t *testing.T) {
	srv, url := newServer(t, &fakellm.Script{Turns: []fakellm.Turn{{Match: fakellm.Match{Model: "fake-claude"}, Text: "x"}}}, fakellm.Options{})
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		wantStatus int
		wantBody   string
	}{
		{"models", "GET", "/v1/models", "", 200,
			`{"object":"list","data":[{"id":"fake-claude","type":"model","display_name":"fake-claude","created_at":"2025-01-01T00:00:00Z","object":"model","created":1735689600,"owned_by":"fakellm"}],"has_more":false,"first_id":"fake-claude","last_id":"fake-claude"}` + "\n"},
		{"one model", "GET", "/v1/models/gpt-x", "", 200,
			`{"id":"gpt-x","type":"model","display_name":"gpt-x","created_at":"2025-01-01T00:00:00Z","object":"model","created":1735689600,"owned_by":"fakellm"}` + "\n"},
		{"count tokens", "POST", "/v1/messages/count_tokens?beta=true", `{"model":"m","messages":[{"role":"user","content":"hello world"}]}`, 200,
			`{"input_tokens":16}` + "\n"},
		{"hello", "HEAD", "/api/hello", "", 200, ""},
		{"health", "GET", "/", "", 200, `{"status":"ok"}` + "\n"},
		{"healthz", "GET", "/healthz", "", 200, `{"status":"ok"}` + "\n"},
		{"unknown path", "POST", "/v1/responses", "{}", 404,
			`{"error":{"code":null,"message":"fakellm: no route for POST /v1/responses; model requests go to POST /v1/messages or POST /v1/chat/completions","param":null,"type":"not_found_error"},"type":"error"}` + "\n"},
		{"wrong method", "GET", "/v1/messages", "", 405,
			`{"error":{"code":null,"message":"fakellm: GET /v1/messages is not allowed; use POST","param":null,"type":"invalid_request_error"},"type":"error"}` + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := do(t, tc.method, url+tc.path, tc.body)
			if got.status != tc.wantStatus {
				t.Errorf("status = %d, want %d", got.status, tc.wantStatus)
			}
			if diff := cmp.Diff(tc.wantBody, got.body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("probes recorded %d requests, want 0", n)
	}
}

func TestConcurrentRequests(t *testing.T) {
	const n = 24
	var turns []fakellm.Turn
	for i := range n {
		turns = append(turns, fakellm.Turn{Text: fmt.Sprintf("reply %02d", i), ToolCalls: []fakellm.ToolCall{{Name: "bash"}}})
	}
	srv, url := newServer(t, &fakellm.Script{Turns: turns}, fakellm.Options{ChunkSize: 3})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var texts []string
	for i := range n {
		wg.Go(func() {
			path, body := "/v1/messages", `{"model":"m","stream":true,"messages":[{"role":"user","content":"go"}]}`
			if i%2 == 1 {
				path, body = "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"go"}]}`
			}
			got := post(t, url+path, body)
			text := streamedText(got.body)
			mu.Lock()
			texts = append(texts, text)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(texts)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("reply %02d", i))
	}
	if diff := cmp.Diff(want, texts); diff != "" {
		t.Errorf("each turn should answer once (-want +got):\n%s", diff)
	}
	reqs := srv.Requests()
	var seqs, used []int
	for _, r := range reqs {
		seqs = append(seqs, r.Seq)
		used = append(used, r.Turn)
	}
	slices.Sort(used)
	var wantSeq []int
	for i := range n {
		wantSeq = append(wantSeq, i+1)
	}
	if diff := cmp.Diff(wantSeq, seqs); diff != "" {
		t.Errorf("Seq (-want +got):\n%s", diff)
	}
	var wantTurns []int
	for i := range n {
		wantTurns = append(wantTurns, i)
	}
	if diff := cmp.Diff(wantTurns, used); diff != "" {
		t.Errorf("turns used (-want +got):\n%s", diff)
	}
	if u := srv.Unused(); len(u) != 0 {
		t.Errorf("Unused() = %v", u)
	}
}

// streamedText concatenates the text deltas of a stream in either dialect.
func streamedText(body string) string {
	var b strings.Builder
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			Delta   struct{ Text string }
			Choices []struct{ Delta struct{ Content string } }
		}
		_ = json.Unmarshal([]byte(data), &ev)
		b.WriteString(ev.Delta.Text)
		for _, c := range ev.Choices {
			b.WriteString(c.Delta.Content)
		}
	}
	return b.String()
}

func TestEstimatedUsage(t *testing.T) {
	_, url := newServer(t, &fakellm.Script{Fallback: &fakellm.Turn{Text: "0123456789abcdef"}}, fakellm.Options{})
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 400) + `"}]}`
	got := post(t, url+"/v1/chat/completions", body)
	var r struct{ Usage map[string]int }
	if err := json.Unmarshal([]byte(got.body), &r); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"prompt_tokens": len(body) / 4, "completion_tokens": 4, "total_tokens": len(body)/4 + 4}
	if diff := cmp.Diff(want, r.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

func TestNewPanicsOnInvalidScript(t *testing.T) {
	defer func() {
		r := recover()
		if msg, _ := r.(string); !strings.Contains(msg, "turns[0].tool_calls[0].name: required") {
			t.Errorf("panic = %v, want one naming turns[0].tool_calls[0].name", r)
		}
	}()
	fakellm.New(&fakellm.Script{Turns: []fakellm.Turn{{ToolCalls: []fakellm.ToolCall{{}}}}}, fakellm.Options{})
}

func TestScriptIsCopied(t *testing.T) {
	script := &fakellm.Script{Turns: []fakellm.Turn{{Text: "a", ToolCalls: []fakellm.ToolCall{{Name: "t", Input: map[string]any{"k": "v"}}}}}}
	_, url := newServer(t, script, fakellm.Options{})
	script.Turns[0].Text = "changed"
	script.Turns[0].ToolCalls[0].Input["k"] = "changed"
	got := post(t, url+"/v1/messages", anthropicAnswer)
	if !strings.Contains(got.body, `"text":"a"`) || !strings.Contains(got.body, `{"k":"v"}`) {
		t.Errorf("body %s, want the script as it was when New was called", got.body)
	}
}
