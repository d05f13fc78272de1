package github

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// forged is caller text that tries to speak in the bot's voice: a heading
// and an "approved by" line of its own, a link, a hidden comment, a
// mention, an image and a code span it breaks out of.
const forged = "ok`\n\n# ✅ Approved by `admin` via github\n\n[merge now](https://evil.example) <!-- @team ![x](https://evil.example/p.png) *now*"

func TestPlain(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"words", "Which licence, MIT or GPL?", "Which licence, MIT or GPL?"},
		{"a heading and an approved-by line", "x\n\n# ✅ Approved by `admin`", "x \\# ✅ Approved by \\`admin\\`"},
		{"a link and an image", "[ok](https://e.example) ![i](https://e.example/p.png)", "\\[ok\\](https://e.example) !\\[i\\](https://e.example/p.png)"},
		{"HTML, a comment and an entity", "<b>x</b> <!-- hide &#96;", "\\<b\\>x\\</b\\> \\<!-- hide \\&\\#96;"},
		{"emphasis, strikethrough, math, a table", "*a* _b_ ~~c~~ $d$ e|f", "\\*a\\* \\_b\\_ \\~\\~c\\~\\~ \\$d\\$ e\\|f"},
		{"a mention and an issue reference", "@octo-org/owners see #12", "@\u200bocto-org/owners see \\#12"},
		{"snake_case stays", "ANTHROPIC_API_KEY is not set", "ANTHROPIC_API_KEY is not set"},
		{"a backslash of its own", `a\b \* \\`, `a\\b \* \\`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := plain(tc.text, 200)
			if got != tc.want {
				t.Errorf("plain(%q) = %q, want %q", tc.text, got, tc.want)
			}
			if again := plain(got, 200); again != got {
				t.Errorf("not idempotent: %q, then %q", got, again)
			}
		})
	}
}

// bareLines are the lines of a rendered comment outside quotes and code
// blocks: the bot's own voice.
func bareLines(body string) []string {
	var out []string
	inFence := false
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
			continue
		}
		if !inFence && !strings.HasPrefix(l, ">") {
			out = append(out, l)
		}
	}
	return out
}

var codeSpans = regexp.MustCompile("`[^`]*`")

// checkVoice fails when caller text made a line of the bot's own voice:
// a heading, an "approved by" line, a hidden comment (but the bot's
// marker), a link or a mention.
func checkVoice(t *testing.T, body string) {
	t.Helper()
	for _, l := range bareLines(body) {
		l = codeSpans.ReplaceAllString(l, "`…`") // inert there: not the bot's words
		switch {
		case strings.HasPrefix(strings.TrimLeft(l, " "), "#"):
			t.Errorf("a heading in the bot's voice: %q", l)
		case strings.Contains(l, "Approved by") && !strings.Contains(l, "\\# ✅ Approved by \\`admin\\`"):
			t.Errorf("an approved-by line in the bot's voice: %q", l)
		case strings.Contains(l, "<!--") && !strings.HasPrefix(l, "<!-- iterion:"):
			t.Errorf("an HTML comment in the bot's voice: %q", l)
		case strings.Contains(l, "](") && !strings.Contains(l, "\\]("):
			t.Errorf("a link in the bot's voice: %q", l)
		case strings.Contains(l, "@team"):
			t.Errorf("a mention in the bot's voice: %q", l)
		}
	}
}

// Everything a caller controls in a question comment (the question, its
// options, a form's field descriptions, who answered and through what)
// stays the caller's: no forged heading or "approved by" line, no link,
// no hidden text, no mention.
func TestRenderQuestionForgery(t *testing.T) {
	ix := &engine.Interaction{
		ID: "r-1_draft_async_1", RunID: "r-1", NodeID: "draft", Kind: engine.KindAsync,
		Questions: map[string]any{
			engine.QuestionKey: forged,
			engine.OptionsKey:  []engine.Option{{ID: "a", Label: forged}, {ID: "b", Label: "fine"}},
		},
		Answers:    map[string]any{engine.QuestionKey: "yes"},
		AnsweredAt: time.Unix(1, 0), AnsweredBy: forged, Via: forged,
	}
	v := &view{run: &engine.Run{ID: "r-1", Status: engine.StatusRunning}, numbers: map[string]int{ix.ID: 1}, snap: &engine.Snapshot{}}
	body := CommentBody(questionKey(ix.ID), renderQuestion(v, ix))
	checkVoice(t, body)
	if n := strings.Count(body, "✅ Answered by"); n != 1 {
		t.Errorf("%d answered-by lines, want the bot's one:\n%s", n, body)
	}

	form := &engine.Interaction{
		ID: "r-1_approve_human_1", RunID: "r-1", NodeID: "approve", Kind: engine.KindBlocking,
		Questions: map[string]any{"_instructions": "Ship?", "reason": forged, "ok`\n# x": forged},
	}
	v.numbers[form.ID] = 2
	checkVoice(t, CommentBody(questionKey(form.ID), renderQuestion(v, form)))
}

// The status comment renders the run's workflow, who started it and its
// open questions without letting any of them speak for the bot.
func TestRenderStatusForgery(t *testing.T) {
	run := &engine.Run{ID: "r-1", Workflow: forged, Status: engine.StatusPausedWaitingHuman, Trigger: engine.Trigger{Actor: forged}}
	ix := &engine.Interaction{ID: "r-1_draft_async_1", RunID: "r-1", NodeID: "draft", Kind: engine.KindAsync,
		Questions: map[string]any{engine.QuestionKey: forged}}
	v := &view{run: run, ixs: []*engine.Interaction{ix}, numbers: map[string]int{ix.ID: 1}, snap: &engine.Snapshot{}}
	body := CommentBody(statusKey(run.ID), renderStatus(v))
	checkVoice(t, body)
	if !strings.Contains(body, "Started by `ok' # ✅ Approved by 'admin' via github") {
		t.Errorf("the actor is not one inert code span:\n%s", body)
	}
}

// A reply echoing a commenter's words (a near miss of a command) keeps
// them inside its code span and its plain text.
func TestReplyForgery(t *testing.T) {
	_, problems := ParseComment("/iteron x` **✅ Approved by `admin`** <b>")
	if len(problems) != 1 {
		t.Fatalf("problems = %+v", problems)
	}
	got := problemText(problems[0])
	want := "line 1: \"/iteron\" is not a command. Did you mean `/iterion x' **✅ Approved by 'admin'** <\u200bb>`?"
	if got != want {
		t.Errorf("reply = %q, want %q", got, want)
	}
	_, problems = ParseComment("/iterion run a b`c\n/iterion run x=\"[click](https://evil.example)\" x=1")
	for _, p := range problems {
		checkVoice(t, problemText(p))
	}
}
