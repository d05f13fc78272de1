package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// What the CLI prints about a run as text: the outcome `iterion run` and
// `resume` end with, and `runs show`. Every piece of text that comes from
// the run goes through termLine or termText.

// outputLines is how many lines of an output are printed before it is cut.
const outputLines = 20

// command is an iterion command line that the run's advice names, on
// the store it was read from.
func (v *runView) command(format string, args ...any) string {
	return "iterion " + fmt.Sprintf(format, args...) + v.store.arg
}

// writeOutcome prints how a run that this command executed stopped, what it
// waits for, and the commands that continue it.
func writeOutcome(w io.Writer, v *runView) {
	id := termLine(v.ID)
	switch {
	case v.Status == engine.StatusFinished:
		fmt.Fprintf(w, "run %s finished\n", id)
		if v.Output != nil && len(v.Output.Output) > 0 {
			fmt.Fprintf(w, "output of %s:\n", termLine(v.Output.Node))
			writeCapped(w, "  ", valueLines(v.Output.Output), outputLines, "the whole output: "+v.command("runs show %s --json", id))
		}
		return
	case v.Status == engine.StatusPausedWaitingHuman && v.Pause == nil:
		// Its pause is not in its events (a store from before they were).
		fmt.Fprintf(w, "run %s paused: its questions: %s\n", id, v.command("runs questions %s", id))
		return
	case v.Status == engine.StatusPausedWaitingHuman:
		// writeNext says where it paused.
	default:
		fmt.Fprintf(w, "run %s %s%s", id, v.Status, stoppedIn(v))
		if v.FailureCode != "" {
			fmt.Fprintf(w, " [%s]", termLine(v.FailureCode))
		}
		if v.Error != "" {
			fmt.Fprintf(w, ": %s", termLine(v.Error))
		}
		fmt.Fprintln(w)
	}
	writeNext(w, v)
}

// stoppedIn is " in node N" for a run that stopped while N executed.
func stoppedIn(v *runView) string {
	if len(v.Nodes) == 0 {
		return ""
	}
	return " in node " + nodeList(v.Nodes)
}

func nodeList(nodes []activeNode) string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = termLine(n.ID)
	}
	return strings.Join(slices.Compact(names), ", ")
}

// writeNext prints what the run waits for and the commands that go on
// from there: answering its pause or its open questions, resuming it.
func writeNext(w io.Writer, v *runView) {
	id := termLine(v.ID)
	if p := v.Pause; p != nil && v.Status == engine.StatusPausedWaitingHuman {
		node := termLine(p.Node)
		switch {
		case p.Kind == engine.KindAwait:
			fmt.Fprintf(w, "run %s paused at node %s, waiting for the answers to its questions", id, node)
			if at, err := time.Parse(time.RFC3339Nano, p.Deadline); err == nil {
				fmt.Fprintf(w, " until %s", at.Local().Format("2006-01-02 15:04:05"))
			}
			fmt.Fprintln(w)
			writeQuestions(w, v)
			if len(v.Questions) == 0 {
				// Answered while nothing ran: the engine resumes such a run
				// only when an answer comes.
				fmt.Fprintf(w, "they are all answered: continue it with: %s\n", v.command("resume --run-id %s", id))
			} else {
				fmt.Fprintln(w, "the last answer continues the run")
			}
		case p.Questions[engine.QuestionKey] != nil:
			fmt.Fprintf(w, "run %s paused at node %s: the agent asks\n", id, node)
			writeCapped(w, "  ", textLines(fmt.Sprint(p.Questions[engine.QuestionKey])), outputLines, "the whole question: "+v.command("runs show %s --json", id))
			if opts := optionLabels(p.Questions[engine.OptionsKey]); len(opts) > 0 {
				fmt.Fprintf(w, "  options: %s\n", strings.Join(opts, ", "))
			}
			fmt.Fprintf(w, "answer it with: %s\n", v.command("runs answer %s %s \"…\"", id, termLine(p.InteractionID)))
		default:
			fmt.Fprintf(w, "run %s paused at node %s, waiting for the answers of %s:\n", id, node, termLine(p.InteractionID))
			if s, ok := p.Questions["_instructions"].(string); ok && strings.TrimSpace(s) != "" {
				writeCapped(w, "  ", textLines(s), outputLines, "the whole text: "+v.command("runs show %s --json", id))
			}
			fields := formFields(p.Questions)
			if len(fields) > 0 {
				fmt.Fprintln(w, "fields:")
			}
			var args []string
			for _, f := range fields {
				fmt.Fprintf(w, "  %s: %s\n", termLine(f), termLine(fmt.Sprint(p.Questions[f])))
				args = append(args, shellWord(f)+"=…")
			}
			fmt.Fprintf(w, "answer with: %s\n", v.command("runs answer %s %s %s", id, termLine(p.InteractionID), strings.Join(args, " ")))
		}
		return
	}
	if len(v.Questions) > 0 {
		writeQuestions(w, v)
	}
	switch {
	case v.Interrupted != nil:
		writeRecover(w, v)
	case v.Status.Resumable() && v.Status != engine.StatusPausedWaitingHuman:
		again := ""
		if len(v.Nodes) > 0 {
			again = " (node " + nodeList(v.Nodes) + " runs again)"
		}
		if v.Status == engine.StatusFailedResumable {
			fmt.Fprintf(w, "once the cause is fixed, continue it with: %s%s\n", v.command("resume --run-id %s", id), again)
		} else {
			fmt.Fprintf(w, "continue it with: %s%s\n", v.command("resume --run-id %s", id), again)
		}
	}
}

