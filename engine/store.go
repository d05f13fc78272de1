package engine

import (
	"context"
	"encoding/json"
	"time"
)

// Store is what the engine needs from storage. Each method is one intent,
// carried out in one transaction, so that a move to another store (the
// PostgreSQL plan) is a new implementation and not a rewrite: nothing reads
// a record in one call and writes it back in another. Implementations must
// pass store.RunConformance.
//
// Whatever is acknowledged to a person or another system (an answer
// accepted, a question posted, a run paused or finished) is on disk when
// the method returns; Change.Sync asks the same of a state change.
type Store interface {
	// CreateRun stores a new run with its first events. It fails with
	// ErrRunExists when the id is taken.
	CreateRun(ctx context.Context, run *Run, events []Event) error
	// Run returns a run, or ErrNotFound.
	Run(ctx context.Context, id string) (*Run, error)
	// Runs lists runs, newest first.
	Runs(ctx context.Context, f RunFilter) ([]*Run, error)
	// Acquire takes the owner lease of a run for owner: the generation is
	// incremented, so writes of any earlier owner are refused from now on.
	Acquire(ctx context.Context, runID, owner string) (*Run, error)
	// Commit applies one state change of a run atomically. It fails with
	// ErrStaleOwner unless the stored generation is c.Generation, and with
	// ErrStopRequested when c.Status is set to anything but cancelled on a
	// run with a stop requested. Setting cancelled clears the request.
	Commit(ctx context.Context, c Change) error
	// RequestStop records durably, in one synced transaction, that a run
	// must end cancelled with reason, and returns the run as stored after
	// it. A run that is over (terminal or failed_resumable) is returned
	// unchanged, StopRequested empty; a run already marked keeps its first
	// reason. The status is not changed: the run's executor ends it.
	RequestStop(ctx context.Context, runID, reason string) (*Run, error)
	// Checkpoint returns the run's last checkpoint, nil when there is none.
	Checkpoint(ctx context.Context, runID string) ([]byte, error)
	// History returns up to limit entries of one history series of a run
	// with Index >= from, in index order (limit <= 0: all of them); an
	// unknown series has none, an unknown run fails with ErrNotFound.
	History(ctx context.Context, runID, series string, from, limit int) ([]HistoryEntry, error)

	// PostQuestion stores a new pending async question of a node under the
	// next id <run>_<node>_async_<n>, with its human_input_requested event
	// and, for the run's channels, a question_posted outbox row.
	PostQuestion(ctx context.Context, q PostRequest) (*Interaction, error)
	// Answer records the first answer to an async question: a
	// compare-and-set from pending to answered, the node-scoped inbox message
	// for the asking node, the interaction_answered event and the
	// question_answered outbox row, all in one transaction. A second answer
	// fails with an *AlreadyAnsweredError (errors.Is ErrAlreadyAnswered);
	// a blocking or await interaction with ErrNotAsync; an empty text with
	// ErrEmptyAnswer; an unknown run or question with ErrNotFound; a
	// question of a finished or failed run with ErrRunEnded.
	Answer(ctx context.Context, a AnswerRequest) (*AnswerResult, error)
	// Interaction returns one interaction, or ErrNotFound.
	Interaction(ctx context.Context, runID, id string) (*Interaction, error)
	// Interactions returns the run's interactions, oldest first.
	Interactions(ctx context.Context, runID string) ([]*Interaction, error)
	// Pending returns the run's pending async questions, oldest first,
	// those of nodeID only when it is not empty.
	Pending(ctx context.Context, runID, nodeID string) ([]*Interaction, error)
	// DrainInbox marks the queued messages for nodeID (and those for any
	// node) delivered and returns them in the order they were queued.
	DrainInbox(ctx context.Context, runID, nodeID string) ([]InboxMessage, error)
	// Events returns up to limit events with Seq > after, in order
	// (limit <= 0: all of them).
	Events(ctx context.Context, runID string, after int64, limit int) ([]Event, error)

	// DueOutbox returns up to limit outbox rows due at now, oldest first
	// (limit <= 0: all of them). Each row is one channel's: a row written
	// for several channels (a run's Channels) is stored as one row per
	// channel, in the channels' order, so that each channel acknowledges
	// and postpones its own, and one channel's wait (a rate limit) never
	// holds another's back.
	DueOutbox(ctx context.Context, now time.Time, limit int) ([]OutboxRow, error)
	// AckOutbox deletes a performed outbox row.
	AckOutbox(ctx context.Context, id string) error
	// RetryOutbox counts a failed attempt and postpones the row to next.
	RetryOutbox(ctx context.Context, id string, next time.Time) error

	// NextTimer returns the stored timer due first; ok is false when
	// there is none. The timers of a question are stored with it, by
	// PostQuestion and Commit, from its FollowUp.
	NextTimer(ctx context.Context) (t Timer, ok bool, err error)
	// FireTimer removes timer t and, in the same synced transaction, when
	// t's question still waits for its answer and f is not nil, replaces
	// its FollowUp with f's, appends f's events (returned with their Seq)
	// and outbox rows and stores f's next timers. fired is false, and
	// nothing but the removal written, when t was no longer stored (fired
	// already) or its question was answered.
	FireTimer(ctx context.Context, t Timer, f *TimerFire) (events []Event, fired bool, err error)
}

