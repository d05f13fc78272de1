package dsl

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/iterion-bot/iterion/dsl/expr"
)

// workflowProps indexes the workflow's properties, first one winning
// (duplicates are reported by the parser).
func (c *compiler) workflowProps() map[string]*Property {
	props := map[string]*Property{}
	if c.wf == nil {
		return props
	}
	for _, p := range c.wf.Props {
		if _, dup := props[p.Key.Name]; !dup {
			props[p.Key.Name] = p
		}
	}
	return props
}

// compileDefaults reads the workflow properties that nodes inherit, before
// the nodes are compiled.
func (c *compiler) compileDefaults() {
	props := c.workflowProps()
	if p := props["default_backend"]; p != nil {
		c.w.DefaultBackend = c.backendName(p, "")
	}
	if p := props["interaction"]; p != nil {
		c.w.Interaction = c.interaction(p)
	}
	if c.wf != nil {
		c.wfPermission = c.permissionProps(props, fmt.Sprintf("workflow %q", c.wf.Name.Name))
	}
	if p := props["sandbox"]; p != nil {
		c.w.Sandbox = c.sandboxDecl(p, fmt.Sprintf("workflow %q", c.wf.Name.Name),
			fmt.Sprintf("the processes of every node of workflow %q without a sandbox of its own", c.wf.Name.Name))
	}
}

func (c *compiler) compileWorkflow() {
	if c.wf == nil {
		return
	}
	props := c.workflowProps()
	if p := props["budget"]; p != nil {
		c.budget(p)
	}
	if p := props["entry"]; p != nil {
		if s, ok := c.str(p); ok {
			if c.w.nodes[s] == nil {
				hint := "name a declared node"
				if near := c.suggest(s, c.nodeNames); near != "" {
					hint = fmt.Sprintf("did you mean %q?", near)
				}
				c.errorAtValue(p.Value, BadEntry, hint, "entry node %q not found", s)
			} else {
				c.w.Entry = s
			}
		}
	} else {
		c.errorf(c.wf.Name.Start, c.wf.Name.End, BadEntry, "add entry: <first node>", "workflow %q has no entry:", c.wf.Name.Name)
	}
	// The workflow's default interaction applies to agents and judges.
	for _, n := range c.w.Nodes {
		if (n.Kind == NodeAgent || n.Kind == NodeJudge) && n.LLM.Interaction == InteractionUnset {
			n.LLM.Interaction = c.w.Interaction
			if n.LLM.Interaction == InteractionUnset {
				n.LLM.Interaction = InteractionNone
			}
		}
	}
	for _, st := range c.wf.Edges {
		c.edges(st)
	}
}

func (c *compiler) budget(p *Property) {
	b, ok := p.valueBlock()
	if !ok {
		if p.Value != nil {
			c.errorAtValue(p.Value, ErrExpected, "indent the budget keys under budget:", "budget must be an indented block")
		}
		return
	}
	for _, bp := range b.Props {
		switch bp.Key.Name {
		case "max_parallel_branches":
			v, _ := c.intProp(bp)
			c.w.Budget.MaxParallelBranches = int(min(v, 1<<16))
		case "max_tokens":
			c.w.Budget.MaxTokens, _ = c.intProp(bp)
		case "warn_tokens":
			c.w.Budget.WarnTokens, _ = c.intProp(bp)
		case "max_iterations":
			c.w.Budget.MaxIterations, _ = c.intProp(bp)
		case "max_duration":
			if s, ok := c.str(bp); ok {
				d, err := duration(s)
				if err != nil {
					c.errorAtValue(bp.Value, ErrInvalidValue, `use a positive Go duration such as "30m"`, "invalid max_duration %q: %v", s, err)
				}
				c.w.Budget.MaxDuration = d
			}
		case "max_cost_usd":
			n, ok := bp.Value.(*NumberLit)
			var f float64
			var err error
			if ok {
				f, err = strconv.ParseFloat(strings.TrimPrefix(n.Text, "+"), 64)
			}
			if !ok || err != nil || f < 0 || math.IsInf(f, 0) {
				if bp.Value != nil {
					c.errorAtValue(bp.Value, BadCost, "write a non-negative number of dollars, such as max_cost_usd: 10", "max_cost_usd must be a non-negative number")
				}
				continue
			}
			c.w.Budget.MaxCostUSD = f
		}
	}
}

