package claudecode

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/iterion-bot/iterion/engine"
)

// Claude Code's output is read by the loop whatever it holds: the reader,
// the decoder and the result's typing never panic, and a line is never
// split inside.
func FuzzStream(f *testing.F) {
	f.Add([]byte(`{"type":"system","subtype":"init","session_id":"3925ea79-5294-4b0d-ba35-abe672367967","mcp_servers":[{"name":"iterion","status":"connected"}]}` + "\n"))
	f.Add([]byte(`{"type":"result","subtype":"success","is_error":true,"result":"API Error: 429 x","api_error_status":429,"usage":{"input_tokens":3},"model_usage_since_last_result":{"m":{"costUSD":0.1}}}`))
	f.Add([]byte("{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"a\u2028b\"}]}}\r\n\n{"))
	f.Add([]byte(`{"type":"command_lifecycle","command_uuid":"x","state":"completed"}` + "\n" + `[1,2]` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lr := newLineReader(bytes.NewReader(data))
		lines := 0
		for {
			line, err := lr.next()
			if err != nil {
				break
			}
			lines++
			if bytes.ContainsRune(line, '\n') {
				t.Fatalf("a line holds a line end: %q", line)
			}
			ev, err := parseEvent(line)
			if err != nil {
				continue
			}
			r := &run{}
			r.account(ev)
			if ev.Type == "result" && (ev.IsError || ev.Subtype != "success") && failure(ev) == nil {
				t.Fatal("a failed result typed as no error")
			}
			_, _ = engine.ParseOutput(ev.Result, map[string]any{"required": []any{"a"}})
			_ = ev.Message.text()
		}
		if lines > bytes.Count(data, []byte("\n"))+1 {
			t.Fatalf("%d lines from %d line ends", lines, bytes.Count(data, []byte("\n")))
		}
	})
}

// The hook reads whatever Claude Code (or an agent posing as it) gives it:
// a call it accepts names a tool and has an object for input, small
// enough for the run channel.
func FuzzHookInput(f *testing.F) {
	f.Add([]byte(`{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}`))
	f.Add([]byte(`{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":null}`))
	f.Add([]byte(`{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":[1]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := parseHookInput(data)
		if err != nil {
			return
		}
		var obj map[string]any
		if in.ToolName == "" || json.Unmarshal(in.ToolInput, &obj) != nil || obj == nil {
			t.Fatalf("accepted %+v", in)
		}
		for _, v := range obj {
			// (Invalid UTF-8 is re-encoded longer when another string is cut.)
			if s, ok := v.(string); ok && len(s) > maxHookString && utf8.ValidString(s) {
				t.Fatalf("a string of %d bytes passed on", len(s))
			}
		}
	})
}

// A checkpoint's session is refused unless it is one this backend wrote:
// what it accepts names a file by a UUID.
func FuzzDecodeSaved(f *testing.F) {
	f.Add([]byte(`{"v":1,"session_id":"3925ea79-5294-4b0d-ba35-abe672367967","transcript":"","kind":"ask_user"}`))
	f.Add([]byte(`{"v":1,"session_id":"../x","kind":"permission"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeSaved(data)
		if err != nil {
			if s != nil {
				t.Fatal("a session with an error")
			}
			return
		}
		if !validSessionID(s.SessionID) || s.V != 1 {
			t.Fatalf("accepted session id %q", s.SessionID)
		}
	})
}
