package github

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/iterion-bot/iterion/internal/textdist"
)

// Command names.
const (
	CmdRun    = "run"
	CmdAnswer = "answer"
	CmdCancel = "cancel"
	CmdStatus = "status"
	CmdHelp   = "help"
)

var commandNames = []string{CmdRun, CmdAnswer, CmdCancel, CmdStatus, CmdHelp}

// Limits on what one comment may ask, for hostile input.
const (
	// MaxCommentSize is GitHub's own limit on a comment body, in characters.
	MaxCommentSize = 65536
	// MaxCommands is the most commands one comment may carry.
	MaxCommands = 10
)

// Command is one `/iterion …` command found in a comment.
type Command struct {
	// Name is run, answer, cancel, status or help.
	Name string
	// Line is the 1-based line of the comment the command starts on.
	Line int
	// Workflow is the workflow named by run ("" for the repository's
	// default), Vars its key=value arguments.
	Workflow string
	Vars     map[string]string
	// QuestionID and Text are the answer's question and text (which may run
	// over several lines).
	QuestionID string
	Text       string
	// RunID is the run named by cancel ("" for the PR's current run).
	RunID string
}

// Problem is a line that looks like a command but is not one; Message says
// what is wrong and, for a near miss, what was probably meant.
type Problem struct {
	Line    int
	Message string
	// Suggestion is the command probably meant ("" when none is close).
	Suggestion string
	// Help asks for the help text in the reply.
	Help bool
}

// HelpText is the reply to /iterion help and to unknown commands.
const HelpText = "iterion commands, each on its own line:\n" +
	"- `/iterion run [workflow] [key=value …]` starts a run (the repository's default workflow when none is named); on a pull request from a fork, add `approve=<sha>` naming the commit you reviewed\n" +
	"- `/iterion answer <question> <text>` answers a question; the text may run over several lines\n" +
	"- `/iterion cancel [run]` cancels the PR's current run, or the one named\n" +
	"- `/iterion status` shows the PR's runs and open questions\n" +
	"- `/iterion help` shows this text"

// ParseComment finds the commands of a comment body. A command stands on
// its own line, starting with /iterion, where a reader of the rendered
// comment sees it: lines inside fenced or indented code blocks, quotes
// ("> "), HTML comments and <pre>, <script>, <style> or <textarea> blocks
// never count (see visible). Lines that look like a
// command but are not one (a typo, an unknown verb, a missing argument)
// come back as problems, so the bot can reply instead of staying silent.
func ParseComment(body string) ([]Command, []Problem) {
	if utf8.RuneCountInString(body) > MaxCommentSize {
		return nil, []Problem{{Line: 1, Message: fmt.Sprintf("the comment is longer than %d characters; commands in it are ignored", MaxCommentSize)}}
	}
	lines := strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n")
	shown := visible(lines)
	var cmds []Command
	var problems []Problem
	for i := 0; i < len(lines); i++ {
		line, ok := shown[i]
		if !ok {
			continue // code, hidden, or a quote of someone else's words
		}
		trimmed := strings.TrimLeft(line, " ")
		word, rest := cutWord(trimmed)
		if !strings.EqualFold(word, "/iterion") {
			if strings.HasPrefix(word, "/") && textdist.Distance(strings.ToLower(word), "/iterion") <= 2 && len(word) > 3 {
				problems = append(problems, Problem{Line: i + 1, Message: fmt.Sprintf("%q is not a command", word), Suggestion: "/iterion " + strings.TrimSpace(rest)})
			}
			continue
		}
		if len(cmds) == MaxCommands {
			problems = append(problems, Problem{Line: i + 1, Message: fmt.Sprintf("more than %d commands in one comment; the rest are ignored", MaxCommands)})
			break
		}
		verb, args := cutWord(strings.TrimSpace(rest))
		verb = strings.ToLower(verb)
		cmd := Command{Name: verb, Line: i + 1}
		switch verb {
		case CmdRun:
			wf, vars, err := parseRunArgs(args)
			if err != nil {
				problems = append(problems, Problem{Line: i + 1, Message: err.Error()})
				continue
			}
			cmd.Workflow, cmd.Vars = wf, vars
		case CmdAnswer:
			id, text := cutWord(strings.TrimSpace(args))
			// The text runs on over the following lines, up to the next
			// command or the end of the comment.
			var more []string
			for i+1 < len(lines) && !isCommandLine(lines[i+1]) {
				i++
				more = append(more, lines[i])
			}
			full := strings.TrimSpace(strings.Join(append([]string{text}, more...), "\n"))
			if id == "" || full == "" {
				problems = append(problems, Problem{Line: cmd.Line, Message: "answer needs a question and a text: /iterion answer Q1 your answer"})
				continue
			}
			cmd.QuestionID, cmd.Text = id, full
		case CmdCancel:
			run, extra := cutWord(strings.TrimSpace(args))
			if strings.TrimSpace(extra) != "" {
				problems = append(problems, Problem{Line: i + 1, Message: "cancel takes at most one run id: /iterion cancel [run]"})
				continue
			}
			cmd.RunID = run
		case CmdStatus, CmdHelp:
			if strings.TrimSpace(args) != "" {
				problems = append(problems, Problem{Line: i + 1, Message: fmt.Sprintf("%s takes no arguments", verb)})
				continue
			}
		case "":
			cmd.Name = CmdHelp
		default:
			p := Problem{Line: i + 1, Message: fmt.Sprintf("unknown command %q", verb), Help: true}
			if near := nearestCommand(verb); near != "" {
				p.Suggestion = "/iterion " + near + strings.TrimRight(" "+strings.TrimSpace(args), " ")
				p.Help = false
			}
			problems = append(problems, p)
			continue
		}
		cmds = append(cmds, cmd)
	}
	return cmds, problems
}

