package shell

import (
	"strings"
)

// Reasons and fixes of Risks.
const (
	riskCommand       = "at command position, where the value names the program that runs"
	riskCommandOutput = "inside an expansion at command position, whose result names the program that runs"
	riskBacktick      = "inside backticks `…`, whose text the shell reads twice"
	riskDeep          = "nested too deeply in quotes, expansions or scripts to be checked"
	riskQuotedHeredoc = "in a heredoc with a quoted delimiter (<<'EOF'), where nothing expands and the value cannot be passed"
	riskSSH           = "in an argument of ssh, which hands its arguments to a shell on the remote host"

	fixEnv     = "pass the value in an environment variable and read it where it is used (X={{…}} cmd, then \"$X\")"
	fixSimpler = "split the command, or pass the value in an environment variable"
	fixHeredoc = "write the delimiter unquoted (<<EOF) so the value expands as text"
	fixProgram = "pass the value in the environment or as an argument and read it in the program (os.environ, ENVIRON, $ENV, process.env)"
	fixCommand = "name the program in the command and pass the value as an argument"
	fixScript  = "write the script in the command and hand it the value as data (bash -c '… \"$1\"' _ {{…}})"
	fixTick    = "write $( … ) instead of backticks; the engine follows it"
	fixInner   = "move the expansion into the inner script (bash -c '… $( … ) …'), where the inner shell runs it"
)

// arithTestOps are the operators of [[ … ]] that evaluate both operands
// as arithmetic.
var arithTestOps = map[string]bool{"-eq": true, "-ne": true, "-lt": true, "-le": true, "-gt": true, "-ge": true}

// keywords keep the command position.
var keywords = map[string]bool{
	"!": true, "{": true, "}": true, "if": true, "then": true, "else": true, "elif": true, "fi": true,
	"do": true, "done": true, "while": true, "until": true, "time": true, "coproc": true, "]]": true,
}

// finishWord gives a completed word its role in the command.
func (s *scanner) finishWord(f *frame, w *word) {
	cmd := f.cmd
	if f.kind == fCompound {
		s.compoundWord(f, w)
		return
	}
	if cmd.redirect != redirNone {
		if cmd.redirect == redirHereString || cmd.redirect == redirStdin {
			for _, h := range w.direct {
				cmd.stdinHoles = append(cmd.stdinHoles, h.id)
			}
			cmd.stdinHoles = append(cmd.stdinHoles, w.nested...)
		}
		cmd.redirect = redirNone
		return
	}
	if cmd.test {
		s.testWord(f, w)
		return
	}
	bare := w.lit()
	t := w.str()
	if n := len(f.cases); n > 0 {
		switch f.cases[n-1] {
		case caseSubject:
			f.cases[n-1] = caseIn
			return
		case caseIn:
			if bare && t == "in" {
				f.cases[n-1] = casePattern
			}
			return
		case casePattern:
			if bare && t == "esac" {
				f.cases = f.cases[:n-1]
			}
			return
		case caseBody:
			if bare && t == "esac" && !cmd.named {
				f.cases = f.cases[:n-1]
				return
			}
		}
	}
	switch cmd.forState {
	case 1:
		cmd.forVar, cmd.forState = t, 2
		return
	case 2:
		cmd.forState = 3
		if bare && t == "do" {
			cmd.forState = 0
		}
		return
	case 3:
		for _, h := range w.direct {
			s.facts.taint(cmd.forVar, h.id)
		}
		s.facts.taint(cmd.forVar, w.nested...)
		return
	}
	if cmd.fnName {
		cmd.fnName = false
		return
	}
	if !cmd.named {
		if name, ok := assignment(w); ok {
			s.assignWord(cmd, w, name)
			return
		}
		if bare {
			switch {
			case keywords[t]:
				return
			case t == "case":
				f.cases = append(f.cases, caseSubject)
				return
			case t == "for" || t == "select":
				cmd.forState = 1
				return
			case t == "function":
				cmd.fnName = true
				return
			case t == "[[":
				cmd.named, cmd.name, cmd.test = true, "[[", true
				return
			}
		}
		s.commandWord(f, w)
		return
	}
	cmd.nargs++
	taken := false
	if cmd.prog != nil {
		taken = cmd.prog.word(s, f, w)
	}
	if !taken && bare {
		if p := progFor(base(t), false); p != nil {
			cmd.prog = p
		}
	}
}

