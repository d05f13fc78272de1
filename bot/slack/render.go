package slack

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// Action ids of the question messages' elements, and the callback id of
// the answer modal. An option's button is ActionOption followed by the
// option's index.
const (
	ActionOption = "iterion/option/"
	ActionSelect = "iterion/select"
	ActionWords  = "iterion/words"
	ActionForm   = "iterion/form"
	CallbackID   = "iterion/answer"
)

// Metadata event types of the bot's messages: a run's card, a question,
// and the reply saying who answered. Their payload names the run and the
// question, so a message posted just before a crash is found again.
const (
	metaRun      = "iterion_run"
	metaQuestion = "iterion_question"
	metaAnswered = "iterion_answered"
)

// Slack's limits the renderings keep within.
const (
	maxButtons      = 10   // options shown as buttons; more go in a select
	maxButtonText   = 75   // a button's text
	maxOptionText   = 75   // a select option's text
	maxSelect       = 100  // options in a select
	maxSectionText  = 3000 // a section's text
	maxQuestionText = 2500 // what of a question's text a message holds
	maxHeaderText   = 150
)

// runView is what a rendering of a run reads, from the store.
type runView struct {
	run     *engine.Run
	ixs     []*engine.Interaction
	numbers map[string]int // interaction id → Q number
	done    int
	current []string
	snap    *engine.Snapshot
	// pr and prURL name the run's pull request, when it has one.
	pr, prURL string
	// who says who may answer, in words.
	who string
	// name is how the card names the person who answered: the Slack user
	// linked to the GitHub login where known.
	name func(login, via string) string
	// workspace is the workspace's address, for links to messages; "" for
	// none. thread is the card's ts.
	workspace, thread string
}

// link is the address of a message in a thread ("C…/ts" as posts record
// them), "" when the workspace's address is not known.
func (v *runView) link(post, thread string) string {
	ch, ts, ok := strings.Cut(post, "/")
	if v.workspace == "" || !ok {
		return ""
	}
	return fmt.Sprintf("%sarchives/%s/p%s?thread_ts=%s&cid=%s", v.workspace, ch, strings.ReplaceAll(ts, ".", ""), thread, ch)
}

func mrkdwn(s string) *slackgo.TextBlockObject {
	return slackgo.NewTextBlockObject(slackgo.MarkdownType, s, false, false)
}

func plainText(s string, max int) *slackgo.TextBlockObject {
	return slackgo.NewTextBlockObject(slackgo.PlainTextType, oneLine(s, max-1), false, false)
}

// statusLook is how a status is shown.
func statusLook(s engine.Status) (title, icon string) {
	switch s {
	case engine.StatusPausedWaitingHuman:
		return "Waiting for answers", "⏸️"
	case engine.StatusFinished:
		return "Finished", "✅"
	case engine.StatusFailed, engine.StatusFailedResumable:
		return "Failed", "❌"
	case engine.StatusCancelled:
		return "Cancelled", "⏹️"
	}
	return "Running", "⏳"
}

// qid is a question's short id in the run's thread.
func (v *runView) qid(ix *engine.Interaction) string {
	if n := v.numbers[ix.ID]; n > 0 {
		return "Q" + strconv.Itoa(n)
	}
	return "the question"
}

// open lists the run's questions waiting for an answer, oldest first.
func (v *runView) open() []*engine.Interaction {
	var out []*engine.Interaction
	for _, ix := range v.ixs {
		if ix.Pending() && ix.Kind != engine.KindAwait {
			out = append(out, ix)
		}
	}
	return out
}

