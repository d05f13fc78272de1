package runchannel_test

import (
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/backends/asktools"
	"github.com/iterion-bot/iterion/backends/runchannel"
)

// sandbox-exec's command line comes from the backend, but a parser of it
// must never crash and must hold its promises whatever it is given: a
// loopback listener with a port, an absolute socket, a command.
func FuzzParseExecArgs(f *testing.F) {
	for _, seed := range []string{
		"--forward\x00127.0.0.1:4180=/tmp/s\x00--\x00pi\x00--mode\x00rpc",
		"--forward=[::1]:1=/s\x00--\x00x",
		"--\x00",
		"--forward\x000.0.0.0:80=/s\x00--\x00x",
		"--forward\x00127.0.0.1:65536=/s\x00--\x00x",
		"x",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		a, err := runchannel.ParseExecArgs(strings.Split(in, "\x00"))
		if err != nil {
			if err.Error() == "" {
				t.Error("an empty error")
			}
			return
		}
		if len(a.Argv) == 0 || a.Argv[0] == "" {
			t.Errorf("no command: %+v", a)
		}
		for _, fw := range a.Forwards {
			host, _, err := net.SplitHostPort(fw.Listen)
			if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
				t.Errorf("listener %q is not a loopback address", fw.Listen)
			}
			if !filepath.IsAbs(fw.Socket) || len(fw.Socket) > 107 {
				t.Errorf("socket %q", fw.Socket)
			}
		}
	})
}

// The channel's request bodies come from inside the sandbox: hostile.
// Decoding one never crashes, accepts one JSON object alone, and what it
// yields is safe to read as a question.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"input":{"question":"Which DB?","options":[{"id":"pg","label":"Postgres"}],"allow_free_text":true}}`,
		`{"input":{}}`, ``, `{}`, `{"input":null}`, `{"input":1}`, `{"other":1}`, `{} {}`, `[`,
		`{"tool":"bash","input":{"command":"ls"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var call struct {
			Input map[string]any `json:"input"`
		}
		if err := runchannel.DecodeRequest(body, &call); err == nil {
			q := asktools.Question(call.Input)
			if len(q.Options) > asktools.MaxOptions || q.Question != strings.TrimSpace(q.Question) {
				t.Errorf("question %+v", q)
			}
			if !json.Valid(body) && strings.TrimSpace(string(body)) != "" {
				t.Errorf("accepted invalid JSON %q", body)
			}
		}
		var perm runchannel.PermissionRequest
		_ = runchannel.DecodeRequest(body, &perm)
	})
}
