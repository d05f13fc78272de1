package dsl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The canonical printers of the syntax tree and the IR. Their output is
// stable (sorted where the source has no order) and is what the golden tests
// under testdata compare.

// String prints the syntax tree, one construct per line, with the position
// of each name and value.
func (f *File) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "file %s profile=%d\n", f.Name, f.Profile)
	for _, d := range f.Decls {
		printDecl(&b, d)
	}
	return b.String()
}

func at(p Pos) string { return "@" + p.String() }

func printDecl(b *strings.Builder, d Decl) {
	switch d := d.(type) {
	case *PromptDecl:
		fmt.Fprintf(b, "prompt %s %s\n", d.Name.Name, at(d.Name.Start))
		if d.Body != nil {
			fmt.Fprintf(b, "  body %s\n", printValue(d.Body))
		}
	case *SchemaDecl:
		fmt.Fprintf(b, "schema %s %s\n", d.Name.Name, at(d.Name.Start))
		printFields(b, d.Fields)
	case *VarsDecl:
		fmt.Fprintf(b, "vars %s\n", at(d.Kw.Start))
		printFields(b, d.Fields)
	case *PresetsDecl:
		fmt.Fprintf(b, "presets %s\n", at(d.Kw.Start))
		for _, p := range d.Presets {
			fmt.Fprintf(b, "  preset %s %s\n", p.Name.Name, at(p.Name.Start))
			printProps(b, p.Values, "    ")
		}
	case *NodeDecl:
		fmt.Fprintf(b, "%s %s %s\n", d.Kind.Name, d.Name.Name, at(d.Name.Start))
		printProps(b, d.Props, "  ")
	case *WorkflowDecl:
		fmt.Fprintf(b, "workflow %s %s\n", d.Name.Name, at(d.Name.Start))
		printProps(b, d.Props, "  ")
		if d.Vars != nil {
			fmt.Fprintf(b, "  vars %s\n", at(d.Vars.Kw.Start))
			var sub strings.Builder
			printFields(&sub, d.Vars.Fields)
			for _, line := range strings.SplitAfter(sub.String(), "\n") {
				if line != "" {
					b.WriteString("  " + line)
				}
			}
		}
		for _, e := range d.Edges {
			b.WriteString("  edge")
			for i, id := range e.Chain {
				if i > 0 {
					b.WriteString(" ->")
				}
				fmt.Fprintf(b, " %s%s", id.Name, at(id.Start))
			}
			if g := e.When; g != nil {
				b.WriteString(" when")
				if g.Not {
					b.WriteString(" not")
				}
				if g.Field != nil {
					fmt.Fprintf(b, " %s%s", g.Field.Name, at(g.Field.Start))
				} else {
					b.WriteString(" " + printValue(g.Expr))
				}
			}
			if e.Else.IsValid() {
				b.WriteString(" else" + at(e.Else))
			}
			if l := e.Loop; l != nil {
				fmt.Fprintf(b, " as %s(%s)", l.Name.Name, printValue(l.Count))
			}
			if e.With != nil {
				b.WriteString(" with " + printValue(e.With))
			}
			b.WriteByte('\n')
		}
	case *MCPServerDecl:
		fmt.Fprintf(b, "mcp_server %s %s\n", d.Name.Name, at(d.Name.Start))
		printProps(b, d.Props, "  ")
	case *UnsupportedDecl:
		fmt.Fprintf(b, "unsupported %s %s %s\n", d.Kw.Name, d.Name.Name, at(d.Kw.Start))
	}
}

func printFields(b *strings.Builder, fields []*FieldDecl) {
	for _, f := range fields {
		ty := f.Type.Name
		if f.List {
			ty += "[]"
		}
		fmt.Fprintf(b, "  field %s %s %s", f.Name.Name, ty, at(f.Name.Start))
		if f.Enum != nil {
			var vals []string
			for _, v := range f.Enum {
				vals = append(vals, printValue(v))
			}
			fmt.Fprintf(b, " enum[%s]", strings.Join(vals, ", "))
		}
		if f.Default != nil {
			b.WriteString(" = " + printValue(f.Default))
		}
		b.WriteByte('\n')
	}
}

func printProps(b *strings.Builder, props []*Property, indent string) {
	for _, p := range props {
		fmt.Fprintf(b, "%s%s %s", indent, p.Key.Name, at(p.Key.Start))
		if blk, ok := p.Value.(*BlockLit); ok {
			b.WriteString(" block\n")
			printProps(b, blk.Props, indent+"  ")
			continue
		}
		if p.Value == nil {
			b.WriteString(" <missing>\n")
			continue
		}
		fmt.Fprintf(b, " = %s\n", printValue(p.Value))
	}
}

