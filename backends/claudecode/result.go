package claudecode

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/iterion-bot/iterion/engine"
)

// account adds a result's tokens and cost to the execution's. A result
// covers the turns since the one before: its usage counts them, and
// model_usage_since_last_result prices them (total_cost_usd is the
// session's, which a resumed session carries over from before the pause).
// Cache reads and writes are not billed input.
func (r *run) account(ev *event) {
	if ev.Usage != nil {
		r.tokens += ev.Usage.InputTokens + ev.Usage.OutputTokens
	}
	if len(ev.ModelUsageSince) > 0 {
		for _, m := range ev.ModelUsageSince {
			r.cost += m.CostUSD
		}
		return
	}
	// An older Claude Code: the session's total, less what was counted.
	if ev.TotalCostUSD > r.costSeen {
		r.cost += ev.TotalCostUSD - r.costSeen
	}
	r.costSeen = ev.TotalCostUSD
}

// apiStatus finds the HTTP status of an API error in Claude Code's text
// ("API Error: 429 …").
var apiStatus = regexp.MustCompile(`API Error: (\d{3})\b`)

// failure types a result that ended the turn with an error. Claude Code's
// exit status says nothing of it (2.1.332 exits 1 alike for an API error
// and an interrupted turn, and a long-lived session's status comes only
// when its stdin closes), so the result is what is read: the API's
// status, then the text.
func failure(ev *event) error {
	text := clip(strings.TrimSpace(ev.Result), 500)
	status := 0
	if ev.APIErrorStatus != nil {
		status = *ev.APIErrorStatus
	} else if m := apiStatus.FindStringSubmatch(text); m != nil {
		status, _ = strconv.Atoi(m[1])
	}
	lower := strings.ToLower(text)
	what := fmt.Sprintf("%s, %s", ev.Subtype, ev.TerminalReason)
	switch {
	case ev.Subtype == "error_max_turns":
		return engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("the agent used more turns than the node allows (%d): %s", ev.NumTurns, text))
	case status == 401 || status == 403 || strings.Contains(lower, "authentication_error") || strings.Contains(lower, "invalid api key") || strings.Contains(lower, "x-api-key"):
		return engine.NewBackendError("AUTH_FAILED", false, fmt.Errorf("the model API refused the key (HTTP %d): check ANTHROPIC_API_KEY in the server's environment: %s", status, text))
	case status == 429 || strings.Contains(lower, "rate_limit"):
		return engine.NewBackendError(engine.CodeRateLimited, true, fmt.Errorf("the model API is rate limiting (HTTP %d): %s", status, text))
	case strings.Contains(lower, "prompt is too long") || strings.Contains(lower, "context length") || strings.Contains(lower, "context window"):
		return engine.NewBackendError(engine.CodeContextLengthExceeded, false, fmt.Errorf("the conversation no longer fits the model's context: %s", text))
	case status == 529 || status >= 500 || strings.Contains(lower, "overloaded") || strings.Contains(lower, "connection"):
		return engine.NewBackendError("NETWORK_TRANSIENT", true, fmt.Errorf("the model API failed (HTTP %d) after Claude Code's own retries: %s", status, text))
	case status > 0 || ev.TerminalReason == "api_error":
		return engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("the model API refused the request (HTTP %d): %s", status, text))
	}
	if text == "" {
		text = "no message"
	}
	return engine.NewBackendError(engine.CodeExecutionFailed, false, fmt.Errorf("Claude Code ended the turn with an error (%s): %s", what, text))
}
