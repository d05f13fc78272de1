package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/bot/schedule"
	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
)

// serverTarget is what a schedule of serve.yml starts: a workflow file of
// the server, with its vars, reporting to a Slack channel.
type serverTarget struct {
	Workflow string            `json:"workflow"`
	Vars     map[string]string `json:"vars,omitempty"`
	Slack    string            `json:"slack,omitempty"`
}

// serverDefinitions are serve.yml's schedules for the scheduler.
func serverDefinitions(list []serverSchedule) []schedule.Definition {
	defs := make([]schedule.Definition, 0, len(list))
	for _, s := range list {
		target, _ := json.Marshal(serverTarget{Workflow: s.Workflow, Vars: s.Vars, Slack: s.Report.Slack}) // strings: it cannot fail
		defs = append(defs, schedule.Definition{Name: s.Name, Cron: s.Cron, Zone: s.Timezone, Overlap: s.Overlap, Grace: s.Grace, Target: target})
	}
	return defs
}

// scheduleDetails are a server schedule's run's trigger Details.
type scheduleDetails struct {
	Schedule string `json:"schedule"`
	Tick     string `json:"tick"`
	Slack    string `json:"slack,omitempty"`
}

// serverLauncher starts the runs of serve.yml's schedules: the workflow
// file, read at each fire, in a workspace of its own.
type serverLauncher struct {
	app *App
	o   *owner
	// slack says the server has Slack: a schedule's report.slack shows
	// its runs there.
	slack bool
}

// cronRunID is the run id of a fire: the same fire names the same run.
func cronRunID(schedule, tick string) string {
	sum := sha256.Sum256([]byte(schedule + "\x00" + tick))
	return "cron-" + hex.EncodeToString(sum[:10])
}

func (l serverLauncher) Launch(ctx context.Context, s delivery.Schedule, f delivery.Fire) (string, error) {
	var tg serverTarget
	if err := json.Unmarshal(s.Target, &tg); err != nil {
		return "", fmt.Errorf("schedule %s has no workflow this build reads: %w", s.Name, err)
	}
	id := cronRunID(s.Name, f.Tick)
	if _, err := l.o.db.Run(ctx, id); err == nil {
		return id, nil // started before a crash kept the fire's record behind
	}
	src, err := l.app.readWorkflow(tg.Workflow)
	if err != nil {
		return "", err
	}
	w, ds := dsl.CompileSource(tg.Workflow, src)
	if ds.HasErrors() {
		return "", fmt.Errorf("%s does not compile:\n%s", tg.Workflow, dsl.RenderString(ds, map[string][]byte{tg.Workflow: src}))
	}
	vars := map[string]any{}
	for k, v := range tg.Vars {
		vars[k] = v
	}
	details, _ := json.Marshal(scheduleDetails{Schedule: s.Name, Tick: f.Tick, Slack: tg.Slack}) // strings
	var channels []string
	if l.slack && tg.Slack != "" {
		channels = []string{"slack"} // the run's card in report.slack's channel
	}
	_, err = l.o.engine.Launch(ctx, engine.StartRequest{Workflow: w, RunID: id, Vars: vars, File: tg.Workflow, Channels: channels,
		Trigger: engine.Trigger{Source: "cron", Actor: "schedule " + strings.TrimPrefix(s.Name, "server/"), Ref: "schedule/" + s.Name, Details: details}})
	if errors.Is(err, engine.ErrRunExists) {
		return id, nil
	}
	if err != nil {
		return "", err
	}
	return id, nil
}

// scheduleAPI serves /api/schedules from the scheduler and the store.
type scheduleAPI struct {
	s   *schedule.Scheduler
	db  schedule.Store
	now func() time.Time
}

func (a scheduleAPI) List(ctx context.Context) ([]schedule.Status, error) {
	return schedule.List(ctx, a.db, a.now())
}

func (a scheduleAPI) Fire(ctx context.Context, name string) (string, error) {
	id, err := a.s.FireNow(ctx, name)
	if err != nil && !errors.Is(err, engine.ErrStorageFull) && ctx.Err() == nil && !errors.Is(err, engine.ErrNotFound) {
		// The launch's refusals say what to fix (a workflow that does not
		// compile, a missing var): the caller reads them.
		return "", &api.FireError{Err: fmt.Errorf("schedule %s fired, but its run did not start: %w", name, err)}
	}
	return id, err
}

