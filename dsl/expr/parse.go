package expr

import (
	"fmt"
	"slices"
	"strings"

	"github.com/iterion-bot/iterion/internal/textdist"
)

// Parse limits.
const (
	// MaxSourceLen is the maximum length of an expression source in bytes.
	MaxSourceLen = 64 << 10
	// MaxDepth is the maximum nesting depth: each parenthesis, list,
	// object, call, subscript and unary operator opens one level.
	MaxDepth = 256
	// MaxNodes is the maximum number of nodes in a parsed expression.
	MaxNodes = 10000
)

// namespaces are the reserved first path segments.
var namespaces = []string{"vars", "input", "outputs", "artifacts", "loop", "run"}

func isNamespace(s string) bool { return slices.Contains(namespaces, s) }

// Error is a parse error. Offset is the 0-based byte offset in the source
// of the offending token and End the byte offset just past it
// (Offset <= End <= len(src)).
type Error struct {
	Offset, End int
	Msg         string
}

// Error implements the error interface.
func (e *Error) Error() string {
	return fmt.Sprintf("offset %d: %s", e.Offset, e.Msg)
}

// Expr is a parsed, immutable expression. It is safe for concurrent use,
// including concurrent calls to Eval.
type Expr struct {
	src    string
	root   *node
	refs   []Ref
	nslots int
}

// Ref is a reference to a namespace path found in an expression. Bare
// identifiers (neither a reserved namespace nor a lambda parameter) are
// reported with Namespace "input" and Bare set.
type Ref struct {
	// Namespace is one of vars, input, outputs, artifacts, loop, run.
	Namespace string
	// Path holds the segments after the namespace: only the static prefix
	// written as .ident or ["literal"]. It is empty, never nil, for a bare
	// namespace such as "vars".
	Path []string
	// Bare reports that the reference was written without a namespace
	// (approved for input.approved).
	Bare bool
	// Offset and End are the byte offsets of the reference (its root
	// identifier through its last static segment) in the source.
	Offset, End int
}

// Source returns the text the expression was parsed from.
func (e *Expr) Source() string {
	if e == nil {
		return ""
	}
	return e.src
}

// String returns the canonical text of the expression: symbolic operators,
// normalised literals and the minimum of parentheses. It is deterministic
// and parses back to an expression with the same String.
func (e *Expr) String() string {
	if e == nil || e.root == nil {
		return ""
	}
	var b strings.Builder
	e.root.write(&b, 0)
	return b.String()
}

// Refs returns every namespace reference in source order, lambda parameters
// excluded. The result is a fresh copy.
func (e *Expr) Refs() []Ref {
	if e == nil {
		return nil
	}
	out := make([]Ref, len(e.refs))
	for i, r := range e.refs {
		r.Path = slices.Clone(r.Path)
		if r.Path == nil {
			r.Path = []string{}
		}
		out[i] = r
	}
	return out
}

// parseError is the panic value used to unwind the parser.
type parseError struct{ err *Error }

type parser struct {
	src    string
	toks   []token
	i      int
	depth  int
	nodes  int
	scopes []scopeEntry
	nslots int
	refs   []Ref
}

type scopeEntry struct {
	name string
	slot int
}

// Parse parses src. On error it returns a *Error.
func Parse(src string) (ex *Expr, err error) {
	if len(src) > MaxSourceLen {
		return nil, &Error{Offset: MaxSourceLen, End: len(src),
			Msg: fmt.Sprintf("expression is too long (%d bytes, maximum %d)", len(src), MaxSourceLen)}
	}
	p := &parser{src: src, toks: lex(src)}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(parseError)
			if !ok {
				panic(r)
			}
			ex, err = nil, pe.err
		}
	}()
	if p.peek().kind == tEOF {
		p.failAt(0, len(src), "empty expression")
	}
	root := p.parseExpr()
	if t := p.peek(); t.kind != tEOF {
		p.unexpected(t)
	}
	return &Expr{src: src, root: root, refs: p.refs, nslots: p.nslots}, nil
}

func (p *parser) peek() token { return p.toks[p.i] }

