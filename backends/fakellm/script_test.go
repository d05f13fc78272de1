package fakellm_test

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/backends/fakellm"
)

// docExample is the script in the package documentation.
const docExample = `{
  "turns": [
    {"name": "plan",
     "match": {"system": "You are the planner", "has_tool_result": false},
     "tool_calls": [{"name": "bash", "input": {"command": "ls"}}]},
    {"match": {"tool_result_for": "bash"}, "text": "PLAN: done"},
    {"match": {"dialect": "openai"}, "status": 429, "error": "slow down",
     "headers": {"Retry-After": "1"}},
    {"match": {"last_user_contains": "[Answer to question"},
     "text": "Thanks.", "usage": {"input_tokens": 120, "output_tokens": 3}},
    {"raw_sse": "event: message_start\ndata: {\"type\":\n\n"},
    {"match": {"model": "fast"}, "text": "ok", "repeat": true}
  ],
  "fallback": {"text": "DONE"}
}`

func TestParseScript(t *testing.T) {
	got, err := fakellm.ParseScript([]byte(docExample))
	if err != nil {
		t.Fatalf("ParseScript: %v", err)
	}
	f := false
	want := &fakellm.Script{
		Turns: []fakellm.Turn{
			{Name: "plan", Match: fakellm.Match{System: "You are the planner", HasToolResult: &f},
				ToolCalls: []fakellm.ToolCall{{Name: "bash", Input: map[string]any{"command": "ls"}}}},
			{Match: fakellm.Match{ToolResultFor: "bash"}, Text: "PLAN: done"},
			{Match: fakellm.Match{Dialect: fakellm.OpenAI}, Status: 429, Error: "slow down", Headers: map[string]string{"Retry-After": "1"}},
			{Match: fakellm.Match{LastUserContains: "[Answer to question"}, Text: "Thanks.", Usage: fakellm.Usage{InputTokens: 120, OutputTokens: 3}},
			{RawSSE: "event: message_start\ndata: {\"type\":\n\n"},
			{Match: fakellm.Match{Model: "fast"}, Text: "ok", Repeat: true},
		},
		Fallback: &fakellm.Turn{Text: "DONE"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseScript (-want +got):\n%s", diff)
	}
}

func TestParseScriptErrors(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   string
	}{
		{"empty", ``, `parsing script: the file is empty; want a JSON object with "turns"`},
		{"syntax", "{\"turns\": [\n  {\"text\": \"a\",}\n]}", `parsing script: line 2, column 16: invalid character '}' looking for beginning of object key string`},
		{"unknown field", `{"turns": [{"txt": "a"}]}`, `parsing script: unknown field "txt"`},
		{"unknown match field", `{"turns": [{"match": {"sytem": "a"}}]}`, `parsing script: unknown field "sytem"`},
		{"wrong type", "{\"turns\": [{\"status\": \"429\"}]}", `parsing script: line 1, column 27: turns.status: cannot use a JSON string as int`},
		{"not an object", `[]`, `parsing script: line 1, column 1: script: cannot use a JSON array as fakellm.Script`},
		{"trailing data", `{"turns": []} {}`, `parsing script: unexpected data after the top-level object`},
		{"bad dialect", `{"turns": [{}, {"match": {"dialect": "anthropc"}}]}`, `turns[1].match.dialect: "anthropc" is neither "anthropic" nor "openai"`},
		{"status out of range", `{"turns": [{"status": 200}]}`, `turns[0].status: 200 is not an HTTP error status (400 to 599)`},
		{"status with text", `{"turns": [{"status": 500, "text": "a"}]}`, `turns[0].status: an error turn has no text, tool_calls or stop_reason`},
		{"error without status", `{"turns": [{"error": "a"}]}`, `turns[0].error: needs a status (400 to 599)`},
		{"raw stream with tool calls", `{"turns": [{"raw_sse": "x", "tool_calls": [{"name": "a"}]}]}`, `turns[0].raw_sse: a raw stream turn has no text, tool_calls or stop_reason`},
		{"tool call without a name", `{"turns": [{"tool_calls": [{"name": "a"}, {"input": {}}]}]}`, `turns[0].tool_calls[1].name: required`},
		{"negative usage", `{"turns": [{"usage": {"output_tokens": -1}}]}`, `turns[0].usage.output_tokens: negative`},
		{"bad header", `{"turns": [{"headers": {"Retry After": "1"}}]}`, `turns[0].headers: "Retry After" is not a valid header`},
		{"content type header", `{"turns": [{"headers": {"content-type": "text/plain"}}]}`, `turns[0].headers: Content-Type is set by the server`},
		{"fallback with a match", `{"fallback": {"match": {"model": "m"}, "text": "a"}}`, `fallback.match: a fallback answers every unmatched request; remove its match`},
		{"bad fallback", `{"fallback": {"status": 99}}`, `fallback.status: 99 is not an HTTP error status (400 to 599)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fakellm.ParseScript([]byte(tc.script))
			if err == nil {
				t.Fatalf("ParseScript succeeded, want error %q", tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("error = %q\nwant    %q", got, tc.want)
			}
		})
	}
}

func TestLoadScript(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, []byte(docExample), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"turns": [{"status": 1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := fakellm.LoadScript(good); err != nil || len(s.Turns) != 6 {
		t.Errorf("LoadScript(good) = %v, %v; want 6 turns", s, err)
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{"invalid", bad, bad + ": turns[0].status: 1 is not an HTTP error status (400 to 599)"},
		{"missing", filepath.Join(dir, "none.json"), "reading script: open " + filepath.Join(dir, "none.json") + ": no such file or directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fakellm.LoadScript(tc.path)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzParseScript checks that no input makes ParseScript panic, and that a
// script it accepts serves a request in each dialect and mode.
func FuzzParseScript(f *testing.F) {
	f.Add([]byte(docExample))
	f.Add([]byte(`{"turns":[{"tool_calls":[{"name":"a","input":{"x":[1,{"y":null}]}}],"stop_reason":"length"}]}`))
	f.Add([]byte(`{"fallback":{"status":503,"headers":{"Retry-After":"0"}}}`))
	f.Add([]byte(`{"turns":[{"match":{"has_tool_result":true,"contains":"é"}}]}`))
	f.Add([]byte(`{"turns":null,"fallback":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := fakellm.ParseScript(data)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("ParseScript accepted a script Validate rejects: %v", err)
		}
		srv := fakellm.New(s, fakellm.Options{})
		for _, req := range []struct{ path, body string }{
			{"/v1/messages", `{"model":"fast","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
			{"/v1/messages", `{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`},
			{"/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`},
			{"/v1/chat/completions", `{"model":"m","messages":[{"role":"system","content":"s"}]}`},
		} {
			w := httptest.NewRecorder()
			srv.Handler().ServeHTTP(w, httptest.NewRequest("POST", req.path, strings.NewReader(req.body)))
			if w.Code == 0 {
				t.Fatalf("%s: no status written", req.path)
			}
		}
	})
}
