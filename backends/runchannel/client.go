package runchannel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/iterion-bot/iterion/engine"
)

// Client makes a node's interaction calls over its session's socket, from
// inside the sandbox (the MCP server iterion mcp-ask-user, hooks). Its
// methods are safe for concurrent use.
type Client struct {
	hc                *http.Client
	token, run, node  string
	socketForMessages string
}

// maxReply bounds an answer of the channel (an await_answers text holds
// every answer of the node).
const maxReply = 16 << 20

// NewClient returns a client of the channel at socket, for run and node,
// with the session's token.
func NewClient(socket, token, run, node string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableCompression: true,
	}
	return &Client{hc: &http.Client{Transport: tr}, token: token, run: run, node: node, socketForMessages: socket}
}

// ClientFromEnv returns the client that the session's ChannelEnv
// describes, failing with what is missing: such a command runs only under
// a CLI that iterion started.
func ClientFromEnv(getenv func(string) string) (*Client, error) {
	var missing []string
	vals := map[string]string{}
	for _, k := range []string{EnvChannel, EnvToken, EnvRun, EnvNode} {
		if vals[k] = getenv(k); vals[k] == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no run channel: %s not set (this command runs inside the sandbox of a node, started by the agent CLI that iterion runs there)", strings.Join(missing, ", "))
	}
	if !filepath.IsAbs(vals[EnvChannel]) {
		return nil, fmt.Errorf("%s=%s: the run channel's socket is an absolute path", EnvChannel, clip(vals[EnvChannel], 200))
	}
	return NewClient(vals[EnvChannel], vals[EnvToken], vals[EnvRun], vals[EnvNode]), nil
}

// Tools returns the node's interaction tools.
func (c *Client) Tools(ctx context.Context) ([]ToolDef, error) {
	var out toolsReply
	if err := c.do(ctx, pathTools, struct{}{}, &out); err != nil {
		return nil, err
	}
	return out.Tools, nil
}

// Call runs the interaction tool name with input, the JSON object the
// model wrote (nil is an empty one).
func (c *Client) Call(ctx context.Context, name string, input json.RawMessage) (Reply, error) {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	var out Reply
	err := c.do(ctx, pathCall+name, struct {
		Input json.RawMessage `json:"input"`
	}{input}, &out)
	return out, err
}

// Pending returns the node's pending async questions.
func (c *Client) Pending(ctx context.Context) ([]engine.PendingQuestion, error) {
	var out pendingReply
	if err := c.do(ctx, pathPending, struct{}{}, &out); err != nil {
		return nil, err
	}
	return pendingOf(out.Pending), nil
}

// Inbox drains the messages queued for the node (answers, operator notes).
func (c *Client) Inbox(ctx context.Context) ([]string, error) {
	var out inboxReply
	if err := c.do(ctx, pathInbox, struct{}{}, &out); err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// Permission asks whether a tool call may run. An error means no decision
// came: the caller denies the call (fail closed).
func (c *Client) Permission(ctx context.Context, req PermissionRequest) (PermissionDecision, error) {
	var out PermissionDecision
	err := c.do(ctx, pathPermission, req, &out)
	return out, err
}

// ChannelError is an answer of the channel that refused a call.
type ChannelError struct {
	Status  int
	Message string
}

func (e *ChannelError) Error() string {
	return fmt.Sprintf("the run channel refused the call (HTTP %d): %s", e.Status, e.Message)
}

func (c *Client) do(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encoding the call: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://iterion"+channelPrefix+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set(headerRun, c.run)
	req.Header.Set(headerNode, c.node)
	res, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("calling iterion over the run channel %s: %w", c.socketForMessages, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxReply+1))
	if err != nil {
		return fmt.Errorf("reading the run channel's answer: %w", err)
	}
	if len(data) > maxReply {
		return fmt.Errorf("the run channel's answer is over %d bytes", maxReply)
	}
	if res.StatusCode != http.StatusOK {
		var e errorReply
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = clip(string(data), 500)
		}
		return &ChannelError{Status: res.StatusCode, Message: e.Error}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return errors.New("the run channel's answer is not the JSON expected: " + err.Error())
	}
	return nil
}
