package github

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseReply(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       Reply
		ok         bool
	}{
		{"quote reply", "> **Question Q3** from `plan` in run `gh-1`\n> \n> Which licence?\n\nMIT, please.", Reply{Questions: []int{3}, Text: "MIT, please."}, true},
		{"plain quote", "> Question Q12 from plan\n2", Reply{Questions: []int{12}, Text: "2"}, true},
		{"code quote", "> `Question Q4`\nyes", Reply{Questions: []int{4}, Text: "yes"}, true},
		{"two questions", "> Question Q1\n> Question Q2\nboth fine", Reply{Questions: []int{1, 2}, Text: "both fine"}, true},
		{"same twice", "> Question Q1\n> see Question Q1\nok", Reply{Questions: []int{1}, Text: "ok"}, true},
		{"no quote", "Question Q3: MIT", Reply{}, false},
		{"quote without a question", "> I think Q3 is wrong\nno", Reply{}, false},
		{"quote in code", "```\n> Question Q3\n```\nMIT", Reply{}, false},
		{"indented code", "    > Question Q3\nMIT", Reply{}, false},
		{"answer keeps its code", "> Question Q2\n```go\nfmt.Println(1)\n```", Reply{Questions: []int{2}, Text: "```go\nfmt.Println(1)\n```"}, true},
		{"zero is no id", "> Question Q0\nx", Reply{}, false},
		{"crlf", "> Question Q5\r\nyes\r\n", Reply{Questions: []int{5}, Text: "yes"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseReply(tc.body)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tc.ok, got)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Reply{}, "Quoted")); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQuotesQuestion(t *testing.T) {
	// GitHub's quote of the bot's question comment: the question is quoted
	// inside the quote, with markdown rewritten and mentions disarmed.
	r, _ := ParseReply("> **Question Q3** · from `plan` in run `r1`\n>\n> > Which licence, @\u200bana? _MIT_ or **GPL**\n\nMIT")
	if !QuotesQuestion(r.Quoted, "Which licence, @ana? *MIT* or GPL\nmore lines") {
		t.Errorf("the bot's own question was not recognised in %q", r.Quoted)
	}
	r, _ = ParseReply("> **Question Q3** · Keep the failing test skipped?\n1")
	if QuotesQuestion(r.Quoted, "Which licence?") {
		t.Error("a look-alike question was taken for the bot's")
	}
	if QuotesQuestion("anything", "  \n!!") {
		t.Error("a question without words matched")
	}
}

func TestShortQuestionID(t *testing.T) {
	for in, want := range map[string]int{"Q3": 3, "q12": 12, "#7": 7, "Q0": 0, "Q": 0, "r1_plan_async_1": 0, "Q1x": 0, "Q9999999999": 0, "3": 3} {
		n, ok := ShortQuestionID(in)
		if n != want || ok != (want > 0) {
			t.Errorf("ShortQuestionID(%q) = %d, %v; want %d", in, n, ok, want)
		}
	}
}

func TestParseForm(t *testing.T) {
	fields := []string{"approved", "reason"}
	got, rest := ParseForm("Looks good.\nApproved: yes\n**reason**: tested on\nstaging: all green", fields)
	want := map[string]string{"approved": "yes", "reason": "tested on\nstaging: all green"}
	if diff := cmp.Diff(want, got); diff != "" || rest != "Looks good." {
		t.Errorf("ParseForm mismatch (-want +got):\n%s\nrest = %q", diff, rest)
	}
	got, rest = ParseForm("just text", fields)
	if len(got) != 0 || rest != "just text" {
		t.Errorf("ParseForm(no keys) = %v, %q", got, rest)
	}
}

func FuzzParseReply(f *testing.F) {
	for _, s := range []string{"> Question Q3\nMIT", "```\n> Question Q3\n", "> question q1 question Q2\n\n", "> **Question Q99999999999**", "\r\n>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r, ok := ParseReply(body)
		if !ok {
			if len(r.Questions) != 0 || r.Text != "" {
				t.Fatalf("not a reply but %+v", r)
			}
			return
		}
		if len(r.Questions) == 0 {
			t.Fatal("a reply without questions")
		}
		for _, n := range r.Questions {
			if n <= 0 {
				t.Fatalf("question number %d", n)
			}
		}
		if strings.TrimSpace(r.Text) != r.Text {
			t.Fatalf("text not trimmed: %q", r.Text)
		}
		values, _ := ParseForm(r.Text, []string{"a", "b"})
		for k := range values {
			if k != "a" && k != "b" {
				t.Fatalf("form key %q not a field", k)
			}
		}
	})
}