// edges compiles one edge statement: a chain is split into edges, and
// the clauses bind to the last one.
func (c *compiler) edges(st *EdgeStmt) {
	for i := 0; i+1 < len(st.Chain); i++ {
		from, to := st.Chain[i], st.Chain[i+1]
		e := &Edge{From: from.Name, To: to.Name}
		ok := true
		if c.w.nodes[from.Name] == nil {
			ok = false
			if from.Name == TargetDone || from.Name == TargetFail {
				c.errorf(from.Start, from.End, UndeclaredNode, "terminal targets have no outgoing edges", "edge source %q is a terminal target", from.Name)
			} else {
				c.errorf(from.Start, from.End, UndeclaredNode, c.nodeHint(from.Name), "edge source %q not found", from.Name)
			}
		}
		if to.Name != TargetDone && to.Name != TargetFail && c.w.nodes[to.Name] == nil {
			ok = false
			c.errorf(to.Start, to.End, UndeclaredNode, c.nodeHint(to.Name), "edge target %q not found", to.Name)
		}
		last := i+2 == len(st.Chain)
		if last {
			c.edgeClauses(e, st)
		}
		if !ok {
			continue
		}
		c.edgeSrc[e] = edgeSource{from: from, to: to, stmt: st}
		c.w.Edges = append(c.w.Edges, e)
		c.w.out[e.From] = append(c.w.out[e.From], e)
		c.w.in[e.To] = append(c.w.in[e.To], e)
	}
}

func (c *compiler) nodeHint(name string) string {
	if near := c.suggest(name, c.nodeNames); near != "" {
		return fmt.Sprintf("did you mean %q?", near)
	}
	return "declare the node, or fix the name"
}

func (c *compiler) edgeClauses(e *Edge, st *EdgeStmt) {
	where := fmt.Sprintf("edge %s -> %s", e.From, e.To)
	if st.When != nil && st.Else.IsValid() {
		c.sink.add(SevError, ErrWhenAndElse, Range{Start: st.Else, End: st.Else}, where+" has both when and else", "an edge is either guarded (when) or the fallback (else), not both")
	}
	e.Else = st.Else.IsValid() && st.When == nil
	if g := st.When; g != nil {
		cond := &Condition{Not: g.Not}
		if g.Field != nil {
			cond.Field = g.Field.Name
		} else if g.Expr != nil {
			cond.Expr = c.expression(g.Expr, where+", when")
			if cond.Expr != nil {
				c.addSite("", e, where+", when", exprSiteRefs(cond.Expr, g.Expr))
			}
		}
		e.When = cond
	}
	if lc := st.Loop; lc != nil {
		e.Loop = c.loop(lc)
		if e.Loop == nil {
			// The bound was reported; keep the edge a loop edge so the graph
			// checks do not add a cycle error on top.
			e.Loop = &Loop{Name: lc.Name.Name}
		}
	}
	if st.With != nil {
		e.With = c.mappings(st.With, "", e, where+", with")
	}
}

// loop resolves "as name(count)" to the shared Loop of that name.
func (c *compiler) loop(lc *LoopClause) *Loop {
	l := &Loop{Name: lc.Name.Name}
	var written int64 // the bound as written, when it is a number
	switch v := lc.Count.(type) {
	case *NumberLit:
		n, err := strconv.ParseInt(v.Text, 10, 64)
		if v.IsFloat || err != nil {
			c.errorAtValue(v, ErrInvalidValue, fmt.Sprintf("write a whole number: as %s(3)", l.Name), "loop %q bound must be a whole number", l.Name)
			return nil
		}
		if n < 1 {
			c.errorAtValue(v, LoopMaxTooSmall, fmt.Sprintf("use a bound of at least 1: as %s(1)", l.Name), "loop %q has max_iterations=%d; must be >= 1", l.Name, n)
			return nil
		}
		l.Max = int(min(n, math.MaxInt32))
		written = n
	case *StringLit:
		src := strings.TrimSpace(v.Value)
		if n, err := strconv.Atoi(src); err == nil {
			if n < 1 {
				c.errorAtValue(v, LoopMaxTooSmall, fmt.Sprintf("use a bound of at least 1: as %s(1)", l.Name), "loop %q has max_iterations=%d; must be >= 1", l.Name, n)
				return nil
			}
			l.Max = n
			written = int64(n)
			break
		}
		where := fmt.Sprintf("bound of loop %q", l.Name)
		var e *expr.Expr
		if strings.HasPrefix(src, "{{") {
			t := c.template(v, where)
			if !t.IsSingleRef() {
				c.errorAtValue(v, BadTemplate, `write exactly one reference, such as "{{vars.max_rounds}}"`, "%s must be a single {{…}} reference", where)
				return nil
			}
			r := t.Refs()[0]
			var err error
			e, err = expr.Parse(r.Namespace + "." + strings.Join(r.Path, "."))
			if err != nil {
				c.errorAtValue(v, BadTemplate, `write the bound as a number or one reference, such as "{{vars.max_rounds}}"`, "%s: %v", where, err)
				return nil
			}
			c.addSite("", nil, where, templateSiteRefs(t, v))
		} else {
			e = c.expression(v, where)
			if e == nil {
				return nil
			}
			c.addSite("", nil, where, exprSiteRefs(e, v))
		}
		l.MaxExpr = e
	default:
		c.errorAtValue(lc.Count, ErrInvalidValue, fmt.Sprintf("write as %s(3)", l.Name), "loop %q bound must be a number, a {{…}} reference or a quoted expression", l.Name)
		return nil
	}
	if prev := c.w.loops[l.Name]; prev != nil {
		same := prev.Max == l.Max && (prev.MaxExpr == nil) == (l.MaxExpr == nil) &&
			(prev.MaxExpr == nil || prev.MaxExpr.Source() == l.MaxExpr.Source())
		if !same {
			first := c.loopFirst[l.Name]
			c.errorf(lc.Name.Start, lc.Name.End, LoopConflict, "use the same bound on every edge of the loop, or rename one loop",
				"loop %q has conflicting max_iterations: %s here, %s at %s", l.Name, loopBound(l), loopBound(prev), first.Name.Start)
		}
		return prev
	}
	if limit := c.opts.loopCap(); limit > 0 && written > int64(limit) {
		start, end := lc.Count.Span()
		c.warnf(start, end, LoopBoundOverCap,
			fmt.Sprintf("lower it to %d or less: as %s(%d); if the loop really needs more, raise the cap (MaxLoopBound in the compiler's dsl.Options)", limit, l.Name, limit),
			"loop %q allows %d crossings, above the cap of %d: each crossing runs and stores the loop's nodes again", l.Name, written, limit)
	}
	c.loopFirst[l.Name] = lc
	c.w.Loops = append(c.w.Loops, l)
	c.w.loops[l.Name] = l
	return l
}

