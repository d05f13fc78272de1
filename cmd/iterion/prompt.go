package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
)

// askPause asks, line by line, for the answers of the blocking pause ix of
// node n (nil when the workflow no longer has it): each field of a human
// node's form, or the answer to an agent's ask_user. An answer that does
// not fit its field is refused at once with what the field accepts, and
// the field asked again, so a typo does not cost the whole form. read
// prints a prompt and returns the line typed, or false when the input ends or ctx ends (Ctrl-C): askPause then
// returns errNoAnswer and the run stays paused.
func askPause(ctx context.Context, read func(ctx context.Context, prompt string) (string, bool), out io.Writer, ix *engine.Interaction, n *dsl.Node) (map[string]string, error) {
	if s, ok := ix.Questions["_instructions"].(string); ok && strings.TrimSpace(s) != "" {
		fmt.Fprintf(out, "\n%s\n\n", termText(strings.TrimSpace(s)))
	}
	answers := map[string]string{}
	ask := func(key, label string, check func(string) error) error {
		for {
			line, ok := read(ctx, fmt.Sprintf("%s [%s]: ", termLine(key), label))
			if !ok {
				return errNoAnswer
			}
			if err := check(line); err != nil {
				fmt.Fprintf(out, "  %s; try again\n", termLine(err.Error()))
				continue
			}
			answers[key] = line
			return nil
		}
	}
	if q, ok := ix.Questions[engine.QuestionKey]; ok {
		fmt.Fprintf(out, "the agent asks: %s\n", termText(fmt.Sprint(q)))
		label := "your answer"
		if opts := optionLabels(ix.Questions[engine.OptionsKey]); len(opts) > 0 {
			label = "for example " + strings.Join(opts, ", ")
		}
		err := ask(engine.QuestionKey, label, func(s string) error {
			if strings.TrimSpace(s) == "" {
				return fmt.Errorf("an answer is required")
			}
			return nil
		})
		return answers, err
	}
	if n == nil || n.Output == nil {
		for _, k := range formFields(ix.Questions) {
			if err := ask(k, termLine(fmt.Sprint(ix.Questions[k])), func(string) error { return nil }); err != nil {
				return nil, err
			}
		}
		return answers, nil
	}
	for _, f := range n.Output.Fields {
		err := ask(f.Name, accepts(f), func(s string) error {
			_, err := engine.CheckAnswer(s, *f)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return answers, nil
}

// accepts says what a field takes, as the prompt shows it.
func accepts(f *dsl.Field) string {
	if len(f.Enum) > 0 {
		return "one of: " + strings.Join(f.Enum, ", ")
	}
	if f.Type.List {
		return f.Type.String() + ": items separated by commas, or a JSON list"
	}
	switch f.Type.Kind {
	case dsl.TypeBool:
		return "yes or no"
	case dsl.TypeInt:
		return "a whole number"
	case dsl.TypeFloat:
		return "a number"
	case dsl.TypeJSON:
		return "JSON, or text"
	}
	return "text"
}
