package shell

import (
	"maps"
	"path"
	"slices"
	"unicode/utf8"
)

// The scanner follows this subset of bash (the rest is read as words):
//
//	script     = { command sep } ;  sep = ";" | "&" | "&&" | "||" | "|" | "|&" | newline
//	command    = { assignment } [ word { word | redirection } ]
//	           | "((" arith "))" | "[[" test-words "]]"
//	           | keyword (if then else elif fi do done while until ! { } time case esac for select in function)
//	           | "(" script ")"                           subshell
//	assignment = name [ "[" arith "]" ] ["+"] "=" ( word | "(" { [ "[" arith "]=" ] word } ")" )
//	word       = { char | '…' | "…" | $'…' | \c | expansion }
//	expansion  = "$" name | "${" param "}" | "$(" script ")" | "$((" arith "))" | "$[" arith "]"
//	           | "`" script "`" | "<(" script ")" | ">(" script ")"
//	param      = ["!"|"#"] name [ "[" arith "]" ] [ ":" arith [ ":" arith ] | op word | "@" letter ]
//	redirection= [digits] ( "<" | ">" | ">>" | "<&" | ">&" | "&>" | "<>" | ">|" ) word
//	           | "<<<" word | ( "<<" | "<<-" ) delimiter   (the body follows the next newline)
//	comment    = "#" at the start of a word, to the end of the line
//
// On top of the grammar it knows the commands that read a value in a way
// quoting cannot neutralise (commands.go): arithmetic (let, declare -i,
// [[ -eq ]], subscripts, ${v:offset}), variable names (printf -v, read,
// unset, declare, [[ -v ]], ${!v}), scripts handed to a second shell
// (sh -c, eval, trap, su -c, watch), and programs of other interpreters
// (python -c, awk, sed, …). It also follows values through simple
// variables (n={{x}}; $(( n ))) within the command.

const (
	evOpaque int32 = 256 // the result of an expansion the scan cannot see into
	evEOF    int32 = 257 // past the end of the input

	// maxDepth bounds scripts nested in scripts (bash -c "eval '…'");
	// a hole deeper than that is a Risk.
	maxDepth = 4
	// maxFrames bounds the nesting of quotes and expansions in one script.
	maxFrames = 64
)

func holeEv(id int) int32  { return -1 - int32(id) }
func isHole(e int32) bool  { return e < 0 }
func holeID(e int32) int   { return int(-1 - e) }
func isByte(e int32) bool  { return e >= 0 && e < 256 }
func isBlank(e int32) bool { return e == ' ' || e == '\t' }

// Scan reads a command template and returns how the shell reads the value
// of each hole, in order.
func Scan(pieces []Piece) []Use {
	var src []int32
	n := 0
	for _, p := range pieces {
		if p.Hole {
			src = append(src, holeEv(n))
			n++
			continue
		}
		for i := 0; i < len(p.Text); i++ {
			src = append(src, int32(p.Text[i]))
		}
	}
	uses := make([]*Use, n)
	for i := range uses {
		uses[i] = &Use{Quote: Unquoted}
	}
	f := newFacts()
	(&scanner{src: src, uses: uses, facts: f}).run()
	f.resolve(uses)
	out := make([]Use, n)
	for i, u := range uses {
		out[i] = *u
	}
	return out
}

type frameKind uint8

const (
	fScript    frameKind = iota + 1 // the command, or a script handed to another shell
	fCmdSubst                       // $( … )
	fProcSubst                      // <( … ) >( … )
	fSubshell                       // ( … )
	fBacktick                       // ` … `
	fCompound                       // name=( … )
	fParam                          // ${ … }
	fArith                          // $(( … )) (( … )) $[ … ]
	fHeredoc                        // a heredoc body
)

func (k frameKind) commands() bool { return k <= fCompound }

type paramState uint8

const (
	pStart paramState = iota
	pName
	pOp
	pSub
	pOffset
	pWord
)

type caseState uint8

const (
	caseSubject caseState = iota + 1
	caseIn
	casePattern
	caseBody
)

type frame struct {
	kind  frameKind
	quote byte // 0, '\'', '"', or 'd' for $'…'
	holes []int
	// flow are the holes whose values may reach the frame's result.
	flow []int

	// Command frames.
	cmd     *command
	w       *word
	pipe    []*command
	cases   []caseState
	comment bool
	fnParen bool
	array   string // fCompound: the array assigned

	// fParam.
	pstate paramState
	pname  []byte
	pind   bool
	pdq    bool // inside "…": single quotes in the word are plain
	// fParam subscripts and fArith.
	depth, bdepth int
	ident         []byte
	inNum         bool
	closer        byte
	ctx           string

	// fHeredoc.
	hd        *heredoc
	lineStart bool
}

type heredoc struct {
	delim  []byte
	strip  bool
	quoted bool
	// feeds names the program that runs the body as code, once known.
	feeds string
}

type redirKind uint8

