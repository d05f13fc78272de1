package expr

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stringCases map sources to their canonical String form.
var stringCases = []struct {
	name, src, want string
}{
	{"int", "42", "42"},
	{"int leading zeros", "007", "7"},
	{"float", "2.5", "2.5"},
	{"float trailing zeros", "1.50", "1.5"},
	{"integral float", "2.0", "2.0"},
	{"small float", "0.000001", "0.000001"},
	{"double quoted", `"ok"`, `"ok"`},
	{"single quoted", `'ok'`, `"ok"`},
	{"apostrophe", `"it's"`, `"it's"`},
	{"double quotes inside", `'say "hi"'`, `'say "hi"'`},
	{"escapes", `'a\nb\tc\\d\q'`, `"a\nb\tc\\dq"`},
	{"bools", "true || false", "true || false"},
	{"keyword operators", "a and b or not c", "a && b || !c"},
	{"or binds loosest", "(a || b) && c", "(a || b) && c"},
	{"redundant parens", "a || (b && c)", "a || b && c"},
	{"right nested or", "a || (b || c)", "a || (b || c)"},
	{"left assoc minus", "(a - b) - c", "a - b - c"},
	{"right nested minus", "a - (b - c)", "a - (b - c)"},
	{"mul over add", "a * (b + c) / d % e", "a * (b + c) / d % e"},
	{"whitespace", " a\t+\n b\r ", "a + b"},
	{"neg of sum", "-(a + b)", "-(a + b)"},
	{"double neg", "- -a", "--a"},
	{"neg binds below postfix", "-a.b", "-a.b"},
	{"postfix of neg", "(-a).b", "(-a).b"},
	{"not over comparison", "!(a == b)", "!a == b"},
	{"not as comparison operand", "(!a) == b", "(!a) == b"},
	{"not of and", "not (a and b)", "!(a && b)"},
	{"nested comparison", "(a == b) == c", "(a == b) == c"},
	{"comparison of sums", "a + 1 >= b * 2", "a + 1 >= b * 2"},
	{"string subscript", "a['b']", "a.b"},
	{"string subscript not identifier", "a['b c']", `a["b c"]`},
	{"dynamic subscript", "x[0].y[i]", "x[0].y[i]"},
	{"namespace", "vars", "vars"},
	{"namespace path", "outputs.scan['findings'][0].id", "outputs.scan.findings[0].id"},
	{"parenthesised path", "(a.b).c", "a.b.c"},
	{"literal subscript", "(1)[0]", "1[0]"},
	{"sum subscript", "(1 + 2).x", "(1 + 2).x"},
	{"list", "[1,'a',true,[]]", `[1, "a", true, []]`},
	{"object", "{'a': 1, 'b c': [1, 2], d: {}}", `{a: 1, "b c": [1, 2], d: {}}`},
	{"literal postfix", "{a: 1}.a", "{a: 1}.a"},
	{"call", "length( x )", "length(x)"},
	{"lambda parens dropped", "map(xs, (x) => x + 1)", "map(xs, x => x + 1)"},
	{"reduce", "reduce(xs,0,(a,b)=>a+b)", "reduce(xs, 0, (a, b) => a + b)"},
	{"lambda body with or", "filter(xs, x => x.a or x.b)", "filter(xs, x => x.a || x.b)"},
	{"if", "if(n > 0, t / n, 0)", "if(n > 0, t / n, 0)"},
}

func TestString(t *testing.T) {
	for _, tc := range stringCases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse(tc.src)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.src, err)
			}
			if got := e.String(); got != tc.want {
				t.Errorf("String() of %q: got %q, want %q", tc.src, got, tc.want)
			}
			if got := e.Source(); got != tc.src {
				t.Errorf("Source(): got %q, want %q", got, tc.src)
			}
			e2, err := Parse(e.String())
			if err != nil {
				t.Fatalf("re-parse of %q: %v", e.String(), err)
			}
			if got := e2.String(); got != tc.want {
				t.Errorf("String() after re-parse: got %q, want %q", got, tc.want)
			}
		})
	}
}

