package expr

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Evaluation limits.
const (
	// MaxElements is the number of collection elements one evaluation may
	// visit across map, filter, reduce, sort and the other list builtins.
	MaxElements = 100_000
	// maxStringBytes bounds the bytes of text one evaluation may build by
	// concatenation, join and %v rendering.
	maxStringBytes = 64 << 20
)

var errBudget = errors.New("evaluation budget exceeded")

// Env resolves namespace paths at evaluation time. Lookup returns nil for an
// absent path. namespace is one of vars, input, outputs, artifacts, loop and
// run; path holds the static segments after it (possibly none) and may be
// retained or modified by Lookup.
type Env interface {
	Lookup(namespace string, path []string) any
}

// MapEnv is an Env over one map per namespace. Lookup walks maps by key and
// lists by numeric segment; anything else, or a missing key or index, is
// absent.
type MapEnv map[string]map[string]any

// Lookup implements Env.
func (m MapEnv) Lookup(namespace string, path []string) any {
	ns, ok := m[namespace]
	if !ok || ns == nil {
		return nil
	}
	var cur any = ns
	for _, seg := range path {
		switch x := norm(cur).(type) {
		case map[string]any:
			v, ok := x[seg]
			if !ok {
				return nil
			}
			cur = v
		case []any:
			i, ok := segIndex(seg)
			if !ok || i >= len(x) {
				return nil
			}
			cur = x[i]
		default:
			return nil
		}
	}
	return cur
}

