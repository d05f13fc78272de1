package github

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Reply is a comment that answers a question by quoting it: GitHub's
// "Quote reply" copies the question comment's visible text (never its
// hidden marker) as "> " lines, so the question is found by the short id
// the comment shows ("Question Q3").
type Reply struct {
	// Questions are the short numbers of the questions quoted, in the
	// order first quoted, each once.
	Questions []int
	// Text is the comment without the quoted lines, trimmed.
	Text string
	// Quoted is the text of the quoted lines, without their "> ".
	Quoted string
}

// questionRef finds "Question Q3" (bold, code or plain) in a quoted line.
var questionRef = regexp.MustCompile(`(?i)\bquestion\W{0,3}Q(\d{1,9})\b`)

// ParseReply reads a comment that quotes iterion questions. ok is false
// when it quotes none. Lines inside code blocks never count as quotes.
func ParseReply(body string) (r Reply, ok bool) {
	if utf8.RuneCountInString(body) > MaxCommentSize {
		return Reply{}, false
	}
	lines := strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n")
	var kept, quoted []string
	// Only what a reader sees counts: text in HTML comments is neither a
	// quote nor part of the answer.
	for _, l := range scanLines(lines) {
		switch l.kind {
		case lineQuote:
			trimmed := strings.TrimLeft(l.text, " ")
			quoted = append(quoted, strings.TrimLeft(trimmed, "> "))
			for _, m := range questionRef.FindAllStringSubmatch(trimmed, -1) {
				n, err := strconv.Atoi(m[1])
				if err == nil && n > 0 && !slices.Contains(r.Questions, n) {
					r.Questions = append(r.Questions, n)
				}
			}
		case lineProse, lineCode:
			kept = append(kept, l.text)
		}
	}
	if len(r.Questions) == 0 {
		return Reply{}, false
	}
	r.Text = strings.TrimSpace(strings.Join(kept, "\n"))
	r.Quoted = strings.Join(quoted, "\n")
	return r, true
}

// QuotesQuestion reports whether a reply's quoted text holds the first
// line of question, as GitHub's quote of the bot's question comment does;
// a look-alike "Question Q3" written by someone else does not. Only
// letters and digits are compared, so the markdown GitHub rewrites in a
// quote does not matter.
func QuotesQuestion(quoted, question string) bool {
	first := ""
	for _, line := range strings.Split(question, "\n") {
		if first = alnum(line); first != "" {
			break
		}
	}
	return first != "" && strings.Contains(alnum(quoted), first)
}

// alnum keeps the letters and digits of s, lowercased.
func alnum(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// ShortQuestionID reads a short question id as people type it: "Q3",
// "q3" or "#3"; ok is false for anything else (a full interaction id).
func ShortQuestionID(s string) (n int, ok bool) {
	s = strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(s, "#"), "Q"), "q")
	if s == "" || len(s) > 9 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}

// ParseForm reads the answer to a form with several fields written as
// "key: value" lines (a value may continue on the lines after it that
// hold no "key:"). Keys are matched against fields, case-insensitively,
// so prose with colons in it stays part of a value; text before the
// first key is returned as rest.
func ParseForm(text string, fields []string) (values map[string]string, rest string) {
	values = map[string]string{}
	var cur string
	var restLines []string
	for _, line := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		key, val, found := strings.Cut(line, ":")
		key = strings.Trim(strings.TrimSpace(key), "*`-_ ")
		if found {
			if i := slices.IndexFunc(fields, func(f string) bool { return strings.EqualFold(f, key) }); i >= 0 {
				cur = fields[i]
				values[cur] = strings.TrimSpace(val)
				continue
			}
		}
		if cur == "" {
			restLines = append(restLines, line)
			continue
		}
		values[cur] = strings.TrimSpace(values[cur] + "\n" + line)
	}
	return values, strings.TrimSpace(strings.Join(restLines, "\n"))
}
