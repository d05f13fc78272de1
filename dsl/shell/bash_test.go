package shell

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// render renders cmd the way the engine does, with every hole holding v:
// it reports refused when a Check turns the value down, and risky when
// the scan has a Risk (the compiler warns; no rendering is promised).
func render(cmd, v string) (text string, env []string, refused, risky bool) {
	ps := pieces(cmd)
	uses := Scan(ps)
	var b strings.Builder
	n := 0
	for _, p := range ps {
		if !p.Hole {
			b.WriteString(p.Text)
			continue
		}
		u := uses[n]
		n++
		val := v
		switch u.Check {
		case CheckNumber:
			if !IsNumber(val) {
				refused = true
			}
			val = Number(val)
		case CheckName:
			if !IsName(val) {
				refused = true
			}
		}
		risky = risky || u.Risk != ""
		name := fmt.Sprintf("ITERION_REF_%d", n)
		env = append(env, name+"="+val)
		b.WriteString(u.Render(name))
	}
	return b.String(), env, refused, risky
}

// runBash runs text with bash -c in a fresh directory and reports its
// output and whether it created the file pwned.
func runBash(t *testing.T, text string, env []string) (string, bool) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("bash", "-c", text)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	out, _ := cmd.CombinedOutput()
	_, err := os.Stat(filepath.Join(dir, "pwned"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out)), err == nil
}

var hostile = []string{
	"a[$(touch pwned)]",
	"x[$(touch pwned)]+1",
	"$(touch pwned)",
	"`touch pwned`",
	"'; touch pwned; '",
	`"; touch pwned; "`,
	"\"'`touch pwned`'\"",
	"x\ntouch pwned",
	"x\n'\ntouch pwned\n'",
	"$(touch${IFS}pwned)",
	"EOF\ntouch pwned\nEOF",
	"\\'; touch pwned; #",
	"a[$(touch pwned)]=1",
	"*",
}