// peekAt returns the token k positions ahead, or the final token.
func (p *parser) peekAt(k int) token {
	if p.i+k < len(p.toks) {
		return p.toks[p.i+k]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF && t.kind != tErr {
		p.i++
	}
	return t
}

func (p *parser) failAt(pos, end int, format string, args ...any) {
	panic(parseError{&Error{Offset: pos, End: end, Msg: fmt.Sprintf(format, args...)}})
}

func (p *parser) fail(t token, format string, args ...any) {
	p.failAt(t.pos, t.end, format, args...)
}

// unexpected reports t as out of place (a lexical error reports itself).
func (p *parser) unexpected(t token) {
	if t.kind == tErr {
		p.fail(t, "%s", t.text)
	}
	p.fail(t, "unexpected %s", t.describe())
}

func (p *parser) expect(k tokKind, what string) token {
	t := p.peek()
	if t.kind != k {
		if t.kind == tErr {
			p.unexpected(t)
		}
		p.fail(t, "expected %s, found %s", what, t.describe())
	}
	return p.next()
}

func (p *parser) isWord(t token, w string) bool { return t.kind == tWord && t.text == w }

func (p *parser) enter(t token) {
	p.depth++
	if p.depth > MaxDepth {
		p.fail(t, "maximum expression depth exceeded (%d)", MaxDepth)
	}
}

func (p *parser) leave() { p.depth-- }

func (p *parser) newNode(kind nodeKind, pos, end int) *node {
	p.nodes++
	if p.nodes > MaxNodes {
		t := p.toks[max(p.i-1, 0)] // the token that completed the node
		p.fail(t, "expression is too complex (more than %d nodes)", MaxNodes)
	}
	return &node{kind: kind, pos: pos, end: end}
}

func (p *parser) binary(op tokKind, l, r *node) *node {
	n := p.newNode(nBinary, l.pos, r.end)
	n.op = op
	n.kids = []*node{l, r}
	return n
}

func (p *parser) parseExpr() *node { return p.parseOr() }

func (p *parser) parseOr() *node {
	l := p.parseAnd()
	for t := p.peek(); t.kind == tOrOr || p.isWord(t, "or"); t = p.peek() {
		p.next()
		l = p.binary(tOrOr, l, p.parseAnd())
	}
	return l
}

func (p *parser) parseAnd() *node {
	l := p.parseNot()
	for t := p.peek(); t.kind == tAndAnd || p.isWord(t, "and"); t = p.peek() {
		p.next()
		l = p.binary(tAndAnd, l, p.parseNot())
	}
	return l
}

func (p *parser) parseNot() *node {
	t := p.peek()
	if t.kind != tBang && !p.isWord(t, "not") {
		return p.parseCmp()
	}
	p.next()
	p.enter(t)
	x := p.parseNot()
	p.leave()
	n := p.newNode(nNot, t.pos, x.end)
	n.kids = []*node{x}
	return n
}

func isCmp(k tokKind) bool {
	switch k {
	case tEq, tNe, tLt, tLe, tGt, tGe:
		return true
	}
	return false
}

func (p *parser) parseCmp() *node {
	l := p.parseAdd()
	t := p.peek()
	if !isCmp(t.kind) {
		return l
	}
	p.next()
	n := p.binary(t.kind, l, p.parseAdd())
	if t2 := p.peek(); isCmp(t2.kind) {
		p.fail(t2, "unexpected trailing %s: comparisons cannot be chained (write a < b && b < c)", t2.describe())
	}
	return n
}

func (p *parser) parseAdd() *node {
	l := p.parseMul()
	for t := p.peek(); t.kind == tPlus || t.kind == tMinus; t = p.peek() {
		p.next()
		l = p.binary(t.kind, l, p.parseMul())
	}
	return l
}

func (p *parser) parseMul() *node {
	l := p.parseUnary()
	for t := p.peek(); t.kind == tStar || t.kind == tSlash || t.kind == tPercent; t = p.peek() {
		p.next()
		l = p.binary(t.kind, l, p.parseUnary())
	}
	return l
}

func (p *parser) parseUnary() *node {
	t := p.peek()
	if t.kind != tMinus {
		return p.parsePostfix()
	}
	p.next()
	p.enter(t)
	x := p.parseUnary()
	p.leave()
	n := p.newNode(nNeg, t.pos, x.end)
	n.kids = []*node{x}
	return n
}

func (p *parser) parsePostfix() *node {
	n := p.parsePrimary()
	for {
		t := p.peek()
		switch t.kind {
		case tDot:
			p.next()
			w := p.peek()
			if w.kind != tWord {
				if w.kind == tErr {
					p.unexpected(w)
				}
				p.fail(w, `expected a field name after ".", found %s`, w.describe())
			}
			p.next()
			n = p.addSegment(n, w.text, w.end, nil)
		case tLBrack:
			p.next()
			p.enter(t)
			idx := p.parseExpr()
			p.leave()
			rb := p.expect(tRBrack, `"]"`)
			if idx.kind == nStr {
				n = p.addSegment(n, idx.sval, rb.end, idx)
				break
			}
			x := p.newNode(nIndex, n.pos, rb.end)
			x.kids = []*node{n, idx}
			n = x
		case tArrow:
			p.fail(t, "a lambda is only allowed as the last argument of map, filter or reduce")
		default:
			return n
		}
	}
}

// addSegment applies a static .name or ["name"] to n: it extends the static
// path of a reference or parameter, and otherwise builds an index node
// (reusing key, the string literal node of a ["name"] subscript, if any).
func (p *parser) addSegment(n *node, seg string, end int, key *node) *node {
	switch n.kind {
	case nRef:
		n.path = append(n.path, seg)
		n.end = end
		r := &p.refs[n.slot]
		r.Path = append(r.Path, seg)
		r.End = end
		return n
	case nParam:
		n.path = append(n.path, seg)
		n.end = end
		return n
	}
	if key == nil {
		key = p.newNode(nStr, n.end, end)
		key.sval = seg
	}
	x := p.newNode(nIndex, n.pos, end)
	x.kids = []*node{n, key}
	return x
}

func (p *parser) parsePrimary() *node {
	t := p.peek()
	switch t.kind {
	case tInt:
		p.next()
		n := p.newNode(nInt, t.pos, t.end)
		n.ival = t.ival
		return n
	case tFloat:
		p.next()
		n := p.newNode(nFloat, t.pos, t.end)
		n.fval = t.fval
		return n
	case tStr:
		p.next()
		n := p.newNode(nStr, t.pos, t.end)
		n.sval = t.text
		return n
	case tWord:
		return p.parseWord()
	case tLParen:
		if _, ok := p.lambdaAhead(); ok {
			p.failAt(t.pos, p.arrowEnd(), "a lambda is only allowed as the last argument of map, filter or reduce")
		}
		p.next()
		p.enter(t)
		x := p.parseExpr()
		p.leave()
		p.expect(tRParen, `")"`)
		return x
	case tLBrack:
		return p.parseList()
	case tLBrace:
		return p.parseObject()
	}
	p.unexpected(t)
	return nil
}

func (p *parser) parseWord() *node {
	t := p.peek()
	switch t.text {
	case "true", "false":
		p.next()
		n := p.newNode(nBool, t.pos, t.end)
		n.bval = t.text == "true"
		return n
	case "and", "or", "not":
		p.unexpected(t)
	}
	switch p.peekAt(1).kind {
	case tArrow:
		p.failAt(t.pos, p.peekAt(1).end, "a lambda is only allowed as the last argument of map, filter or reduce")
	case tLParen:
		return p.parseCall()
	}
	p.next()
	for i := len(p.scopes) - 1; i >= 0; i-- {
		if p.scopes[i].name == t.text {
			n := p.newNode(nParam, t.pos, t.end)
			n.sval = t.text
			n.slot = p.scopes[i].slot
			return n
		}
	}
	n := p.newNode(nRef, t.pos, t.end)
	n.slot = len(p.refs) // index of its entry in p.refs
	r := Ref{Offset: t.pos, End: t.end}
	if isNamespace(t.text) {
		n.ns = t.text
		r.Namespace = t.text
	} else {
		n.ns, n.bare, n.path = "input", true, []string{t.text}
		r.Namespace, r.Bare, r.Path = "input", true, []string{t.text}
	}
	p.refs = append(p.refs, r)
	return n
}

// lambdaAhead reports whether a lambda starts at the current token:
// IDENT "=>" or "(" [IDENT {"," IDENT}] ")" "=>". It returns the index of
// the arrow token.
func (p *parser) lambdaAhead() (int, bool) {
	i := p.i
	at := func(j int) token {
		if j < len(p.toks) {
			return p.toks[j]
		}
		return p.toks[len(p.toks)-1]
	}
	if at(i).kind == tWord {
		return i + 1, at(i+1).kind == tArrow
	}
	if at(i).kind != tLParen {
		return 0, false
	}
	j := i + 1
	if at(j).kind != tRParen {
		for {
			if at(j).kind != tWord {
				return 0, false
			}
			j++
			if at(j).kind == tRParen {
				break
			}
			if at(j).kind != tComma {
				return 0, false
			}
			j++
		}
	}
	return j + 1, at(j+1).kind == tArrow
}

// arrowEnd returns the end offset of the arrow of the lambda starting at the
// current token (which lambdaAhead has recognised).
func (p *parser) arrowEnd() int {
	j, _ := p.lambdaAhead()
	return p.toks[j].end
}

func (p *parser) parseLambda() *node {
	start := p.peek()
	var params []token
	if start.kind == tWord {
		params = append(params, p.next())
	} else {
		p.next() // (
		for p.peek().kind != tRParen {
			params = append(params, p.next())
			if p.peek().kind == tComma {
				p.next()
			}
		}
		p.next() // )
	}
	arrow := p.next()
	n := p.newNode(nLambda, start.pos, arrow.end)
	base := len(p.scopes)
	for _, pt := range params {
		switch {
		case isKeyword(pt.text):
			p.fail(pt, "lambda parameter %q is a keyword", pt.text)
		case isNamespace(pt.text):
			p.fail(pt, "lambda parameter %q collides with the reserved namespace", pt.text)
		}
		for _, q := range n.params {
			if q == pt.text {
				p.fail(pt, "duplicate lambda parameter %q", pt.text)
			}
		}
		n.params = append(n.params, pt.text)
		n.slots = append(n.slots, p.nslots)
		p.scopes = append(p.scopes, scopeEntry{name: pt.text, slot: p.nslots})
		p.nslots++
	}
	body := p.parseExpr()
	p.scopes = p.scopes[:base]
	n.kids = []*node{body}
	n.end = body.end
	return n
}

// span is a pair of byte offsets; for a lambda it covers the parameters
// and the arrow, used to point at a misplaced lambda.
type span struct{ pos, end int }

func (p *parser) parseCall() *node {
	name := p.next()
	fn, ok := builtins[name.text]
	if !ok {
		msg := fmt.Sprintf("unknown function %q", name.text)
		if s := suggest(name.text); s != "" {
			msg += fmt.Sprintf(", did you mean %q?", s)
		}
		p.fail(name, "%s", msg)
	}
	lp := p.next() // (
	p.enter(lp)
	var args []*node
	var heads []span // lambda heads, parallel to args (zero span if not a lambda)
	if p.peek().kind != tRParen {
		for {
			if _, isLambda := p.lambdaAhead(); isLambda {
				head := span{p.peek().pos, p.arrowEnd()}
				if fn.lambdaParams == 0 {
					p.failAt(head.pos, head.end, "a lambda is only allowed as the last argument of map, filter or reduce")
				}
				args = append(args, p.parseLambda())
				heads = append(heads, head)
			} else {
				args = append(args, p.parseExpr())
				heads = append(heads, span{})
			}
			t := p.peek()
			if t.kind == tRParen {
				break
			}
			if t.kind != tComma {
				if t.kind == tErr {
					p.unexpected(t)
				}
				p.fail(t, `expected "," or ")", found %s`, t.describe())
			}
			p.next()
			if p.peek().kind == tRParen {
				p.fail(t, "trailing comma is not allowed")
			}
		}
	}
	rp := p.next()
	p.leave()
	if len(args) < fn.min || (fn.max >= 0 && len(args) > fn.max) {
		p.failAt(name.pos, rp.end, "%s", arityMessage(name.text, fn, len(args)))
	}
	if fn.lambdaParams > 0 {
		last := len(args) - 1
		for i, a := range args[:last] {
			if a.kind == nLambda {
				p.failAt(heads[i].pos, heads[i].end, "a lambda is only allowed as the last argument of map, filter or reduce")
			}
		}
		l := args[last]
		if l.kind != nLambda {
			p.failAt(l.pos, l.end, "%s expects a lambda as its last argument, such as %s", name.text, fn.lambdaExample)
		}
		if got := len(l.params); got != fn.lambdaParams {
			p.failAt(heads[last].pos, heads[last].end, "%s lambda takes %d %s, got %d",
				name.text, fn.lambdaParams, plural(fn.lambdaParams, "parameter"), got)
		}
	}
	n := p.newNode(nCall, name.pos, rp.end)
	n.sval = name.text
	n.fn = fn
	n.kids = args
	return n
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func arityMessage(name string, fn *builtin, got int) string {
	switch {
	case fn.max < 0:
		return fmt.Sprintf("%s takes at least %d %s, got %d", name, fn.min, plural(fn.min, "argument"), got)
	case fn.min == fn.max:
		return fmt.Sprintf("%s takes %d %s, got %d", name, fn.min, plural(fn.min, "argument"), got)
	default:
		return fmt.Sprintf("%s takes %d to %d arguments, got %d", name, fn.min, fn.max, got)
	}
}

func (p *parser) parseList() *node {
	lb := p.next()
	p.enter(lb)
	n := p.newNode(nList, lb.pos, lb.end)
	if p.peek().kind != tRBrack {
		for {
			n.kids = append(n.kids, p.parseExpr())
			t := p.peek()
			if t.kind == tRBrack {
				break
			}
			if t.kind != tComma {
				if t.kind == tErr {
					p.unexpected(t)
				}
				p.fail(t, `expected "," or "]", found %s`, t.describe())
			}
			p.next()
			if p.peek().kind == tRBrack {
				p.fail(t, "trailing comma is not allowed")
			}
		}
	}
	n.end = p.next().end
	p.leave()
	return n
}

func (p *parser) parseObject() *node {
	lb := p.next()
	p.enter(lb)
	n := p.newNode(nObject, lb.pos, lb.end)
	if p.peek().kind != tRBrace {
		for {
			k := p.peek()
			switch k.kind {
			case tWord, tStr:
			case tErr:
				p.unexpected(k)
			default:
				p.fail(k, "expected an object key, found %s (keys are identifiers or quoted strings)", k.describe())
			}
			p.next()
			if slices.Contains(n.keys, k.text) {
				p.fail(k, "object literal repeats key %q", k.text)
			}
			p.expect(tColon, `":" after object key`)
			n.keys = append(n.keys, k.text)
			n.kids = append(n.kids, p.parseExpr())
			t := p.peek()
			if t.kind == tRBrace {
				break
			}
			if t.kind != tComma {
				if t.kind == tErr {
					p.unexpected(t)
				}
				p.fail(t, `expected "," or "}", found %s`, t.describe())
			}
			p.next()
			if p.peek().kind == tRBrace {
				p.fail(t, "trailing comma is not allowed")
			}
		}
	}
	n.end = p.next().end
	p.leave()
	return n
}

// suggest returns the builtin name closest to name, if it is close enough to
// be a plausible typo.
func suggest(name string) string {
	limit := 1
	if len(name) > 5 {
		limit = 2
	}
	best, bestD := "", limit+1
	for _, b := range builtinNames() {
		d := textdist.Distance(strings.ToLower(name), b)
		if d < bestD || (d == bestD && b < best) {
			best, bestD = b, d
		}
	}
	if bestD > limit {
		return ""
	}
	return best
}
