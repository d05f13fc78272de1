// Package permission decides whether an agent's tool call may run: one
// deterministic policy for every backend (claw's own tools, Claude Code's
// hooks, pi's extension), evaluated outside the model's reach.
//
// A policy has a mode and three rule lists. Rules are written as Claude
// Code writes them: a bare tool name ("Grep") matches any use of the tool,
// "Tool(pattern)" matches an argument of it:
//
//	Bash(go test:*)       a command starting with "go test" (":*" is a prefix match)
//	Bash(make)            exactly "make"; "*" and "**" are greedy wildcards
//	Read(**), Edit(pkg/**) a file path, matched as a gitignore-style glob
//	WebFetch(domain:example.com)  a URL's host (or the host, or the full URL)
//	mcp__github__get_*    tool names with a wildcard
//
// A call is decided deny rules first, then ask rules, then allow rules, then
// the mode: off allows, ask asks a person, deny refuses. The tools iterion
// itself offers for asking people (ask_user, ask_user_async,
// await_answers, and iterion's own MCP tools) are never gated: gating them
// in ask mode would ask before asking.
package permission

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
)

// Mode is what a call no rule matches gets.
type Mode int

// The modes.
const (
	// Off gates nothing: every call runs (the default).
	Off Mode = iota
	// Ask asks a person about a call no rule allows, and waits.
	Ask
	// Deny refuses a call no rule allows, without asking.
	Deny
)

// ParseMode reads "off", "ask" or "deny".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "off", "":
		return Off, nil
	case "ask":
		return Ask, nil
	case "deny":
		return Deny, nil
	}
	return Off, fmt.Errorf("permission %q: want off, ask or deny", s)
}