// renderCard is a run's root message: the workflow, the PR, the status,
// the steps and the open questions. It holds nothing that changes by
// itself, so an unchanged run renders the same and costs no update.
func renderCard(v *runView) (string, []slackgo.Block) {
	run := v.run
	title, icon := statusLook(run.Status)
	// The notification's text: Slack reads mentions and links in it too.
	fallback := fmt.Sprintf("iterion run %s of %s: %s", escape(oneLine(run.ID, 100)), escape(oneLine(run.Workflow, 100)), title)
	blocks := []slackgo.Block{
		slackgo.NewHeaderBlock(plainText("iterion · "+run.Workflow, maxHeaderText)),
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s *%s* · run %s", icon, title, code(run.ID))
	if v.pr != "" {
		fmt.Fprintf(&b, " on <%s|%s>", v.prURL, escape(v.pr))
	}
	if a := run.Trigger.Actor; a != "" {
		fmt.Fprintf(&b, "\nStarted by %s", code(a))
		if s := run.Trigger.Source; s != "" {
			fmt.Fprintf(&b, " via %s", viaWords(s))
		}
		b.WriteString(".")
	}
	blocks = append(blocks, slackgo.NewSectionBlock(mrkdwn(b.String()), nil, nil))
	steps := fmt.Sprintf("%d step%s done", v.done, plural(v.done))
	if !run.Status.Terminal() && len(v.current) > 0 {
		var names []string
		for i, n := range v.current {
			if i == 3 {
				names = append(names, fmt.Sprintf("%d more", len(v.current)-3))
				break
			}
			names = append(names, code(n))
		}
		steps += "; now at " + strings.Join(names, ", ")
	}
	blocks = append(blocks, slackgo.NewContextBlock("", mrkdwn(steps+".")))
	if open := v.open(); len(open) > 0 && !run.Status.Terminal() {
		var q strings.Builder
		q.WriteString("*Waiting for answers* (in this thread):")
		for i, ix := range open {
			if i == 10 {
				fmt.Fprintf(&q, "\n• and %d more", len(open)-10)
				break
			}
			id := "*" + v.qid(ix) + "*"
			if l := v.link(ix.Posts["slack"], v.thread); l != "" {
				id = "<" + l + "|" + v.qid(ix) + ">"
			}
			fmt.Fprintf(&q, "\n• %s: %s", id, escape(oneLine(questionText(ix), 150)))
		}
		if at, ok := earliest(v.snap.Gates); ok {
			fmt.Fprintf(&q, "\n⏰ The run waits for them until %s.", dateText(at))
		}
		blocks = append(blocks, slackgo.NewSectionBlock(mrkdwn(q.String()), nil, nil))
	}
	if end := endSummary(v); end != "" {
		blocks = append(blocks, slackgo.NewSectionBlock(mrkdwn(end), nil, nil))
	}
	return fallback, blocks
}

// endSummary is how a run ended: its time, tokens and failure.
func endSummary(v *runView) string {
	run := v.run
	if !run.Status.Terminal() {
		return ""
	}
	var b strings.Builder
	if !run.FinishedAt.IsZero() {
		fmt.Fprintf(&b, "Took %s", run.FinishedAt.Sub(run.CreatedAt).Round(time.Second))
	} else {
		b.WriteString("Ended")
	}
	if v.snap.Tokens > 0 {
		fmt.Fprintf(&b, ", %d tokens", v.snap.Tokens)
	}
	if v.snap.CostUSD > 0 {
		fmt.Fprintf(&b, " ($%.4f)", v.snap.CostUSD)
	}
	b.WriteString(".")
	if run.Status != engine.StatusFinished {
		if run.FailureCode != "" {
			fmt.Fprintf(&b, " Failure %s", code(run.FailureCode))
		}
		if run.Error != "" {
			fmt.Fprintf(&b, ": %s", escape(oneLine(run.Error, 500)))
		}
	}
	if names := slices.Sorted(maps.Keys(v.snap.Artifacts)); len(names) > 0 {
		var list []string
		for _, n := range names {
			list = append(list, code(n))
		}
		fmt.Fprintf(&b, "\nPublished: %s.", strings.Join(list, ", "))
	}
	return b.String()
}

// questionText is what a question asks: an agent's question, or a human
// node's instructions.
func questionText(ix *engine.Interaction) string {
	if q := ix.Question(); q != "" {
		return q
	}
	if s, ok := ix.Questions["_instructions"].(string); ok && s != "" {
		return s
	}
	return "input for " + ix.NodeID
}

// options returns the labels a question offers, in order.
func options(ix *engine.Interaction) []string {
	var labels []string
	switch opts := ix.Questions[engine.OptionsKey].(type) {
	case []engine.Option:
		for _, o := range opts {
			labels = append(labels, cmp.Or(o.Label, o.ID))
		}
	case []any:
		for _, o := range opts {
			if m, ok := o.(map[string]any); ok {
				label, _ := m["label"].(string)
				id, _ := m["id"].(string)
				if l := cmp.Or(label, id); l != "" {
					labels = append(labels, l)
				}
			}
		}
	}
	return labels
}

// freeText reports whether a question takes an answer in words besides
// its options (ask_user_async's allow_free_text, true unless refused).
func freeText(ix *engine.Interaction) bool {
	allowed, set := ix.Questions[engine.FreeTextKey].(bool)
	return !set || allowed || len(options(ix)) == 0
}

// isForm reports whether a question is a human node's form, answered
// field by field.
func isForm(ix *engine.Interaction) bool {
	return ix.Kind == engine.KindBlocking && ix.Question() == "" && len(ix.Fields) > 0 &&
		!(len(ix.Fields) == 1 && ix.Fields[0].Name == engine.QuestionKey)
}

// renderQuestion is a question's reply in the run's thread: its short id,
// the text, and the ways to answer; once answered, who answered and
// where; once the run ended, that it was not answered.
func renderQuestion(v *runView, ix *engine.Interaction) (string, []slackgo.Block) {
	q := v.qid(ix)
	text := questionText(ix)
	// The notification's text: Slack reads mentions and links in it too.
	fallback := fmt.Sprintf("Question %s from run %s: %s", q, escape(oneLine(v.run.ID, 100)), escape(oneLine(text, 150)))
	shown, cutText := cut(strings.TrimSpace(text), maxQuestionText)
	var b strings.Builder
	fmt.Fprintf(&b, "*Question %s* · from %s in run %s\n%s", q, code(ix.NodeID), code(v.run.ID), quoteLines(escape(shown)))
	if cutText {
		fmt.Fprintf(&b, "…\n_(cut to fit Slack; the whole question: `iterion runs questions %s`, or the pull request)_", v.run.ID)
	}
	if isForm(ix) {
		b.WriteString("\n*Fields:*")
		for _, f := range ix.Fields {
			desc, _ := ix.Questions[f.Name].(string)
			fmt.Fprintf(&b, "\n• %s (%s)", code(f.Name), escape(f.Type))
			if desc != "" {
				fmt.Fprintf(&b, ": %s", escape(oneLine(desc, 200)))
			}
		}
	}
	body, _ := cut(b.String(), maxSectionText)
	blocks := []slackgo.Block{slackgo.NewSectionBlock(mrkdwn(body), nil, nil)}
	labels := options(ix)
	switch {
	case !ix.Pending():
		blocks = append(blocks, slackgo.NewContextBlock("", mrkdwn(answeredLine(v, ix))))
	case v.run.Status.Terminal():
		title, _ := statusLook(v.run.Status)
		blocks = append(blocks, slackgo.NewContextBlock("", mrkdwn(fmt.Sprintf("⏹️ The run ended (%s) before this question was answered.", strings.ToLower(title)))))
	case !ix.AnswerableOn("slack"):
		blocks = append(blocks, slackgo.NewContextBlock("", mrkdwn(answerElsewhere(v, ix))))
	default:
		blocks = append(blocks, answerActions(ix, labels))
		blocks = append(blocks, slackgo.NewContextBlock("", mrkdwn(howToAnswer(v, ix))))
	}
	return fallback, blocks
}

// answerElsewhere says where a question its workflow keeps off Slack
// (answer_on) is answered: a link to its pull request comment when it has
// one, and no buttons.
func answerElsewhere(v *runView, ix *engine.Interaction) string {
	text := "🔗 This question can be answered only through " + escape(delivery.ViaList(ix.AnswerOn)) + " (its workflow's `answer_on`), not here"
	if id := ix.Posts["github"]; v.prURL != "" && ix.AnswerableOn("github") && id != "" && strings.Trim(id, "0123456789") == "" {
		text += fmt.Sprintf(": <%s#issuecomment-%s|answer it on the pull request>", v.prURL, id)
	} else if v.prURL != "" && ix.AnswerableOn("github") {
		text += fmt.Sprintf(": <%s|answer it on the pull request>", v.prURL)
	}
	return text + "."
}

// answerActions are the buttons of a pending question: one per option
// (a select when they are too many or too long for buttons), "Answer in
// words…" and, for a form, "Fill in the form…". The block's id changes
// with what it shows, as Slack asks of an updated message.
func answerActions(ix *engine.Interaction, labels []string) slackgo.Block {
	var els []slackgo.BlockElement
	fits := len(labels) <= maxButtons
	for _, l := range labels {
		if len([]rune(l)) > maxButtonText {
			fits = false
		}
	}
	switch {
	case isForm(ix):
		els = append(els, slackgo.NewButtonBlockElement(ActionForm, "form", plainText("Fill in the form…", maxButtonText)).WithStyle(slackgo.StylePrimary))
	case len(labels) > 0 && fits:
		for i, l := range labels {
			els = append(els, slackgo.NewButtonBlockElement(ActionOption+strconv.Itoa(i), strconv.Itoa(i), plainText(l, maxButtonText)))
		}
	case len(labels) > 0:
		var opts []*slackgo.OptionBlockObject
		for i, l := range labels[:min(len(labels), maxSelect)] {
			opts = append(opts, slackgo.NewOptionBlockObject(strconv.Itoa(i), plainText(l, maxOptionText), nil))
		}
		els = append(els, slackgo.NewOptionsSelectBlockElement(slackgo.OptTypeStatic, plainText("Pick an answer", 75), ActionSelect, opts...))
	}
	if !isForm(ix) && freeText(ix) {
		els = append(els, slackgo.NewButtonBlockElement(ActionWords, "words", plainText("Answer in words…", maxButtonText)))
	}
	sum := sha256.Sum256([]byte(ix.ID + "\x00" + strings.Join(labels, "\x00")))
	return slackgo.NewActionBlock("iterion/q/"+hex.EncodeToString(sum[:6]), els...)
}

// howToAnswer says how to answer a pending question, by when, and who
// may.
func howToAnswer(v *runView, ix *engine.Interaction) string {
	var parts []string
	if isForm(ix) {
		parts = append(parts, "Fill in the form")
	} else if len(v.open()) > 1 {
		parts = append(parts, fmt.Sprintf("Click an option, or reply in this thread starting with `%s`", v.qid(ix)))
	} else {
		parts = append(parts, "Click an option, or reply in this thread")
	}
	if ix.Kind == engine.KindAsync {
		parts[0] += "; the agent keeps working and reads the answer at its next turn"
	} else {
		parts[0] += "; the run waits for it"
	}
	if at, ok := earliest(v.snap.Gates); ok && ix.Kind == engine.KindAsync {
		parts = append(parts, "⏰ answer by "+dateText(at))
	}
	if v.who != "" {
		parts = append(parts, "who may answer: "+v.who)
	}
	if len(ix.Answerers) > 0 {
		names := make([]string, len(ix.Answerers))
		for i, a := range ix.Answerers {
			names[i] = "GitHub @" + escape(a)
		}
		parts = append(parts, "and only "+strings.Join(names, ", ")+" (the workflow's `answerers`)")
	}
	return strings.Join(parts, " · ") + ". The first answer anywhere (Slack, the pull request, the CLI) wins."
}

// answeredLine says who answered a question, where, and what.
func answeredLine(v *runView, ix *engine.Interaction) string {
	return fmt.Sprintf("✅ Answered by %s via %s: *%s*", v.name(ix.AnsweredBy, ix.Via), viaWords(ix.Via), escape(oneLine(answerText(ix), 500)))
}

// renderAnswered is the thread reply that says a question was answered,
// which notifies the thread (an edit notifies nobody).
func renderAnswered(v *runView, ix *engine.Interaction) string {
	return fmt.Sprintf("✅ *%s* answered by %s via %s: *%s*", v.qid(ix), v.name(ix.AnsweredBy, ix.Via), viaWords(ix.Via), escape(oneLine(answerText(ix), 500)))
}

// answerText is an answer as people read it: the text, or the form's
// fields.
func answerText(ix *engine.Interaction) string {
	if s := ix.Answer(); s != "" {
		return s
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(ix.Answers)) {
		parts = append(parts, fmt.Sprintf("%s: %v", k, ix.Answers[k]))
	}
	return strings.Join(parts, ", ")
}

// viaWords names the channel an answer or a start came through, as every
// channel says it, made safe for Slack's mrkdwn.
func viaWords(via string) string { return escape(oneLine(delivery.ViaWords(via), 40)) }

// dateText shows a time in Slack's date syntax, which every reader sees
// in their own time zone, with UTC for clients that cannot.
func dateText(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}

func earliest(m map[string]time.Time) (time.Time, bool) {
	var at time.Time
	for _, t := range m {
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	return at, !at.IsZero()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