func loopBound(l *Loop) string {
	if l.MaxExpr != nil {
		return strconv.Quote(l.MaxExpr.Source())
	}
	return strconv.Itoa(l.Max)
}

// ---- graph checks ----

func (c *compiler) edgeRange(e *Edge) (Pos, Pos) {
	src := c.edgeSrc[e]
	return src.from.Start, src.to.End
}

func (c *compiler) edgeErr(e *Edge, sev Severity, code Code, hint, format string, args ...any) {
	start, end := c.edgeRange(e)
	d := c.sink.add(sev, code, Range{Start: start, End: end}, fmt.Sprintf(format, args...), hint)
	d.EdgeID = e.ID()
	d.NodeID = e.From
}

func (c *compiler) nodeErr(id string, sev Severity, code Code, hint, format string, args ...any) {
	d := c.nodeDecls[id]
	r := Range{}
	if d != nil {
		r = Range{Start: d.Name.Start, End: d.Name.End}
	}
	diag := c.sink.add(sev, code, r, fmt.Sprintf(format, args...), hint)
	diag.NodeID = id
}

func (c *compiler) checkGraph() {
	w := c.w
	for _, n := range w.Nodes {
		out := w.out[n.ID]
		c.checkOutgoing(n, out)
	}
	// Reachability from entry (C016).
	if w.Entry != "" {
		seen := c.reachFrom(w.Entry)
		for _, n := range w.Nodes {
			if !seen[n.ID] {
				c.nodeErr(n.ID, SevError, Unreachable, "add an edge to it, or delete it", "%s %q is unreachable from entry %q", n.Kind, n.ID, w.Entry)
			}
		}
	}
	c.checkCycles()
}

