package dsl

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/dsl/expr"
)

var nodeKinds = map[string]NodeKind{
	"agent": NodeAgent, "judge": NodeJudge, "human": NodeHuman, "router": NodeRouter, "tool": NodeTool,
	"compute": NodeCompute, "emit": NodeEmit, "wait": NodeWait, "await_answers": NodeAwaitAnswers, "fail": NodeFail,
}

func (c *compiler) compileNodes() {
	for _, d := range c.nodeOrder {
		n := &Node{ID: d.Name.Name, Kind: nodeKinds[d.Kind.Name]}
		props := map[string]*Property{}
		for _, p := range d.Props {
			if _, dup := props[p.Key.Name]; !dup {
				props[p.Key.Name] = p
			}
		}
		c.commonProps(n, props)
		if n.Kind == NodeAgent || n.Kind == NodeJudge || n.Kind == NodeHuman {
			c.answerProps(n, props)
		}
		if n.Kind == NodeAgent || n.Kind == NodeJudge || n.Kind == NodeTool {
			owner := fmt.Sprintf("%s %q", n.Kind, n.ID)
			n.Sandbox = c.sandboxDecl(props["sandbox"], owner, "the processes of "+owner)
		}
		switch n.Kind {
		case NodeAgent, NodeJudge:
			n.LLM = c.llmProps(n, d, props)
			c.nodePermission[n.ID] = c.permissionProps(props, fmt.Sprintf("%s %q", n.Kind, n.ID))
			if p := props["readonly"]; p != nil {
				n.LLM.ReadOnly, _ = c.boolProp(p)
			}
		case NodeHuman:
			c.humanProps(n, d, props)
		case NodeRouter:
			c.routerProps(n, d, props)
		case NodeTool:
			c.timeoutProp(n, props["timeout"])
			c.permissionProps(map[string]*Property{"permission": props["permission"]}, fmt.Sprintf("tool %q", n.ID))
			c.toolPermission(n, props["permission"])
			n.Tool = &Tool{}
			switch cmd, script := props["command"], props["script"]; {
			case cmd != nil && script != nil:
				c.errorAtValue(script.Value, BadTemplate, "keep command: or script:, not both", "tool %q declares both command: and script:", n.ID)
			case cmd != nil:
				if lit, ok := cmd.Value.(*StringLit); ok {
					n.Tool.Command = c.template(lit, fmt.Sprintf("command of tool %q", n.ID))
					c.addSite(n.ID, nil, fmt.Sprintf("command of tool %q", n.ID), templateSiteRefs(n.Tool.Command, lit))
					c.checkCommand(n, n.Tool.Command, lit)
				} else if cmd.Value != nil {
					c.errorAtValue(cmd.Value, ErrExpected, `quote the command: command: "go test ./..."`, "command must be a string")
				}
			case script != nil:
				c.scriptProps(n, script, props["language"])
			default:
				c.errorf(d.Name.Start, d.Name.End, BadTemplate, `add command: "…" (run with bash -c in the workspace), or script: with language:`, "tool %q must declare command: or script:", n.ID)
			}
			if p := props["language"]; p != nil && props["script"] == nil {
				c.errorAtValue(p.Value, BadTemplate, "language: goes with script:", "tool %q declares language: without script:", n.ID)
			}
		case NodeCompute:
			c.computeProps(n, d, props)
		case NodeEmit, NodeWait:
			c.eventProps(n, d, props)
		case NodeAwaitAnswers:
			c.awaitProps(n, d, props)
		case NodeFail:
			c.failProps(n, d, props)
		}
		if n.Kind == NodeAgent || n.Kind == NodeJudge || n.Kind == NodeHuman {
			n.FollowUp = c.followUp(n, props)
		}
		c.w.Nodes = append(c.w.Nodes, n)
		c.w.nodes[n.ID] = n
	}
}

// reader is the node that reads the site's references: the node, or an
// edge's source; "" for a loop's bound.
func (s *refSite) reader() string {
	if s.edge != nil {
		return s.edge.From
	}
	return s.node
}

// addSite records refs for checking once the graph is known, up to
// MaxReferenceUses in all.
func (c *compiler) addSite(node string, e *Edge, where string, refs []siteRef) {
	if len(refs) == 0 {
		return
	}
	if c.refUses += len(refs); c.refUses > MaxReferenceUses {
		if !c.refsStopped {
			c.refsStopped = true
			d := c.sink.addFatal(ErrTooLarge, Range{Start: refs[0].start, End: refs[0].end},
				fmt.Sprintf("%s: more than %d references to check in all (a prompt's references count once for each node that uses it); the rest were not checked", where, MaxReferenceUses),
				"give the nodes shorter prompts of their own, or split the workflow into smaller files")
			d.NodeID = node
		}
		return
	}
	c.sites = append(c.sites, &refSite{where: where, node: node, edge: e, refs: refs})
}

