package claw

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// Options configure the claw backend. Zero fields mean the defaults noted.
type Options struct {
	// Env reads configuration (base URLs and keys). nil means os.Getenv.
	Env func(string) string
	// Providers are OpenAI-compatible providers beyond anthropic and
	// openai, by the name used in "<provider>/<model>".
	Providers map[string]ProviderConfig
	// HTTPClient is used for every API call. nil means a default client.
	HTTPClient *http.Client
	// Sleep waits between retries; tests inject one that does not wait.
	// nil means a timer honouring ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Prices add to and override the built-in price table, by model
	// prefix ("<provider>/<model>"). nil means the built-in table alone.
	Prices map[string]Price
	// MCPConnectTimeout bounds connecting to each of a node's MCP servers
	// and listing its tools. Zero means DefaultMCPConnectTimeout.
	MCPConnectTimeout time.Duration
}

// ProviderConfig declares an OpenAI-compatible provider.
type ProviderConfig struct {
	BaseURL   string `json:"base_url"`
	APIKeyEnv string `json:"api_key_env"`
}

// Backend is the claw backend.
type Backend struct {
	env       func(string) string
	providers map[string]ProviderConfig
	hc        *http.Client
	sleep     func(context.Context, time.Duration) error
	prices    map[string]Price
	// mcpConnectTimeout bounds each MCP server's connection.
	mcpConnectTimeout time.Duration
	// newProvider builds the provider for a model; tests reach it through
	// the real constructors with base URLs of a fake server.
	newProvider func(name string) (provider, error)
}

var _ engine.Backend = (*Backend)(nil)

// New returns the claw backend.
func New(opts Options) *Backend {
	b := &Backend{env: opts.Env, providers: opts.Providers, hc: opts.HTTPClient, sleep: opts.Sleep, prices: opts.Prices, mcpConnectTimeout: opts.MCPConnectTimeout}
	if b.mcpConnectTimeout <= 0 {
		b.mcpConnectTimeout = DefaultMCPConnectTimeout
	}
	if b.env == nil {
		b.env = os.Getenv
	}
	if b.sleep == nil {
		b.sleep = sleepCtx
	}
	b.newProvider = b.provider
	return b
}

// Capabilities: claw exposes the async question tools.
func (b *Backend) Capabilities() engine.Capabilities {
	return engine.Capabilities{AsyncQuestions: true}
}

var _ engine.Preflighter = (*Backend)(nil)

// Preflight checks that a model names a known provider whose key is set.
func (b *Backend) Preflight(model string) error {
	p, _, err := splitModel(model)
	if err != nil {
		return err
	}
	_, err = b.provider(p)
	return err
}

// splitModel splits "<provider>/<model>".
func splitModel(model string) (string, string, error) {
	p, m, ok := strings.Cut(model, "/")
	if !ok || p == "" || m == "" {
		return "", "", fmt.Errorf("model %q must be written <provider>/<model>, such as anthropic/claude-sonnet-4-6 or openai/gpt-5.5", model)
	}
	return p, m, nil
}

// provider builds the API client for a provider name, failing with what
// to set when its key is missing.
func (b *Backend) provider(name string) (provider, error) {
	switch name {
	case "anthropic":
		key := b.env("ANTHROPIC_API_KEY")
		if key == "" {
			return nil, engine.NewBackendError("AUTH_FAILED", false, errors.New("no Anthropic API key: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for another endpoint)"))
		}
		return newAnthropic(b.env("ANTHROPIC_BASE_URL"), key, b.hc), nil
	case "openai":
		key := b.env("OPENAI_API_KEY")
		if key == "" {
			return nil, engine.NewBackendError("AUTH_FAILED", false, errors.New("no OpenAI API key: set OPENAI_API_KEY (and OPENAI_BASE_URL for another endpoint)"))
		}
		return newOpenAI(b.env("OPENAI_BASE_URL"), "OPENAI_BASE_URL", key, b.hc), nil
	}
	cfg, ok := b.providers[name]
	if !ok {
		return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("unknown model provider %q: use anthropic or openai, or declare it in the providers config (base_url, api_key_env)", name))
	}
	key := b.env(cfg.APIKeyEnv)
	if key == "" {
		return nil, engine.NewBackendError("AUTH_FAILED", false, fmt.Errorf("no API key for provider %s: set %s", name, cfg.APIKeyEnv))
	}
	return newOpenAI(cfg.BaseURL, fmt.Sprintf("the base_url of provider %s (ITERION_PROVIDERS)", name), key, b.hc), nil
}