const (
	redirNone redirKind = iota
	redirFile
	redirStdin
	redirHereString
)

// command is one simple command being read.
type command struct {
	named   bool   // the command word was read
	name    string // its base name, "" when it is not literal
	dynamic bool   // the command word holds an expansion
	nargs   int
	prog    program
	// holes are all holes of the command, nested ones included.
	holes []int
	// stdinHoles are the holes of what the command reads on standard
	// input: here-strings and < <( … ).
	stdinHoles []int
	heredocs   []*heredoc
	redirect   redirKind
	// assigned are the holes in the command's NAME=value prefixes: its
	// program's environment.
	assigned []int

	test     bool
	testOp   string
	testName bool
	prev     *word

	forState int // 1 name, 2 "in", 3 words
	forVar   string
	fnName   bool
	xargsI   bool // under xargs -I: the input is spliced into the command
}

// word is one word being read: the text the command will see, with holes
// and expansions as 0 bytes, and the same as a stream for a word that is
// a script.
type word struct {
	started      bool
	text         []byte
	stream       []int32
	firstSpecial int // offset of the first quoted, expanded or hole byte, -1
	eq           int // offset of the first unquoted =, -1
	firstQuote   byte
	quoted       bool
	direct       []wordHole
	nested       []int // holes inside expansions whose result the word takes
	procs        []int // holes inside <( … ) >( … )
	exps         []string
}

type wordHole struct {
	id    int
	quote Quote
	esc   bool
	pos   int
}

func newWord() *word { return &word{started: true, firstSpecial: -1, eq: -1} }

func (w *word) add(c byte, quoted bool) {
	pos := len(w.text)
	if quoted && w.firstSpecial < 0 {
		w.firstSpecial = pos
	}
	if c == '=' && !quoted && w.eq < 0 {
		w.eq = pos
	}
	w.text = append(w.text, c)
	w.stream = append(w.stream, int32(c))
}

func (w *word) opaque() {
	if w.firstSpecial < 0 {
		w.firstSpecial = len(w.text)
	}
	w.text = append(w.text, 0)
	w.stream = append(w.stream, evOpaque)
}

// lit reports whether the command sees exactly the word's text.
func (w *word) lit() bool { return w.firstSpecial < 0 && !w.quoted }

// prefix is the literal, unquoted start of the word.
func (w *word) prefix() string {
	if w.firstSpecial < 0 {
		if w.quoted {
			return ""
		}
		return string(w.text)
	}
	return string(w.text[:w.firstSpecial])
}

// str is the text the command sees, expansions as 0 bytes.
func (w *word) str() string { return string(w.text) }

type scanner struct {
	src     []int32
	i       int
	uses    []*Use
	facts   *facts
	depth   int
	frames  []*frame
	pending []*heredoc
	escNext bool
	broken  bool
}

func (s *scanner) peek(k int) int32 {
	if s.i+k < len(s.src) {
		return s.src[s.i+k]
	}
	return evEOF
}

func (s *scanner) top() *frame { return s.frames[len(s.frames)-1] }

func (s *scanner) push(f *frame) {
	if len(s.frames) >= maxFrames {
		s.broken = true
		return
	}
	if f.kind.commands() && f.cmd == nil {
		f.cmd = &command{}
	}
	s.frames = append(s.frames, f)
}

func (s *scanner) run() {
	s.push(&frame{kind: fScript})
	for s.i < len(s.src) {
		switch f := s.top(); f.kind {
		case fParam:
			s.stepParam(f)
		case fArith:
			s.stepArith(f)
		case fHeredoc:
			s.stepHeredoc(f)
		default:
			s.stepCommand(f)
		}
	}
	for len(s.frames) > 0 {
		s.pop()
	}
}

// pop closes the top frame and hands what it learnt to its parent.
func (s *scanner) pop() {
	f := s.top()
	switch {
	case f.kind.commands():
		s.endCommand(f, false)
		f.flow = f.holes
		if f.kind == fBacktick {
			for _, id := range f.holes {
				s.risk(id, riskBacktick, fixTick)
			}
		}
		if f.kind == fCompound {
			s.facts.taint(f.array, f.flow...)
			f.flow = nil
		}
	case f.kind == fParam:
		s.flushIdent(f)
	case f.kind == fArith:
		s.flushIdent(f)
		f.flow = nil
	case f.kind == fHeredoc:
		if f.hd.feeds != "" {
			for _, id := range f.holes {
				s.risk(id, "in a heredoc that "+f.hd.feeds+" runs as code", fixScript)
			}
		}
	}
	s.frames = s.frames[:len(s.frames)-1]
	if len(s.frames) == 0 {
		return
	}
	p := s.top()
	p.holes = append(p.holes, f.holes...)
	switch {
	case f.kind == fHeredoc:
		if len(s.pending) > 0 {
			s.pushHeredoc()
		}
		return
	case p.kind.commands():
		p.cmd.holes = append(p.cmd.holes, f.holes...)
		if p.w != nil {
			p.w.nested = append(p.w.nested, f.flow...)
			if f.kind == fProcSubst {
				p.w.procs = append(p.w.procs, f.holes...)
			}
			if f.kind == fParam && len(f.pname) > 0 {
				p.w.exps = append(p.w.exps, string(f.pname))
			}
		}
	case p.kind == fParam:
		if p.pstate == pWord {
			p.flow = append(p.flow, f.flow...)
		} else {
			s.numbers(f.flow, "an array subscript ${…[…]}")
		}
	case p.kind == fArith:
		s.numbers(f.flow, p.ctx)
		if f.kind == fParam && len(f.pname) > 0 {
			s.facts.use(s.facts.arith, string(f.pname), p.ctx)
		}
	}
	if f.kind == fParam && len(f.pname) > 0 {
		name := string(f.pname)
		if f.pind {
			s.facts.use(s.facts.names, name, "${!…}")
		}
	}
}

