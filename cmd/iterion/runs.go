package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	Pending(ctx context.Context, id string) ([]*engine.Interaction, error)
	Answer(ctx context.Context, req engine.AnswerRequest) (resumed bool, err error)
	Cancel(ctx context.Context, id string) (bool, error)
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
	return a.client.Events(ctx, id, after, limit)
}
func (a ownerAPI) Pending(ctx context.Context, id string) ([]*engine.Interaction, error) {
	return a.client.Pending(ctx, id)
}

// Answer sends only the text: the owner records the answer as this
// process's OS user via cli, whatever req says.
func (a ownerAPI) Answer(ctx context.Context, req engine.AnswerRequest) (bool, error) {
	res, err := a.client.Answer(ctx, req.RunID, req.InteractionID, req.Text)
	if err != nil {
		return false, err
	}
	return res.Resumed, nil
}
func (a ownerAPI) Cancel(ctx context.Context, id string) (bool, error) {
	return a.client.Cancel(ctx, id)
}
func (ownerAPI) live() bool { return true }

// directAPI reads and writes the store itself, when nobody owns it.
type directAPI struct{ *storeAccess }

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
func (a directAPI) Pending(ctx context.Context, id string) ([]*engine.Interaction, error) {
	if _, err := a.db.Run(ctx, id); err != nil {
		return nil, err
	}
	return a.db.Pending(ctx, id, "")
}
func (a directAPI) Answer(ctx context.Context, req engine.AnswerRequest) (bool, error) {
	_, err := a.db.Answer(ctx, req)
	return false, err
}
func (a directAPI) Cancel(ctx context.Context, id string) (bool, error) {
	run, err := a.db.Run(ctx, id)
	if err != nil {
		return false, err
	}
	if run.Status.Terminal() {
		return false, fmt.Errorf("run %s is already %s", id, run.Status)
	}
	// Nobody executes it: mark it cancelled (it can still be resumed).
	err = a.db.Commit(ctx, engine.Change{RunID: id, Generation: run.Generation, Status: engine.StatusCancelled,
		FailureCode: engine.CodeCancelled, Error: "cancelled from the command line",
		Events: []engine.Event{{Type: engine.EventRunCancelled, Time: time.Now()}}, Sync: true})
	return err == nil, err
}
func (directAPI) live() bool { return false }

