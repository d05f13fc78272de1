// Package rpc is a client for pi's RPC mode (`pi --mode rpc`), written
// from pi's published protocol (docs/rpc.md and its RPC types, 0.73.1):
//
//   - framing is JSON Lines split on LF alone: U+2028 and U+2029 are legal
//     inside JSON strings, so a reader that also splits on them (Node's
//     readline) corrupts messages. A trailing CR is dropped;
//   - commands carry an id that their response echoes. pi dispatches
//     commands without serializing them, so responses come in any order
//     and are matched by id; events never carry one;
//   - pi waits for its reader: stdout is read continuously into an
//     unbounded queue, so a slow consumer of events never stalls the agent;
//   - closing stdin is the graceful stop (pi exits 0); `abort` cancels the
//     turn in flight and still ends it with agent_end, so a partial
//     transcript lands.
package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// MaxLine bounds one line of pi's output. agent_end carries the whole
// conversation, so the bound is generous; a longer line ends the session
// with an error naming it rather than growing without bound.
const MaxLine = 64 << 20

// MaxQueued bounds the bytes of events read and not yet taken: pi is read
// at once whatever the consumer does, but a consumer that stopped taking
// events must not let a flood of output fill memory.
const MaxQueued = 256 << 20

// Event types the client itself looks at.
const (
	TypeResponse       = "response"
	TypeExtensionUI    = "extension_ui_request"
	TypeAgentEnd       = "agent_end"
	TypeAutoRetryStart = "auto_retry_start"
)

// Event is one line of pi's output that is not the response to a command
// (agent_start, message_update, tool_execution_end, agent_end,
// extension_ui_request, …), kept whole for the caller to decode.
type Event struct {
	Type string
	Raw  json.RawMessage
}

// Decode decodes the event into v.
func (e Event) Decode(v any) error { return json.Unmarshal(e.Raw, v) }