// commandWord reads the word that names the program of a command.
func (s *scanner) commandWord(f *frame, w *word) {
	cmd := f.cmd
	cmd.named = true
	for _, h := range w.direct {
		s.risk(h.id, riskCommand, fixCommand)
	}
	for _, id := range w.nested {
		s.risk(id, riskCommandOutput, fixCommand)
	}
	if !w.lit() {
		cmd.dynamic = true
		name := "a program named by an expansion"
		if len(w.exps) > 0 {
			name = "$" + w.exps[0]
		}
		cmd.prog = &dynamicProg{name: name}
		return
	}
	cmd.name = base(w.str())
	cmd.prog = progFor(cmd.name, true)
	if _, ok := cmd.prog.(*makeProg); ok {
		s.makeVars(cmd.assigned)
	}
}

// assignment reports whether w is name=…, name+=… or name[…]=…, and the name.
func assignment(w *word) (string, bool) {
	if w.eq <= 0 {
		return "", false
	}
	head := w.text[:w.eq]
	if head[len(head)-1] == '+' {
		head = head[:len(head)-1]
	}
	name := head
	if i := strings.IndexByte(string(head), '['); i > 0 && head[len(head)-1] == ']' {
		name = head[:i]
	}
	if w.firstSpecial >= 0 && w.firstSpecial < len(name) || !IsName(string(name)) {
		return "", false
	}
	return string(name), true
}

// isAssignPrefix reports whether t is name= or name+=, before a (.
func isAssignPrefix(t string) bool {
	if !strings.HasSuffix(t, "=") {
		return false
	}
	return IsName(strings.TrimSuffix(strings.TrimSuffix(t, "="), "+"))
}

// assignWord reads name=value at command position.
func (s *scanner) assignWord(cmd *command, w *word, name string) {
	var value []int
	for _, h := range w.direct {
		if h.pos < w.eq {
			u := s.uses[h.id]
			ctx := "an array subscript " + name + "[…]="
			setCheck(u, CheckNumber, ctx)
			s.facts.subs = append(s.facts.subs, subHole{id: h.id, array: name, plain: u.Quote, ctx: ctx})
			continue
		}
		value = append(value, h.id)
	}
	value = append(value, w.nested...)
	s.facts.taint(name, value...)
	s.codeVar(name, value)
	cmd.assigned = append(cmd.assigned, value...)
}

// codeVars are environment variables whose value programs run as code or
// use to find code to run.
var codeVars = map[string]bool{
	"BASH_ENV": true, "ENV": true, "PROMPT_COMMAND": true, "PS4": true, "SHELLOPTS": true, "BASHOPTS": true,
	"PATH": true, "LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true,
	"GIT_SSH_COMMAND": true, "GIT_SSH": true, "GIT_EXEC_PATH": true, "GIT_PAGER": true, "GIT_EDITOR": true,
	"GIT_EXTERNAL_DIFF": true, "GIT_ASKPASS": true, "GIT_CONFIG_PARAMETERS": true, "SSH_ASKPASS": true,
	"PAGER": true, "EDITOR": true, "VISUAL": true, "BROWSER": true,
	"PYTHONPATH": true, "PYTHONSTARTUP": true, "PERL5OPT": true, "PERL5LIB": true, "RUBYOPT": true, "RUBYLIB": true,
	"NODE_OPTIONS": true, "NODE_PATH": true, "JAVA_TOOL_OPTIONS": true, "_JAVA_OPTIONS": true,
}

// codeVar marks holes assigned to a variable programs run as code.
func (s *scanner) codeVar(name string, ids []int) {
	if !codeVars[name] {
		return
	}
	for _, id := range ids {
		s.risk(id, "in the value of "+name+", which programs run as code or use to find code", "do not let a value set "+name+"; pass it in a variable of your own")
	}
}

// makeVars marks holes that reach make as variables: make expands them,
// and $(shell …) in a value runs.
func (s *scanner) makeVars(ids []int) {
	for _, id := range ids {
		s.risk(id, "in a variable make reads, which make expands ($(shell …) in it runs)", "do not pass the value to make; write it to a file the recipe reads")
	}
}

// compoundWord reads an element of name=( … ): [subscript]=value or value.
func (s *scanner) compoundWord(f *frame, w *word) {
	t := w.str()
	end := -1
	if strings.HasPrefix(t, "[") {
		if i := strings.Index(t, "]="); i > 0 {
			end = i
		}
	}
	for _, h := range w.direct {
		if h.pos < end {
			u := s.uses[h.id]
			ctx := "an array subscript in " + f.array + "=( … )"
			setCheck(u, CheckNumber, ctx)
			s.facts.subs = append(s.facts.subs, subHole{id: h.id, array: f.array, plain: u.Quote, ctx: ctx})
		}
	}
	if end >= 0 {
		// The element's nested holes and value flow into the array too.
		for _, id := range w.nested {
			setCheck(s.uses[id], CheckNumber, "an array subscript in "+f.array+"=( … )")
		}
	}
}

