package expr

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type status string

// testEnv exercises normalisation: Go ints of several widths, float32,
// json.Number, typed slices and maps, pointers and named types.
func testEnv() MapEnv {
	seven := 7
	return MapEnv{
		"input": {
			"approved": true,
			"score":    5,
			"zero":     0,
			"name":     "ada",
			"no":       "no",
			"tags":     []string{"x", "y"},
			"n32":      int32(7),
			"u8":       uint8(3),
			"u64":      uint64(1 << 63),
			"f32":      float32(1.5),
			"jn":       json.Number("42"),
			"jf":       json.Number("2.5"),
			"ptr":      &seven,
			"status":   status("open"),
			"counts":   map[string]int{"a": 1},
			"items": []any{
				map[string]any{"id": "a", "n": 1},
				map[string]any{"id": "b", "n": 2},
			},
			"nested": map[string]any{"list": []int{10, 20, 30}},
		},
		"vars":      {"passes": 3, "ratio": 0.5, "label": "hi"},
		"outputs":   {"scan": map[string]any{"findings": []any{"f1", "f2"}, "blocked": false}},
		"loop":      {"fix": map[string]any{"iteration": 2, "max": 5}},
		"run":       {"id": "r1", "elapsed_seconds": 1.5, "tokens": int64(100)},
		"artifacts": {"report": "text"},
	}
}

type evalCase struct {
	name    string
	src     string
	want    any
	wantErr string // exact error message; empty when the evaluation must succeed
}

// L builds a list value.
func L(xs ...any) []any {
	if xs == nil {
		return []any{}
	}
	return xs
}

// M is a map value.
type M = map[string]any

