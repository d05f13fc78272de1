package slack

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/slack-go/slack/slackutilsx"
)

// cut returns the first max characters of s or fewer, cut where a reader
// sees a character end (a grapheme cluster boundary), and whether it cut
// anything. Slack counts its limits in characters; a cut inside a cluster
// would leave half an emoji or a letter without its accent. The
// boundaries kept are those of UAX #29 that text from a model or a person
// meets: combining marks, variation selectors, emoji modifiers and tags
// stay with their base, a zero-width joiner with both its neighbours,
// regional indicators in pairs (flags), CR with LF and Hangul jamo with
// each other. A cluster longer than max is cut where max falls.
func cut(s string, max int) (string, bool) {
	if max <= 0 {
		return "", s != ""
	}
	if utf8.RuneCountInString(s) <= max {
		return s, false
	}
	rs := []rune(s)
	for i := max; i > 0; i-- {
		if boundary(rs, i) {
			return string(rs[:i]), true
		}
	}
	return string(rs[:max]), true
}

const zwj = '\u200d'

// boundary reports whether a cluster may end between rs[i-1] and rs[i].
func boundary(rs []rune, i int) bool {
	prev, next := rs[i-1], rs[i]
	switch {
	case extends(next), prev == zwj:
		return false
	case prev == '\r' && next == '\n':
		return false
	case jamo(prev) && jamo(next):
		return false
	case regional(prev) && regional(next):
		// Indicators pair from the start of their run: a boundary falls
		// after an even number of them.
		n := 0
		for j := i - 1; j >= 0 && regional(rs[j]); j-- {
			n++
		}
		return n%2 == 0
	}
	return true
}

// extends reports whether r belongs to the cluster of the rune before it.
func extends(r rune) bool {
	switch {
	case r == zwj,
		0xFE00 <= r && r <= 0xFE0F,   // variation selectors
		0x1F3FB <= r && r <= 0x1F3FF, // emoji skin tones
		0xE0020 <= r && r <= 0xE007F, // emoji tags
		0xE0100 <= r && r <= 0xE01EF: // variation selectors supplement
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc)
}

func regional(r rune) bool { return 0x1F1E6 <= r && r <= 0x1F1FF }

// jamo reports whether r is a Hangul jamo, which compose into syllables.
func jamo(r rune) bool {
	return 0x1100 <= r && r <= 0x11FF || 0xA960 <= r && r <= 0xA97F || 0xD7B0 <= r && r <= 0xD7FF
}

// escape makes caller text (a model's question, a person's answer, a
// login) inert in Slack's mrkdwn: &, < and > escaped, so no link,
// mention (<@U…>, <!channel>) or date of its own.
func escape(s string) string { return slackutilsx.EscapeMessage(s) }

// oneLine joins text's lines and cuts it to max characters, with an
// ellipsis when cut.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if c, cutAny := cut(s, max); cutAny {
		return c + "…"
	}
	return s
}

// quoteLines renders text as a Slack quote: every line prefixed with >,
// so none of it can pose as the bot's own words below the quote.
func quoteLines(text string) string {
	text = strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(strings.TrimSpace(text))
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}

// code renders a name (a run id, a node, a login) as inline code: one
// line, no backtick of its own to close it.
func code(s string) string {
	return "`" + strings.ReplaceAll(escape(oneLine(s, 100)), "`", "'") + "`"
}