// testWord reads a word of [[ … ]].
func (s *scanner) testWord(f *frame, w *word) {
	cmd := f.cmd
	t := w.str()
	bare := w.lit()
	switch {
	case bare && t == "]]":
		cmd.test, cmd.prev, cmd.testOp = false, nil, ""
		return
	case bare && arithTestOps[t]:
		if cmd.prev != nil {
			s.arithWord(cmd.prev, "[[ … "+t+" … ]]")
		}
		cmd.testOp, cmd.prev = t, nil
		return
	case bare && t == "-v":
		cmd.testName, cmd.prev = true, nil
		return
	}
	if cmd.testOp != "" {
		s.arithWord(w, "[[ … "+cmd.testOp+" … ]]")
		cmd.testOp = ""
	}
	if cmd.testName {
		s.nameWord(w, "[[ -v … ]]")
		cmd.testName = false
	}
	cmd.prev = w
}

// arithWord marks a word that bash evaluates as arithmetic.
func (s *scanner) arithWord(w *word, ctx string) {
	for _, h := range w.direct {
		setCheck(s.uses[h.id], CheckNumber, ctx)
	}
	s.numbers(w.nested, ctx)
	for _, name := range w.exps {
		s.facts.use(s.facts.arith, name, ctx)
	}
	for _, name := range identifiers(w.text) {
		s.facts.use(s.facts.arith, name, ctx)
	}
}

// identifiers lists the names in an arithmetic expression's text.
func identifiers(t []byte) []string {
	var names []string
	for i := 0; i < len(t); {
		if !isNameStart(int32(t[i])) {
			if isNameChar(int32(t[i])) { // a number: skip 0x1f, 2#101
				for i < len(t) && (isNameChar(int32(t[i])) || t[i] == '#') {
					i++
				}
				continue
			}
			i++
			continue
		}
		j := i
		for j < len(t) && isNameChar(int32(t[j])) {
			j++
		}
		names = append(names, string(t[i:j]))
		i = j
	}
	return names
}

// nameWord marks a word that bash reads as a variable name: the value
// must be a name, or a number in a subscript.
func (s *scanner) nameWord(w *word, ctx string) {
	t := w.str()
	lb := strings.IndexByte(t, '[')
	array := ""
	if lb > 0 && IsName(t[:lb]) { // quoted or not: holes and expansions are 0 bytes
		array = t[:lb]
	}
	for _, h := range w.direct {
		if lb >= 0 && h.pos > lb {
			sctx := "an array subscript in " + ctx
			setCheck(s.uses[h.id], CheckNumber, sctx)
			if array != "" {
				s.facts.subs = append(s.facts.subs, subHole{id: h.id, array: array, arg: true, ctx: sctx})
			}
			continue
		}
		setCheck(s.uses[h.id], CheckName, ctx)
	}
	for _, id := range w.nested {
		setCheck(s.uses[id], CheckName, ctx)
	}
	if lb < 0 || !IsName(t[:lb]) {
		for _, name := range w.exps {
			s.facts.use(s.facts.names, name, ctx)
		}
	}
}

// program reads the arguments of a command that treats some of them
// specially.
type program interface {
	// word reads an argument; it reports whether the word had a role (an
	// option's argument, a script) so it cannot name another program.
	word(s *scanner, f *frame, w *word) bool
	// end is called when the command ends.
	end(s *scanner, f *frame)
	// readsCode reports whether the program runs what it reads on its
	// standard input.
	readsCode() bool
}

// readsCode names the program of cmd when it runs its input as code.
func readsCode(cmd *command) string {
	if cmd.prog == nil {
		return ""
	}
	if cmd.prog.readsCode() {
		return cmd.name
	}
	if cmd.xargsI {
		if r, ok := cmd.prog.(interface{ runsScript() bool }); ok && r.runsScript() {
			return "xargs -I"
		}
	}
	return ""
}

var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true, "yash": true, "busybox": true}

