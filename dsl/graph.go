package dsl

// The graph checks that ask about many pairs of nodes (is this node in a
// loop, can this producer run before that reader) share one computation of
// the strongly connected components, so a file of thousands of loops or
// references costs time linear in its size, not a search per question.

// nodeGraph is the workflow's graph over node indices: every edge between
// two declared nodes, loop edges included (edges to done and fail lead
// nowhere further).
type nodeGraph struct {
	index map[string]int32
	succ  [][]int32
	// comp is the strongly connected component of each node. Components
	// are numbered in the order Tarjan's algorithm completes them, so an
	// edge between two components goes from the higher number to the
	// lower: counting down is a topological order.
	comp  []int32
	ncomp int32
}

func newNodeGraph(w *Workflow) *nodeGraph {
	g := &nodeGraph{index: make(map[string]int32, len(w.Nodes)), succ: make([][]int32, len(w.Nodes))}
	for i, n := range w.Nodes {
		g.index[n.ID] = int32(i)
	}
	for i, n := range w.Nodes {
		for _, e := range w.out[n.ID] {
			if j, ok := g.index[e.To]; ok {
				g.succ[i] = append(g.succ[i], j)
			}
		}
	}
	g.components()
	return g
}

// components runs Tarjan's algorithm with an explicit stack, since a chain
// of tens of thousands of nodes would recurse as deep.
func (g *nodeGraph) components() {
	n := len(g.succ)
	order := make([]int32, n) // 1 + the order of discovery; 0 = not yet seen
	low := make([]int32, n)
	onStack := make([]bool, n)
	g.comp = make([]int32, n)
	var stack []int32
	type frame struct {
		v    int32
		next int
	}
	var calls []frame
	seen := int32(0)
	visit := func(v int32) {
		seen++
		order[v], low[v] = seen, seen
		stack = append(stack, v)
		onStack[v] = true
		calls = append(calls, frame{v: v})
	}
	for root := range int32(n) {
		if order[root] != 0 {
			continue
		}
		visit(root)
		for len(calls) > 0 {
			top := len(calls) - 1
			v := calls[top].v
			if k := calls[top].next; k < len(g.succ[v]) {
				calls[top].next++
				switch w := g.succ[v][k]; {
				case order[w] == 0:
					visit(w)
				case onStack[w]:
					low[v] = min(low[v], order[w])
				}
				continue
			}
			if low[v] == order[v] {
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					g.comp[w] = g.ncomp
					if w == v {
						break
					}
				}
				g.ncomp++
			}
			calls = calls[:top]
			if top > 0 {
				u := calls[top-1].v
				low[u] = min(low[u], low[v])
			}
		}
	}
}

// loopNodes returns the nodes that lie on a cycle through a loop edge:
// those of every component that holds a loop edge inside it (an edge u → w
// and a path w ⇝ v ⇝ u put v in the component of u and w, and every node
// of that component is on such a cycle).
func (g *nodeGraph) loopNodes(w *Workflow) map[string]bool {
	looped := map[int32]bool{}
	for _, e := range w.Edges {
		if e.Loop == nil {
			continue
		}
		from, okFrom := g.index[e.From]
		to, okTo := g.index[e.To]
		if okFrom && okTo && g.comp[from] == g.comp[to] {
			looped[g.comp[from]] = true
		}
	}
	in := map[string]bool{}
	if len(looped) == 0 {
		return in
	}
	for _, n := range w.Nodes {
		if looped[g.comp[g.index[n.ID]]] {
			in[n.ID] = true
		}
	}
	return in
}

// reachability answers "is node to reachable from node from" for a fixed
// set of sources: for each component, a bitset of the sources that reach
// it, filled in one pass over the components in topological order. It
// costs one bit per (component, source) pair and a word operation per
// (edge, 64 sources), instead of a search per source.
type reachability struct {
	g      *nodeGraph
	column map[int32]int // source node → its bit
	words  int
	bits   []uint64 // ncomp rows of words
}

func (g *nodeGraph) reachabilityFrom(sources []string) *reachability {
	r := &reachability{g: g, column: map[int32]int{}}
	for _, id := range sources {
		if v, ok := g.index[id]; ok {
			if _, dup := r.column[v]; !dup {
				r.column[v] = len(r.column)
			}
		}
	}
	r.words = (len(r.column) + 63) / 64
	if r.words == 0 {
		return r
	}
	r.bits = make([]uint64, int(g.ncomp)*r.words)
	for v, k := range r.column {
		r.row(g.comp[v])[k/64] |= 1 << (k % 64)
	}
	// byComp lists the nodes of each component.
	start := make([]int32, g.ncomp+1)
	for _, c := range g.comp {
		start[c+1]++
	}
	for c := range g.ncomp {
		start[c+1] += start[c]
	}
	byComp := make([]int32, len(g.comp))
	fill := append([]int32(nil), start[:g.ncomp]...)
	for v, c := range g.comp {
		byComp[fill[c]] = int32(v)
		fill[c]++
	}
	for c := g.ncomp - 1; c >= 0; c-- {
		from := r.row(c)
		for _, u := range byComp[start[c]:start[c+1]] {
			for _, v := range g.succ[u] {
				if d := g.comp[v]; d != c {
					to := r.row(d)
					for i, b := range from {
						to[i] |= b
					}
				}
			}
		}
	}
	return r
}

func (r *reachability) row(c int32) []uint64 {
	return r.bits[int(c)*r.words : (int(c)+1)*r.words]
}

// reaches reports whether to is reachable from from (a node reaches
// itself). from is one of the sources; for any other node it searches.
func (r *reachability) reaches(from, to string) bool {
	v, okFrom := r.g.index[from]
	u, okTo := r.g.index[to]
	if !okFrom || !okTo {
		return false
	}
	k, ok := r.column[v]
	if !ok {
		return r.g.search(v, u)
	}
	return r.row(r.g.comp[u])[k/64]&(1<<(k%64)) != 0
}

// search is a depth-first search from v for u.
func (g *nodeGraph) search(v, u int32) bool {
	seen := make([]bool, len(g.succ))
	seen[v] = true
	stack := []int32{v}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if x == u {
			return true
		}
		for _, y := range g.succ[x] {
			if !seen[y] {
				seen[y] = true
				stack = append(stack, y)
			}
		}
	}
	return false
}
