package expr

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// builtin describes a builtin function.
type builtin struct {
	min, max      int // accepted argument counts; max < 0 means no upper bound
	lambdaParams  int // > 0: the last argument is a lambda with this many parameters
	lambdaExample string
	// impl receives the evaluated arguments. nil for special forms (if and
	// the lambda combinators), which the evaluator handles itself.
	impl func(st *evalState, args []any) (any, error)
}

var builtins map[string]*builtin

func init() {
	builtins = map[string]*builtin{
		"length":   {min: 1, max: 1, impl: bLength},
		"concat":   {min: 1, max: -1, impl: bConcat},
		"unique":   {min: 1, max: 1, impl: bUnique},
		"contains": {min: 2, max: 2, impl: bContains},
		"join":     {min: 2, max: 2, impl: bJoin},
		"tail":     {min: 2, max: 2, impl: bTail},
		"if":       {min: 3, max: 3},
		"sort":     {min: 1, max: 1, impl: bSort},
		"keys":     {min: 1, max: 1, impl: bKeys},
		"values":   {min: 1, max: 1, impl: bValues},
		"slice":    {min: 3, max: 3, impl: bSlice},
		"sum":      {min: 1, max: 1, impl: bSum},
		"min":      {min: 1, max: -1, impl: func(st *evalState, a []any) (any, error) { return bExtreme(st, -1, a) }},
		"max":      {min: 1, max: -1, impl: func(st *evalState, a []any) (any, error) { return bExtreme(st, 1, a) }},
		"flatten":  {min: 1, max: 1, impl: bFlatten},
		"floor":    {min: 1, max: 1, impl: func(_ *evalState, a []any) (any, error) { return toInt(a[0], math.Floor) }},
		"round":    {min: 1, max: 1, impl: func(_ *evalState, a []any) (any, error) { return toInt(a[0], math.Round) }},
		"map":      {min: 2, max: 2, lambdaParams: 1, lambdaExample: "x => x.name"},
		"filter":   {min: 2, max: 2, lambdaParams: 1, lambdaExample: "x => x.ok"},
		"reduce":   {min: 3, max: 3, lambdaParams: 2, lambdaExample: "(acc, x) => acc + x"},
	}
}

// builtinNames returns the builtin names, sorted.
func builtinNames() []string {
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// call evaluates a builtin call.
func (st *evalState) call(n *node) (any, error) {
	name := n.sval
	switch name {
	case "if":
		c, err := st.eval(n.kids[0])
		if err != nil {
			return nil, err
		}
		if Truthy(c) {
			return st.eval(n.kids[1])
		}
		return st.eval(n.kids[2])
	case "map", "filter", "reduce":
		return st.combinator(n)
	}
	args := make([]any, len(n.kids))
	for i, k := range n.kids {
		v, err := st.eval(k)
		if err != nil {
			return nil, err
		}
		args[i] = v
	}
	v, err := n.fn.impl(st, args)
	if err != nil && err != errBudget {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return v, err
}

// list returns v as a list; nil counts as the empty list.
func list(v any, what string) ([]any, error) {
	switch x := norm(v).(type) {
	case nil:
		return nil, nil
	case []any:
		return x, nil
	default:
		return nil, fmt.Errorf("%s must be a list, got %s", what, TypeName(x))
	}
}

// copyElems returns a normalised copy of xs, charging the element budget.
func (st *evalState) copyElems(xs []any) ([]any, error) {
	if err := st.charge(len(xs)); err != nil {
		return nil, err
	}
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = norm(x)
	}
	return out, nil
}

func (st *evalState) combinator(n *node) (any, error) {
	name := n.sval
	coll, err := st.eval(n.kids[0])
	if err != nil {
		return nil, err
	}
	xs, err := list(coll, "the collection")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	lam := n.kids[len(n.kids)-1]
	body := lam.kids[0]
	switch name {
	case "map", "filter":
		out := make([]any, 0, len(xs))
		for _, x := range xs {
			if err := st.charge(1); err != nil {
				return nil, err
			}
			x = norm(x)
			st.slots[lam.slots[0]] = x
			v, err := st.eval(body)
			if err != nil {
				return nil, err
			}
			if name == "map" {
				out = append(out, v)
			} else if Truthy(v) {
				out = append(out, x)
			}
		}
		return out, nil
	default: // reduce
		acc, err := st.eval(n.kids[1])
		if err != nil {
			return nil, err
		}
		for _, x := range xs {
			if err := st.charge(1); err != nil {
				return nil, err
			}
			st.slots[lam.slots[0]] = acc
			st.slots[lam.slots[1]] = norm(x)
			if acc, err = st.eval(body); err != nil {
				return nil, err
			}
		}
		return acc, nil
	}
}

func bLength(_ *evalState, a []any) (any, error) {
	switch x := norm(a[0]).(type) {
	case nil:
		return int64(0), nil
	case []any:
		return int64(len(x)), nil
	case map[string]any:
		return int64(len(x)), nil
	case string:
		return int64(len(x)), nil
	default:
		return nil, fmt.Errorf("expected a list, map or string, got %s", TypeName(x))
	}
}

func bConcat(st *evalState, a []any) (any, error) {
	out := []any{}
	for i, v := range a {
		xs, err := list(v, fmt.Sprintf("argument %d", i+1))
		if err != nil {
			return nil, err
		}
		xs, err = st.copyElems(xs)
		if err != nil {
			return nil, err
		}
		out = append(out, xs...)
	}
	return out, nil
}

func bUnique(st *evalState, a []any) (any, error) {
	xs, err := list(a[0], "the argument")
	if err != nil {
		return nil, err
	}
	if xs, err = st.copyElems(xs); err != nil {
		return nil, err
	}
	out := []any{}
	seen := make(map[string]bool, len(xs))
	for _, x := range xs {
		k, err := st.text(x)
		if err != nil {
			return nil, err
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, x)
		}
	}
	return out, nil
}