// progFor returns the handler of the program name; at command position
// builtins and wrappers count too, elsewhere only shells and interpreters
// (find -exec sh -c, docker exec c python -c).
func progFor(name string, atCommand bool) program {
	if shells[name] {
		return &shellProg{name: name}
	}
	if in, ok := interpreters[name]; ok && (atCommand || !in.commandOnly) {
		p := in
		p.name = name
		return &p
	}
	if !atCommand {
		return nil
	}
	switch name {
	case "declare", "typeset", "local", "export", "readonly":
		return &declareProg{name: name}
	case "unset", "read", "mapfile", "readarray", "getopts", "wait", "printf", "test", "[":
		return &namesProg{name: name}
	case "let":
		return letProg{}
	case "eval":
		return &joinProg{name: "eval"}
	case "watch":
		return &joinProg{name: "watch", watch: true}
	case "trap":
		return &trapProg{}
	case "su", "runuser", "flock", "script":
		return &dashCProg{name: name}
	case "source", ".":
		return &sourceProg{name: name}
	case "ssh":
		return sshProg{}
	case "make", "gmake":
		return &makeProg{}
	}
	if wr, ok := wrappers[name]; ok {
		p := wr
		p.name = name
		return &p
	}
	return nil
}

// shellProg reads sh/bash/… arguments: -c's script is a script, and with
// neither -c nor a script file the shell runs its input.
type shellProg struct {
	name                           string
	c, stdin, needArg, done, noOpt bool
	operands                       int
}

func (p *shellProg) word(s *scanner, f *frame, w *word) bool {
	if p.done || p.operands > 0 {
		return false
	}
	if p.needArg {
		p.needArg = false
		return true
	}
	t := w.str()
	pre := w.prefix()
	if !p.noOpt && len(pre) > 1 && (pre[0] == '-' || pre[0] == '+') && w.lit() {
		switch {
		case t == "--" || t == "-":
			p.noOpt = true
			p.stdin = p.stdin || t == "-"
		case strings.HasPrefix(t, "--"):
			p.needArg = t == "--rcfile" || t == "--init-file"
		default:
			for _, ch := range t[1:] {
				switch ch {
				case 'c':
					p.c = p.c || t[0] == '-'
				case 's':
					p.stdin = true
				case 'o', 'O':
					p.needArg = true
				}
			}
		}
		return true
	}
	if p.c {
		p.done = true
		s.script(w.stream, w.direct, w.nested, w.exps, p.name+" -c "+shape(w))
		return true
	}
	p.operands++
	for _, h := range w.direct {
		s.risk(h.id, "in the name of the script "+p.name+" runs", fixCommand)
	}
	for _, id := range w.nested {
		s.risk(id, "inside an expansion that names the script "+p.name+" runs", fixEnv)
	}
	return true
}

func (p *shellProg) end(*scanner, *frame) {}
func (p *shellProg) readsCode() bool      { return !p.c && (p.operands == 0 || p.stdin) }
func (p *shellProg) runsScript() bool     { return p.c }

// shape is how a script word is quoted, for messages: '…', "…" or ….
func shape(w *word) string {
	switch w.firstQuote {
	case '\'':
		return "'…'"
	case '"':
		return "\"…\""
	}
	return "…"
}

// joinProg reads eval and watch: the arguments, joined by spaces, are a
// script.
type joinProg struct {
	name   string
	watch  bool // watch: options first; -x runs the command without a shell
	exec   bool
	opt    bool
	argNxt bool
	stream []int32
	holes  []wordHole
	nested []int
	exps   []string
	first  *word
}

func (p *joinProg) word(s *scanner, f *frame, w *word) bool {
	t := w.str()
	if !p.opt && w.lit() && strings.HasPrefix(t, "-") {
		switch {
		case t == "--":
			p.opt = true
		case p.watch && (t == "-x" || t == "--exec"):
			p.exec = true
		case p.watch && (t == "-n" || t == "--interval" || t == "-q" || t == "--equexit"):
			p.argNxt = true
		}
		if !p.watch {
			p.opt = true // eval takes no options but --; a -x word is script text
			return p.collect(w)
		}
		return true
	}
	if p.argNxt {
		p.argNxt = false
		return true
	}
	p.opt = true
	if p.exec {
		return false
	}
	return p.collect(w)
}

func (p *joinProg) collect(w *word) bool {
	if p.first == nil {
		p.first = w
	} else {
		p.stream = append(p.stream, ' ')
	}
	off := len(p.stream)
	for _, h := range w.direct {
		h.pos += off
		p.holes = append(p.holes, h)
	}
	p.stream = append(p.stream, w.stream...)
	p.nested = append(p.nested, w.nested...)
	p.exps = append(p.exps, w.exps...)
	return true
}

func (p *joinProg) end(s *scanner, f *frame) {
	if p.first == nil {
		return
	}
	ctx := p.name + " …"
	if p.first != nil && p.first.firstQuote != 0 && len(p.holes) > 0 {
		ctx = p.name + " " + shape(p.first)
	}
	s.script(p.stream, p.holes, p.nested, p.exps, ctx)
	p.first = nil
}