var evalCases = []evalCase{
	// Literals.
	{name: "int", src: "42", want: int64(42)},
	{name: "float", src: "2.5", want: 2.5},
	{name: "double quoted string", src: `"ok"`, want: "ok"},
	{name: "single quoted string", src: `'ok'`, want: "ok"},
	{name: "escapes", src: `'a\'b\"c\\d\ne\tf\qg'`, want: "a'b\"c\\d\ne\tfqg"},
	{name: "true", src: "true", want: true},
	{name: "false", src: "false", want: false},
	{name: "list", src: "[1, 'a', true, 2.5]", want: L(int64(1), "a", true, 2.5)},
	{name: "empty list", src: "[]", want: L()},
	{name: "object", src: "{a: 1, 'b c': 'x'}", want: M{"a": int64(1), "b c": "x"}},
	{name: "empty object", src: "{}", want: M{}},
	{name: "nested literals", src: "{a: [1, {b: [2]}]}", want: M{"a": L(int64(1), M{"b": L(int64(2))})}},
	{name: "list of references", src: "[score, vars.passes, missing]", want: L(int64(5), int64(3), nil)},
	{name: "list subscript", src: "[1, 2][0]", want: int64(1)},
	{name: "object field", src: "{a: 1}.a", want: int64(1)},
	{name: "object subscript", src: "{'a b': 1}['a b']", want: int64(1)},

	// Arithmetic.
	{name: "add ints", src: "1 + 2", want: int64(3)},
	{name: "add int float", src: "1 + 2.5", want: 3.5},
	{name: "subtract", src: "10 - 2 - 3", want: int64(5)},
	{name: "multiply", src: "2 * 3 + 4", want: int64(10)},
	{name: "parentheses", src: "2 * (3 + 4)", want: int64(14)},
	{name: "float multiply", src: "0.5 * 3", want: 1.5},
	{name: "int division truncates", src: "7 / 2", want: int64(3)},
	{name: "negative int division truncates toward zero", src: "-7 / 2", want: int64(-3)},
	{name: "percentage", src: "7 * 100 / 30", want: int64(23)},
	{name: "float division", src: "7.0 / 2", want: 3.5},
	{name: "int by float division", src: "7 / 2.0", want: 3.5},
	{name: "modulo", src: "7 % 3", want: int64(1)},
	{name: "negative modulo", src: "-7 % 3", want: int64(-1)},
	{name: "negate ref", src: "-score", want: int64(-5)},
	{name: "double negation", src: "--5", want: int64(5)},
	{name: "negate float", src: "-2.5", want: -2.5},
	{name: "concat strings", src: "'a' + 'b'", want: "ab"},
	{name: "string plus int", src: "'n=' + 5", want: "n=5"},
	{name: "float plus string", src: "1.5 + 'x'", want: "1.5x"},
	{name: "string plus integral float", src: "'x' + 2.0", want: "x2"},
	{name: "normalised ints add", src: "n32 + u8 + jn", want: int64(52)},
	{name: "float32 and json float", src: "f32 + jf", want: 4.0},
	{name: "max int", src: "9223372036854775807", want: int64(9223372036854775807)},
	{name: "min int by arithmetic", src: "-9223372036854775807 - 1", want: int64(-9223372036854775808)},
	{name: "int division by zero", src: "1 / 0", wantErr: "division by zero"},
	{name: "float division by zero", src: "1.0 / 0", wantErr: "division by zero"},
	{name: "division by float zero", src: "1 / 0.0", wantErr: "division by zero"},
	{name: "modulo by zero", src: "1 % zero", wantErr: "modulo by zero"},
	{name: "modulo float", src: "5.5 % 2", wantErr: "cannot apply % to float and int (integers only)"},
	{name: "add overflow", src: "9223372036854775807 + 1", wantErr: "integer overflow in +"},
	{name: "subtract overflow", src: "-9223372036854775807 - 2", wantErr: "integer overflow in -"},
	{name: "multiply overflow", src: "9223372036854775807 * 2", wantErr: "integer overflow in *"},
	{name: "multiply min int by minus one", src: "(-9223372036854775807 - 1) * -1", wantErr: "integer overflow in *"},
	{name: "divide min int by minus one", src: "(-9223372036854775807 - 1) / -1", wantErr: "integer overflow in /"},
	{name: "modulo min int by minus one", src: "(-9223372036854775807 - 1) % -1", want: int64(0)},
	{name: "negate overflow", src: "-(-9223372036854775807 - 1)", wantErr: "integer overflow in -"},
	{name: "uint64 beyond int64 is a float", src: "u64 * 2", want: 18446744073709551616.0},
	{name: "string plus bool", src: "'a' + true", wantErr: "cannot apply + to string and bool"},
	{name: "string plus list", src: "'a' + []", wantErr: "cannot apply + to string and list"},
	{name: "subtract strings", src: "'a' - 'b'", wantErr: "cannot apply - to string and string"},
	{name: "add nil", src: "1 + missing", wantErr: "cannot apply + to int and nil"},
	{name: "add lists", src: "[1] + [2]", wantErr: "cannot apply + to list and list"},
	{name: "negate string", src: "-'a'", wantErr: "cannot negate string"},
	{name: "negate nil", src: "-missing", wantErr: "cannot negate nil"},

	// Comparison.
	{name: "int equals integral float", src: "1 == 1.0", want: true},
	{name: "float equality", src: "0.5 == vars.ratio", want: true},
	{name: "number is not string", src: "5 == '5'", want: false},
	{name: "bool is not string", src: "true == 'true'", want: false},
	{name: "nil equals nil", src: "missing == other", want: true},
	{name: "nil is not zero", src: "missing == 0", want: false},
	{name: "nil is not empty string", src: "missing != ''", want: true},
	{name: "lists never equal", src: "[1] == [1]", want: false},
	{name: "lists always differ", src: "[1] != [1]", want: true},
	{name: "maps never equal", src: "{} == {}", want: false},
	{name: "strings equal", src: "name == 'ada'", want: true},
	{name: "bools equal", src: "approved == true", want: true},
	{name: "not equal", src: "1 != 2", want: true},
	{name: "less mixed", src: "1 < 2.5", want: true},
	{name: "less strings", src: "'abc' < 'abd'", want: true},
	{name: "greater or equal", src: "3 >= 3", want: true},
	{name: "greater", src: "2 > 3", want: false},
	{name: "less or equal", src: "2 <= 1", want: false},
	{name: "json number compares", src: "jn == 42 && jn > 41.5", want: true},
	{name: "float32 compares", src: "f32 == 1.5", want: true},
	{name: "named string type", src: "status == 'open'", want: true},
	{name: "pointer is followed", src: "ptr == 7", want: true},
	{name: "compare string and int", src: "'a' < 1", wantErr: "cannot compare string < int"},
	{name: "compare nil", src: "missing < 1", wantErr: "cannot compare nil < int"},
	{name: "compare bools", src: "true >= false", wantErr: "cannot compare bool >= bool"},
	{name: "compare lists", src: "[] > []", wantErr: "cannot compare list > list"},

	// Logic and truthiness.
	{name: "and", src: "true && false", want: false},
	{name: "and keyword", src: "true and true", want: true},
	{name: "or", src: "false || true", want: true},
	{name: "or keyword", src: "false or false", want: false},
	{name: "not", src: "!true", want: false},
	{name: "not keyword", src: "not 0", want: true},
	{name: "and returns bool", src: "1 && 'yes'", want: true},
	{name: "or returns bool", src: "'' || 0", want: false},
	{name: "or returns bool not operand", src: "'x' || 0", want: true},
	{name: "and short-circuits", src: "false && 1 / 0", want: false},
	{name: "or short-circuits", src: "true || 1 / 0", want: true},
	{name: "and evaluates right", src: "true && 1 / 0", wantErr: "division by zero"},
	{name: "string no is false", src: "!no", want: true},
	{name: "string False padded is false", src: "!' False '", want: true},
	{name: "string 0 is false", src: "!'0'", want: true},
	{name: "string nope is true", src: "!'nope'", want: false},
	{name: "empty string is false", src: "!''", want: true},
	{name: "zero is false", src: "!0.0", want: true},
	{name: "empty list is false", src: "![]", want: true},
	{name: "empty map is false", src: "!{}", want: true},
	{name: "non-empty list is true", src: "![0]", want: false},
	{name: "nil is false", src: "!missing", want: true},
	{name: "precedence", src: "1 + 2 == 3 && 2 < 3 || false", want: true},
	{name: "not binds below comparison", src: "not 1 == 2", want: true},
	{name: "guard", src: "approved && score > 3", want: true},

	// Names.
	{name: "bare input field", src: "approved", want: true},
	{name: "input namespace", src: "input.score", want: int64(5)},
	{name: "vars", src: "vars.passes", want: int64(3)},
	{name: "outputs", src: "outputs.scan.blocked", want: false},
	{name: "outputs list", src: "outputs.scan.findings", want: L("f1", "f2")},
	{name: "loop", src: "loop.fix.iteration < loop.fix.max", want: true},
	{name: "run", src: "run.id + ':' + run.tokens", want: "r1:100"},
	{name: "run unknown member", src: "run.cost_usd", want: nil},
	{name: "artifacts", src: "artifacts.report", want: "text"},
	{name: "absent path", src: "missing.deep.path", want: nil},
	{name: "absent namespace member", src: "vars.nope", want: nil},
	{name: "whole namespace", src: "vars", want: M{"passes": int64(3), "ratio": 0.5, "label": "hi"}},
	{name: "typed slice normalised", src: "nested.list", want: L(int64(10), int64(20), int64(30))},
	{name: "typed map normalised", src: "counts", want: M{"a": int64(1)}},
	{name: "string slice", src: "tags", want: L("x", "y")},
	{name: "named type normalised", src: "status", want: "open"},
	{name: "json number", src: "[jn, jf]", want: L(int64(42), 2.5)},
	{name: "deep result normalised", src: "input.nested", want: M{"list": L(int64(10), int64(20), int64(30))}},

	// Indexing.
	{name: "static numeric segment", src: "nested.list[1]", want: int64(20)},
	{name: "string subscript", src: "nested['list'][0]", want: int64(10)},
	{name: "field after subscript", src: "items[0].id", want: "a"},
	{name: "string subscript after subscript", src: "items[1]['n']", want: int64(2)},
	{name: "computed subscript", src: "items[score - 4].id", want: "b"},
	{name: "integral float subscript", src: "tags[1.0]", want: "y"},
	{name: "negative subscript", src: "items[-1]", want: nil},
	{name: "subscript out of range", src: "items[5]", want: nil},
	{name: "missing key", src: "items[0].nope", want: nil},
	{name: "subscript of nil", src: "missing[0]", want: nil},
	{name: "field of nil", src: "missing.a.b", want: nil},
	{name: "static path through a list is resolved by the env", src: "items['x']", want: nil},
	{name: "list by string", src: "items[name]", wantErr: "cannot index list with string"},
	{name: "list literal by string", src: "[1, 2]['x']", wantErr: "cannot index list with string"},
	{name: "list by fractional float", src: "items[0.5]", wantErr: "cannot index list with float"},
	{name: "map by int", src: "nested[0]", wantErr: "cannot index map with int"},
	{name: "scalar subscript", src: "score[0]", wantErr: "cannot index int"},
	{name: "scalar field", src: "(1 + 1).x", wantErr: "cannot index int"},
	{name: "string subscript of string", src: "name[0]", wantErr: "cannot index string"},

	// Lambdas.
	{name: "map", src: "map([1, 2, 3], x => x * 2)", want: L(int64(2), int64(4), int64(6))},
	{name: "map fields", src: "map(items, i => i.id)", want: L("a", "b")},
	{name: "map param subscript", src: "map(items, it => it['n'])", want: L(int64(1), int64(2))},
	{name: "map typed slice", src: "map(nested.list, x => x / 10)", want: L(int64(1), int64(2), int64(3))},
	{name: "filter", src: "filter(items, i => i.n > 1)", want: L(M{"id": "b", "n": int64(2)})},
	{name: "filter truthiness", src: "filter(['yes', 'no', '0', 'x', '', 'FALSE'], s => s)", want: L("yes", "x")},
	{name: "reduce", src: "reduce([1, 2, 3], 0, (acc, x) => acc + x)", want: int64(6)},
	{name: "reduce builds string", src: "reduce(tags, '', (acc, t) => acc + t)", want: "xy"},
	{name: "nested lambdas close over outer param", src: "map([1, 2], x => map([10, 20], y => x + y))", want: L(L(int64(11), int64(21)), L(int64(12), int64(22)))},
	{name: "param shadows input field", src: "map([1], score => score)", want: L(int64(1))},
	{name: "param does not leak", src: "concat(map([1], score => score), [score])", want: L(int64(1), int64(5))},
	{name: "map of nil", src: "map(missing, x => x)", want: L()},
	{name: "filter of nil", src: "filter(missing, x => x)", want: L()},
	{name: "reduce of nil", src: "reduce(missing, 7, (a, b) => a)", want: int64(7)},
	{name: "map of map", src: "map({a: 1}, x => x)", wantErr: "map: the collection must be a list, got map"},
	{name: "filter of string", src: "filter('abc', x => x)", wantErr: "filter: the collection must be a list, got string"},
	{name: "lambda body error", src: "map([1, 0], x => 1 / x)", wantErr: "division by zero"},
	{name: "lambda param field of scalar", src: "map([1], x => x.a)", wantErr: "cannot index int"},

	// if.
	{name: "if true", src: "if(true, 1, 2)", want: int64(1)},
	{name: "if zero", src: "if(0, 1, 2)", want: int64(2)},
	{name: "if string no", src: "if(no, 'a', 'b')", want: "b"},
	{name: "if skips else", src: "if(true, 'ok', 1 / 0)", want: "ok"},
	{name: "if skips then", src: "if(zero > 0, 10 / zero, 0)", want: int64(0)},
	{name: "if evaluates taken branch", src: "if(1, 1 / zero, 0)", wantErr: "division by zero"},
}