// Response is pi's answer to a command.
type Response struct {
	ID      string          `json:"id,omitempty"`
	Command string          `json:"command"`
	Success bool            `json:"success"`
	Data    json.RawMessage `json:"data,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// CommandError is a command pi answered with success false.
type CommandError struct {
	Command string
	Message string
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("pi refused %s: %s", e.Command, e.Message)
}

// ErrClosed is the error of a call on a client whose session ended (pi
// exited, or its output could not be read).
var ErrClosed = errors.New("pi's RPC session is over")

// Client drives one pi RPC session over its stdin and stdout.
type Client struct {
	in io.WriteCloser

	writeMu sync.Mutex // one command line at a time on stdin

	mu      sync.Mutex
	nextID  int64
	pending map[string]chan Response // a nil channel: Send's, queued as an event
	queue   []Event
	queued  int           // bytes in queue
	ready   chan struct{} // closed when queue gains an event or the session ends
	done    bool
	err     error // why the session ended; nil for a clean EOF
}

// New starts reading pi's stdout at once and returns the client. in is
// pi's stdin; Close closes it.
func New(in io.WriteCloser, out io.Reader) *Client {
	c := &Client{in: in, pending: map[string]chan Response{}, ready: make(chan struct{})}
	go c.read(out)
	return c
}

// read takes pi's output line by line until it ends, routing responses to
// their callers and queueing everything else.
func (c *Client) read(out io.Reader) {
	r := NewLineReader(out, MaxLine)
	var err error
	for {
		var line []byte
		line, err = r.Next()
		if err != nil {
			break
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err = c.dispatch(line); err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	c.mu.Lock()
	c.done, c.err = true, err
	for id, ch := range c.pending {
		if ch != nil {
			close(ch)
		}
		delete(c.pending, id)
	}
	c.signalLocked()
	c.mu.Unlock()
}

// dispatch routes one line.
func (c *Client) dispatch(line []byte) error {
	var head struct {
		Type string `json:"type"`
		ID   any    `json:"id"`
	}
	if err := json.Unmarshal(line, &head); err != nil || head.Type == "" {
		// Not ours to guess at (pi sends stray writes to stderr): kept as an
		// event of no type, so the caller may log it.
		return c.push(Event{Raw: append(json.RawMessage(nil), line...)})
	}
	if head.Type == TypeResponse {
		var resp Response
		if err := json.Unmarshal(line, &resp); err == nil && resp.ID != "" {
			c.mu.Lock()
			ch, ours := c.pending[resp.ID]
			delete(c.pending, resp.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- resp
				return nil
			}
			if ours {
				// Sent with Send: the response takes its place among the
				// events, after every line pi printed before it.
				return c.push(Event{Type: TypeResponse, Raw: append(json.RawMessage(nil), line...)})
			}
		}
		// A response to no call of ours (a parse error has no id): an event.
	}
	return c.push(Event{Type: head.Type, Raw: append(json.RawMessage(nil), line...)})
}

func (c *Client) push(ev Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queued+len(ev.Raw) > MaxQueued {
		return fmt.Errorf("pi's events not taken passed %d bytes", MaxQueued)
	}
	c.queue = append(c.queue, ev)
	c.queued += len(ev.Raw)
	c.signalLocked()
	return nil
}

func (c *Client) signalLocked() {
	close(c.ready)
	c.ready = make(chan struct{})
}

// Next returns the next event, waiting for one. Once the session has
// ended and every event was taken, it returns io.EOF, or the error that
// ended the session.
func (c *Client) Next(ctx context.Context) (Event, error) {
	for {
		c.mu.Lock()
		if len(c.queue) > 0 {
			ev := c.queue[0]
			c.queue[0] = Event{}
			c.queue = c.queue[1:]
			c.queued -= len(ev.Raw)
			c.mu.Unlock()
			return ev, nil
		}
		if c.done {
			err := c.err
			c.mu.Unlock()
			if err == nil {
				err = io.EOF
			}
			return Event{}, err
		}
		ready := c.ready
		c.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// Call sends a command (its fields beside type) and waits for its
// response. A response with success false is a *CommandError.
func (c *Client) Call(ctx context.Context, typ string, fields map[string]any) (Response, error) {
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return Response{}, ErrClosed
	}
	c.nextID++
	id := "iterion-" + strconv.FormatInt(c.nextID, 10)
	ch := make(chan Response, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	cmd := map[string]any{}
	for k, v := range fields {
		cmd[k] = v
	}
	cmd["type"], cmd["id"] = typ, id
	if err := c.send(cmd); err != nil {
		c.forget(id)
		return Response{}, err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return Response{}, ErrClosed
		}
		if !resp.Success {
			return resp, &CommandError{Command: typ, Message: resp.Error}
		}
		return resp, nil
	case <-ctx.Done():
		c.forget(id)
		return Response{}, ctx.Err()
	}
}

// Send sends a command without waiting: its response comes as an event of
// type "response" (decode it with Event.Response), in its place in pi's
// output, so that a caller reading events one by one sees what pi printed
// before the response (an auto_retry_start after an agent_end, say) before
// the response itself. It returns the command's id.
func (c *Client) Send(typ string, fields map[string]any) (string, error) {
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return "", ErrClosed
	}
	c.nextID++
	id := "iterion-" + strconv.FormatInt(c.nextID, 10)
	c.pending[id] = nil
	c.mu.Unlock()
	cmd := map[string]any{}
	for k, v := range fields {
		cmd[k] = v
	}
	cmd["type"], cmd["id"] = typ, id
	if err := c.send(cmd); err != nil {
		c.forget(id)
		return "", err
	}
	return id, nil
}

// Response decodes an event of type "response".
func (e Event) Response() (Response, error) {
	var r Response
	err := json.Unmarshal(e.Raw, &r)
	return r, err
}

func (c *Client) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// RespondUI answers an extension_ui_request (a dialog an extension
// opened); fields are value, confirmed or cancelled, as the method wants.
func (c *Client) RespondUI(id string, fields map[string]any) error {
	msg := map[string]any{}
	for k, v := range fields {
		msg[k] = v
	}
	msg["type"], msg["id"] = "extension_ui_response", id
	return c.send(msg)
}

// send writes one command line. json.Marshal escapes U+2028 and U+2029
// and never writes a raw newline, so a line is always one message.
func (c *Client) send(msg map[string]any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encoding a pi command: %w", err)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("writing to pi: %w", err)
	}
	return nil
}

// Close closes pi's stdin, which ends the session gracefully: pi exits
// once it has nothing left to do. Events already sent can still be read.
func (c *Client) Close() error { return c.in.Close() }

// LineReader splits a stream on LF alone, dropping a trailing CR, and
// refuses a line longer than its maximum.
type LineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// NewLineReader reads lines of at most max bytes from r.
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next line without its LF (and CR), valid until the
// next call. A last line without LF is returned before io.EOF.
func (l *LineReader) Next() ([]byte, error) {
	l.buf = l.buf[:0]
	for {
		chunk, err := l.r.ReadSlice('\n')
		if len(l.buf)+len(chunk) > l.max+1 { // +1: the LF itself
			return nil, fmt.Errorf("a line of pi's output is longer than %d bytes", l.max)
		}
		l.buf = append(l.buf, chunk...)
		switch {
		case err == nil:
			line := l.buf[:len(l.buf)-1]
			return bytes.TrimSuffix(line, []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(l.buf) > 0:
			return bytes.TrimSuffix(l.buf, []byte("\r")), nil
		default:
			return nil, err
		}
	}
}
