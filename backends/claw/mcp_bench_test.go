package claw

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/internal/nodesandbox/nodesandboxtest"
)

type benchIn struct {
	Text string `json:"text"`
}

func benchEcho(_ context.Context, _ *mcp.CallToolRequest, in benchIn) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
}

func benchServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, benchEcho)
	return s
}

// BenchmarkMCPCall measures one MCP tool call through claw, from the
// tool's run to the text the model would read, per transport, against the
// direct call of the same handler in process. The connection is made once,
// outside the timing, as a node makes it once. The stdio server is the
// test binary's `mcp-serve` (TestMain) in the bwrap sandbox, whose echo
// tool is the same as benchEcho's.
func BenchmarkMCPCall(b *testing.B) {
	input := map[string]any{"text": "hello"}
	b.Run("direct", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			if _, _, err := benchEcho(ctx, nil, benchIn{Text: "hello"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	httpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return benchServer() }, nil))
	b.Cleanup(httpSrv.Close)
	sseSrv := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return benchServer() }, nil))
	b.Cleanup(sseSrv.Close)
	for _, tc := range []struct {
		name string
		srv  engine.MCPServer
	}{
		{"stdio", engine.MCPServer{Name: "srv", Transport: "stdio", Command: "./mcp-server", Args: []string{"mcp-serve"}}},
		{"http", engine.MCPServer{Name: "srv", Transport: "http", URL: httpSrv.URL}},
		{"sse", engine.MCPServer{Name: "srv", Transport: "sse", URL: sseSrv.URL}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			task := &engine.Task{MCPServers: []engine.MCPServer{tc.srv}, Network: engine.NetworkOpen}
			if tc.srv.Transport == "stdio" {
				dir := b.TempDir()
				exe, err := os.Executable()
				if err != nil {
					b.Fatal(err)
				}
				bin, err := os.ReadFile(exe)
				if err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "mcp-server"), bin, 0o755); err != nil {
					b.Fatal(err)
				}
				sb := nodesandboxtest.New(b, nodesandbox.Options{})
				task.Run = func(ctx context.Context, p *engine.Process) (*engine.ProcessResult, error) {
					q := *p
					q.Dir = dir
					return sb.Run(ctx, &q)
				}
			}
			be := New(Options{MCPConnectTimeout: 20 * time.Second})
			ctx := context.Background()
			tools, closeMCP, err := be.connectMCP(ctx, task)
			if err != nil {
				b.Fatal(err)
			}
			defer closeMCP()
			var echo *tool
			for i := range tools {
				if tools[i].def.Name == "mcp__srv__echo" {
					echo = &tools[i]
				}
			}
			if echo == nil {
				b.Fatalf("no echo tool among %d", len(tools))
			}
			for b.Loop() {
				out, err := echo.run(ctx, task, nil, Block{}, input)
				if err != nil || out != "echo: hello" {
					b.Fatalf("call = %q, %v", out, err)
				}
			}
		})
	}
}