// risk marks a hole whose value can still run; the first reason stays.
func (s *scanner) risk(id int, why, fix string) {
	if u := s.uses[id]; u.Risk == "" {
		u.Risk, u.Fix = why, fix
	}
}

func (s *scanner) numbers(ids []int, ctx string) {
	for _, id := range ids {
		setCheck(s.uses[id], CheckNumber, ctx)
	}
}

// setCheck asks for check c at a hole. A number is also a valid word in
// every name context, so CheckNumber wins over CheckName.
func setCheck(u *Use, c Check, ctx string) {
	if u.Check == CheckNumber || u.Check == c {
		return
	}
	u.Check, u.Context = c, ctx
}

func quoteOf(q byte) Quote {
	switch q {
	case '"':
		return Double
	case '\'':
		return Single
	case 'd':
		return Dollar
	}
	return Unquoted
}

// newHole registers hole id at frame f with quoting q.
func (s *scanner) newHole(f *frame, id int, q Quote) *Use {
	u := s.uses[id]
	u.Quote = q
	u.Escaped, s.escNext = s.escNext, false
	f.holes = append(f.holes, id)
	if f.cmd != nil {
		f.cmd.holes = append(f.cmd.holes, id)
	}
	if s.broken {
		s.risk(id, riskDeep, fixSimpler)
	}
	return u
}

func (f *frame) word() *word {
	if f.w == nil {
		f.w = newWord()
	}
	return f.w
}

// stepCommand reads one event in a frame that holds commands or words.
func (s *scanner) stepCommand(f *frame) {
	e := s.src[s.i]
	if isHole(e) {
		s.i++
		if f.comment {
			s.newHole(f, holeID(e), Unquoted)
			return
		}
		w := f.word()
		id := holeID(e)
		q := quoteOf(f.quote)
		u := s.newHole(f, id, q)
		w.direct = append(w.direct, wordHole{id: id, quote: q, esc: u.Escaped, pos: len(w.text)})
		if w.firstSpecial < 0 {
			w.firstSpecial = len(w.text)
		}
		w.text = append(w.text, 0)
		w.stream = append(w.stream, e)
		return
	}
	if e == evOpaque {
		s.i++
		f.word().opaque()
		return
	}
	c := byte(e)
	s.escNext = false
	if f.kind == fBacktick && c == '`' && f.quote != '\'' {
		s.i++
		s.pop()
		return
	}
	switch f.quote {
	case '\'':
		s.i++
		if c == '\'' {
			f.quote = 0
			return
		}
		f.word().add(c, true)
		return
	case 'd':
		s.i++
		switch c {
		case '\'':
			f.quote = 0
		case '\\':
			s.dollarEscape(f.word())
		default:
			f.word().add(c, true)
		}
		return
	case '"':
		s.i++
		switch c {
		case '"':
			f.quote = 0
		case '\\':
			s.backslash(f, true)
		case '$':
			s.dollar(f)
		case '`':
			f.word().opaque()
			s.push(&frame{kind: fBacktick})
		default:
			f.word().add(c, true)
		}
		return
	}
	if f.comment {
		s.i++
		if c == '\n' {
			f.comment = false
			s.newline(f)
		}
		return
	}
	cmd := f.cmd
	inCase := len(f.cases) > 0 && f.cases[len(f.cases)-1] == casePattern
	switch c {
	case ' ', '\t':
		s.i++
		s.endWord(f)
	case '\n':
		s.i++
		s.newline(f)
	case '\'', '"':
		s.i++
		w := f.word()
		w.quoted = true
		if w.firstQuote == 0 {
			w.firstQuote = c
		}
		f.quote = c
	case '\\':
		s.i++
		s.backslash(f, false)
	case '$':
		s.i++
		s.dollar(f)
	case '`':
		s.i++
		f.word().opaque()
		s.push(&frame{kind: fBacktick})
	case '#':
		s.i++
		if f.w == nil {
			f.comment = true
			return
		}
		f.w.add(c, false)
	case ';':
		s.i++
		if s.peek(0) == ';' || s.peek(0) == '&' {
			s.i++
			if s.peek(0) == '&' {
				s.i++
			}
			s.endCommand(f, false)
			if n := len(f.cases); n > 0 && f.cases[n-1] == caseBody {
				f.cases[n-1] = casePattern
			}
			return
		}
		s.endCommand(f, false)
	case '&':
		s.i++
		switch s.peek(0) {
		case '&':
			s.i++
			if cmd.test {
				s.testBreak(f)
				return
			}
			s.endCommand(f, false)
		case '>':
			s.i++
			if s.peek(0) == '>' {
				s.i++
			}
			s.endWord(f)
			cmd.redirect = redirFile
		default:
			s.endCommand(f, false)
		}
	case '|':
		s.i++
		if inCase || cmd.test {
			if s.peek(0) == '|' {
				s.i++
			}
			s.testBreak(f)
			return
		}
		if s.peek(0) == '|' {
			s.i++
			s.endCommand(f, false)
			return
		}
		if s.peek(0) == '&' {
			s.i++
		}
		s.endCommand(f, true)
	case '(':
		s.i++
		s.openParen(f)
	case ')':
		s.i++
		s.closeParen(f)
	case '<', '>':
		s.i++
		s.redirection(f, c)
	default:
		s.i++
		f.word().add(c, false)
	}
}

