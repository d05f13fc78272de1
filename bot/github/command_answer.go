package github

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/bot/repoconfig"
	"github.com/iterion-bot/iterion/engine"
)

// questionReader is what answering reads: a PR's runs, their questions,
// and the PR's short question ids.
type questionReader interface {
	refRuns
	Interactions(ctx context.Context, runID string) ([]*engine.Interaction, error)
	Interaction(ctx context.Context, runID, id string) (*engine.Interaction, error)
	ShortRef(ctx context.Context, scope string, n int) (runID, ixID string, err error)
}

// answerer records answers (the engine's door).
type answerer interface {
	Answer(ctx context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error)
}

// answerCommand answers `/iterion answer Q TEXT` and quote replies: it
// records the answer to a question of this PR, from someone with write
// permission or listed under answerers. An answer taken gets 👍.
type answerCommand struct {
	perms     Permissions
	questions questionReader
	answers   answerer
}

func (a *answerCommand) do(ctx context.Context, req request, c Command) (outcome, error) {
	if refusal, err := a.mayAnswer(ctx, req, c.QuestionID); err != nil || refusal != "" {
		return outcome{text: refusal}, err
	}
	return a.answer(ctx, req.t, c.QuestionID, c.Text)
}

// notAnswerer is the polite refusal of an answer from someone who may
// not answer.
func notAnswerer(t Trigger) string {
	return fmt.Sprintf("thank you, but only people with write permission on %s/%s, or listed under `answerers` in %s, can answer iterion's questions, so this answer was not recorded.",
		t.Owner, t.Repo, repoconfig.FileName)
}

// quoteReply answers the question a comment quotes, with the rest of the
// comment as the answer. An answer taken gets 👍 and no words.
func (a *answerCommand) quoteReply(ctx context.Context, req request, r Reply) (outcome, error) {
	t := req.t
	if len(r.Questions) > 1 {
		var ids []string
		for _, n := range r.Questions {
			ids = append(ids, fmt.Sprintf("Q%d", n))
		}
		return say("your comment quotes several questions (%s), so I cannot tell which one it answers. Quote only one, or answer each with `/iterion answer %s <your answer>`.", strings.Join(ids, ", "), ids[0]), nil
	}
	qid := fmt.Sprintf("Q%d", r.Questions[0])
	if r.Text == "" {
		return say("your comment quotes question %s but holds no answer; write the answer below the quote.", qid), nil
	}
	if refusal, err := a.mayAnswer(ctx, req, qid); err != nil || refusal != "" {
		return outcome{text: refusal}, err
	}
	// The quote must be of the bot's question: anyone can write a comment
	// that looks like one, for a maintainer to answer by mistake.
	ix, err := a.findQuestion(ctx, t, qid)
	if err != nil {
		return outcome{}, err
	}
	if ix != nil && ix.Pending() && !QuotesQuestion(r.Quoted, questionText(ix)) {
		return say("your comment quotes a %s that is not iterion's question %s (%s), so nothing was recorded. Quote the bot's question comment, or answer with `/iterion answer %s <your answer>`.",
			"\"Question "+qid+"\"", qid, plain(strconv.Quote(oneLine(questionText(ix), 80)), 200), qid), nil
	}
	out, err := a.answer(ctx, t, qid, r.Text)
	if out.react != "" {
		out.text = "" // the 👍 says it
	}
	return out, err
}

// mayAnswer is mayChange for an answer to question id, which the people
// it was escalated to may give too.
func (a *answerCommand) mayAnswer(ctx context.Context, req request, id string) (string, error) {
	refusal, err := mayChange(ctx, a.perms, req.t, req.cfg, CmdAnswer)
	if err != nil || refusal == "" {
		return refusal, err
	}
	ix, err := a.findQuestion(ctx, req.t, id)
	if err != nil {
		return "", err
	}
	if ix != nil && ix.Pending() && ix.EscalatedTo(req.t.Sender) {
		return "", nil
	}
	return refusal, nil
}

