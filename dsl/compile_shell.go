package dsl

import (
	"fmt"

	"github.com/iterion-bot/iterion/dsl/shell"
)

// toolCommand is a tool node's command with its source, for checks that
// need the whole graph.
type toolCommand struct {
	node *Node
	t    *Template // the command, or a shell script
	lit  *StringLit
}

// commandPieces splits a command template for the shell scan: a hole per
// reference, and raw references as an opaque word (their text is the
// author's shell, unknown until run time). refs[i] is the reference of
// the i-th hole.
func commandPieces(t *Template) ([]shell.Piece, []*Ref) {
	var pieces []shell.Piece
	var refs []*Ref
	for _, p := range t.Parts {
		switch {
		case p.Ref == nil:
			pieces = append(pieces, shell.Piece{Text: p.Literal})
		case p.Ref.Raw:
			pieces = append(pieces, shell.Piece{Text: "_"})
		default:
			pieces = append(pieces, shell.Piece{Hole: true})
			refs = append(refs, p.Ref)
		}
	}
	return pieces, refs
}

// engineValue reports whether the engine itself makes r's value (run ids,
// loop counters), so no one else can make it hostile.
func engineValue(r *Ref) bool {
	switch r.Namespace {
	case "run":
		return true
	case "loop":
		return len(r.Path) > 1 && (r.Path[1] == "iteration" || r.Path[1] == "max")
	}
	return false
}

// checkCommand warns (E093) about references of a tool's command that
// stand where no rendering keeps their value inert. The engine keeps them
// inert everywhere else (dsl/shell).
func (c *compiler) checkCommand(n *Node, t *Template, lit *StringLit) {
	if t == nil || c.sink.full() {
		return
	}
	pieces, refs := commandPieces(t)
	uses := shell.Scan(pieces)
	cur := lit.cursor()
	for i, u := range uses {
		r := refs[i]
		start, end := cur.at(r.Offset), cur.at(r.End)
		if u.Risk == "" || engineValue(r) {
			continue
		}
		raw := *r
		raw.Raw = true
		d := c.warnf(start, end, UnsafeCommandRef, fmt.Sprintf("%s; or write %s if the value is trusted", u.Fix, raw.String()),
			"command of tool %q: %s is %s", n.ID, r, u.Risk)
		d.NodeID = n.ID
	}
	c.commands = append(c.commands, toolCommand{node: n, t: t, lit: lit})
}

// checkRawRefs warns (E094) about raw references whose value a pull
// request or a model controls: spliced as shell text, such a value runs.
func (c *compiler) checkRawRefs() {
	for _, tc := range c.commands {
		cur := tc.lit.cursor()
		for _, r := range tc.t.Refs() {
			start, end := cur.at(r.Offset), cur.at(r.End)
			if !r.Raw {
				continue
			}
			from := c.untrusted(tc.node.ID, r, 0)
			if from == "" {
				continue
			}
			plain := *r
			plain.Raw = false
			d := c.warnf(start, end, RawUntrustedRef,
				fmt.Sprintf("drop the ! (%s): the engine then passes the value as data, inert wherever it stands", plain.String()),
				"command of tool %q: raw reference %s splices %s into the command as shell text", tc.node.ID, r, from)
			d.NodeID = tc.node.ID
		}
	}
}

// prVars are the vars the GitHub trigger fills from the pull request and
// the comment (bot/github prContext), with who writes them.
var prVars = map[string]string{
	"pr_title":     "the pull request's author",
	"pr_body":      "the pull request's author",
	"comment_body": "the commenter",
}

// untrusted says where r's value comes from when a pull request or a
// model controls it, or "". node is the reader, for {{input.…}}: its
// fields come from the with mappings of its incoming edges.
func (c *compiler) untrusted(node string, r *Ref, depth int) string {
	if len(r.Path) == 0 || depth > 8 {
		return ""
	}
	head := r.Path[0]
	switch r.Namespace {
	case "vars":
		if who, ok := prVars[head]; ok {
			return fmt.Sprintf("var %s, which %s writes,", head, who)
		}
	case "outputs":
		return c.untrustedNode(head)
	case "artifacts":
		for _, n := range c.producers().publishers[head] {
			if from := c.untrustedNode(n.ID); from != "" {
				return fmt.Sprintf("artifact %s, %s", head, from)
			}
		}
	case "loop":
		if len(r.Path) > 1 && r.Path[1] == "previous_output" {
			for _, e := range c.producers().loopEdges[head] {
				if from := c.untrustedNode(e.From); from != "" {
					return fmt.Sprintf("loop %s's previous_output, %s", head, from)
				}
			}
		}
	case "input":
		for _, e := range c.w.in[node] {
			for _, m := range e.With {
				if m.Key != head {
					continue
				}
				for _, mr := range m.Value.Refs() {
					var from string
					if mr.Namespace == "input" { // in a with, input is the source's output
						from = c.untrustedNode(e.From)
					} else {
						from = c.untrusted(e.From, mr, depth+1)
					}
					if from != "" {
						return fmt.Sprintf("input %s, mapped from %s", head, from)
					}
				}
			}
		}
	}
	return ""
}

// producerIndex lists, in declaration order, the nodes that publish each
// artifact and the edges of each loop, so tracing a raw reference to what
// produced it does not scan the whole workflow per reference.
type producerIndex struct {
	publishers map[string][]*Node
	loopEdges  map[string][]*Edge
}

func (c *compiler) producers() *producerIndex {
	if c.producerIdx != nil {
		return c.producerIdx
	}
	p := &producerIndex{publishers: map[string][]*Node{}, loopEdges: map[string][]*Edge{}}
	for _, n := range c.w.Nodes {
		if n.Publish != "" {
			p.publishers[n.Publish] = append(p.publishers[n.Publish], n)
		}
	}
	for _, e := range c.w.Edges {
		if e.Loop != nil {
			p.loopEdges[e.Loop.Name] = append(p.loopEdges[e.Loop.Name], e)
		}
	}
	c.producerIdx = p
	return p
}

// untrustedNode describes the output of node id when a model or a person
// writes it, or "".
func (c *compiler) untrustedNode(id string) string {
	n := c.w.nodes[id]
	if n == nil {
		return ""
	}
	switch n.Kind {
	case NodeAgent, NodeJudge:
		return fmt.Sprintf("the output of %s %q, which a model writes,", n.Kind, id)
	case NodeHuman:
		return fmt.Sprintf("the output of human %q, an answer,", id)
	case NodeAwaitAnswers:
		return fmt.Sprintf("the answers collected by await_answers %q", id)
	case NodeRouter:
		if n.LLM != nil {
			return fmt.Sprintf("the output of llm router %q, which a model writes,", id)
		}
	}
	return ""
}