// isCommandLine reports whether a line starts a command (it ends a
// multi-line answer).
func isCommandLine(line string) bool {
	word, _ := cutWord(strings.TrimLeft(line, " "))
	return strings.EqualFold(word, "/iterion")
}

// fences follows the fenced code blocks of a comment, line by line.
// Kinds of comment lines, as a reader of the rendered comment meets them.
const (
	lineProse  = iota // text: its visible part may start a command
	lineQuote         // a quote ("> ") of someone else's words
	lineCode          // in a fenced or indented code block, or a fence
	lineHidden        // in an HTML comment or a raw HTML block: not shown
)

// commentLine is a line of a comment with its kind and, for prose and
// quotes, the text shown (HTML comments removed).
type commentLine struct {
	kind int
	text string
}

// scanLines classifies the lines of a comment: code (fenced, with
// CommonMark's rule that a closing fence is of the same character and at
// least as long as the opening one, and indented), quotes, HTML comments
// (which GitHub does not render, wherever they start), <pre>, <script>,
// <style> and <textarea> blocks, and prose. It reads each line once, so
// its cost is linear in the comment.
func scanLines(lines []string) []commentLine {
	out := make([]commentLine, len(lines))
	var fence fenceMark // the open code fence, zero outside one
	var endTag string   // the end tag of the open HTML block, "" outside one
	inComment := false  // inside <!-- … -->
	for i, line := range lines {
		switch {
		case fence.open():
			if fence.closedBy(line) {
				fence = fenceMark{}
			}
			out[i] = commentLine{kind: lineCode, text: line}
			continue
		case endTag != "":
			if strings.Contains(strings.ToLower(line), endTag) {
				endTag = ""
			}
			out[i] = commentLine{kind: lineHidden}
			continue
		case inComment:
			out[i] = commentLine{kind: lineHidden}
			if end := strings.Index(line, "-->"); end >= 0 {
				// What follows the comment on its last line is in the
				// paragraph the comment interrupted, not the start of a
				// line; another comment may open there.
				_, inComment = stripComments(line[end+3:])
			}
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		trimmed := line[indent:]
		if indent >= 4 || strings.HasPrefix(trimmed, "\t") {
			out[i] = commentLine{kind: lineCode, text: line}
			continue
		}
		if m := openingFence(trimmed); m.open() {
			fence = m
			out[i] = commentLine{kind: lineCode, text: line}
			continue
		}
		if tag := htmlBlockEnd(trimmed); tag != "" {
			if !strings.Contains(strings.ToLower(trimmed[1:]), tag) {
				endTag = tag
			}
			out[i] = commentLine{kind: lineHidden}
			continue
		}
		text, open := stripComments(line)
		inComment = open
		kind := lineProse
		if strings.HasPrefix(strings.TrimLeft(text, " "), ">") {
			kind = lineQuote
		}
		out[i] = commentLine{kind: kind, text: text}
	}
	return out
}

// visible returns, by line index, the shown text of each prose line:
// those whose start a reader sees as the start of a line.
func visible(lines []string) map[int]string {
	shown := map[int]string{}
	for i, l := range scanLines(lines) {
		if l.kind == lineProse {
			shown[i] = l.text
		}
	}
	return shown
}

// stripComments removes the HTML comments from line and reports whether
// one is left open at its end.
func stripComments(line string) (string, bool) {
	var b strings.Builder
	for {
		start := strings.Index(line, "<!--")
		if start < 0 {
			b.WriteString(line)
			return b.String(), false
		}
		b.WriteString(line[:start])
		end := strings.Index(line[start+4:], "-->")
		if end < 0 {
			return b.String(), true
		}
		line = line[start+4+end+3:]
	}
}

// htmlBlockEnd is the end tag of the raw HTML block trimmed opens (<pre>,
// <script>, <style> or <textarea>, in any case), "" when it opens none.
func htmlBlockEnd(trimmed string) string {
	lower := strings.ToLower(trimmed)
	for _, tag := range []string{"pre", "script", "style", "textarea"} {
		if rest, ok := strings.CutPrefix(lower, "<"+tag); ok && (rest == "" || rest[0] == '>' || rest[0] == ' ' || rest[0] == '\t') {
			return "</" + tag + ">"
		}
	}
	return ""
}

// fenceMark is a code fence: its character and length.
type fenceMark struct {
	char byte
	n    int
}

func (f fenceMark) open() bool { return f.n > 0 }

// openingFence reads a code fence at the start of trimmed (a line without
// its up to three leading spaces): three or more backticks or tildes; a
// backtick fence's info string holds no backtick.
func openingFence(trimmed string) fenceMark {
	if trimmed == "" || (trimmed[0] != '`' && trimmed[0] != '~') {
		return fenceMark{}
	}
	c := trimmed[0]
	n := len(trimmed) - len(strings.TrimLeft(trimmed, string(c)))
	if n < 3 || (c == '`' && strings.Contains(trimmed[n:], "`")) {
		return fenceMark{}
	}
	return fenceMark{char: c, n: n}
}

// closedBy reports whether line closes the fence: up to three spaces, a
// run of the fence's character at least as long as the opening one, then
// only spaces.
func (f fenceMark) closedBy(line string) bool {
	indent := len(line) - len(strings.TrimLeft(line, " "))
	if indent >= 4 {
		return false
	}
	rest := line[indent:]
	n := len(rest) - len(strings.TrimLeft(rest, string(f.char)))
	return n >= f.n && strings.TrimSpace(rest[n:]) == ""
}

// cutWord splits off the first whitespace-separated word.
func cutWord(s string) (word, rest string) {
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i:]
}