// TestRenderedCommandsAreInert renders commands in many shell constructs
// and runs them with real bash: with a hostile value nothing runs (or the
// value is refused), and a legitimate value gives the expected output.
func TestRenderedCommandsAreInert(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("these tests run real bash: apt-get install -y bash")
	}
	tests := []struct {
		cmd   string
		legit string
		want  string
	}{
		{`echo {{x}}`, "a  b", "a  b"},
		{`echo "{{x}}"`, "a  b", "a  b"},
		{`echo '{{x}}'`, "a  b", "a  b"},
		{`echo $'tab\t{{x}}'`, "v", "tab\tv"},
		{`echo \{{x}}`, "v", "v"},
		{`echo "\{{x}}"`, "v", "v"},
		{`echo {{x}}{{x}}`, "v", "vv"},
		{`printf '%s|' {{x}} "{{x}}"`, "v", "v|v|"},
		{`v={{x}}; echo "$v"`, "a b", "a b"},
		{`echo "${u:-{{x}}}"`, "a b", "a b"},
		{`echo ${u:-{{x}}}`, "a b", "a b"},
		{`v=abc; echo "${v/b/{{x}}}"`, "X", "aXc"},
		{`echo $(( {{x}} * 2 ))`, "21", "42"},
		{`echo "$(( ({{x}}) + 1 ))"`, "1", "2"},
		{`echo $[ {{x}} + 1 ]`, "1", "2"},
		{`(( {{x}} == 3 )) && echo yes`, "3", "yes"},
		{`for (( i = {{x}}; i < 3; i++ )); do printf %s $i; done`, "1", "12"},
		{`let "n = {{x}} * 2"; echo $n`, "4", "8"},
		{`[[ {{x}} -ge 2 ]] && echo ge`, "2", "ge"},
		{`[[ ( {{x}} -ne 1 ) && 1 -eq 1 ]] && echo ne`, "2", "ne"},
		{`[[ {{x}} == a* ]] && echo glob || echo literal`, "a*", "glob"},
		{`[ {{x}} -eq 3 ] && echo three`, "3", "three"},
		{`declare -i n={{x}}; echo $n`, "5", "5"},
		{`declare -i n; n+={{x}}; echo $n`, "5", "5"},
		{`f() { local -i n={{x}}; echo $n; }; f`, "5", "5"},
		{`a=(x y z); echo ${a[{{x}}]} "${a[{{x}}]}"`, "1", "y y"},
		{`a=(x y z); echo ${#a[{{x}}]}`, "1", "1"},
		{`a[{{x}}]=v; echo ${a[2]}`, "2", "v"},
		{`a=( [{{x}}]=v ); echo ${a[2]}`, "2", "v"},
		{`declare -a a=( [{{x}}]=v ); echo ${a[2]}`, "2", "v"},
		{`declare -A m=( [{{x}}]=v ); echo "${m[{{x}}]}"`, "k y", "v"},
		{`declare -A m; m[{{x}}]=v; echo "${!m[@]}"`, "k y", "k y"},
		{`v=abcdef; echo "${v:{{x}}}" ${v:1:{{x}}}`, "2", "cdef bc"},
		{`n={{x}}; echo $(( n + 1 ))`, "1", "2"},
		{`n={{x}}; echo $(( $n + 1 ))`, "1", "2"},
		{`n={{x}}; [[ $n -eq 1 ]] && echo one`, "1", "one"},
		{`for n in {{x}}; do echo $(( n )); done`, "7", "7"},
		{`out=v; n={{x}}; echo "${!n}"`, "out", "v"},
		{`printf -v {{x}} %s hi; echo "$out"`, "out", "hi"},
		{`read {{x}} <<< hi; echo "$out"`, "out", "hi"},
		{`read -r -a {{x}} <<< "a b"; echo "${out[1]}"`, "out", "b"},
		{`mapfile -t {{x}} <<< hi; echo "${out[0]}"`, "out", "hi"},
		{`out=1; unset {{x}}; echo "${out:-gone}"`, "out", "gone"},
		{`a=(x y); unset "a[{{x}}]"; echo "${a[@]}"`, "0", "y"},
		{`out=1; [[ -v {{x}} ]] && echo set`, "out", "set"},
		{`out=1; test -v {{x}} && echo set`, "out", "set"},
		{`declare {{x}}=v; echo "$out"`, "out", "v"},
		{`declare -n r={{x}}; out=v; echo "$r"`, "out", "v"},
		{`getopts a {{x}} -a; echo "$out"`, "out", "a"},
		{`bash -c 'echo {{x}}'`, "a  b", "a  b"},
		{`bash -c 'echo "{{x}}"'`, "a  b", "a  b"},
		{`bash -c "echo '{{x}}'"`, "a  b", "a  b"},
		{`bash -c "echo \"{{x}}\""`, "a  b", "a  b"},
		{`bash -c echo\ {{x}}`, "v", "v"},
		{`bash -xc 'echo {{x}}' 2>/dev/null`, "v", "v"},
		{`bash -o pipefail -c 'echo {{x}}'`, "v", "v"},
		{`sh -c 'echo "$1" {{x}}' _ arg`, "v", "arg v"},
		{`bash -c 'echo $(( {{x}} + 1 ))'`, "1", "2"},
		{`bash -c '[[ {{x}} -eq 1 ]] && echo one'`, "1", "one"},
		{`bash -c 'n={{x}}; echo $((n))'`, "3", "3"},
		{`bash -c 'bash -c "echo {{x}}"'`, "a  b", "a  b"},
		{`bash -c "bash -c 'echo \"{{x}}\"'"`, "a  b", "a  b"},
		{`bash -c 'eval "echo {{x}}"'`, "a  b", "a  b"},
		{`bash -c 'echo \{{x}}'`, "v", "v"},
		{`env A=1 bash -c 'echo {{x}}'`, "v", "v"},
		{`timeout 5 bash -c 'echo {{x}}'`, "v", "v"},
		{`exec bash -c 'echo {{x}}'`, "v", "v"},
		{`echo x | xargs sh -c 'echo {{x}} "$0"'`, "v", "v x"},
		{`find . -maxdepth 0 -exec sh -c 'echo {{x}}' \;`, "v", "v"},
		{`eval echo {{x}}`, "a  b", "a  b"},
		{`eval "echo {{x}}"`, "a  b", "a  b"},
		{`eval 'echo {{x}}'`, "a  b", "a  b"},
		{`eval "echo '{{x}}'"`, "a  b", "a  b"},
		{`eval echo "{{x}}"`, "a  b", "a  b"},
		{`eval echo $'{{x}}'`, "a  b", "a  b"},
		{`eval -- echo \{{x}}`, "v", "v"},
		{`trap 'echo {{x}}' EXIT`, "a  b", "a  b"},
		{`trap "echo {{x}}" EXIT`, "a  b", "a  b"},
		{`echo "$(printf '%s' {{x}})"`, "a  b", "a  b"},
		{`echo "$(echo "$(echo {{x}})")"`, "a  b", "a  b"},
		{`echo "$( (echo {{x}}) )"`, "v", "v"},
		{`echo $(case x in x) echo {{x}};; esac)`, "v", "v"},
		{`case {{x}} in {{x}}) echo same;; *) echo other;; esac`, "a*", "same"},
		{`f() { echo "{{x}}"; }; f`, "a  b", "a  b"},
		{`if true; then echo {{x}}; fi`, "v", "v"},
		{`while true; do echo {{x}}; break; done`, "v", "v"},
		{`{ echo {{x}}; }`, "v", "v"},
		{`(echo {{x}})`, "v", "v"},
		{`cat <(echo {{x}})`, "v", "v"},
		{`echo {{x}} | cat`, "v", "v"},
		{`echo {{x}} > out; cat out`, "v", "v"},
		{`cat <<< {{x}}`, "a  b", "a  b"},
		{"cat <<EOF\n{{x}}\nEOF", "a  b", "a  b"},
		{"cat <<-EOF\n\t{{x}}\n\tEOF", "v", "v"},
		{"cat <<EOF\n$(echo {{x}})\nEOF", "a  b", "a  b"},
		{"x=$(cat <<EOF\n{{x}}\nEOF\n); echo \"$x\"", "v", "v"},
		{"cat <<A <<B\n{{x}}\nA\n{{x}}\nB", "v", "v"},
		{"echo {{x}} # {{x}}\necho done", "v", "v\ndone"},
		{`[[ -n {{x}} ]] && echo nonempty`, "v", "nonempty"},
		{`echo "a${IFS}b {{x}}"`, "v", "a \t\nb v"},
		{`test {{x}} = v && echo eq`, "v", "eq"},
	}
	for _, tc := range tests {
		t.Run(tc.cmd, func(t *testing.T) {
			text, env, refused, risky := render(tc.cmd, tc.legit)
			if risky {
				t.Fatalf("a Risk where the engine should keep values inert: %s", tc.cmd)
			}
			if refused {
				t.Fatalf("legitimate value %q refused", tc.legit)
			}
			if out, bad := runBash(t, text, env); out != tc.want || bad {
				t.Errorf("%s with %q printed %q, want %q\nrendered: %s", tc.cmd, tc.legit, out, tc.want, text)
			}
			for _, v := range hostile {
				text, env, refused, _ := render(tc.cmd, v)
				if refused {
					continue
				}
				if _, bad := runBash(t, text, env); bad {
					t.Errorf("value %q ran as code\nrendered: %s", v, text)
				}
			}
		})
	}
}
