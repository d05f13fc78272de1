package shell

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// pieces splits a test command at its {{…}} holes.
func pieces(t string) []Piece {
	var ps []Piece
	for {
		i := strings.Index(t, "{{")
		j := strings.Index(t[max(i, 0):], "}}")
		if i < 0 || j < 0 {
			break
		}
		ps = append(ps, Piece{Text: t[:i]}, Piece{Hole: true})
		t = t[i+j+2:]
	}
	return append(ps, Piece{Text: t})
}

// got is the part of a Use a table case states.
type got struct {
	Quote   Quote
	Check   Check
	Layers  []Quote
	Context string
	Risky   bool
}

func summary(us []Use) []got {
	var out []got
	for _, u := range us {
		g := got{Quote: u.Quote, Check: u.Check, Context: u.Context, Risky: u.Risk != ""}
		for _, l := range u.Layers {
			g.Layers = append(g.Layers, l.Quote)
		}
		out = append(out, g)
	}
	return out
}

func TestScan(t *testing.T) {
	plain := got{Quote: Unquoted}
	risky := func(q Quote) got { return got{Quote: q, Risky: true} }
	tests := []struct {
		name string
		cmd  string
		want []got
	}{
		{"bare word", `echo {{x}}`, []got{plain}},
		{"double quotes", `echo "a {{x}}"`, []got{{Quote: Double}}},
		{"single quotes", `echo 'a {{x}}'`, []got{{Quote: Single}}},
		{"dollar quotes", `echo $'a\n{{x}}'`, []got{{Quote: Dollar}}},
		{"escaped quote does not close", `echo "\" {{x}}"`, []got{{Quote: Double}}},
		{"printf format and argument", `printf {{f}} {{x}}`, []got{plain, plain}},
		{"assignment", `v={{x}} cmd`, []got{plain}},
		{"let", `let n={{x}}+1`, []got{{Quote: Unquoted, Check: CheckNumber, Context: "let"}}},
		{"arithmetic expansion", `echo "$(( {{x}} + 1 ))"`, []got{{Quote: Arith, Check: CheckNumber, Context: "$(( … ))"}}},
		{"old arithmetic", `echo $[ {{x}} * 2 ]`, []got{{Quote: Arith, Check: CheckNumber, Context: "$[ … ]"}}},
		{"arithmetic command", `(( {{x}} ))`, []got{{Quote: Arith, Check: CheckNumber, Context: "(( … ))"}}},
		{"arithmetic for", `for (( i={{x}}; i<3; i++ )); do :; done`, []got{{Quote: Arith, Check: CheckNumber, Context: "for (( … ))"}}},
		{"shift is not arithmetic", `echo $(( 1 << 2 )) {{x}}`, []got{plain}},
		{"[[ -eq ]] both sides", `[[ {{x}} -eq {{y}} ]]`, []got{{Quote: Unquoted, Check: CheckNumber, Context: "[[ … -eq … ]]"}, {Quote: Unquoted, Check: CheckNumber, Context: "[[ … -eq … ]]"}}},
		{"[[ == ]] is a pattern", `[[ {{x}} == {{y}} ]]`, []got{plain, plain}},
		{"[ -eq ] is not evaluated", `[ {{x}} -eq 1 ]`, []got{plain}},
		{"declare -i", `declare -ri n={{x}}`, []got{{Quote: Unquoted, Check: CheckNumber, Context: "declare -i"}}},
		{"declare name", `declare {{x}}=1`, []got{{Quote: Unquoted, Check: CheckName, Context: "declare"}}},
		{"declare -n", `local -n ref={{x}}`, []got{{Quote: Unquoted, Check: CheckName, Context: "local -n"}}},
		{"declare plain value", `export v={{x}}`, []got{plain}},
		{"integer variable", `declare -i n; n={{x}}`, []got{{Quote: Unquoted, Check: CheckNumber, Context: "an assignment to integer variable n"}}},
		{"subscript expansion", `echo ${a[{{x}}]}`, []got{{Quote: Arith, Check: CheckNumber, Context: "an array subscript ${…[…]}"}}},
		{"associative subscript", `declare -A m; echo "${m[{{x}}]}"`, []got{plain}},
		{"subscript assignment", `a[{{x}}]=v`, []got{{Quote: Unquoted, Check: CheckNumber, Context: "an array subscript a[…]="}}},
		{"compound assignment", `a=( [{{x}}]=1 {{y}} )`, []got{{Quote: Unquoted, Check: CheckNumber, Context: "an array subscript in a=( … )"}, plain}},
		{"substring offset", `echo "${v:{{x}}:2}"`, []got{{Quote: Arith, Check: CheckNumber, Context: "a substring offset ${…:…}"}}},
		{"default word", `echo "${v:-{{x}}}"`, []got{plain}},
		{"through a variable", `n={{x}}; echo $(( n + 1 ))`, []got{{Quote: Unquoted, Check: CheckNumber, Context: "$(( … )) (through $n)"}}},
		{"through a for variable", `for i in {{x}}; do [[ $i -gt 1 ]]; done`, []got{{Quote: Unquoted, Check: CheckNumber, Context: "[[ … -gt … ]] (through $i)"}}},
		{"printf -v", `printf -v {{x}} %s v`, []got{{Quote: Unquoted, Check: CheckName, Context: "printf -v"}}},
		{"read", `read -r {{x}}`, []got{{Quote: Unquoted, Check: CheckName, Context: "read"}}},
		{"unset subscript", `unset "a[{{x}}]"`, []got{{Quote: Double, Check: CheckNumber, Context: "an array subscript in unset"}}},
		{"[[ -v ]]", `[[ -v {{x}} ]]`, []got{{Quote: Unquoted, Check: CheckName, Context: "[[ -v … ]]"}}},
		{"test -v", `test -v {{x}}`, []got{{Quote: Unquoted, Check: CheckName, Context: "test -v"}}},
		{"indirect expansion", `n={{x}}; echo "${!n}"`, []got{{Quote: Unquoted, Check: CheckName, Context: "${!…} (through $n)"}}},
		{"bash -c", `bash -c 'echo {{x}}'`, []got{{Quote: Unquoted, Layers: []Quote{Single}, Context: "bash -c '…'"}}},
		{"sh -c double", `sh -ec "echo {{x}}"`, []got{{Quote: Unquoted, Layers: []Quote{Double}, Context: "sh -c \"…\""}}},
		{"bash -c positional argument", `bash -c 'echo "$1"' _ {{x}}`, []got{plain}},
		{"bash -c inner arithmetic", `bash -c 'echo $(( {{x}} ))'`, []got{{Quote: Arith, Check: CheckNumber, Layers: []Quote{Single}, Context: "$(( … )) in bash -c '…'"}}},
		{"nested shells", `bash -c "sh -c 'echo {{x}}'"`, []got{{Quote: Unquoted, Layers: []Quote{Single, Double}, Context: "sh -c '…' in bash -c \"…\""}}},
		{"wrapped shell", `timeout -s KILL 5 sudo -u me bash -c 'echo {{x}}'`, []got{{Quote: Unquoted, Layers: []Quote{Single}, Context: "bash -c '…'"}}},
		{"find -exec sh -c", `find . -exec sh -c 'echo {{x}}' \;`, []got{{Quote: Unquoted, Layers: []Quote{Single}, Context: "sh -c '…'"}}},
		{"su -c", `su -c 'echo {{x}}' nobody`, []got{{Quote: Unquoted, Layers: []Quote{Single}, Context: "su -c '…'"}}},
		{"eval", `eval echo {{x}}`, []got{{Quote: Unquoted, Layers: []Quote{Unquoted}, Context: "eval …"}}},
		{"eval double", `eval "echo {{x}}"`, []got{{Quote: Unquoted, Layers: []Quote{Double}, Context: "eval \"…\""}}},
		{"trap", `trap 'rm {{x}}' EXIT`, []got{{Quote: Unquoted, Layers: []Quote{Single}, Context: "trap '…'"}}},
		{"command substitution", `echo "$(git log {{x}})"`, []got{plain}},
		{"case in command substitution", `echo $(case a in a) echo {{x}};; esac) {{y}}`, []got{plain, plain}},
		{"heredoc body", "cat <<EOF\n{{x}}\nEOF\necho {{y}}", []got{{Quote: HereDoc}, plain}},
		{"stripped heredoc", "cat <<-END\n\t{{x}}\n\tEND\necho {{y}}", []got{{Quote: HereDoc}, plain}},
		{"comment", "echo a # {{x}}\necho {{y}}", []got{plain, plain}},
		{"backticks", "echo `echo {{x}}`", []got{risky(Unquoted)}},
		{"command position", `{{x}} --version`, []got{risky(Unquoted)}},
		{"command position after env", `env A=1 {{x}}`, []got{risky(Unquoted)}},
		{"output at command position", `$(echo {{x}})`, []got{risky(Unquoted)}},
		{"pipe into a shell", `echo {{x}} | bash`, []got{risky(Unquoted)}},
		{"pipe into a shell with -c is fine", `echo {{x}} | bash -c 'cat'`, []got{plain}},
		{"here-string into a shell", `bash <<< {{x}}`, []got{risky(Unquoted)}},
		{"heredoc into a shell", "sh <<EOF\necho {{x}}\nEOF", []got{risky(HereDoc)}},
		{"heredoc piped into a shell", "cat <<EOF | bash\necho {{x}}\nEOF", []got{risky(HereDoc)}},
		{"quoted heredoc", "cat <<'EOF'\n{{x}}\nEOF", []got{risky(Literal)}},
		{"source a process substitution", `source <(echo {{x}})`, []got{risky(Unquoted)}},
		{"stdin from a process substitution", `bash < <(echo {{x}})`, []got{risky(Unquoted)}},
		{"xargs -I into a shell", `echo {{x}} | xargs -I{} sh -c 'echo {}'`, []got{risky(Unquoted)}},
		{"python program", `python3 -c 'print("{{x}}")'`, []got{risky(Single)}},
		{"python argument", `python3 -c 'import sys; print(sys.argv[1])' {{x}}`, []got{plain}},
		{"perl cluster", `perl -ne 'print if /{{x}}/' f`, []got{risky(Single)}},
		{"awk program", `awk -F, '{ print "{{x}}" }' f`, []got{risky(Single)}},
		{"awk -v is data", `awk -v v={{x}} '{ print v }' f`, []got{plain}},
		{"sed script", `sed -i "s/a/{{x}}/" f`, []got{risky(Double)}},
		{"ssh", `ssh host ls {{x}}`, []got{risky(Unquoted)}},
		{"expansion in a -c script", `bash -c "echo $(echo {{x}})"`, []got{risky(Unquoted)}},
		{"variable run by eval", `c={{x}}; eval "$c"`, []got{risky(Unquoted)}},
		{"prompt expansion", `p={{x}}; echo "${p@P}"`, []got{risky(Unquoted)}},
		{"declare -a quoted compound", `declare -a arr="({{x}})"`, []got{{Quote: Double, Risky: true}}},
		{"unset associative subscript", `declare -A m; unset "m[{{x}}]"`, []got{{Quote: Double, Check: CheckNumber, Context: "an array subscript in unset", Risky: true}}},
		{"dynamic shell -c", `$SHELL -c 'echo {{x}}'`, []got{risky(Single)}},
		{"make variable", `make deploy ENV={{x}}`, []got{risky(Unquoted)}},
		{"quoted make variable", `make "ENV={{x}}"`, []got{risky(Double)}},
		{"make target", `make {{x}}`, []got{plain}},
		{"environment of make", `ENV={{x}} make`, []got{risky(Unquoted)}},
		{"environment of make through env", `env ENV={{x}} make`, []got{risky(Unquoted)}},
		{"code-bearing variable", `GIT_SSH_COMMAND={{x}} git fetch`, []got{risky(Unquoted)}},
		{"exported code-bearing variable", `export BASH_ENV={{x}}`, []got{risky(Unquoted)}},
		{"plain environment variable", `TITLE={{x}} ./notify`, []got{plain}},
		{"command -v is a lookup", `command -v {{x}}`, []got{plain}},
		{"command runs its argument", `command {{x}}`, []got{risky(Unquoted)}},
		{"function body", `f() { echo {{x}}; }; f`, []got{plain}},
		{"redirection target", `echo hi > {{x}} 2>&1`, []got{plain}},
		{"fd before redirection is not the command", `2>/dev/null echo {{x}}`, []got{plain}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summary(Scan(pieces(tc.cmd)))); diff != "" {
				t.Errorf("Scan(%q) mismatch (-want +got):\n%s", tc.cmd, diff)
			}
		})
	}
}