// withRuns connects to the store and runs fn.
func withRuns(cmd *cobra.Command, storeFlag string, fn func(runsAPI) error) error {
	a, err := access(cmd.Context(), storeDir(storeFlag), nil)
	if err != nil {
		return err
	}
	defer a.Close()
	if a.client != nil {
		return fn(ownerAPI{a})
	}
	return fn(directAPI{a})
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

func newRunsCmd() *cobra.Command {
	var storeFlag string
	cmd := &cobra.Command{Use: "runs", Short: "Inspect and act on stored runs"}
	cmd.PersistentFlags().StringVar(&storeFlag, "store-dir", "", "store directory (default $ITERION_STORE or .iterion)")

	var status string
	var limit int
	var asJSON bool
	list := &cobra.Command{
		Use: "list", Short: "List runs, newest first", Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkStatus(status); err != nil {
				return err
			}
			return withRuns(cmd, storeFlag, func(a runsAPI) error {
				runs, err := a.Runs(cmd.Context(), engine.RunFilter{Status: engine.Status(status), Limit: limit})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), map[string]any{"runs": nonNil(runs)})
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "RUN\tSTATUS\tWORKFLOW\tCREATED\tFAILURE")
				for _, r := range runs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.Workflow, r.CreatedAt.Local().Format("2006-01-02 15:04:05"), r.FailureCode)
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().StringVar(&status, "status", "", "only runs with this status")
	list.Flags().IntVar(&limit, "limit", 50, "at most this many runs")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	show := &cobra.Command{
		Use: "show RUN", Short: "Show one run", Args: exactArgs(1, "show needs a run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRuns(cmd, storeFlag, func(a runsAPI) error {
				run, err := a.Run(cmd.Context(), args[0])
				if err != nil {
					return explain(err, "run "+args[0])
				}
				return printJSON(cmd.OutOrStdout(), run)
			})
		},
	}

	var follow bool
	events := &cobra.Command{
		Use: "events RUN", Short: "Print a run's events as JSON lines", Args: exactArgs(1, "events needs a run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRuns(cmd, storeFlag, func(a runsAPI) error {
				return printEvents(cmd.Context(), cmd.OutOrStdout(), a, args[0], follow)
			})
		},
	}
	events.Flags().BoolVar(&follow, "follow", false, "keep printing new events until the run stops")

	questions := &cobra.Command{
		Use: "questions RUN", Short: "List a run's pending async questions (JSON)", Args: exactArgs(1, "questions needs a run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRuns(cmd, storeFlag, func(a runsAPI) error {
				ixs, err := a.Pending(cmd.Context(), args[0])
				if err != nil {
					return explain(err, "run "+args[0])
				}
				return printJSON(cmd.OutOrStdout(), map[string]any{"interactions": nonNil(ixs)})
			})
		},
	}

	var by string
	answer := &cobra.Command{
		Use:   "answer RUN QUESTION TEXT",
		Short: "Answer an async question; the answer reaches the agent at its next turn",
		Long: `Answer an async question; the answer reaches the agent at its next turn. The answer is
recorded as your OS user name via cli.`,
		Args: exactArgs(3, "answer needs a run id, a question id and the answer text"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRuns(cmd, storeFlag, func(a runsAPI) error {
				return answerQuestion(cmd.Context(), cmd.OutOrStdout(), a, args[0], args[1], args[2])
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
			return withRuns(cmd, storeFlag, func(a runsAPI) error {
				ok, err := a.Cancel(cmd.Context(), args[0])
				if err != nil {
					return explain(err, "run "+args[0])
				}
				if ok {
					fmt.Fprintf(cmd.OutOrStdout(), "run %s cancelled\n", args[0])
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "run %s is not executing in the store's owner; nothing to cancel\n", args[0])
				}
				return nil
			})
		},
	}
	resume := newResumeCmd()
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
			return recoverRuns(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), storeDir(storeFlag))
		},
	}
	cmd.AddCommand(list, show, events, questions, answer, cancel, resume, recoverCmd)
	cmd.AddCommand(newPruneCmd())
	return cmd
}

// answerQuestion answers as this process's OS user via cli: the name the
// owner's API records for it, and the one recorded here without an owner.
func answerQuestion(ctx context.Context, out io.Writer, a runsAPI, runID, iid, text string) error {
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("answer text is required: iterion runs answer %s %s \"your answer\"", runID, iid)
	}
	resumed, err := a.Answer(ctx, engine.AnswerRequest{RunID: runID, InteractionID: iid, Text: text, By: api.UserName(os.Getuid()), Via: "cli"})
	switch {
	case errors.Is(err, engine.ErrNotAsync):
		return fmt.Errorf("%s is a blocking question, not an async one: answer it with iterion resume --run-id %s --answer <field>=<value>", iid, runID)
	case errors.Is(err, engine.ErrAlreadyAnswered):
		return err
	case err != nil:
		return explain(err, "answering "+iid)
	}
	fmt.Fprintf(out, "answer to %s recorded\n", iid)
	switch {
	case resumed:
		fmt.Fprintf(out, "run %s resumed\n", runID)
	case !a.live():
		run, err := a.Run(ctx, runID)
		if err == nil && run.Status != engine.StatusFinished && run.Status != engine.StatusFailed {
			fmt.Fprintf(out, "no iterion process is executing run %s (%s); continue it with: iterion resume --run-id %s\n", runID, run.Status, runID)
		}
	}
	return nil
}

func printEvents(ctx context.Context, out io.Writer, a runsAPI, runID string, follow bool) error {
	var after int64
	enc := json.NewEncoder(out)
	for {
		evs, err := a.Events(ctx, runID, after, 1000)
		if err != nil {
			return explain(err, "run "+runID)
		}
		for _, ev := range evs {
			if err := enc.Encode(ev); err != nil {
				return err
			}
			after = ev.Seq
		}
		if !follow || len(evs) == 1000 {
			if len(evs) == 1000 {
				continue
			}
			return nil
		}
		run, err := a.Run(ctx, runID)
		if err != nil {
			return err
		}
		if run.Status.Terminal() && len(evs) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond): // polling a remote log
		}
	}
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
