package main

import (
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/iterion-bot/iterion/backends/asktools"
	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/internal/nodesandbox/nodesandboxtest"
)

// The program's own subcommands in the default sandbox, as Claude Code
// would run them: iterion sandbox-exec runs iterion mcp-ask-user (the
// program itself, mounted from os.Executable), whose tools reach the
// node's closures over the bind-mounted channel, with no network.
func TestMCPAskUserInTheSandbox(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var posted []string
	task := &engine.Task{RunID: "r1", NodeID: "draft", Interaction: "async",
		PostQuestion: func(_ context.Context, q engine.AsyncQuestion) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			posted = append(posted, q.Question)
			return "r1_draft_async_1", nil
		},
		PendingQuestions: func(context.Context) ([]engine.PendingQuestion, error) { return nil, nil },
		CollectAnswers: func(context.Context) (string, error) {
			return "No async questions were posted (nothing to wait for).", nil
		},
	}
	s, err := runchannel.Open(context.Background(), task, runchannel.Options{Binary: exe, Upstreams: []runchannel.Upstream{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p, err := s.Wrap(&engine.Process{Argv: []string{exe, "mcp-ask-user"}, Env: []string{"ITERION_TEST_MAIN=1"}, Dir: t.TempDir(), Stdin: inR, Stdout: outW})
	if err != nil {
		t.Fatal(err)
	}
	sb := nodesandboxtest.New(t, nodesandbox.Options{})
	type ended struct {
		res *engine.ProcessResult
		err error
	}
	done := make(chan ended, 1)
	go func() {
		res, err := sb.Run(context.Background(), p)
		outW.Close()
		done <- ended{res, err}
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "claude-code-stand-in", Version: "0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, " "); got != "ask_user ask_user_async await_answers" {
		t.Errorf("tools = %s", got)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask_user_async", Arguments: map[string]any{"question": "Which licence?"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != asktools.PostedText+" (question id: r1_draft_async_1)" || res.IsError {
		t.Errorf("ask_user_async = %q (error %v)", got, res.IsError)
	}
	cs.Close() // closes the server's stdin: it ends, and sandbox-exec with it
	e := <-done
	if e.err != nil {
		t.Fatal(e.err)
	}
	if e.res.ExitCode != 0 {
		t.Errorf("exit %d, stderr %s", e.res.ExitCode, e.res.Stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posted) != 1 || posted[0] != "Which licence?" {
		t.Errorf("posted = %q", posted)
	}
}
