package engine

import "github.com/iterion-bot/iterion/dsl"

// historyReaders returns the nodes whose outputs.<node>.history is read by
// a template or an expression of the workflow.
func historyReaders(w *dsl.Workflow) map[string]bool {
	out := map[string]bool{}
	note := func(ns string, path []string) {
		if ns == "outputs" && len(path) >= 2 && path[1] == "history" {
			out[path[0]] = true
		}
	}
	templates := func(ts ...*dsl.Template) {
		for _, t := range ts {
			for _, r := range t.Refs() {
				note(r.Namespace, r.Path)
			}
		}
	}
	for _, p := range w.Prompts {
		templates(p.Body)
	}
	for _, n := range w.Nodes {
		switch {
		case n.LLM != nil:
			templates(n.LLM.System, n.LLM.User)
		}
		if n.Human != nil {
			templates(n.Human.Instructions)
		}
		if n.Tool != nil {
			templates(n.Tool.Command)
		}
		if n.Fail != nil {
			templates(n.Fail.Message)
		}
		if n.Event != nil {
			for _, m := range n.Event.With {
				templates(m.Value)
			}
		}
		if n.Compute != nil {
			for _, f := range n.Compute.Fields {
				for _, r := range f.Expr.Refs() {
					note(r.Namespace, r.Path)
				}
			}
		}
	}
	for _, e := range w.Edges {
		for _, m := range e.With {
			templates(m.Value)
		}
		if e.When != nil && e.When.Expr != nil {
			for _, r := range e.When.Expr.Refs() {
				note(r.Namespace, r.Path)
			}
		}
	}
	for _, l := range w.Loops {
		if l.MaxExpr != nil {
			for _, r := range l.MaxExpr.Refs() {
				note(r.Namespace, r.Path)
			}
		}
	}
	return out
}
