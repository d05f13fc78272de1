// Package github is iterion's GitHub channel. This file parses the
// `/iterion …` commands people write in pull-request comments; the
// webhook intake, App authentication and PR comments build on it.
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
// its own line, starting with /iterion; lines inside fenced or indented
// code blocks and quotes ("> ") never count. Lines that look like a
// command but are not one (a typo, an unknown verb, a missing argument)
// come back as problems, so the bot can reply instead of staying silent.
func ParseComment(body string) ([]Command, []Problem) {
	if utf8.RuneCountInString(body) > MaxCommentSize {
		return nil, []Problem{{Line: 1, Message: fmt.Sprintf("the comment is longer than %d characters; commands in it are ignored", MaxCommentSize)}}
	}
	lines := strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n")
	var cmds []Command
	var problems []Problem
	var code fences
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimLeft(line, " ")
		if code.fenceLine(trimmed) {
			continue
		}
		if code.inCode() || len(line)-len(trimmed) >= 4 || strings.HasPrefix(line, "\t") || strings.HasPrefix(trimmed, ">") {
			continue // code, or a quote of someone else's words
		}
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

func fenceOf(line string) string {
	for _, f := range []string{"```", "~~~"} {
		if strings.HasPrefix(line, f) {
			return f
		}
	}
	return ""
}

// fences follows the fenced code blocks of a comment, line by line.
type fences struct {
	open string // the open fence (``` or ~~~), "" outside code
}

// fenceLine reports whether trimmed (a line without its leading spaces)
// opens or closes a code block, and notes which.
func (f *fences) fenceLine(trimmed string) bool {
	mark := fenceOf(trimmed)
	if mark == "" {
		return false
	}
	switch {
	case f.open == "":
		f.open = mark
	case strings.HasPrefix(trimmed, f.open) && strings.TrimSpace(strings.TrimLeft(trimmed, f.open[:1])) == "":
		f.open = ""
	}
	return true
}

// inCode reports whether the lines now are inside a fenced block.
func (f *fences) inCode() bool { return f.open != "" }

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