func (p *joinProg) readsCode() bool { return false }

// trapProg reads trap: its first operand is a script run later.
type trapProg struct{ done bool }

func (p *trapProg) word(s *scanner, f *frame, w *word) bool {
	if p.done {
		return true
	}
	t := w.str()
	if w.lit() && (t == "--" || t == "-l" || t == "-p" || t == "-P") {
		return true
	}
	p.done = true
	if w.lit() && t == "-" {
		return true
	}
	s.script(w.stream, w.direct, w.nested, w.exps, "trap "+shape(w))
	return true
}

func (p *trapProg) end(*scanner, *frame) {}
func (p *trapProg) readsCode() bool      { return false }

// dashCProg reads su, runuser, flock and script: the argument of -c or
// --command is run by a shell.
type dashCProg struct {
	name string
	next bool
	c    bool
}

func (p *dashCProg) word(s *scanner, f *frame, w *word) bool {
	t := w.str()
	if p.next {
		p.next, p.c = false, true
		s.script(w.stream, w.direct, w.nested, w.exps, p.name+" -c "+shape(w))
		return true
	}
	if w.lit() && (t == "-c" || t == "--command" || t == "--session-command") {
		p.next = true
		return true
	}
	if pre := w.prefix(); strings.HasPrefix(pre, "--command=") || strings.HasPrefix(pre, "-c") && len(pre) > 2 && !strings.HasPrefix(pre, "--") {
		cut := len("--command=")
		if !strings.HasPrefix(pre, "--") {
			cut = 2
		}
		var holes []wordHole
		for _, h := range w.direct {
			h.pos -= cut
			holes = append(holes, h)
		}
		p.c = true
		s.script(w.stream[cut:], holes, w.nested, w.exps, p.name+" -c "+shape(w))
		return true
	}
	return false
}

func (p *dashCProg) end(*scanner, *frame) {}
func (p *dashCProg) readsCode() bool      { return false }
func (p *dashCProg) runsScript() bool     { return p.c }

// sourceProg reads source and .: the operand names a script to run.
type sourceProg struct {
	name string
	done bool
	in   bool
}

func (p *sourceProg) word(s *scanner, f *frame, w *word) bool {
	if p.done {
		return false
	}
	p.done = true
	t := w.str()
	if w.lit() && (t == "/dev/stdin" || t == "-" || t == "/proc/self/fd/0") {
		p.in = true
	}
	for _, h := range w.direct {
		s.risk(h.id, "in the name of the script "+p.name+" runs", fixCommand)
	}
	for _, id := range w.nested {
		s.risk(id, "inside an expansion that "+p.name+" runs as a script", fixScript)
	}
	for _, id := range w.procs {
		s.risk(id, "inside a process substitution that "+p.name+" runs as a script", fixScript)
	}
	return true
}

func (p *sourceProg) end(*scanner, *frame) {}
func (p *sourceProg) readsCode() bool      { return p.in }

// sshProg: ssh joins its arguments into a command line for the remote
// shell, which no quoting here protects and no environment reaches.
type sshProg struct{}

func (sshProg) word(s *scanner, f *frame, w *word) bool {
	for _, h := range w.direct {
		s.risk(h.id, riskSSH, "pass the value on ssh's standard input, or do not build remote commands from values")
	}
	for _, id := range w.nested {
		s.risk(id, riskSSH, "pass the value on ssh's standard input, or do not build remote commands from values")
	}
	return true
}
func (sshProg) end(*scanner, *frame) {}
func (sshProg) readsCode() bool      { return false }

// dynamicProg is a command named by an expansion ($SHELL -c …): if it is
// a shell, its -c script would hold the value as code.
type dynamicProg struct {
	name string
	c    bool
	done bool
}

func (p *dynamicProg) word(s *scanner, f *frame, w *word) bool {
	if p.done {
		return false
	}
	t := w.str()
	if w.lit() && strings.HasPrefix(t, "-") && !strings.HasPrefix(t, "--") {
		p.c = p.c || strings.ContainsRune(t, 'c')
		return false
	}
	if p.c {
		p.done = true
		for _, h := range w.direct {
			s.risk(h.id, "in the -c argument of "+p.name+", which may be a shell that runs it as a script", fixEnv)
		}
	}
	return false
}
func (p *dynamicProg) end(*scanner, *frame) {}
func (p *dynamicProg) readsCode() bool      { return false }

// declareProg reads declare, typeset, local, export and readonly:
// name[=value] operands, with -i (integer), -n (name reference), -a and -A.
type declareProg struct {
	name  string
	flags string
	ops   bool
}

func isDeclare(p program) bool {
	_, ok := p.(*declareProg)
	return ok
}

