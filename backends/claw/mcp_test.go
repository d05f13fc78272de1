package claw_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/iterion-bot/iterion/backends/claw"
	"github.com/iterion-bot/iterion/backends/fakellm"
	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/internal/nodesandbox/nodesandboxtest"
	"github.com/iterion-bot/iterion/store"
)

// TestMain lets the test binary be the stdio MCP servers the sandbox
// starts: `mcp-serve` is a real server (the Go SDK's), `mcp-quiet` reads
// its input and never answers.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "mcp-serve":
			if err := testMCPServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			os.Exit(0)
		case "mcp-quiet":
			_, _ = io.Copy(io.Discard, os.Stdin)
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type getenvIn struct {
	Name string `json:"name" jsonschema:"an environment variable's name"`
}

// testMCPServer serves echo (the text back, prefixed) and getenv (a
// variable of the server's environment, or "(unset)").
func testMCPServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo a text."}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "getenv", Description: "Read an environment variable."}, func(_ context.Context, _ *mcp.CallToolRequest, in getenvIn) (*mcp.CallToolResult, any, error) {
		v, ok := os.LookupEnv(in.Name)
		if !ok {
			v = "(unset)"
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: v}}}, nil, nil
	})
	return s
}

// mcpFixture is claw on a fake model, with the given connect timeout and,
// when sandboxed, the real bwrap sandbox.
type mcpFixture struct {
	fake   *fakellm.Server
	engine *engine.Engine
}

func newMCPFixture(t *testing.T, script *fakellm.Script, timeout time.Duration, sandboxed bool) *mcpFixture {
	t.Helper()
	fake := fakellm.New(script, fakellm.Options{})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	env := map[string]string{"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": srv.URL}
	b := claw.New(claw.Options{Env: func(k string) string { return env[k] }, MCPConnectTimeout: timeout})
	db, err := store.Open(t.TempDir(), store.Options{SmallMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	opts := engine.Options{Store: db, Backends: map[string]engine.Backend{"claw": b}, Poll: time.Hour}
	if sandboxed {
		opts.Sandbox = nodesandboxtest.New(t, nodesandbox.Options{})
	}
	return &mcpFixture{fake: fake, engine: engine.New(opts)}
}

// run compiles src and runs it in dir.
func (f *mcpFixture) run(t *testing.T, src, dir string) *engine.Run {
	t.Helper()
	w, ds := dsl.CompileSource("t.bot", []byte(src))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	run, err := f.engine.Start(context.Background(), engine.StartRequest{Workflow: w, RunID: "mcp", WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// results maps each tool call id the model made to the result it read.
func (f *mcpFixture) results() map[string]string {
	out := map[string]string{}
	for _, r := range f.fake.Requests() {
		for _, tr := range r.ToolResults {
			out[tr.ToolCallID] = tr.Content
		}
	}
	return out
}

// callScript calls the given tools in one turn, then answers "done".
func callScript(calls ...fakellm.ToolCall) *fakellm.Script {
	has := true
	return &fakellm.Script{Turns: []fakellm.Turn{
		{Match: fakellm.Match{HasToolResult: new(bool)}, ToolCalls: calls},
		{Match: fakellm.Match{HasToolResult: &has}, Text: "done"},
	}}
}

// workflow is an agent using server srv, declared by decl (its body).
func workflow(decl, agentExtra string) string {
	return "mcp_server srv:\n" + decl + `
agent a:
  model: "anthropic/m"
  user: "Use the tools."
` + agentExtra + `  mcp:
    servers: [srv]

workflow w:
  entry: a
  a -> done
`
}

const openNetwork = "  sandbox:\n    mode: auto\n    network: open\n"

// workspaceServer copies the test binary into a fresh workspace, where a
// stdio mcp_server names it ./mcp-server: the sandbox sees the workspace.
func workspaceServer(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mcp-server"), src, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Each transport: the tools are listed and offered under
// mcp__<server>__<tool>, a call reaches the server, and its result reaches
// the model. The stdio server runs in the bwrap sandbox with the declared
// env: overlaid, and the server's own secrets do not reach it.
func TestMCPTransports(t *testing.T) {
	t.Setenv("ITERION_MCP_TEST_SECRET", "sk-mcp-secret")
	httpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return testMCPServer() }, nil))
	t.Cleanup(httpSrv.Close)
	sseSrv := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return testMCPServer() }, nil))
	t.Cleanup(sseSrv.Close)
	for _, tc := range []struct {
		name      string
		decl      string
		extra     string
		sandboxed bool
	}{
		{name: "stdio", sandboxed: true,
			decl: "  transport: stdio\n  command: \"./mcp-server\"\n  args: [\"mcp-serve\"]\n  env:\n    GREETING: \"bonjour\"\n"},
		{name: "http", extra: openNetwork, decl: fmt.Sprintf("  transport: http\n  url: %q\n", httpSrv.URL)},
		{name: "sse", extra: openNetwork, decl: fmt.Sprintf("  transport: sse\n  url: %q\n", sseSrv.URL)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newMCPFixture(t, callScript(
				fakellm.ToolCall{ID: "t_echo", Name: "mcp__srv__echo", Input: map[string]any{"text": "over " + tc.name}},
				fakellm.ToolCall{ID: "t_env", Name: "mcp__srv__getenv", Input: map[string]any{"name": "GREETING"}},
				fakellm.ToolCall{ID: "t_secret", Name: "mcp__srv__getenv", Input: map[string]any{"name": "ITERION_MCP_TEST_SECRET"}},
			), 20*time.Second, tc.sandboxed)
			dir := t.TempDir()
			if tc.sandboxed {
				dir = workspaceServer(t)
			}
			run := f.run(t, workflow(tc.decl, tc.extra), dir)
			if run.Status != engine.StatusFinished {
				t.Fatalf("run = %s %s %s", run.Status, run.FailureCode, run.Error)
			}
			reqs := f.fake.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d model requests, want 2", len(reqs))
			}
			for _, name := range []string{"mcp__srv__echo", "mcp__srv__getenv"} {
				if !contains(reqs[0].Tools, name) {
					t.Errorf("tool %s not offered: %v", name, reqs[0].Tools)
				}
			}
			got := f.results()
			if want := "echo: over " + tc.name; got["t_echo"] != want {
				t.Errorf("echo result = %q, want %q", got["t_echo"], want)
			}
			wantEnv := "(unset)"
			if tc.sandboxed {
				wantEnv = "bonjour"
			}
			if got["t_env"] != wantEnv {
				t.Errorf("GREETING = %q, want %q", got["t_env"], wantEnv)
			}
			if tc.sandboxed && got["t_secret"] != "(unset)" {
				t.Errorf("the stdio server read the server's secret: %q", got["t_secret"])
			}
		})
	}
}

