package askmcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/iterion-bot/iterion/backends/askmcp"
	"github.com/iterion-bot/iterion/backends/asktools"
	"github.com/iterion-bot/iterion/backends/runchannel"
	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// TestMain lets the test binary be `iterion mcp-ask-user`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "mcp-ask-user" {
		if err := askmcp.Main(context.Background(), os.Getenv, os.Stdin, os.Stdout, "test"); err != nil {
			fmt.Fprintln(os.Stderr, "iterion mcp-ask-user:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func testBinary(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// backend is a CLI backend reduced to what the test drives by hand: it
// opens the node's run channel and hands it to do, as Claude Code would
// reach it through the MCP server it starts.
type backend struct {
	// await is the backend's AwaitPending hook.
	await func(ctx context.Context, task *engine.Task, pending []engine.PendingQuestion) (string, error)
	do    func(ctx context.Context, task *engine.Task, s *runchannel.Session) (string, error)
}

func (b *backend) Capabilities() engine.Capabilities {
	return engine.Capabilities{AsyncQuestions: true}
}

func (b *backend) Execute(ctx context.Context, task *engine.Task) (*engine.Result, error) {
	opts := runchannel.Options{Upstreams: []runchannel.Upstream{}}
	if exe, err := os.Executable(); err == nil {
		opts.Binary = exe
	}
	if b.await != nil {
		opts.AwaitPending = func(ctx context.Context, p []engine.PendingQuestion) (string, error) { return b.await(ctx, task, p) }
	}
	s, err := runchannel.Open(ctx, task, opts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	text, err := b.do(ctx, task, s)
	if err != nil {
		return nil, err
	}
	return &engine.Result{Output: map[string]any{"text": text}}, nil
}

// connect starts `iterion mcp-ask-user` with the session's channel and
// connects the MCP SDK's client to it.
func connect(ctx context.Context, t *testing.T, s *runchannel.Session) *mcp.ClientSession {
	cmd := exec.Command(testBinary(t), "mcp-ask-user")
	cmd.Env = append(os.Environ(), s.ChannelEnv()...)
	cmd.Stderr = os.Stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "claude-code-stand-in", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Errorf("connecting to mcp-ask-user: %v", err)
		return nil
	}
	return cs
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "")
}

const asyncWorkflow = `agent a:
  model: "anthropic/claude-sonnet-4-6"
  backend: "claude_code"
  user: "Pick the database."
  interaction: async

workflow w:
  entry: a
  a -> done
`

// An agent on an async node, through the real MCP server over a real
// subprocess and the real engine and store: it sees claw's tools, posts a
// question, reads it pending, and awaits it while the answer is recorded
// by the engine's door; the answer comes back in the await's result, and
// once only (the inbox holds no copy).
func TestAskThroughMCP(t *testing.T) {
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var e *engine.Engine
	waiting := make(chan []engine.PendingQuestion, 1)
	answered := make(chan struct{})
	b := &backend{}
	b.await = func(ctx context.Context, task *engine.Task, pending []engine.PendingQuestion) (string, error) {
		// A backend that blocks in await_answers instead of pausing the
		// run: it waits for the answer, then answers as with none pending.
		waiting <- pending
		select {
		case <-answered:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		text, still, err := asktools.Await(ctx, task)
		if err == nil && len(still) > 0 {
			err = fmt.Errorf("still pending: %v", still)
		}
		return text, err
	}
	var awaited string
	b.do = func(ctx context.Context, tk *engine.Task, s *runchannel.Session) (string, error) {
		cs := connect(ctx, t, s)
		if cs == nil {
			return "", errors.New("no MCP session")
		}
		defer cs.Close()

		listed, err := cs.ListTools(ctx, nil)
		if err != nil {
			return "", err
		}
		want := asktools.For("async")
		if len(listed.Tools) != len(want) {
			return "", fmt.Errorf("tools = %d, want %d", len(listed.Tools), len(want))
		}
		for i, tool := range listed.Tools {
			gotSchema, _ := json.Marshal(tool.InputSchema)
			wantSchema, _ := json.Marshal(want[i].Schema)
			if tool.Name != want[i].Name || tool.Description != want[i].Description || string(gotSchema) != string(wantSchema) {
				t.Errorf("tool %d = %s %q %s, want claw's %s %q %s", i, tool.Name, tool.Description, gotSchema, want[i].Name, want[i].Description, wantSchema)
			}
		}

		posted, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask_user_async", Arguments: map[string]any{"question": "Which database?"}})
		if err != nil {
			return "", err
		}
		id := tk.RunID + "_a_async_1"
		if got, want := text(posted), asktools.PostedText+" (question id: "+id+")"; got != want || posted.IsError {
			t.Errorf("ask_user_async = %q (error %v), want %q", got, posted.IsError, want)
		}

		ch, err := runchannel.ClientFromEnv(envOf(s.ChannelEnv()))
		if err != nil {
			return "", err
		}
		pending, err := ch.Pending(ctx)
		if err != nil || len(pending) != 1 || pending[0].InteractionID != id || pending[0].Question != "Which database?" {
			t.Errorf("pending = %+v, %v; want the posted question", pending, err)
		}

		// await_answers with the question pending: the backend's hook
		// runs; the answer is recorded meanwhile, from outside the agent.
		result := make(chan *mcp.CallToolResult, 1)
		failed := make(chan error, 1)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "await_answers", Arguments: map[string]any{}})
			if err != nil {
				failed <- err
				return
			}
			result <- res
		}()
		if p := <-waiting; len(p) != 1 || p[0].InteractionID != id {
			t.Errorf("the hook saw %+v", p)
		}
		if _, err := e.Answer(ctx, engine.AnswerRequest{RunID: tk.RunID, InteractionID: id, Text: "Postgres", By: "op", Via: "test"}); err != nil {
			return "", err
		}
		close(answered)
		var res *mcp.CallToolResult
		select {
		case res = <-result:
		case err := <-failed:
			return "", err
		}
		if msgs, err := ch.Inbox(ctx); err != nil || len(msgs) != 0 {
			t.Errorf("inbox after await = %q, %v; want the answer's copy gone", msgs, err)
		}
		awaited = text(res)
		return awaited, nil
	}

	e = engine.New(engine.Options{Store: db, Backends: map[string]engine.Backend{"claude_code": b}, Poll: time.Hour})
	w, ds := dsl.CompileSource("w.bot", []byte(asyncWorkflow))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	run, err := e.Start(context.Background(), engine.StartRequest{Workflow: w, WorkDir: t.TempDir(), Trigger: engine.Trigger{Source: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != engine.StatusFinished {
		t.Fatalf("run %s: %s %s", run.Status, run.FailureCode, run.Error)
	}
	id := run.ID + "_a_async_1"
	if want := "All posted questions are answered:\n- [" + id + "] Q: Which database? — A: Postgres"; awaited != want {
		t.Errorf("await_answers = %q, want %q", awaited, want)
	}
}

func envOf(kvs []string) func(string) string {
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// The server answers a method it does not know with a JSON-RPC error, and
// keeps serving.
func TestUnknownMethod(t *testing.T) {
	task := &engine.Task{RunID: "r1", NodeID: "n", Interaction: "human"}
	s, err := runchannel.Open(context.Background(), task, runchannel.Options{Binary: testBinary(t), Upstreams: []runchannel.Upstream{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cmd := exec.Command(testBinary(t), "mcp-ask-user")
	cmd.Env = append(os.Environ(), s.ChannelEnv()...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	rd := bufio.NewReader(stdout)
	call := func(msg string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(msg, `"id"`) {
			return nil
		}
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return m
	}
	call(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"0"}}}`)
	call(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	res := call(`{"jsonrpc":"2.0","id":2,"method":"iterion/unknown","params":{}}`)
	e, _ := res["error"].(map[string]any)
	if code, _ := e["code"].(float64); code != -32601 {
		t.Errorf("unknown method answered %v, want the JSON-RPC error -32601", res)
	}
	res = call(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	r, _ := res["result"].(map[string]any)
	tools, _ := r["tools"].([]any)
	if len(tools) != 1 || tools[0].(map[string]any)["name"] != "ask_user" {
		t.Errorf("tools/list after it = %v, want ask_user alone (interaction: human)", res)
	}
	res = call(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ask_user","arguments":{"question":"Deploy?"}}}`)
	r, _ = res["result"].(map[string]any)
	if r["isError"] != true || !strings.Contains(fmt.Sprint(r["content"]), "ask_user cannot be served on this node") {
		t.Errorf("ask_user without the backend's hook = %v, want the tool's error", res)
	}
}

// Outside a node's sandbox (no channel in the environment) the server
// says so and exits.
func TestWithoutAChannel(t *testing.T) {
	cmd := exec.Command(testBinary(t), "mcp-ask-user")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no run channel: ITERION_CHANNEL") {
		t.Errorf("err = %v, output %q", err, out)
	}
}