func (p *declareProg) word(s *scanner, f *frame, w *word) bool {
	t := w.str()
	if !p.ops && w.lit() && len(t) > 1 && (t[0] == '-' || t[0] == '+') {
		if t == "--" {
			p.ops = true
		} else if t[0] == '-' {
			p.flags += t[1:]
		}
		return true
	}
	p.ops = true
	if strings.ContainsAny(p.flags, "fF") {
		return true // function names
	}
	ctx := p.name
	eq := strings.IndexByte(t, '=')
	nameEnd := len(t)
	if eq >= 0 {
		nameEnd = eq
	}
	lb := strings.IndexByte(t[:nameEnd], '[')
	head := t[:nameEnd]
	if lb >= 0 {
		head = t[:lb]
	}
	name := ""
	if IsName(head) { // holes and expansions are 0 bytes, never a name
		name = head
	}
	if name != "" {
		if strings.Contains(p.flags, "i") {
			s.facts.ints[name] = true
		}
		if strings.Contains(p.flags, "A") {
			s.facts.assocs[name] = true
		}
	}
	value := func(id int) {
		switch {
		case strings.Contains(p.flags, "i"):
			setCheck(s.uses[id], CheckNumber, p.name+" -i")
		case strings.Contains(p.flags, "n"):
			setCheck(s.uses[id], CheckName, p.name+" -n")
		case strings.ContainsAny(p.flags, "aA") && eq >= 0 && eq+1 < len(t) && t[eq+1] == '(':
			s.risk(id, "in the value of "+p.name+" -"+p.flags+" name=\"(…)\", which bash reads again as an array assignment", "write the array unquoted: name=( \"…\" )")
		default:
			s.facts.taint(name, id)
			s.codeVar(name, []int{id})
		}
	}
	for _, h := range w.direct {
		switch {
		case eq >= 0 && h.pos > eq:
			value(h.id)
		case lb >= 0 && h.pos > lb:
			sctx := "an array subscript in " + ctx
			setCheck(s.uses[h.id], CheckNumber, sctx)
			if name != "" {
				s.facts.subs = append(s.facts.subs, subHole{id: h.id, array: name, plain: s.uses[h.id].Quote, ctx: sctx})
			}
		default:
			setCheck(s.uses[h.id], CheckName, ctx)
		}
	}
	for _, id := range w.nested {
		if eq >= 0 {
			value(id)
		} else {
			setCheck(s.uses[id], CheckName, ctx)
		}
	}
	return true
}

func (p *declareProg) end(*scanner, *frame) {}
func (p *declareProg) readsCode() bool      { return false }

// namesProg reads the builtins whose operands (or one option's argument)
// are variable names: unset, read, mapfile, readarray, getopts, wait -p,
// printf -v, test -v and [ -v.
type namesProg struct {
	name     string
	ctx      string // of the name that comes next
	next     int    // 1: the next word is a name, 2: an option's plain argument
	operands int
	opsDone  bool
	funcs    bool
}

// nameArgOpts are the options, per builtin, whose argument is a name;
// plainArgOpts take another argument.
var (
	nameArgOpts  = map[string]string{"read": "a", "wait": "p", "printf": "v"}
	plainArgOpts = map[string]string{"read": "dinNptu", "mapfile": "dnOsuCc", "readarray": "dnOsuCc"}
)

func (p *namesProg) word(s *scanner, f *frame, w *word) bool {
	t := w.str()
	switch p.next {
	case 1:
		p.next = 0
		s.nameWord(w, p.ctx)
		return true
	case 2:
		p.next = 0
		return true
	}
	if p.name == "test" || p.name == "[" {
		if w.lit() && t == "-v" {
			p.next, p.ctx = 1, p.name+" -v"
		}
		return true
	}
	if !p.opsDone && w.lit() && len(t) > 1 && t[0] == '-' {
		if t == "--" {
			p.opsDone = true
			return true
		}
		if p.name == "unset" && strings.ContainsRune(t, 'f') {
			p.funcs = true
		}
		last := rune(t[len(t)-1])
		switch {
		case strings.ContainsRune(nameArgOpts[p.name], last):
			p.next, p.ctx = 1, p.name+" -"+string(last)
		case strings.ContainsRune(plainArgOpts[p.name], last):
			p.next = 2
		}
		return true
	}
	p.opsDone = true
	p.operands++
	switch p.name {
	case "unset":
		if !p.funcs {
			s.nameWord(w, "unset")
		}
	case "read", "mapfile", "readarray":
		s.nameWord(w, p.name)
	case "getopts":
		if p.operands == 2 {
			s.nameWord(w, "getopts")
		}
	}
	return true
}