func printValue(v Value) string {
	if v == nil {
		return "<missing>"
	}
	start, _ := v.Span()
	switch v := v.(type) {
	case *StringLit:
		style := map[StringStyle]string{StyleQuoted: "", StyleRaw: "raw", StyleBlock: "block"}[v.Style]
		return style + strconv.Quote(v.Value) + at(start)
	case *WordLit:
		return v.Name + at(start)
	case *NumberLit:
		return v.Text + at(start)
	case *BoolLit:
		return strconv.FormatBool(v.Value) + at(start)
	case *ListLit:
		var items []string
		for _, it := range v.Items {
			items = append(items, printValue(it))
		}
		return "[" + strings.Join(items, ", ") + "]"
	case *MapLit:
		var items []string
		for _, e := range v.Entries {
			items = append(items, e.Key.Name+": "+printValue(e.Value))
		}
		return "{" + strings.Join(items, ", ") + "}"
	case *BlockLit:
		return "block"
	}
	return "?"
}

// String prints the IR canonically: every resolved property, in a fixed
// order, with defaults made explicit.
func (w *Workflow) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "workflow %s ir=%d profile=%d\n", w.Name, IRVersion, w.Profile)
	fmt.Fprintf(&b, "  entry %s\n", w.Entry)
	if w.DefaultBackend != "" {
		fmt.Fprintf(&b, "  default_backend %s\n", w.DefaultBackend)
	}
	if w.Interaction != InteractionUnset {
		fmt.Fprintf(&b, "  interaction %s\n", w.Interaction)
	}
	if w.Budget != (Budget{}) {
		fmt.Fprintf(&b, "  budget branches=%d duration=%s cost_usd=%g tokens=%d warn_tokens=%d iterations=%d\n",
			w.Budget.MaxParallelBranches, w.Budget.MaxDuration, w.Budget.MaxCostUSD, w.Budget.MaxTokens, w.Budget.WarnTokens, w.Budget.MaxIterations)
	}
	printSandbox(&b, "  ", w.Sandbox)
	for _, s := range w.MCPServers {
		fmt.Fprintf(&b, "  mcp_server %s %s", s.Name, s.Transport)
		if s.Command != "" {
			fmt.Fprintf(&b, " command=%q", s.Command)
		}
		if s.Args != nil {
			fmt.Fprintf(&b, " args=%q", s.Args)
		}
		if s.URL != "" {
			fmt.Fprintf(&b, " url=%q", s.URL)
		}
		for _, k := range keys(s.Env) {
			fmt.Fprintf(&b, " env.%s=%q", k, s.Env[k])
		}
		b.WriteByte('\n')
	}
	for _, v := range w.Vars {
		fmt.Fprintf(&b, "  var %s %s", v.Name, v.Type)
		if len(v.Enum) > 0 {
			fmt.Fprintf(&b, " enum%q", v.Enum)
		}
		if v.HasDefault {
			fmt.Fprintf(&b, " = %s", printAny(v.Default))
		}
		b.WriteByte('\n')
	}
	for _, p := range w.Presets {
		fmt.Fprintf(&b, "  preset %s", p.Name)
		for _, k := range keys(p.Values) {
			fmt.Fprintf(&b, " %s=%s", k, printAny(p.Values[k]))
		}
		b.WriteByte('\n')
	}
	for _, s := range w.Schemas {
		fmt.Fprintf(&b, "  schema %s\n", s.Name)
		for _, f := range s.Fields {
			fmt.Fprintf(&b, "    %s %s", f.Name, f.Type)
			if len(f.Enum) > 0 {
				fmt.Fprintf(&b, " enum%q", f.Enum)
			}
			b.WriteByte('\n')
		}
	}
	for _, p := range w.Prompts {
		fmt.Fprintf(&b, "  prompt %s %s\n", p.Name, printTemplate(p.Body))
	}
	for _, n := range w.Nodes {
		printNode(&b, n)
	}
	for _, l := range w.Loops {
		fmt.Fprintf(&b, "  loop %s max=%s\n", l.Name, loopBound(l))
	}
	for _, e := range w.Edges {
		fmt.Fprintf(&b, "  edge %s", e.ID())
		if c := e.When; c != nil {
			switch {
			case c.Expr != nil:
				fmt.Fprintf(&b, " when expr(%s)", c.Expr)
			case c.Not:
				fmt.Fprintf(&b, " when not %s", c.Field)
			default:
				fmt.Fprintf(&b, " when %s", c.Field)
			}
		}
		if e.Else {
			b.WriteString(" else")
		}
		if e.Loop != nil {
			fmt.Fprintf(&b, " loop %s", e.Loop.Name)
		}
		printMappings(&b, e.With)
		b.WriteByte('\n')
	}
	return b.String()
}