// checkOutgoing applies the edge rules of one node.
func (c *compiler) checkOutgoing(n *Node, out []*Edge) {
	// bare edges are unconditional; an unconditional loop edge is taken
	// while the loop has crossings left, so it too is a fallback, and the
	// one bare edge beside it is the exit once the loop is spent.
	var bare, bareLoops, elses, conds []*Edge
	for _, e := range out {
		switch {
		case e.When != nil:
			conds = append(conds, e)
		case e.Else:
			elses = append(elses, e)
		case e.Loop != nil:
			bareLoops = append(bareLoops, e)
		default:
			bare = append(bare, e)
		}
	}
	if n.Kind == NodeRouter {
		c.checkRouter(n, out, bare)
		return
	}
	if len(bare) > 1 {
		var targets []string
		for _, e := range bare {
			targets = append(targets, e.To)
		}
		c.edgeErr(bare[1], SevError, ManyDefaults, "keep one unconditional edge, or guard the others with when",
			"node %q has %d unconditional edges (targets: %s); only one default edge is allowed", n.ID, len(bare), strings.Join(targets, ", "))
	}
	if len(bareLoops) > 1 {
		c.edgeErr(bareLoops[1], SevError, ManyDefaults, "guard one of the loop edges with when",
			"node %q has %d unconditional loop edges; only one can be taken", n.ID, len(bareLoops))
	}
	if len(elses) > 1 {
		c.edgeErr(elses[1], SevError, ManyElse, "keep one else edge", "node %q has more than one else edge", n.ID)
	}
	if len(elses) > 0 && len(bare) > 0 {
		c.edgeErr(elses[0], SevError, ElseAndDefault, "drop the else, or guard the unconditional edge", "node %q has both an else edge and an unconditional edge", n.ID)
	}
	if len(elses) > 0 && len(conds) == 0 {
		c.edgeErr(elses[0], SevError, ElseAlone, "write a plain edge instead: "+n.ID+" -> "+elses[0].To, "node %q has an else edge (-> %s) but no conditional (when) sibling", n.ID, elses[0].To)
	}
	// Guards: duplicates, types, exhaustiveness.
	type key struct {
		field string
		not   bool
	}
	seen := map[key]bool{}
	polarity := map[string][2]bool{}
	exprs := map[string]bool{}
	for _, e := range conds {
		cond := e.When
		if cond.Field == "" && cond.Expr == nil {
			continue // a guard that did not compile; already reported
		}
		if cond.Expr != nil {
			if exprs[cond.Expr.Source()] {
				c.edgeErr(e, SevError, DuplicateCondition, "remove the duplicate edge", "node %q has two edges guarded by the same expression %q", n.ID, cond.Expr.Source())
			}
			exprs[cond.Expr.Source()] = true
			continue
		}
		k := key{cond.Field, cond.Not}
		if seen[k] {
			c.edgeErr(e, SevError, DuplicateCondition, "remove the duplicate edge", "node %q has two edges on %s%s", n.ID, map[bool]string{true: "not "}[cond.Not], cond.Field)
		}
		seen[k] = true
		p := polarity[cond.Field]
		p[boolIndex(cond.Not)] = true
		polarity[cond.Field] = p
		c.checkConditionField(n, e)
	}
	if len(conds) > 0 && len(bare) == 0 && len(elses) == 0 && len(bareLoops) == 0 {
		exhaustive := false
		for _, p := range polarity {
			if p[0] && p[1] {
				exhaustive = true
			}
		}
		if !exhaustive {
			c.edgeErr(conds[0], SevError, NotExhaustive, fmt.Sprintf("add a fallback edge: %s -> <node> else, or the complementary when not …", n.ID),
				"node %q has conditional edges but no fallback edge, and they do not cover every case", n.ID)
		}
	}
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (c *compiler) checkConditionField(n *Node, e *Edge) {
	out := c.outputFields(n)
	if !out.known {
		return
	}
	start, end := c.edgeRange(e)
	if st := c.edgeSrc[e].stmt; st != nil && st.When != nil && st.When.Field != nil {
		start, end = st.When.Field.Start, st.When.Field.End
	}
	if !out.has(e.When.Field) {
		if c.sink.skip(SevError) {
			return
		}
		where, hint := "the expressions", fmt.Sprintf("add %s: \"…\" under expr:", e.When.Field)
		if n.Output != nil {
			where, hint = fmt.Sprintf("output schema %q", n.Output.Name), fmt.Sprintf("add %s: bool to schema %s", e.When.Field, n.Output.Name)
		}
		if near := nearest(e.When.Field, out.names); near != "" {
			hint = fmt.Sprintf("did you mean %q?", near)
		}
		d := c.sink.add(SevError, ConditionUnknownField, Range{Start: start, End: end},
			fmt.Sprintf("edge %s: condition field %q not found in %s of node %q", e.ID(), e.When.Field, where, n.ID), hint)
		d.EdgeID, d.NodeID = e.ID(), n.ID
		return
	}
	if n.Output == nil {
		return // a compute field's type is only known at run time
	}
	f := out.field(e.When.Field)
	if f.Type.Kind != TypeBool || f.Type.List {
		d := c.sink.add(SevError, ConditionNotBool, Range{Start: start, End: end},
			fmt.Sprintf("edge %s: condition field %q is %s, not bool, in output schema %q", e.ID(), f.Name, f.Type, n.Output.Name),
			fmt.Sprintf("make %s a bool field, or write when \"%s == '…'\"", f.Name, f.Name))
		d.EdgeID, d.NodeID = e.ID(), n.ID
	}
}

func (c *compiler) checkRouter(n *Node, out, bare []*Edge) {
	switch n.Router.Mode {
	case RouterRoundRobin:
		if len(bare) < 2 {
			c.nodeErr(n.ID, SevError, RoundRobinEdges, "add another unconditional edge to alternate between", "round_robin router %q has %d unconditional outgoing edge(s); at least 2 are needed for alternation", n.ID, len(bare))
		}
	case RouterLLM:
		if len(out) < 2 {
			c.nodeErr(n.ID, SevError, LLMRouterEdges, "add another edge for the model to choose", "llm router %q has %d outgoing edge(s); at least 2 are needed", n.ID, len(out))
		}
		for _, e := range out {
			if st := c.edgeSrc[e].stmt; e.When != nil && st != nil && st.When != nil {
				d := c.errorf(st.When.When, st.When.When, LLMRouterWhen, "drop the when clause: the model selects the target", "llm router %q edge to %q has a when condition; llm routers select targets directly", n.ID, e.To)
				d.NodeID, d.EdgeID = n.ID, e.ID()
			} else if e.When != nil {
				c.edgeErr(e, SevError, LLMRouterWhen, "drop the when clause: the model selects the target", "llm router %q edge to %q has a when condition; llm routers select targets directly", n.ID, e.To)
			}
		}
	case RouterFanOutAll:
		if len(out) == 0 {
			return
		}
	}
}

// reachFrom returns the nodes reachable from id (id included), by a
// breadth-first search.
func (c *compiler) reachFrom(id string) map[string]bool {
	seen := map[string]bool{id: true}
	queue := []string{id}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, e := range c.w.out[cur] {
			if !seen[e.To] {
				seen[e.To] = true
				queue = append(queue, e.To)
			}
		}
	}
	return seen
}

