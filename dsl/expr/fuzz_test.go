package expr

import (
	"errors"
	"testing"
)

// FuzzParse checks that Parse never panics, that errors carry offsets inside
// the source, and that a parsed expression evaluates without panicking and
// prints a canonical form that parses back to itself.
func FuzzParse(f *testing.F) {
	for _, tc := range stringCases {
		f.Add(tc.src)
	}
	for _, tc := range errorCases {
		f.Add(tc.src)
	}
	for _, tc := range evalCases {
		f.Add(tc.src)
	}
	for _, tc := range builtinCases {
		f.Add(tc.src)
	}
	env := testEnv()
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Parse(src)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q): error %v is a %T, not *Error", src, err, err)
			}
			if pe.Offset < 0 || pe.Offset > pe.End || pe.End > len(src) {
				t.Fatalf("Parse(%q): error offsets [%d, %d] outside [0, %d]: %s", src, pe.Offset, pe.End, len(src), pe.Msg)
			}
			if pe.Msg == "" {
				t.Fatalf("Parse(%q): empty error message", src)
			}
			return
		}
		for _, r := range e.Refs() {
			if r.Offset < 0 || r.Offset > r.End || r.End > len(src) {
				t.Fatalf("Parse(%q): ref %+v outside the source", src, r)
			}
		}
		_, _ = e.Eval(MapEnv{})
		_, _ = e.Eval(env)
		_, _ = e.EvalBool(nil)

		s := e.String()
		if len(s) > MaxSourceLen {
			// Escaping raw newlines and tabs may push a source that was
			// right at the length limit over it.
			return
		}
		e2, err := Parse(s)
		if err != nil {
			t.Fatalf("String() of %q is %q, which does not parse: %v", src, s, err)
		}
		if s2 := e2.String(); s2 != s {
			t.Fatalf("String() is not stable for %q:\nfirst:  %q\nsecond: %q", src, s, s2)
		}
	})
}