// errorCases are sources that must fail to parse, with the exact error.
var errorCases = []struct {
	name        string
	src         string
	offset, end int
	msg         string
}{
	{"empty", "", 0, 0, "empty expression"},
	{"blank", "  \n", 0, 3, "empty expression"},
	{"unclosed paren", "(a", 2, 2, `expected ")", found end of expression`},
	{"stray paren", "a)", 1, 2, `unexpected ")"`},
	{"missing operand", "1 + * 2", 4, 5, `unexpected "*"`},
	{"dangling and", "a and", 5, 5, "unexpected end of expression"},
	{"keyword alone", "and", 0, 3, `unexpected "and"`},
	{"juxtaposition", "a b", 2, 3, `unexpected identifier "b"`},
	{"lone equals", "a = 1", 2, 3, `unexpected "=" (use "==" to compare or "=>" for a lambda)`},
	{"lone ampersand", "a & b", 2, 3, `unexpected "&" (use "&&" or "and")`},
	{"lone bar", "a | b", 2, 3, `unexpected "|" (use "||" or "or")`},
	{"ternary", "a ? b : c", 2, 3, `unexpected "?" (there is no ternary operator; use if(cond, a, b))`},
	{"chained comparison", "a < b < c", 6, 7, `unexpected trailing "<": comparisons cannot be chained (write a < b && b < c)`},
	{"chained equality", "a == b != c", 7, 9, `unexpected trailing "!=": comparisons cannot be chained (write a < b && b < c)`},
	{"unterminated string", "'abc", 0, 4, "unterminated string"},
	{"unterminated after escape", `"ab\"`, 0, 5, "unterminated string"},
	{"unterminated later", "x + 'a", 4, 6, "unterminated string"},
	{"bad character", "a # b", 2, 3, `unexpected character '#'`},
	{"non-ascii character", "a é", 2, 4, `unexpected character 'é'`},
	{"invalid utf8", "a \xff", 2, 3, "unexpected byte 0xff"},
	{"number then letters", "1abc", 0, 4, `invalid number "1abc"`},
	{"integer overflow", "99999999999999999999", 0, 20, "invalid integer 99999999999999999999 (out of range)"},
	{"float overflow", strings.Repeat("9", 400) + ".0", 0, 402, "invalid number " + strings.Repeat("9", 400) + ".0 (out of range)"},
	{"dot at end", "a.", 2, 2, `expected a field name after ".", found end of expression`},
	{"dot number", "a.1", 2, 3, `expected a field name after ".", found number 1`},
	{"unclosed subscript", "a[1", 3, 3, `expected "]", found end of expression`},
	{"arrow alone", "=>", 0, 2, `unexpected "=>"`},
	{"list missing comma", "[1 2]", 3, 4, `expected "," or "]", found number 2`},
	{"list unclosed", "[1, 2", 5, 5, `expected "," or "]", found end of expression`},
	{"list trailing comma", "[1, ]", 2, 3, "trailing comma is not allowed"},
	{"object missing colon", "{a 1}", 3, 4, `expected ":" after object key, found number 1`},
	{"object number key", "{1: 2}", 1, 2, "expected an object key, found number 1 (keys are identifiers or quoted strings)"},
	{"object repeated key", "{a: 1, 'a': 2}", 7, 10, `object literal repeats key "a"`},
	{"object missing comma", "{a: 1 b: 2}", 6, 7, `expected "," or "}", found identifier "b"`},
	{"object trailing comma", "{a: 1,}", 5, 6, "trailing comma is not allowed"},
	{"unknown function", "foo(1)", 0, 3, `unknown function "foo"`},
	{"unknown function typo", "lenght(x)", 0, 6, `unknown function "lenght", did you mean "length"?`},
	{"unknown function transposition", "fliter(x, y => y)", 0, 6, `unknown function "fliter", did you mean "filter"?`},
	{"unknown function case", "Length(x)", 0, 6, `unknown function "Length", did you mean "length"?`},
	{"call arguments missing comma", "length(1 2)", 9, 10, `expected "," or ")", found number 2`},
	{"call trailing comma", "length(1,)", 8, 9, "trailing comma is not allowed"},
	{"call unclosed", "length(", 7, 7, "unexpected end of expression"},
	{"arity one", "length(1, 2)", 0, 12, "length takes 1 argument, got 2"},
	{"arity two", "join([])", 0, 8, "join takes 2 arguments, got 1"},
	{"arity at least", "concat()", 0, 8, "concat takes at least 1 argument, got 0"},
	{"arity max", "max()", 0, 5, "max takes at least 1 argument, got 0"},
	{"arity if", "if(a, b)", 0, 8, "if takes 3 arguments, got 2"},
	{"arity map", "map(xs)", 0, 7, "map takes 2 arguments, got 1"},
	{"map without lambda", "map(xs, 1)", 8, 9, "map expects a lambda as its last argument, such as x => x.name"},
	{"reduce without lambda", "reduce(xs, 0, acc)", 14, 17, "reduce expects a lambda as its last argument, such as (acc, x) => acc + x"},
	{"map lambda arity", "map(xs, (a, b) => a)", 8, 17, "map lambda takes 1 parameter, got 2"},
	{"filter lambda no params", "filter(xs, () => true)", 11, 16, "filter lambda takes 1 parameter, got 0"},
	{"reduce lambda arity", "reduce(xs, 0, x => x)", 14, 18, "reduce lambda takes 2 parameters, got 1"},
	{"lambda not last", "reduce(xs, a => 1, (a, b) => 2)", 11, 15, "a lambda is only allowed as the last argument of map, filter or reduce"},
	{"lambda in other builtin", "length(x => x)", 7, 11, "a lambda is only allowed as the last argument of map, filter or reduce"},
	{"lambda at top level", "x => x", 0, 4, "a lambda is only allowed as the last argument of map, filter or reduce"},
	{"parenthesised lambda at top level", "(a, b) => a", 0, 9, "a lambda is only allowed as the last argument of map, filter or reduce"},
	{"lambda in list", "[x => 1]", 1, 5, "a lambda is only allowed as the last argument of map, filter or reduce"},
	{"lambda param namespace", "map(xs, outputs => 1)", 8, 15, `lambda parameter "outputs" collides with the reserved namespace`},
	{"lambda param namespace in list", "reduce(xs, 0, (acc, vars) => 1)", 20, 24, `lambda parameter "vars" collides with the reserved namespace`},
	{"lambda param duplicate", "map(xs, (a, a) => a)", 12, 13, `duplicate lambda parameter "a"`},
	{"lambda param keyword", "map(xs, (true) => 1)", 9, 13, `lambda parameter "true" is a keyword`},
	{"lambda body error", "map(xs, x => x +)", 16, 17, `unexpected ")"`},
	{"error inside lambda after scope", "map(xs, x => x)(1)", 15, 16, `unexpected "("`},
}

