package shell

import (
	"strings"
	"testing"
)

// FuzzScan feeds arbitrary command text, with {{…}} holes, to the scan:
// it never panics, returns one Use per hole, and every Use is well formed
// and renders the variable's expansion.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		"echo {{x}}", `bash -c "eval 'echo {{x}}'"`, "cat <<EOF | sh\n{{x}}\nEOF", "echo $(( {{x}} ))",
		"a=( [{{x}}]=1 )", "echo ${a[{{x}}]:-{{y}}}", "case {{x}} in a) echo $(case b in b) x;; esac);; esac",
		"echo `echo {{x}}`", "((", "$((", "${", "$'\\x", "<<", "<<-'E'\n{{x}}\nE", "f() ( {{x}} )",
		"[[ {{x}} -eq {{y}} ]]", "declare -A m; unset \"m[{{x}}]\"", "echo \\{{x}}", "$[", "`", "\"", "'",
		"bash -c \"bash -c \\\"bash -c 'bash -c {{x}}'\\\"\"", "x=$(cat <<A\n$(<<B\n{{x}}\nB\n)\nA\n)",
		"python3 -c {{x}}", "sudo -u -- bash -c {{x}}", "${!{{x}}}", "${x@P{{x}}", "echo $'\\u{{x}}'",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		ps := pieces(cmd)
		holes := 0
		for _, p := range ps {
			if p.Hole {
				holes++
			}
		}
		uses := Scan(ps)
		if len(uses) != holes {
			t.Fatalf("%d uses for %d holes", len(uses), holes)
		}
		for _, u := range uses {
			if u.Quote == QuoteInvalid || u.Quote > Arith || u.Check > CheckName {
				t.Fatalf("malformed use %+v", u)
			}
			if len(u.Layers) > maxDepth || len(u.Layers) == maxDepth && u.Risk == "" {
				t.Fatalf("%d layers (cap %d) and risk %q", len(u.Layers), maxDepth, u.Risk)
			}
			if (u.Risk == "") != (u.Fix == "") {
				t.Fatalf("risk without fix or fix without risk: %+v", u)
			}
			if r := u.Render("ITERION_REF_1"); !strings.Contains(r, "ITERION_REF_1") {
				t.Fatalf("Render = %q", r)
			}
		}
	})
}