func printNode(b *strings.Builder, n *Node) {
	fmt.Fprintf(b, "  node %s %s", n.Kind, n.ID)
	if n.Input != nil {
		fmt.Fprintf(b, " input=%s", n.Input.Name)
	}
	if n.Output != nil {
		fmt.Fprintf(b, " output=%s", n.Output.Name)
	}
	if n.Publish != "" {
		fmt.Fprintf(b, " publish=%s", n.Publish)
	}
	if n.Await != AwaitUnset {
		fmt.Fprintf(b, " await=%s", n.Await)
	}
	if n.Timeout > 0 {
		fmt.Fprintf(b, " timeout=%s", n.Timeout)
	}
	b.WriteByte('\n')
	if n.Description != "" {
		fmt.Fprintf(b, "    description %q\n", n.Description)
	}
	if f := n.FollowUp; f != nil {
		fmt.Fprintf(b, "    followup remind=%s escalate_after=%s escalate_to=%q expire=%s default=%q\n", f.Remind, f.EscalateAfter, f.EscalateTo, f.Expire, f.Default)
	}
	if l := n.LLM; l != nil {
		fmt.Fprintf(b, "    llm model=%q backend=%q session=%s interaction=%s", l.Model, l.Backend, l.Session, l.Interaction)
		if len(l.Tools) > 0 {
			fmt.Fprintf(b, " tools=%q", l.Tools)
		}
		if l.ToolMaxSteps > 0 {
			fmt.Fprintf(b, " tool_max_steps=%d", l.ToolMaxSteps)
		}
		if l.MaxTokens > 0 {
			fmt.Fprintf(b, " max_tokens=%d", l.MaxTokens)
		}
		if l.ReasoningEffort != "" {
			fmt.Fprintf(b, " reasoning_effort=%s", l.ReasoningEffort)
		}
		if l.Multi {
			b.WriteString(" multi")
		}
		if len(l.MCPServers) > 0 {
			fmt.Fprintf(b, " mcp=%q", l.MCPServers)
		}
		b.WriteByte('\n')
		if l.System != nil {
			fmt.Fprintf(b, "    system %s\n", printTemplate(l.System))
		}
		if l.User != nil {
			fmt.Fprintf(b, "    user %s\n", printTemplate(l.User))
		}
	}
	switch {
	case n.Human != nil:
		fmt.Fprintf(b, "    human interaction=%s", n.Human.Interaction)
		if n.Human.Instructions != nil {
			fmt.Fprintf(b, " instructions=%s", printTemplate(n.Human.Instructions))
		}
		b.WriteByte('\n')
	case n.Router != nil:
		fmt.Fprintf(b, "    router mode=%s\n", n.Router.Mode)
	case n.Tool != nil:
		if n.Tool.Script != nil {
			fmt.Fprintf(b, "    script %s %s\n", n.Tool.Language, printTemplate(n.Tool.Script))
		} else {
			fmt.Fprintf(b, "    command %s\n", printTemplate(n.Tool.Command))
		}
	case n.Compute != nil:
		for _, f := range n.Compute.Fields {
			fmt.Fprintf(b, "    expr %s = %s\n", f.Name, f.Expr)
		}
	case n.Event != nil:
		fmt.Fprintf(b, "    event %q", n.Event.Name)
		printMappings(b, n.Event.With)
		b.WriteByte('\n')
	case n.AwaitAnswers != nil:
		fmt.Fprintf(b, "    from %q\n", n.AwaitAnswers.From)
	case n.Fail != nil:
		fmt.Fprintf(b, "    fail code=%s resumable=%t", n.Fail.Code, n.Fail.Resumable)
		if n.Fail.Message != nil {
			fmt.Fprintf(b, " message=%s", printTemplate(n.Fail.Message))
		}
		b.WriteByte('\n')
	}
	printSandbox(b, "    ", n.Sandbox)
}

// printSandbox prints a sandbox declaration on one line; nothing when nil.
func printSandbox(b *strings.Builder, indent string, s *Sandbox) {
	if s == nil {
		return
	}
	fmt.Fprintf(b, "%ssandbox mode=%s", indent, s.Mode)
	if s.Image != "" {
		fmt.Fprintf(b, " image=%q", s.Image)
	}
	if s.Network != "" {
		fmt.Fprintf(b, " network=%s", s.Network)
	}
	for _, k := range keys(s.Env) {
		fmt.Fprintf(b, " env.%s=%q", k, s.Env[k])
	}
	b.WriteByte('\n')
}

func printMappings(b *strings.Builder, ms []*Mapping) {
	if len(ms) == 0 {
		return
	}
	b.WriteString(" with {")
	for i, m := range ms {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(b, "%s: %s", m.Key, printTemplate(m.Value))
	}
	b.WriteString("}")
}

// printTemplate shows a template as its parts: literals quoted, references
// in canonical {{…}} form.
func printTemplate(t *Template) string {
	if t == nil {
		return "<none>"
	}
	var parts []string
	for _, p := range t.Parts {
		if p.Ref != nil {
			parts = append(parts, p.Ref.String())
		} else {
			parts = append(parts, strconv.Quote(p.Literal))
		}
	}
	if len(parts) == 0 {
		return `""`
	}
	return strings.Join(parts, " + ")
}

func printAny(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case []any:
		var items []string
		for _, it := range v {
			items = append(items, printAny(it))
		}
		return "[" + strings.Join(items, ", ") + "]"
	case map[string]any:
		ks := keys(v)
		slices.Sort(ks)
		var items []string
		for _, k := range ks {
			items = append(items, strconv.Quote(k)+": "+printAny(v[k]))
		}
		return "{" + strings.Join(items, ", ") + "}"
	}
	return fmt.Sprint(v)
}