func TestParseErrors(t *testing.T) {
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse(tc.src)
			if err == nil {
				t.Fatalf("Parse(%q): got %s, want an error", tc.src, e)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q): got error of type %T, want *Error", tc.src, err)
			}
			want := &Error{Offset: tc.offset, End: tc.end, Msg: tc.msg}
			if diff := cmp.Diff(want, pe); diff != "" {
				t.Errorf("Parse(%q) error mismatch (-want +got):\n%s", tc.src, diff)
			}
		})
	}
}

func TestErrorString(t *testing.T) {
	_, err := Parse("a)")
	if got, want := err.Error(), `offset 1: unexpected ")"`; got != want {
		t.Errorf("Error(): got %q, want %q", got, want)
	}
}

func TestLimits(t *testing.T) {
	nest := func(open, close string, n int) string {
		return strings.Repeat(open, n) + "a" + strings.Repeat(close, n)
	}
	depthMsg := "maximum expression depth exceeded (256)"
	nodesMsg := "expression is too complex (more than 10000 nodes)"
	tests := []struct {
		name string
		src  string
		err  *Error // nil: must parse
	}{
		{"parens at limit", nest("(", ")", 256), nil},
		{"parens over limit", nest("(", ")", 257), &Error{256, 257, depthMsg}},
		{"lists over limit", nest("[", "]", 257), &Error{256, 257, depthMsg}},
		{"calls over limit", nest("length(", ")", 257), &Error{256*7 + 6, 256*7 + 7, depthMsg}},
		{"subscripts at limit", "a" + strings.Repeat("[a", 256) + strings.Repeat("]", 256), nil},
		{"subscripts over limit", "a" + strings.Repeat("[a", 257) + strings.Repeat("]", 257), &Error{1 + 256*2, 1 + 256*2 + 1, depthMsg}},
		{"not at limit", strings.Repeat("!", 256) + "a", nil},
		{"not over limit", strings.Repeat("!", 257) + "a", &Error{256, 257, depthMsg}},
		{"minus over limit", strings.Repeat("-", 257) + "1", &Error{256, 257, depthMsg}},
		{"nodes at limit", "1" + strings.Repeat("+1", 4999), nil},
		{"nodes over limit", "1" + strings.Repeat("+1", 5000), &Error{1 + 5000*2 - 1, 1 + 5000*2, nodesMsg}},
		{"length at limit", "1" + strings.Repeat(" ", MaxSourceLen-1), nil},
		{"length over limit", "1" + strings.Repeat(" ", MaxSourceLen), &Error{MaxSourceLen, MaxSourceLen + 1, "expression is too long (65537 bytes, maximum 65536)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.src)
			if tc.err == nil {
				if err != nil {
					t.Fatalf("got error %v, want success", err)
				}
				return
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("got error %v, want *Error %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.err, pe); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefs(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []Ref
	}{
		{"none", "1 + length([])", []Ref{}},
		{"bare", "approved", []Ref{{Namespace: "input", Path: []string{"approved"}, Bare: true, Offset: 0, End: 8}}},
		{"bare path", "a.b", []Ref{{Namespace: "input", Path: []string{"a", "b"}, Bare: true, Offset: 0, End: 3}}},
		{"namespace alone", "vars", []Ref{{Namespace: "vars", Path: []string{}, Offset: 0, End: 4}}},
		{"every namespace", "vars.a + input.b + outputs.c + artifacts.d + loop.e + run.f", []Ref{
			{Namespace: "vars", Path: []string{"a"}, Offset: 0, End: 6},
			{Namespace: "input", Path: []string{"b"}, Offset: 9, End: 16},
			{Namespace: "outputs", Path: []string{"c"}, Offset: 19, End: 28},
			{Namespace: "artifacts", Path: []string{"d"}, Offset: 31, End: 42},
			{Namespace: "loop", Path: []string{"e"}, Offset: 45, End: 51},
			{Namespace: "run", Path: []string{"f"}, Offset: 54, End: 59},
		}},
		{"static prefix only", "approved && vars.x > outputs.a.b['c d'][0].e", []Ref{
			{Namespace: "input", Path: []string{"approved"}, Bare: true, Offset: 0, End: 8},
			{Namespace: "vars", Path: []string{"x"}, Offset: 12, End: 18},
			{Namespace: "outputs", Path: []string{"a", "b", "c d"}, Offset: 21, End: 39},
		}},
		{"dynamic subscript", "a[b].c", []Ref{
			{Namespace: "input", Path: []string{"a"}, Bare: true, Offset: 0, End: 1},
			{Namespace: "input", Path: []string{"b"}, Bare: true, Offset: 2, End: 3},
		}},
		{"dashed node name", "outputs['node-1'].field", []Ref{
			{Namespace: "outputs", Path: []string{"node-1", "field"}, Offset: 0, End: 23},
		}},
		{"lambda params excluded", "map(outputs.xs, x => x.y + vars.k)", []Ref{
			{Namespace: "outputs", Path: []string{"xs"}, Offset: 4, End: 14},
			{Namespace: "vars", Path: []string{"k"}, Offset: 27, End: 33},
		}},
		{"param shadows input field", "map(items, score => score + total)", []Ref{
			{Namespace: "input", Path: []string{"items"}, Bare: true, Offset: 4, End: 9},
			{Namespace: "input", Path: []string{"total"}, Bare: true, Offset: 28, End: 33},
		}},
		{"outer param in inner lambda", "map(a, x => map(b, y => x + y + c))", []Ref{
			{Namespace: "input", Path: []string{"a"}, Bare: true, Offset: 4, End: 5},
			{Namespace: "input", Path: []string{"b"}, Bare: true, Offset: 16, End: 17},
			{Namespace: "input", Path: []string{"c"}, Bare: true, Offset: 32, End: 33},
		}},
		{"param out of scope", "concat(map(xs, x => [x]), x)", []Ref{
			{Namespace: "input", Path: []string{"xs"}, Bare: true, Offset: 11, End: 13},
			{Namespace: "input", Path: []string{"x"}, Bare: true, Offset: 26, End: 27},
		}},
		{"reduce init outside scope", "reduce(xs, acc, (acc, x) => acc)", []Ref{
			{Namespace: "input", Path: []string{"xs"}, Bare: true, Offset: 7, End: 9},
			{Namespace: "input", Path: []string{"acc"}, Bare: true, Offset: 11, End: 14},
		}},
		{"object keys are not refs", "{a: b}", []Ref{
			{Namespace: "input", Path: []string{"b"}, Bare: true, Offset: 4, End: 5},
		}},
		{"builtin name as field", "length + map", []Ref{
			{Namespace: "input", Path: []string{"length"}, Bare: true, Offset: 0, End: 6},
			{Namespace: "input", Path: []string{"map"}, Bare: true, Offset: 9, End: 12},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse(tc.src)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.src, err)
			}
			got := e.Refs()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Refs() of %q mismatch (-want +got):\n%s", tc.src, diff)
			}
			for _, r := range got {
				if r.Offset < 0 || r.End > len(tc.src) || r.Offset > r.End {
					t.Errorf("ref %+v has offsets outside the source", r)
				}
			}
			// Refs returns a copy.
			if len(got) > 0 && len(got[0].Path) > 0 {
				got[0].Path[0] = "mutated"
				if e.Refs()[0].Path[0] == "mutated" {
					t.Errorf("Refs() shares its Path slices with the expression")
				}
			}
		})
	}
}

func TestNilExpr(t *testing.T) {
	var e *Expr
	if got := e.String(); got != "" {
		t.Errorf("String(): got %q, want empty", got)
	}
	if got := e.Source(); got != "" {
		t.Errorf("Source(): got %q, want empty", got)
	}
	if got := e.Refs(); got != nil {
		t.Errorf("Refs(): got %v, want nil", got)
	}
	if _, err := e.Eval(nil); err == nil {
		t.Errorf("Eval(): got no error, want one")
	}
}

func TestSuggest(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"exact", "sum", "sum"},
		{"far", "foo", ""},
		{"insertion", "mapp", "map"},
		{"long word two edits", "flattten", "flatten"},
		{"short word two edits", "sxy", ""},
		{"very long", strings.Repeat("x", 100), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := suggest(tc.in); got != tc.want {
				t.Errorf("suggest(%q): got %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
