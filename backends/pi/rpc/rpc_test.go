package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// fakePi is the other end of a client: what the client writes to pi's
// stdin is read from commands, and what pi would print is written to out.
type fakePi struct {
	commands *bufio.Scanner
	in       *io.PipeReader
	out      *io.PipeWriter
}

func newFake(t *testing.T) (*Client, *fakePi) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	t.Cleanup(func() { inR.Close(); outW.Close() })
	sc := bufio.NewScanner(inR)
	sc.Buffer(nil, 1<<20)
	return New(inW, outR), &fakePi{commands: sc, in: inR, out: outW}
}

// command reads the next command the client sent.
func (f *fakePi) command(t *testing.T) map[string]any {
	t.Helper()
	if !f.commands.Scan() {
		t.Fatalf("no command: %v", f.commands.Err())
	}
	var cmd map[string]any
	if err := json.Unmarshal(f.commands.Bytes(), &cmd); err != nil {
		t.Fatalf("command %q: %v", f.commands.Bytes(), err)
	}
	return cmd
}

func (f *fakePi) print(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(f.out, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
}

func watchdog(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a watchdog, not a wait
	t.Cleanup(cancel)
	return ctx
}

// Responses come in any order and reach the call whose id they echo.
func TestResponsesMatchedByID(t *testing.T) {
	c, pi := newFake(t)
	ctx := watchdog(t)
	type result struct {
		resp Response
		err  error
	}
	steer, prompt := make(chan result, 1), make(chan result, 1)
	go func() { r, err := c.Call(ctx, "steer", map[string]any{"message": "also X"}); steer <- result{r, err} }()
	first := pi.command(t)
	go func() {
		r, err := c.Call(ctx, "prompt", map[string]any{"message": "-starts with a dash"})
		prompt <- result{r, err}
	}()
	second := pi.command(t)
	if first["type"] != "steer" || second["type"] != "prompt" || second["message"] != "-starts with a dash" || first["id"] == second["id"] {
		t.Fatalf("commands %v then %v", first, second)
	}
	// The prompt's response first, as pi does.
	pi.print(t,
		fmt.Sprintf(`{"type":"response","command":"prompt","success":true,"id":%q}`, second["id"]),
		`{"type":"agent_start"}`,
		fmt.Sprintf(`{"type":"response","command":"steer","success":false,"error":"not streaming","id":%q}`, first["id"]))
	if r := <-prompt; r.err != nil || r.resp.Command != "prompt" {
		t.Errorf("prompt = %+v, %v", r.resp, r.err)
	}
	r := <-steer
	var ce *CommandError
	if !errors.As(r.err, &ce) || ce.Command != "steer" || ce.Message != "not streaming" {
		t.Errorf("steer refused: err = %v, want a CommandError naming it", r.err)
	}
	if ev, err := c.Next(ctx); err != nil || ev.Type != "agent_start" {
		t.Errorf("event = %+v, %v; want agent_start (responses are not events)", ev, err)
	}
}

// Lines split on LF alone: U+2028 and U+2029 inside a string stay in it,
// a CR before the LF goes, and a last line without LF still counts.
func TestFramingIsLFOnly(t *testing.T) {
	c, pi := newFake(t)
	ctx := watchdog(t)
	go func() {
		_, _ = io.WriteString(pi.out, "{\"type\":\"message_update\",\"text\":\"a\u2028b\u2029c\"}\r\n\n{\"type\":\"agent_end\"}")
		pi.out.Close()
	}()
	ev, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Text string }
	if err := ev.Decode(&m); err != nil || m.Text != "a\u2028b\u2029c" {
		t.Errorf("text = %q, %v; want the separators kept", m.Text, err)
	}
	if ev, err := c.Next(ctx); err != nil || ev.Type != "agent_end" {
		t.Errorf("last line without LF: %+v, %v", ev, err)
	}
	if _, err := c.Next(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("after the end: %v, want io.EOF", err)
	}
	if _, err := c.Call(ctx, "get_state", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("a call after the end: %v, want ErrClosed", err)
	}
}

// pi is read at once, whatever the consumer does: it can print thousands
// of events before anyone takes one, and is never held up.
func TestSlowConsumerDoesNotStallPi(t *testing.T) {
	c, pi := newFake(t)
	ctx := watchdog(t)
	const n = 5000
	printed := make(chan struct{})
	go func() {
		line := `{"type":"message_update","message":{"content":"` + strings.Repeat("x", 1000) + `"}}` + "\n"
		for range n {
			if _, err := io.WriteString(pi.out, line); err != nil {
				return
			}
		}
		close(printed)
	}()
	select {
	case <-printed: // all printed, none taken yet
	case <-ctx.Done():
		t.Fatal("pi was held up by a consumer that took nothing")
	}
	for i := range n {
		if ev, err := c.Next(ctx); err != nil || ev.Type != "message_update" {
			t.Fatalf("event %d: %+v, %v", i, ev.Type, err)
		}
	}
}