func runEvalCases(t *testing.T, cases []evalCase) {
	t.Helper()
	env := testEnv()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse(tc.src)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.src, err)
			}
			got, err := e.Eval(env)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Eval(%q): got %#v, want error %q", tc.src, got, tc.wantErr)
				}
				if err.Error() != tc.wantErr {
					t.Errorf("Eval(%q): got error %q, want %q", tc.src, err.Error(), tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Eval(%q): got error %v, want %#v", tc.src, err, tc.want)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Eval(%q) mismatch (-want +got):\n%s", tc.src, diff)
			}
		})
	}
}

func TestEval(t *testing.T) { runEvalCases(t, evalCases) }

func TestTruthy(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want bool
	}{
		{"nil", nil, false},
		{"true", true, true},
		{"false", false, false},
		{"empty string", "", false},
		{"blank string", "  ", false},
		{"no", "no", false},
		{"No padded", " No ", false},
		{"FALSE", "FALSE", false},
		{"0 string", "0", false},
		{"0.0 string", "0.0", true},
		{"yes", "yes", true},
		{"off", "off", true},
		{"int zero", 0, false},
		{"int8 zero", int8(0), false},
		{"int one", 1, true},
		{"negative", -1, true},
		{"float zero", 0.0, false},
		{"float32 small", float32(0.1), true},
		{"json number zero", json.Number("0"), false},
		{"json number", json.Number("0.5"), true},
		{"empty list", []any{}, false},
		{"list", []any{nil}, true},
		{"empty string slice", []string{}, false},
		{"nil string slice", []string(nil), false},
		{"empty map", map[string]any{}, false},
		{"map", map[string]any{"a": nil}, true},
		{"nil pointer", (*int)(nil), false},
		{"pointer to zero", new(int), false},
		{"struct", struct{}{}, true},
		{"named bool", namedBool(false), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Truthy(tc.in); got != tc.want {
				t.Errorf("Truthy(%#v): got %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

type namedBool bool

func TestEvalBool(t *testing.T) {
	env := testEnv()
	tests := []struct {
		name    string
		src     string
		want    bool
		wantErr string
	}{
		{"bool", "approved", true, ""},
		{"string no", "no", false, ""},
		{"number", "score - 5", false, ""},
		{"list", "tags", true, ""},
		{"absent", "missing", false, ""},
		{"error", "name < 1", false, "cannot compare string < int"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse(tc.src)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.src, err)
			}
			got, err := e.EvalBool(env)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("EvalBool(%q): got error %v, want %q", tc.src, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("EvalBool(%q): %v", tc.src, err)
			}
			if got != tc.want {
				t.Errorf("EvalBool(%q): got %v, want %v", tc.src, got, tc.want)
			}
		})
	}
}

func TestNilEnv(t *testing.T) {
	e, err := Parse("vars.x == missing && length(outputs.a) == 0")
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Eval(nil)
	if err != nil {
		t.Fatalf("Eval(nil): %v", err)
	}
	if got != true {
		t.Errorf("Eval(nil): got %#v, want true", got)
	}
}

func TestMapEnv(t *testing.T) {
	env := MapEnv{
		"input": {"a": map[string]any{"b": []any{"x", map[string]int{"c": 3}}}, "s": []string{"p", "q"}},
		"vars":  nil,
	}
	tests := []struct {
		name string
		ns   string
		path []string
		want any
	}{
		{"whole namespace", "input", nil, map[string]any(env["input"])},
		{"nil namespace", "vars", nil, nil},
		{"absent namespace", "outputs", []string{"x"}, nil},
		{"map key", "input", []string{"a", "b", "0"}, "x"},
		{"typed map in list", "input", []string{"a", "b", "1", "c"}, 3},
		{"typed slice", "input", []string{"s", "1"}, "q"},
		{"index out of range", "input", []string{"s", "2"}, nil},
		{"negative index", "input", []string{"s", "-1"}, nil},
		{"non-numeric index", "input", []string{"s", "x"}, nil},
		{"missing key", "input", []string{"a", "z"}, nil},
		{"through scalar", "input", []string{"a", "b", "0", "x"}, nil},
		{"huge index", "input", []string{"s", "99999999999999999999999"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := env.Lookup(tc.ns, tc.path)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Lookup(%q, %q) mismatch (-want +got):\n%s", tc.ns, tc.path, diff)
			}
		})
	}
}

