package github

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseComment(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		want     []Command
		problems []Problem
	}{
		{
			name: "run with workflow and vars",
			body: "Let's go.\n/iterion run review depth=2 note=\"two words\"\nthanks",
			want: []Command{{Name: CmdRun, Line: 2, Workflow: "review", Vars: map[string]string{"depth": "2", "note": "two words"}}},
		},
		{
			name: "run with no arguments, case-insensitive",
			body: "/ITERION Run",
			want: []Command{{Name: CmdRun, Line: 1, Vars: map[string]string{}}},
		},
		{
			name: "answer over several lines, up to the next command",
			body: "/iterion answer Q3 MIT,\nbecause the rest of the org uses it.\n/iterion status",
			want: []Command{
				{Name: CmdAnswer, Line: 1, QuestionID: "Q3", Text: "MIT,\nbecause the rest of the org uses it."},
				{Name: CmdStatus, Line: 3},
			},
		},
		{
			name: "cancel with and without a run",
			body: "/iterion cancel\n/iterion cancel r-01abc",
			want: []Command{{Name: CmdCancel, Line: 1}, {Name: CmdCancel, Line: 2, RunID: "r-01abc"}},
		},
		{
			name: "bare /iterion is help",
			body: "/iterion",
			want: []Command{{Name: CmdHelp, Line: 1}},
		},
		{
			name: "not on its own line",
			body: "please /iterion run now",
		},
		{
			name: "inside a fenced code block",
			body: "```\n/iterion run\n```\n~~~md\n/iterion cancel\n~~~",
		},
		{
			name: "inside a quote or an indented code block",
			body: "> /iterion run\n    /iterion run\n\t/iterion run",
		},
		{
			name: "after a closed fence",
			body: "```go\nx := 1\n```\n/iterion help",
			want: []Command{{Name: CmdHelp, Line: 4}},
		},
		{
			name:     "near miss of a verb",
			body:     "/iterion rnu fast=1",
			problems: []Problem{{Line: 1, Message: `unknown command "rnu"`, Suggestion: "/iterion run fast=1"}},
		},
		{
			name:     "unknown verb gets the help",
			body:     "/iterion deploy",
			problems: []Problem{{Line: 1, Message: `unknown command "deploy"`, Help: true}},
		},
		{
			name:     "near miss of the prefix",
			body:     "/iteron run",
			problems: []Problem{{Line: 1, Message: `"/iteron" is not a command`, Suggestion: "/iterion run"}},
		},
		{
			name:     "answer without text",
			body:     "/iterion answer Q1",
			problems: []Problem{{Line: 1, Message: "answer needs a question and a text: /iterion answer Q1 your answer"}},
		},
		{
			name:     "bad run arguments",
			body:     "/iterion run a b\n/iterion run x=1 x=2\n/iterion run note=\"open\n/iterion run 9x=1",
			problems: []Problem{{Line: 1, Message: `unexpected "b": write /iterion run [workflow] [key=value …]`}, {Line: 2, Message: "var x is given twice"}, {Line: 3, Message: "unclosed quote in the value of note"}, {Line: 4, Message: `"9x" is not a var name (letters, digits and _)`}},
		},
		{
			name:     "status takes no arguments",
			body:     "/iterion status now",
			problems: []Problem{{Line: 1, Message: "status takes no arguments"}},
		},
		{
			name: "CRLF line ends",
			body: "hi\r\n/iterion status\r\n",
			want: []Command{{Name: CmdStatus, Line: 2}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := ParseComment(tc.body)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("commands (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.problems, problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseCommentLimits(t *testing.T) {
	cmds, problems := ParseComment(strings.Repeat("/iterion status\n", MaxCommands+3))
	if len(cmds) != MaxCommands || len(problems) != 1 {
		t.Errorf("%d commands and %v, want %d and one problem", len(cmds), problems, MaxCommands)
	}
	cmds, problems = ParseComment("/iterion run\n" + strings.Repeat("x", MaxCommentSize))
	if len(cmds) != 0 || len(problems) != 1 {
		t.Errorf("an oversized comment gave %v %v", cmds, problems)
	}
}

func FuzzParseComment(f *testing.F) {
	for _, s := range []string{"/iterion run a=1", "/iterion answer Q1 a\nb", "```\n/iterion run", "> /iterion", "/iterion run x=\"", "/iteron", "<!--\n/iterion run\n-->", "````\n```\n/iterion run", "<pre>\n/iterion run\n</pre>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		cmds, problems := ParseComment(body)
		lines := strings.Count(body, "\n") + 1
		if len(cmds) > MaxCommands {
			t.Fatalf("%d commands", len(cmds))
		}
		for _, c := range cmds {
			if c.Line < 1 || c.Line > lines {
				t.Fatalf("command line %d outside 1..%d", c.Line, lines)
			}
			if c.Name == CmdAnswer && (c.QuestionID == "" || c.Text == "") {
				t.Fatalf("answer without question or text: %+v", c)
			}
		}
		for _, p := range problems {
			if p.Message == "" || p.Line < 1 || p.Line > lines {
				t.Fatalf("bad problem %+v", p)
			}
		}
	})
}

// Commands a reader of the rendered comment cannot see are not commands:
// in an HTML comment (on its line, across lines, or opened mid-line), in
// <pre>, <script>, <style> or <textarea> blocks, and in a fenced block that
// a shorter fence does not close (CommonMark). Once the hiding ends,
// commands count again.
func TestHiddenCommandsAreIgnored(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []string // the verbs found
	}{
		{"html comment", "<!-- /iterion run -->", nil},
		{"html comment across lines", "<!--\n/iterion run\n-->\n/iterion status", []string{CmdStatus}},
		{"comment opened mid-line", "looks fine <!--\n/iterion run\n--> thanks", nil},
		{"two comments on a line", "<!-- a --> <!--\n/iterion run\n-->", nil},
		{"pre block", "<pre>\n/iterion run\n</pre>\n/iterion help", []string{CmdHelp}},
		{"PRE in capitals", "<PRE class=x>\n/iterion run\n</PRE>", nil},
		{"script", "<script>\n/iterion run\n</script>", nil},
		{"four-backtick fence not closed by three", "````\n```\n/iterion run\n````\n/iterion status", []string{CmdStatus}},
		{"tilde fence not closed by backticks", "~~~\n```\n/iterion run\n~~~", nil},
		{"unclosed fence runs to the end", "```go\n/iterion run", nil},
		{"backtick fence with a backtick in its info is text", "``` a`b\n/iterion run", []string{CmdRun}},
		{"fence indented four spaces is code, not a fence", "    ```\n/iterion run", []string{CmdRun}},
		{"closing fence may be indented up to three", "```\n/iterion run\n   ```\n/iterion help", []string{CmdHelp}},
		{"closing fence with text after is not one", "```\n``` x\n/iterion run", nil},
		{"visible after a closed comment", "<!-- note -->\n/iterion run", []string{CmdRun}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmds, _ := ParseComment(tc.body)
			var got []string
			for _, c := range cmds {
				got = append(got, c.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ParseComment(%q) = %v, want %v", tc.body, got, tc.want)
			}
		})
	}
}

// A reply's hidden text is neither a quote of a question nor part of its
// answer.
func TestReplyHiddenText(t *testing.T) {
	if _, ok := ParseReply("<!--\n> **Question Q1**\n-->\nyes"); ok {
		t.Error("a quote inside an HTML comment was taken for one")
	}
	r, ok := ParseReply("> **Question Q1** · from `review`\n\nyes <!-- no, reject it -->\n<!--\napproved\n-->")
	if !ok || r.Text != "yes" {
		t.Errorf("reply = %+v, %t; want the answer yes, without the hidden text", r, ok)
	}
}
