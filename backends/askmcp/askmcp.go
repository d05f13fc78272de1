// Package askmcp is the MCP server `iterion mcp-ask-user` that Claude Code
// starts inside a node's sandbox: over stdio, with the official MCP Go
// SDK, it offers the node's interaction tools (ask_user, and on an async
// node ask_user_async and await_answers; Claude sees them as
// mcp__iterion__<name> under the server name "iterion"), with the names,
// descriptions and input schemas of package asktools, the same as claw's.
// Every call goes to iterion over the node's run channel (package
// runchannel), whose server runs it as claw would and returns the text the
// model reads, so the tools read and behave the same on every backend.
// A method the server does not implement gets the JSON-RPC error
// "method not found" (Claude Code probes some).
package askmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/iterion-bot/iterion/backends/runchannel"
)

// ServerName is the name the server gives itself; Claude Code's MCP
// configuration should list it under the same key, so that the tools are
// mcp__iterion__ask_user and so on.
const ServerName = "iterion"

// Caller is what the server needs of the run channel.
type Caller interface {
	Tools(ctx context.Context) ([]runchannel.ToolDef, error)
	Call(ctx context.Context, name string, input json.RawMessage) (runchannel.Reply, error)
}

var _ Caller = (*runchannel.Client)(nil)

// Serve serves the node's interaction tools on t until the client ends the
// session or ctx ends. version is the server's version, as iterion's.
func Serve(ctx context.Context, c Caller, t mcp.Transport, version string) error {
	defs, err := c.Tools(ctx)
	if err != nil {
		return fmt.Errorf("listing the node's interaction tools: %w", err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: version}, nil)
	for _, d := range defs {
		srv.AddTool(&mcp.Tool{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema}, handler(c, d.Name))
	}
	return srv.Run(ctx, t)
}

// handler runs one tool over the channel. A failure of the channel itself
// is the tool's error, which the model reads, not a protocol error.
func handler(c Caller, name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		reply, err := c.Call(ctx, name, req.Params.Arguments)
		if err != nil {
			reply = runchannel.Reply{Text: fmt.Sprintf("%s failed: iterion could not be reached over the run channel (%v)", name, err), IsError: true}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: reply.Text}}, IsError: reply.IsError}, nil
	}
}

// Main is `iterion mcp-ask-user`: the channel from the environment
// (runchannel.ClientFromEnv), MCP over stdin and stdout.
func Main(ctx context.Context, getenv func(string) string, stdin io.Reader, stdout io.Writer, version string) error {
	c, err := runchannel.ClientFromEnv(getenv)
	if err != nil {
		return err
	}
	return Serve(ctx, c, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}}, version)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
