package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// newPruneCmd is iterion runs prune.
func (a *App) newPruneCmd() *cobra.Command {
	var olderThan string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "prune --older-than AGE [--dry-run]",
		Short: "Remove stopped runs unchanged for AGE, with their events, checkpoints and workspaces",
		Long: `Remove the runs that stopped and have not changed for AGE, with everything stored for
them (events, checkpoint, questions and answers, posts) and their workspaces under the store's
workspaces/ directory. AGE is a number of days (30d) or a duration (720h, 36h30m).

Removed: finished and failed runs, and cancelled and failed_resumable runs, which could still
have been resumed. Never removed: runs paused waiting for a person, running runs (an
interrupted one included), and runs whose end is not yet posted to their pull request. The
directory a run of iterion run worked in is never touched.

The command opens the store itself, so no iterion process may hold it. While iterion serve
holds it, set retention in serve's config file instead (docs/serve.md).`,
		Example: "  iterion runs prune --older-than 30d --dry-run\n  iterion runs prune --older-than 30d",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if olderThan == "" {
				return usageError{errors.New("prune needs --older-than, like --older-than 30d")}
			}
			age, err := parseAge(olderThan)
			if err != nil {
				return usageError{fmt.Errorf("--older-than %q: %v; write a number of days like 30d, or a duration like 720h", olderThan, err)}
			}
			flag, _ := cmd.Flags().GetString("store-dir")
			p := pruneCommand{dir: a.storeDir(flag), age: olderThan, dryRun: dryRun, out: cmd.OutOrStdout()}
			return p.run(cmd.Context(), time.Now().Add(-age))
		},
	}
	cmd.Flags().StringVar(&olderThan, "older-than", "", "remove the runs unchanged for this long: 30d, 720h")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed, and remove nothing")
	return cmd
}

// maxAgeDays keeps an age in days within a time.Duration (292 years).
const maxAgeDays = 100_000

// parseAge reads an age: whole days (30d) or a Go duration (720h, 90m),
// more than zero.
func parseAge(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok && days != "" && strings.Trim(days, "0123456789") == "" {
		n, err := strconv.Atoi(days)
		if err != nil || n > maxAgeDays {
			return 0, fmt.Errorf("more than %d days", maxAgeDays)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, errors.New("not a number of days or a duration")
		}
	}
	if d <= 0 {
		return 0, errors.New("not more than zero")
	}
	return d, nil
}

// pruneCommand is one iterion runs prune.
type pruneCommand struct {
	dir    string
	age    string // as the user wrote it, for messages
	dryRun bool
	out    io.Writer
	opts   store.Options // how the store is opened; tests set a reserve
}

func (p pruneCommand) run(ctx context.Context, cutoff time.Time) error {
	if info, ok := readOwner(p.dir); ok && alive(info.PID) {
		return fmt.Errorf("store %s is held by iterion pid %d (%q): stop it first; iterion serve prunes its own store when retention is set in its config file (docs/serve.md)", p.dir, info.PID, info.Command)
	}
	if _, err := os.Stat(p.dir); err != nil {
		return fmt.Errorf("no iterion store at %s (pass --store-dir, or set ITERION_STORE)", p.dir)
	}
	db, err := openStore(p.dir, p.opts)
	if err != nil {
		return err // names the directory, and who holds it
	}
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	if p.dryRun {
		runs, err := db.PruneCandidates(ctx, cutoff)
		if err != nil {
			return err
		}
		return p.report(runs, "would remove")
	}
	if db.ReadOnly() != nil {
		// A nearly full disk: the workspaces are where the space usually
		// goes, and removing them needs no room in the store. Then the
		// store may open for writing.
		runs, err := db.PruneCandidates(ctx, cutoff)
		if err != nil {
			return err
		}
		var errs []error
		for _, r := range runs {
			errs = append(errs, removeRunWorkspace(p.dir, r.ID))
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("removing the workspaces of the runs to prune: %w", err)
		}
		db.Close()
		if db, err = openStore(p.dir, p.opts); err != nil {
			return err
		}
		if err := db.ReadOnly(); err != nil {
			return fmt.Errorf("the workspaces of the runs to prune (%d) were removed, but their records stay: %w", len(runs), err)
		}
	}
	removed, err := pruneRuns(ctx, db, p.dir, cutoff, slog.New(slog.DiscardHandler))
	if rerr := p.report(removed, "removed"); err == nil {
		err = rerr
	}
	return err
}

// report lists runs under verb, then how many.
func (p pruneCommand) report(runs []*engine.Run, verb string) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintf(p.out, "no stopped run unchanged for %s: nothing to remove\n", p.age)
		return err
	}
	tw := tabwriter.NewWriter(p.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATUS\tWORKFLOW\tUPDATED")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.ID, r.Status, r.Workflow, r.UpdatedAt.Local().Format("2006-01-02 15:04:05"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	noun := "runs"
	if len(runs) == 1 {
		noun = "run"
	}
	_, err := fmt.Fprintf(p.out, "%s %d %s unchanged for %s, with their events, checkpoints and workspaces\n", verb, len(runs), noun, p.age)
	return err
}

// pruneRuns removes from db, the store in directory dir, the runs that
// stopped (finished, failed, cancelled, failed_resumable) and have not
// changed since cutoff, with all their records and their workspaces
// (<dir>/workspaces/<run>, .bot and .home); paused and running runs stay
// (see store.DB.Prune). It returns the runs removed, and is what serve's
// retention sweep calls. When the disk is too full for the store to write,
// it removes the workspaces of the runs to prune first and tries again.
func pruneRuns(ctx context.Context, db *store.DB, dir string, cutoff time.Time, log *slog.Logger) ([]*engine.Run, error) {
	removed := func(r *engine.Run) error {
		log.Info("run pruned", "run", r.ID, "status", r.Status, "updated", r.UpdatedAt)
		return removeRunWorkspace(dir, r.ID)
	}
	gone, err := db.Prune(ctx, cutoff, removed)
	if !errors.Is(err, engine.ErrStorageFull) || db.ReadOnly() != nil {
		return gone, err
	}
	runs, cerr := db.PruneCandidates(ctx, cutoff)
	if cerr != nil {
		return gone, errors.Join(err, cerr)
	}
	log.Warn("disk nearly full: removing the workspaces of the runs to prune before their records", "runs", len(runs), "err", err)
	var errs []error
	for _, r := range runs {
		errs = append(errs, removeRunWorkspace(dir, r.ID))
	}
	more, err := db.Prune(ctx, cutoff, removed)
	return append(gone, more...), errors.Join(append(errs, err)...)
}

// removeRunWorkspace removes the workspace of run id under the store in
// dir, and the .bot and .home beside it. Directories a tool made read-only
// (Go's module cache) are made writable first; symbolic links are removed,
// never followed.
func removeRunWorkspace(dir, id string) error {
	ws := filepath.Join(dir, "workspaces", id)
	var errs []error
	for _, p := range []string{ws, ws + ".bot", ws + ".home"} {
		if os.RemoveAll(p) == nil {
			continue
		}
		_ = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(path, 0o700)
			}
			return nil
		})
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("removing the workspace of run %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