// RunFilter selects runs. Zero fields select everything.
type RunFilter struct {
	Status Status
	Limit  int
}

// Change is one state change of a run, written atomically.
type Change struct {
	RunID      string
	Generation int64
	// Status, when set, becomes the run's status; FailureCode and Error are
	// written with it (and cleared by a non-failure status).
	Status      Status
	FailureCode string
	Error       string
	// Checkpoint, when not nil, replaces the run's checkpoint.
	Checkpoint []byte
	// History entries are stored each under its own key; an entry given
	// again (same series and index) replaces the first.
	History []HistoryEntry
	// Events are appended; the store assigns their Seq.
	Events []Event
	// Interactions are stored as given: blocking and await pauses only
	// (async questions change through PostQuestion and Answer alone). The
	// timers of a pending one's FollowUp are stored with it.
	Interactions []*Interaction
	// Outbox rows are stored as given; the store assigns missing ids.
	Outbox []OutboxRow
	// Sync makes the change durable before Commit returns.
	Sync bool
}

// HistoryEntry is one entry of a run's history series: a past output of a
// node whose .history is read (series "outputs.<node>") or a published
// version of an artifact ("artifacts.<name>"). The checkpoint counts the
// entries of each series and the store keeps the entries, each written
// once, so a checkpoint does not grow with a loop.
type HistoryEntry struct {
	Series string
	Index  int
	// Data is the entry's JSON.
	Data json.RawMessage
}

// PostRequest asks the store to post an async question.
type PostRequest struct {
	RunID      string
	Generation int64
	NodeID     string
	// Questions holds QuestionKey and the optional presentation keys.
	Questions map[string]any
	// Event data beyond interaction_id, questions and async: true.
	BranchID string
	// AnswerOn and Answerers are the node's (answer_on, answerers).
	AnswerOn, Answerers []string
	// FollowUp, when set, is the question's reminders, escalation and
	// expiry; its timers are stored with the question.
	FollowUp *FollowUp
}

// AnswerRequest is an answer from some channel to any question: an
// async question or an agent's ask_user take Text; a human node's form
// takes Fields (field name → text, or a typed JSON value), or Text when
// it has one field. Giving both is refused.
type AnswerRequest struct {
	RunID         string
	InteractionID string
	Text          string
	Fields        map[string]any
	// By and Via name the responder and the channel (github, slack, page,
	// cli, api, timer). The channel sets them, never the person answering.
	By  string
	Via string
}

// AnswerResult reports what an accepted answer did.
type AnswerResult struct {
	Interaction *Interaction
	// Message is the inbox message queued for the asking node.
	Message InboxMessage
	// Resumed is set when the answer released the run (the last question
	// of an await, a form, an ask_user): the engine resumes it.
	Resumed bool
}
