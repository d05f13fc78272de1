package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Status is the status of a run.
type Status string

// Run statuses (upstream's names).
const (
	StatusRunning            Status = "running"
	StatusPausedWaitingHuman Status = "paused_waiting_human"
	StatusFinished           Status = "finished"
	StatusFailed             Status = "failed"
	StatusFailedResumable    Status = "failed_resumable"
	StatusCancelled          Status = "cancelled"
)

// Terminal reports whether a run in status s has stopped for good or
// until someone resumes it: finished, failed, failed_resumable, cancelled.
func (s Status) Terminal() bool {
	switch s {
	case StatusFinished, StatusFailed, StatusFailedResumable, StatusCancelled:
		return true
	}
	return false
}

// Resumable reports whether a run in status s can be resumed.
func (s Status) Resumable() bool {
	switch s {
	case StatusPausedWaitingHuman, StatusFailedResumable, StatusCancelled:
		return true
	}
	return false
}

// Failure codes recorded with a failed run (upstream's, ADR-095). The set
// is open: fail nodes add codes of their own.
const (
	CodeNodeNotFound          = "NODE_NOT_FOUND"
	CodeNoOutgoingEdge        = "NO_OUTGOING_EDGE"
	CodeLoopExhausted         = "LOOP_EXHAUSTED"
	CodeBudgetExceeded        = "BUDGET_EXCEEDED"
	CodeExecutionFailed       = "EXECUTION_FAILED"
	CodeTimeout               = "TIMEOUT"
	CodeCancelled             = "CANCELLED"
	CodeInterrupted           = "INTERRUPTED"
	CodeJoinFailed            = "JOIN_FAILED"
	CodeResumeInvalid         = "RESUME_INVALID"
	CodeSchemaValidation      = "SCHEMA_VALIDATION"
	CodeRateLimited           = "RATE_LIMITED"
	CodeExpressionFailed      = "EXPRESSION_FAILED"
	CodeFailNode              = "FAIL_NODE"
	CodeCapabilityUnsupported = "CAPABILITY_UNSUPPORTED"
)

// Trigger says what started a run.
type Trigger struct {
	// Source is the channel that started the run: cli, api, github,
	// slack or cron.
	Source string `json:"source"`
	// Actor is who started the run, as the channel names them.
	Actor string `json:"actor,omitempty"`
	// Ref is the place in its channel the run belongs to, as that channel
	// writes it (bot/github's PRScope: "github/acme/app#7"). The engine
	// never reads it; the store indexes runs by it (RunsByRef), so a
	// channel finds the runs of a pull request, a Slack thread or a
	// schedule without knowing how another channel names its places.
	Ref string `json:"ref,omitempty"`
	// Details are the channel's own details of where the run was started
	// (GitHub's repository, pull request, installation, comment and head
	// commit), in the channel's JSON shape. Only the channel that wrote
	// them reads them.
	Details json.RawMessage `json:"details,omitempty"`
}

