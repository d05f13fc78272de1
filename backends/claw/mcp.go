package claw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/internal/agentcli"
)

// A node's MCP servers, on claw: connected when the node starts, all at
// once, each within the connect timeout (a server that accepts the
// connection and then says nothing fails the node instead of holding it);
// their tools offered to the model as mcp__<server>__<tool>, behind the
// node's permission policy like every other tool; closed when the node
// ends. A stdio server is a process in the node's sandbox; an http or sse
// server is reached by iterion itself, which the node must be allowed: its
// sandbox network must be open, or a workflow file could make the server
// reach addresses its own processes cannot.

// DefaultMCPConnectTimeout bounds connecting to one MCP server and
// listing its tools, when Options.MCPConnectTimeout is zero.
const DefaultMCPConnectTimeout = 10 * time.Second

const (
	// maxMCPTools bounds the tools taken from one server, and
	// maxMCPToolPages the pages of its tools/list.
	maxMCPTools     = 128
	maxMCPToolPages = 16
	// maxMCPDescription cuts a tool's description.
	maxMCPDescription = 4 << 10
	// mcpStopGrace is how long a stdio server has to exit once its input
	// is closed, before it is killed.
	mcpStopGrace = 2 * time.Second
)

// mcpToolName is what model APIs accept as a tool name.
var mcpToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// mcpConn is one connected server.
type mcpConn struct {
	name    string
	session *mcp.ClientSession
	// stop ends the connection and, for stdio, the process.
	stop func()
}

// connectMCP connects the task's MCP servers in parallel and returns
// their tools and the function that closes them all. Any server that
// cannot be reached, or does not answer within the timeout, fails the node
// with what to fix; the ones already connected are closed.
func (b *Backend) connectMCP(ctx context.Context, task *engine.Task) ([]tool, func(), error) {
	if len(task.MCPServers) == 0 {
		return nil, func() {}, nil
	}
	type outcome struct {
		conn  *mcpConn
		tools []tool
		err   error
	}
	outs := make([]outcome, len(task.MCPServers))
	var wg sync.WaitGroup
	for i, s := range task.MCPServers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, tools, err := b.connectOne(ctx, task, s)
			outs[i] = outcome{c, tools, err}
		}()
	}
	wg.Wait()
	var conns []*mcpConn
	var tools []tool
	var errs []error
	for _, o := range outs {
		if o.err != nil {
			errs = append(errs, o.err)
			continue
		}
		conns = append(conns, o.conn)
		tools = append(tools, o.tools...)
	}
	closeAll := func() {
		var wg sync.WaitGroup
		for _, c := range conns {
			wg.Add(1)
			go func() { defer wg.Done(); c.stop() }()
		}
		wg.Wait()
	}
	if len(errs) > 0 {
		closeAll()
		return nil, nil, engine.NewBackendError(engine.CodeExecutionFailed, false, errors.Join(errs...))
	}
	return tools, closeAll, nil
}

// connectOne connects one server and lists its tools.
func (b *Backend) connectOne(ctx context.Context, task *engine.Task, s engine.MCPServer) (*mcpConn, []tool, error) {
	timeout := b.mcpConnectTimeout
	// The connection lives as long as the node; connecting is bounded by
	// the timer below, which cancels it.
	sessCtx, cancel := context.WithCancel(ctx)
	var transport mcp.Transport
	var stderr *agentcli.Tail
	exited := make(chan struct{})
	switch s.Transport {
	case "stdio":
		if task.Run == nil {
			cancel()
			return nil, nil, fmt.Errorf("MCP server %q is a stdio server, which runs in the node's sandbox, and this server runs no sandbox", s.Name)
		}
		stdinR, stdinW := io.Pipe()
		stdoutR, stdoutW := io.Pipe()
		stderr = &agentcli.Tail{Max: 2 << 10}
		env := make([]string, 0, len(s.Env))
		for _, k := range sortedKeys(s.Env) {
			env = append(env, k+"="+s.Env[k])
		}
		p := &engine.Process{Argv: append([]string{s.Command}, s.Args...), Env: env, Stdin: stdinR, Stdout: stdoutW, Stderr: stderr}
		go func() {
			defer close(exited)
			_, err := task.Run(sessCtx, p)
			if err != nil {
				fmt.Fprintf(stderr, "\n%v", err)
			}
			stdoutW.Close()
			stdinR.Close() // a write to a gone server fails instead of blocking
		}()
		transport = &mcp.IOTransport{Reader: stdoutR, Writer: stdinW}
	case "http", "sse":
		if task.Network != engine.NetworkOpen {
			cancel()
			return nil, nil, fmt.Errorf("MCP server %q is reached over %s at %s by iterion itself, which this node may do only with the open network: declare sandbox: network: open on the node or the workflow, or use a stdio server", s.Name, s.Transport, s.URL)
		}
		close(exited)
		hc := &http.Client{}
		if s.Transport == "http" {
			transport = &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: hc, MaxRetries: -1}
		} else {
			transport = &mcp.SSEClientTransport{Endpoint: s.URL, HTTPClient: hc}
		}
	default:
		cancel()
		return nil, nil, fmt.Errorf("MCP server %q has transport %q: want stdio, http or sse", s.Name, s.Transport)
	}

	type listed struct {
		session *mcp.ClientSession
		tools   []*mcp.Tool
		err     error
	}
	done := make(chan listed, 1)
	go func() {
		client := mcp.NewClient(&mcp.Implementation{Name: "iterion", Version: "claw"}, nil)
		session, err := client.Connect(sessCtx, transport, nil)
		if err != nil {
			done <- listed{err: err}
			return
		}
		tools, err := listTools(sessCtx, session)
		if err != nil {
			session.Close()
			done <- listed{err: err}
			return
		}
		done <- listed{session: session, tools: tools}
	}()
	stop := func(session *mcp.ClientSession) {
		if session != nil {
			session.Close() // closes a stdio server's input: its cue to exit
		}
		select {
		case <-exited:
		case <-time.After(mcpStopGrace):
		}
		cancel()
		<-exited
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var got listed
	select {
	case got = <-done:
	case <-timer.C:
		cancel()
		got = <-done
		if got.session != nil {
			got.session.Close()
		}
		<-exited
		return nil, nil, fmt.Errorf("MCP server %q (%s) did not answer within %s of connecting%s: check that %s serves MCP%s",
			s.Name, s.Transport, timeout, stderr.Said("the server"), describeMCP(s), ", or raise the connect timeout (ITERION_MCP_CONNECT_TIMEOUT_MS)")
	}
	if got.err != nil {
		stop(nil)
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("connecting to MCP server %q (%s, %s): %v%s", s.Name, s.Transport, describeMCP(s), got.err, stderr.Said("the server"))
	}
	conn := &mcpConn{name: s.Name, session: got.session}
	conn.stop = sync.OnceFunc(func() { stop(got.session) })
	return conn, mcpTools(conn, got.tools), nil
}