// backslash reads the character after a \ outside single quotes.
func (s *scanner) backslash(f *frame, dq bool) {
	n := s.peek(0)
	switch {
	case isHole(n):
		s.escNext = true // Use.Escaped: the \ would escape the rendering's quote
	case n == evEOF || n == evOpaque:
		f.word().add('\\', dq)
	case n == '\n':
		s.i++ // a line continuation
	case f.kind == fBacktick && n == '`':
		s.i++
		f.word().add('`', true)
	case dq && n != '$' && n != '`' && n != '"' && n != '\\':
		f.word().add('\\', true)
	default:
		s.i++
		w := f.word()
		w.quoted = true
		w.add(byte(n), true)
	}
}

// dollarEscape decodes an escape of $'…' after its backslash.
func (s *scanner) dollarEscape(w *word) {
	n := s.peek(0)
	if !isByte(n) {
		return
	}
	s.i++
	digits := func(max int, ok func(int32) bool, base int) int {
		v := 0
		for k := 0; k < max && ok(s.peek(0)); k++ {
			v = v*base + hexVal(s.peek(0))
			s.i++
		}
		return v
	}
	switch c := byte(n); c {
	case 'n':
		w.add('\n', true)
	case 't':
		w.add('\t', true)
	case 'r':
		w.add('\r', true)
	case 'a':
		w.add(7, true)
	case 'b':
		w.add(8, true)
	case 'e', 'E':
		w.add(27, true)
	case 'f':
		w.add(12, true)
	case 'v':
		w.add(11, true)
	case 'x':
		w.add(byte(digits(2, isHex, 16)), true)
	case 'u', 'U':
		max := 4
		if c == 'U' {
			max = 8
		}
		r := digits(max, isHex, 16)
		if r > utf8.MaxRune || r < 0 {
			r = utf8.RuneError
		}
		for _, b := range utf8.AppendRune(nil, rune(r)) {
			w.add(b, true)
		}
	case '0', '1', '2', '3', '4', '5', '6', '7':
		s.i--
		w.add(byte(digits(3, isOctal, 8)), true)
	case 'c':
		if m := s.peek(0); isByte(m) {
			s.i++
			w.add(byte(m)&0x1f, true)
		}
	case '\\', '\'', '"', '?':
		w.add(c, true)
	default:
		w.add('\\', true)
		w.add(c, true)
	}
}

func isHex(e int32) bool {
	return e >= '0' && e <= '9' || e >= 'a' && e <= 'f' || e >= 'A' && e <= 'F'
}
func isOctal(e int32) bool { return e >= '0' && e <= '7' }
func hexVal(e int32) int {
	switch {
	case e >= '0' && e <= '9':
		return int(e - '0')
	case e >= 'a' && e <= 'f':
		return int(e-'a') + 10
	case e >= 'A' && e <= 'F':
		return int(e-'A') + 10
	}
	return 0
}

func isNameStart(e int32) bool {
	return e == '_' || e >= 'a' && e <= 'z' || e >= 'A' && e <= 'Z'
}
func isNameChar(e int32) bool { return isNameStart(e) || e >= '0' && e <= '9' }