// writeQuestions lists the open async questions and how to answer each.
func writeQuestions(w io.Writer, v *runView) {
	if len(v.Questions) == 0 {
		return
	}
	fmt.Fprintln(w, "open questions:")
	for _, ix := range v.Questions {
		fmt.Fprintf(w, "  %s (from %s): %s\n", termLine(ix.ID), termLine(ix.NodeID), termLine(ix.Question()))
		if opts := optionLabels(ix.Questions[engine.OptionsKey]); len(opts) > 0 {
			fmt.Fprintf(w, "    options: %s\n", strings.Join(opts, ", "))
		}
	}
	fmt.Fprintln(w, "answer each with:")
	for _, ix := range v.Questions {
		fmt.Fprintf(w, "  %s\n", v.command("runs answer %s %s \"…\"", termLine(v.ID), termLine(ix.ID)))
	}
}

// writeRecover says how an interrupted run continues.
func writeRecover(w io.Writer, v *runView) {
	in := v.Interrupted
	if in.Holder != 0 {
		fmt.Fprintf(w, "the store is held by pid %d: once it exits, continue the run with: %s\n", in.Holder, termLine(in.Recover))
		return
	}
	again := ""
	if len(v.Nodes) > 0 {
		again = " (node " + nodeList(v.Nodes) + " runs again)"
	}
	fmt.Fprintf(w, "continue it with: %s%s, or every interrupted run with: %s\n", termLine(in.Recover), again, v.command("runs recover"))
}

// statusLabel is the status a person reads: the stored one, but
// "interrupted (…)" for a run whose owner is gone.
func statusLabel(v *runView) string {
	if v.Interrupted == nil {
		return string(v.Status)
	}
	return "interrupted (" + goneOwner(v.Interrupted) + ")"
}

func goneOwner(in *interruption) string {
	if in.OwnerPID == 0 {
		return "its owner process is gone"
	}
	return fmt.Sprintf("owner pid %d is gone", in.OwnerPID)
}

