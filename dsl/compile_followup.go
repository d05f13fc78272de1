package dsl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FollowUp is what happens to a node's unanswered questions as time
// passes: reminders, one escalation, and expiry. It is declared on a
// human node (its blocking question) and on an agent or judge with
// interaction: async (each question it posts).
//
//	remind: "2h"                                   a reminder every 2h
//	escalate: {after: "8h", to: ["@acme/maintainers", "alice"]}
//	expire: "24h"                                  then answered with default:,
//	default: "no"                                  or, without one, the run fails
type FollowUp struct {
	// Remind, when set, is how often the asked people are reminded.
	Remind time.Duration
	// EscalateAfter, when set, is when EscalateTo (GitHub logins and
	// @org/team handles) may answer too, and are told.
	EscalateAfter time.Duration
	EscalateTo    []string
	// Expire, when set, is when an unanswered question expires: answered
	// with Default when there is one, else (a human node) the run fails
	// with the question unanswered.
	Expire time.Duration
	// Default is the answer on expiry: for a human node, its form's
	// fields (name → value as text, checked against the schema here); for
	// an async node, the answer's text under AsyncDefaultKey, checked
	// against the question's options when it is asked. nil means none.
	Default map[string]string
}

// AsyncDefaultKey holds an async node's default answer in
// FollowUp.Default.
const AsyncDefaultKey = "question"

// followUpProps are the properties a FollowUp is read from.
var followUpProps = []string{"remind", "escalate", "expire", "default"}

// followUp reads n's reminders, escalation and expiry; nil when it
// declares none.
func (c *compiler) followUp(n *Node, props map[string]*Property) *FollowUp {
	var declared []*Property
	for _, k := range followUpProps {
		if p := props[k]; p != nil {
			declared = append(declared, p)
		}
	}
	if len(declared) == 0 {
		return nil
	}
	async := n.LLM != nil && n.LLM.Interaction == InteractionAsync && n.Kind != NodeHuman
	human := n.Kind == NodeHuman && n.Human != nil && n.Human.Interaction != InteractionLLM
	if !async && !human {
		for _, p := range declared {
			c.errorf(p.Key.Start, p.Key.End, BadFollowUp, "declare it on a human node, or on an agent or judge with interaction: async",
				"%s on %s %q: only a question to a person is reminded, escalated or expired", p.Key.Name, n.Kind, n.ID)
		}
		return nil
	}
	f := &FollowUp{}
	f.Remind = c.followUpDuration(n, props["remind"], "remind", `"2h"`)
	if p := props["escalate"]; p != nil {
		c.escalate(n, f, p)
	}
	f.Expire = c.followUpDuration(n, props["expire"], "expire", `"24h"`)
	if p := props["default"]; p != nil {
		switch {
		case props["expire"] == nil:
			c.errorf(p.Key.Start, p.Key.End, BadFollowUp, `add expire: "24h": the default answers a question once it expires`,
				"default on %s %q without expire: it would never be used", n.Kind, n.ID)
		case human:
			f.Default = c.humanDefault(n, p)
		default:
			if s, ok := c.str(p); ok {
				if strings.TrimSpace(s) == "" {
					c.errorAtValue(p.Value, BadFollowUp, `write the answer the question gets when it expires, like default: "skip"`, "default of %s %q is empty", n.Kind, n.ID)
				} else {
					f.Default = map[string]string{AsyncDefaultKey: s}
				}
			}
		}
	} else if async && props["expire"] != nil {
		p := props["expire"]
		c.errorf(p.Key.Start, p.Key.End, BadFollowUp, `add default: "…", the answer an expired question gets; or drop expire: and let the await_answers timeout fail the gate with the unanswered questions`,
			"expire on %s %q without default: an async question that expires needs an answer to give the agent", n.Kind, n.ID)
	}
	if f.Expire > 0 {
		for _, later := range []struct {
			name string
			d    time.Duration
		}{{"remind", f.Remind}, {"escalate after", f.EscalateAfter}} {
			if later.d >= f.Expire {
				p := props[strings.Fields(later.name)[0]]
				c.errorf(p.Key.Start, p.Key.End, BadFollowUp, fmt.Sprintf("make %s shorter than expire (%s), or drop it", later.name, f.Expire),
					"%s %s on %s %q comes when the question has already expired (expire: %s)", later.name, later.d, n.Kind, n.ID, f.Expire)
			}
		}
	}
	return f
}