// A call in flight when pi exits ends with ErrClosed; a response of no
// call (a parse error has no id) and a stray non-JSON line are events.
func TestSessionEnd(t *testing.T) {
	c, pi := newFake(t)
	ctx := watchdog(t)
	done := make(chan error, 1)
	go func() { _, err := c.Call(ctx, "get_session_stats", nil); done <- err }()
	pi.command(t)
	pi.print(t, `{"type":"response","command":"parse","success":false,"error":"bad json"}`, `not json at all`)
	pi.out.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("call in flight at exit: %v, want ErrClosed", err)
	}
	if ev, err := c.Next(ctx); err != nil || ev.Type != TypeResponse || !strings.Contains(string(ev.Raw), "bad json") {
		t.Errorf("parse error = %+v, %v", ev, err)
	}
	if ev, err := c.Next(ctx); err != nil || ev.Type != "" || string(ev.Raw) != "not json at all" {
		t.Errorf("stray line = %+v, %v", ev, err)
	}
}

// A command sent with Send has its response among the events, after what
// pi printed before it; responses to Call still go to their callers.
func TestSendResponseKeepsItsPlace(t *testing.T) {
	c, pi := newFake(t)
	ctx := watchdog(t)
	sent := make(chan error, 1)
	var id string
	go func() {
		var err error
		id, err = c.Send("get_session_stats", nil)
		sent <- err
	}()
	cmd := pi.command(t)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if cmd["id"] != id || cmd["type"] != "get_session_stats" {
		t.Fatalf("command = %v, want get_session_stats with id %s", cmd, id)
	}
	pi.print(t, `{"type":"agent_end","messages":[]}`, `{"type":"auto_retry_start","attempt":1}`,
		`{"type":"response","id":"`+id+`","command":"get_session_stats","success":true,"data":{"cost":0.5}}`)
	var types []string
	for range 3 {
		ev, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
		if ev.Type == TypeResponse {
			r, err := ev.Response()
			if err != nil || r.ID != id || !r.Success || string(r.Data) != `{"cost":0.5}` {
				t.Errorf("response = %+v, %v", r, err)
			}
		}
	}
	if want := "agent_end auto_retry_start response"; strings.Join(types, " ") != want {
		t.Errorf("events %v, want %s", types, want)
	}
}

// A line past the maximum ends the session with an error naming it.
func TestLongLineRefused(t *testing.T) {
	r := NewLineReader(strings.NewReader(strings.Repeat("a", 100)+"\nok\n"), 64)
	if _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "longer than 64 bytes") {
		t.Errorf("a 100-byte line under a 64-byte max: %v", err)
	}
	r = NewLineReader(strings.NewReader(strings.Repeat("a", 64)+"\n"), 64)
	if line, err := r.Next(); err != nil || len(line) != 64 {
		t.Errorf("a line of exactly the max: %d bytes, %v", len(line), err)
	}
}

// Answers to an extension's dialog and the graceful stop.
func TestRespondUIAndClose(t *testing.T) {
	c, pi := newFake(t)
	go func() { _ = c.RespondUI("f3223468", map[string]any{"value": "PostgreSQL\u2028"}) }()
	cmd := pi.command(t)
	if cmd["type"] != "extension_ui_response" || cmd["id"] != "f3223468" || cmd["value"] != "PostgreSQL\u2028" {
		t.Errorf("UI response = %v", cmd)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if pi.commands.Scan() {
		t.Errorf("stdin still open after Close: %q", pi.commands.Text())
	}
}

// The line reader gives back the input, line by line, whatever it holds:
// joined with LF (CRs before LF aside) the lines are the input.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("{\"a\":\"\u2028\"}\n{\"b\":1}\r\n"), 16)
	f.Add([]byte("no newline"), 4)
	f.Add([]byte("\n\n\r\n"), 1)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max < 1 || max > 1<<16 {
			return
		}
		r := NewLineReader(bytes.NewReader(in), max)
		var lines [][]byte
		for {
			line, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return // a line over max: refused, fine
			}
			if bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("line %q holds an LF", line)
			}
			lines = append(lines, bytes.Clone(line))
		}
		want := bytes.ReplaceAll(in, []byte("\r\n"), []byte("\n"))
		want = bytes.TrimSuffix(want, []byte("\n"))
		got := bytes.Join(lines, []byte("\n"))
		if len(in) > 0 && in[len(in)-1] == '\r' {
			want = bytes.TrimSuffix(want, []byte("\r")) // a last line's CR goes too
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("lines %q do not give back %q", lines, in)
		}
	})
}