// newScheduler is serve's scheduler over o's store, with the server's
// own schedules declared.
// Launchers adds the channels' own launchers before the scheduler runs.
func (a *App) newScheduler(ctx context.Context, o *owner, list []serverSchedule, launchers map[string]schedule.Launcher, slack bool, log *slog.Logger) (*schedule.Scheduler, error) {
	launchers["server"] = serverLauncher{app: a, o: o, slack: slack}
	s := schedule.New(schedule.Options{Store: o.db, Launchers: launchers, Log: log, Failpoint: a.failpoint(), Clock: a.ScheduleClock})
	if err := s.Load(ctx); err != nil {
		return nil, fmt.Errorf("reading the stored schedules: %w", err)
	}
	for _, sc := range list {
		if _, err := a.readWorkflow(sc.Workflow); err != nil {
			return nil, fmt.Errorf("schedule %s in the config file: %w", sc.Name, err)
		}
	}
	if _, err := s.Set(ctx, "server", serverDefinitions(list)); err != nil {
		return nil, fmt.Errorf("the config file's schedules: %w", err)
	}
	return s, nil
}

func (a *App) newSchedulesCmd() *cobra.Command {
	var storeFlag string
	cmd := &cobra.Command{Use: "schedules", Short: "List the schedules of a server, and fire one now"}
	cmd.PersistentFlags().StringVar(&storeFlag, "store-dir", "", storeDirHelp)
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the schedules, with their last and next fires and last run",
		Long: `List prints each schedule of the store (serve.yml's, as server/NAME, and each repository's
.iterion.yml's, as github/OWNER/REPO/NAME): its cron spec and zone, when it last fired and
the run that started, and when it fires next. It asks the server that owns the store, or
reads the store itself when none does.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := a.storeDir(storeFlag)
			sa, err := a.access(cmd.Context(), dir, nil)
			if err != nil {
				return err
			}
			var list []schedule.Status
			if sa.client != nil {
				list, err = sa.client.Schedules(cmd.Context())
			} else {
				list, err = schedule.List(cmd.Context(), sa.db, time.Now())
			}
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"schedules": nonNil(list)})
			}
			printSchedules(cmd.OutOrStdout(), list)
			return nil
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	run := &cobra.Command{
		Use:   "run NAME",
		Short: "Fire a schedule now and print the run it started",
		Long: `Run fires the schedule NAME (its full name, or its last part when only one schedule has it)
now, as its cron spec would, whatever its overlap rule, and prints the run it started. The
fire is recorded first, like every fire; it moves no tick. Schedules fire only in the server
that owns the store (iterion serve).`,
		Args: exactArgs(1, "run needs a schedule's name (iterion schedules list shows them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := a.storeDir(storeFlag)
			sa, err := a.access(cmd.Context(), dir, nil)
			if err != nil {
				return err
			}
			if sa.client == nil {
				return fmt.Errorf("no iterion serve owns store %s: schedules fire only under iterion serve; start it, or run the workflow with iterion run", dir)
			}
			full, id, err := sa.client.FireSchedule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s fired: run %s started (follow it with: iterion runs wait %s)\n", full, id, id)
			return nil
		},
	}
	cmd.AddCommand(list, run)
	return cmd
}

// printSchedules writes the schedules as a table.
func printSchedules(w io.Writer, list []schedule.Status) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no schedules (declare them under schedules: in serve.yml or in a repository's .iterion.yml)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCRON\tLAST FIRE\tLAST RUN\tNEXT FIRE")
	for _, s := range list {
		spec := s.Cron + " (" + cmp.Or(s.Zone, "UTC") + ")"
		last := "-"
		if s.LastFire != "" {
			last = s.LastFireAt.UTC().Format("2006-01-02 15:04 UTC")
			if strings.HasPrefix(s.LastFire, "manual-") {
				last += " by hand"
			}
		}
		run := "-"
		if s.LastRun != "" {
			run = s.LastRun + " " + cmp.Or(string(s.LastRunStatus), "(removed)")
		}
		next := "never"
		switch {
		case s.Problem != "":
			next = "cannot fire: " + s.Problem
		case !s.Next.IsZero():
			next = s.Next.UTC().Format("2006-01-02 15:04 UTC")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, spec, last, run, next)
	}
	tw.Flush()
}