func (p *namesProg) end(*scanner, *frame) {}
func (p *namesProg) readsCode() bool      { return false }

// letProg reads let: every operand is an arithmetic expression.
type letProg struct{}

func (letProg) word(s *scanner, f *frame, w *word) bool {
	s.arithWord(w, "let")
	return true
}
func (letProg) end(*scanner, *frame) {}
func (letProg) readsCode() bool      { return false }

// interpProg reads an interpreter whose program may be given in an
// argument (python -c, perl -e, node -e, php -r, awk 'prog', sed 'script').
type interpProg struct {
	name string
	// progOpts are the options whose argument is a program; cluster: the
	// option may end a cluster (perl -ne); long ones are spelt out.
	progOpts  string
	longProg  []string
	argOpts   string
	fileOpts  string // the program comes from a file (awk -f)
	firstProg bool   // without one of those, the first operand is the program
	// commandOnly: recognised only as the command word (awk and sed are
	// common words).
	commandOnly bool

	progNext, argNext, hasProg, fileProg, noOpt, stdin bool
	operands                                           int
}

var interpreters = map[string]interpProg{
	"python":  {progOpts: "c", argOpts: "mWXQ"},
	"python2": {progOpts: "c", argOpts: "mWXQ"},
	"python3": {progOpts: "c", argOpts: "mWXQ"},
	"pypy":    {progOpts: "c", argOpts: "mWXQ"},
	"pypy3":   {progOpts: "c", argOpts: "mWXQ"},
	"perl":    {progOpts: "eE", argOpts: "IMmx"},
	"ruby":    {progOpts: "e", argOpts: "IrCEFx"},
	"node":    {progOpts: "ep", longProg: []string{"--eval", "--print"}, argOpts: "r"},
	"nodejs":  {progOpts: "ep", longProg: []string{"--eval", "--print"}, argOpts: "r"},
	"bun":     {progOpts: "ep", longProg: []string{"--eval", "--print"}, argOpts: "r"},
	"php":     {progOpts: "rBRE", argOpts: "cdz", fileOpts: "fF"},
	"awk":     {progOpts: "e", longProg: []string{"--source"}, argOpts: "Fv", fileOpts: "f", firstProg: true, commandOnly: true},
	"gawk":    {progOpts: "e", longProg: []string{"--source"}, argOpts: "Fv", fileOpts: "f", firstProg: true, commandOnly: true},
	"mawk":    {argOpts: "Fv", fileOpts: "f", firstProg: true, commandOnly: true},
	"nawk":    {argOpts: "Fv", fileOpts: "f", firstProg: true, commandOnly: true},
	"sed":     {progOpts: "e", longProg: []string{"--expression"}, argOpts: "l", fileOpts: "f", firstProg: true, commandOnly: true},
}

func (p *interpProg) program(s *scanner, w *word) {
	p.hasProg = true
	for _, h := range w.direct {
		s.risk(h.id, "in a program that "+p.name+" runs", fixProgram)
	}
	for _, id := range w.nested {
		s.risk(id, "inside an expansion in a program that "+p.name+" runs", fixProgram)
	}
}

func (p *interpProg) word(s *scanner, f *frame, w *word) bool {
	switch {
	case p.progNext:
		p.progNext = false
		p.program(s, w)
		return true
	case p.argNext:
		p.argNext = false
		return true
	}
	t := w.str()
	pre := w.prefix()
	if !p.noOpt && len(pre) > 1 && pre[0] == '-' {
		if t == "--" {
			p.noOpt = true
			return true
		}
		if strings.HasPrefix(pre, "--") {
			for _, l := range p.longProg {
				switch {
				case t == l:
					p.progNext = true
				case strings.HasPrefix(pre, l+"="):
					p.program(s, w)
				}
			}
			if strings.HasPrefix(pre, "--file") {
				p.fileProg = true
			}
			return true
		}
		for i := 1; i < len(pre); i++ {
			ch := rune(pre[i])
			attached := i+1 < len(t)
			switch {
			case strings.ContainsRune(p.progOpts, ch):
				if attached {
					p.program(s, w)
				} else {
					p.progNext = true
				}
				return true
			case strings.ContainsRune(p.fileOpts, ch):
				p.fileProg = true
				p.argNext = !attached
				return true
			case strings.ContainsRune(p.argOpts, ch):
				p.argNext = !attached
				return true
			}
		}
		return true
	}
	if p.firstProg && !p.hasProg && !p.fileProg {
		p.program(s, w)
		return true
	}
	p.operands++
	if w.lit() && t == "-" {
		p.stdin = true
		return true
	}
	if p.operands == 1 && !p.hasProg && !p.fileProg && !p.firstProg {
		for _, h := range w.direct {
			s.risk(h.id, "in the name of the program "+p.name+" runs", fixCommand)
		}
		for _, id := range w.procs {
			s.risk(id, "inside a process substitution that "+p.name+" runs as a program", fixScript)
		}
	}
	return false
}

