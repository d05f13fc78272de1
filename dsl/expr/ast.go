package expr

import (
	"strconv"
	"strings"
)

// nodeKind identifies the shape of an AST node.
type nodeKind int

const (
	nInt    nodeKind = iota // ival
	nFloat                  // fval
	nStr                    // sval
	nBool                   // bval
	nRef                    // namespace path: ns, path, bare
	nParam                  // lambda parameter: sval (name), slot, path
	nIndex                  // kids[0][kids[1]]
	nNeg                    // -kids[0]
	nNot                    // !kids[0]
	nBinary                 // kids[0] op kids[1]
	nCall                   // sval (name) fn, kids (arguments; a lambda is last)
	nLambda                 // params, slots, kids[0] (body)
	nList                   // kids (elements)
	nObject                 // keys, kids (values)
)

// node is one vertex of the parsed tree. A single struct keeps the
// evaluator and printer as plain switches.
type node struct {
	kind nodeKind
	pos  int // byte offsets of the node in the source
	end  int

	ival int64
	fval float64
	sval string
	bval bool

	ns   string   // nRef: namespace
	path []string // nRef, nParam: static segments
	bare bool     // nRef: written without a namespace
	slot int      // nParam: evaluation slot

	op     tokKind // nBinary
	fn     *builtin
	kids   []*node
	keys   []string // nObject
	params []string // nLambda
	slots  []int    // nLambda
}

// Precedence levels, low to high, used by the printer.
const (
	precOr = iota + 1
	precAnd
	precNot
	precCmp
	precAdd
	precMul
	precNeg
	precPostfix
)

func binaryPrec(op tokKind) int {
	switch op {
	case tOrOr:
		return precOr
	case tAndAnd:
		return precAnd
	case tEq, tNe, tLt, tLe, tGt, tGe:
		return precCmp
	case tPlus, tMinus:
		return precAdd
	default:
		return precMul
	}
}

func (n *node) prec() int {
	switch n.kind {
	case nBinary:
		return binaryPrec(n.op)
	case nNot:
		return precNot
	case nNeg:
		return precNeg
	}
	return precPostfix
}

// write appends the canonical text of n. The canonical form uses the
// symbolic operators (&&, ||, !), double quotes unless single quotes need
// fewer escapes, ".name" for identifier-like keys, and only the parentheses
// the tree structure requires, so that re-parsing it yields the same tree.
func (n *node) write(b *strings.Builder, minPrec int) {
	if n.prec() < minPrec {
		b.WriteByte('(')
		n.write(b, 0)
		b.WriteByte(')')
		return
	}
	switch n.kind {
	case nInt:
		b.WriteString(strconv.FormatInt(n.ival, 10))
	case nFloat:
		b.WriteString(formatFloatLit(n.fval))
	case nStr:
		b.WriteString(quote(n.sval))
	case nBool:
		b.WriteString(strconv.FormatBool(n.bval))
	case nRef:
		segs := n.path
		if n.bare {
			b.WriteString(segs[0])
			segs = segs[1:]
		} else {
			b.WriteString(n.ns)
		}
		writeSegments(b, segs)
	case nParam:
		b.WriteString(n.sval)
		writeSegments(b, n.path)
	case nIndex:
		n.kids[0].write(b, precPostfix)
		if k := n.kids[1]; k.kind == nStr {
			writeSegments(b, []string{k.sval})
		} else {
			b.WriteByte('[')
			k.write(b, 0)
			b.WriteByte(']')
		}
	case nNeg:
		b.WriteByte('-')
		n.kids[0].write(b, precNeg)
	case nNot:
		b.WriteByte('!')
		n.kids[0].write(b, precNot)
	case nBinary:
		p := binaryPrec(n.op)
		left, right := p, p+1
		if p == precCmp {
			left = precAdd
		}
		n.kids[0].write(b, left)
		b.WriteByte(' ')
		b.WriteString(punctText[n.op])
		b.WriteByte(' ')
		n.kids[1].write(b, right)
	case nCall:
		b.WriteString(n.sval)
		b.WriteByte('(')
		for i, k := range n.kids {
			if i > 0 {
				b.WriteString(", ")
			}
			k.write(b, 0)
		}
		b.WriteByte(')')
	case nLambda:
		if len(n.params) == 1 {
			b.WriteString(n.params[0])
		} else {
			b.WriteByte('(')
			b.WriteString(strings.Join(n.params, ", "))
			b.WriteByte(')')
		}
		b.WriteString(" => ")
		n.kids[0].write(b, 0)
	case nList:
		b.WriteByte('[')
		for i, k := range n.kids {
			if i > 0 {
				b.WriteString(", ")
			}
			k.write(b, 0)
		}
		b.WriteByte(']')
	case nObject:
		b.WriteByte('{')
		for i, k := range n.kids {
			if i > 0 {
				b.WriteString(", ")
			}
			if isWord(n.keys[i]) {
				b.WriteString(n.keys[i])
			} else {
				b.WriteString(quote(n.keys[i]))
			}
			b.WriteString(": ")
			k.write(b, 0)
		}
		b.WriteByte('}')
	}
}

// writeSegments writes static path segments as .name or ["text"].
func writeSegments(b *strings.Builder, segs []string) {
	for _, s := range segs {
		if isWord(s) {
			b.WriteByte('.')
			b.WriteString(s)
		} else {
			b.WriteByte('[')
			b.WriteString(quote(s))
			b.WriteByte(']')
		}
	}
}

// formatFloatLit prints a float so that it lexes back as the same float:
// plain decimal notation with at least one fractional digit.
func formatFloatLit(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// quote renders s as a string literal of this language. Only the escapes
// the lexer understands are used (\\ \" \' \n \t); every other byte is
// written as is.
func quote(s string) string {
	q := byte('"')
	if strings.Count(s, `"`) > strings.Count(s, `'`) {
		q = '\''
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte(q)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', q:
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte(q)
	return b.String()
}
