package expr

import "testing"

func TestSmoke(t *testing.T) {
	for _, s := range []string{
		"approved && score > 3", "7 * 100 / 30", "join(map(outputs.scan.findings, f => f.id), ', ')",
		"[1, 'a', true][1]", "{a: 1, 'b c': 2}", "reduce([1,2,3], 0, (acc, x) => acc + x)",
		"not a == b", "-(1 + 2) * 3", "(!a).b", "a[0]['x y'].z", "max([1, 5.5], 7)",
		"a < b < c", "foo(1)", "lenght(x)", "length(1, 2)", "map(xs, outputs => 1)", "x = 1", "'abc",
	} {
		e, err := Parse(s)
		if err != nil {
			t.Logf("%q -> err %v", s, err)
			continue
		}
		v, err := e.Eval(MapEnv{"input": {"approved": true, "score": 5, "a": []any{map[string]any{"x y": map[string]any{"z": 9}}}}, "outputs": {"scan": map[string]any{"findings": []map[string]any{{"id": "A"}, {"id": "B"}}}}})
		t.Logf("%q -> %s refs=%v => %#v, %v", s, e.String(), e.Refs(), v, err)
	}
}