// pathEnv records the paths it is asked for.
type pathEnv struct {
	mu    sync.Mutex
	paths []string
}

func (p *pathEnv) Lookup(ns string, path []string) any {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paths = append(p.paths, ns+":"+strings.Join(path, "/"))
	for i := range path {
		path[i] = "clobbered" // the evaluator must hand out a copy
	}
	return nil
}

func TestEnvReceivesStaticPath(t *testing.T) {
	e, err := Parse("outputs.a['b c'][0].d + approved + vars + x[y].z")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		env := &pathEnv{}
		_, _ = e.Eval(env)
		want := []string{"outputs:a/b c", "input:approved"}
		if diff := cmp.Diff(want, env.paths); diff != "" {
			t.Errorf("paths looked up (-want +got):\n%s", diff)
		}
	}
	env := &pathEnv{}
	if _, err := MustEval(t, "[vars, x[y].z]").Eval(env); err != nil {
		t.Fatal(err)
	}
	want := []string{"vars:", "input:x", "input:y"}
	if diff := cmp.Diff(want, env.paths); diff != "" {
		t.Errorf("paths looked up (-want +got):\n%s", diff)
	}
}

// MustEval parses src or fails the test.
func MustEval(t *testing.T, src string) *Expr {
	t.Helper()
	e, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return e
}

