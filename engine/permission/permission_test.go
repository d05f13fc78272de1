package permission

import (
	"strings"
	"testing"
)

func policy(t *testing.T, mode Mode, allow, ask, deny []string) *Policy {
	t.Helper()
	p := &Policy{Mode: mode}
	for _, l := range []struct {
		in  []string
		out *[]Rule
	}{{allow, &p.Allow}, {ask, &p.Ask}, {deny, &p.Deny}} {
		rules, err := ParseRules(l.in)
		if err != nil {
			t.Fatal(err)
		}
		*l.out = rules
	}
	return p
}

func bash(cmd string) Call { return Call{Tool: "bash", Input: map[string]any{"command": cmd}} }
func read(p string) Call   { return Call{Tool: "read_file", Input: map[string]any{"path": p}} }

func TestDecide(t *testing.T) {
	p := policy(t, Ask,
		[]string{"Read(**)", "Edit(pkg/**)", "Bash(go test:*)", "Grep", "mcp__github__get_*", "WebFetch(domain:docs.example)"},
		[]string{"Bash(git push:*)"},
		[]string{"Bash(rm -rf:*)", "Read(.env*)", "WebFetch(domain:evil.example)"})
	cases := []struct {
		name string
		call Call
		want Decision
		rule string
	}{
		{"allowed test run", bash("go test ./..."), Allow, "Bash(go test:*)"},
		{"the bare prefix", bash("go test"), Allow, "Bash(go test:*)"},
		{"a longer word is no prefix match", bash("go testify"), AskPerson, ""},
		{"chained after an allowed command", bash("go test ./... && curl evil.example"), AskPerson, ""},
		{"substitution in an allowed command", bash("go test $(curl evil.example)"), AskPerson, ""},
		{"denied anywhere in a chain", bash("echo hi; rm -rf /"), Refuse, "Bash(rm -rf:*)"},
		{"denied inside a substitution", bash("echo $(rm -rf /tmp/x)"), Refuse, "Bash(rm -rf:*)"},
		{"ask rule", bash("git push origin main"), AskPerson, "Bash(git push:*)"},
		{"unmatched falls to the mode", bash("make"), AskPerson, ""},
		{"read anything", read("cmd/main.go"), Allow, "Read(**)"},
		{"deny wins over allow", read(".env.local"), Refuse, "Read(.env*)"},
		{"a dot path is cleaned", read("sub/../.env"), Refuse, "Read(.env*)"},
		{"edit inside", Call{Tool: "edit_file", Input: map[string]any{"path": "pkg/a/b.go"}}, Allow, "Edit(pkg/**)"},
		{"edit outside", Call{Tool: "edit_file", Input: map[string]any{"path": "cmd/a.go"}}, AskPerson, ""},
		{"edit climbing out", Call{Tool: "Edit", Input: map[string]any{"file_path": "pkg/../cmd/a.go"}}, AskPerson, ""},
		{"bare tool", Call{Tool: "grep", Input: map[string]any{"pattern": "x"}}, Allow, "Grep"},
		{"tool-name glob", Call{Tool: "mcp__github__get_issue"}, Allow, "mcp__github__get_*"},
		{"tool-name glob miss", Call{Tool: "mcp__github__create_issue"}, AskPerson, ""},
		{"domain", Call{Tool: "web_fetch", Input: map[string]any{"url": "https://api.docs.example/x"}}, Allow, "WebFetch(domain:docs.example)"},
		{"denied domain", Call{Tool: "WebFetch", Input: map[string]any{"url": "https://evil.example/"}}, Refuse, "WebFetch(domain:evil.example)"},
		{"a host that only ends like the domain", Call{Tool: "WebFetch", Input: map[string]any{"url": "https://notdocs.example/"}}, AskPerson, ""},
		{"iterion's own tools are never gated", Call{Tool: "ask_user"}, Allow, ""},
		{"nor its MCP tools", Call{Tool: "mcp__iterion__await_answers"}, Allow, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := p.Decide(c.call)
			if v.Decision != c.want || v.Rule != c.rule {
				t.Errorf("Decide(%+v) = %v by %q, want %v by %q", c.call, v.Decision, v.Rule, c.want, c.rule)
			}
		})
	}
}

func TestModes(t *testing.T) {
	for _, c := range []struct {
		mode Mode
		want Decision
	}{{Off, Allow}, {Ask, AskPerson}, {Deny, Refuse}} {
		p := &Policy{Mode: c.mode}
		if got := p.Decide(bash("make")).Decision; got != c.want {
			t.Errorf("mode %v: %v, want %v", c.mode, got, c.want)
		}
	}
	var none *Policy
	if none.Decide(bash("rm -rf /")).Decision != Allow || none.Gated() {
		t.Error("a nil policy gates")
	}
	// Deny rules bite even when the mode is off.
	p := policy(t, Off, nil, nil, []string{"Bash"})
	if !p.Gated() || p.Decide(bash("ls")).Decision != Refuse {
		t.Error("a deny rule under mode off did not refuse")
	}
}

func TestParseRuleErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "empty"},
		{"Bash(go test", "not closed"},
		{"Bash()", "pattern is empty"},
		{"(x)", "names no tool"},
		{"Ba sh", "no tool name"},
		{"mcp__*(x)", "takes no pattern"},
		{strings.Repeat("a", MaxRuleLen+1), "longer than"},
	} {
		if _, err := ParseRule(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseRule(%.30q) = %v, want an error saying %q", c.in, err, c.want)
		}
	}
	if _, err := ParseRules([]string{"Bash(", "Read(", "Grep"}); err == nil || strings.Count(err.Error(), "not closed") != 2 {
		t.Errorf("ParseRules names every bad rule: %v", err)
	}
	if _, err := ParseMode("maybe"); err == nil || !strings.Contains(err.Error(), "off, ask or deny") {
		t.Errorf("ParseMode(maybe) = %v", err)
	}
}

// FuzzDecide: any rule text either parses or says why, and any call is
// decided without a panic; a parsed deny rule refuses whatever it matches
// under every mode.
func FuzzDecide(f *testing.F) {
	f.Add("Bash(go test:*)", "bash", "go test ./... && rm -rf /")
	f.Add("Read(**/*.go)", "read_file", "a/../b.go")
	f.Add("WebFetch(domain:x.y)", "web_fetch", "https://a.x.y/")
	f.Add("mcp__*", "mcp__a__b", "")
	f.Fuzz(func(t *testing.T, rule, tool, arg string) {
		r, err := ParseRule(rule)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error with no words")
			}
			return
		}
		call := Call{Tool: tool, Input: map[string]any{"command": arg, "path": arg, "url": arg}}
		deny := &Policy{Mode: Off, Deny: []Rule{r}}
		v := deny.Decide(call)
		if v.Decision == Refuse && v.Rule != r.Text {
			t.Fatalf("refused by %q, not the only rule %q", v.Rule, r.Text)
		}
		for _, m := range []Mode{Off, Ask, Deny} {
			p := &Policy{Mode: m, Deny: []Rule{r}, Allow: []Rule{r}}
			if got := p.Decide(call); got.Decision != v.Decision && v.Decision == Refuse {
				t.Fatalf("mode %v: a deny rule that matched gave %v", m, got.Decision)
			}
		}
	})
}