// commonProps reads description, input, output, publish, await.
func (c *compiler) commonProps(n *Node, props map[string]*Property) {
	if p := props["description"]; p != nil {
		n.Description, _ = c.str(p)
	}
	n.Input = c.schemaRef(n, props["input"])
	n.Output = c.schemaRef(n, props["output"])
	if p := props["publish"]; p != nil {
		n.Publish, _ = c.str(p)
	}
	if p := props["await"]; p != nil {
		if i, ok := c.choice(p, awaitNames); ok {
			n.Await = AwaitMode(i)
		}
	}
}

// answerProps reads answer_on (the channels the node's questions may be
// answered on) and answerers (the GitHub logins who may answer them).
func (c *compiler) answerProps(n *Node, props map[string]*Property) {
	if p := props["answer_on"]; p != nil {
		for _, ch := range c.stringList(p) {
			switch {
			case !slices.Contains(AnswerChannels, ch):
				c.errorAtValue(p.Value, ErrInvalidValue, "write channels among "+strings.Join(AnswerChannels, ", "),
					"%s %q: answer_on names %q, which is not a channel", n.Kind, n.ID, ch)
			case !slices.Contains(n.AnswerOn, ch):
				n.AnswerOn = append(n.AnswerOn, ch)
			}
		}
		if n.AnswerOn == nil {
			n.AnswerOn = []string{} // answer_on: [] – refused below
			c.errorAtValue(p.Value, ErrInvalidValue, "name at least one channel, like answer_on: [github, page]",
				"%s %q: answer_on names no channel, so its questions could never be answered", n.Kind, n.ID)
		}
	}
	if p := props["answerers"]; p != nil {
		for _, login := range c.stringList(p) {
			if !githubLogin(login) {
				c.errorAtValue(p.Value, ErrInvalidValue, "write GitHub logins, like answerers: [ana, bo]",
					"%s %q: answerers names %q, which is not a GitHub login", n.Kind, n.ID, login)
				continue
			}
			n.Answerers = append(n.Answerers, login)
		}
	}
}