func bContains(st *evalState, a []any) (any, error) {
	if _, ok := norm(a[0]).(string); ok {
		return nil, fmt.Errorf("the first argument must be a list, got string (contains is not a substring test)")
	}
	xs, err := list(a[0], "the first argument")
	if err != nil {
		return nil, err
	}
	want, err := st.text(a[1])
	if err != nil {
		return nil, err
	}
	for _, x := range xs {
		if err := st.charge(1); err != nil {
			return nil, err
		}
		got, err := st.text(x)
		if err != nil {
			return nil, err
		}
		if got == want {
			return true, nil
		}
	}
	return false, nil
}

func bJoin(st *evalState, a []any) (any, error) {
	sep, ok := norm(a[1]).(string)
	if !ok {
		return nil, fmt.Errorf("the separator must be a string, got %s", TypeName(norm(a[1])))
	}
	xs, err := list(a[0], "the first argument")
	if err != nil {
		return nil, err
	}
	if err := st.charge(len(xs)); err != nil {
		return nil, err
	}
	var b strings.Builder
	for i, x := range xs {
		s, err := st.text(x)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			s = sep + s
		}
		if err := st.chargeBytes(len(s)); err != nil {
			return nil, err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// intArg returns an integral number argument.
func intArg(v any, what string) (int64, error) {
	v = norm(v)
	if n, ok := asInt(v); ok {
		return n, nil
	}
	return 0, fmt.Errorf("%s must be an integer, got %s", what, TypeName(v))
}

func bTail(st *evalState, a []any) (any, error) {
	xs, err := list(a[0], "the first argument")
	if err != nil {
		return nil, err
	}
	n, err := intArg(a[1], "the count")
	if err != nil {
		return nil, err
	}
	switch {
	case n <= 0:
		return []any{}, nil
	case n < int64(len(xs)):
		xs = xs[int64(len(xs))-n:]
	}
	return st.copyElems(xs)
}

func bSlice(st *evalState, a []any) (any, error) {
	xs, err := list(a[0], "the first argument")
	if err != nil {
		return nil, err
	}
	start, err := intArg(a[1], "start")
	if err != nil {
		return nil, err
	}
	end, err := intArg(a[2], "end")
	if err != nil {
		return nil, err
	}
	n := int64(len(xs))
	clamp := func(i int64) int64 {
		if i < 0 {
			i += n
		}
		return min(max(i, 0), n)
	}
	start, end = clamp(start), clamp(end)
	if end <= start {
		return []any{}, nil
	}
	return st.copyElems(xs[start:end])
}

func bSort(st *evalState, a []any) (any, error) {
	xs, err := list(a[0], "the argument")
	if err != nil {
		return nil, err
	}
	if xs, err = st.copyElems(xs); err != nil {
		return nil, err
	}
	allNum, allStr := true, true
	for _, x := range xs {
		_, s := x.(string)
		allStr = allStr && s
		allNum = allNum && isNumber(x)
	}
	switch {
	case allNum:
		slices.SortStableFunc(xs, func(p, q any) int {
			// NaN sorts before every other number.
			pn, qn := math.IsNaN(toFloat(p)), math.IsNaN(toFloat(q))
			if pn || qn {
				switch {
				case pn && qn:
					return 0
				case pn:
					return -1
				}
				return 1
			}
			return numCompare(p, q)
		})
	case allStr:
		slices.SortStableFunc(xs, func(p, q any) int { return strings.Compare(p.(string), q.(string)) })
	default:
		type keyed struct {
			k string
			v any
		}
		ks := make([]keyed, len(xs))
		for i, x := range xs {
			k, err := st.text(x)
			if err != nil {
				return nil, err
			}
			ks[i] = keyed{k, x}
		}
		slices.SortStableFunc(ks, func(p, q keyed) int { return strings.Compare(p.k, q.k) })
		for i := range ks {
			xs[i] = ks[i].v
		}
	}
	return xs, nil
}

// mapArg returns a map argument; nil counts as the empty map.
func mapArg(v any) (map[string]any, error) {
	switch x := norm(v).(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return x, nil
	default:
		return nil, fmt.Errorf("the argument must be a map, got %s", TypeName(x))
	}
}

func bKeys(st *evalState, a []any) (any, error) {
	m, err := mapArg(a[0])
	if err != nil {
		return nil, err
	}
	if err := st.charge(len(m)); err != nil {
		return nil, err
	}
	out := make([]any, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, k)
	}
	return out, nil
}

func bValues(st *evalState, a []any) (any, error) {
	m, err := mapArg(a[0])
	if err != nil {
		return nil, err
	}
	if err := st.charge(len(m)); err != nil {
		return nil, err
	}
	out := make([]any, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, norm(m[k]))
	}
	return out, nil
}

