package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/iterion-bot/iterion/engine/permission"
	"io"
	"log/slog"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/iterion-bot/iterion/dsl"
)

// Options configure an Engine. The zero value of each field means the
// default documented on it; Store is required.
type Options struct {
	// Store keeps runs, checkpoints, interactions, the inbox and events.
	Store Store
	// Backends maps backend names (claw, claude_code, pi, …) to their
	// implementations. nil means none: LLM nodes then fail with a clear
	// "backend not available" error.
	Backends map[string]Backend
	// DefaultBackend is used when neither the node nor the workflow names
	// one. "" means claw.
	DefaultBackend string
	// Clock returns the current time: timestamps, and the absolute
	// deadlines of gates and paused runs. nil means time.Now. The timers
	// that wait for those deadlines and for node and wait timeouts run on
	// the time package, so a Clock must move with it; tests that wait on
	// time run in a testing/synctest bubble, whose fake time moves both.
	Clock func() time.Time
	// Logger receives operational logs. nil means none.
	Logger *slog.Logger
	// Owner names this process in run leases. "" means host:pid.
	Owner string
	// Poll is how often parked gates re-check the store for answers that
	// arrived through another process. 0 means one second.
	Poll time.Duration
	// OnEvent, when set, is called with every event once it is stored, in
	// order per run, for progress display and live views. It must not
	// block for long.
	OnEvent func(Event)
	// Sandbox runs every process the run starts (tool nodes, agents'
	// shells). nil means none: such nodes fail SANDBOX_UNAVAILABLE, since
	// nothing runs on the host unless asked for.
	Sandbox Sandbox
	// WorkspaceQuota, when positive, is the most a run's workspace may hold,
	// in bytes, measured after each node that may write to it; a run over it
	// fails SANDBOX_LIMIT. 0 means no quota.
	WorkspaceQuota int64
	// MaxParallelBranches bounds the branches of a fan_out_all that run at
	// once when the workflow's budget does not. 0 means four per core.
	MaxParallelBranches int
	// Permission is the permission mode of the agents whose workflow
	// writes none (ITERION_PERMISSION); the zero value is off.
	Permission permission.Mode
	// Redactor scrubs the server's secret values from what the engine
	// stores for people to read (failure messages, events, outbox rows,
	// questions, node outputs and so artifacts), from the events OnEvent
	// gets and from Logger's records. nil means nothing is scrubbed.
	Redactor *Redactor
	// Workflow loads the workflow of a stored run, for the resumes the
	// engine starts by itself (an answer that releases a run, recovery, a
	// form answered through any channel). nil means compiling run.File.
	Workflow func(ctx context.Context, run *Run) (*dsl.Workflow, error)
	// ParkGates makes an await_answers gate that must wait pause the run
	// durably (paused_waiting_human, with its stored deadline) instead of
	// waiting in this process: for a command that ends rather than waits.
	// Answering the last question resumes it, in whichever process owns
	// the store then. Gates inside fan-out branches still wait in process.
	ParkGates bool
	// MaxStoredBytes is the most a run may write to the store (events,
	// checkpoints, outputs, questions), a run past it failing
	// BUDGET_EXCEEDED. 0 means DefaultMaxStoredBytes; negative means no
	// limit.
	MaxStoredBytes int64
	// WorkDir, when set, gives the workspace of a run launched without
	// one (StartRequest.WorkDir ""), once the launch is validated, and of a
	// run that recorded none, for the resumes the engine starts by itself.
	// nil means the current directory.
	WorkDir func(run *Run) (string, error)
	// Failpoint, when set, is called at named points of execution (see
	// the Failpoint constants); crash tests make it kill the process there.
	Failpoint func(name string)
}

// Failpoints: the places crash tests stop the process.
const (
	// FailAfterExec: a node has run, its output is not recorded yet.
	FailAfterExec = "after-exec"
	// FailBetweenNodes: a node's checkpoint is stored, the next has not started.
	FailBetweenNodes = "between-nodes"
	// FailGateParked: an await_answers gate is parked, its deadline stored.
	FailGateParked = "gate-parked"
	// FailAnswerCommitted: an answer is stored but not yet acknowledged.
	FailAnswerCommitted = "answer-committed"
)