// checkCycles reports a cycle that no loop bounds (C019): with the
// loop-carrying edges removed, the graph must be acyclic. Kahn's algorithm
// leaves exactly the nodes on or behind such cycles.
func (c *compiler) checkCycles() {
	indeg := map[string]int{}
	for _, n := range c.w.Nodes {
		indeg[n.ID] = 0
	}
	for _, e := range c.w.Edges {
		if e.Loop == nil && c.w.nodes[e.To] != nil {
			indeg[e.To]++
		}
	}
	var queue []string
	for _, n := range c.w.Nodes {
		if indeg[n.ID] == 0 {
			queue = append(queue, n.ID)
		}
	}
	removed := map[string]bool{}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		removed[cur] = true
		for _, e := range c.w.out[cur] {
			if e.Loop != nil || c.w.nodes[e.To] == nil {
				continue
			}
			if indeg[e.To]--; indeg[e.To] == 0 {
				queue = append(queue, e.To)
			}
		}
	}
	// What remains holds every unbounded cycle, plus the nodes downstream of
	// them. Peel those off backwards (nodes with no remaining successor);
	// every node left then has a successor in the set, so walking forward
	// from any of them must come back to a node already seen: a cycle.
	// Everything here is linear in the size of the graph.
	succ := func(id string) []*Edge {
		var out []*Edge
		for _, e := range c.w.out[id] {
			if e.Loop == nil && c.w.nodes[e.To] != nil && !removed[e.To] {
				out = append(out, e)
			}
		}
		return out
	}
	outdeg := map[string]int{}
	var peel []string
	for _, n := range c.w.Nodes {
		if removed[n.ID] {
			continue
		}
		if outdeg[n.ID] = len(succ(n.ID)); outdeg[n.ID] == 0 {
			peel = append(peel, n.ID)
		}
	}
	for len(peel) > 0 {
		cur := peel[0]
		peel = peel[1:]
		removed[cur] = true
		for _, e := range c.w.in[cur] {
			if e.Loop != nil || removed[e.From] {
				continue
			}
			if outdeg[e.From]--; outdeg[e.From] == 0 {
				peel = append(peel, e.From)
			}
		}
	}
	var start string
	for _, n := range c.w.Nodes {
		if !removed[n.ID] {
			start = n.ID
			break
		}
	}
	if start == "" {
		return
	}
	index := map[string]int{}
	var path []*Edge
	for cur := start; ; {
		index[cur] = len(path)
		e := succ(cur)[0]
		path = append(path, e)
		if i, seen := index[e.To]; seen {
			c.reportCycle(path[i:])
			return
		}
		cur = e.To
	}
}

// reportCycle reports an unbounded cycle at its edge written last in the
// file, which is usually the back-edge that needs the loop.
func (c *compiler) reportCycle(cycle []*Edge) {
	order := map[*Edge]int{}
	for i, e := range c.w.Edges {
		order[e] = i
	}
	back := cycle[0]
	for _, e := range cycle[1:] {
		if order[e] > order[back] {
			back = e
		}
	}
	var nodes []string
	for _, e := range cycle {
		nodes = append(nodes, e.From)
	}
	nodes = append(nodes, cycle[0].From)
	c.edgeErr(back, SevError, UnboundedCycle, fmt.Sprintf("bound the cycle with a loop: %s -> %s as retry(3)", back.From, back.To),
		"cycle detected: edge %s -> %s closes the cycle %s without a declared loop", back.From, back.To, strings.Join(nodes, " -> "))
}

