package runchannel_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/engine"
)

// TestMain lets the test binary stand in for the iterion binary inside a
// sandbox: `sandbox-exec …` is the real wrapper, and `probe …` is a
// stand-in agent CLI.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case runchannel.ExecCommand:
			os.Exit(runchannel.Exec(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case "probe":
			os.Exit(probe(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}

// probe is what an agent CLI does in the sandbox, printing what it saw:
//
//	probe env                      the environment, sorted
//	probe anthropic                a streamed Messages request to $ANTHROPIC_BASE_URL
//	probe openai                   a streamed chat completion to $OPENAI_BASE_URL
//	probe dial HOST:PORT           "reached" or "cut"
//
// Several probes can follow each other, separated by ";".
func probe(args []string) int {
	for len(args) > 0 {
		i := 0
		for i < len(args) && args[i] != ";" {
			i++
		}
		one := args[:i]
		if i < len(args) {
			i++
		}
		args = args[i:]
		switch one[0] {
		case "env":
			env := os.Environ()
			sort.Strings(env)
			for _, kv := range env {
				fmt.Println("env:", kv)
			}
		case "anthropic":
			post(os.Getenv("ANTHROPIC_BASE_URL")+"/v1/messages", "X-Api-Key", os.Getenv("ANTHROPIC_API_KEY"),
				`{"model":"fake","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}`)
		case "openai":
			post(os.Getenv("OPENAI_BASE_URL")+"/chat/completions", "Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"),
				`{"model":"fake","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
		case "dial":
			c, err := net.DialTimeout("tcp", one[1], 5*time.Second)
			if err != nil {
				fmt.Println("dial: cut")
				continue
			}
			c.Close()
			fmt.Println("dial: reached")
		default:
			fmt.Fprintln(os.Stderr, "probe: unknown", one[0])
			return 2
		}
	}
	return 0
}

func post(url, header, value, body string) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		fmt.Println("post:", err)
		return
	}
	req.Header.Set(header, value)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println("post: unreachable:", err)
		return
	}
	defer res.Body.Close()
	fmt.Println("post: status", res.StatusCode)
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			fmt.Println("post:", line)
		}
	}
}

// testBinary is the test binary, which serves the subcommands the sandbox
// runs.
func testBinary(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// open starts a session for task and closes it at the test's end.
func open(t testing.TB, task *engine.Task, opts runchannel.Options) *runchannel.Session {
	t.Helper()
	if opts.Binary == "" {
		opts.Binary = testBinary(t)
	}
	if opts.Upstreams == nil {
		opts.Upstreams = []runchannel.Upstream{}
	}
	s, err := runchannel.Open(context.Background(), task, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(filepath.Dir(s.Socket())); err == nil {
			t.Errorf("the session's directory %s is still there after Close", filepath.Dir(s.Socket()))
		}
	})
	return s
}

// unixClient talks HTTP to the session's socket, as the forwarder does.
func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// rawRequest writes req, as is, to the socket and returns the answer.
func rawRequest(t testing.TB, sock, req string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}