// Engine runs workflows. It is safe for concurrent use; one Engine serves
// every run of a process.
type Engine struct {
	store    Store
	backends map[string]Backend
	defBack  string
	now      func() time.Time
	log      *slog.Logger
	owner    string
	poll     time.Duration
	bell     *doorbell
	changes  *changeBells
	onEvent  func(Event)
	failAt   func(string)
	redact   *Redactor
	sandbox  Sandbox
	parallel int
	quota    int64
	// permission is the mode of agents whose workflow writes none.
	permission permission.Mode

	// loadWorkflow loads a stored run's workflow for the resumes the
	// engine starts by itself; nil means compiling the run's file.
	loadWorkflow func(context.Context, *Run) (*dsl.Workflow, error)
	parkGates    bool
	workDir      func(*Run) (string, error)
	maxStored    int64

	mu      sync.Mutex
	running map[string]*execution
	group   runGroup
	answers runLocks
	timers  timers
	// followUps is the loop of the questions' timers.
	followUps followUpLoop
}

// New returns an Engine.
func New(opts Options) *Engine {
	e := &Engine{
		store: opts.Store, backends: opts.Backends, defBack: opts.DefaultBackend,
		now: opts.Clock, log: opts.Logger, owner: opts.Owner, poll: opts.Poll,
		bell: newDoorbell(), changes: &changeBells{}, running: map[string]*execution{}, onEvent: opts.OnEvent, failAt: opts.Failpoint,
		sandbox: opts.Sandbox, parallel: opts.MaxParallelBranches, quota: opts.WorkspaceQuota,
		loadWorkflow: opts.Workflow, parkGates: opts.ParkGates, workDir: opts.WorkDir,
		maxStored: opts.MaxStoredBytes, permission: opts.Permission,
	}
	if e.parallel <= 0 {
		e.parallel = 4 * runtime.NumCPU()
	}
	if e.failAt == nil {
		e.failAt = func(string) {}
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.log == nil {
		e.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if e.owner == "" {
		host, _ := os.Hostname()
		e.owner = host + ":" + strconv.Itoa(os.Getpid())
	}
	if e.poll <= 0 {
		e.poll = time.Second
	}
	if e.defBack == "" {
		e.defBack = "claw"
	}
	if r := opts.Redactor; r != nil {
		e.redact = r
		e.store = redactingStore{Store: e.store, r: r}
		e.log = slog.New(RedactingHandler(e.log.Handler(), r))
		if on := e.onEvent; on != nil {
			e.onEvent = func(ev Event) {
				ev.Data = r.Map(ev.Data)
				on(ev)
			}
		}
	}
	// Outermost, so every write of a run wakes its WaitChange waiters.
	e.store = ringingStore{Store: e.store, bells: e.changes}
	return e
}

// StartRequest describes a new run.
type StartRequest struct {
	Workflow *dsl.Workflow
	// RunID is the id to use; "" generates one.
	RunID string
	// Vars are the run's variables: text (from a command line or a
	// comment) is converted to the declared type, typed values (JSON
	// numbers and booleans) are checked against it; vars not given take
	// their defaults.
	Vars map[string]any
	// Preset, when set, names the workflow preset whose values apply
	// before Vars.
	Preset   string
	Trigger  Trigger
	Channels []string
	// WorkDir is where tool nodes run and agents work. "" means
	// Options.WorkDir's, else the current directory. It is recorded on the
	// run, for its resumes.
	WorkDir string
	File    string
}

// execution is a run executing in this process. mu serializes a Stop's
// request with the executor's exit, so a stop recorded while the run
// executes is always honoured by the executor or by its exit.
type execution struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	exited bool
	// gone is closed once the run is no longer registered.
	gone chan struct{}
}

// register marks a run as executing in this process from now on, so
// Cancel and Stop reach it. done, called when the executor returns,
// honours a stop recorded meanwhile that the run did not end on (it
// paused, or returned on an error) and unregisters it.
func (e *Engine) register(ctx context.Context, runID string) (context.Context, func(), error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, executing := e.running[runID]; executing {
		return nil, nil, fmt.Errorf("run %s: %w", runID, errExecuting)
	}
	ctx, cancel := context.WithCancel(ctx)
	x := &execution{cancel: cancel, gone: make(chan struct{})}
	e.running[runID] = x
	return ctx, func() {
		cancel()
		x.mu.Lock()
		x.exited = true
		if _, err := e.endIfStopped(context.WithoutCancel(ctx), runID); err != nil {
			e.log.Error("ending a stopped run", "run", runID, "err", err)
		}
		x.mu.Unlock()
		e.mu.Lock()
		delete(e.running, runID)
		e.mu.Unlock()
		close(x.gone)
	}, nil
}

// waitIdle waits until run runID is not executing in this process. Called
// for a run the store has paused, it waits for its executor's exit.
func (e *Engine) waitIdle(ctx context.Context, runID string) error {
	for {
		e.mu.Lock()
		x, ok := e.running[runID]
		e.mu.Unlock()
		if !ok {
			return nil
		}
		select {
		case <-x.gone:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Cancel asks a run executing in this process to stop, and returns at
// once. It reports whether the run was executing here; the run may still
// commit the status it was already writing. Stop is the acknowledged form.
func (e *Engine) Cancel(runID string) bool {
	e.mu.Lock()
	x, ok := e.running[runID]
	e.mu.Unlock()
	if ok {
		x.cancel()
	}
	return ok
}

// Stop ends a run that is not over, and reports whether it did. When it
// returns true the stop is durable. A run paused or interrupted and not
// executing is leased (any executor that took it meanwhile is stale from
// then on) and stored cancelled, synced, with the outbox row that tells
// its channels. A run executing in this process is marked in the store
// (RequestStop) and cancelled: from then on the store refuses it any end
// but cancelled, so a run already past its last check cannot commit
// finished, its executor's exit ends it cancelled if it paused meanwhile,
// and a crash before it ends leaves a run that recovery ends cancelled. A
// run already over is left as it is (false).
func (e *Engine) Stop(ctx context.Context, runID, reason string) (bool, error) {
	// A run starting or resuming meanwhile takes the lease (a newer
	// generation): look again, and stop it as an executing run then.
	for attempt := 0; ; attempt++ {
		stopped, err := e.stop(ctx, runID, reason)
		if !errors.Is(err, ErrStaleOwner) || attempt == 3 {
			return stopped, err
		}
	}
}

func (e *Engine) stop(ctx context.Context, runID, reason string) (bool, error) {
	e.mu.Lock()
	x, executing := e.running[runID]
	e.mu.Unlock()
	if executing {
		x.mu.Lock() // held across the request: the executor's exit waits
		defer x.mu.Unlock()
	}
	if executing && !x.exited {
		run, err := e.store.RequestStop(ctx, runID, reason)
		if err != nil {
			return false, err
		}
		if run.StopRequested == "" {
			return false, nil // over already
		}
		x.cancel()
		return true, nil
	}
	// Not executing here: paused, interrupted, or about to be taken by a
	// start or resume that has not registered yet. Taking the lease makes
	// that executor's writes stale, so the cancel below stays the run's end.
	run, err := e.store.Acquire(ctx, runID, e.owner)
	if err != nil {
		return false, err
	}
	if run.Status.Terminal() || run.Status == StatusFailedResumable {
		return false, nil
	}
	if err := e.store.Commit(ctx, cancelChange(run, reason)); err != nil {
		return false, fmt.Errorf("cancelling run %s: %w", run.ID, err)
	}
	e.notify(Event{Type: EventRunCancelled, RunID: run.ID, Time: e.now(), Data: map[string]any{"reason": reason}})
	return true, nil
}

// endIfStopped stores the run cancelled when a stop is recorded on it, and
// reports whether it did.
func (e *Engine) endIfStopped(ctx context.Context, runID string) (bool, error) {
	run, err := e.store.Run(ctx, runID)
	if err != nil || run.StopRequested == "" {
		return false, err
	}
	if err := e.store.Commit(ctx, cancelChange(run, run.StopRequested)); err != nil {
		return false, fmt.Errorf("cancelling run %s: %w", run.ID, err)
	}
	e.notify(Event{Type: EventRunCancelled, RunID: runID, Time: e.now(), Data: map[string]any{"reason": run.StopRequested}})
	e.log.Info("run ended", "run", runID, "status", StatusCancelled, "code", CodeCancelled)
	return true, nil
}

// cancelChange ends run cancelled for reason, synced, with the event and
// the outbox row that tell its channels.
func cancelChange(run *Run, reason string) Change {
	c := Change{
		RunID: run.ID, Generation: run.Generation, Status: StatusCancelled, FailureCode: CodeCancelled, Error: reason,
		Events: []Event{{Type: EventRunCancelled, Data: map[string]any{"reason": reason}}},
		Sync:   true,
	}
	if len(run.Channels) > 0 {
		c.Outbox = []OutboxRow{{Kind: OutboxRunFailed, RunID: run.ID, Channels: run.Channels,
			Payload: mustJSON(map[string]any{"status": string(StatusCancelled), "failure_code": CodeCancelled, "error": reason})}}
	}
	return c
}

// ResolveVars applies the preset and the defaults to the vars given and
// converts them to their declared types: text is parsed (a command line's
// or a comment's "count=3"), typed values (a REST launch's JSON numbers
// and booleans) are checked. Vars missing, unknown or of the wrong type
// are reported together, as a *VarsError; an unknown preset as a
// *PresetError.
func ResolveVars(w *dsl.Workflow, given map[string]any, preset string) (map[string]any, error) {
	return resolveVars(w, given, preset)
}

func resolveVars(w *dsl.Workflow, given map[string]any, preset string) (map[string]any, error) {
	out := map[string]any{}
	for _, v := range w.Vars {
		if v.HasDefault {
			out[v.Name] = v.Default
		}
	}
	if preset != "" {
		var p *dsl.Preset
		var names []string
		for _, candidate := range w.Presets {
			names = append(names, candidate.Name)
			if candidate.Name == preset {
				p = candidate
			}
		}
		if p == nil {
			return nil, &PresetError{Preset: preset, Declared: names}
		}
		maps.Copy(out, p.Values)
	}
	verr := &VarsError{}
	for _, v := range w.Vars {
		verr.Declared = append(verr.Declared, v.Name+" ("+v.Type.String()+")")
	}
	for _, name := range slices.Sorted(maps.Keys(given)) {
		v := w.Var(name)
		if v == nil {
			verr.Problems = append(verr.Problems, VarProblem{Name: name, Kind: ProblemUnknown})
			continue
		}
		val, err := coerceValue(given[name], dsl.Field{Name: v.Name, Type: v.Type, Enum: v.Enum})
		if err != nil {
			verr.Problems = append(verr.Problems, VarProblem{Name: name, Kind: ProblemInvalid, Type: v.Type.String(), Detail: err.Error()})
			continue
		}
		out[name] = val
	}
	for _, v := range w.Vars {
		if _, ok := out[v.Name]; !ok {
			verr.Problems = append(verr.Problems, VarProblem{Name: v.Name, Kind: ProblemMissing, Type: v.Type.String()})
		}
	}
	if len(verr.Problems) > 0 {
		return nil, verr
	}
	return out, nil
}

// coerceValue converts a var's or an answer's value to a field's type:
// text is parsed, a typed value is checked (a JSON number is a whole
// number when the field wants one).
func coerceValue(v any, f dsl.Field) (any, error) {
	switch v := v.(type) {
	case string:
		return coerce(v, f)
	case nil:
		return nil, errors.New("a value is required (null given)")
	}
	want := f.Type.String()
	if f.Type.List {
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%s given, %s wanted", jsonKind(v), want)
		}
		return list, nil
	}
	switch f.Type.Kind {
	case dsl.TypeBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case dsl.TypeInt:
		switch n := v.(type) {
		case float64:
			if n == float64(int64(n)) {
				return int64(n), nil
			}
			return nil, fmt.Errorf("%v is not a whole number", n)
		case int64:
			return n, nil
		case int:
			return int64(n), nil
		}
	case dsl.TypeFloat:
		switch n := v.(type) {
		case float64:
			return n, nil
		case int64:
			return float64(n), nil
		case int:
			return float64(n), nil
		}
	case dsl.TypeJSON:
		return v, nil
	}
	return nil, fmt.Errorf("%s given, %s wanted", jsonKind(v), want)
}

// jsonKind names a decoded JSON value's kind, for messages.
func jsonKind(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case float64, int64, int:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

// Preflight asks the backends of the workflow's model nodes whether they
// can serve them, so that a missing API key is reported before any node
// runs. Start calls it; launchers that start runs in the background call
// it first, to report the problem to whoever asked.
func (e *Engine) Preflight(w *dsl.Workflow) error {
	var problems []error
	seen := map[string]bool{}
	available := slices.Sorted(maps.Keys(e.backends))
	for _, n := range w.Nodes {
		if n.LLM == nil {
			continue
		}
		name := n.LLM.Backend
		if name == "" {
			name = w.DefaultBackend
		}
		if name == "" {
			name = e.defBack
		}
		b, built := e.backends[name]
		if !built {
			if !seen[name] {
				seen[name] = true
				problems = append(problems, &BackendUnavailableError{Node: n.ID, Backend: name, Available: available})
			}
			continue
		}
		p, ok := b.(Preflighter)
		if !ok || seen[name+"|"+n.LLM.Model] {
			continue
		}
		seen[name+"|"+n.LLM.Model] = true
		if err := p.Preflight(n.LLM.Model); err != nil {
			problems = append(problems, &BackendUnavailableError{Node: n.ID, Backend: name, Available: available, Detail: err.Error()})
		}
	}
	if e.sandbox == nil {
		for _, n := range w.Nodes {
			if n.Kind == dsl.NodeTool {
				problems = append(problems, fmt.Errorf("tool node %s: %w", n.ID, errNoSandbox))
				break
			}
		}
	}
	if p, ok := e.sandbox.(SandboxPreflighter); ok {
		if err := p.PreflightSandbox(w); err != nil {
			problems = append(problems, err)
		}
	}
	if len(problems) > 0 {
		return &PreflightError{Problems: problems}
	}
	return nil
}

// backendList names the backends of this build, for messages.
func backendList(backends map[string]Backend) string {
	if len(backends) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(backends)), ", ")
}

// coerce converts a text answer or var value to a field's type.
func coerce(text string, f dsl.Field) (any, error) {
	s := strings.TrimSpace(text)
	if f.Type.List {
		var list []any
		if strings.HasPrefix(s, "[") {
			if err := json.Unmarshal([]byte(s), &list); err != nil {
				return nil, fmt.Errorf("%q is not a JSON list: %w", text, err)
			}
			return list, nil
		}
		for _, item := range strings.Split(s, ",") {
			if item = strings.TrimSpace(item); item != "" {
				list = append(list, item)
			}
		}
		return list, nil
	}
	switch f.Type.Kind {
	case dsl.TypeBool:
		switch strings.ToLower(s) {
		case "true", "yes", "y", "1", "on":
			return true, nil
		case "false", "no", "n", "0", "off":
			return false, nil
		}
		return nil, fmt.Errorf("%q is not a yes/no answer (use true or false)", text)
	case dsl.TypeInt:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", text)
		}
		return n, nil
	case dsl.TypeFloat:
		n, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", text)
		}
		return n, nil
	case dsl.TypeJSON:
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return text, nil // free text is a JSON string
		}
		return v, nil
	}
	if len(f.Enum) > 0 && !slices.Contains(f.Enum, text) {
		return nil, fmt.Errorf("%q is not one of: %s", text, strings.Join(f.Enum, ", "))
	}
	return text, nil
}