// segIndex parses a non-negative decimal list index.
func segIndex(s string) (int, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// evalState is the mutable state of one evaluation.
type evalState struct {
	env   Env
	slots []any
	elems int // remaining element budget
	bytes int // remaining string budget
}

func (st *evalState) charge(n int) error {
	if n < 0 || n > st.elems {
		st.elems = 0
		return errBudget
	}
	st.elems -= n
	return nil
}

func (st *evalState) chargeBytes(n int) error {
	if n < 0 || n > st.bytes {
		st.bytes = 0
		return errBudget
	}
	st.bytes -= n
	return nil
}

// Eval evaluates the expression against env (nil means every path is
// absent). The result is a bool, int64, float64, string, []any,
// map[string]any or nil; collections are normalised throughout.
func (e *Expr) Eval(env Env) (any, error) {
	if e == nil || e.root == nil {
		return nil, errors.New("eval of an unparsed expression")
	}
	st := &evalState{env: env, slots: make([]any, e.nslots), elems: MaxElements, bytes: maxStringBytes}
	v, err := st.eval(e.root)
	if err != nil {
		return nil, err
	}
	count := 0
	return deepNorm(v, 0, &count)
}

// EvalBool evaluates the expression and returns its truth value (Truthy).
func (e *Expr) EvalBool(env Env) (bool, error) {
	v, err := e.Eval(env)
	if err != nil {
		return false, err
	}
	return Truthy(v), nil
}

func (st *evalState) lookup(ns string, path []string) any {
	if st.env == nil {
		return nil
	}
	return norm(st.env.Lookup(ns, slices.Clone(path)))
}

func (st *evalState) eval(n *node) (any, error) {
	switch n.kind {
	case nInt:
		return n.ival, nil
	case nFloat:
		return n.fval, nil
	case nStr:
		return n.sval, nil
	case nBool:
		return n.bval, nil
	case nRef:
		return st.lookup(n.ns, n.path), nil
	case nParam:
		v := st.slots[n.slot]
		for _, seg := range n.path {
			var err error
			if v, err = index(v, seg); err != nil {
				return nil, err
			}
		}
		return v, nil
	case nIndex:
		x, err := st.eval(n.kids[0])
		if err != nil {
			return nil, err
		}
		i, err := st.eval(n.kids[1])
		if err != nil {
			return nil, err
		}
		return index(x, i)
	case nNeg:
		x, err := st.eval(n.kids[0])
		if err != nil {
			return nil, err
		}
		switch v := x.(type) {
		case int64:
			if v == math.MinInt64 {
				return nil, errors.New("integer overflow in -")
			}
			return -v, nil
		case float64:
			return -v, nil
		}
		return nil, fmt.Errorf("cannot negate %s", TypeName(x))
	case nNot:
		x, err := st.eval(n.kids[0])
		if err != nil {
			return nil, err
		}
		return !Truthy(x), nil
	case nBinary:
		return st.evalBinary(n)
	case nCall:
		return st.call(n)
	case nList:
		out := make([]any, len(n.kids))
		for i, k := range n.kids {
			v, err := st.eval(k)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case nObject:
		out := make(map[string]any, len(n.kids))
		for i, k := range n.kids {
			v, err := st.eval(k)
			if err != nil {
				return nil, err
			}
			out[n.keys[i]] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot evaluate node kind %d", n.kind)
}

// index implements x[i] on normalised x and i.
func index(x, i any) (any, error) {
	i = norm(i)
	switch c := norm(x).(type) {
	case nil:
		return nil, nil
	case []any:
		k, ok := asInt(i)
		if !ok {
			return nil, fmt.Errorf("cannot index list with %s", TypeName(i))
		}
		if k < 0 || k >= int64(len(c)) {
			return nil, nil
		}
		return norm(c[k]), nil
	case map[string]any:
		k, ok := i.(string)
		if !ok {
			return nil, fmt.Errorf("cannot index map with %s", TypeName(i))
		}
		return norm(c[k]), nil
	default:
		return nil, fmt.Errorf("cannot index %s", TypeName(c))
	}
}

func (st *evalState) evalBinary(n *node) (any, error) {
	l, err := st.eval(n.kids[0])
	if err != nil {
		return nil, err
	}
	switch n.op {
	case tAndAnd, tOrOr:
		lt := Truthy(l)
		if (n.op == tAndAnd) != lt {
			return lt, nil
		}
		r, err := st.eval(n.kids[1])
		if err != nil {
			return nil, err
		}
		return Truthy(r), nil
	}
	r, err := st.eval(n.kids[1])
	if err != nil {
		return nil, err
	}
	switch n.op {
	case tEq:
		return equal(l, r), nil
	case tNe:
		return !equal(l, r), nil
	case tLt, tLe, tGt, tGe:
		return compare(n.op, l, r)
	case tPlus:
		return st.add(l, r)
	}
	return arith(n.op, l, r)
}

func compare(op tokKind, l, r any) (any, error) {
	var c int
	switch {
	case isNumber(l) && isNumber(r):
		if math.IsNaN(toFloat(l)) || math.IsNaN(toFloat(r)) {
			return false, nil
		}
		c = numCompare(l, r)
	default:
		ls, lok := l.(string)
		rs, rok := r.(string)
		if !lok || !rok {
			return nil, fmt.Errorf("cannot compare %s %s %s", TypeName(l), punctText[op], TypeName(r))
		}
		c = strings.Compare(ls, rs)
	}
	switch op {
	case tLt:
		return c < 0, nil
	case tLe:
		return c <= 0, nil
	case tGt:
		return c > 0, nil
	}
	return c >= 0, nil
}

func (st *evalState) add(l, r any) (any, error) {
	ls, lstr := l.(string)
	rs, rstr := r.(string)
	switch {
	case lstr && rstr:
	case lstr && isNumber(r):
		rs = formatNumber(r)
	case rstr && isNumber(l):
		ls = formatNumber(l)
	case lstr || rstr:
		return nil, fmt.Errorf("cannot apply + to %s and %s", TypeName(l), TypeName(r))
	default:
		return arith(tPlus, l, r)
	}
	if err := st.chargeBytes(len(ls) + len(rs)); err != nil {
		return nil, err
	}
	return ls + rs, nil
}

// arith applies + - * / % to two numbers.
func arith(op tokKind, l, r any) (any, error) {
	sym := punctText[op]
	if !isNumber(l) || !isNumber(r) {
		return nil, fmt.Errorf("cannot apply %s to %s and %s", sym, TypeName(l), TypeName(r))
	}
	li, lint := l.(int64)
	ri, rint := r.(int64)
	if op == tPercent && (!lint || !rint) {
		return nil, fmt.Errorf("cannot apply %% to %s and %s (integers only)", TypeName(l), TypeName(r))
	}
	if lint && rint {
		overflow := fmt.Errorf("integer overflow in %s", sym)
		switch op {
		case tPlus:
			s := li + ri
			if (s > li) != (ri > 0) {
				return nil, overflow
			}
			return s, nil
		case tMinus:
			s := li - ri
			if (s < li) != (ri > 0) {
				return nil, overflow
			}
			return s, nil
		case tStar:
			if li == 0 || ri == 0 {
				return int64(0), nil
			}
			p := li * ri
			if p/ri != li || (li == -1 && ri == math.MinInt64) || (ri == -1 && li == math.MinInt64) {
				return nil, overflow
			}
			return p, nil
		case tSlash, tPercent:
			if ri == 0 {
				if op == tSlash {
					return nil, errors.New("division by zero")
				}
				return nil, errors.New("modulo by zero")
			}
			if li == math.MinInt64 && ri == -1 {
				if op == tPercent {
					return int64(0), nil
				}
				return nil, overflow
			}
			if op == tSlash {
				return li / ri, nil
			}
			return li % ri, nil
		}
	}
	lf, rf := toFloat(l), toFloat(r)
	var f float64
	switch op {
	case tPlus:
		f = lf + rf
	case tMinus:
		f = lf - rf
	case tStar:
		f = lf * rf
	case tSlash:
		if rf == 0 {
			return nil, errors.New("division by zero")
		}
		f = lf / rf
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("%s gives a non-finite number", sym)
	}
	return f, nil
}
