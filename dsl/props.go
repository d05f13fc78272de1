package dsl

import (
	"sort"

	"github.com/iterion-bot/iterion/internal/textdist"
)

// The property tables: which properties each declaration accepts. A
// property marked false is an upstream property this implementation parses
// but does not run; it is reported as unsupported rather than ignored. A
// name in neither set is unknown (E012) and gets the nearest valid name.

var llmProps = map[string]bool{
	"model": true, "backend": true, "input": true, "output": true, "system": true, "user": true,
	"publish": true, "description": true, "session": true, "interaction": true, "tools": true, "sandbox": true,
	"tool_max_steps": true, "max_tokens": true, "reasoning_effort": true, "timeout": true, "await": true,
	"fallbacks": false, "provider": false, "command": false, "artifact_labels": false,
	"interaction_prompt": false, "interaction_model": false, "tool_policy": false, "capabilities": false,
	"skills": false, "permission": true, "allow": true, "ask": true, "deny": true, "mcp": true, "compaction": false,
	"compress": false, "needs": false, "readonly": true, "full_access": false, "images": false,
	"memory": false, "cursors": false, "auto_memory": false, "session_slot": false,
	"answer_on": true, "answerers": true,
	"remind": true, "escalate": true, "expire": true, "default": true,
}

var nodeProps = map[string]map[string]bool{
	"agent": llmProps,
	"judge": llmProps,
	"human": {
		"instructions": true, "input": true, "output": true, "interaction": true, "description": true,
		"publish": true, "model": true, "backend": true, "system": true, "await": true,
		"artifact_labels": false, "interaction_prompt": false, "interaction_model": false,
		"min_answers": false, "review_url": false, "posture": false, "merge_strategy": false,
		"merge_into": false, "max_turns": false, "answer_on": true, "answerers": true,
		"remind": true, "escalate": true, "expire": true, "default": true,
	},
	"router": {
		"mode": true, "model": true, "backend": true, "system": true, "user": true, "multi": true,
		"description": true,
		"over":        false, "as": false, "key": false, "depends_on": false, "provider": false,
	},
	"tool": {
		"command": true, "input": true, "output": true, "publish": true, "await": true, "timeout": true,
		"description": true, "sandbox": true,
		"script": true, "language": true, "action": false, "needs": false, "permission": true,
		"parallel_safe": false, "goal": false, "postcondition": false, "policy": false,
		"recovery": false, "artifact_labels": false,
	},
	"compute": {
		"expr": true, "input": true, "output": true, "publish": true, "await": true, "description": true,
		"artifact_labels": false,
	},
	"emit":          {"event": true, "with": true, "description": true},
	"wait":          {"event": true, "timeout": true, "output": true, "description": true},
	"await_answers": {"from": true, "timeout": true, "description": true},
	"fail":          {"code": true, "message": true, "resumable": true, "description": true},
}

var workflowProps = map[string]bool{
	"entry": true, "default_backend": true, "interaction": true, "budget": true, "vars": true,
	"description": true, "sandbox": true,
	"worktree": false, "resources": false, "attachments": false, "tool_policy": false,
	"capabilities": false, "skills": false, "mcp": true, "compaction": false, "compress": false,
	"permission": true, "allow": true, "ask": true, "deny": true,
	"loop_budget_guard": false, "repo_devbox": false, "workspace_checkpoint": false,
	"auto_memory": false,
}

var budgetProps = map[string]bool{
	"max_parallel_branches": true, "max_duration": true, "max_cost_usd": true, "max_tokens": true,
	"warn_tokens": true, "max_iterations": true,
	"daily_cost_usd": false,
}

// mcpServerProps are the properties of an mcp_server declaration; auth:
// is read so that its type gets upstream's C038, and then refused.
var mcpServerProps = map[string]bool{
	"transport": true, "command": true, "args": true, "url": true, "env": true, "auth": true,
}

// mcpConfigKeys are the keys of an mcp: block, on a workflow or a node.
var mcpConfigKeys = []string{"servers", "disable", "inherit", "autoload_project"}

// unsupportedDecls are upstream top-level declarations this implementation
// parses (skipping their bodies) and refuses.
var unsupportedDecls = map[string]string{
	"subbot":       "nested runs (subbot)",
	"group":        "compile-time groups (group)",
	"use":          "group instantiation (use)",
	"import":       "imports of other .bot files",
	"cursor":       "cursors",
	"supervisor":   "supervisors",
	"secrets":      "secrets declarations",
	"attachments":  "attachments",
	"contract":     "contracts",
	"connector":    "connectors",
	"memory":       "memory declarations",
	"capabilities": "capability declarations",
}

// supportedNames lists the names a table accepts and runs, sorted.
func supportedNames(table map[string]bool) []string {
	var names []string
	for name, ok := range table {
		if ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// nearest returns the candidate closest to name by edit distance, or "" when
// none is close enough to be a plausible typo.
func nearest(name string, candidates []string) string {
	// A typo is a few edits: at most a third of the name, and at least two
	// (a transposition), so "finalize" does not suggest "fail".
	best, bestD := "", max(2, len(name)/3)+1
	for _, c := range candidates {
		if diff := len(c) - len(name); diff >= bestD || -diff >= bestD {
			continue // the distance is at least the difference in length
		}
		if d := textdist.Distance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}