func TestBudget(t *testing.T) {
	ints := func(n int) []any {
		xs := make([]any, n)
		for i := range xs {
			xs[i] = i
		}
		return xs
	}
	env := MapEnv{"input": {
		"full":  ints(MaxElements),
		"over":  ints(MaxElements + 1),
		"half":  ints(MaxElements/2 + 1),
		"forty": ints(40),
		"sixty": ints(60),
		"cycle": nil,
	}}
	cyc := map[string]any{}
	cyc["self"] = cyc
	env["input"]["cycle"] = cyc
	tests := []struct {
		name    string
		src     string
		want    any
		wantErr string
	}{
		{"map at budget", "length(map(full, x => x))", int64(MaxElements), ""},
		{"map over budget", "length(map(over, x => x))", nil, "evaluation budget exceeded"},
		{"budget shared across calls", "length(filter(half, x => true)) + length(map(half, x => x))", nil, "evaluation budget exceeded"},
		{"nested map within budget", "sum(map(sixty, x => length(map(sixty, y => y))))", int64(3600), ""},
		{"nested map over budget", "length(map(half, x => map(sixty, y => y)))", nil, "evaluation budget exceeded"},
		{"sort counts", "length(sort(full)) + length(sort(full))", nil, "evaluation budget exceeded"},
		{"reduce doubling list", "length(reduce(forty, [1], (acc, x) => concat(acc, acc)))", nil, "evaluation budget exceeded"},
		{"reduce doubling string", "length(reduce(forty, 'ab', (acc, x) => acc + acc))", nil, "evaluation budget exceeded"},
		{"formatting a shared tree", "length(join([reduce(sixty, [], (acc, x) => [acc, acc])], ''))", nil, "evaluation budget exceeded"},
		{"result of a shared tree", "reduce(sixty, [], (acc, x) => [acc, acc])", nil, "result is too large or too deeply nested"},
		{"cyclic result", "cycle", nil, "result is too large or too deeply nested"},
		{"cyclic field", "cycle.self.self.self == missing", false, ""},
		{"cyclic join", "join([cycle], '')", nil, "evaluation budget exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MustEval(t, tc.src).Eval(env)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Eval(%q): got %v, %v, want error %q", tc.src, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Eval(%q): %v", tc.src, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Eval(%q) mismatch (-want +got):\n%s", tc.src, diff)
			}
		})
	}
}