// writeShow prints everything `runs show` says about a run.
func writeShow(w io.Writer, v *runView) {
	id := termLine(v.ID)
	fmt.Fprintf(w, "run %s: workflow %s", id, termLine(v.Workflow))
	if v.File != "" {
		fmt.Fprintf(w, " (%s)", termLine(v.File))
	}
	fmt.Fprintln(w)
	status := statusLabel(v)
	if v.Interrupted != nil {
		status += ", stored as running"
	}
	fmt.Fprintf(w, "status: %s\n", status)
	if v.FailureCode != "" || v.Error != "" {
		fmt.Fprintf(w, "error: [%s] %s\n", termLine(v.FailureCode), termLine(v.Error))
	}
	switch {
	case v.Pause != nil:
		fmt.Fprintf(w, "node: %s (paused)\n", termLine(v.Pause.Node))
	case len(v.Nodes) > 0 && v.Status == engine.StatusRunning && v.Interrupted == nil:
		fmt.Fprintf(w, "node: %s (running)\n", nodeKinds(v.Nodes))
	case len(v.Nodes) > 0:
		fmt.Fprintf(w, "node: %s, stopped mid-node: it runs again on resume\n", nodeKinds(v.Nodes))
	}
	fmt.Fprintf(w, "created: %s, updated: %s\n", v.CreatedAt.Local().Format("2006-01-02 15:04:05"), v.UpdatedAt.Local().Format("2006-01-02 15:04:05"))
	if t := v.Trigger; t.Source != "" {
		fmt.Fprintf(w, "started from: %s", termLine(t.Source))
		if t.Ref != "" {
			fmt.Fprintf(w, " (%s)", termLine(t.Ref))
		}
		if t.Actor != "" {
			fmt.Fprintf(w, ", by %s", termLine(t.Actor))
		}
		fmt.Fprintln(w)
	}
	writeNext(w, v)
	if len(v.order) > 0 {
		fmt.Fprintln(w, "outputs:")
		for _, n := range v.order {
			fmt.Fprintf(w, "  %s:\n", termLine(n))
			writeCapped(w, "    ", valueLines(v.Outputs[n]), outputLines, "the whole output: "+v.command("runs show %s --json", id))
		}
	}
	if len(v.Artifacts) > 0 {
		fmt.Fprintln(w, "artifacts:")
		for _, name := range slices.Sorted(maps.Keys(v.Artifacts)) {
			a := v.Artifacts[name]
			fmt.Fprintf(w, "  %s: version %d, from %s (print it with: %s)\n", termLine(name), a.Version, termLine(a.Node), v.command("runs artifact %s %s", id, shellWord(name)))
		}
	}
}

func nodeKinds(nodes []activeNode) string {
	var parts []string
	for _, n := range nodes {
		s := termLine(n.ID)
		if n.Kind != "" {
			s += " (" + termLine(n.Kind) + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// formFields are the fields of a form's questions: its keys but the
// underscored ones (instructions, options), sorted.
func formFields(questions map[string]any) []string {
	var fields []string
	for k := range questions {
		if !strings.HasPrefix(k, "_") {
			fields = append(fields, k)
		}
	}
	slices.Sort(fields)
	return fields
}

// optionLabels are the offered options of a question, "id (label)".
func optionLabels(v any) []string {
	var out []string
	switch opts := v.(type) {
	case []engine.Option:
		for _, o := range opts {
			out = append(out, optionLabel(o.ID, o.Label))
		}
	case []any:
		for _, o := range opts {
			if m, ok := o.(map[string]any); ok {
				id, _ := m["id"].(string)
				label, _ := m["label"].(string)
				out = append(out, optionLabel(id, label))
			}
		}
	}
	return out
}

func optionLabel(id, label string) string {
	if label == "" || label == id {
		return termLine(id)
	}
	return termLine(id) + " (" + termLine(label) + ")"
}

// valueLines renders an output as lines: "field: value", a text of several
// lines as "field: |" and its lines indented, other values as JSON.
func valueLines(m map[string]any) []string {
	var lines []string
	// The engine's stamps (_tokens, _cost_usd) after the node's own fields.
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		stamp := func(k string) int {
			if strings.HasPrefix(k, "_") {
				return 1
			}
			return 0
		}
		return cmp.Or(cmp.Compare(stamp(a), stamp(b)), strings.Compare(a, b))
	})
	for _, k := range keys {
		key := termLine(k)
		switch x := m[k].(type) {
		case string:
			if !strings.Contains(x, "\n") {
				lines = append(lines, key+": "+termLine(x))
				continue
			}
			lines = append(lines, key+": |")
			for _, l := range textLines(x) {
				lines = append(lines, "  "+l)
			}
		default:
			b, err := json.Marshal(x)
			if err != nil {
				b = []byte(fmt.Sprint(x))
			}
			lines = append(lines, key+": "+termLine(string(b)))
		}
	}
	return lines
}

// textLines splits a text into lines safe to print.
func textLines(s string) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = termLine(l)
	}
	return lines
}

// writeCapped prints at most max lines, each after indent, then how many
// were left out and where to read them.
func writeCapped(w io.Writer, indent string, lines []string, max int, whole string) {
	for i, l := range lines {
		if i == max {
			more := len(lines) - max
			word := "lines"
			if more == 1 {
				word = "line"
			}
			fmt.Fprintf(w, "%s… %d more %s (%s)\n", indent, more, word, whole)
			return
		}
		fmt.Fprintln(w, strings.TrimRight(indent+l, " "))
	}
}

// shellWord quotes s for a shell when it needs it.
func shellWord(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(termLine(s), "'", `'\''`) + "'"
}