// dollar reads what follows a $ in frame f.
func (s *scanner) dollar(f *frame) {
	n := s.peek(0)
	var w *word
	if f.kind.commands() {
		w = f.word()
	}
	opaque := func() {
		if w != nil {
			w.opaque()
		}
	}
	switch {
	case n == '(':
		s.i++
		opaque()
		if s.peek(0) == '(' {
			s.i++
			s.push(&frame{kind: fArith, closer: ')', ctx: "$(( … ))"})
			return
		}
		s.push(&frame{kind: fCmdSubst})
	case n == '{':
		s.i++
		opaque()
		s.push(&frame{kind: fParam, pdq: f.quote == '"' || f.kind == fHeredoc})
	case n == '[':
		s.i++
		opaque()
		s.push(&frame{kind: fArith, closer: ']', ctx: "$[ … ]"})
	case n == '\'' && f.quote == 0 && w != nil:
		s.i++
		w.quoted = true
		if w.firstQuote == 0 {
			w.firstQuote = '\''
		}
		f.quote = 'd'
	case n == '"' && f.quote == 0 && w != nil:
		s.i++
		w.quoted = true
		if w.firstQuote == 0 {
			w.firstQuote = '"'
		}
		f.quote = '"'
	case isNameStart(n):
		var name []byte
		for isNameChar(s.peek(0)) {
			name = append(name, byte(s.peek(0)))
			s.i++
		}
		opaque()
		switch {
		case w != nil:
			w.exps = append(w.exps, string(name))
		case f.kind == fArith || f.kind == fParam && (f.pstate == pSub || f.pstate == pOffset):
			ctx := f.ctx
			if f.kind == fParam {
				ctx = "an array subscript ${…[…]}"
			}
			s.facts.use(s.facts.arith, string(name), ctx)
		}
	case isByte(n) && (n >= '0' && n <= '9' || n == '@' || n == '*' || n == '#' || n == '?' || n == '-' || n == '$' || n == '!'):
		s.i++
		opaque()
	default:
		if w != nil {
			w.add('$', f.quote != 0)
		}
	}
}

func (s *scanner) newline(f *frame) {
	s.endCommand(f, false)
	if len(s.pending) > 0 {
		s.pushHeredoc()
	}
}

func (s *scanner) pushHeredoc() {
	hd := s.pending[0]
	s.pending = s.pending[1:]
	s.push(&frame{kind: fHeredoc, hd: hd, lineStart: true})
}

func (s *scanner) endWord(f *frame) {
	if f.w == nil {
		return
	}
	w := f.w
	f.w = nil
	s.finishWord(f, w)
}

// endCommand ends the simple command of f; pipe says a | follows.
func (s *scanner) endCommand(f *frame, pipe bool) {
	s.endWord(f)
	cmd := f.cmd
	if cmd.prog != nil {
		cmd.prog.end(s, f)
	}
	if name := readsCode(cmd); name != "" {
		for _, id := range cmd.stdinHoles {
			s.risk(id, "in the input of "+name+", which runs it as code", fixScript)
		}
		for _, hd := range cmd.heredocs {
			hd.feeds = name
		}
	}
	if cmd.named || len(cmd.holes) > 0 || len(cmd.heredocs) > 0 {
		f.pipe = append(f.pipe, cmd)
	}
	if !pipe {
		s.endPipeline(f)
	}
	f.cmd = &command{}
}

// endPipeline marks what flows into a program that runs its input: every
// command before the last such program, in one backward pass.
func (s *scanner) endPipeline(f *frame) {
	reader := ""
	for k := len(f.pipe) - 1; k >= 0; k-- {
		c := f.pipe[k]
		if reader != "" {
			for _, id := range c.holes {
				s.risk(id, "in a command whose output is piped into "+reader+", which runs it as code", fixScript)
			}
			for _, hd := range c.heredocs {
				if hd.feeds == "" {
					hd.feeds = reader
				}
			}
		}
		if name := readsCode(c); name != "" {
			reader = name
		}
	}
	f.pipe = nil
}

func (s *scanner) testBreak(f *frame) {
	s.endWord(f)
	f.cmd.prev = nil
}

func (s *scanner) openParen(f *frame) {
	cmd := f.cmd
	if n := len(f.cases); n > 0 && f.cases[n-1] == casePattern && f.w == nil {
		return // the optional ( before a pattern
	}
	if cmd.test {
		s.testBreak(f)
		return
	}
	if w := f.w; w != nil && w.lit() && isAssignPrefix(w.str()) && (!cmd.named || isDeclare(cmd.prog)) {
		name := w.str()[:len(w.str())-1]
		if len(name) > 0 && name[len(name)-1] == '+' {
			name = name[:len(name)-1]
		}
		w.opaque()
		s.push(&frame{kind: fCompound, array: name})
		return
	}
	s.endWord(f)
	switch {
	case cmd.forState == 1 && s.peek(0) == '(':
		s.i++
		cmd.forState = 0
		cmd.named, cmd.name = true, "for"
		s.push(&frame{kind: fArith, closer: ')', ctx: "for (( … ))"})
	case !cmd.named && s.peek(0) == '(':
		s.i++
		cmd.named, cmd.name = true, "(("
		s.push(&frame{kind: fArith, closer: ')', ctx: "(( … ))"})
	case cmd.named && cmd.nargs == 0 && !cmd.dynamic:
		f.fnParen = true // name() { … }
	default:
		if !cmd.named {
			cmd.named, cmd.name = true, "("
		}
		s.push(&frame{kind: fSubshell})
	}
}