// A server that accepts the connection and then says nothing fails the
// node with the server named and the timeout said, on every transport,
// instead of holding it.
func TestMCPQuietServerFailsTheNode(t *testing.T) {
	hold := make(chan struct{})
	quiet := func(sse bool) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if sse {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
			}
			select {
			case <-r.Context().Done():
			case <-hold:
			}
		}))
		t.Cleanup(s.Close)
		return s
	}
	httpSrv, sseSrv := quiet(false), quiet(true)
	// Cleanups run last first: the handlers are released before the
	// servers' Close waits for them.
	t.Cleanup(func() { close(hold) })
	for _, tc := range []struct {
		name, decl, extra string
		sandboxed         bool
	}{
		{name: "stdio", sandboxed: true, decl: "  transport: stdio\n  command: \"./mcp-server\"\n  args: [\"mcp-quiet\"]\n"},
		{name: "http", extra: openNetwork, decl: fmt.Sprintf("  transport: http\n  url: %q\n", httpSrv.URL)},
		{name: "sse", extra: openNetwork, decl: fmt.Sprintf("  transport: sse\n  url: %q\n", sseSrv.URL)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newMCPFixture(t, &fakellm.Script{Turns: []fakellm.Turn{{Text: "done"}}}, 500*time.Millisecond, tc.sandboxed)
			dir := t.TempDir()
			if tc.sandboxed {
				dir = workspaceServer(t)
			}
			run := f.run(t, workflow(tc.decl, tc.extra), dir)
			if run.Status != engine.StatusFailedResumable {
				t.Fatalf("run = %s, want failed_resumable (a node failure)", run.Status)
			}
			if want := `MCP server "srv" (` + tc.name + `) did not answer within 500ms`; !strings.Contains(run.Error, want) {
				t.Errorf("error = %q, want it to contain %q", run.Error, want)
			}
			if n := len(f.fake.Requests()); n != 0 {
				t.Errorf("%d model requests; the node should fail before its first turn", n)
			}
		})
	}
}

// The workflow's permission policy gates MCP tools like the others: a
// call no rule allows is refused under permission: deny, with the policy
// named, and an allowed one runs.
func TestMCPPermissionDeny(t *testing.T) {
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return testMCPServer() }, nil))
	t.Cleanup(srv.Close)
	f := newMCPFixture(t, callScript(
		fakellm.ToolCall{ID: "t_echo", Name: "mcp__srv__echo", Input: map[string]any{"text": "allowed"}},
		fakellm.ToolCall{ID: "t_env", Name: "mcp__srv__getenv", Input: map[string]any{"name": "HOME"}},
	), 20*time.Second, false)
	run := f.run(t, workflow(fmt.Sprintf("  transport: http\n  url: %q\n", srv.URL),
		openNetwork+"  permission: deny\n  allow: [\"mcp__srv__echo\"]\n"), t.TempDir())
	if run.Status != engine.StatusFinished {
		t.Fatalf("run = %s %s %s", run.Status, run.FailureCode, run.Error)
	}
	got := f.results()
	if got["t_echo"] != "echo: allowed" {
		t.Errorf("allowed call's result = %q", got["t_echo"])
	}
	if !strings.Contains(got["t_env"], "refused by the workflow's permission policy") {
		t.Errorf("denied call's result = %q, want a refusal", got["t_env"])
	}
}

// An http server is reached by iterion itself: without the open network
// the node fails before its first turn, saying what to declare.
func TestMCPHTTPNeedsOpenNetwork(t *testing.T) {
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return testMCPServer() }, nil))
	t.Cleanup(srv.Close)
	f := newMCPFixture(t, &fakellm.Script{Turns: []fakellm.Turn{{Text: "done"}}}, 20*time.Second, false)
	run := f.run(t, workflow(fmt.Sprintf("  transport: http\n  url: %q\n", srv.URL), ""), t.TempDir())
	if run.Status != engine.StatusFailedResumable || !strings.Contains(run.Error, "declare sandbox: network: open") {
		t.Fatalf("run = %s %q, want failed saying to open the network", run.Status, run.Error)
	}
}