// findQuestion finds a question of this PR by its short id (Q3) or its
// interaction id. Only this PR's runs are searched: a comment elsewhere
// cannot answer another repository's question.
func (a *answerCommand) findQuestion(ctx context.Context, t Trigger, id string) (*engine.Interaction, error) {
	if n, ok := ShortQuestionID(id); ok {
		runID, ixID, err := a.questions.ShortRef(ctx, PRScope(t.Owner+"/"+t.Repo, t.PR), n)
		if errors.Is(err, engine.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return a.questions.Interaction(ctx, runID, ixID)
	}
	runs, err := prRuns(ctx, a.questions, t)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		ixs, err := a.questions.Interactions(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		for _, ix := range ixs {
			if ix.ID == id {
				return ix, nil
			}
		}
	}
	return nil, nil
}

// taken is the outcome of an answer recorded.
func taken(format string, args ...any) outcome {
	return outcome{text: fmt.Sprintf(format, args...), react: "+1"}
}

// alreadyAnswered is the refusal of an answer to a question answered
// before it.
func alreadyAnswered(id, by, via string) outcome {
	return say("question `%s` was already answered by %s via %s; your answer was not used.", id, inert(cmp.Or(by, "someone")), inert(delivery.ViaWords(via)))
}

// answer records text as t's sender's answer to question id.
func (a *answerCommand) answer(ctx context.Context, t Trigger, id, text string) (outcome, error) {
	ix, err := a.findQuestion(ctx, t, id)
	if err != nil {
		return outcome{}, err
	}
	if ix == nil || ix.Kind == engine.KindAwait {
		return say("no question `%s` on %s; `/iterion status` lists the open ones.", inert(id), t.here()), nil
	}
	text = strings.TrimSpace(text)
	if labels := options(ix); len(labels) > 0 {
		text = pickOption(text, labels)
	}
	if !ix.Pending() {
		// The same answer met again (a comment both delivered and found by
		// the start-up reconciliation) is taken, not refused; a different
		// one is not used, even from the same person.
		if ix.Via == "github" && ix.AnsweredBy == t.Sender && (ix.Kind == engine.KindBlocking || ix.Answer() == text) {
			// (A form's answers are stored coerced; a second form from the
			// same person in the same breath is this one met again.)
			return taken("answer to `%s` recorded.", id), nil
		}
		return alreadyAnswered(id, ix.AnsweredBy, ix.Via), nil
	}
	if ix.Kind == engine.KindBlocking {
		return a.resume(ctx, t, ix, id, text)
	}
	_, err = a.answers.Answer(ctx, engine.AnswerRequest{RunID: ix.RunID, InteractionID: ix.ID, Text: text, By: t.Sender, Via: "github"})
	if o, ok := workflowRefusal(err, id, t.Sender); ok {
		return o, nil
	}
	var already *engine.AlreadyAnsweredError
	switch {
	case errors.As(err, &already):
		// Answered between the look above and now: the same answer from the
		// same person (the comment met twice at start-up) is taken.
		if already.Via == "github" && already.AnsweredBy == t.Sender {
			if again, gerr := a.questions.Interaction(ctx, ix.RunID, ix.ID); gerr == nil && again.Answer() == text {
				return taken("answer to `%s` recorded.", id), nil
			}
		}
		return alreadyAnswered(id, already.AnsweredBy, already.Via), nil
	case errors.Is(err, engine.ErrRunEnded):
		return say("run `%s` has ended; question `%s` can no longer be answered.", ix.RunID, id), nil
	case errors.Is(err, engine.ErrNotAsync), errors.Is(err, engine.ErrEmptyAnswer):
		return outcome{text: err.Error()}, nil
	case err != nil:
		return outcome{}, err
	}
	return taken("answer to `%s` recorded; the agent reads it at its next turn.", id), nil
}

// resume answers a blocking question (a human node's form, an agent's
// ask_user), which continues the paused run.
func (a *answerCommand) resume(ctx context.Context, t Trigger, ix *engine.Interaction, id, text string) (outcome, error) {
	req := engine.AnswerRequest{RunID: ix.RunID, InteractionID: ix.ID, By: t.Sender, Via: "github", Text: text}
	if fields := formFields(ix); len(fields) > 0 {
		values, rest := ParseForm(text, fields)
		req.Text = ""
		if len(values) == 0 && len(fields) == 1 {
			req.Text = rest // a one-field form answered with a bare text
		} else {
			req.Fields = map[string]any{}
			for k, v := range values {
				req.Fields[k] = v
			}
		}
	}
	_, err := a.answers.Answer(ctx, req)
	if o, ok := workflowRefusal(err, id, t.Sender); ok {
		return o, nil
	}
	var bad *engine.InvalidAnswerError
	var notWaiting *engine.NotWaitingError
	var already *engine.AlreadyAnsweredError
	switch {
	case errors.As(err, &bad):
		return say("your answer to `%s` was not taken: %s. Write one line per field, `field: value`.", inert(id), plain(bad.Error(), 300)), nil
	case errors.As(err, &already):
		return alreadyAnswered(id, already.AnsweredBy, already.Via), nil
	case errors.As(err, &notWaiting):
		return say("run `%s` is %s, not waiting for `%s`; your answer was not used.", ix.RunID, notWaiting.Status, id), nil
	case errors.Is(err, engine.ErrRunEnded):
		return say("run `%s` has ended; question `%s` can no longer be answered.", ix.RunID, id), nil
	case errors.Is(err, engine.ErrWorkflowChanged):
		return say("run `%s` cannot continue: its workflow changed since it started.", ix.RunID), nil
	case err != nil:
		return outcome{}, err
	}
	return taken("answer to `%s` recorded; run `%s` continues.", id, ix.RunID), nil
}

// workflowRefusal is the reply to an answer the question's workflow
// refuses: from a channel its answer_on leaves out, or from someone not
// among its answerers.
func workflowRefusal(err error, id, sender string) (outcome, bool) {
	var offChannel *engine.ChannelRefusedError
	var notAnswerer *engine.AnswererRefusedError
	switch {
	case errors.As(err, &offChannel):
		return say("question `%s` cannot be answered on GitHub: its workflow lets it be answered only through %s (`answer_on`), so this answer was not recorded.", inert(id), delivery.ViaList(offChannel.AnswerOn)), true
	case errors.As(err, &notAnswerer):
		names := make([]string, len(notAnswerer.Answerers))
		for i, a := range notAnswerer.Answerers {
			names[i] = "`" + inert(a) + "`"
		}
		return say("thank you, but only %s may answer question `%s` (its workflow's `answerers`), so this answer from `%s` was not recorded.", strings.Join(names, ", "), inert(id), inert(sender)), true
	}
	return outcome{}, false
}

// pickOption turns a bare option number or label into the option's label;
// other text is the answer as written.
func pickOption(text string, labels []string) string {
	if n, err := strconv.Atoi(strings.TrimSuffix(text, ".")); err == nil && n >= 1 && n <= len(labels) {
		return labels[n-1]
	}
	for _, l := range labels {
		if strings.EqualFold(l, text) {
			return l
		}
	}
	return text
}