func (p *interpProg) end(*scanner, *frame) {}
func (p *interpProg) readsCode() bool {
	return !p.firstProg && !p.hasProg && !p.fileProg && (p.operands == 0 || p.stdin)
}
func (p *interpProg) runsScript() bool { return p.hasProg }

// wrapperProg reads a command that runs another one (env, sudo, nice,
// timeout, xargs, …): after its options (and fixed operands such as
// timeout's duration) comes the command it runs.
type wrapperProg struct {
	name     string
	argOpts  string
	operands int
	argNext  bool
	noOpt    bool
	done     bool
}

var wrappers = map[string]wrapperProg{
	"env":      {argOpts: "uCS"},
	"sudo":     {argOpts: "ughpCDrtUTR"},
	"doas":     {argOpts: "uC"},
	"nice":     {argOpts: "n"},
	"nohup":    {},
	"setsid":   {},
	"stdbuf":   {argOpts: "ioe"},
	"timeout":  {argOpts: "sk", operands: 1},
	"chroot":   {operands: 1},
	"ionice":   {argOpts: "cnp"},
	"taskset":  {operands: 1},
	"xargs":    {argOpts: "adEILnPs"},
	"exec":     {argOpts: "a"},
	"command":  {},
	"builtin":  {},
	"unbuffer": {},
	"time":     {argOpts: "fo"},
}

func (p *wrapperProg) word(s *scanner, f *frame, w *word) bool {
	if p.done {
		return false
	}
	if p.argNext {
		// Not taken: a misread option argument that is a shell still
		// starts a shell (sudo -uroot bash -c …).
		p.argNext = false
		return false
	}
	t := w.str()
	pre := w.prefix()
	if p.name == "command" && w.lit() && (t == "-v" || t == "-V") {
		p.done = true // a lookup: command -v name runs nothing
		return true
	}
	if !p.noOpt && len(pre) > 1 && pre[0] == '-' {
		if t == "--" {
			p.noOpt = true
			return true
		}
		if p.name == "xargs" && (strings.HasPrefix(pre, "-I") || strings.HasPrefix(pre, "-i") || strings.HasPrefix(pre, "--replace") || strings.HasPrefix(pre, "-J")) {
			f.cmd.xargsI = true
		}
		if !strings.HasPrefix(pre, "--") {
			for i := 1; i < len(pre); i++ {
				if strings.ContainsRune(p.argOpts, rune(pre[i])) {
					p.argNext = i+1 == len(t)
					break
				}
			}
		}
		return true
	}
	if p.name == "env" {
		if name, ok := assignment(w); ok {
			s.assignWord(f.cmd, w, name)
			return true
		}
	}
	if p.operands > 0 {
		p.operands--
		return true
	}
	p.done = true
	cmd := f.cmd
	cmd.named, cmd.dynamic, cmd.prog = false, false, nil
	s.commandWord(f, w)
	if cmd.name == "" {
		cmd.name = p.name
	}
	return true
}

func (p *wrapperProg) end(*scanner, *frame) {}
func (p *wrapperProg) readsCode() bool      { return false }

// makeProg reads make: NAME=value operands are variables make expands
// (recursively, so $(shell …) runs), and -f names the makefile to run.
type makeProg struct{ fileNext bool }

func (p *makeProg) word(s *scanner, f *frame, w *word) bool {
	t := w.str()
	if p.fileNext {
		p.fileNext = false
		for _, h := range w.direct {
			s.risk(h.id, "in the name of the makefile make runs", fixCommand)
		}
		return true
	}
	if w.lit() && (t == "-f" || t == "--file" || t == "--makefile") {
		p.fileNext = true
		return true
	}
	// make splits NAME=value itself, so quotes do not matter: only that
	// the = comes before the value.
	if eq := strings.IndexByte(t, '='); eq > 0 && IsName(strings.TrimRight(t[:eq], "+:?!")) {
		var ids []int
		for _, h := range w.direct {
			if h.pos > eq {
				ids = append(ids, h.id)
			}
		}
		s.makeVars(append(ids, w.nested...))
	}
	return true
}

func (p *makeProg) end(*scanner, *frame) {}
func (p *makeProg) readsCode() bool      { return false }
