package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/iterion-bot/iterion/backends/claudecode"
	"github.com/iterion-bot/iterion/backends/claw"
	"github.com/iterion-bot/iterion/backends/pi"
	"github.com/iterion-bot/iterion/dsl"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/engine/permission"
	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/store"
)

// backends returns the agent backends of the App: Backends', else the
// build's.
func (a *App) backends() (map[string]engine.Backend, error) {
	if a.Backends != nil {
		return a.Backends(a.getenv)
	}
	return a.buildBackends()
}

// buildBackends returns the agent backends this build has, reading the
// App's environment:
//   - claw: models named anthropic/… or openai/…, keys and base URLs from
//     ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, OPENAI_API_KEY, OPENAI_BASE_URL,
//     and the providers of the ITERION_PROVIDERS file; each MCP server of
//     a node connects within ITERION_MCP_CONNECT_TIMEOUT_MS (default 10 s);
//   - pi: the pi CLI (ITERION_PI_COMMAND, else pi on PATH) in the node's
//     sandbox, over its RPC mode, or its print mode with
//     ITERION_PI_MODE=print; its providers are the operator's pi
//     configuration (PI_CODING_AGENT_DIR, default ~/.pi/agent) and the
//     providers' key variables;
//   - claude_code: the Claude Code CLI (ITERION_CLAUDE_COMMAND, else claude
//     on PATH) in the node's sandbox, reaching Anthropic through the run's
//     model proxy with ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) and
//     ANTHROPIC_BASE_URL.
//
// The backends' warnings go to stderr.
func (a *App) buildBackends() (map[string]engine.Backend, error) {
	providers, err := a.loadProviders()
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(a.stderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := pi.New(pi.Options{Env: a.getenv, Logger: log.With("backend", "pi")})
	if err != nil {
		return nil, err
	}
	var mcpTimeout time.Duration
	if v := a.getenv("ITERION_MCP_CONNECT_TIMEOUT_MS"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("ITERION_MCP_CONNECT_TIMEOUT_MS=%q: want a positive number of milliseconds", v)
		}
		mcpTimeout = time.Duration(ms) * time.Millisecond
	}
	return map[string]engine.Backend{
		"claw":        claw.New(claw.Options{Env: a.getenv, Providers: providers, MCPConnectTimeout: mcpTimeout}),
		"pi":          p,
		"claude_code": claudecode.New(claudecode.Options{Env: a.getenv, Logger: log.With("backend", "claude_code")}),
	}, nil
}