// checkNodesInGraph applies the rules that need both the node and the
// graph: models, sessions at joins, async rules, events.
func (c *compiler) checkNodesInGraph() {
	w := c.w
	emits, waits := map[string][]*Node{}, map[string][]*Node{}
	for _, n := range w.Nodes {
		switch n.Kind {
		case NodeAgent, NodeJudge:
			backend := n.LLM.Backend
			if backend == "" {
				backend = w.DefaultBackend
			}
			if n.LLM.Model == "" && (backend == "" || backend == "claw") {
				hint := `add model: "anthropic/claude-sonnet-4-6", or a backend that picks its own model (backend: claude_code)`
				if backend == "" {
					hint += ", or default_backend: on the workflow"
				}
				c.nodeErr(n.ID, SevError, MissingModel, hint, "%s %q must set model or backend", n.Kind, n.ID)
			}
			if n.LLM.Interaction == InteractionAsync {
				c.checkAsyncBackend(n, backend)
			}
			c.checkClaudeCodeTools(n, backend)
			// As upstream: only a declared convergence (await:) is refused; an
			// implicit one (a loop's re-entry) is left to run time.
			if n.Await != AwaitUnset && (n.LLM.Session == SessionInherit || n.LLM.Session == SessionInheritIfAvailable || n.LLM.Session == SessionFork) {
				start, end := c.propSpan(n.ID, "session")
				d := c.errorf(start, end, InheritAtJoin, "use session: fresh or artifacts_only at a convergence point",
					"node %q has session: %s but is a convergence point; only fresh, artifacts_only or persist are allowed", n.ID, n.LLM.Session)
				d.NodeID = n.ID
			}
		case NodeRouter:
			if n.Router.Mode == RouterLLM && n.LLM.Model == "" && n.LLM.Backend == "" && w.DefaultBackend == "" {
				c.nodeErr(n.ID, SevWarning, MissingModel, `add model: "anthropic/claude-sonnet-4-6"`, "llm router %q sets no model or backend; the backend's default model will be used", n.ID)
			}
		case NodeAwaitAnswers:
			c.checkAwaitFrom(n)
		case NodeEmit:
			if n.Event.Name != "" {
				emits[n.Event.Name] = append(emits[n.Event.Name], n)
			}
		case NodeWait:
			if n.Event.Name != "" {
				waits[n.Event.Name] = append(waits[n.Event.Name], n)
			}
		}
	}
	for name, ns := range emits {
		if len(waits[name]) == 0 {
			for _, n := range ns {
				c.nodeErr(n.ID, SevWarning, DanglingEvent, "add a wait node for this event, or remove the emit", "emit %q produces event %q which no wait node consumes", n.ID, name)
			}
		}
	}
	for name, ns := range waits {
		if len(emits[name]) == 0 {
			for _, n := range ns {
				c.nodeErr(n.ID, SevWarning, DanglingEvent, "add an emit node for this event; as written the wait can only time out", "wait %q waits for event %q which no emit node produces", n.ID, name)
			}
		}
	}
}

// isJoin reports whether n is a convergence point: it declares await:, or
// more than one distinct node leads to it.
func (c *compiler) isJoin(n *Node) bool {
	if n.Await != AwaitUnset {
		return true
	}
	preds := map[string]bool{}
	for _, e := range c.w.in[n.ID] {
		if e.Loop == nil {
			preds[e.From] = true
		}
	}
	return len(preds) > 1
}

// propSpan returns the span of a node property's value, or of the node's
// name when the property is absent.
func (c *compiler) propSpan(id, prop string) (Pos, Pos) {
	d := c.nodeDecls[id]
	start, end := d.Name.Start, d.Name.End
	for _, p := range d.Props {
		if p.Key.Name == prop && p.Value != nil {
			start, end = p.Value.Span()
		}
	}
	return start, end
}

func (c *compiler) checkAsyncBackend(n *Node, backend string) {
	if asyncIncapable[backend] {
		start, end := c.propSpan(n.ID, "backend")
		origin := ""
		if n.LLM.Backend == "" {
			origin = " (the workflow's default_backend)"
		}
		diag := c.errorf(start, end, AsyncBackend, "use backend claw, claude_code or pi, or drop interaction: async",
			"%s %q: primary backend %q%s cannot serve interaction: async: ask_user_async and await_answers are unavailable", n.Kind, n.ID, backend, origin)
		diag.NodeID = n.ID
	}
	for _, fb := range c.fallbackBackends[n.ID] {
		if asyncIncapable[fb.value] {
			diag := c.errorf(fb.start, fb.end, AsyncBackend, "route the fallback to claw, claude_code or pi",
				"%s %q: fallback %s backend %q cannot serve interaction: async: ask_user_async and await_answers are unavailable", n.Kind, n.ID, fb.name, fb.value)
			diag.NodeID = n.ID
		}
	}
}

func (c *compiler) checkAwaitFrom(n *Node) {
	from := n.AwaitAnswers.From
	if from == "" {
		return
	}
	start, end := c.propSpan(n.ID, "from")
	src := c.w.nodes[from]
	switch {
	case src == nil:
		diag := c.warnf(start, end, AwaitFrom, c.nodeHint(from), "await_answers %q from: references unknown node %q; it can only ever time out", n.ID, from)
		diag.NodeID = n.ID
	case (src.Kind != NodeAgent && src.Kind != NodeJudge) || src.LLM.Interaction != InteractionAsync:
		diag := c.warnf(start, end, AwaitFrom, fmt.Sprintf("set interaction: async on %q, or point from: at the asking node", from),
			"await_answers %q from: references %q which is not an interaction: async agent or judge; it can only ever time out", n.ID, from)
		diag.NodeID = n.ID
	}
}

// ---- reference checks ----

var runMembers = []string{"id", "elapsed_seconds", "cost_usd", "tokens", "iterations",
	"max_duration_seconds", "max_cost_usd", "max_tokens", "max_iterations"}