func (s *scanner) closeParen(f *frame) {
	s.endWord(f) // may end a case: esac)
	if f.fnParen {
		f.fnParen = false
		f.cmd = &command{}
		return
	}
	if n := len(f.cases); n > 0 && f.cases[n-1] == casePattern {
		f.cases[n-1] = caseBody
		f.cmd = &command{}
		return
	}
	if f.cmd.test {
		s.testBreak(f)
		return
	}
	switch f.kind {
	case fCmdSubst, fProcSubst, fSubshell, fCompound:
		s.pop()
	default:
		s.endCommand(f, false) // a stray ): bash refuses the command
	}
}

func (s *scanner) redirection(f *frame, c byte) {
	cmd := f.cmd
	if cmd.test {
		s.testBreak(f)
		return
	}
	if s.peek(0) == '(' && f.w == nil {
		s.i++
		f.word().opaque()
		s.push(&frame{kind: fProcSubst})
		return
	}
	if w := f.w; w != nil && w.lit() && isDigits(w.str()) {
		f.w = nil // a file descriptor number
	} else {
		s.endWord(f)
	}
	if c == '<' && s.peek(0) == '<' {
		s.i++
		if s.peek(0) == '<' {
			s.i++
			cmd.redirect = redirHereString
			return
		}
		strip := false
		if s.peek(0) == '-' {
			s.i++
			strip = true
		}
		s.heredocDelimiter(f, strip)
		return
	}
	kind := redirFile
	if c == '<' {
		kind = redirStdin
	}
	switch s.peek(0) {
	case '&', '>', '|':
		s.i++
		kind = redirFile
	}
	cmd.redirect = kind
}

func isDigits(t string) bool {
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] < '0' || t[i] > '9' {
			return false
		}
	}
	return true
}

// heredocDelimiter reads the word after << and queues its body.
func (s *scanner) heredocDelimiter(f *frame, strip bool) {
	for isBlank(s.peek(0)) {
		s.i++
	}
	var d []byte
	quoted := false
	q := int32(0)
loop:
	for s.i < len(s.src) {
		e := s.src[s.i]
		switch {
		case isHole(e):
			s.i++
			s.newHole(f, holeID(e), Unquoted)
			quoted = true
			d = append(d, 0)
			continue
		case e == evOpaque:
			s.i++
			continue
		case q != 0:
			s.i++
			if e == q {
				q = 0
			} else {
				d = append(d, byte(e))
			}
			continue
		}
		switch e {
		case '\'', '"':
			quoted, q = true, e
			s.i++
		case '\\':
			quoted = true
			s.i++
			if n := s.peek(0); isByte(n) {
				s.i++
				d = append(d, byte(n))
			}
		case ' ', '\t', '\n', ';', '&', '|', '<', '>', '(', ')':
			break loop
		default:
			s.i++
			d = append(d, byte(e))
		}
	}
	if len(d) == 0 {
		return
	}
	hd := &heredoc{delim: d, strip: strip, quoted: quoted}
	f.cmd.heredocs = append(f.cmd.heredocs, hd)
	s.pending = append(s.pending, hd)
}

// stepHeredoc reads a heredoc body, a line at a time.
func (s *scanner) stepHeredoc(f *frame) {
	if f.lineStart {
		f.lineStart = false
		if s.matchDelimiter(f.hd) {
			s.pop()
			return
		}
	}
	e := s.src[s.i]
	s.i++
	switch {
	case isHole(e):
		if f.hd.quoted {
			s.newHole(f, holeID(e), Literal)
			s.risk(holeID(e), riskQuotedHeredoc, fixHeredoc)
		} else {
			s.newHole(f, holeID(e), HereDoc)
		}
		return
	case e == evOpaque:
		return
	}
	s.escNext = false
	switch c := byte(e); {
	case c == '\n':
		f.lineStart = true
	case f.hd.quoted:
	case c == '\\':
		switch n := s.peek(0); {
		case isHole(n):
			s.escNext = true
		case n == '$' || n == '`' || n == '\\':
			s.i++
		case n == '\n':
			s.i++
		}
	case c == '$':
		s.dollar(f)
	case c == '`':
		s.push(&frame{kind: fBacktick})
	}
}

func (s *scanner) matchDelimiter(hd *heredoc) bool {
	j := s.i
	if hd.strip {
		for j < len(s.src) && s.src[j] == '\t' {
			j++
		}
	}
	for _, b := range hd.delim {
		if j >= len(s.src) || s.src[j] != int32(b) {
			return false
		}
		j++
	}
	if j < len(s.src) && s.src[j] != '\n' {
		return false
	}
	s.i = min(j+1, len(s.src))
	return true
}

