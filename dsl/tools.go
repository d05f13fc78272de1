package dsl

import (
	"slices"
	"strings"
)

// claudeCodeTools maps the names a node's tools: may use onto Claude
// Code's built-in tools: iterion's own names (claw's, and upstream's
// aliases of them) and Claude Code's names themselves.
var claudeCodeTools = map[string]string{
	"read_file": "Read", "write_file": "Write", "edit_file": "Edit", "file_edit": "Edit",
	"list_files": "Glob", "glob": "Glob", "grep": "Grep", "bash": "Bash",
	"web_fetch": "WebFetch", "web_search": "WebSearch",
	"Read": "Read", "Write": "Write", "Edit": "Edit", "Glob": "Glob", "Grep": "Grep", "Bash": "Bash",
	"NotebookEdit": "NotebookEdit", "WebFetch": "WebFetch", "WebSearch": "WebSearch",
}

// ClaudeCodeTool returns the Claude Code built-in tool that a node's tool
// name stands for on backend claude_code (read_file is Read, list_files is
// Glob, bash is Bash, and Claude Code's own names stand for themselves),
// and false for a name with none.
func ClaudeCodeTool(name string) (string, bool) {
	t, ok := claudeCodeTools[name]
	return t, ok
}

// ClaudeCodeToolNames lists the names ClaudeCodeTool accepts, sorted, for
// messages.
func ClaudeCodeToolNames() []string {
	var names []string
	for n := range claudeCodeTools {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// checkClaudeCodeTools reports (C135) each tool of n that Claude Code has
// no built-in for, when n runs on claude_code: its primary backend, or a
// fallback route's.
func (c *compiler) checkClaudeCodeTools(n *Node, backend string) {
	on := backend == "claude_code"
	for _, fb := range c.fallbackBackends[n.ID] {
		on = on || fb.value == "claude_code"
	}
	if !on || len(n.LLM.Tools) == 0 {
		return
	}
	items := c.listItems(n.ID, "tools")
	for i, name := range n.LLM.Tools {
		if _, ok := ClaudeCodeTool(name); ok {
			continue
		}
		hint := "use one of: " + strings.Join(ClaudeCodeToolNames(), ", ")
		if near := nearest(name, ClaudeCodeToolNames()); near != "" {
			hint = "did you mean " + near + "? The names are: " + strings.Join(ClaudeCodeToolNames(), ", ")
		}
		start, end := c.propSpan(n.ID, "tools")
		if i < len(items) {
			start, end = items[i].Span()
		}
		d := c.errorf(start, end, UnknownTool, hint, "%s %q runs on backend claude_code, and Claude Code has no built-in tool for %q", n.Kind, n.ID, name)
		d.NodeID = n.ID
	}
}

// listItems returns the items of a node property's list value, nil when
// it is not a list.
func (c *compiler) listItems(id, prop string) []Value {
	d := c.nodeDecls[id]
	if d == nil {
		return nil
	}
	for _, p := range d.Props {
		if l, ok := p.Value.(*ListLit); ok && p.Key.Name == prop {
			return l.Items
		}
	}
	return nil
}