// followUpDuration reads a positive duration; 0 when p is nil or wrong
// (reported).
func (c *compiler) followUpDuration(n *Node, p *Property, name, example string) time.Duration {
	if p == nil {
		return 0
	}
	s, ok := c.str(p)
	if !ok {
		return 0
	}
	d, err := duration(s)
	if err != nil {
		c.errorAtValue(p.Value, BadFollowUp, fmt.Sprintf("use a positive Go duration such as %s", example), "%s of %s %q is %q: %v", name, n.Kind, n.ID, s, err)
		return 0
	}
	return d
}

// escalate reads escalate: {after: "8h", to: [...]}.
func (c *compiler) escalate(n *Node, f *FollowUp, p *Property) {
	const hint = `write escalate: {after: "8h", to: ["@acme/maintainers", "alice"]}`
	var entries []*Property
	switch v := p.Value.(type) {
	case *MapLit:
		entries = v.Entries
	case *BlockLit:
		entries = v.Props
	default:
		c.errorAtValue(p.Value, BadFollowUp, hint, "escalate of %s %q must be a mapping with after: and to:", n.Kind, n.ID)
		return
	}
	got := map[string]*Property{}
	for _, e := range entries {
		switch e.Key.Name {
		case "after", "to":
			got[e.Key.Name] = e
		default:
			c.errorf(e.Key.Start, e.Key.End, BadFollowUp, hint, "escalate of %s %q has no key %q (its keys are after and to)", n.Kind, n.ID, e.Key.Name)
		}
	}
	if got["after"] == nil || got["to"] == nil {
		c.errorAtValue(p.Value, BadFollowUp, hint, "escalate of %s %q needs both after: and to:", n.Kind, n.ID)
	}
	f.EscalateAfter = c.followUpDuration(n, got["after"], "escalate after", `"8h"`)
	if to := got["to"]; to != nil {
		for _, who := range c.stringList(to) {
			if !validAnswerer(who) {
				c.errorAtValue(to.Value, BadFollowUp, `name GitHub logins ("alice") or teams ("@acme/maintainers")`, "escalate to %q of %s %q is neither a GitHub login nor an @org/team", who, n.Kind, n.ID)
				continue
			}
			f.EscalateTo = append(f.EscalateTo, who)
		}
		if len(f.EscalateTo) == 0 && got["after"] != nil {
			c.errorAtValue(to.Value, BadFollowUp, hint, "escalate of %s %q names nobody to escalate to", n.Kind, n.ID)
		}
	}
}

// validAnswerer reports whether who is a GitHub login ("alice") or a
// team ("@acme/maintainers"): letters, digits and single hyphens, not at
// either end; a team's slug may hold underscores too.
func validAnswerer(who string) bool {
	login := func(s string, team bool) bool {
		if s == "" || len(s) > 100 || s[0] == '-' || s[len(s)-1] == '-' {
			return false
		}
		for _, r := range s {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || team && r == '_') {
				return false
			}
		}
		return true
	}
	if org, team, ok := strings.Cut(strings.TrimPrefix(who, "@"), "/"); strings.HasPrefix(who, "@") {
		return ok && login(org, false) && login(team, true)
	}
	return login(who, false)
}

