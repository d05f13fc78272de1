package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/engine"
)

// runsAPI is what the runs commands need, served by a live owner's API or
// by the store opened directly.
type runsAPI interface {
	Runs(ctx context.Context, f engine.RunFilter) ([]*engine.Run, error)
	Run(ctx context.Context, id string) (*engine.Run, error)
	Events(ctx context.Context, id string, after int64, limit int) ([]engine.Event, error)
	// WaitEvents is Events held by a live owner, when there are none, until
	// the run changes (an event, a status) or wait passes. Without an
	// owner nothing can change the run: it answers at once.
	WaitEvents(ctx context.Context, id string, after int64, limit int, wait time.Duration) ([]engine.Event, error)
	Pending(ctx context.Context, id string) ([]*engine.Interaction, error)
	// Interactions lists every question of a run, answered or not.
	Interactions(ctx context.Context, id string) ([]*engine.Interaction, error)
	Answer(ctx context.Context, req engine.AnswerRequest) (resumed bool, err error)
	Cancel(ctx context.Context, id string) (bool, error)
	// wait waits for the runs an answer resumed in this process.
	wait(ctx context.Context) error
	// live reports whether a process executing runs answers.
	live() bool
}

// ownerAPI adapts the owner's client.
type ownerAPI struct{ *storeAccess }

func (a ownerAPI) Runs(ctx context.Context, f engine.RunFilter) ([]*engine.Run, error) {
	return a.client.Runs(ctx, f)
}
func (a ownerAPI) Run(ctx context.Context, id string) (*engine.Run, error) {
	return a.client.Run(ctx, id)
}
func (a ownerAPI) Events(ctx context.Context, id string, after int64, limit int) ([]engine.Event, error) {
	return a.client.Events(ctx, id, after, limit, 0)
}
func (a ownerAPI) WaitEvents(ctx context.Context, id string, after int64, limit int, wait time.Duration) ([]engine.Event, error) {
	return a.client.Events(ctx, id, after, limit, wait)
}
func (a ownerAPI) Pending(ctx context.Context, id string) ([]*engine.Interaction, error) {
	return a.client.Pending(ctx, id)
}

// Interactions are the pending ones: the owner's API lists no others.
func (a ownerAPI) Interactions(ctx context.Context, id string) ([]*engine.Interaction, error) {
	return a.client.Pending(ctx, id)
}

// Answer sends only the answer: the owner records it as this process's OS
// user via cli, whatever req says.
func (a ownerAPI) Answer(ctx context.Context, req engine.AnswerRequest) (bool, error) {
	res, err := a.client.Answer(ctx, req.RunID, req.InteractionID, api.AnswerBody{Answer: req.Text, Answers: req.Fields})
	if err != nil {
		return false, err
	}
	return res.Resumed, nil
}
func (a ownerAPI) Cancel(ctx context.Context, id string) (bool, error) {
	return a.client.Cancel(ctx, id)
}
func (ownerAPI) wait(context.Context) error { return nil } // the owner executes them
func (ownerAPI) live() bool                 { return true }

// directAPI reads and writes the store itself, when nobody owns it; its
// engine, made when a command needs one, resumes what an answer releases.
type directAPI struct {
	*storeAccess
	app    *App
	dir    string
	stderr io.Writer
	eng    *engine.Engine
}