// parseRunArgs reads "[workflow] [key=value …]"; values may be quoted with
// double quotes to hold spaces.
func parseRunArgs(s string) (string, map[string]string, error) {
	vars := map[string]string{}
	workflow := ""
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		var tok string
		key, after, isVar := strings.Cut(s, "=")
		if isVar && !strings.ContainsFunc(key, unicode.IsSpace) {
			var val string
			if strings.HasPrefix(after, `"`) {
				end := strings.Index(after[1:], `"`)
				if end < 0 {
					return "", nil, fmt.Errorf("unclosed quote in the value of %s", key)
				}
				val, s = after[1:end+1], after[end+2:]
			} else {
				val, s = cutWord(after)
			}
			if !validKey(key) {
				return "", nil, fmt.Errorf("%q is not a var name (letters, digits and _)", key)
			}
			if _, dup := vars[key]; dup {
				return "", nil, fmt.Errorf("var %s is given twice", key)
			}
			vars[key] = val
			continue
		}
		tok, s = cutWord(s)
		if workflow != "" || len(vars) > 0 {
			return "", nil, fmt.Errorf("unexpected %q: write /iterion run [workflow] [key=value …]", tok)
		}
		workflow = tok
	}
	return workflow, vars, nil
}

func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		if !(r == '_' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r))) {
			return false
		}
	}
	return true
}

// nearestCommand returns the command a typo probably meant.
func nearestCommand(verb string) string {
	best, bestD := "", 3
	for _, c := range commandNames {
		if d := textdist.Distance(verb, c); d < bestD && d <= len(c)/2 {
			best, bestD = c, d
		}
	}
	return best
}
