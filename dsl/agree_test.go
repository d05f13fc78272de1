package dsl

import (
	"strings"
	"testing"
)

// The cases where this compiler once disagreed with upstream's verdict,
// now compiled as upstream does.
func TestUpstreamAgreements(t *testing.T) {
	for _, tc := range []struct{ name, src string }{
		{"input read on a node without an input schema (C034 at run time)", `prompt p:
  Fix {{input.finding}}.

agent scan:
  model: "anthropic/x"
  user: p

agent fix:
  model: "anthropic/x"
  user: p

workflow w:
  entry: scan
  scan -> fix with { finding: "{{outputs.scan.text}}" }
  fix -> done
`},
		{"session inherit at an implicit convergence (C009 only with await:)", `schema v:
  ok: bool

prompt p:
  Work.

agent draft:
  model: "anthropic/x"
  user: p
  output: v

agent review:
  model: "anthropic/x"
  user: p
  output: v
  session: inherit

agent fix:
  model: "anthropic/x"
  user: p

workflow w:
  entry: draft
  draft -> review
  review -> done when ok
  review -> fix as again(3) when not ok
  fix -> review
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ds := CompileSource("t.bot", []byte(tc.src))
			for _, d := range ds {
				if d.Severity == SevError {
					t.Errorf("%s", strings.TrimSpace(RenderString(ds, map[string][]byte{"t.bot": []byte(tc.src)})))
					break
				}
			}
		})
	}
}