// engine makes the engine over the store, at the first call; the App's
// Close stops it before the store closes.
func (a *directAPI) engine() (*engine.Engine, error) {
	if a.eng != nil {
		return a.eng, nil
	}
	prog := &progress{out: a.stderr}
	opts, err := a.app.cliEngineOptions(prog.event, "", a.dir, a.stderr)
	if err != nil {
		return nil, err
	}
	opts.Store = a.db
	// A resume this command starts reports its problems here.
	opts.Logger = slog.New(slog.NewTextHandler(prog, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a.eng = engine.New(opts)
	a.app.hold(a.eng.Close)
	return a.eng, nil
}

func (a directAPI) Runs(ctx context.Context, f engine.RunFilter) ([]*engine.Run, error) {
	return a.db.Runs(ctx, f)
}
func (a directAPI) Run(ctx context.Context, id string) (*engine.Run, error) { return a.db.Run(ctx, id) }
func (a directAPI) Events(ctx context.Context, id string, after int64, limit int) ([]engine.Event, error) {
	if _, err := a.db.Run(ctx, id); err != nil {
		return nil, err
	}
	return a.db.Events(ctx, id, after, limit)
}

// WaitEvents does not wait: this process holds the store, so nothing else
// can change the run meanwhile.
func (a directAPI) WaitEvents(ctx context.Context, id string, after int64, limit int, _ time.Duration) ([]engine.Event, error) {
	return a.Events(ctx, id, after, limit)
}
func (a directAPI) Pending(ctx context.Context, id string) ([]*engine.Interaction, error) {
	all, err := a.Interactions(ctx, id)
	if err != nil {
		return nil, err
	}
	return openQuestions(all), nil
}
func (a directAPI) Interactions(ctx context.Context, id string) ([]*engine.Interaction, error) {
	if _, err := a.db.Run(ctx, id); err != nil {
		return nil, err
	}
	return a.db.Interactions(ctx, id)
}

// Answer goes through an engine of this process: an answer that releases
// the run resumes it here, as iterion resume would (see wait).
func (a *directAPI) Answer(ctx context.Context, req engine.AnswerRequest) (bool, error) {
	e, err := a.engine()
	if err != nil {
		return false, err
	}
	res, err := e.Answer(ctx, req)
	if err != nil {
		return false, err
	}
	return res.Resumed, nil
}

// Cancel stops the run through the engine: stored cancelled, with the
// outbox row that tells its PR.
func (a *directAPI) Cancel(ctx context.Context, id string) (bool, error) {
	e, err := a.engine()
	if err != nil {
		return false, err
	}
	run, err := a.db.Run(ctx, id)
	if err != nil {
		return false, err
	}
	if run.Status.Terminal() || run.Status == engine.StatusFailedResumable {
		return false, fmt.Errorf("run %s is already %s", id, run.Status)
	}
	return e.Stop(ctx, id, "cancelled by "+a.app.userName()+" via cli")
}

func (a *directAPI) wait(ctx context.Context) error {
	if a.eng == nil {
		return nil
	}
	return a.eng.Wait(ctx)
}

func (*directAPI) live() bool { return false }

// withRuns connects to the store and runs fn.
func (a *App) withRuns(cmd *cobra.Command, storeFlag string, fn func(runsAPI) error) error {
	dir := a.storeDir(storeFlag)
	sa, err := a.access(cmd.Context(), dir, nil)
	if err != nil {
		return err
	}
	if sa.client != nil {
		return fn(ownerAPI{sa})
	}
	return fn(&directAPI{storeAccess: sa, app: a, dir: dir, stderr: cmd.ErrOrStderr()})
}

// openQuestions are the questions of a run that wait for an answer: async
// questions, and the blocking question of a pause (a form, an ask_user),
// each with the fields its answer takes. The wait of an agent for its
// async questions is not one: they are listed themselves.
func openQuestions(all []*engine.Interaction) []*engine.Interaction {
	var out []*engine.Interaction
	for _, ix := range all {
		if ix.Pending() && ix.Kind != engine.KindAwait {
			if ix.Kind == engine.KindAsync && ix.Fields == nil {
				ix.Fields = []engine.FormField{{Name: engine.QuestionKey, Type: "string"}}
			}
			out = append(out, ix)
		}
	}
	return out
}

// explain turns store errors into what to do.
func explain(err error, what string) error {
	if errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("%s: %w (list runs with iterion runs list, questions with iterion runs questions RUN)", what, err)
	}
	return err
}

// runStatuses are the values of runs list --status.
var runStatuses = []engine.Status{engine.StatusRunning, engine.StatusPausedWaitingHuman, engine.StatusFinished,
	engine.StatusFailed, engine.StatusFailedResumable, engine.StatusCancelled}

// checkStatus refuses a --status that no run can have, naming those that are.
func checkStatus(s string) error {
	if s == "" || slices.Contains(runStatuses, engine.Status(s)) {
		return nil
	}
	names := make([]string, len(runStatuses))
	for i, st := range runStatuses {
		names[i] = string(st)
	}
	return usageError{fmt.Errorf("--status %q: use one of %s", s, strings.Join(names, ", "))}
}

func (a *App) newRunsCmd() *cobra.Command {
	var storeFlag string
	cmd := &cobra.Command{Use: "runs", Short: "Inspect and act on stored runs"}
	cmd.PersistentFlags().StringVar(&storeFlag, "store-dir", "", storeDirHelp)

	var status string
	var limit int
	var asJSON bool
	list := &cobra.Command{
		Use: "list", Short: "List runs, newest first", Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkStatus(status); err != nil {
				return err
			}
			if limit < 1 {
				return usageError{fmt.Errorf("--limit %d: use a positive number of runs", limit)}
			}
			return a.withRuns(cmd, storeFlag, func(r runsAPI) error {
				runs, err := r.Runs(cmd.Context(), engine.RunFilter{Status: engine.Status(status), Limit: limit})
				if err != nil {
					return err
				}
				return printRuns(cmd.OutOrStdout(), runs, a.storeOf(a.storeDir(storeFlag), r), asJSON)
			})
		},
	}
	list.Flags().StringVar(&status, "status", "", "only runs with this status")
	list.Flags().IntVar(&limit, "limit", 50, "at most this many runs")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	var showJSON bool
	show := &cobra.Command{
		Use:   "show RUN",
		Short: "Show one run: where it is, what it waits for, its outputs and artifacts",
		Long: `Show prints a run's status (a run stored as running whose process is gone
shows as interrupted, with the command that continues it), the node it runs,
is paused at or stopped in, the question it waits for with its fields, its
open async questions, the latest output of each node (cut after 20 lines) and
its published artifacts. --json prints the run's record with all of it.`,
		Args: exactArgs(1, "show needs a run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withRuns(cmd, storeFlag, func(r runsAPI) error {
				v, err := viewRun(cmd.Context(), r, args[0], a.storeOf(a.storeDir(storeFlag), r))
				if err != nil {
					return explain(err, "run "+args[0])
				}
				if showJSON {
					return printJSON(cmd.OutOrStdout(), v)
				}
				writeShow(cmd.OutOrStdout(), v)
				return nil
			})
		},
	}
	show.Flags().BoolVar(&showJSON, "json", false, "print JSON")

	var version int
	var artifactJSON bool
	artifact := &cobra.Command{
		Use:   "artifact RUN NAME",
		Short: "Print an artifact a run published (its latest version, or --version N)",
		Args:  exactArgs(2, "artifact needs a run id and an artifact name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if version < -1 {
				return usageError{fmt.Errorf("--version %d: use a version number, 0 for the first", version)}
			}
			return a.withRuns(cmd, storeFlag, func(r runsAPI) error {
				v, err := viewRun(cmd.Context(), r, args[0], a.storeOf(a.storeDir(storeFlag), r))
				if err != nil {
					return explain(err, "run "+args[0])
				}
				art, err := v.artifact(args[1], version)
				if err != nil {
					return err
				}
				if artifactJSON {
					return printJSON(cmd.OutOrStdout(), art.Data)
				}
				if m, ok := art.Data.(map[string]any); ok {
					for _, l := range valueLines(m) {
						fmt.Fprintln(cmd.OutOrStdout(), l)
					}
					return nil
				}
				return printJSON(cmd.OutOrStdout(), art.Data)
			})
		},
	}
	artifact.Flags().IntVar(&version, "version", -1, "the version to print, 0 for the first (default: the latest)")
	artifact.Flags().BoolVar(&artifactJSON, "json", false, "print the artifact as JSON")

	var follow bool
	events := &cobra.Command{
		Use: "events RUN", Short: "Print a run's events as JSON lines", Args: exactArgs(1, "events needs a run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withRuns(cmd, storeFlag, func(r runsAPI) error {
				return printEvents(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), r, args[0], follow)
			})
		},
	}
	events.Flags().BoolVar(&follow, "follow", false, "keep printing new events as they are stored, until the run stops")

	var until string
	var timeout time.Duration
	wait := &cobra.Command{
		Use:   "wait RUN [--until STATE] [--timeout " + durationText(defaultWaitTimeout) + "]",
		Short: "Wait until a run stops or pauses (or reaches --until), and print its status",
		Long: `Wait blocks until the run stops (finished, failed, failed_resumable or
cancelled) or pauses, or, with --until, reaches that state, then prints its status
line ("run RUN is finished", with the failure code and error of a run that failed)
and exits 0. It exits 1, with the status line and a message, when the run ended in
another state (waiting for finished, it failed), when --timeout passes first (0:
no limit), or when no iterion process owns the store: nothing can change the run
then, so the command answers from its state. It waits on the owner, which holds
each request until the run changes: nothing polls.`,
		Args: exactArgs(1, "wait needs a run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			want, err := untilState(until)
			if err != nil {
				return err
			}
			if timeout < 0 {
				return usageError{fmt.Errorf("--timeout %s: use a duration such as 10m, or 0 to wait as long as it takes", timeout)}
			}
			return a.withRuns(cmd, storeFlag, func(r runsAPI) error {
				return waitRun(cmd.Context(), cmd.OutOrStdout(), r, args[0], want, timeout)
			})
		},
	}
	wait.Flags().StringVar(&until, "until", "", "the state to wait for: "+untilNames()+" (default: the run stops or pauses)")
	wait.Flags().DurationVar(&timeout, "timeout", defaultWaitTimeout, "give up after this long (0: no limit)")

	questions := &cobra.Command{
		Use: "questions RUN", Short: "List a run's open questions and forms, with the fields each answer takes (JSON)", Args: exactArgs(1, "questions needs a run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withRuns(cmd, storeFlag, func(r runsAPI) error {
				ixs, err := r.Pending(cmd.Context(), args[0])
				if err != nil {
					return explain(err, "run "+args[0])
				}
				return printJSON(cmd.OutOrStdout(), map[string]any{"interactions": nonNil(ixs)})
			})
		},
	}

	var by string
	answer := &cobra.Command{
		Use:   "answer RUN QUESTION (TEXT | FIELD=VALUE…)",
		Short: "Answer a run's question or form; a run the answer releases continues",
		Long: `Answer a question of a run: an async question (the answer reaches the agent at its
next turn), an agent's blocking question, or a human node's form. A form takes one
FIELD=VALUE per field (each argument is split at its first =); a form of one field
also takes a bare TEXT. iterion runs questions RUN lists the open questions and
the fields each takes.

When the answer releases the run (the last question it waits for, a form), the run
continues: in the process that owns the store, or, when none does, in this one, with
its progress, as iterion resume would. The answer is recorded as your OS user name
via cli.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 3 {
				return usageError{errors.New("answer needs a run id, a question id and the answer (text, or field=value for a form)")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withRuns(cmd, storeFlag, func(r runsAPI) error {
				return answerQuestion(cmd.Context(), cmd.OutOrStdout(), r, args[0], args[1], args[2:])
			})
		},
	}
	// Kept so scripts that pass it still run; who answers is not the
	// caller's to say.
	answer.Flags().StringVar(&by, "by", "", "ignored")
	_ = answer.Flags().MarkDeprecated("by", "the answer is recorded as your OS user name")

	cancel := &cobra.Command{
		Use: "cancel RUN", Short: "Cancel a run", Args: exactArgs(1, "cancel needs a run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withRuns(cmd, storeFlag, func(r runsAPI) error {
				ok, err := r.Cancel(cmd.Context(), args[0])
				if err != nil {
					return explain(err, "run "+args[0])
				}
				if ok {
					fmt.Fprintf(cmd.OutOrStdout(), "run %s cancelled (continue it with: iterion resume --run-id %s)\n", args[0], args[0])
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "run %s is already over; nothing to cancel\n", args[0])
				}
				return nil
			})
		},
	}
	resume := a.newResumeCmd()
	resume.Use = "resume RUN [--answer k=v]…"
	resume.Args = exactArgs(1, "resume needs a run id")
	resumeRunE := resume.RunE
	resume.RunE = func(cmd *cobra.Command, args []string) error {
		if err := cmd.Flags().Set("run-id", args[0]); err != nil {
			return err
		}
		if !cmd.Flags().Changed("store-dir") && storeFlag != "" {
			if err := cmd.Flags().Set("store-dir", storeFlag); err != nil {
				return err
			}
		}
		return resumeRunE(cmd, nil)
	}
	resume.Flags().MarkHidden("run-id")
	recoverCmd := &cobra.Command{
		Use:   "recover",
		Short: "Continue every run a crashed process left running, from its checkpoint",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.recoverRuns(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), a.storeDir(storeFlag))
		},
	}
	cmd.AddCommand(list, show, artifact, events, wait, questions, answer, cancel, resume, recoverCmd, a.newPruneCmd())
	return cmd
}

// listedRun is a run as runs list --json prints it.
type listedRun struct {
	*engine.Run
	Interrupted *interruption `json:"interrupted,omitempty"`
}

// printRuns prints the runs of runs list: a run whose owner is gone shows
// as interrupted, with how to continue it.
func printRuns(out io.Writer, runs []*engine.Run, st storeInfo, asJSON bool) error {
	listed := make([]listedRun, len(runs))
	for i, r := range runs {
		listed[i] = listedRun{Run: r, Interrupted: interrupted(r, st)}
	}
	if asJSON {
		return printJSON(out, map[string]any{"runs": listed})
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATUS\tWORKFLOW\tCREATED\tFAILURE")
	var notes []string
	for _, r := range listed {
		status := string(r.Status)
		if r.Interrupted != nil {
			status = "interrupted"
			note := fmt.Sprintf("%s is interrupted (%s): ", termLine(r.ID), goneOwner(r.Interrupted))
			if r.Interrupted.Holder != 0 {
				note += fmt.Sprintf("once pid %d, which holds the store, exits, continue it with: %s", r.Interrupted.Holder, termLine(r.Interrupted.Recover))
			} else {
				note += "continue it with: " + termLine(r.Interrupted.Recover) + ", or every interrupted run with: iterion runs recover" + termLine(st.arg)
			}
			notes = append(notes, note)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", termLine(r.ID), status, termLine(r.Workflow), r.CreatedAt.Local().Format("2006-01-02 15:04:05"), termLine(r.FailureCode))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(out, n)
	}
	return nil
}

// answerQuestion answers as this process's OS user via cli: the name the
// owner's API records for it, and the one recorded here without an owner.
// A form's arguments are field=value; anything else is one answer text.
func answerQuestion(ctx context.Context, out io.Writer, a runsAPI, runID, iid string, words []string) error {
	all, err := a.Interactions(ctx, runID)
	if err != nil {
		return explain(err, "run "+runID)
	}
	var ix *engine.Interaction
	for _, candidate := range all {
		if candidate.ID == iid {
			ix = candidate
		}
	}
	if ix == nil {
		return explain(fmt.Errorf("question %s of run %s: %w", iid, runID, engine.ErrNotFound), "answering "+iid)
	}
	req := engine.AnswerRequest{RunID: runID, InteractionID: iid, By: api.UserName(os.Getuid()), Via: "cli"}
	form := ix.Kind == engine.KindBlocking && (len(ix.Fields) > 1 || (len(ix.Fields) == 1 && ix.Fields[0].Name != engine.QuestionKey))
	if form && (len(words) > 1 || strings.Contains(words[0], "=")) {
		req.Fields = map[string]any{}
		for _, w := range words {
			k, v, ok := strings.Cut(w, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return usageError{fmt.Errorf("%q: a form's answer is field=value for each field (%s)", w, fieldList(ix.Fields))}
			}
			req.Fields[strings.TrimSpace(k)] = v
		}
	} else {
		req.Text = strings.Join(words, " ")
		if strings.TrimSpace(req.Text) == "" {
			return usageError{fmt.Errorf("answer text is required: iterion runs answer %s %s \"your answer\"", runID, iid)}
		}
	}
	resumed, err := a.Answer(ctx, req)
	var await *engine.AwaitError
	var bad *engine.InvalidAnswerError
	var apiErr *api.Error
	switch {
	case errors.As(err, &await):
		return fmt.Errorf("%s is the agent's wait, not a question: answer the questions it waits for (%s)", iid, strings.Join(await.Pending, ", "))
	case errors.As(err, &bad):
		return fmt.Errorf("%v: answer with iterion runs answer %s %s %s", bad, runID, iid, fieldArgs(bad.Fields))
	case errors.As(err, &apiErr) && apiErr.Code == "invalid_answer":
		return fmt.Errorf("%s: answer with iterion runs answer %s %s %s", apiErr.Message, runID, iid, fieldArgs(apiErr.Fields))
	case errors.Is(err, engine.ErrAlreadyAnswered), errors.Is(err, engine.ErrStatusChanged):
		return err
	case err != nil:
		return explain(errors.New(cliRefusal(err)), "answering "+iid)
	}
	fmt.Fprintf(out, "answer to %s recorded\n", iid)
	switch {
	case resumed && a.live():
		fmt.Fprintf(out, "run %s continues in the store's owner\n", runID)
	case resumed:
		fmt.Fprintf(out, "run %s continues here\n", runID)
		if err := a.wait(ctx); err != nil {
			return err
		}
		run, err := a.Run(context.WithoutCancel(ctx), runID)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "run %s is %s\n", runID, run.Status)
	case !a.live():
		run, err := a.Run(ctx, runID)
		if err == nil && run.Status == engine.StatusRunning {
			fmt.Fprintf(out, "no iterion process is executing run %s; continue it with: iterion resume --run-id %s\n", runID, runID)
		}
	}
	return nil
}

// fieldList names a form's fields with their types.
func fieldList(fields []engine.FormField) string {
	var parts []string
	for _, f := range fields {
		parts = append(parts, f.Name+" ("+f.Type+")")
	}
	return strings.Join(parts, ", ")
}

// fieldArgs is the field=value arguments a form's answer takes.
func fieldArgs(fields []engine.FormField) string {
	var parts []string
	for _, f := range fields {
		if f.Name == engine.QuestionKey {
			return "\"your answer\""
		}
		parts = append(parts, f.Name+"=…")
	}
	return strings.Join(parts, " ")
}

// followWait is how long runs events --follow and runs wait let the
// owner hold each request for the run's next change.
const followWait = 30 * time.Second

// printEvents prints the run's events as JSON lines; following, it waits
// on the owner for each next one until the run is over.
func printEvents(ctx context.Context, out, errOut io.Writer, a runsAPI, runID string, follow bool) error {
	var after int64
	var wait time.Duration
	if follow {
		wait = followWait
	}
	for {
		evs, err := a.WaitEvents(ctx, runID, after, eventPage, wait)
		if follow && ctx.Err() != nil {
			return nil // Ctrl-C ends --follow
		}
		if err != nil {
			return explain(err, "run "+runID)
		}
		for _, ev := range evs {
			b, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			if _, err := out.Write(append(jsonSafe(b), '\n')); err != nil {
				return err
			}
			after = ev.Seq
		}
		if len(evs) == eventPage {
			continue
		}
		if !follow {
			return nil
		}
		run, err := a.Run(ctx, runID)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		// A run's end is stored with its last events: seen over, it is read
		// once more (answered at once) for what came with the end.
		if len(evs) > 0 {
			continue
		}
		if run.Status.Terminal() {
			return nil
		}
		if !a.live() {
			fmt.Fprintf(errOut, "run %s is %s and no iterion process owns the store, so nothing changes it: --follow ends here (iterion runs show %s says what it waits for)\n", termLine(runID), run.Status, termLine(runID))
			return nil
		}
	}
}

// until is a state runs wait waits for.
type until struct {
	name    string
	reached func(engine.Status) bool
}

// untilStates are the values of runs wait --until.
var untilStates = []until{
	{"stopped", engine.Status.Terminal},
	{"paused", func(s engine.Status) bool { return s == engine.StatusPausedWaitingHuman }},
	{string(engine.StatusFinished), func(s engine.Status) bool { return s == engine.StatusFinished }},
	{string(engine.StatusFailed), func(s engine.Status) bool { return s == engine.StatusFailed }},
	{string(engine.StatusFailedResumable), func(s engine.Status) bool { return s == engine.StatusFailedResumable }},
	{string(engine.StatusCancelled), func(s engine.Status) bool { return s == engine.StatusCancelled }},
	{string(engine.StatusPausedWaitingHuman), func(s engine.Status) bool { return s == engine.StatusPausedWaitingHuman }},
}

// stoppedOrPaused is runs wait's default.
var stoppedOrPaused = until{"stopped or paused", func(s engine.Status) bool { return s != engine.StatusRunning }}

func untilNames() string {
	names := make([]string, len(untilStates))
	for i, u := range untilStates {
		names[i] = u.name
	}
	return strings.Join(names, ", ")
}

// untilState is the state --until names; "" is the default.
func untilState(name string) (until, error) {
	if name == "" {
		return stoppedOrPaused, nil
	}
	for _, u := range untilStates {
		if u.name == name {
			return u, nil
		}
	}
	return until{}, usageError{fmt.Errorf("--until %q: use one of %s", name, untilNames())}
}

// statusLine says where a run is: its status, and for a failure its code
// and error.
func statusLine(run *engine.Run) string {
	line := fmt.Sprintf("run %s is %s", termLine(run.ID), run.Status)
	if run.FailureCode != "" || run.Error != "" {
		line += fmt.Sprintf(" [%s] %s", termLine(run.FailureCode), termLine(run.Error))
	}
	return line
}

// waitRun waits until run runID reaches want, within timeout (0: none),
// waiting on the owner for each change of the run. It prints the run's
// status line once it knows how the wait ends, and fails when the run
// ended otherwise, when nothing can change it (no owner) or at timeout.
func waitRun(ctx context.Context, out io.Writer, a runsAPI, runID string, want until, timeout time.Duration) error {
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var run *engine.Run
	gaveUp := func(err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("stopped waiting for run %s", termLine(runID))
		}
		if wctx.Err() == nil {
			return explain(err, "run "+runID)
		}
		if run == nil {
			return fmt.Errorf("run %s: no answer from the store's owner within %s", runID, timeout)
		}
		fmt.Fprintln(out, statusLine(run))
		return fmt.Errorf("run %s is still %s after %s, not %s", termLine(runID), run.Status, timeout, want.name)
	}
	var after int64
	for {
		r, err := a.Run(wctx, runID)
		if err != nil {
			return gaveUp(err)
		}
		run = r
		switch {
		case want.reached(run.Status):
			fmt.Fprintln(out, statusLine(run))
			return nil
		case run.Status.Terminal():
			fmt.Fprintln(out, statusLine(run))
			return fmt.Errorf("run %s ended %s, not %s", termLine(runID), run.Status, want.name)
		case !a.live():
			fmt.Fprintln(out, statusLine(run))
			return fmt.Errorf("run %s is %s, not %s, and no iterion process owns the store, so nothing changes it (iterion runs show %s says what it waits for)", termLine(runID), run.Status, want.name, termLine(runID))
		}
		// Each answer is an event after the last seen, or the run changed,
		// or the wait passed: the run is read again either way.
		evs, err := a.WaitEvents(wctx, runID, after, eventPage, followWait)
		if err != nil {
			return gaveUp(err)
		}
		if len(evs) > 0 {
			after = evs[len(evs)-1].Seq
		}
	}
}

// printJSON prints v as indented JSON, with the characters a terminal
// acts on escaped (agent text is in it; see jsonSafe).
func printJSON(out io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = out.Write(append(jsonSafe(b), '\n'))
	return err
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
