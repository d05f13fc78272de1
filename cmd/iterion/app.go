package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/iterion-bot/iterion/bot/schedule"
	"github.com/iterion-bot/iterion/engine"
)

// App is one execution of the iterion command: its command line, where it
// reads and writes, the environment and directory it runs in, and the parts
// a test replaces on its own App. main makes one from the process; tests
// make their own, so they run in parallel without sharing the process's
// environment or working directory. Run executes the command line; Close
// releases what the command still holds (the store, its socket, the
// sandboxes), after Run.
type App struct {
	// Args is the command line, without the program's name.
	Args []string
	// Stdin is read by prompts and typed answers; nil means os.Stdin.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output and its progress and
	// errors; nil means io.Discard.
	Stdout, Stderr io.Writer
	// Env sets environment variables for this App over the process's: a
	// name present here, even empty, is read from here. nil means the
	// process's environment alone.
	Env map[string]string
	// Dir is the directory relative paths are taken from (workflow files,
	// --store-dir, --config, the files the environment names, the REST
	// API's file_path) and the one iterion run works in. "" means the
	// process's working directory.
	Dir string
	// Backends builds the agent backends of the commands that execute runs,
	// reading the App's environment with getenv. nil means the build's
	// (buildBackends: claw).
	Backends func(getenv func(string) string) (map[string]engine.Backend, error)
	// WritePace spaces the GitHub App's writes to one installation. 0
	// means the App's default (github.DefaultWritePace, a second, as
	// GitHub asks).
	WritePace time.Duration
	// ScheduleClock is the time serve's schedules fire by; nil means the
	// system's (tests move it by hand).
	ScheduleClock schedule.Clock

	// workflowAllow and workflowSecrets are serve's workflow_env and
	// secrets:, set once its configuration is read (dslOptions).
	workflowAllow, workflowSecrets []string

	mu      sync.Mutex
	closers []func()
}

// Run executes the command line and returns the process's exit status:
// 0, 1 when the input has errors or the run failed, 2 on a usage error.
func (a *App) Run(ctx context.Context) int {
	stderr := a.stderr()
	root := a.newRoot()
	if a.Stdin != nil {
		root.SetIn(a.Stdin)
	}
	root.SetArgs(a.Args)
	err := root.ExecuteContext(ctx)
	var code exitCodeError
	var usage usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "iterion: %v\nRun '%s --help' for usage.\n", usage.err, strings.TrimSpace("iterion "+commandName(root, a.Args)))
		return exitUsage
	default:
		fmt.Fprintf(stderr, "iterion: %v\n", err)
		return exitError
	}
}

// Close releases, newest first, what the command opened and still holds.
// It may be called more than once.
func (a *App) Close() error {
	a.mu.Lock()
	closers := a.closers
	a.closers = nil
	a.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
	return nil
}

// hold has Close release a resource the command opened.
func (a *App) hold(release func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closers = append(a.closers, release)
}

// getenv reads an environment variable: Env's, else the process's.
func (a *App) getenv(name string) string {
	if v, ok := a.Env[name]; ok {
		return v
	}
	return os.Getenv(name)
}

// path is p taken from Dir: unchanged when p is absolute or empty, or when
// the App runs in the process's directory.
func (a *App) path(p string) string {
	if p == "" || a.Dir == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(a.Dir, p)
}

func (a *App) stdout() io.Writer { return writerOr(a.Stdout) }
func (a *App) stderr() io.Writer { return writerOr(a.Stderr) }

func writerOr(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
