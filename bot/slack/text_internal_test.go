package slack

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	slackgo "github.com/slack-go/slack"

	"github.com/iterion-bot/iterion/engine"
)

func TestCut(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"short", "héllo", 10, "héllo"},
		{"plain", "abcdef", 3, "abc"},
		{"combining accent stays with its letter", "cafe\u0301s", 4, "caf"},
		{"skin tone stays with its hand", "ab👋🏽c", 3, "ab"},
		{"zero-width joiner family stays whole", "a👩\u200d👩\u200d👧b", 4, "a"},
		{"flags pair", "🇫🇷🇩🇪", 3, "🇫🇷"},
		{"variation selector", "x❤\ufe0fy", 2, "x"},
		{"CR LF", "ab\r\ncd", 3, "ab"},
		{"one cluster longer than max", "e\u0301\u0301\u0301", 2, "e\u0301"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, cutAny := cut(tc.in, tc.max)
			if got != tc.want || cutAny != (got != tc.in) {
				t.Errorf("cut(%q, %d) = %q, %v; want %q", tc.in, tc.max, got, cutAny, tc.want)
			}
		})
	}
}

// cut keeps a prefix of valid text within max characters, and never
// leaves a mark, a joiner or half a flag at the cut.
func FuzzCut(f *testing.F) {
	for _, s := range []string{"", "abc", "cafe\u0301", "👩\u200d👩\u200d👧", "🇫🇷🇩🇪🇮🇹", "\r\n\r\n", "한국어"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if !utf8.ValidString(s) || max < 0 || max > 1000 {
			return
		}
		got, cutAny := cut(s, max)
		if !strings.HasPrefix(s, got) || utf8.RuneCountInString(got) > max {
			t.Fatalf("cut(%q, %d) = %q: not a prefix within max", s, max, got)
		}
		if cutAny == (got == s) {
			t.Fatalf("cut(%q, %d) = %q, %v: the flag is wrong", s, max, got, cutAny)
		}
		rs := []rune(s)
		if n := utf8.RuneCountInString(got); cutAny && n > 0 && n < len(rs) && !boundary(rs, n) {
			// Only when no boundary fits: the first cluster is longer than max.
			for i := 1; i < n; i++ {
				if boundary(rs, i) {
					t.Fatalf("cut(%q, %d) = %q ends inside a cluster though one ends at %d", s, max, got, i)
				}
			}
		}
	})
}

// A question's message keeps within Slack's limits however long the
// question, however many or long its options.
func TestQuestionWithinLimits(t *testing.T) {
	long := strings.Repeat("word ", 2000)
	many := make([]any, 150)
	for i := range many {
		many[i] = map[string]any{"id": string(rune('a' + i%26)), "label": strings.Repeat("x", 100)}
	}
	ix := &engine.Interaction{ID: "r_n_async_1", RunID: "r", NodeID: "n", Kind: engine.KindAsync,
		Questions: map[string]any{engine.QuestionKey: long + " <!channel> <@U1>", engine.OptionsKey: many}}
	v := &runView{run: &engine.Run{ID: "r", Status: engine.StatusRunning}, numbers: map[string]int{ix.ID: 3}, snap: &engine.Snapshot{},
		name: func(l, _ string) string { return l }}
	fallback, blocks := renderQuestion(v, ix)
	if strings.Contains(fallback, "<!channel>") || strings.Contains(fallback, "<@U1>") {
		t.Errorf("the notification's text can mention: %q", fallback)
	}
	v.run.Workflow = "<!here> <https://evil.example|review>"
	if card, _ := renderCard(v); strings.Contains(card, "<!here>") || strings.Contains(card, "<https://evil") {
		t.Errorf("the card's notification text can mention or link: %q", card)
	}
	raw, _ := json.Marshal(slackgo.Blocks{BlockSet: blocks})
	var decoded []struct {
		Type     string     `json:"type"`
		Text     *textField `json:"text"`
		Elements []struct {
			Type    string `json:"type"`
			Options []any  `json:"options"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatal(err)
	}
	for _, b := range decoded {
		if b.Text != nil && utf8.RuneCountInString(b.Text.Text) > 3000 {
			t.Errorf("a %s block of %d characters", b.Type, utf8.RuneCountInString(b.Text.Text))
		}
		if strings.Contains(b.Text.textOrEmpty(), "<!channel>") || strings.Contains(b.Text.textOrEmpty(), "<@U1>") {
			t.Errorf("the question's text can mention: %q", b.Text.Text)
		}
		for _, el := range b.Elements {
			if el.Type == "button" && len(decoded) > 0 && strings.HasPrefix(b.Type, "actions") && len(b.Elements) > 2 {
				t.Errorf("150 long options are buttons, want a select")
			}
			if el.Type == "static_select" && len(el.Options) != 100 {
				t.Errorf("the select has %d options, want Slack's 100", len(el.Options))
			}
		}
	}
	if !strings.Contains(string(raw), "cut to fit Slack") {
		t.Error("the cut question does not say so")
	}
}

type textField struct{ Text string }

func (t *textField) textOrEmpty() string {
	if t == nil {
		return ""
	}
	return t.Text
}
