package dsl

import (
	"testing"

	"github.com/iterion-bot/iterion/engine/permission"
)

// A node's rule list replaces the workflow's of the same kind, the kinds
// it does not declare are inherited, and its mode wins; readonly is read.
func TestPermissionResolution(t *testing.T) {
	src := `prompt p:
  Work.

agent reviewer:
  model: "anthropic/x"
  user: p

agent converge:
  model: "anthropic/x"
  user: p
  permission: ask
  deny: ["Bash"]
  readonly: true

agent free:
  model: "anthropic/x"
  user: p

workflow review:
  entry: reviewer
  permission: deny
  allow: ["Read(**)", "Bash(git diff:*)"]
  deny: ["Read(.env*)"]
  reviewer -> converge
  converge -> free
  free -> done
`
	w, ds := CompileSource("t.bot", []byte(src))
	if ds.HasErrors() {
		t.Fatal(RenderString(ds, map[string][]byte{"t.bot": []byte(src)}))
	}
	texts := func(rs []permission.Rule) (out []string) {
		for _, r := range rs {
			out = append(out, r.Text)
		}
		return out
	}
	r, c := w.Node("reviewer").LLM, w.Node("converge").LLM
	if r.Permission.Mode != permission.Deny || !r.PermissionModeSet || len(r.Permission.Allow) != 2 || texts(r.Permission.Deny)[0] != "Read(.env*)" {
		t.Errorf("reviewer's policy = %+v", r.Permission)
	}
	if c.Permission.Mode != permission.Ask || len(c.Permission.Allow) != 2 || len(c.Permission.Deny) != 1 || texts(c.Permission.Deny)[0] != "Bash" {
		t.Errorf("converge's policy = %+v: want mode ask, the workflow's allow, its own deny alone", c.Permission)
	}
	if !c.ReadOnly || r.ReadOnly {
		t.Errorf("readonly: converge %v, reviewer %v", c.ReadOnly, r.ReadOnly)
	}
	if v := c.Permission.Decide(permission.Call{Tool: "bash", Input: map[string]any{"command": "git diff"}}); v.Decision != permission.Refuse {
		t.Errorf("converge's deny of Bash: %v", v)
	}

	plain, ds := CompileSource("t.bot", []byte("prompt p:\n  Work.\n\nagent a:\n  model: \"anthropic/x\"\n  user: p\n\nworkflow w:\n  entry: a\n  a -> done\n"))
	if ds.HasErrors() || plain.Node("a").LLM.Permission != nil {
		t.Errorf("a workflow declaring nothing has a policy: %+v", plain.Node("a").LLM.Permission)
	}
}