// githubLogin says whether s is shaped like a GitHub login: letters,
// digits and single inner hyphens, at most 39.
func githubLogin(s string) bool {
	if s == "" || len(s) > 39 || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func (c *compiler) schemaRef(n *Node, p *Property) *Schema {
	if p == nil {
		return nil
	}
	name, ok := c.str(p)
	if !ok {
		return nil
	}
	if s := c.w.schemas[name]; s != nil {
		return s
	}
	hint := "declare it: schema " + name + ":"
	if near := c.suggest(name, c.schemaNames); near != "" {
		hint = fmt.Sprintf("did you mean %q?", near)
	}
	c.errorAtValue(p.Value, UnknownSchema, hint, "%s %q property %q references unknown schema %q", n.Kind, n.ID, p.Key.Name, name)
	return nil
}

// promptRef resolves system:, user: or instructions: to a template: a
// prompt name, or an inline string.
func (c *compiler) promptRef(n *Node, p *Property) *Template {
	if p == nil || p.Value == nil {
		return nil
	}
	where := fmt.Sprintf("%s of %s %q", p.Key.Name, n.Kind, n.ID)
	switch v := p.Value.(type) {
	case *WordLit:
		pd := c.promptDecls[v.Name]
		if pd == nil {
			hint := "declare it: prompt " + v.Name + ":"
			if near := c.suggest(v.Name, c.promptNames); near != "" {
				hint = fmt.Sprintf("did you mean %q?", near)
			}
			c.errorAtValue(v, UnknownPrompt, hint, "%s %q property %q references unknown prompt %q", n.Kind, n.ID, p.Key.Name, v.Name)
			return nil
		}
		t := c.w.prompts[v.Name].Body
		if pd.Body != nil {
			// The positioned references are the same for every node that
			// uses the prompt; they are made once and shared (read only).
			refs, ok := c.promptRefs[pd]
			if !ok {
				refs = templateSiteRefs(t, pd.Body)
				c.promptRefs[pd] = refs
			}
			c.addSite(n.ID, nil, fmt.Sprintf("prompt %q (%s)", v.Name, where), refs)
		}
		return t
	case *StringLit:
		t := c.template(v, where)
		c.addSite(n.ID, nil, where, templateSiteRefs(t, v))
		return t
	}
	c.errorAtValue(p.Value, ErrExpected, "name a prompt or write the text in quotes", "%s must name a prompt", p.Key.Name)
	return nil
}

func (c *compiler) timeoutProp(n *Node, p *Property) {
	if p == nil {
		return
	}
	s, ok := c.envStr(p, n.ID)
	if !ok {
		return
	}
	d, err := duration(s)
	if err != nil {
		c.errorAtValue(p.Value, BadTimeout, `use a positive Go duration such as "20m" or "90s"`, "node %q has an invalid timeout %q: %v", n.ID, s, err)
		return
	}
	n.Timeout = d
}

var reasoningEfforts = []string{"low", "medium", "high", "xhigh", "max"}

// modelProps reads the properties every model-driven node shares: model,
// backend, system and user.
func (c *compiler) modelProps(n *Node, props map[string]*Property) *LLM {
	l := &LLM{}
	if p := props["model"]; p != nil {
		l.Model, _ = c.envStr(p, n.ID)
	}
	if p := props["backend"]; p != nil {
		l.Backend = c.backendName(p, n.ID)
	}
	l.System = c.promptRef(n, props["system"])
	l.User = c.promptRef(n, props["user"])
	return l
}

func (c *compiler) llmProps(n *Node, d *NodeDecl, props map[string]*Property) *LLM {
	l := c.modelProps(n, props)
	if p := props["session"]; p != nil {
		if i, ok := c.choice(p, sessionNames); ok {
			l.Session = Session(i)
		}
	}
	if p := props["interaction"]; p != nil {
		l.Interaction = c.interaction(p)
	}
	if p := props["tools"]; p != nil {
		l.Tools = c.stringList(p)
	}
	if p := props["tool_max_steps"]; p != nil {
		v, _ := c.intProp(p)
		l.ToolMaxSteps = int(min(v, 1<<20))
	}
	if p := props["max_tokens"]; p != nil {
		v, _ := c.intProp(p)
		l.MaxTokens = int(min(v, 1<<30))
	}
	if p := props["reasoning_effort"]; p != nil {
		if s, ok := c.envStr(p, n.ID); ok {
			if !slices.Contains(reasoningEfforts, s) {
				c.errorAtValue(p.Value, BadReasoningEffort, "use one of: "+strings.Join(reasoningEfforts, ", "), "invalid reasoning_effort %q", s)
			} else {
				l.ReasoningEffort = s
			}
		}
	}
	c.timeoutProp(n, props["timeout"])
	if p := props["fallbacks"]; p != nil {
		// Not run here (reported by the parser), but read so that C267 can
		// refuse an async node whose fallback could never serve it.
		if b, ok := p.Value.(*BlockLit); ok {
			for _, route := range b.Props {
				rb, ok := route.Value.(*BlockLit)
				if !ok {
					continue
				}
				for _, rp := range rb.Props {
					if rp.Key.Name == "backend" && rp.Value != nil {
						if s, ok := stringValue(rp.Value); ok {
							start, end := rp.Value.Span()
							c.fallbackBackends[n.ID] = append(c.fallbackBackends[n.ID], namedValue{name: route.Key.Name, value: s, start: start, end: end})
						}
					}
				}
			}
		}
	}
	return l
}

func (c *compiler) backendName(p *Property, node string) string {
	s, ok := c.envStr(p, node)
	if !ok {
		return ""
	}
	if s == "" || slices.Contains(knownBackends, s) {
		return s
	}
	hint := "use one of: " + strings.Join(knownBackends, ", ")
	if near := nearest(s, knownBackends); near != "" {
		hint = fmt.Sprintf("did you mean %q?", near)
	}
	c.errorAtValue(p.Value, ErrInvalidValue, hint, "unknown backend %q", s)
	return ""
}

func (c *compiler) interaction(p *Property) Interaction {
	s, ok := c.str(p)
	if !ok {
		return InteractionUnset
	}
	if s == "review" {
		c.errorAtValue(p.Value, ErrUnsupported, "use interaction: human", "interaction: review (the companion review gate) is not supported by this implementation")
		return InteractionUnset
	}
	i, ok := c.choice(p, interactionNames)
	if !ok {
		return InteractionUnset
	}
	return Interaction(i)
}

func (c *compiler) humanProps(n *Node, d *NodeDecl, props map[string]*Property) {
	h := &Human{Interaction: InteractionHuman}
	// Without an interaction of its own, a human node follows the
	// workflow's default when that default is one a human node can have.
	if wi := c.w.Interaction; wi == InteractionLLM || wi == InteractionLLMOrHuman {
		h.Interaction = wi
	}
	h.Instructions = c.promptRef(n, props["instructions"])
	if p := props["interaction"]; p != nil {
		switch it := c.interaction(p); it {
		case InteractionAsync:
			c.errorAtValue(p.Value, AsyncOnHuman,
				"put interaction: async on the asking agent or judge and use an await_answers node as the sync point",
				"human %q cannot use interaction: async: async questions are posted by agent and judge nodes; a human node is itself the blocking question", n.ID)
		case InteractionNone:
			c.errorAtValue(p.Value, ErrInvalidValue, "use interaction: human, llm or llm_or_human", "human %q cannot use interaction: none", n.ID)
		case InteractionUnset:
		default:
			h.Interaction = it
		}
	}
	n.Human = h
	if h.Interaction == InteractionLLM || h.Interaction == InteractionLLMOrHuman {
		l := c.modelProps(n, props) // a human node has no user: property
		l.Interaction = InteractionNone
		n.LLM = l
		if l.Model == "" && l.Backend == "" {
			c.errorf(d.Name.Start, d.Name.End, MissingModel, `add model: "anthropic/claude-sonnet-4-6" (or backend:)`, "human %q answered by a model (interaction: %s) must set model or backend", n.ID, h.Interaction)
		}
		if n.Output == nil {
			c.errorf(d.Name.Start, d.Name.End, ErrMissingProp, "add output: <schema> describing the answers", "human %q answered by a model (interaction: %s) needs output:", n.ID, h.Interaction)
		}
	} else {
		for _, k := range []string{"model", "backend", "system"} {
			if p := props[k]; p != nil {
				c.errorf(p.Key.Start, p.Key.End, ErrInvalidValue, "remove it, or set interaction: llm or llm_or_human", "%s on human %q is used only when a model answers", k, n.ID)
			}
		}
	}
}

func (c *compiler) routerProps(n *Node, d *NodeDecl, props map[string]*Property) {
	r := &Router{}
	n.Router = r
	p := props["mode"]
	if p == nil {
		c.errorf(d.Name.Start, d.Name.End, ErrMissingProp, "add mode: fan_out_all, condition, round_robin or llm", "router %q has no mode:", n.ID)
	} else if s, ok := c.str(p); ok && s == "fan_out_each" {
		c.errorAtValue(p.Value, ErrUnsupported, "use fan_out_all with one edge per branch", "router mode fan_out_each is not supported by this implementation")
	} else if i, ok := c.choice(p, routerModeNames); ok {
		r.Mode = RouterMode(i)
	}
	if r.Mode == RouterLLM {
		l := c.modelProps(n, props)
		l.Interaction = InteractionNone
		if p := props["multi"]; p != nil {
			l.Multi, _ = c.boolProp(p)
		}
		n.LLM = l
		return
	}
	if r.Mode == RouterInvalid {
		return
	}
	for _, k := range []string{"model", "backend", "system", "user", "multi"} {
		if p := props[k]; p != nil {
			c.errorf(p.Key.Start, p.Key.End, LLMOnlyProp, "remove it, or set mode: llm", "router %q property %q is only valid with mode: llm", n.ID, k)
		}
	}
}

func (c *compiler) computeProps(n *Node, d *NodeDecl, props map[string]*Property) {
	n.Compute = &Compute{}
	p := props["expr"]
	block, ok := p.valueBlock()
	if p == nil || (ok && len(block.Props) == 0) {
		c.errorf(d.Name.Start, d.Name.End, NoExpressions, `add an expr: block with one field: "expression" line per output field`, "compute %q has no expr: block; at least one expression is required", n.ID)
		return
	}
	if !ok {
		if p.Value != nil {
			c.errorAtValue(p.Value, ErrExpected, "indent one field: \"expression\" line per output field under expr:", "expr of compute %q must be an indented block", n.ID)
		}
		return
	}
	seen := map[string]bool{}
	for _, f := range block.Props {
		if seen[f.Key.Name] {
			c.errorf(f.Key.Start, f.Key.End, ErrDuplicate, "keep one of them", "duplicate expression field %q", f.Key.Name)
			continue
		}
		seen[f.Key.Name] = true
		lit, ok := f.Value.(*StringLit)
		if !ok {
			if f.Value != nil {
				c.errorAtValue(f.Value, ErrExpected, fmt.Sprintf(`quote the expression: %s: "…"`, f.Key.Name), "expected string expression in compute expr block")
			}
			continue
		}
		where := fmt.Sprintf("compute %q field %q", n.ID, f.Key.Name)
		e := c.expression(lit, where)
		if e == nil {
			continue
		}
		n.Compute.Fields = append(n.Compute.Fields, &ComputeField{Name: f.Key.Name, Expr: e})
		c.addSite(n.ID, nil, where, exprSiteRefs(e, lit))
		c.computeKeys[n.ID] = append(c.computeKeys[n.ID], f.Key.Name)
	}
	if n.Output != nil {
		for _, f := range n.Output.Fields {
			if !seen[f.Name] {
				c.errorf(d.Name.Start, d.Name.End, NoExpressions, fmt.Sprintf("add %s: \"…\" under expr:", f.Name), "compute %q has no expression for output field %q", n.ID, f.Name)
			}
		}
	}
}

func (p *Property) valueBlock() (*BlockLit, bool) {
	if p == nil {
		return nil, false
	}
	b, ok := p.Value.(*BlockLit)
	return b, ok
}

// expression parses an expression string, reporting C040 at the exact
// character.
func (c *compiler) expression(lit *StringLit, where string) *expr.Expr {
	if strings.TrimSpace(lit.Value) == "" {
		c.errorf(lit.Start, lit.End, BadExpression, "write an expression, such as \"approved && score > 3\"", "%s: empty expression", where)
		return nil
	}
	e, err := expr.Parse(lit.Value)
	if err != nil {
		pe, ok := err.(*expr.Error)
		if !ok {
			c.errorf(lit.Start, lit.End, BadExpression, "check the expression syntax", "%s: invalid expression: %v", where, err)
			return nil
		}
		c.errorf(lit.PosAt(pe.Offset), lit.PosAt(pe.End), BadExpression,
			"check operators, names (vars., outputs., input fields) and builtin functions",
			"%s: invalid expression: %s", where, pe.Msg)
		return nil
	}
	return e
}

func exprSiteRefs(e *expr.Expr, lit *StringLit) []siteRef {
	var refs []siteRef
	cur := lit.cursor()
	for _, r := range e.Refs() {
		start := cur.at(r.Offset)
		refs = append(refs, siteRef{ns: r.Namespace, path: r.Path, bare: r.Bare, start: start, end: cur.at(r.End)})
	}
	return refs
}

func (c *compiler) eventProps(n *Node, d *NodeDecl, props map[string]*Property) {
	ev := &Event{}
	n.Event = ev
	if p := props["event"]; p != nil {
		ev.Name, _ = c.str(p)
	}
	if ev.Name == "" {
		c.errorf(d.Name.Start, d.Name.End, EventMissing, `add event: "name"`, "%s %q has no event: name", n.Kind, n.ID)
	}
	if p := props["with"]; p != nil {
		m, _ := p.Value.(*MapLit)
		ev.With = c.mappings(m, n.ID, nil, fmt.Sprintf("with of %s %q", n.Kind, n.ID))
	}
	if n.Kind == NodeWait {
		p := props["timeout"]
		var d2 time.Duration
		var err error = fmt.Errorf("missing")
		if p != nil {
			if s, ok := c.str(p); ok {
				d2, err = duration(s)
			}
		}
		if err != nil {
			at := d.Name
			start, end := at.Start, at.End
			if p != nil && p.Value != nil {
				start, end = p.Value.Span()
			}
			c.errorf(start, end, WaitTimeout, `add timeout: "30s" (a positive Go duration)`, "wait %q has no valid timeout: a mandatory bound is required (the no-silent-infinity invariant)", n.ID)
		}
		n.Timeout = d2
	}
}

// mappings compiles a with { … } map into template mappings.
func (c *compiler) mappings(m *MapLit, node string, e *Edge, where string) []*Mapping {
	if m == nil {
		return nil
	}
	var out []*Mapping
	for _, kv := range m.Entries {
		var t *Template
		switch v := kv.Value.(type) {
		case *StringLit:
			t = c.template(v, fmt.Sprintf("%s, key %q", where, kv.Key.Name))
			c.addSite(node, e, fmt.Sprintf("%s, key %q", where, kv.Key.Name), templateSiteRefs(t, v))
		case *NumberLit:
			t = &Template{Source: v.Text, Parts: []TemplatePart{{Literal: v.Text}}}
		case *BoolLit:
			s := fmt.Sprint(v.Value)
			t = &Template{Source: s, Parts: []TemplatePart{{Literal: s}}}
		default:
			c.errorAtValue(kv.Value, ErrExpected, fmt.Sprintf(`quote the value: %s: "{{outputs.node.field}}"`, kv.Key.Name), "expected string value in with block")
			continue
		}
		out = append(out, &Mapping{Key: kv.Key.Name, Value: t})
	}
	return out
}

func (c *compiler) awaitProps(n *Node, d *NodeDecl, props map[string]*Property) {
	a := &AwaitAnswers{}
	n.AwaitAnswers = a
	n.Output = awaitOutputSchema
	if p := props["from"]; p != nil {
		a.From, _ = c.str(p)
	}
	p := props["timeout"]
	var err error = fmt.Errorf("missing")
	if p != nil {
		if s, ok := c.str(p); ok {
			n.Timeout, err = duration(s)
		}
	}
	if err != nil {
		start, end := d.Name.Start, d.Name.End
		if p != nil && p.Value != nil {
			start, end = p.Value.Span()
		}
		c.errorf(start, end, AwaitTimeout, `add timeout: "30m" (a positive Go duration); the gate fails with the unanswered question ids when it expires`,
			"await_answers %q has no positive timeout: a mandatory bound is required (the no-silent-infinity invariant)", n.ID)
	}
}

// awaitOutputSchema is the fixed output shape of await_answers nodes.
var awaitOutputSchema = &Schema{Name: "await_answers", Fields: []*Field{{Name: "answers", Type: Type{Kind: TypeJSON}}}}

func (c *compiler) failProps(n *Node, d *NodeDecl, props map[string]*Property) {
	f := &Fail{Code: "FAIL_NODE"}
	n.Fail = f
	if p := props["code"]; p != nil {
		if s, ok := c.str(p); ok {
			switch {
			case !upperSnake.MatchString(s):
				c.errorAtValue(p.Value, FailCodeShape, "write the code in UPPER_SNAKE_CASE, such as BAD_INPUT", "fail %q code %q is not UPPER_SNAKE_CASE", n.ID, s)
			case engineCodes[s]:
				c.errorAtValue(p.Value, FailCodeReserved, "pick a code of your own, such as "+s+"_BY_WORKFLOW", "fail %q code %q collides with an engine failure code", n.ID, s)
			default:
				f.Code = s
			}
		}
	}
	if p := props["message"]; p != nil {
		if lit, ok := p.Value.(*StringLit); ok {
			f.Message = c.template(lit, fmt.Sprintf("message of fail %q", n.ID))
			c.addSite(n.ID, nil, fmt.Sprintf("message of fail %q", n.ID), templateSiteRefs(f.Message, lit))
		} else if s, ok := c.str(p); ok {
			f.Message = &Template{Source: s, Parts: []TemplatePart{{Literal: s}}}
		}
	}
	if p := props["resumable"]; p != nil {
		f.Resumable, _ = c.boolProp(p)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// scriptLanguages are the languages a tool's script: may be written in.
var scriptLanguages = []string{"sh", "bash", "js", "py"}

// scriptProps reads a tool's script: and its language: (sh by default).
func (c *compiler) scriptProps(n *Node, p, lang *Property) {
	n.Tool.Language = "sh"
	if lang != nil {
		if s, ok := c.str(lang); ok {
			if !slices.Contains(scriptLanguages, s) {
				c.errorAtValue(lang.Value, ErrInvalidValue, "use one of: "+strings.Join(scriptLanguages, ", "), "tool %q: unknown script language %q", n.ID, s)
			} else {
				n.Tool.Language = s
			}
		}
	}
	lit, ok := p.Value.(*StringLit)
	if !ok {
		if p.Value != nil {
			c.errorAtValue(p.Value, ErrExpected, "write the script as a string, or a | block", "script must be a string")
		}
		return
	}
	what := fmt.Sprintf("script of tool %q", n.ID)
	n.Tool.Script = c.template(lit, what)
	c.addSite(n.ID, nil, what, templateSiteRefs(n.Tool.Script, lit))
	if n.Tool.Language == "sh" || n.Tool.Language == "bash" {
		// A shell script's references are placed as a command's are.
		c.checkCommand(n, n.Tool.Script, lit)
	}
}
