package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/iterion-bot/iterion/dsl"
)

func (a *App) newFmtCmd() *cobra.Command {
	var f formatter
	cmd := &cobra.Command{
		Use:   "fmt [-w|-l|-d] FILE|DIR...",
		Short: "Format workflow files in the canonical layout, keeping their comments",
		Long: `Fmt prints each .bot or .iter workflow file in the canonical layout: two
spaces per level, one blank line between declarations, "key: value",
edges as "a -> b when x as loop(n) with { … }", lists and maps on one
line when they fit. Values keep their meaning exactly (strings are copied as
written, block texts re-indented to the same text) and every comment stays
where it was. A directory is walked for .bot and .iter files (directories
whose name starts with a dot are skipped).

A file with syntax errors is not formatted: its diagnostics are printed on
stderr and the file is left as it is.

Without a flag the formatted files are printed on stdout. -w rewrites the
files that change, in place (through a temporary file renamed over the
original, keeping its mode); -l lists the files whose formatting differs;
-d prints the differences as a unified diff.

Exit status: 0; 1 when -l or -d found a file to reformat; 2 on a usage
error, a file that cannot be read or written, or a file with syntax errors.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{errors.New("fmt needs at least one workflow file or directory")}
			}
			f.stdout, f.stderr, f.app = cmd.OutOrStdout(), cmd.ErrOrStderr(), a
			return f.run(args)
		},
	}
	cmd.Flags().BoolVarP(&f.write, "write", "w", false, "rewrite the files in place instead of printing them")
	cmd.Flags().BoolVarP(&f.list, "list", "l", false, "list the files whose formatting differs")
	cmd.Flags().BoolVarP(&f.diff, "diff", "d", false, "print a unified diff of the changes")
	return cmd
}

// formatter is one iterion fmt command.
type formatter struct {
	write, list, diff bool
	stdout, stderr    io.Writer
	app               *App
}

func (f *formatter) run(args []string) error {
	files, failed := f.expand(args)
	differs := false
	for _, name := range files {
		changed, err := f.file(name)
		if err != nil {
			fmt.Fprintf(f.stderr, "%v\n", err)
			failed = true
		}
		differs = differs || changed
	}
	switch {
	case failed:
		return exitCodeError(exitUsage)
	case differs && (f.list || f.diff):
		return exitCodeError(exitError)
	}
	return nil
}

// expand replaces each directory among args by the workflow files under
// it, sorted. A path that cannot be walked is reported.
func (f *formatter) expand(args []string) (files []string, failed bool) {
	for _, arg := range args {
		st, err := os.Stat(f.app.path(arg))
		if err != nil || !st.IsDir() {
			// readWorkflow says what is wrong with it.
			files = append(files, arg)
			continue
		}
		var found []string
		err = filepath.WalkDir(f.app.path(arg), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && p != f.app.path(arg) && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if d.Type().IsRegular() && (filepath.Ext(p) == ".bot" || filepath.Ext(p) == ".iter") {
				rel, _ := filepath.Rel(f.app.path(arg), p)
				found = append(found, filepath.Join(arg, rel))
			}
			return nil
		})
		if err != nil {
			fmt.Fprintf(f.stderr, "%s: walking the directory: %v\n", arg, err)
			failed = true
		}
		if err == nil && len(found) == 0 {
			fmt.Fprintf(f.stderr, "%s: no .bot or .iter file in this directory\n", arg)
			failed = true
		}
		slices.Sort(found)
		files = append(files, found...)
	}
	return files, failed
}

// file formats one file and reports whether its formatting differs.
func (f *formatter) file(name string) (bool, error) {
	src, err := f.app.readWorkflow(name)
	if err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	out, err := dsl.Format(name, src)
	if err != nil {
		var ds dsl.Diagnostics
		if errors.As(err, &ds) {
			if rerr := dsl.Render(f.stderr, ds, map[string][]byte{name: src}); rerr != nil {
				return false, rerr
			}
			errs, _ := ds.Count()
			return false, fmt.Errorf("%s: not formatted: %s to fix first", name, plural(errs, "syntax error"))
		}
		return false, err
	}
	changed := !bytes.Equal(src, out)
	if f.list && changed {
		fmt.Fprintln(f.stdout, name)
	}
	if f.diff && changed {
		io.WriteString(f.stdout, unifiedDiff(name, string(src), string(out)))
	}
	if f.write && changed {
		if err := writeAtomic(f.app.path(name), out); err != nil {
			return changed, fmt.Errorf("%s: %w", name, err)
		}
	}
	if !f.write && !f.list && !f.diff {
		f.stdout.Write(out)
	}
	return changed, nil
}

// writeAtomic replaces the file at path (through a symlink, its target)
// with data: a temporary file in the same directory, given the original's
// mode, renamed over it, so a reader sees the old file or the new one.
func writeAtomic(path string, data []byte) error {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("rewriting: %w", err)
	}
	st, err := os.Stat(target)
	if err != nil {
		return fmt.Errorf("rewriting: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".fmt-*")
	if err != nil {
		return fmt.Errorf("rewriting: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("rewriting: %w", err)
	}
	if err := tmp.Chmod(st.Mode().Perm()); err != nil {
		tmp.Close()
		return fmt.Errorf("rewriting: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("rewriting: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("rewriting: %w", err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return fmt.Errorf("rewriting: %w", err)
	}
	return nil
}