func bSum(st *evalState, a []any) (any, error) {
	xs, err := list(a[0], "the argument")
	if err != nil {
		return nil, err
	}
	if xs, err = st.copyElems(xs); err != nil {
		return nil, err
	}
	integral := true
	for i, x := range xs {
		if !isNumber(x) {
			return nil, fmt.Errorf("element %d is %s, not a number", i, TypeName(x))
		}
		if _, ok := asInt(x); !ok {
			integral = false
		}
	}
	if integral {
		var s int64
		for _, x := range xs {
			n, _ := asInt(x)
			r, err := arith(tPlus, s, n)
			if err != nil {
				return nil, err
			}
			s = r.(int64)
		}
		return s, nil
	}
	var f float64
	for _, x := range xs {
		f += toFloat(x)
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("the sum is not a finite number")
	}
	return f, nil
}

// bExtreme implements min (sign -1) and max (sign +1). Arguments are
// flattened one level; nil arguments are skipped; the original element is
// returned.
func bExtreme(st *evalState, sign int, a []any) (any, error) {
	var best any
	consider := func(x any) error {
		x = norm(x)
		if !isNumber(x) {
			return fmt.Errorf("cannot compare %s (numbers only)", TypeName(x))
		}
		if best == nil || numCompare(x, best)*sign > 0 {
			best = x
		}
		return nil
	}
	for _, v := range a {
		switch x := norm(v).(type) {
		case nil:
		case []any:
			if err := st.charge(len(x)); err != nil {
				return nil, err
			}
			for _, e := range x {
				if err := consider(e); err != nil {
					return nil, err
				}
			}
		default:
			if err := consider(x); err != nil {
				return nil, err
			}
		}
	}
	return best, nil
}

func bFlatten(st *evalState, a []any) (any, error) {
	xs, err := list(a[0], "the argument")
	if err != nil {
		return nil, err
	}
	if err := st.charge(len(xs)); err != nil {
		return nil, err
	}
	out := []any{}
	for _, x := range xs {
		if inner, ok := norm(x).([]any); ok {
			ys, err := st.copyElems(inner)
			if err != nil {
				return nil, err
			}
			out = append(out, ys...)
			continue
		}
		out = append(out, norm(x))
	}
	return out, nil
}

// toInt implements floor and round.
func toInt(v any, f func(float64) float64) (any, error) {
	switch x := norm(v).(type) {
	case int64:
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("cannot convert %v to an integer", x)
		}
		r := f(x)
		if r < -(1<<63) || r >= 1<<63 {
			return nil, fmt.Errorf("%v is out of the integer range", x)
		}
		return int64(r), nil
	default:
		return nil, fmt.Errorf("expected a number, got %s", TypeName(x))
	}
}