var loopMembers = []string{"iteration", "max", "previous_output"}

func (c *compiler) checkRefs() {
	published := map[string]bool{}
	for _, n := range c.w.Nodes {
		if n.Publish != "" {
			published[n.Publish] = true
		}
	}
	g := newNodeGraph(c.w)
	// Every node on a cycle through a loop edge is in the loop.
	inLoop := g.loopNodes(c.w)
	// The producers some reader needs to run after (C036), asked of one
	// shared reachability computation.
	var producers []string
	for _, s := range c.sites {
		for _, r := range s.refs {
			if r.ns == "outputs" && len(r.path) > 0 && c.w.nodes[r.path[0]] != nil {
				if reader := s.reader(); reader != "" && reader != r.path[0] && c.w.Entry != "" {
					producers = append(producers, r.path[0])
				}
			}
		}
	}
	reaches := g.reachabilityFrom(producers).reaches
	for _, s := range c.sites {
		for _, r := range s.refs {
			c.checkRef(s, r, published, inLoop, reaches)
		}
	}
}

func (c *compiler) refErr(s *refSite, r siteRef, sev Severity, code Code, hint, format string, args ...any) {
	d := c.sink.add(sev, code, Range{Start: r.start, End: r.end}, s.where+": "+fmt.Sprintf(format, args...), hint)
	d.NodeID = s.node
	if s.edge != nil {
		d.EdgeID = s.edge.ID()
		d.NodeID = s.edge.From
	}
}

func (c *compiler) checkRef(s *refSite, r siteRef, published, inLoop map[string]bool, reaches func(string, string) bool) {
	show := r.ns + "." + strings.Join(r.path, ".")
	switch {
	case r.bare:
		show = strings.Join(r.path, ".")
	case r.tmpl:
		show = "{{" + show + "}}"
	}
	if len(r.path) == 0 {
		return
	}
	head := r.path[0]
	switch r.ns {
	case "vars":
		if c.w.vars[head] == nil {
			hint := "declare it under vars:"
			if near := c.suggest(head, c.varNames()); near != "" {
				hint = fmt.Sprintf("did you mean vars.%s?", near)
			}
			c.refErr(s, r, SevError, UndeclaredVar, hint, "reference %s targets undeclared variable %q", show, head)
		}
	case "input":
		c.checkInputRef(s, r, show)
	case "outputs":
		c.checkOutputsRef(s, r, show, inLoop, reaches)
	case "artifacts":
		if !published[head] {
			c.refErr(s, r, SevError, UnknownArtifact, fmt.Sprintf("add publish: %s to the node that produces it", head), "reference %s targets unknown artifact %q", show, head)
		}
	case "loop":
		if c.w.loops[head] == nil {
			c.refErr(s, r, SevWarning, UnknownLoop, "name a loop declared with as name(N) on an edge", "reference %s targets unknown loop %q", show, head)
		} else if len(r.path) > 1 && !slices.Contains(loopMembers, r.path[1]) {
			c.refErr(s, r, SevWarning, UnknownLoop, "use iteration, max or previous_output", "reference %s: loops have no member %q", show, r.path[1])
		}
	case "run":
		if !slices.Contains(runMembers, head) {
			c.refErr(s, r, SevWarning, UnknownRunMember, "use one of: "+strings.Join(runMembers, ", "), "reference %s: run has no member %q; it reads as empty", show, head)
		}
	}
}

// checkInputRef checks {{input.f}}. In an edge's with and guard, input is
// the source's output; elsewhere it is the node's input: its input schema,
// or, without one, the keys the incoming edges map.
func (c *compiler) checkInputRef(s *refSite, r siteRef, show string) {
	field := r.path[0]
	if strings.HasPrefix(field, "_") {
		return // engine-stamped keys such as _tokens
	}
	if s.edge != nil {
		src := c.w.nodes[s.edge.From]
		if src == nil {
			return
		}
		out := c.outputFields(src)
		if !out.known {
			c.refErr(s, r, SevWarning, SchemalessOutput, fmt.Sprintf("declare output: on %q", src.ID), "reference %s reads node %q which has no output schema; it cannot be checked", show, src.ID)
			return
		}
		if !out.has(field) && !c.sink.skip(SevError) {
			c.refErr(s, r, SevError, UnknownInputField, fieldHint(field, out.names), "reference %s: %q is not a field of the output of %q (%s)", show, field, src.ID, strings.Join(out.names, ", "))
		}
		return
	}
	if s.node == "" {
		return
	}
	n := c.w.nodes[s.node]
	if n.Input == nil {
		// As upstream: a node with no input schema takes whatever its
		// incoming edges' with map, known only at run time.
		return
	}
	in := c.inputFields(n)
	if !in.has(field) && !c.sink.skip(SevError) {
		c.refErr(s, r, SevError, UnknownInputField, fieldHint(field, in.names), "reference %s: %q is not in the input of %s %q", show, field, n.Kind, n.ID)
	}
}