func (m Mode) String() string {
	switch m {
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return "off"
}

// Decision is what a policy says of one call.
type Decision int

// The decisions.
const (
	Allow Decision = iota
	AskPerson
	Refuse
)

func (d Decision) String() string {
	switch d {
	case AskPerson:
		return "ask"
	case Refuse:
		return "deny"
	}
	return "allow"
}

// Rule is one parsed rule.
type Rule struct {
	// Text is the rule as written, for messages.
	Text string
	// Tool is the canonical tool name or a name glob ("*", "mcp__x__*").
	Tool string
	// Pattern is the argument pattern; "" with HasPattern false matches
	// any use.
	Pattern    string
	HasPattern bool
}

// MaxRuleLen bounds a rule, for hostile workflow files.
const MaxRuleLen = 1024

// ParseRule reads one rule. The error names what is wrong with it.
func ParseRule(s string) (Rule, error) {
	text := strings.TrimSpace(s)
	switch {
	case text == "":
		return Rule{}, errors.New("a rule is empty: write a tool name, or Tool(pattern)")
	case len(text) > MaxRuleLen:
		return Rule{}, fmt.Errorf("a rule is longer than %d bytes", MaxRuleLen)
	}
	r := Rule{Text: text}
	name, rest, scoped := strings.Cut(text, "(")
	name = strings.TrimSpace(name)
	if scoped {
		if !strings.HasSuffix(rest, ")") {
			return Rule{}, fmt.Errorf("rule %q: the pattern is not closed with ')'", text)
		}
		r.Pattern, r.HasPattern = strings.TrimSuffix(rest, ")"), true
		if r.Pattern == "" {
			return Rule{}, fmt.Errorf("rule %q: the pattern is empty; write %s alone to match any use", text, name)
		}
	}
	if name == "" {
		return Rule{}, fmt.Errorf("rule %q names no tool", text)
	}
	for _, c := range name {
		if !(c == '_' || c == '*' || c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return Rule{}, fmt.Errorf("rule %q: %q is no tool name (letters, digits, '_', '-', '.', and '*' as a wildcard)", text, name)
		}
	}
	r.Tool = Canonical(name)
	if r.HasPattern && strings.Contains(r.Tool, "*") {
		return Rule{}, fmt.Errorf("rule %q: a tool-name wildcard takes no pattern", text)
	}
	return r, nil
}

// ParseRules reads a list of rules; the error names every bad one.
func ParseRules(list []string) ([]Rule, error) {
	var rules []Rule
	var errs []error
	for _, s := range list {
		r, err := ParseRule(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rules = append(rules, r)
	}
	return rules, errors.Join(errs...)
}

// Policy is a node's resolved permission policy. The zero value gates
// nothing.
type Policy struct {
	Mode             Mode
	Allow, Ask, Deny []Rule
}

// Gated reports whether the policy can refuse or hold a call.
func (p *Policy) Gated() bool {
	return p != nil && (p.Mode != Off || len(p.Deny) > 0 || len(p.Ask) > 0)
}

// CanAsk reports whether some call can be held for a person.
func (p *Policy) CanAsk() bool { return p != nil && (p.Mode == Ask || len(p.Ask) > 0) }

// Call is one tool call, as a backend names it.
type Call struct {
	// Tool is the backend's name of the tool (bash, Bash, read_file, …).
	Tool string
	// Input is the call's arguments.
	Input map[string]any
}

// Verdict is a decision and the rule that made it ("" for the mode).
type Verdict struct {
	Decision Decision
	Rule     string
}

// Reason says why, for the message the model reads back.
func (v Verdict) Reason(mode Mode) string {
	if v.Rule != "" {
		return fmt.Sprintf("the rule %s", v.Rule)
	}
	return fmt.Sprintf("permission: %s (no rule allows it)", mode)
}

// RefusedText is what the model reads back for a refused call, on every
// backend: why, and not to go around it.
func RefusedText(reason string) string {
	return fmt.Sprintf("refused by the workflow's permission policy (%s). Do not try to reach the same effect another way; do the rest of the task, and say in your answer what you could not do.", reason)
}

// Decide says whether c may run: deny rules, then ask rules, then allow
// rules, then the mode. A nil policy allows everything.
func (p *Policy) Decide(c Call) Verdict {
	if p == nil || exempt(c.Tool) {
		return Verdict{Decision: Allow}
	}
	tool := Canonical(c.Tool)
	for _, set := range []struct {
		rules []Rule
		d     Decision
	}{{p.Deny, Refuse}, {p.Ask, AskPerson}, {p.Allow, Allow}} {
		for _, r := range set.rules {
			if r.matches(tool, c.Input, set.d == Allow) {
				return Verdict{Decision: set.d, Rule: r.Text}
			}
		}
	}
	switch p.Mode {
	case Ask:
		return Verdict{Decision: AskPerson}
	case Deny:
		return Verdict{Decision: Refuse}
	}
	return Verdict{Decision: Allow}
}

// exempt reports whether tool is iterion's own way of asking people.
func exempt(tool string) bool {
	switch tool {
	case "ask_user", "ask_user_async", "await_answers":
		return true
	}
	return strings.HasPrefix(tool, "mcp__iterion__")
}

// Canonical maps a backend's name of a tool onto the name rules use, so
// one rule gates the same tool on every backend: claw's bash and pi's bash
// are Bash, read_file is Read, and so on. Other names are kept.
func Canonical(tool string) string {
	switch strings.ToLower(tool) {
	case "bash", "shell":
		return "Bash"
	case "read", "read_file":
		return "Read"
	case "write", "write_file":
		return "Write"
	case "edit", "edit_file", "file_edit", "multiedit":
		return "Edit"
	case "notebookedit":
		return "NotebookEdit"
	case "grep":
		return "Grep"
	case "glob", "find":
		return "Glob"
	case "ls", "list_files":
		return "LS"
	case "webfetch", "web_fetch":
		return "WebFetch"
	case "websearch", "web_search":
		return "WebSearch"
	}
	return tool
}

// matches reports whether r matches a call of tool (canonical) with input.
// A command is matched so that a rule cannot be slipped past by chaining:
// an allow rule matches only a simple command (no ';', '&', '|', newline,
// substitution or redirection), and a deny or ask rule matches when any
// command of a chain matches it.
func (r Rule) matches(tool string, input map[string]any, allow bool) bool {
	if !globName(r.Tool, tool) {
		return false
	}
	if !r.HasPattern {
		return true
	}
	switch tool {
	case "Bash":
		cmd := str(input, "command")
		if allow {
			return simpleCommand(cmd) && matchCommand(r.Pattern, cmd)
		}
		for _, part := range commandParts(cmd) {
			if matchCommand(r.Pattern, part) {
				return true
			}
		}
		return false
	case "Read", "Write", "Edit", "NotebookEdit", "Grep", "Glob", "LS":
		p := str(input, "path", "file_path", "notebook_path")
		if p == "" && (tool == "Grep" || tool == "Glob" || tool == "LS") {
			p = "."
		}
		return matchPath(r.Pattern, p)
	case "WebFetch":
		return matchURL(r.Pattern, str(input, "url"))
	}
	// Another tool's pattern is matched against its whole input, as text.
	for _, v := range input {
		if s, ok := v.(string); ok && matchCommand(r.Pattern, s) {
			return true
		}
	}
	return false
}

func str(input map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := input[k].(string); ok {
			return s
		}
	}
	return ""
}

// globName matches a tool name against a name with '*' wildcards.
func globName(pattern, name string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == name
	}
	return wildcard(pattern, name)
}