// Run is the record of one execution of a workflow.
type Run struct {
	ID           string         `json:"id"`
	Workflow     string         `json:"workflow"`
	WorkflowHash string         `json:"workflow_hash"`
	File         string         `json:"file,omitempty"`
	Status       Status         `json:"status"`
	FailureCode  string         `json:"failure_code,omitempty"`
	Error        string         `json:"error,omitempty"`
	Vars         map[string]any `json:"vars,omitempty"`
	Trigger      Trigger        `json:"trigger"`
	// Channels are the outside channels the run is attached to ("github",
	// "slack"); outbox rows are written only for them. A run started from
	// the CLI alone has none.
	Channels []string `json:"channels,omitempty"`
	// Owner and Generation are the owner lease: every write names the
	// generation it holds, and a stale owner's writes are refused.
	Owner      string `json:"owner,omitempty"`
	Generation int64  `json:"generation"`
	// WorkDir is the workspace the run started in, where a resume that
	// names none continues it.
	WorkDir string `json:"work_dir,omitempty"`
	// StopRequested, when set, is the reason of an acknowledged Stop that
	// the run's executor has not yet honoured: the run may only end
	// cancelled (a Commit of any other status fails with
	// ErrStopRequested). Ending cancelled clears it.
	StopRequested string    `json:"stop_requested,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	FinishedAt    time.Time `json:"finished_at,omitzero"`
}

// InteractionKind tells a blocking pause from an async question and from
// the synthetic pause of the await_answers tool.
type InteractionKind string

// Interaction kinds (upstream's values).
const (
	KindBlocking InteractionKind = ""
	KindAsync    InteractionKind = "async"
	KindAwait    InteractionKind = "await"
)

// Question keys inside Interaction.Questions (upstream's).
const (
	// QuestionKey holds the question text of ask_user and ask_user_async,
	// and the answer text under the same key.
	QuestionKey = "ask_user_response"
	// OptionsKey holds the offered options, a list of {id, label}.
	OptionsKey = "_ask_user_options"
	// FreeTextKey holds whether free text is allowed besides the options.
	FreeTextKey = "_ask_user_allow_free_text"
	// AwaitPendingKey lists, on an await pause, the pending async questions.
	AwaitPendingKey = "_await_pending_interactions"
)

// Interaction is a question to a human: a blocking pause, an async
// question, or an await pause.
type Interaction struct {
	ID     string          `json:"id"`
	RunID  string          `json:"run_id"`
	NodeID string          `json:"node_id"`
	Kind   InteractionKind `json:"kind"`
	// Seq is n in <run>_<node>_async_<n> for async questions, kept as a
	// field so that ids are never parsed apart.
	Seq         int            `json:"seq,omitempty"`
	Questions   map[string]any `json:"questions"`
	Answers     map[string]any `json:"answers,omitempty"`
	RequestedAt time.Time      `json:"requested_at"`
	AnsweredAt  time.Time      `json:"answered_at,omitzero"`
	// AnsweredBy and Via say who answered and through which channel (cli,
	// api, github, slack, admin).
	AnsweredBy string `json:"answered_by,omitempty"`
	Via        string `json:"via,omitempty"`
	// Posts maps a channel to the external id of the post that carries the
	// question (a PR comment id, a Slack channel/ts), for reply routing.
	Posts map[string]string `json:"posts,omitempty"`
	// Fields, for a blocking question, are what its answer must give: a
	// human node's form, or the one text of an agent's ask_user.
	Fields []FormField `json:"fields,omitempty"`
	// FollowUp, when set, is the question's reminders, escalation and
	// expiry (its node's remind:, escalate:, expire: and default:), and
	// where they stand.
	FollowUp *FollowUp `json:"follow_up,omitempty"`
	// AnswerOn, when set, are the only channels that may answer (the
	// node's answer_on); Answerers, when set, the only GitHub logins (its
	// answerers), on the channels where people are GitHub accounts.
	AnswerOn  []string `json:"answer_on,omitempty"`
	Answerers []string `json:"answerers,omitempty"`
}

// AnswerableOn reports whether the question may be answered on channel
// via (the node's answer_on).
func (ix *Interaction) AnswerableOn(via string) bool {
	return len(ix.AnswerOn) == 0 || slices.Contains(ix.AnswerOn, via)
}

// MayAnswer reports whether the GitHub user login is among the
// question's own answerers (true when it names none), or among those it
// was escalated to.
func (ix *Interaction) MayAnswer(login string) bool {
	if len(ix.Answerers) == 0 || ix.EscalatedTo(login) {
		return true
	}
	return slices.ContainsFunc(ix.Answerers, func(a string) bool { return strings.EqualFold(a, login) })
}

// EscalatedTo reports whether the question was escalated to the GitHub
// user login (named in its escalate: to:, and the time came).
func (ix *Interaction) EscalatedTo(login string) bool {
	f := ix.FollowUp
	return f != nil && f.Escalated && slices.ContainsFunc(f.EscalateTo, func(who string) bool { return strings.EqualFold(who, login) })
}

// FollowUp is what happens to an unanswered question as time passes, in
// absolute times (a restart keeps them), and what already happened. The
// store keeps a timer row for each time still to come.
type FollowUp struct {
	// Remind is how often the asked people are reminded; NextReminder is
	// the next reminder's time (zero: none to come), Reminders how many
	// were sent.
	Remind       time.Duration `json:"remind,omitempty"`
	NextReminder time.Time     `json:"next_reminder,omitzero"`
	Reminders    int           `json:"reminders,omitempty"`
	// EscalateAt, when set, is when EscalateTo (GitHub logins, @org/team
	// handles) may answer too; Escalated says it happened.
	EscalateAt time.Time `json:"escalate_at,omitzero"`
	EscalateTo []string  `json:"escalate_to,omitempty"`
	Escalated  bool      `json:"escalated,omitempty"`
	// ExpireAt, when set, is when the question expires: answered with
	// Default (field name → text; QuestionKey for an async question) by
	// ExpiryBy via "timer", or, with no default, its run fails.
	ExpireAt time.Time         `json:"expire_at,omitzero"`
	Default  map[string]string `json:"default,omitempty"`
}

// Timers are the times still to come of f, as the store's timer rows of
// question ixID of run runID.
func (f *FollowUp) Timers(runID, ixID string) []Timer {
	if f == nil {
		return nil
	}
	var out []Timer
	if !f.NextReminder.IsZero() {
		out = append(out, Timer{Due: f.NextReminder, RunID: runID, InteractionID: ixID, What: TimerRemind})
	}
	if !f.EscalateAt.IsZero() && !f.Escalated {
		out = append(out, Timer{Due: f.EscalateAt, RunID: runID, InteractionID: ixID, What: TimerEscalate})
	}
	if !f.ExpireAt.IsZero() {
		out = append(out, Timer{Due: f.ExpireAt, RunID: runID, InteractionID: ixID, What: TimerExpire})
	}
	return out
}

// Due reports whether t is still one of f's times: a row of an earlier
// asking of the question (re-asked since), or of a reminder already sent,
// is not.
func (f *FollowUp) Due(t Timer) bool {
	if f == nil {
		return false
	}
	switch t.What {
	case TimerRemind:
		return f.NextReminder.Equal(t.Due)
	case TimerEscalate:
		return !f.Escalated && f.EscalateAt.Equal(t.Due)
	case TimerExpire:
		return f.ExpireAt.Equal(t.Due)
	}
	return false
}

// What a timer does.
const (
	TimerRemind   = "remind"
	TimerEscalate = "escalate"
	TimerExpire   = "expire"
)

// ExpiryBy is who an expired question's default answer is recorded as
// given by, via "timer".
const ExpiryBy = "expiry"

// Timer is a stored time at which the engine acts on a question: remind,
// escalate or expire it.
type Timer struct {
	Due           time.Time `json:"due"`
	RunID         string    `json:"run_id"`
	InteractionID string    `json:"interaction_id"`
	What          string    `json:"what"`
}

// TimerFire is what firing a timer writes, with the timer's removal, when
// its question still waits: the question's follow-up as it stands after,
// events, outbox rows and the timers it sets.
type TimerFire struct {
	FollowUp *FollowUp
	Events   []Event
	Outbox   []OutboxRow
	Next     []Timer
}

// FormField is one field of a blocking question's answer.
type FormField struct {
	Name string `json:"name"`
	// Type is the DSL type: string, bool, int, float, json, string[] ….
	Type string `json:"type"`
	// Enum, when set, lists the accepted values.
	Enum []string `json:"enum,omitempty"`
}

// Pending reports whether the interaction still waits for its answer.
func (ix *Interaction) Pending() bool { return ix.AnsweredAt.IsZero() }

// Question returns the question text.
func (ix *Interaction) Question() string {
	s, _ := ix.Questions[QuestionKey].(string)
	return s
}

// Answer returns the answer text of an answered question.
func (ix *Interaction) Answer() string {
	s, _ := ix.Answers[QuestionKey].(string)
	return s
}

// AsyncInteractionID is the id of the n-th async question of a node.
func AsyncInteractionID(runID, nodeID string, n int) string {
	return runID + "_" + nodeID + "_async_" + strconv.Itoa(n)
}

// PauseInteractionID is the id of a blocking pause of a node; iteration is
// the node's loop iteration (0 outside loops).
func PauseInteractionID(runID, nodeID string, iteration int) string {
	if iteration > 0 {
		return runID + "_" + nodeID + "_" + strconv.Itoa(iteration)
	}
	return runID + "_" + nodeID
}

// AnswerMessage is the inbox text that delivers an async answer to the
// asking agent.
func AnswerMessage(interactionID, question, answer string) string {
	return fmt.Sprintf("[Answer to question %s] Q: %s — A: %s", interactionID, strconv.Quote(question), answer)
}

// InboxStatus is the state of a queued operator message.
type InboxStatus string

// Inbox statuses (upstream's).
const (
	InboxQueued    InboxStatus = "queued"
	InboxDelivered InboxStatus = "delivered"
	InboxConsumed  InboxStatus = "consumed"
	InboxCancelled InboxStatus = "cancelled"
)

// InboxMessage is a message queued for a run's agent: an async answer or
// an operator's note. NodeID set means it is delivered only to that node.
type InboxMessage struct {
	ID            string      `json:"id"`
	RunID         string      `json:"run_id"`
	NodeID        string      `json:"node_id,omitempty"`
	InteractionID string      `json:"interaction_id,omitempty"`
	Text          string      `json:"text"`
	Status        InboxStatus `json:"status"`
	Seq           int64       `json:"seq"`
	QueuedAt      time.Time   `json:"queued_at"`
	DeliveredAt   time.Time   `json:"delivered_at,omitzero"`
}

// Event names (upstream's).
const (
	EventRunStarted          = "run_started"
	EventRunPaused           = "run_paused"
	EventRunResumed          = "run_resumed"
	EventRunFinished         = "run_finished"
	EventRunFailed           = "run_failed"
	EventRunCancelled        = "run_cancelled"
	EventNodeStarted         = "node_started"
	EventNodeFinished        = "node_finished"
	EventEdgeSelected        = "edge_selected"
	EventBranchStarted       = "branch_started"
	EventBranchFinished      = "branch_finished"
	EventJoinReady           = "join_ready"
	EventArtifactWritten     = "artifact_written"
	EventHumanInputRequested = "human_input_requested"
	EventHumanAnswers        = "human_answers_recorded"
	EventInteractionAnswered = "interaction_answered"
	// EventQuestionReminded and EventQuestionEscalated record a question's
	// reminder and escalation (data: interaction_id, reminder, to).
	EventQuestionReminded    = "question_reminded"
	EventQuestionEscalated   = "question_escalated"
	EventBudgetWarning       = "budget_warning"
	EventBudgetExceeded      = "budget_exceeded"
	EventUserMessageQueued   = "user_message_queued"
	EventUserMessageDelivery = "user_message_delivered"
)

// Event is one entry of a run's event log. Seq is assigned by the store,
// monotonic per run.
type Event struct {
	Seq      int64          `json:"seq"`
	Time     time.Time      `json:"timestamp"`
	Type     string         `json:"type"`
	RunID    string         `json:"run_id"`
	BranchID string         `json:"branch_id,omitempty"`
	NodeID   string         `json:"node_id,omitempty"`
	Data     map[string]any `json:"data,omitempty"`
}

// Outbox kinds: the state changes the outside world hears about.
const (
	OutboxRunStarted       = "run_started"
	OutboxQuestionPosted   = "question_posted"
	OutboxQuestionAnswered = "question_answered"
	OutboxRunPaused        = "run_paused"
	OutboxRunFinished      = "run_finished"
	OutboxRunFailed        = "run_failed"
	// OutboxQuestionReminded and OutboxQuestionEscalated carry a
	// question's reminder and escalation to its channels.
	OutboxQuestionReminded  = "question_reminded"
	OutboxQuestionEscalated = "question_escalated"
)

// OutboxRow is a pending side effect (a PR comment, a Slack message),
// written in the same transaction as the state change it reports and
// performed later by the bot's outbox worker.
type OutboxRow struct {
	ID            string          `json:"id"`
	Kind          string          `json:"kind"`
	RunID         string          `json:"run_id"`
	InteractionID string          `json:"interaction_id,omitempty"`
	Channels      []string        `json:"channels"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	Attempts      int             `json:"attempts"`
	NextAt        time.Time       `json:"next_at"`
	CreatedAt     time.Time       `json:"created_at"`
}

