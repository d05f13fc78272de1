package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/internal/textdist"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the input has errors
	exitUsage = 2 // the command line is wrong
)

// version is set at build time with -ldflags "-X main.version=…"; the
// module version from the build info is used otherwise.
var version = ""

// usageError marks errors in the command line itself.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }

// exitCodeError carries a non-zero exit code for a command that already
// reported its findings.
type exitCodeError int

func (e exitCodeError) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func commandName(root *cobra.Command, args []string) string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == root {
		return ""
	}
	return strings.TrimPrefix(cmd.CommandPath(), root.Name()+" ")
}

// newRoot is the command tree, writing to the App's outputs.
func (a *App) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "iterion",
		Short:         "Run LLM-agent workflows written in the iterion DSL from GitHub pull requests and the command line",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(a.stdout())
	root.SetErr(a.stderr())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newVersionCmd(), a.newValidateCmd(), a.newFmtCmd(), a.newRunCmd(), a.newResumeCmd(), a.newRunsCmd(), a.newSchedulesCmd(), a.newFakeModelCmd(), a.newServeCmd(),
		a.newSandboxExecCmd(), a.newMCPAskUserCmd(), a.newClaudeHookCmd(), a.newStoreCmd(), a.newHealthCmd())
	groupsOnly(root)
	return root
}

// nearestCommand is the subcommand of c nearest to typed (a swap or a
// slip of one or two letters), or "".
func nearestCommand(c *cobra.Command, typed string) string {
	best, bestD := "", 3
	for _, sub := range c.Commands() {
		if !sub.IsAvailableCommand() {
			continue
		}
		for _, name := range append([]string{sub.Name()}, sub.Aliases...) {
			if d := textdist.Distance(typed, name); d < bestD {
				best, bestD = sub.Name(), d
			}
		}
	}
	return best
}

// groupsOnly makes every command that only groups others (iterion, iterion
// runs) refuse an unknown subcommand as a usage error, with cobra's
// suggestions, instead of printing help and succeeding. Without arguments
// it prints its help.
func groupsOnly(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		groupsOnly(sub)
	}
	if !cmd.HasSubCommands() || cmd.Run != nil || cmd.RunE != nil {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if near := nearestCommand(c, args[0]); near != "" {
			msg += fmt.Sprintf(": did you mean %q?", near)
		}
		return usageError{errors.New(msg)}
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of iterion",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "iterion %s (dsl ir %d)\n", buildVersion(), dsl.IRVersion)
			return nil
		},
	}
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", args[0])}
	}
	return nil
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}

func (a *App) newValidateCmd() *cobra.Command {
	var asJSON, withEnv bool
	var compat string
	cmd := &cobra.Command{
		Use:   "validate FILE... | validate --compat DIR",
		Short: "Check workflow files and report every problem with its position and a fix",
		Long: `Validate parses and compiles each .bot workflow file and prints every
diagnostic as file:line:col: severity [code]: message, the source line with a
caret under the problem, and a fix: hint. It does not read the environment:
the result depends on the files alone, and a property value written as
${NAME:-default} is checked, and shown, with its default. With --env it
takes the values a run here would take (the variables ITERION_WORKFLOW_ENV
allows; serve also reads its config's workflow_env).

--compat DIR walks DIR for .bot and .iter files and prints one line per file
(ok, ok with N warnings, or N errors and the first of them), then a summary;
with --json, the same as data.

Exit status: 0 when no file has errors (warnings are still printed), 1 when
any file has errors or cannot be read, 2 on a usage error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := dsl.Options{}
			if withEnv {
				opts = a.dslOptions()
			}
			if compat != "" {
				if len(args) > 0 {
					return usageError{errors.New("validate --compat DIR takes no file arguments")}
				}
				return a.validateCompat(cmd.OutOrStdout(), compat, opts, asJSON)
			}
			if len(args) == 0 {
				return usageError{errors.New("validate needs at least one workflow file (or --compat DIR)")}
			}
			return a.validate(cmd.OutOrStdout(), args, opts, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {\"diagnostics\": [...]} as JSON instead of text")
	cmd.Flags().BoolVar(&withEnv, "env", false, "read ${NAME:-default} values from the environment a run here would read")
	cmd.Flags().StringVar(&compat, "compat", "", "check every .bot/.iter file under this directory, one line each")
	return cmd
}

// validate checks files and reports. It returns exitCodeError(1) when any
// file has errors.
func (a *App) validate(stdout io.Writer, files []string, opts dsl.Options, asJSON bool) error {
	all := []dsl.JSONDiagnostic{}
	failed := false
	for _, name := range files {
		src, err := a.readWorkflow(name)
		if err != nil {
			failed = true
			// Not a diagnostic of the language: the file could not be read.
			all = append(all, dsl.JSONDiagnostic{Source: "file", Severity: "error", File: name,
				Message: err.Error(), Hint: "check the path; workflow files end in .bot (or .iter)"})
			if !asJSON {
				fmt.Fprintf(stdout, "%s: error: %v\n", name, err)
			}
			continue
		}
		w, ds := opts.CompileSource(name, src)
		all = append(all, ds.JSON()...)
		if ds.HasErrors() {
			failed = true
		}
		if asJSON {
			continue
		}
		if err := dsl.Render(stdout, ds, map[string][]byte{name: src}); err != nil {
			return err
		}
		errs, warns := ds.Count()
		if errs > 0 {
			fmt.Fprintf(stdout, "%s: %s, %s\n", name, plural(errs, "error"), plural(warns, "warning"))
			continue
		}
		fmt.Fprintf(stdout, "%s: ok: workflow %q, %s, %s", name, w.Name, plural(len(w.Nodes), "node"), plural(len(w.Edges), "edge"))
		if warns > 0 {
			fmt.Fprintf(stdout, ", %s", plural(warns, "warning"))
		}
		fmt.Fprintln(stdout)
		printEnvRefs(stdout, name, w.EnvRefs, opts.Env != nil)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"diagnostics": all}); err != nil {
			return err
		}
	}
	if failed {
		return exitCodeError(exitError)
	}
	return nil
}

// readWorkflow reads a workflow file (name, taken from the App's
// directory), refusing other extensions and reading at most one byte past
// the size limit so the parser reports E091 without loading a huge file.
func (a *App) readWorkflow(name string) ([]byte, error) {
	switch filepath.Ext(name) {
	case ".bot", ".iter":
	default:
		return nil, fmt.Errorf("unsupported workflow extension %q: expected .bot or .iter", filepath.Ext(name))
	}
	// Opened without blocking and checked: a FIFO or a device named as a
	// workflow would otherwise hold the command forever.
	f, err := os.OpenFile(a.path(name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("reading workflow: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("reading workflow %s: %w", name, err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("reading workflow %s: not a regular file (%s): name the .bot file itself", name, st.Mode().Type())
	}
	src, err := io.ReadAll(io.LimitReader(f, dsl.MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading workflow %s: %w", name, err)
	}
	return src, nil
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
