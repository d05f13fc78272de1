package pi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/backends/pi"
	"github.com/iterion-bot/iterion/engine"
)

// scriptedPi is the other end of the RPC session, in the test: it reads
// the commands the backend sends to pi's stdin and prints what pi would,
// in an order the real pi rarely shows but may.
type scriptedPi struct {
	t   *testing.T
	in  *bufio.Scanner
	out io.Writer
}

// errStdinClosed ends the script when the backend stopped early.
var errStdinClosed = errors.New("stdin closed before the script's end")

func (f *scriptedPi) command() map[string]any {
	f.t.Helper()
	if !f.in.Scan() {
		panic(errStdinClosed)
	}
	var cmd map[string]any
	if err := json.Unmarshal(f.in.Bytes(), &cmd); err != nil {
		panic(fmt.Errorf("command %q: %v", f.in.Text(), err))
	}
	return cmd
}

// commands reads n commands, by type.
func (f *scriptedPi) commands(n int) map[string]map[string]any {
	byType := map[string]map[string]any{}
	for range n {
		cmd := f.command()
		byType[cmd["type"].(string)] = cmd
	}
	return byType
}

func (f *scriptedPi) print(lines ...string) {
	for _, l := range lines {
		_, _ = io.WriteString(f.out, l+"\n")
	}
}

func (f *scriptedPi) respond(cmd map[string]any, data string) {
	line := fmt.Sprintf(`{"type":"response","id":%q,"command":%q,"success":true`, cmd["id"], cmd["type"])
	if data != "" {
		line += `,"data":` + data
	}
	f.print(line + "}")
}

func assistant(text string, in, out int) string {
	m, _ := json.Marshal(map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": text}},
		"provider": "fake", "model": "m", "stopReason": "stop",
		"usage": map[string]any{"input": in, "output": out, "cacheRead": 0, "cacheWrite": 0, "cost": map[string]any{"total": 0}}})
	return string(m)
}

func stats(in, out int) string {
	return fmt.Sprintf(`{"sessionId":"s-1","tokens":{"input":%d,"output":%d,"cacheRead":0,"cacheWrite":0,"total":0},"cost":0}`, in, out)
}

// The completion rule and the protocol's rough edges, against a pi
// scripted in the test: responses out of their commands' order; another
// extension's dialog (cancelled); U+2028 inside a message; an agent_end
// followed by an auto_retry_start is not the end; an operator message
// drained once the agent is idle forces one more turn; the tokens are
// the session's.
func TestRPCProtocolEdges(t *testing.T) {
	fakeCmd := filepath.Join(t.TempDir(), "pi")
	if err := os.WriteFile(fakeCmd, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := pi.New(pi.Options{Env: func(k string) string {
		return map[string]string{"ITERION_PI_COMMAND": fakeCmd, "HOME": t.TempDir()}[k]
	}, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	drained := 0
	// The scripted pi calls no model, so its provider needs no route
	// through the proxy: the open network lets the node start without one.
	task := &engine.Task{RunID: "r", NodeID: "n", User: "Go.", Model: "fake/m", Network: engine.NetworkOpen,
		InboxDrain: func(context.Context) ([]string, error) {
			if drained++; drained == 1 {
				return []string{"late note"}, nil
			}
			return nil, nil
		},
		Run: func(ctx context.Context, p *engine.Process) (_ *engine.ProcessResult, err error) {
			// A script that does not go as written ends the process, as
			// pi exiting would: the backend must then fail, never hang.
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("the scripted pi: %v", r)
					err = fmt.Errorf("%v", r)
				}
			}()
			sc := bufio.NewScanner(p.Stdin)
			sc.Buffer(nil, 1<<20)
			f := &scriptedPi{t: t, in: sc, out: p.Stdout}
			start := f.command()
			f.print(`{"type":"extension_ui_request","id":"n1","method":"notify","message":"{\"__iterion\":1,\"op\":\"ready\",\"tools\":[]}","notifyType":"info"}`)
			f.respond(start, `{"model":{"provider":"fake","id":"m"},"sessionId":"s-1","isStreaming":false,"pendingMessageCount":0}`)
			setup := f.commands(5)
			if setup["prompt"]["message"] != "Go." || setup["set_auto_retry"]["enabled"] != false || setup["set_steering_mode"]["mode"] != "all" {
				t.Errorf("setup commands: %v", setup)
			}
			// Out of order: the prompt's response first, the rest reversed.
			f.respond(setup["prompt"], "")
			f.respond(setup["get_session_stats"], stats(0, 0))
			for _, typ := range []string{"set_follow_up_mode", "set_steering_mode", "set_auto_retry"} {
				f.respond(setup[typ], "")
			}
			f.print(`{"type":"extension_ui_request","id":"foreign-1","method":"input","title":"Your name?"}`)
			if c := f.command(); c["type"] != "extension_ui_response" || c["id"] != "foreign-1" || c["cancelled"] != true {
				t.Errorf("another extension's dialog got %v, want it cancelled", c)
			}
			f.print(`{"type":"agent_start"}`, `{"type":"agent_end","messages":[`+assistant("first\u2028line", 10, 1)+`]}`,
				`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"x"}`)
			end := f.commands(2)
			f.respond(end["get_state"], `{"pendingMessageCount":0}`)
			f.respond(end["get_session_stats"], stats(10, 1))
			f.print(`{"type":"agent_start"}`, `{"type":"agent_end","messages":[`+assistant("second", 20, 2)+`]}`)
			end = f.commands(2)
			f.respond(end["get_session_stats"], stats(30, 3))
			f.respond(end["get_state"], `{"pendingMessageCount":0}`)
			late := f.command()
			if late["type"] != "prompt" || late["message"] != "late note" {
				t.Errorf("after the drain: %v, want the late note as a prompt", late)
			}
			f.respond(late, "")
			f.print(`{"type":"agent_start"}`, `{"type":"agent_end","messages":[`+assistant("third", 5, 1)+`]}`)
			end = f.commands(2)
			f.respond(end["get_state"], `{"pendingMessageCount":0}`)
			f.respond(end["get_session_stats"], stats(35, 4))
			for sc.Scan() {
				t.Errorf("a command after the end: %s", sc.Text())
			}
			return &engine.ProcessResult{}, nil
		},
	}
	res, err := b.Execute(watchdog(t), task)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output["text"] != "third" || res.Tokens != 39 || res.SessionID != "s-1" || res.EffectiveModel != "fake/m" {
		t.Errorf("result = %+v", res)
	}
	if drained != 2 {
		t.Errorf("inbox drained %d times, want 2 (the late note, then nothing)", drained)
	}
	if strings.Contains(fmt.Sprint(res.Output), "first") {
		t.Error("the retried attempt was taken for the end")
	}
}
