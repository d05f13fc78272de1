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

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/iterion-bot/iterion/store"
)

// newStoreCmd is iterion store: the store as a whole, backed up and
// restored.
func (a *App) newStoreCmd() *cobra.Command {
	var storeFlag string
	cmd := &cobra.Command{Use: "store", Short: "Back up and restore the store"}
	cmd.PersistentFlags().StringVar(&storeFlag, "store-dir", "", storeDirHelp+"; --store works too")
	// --store is what an operator following docs/setup.md may type.
	cmd.SetGlobalNormalizationFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "store" {
			name = "store-dir"
		}
		return pflag.NormalizedName(name)
	})

	backup := &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a backup of the store to FILE (- for stdout)",
		Long: `Backup writes a consistent snapshot of the whole store (runs, events, checkpoints,
questions and answers, the outbox, deliveries) to FILE, mode 0600, refusing a FILE that
exists. While a process owns the store (iterion serve, a run), the backup is taken by it,
through its local API, and it goes on serving meanwhile: what is written after the backup
began is not in it. Without an owner the command opens the store itself.

The workspaces under the store's workspaces/ directory are not in the backup: a run
restored without its workspace starts from a new checkout where it needs one.`,
		Example: "  iterion store backup /backups/iterion-$(date +%F).backup --store-dir /data\n  iterion store backup - | gzip > iterion.backup.gz",
		Args:    exactArgs(1, "backup needs the file to write: iterion store backup FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.backupStore(cmd.Context(), a.storeDir(storeFlag), args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	restore := &cobra.Command{
		Use:   "restore FILE",
		Short: "Restore a backup (- for stdin) into a new or empty store directory",
		Long: `Restore loads a backup written by iterion store backup (or the one a migration of the
store's layout writes to backups/ in the store's directory) into the store directory, which
must be missing or empty: restore never overwrites a store. A backup of an older layout is
migrated once loaded. Then start the server on that directory.`,
		Example: "  iterion store restore /backups/iterion-2026-12-01.backup --store-dir /data-restored",
		Args:    exactArgs(1, "restore needs the backup to read: iterion store restore FILE --store-dir DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.restoreStore(a.storeDir(storeFlag), args[0], cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.AddCommand(backup, restore)
	return cmd
}

// backupStore writes the backup of the store in dir to file.
func (a *App) backupStore(ctx context.Context, dir, file string, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sa, err := a.access(ctx, dir, log)
	if err != nil {
		return err
	}
	defer sa.Close()
	write := func(w io.Writer) error {
		if sa.client != nil {
			_, err := sa.client.Backup(ctx, w)
			return err
		}
		return sa.db.Backup(ctx, w)
	}
	how := "opened by this command: no process owns it"
	if sa.client != nil {
		how = "taken by its owner"
		if info, ok := readOwner(dir); ok {
			how = fmt.Sprintf("taken by its owner, pid %d (%s)", info.PID, info.Command)
		}
	}
	if file == "-" {
		if err := write(stdout); err != nil {
			return fmt.Errorf("backing up store %s: %w", dir, err)
		}
		fmt.Fprintf(stderr, "backed up store %s to stdout (%s)\n", dir, how)
		return nil
	}
	path := a.path(file)
	n, err := writeNewFile(path, write)
	if err != nil {
		return fmt.Errorf("backing up store %s: %w", dir, err)
	}
	fmt.Fprintf(stdout, "backed up store %s to %s, %s (%s)\nrestore it with: iterion store restore %s --store-dir NEW-DIR\n", dir, path, byteSize(n), how, path)
	return nil
}

// writeNewFile writes path, mode 0600, with write, refusing a path that
// exists: it writes path.part beside it, synced, then renames it, so
// path is whole or absent. It returns the size written.
func writeNewFile(path string, write func(io.Writer) error) (int64, error) {
	if _, err := os.Lstat(path); err == nil {
		return 0, fmt.Errorf("%s exists: choose another file, or remove it first", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	part := path + ".part"
	f, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return 0, fmt.Errorf("%s exists, left by another backup (running, or stopped midway): remove it if none runs", part)
	}
	if err != nil {
		return 0, err
	}
	cw := &countingWriter{w: f}
	err = write(cw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Linking rather than renaming refuses a path created meanwhile.
		if err = os.Link(part, path); err == nil {
			err = os.Remove(part)
		}
	}
	if err != nil {
		_ = os.Remove(part)
		return 0, err
	}
	return cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// byteSize is n in the largest binary unit that keeps it above 1.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// restoreStore restores the backup in file into dir.
func (a *App) restoreStore(dir, file string, stdin io.Reader, stdout, stderr io.Writer) error {
	r, name := stdin, "stdin"
	if file != "-" {
		name = a.path(file)
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("restoring: %w", err)
		}
		defer f.Close()
		r = f
	}
	if info, ok := readOwner(dir); ok && alive(info.PID) {
		return fmt.Errorf("restoring into %s: a live process owns that store (pid %d, %s): restore into a new directory instead", dir, info.PID, info.Command)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	info, err := store.Restore(dir, r, store.Options{Logger: log})
	if errors.Is(err, store.ErrNotBackup) {
		return fmt.Errorf("restoring %s: %w (iterion store backup writes them)", name, err)
	}
	if err != nil {
		return fmt.Errorf("restoring %s into %s: %w", name, dir, err)
	}
	abs, _ := filepath.Abs(dir)
	fmt.Fprintf(stdout, "restored %s (layout %d) into %s\n", name, info.Layout, abs)
	if info.Layout < store.LayoutVersion() {
		fmt.Fprintf(stdout, "migrated it to layout %d\n", store.LayoutVersion())
	}
	fmt.Fprintf(stdout, "serve it with: iterion serve --store-dir %s\n", abs)
	return nil
}