// stepParam reads ${ … }.
func (s *scanner) stepParam(f *frame) {
	e := s.src[s.i]
	switch f.pstate {
	case pStart:
		f.pstate = pName
		if (e == '!' || e == '#') && isNameStart(s.peek(1)) {
			s.i++
			f.pind = e == '!'
		}
		return
	case pName:
		if len(f.pname) == 0 && isByte(e) && (e >= '0' && e <= '9' || e == '@' || e == '*' || e == '#' || e == '?' || e == '-' || e == '$' || e == '!') {
			s.i++
			f.pname = append(f.pname, byte(e))
			if e < '0' || e > '9' {
				f.pstate = pOp
			}
			return
		}
		if len(f.pname) > 0 && f.pname[0] >= '0' && f.pname[0] <= '9' {
			if e >= '0' && e <= '9' {
				s.i++
				f.pname = append(f.pname, byte(e))
				return
			}
		} else if isNameChar(e) && (len(f.pname) > 0 || isNameStart(e)) {
			s.i++
			f.pname = append(f.pname, byte(e))
			return
		}
		f.pstate = pOp
		return
	case pOp:
		switch e {
		case '}':
			s.i++
			s.pop()
		case '[':
			s.i++
			f.pstate, f.depth = pSub, 0
		case ':':
			s.i++
			if n := s.peek(0); n == '-' || n == '=' || n == '?' || n == '+' {
				s.i++
				f.pstate = pWord
			} else {
				f.pstate = pOffset
			}
		case '@':
			s.i++
			if s.peek(0) == 'P' && len(f.pname) > 0 {
				s.facts.use(s.facts.code, string(f.pname), "${…@P}")
			}
			f.pstate = pWord
		default:
			if isByte(e) {
				s.i++
			}
			f.pstate = pWord
		}
		return
	case pSub, pOffset:
		s.stepSubscript(f, e)
		return
	}
	// pWord
	s.i++
	switch {
	case isHole(e):
		q := Unquoted
		if f.quote == '\'' {
			q = Single
		}
		s.newHole(f, holeID(e), q)
		f.flow = append(f.flow, holeID(e))
		return
	case e == evOpaque:
		return
	}
	c := byte(e)
	s.escNext = false
	switch {
	case f.quote == '\'':
		if c == '\'' {
			f.quote = 0
		}
	case c == '\\':
		if n := s.peek(0); isHole(n) {
			s.escNext = true
		} else if n != evEOF {
			s.i++
		}
	case c == '"':
		if f.quote == '"' {
			f.quote = 0
		} else {
			f.quote = '"'
		}
	case c == '\'' && f.quote == 0 && !f.pdq:
		f.quote = '\''
	case c == '$':
		s.dollar(f)
	case c == '`':
		s.push(&frame{kind: fBacktick})
	case c == '}' && f.quote == 0:
		s.pop()
	}
}

// stepSubscript reads ${a[ … ]} and ${v:offset:length}: arithmetic.
func (s *scanner) stepSubscript(f *frame, e int32) {
	s.i++
	ctx := "an array subscript ${…[…]}"
	if f.pstate == pOffset {
		ctx = "a substring offset ${…:…}"
	}
	switch {
	case isHole(e):
		q := Arith
		if f.quote != 0 {
			q = Double
		}
		u := s.newHole(f, holeID(e), q)
		setCheck(u, CheckNumber, ctx)
		if f.pstate == pSub {
			plain := Unquoted
			if f.quote != 0 {
				plain = Double
			}
			s.facts.subs = append(s.facts.subs, subHole{id: holeID(e), array: string(f.pname), plain: plain, ctx: ctx})
		}
		return
	case e == evOpaque:
		return
	}
	c := byte(e)
	if f.quote != 0 {
		if int32(f.quote) == e {
			f.quote = 0
		} else if c == '\\' && f.quote == '"' && isByte(s.peek(0)) {
			s.i++
		}
		return
	}
	if isNameChar(e) {
		if len(f.ident) == 0 {
			f.inNum = c >= '0' && c <= '9'
		}
		f.ident = append(f.ident, c)
		return
	}
	s.flushIdent(f)
	switch c {
	case '"', '\'':
		f.quote = c
	case '\\':
		if isByte(s.peek(0)) {
			s.i++
		}
	case '[', '(':
		f.depth++
	case ')':
		f.depth = max(f.depth-1, 0)
	case ']':
		if f.depth > 0 {
			f.depth--
		} else if f.pstate == pSub {
			f.pstate = pOp
		}
	case '}':
		if f.depth == 0 {
			s.pop()
		}
	case '$':
		s.dollar(f)
	case '`':
		s.push(&frame{kind: fBacktick})
	}
}

func (s *scanner) flushIdent(f *frame) {
	if len(f.ident) > 0 && !f.inNum {
		ctx := f.ctx
		if f.kind == fParam {
			ctx = "an array subscript ${…[…]}"
		}
		s.facts.use(s.facts.arith, string(f.ident), ctx)
	}
	f.ident = f.ident[:0]
}

