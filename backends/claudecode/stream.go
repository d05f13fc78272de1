package claudecode

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The stream-json protocol of Claude Code 2.1.332, as far as iterion uses
// it. Its output is one JSON object a line; the lines read here are:
//
//	{"type":"system","subtype":"init","session_id":…,"model":…,"mcp_servers":[{"name","status"}]}
//	{"type":"system","subtype":"api_retry","attempt":…,"max_retries":…,"error_status":…}
//	{"type":"assistant","message":{"model":…,"content":[{"type":"text"|"tool_use",…}]}}
//	{"type":"command_lifecycle","command_uuid":…,"state":"queued"|"started"|"completed"}
//	{"type":"result","subtype":…,"is_error":…,"result":…,"terminal_reason":…,
//	 "api_error_status":…,"usage":{…},"total_cost_usd":…,"model_usage_since_last_result":{…}}
//
// (the type key is not always first: whole objects are decoded). Its input
// is a user message or a control request a line:
//
//	{"type":"user","uuid":…,"message":{"role":"user","content":[{"type":"text","text":…}]},"parent_tool_use_id":null,"session_id":""}
//	{"type":"control_request","request_id":…,"request":{"subtype":"interrupt"}}

// event is one line of Claude Code's output.
type event struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`

	// system/init
	Model      string      `json:"model"`
	MCPServers []mcpStatus `json:"mcp_servers"`

	// assistant and user
	Message *message `json:"message"`

	// command_lifecycle
	CommandUUID string `json:"command_uuid"`
	State       string `json:"state"`

	// result
	IsError           bool                  `json:"is_error"`
	Result            string                `json:"result"`
	TerminalReason    string                `json:"terminal_reason"`
	APIErrorStatus    *int                  `json:"api_error_status"`
	NumTurns          int                   `json:"num_turns"`
	Usage             *usage                `json:"usage"`
	TotalCostUSD      float64               `json:"total_cost_usd"`
	ModelUsageSince   map[string]modelUsage `json:"model_usage_since_last_result"`
	PermissionDenials []json.RawMessage     `json:"permission_denials"`

	// system/api_retry
	Attempt     int    `json:"attempt"`
	Error       string `json:"error"`
	MaxRetries  int    `json:"max_retries"`
	ErrorStatus int    `json:"error_status"`
}

type mcpStatus struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

type message struct {
	Model   string  `json:"model"`
	Content []block `json:"content"`
}

type block struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// ToolUseID is a tool_result's.
	ToolUseID string `json:"tool_use_id"`
}

// usage is a result's token usage (the turns since the last result).
type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// modelUsage is one model's share of a result, with its cost.
type modelUsage struct {
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	CostUSD      float64 `json:"costUSD"`
}

// maxLine bounds one line of Claude Code's output (a tool result holding
// a large file is one line).
const maxLine = 64 << 20

// errLineTooLong is the error of a line over maxLine.
var errLineTooLong = fmt.Errorf("Claude Code printed a line over %d MiB", maxLine>>20)

// lineReader splits Claude Code's output into lines, on LF only (JSON
// strings may hold U+2028 and U+2029), each at most maxLine bytes.
type lineReader struct{ r *bufio.Reader }

func newLineReader(r io.Reader) *lineReader { return &lineReader{r: bufio.NewReaderSize(r, 64<<10)} }

// next returns the next non-blank line, without its line end.
func (l *lineReader) next() ([]byte, error) {
	for {
		var line []byte
		for {
			chunk, err := l.r.ReadSlice('\n')
			if len(line)+len(chunk) > maxLine {
				return nil, errLineTooLong
			}
			line = append(line, chunk...)
			if err == nil {
				break
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if len(bytes.TrimSpace(line)) > 0 && errors.Is(err, io.EOF) {
				return bytes.TrimSpace(line), nil
			}
			return nil, err
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			return line, nil
		}
	}
}

// parseEvent decodes one line. A line that is not a JSON object is an
// error; unknown fields and types are ignored.
func parseEvent(line []byte) (*event, error) {
	var ev event
	if err := json.Unmarshal(line, &ev); err != nil {
		return nil, fmt.Errorf("a line of Claude Code's output is not a stream-json object (%v): %s", err, clip(string(line), 200))
	}
	return &ev, nil
}

// text is the text blocks of an assistant message, joined.
func (m *message) text() string {
	if m == nil {
		return ""
	}
	var b bytes.Buffer
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// userLine is a user message of the stream's input, with uuid as its id.
func userLine(uuid, text string) ([]byte, error) {
	line, err := json.Marshal(map[string]any{
		"type":               "user",
		"uuid":               uuid,
		"message":            map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": text}}},
		"parent_tool_use_id": nil,
		"session_id":         "",
	})
	return append(line, '\n'), err
}

// interruptLine asks Claude Code to stop the turn in progress.
func interruptLine(id string) []byte {
	line, _ := json.Marshal(map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{"subtype": "interrupt"}})
	return append(line, '\n')
}

// newUUID returns a random version 4 UUID, as Claude Code wants message
// ids.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
