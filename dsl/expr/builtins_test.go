package expr

import "testing"

var builtinCases = []evalCase{
	// length
	{name: "length list", src: "length([1, 2])", want: int64(2)},
	{name: "length map", src: "length({a: 1})", want: int64(1)},
	{name: "length string counts bytes", src: "length('héllo')", want: int64(6)},
	{name: "length nil", src: "length(missing)", want: int64(0)},
	{name: "length typed slice", src: "length(tags)", want: int64(2)},
	{name: "length number", src: "length(5)", wantErr: "length: expected a list, map or string, got int"},
	{name: "length bool", src: "length(true)", wantErr: "length: expected a list, map or string, got bool"},

	// concat
	{name: "concat", src: "concat([1], [2, 3], missing)", want: L(int64(1), int64(2), int64(3))},
	{name: "concat one", src: "concat([1])", want: L(int64(1))},
	{name: "concat nil only", src: "concat(missing)", want: L()},
	{name: "concat typed slice", src: "concat(tags, ['z'])", want: L("x", "y", "z")},
	{name: "concat does not flatten", src: "concat([[1]], [[2]])", want: L(L(int64(1)), L(int64(2)))},
	{name: "concat scalar", src: "concat([1], 2)", wantErr: "concat: argument 2 must be a list, got int"},
	{name: "concat string", src: "concat('a', 'b')", wantErr: "concat: argument 1 must be a list, got string"},

	// unique
	{name: "unique by text", src: "unique([1, '1', 2, 1, 2.0, 'a'])", want: L(int64(1), int64(2), "a")},
	{name: "unique keeps order", src: "unique(['b', 'a', 'b'])", want: L("b", "a")},
	{name: "unique lists by text", src: "unique([[1, 2], [1, 2], [2]])", want: L(L(int64(1), int64(2)), L(int64(2)))},
	{name: "unique nil", src: "unique(missing)", want: L()},
	{name: "unique map", src: "unique({})", wantErr: "unique: the argument must be a list, got map"},

	// contains
	{name: "contains by text", src: "contains(['1'], 1)", want: true},
	{name: "contains int matches integral float text", src: "contains([2.0], 2)", want: true},
	{name: "contains absent", src: "contains([1, 2], 3)", want: false},
	{name: "contains nil list", src: "contains(missing, 1)", want: false},
	{name: "contains typed slice", src: "contains(tags, 'y')", want: true},
	{name: "contains bool text", src: "contains(['true'], true)", want: true},
	{name: "contains list element", src: "contains([[1, 2]], [1, 2])", want: true},
	{name: "contains nil element", src: "contains([missing], missing)", want: true},
	{name: "contains is not substring", src: "contains('abc', 'a')", wantErr: "contains: the first argument must be a list, got string (contains is not a substring test)"},
	{name: "contains map", src: "contains({a: 1}, 'a')", wantErr: "contains: the first argument must be a list, got map"},

	// join
	{name: "join", src: "join(['a', 1, 2.5, true], '-')", want: "a-1-2.5-true"},
	{name: "join nil", src: "join(missing, ',')", want: ""},
	{name: "join empty", src: "join([], ',')", want: ""},
	{name: "join one", src: "join(['a'], ', ')", want: "a"},
	{name: "join nested", src: "join([[1, 2], {b: 1, a: 'x'}], ';')", want: "[1 2];map[a:x b:1]"},
	{name: "join large float", src: "join([1000000.0, 0.1], ' ')", want: "1e+06 0.1"},
	{name: "join typed slice", src: "join(tags, '+')", want: "x+y"},
	{name: "join separator not string", src: "join(['a'], 1)", wantErr: "join: the separator must be a string, got int"},
	{name: "join nil separator", src: "join(['a'], missing)", wantErr: "join: the separator must be a string, got nil"},
	{name: "join string", src: "join('ab', '')", wantErr: "join: the first argument must be a list, got string"},

	// tail
	{name: "tail", src: "tail([1, 2, 3], 2)", want: L(int64(2), int64(3))},
	{name: "tail zero", src: "tail([1, 2, 3], 0)", want: L()},
	{name: "tail negative", src: "tail([1, 2, 3], -1)", want: L()},
	{name: "tail whole", src: "tail([1, 2, 3], 3)", want: L(int64(1), int64(2), int64(3))},
	{name: "tail beyond", src: "tail([1, 2, 3], 5)", want: L(int64(1), int64(2), int64(3))},
	{name: "tail nil", src: "tail(missing, 2)", want: L()},
	{name: "tail integral float count", src: "tail([1, 2], 1.0)", want: L(int64(2))},
	{name: "tail bad count", src: "tail([1], 'a')", wantErr: "tail: the count must be an integer, got string"},
	{name: "tail fractional count", src: "tail([1], 0.5)", wantErr: "tail: the count must be an integer, got float"},

	// if (see also eval_test.go)
	{name: "if nil condition", src: "if(missing, 1, 2)", want: int64(2)},
	{name: "if string false", src: "if('false', 1, 2)", want: int64(2)},

	// sort
	{name: "sort numbers", src: "sort([3, 1.5, 2, -1])", want: L(int64(-1), 1.5, int64(2), int64(3))},
	{name: "sort strings", src: "sort(['b', 'a', 'c', 'B'])", want: L("B", "a", "b", "c")},
	{name: "sort mixed by text", src: "sort([10, 'a', 9])", want: L(int64(10), int64(9), "a")},
	{name: "sort stable", src: "sort([2, 1.0, 1, 2.0])", want: L(1.0, int64(1), int64(2), 2.0)},
	{name: "sort nil", src: "sort(missing)", want: L()},
	{name: "sort empty", src: "sort([])", want: L()},
	{name: "sort does not mutate", src: "[sort(nested.list), nested.list][1]", want: L(int64(10), int64(20), int64(30))},
	{name: "sort scalar", src: "sort(1)", wantErr: "sort: the argument must be a list, got int"},

	// keys and values
	{name: "keys sorted", src: "keys({b: 1, a: 2})", want: L("a", "b")},
	{name: "keys nil", src: "keys(missing)", want: L()},
	{name: "keys typed map", src: "keys(counts)", want: L("a")},
	{name: "keys list", src: "keys([1])", wantErr: "keys: the argument must be a map, got list"},
	{name: "values by sorted key", src: "values({b: 1, a: 2})", want: L(int64(2), int64(1))},
	{name: "values nil", src: "values(missing)", want: L()},
	{name: "values typed map", src: "values(counts)", want: L(int64(1))},
	{name: "values string", src: "values('a')", wantErr: "values: the argument must be a map, got string"},

	// slice
	{name: "slice", src: "slice([1, 2, 3, 4], 1, 3)", want: L(int64(2), int64(3))},
	{name: "slice negative start", src: "slice([1, 2, 3, 4], -2, 4)", want: L(int64(3), int64(4))},
	{name: "slice negative end", src: "slice([1, 2, 3, 4], 0, -1)", want: L(int64(1), int64(2), int64(3))},
	{name: "slice end before start", src: "slice([1, 2, 3, 4], 3, 1)", want: L()},
	{name: "slice clamped", src: "slice([1, 2, 3, 4], -10, 10)", want: L(int64(1), int64(2), int64(3), int64(4))},
	{name: "slice empty range", src: "slice([1, 2], 1, 1)", want: L()},
	{name: "slice nil", src: "slice(missing, 0, 1)", want: L()},
	{name: "slice bad start", src: "slice([1], 'a', 1)", wantErr: "slice: start must be an integer, got string"},
	{name: "slice bad end", src: "slice([1], 0, missing)", wantErr: "slice: end must be an integer, got nil"},
	{name: "slice string", src: "slice('abc', 0, 1)", wantErr: "slice: the first argument must be a list, got string"},

	// sum
	{name: "sum ints", src: "sum([1, 2, 3])", want: int64(6)},
	{name: "sum floats", src: "sum([1, 2.5])", want: 3.5},
	{name: "sum integral floats stays int", src: "sum([1.0, 2])", want: int64(3)},
	{name: "sum empty", src: "sum([])", want: int64(0)},
	{name: "sum nil", src: "sum(missing)", want: int64(0)},
	{name: "sum typed slice", src: "sum(nested.list)", want: int64(60)},
	{name: "sum overflow", src: "sum([9223372036854775807, 1])", wantErr: "sum: integer overflow in +"},
	{name: "sum non-number", src: "sum([1, 'a'])", wantErr: "sum: element 1 is string, not a number"},
	{name: "sum nil element", src: "sum([missing])", wantErr: "sum: element 0 is nil, not a number"},

	// min and max
	{name: "max list", src: "max([1, 5, 3])", want: int64(5)},
	{name: "min values", src: "min(4, 2, 8)", want: int64(2)},
	{name: "max flattens one level", src: "max([1, 2], 7)", want: int64(7)},
	{name: "max float", src: "max([1, 2.5])", want: 2.5},
	{name: "min negative", src: "min([0, -3.5, 2])", want: -3.5},
	{name: "min keeps first of equals", src: "min(2, 2.0)", want: int64(2)},
	{name: "max keeps original type", src: "max(2.0, 2)", want: 2.0},
	{name: "min single value", src: "min(3)", want: int64(3)},
	{name: "min empty", src: "min([])", want: nil},
	{name: "max nil", src: "max(missing)", want: nil},
	{name: "max typed slice", src: "max(nested.list)", want: int64(30)},
	{name: "max non-number", src: "max([1, 'a'])", wantErr: "max: cannot compare string (numbers only)"},
	{name: "min nested list", src: "min([[1]])", wantErr: "min: cannot compare list (numbers only)"},

	// flatten
	{name: "flatten one level", src: "flatten([[1, 2], 3, [[4]]])", want: L(int64(1), int64(2), int64(3), L(int64(4)))},
	{name: "flatten nil", src: "flatten(missing)", want: L()},
	{name: "flatten empty inner", src: "flatten([[], [1]])", want: L(int64(1))},
	{name: "flatten map", src: "flatten({})", wantErr: "flatten: the argument must be a list, got map"},

	// floor and round
	{name: "floor", src: "floor(2.7)", want: int64(2)},
	{name: "floor negative", src: "floor(-2.5)", want: int64(-3)},
	{name: "floor int", src: "floor(7)", want: int64(7)},
	{name: "round half up", src: "round(2.5)", want: int64(3)},
	{name: "round half away from zero", src: "round(-2.5)", want: int64(-3)},
	{name: "round down", src: "round(2.4)", want: int64(2)},
	{name: "round ratio", src: "round(7 * 100 / 30.0)", want: int64(23)},
	{name: "floor json number", src: "floor(jf)", want: int64(2)},
	{name: "floor string", src: "floor('a')", wantErr: "floor: expected a number, got string"},
	{name: "floor nil", src: "floor(missing)", wantErr: "floor: expected a number, got nil"},
	{name: "round out of range", src: "round(10000000000000000000.0)", wantErr: "round: 1e+19 is out of the integer range"},
}

func TestBuiltins(t *testing.T) { runEvalCases(t, builtinCases) }

func TestBuiltinsHaveCases(t *testing.T) {
	for _, name := range builtinNames() {
		found := false
		for _, tc := range append(append([]evalCase{}, builtinCases...), evalCases...) {
			if len(tc.src) > len(name) && tc.src[:len(name)+1] == name+"(" {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("builtin %q has no test case starting with a call to it", name)
		}
	}
}
