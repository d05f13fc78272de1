package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a writer the server's log goroutines and the test can
// share.
type lockedBuffer struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{} // closed at the next write
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	return l.b.Write(p)
}

// waitFor waits until the buffer holds substr, woken by each write, and
// fails the test after timeout (a watchdog).
func (l *lockedBuffer) waitFor(t testing.TB, timeout time.Duration, substr string) {
	t.Helper()
	watchdog := time.NewTimer(timeout)
	defer watchdog.Stop()
	for {
		l.mu.Lock()
		if strings.Contains(l.b.String(), substr) {
			l.mu.Unlock()
			return
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-watchdog.C:
			t.Fatalf("waited %s for %q in the log", timeout, substr)
		}
	}
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestFakeModelServes(t *testing.T) {
	t.Parallel()
	script := writeFile(t, "script.json", `{"turns": [{"text": "hello from the script"}], "fallback": {"text": "DONE"}}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr lockedBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- newCLI(t).exec(ctx, nil, pw, &stderr, "fake-model", "--script", script)
		pw.Close()
	}()

	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the announcement: %v (stderr %s)", err, stderr.String())
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "fake model server listening on ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("stdout line %q, want \"fake model server listening on http://127.0.0.1:PORT\"", line)
	}
	go io.Copy(io.Discard, pr)

	for _, want := range []string{"hello from the script", "DONE"} {
		resp, err := http.Post(url+"/v1/messages", "application/json",
			strings.NewReader(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"text":"`+want+`"`) {
			t.Errorf("reply %d %s, want 200 with %q", resp.StatusCode, body, want)
		}
	}

	cancel()
	select {
	case code := <-exit:
		if code != exitOK {
			t.Errorf("exit code %d after interrupt, want 0; stderr %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("fake-model did not stop after its context ended")
	}
	if log := stderr.String(); !strings.Contains(log, "model request") || !strings.Contains(log, "turn=-1") {
		t.Errorf("stderr %q, want a log line per model request", log)
	}
}

func TestFakeModelErrors(t *testing.T) {
	t.Parallel()
	bad := writeFile(t, "bad.json", `{"turns": [{"match": {"dialect": "gemini"}}]}`)
	good := writeFile(t, "good.json", `{"fallback": {"text": "ok"}}`)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() }) // after the parallel cases
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"bad script", []string{"fake-model", "--script", bad}, exitError,
			"iterion: " + bad + `: turns[0].match.dialect: "gemini" is neither "anthropic" nor "openai"` + "\n"},
		{"missing script", []string{"fake-model", "--script", bad + ".none"}, exitError,
			"iterion: reading script: open " + bad + ".none: no such file or directory\n"},
		{"no script flag", []string{"fake-model"}, exitUsage,
			"iterion: fake-model needs --script FILE\nRun 'iterion fake-model --help' for usage.\n"},
		{"bad address", []string{"fake-model", "--script", good, "--addr", "nowhere"}, exitUsage,
			"iterion: --addr \"nowhere\": write HOST:PORT, such as 127.0.0.1:0\nRun 'iterion fake-model --help' for usage.\n"},
		{"address in use", []string{"fake-model", "--script", good, "--addr", busy.Addr().String()}, exitError,
			"iterion: listening for the fake model: listen tcp " + busy.Addr().String() + ": bind: address already in use\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; stderr %s", code, tc.wantCode, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if tc.wantStderr != "" && stderr != tc.wantStderr {
				t.Errorf("stderr %q\nwant   %q", stderr, tc.wantStderr)
			}
		})
	}
}