// defaultMaxSteps bounds the tool loop when the node sets no tool_max_steps.
const defaultMaxSteps = 50

// Execute runs an agent node: the model turn, the tools it calls, the
// inbox drained between turns and once more before a final answer, and
// the structured output with one repair turn.
func (b *Backend) Execute(ctx context.Context, task *engine.Task) (*engine.Result, error) {
	provName, model, err := splitModel(task.Model)
	if err != nil {
		return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, err)
	}
	prov, err := b.newProvider(provName)
	if err != nil {
		return nil, err
	}
	for _, name := range task.Tools {
		if _, ok := b.workspaceTool(name); !ok {
			return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("tool %q is not one of claw's tools (read_file, write_file, edit_file, list_files, grep, bash)", name))
		}
	}
	tools := b.toolsFor(task)
	mcpTools, closeMCP, err := b.connectMCP(ctx, task)
	if err != nil {
		return nil, err
	}
	defer closeMCP()
	tools = append(tools, mcpTools...)
	defs := make([]ToolDef, len(tools))
	for i, t := range tools {
		defs[i] = t.def
	}
	conv := &Conversation{System: systemPrompt(task)}
	if task.ResumeConversation != nil {
		if conv, err = decodeConversation(task.ResumeConversation); err != nil {
			return nil, engine.NewBackendError(engine.CodeResumeInvalid, false, err)
		}
		if conv.PermissionAsked != "" && conv.PermissionAsked == task.ResumePendingToolUseID {
			res, err := b.resumePermission(ctx, task, tools, conv)
			var need *engine.NeedsInteractionError
			if errors.As(err, &need) {
				need.Conversation = conv.encode()
				return nil, need
			}
			if err != nil {
				return nil, err
			}
			conv.add("user", res)
		} else {
			conv.add("user", toolResult(task.ResumePendingToolUseID, task.ResumeAnswer, false))
		}
	} else {
		conv.add("user", textBlock(task.User))
	}
	maxSteps := task.ToolMaxSteps
	if maxSteps <= 0 {
		maxSteps = defaultMaxSteps
	}
	maxTokens := task.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 8192
	}
	res := &engine.Result{EffectiveModel: task.Model}
	price, priced := b.priceOf(task.Model)
	start := time.Now()
	repaired := false
	for step := 0; ; step++ {
		if step > maxSteps {
			return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("the agent used more than %d tool steps (tool_max_steps)", maxSteps))
		}
		reply, err := b.call(ctx, prov, turnRequest{Model: model, System: conv.System, Messages: conv.Messages, Tools: defs, MaxTokens: maxTokens})
		if err != nil {
			return nil, err
		}
		res.Tokens += reply.InputTokens + reply.OutputTokens
		switch {
		case reply.CostUSD > 0:
			res.CostUSD += reply.CostUSD // the provider's own figure wins
		case priced:
			res.CostUSD += price.cost(reply.InputTokens, reply.OutputTokens)
		}
		conv.add("assistant", reply.Blocks...)
		calls := reply.toolCalls()
		if len(calls) > 0 {
			var results []Block
			for i, call := range calls {
				out, err := b.runTool(ctx, task, tools, conv, call)
				var need *engine.NeedsInteractionError
				if errors.As(err, &need) {
					// The run pauses on this call. The conversation it saves
					// must answer every other call of the turn: the results so
					// far, and "not run" for the calls after it. The answer
					// to this call is added on resume.
					for _, later := range calls[i+1:] {
						results = append(results, toolResult(later.ID, "not run: the run paused for the operator's answer first; call it again if you still need it", true))
					}
					if len(results) > 0 {
						conv.add("user", results...)
					}
					need.Conversation = conv.encode()
					return nil, need
				}
				if err != nil {
					return nil, err
				}
				results = append(results, out)
			}
			conv.add("user", results...)
			if err := drain(ctx, task, conv); err != nil {
				return nil, err
			}
			continue
		}
		// A final answer: a late inbox message forces one more turn.
		if n, err := drainCount(ctx, task, conv); err != nil {
			return nil, err
		} else if n > 0 {
			continue
		}
		out, perr := engine.ParseOutput(reply.text(), task.OutputSchema)
		if perr != nil {
			if repaired {
				return nil, engine.NewBackendError(engine.CodeSchemaValidation, false, fmt.Errorf("the final answer is not valid output after a repair turn: %v", perr))
			}
			repaired = true
			conv.add("user", textBlock(engine.OutputRepairPrompt(perr)))
			continue
		}
		res.Output = out
		res.Duration = time.Since(start)
		return res, nil
	}
}

