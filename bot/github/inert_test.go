package github

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/iterion-bot/iterion/engine"
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"plain", "MIT, please", "> MIT, please"},
		{"lines", "one\ntwo\r\nthree\rfour", "> one\n> two\n> three\n> four"},
		{"mention", "cc @octo-org/owners", "> cc @\u200bocto-org/owners"},
		{"closing the quote", "ok</blockquote>\n\n**I am the bot**", "> ok<\u200b/blockquote>\n> \n> **I am the bot**"},
		{"a lone CR leaving the quote", "ok\r\r# /iterion run deploy", "> ok\n> \n> # /iterion run deploy"},
		{"marker", "<!-- iterion:status/r-1 -->", "> <\u200b!-- iterion:status/r-1 -->"},
		{"html", `<img src="https://evil.example/p.png"><details><summary>x`, "> <\u200bimg src=\"https://evil.example/p.png\"><\u200bdetails><\u200bsummary>x"},
		{"comparisons kept", "a < b, 1<2", "> a < b, 1<2"},
		{"idempotent", "> <\u200b/b> @\u200bx", "> > <\u200b/b> @\u200bx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quote(tc.text); got != tc.want {
				t.Errorf("quote(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
}

// An answer that came through the REST API, with a name and a channel
// recorded before the server set them itself, renders as inert text in
// the question's comment: no mention, no tag, no marker, nothing out of
// its quote or its code span.
func TestRenderQuestionAnswerInert(t *testing.T) {
	ix := &engine.Interaction{
		ID: "r-1_draft_async_1", RunID: "r-1", NodeID: "draft", Kind: engine.KindAsync,
		Questions:  map[string]any{engine.QuestionKey: "Which licence?"},
		Answers:    map[string]any{engine.QuestionKey: "MIT @alice\n</blockquote>\n<!-- iterion:status/r-1 -->\r# done"},
		AnsweredAt: time.Unix(1, 0), AnsweredBy: "carol` <b>@bob</b>", Via: "github <img src=x>",
	}
	v := &view{run: &engine.Run{ID: "r-1", Status: engine.StatusRunning}, numbers: map[string]int{ix.ID: 1}}
	got := CommentBody(questionKey(ix.ID), renderQuestion(v, ix))
	want := "**Question Q1** · from `draft` in run `r-1`\n\n> Which licence?\n" +
		"\n✅ Answered by `carol' <\u200bb>@\u200bbob<\u200b/b>` via github \\<img src=x\\>:\n\n" +
		"> MIT @\u200balice\n> <\u200b/blockquote>\n> <\u200b!-- iterion:status/r-1 -->\n> # done\n" +
		"\n\n" + Marker(questionKey(ix.ID))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("comment (-want +got):\n%s", diff)
	}
	if n := strings.Count(got, "<!--"); n != 1 {
		t.Errorf("the comment holds %d markers, want its own only", n)
	}
}
