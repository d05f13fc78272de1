package engine

import (
	"errors"
	"fmt"
	"strings"
)

// The engine's refusals are typed values, so that each channel phrases
// them for its own users: the CLI names its flags, a PR comment names the
// command to write, the REST API returns a code. Their Error texts are
// channel-neutral and never name a command line.

// Problem kinds of a VarProblem or an AnswerProblem.
const (
	ProblemMissing = "missing" // required and not given
	ProblemUnknown = "unknown" // given, but not declared
	ProblemInvalid = "invalid" // given, of the wrong type or value
)

// VarProblem is one var a launch cannot take.
type VarProblem struct {
	Name string
	Kind string // ProblemMissing, ProblemUnknown or ProblemInvalid
	// Type is the declared type ("" for an unknown var).
	Type string
	// Detail says what is wrong with an invalid value.
	Detail string
}

func (p VarProblem) String() string {
	switch p.Kind {
	case ProblemMissing:
		return fmt.Sprintf("missing var %q (%s)", p.Name, p.Type)
	case ProblemUnknown:
		return fmt.Sprintf("unknown var %q: the workflow does not declare it", p.Name)
	}
	return fmt.Sprintf("var %s: %s", p.Name, p.Detail)
}

// VarsError refuses a launch whose vars are missing, unknown or invalid.
type VarsError struct {
	Problems []VarProblem
	// Declared lists the workflow's vars, "name (type)", for messages.
	Declared []string
}

func (e *VarsError) Error() string {
	var parts []string
	for _, p := range e.Problems {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, "; ")
}

// PresetError refuses a launch naming a preset the workflow lacks.
type PresetError struct {
	Preset   string
	Declared []string
}

func (e *PresetError) Error() string {
	if len(e.Declared) == 0 {
		return fmt.Sprintf("unknown preset %q: the workflow declares none", e.Preset)
	}
	return fmt.Sprintf("unknown preset %q (the workflow declares: %s)", e.Preset, strings.Join(e.Declared, ", "))
}

// BackendUnavailableError says a node routes to a backend this build or
// this server cannot serve. Detail, when set, is the backend's own reason
// (a missing API key); otherwise the backend is not built in.
type BackendUnavailableError struct {
	Node      string
	Backend   string
	Available []string
	Detail    string
}

func (e *BackendUnavailableError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("node %s: %s", e.Node, e.Detail)
	}
	avail := "none"
	if len(e.Available) > 0 {
		avail = strings.Join(e.Available, ", ")
	}
	return fmt.Sprintf("node %s: backend %q is not available in this build (available: %s)", e.Node, e.Backend, avail)
}

// PreflightError refuses a workflow before its first node, with every
// reason found (backends, sandbox).
type PreflightError struct {
	Problems []error
}

func (e *PreflightError) Error() string {
	var parts []string
	for _, p := range e.Problems {
		parts = append(parts, p.Error())
	}
	return "the workflow cannot start: " + strings.Join(parts, "; ")
}

// Unwrap lets errors.As find the problems (a *BackendUnavailableError).
func (e *PreflightError) Unwrap() []error { return e.Problems }

// InvalidRunIDError refuses a run id that is not 1 to 64 of a-z, 0-9 and -.
type InvalidRunIDError struct{ ID string }

func (e *InvalidRunIDError) Error() string {
	return fmt.Sprintf("invalid run id %q: use 1 to 64 of a-z, 0-9 and -", e.ID)
}

// NotWaitingError refuses an answer for a run that does not wait for it:
// the run is running, over, or paused on another question.
type NotWaitingError struct {
	RunID         string
	InteractionID string
	Status        Status
	// WaitingFor, when the run is paused, is the question it waits for.
	WaitingFor string
}

func (e *NotWaitingError) Error() string {
	if e.WaitingFor != "" {
		return fmt.Sprintf("run %s is waiting for %s, not for %s", e.RunID, e.WaitingFor, e.InteractionID)
	}
	return fmt.Sprintf("run %s is %s, not waiting for %s", e.RunID, e.Status, e.InteractionID)
}

// Is makes errors.Is(err, ErrStatusChanged) hold.
func (e *NotWaitingError) Is(target error) bool { return target == ErrStatusChanged }

// AnswerProblem is one field of a form that cannot be taken.
type AnswerProblem struct {
	Field  string
	Kind   string // ProblemMissing, ProblemUnknown or ProblemInvalid
	Type   string // the field's type, "" for an unknown field
	Detail string
}

func (p AnswerProblem) String() string {
	switch p.Kind {
	case ProblemMissing:
		return fmt.Sprintf("missing answer for %q (%s)", p.Field, p.Type)
	case ProblemUnknown:
		return fmt.Sprintf("%q is not a field of this form", p.Field)
	}
	return fmt.Sprintf("answer for %q: %s", p.Field, p.Detail)
}

// InvalidAnswerError refuses the answers of a form, field by field; the
// same messages on every channel. Fields lists the form's fields.
type InvalidAnswerError struct {
	InteractionID string
	Problems      []AnswerProblem
	Fields        []FormField
}

func (e *InvalidAnswerError) Error() string {
	var parts []string
	for _, p := range e.Problems {
		parts = append(parts, p.String())
	}
	msg := strings.Join(parts, "; ")
	if len(e.Fields) > 0 {
		var names []string
		for _, f := range e.Fields {
			names = append(names, f.Name+" ("+f.Type+")")
		}
		msg += " (the form's fields: " + strings.Join(names, ", ") + ")"
	}
	return msg
}

// Is makes errors.Is(err, ErrEmptyAnswer) hold for a form whose only
// problem is that nothing was given.
func (e *InvalidAnswerError) Is(target error) bool {
	if target != ErrEmptyAnswer {
		return false
	}
	for _, p := range e.Problems {
		if p.Kind != ProblemMissing {
			return false
		}
	}
	return len(e.Problems) > 0
}

// WorkflowChangedError refuses to continue a run whose workflow file no
// longer is the one it started with.
type WorkflowChangedError struct {
	RunID string
	File  string
}

func (e *WorkflowChangedError) Error() string {
	return fmt.Sprintf("the workflow file %s changed since run %s started", e.File, e.RunID)
}

// ErrWorkflowChanged is matched by a *WorkflowChangedError.
var ErrWorkflowChanged = errors.New("the workflow changed since the run started")

// Is makes errors.Is(err, ErrWorkflowChanged) hold.
func (e *WorkflowChangedError) Is(target error) bool { return target == ErrWorkflowChanged }

// ErrTextAndFields refuses an answer that gives both a text and fields.
var ErrTextAndFields = errors.New("give either an answer text or the form's fields, not both")

// AwaitError refuses an answer to an await pause itself: the agent waits
// for its async questions, which are what to answer.
type AwaitError struct {
	InteractionID string
	Pending       []string
}

func (e *AwaitError) Error() string {
	if len(e.Pending) == 0 {
		return fmt.Sprintf("%s is a wait for async questions, which are all answered", e.InteractionID)
	}
	return fmt.Sprintf("%s is a wait for async questions: answer them (%s)", e.InteractionID, strings.Join(e.Pending, ", "))
}

// Is makes errors.Is(err, ErrNotAsync) hold.
func (e *AwaitError) Is(target error) bool { return target == ErrNotAsync }

// UnansweredError refuses to resume a run paused on an await while some of
// its questions are unanswered.
type UnansweredError struct {
	RunID   string
	Pending []string
}

func (e *UnansweredError) Error() string {
	return fmt.Sprintf("run %s waits for %d unanswered async question(s): %s", e.RunID, len(e.Pending), strings.Join(e.Pending, ", "))
}