// drain appends the node's inbox messages to the conversation.
func drain(ctx context.Context, task *engine.Task, conv *Conversation) error {
	_, err := drainCount(ctx, task, conv)
	return err
}

func drainCount(ctx context.Context, task *engine.Task, conv *Conversation) (int, error) {
	if task.InboxDrain == nil {
		return 0, nil
	}
	msgs, err := task.InboxDrain(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the inbox: %w", err)
	}
	for _, m := range msgs {
		conv.add("user", textBlock(m))
	}
	return len(msgs), nil
}

// call sends one turn, retrying 429 and 5xx answers (3 attempts,
// honouring Retry-After), failing fast on authentication errors.
func (b *Backend) call(ctx context.Context, p provider, req turnRequest) (*turnResponse, error) {
	const attempts = 3
	var last error
	for attempt := 1; attempt <= attempts; attempt++ {
		res, err := p.turn(ctx, req)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var bad *malformedError
		if errors.As(err, &bad) {
			return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, bad)
		}
		status, retryAfter, ok := httpStatus(err)
		switch {
		case ok && (status == http.StatusUnauthorized || status == http.StatusForbidden):
			return nil, engine.NewBackendError("AUTH_FAILED", false, fmt.Errorf("the model API refused the key (HTTP %d): check the API key for %s: %v", status, req.Model, err))
		case ok && (status == http.StatusTooManyRequests || status >= 500):
			last = err
			if attempt == attempts {
				break
			}
			wait := time.Duration(1<<(attempt-1)) * time.Second
			if s, err := strconv.Atoi(strings.TrimSpace(retryAfter)); err == nil && s >= 0 {
				wait = time.Duration(s) * time.Second
			}
			if err := b.sleep(ctx, wait); err != nil {
				return nil, err
			}
			continue
		case ok && status == http.StatusNotFound && p.notFoundHint() != "":
			return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("the model API answered HTTP 404 (%s): %v", p.notFoundHint(), err))
		case ok:
			return nil, engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("the model API answered HTTP %d: %v", status, err))
		default:
			return nil, engine.NewBackendError("NETWORK_TRANSIENT", true, fmt.Errorf("calling the model API: %w", err))
		}
	}
	status, _, _ := httpStatus(last)
	code := "NETWORK_TRANSIENT"
	if status == http.StatusTooManyRequests {
		code = engine.CodeRateLimited
	}
	return nil, engine.NewBackendError(code, true, fmt.Errorf("the model API still failed after %d attempts: %w", attempts, last))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func asError[T error](err error, target *T) bool { return errors.As(err, target) }
