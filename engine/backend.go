package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/iterion-bot/iterion/engine/permission"
	"time"
)

// Backend runs one LLM node: an agent, a judge, an llm router or a
// model-answered human node. The backends live in package backends; the
// engine knows them only through this interface.
type Backend interface {
	// Execute runs the task to its end: a final output, an error, or a
	// *NeedsInteractionError when the agent asked a blocking question.
	Execute(ctx context.Context, task *Task) (*Result, error)
	// Capabilities says what the backend supports.
	Capabilities() Capabilities
}

// Preflighter is a backend that can tell, before a run starts, whether it
// can serve a model (credentials, provider). The engine asks it for every
// model node, so a missing key fails the run before any work is done.
type Preflighter interface {
	Preflight(model string) error
}

// Capabilities are what a backend can do.
type Capabilities struct {
	// AsyncQuestions: it can expose ask_user_async and await_answers.
	AsyncQuestions bool
}

// Task is one execution of an LLM node.
type Task struct {
	RunID     string
	NodeID    string
	Iteration int
	// System and User are the rendered prompts.
	System string
	User   string
	// OutputSchema is the JSON Schema of the output, nil for free text.
	OutputSchema map[string]any
	Model        string
	// ReasoningEffort is the node's reasoning_effort: low, medium, high,
	// xhigh, max, or "" for the backend's default.
	ReasoningEffort string
	Tools           []string
	ToolMaxSteps    int
	MaxTokens       int
	WorkDir         string
	// Exec runs a process for the agent's own tools (a shell, grep) in the
	// node's sandbox, in WorkDir, with the sandbox's minimal environment
	// and the node's network policy (none unless its sandbox: opens it).
	// nil when the engine has no sandbox: such tools must then fail.
	Exec func(ctx context.Context, argv []string) (*ProcessResult, error)
	// Run runs a process the backend describes (an agent CLI, with its
	// own environment, mounts and streams) in the node's sandbox; the
	// engine fills in the workflow, the node and the workspace. It blocks
	// until the process ends: a backend driving a long-lived CLI calls it
	// in a goroutine, with Stdin and Stdout as pipes. nil when the engine
	// has no sandbox: a CLI backend must then fail.
	Run func(ctx context.Context, p *Process) (*ProcessResult, error)
	// Interaction is the node's interaction mode.
	Interaction string
	// Permission decides each tool call the agent makes (nil: all run).
	// A backend asks it before every call of a tool of its own and of the
	// CLI it drives: Refuse is a refused call the agent reads about, and
	// AskPerson is a blocking question (a *NeedsInteractionError) whose
	// answer decides the call.
	Permission *permission.Policy
	// ReadOnly: the node must not change the workspace. The backend offers
	// no tool that writes (write, edit, a shell), and Run and Exec mount
	// the workspace read-only.
	ReadOnly bool
	// Network is the network policy the node's sandbox: declaration (or
	// its workflow's) asks for: NetworkOpen, NetworkNone,
	// NetworkModelOnly, or NetworkDefault when it declares none (the
	// server's default then applies, none unless the operator opened it).
	// A CLI backend reads it to tell whether the node may use what only
	// the open network allows (the operator's own pi logins).
	Network Network
	// MCPServers are the MCP servers the node uses (its workflow's
	// mcp_server declarations its mcp: picks), in order; none on a
	// readonly node. The backend connects them when the node starts, offers
	// their tools as mcp__<server>__<tool>, and closes them when it ends.
	MCPServers []MCPServer

	// InboxDrain returns the messages queued for this node since the last
	// call (async answers, operator notes). Backends call it between turns
	// and once more before accepting a final answer.
	InboxDrain func(ctx context.Context) ([]string, error)
	// InboxWake returns a channel closed at the next change stored for the
	// run (an answer, a queued message, an event), so that a backend which
	// delivers messages in the middle of a turn drains the inbox when
	// something may have arrived instead of polling: take the channel,
	// drain, then wait on it. A ring may bring nothing (drain again, wait
	// again); a missed ring only delays delivery to the next drain. nil
	// when the engine cannot ring.
	InboxWake func() <-chan struct{}
	// PostQuestion, PendingQuestions and CollectAnswers are the async
	// question closures; nil unless the node is interaction: async (tools
	// must then fail explicitly, never do nothing).
	PostQuestion     func(ctx context.Context, q AsyncQuestion) (string, error)
	PendingQuestions func(ctx context.Context) ([]PendingQuestion, error)
	CollectAnswers   func(ctx context.Context) (string, error)

	// Resume fields: set when the node is re-invoked after a blocking
	// ask_user pause was answered.
	ResumeConversation     []byte
	ResumePendingToolUseID string
	ResumeAnswer           string
}

// AsyncQuestion is what ask_user_async posts.
type AsyncQuestion struct {
	Question      string
	Options       []Option
	AllowFreeText *bool
}

// MCPServer is an MCP server a node uses.
type MCPServer struct {
	Name string
	// Transport is stdio, http (Streamable HTTP) or sse (the legacy
	// HTTP+SSE transport).
	Transport string
	// Command and Args start a stdio server, which runs in the node's
	// sandbox through Task.Run; Env is what it gets beyond the sandbox's
	// environment (literal values from the workflow file).
	Command string
	Args    []string
	Env     map[string]string
	// URL is an http or sse server's endpoint.
	URL string
}

// Option is an offered answer.
type Option struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// PendingQuestion is an async question still waiting for its answer.
type PendingQuestion struct {
	InteractionID string
	Question      string
}

// Result is a node's successful outcome.
type Result struct {
	Output         map[string]any
	Tokens         int64
	CostUSD        float64
	Duration       time.Duration
	SessionID      string
	EffectiveModel string
}

// NeedsInteractionError suspends a node on a blocking question (ask_user,
// or await_answers with questions pending). The run pauses; the answer
// resumes the same conversation.
type NeedsInteractionError struct {
	Question         string
	Options          []Option
	Conversation     []byte
	PendingToolUseID string
	// AwaitPending lists the pending async questions when the pause comes
	// from the await_answers tool.
	AwaitPending []PendingQuestion
}

func (e *NeedsInteractionError) Error() string {
	return fmt.Sprintf("node needs a human answer: %s", e.Question)
}

// BackendError is a backend failure with the failure code it maps to.
type BackendError struct {
	Code      string
	Err       error
	retryable bool
	// RetryAfter, when set, is the wait the provider asked for.
	RetryAfter time.Duration
}

// NewBackendError wraps err with a failure code.
func NewBackendError(code string, retryable bool, err error) *BackendError {
	return &BackendError{Code: code, Err: err, retryable: retryable}
}

func (e *BackendError) Error() string { return e.Err.Error() }
func (e *BackendError) Unwrap() error { return e.Err }

// Retryable reports whether the same call may succeed later.
func (e *BackendError) Retryable() bool { return e.retryable }

// retryable is the one-method interface the engine's retry policy looks
// for, so it never reads error text.
type retryable interface{ Retryable() bool }

// isRetryable reports whether err says it may succeed on a retry.
func isRetryable(err error) bool {
	var r retryable
	return errors.As(err, &r) && r.Retryable()
}