// wildcard matches s against pattern, where each '*' (or "**") matches
// any run of characters.
func wildcard(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, last)
}

// matchCommand matches a shell command: "prefix:*" is a prefix match, a
// pattern with '*' a greedy wildcard match, any other exact. Commands are
// compared with their surrounding space trimmed.
func matchCommand(pattern, cmd string) bool {
	cmd = strings.TrimSpace(cmd)
	if prefix, ok := strings.CutSuffix(pattern, ":*"); ok {
		prefix = strings.TrimSpace(prefix)
		return cmd == prefix || strings.HasPrefix(cmd, prefix+" ") || strings.HasPrefix(cmd, prefix+"\t")
	}
	return wildcard(strings.TrimSpace(pattern), cmd)
}

// shellSpecial are the characters that chain, substitute or redirect.
const shellSpecial = ";&|\n`$()<>"

// simpleCommand reports whether cmd is one command, with nothing chained,
// substituted or redirected.
func simpleCommand(cmd string) bool { return !strings.ContainsAny(cmd, shellSpecial) }

// commandParts splits cmd at every character that chains, substitutes or
// redirects: each part is a command that may run.
func commandParts(cmd string) []string {
	parts := strings.FieldsFunc(cmd, func(r rune) bool { return strings.ContainsRune(shellSpecial, r) })
	return append(parts, cmd)
}

// matchPath matches a workspace path against a gitignore-style glob:
// "**" matches any number of directories, "*" any run within one, "?" one
// character. The path is cleaned first, so "./a/../b" is "b"; a pattern
// with no '/' matches the path's last element anywhere ("*.go").
func matchPath(pattern, p string) bool {
	p = path.Clean(strings.TrimPrefix(p, "./"))
	pattern = strings.TrimPrefix(pattern, "./")
	if pattern == "**" || pattern == "**/*" {
		return true
	}
	if !strings.Contains(pattern, "/") {
		ok, _ := path.Match(pattern, path.Base(p))
		return ok
	}
	return globSegments(strings.Split(pattern, "/"), strings.Split(p, "/"))
}

func globSegments(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			if len(rest) == 0 {
				return true
			}
			for i := range len(segs) + 1 {
				if globSegments(rest, segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// matchURL matches "domain:host" against the URL's host (and its
// subdomains), a bare host the same way, and anything else against the
// whole URL with wildcards.
func matchURL(pattern, raw string) bool {
	u, err := url.Parse(raw)
	host := ""
	if err == nil {
		host = strings.ToLower(u.Hostname())
	}
	want, isDomain := strings.CutPrefix(pattern, "domain:")
	if !isDomain && !strings.ContainsAny(pattern, "/:*") {
		want, isDomain = pattern, true
	}
	if isDomain {
		want = strings.ToLower(strings.TrimSpace(want))
		return host != "" && (host == want || strings.HasSuffix(host, "."+want))
	}
	return wildcard(pattern, raw)
}