// stepArith reads $(( … )), (( … )) and $[ … ]; quotes are transparent.
func (s *scanner) stepArith(f *frame) {
	e := s.src[s.i]
	s.i++
	switch {
	case isHole(e):
		s.flushIdent(f)
		u := s.newHole(f, holeID(e), Arith)
		setCheck(u, CheckNumber, f.ctx)
		return
	case e == evOpaque:
		return
	}
	c := byte(e)
	if isNameChar(e) {
		if len(f.ident) == 0 {
			f.inNum = c >= '0' && c <= '9'
		}
		f.ident = append(f.ident, c)
		return
	}
	s.flushIdent(f)
	switch c {
	case '(':
		f.depth++
	case ')':
		switch {
		case f.depth > 0:
			f.depth--
		case f.closer == ')':
			if s.peek(0) == ')' {
				s.i++
			}
			s.pop()
		}
	case '[':
		f.bdepth++
	case ']':
		switch {
		case f.bdepth > 0:
			f.bdepth--
		case f.closer == ']':
			s.pop()
		}
	case '$':
		s.dollar(f)
	case '`':
		s.push(&frame{kind: fBacktick})
	case '\\':
		if isByte(s.peek(0)) {
			s.i++
		}
	}
}

// script scans the text of a word that another shell runs (bash -c '…',
// eval …): its holes get the inner shell's reading and, as a layer, the
// quoting they had in this one.
func (s *scanner) script(stream []int32, holes []wordHole, nested []int, exps []string, ctx string) {
	if s.depth+1 >= maxDepth {
		for _, h := range holes {
			s.risk(h.id, riskDeep, fixSimpler)
		}
	} else {
		(&scanner{src: stream, uses: s.uses, facts: s.facts, depth: s.depth + 1}).run()
	}
	for _, h := range holes {
		u := s.uses[h.id]
		u.Layers = append(u.Layers, Layer{Quote: h.quote, Escaped: h.esc})
		if u.Context == "" {
			u.Context = ctx
		} else {
			u.Context += " in " + ctx
		}
	}
	for _, id := range nested {
		s.risk(id, "inside an expansion in the script of "+ctx+", whose result becomes script text", fixInner)
	}
	for _, name := range exps {
		s.facts.use(s.facts.code, name, ctx)
	}
}

// facts are what the scan learnt about shell variables, applied to the
// holes once the whole command is read (an assignment may come after a
// use, in a loop).
type facts struct {
	ints, assocs map[string]bool
	// tainted are the holes whose values flow into each variable.
	tainted map[string][]int
	// arith, names and code are the variables read as numbers, as
	// variable names and as code, with the place.
	arith, names, code map[string]string
	subs               []subHole
}

// subHole is a hole in an array subscript: arithmetic, unless the array
// is associative, where it is a string (quoted as plain). In ${m[…]} and
// assignments bash reads an associative key once; in an argument that
// bash re-reads as a name (arg: unset 'm[…]', [[ -v m[…] ]]) it expands
// it twice.
type subHole struct {
	id    int
	array string
	plain Quote
	ctx   string
	arg   bool
}

func newFacts() *facts {
	return &facts{ints: map[string]bool{}, assocs: map[string]bool{}, tainted: map[string][]int{},
		arith: map[string]string{}, names: map[string]string{}, code: map[string]string{}}
}

func (f *facts) taint(name string, ids ...int) {
	if name != "" && len(ids) > 0 {
		f.tainted[name] = append(f.tainted[name], ids...)
	}
}

func (f *facts) use(m map[string]string, name, ctx string) {
	if _, ok := m[name]; !ok && name != "" {
		m[name] = ctx
	}
}

func (f *facts) resolve(uses []*Use) {
	for _, sh := range f.subs {
		if !f.assocs[sh.array] {
			continue
		}
		u := uses[sh.id]
		if sh.arg {
			if u.Risk == "" {
				u.Risk, u.Fix = "in a subscript of associative array "+sh.array+" in an argument, which bash expands twice", fixEnv
			}
			continue
		}
		if u.Check == CheckNumber && u.Context == sh.ctx {
			u.Check, u.Context = CheckNone, ""
			if u.Quote == Arith {
				u.Quote = sh.plain
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.ints)) {
		for _, id := range f.tainted[name] {
			setCheck(uses[id], CheckNumber, "an assignment to integer variable "+name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.arith)) {
		for _, id := range f.tainted[name] {
			setCheck(uses[id], CheckNumber, f.arith[name]+" (through $"+name+")")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.names)) {
		for _, id := range f.tainted[name] {
			setCheck(uses[id], CheckName, f.names[name]+" (through $"+name+")")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.code)) {
		for _, id := range f.tainted[name] {
			if u := uses[id]; u.Risk == "" {
				u.Risk, u.Fix = "stored in $"+name+", which "+f.code[name]+" runs as code", fixScript
			}
		}
	}
}

// base is the name a command word runs: its last path element.
func base(t string) string { return path.Base(t) }