// loadProviders reads the OpenAI-compatible providers file named by
// ITERION_PROVIDERS: {"providers": {"name": {"base_url": …, "api_key_env": …}}}.
// Models of such a provider are written name/model.
func (a *App) loadProviders() (map[string]claw.ProviderConfig, error) {
	path := a.getenv("ITERION_PROVIDERS")
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(a.path(path))
	if err != nil {
		return nil, fmt.Errorf("reading the providers file (ITERION_PROVIDERS): %w", err)
	}
	var file struct {
		Providers map[string]claw.ProviderConfig `json:"providers"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("providers file %s: %w (write {\"providers\": {\"name\": {\"base_url\": \"…\", \"api_key_env\": \"…\"}}})", path, err)
	}
	for name, p := range file.Providers {
		if name == "anthropic" || name == "openai" {
			return nil, fmt.Errorf("providers file %s: %q is built in; configure it with %s_BASE_URL and %s_API_KEY", path, name, strings.ToUpper(name), strings.ToUpper(name))
		}
		if p.BaseURL == "" || p.APIKeyEnv == "" {
			return nil, fmt.Errorf("providers file %s: provider %q needs base_url and api_key_env", path, name)
		}
	}
	return file.Providers, nil
}

// defaultBackend is the backend of model nodes that name none and whose
// workflow sets no default_backend: ITERION_DEFAULT_BACKEND, else the first
// backend of ITERION_BACKEND_PREFERENCE (comma separated) that this build
// has, else claw.
func (a *App) defaultBackend(have map[string]engine.Backend) string {
	if b := strings.TrimSpace(a.getenv("ITERION_DEFAULT_BACKEND")); b != "" {
		return b
	}
	for _, b := range strings.Split(a.getenv("ITERION_BACKEND_PREFERENCE"), ",") {
		if _, ok := have[strings.TrimSpace(b)]; ok {
			return strings.TrimSpace(b)
		}
	}
	return "claw"
}

// engineOptions are the engine options every command that executes runs
// uses; sb runs the processes of its runs. A stored run's workflow file is
// taken from the App's directory.
func (a *App) engineOptions(onEvent func(engine.Event), sb *nodesandbox.Sandboxes, parallel int) (engine.Options, error) {
	have, err := a.backends()
	if err != nil {
		return engine.Options{}, err
	}
	mode, err := permission.ParseMode(a.getenv("ITERION_PERMISSION"))
	if err != nil {
		return engine.Options{}, fmt.Errorf("ITERION_PERMISSION: %w", err)
	}
	return engine.Options{Backends: have, DefaultBackend: a.defaultBackend(have), OnEvent: onEvent, Failpoint: a.failpoint(),
		Permission: mode,
		Sandbox:    sb, MaxParallelBranches: parallel, Redactor: a.envRedactor(),
		Workflow: func(_ context.Context, run *engine.Run) (*dsl.Workflow, error) {
			return engine.LoadWorkflowFile(a.path(run.File), a.dslOptions())
		}}, nil
}

// cliEngineOptions are engineOptions for a command run by a person on
// their own workflows (run, resume, runs recover): the sandbox is the one of
// --sandbox, else ITERION_SANDBOX, else bwrap, and a workflow may ask for
// the host, the network and any docker image. Problems with the sandbox are
// said on stderr. The App's Close releases the sandbox, once the command
// has finished with the engine.
func (a *App) cliEngineOptions(onEvent func(engine.Event), sandboxFlag, dir string, stderr io.Writer) (engine.Options, error) {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sb, err := a.newSandboxes(sandboxSettings{}, sandboxFlag, dir, true, log)
	if err != nil {
		return engine.Options{}, usageError{err}
	}
	return a.engineOptions(onEvent, sb, 0)
}

// storeDirHelp is the help of every --store-dir but serve's.
const storeDirHelp = "store directory (default $ITERION_STORE or " + defaultStoreDir + ")"

type runFlags struct {
	vars          []string
	preset        string
	runID         string
	storeDir      string
	asJSON        bool
	noInteractive bool
	sandbox       string
}

func (a *App) newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run a workflow in this process until it finishes, fails or pauses",
		Long: `Run compiles FILE, stores a new run in the store directory (--store-dir, else
$ITERION_STORE, else ` + defaultStoreDir + `) and executes it here. While it runs, this
process owns the store: other iterion commands reach it through its socket
(iterion runs questions, iterion runs answer …).

In a terminal, async questions are printed as the agent posts them; type an
answer and press Enter to answer the oldest open question, while the run goes
on. A human node pauses the run: run then asks for each answer, unless
--no-interactive, in which case it exits 0 with the run paused (continue it
with iterion resume).

Exit status: 0 when the run finished or paused, 1 when it failed, was
cancelled or the workflow is invalid, 2 on a usage error.`,
		Args: exactArgs(1, "run needs one workflow file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runWorkflow(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], f)
		},
	}
	cmd.Flags().StringArrayVar(&f.vars, "var", nil, "set a workflow var: --var name=value (repeatable)")
	cmd.Flags().StringVar(&f.preset, "preset", "", "apply a preset declared by the workflow")
	cmd.Flags().StringVar(&f.runID, "run-id", "", "id of the new run ([a-z0-9-], at most 64); generated when empty")
	cmd.Flags().StringVar(&f.storeDir, "store-dir", "", storeDirHelp)
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the outcome as JSON")
	cmd.Flags().BoolVar(&f.noInteractive, "no-interactive", false, "never prompt; a pause ends the command")
	cmd.Flags().StringVar(&f.sandbox, "sandbox", "", "where the run's processes run: "+defaultSandboxDriver+" (default; $ITERION_SANDBOX), docker, or host (no isolation)")
	return cmd
}

func exactArgs(n int, msg string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{errors.New(msg)}
		}
		return nil
	}
}

// loadWorkflow reads and compiles a workflow, printing its diagnostics.
func (a *App) loadWorkflow(out io.Writer, file string) (*dsl.Workflow, error) {
	src, err := a.readWorkflow(file)
	if err != nil {
		return nil, err
	}
	w, ds := a.dslOptions().CompileSource(file, src)
	if ds.HasErrors() {
		_ = dsl.Render(out, ds, map[string][]byte{file: src})
		return nil, fmt.Errorf("%s has errors; fix them and run again", file)
	}
	return w, nil
}

func parseKV(list []string, flag string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usageError{fmt.Errorf("--%s %q: write name=value", flag, kv)}
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}

// progress prints a run's events as one line each. Events come from the
// engine's goroutines and API requests, so every write to its output,
// events or not, goes through its lock (Write).
type progress struct {
	mu  sync.Mutex
	out io.Writer
}

func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *progress) event(ev engine.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Node ids, questions and errors are the workflow's and the agents'
	// text: escaped, they cannot rewrite the terminal.
	node := termLine(ev.NodeID)
	switch ev.Type {
	case engine.EventNodeStarted:
		fmt.Fprintf(p.out, "▶ %s %s\n", termLine(fmt.Sprint(ev.Data["kind"])), node)
	case engine.EventNodeFinished:
		fmt.Fprintf(p.out, "✓ %s\n", node)
	case engine.EventHumanInputRequested:
		q, _ := ev.Data["questions"].(map[string]any)
		if ev.Data["async"] == true {
			id := termLine(fmt.Sprint(ev.Data["interaction_id"]))
			fmt.Fprintf(p.out, "? question %s from %s: %s\n  (type an answer and press Enter, or: iterion runs answer %s %s \"…\")\n",
				id, node, termLine(fmt.Sprint(q[engine.QuestionKey])), termLine(ev.RunID), id)
		}
	case engine.EventInteractionAnswered:
		fmt.Fprintf(p.out, "✎ %s answered\n", termLine(fmt.Sprint(ev.Data["interaction_id"])))
	case engine.EventRunFailed:
		fmt.Fprintf(p.out, "✗ run failed [%s]: %s\n", termLine(fmt.Sprint(ev.Data["code"])), termLine(fmt.Sprint(ev.Data["error"])))
	}
}

// interactive reports whether stdin is a terminal.
func interactive(in io.Reader) bool {
	f, ok := in.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (a *App) runWorkflow(ctx context.Context, in io.Reader, stdout, stderr io.Writer, file string, f runFlags) error {
	kv, err := parseKV(f.vars, "var")
	if err != nil {
		return err
	}
	given := map[string]any{}
	for k, v := range kv {
		given[k] = v
	}
	w, err := a.loadWorkflow(stderr, file)
	if err != nil {
		return err
	}
	dir := a.storeDir(f.storeDir)
	prog := &progress{out: stderr}
	stderr = prog
	runID := f.runID
	if runID == "" {
		runID = engine.NewRunID(time.Now())
	}
	// The engine resumes a run paused on an await when its last question
	// is answered (here or through the socket); resumed says so.
	resumed := make(chan struct{}, 1)
	onEvent := func(ev engine.Event) {
		prog.event(ev)
		if ev.RunID == runID && ev.Type == engine.EventRunResumed {
			select {
			case resumed <- struct{}{}:
			default:
			}
		}
	}
	opts, err := a.cliEngineOptions(onEvent, f.sandbox, dir, stderr)
	if err != nil {
		return err
	}
	// Without prompts, a wait for answers ends the command: the run is
	// parked in the store, with its deadline, for whoever answers.
	opts.ParkGates = f.noInteractive
	o, err := a.becomeOwner(dir, "iterion run "+file, opts, stderr)
	if err != nil {
		return err
	}

	tty := interactive(in) && !f.noInteractive
	// One reader owns the terminal: its lines answer async questions while
	// the run executes, and go to the pause prompt while the run is paused.
	var term *terminal
	if tty {
		term = newTerminal(in)
		go term.answerLoop(ctx, o, runID, a.userName(), stderr)
	}
	// The run works in the App's directory.
	run, err := o.engine.Start(ctx, engine.StartRequest{Workflow: w, RunID: runID, Vars: given, Preset: f.preset, Trigger: engine.Trigger{Source: "cli"}, File: file, WorkDir: a.Dir})
	var verr *engine.VarsError
	var preset *engine.PresetError
	var badID *engine.InvalidRunIDError
	switch {
	case errors.As(err, &badID):
		return usageError{fmt.Errorf("--run-id %q: use 1 to 64 of a-z, 0-9 and -", f.runID)}
	case errors.As(err, &verr), errors.As(err, &preset):
		// Vars missing, unknown or mistyped, or an unknown preset: what
		// the command line says is wrong.
		return usageError{fmt.Errorf("%s: %s", file, cliRefusal(err))}
	case err != nil:
		return errors.New(cliRefusal(err))
	}
	for run.Status == engine.StatusPausedWaitingHuman && !f.noInteractive {
		if awaitPaused(ctx, o, run.ID) {
			// Paused on the await_answers tool: the engine resumes it once
			// every question is answered, through the socket or typed here.
			fmt.Fprintf(stderr, "run %s waits for the answers to its questions (iterion runs questions %s)\n", run.ID, run.ID)
			select {
			case <-resumed:
			case <-ctx.Done():
				return a.report(context.WithoutCancel(ctx), stdout, o.db, run, dir, f.asJSON)
			}
		} else {
			if !tty {
				break
			}
			err := answerPauseHere(ctx, term, stderr, o, run, w, a.userName())
			if errors.Is(err, errNoAnswer) {
				fmt.Fprintln(stderr)
				break // the run stays paused: report says how to answer it
			}
			if err != nil {
				return err
			}
		}
		if run, err = waitForRun(ctx, o, run.ID); err != nil {
			return err
		}
	}
	return a.report(context.WithoutCancel(ctx), stdout, o.db, run, dir, f.asJSON)
}

// answerPauseHere asks, in the terminal, for the answers of the blocking
// question the run is paused on, until the engine takes them; they are
// recorded as by, via cli.
func answerPauseHere(ctx context.Context, term *terminal, out io.Writer, o *owner, run *engine.Run, w *dsl.Workflow, by string) error {
	for {
		answers, ixID, err := promptPause(ctx, term, out, o, run, w)
		if err != nil {
			return err
		}
		fields := map[string]any{}
		for k, v := range answers {
			fields[k] = v
		}
		_, err = o.engine.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: ixID, Fields: fields, By: by, Via: "cli"})
		var bad *engine.InvalidAnswerError
		switch {
		case errors.As(err, &bad):
			fmt.Fprintf(out, "  not taken: %v\n", bad)
			continue // asked again
		case err != nil:
			return errors.New(cliRefusal(err))
		}
		return nil
	}
}

// waitForRun waits until the engine's runs have stopped (this command's
// run is the only one it executes) and returns the run as stored. Ctrl-C
// stops the run (it can be resumed) and waits for that.
func waitForRun(ctx context.Context, o *owner, runID string) (*engine.Run, error) {
	if err := o.engine.Wait(ctx); err != nil {
		bg := context.WithoutCancel(ctx)
		if _, err := o.engine.Stop(bg, runID, "interrupted (Ctrl-C)"); err != nil {
			return nil, err
		}
		_ = o.engine.Wait(bg)
	}
	return o.db.Run(context.WithoutCancel(ctx), runID)
}

// awaitPaused reports whether the run is paused on an await (the
// await_answers tool, or a gate parked in the store): an interaction of
// kind await is open.
func awaitPaused(ctx context.Context, o *owner, runID string) bool {
	ixs, err := o.db.Interactions(ctx, runID)
	if err != nil {
		return false
	}
	for _, ix := range ixs {
		if ix.Kind == engine.KindAwait && ix.Pending() {
			return true
		}
	}
	return false
}

// cliRefusal phrases the engine's refusals for a person at the command
// line, naming the flags and commands that fix them.
func cliRefusal(err error) string {
	var verr *engine.VarsError
	var bad *engine.InvalidAnswerError
	var changed *engine.WorkflowChangedError
	switch {
	case errors.As(err, &verr):
		var parts []string
		for _, p := range verr.Problems {
			switch p.Kind {
			case engine.ProblemMissing:
				parts = append(parts, fmt.Sprintf("%s: pass --var %s=…", p, p.Name))
			default:
				parts = append(parts, p.String())
			}
		}
		msg := strings.Join(parts, "; ")
		if len(verr.Declared) > 0 {
			msg += " (the workflow's vars: " + strings.Join(verr.Declared, ", ") + ")"
		}
		return msg
	case errors.As(err, &bad):
		var parts []string
		for _, f := range bad.Fields {
			parts = append(parts, f.Name+"=…")
		}
		return fmt.Sprintf("%v; answer with %s", bad, strings.Join(parts, " "))
	case errors.As(err, &changed):
		return fmt.Sprintf("%v: resume with --force to run the new version", changed)
	}
	var unanswered *engine.UnansweredError
	if errors.As(err, &unanswered) {
		return fmt.Sprintf("%v: answer them with iterion runs answer %s QUESTION \"your answer\" (the last answer continues the run)", unanswered, unanswered.RunID)
	}
	return err.Error()
}

// terminal reads lines typed in the terminal and hands each either to the
// async answer loop or, while a pause prompt is open, to the prompt.
type terminal struct {
	lines     chan string
	prompting atomic.Bool
	prompt    chan string
}

func newTerminal(in io.Reader) *terminal {
	t := &terminal{lines: make(chan string), prompt: make(chan string)}
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			if t.prompting.Load() {
				t.prompt <- sc.Text()
			} else {
				t.lines <- sc.Text()
			}
		}
		close(t.lines)
		close(t.prompt)
	}()
	return t
}

// readAnswer prints prompt on out and waits for the next line typed; ok
// is false at the end of the input or once ctx ends (Ctrl-C). Lines typed
// once the prompt shows go to it, not to the async answer loop.
func (t *terminal) readAnswer(ctx context.Context, out io.Writer, prompt string) (string, bool) {
	t.prompting.Store(true)
	defer t.prompting.Store(false)
	fmt.Fprint(out, prompt)
	select {
	case line, ok := <-t.prompt:
		return line, ok
	case <-ctx.Done():
		return "", false
	}
}

// answerLoop answers the oldest pending async question with each line
// typed while the run goes on, as by, via cli.
func (t *terminal) answerLoop(ctx context.Context, o *owner, runID, by string, out io.Writer) {
	for line := range t.lines {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		pending, err := o.db.Pending(ctx, runID, "")
		if err != nil || len(pending) == 0 {
			fmt.Fprintln(out, "  (no open question to answer)")
			continue
		}
		if _, err := o.engine.Answer(ctx, engine.AnswerRequest{RunID: runID, InteractionID: pending[0].ID, Text: line, By: by, Via: "cli"}); err != nil {
			fmt.Fprintf(out, "  answer refused: %v\n", err)
		}
	}
}

// errNoAnswer ends a pause prompt without answers: the input ended or the
// user pressed Ctrl-C. The run stays paused.
var errNoAnswer = errors.New("no answer typed")

// promptPause asks, in a terminal, for the answers of a blocking pause,
// each field until its answer fits (see askPause).
func promptPause(ctx context.Context, term *terminal, out io.Writer, o *owner, run *engine.Run, w *dsl.Workflow) (map[string]string, string, error) {
	ixs, err := o.db.Interactions(ctx, run.ID)
	if err != nil {
		return nil, "", err
	}
	var ix *engine.Interaction
	for _, candidate := range ixs {
		if candidate.Kind != engine.KindAsync && candidate.Pending() {
			ix = candidate
		}
	}
	if ix == nil {
		return nil, "", fmt.Errorf("run %s is paused but has no open question", run.ID)
	}
	read := func(ctx context.Context, prompt string) (string, bool) { return term.readAnswer(ctx, out, prompt) }
	answers, err := askPause(ctx, read, out, ix, w.Node(ix.NodeID))
	return answers, ix.ID, err
}

// report prints the outcome and sets the exit status. It reads the run
// whatever ctx says: after a Ctrl-C it still tells what the run waits for.
func (a *App) report(ctx context.Context, out io.Writer, db *store.DB, run *engine.Run, dir string, asJSON bool) error {
	ctx = context.WithoutCancel(ctx)
	// This process holds the store and owns the run.
	v, err := viewRun(ctx, dbReader{db}, run.ID, storeInfo{arg: a.storeArg(dir), holder: os.Getpid()})
	if err != nil {
		v = &runView{Run: run}
	}
	if asJSON {
		_ = printJSON(out, outcomeJSON(v, dir))
	} else {
		writeOutcome(out, v)
	}
	switch run.Status {
	case engine.StatusFinished, engine.StatusPausedWaitingHuman:
		return nil
	}
	return exitCodeError(exitError)
}

// outcomeJSON is the outcome as run --json prints it.
func outcomeJSON(v *runView, dir string) map[string]any {
	res := map[string]any{"run_id": v.ID, "workflow": v.Workflow, "store": dir, "status": v.Status, "file": v.File}
	if p := v.Pause; p != nil {
		res["node_id"], res["interaction_id"], res["questions"] = p.Node, p.InteractionID, p.Questions
		if p.Kind == engine.KindAwait {
			var waits []string
			for _, ix := range v.Questions {
				waits = append(waits, ix.ID)
			}
			res["waiting_for"] = waits
		} else {
			res["fields"] = p.Fields
		}
	}
	if len(v.Nodes) > 0 {
		res["nodes"] = v.Nodes
	}
	if len(v.Questions) > 0 {
		res["open_questions"] = v.Questions
	}
	if v.Output != nil {
		res["output"] = v.Output
	}
	if v.FailureCode != "" {
		res["failure_code"], res["error"] = v.FailureCode, v.Error
	}
	return res
}

func (a *App) newResumeCmd() *cobra.Command {
	var runID, storeFlag, file, answersFile string
	var answers []string
	var force, asJSON bool
	cmd := &cobra.Command{
		Use:   "resume --run-id ID [--answer k=v]…",
		Short: "Continue a paused, failed_resumable, cancelled or interrupted run in this process",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runID == "" {
				return usageError{errors.New("resume needs --run-id")}
			}
			given, err := parseKV(answers, "answer")
			if err != nil {
				return err
			}
			if answersFile != "" {
				b, err := os.ReadFile(a.path(answersFile))
				if err != nil {
					return fmt.Errorf("reading --answers-file: %w", err)
				}
				var fromFile map[string]any
				if err := json.Unmarshal(b, &fromFile); err != nil {
					return fmt.Errorf("--answers-file %s: want a JSON object of answers: %w", answersFile, err)
				}
				for k, v := range fromFile {
					if s, ok := v.(string); ok {
						given[k] = s
					} else {
						b, _ := json.Marshal(v)
						given[k] = string(b)
					}
				}
			}
			return a.resumeRun(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), runID, a.storeDir(storeFlag), file, given, force, asJSON)
		},
	}
	cmd.Flags().StringVar(&runID, "run-id", "", "the run to continue")
	cmd.Flags().StringVar(&storeFlag, "store-dir", "", storeDirHelp)
	cmd.Flags().StringVar(&file, "file", "", "workflow file (default: the one the run started from)")
	cmd.Flags().StringArrayVar(&answers, "answer", nil, "answer of the paused question: --answer field=value (repeatable)")
	cmd.Flags().StringVar(&answersFile, "answers-file", "", "JSON object of answers")
	cmd.Flags().BoolVar(&force, "force", false, "resume even if the workflow file changed since the run started")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the outcome as JSON")
	return cmd
}

// recoverRuns continues, one after the other, every run still marked
// running: this process holds the store, so their owner died mid-run.
func (a *App) recoverRuns(ctx context.Context, stdout, stderr io.Writer, dir string) error {
	prog := &progress{out: stderr}
	opts, err := a.cliEngineOptions(prog.event, "", dir, stderr)
	if err != nil {
		return err
	}
	o, err := a.becomeOwner(dir, "iterion runs recover", opts, io.Discard)
	if err != nil {
		return err
	}
	runs, err := o.db.Runs(ctx, engine.RunFilter{Status: engine.StatusRunning})
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		fmt.Fprintln(stdout, "no interrupted run")
		return nil
	}
	failed := false
	for _, r := range runs {
		w, err := a.loadWorkflow(stderr, r.File)
		if err != nil {
			fmt.Fprintf(stdout, "run %s: cannot load its workflow: %v (continue it with iterion resume --run-id %s --file …)\n", r.ID, err, r.ID)
			failed = true
			continue
		}
		run, err := o.engine.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: r.ID, Via: "cli"})
		if err != nil {
			fmt.Fprintf(stdout, "run %s: %v\n", r.ID, err)
			failed = true
			continue
		}
		if a.report(ctx, stdout, o.db, run, dir, false) != nil {
			failed = true
		}
	}
	if failed {
		return exitCodeError(exitError)
	}
	return nil
}

func (a *App) resumeRun(ctx context.Context, stdout, stderr io.Writer, runID, dir, file string, answers map[string]string, force, asJSON bool) error {
	prog := &progress{out: stderr}
	opts, err := a.cliEngineOptions(prog.event, "", dir, stderr)
	if err != nil {
		return err
	}
	o, err := a.becomeOwner(dir, "iterion resume "+runID, opts, io.Discard)
	if err != nil {
		return err
	}
	run, err := o.db.Run(ctx, runID)
	if err != nil {
		return fmt.Errorf("run %s: %w (list runs with iterion runs list)", runID, err)
	}
	if file == "" {
		file = run.File
	}
	if file == "" {
		return usageError{fmt.Errorf("run %s did not record its workflow file: pass --file", runID)}
	}
	w, err := a.loadWorkflow(stderr, file)
	if err != nil {
		return err
	}
	run, err = o.engine.Resume(ctx, engine.ResumeRequest{Workflow: w, RunID: runID, Answers: answers, Force: force, By: a.userName(), Via: "cli"})
	if err != nil {
		return errors.New(cliRefusal(err))
	}
	return a.report(ctx, stdout, o.db, run, dir, asJSON)
}

// userName is who a person at the command line answers as: $USER.
func (a *App) userName() string {
	if u := a.getenv("USER"); u != "" {
		return u
	}
	return "cli"
}