// describeMCP names where a server is, for messages.
func describeMCP(s engine.MCPServer) string {
	if s.Transport == "stdio" {
		return strings.Join(append([]string{s.Command}, s.Args...), " ")
	}
	return s.URL
}

// listTools reads a server's tools/list, page by page, up to the bounds.
func listTools(ctx context.Context, session *mcp.ClientSession) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	params := &mcp.ListToolsParams{}
	for page := 0; page < maxMCPToolPages && len(tools) < maxMCPTools; page++ {
		res, err := session.ListTools(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("listing its tools: %w", err)
		}
		tools = append(tools, res.Tools...)
		if res.NextCursor == "" {
			break
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	if len(tools) > maxMCPTools {
		tools = tools[:maxMCPTools]
	}
	return tools, nil
}

// mcpTools turns a server's tools into claw tools named
// mcp__<server>__<tool>. A tool whose name no model API would accept is
// left out.
func mcpTools(c *mcpConn, listed []*mcp.Tool) []tool {
	var out []tool
	seen := map[string]bool{}
	for _, t := range listed {
		if t == nil {
			continue
		}
		name := "mcp__" + c.name + "__" + t.Name
		if !mcpToolName.MatchString(name) || seen[name] {
			continue
		}
		seen[name] = true
		schema := map[string]any{"type": "object"}
		if t.InputSchema != nil {
			if raw, err := json.Marshal(t.InputSchema); err == nil {
				var m map[string]any
				if json.Unmarshal(raw, &m) == nil && m != nil {
					schema = m
				}
			}
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		if len(desc) > maxMCPDescription {
			desc = desc[:maxMCPDescription]
		}
		remote := t.Name
		out = append(out, tool{
			def: ToolDef{Name: name, Description: fmt.Sprintf("%s (tool %s of MCP server %s)", desc, remote, c.name), Schema: schema},
			run: func(ctx context.Context, _ *engine.Task, _ *Conversation, _ Block, input map[string]any) (string, error) {
				return c.call(ctx, remote, input)
			},
		})
	}
	return out
}

// call forwards one tool call and returns what the model reads: the text
// of the result, or an error with it when the tool says it failed.
func (c *mcpConn) call(ctx context.Context, name string, input map[string]any) (string, error) {
	if input == nil {
		input = map[string]any{}
	}
	res, err := c.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: input})
	if err != nil {
		return "", fmt.Errorf("MCP server %s could not run %s: %v", c.name, name, err)
	}
	text := resultText(res)
	if len(text) > maxToolOutput {
		text = text[:maxToolOutput] + fmt.Sprintf("\n… (result cut at %d bytes)", maxToolOutput)
	}
	if res.IsError {
		return "", errors.New(text)
	}
	return text, nil
}

// resultText is a tool result as text: its text parts, a note for each
// part of another kind, or its structured content as JSON when it has no
// content.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[an image, %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio, %s, %d bytes, not played]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s]", c.URI))
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s]", c.Resource.URI))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			return string(raw)
		}
	}
	return strings.Join(parts, "\n")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