func TestConcurrentEval(t *testing.T) {
	e := MustEval(t, "reduce(map(xs, x => x * k), 0, (acc, y) => acc + y)")
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := range 32 {
		wg.Go(func() {
			env := MapEnv{"input": {"xs": []int{1, 2, 3}, "k": g}}
			got, err := e.Eval(env)
			if err != nil {
				errs <- err
				return
			}
			if want := int64(6 * g); got != want {
				errs <- fmt.Errorf("goroutine %d: got %v, want %v", g, got, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

type namedInt int

type point struct{ X, Y int }

func TestNormalise(t *testing.T) {
	s := "hello"
	var nilPtr **int
	tests := []struct {
		name string
		in   any
		want any
	}{
		{"int16", int16(-3), int64(-3)},
		{"uint", uint(3), int64(3)},
		{"uint64 beyond int64", uint64(1 << 63), float64(1 << 63)},
		{"named int", namedInt(4), int64(4)},
		{"named bool", namedBool(true), true},
		{"float32", float32(0.25), 0.25},
		{"json int", json.Number("-12"), int64(-12)},
		{"json big int", json.Number("1e3"), 1000.0},
		{"json garbage", json.Number("abc"), "abc"},
		{"string pointer", &s, "hello"},
		{"nil pointer to pointer", nilPtr, nil},
		{"int slice", []int{1, 2}, []any{int64(1), int64(2)}},
		{"nil int slice", []int(nil), []any{}},
		{"array", [2]string{"a", "b"}, []any{"a", "b"}},
		{"slice of slices", [][]uint8{{1}, {2, 3}}, []any{[]any{int64(1)}, []any{int64(2), int64(3)}}},
		{"bool map", map[string]bool{"ok": true}, map[string]any{"ok": true}},
		{"map of typed slices", map[string][]float32{"a": {0.5}}, map[string]any{"a": []any{0.5}}},
		{"list with raw values", []any{int8(1), []string{"x"}}, []any{int64(1), []any{"x"}}},
		{"map with non-string keys stays opaque", map[int]string{1: "a"}, map[int]string{1: "a"}},
		{"struct stays opaque", point{1, 2}, point{1, 2}},
	}
	e := MustEval(t, "x")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.Eval(MapEnv{"input": {"x": tc.in}})
			if err != nil {
				t.Fatalf("Eval: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("normalised %#v mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestEvalDoesNotMutateEnv(t *testing.T) {
	list := []any{int8(3), int8(1), int8(2)}
	env := MapEnv{"input": {"xs": list}}
	for _, src := range []string{"sort(xs)", "xs", "map(xs, x => x + 1)", "filter(xs, x => x > 1)"} {
		if _, err := MustEval(t, src).Eval(env); err != nil {
			t.Fatalf("Eval(%q): %v", src, err)
		}
	}
	want := []any{int8(3), int8(1), int8(2)}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("env list changed (-want +got):\n%s", diff)
	}
}