// humanDefault reads a human node's default: text for a form of one
// field, or a mapping of every field; each value is checked against its
// field's type and enum.
func (c *compiler) humanDefault(n *Node, p *Property) map[string]string {
	if n.Output == nil || len(n.Output.Fields) == 0 {
		c.errorf(p.Key.Start, p.Key.End, BadFollowUp, "add output: <schema> for the answers, whose fields the default fills", "default on human %q, which has no output schema to fill", n.ID)
		return nil
	}
	out := map[string]string{}
	var entries []*Property
	switch v := p.Value.(type) {
	case *MapLit:
		entries = v.Entries
	case *BlockLit:
		entries = v.Props
	default:
		if len(n.Output.Fields) != 1 {
			c.errorAtValue(p.Value, BadFollowUp, fmt.Sprintf("write default: {%s}", exampleDefault(n.Output)),
				"default of human %q must give each field of %s", n.ID, n.Output.Name)
			return nil
		}
		if s, ok := scalarText(p.Value); ok {
			if c.checkDefault(n, n.Output.Fields[0], p.Value, s) {
				out[n.Output.Fields[0].Name] = s
			}
			return out
		}
		c.errorAtValue(p.Value, BadFollowUp, fmt.Sprintf("write default: {%s}", exampleDefault(n.Output)), "default of human %q must be a value or a mapping of its fields", n.ID)
		return nil
	}
	for _, e := range entries {
		fd := n.Output.Field(e.Key.Name)
		if fd == nil {
			c.errorf(e.Key.Start, e.Key.End, BadFollowUp, "the fields are "+fieldNames(n.Output), "default of human %q gives %q, which is not a field of %s", n.ID, e.Key.Name, n.Output.Name)
			continue
		}
		s, ok := scalarText(e.Value)
		if !ok {
			c.errorAtValue(e.Value, BadFollowUp, "write a text, a number or true/false", "default %s of human %q must be a single value", e.Key.Name, n.ID)
			continue
		}
		if c.checkDefault(n, fd, e.Value, s) {
			out[fd.Name] = s
		}
	}
	for _, fd := range n.Output.Fields {
		if _, given := out[fd.Name]; !given && !slices.ContainsFunc(entries, func(e *Property) bool { return e.Key.Name == fd.Name }) {
			c.errorAtValue(p.Value, BadFollowUp, fmt.Sprintf("write default: {%s}", exampleDefault(n.Output)), "default of human %q gives no %s (every field of %s needs one)", n.ID, fd.Name, n.Output.Name)
		}
	}
	return out
}

// checkDefault checks default text s of field fd.
func (c *compiler) checkDefault(n *Node, fd *Field, v Value, s string) bool {
	bad := func(hint, why string) bool {
		c.errorAtValue(v, BadFollowUp, hint, "default %s of human %q is %q: %s", fd.Name, n.ID, s, why)
		return false
	}
	switch {
	case fd.Type.List || fd.Type.Kind == TypeJSON || fd.Type.Kind == TypeFile:
		return bad("give a default only to string, bool, int, float or enum fields, or drop default: so that expiry fails the run", "a "+fd.Type.String()+" field takes no default")
	case len(fd.Enum) > 0 && !slices.Contains(fd.Enum, s):
		return bad("use one of: "+strings.Join(fd.Enum, ", "), "not one of the field's options")
	case fd.Type.Kind == TypeBool:
		if _, err := strconv.ParseBool(s); err != nil {
			return bad("write true or false", "not a yes/no answer")
		}
	case fd.Type.Kind == TypeInt:
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			return bad("write a whole number", "not an int")
		}
	case fd.Type.Kind == TypeFloat:
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return bad("write a number", "not a float")
		}
	}
	return true
}

// scalarText is a scalar value as text.
func scalarText(v Value) (string, bool) {
	switch v := v.(type) {
	case *StringLit:
		return v.Value, true
	case *WordLit:
		return v.Name, true
	case *NumberLit:
		return v.Text, true
	case *BoolLit:
		return strconv.FormatBool(v.Value), true
	}
	return "", false
}

func fieldNames(s *Schema) string {
	var names []string
	for _, f := range s.Fields {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

func exampleDefault(s *Schema) string {
	var parts []string
	for _, f := range s.Fields {
		v := `"…"`
		switch {
		case len(f.Enum) > 0:
			v = strconv.Quote(f.Enum[0])
		case f.Type.Kind == TypeBool:
			v = "false"
		case f.Type.Kind == TypeInt || f.Type.Kind == TypeFloat:
			v = "0"
		}
		parts = append(parts, f.Name+": "+v)
	}
	return strings.Join(parts, ", ")
}
