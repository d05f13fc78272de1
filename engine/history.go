package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/iterion-bot/iterion/dsl"
)

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
			templates(n.Tool.Command, n.Tool.Script)
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

// historyPage is how many entries load reads from the store at once.
const historyPage = 256

// load reads the outputs of a decoded checkpoint, from the store unless
// they are small: the latest of every node, and all of those in history
// (the nodes whose .history is read), overlaid with the entries not
// stored yet. A history
// past maxHistory bytes is refused with the failure record would give.
func (c *checkpoint) load(ctx context.Context, s Store, runID string, history map[string]bool, maxHistory int64) error {
	if c.loaded {
		return nil
	}
	unstored := map[string]map[int]json.RawMessage{}
	for _, h := range c.Unstored {
		if unstored[h.Series] == nil {
			unstored[h.Series] = map[int]json.RawMessage{}
		}
		unstored[h.Series][h.Index] = h.Data
	}
	outputs := map[string]map[string]any{}
	hist := map[string][]any{}
	var histBytes int64
	for node, d := range c.Small {
		var out map[string]any
		if err := json.Unmarshal(d, &out); err != nil {
			return fmt.Errorf("decoding the output of %s: %w", node, err)
		}
		outputs[node], _ = normalize(out).(map[string]any)
	}
	for _, series := range slices.Sorted(maps.Keys(c.Entries)) {
		node, ok := strings.CutPrefix(series, "outputs.")
		n := c.Entries[series]
		if !ok || n == 0 {
			continue
		}
		from := n - 1
		if history[node] {
			from = 0
		}
		data := make([]json.RawMessage, n-from)
		for i := from; i < n; {
			if d, ok := unstored[series][i]; ok {
				data[i-from] = d
				i++
				continue
			}
			page, err := s.History(ctx, runID, series, i, min(historyPage, n-i))
			if err != nil {
				return fmt.Errorf("reading the outputs of %s: %w", node, err)
			}
			if len(page) == 0 || page[0].Index != i {
				return fmt.Errorf("reading the outputs of %s: entry %d of %d is missing from the store", node, i, n)
			}
			for _, h := range page {
				if h.Index != i {
					break // a gap, filled by an unstored entry or missing
				}
				if d, ok := unstored[series][i]; ok {
					data[i-from] = d // recorded since, not stored yet
				} else {
					data[i-from] = h.Data
				}
				i++
			}
		}
		values := make([]any, len(data))
		for i, d := range data {
			if history[node] {
				histBytes += int64(len(d))
				if histBytes > maxHistory {
					return historyTooLarge(node, from+i+1, histBytes, maxHistory)
				}
			}
			var out map[string]any
			if err := json.Unmarshal(d, &out); err != nil {
				return fmt.Errorf("decoding output %d of %s: %w", from+i, node, err)
			}
			values[i] = normalize(out)
		}
		outputs[node], _ = values[len(values)-1].(map[string]any)
		if history[node] {
			hist[node] = values
		}
	}
	c.Outputs, c.History, c.historyBytes, c.loaded = outputs, hist, histBytes, true
	return nil
}

// historyTooLarge is the failure of a run whose .history reads would make
// it hold more than max bytes of outputs.
func historyTooLarge(node string, outputs int, size, max int64) error {
	return failf(CodeBudgetExceeded, "outputs.%s.history would hold %d outputs of %d bytes in all, more than the %s a run keeps for .history reads: bound the loop, make the node's output smaller, or read outputs.%s (its latest output) instead",
		node, outputs, size, byteSize(max), node)
}