func fieldHint(field string, names []string) string {
	if near := nearest(field, names); near != "" {
		return fmt.Sprintf("did you mean %q?", near)
	}
	if len(names) == 0 {
		return "no fields are available here"
	}
	return "available fields: " + strings.Join(names, ", ")
}

// fieldSet is the field names a node makes or takes, in order, indexed
// for the reference checks: a wide schema read by many references is
// looked up, not scanned, per reference.
type fieldSet struct {
	names  []string
	known  bool           // the names are known at compile time
	index  map[string]int // name → its first position in names
	fields []*Field       // the schema's fields, when the names are a schema's
}

func newFieldSet(names []string, fields []*Field, known bool) *fieldSet {
	fs := &fieldSet{names: names, known: known, fields: fields, index: make(map[string]int, len(names))}
	for i, name := range names {
		if _, dup := fs.index[name]; !dup {
			fs.index[name] = i
		}
	}
	return fs
}

// schemaFields returns the field set of s, made once per schema.
func (c *compiler) schemaFields(s *Schema) *fieldSet {
	if fs := c.schemaSets[s]; fs != nil {
		return fs
	}
	names := make([]string, 0, len(s.Fields))
	for _, f := range s.Fields {
		names = append(names, f.Name)
	}
	fs := newFieldSet(names, s.Fields, true)
	c.schemaSets[s] = fs
	return fs
}

func (fs *fieldSet) has(name string) bool {
	_, ok := fs.index[name]
	return ok
}

// field returns the schema field of that name, or nil.
func (fs *fieldSet) field(name string) *Field {
	if i, ok := fs.index[name]; ok && i < len(fs.fields) {
		return fs.fields[i]
	}
	return nil
}

// outputFields returns the output fields of n, and whether they are known
// at compile time. It is computed once per node, once the nodes are
// compiled.
func (c *compiler) outputFields(n *Node) *fieldSet {
	if fs := c.outputSets[n]; fs != nil {
		return fs
	}
	var fs *fieldSet
	switch {
	case n.Output != nil:
		fs = c.schemaFields(n.Output)
	case n.Kind == NodeCompute:
		fs = newFieldSet(c.computeKeys[n.ID], nil, true)
	case n.Kind == NodeEmit, n.Kind == NodeFail:
		fs = newFieldSet(nil, nil, true)
	default:
		fs = newFieldSet(nil, nil, false)
	}
	c.outputSets[n] = fs
	return fs
}

// inputFields returns the fields of n's input: its input schema, or,
// without one, the keys its incoming edges map. It is computed once per
// node, once the graph is built.
func (c *compiler) inputFields(n *Node) *fieldSet {
	if fs := c.inputSets[n]; fs != nil {
		return fs
	}
	var fs *fieldSet
	if n.Input != nil {
		fs = c.schemaFields(n.Input)
	} else {
		var names []string
		for _, e := range c.w.in[n.ID] {
			for _, m := range e.With {
				names = append(names, m.Key)
			}
		}
		fs = newFieldSet(names, nil, true)
	}
	c.inputSets[n] = fs
	return fs
}

func (c *compiler) checkOutputsRef(s *refSite, r siteRef, show string, inLoop map[string]bool, reaches func(string, string) bool) {
	id := r.path[0]
	n := c.w.nodes[id]
	if n == nil {
		c.refErr(s, r, SevError, UnknownOutputNode, c.nodeHint(id), "reference %s targets unknown node %q", show, id)
		return
	}
	if len(r.path) > 1 {
		field := r.path[1]
		switch out := c.outputFields(n); {
		case field == "history":
			if !inLoop[id] {
				c.refErr(s, r, SevError, HistoryOutsideLoop, "read the single output instead, or put the node in a loop", "reference %s uses .history but node %q is not in any loop", show, id)
			}
		case strings.HasPrefix(field, "_"):
		case out.known && !out.has(field):
			if c.sink.skip(SevError) {
				break
			}
			schema := "its expressions"
			if n.Output != nil {
				schema = fmt.Sprintf("output schema %q", n.Output.Name)
			}
			c.refErr(s, r, SevError, UnknownOutputField, fieldHint(field, out.names), "reference %s accesses field %q not found in %s of node %q", show, field, schema, id)
		case !out.known:
			c.refErr(s, r, SevWarning, SchemalessOutput, fmt.Sprintf("declare output: on %q", id), "reference %s accesses field %q on node %q which has no output schema; it cannot be checked", show, field, id)
		}
	}
	// The producer must be able to run before the reader.
	if reader := s.reader(); reader != "" && reader != id && c.w.Entry != "" && !reaches(id, reader) {
		c.refErr(s, r, SevError, OutputNotBefore, fmt.Sprintf("add a path from %q to %q, or read another node", id, reader),
			"reference %s targets node %q which is not reachable before %q", show, id, reader)
	}
}