func TestRender(t *testing.T) {
	tests := []struct {
		name string
		use  Use
		want string
	}{
		{"unquoted", Use{Quote: Unquoted}, `"${R}"`},
		{"double", Use{Quote: Double}, `${R}`},
		{"single", Use{Quote: Single}, `'"${R}"'`},
		{"dollar", Use{Quote: Dollar}, `'"${R}"$'`},
		{"arith", Use{Quote: Arith}, `${R}`},
		{"escaped", Use{Quote: Unquoted, Escaped: true}, "\n\"${R}\""},
		{"in bash -c '…'", Use{Quote: Unquoted, Layers: []Layer{{Quote: Single}}}, `"${R}"`},
		{"in bash -c \"…\"", Use{Quote: Unquoted, Layers: []Layer{{Quote: Double}}}, `\"\${R}\"`},
		{"single in bash -c '…'", Use{Quote: Single, Layers: []Layer{{Quote: Single}}}, `'\''"${R}"'\''`},
		{"in eval …", Use{Quote: Unquoted, Layers: []Layer{{Quote: Unquoted}}}, `\"\$\{R\}\"`},
		{"escaped in eval …", Use{Quote: Unquoted, Escaped: true, Layers: []Layer{{Quote: Unquoted}}}, "'\n'\\\"\\$\\{R\\}\\\""},
		{"two layers", Use{Quote: Unquoted, Layers: []Layer{{Quote: Single}, {Quote: Double}}}, `\"\${R}\"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.use.Render("R"); got != tc.want {
				t.Errorf("Render = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestValueChecks(t *testing.T) {
	for _, tc := range []struct {
		v            string
		number, name bool
		norm         string
	}{
		{v: "42", number: true, norm: "42"},
		{v: "-7", number: true, norm: "-7"},
		{v: "007", number: true, norm: "7"},
		{v: "-00", number: true, norm: "0"},
		{v: "0x1f"},
		{v: "2#101"},
		{v: "+1"},
		{v: ""},
		{v: "-"},
		{v: "1 "},
		{v: "a[$(id)]"},
		{v: "out", name: true},
		{v: "_x9", name: true},
		{v: "9x"},
		{v: "a[1]"},
	} {
		if got := IsNumber(tc.v); got != tc.number {
			t.Errorf("IsNumber(%q) = %v, want %v", tc.v, got, tc.number)
		}
		if got := IsName(tc.v); got != tc.name {
			t.Errorf("IsName(%q) = %v, want %v", tc.v, got, tc.name)
		}
		if tc.number {
			if got := Number(tc.v); got != tc.norm {
				t.Errorf("Number(%q) = %q, want %q", tc.v, got, tc.norm)
			}
		}
	}
}
