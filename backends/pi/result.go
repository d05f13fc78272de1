package pi

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/iterion-bot/iterion/engine"
)

// message is an agent message of pi's (pi-ai's Message types), as far as
// iterion reads it.
type message struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	Provider     string          `json:"provider"`
	Model        string          `json:"model"`
	Usage        *usage          `json:"usage"`
	StopReason   string          `json:"stopReason"`
	ErrorMessage string          `json:"errorMessage"`
	Diagnostics  []struct {
		Error *struct {
			Code    any    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"diagnostics"`
}

// usage is one assistant message's usage.
type usage struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cacheRead"`
	CacheWrite int64 `json:"cacheWrite"`
	Cost       struct {
		Total float64 `json:"total"`
	} `json:"cost"`
}

// text is the message's text: its text blocks joined.
func (m *message) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// tally is what a node's model calls consumed, the same on both
// transports: the sum over the assistant messages, or pi's session stats
// (which are that sum) less the resumed session's.
type tally struct {
	input, output, cacheRead, cacheWrite int64
	cost                                 float64
	// peakContext is the largest context one call sent: its input with the
	// cache reads and writes.
	peakContext int64
}

func (t *tally) add(u *usage) {
	if u == nil {
		return
	}
	t.input += u.Input
	t.output += u.Output
	t.cacheRead += u.CacheRead
	t.cacheWrite += u.CacheWrite
	t.cost += u.Cost.Total
	t.peakContext = max(t.peakContext, u.Input+u.CacheRead+u.CacheWrite)
}

// sessionStats is the response of get_session_stats.
type sessionStats struct {
	SessionID string `json:"sessionId"`
	Tokens    struct {
		Input      int64 `json:"input"`
		Output     int64 `json:"output"`
		CacheRead  int64 `json:"cacheRead"`
		CacheWrite int64 `json:"cacheWrite"`
	} `json:"tokens"`
	Cost float64 `json:"cost"`
}

func (s sessionStats) tally() tally {
	return tally{input: s.Tokens.Input, output: s.Tokens.Output, cacheRead: s.Tokens.CacheRead, cacheWrite: s.Tokens.CacheWrite, cost: s.Cost}
}

// minus is t less the tally of a resumed session's earlier calls, which
// the execution that paused it reported.
func (t tally) minus(before tally) tally {
	return tally{input: t.input - before.input, output: t.output - before.output, cacheRead: t.cacheRead - before.cacheRead,
		cacheWrite: t.cacheWrite - before.cacheWrite, cost: t.cost - before.cost, peakContext: t.peakContext}
}

// account fills the result's tokens and cost: cache reads and writes are
// not billed input (they count in the context, as claude_code's do), and
// the cost pi reports wins over the price table.
func (b *Backend) account(res *engine.Result, t tally, model string) {
	res.Tokens = t.input + t.output
	res.CostUSD = t.cost
	if res.CostUSD <= 0 {
		if p, ok := b.priceOf(model); ok {
			res.CostUSD = (float64(t.input)*p.InputPerMTok + float64(t.output)*p.OutputPerMTok) / 1e6
		}
	}
}

// priceOf finds a model's price by the longest prefix of the Options'.
func (b *Backend) priceOf(model string) (Price, bool) {
	best, bestLen := Price{}, -1
	for prefix, p := range b.prices {
		if strings.HasPrefix(model, prefix) && len(prefix) > bestLen {
			best, bestLen = p, len(prefix)
		}
	}
	return best, bestLen >= 0
}

var (
	statusPrefix = regexp.MustCompile(`^(\d{3})\b`)
	rateLimited  = regexp.MustCompile(`(?i)rate[ _-]?limit|too many requests|\b429\b`)
	authFailed   = regexp.MustCompile(`(?i)authentication|unauthori[sz]ed|invalid[ _-]?(x-)?api[ _-]?key|no api key|permission[ _-]denied|\b40[13]\b`)
	overloaded   = regexp.MustCompile(`(?i)overloaded|connection error|econnrefused|econnreset|socket hang up|timed? ?out|\b5\d\d\b`)
	tooLong      = regexp.MustCompile(`(?i)prompt is too long|context[ _-]length|maximum context|context window`)
	extraUsage   = regexp.MustCompile(`(?i)draw from your extra usage`)
)

// httpStatus is the HTTP status of a failed call: the code pi records in
// the message's diagnostics, else the one its error message starts with
// (the providers' SDKs write "429 {…}").
func (m *message) httpStatus() int {
	for _, d := range m.Diagnostics {
		if d.Error == nil {
			continue
		}
		switch c := d.Error.Code.(type) {
		case float64:
			if c >= 100 && c < 600 {
				return int(c)
			}
		case string:
			if n, err := strconv.Atoi(c); err == nil && n >= 100 && n < 600 {
				return n
			}
		}
	}
	if s := statusPrefix.FindString(strings.TrimSpace(m.ErrorMessage)); s != "" {
		n, _ := strconv.Atoi(s)
		return n
	}
	return 0
}

// failure types a failed model call (stopReason "error": pi exits 0 all
// the same) from its HTTP status first and its error message second. The
// message is structured metadata pi's runtime writes, not model prose, so
// a broad text match is safe.
func failure(m *message) error {
	msg := strings.TrimSpace(m.ErrorMessage)
	if msg == "" {
		msg = "no error message"
	}
	model := m.Provider + "/" + m.Model
	status := m.httpStatus()
	switch {
	case extraUsage.MatchString(msg):
		return engine.NewBackendError("USAGE_LIMIT_BLOCKED", false, fmt.Errorf(
			"Anthropic refused the Claude subscription (OAuth) credential: a client other than Claude Code draws from the subscription's extra-usage balance, which is empty. Add extra usage at claude.ai/settings/usage, set ANTHROPIC_API_KEY to use an API key, or run the node on claude_code (%s: %s)", model, msg))
	case status == 429 || status == 0 && rateLimited.MatchString(msg):
		return engine.NewBackendError(engine.CodeRateLimited, true, fmt.Errorf("the model API is rate limiting (%s): %s", model, msg))
	case status == 401 || status == 403 || status == 0 && authFailed.MatchString(msg):
		return engine.NewBackendError("AUTH_FAILED", false, fmt.Errorf("the model API refused the credentials (%s): check the provider's key (its variable, or the operator's pi login): %s", model, msg))
	case tooLong.MatchString(msg):
		return engine.NewBackendError(engine.CodeContextLengthExceeded, false, fmt.Errorf("the conversation is longer than the model's context (%s): %s", model, msg))
	case status >= 500 || status == 0 && overloaded.MatchString(msg):
		return engine.NewBackendError("NETWORK_TRANSIENT", true, fmt.Errorf("the model API failed (%s): %s", model, msg))
	}
	return engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("pi's model call failed (%s): %s", model, msg))
}

// promptRefused types pi refusing the prompt command itself (no model,
// no key).
func promptRefused(err error) error {
	msg := err.Error()
	if authFailed.MatchString(msg) {
		return engine.NewBackendError("AUTH_FAILED", false, fmt.Errorf("%s: set the provider's key, or log in with pi (auth.json in PI_CODING_AGENT_DIR)", msg))
	}
	return engine.NewBackendError(engine.CodeExecutionFailed, false, err)
}

// lastAssistant is the last assistant message of a list.
func lastAssistant(msgs []message) *message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			return &msgs[i]
		}
	}
	return nil
}

// finalOutput turns the last assistant message into the node's output, or
// the error that the model call failed.
func finalOutput(last *message, schema map[string]any) (map[string]any, error, error) {
	if last == nil {
		return nil, nil, engine.NewBackendError(engine.CodeExecutionFailed, false, errors.New("pi ended without an answer from the model"))
	}
	switch last.StopReason {
	case "error":
		return nil, nil, failure(last)
	case "aborted":
		return nil, nil, engine.NewBackendError(engine.CodeExecutionFailed, false, errors.New("pi's turn was aborted"))
	}
	out, perr := engine.ParseOutput(last.text(), schema)
	return out, perr, nil
}