// Errors the store and the engine return; callers branch on them with
// errors.Is.
var (
	ErrNotFound        = errors.New("not found")
	ErrRunExists       = errors.New("run already exists")
	ErrAlreadyAnswered = errors.New("question already answered")
	ErrNotAsync        = errors.New("not an async question")
	ErrEmptyAnswer     = errors.New("answer text is required")
	ErrStaleOwner      = errors.New("run is owned by a newer owner")
	ErrRunEnded        = errors.New("the run has ended; its questions can no longer be answered")
	ErrStatusChanged   = errors.New("the run's status changed")
	// ErrStopRequested refuses a run's status change other than cancelled
	// once a Stop was acknowledged for it.
	ErrStopRequested = errors.New("a stop was requested for the run")
)

// ChannelRefusedError is an answer from a channel the question's node
// does not let answer it (answer_on).
type ChannelRefusedError struct {
	InteractionID string
	Via           string
	AnswerOn      []string
}

func (e *ChannelRefusedError) Error() string {
	return fmt.Sprintf("question %s cannot be answered via %s; its workflow lets it be answered only via %s (answer_on)",
		e.InteractionID, e.Via, strings.Join(e.AnswerOn, ", "))
}

// AnswererRefusedError is an answer from someone the question's node does
// not list among its answerers.
type AnswererRefusedError struct {
	InteractionID string
	By            string
	Answerers     []string
}

func (e *AnswererRefusedError) Error() string {
	return fmt.Sprintf("%s may not answer question %s; its workflow lets only %s answer it (answerers)",
		e.By, e.InteractionID, strings.Join(e.Answerers, ", "))
}

// AlreadyAnsweredError says who answered a question first.
type AlreadyAnsweredError struct {
	InteractionID string
	AnsweredBy    string
	Via           string
	AnsweredAt    time.Time
}

func (e *AlreadyAnsweredError) Error() string {
	who := e.AnsweredBy
	if who == "" {
		who = "someone"
	}
	return fmt.Sprintf("question %s was already answered by %s via %s at %s", e.InteractionID, who, e.Via, e.AnsweredAt.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrAlreadyAnswered) hold.
func (e *AlreadyAnsweredError) Is(target error) bool { return target == ErrAlreadyAnswered }
