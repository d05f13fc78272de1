package slack

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	slackgo "github.com/slack-go/slack"

	"github.com/iterion-bot/iterion/engine"
)

// modalMeta is what an answer modal carries in its private_metadata: the
// question it answers and its message. Slack gives it back with the
// submission; it holds no secret.
type modalMeta struct {
	Run     string `json:"run"`
	Ix      string `json:"ix"`
	Channel string `json:"ch"`
	TS      string `json:"ts"`
	// Thread is the run's thread, where the person is answered.
	Thread string `json:"th,omitempty"`
}

// Block and action ids of the answer modal's inputs: the one text box,
// or a field of a form (blockField + the field's name).
const (
	blockAnswer = "answer"
	blockField  = "f/"
	actionValue = "v"
)

// answerModal is the modal a question's "Answer in words…" or "Fill in
// the form…" opens: a text box, or one input per field of the form, each
// of its type.
func answerModal(q string, ix *engine.Interaction, meta modalMeta) slackgo.ModalViewRequest {
	shown, cutText := cut(strings.TrimSpace(questionText(ix)), maxQuestionText)
	head := "*" + q + "*\n" + quoteLines(escape(shown))
	if cutText {
		head += "…"
	}
	blocks := []slackgo.Block{slackgo.NewSectionBlock(mrkdwn(head), nil, nil)}
	if isForm(ix) {
		for _, f := range ix.Fields {
			desc, _ := ix.Questions[f.Name].(string)
			var hint *slackgo.TextBlockObject
			if desc != "" {
				hint = plainText(desc, 2000)
			}
			label := plainText(fmt.Sprintf("%s (%s)", f.Name, f.Type), 2000)
			blocks = append(blocks, slackgo.NewInputBlock(blockField+f.Name, label, hint, fieldInput(f)))
		}
	} else {
		input := slackgo.NewPlainTextInputBlockElement(plainText("Your answer", 150), actionValue).WithMultiline(true).WithMaxLength(3000)
		var hint *slackgo.TextBlockObject
		if labels := options(ix); len(labels) > 0 {
			hint = plainText("Or an option's number or label: "+strings.Join(labels, ", "), 2000)
		}
		blocks = append(blocks, slackgo.NewInputBlock(blockAnswer, plainText("Your answer", 2000), hint, input))
	}
	raw, _ := json.Marshal(meta) // cannot fail: strings
	return slackgo.ModalViewRequest{
		Type: slackgo.VTModal, CallbackID: CallbackID, PrivateMetadata: string(raw),
		Title:  plainText("Answer "+q, 24),
		Submit: plainText("Answer", 24), Close: plainText("Cancel", 24),
		Blocks: slackgo.Blocks{BlockSet: blocks},
	}
}

// fieldInput is the input of a form's field, typed from its schema: a
// yes/no or an enum's values to pick from, a number, or text.
func fieldInput(f engine.FormField) slackgo.BlockElement {
	pick := func(values ...string) slackgo.BlockElement {
		var opts []*slackgo.OptionBlockObject
		for _, v := range values[:min(len(values), maxSelect)] {
			opts = append(opts, slackgo.NewOptionBlockObject(v, plainText(v, maxOptionText), nil))
		}
		return slackgo.NewOptionsSelectBlockElement(slackgo.OptTypeStatic, plainText("Choose", 150), actionValue, opts...)
	}
	switch {
	case f.Type == "bool":
		return pick("yes", "no")
	case len(f.Enum) > 0:
		return pick(f.Enum...)
	case f.Type == "int":
		return slackgo.NewNumberInputBlockElement(plainText("A whole number", 150), actionValue, false)
	case f.Type == "float":
		return slackgo.NewNumberInputBlockElement(plainText("A number", 150), actionValue, true)
	case f.Type == "string[]":
		return slackgo.NewPlainTextInputBlockElement(plainText("Comma-separated values", 150), actionValue).WithMultiline(true)
	case f.Type == "json":
		return slackgo.NewPlainTextInputBlockElement(plainText("JSON, or plain text", 150), actionValue).WithMultiline(true)
	}
	return slackgo.NewPlainTextInputBlockElement(plainText("", 150), actionValue).WithMultiline(true).WithMaxLength(3000)
}

// answeredModal is the modal a click opens on a question no longer
// waiting: who answered it, or that its run ended.
func answeredModal(q, why string) slackgo.ModalViewRequest {
	return slackgo.ModalViewRequest{
		Type: slackgo.VTModal, Title: plainText(q, 24), Close: plainText("OK", 24),
		Blocks: slackgo.Blocks{BlockSet: []slackgo.Block{slackgo.NewSectionBlock(mrkdwn(why), nil, nil)}},
	}
}

// submitted reads an answer modal's submission: the text, or the form's
// fields, as the person gave them.
func submitted(ix *engine.Interaction, state *slackgo.ViewState) (text string, fields map[string]any) {
	value := func(block string) (string, bool) {
		if state == nil {
			return "", false
		}
		a, ok := state.Values[block][actionValue]
		if !ok {
			return "", false
		}
		if a.SelectedOption.Value != "" {
			return a.SelectedOption.Value, true
		}
		return a.Value, true
	}
	if !isForm(ix) {
		text, _ = value(blockAnswer)
		return strings.TrimSpace(text), nil
	}
	fields = map[string]any{}
	for _, f := range ix.Fields {
		if v, ok := value(blockField + f.Name); ok && strings.TrimSpace(v) != "" {
			fields[f.Name] = v
		}
	}
	return "", fields
}

// modalErrors are the refusals of a submission, by input block, as
// Slack shows them under each input (response_action: errors). A field
// the modal has no input for is said at the first input.
func modalErrors(ix *engine.Interaction, bad *engine.InvalidAnswerError) map[string]string {
	out := map[string]string{}
	first := blockAnswer
	if isForm(ix) {
		first = blockField + ix.Fields[0].Name
	}
	for _, p := range bad.Problems {
		block := first
		if isForm(ix) && slices.ContainsFunc(ix.Fields, func(f engine.FormField) bool { return f.Name == p.Field }) {
			block = blockField + p.Field
		}
		msg := problemText(p)
		if prev, ok := out[block]; ok {
			msg = prev + " " + msg
		}
		out[block] = oneLine(msg, 150)
	}
	return out
}

// problemText says what is wrong with one field, for the person at the
// modal.
func problemText(p engine.AnswerProblem) string {
	switch p.Kind {
	case engine.ProblemMissing:
		if p.Field == engine.QuestionKey {
			return "Write your answer."
		}
		return fmt.Sprintf("Give a value (%s).", p.Type)
	case engine.ProblemUnknown:
		return fmt.Sprintf("%s is not a field of this form.", p.Field)
	}
	return p.Detail
}
