// Package delivery holds what the bot's channels (GitHub, Slack) share on
// top of the engine: the intake of their webhooks (Intake, with each
// channel's side behind Channel, reading bodies into one bounded pool,
// Bodies), the worker handling the deliveries stored, the relay of the
// outbox to a channel's posts, and the store's part they need: inbound
// deliveries stored before they are acknowledged, launches queued behind
// a scope's active run, the posts a channel made for runs and questions,
// and the runs of a channel's place.
//
// Store is that part of the store's contract, next to engine.Store. The
// Badger store (package store) implements both; store/storetest checks any
// implementation against them, so another one (PostgreSQL) can be written
// from the documentation here and there, without reading Badger code.
package delivery

import (
	"context"
	"time"

	"github.com/iterion-bot/iterion/engine"
)

// Delivery is an inbound event from a channel (a GitHub webhook, a Slack
// event), stored before it is acknowledged so that nothing acknowledged is
// lost, and keyed by its channel's id so that a redelivery has no second
// effect.
type Delivery struct {
	// Source names the channel and, where ids are only unique within it,
	// the sender: "github/<app id>", "slack/<team>".
	Source string `json:"source"`
	// ID is the channel's delivery id (X-GitHub-Delivery, event_id).
	ID string `json:"id"`
	// Event is the event type (X-GitHub-Event).
	Event string `json:"event"`
	// Group is who the delivery is work for, within its source (a GitHub
	// installation: "installation/42"): workers take the groups in turn,
	// so one flooded group does not hold up the others.
	Group string `json:"group,omitempty"`
	// Payload is the body as received. It is dropped once the delivery is
	// handled: only a pending delivery needs it.
	Payload []byte `json:"payload,omitempty"`
	// State is received until a worker has handled it, then done or failed.
	State    string `json:"state"`
	Error    string `json:"error,omitempty"`
	Attempts int    `json:"attempts"`
	// NextAt, when set, holds a delivery the channel asked us to retry
	// later back from the workers until then.
	NextAt time.Time `json:"next_at,omitzero"`
	// Hold, when set, keeps the delivery back until the hold is released
	// (ReleaseDeliveries): a condition no wait lifts by itself, such as an
	// installation GitHub will not mint tokens for.
	Hold       string    `json:"hold,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Delivery states.
const (
	Received = "received"
	Done     = "done"
	Failed   = "failed"
)

// Backlog counts the deliveries still to handle.
type Backlog struct {
	// Due are received and not postponed, or postponed until a time past.
	Due int
	// Postponed wait for a time the channel gave (a rate limit).
	Postponed int
	// Held wait for their hold to be released.
	Held int
	// Oldest is when the oldest of them was received; zero when none.
	Oldest time.Time
}

// QueuedLaunch is a launch waiting for its scope's active run to end.
type QueuedLaunch struct {
	Key      string    `json:"key"`
	Payload  []byte    `json:"payload"`
	QueuedAt time.Time `json:"queued_at"`
	Seq      int64     `json:"seq"`
}

// Schedule is a schedule as the store keeps it: its definition, replaced
// whenever its source's configuration is read again, and its state,
// which the store keeps across those replacements.
type Schedule struct {
	// Name is unique across sources ("server/nightly",
	// "github/acme/app/nightly"); it may hold any text but a newline.
	Name string `json:"name"`
	// Source is who declares it ("server", "github/acme/app"): a source's
	// schedules are replaced together (PutSchedules).
	Source string `json:"source"`
	// Cron and Zone are the spec and its IANA zone ("" for UTC).
	Cron string `json:"cron"`
	Zone string `json:"zone,omitempty"`
	// Overlap is what a tick does while the schedule's last run is still
	// going: skip (the default) or queue.
	Overlap string `json:"overlap,omitempty"`
	// Grace is how late a tick may still fire, after downtime.
	Grace time.Duration `json:"grace,omitempty"`
	// Target is the channel's own description of what a fire starts and
	// where it reports, in its JSON shape; only that channel reads it.
	Target []byte `json:"target,omitempty"`

	// The state, kept across definitions.

	// Cursor is the key of the last tick looked at (fired or passed
	// over): the next tick is looked for after it. It never moves back.
	Cursor string `json:"cursor,omitempty"`
	// Since is when the schedule was first stored.
	Since time.Time `json:"since"`
	// LastFire and LastFireAt are the key and the time of the last tick
	// fired (a manual fire's included); LastRun is the run the last fire
	// started, once started.
	LastFire   string    `json:"last_fire,omitempty"`
	LastFireAt time.Time `json:"last_fire_at,omitzero"`
	LastRun    string    `json:"last_run,omitempty"`
	// Posts are the external ids of the schedule's own posts (its
	// tracking issue), by name.
	Posts map[string]string `json:"posts,omitempty"`
	// UpdatedAt is when the definition or the state last changed.
	UpdatedAt time.Time `json:"updated_at"`
}

// Fire states.
const (
	// FireQueued waits for the schedule's last run to end (overlap:
	// queue).
	FireQueued = "queued"
	// FireClaimed is recorded and its run not yet started.
	FireClaimed = "claimed"
	// FireStarted has started its run.
	FireStarted = "started"
	// FireDropped did not start a run: Error says why.
	FireDropped = "dropped"
)

// Fire is one tick of a schedule that fired, recorded before its run
// starts: a tick fires once, whatever restarts come between.
type Fire struct {
	Schedule string `json:"schedule"`
	// Tick is the tick's key (Schedule.Cursor's kind), or for a fire
	// asked by hand "manual-" and the time it was asked.
	Tick string `json:"tick"`
	// At is when the tick came (the time asked, for a manual fire).
	At time.Time `json:"at"`
	// Manual is set for a fire asked by hand, which moves no cursor.
	Manual bool   `json:"manual,omitempty"`
	State  string `json:"state"`
	RunID  string `json:"run_id,omitempty"`
	Error  string `json:"error,omitempty"`
	// FiredAt is when it was recorded; UpdatedAt its last change.
	FiredAt   time.Time `json:"fired_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Store is the bot's part of the store. Every method is one intent, done
// whole or not at all; a context error or a closed store is an error.
// Unless said otherwise, a missing record is engine.ErrNotFound (wrapped).
type Store interface {
	// Deliveries.

	// RecordDelivery stores d as received, synced, stamping ReceivedAt
	// and UpdatedAt with the store's clock, and reports whether it was
	// new: false means its Source and ID were already recorded (a
	// redelivery), and nothing was written. Source and ID are required.
	RecordDelivery(ctx context.Context, d Delivery) (bool, error)
	// PendingDeliveries returns up to limit deliveries still to handle:
	// received, not held, and not postponed past now. Oldest received first;
	// limit <= 0 means all. Its cost follows the number pending, not the
	// number stored.
	PendingDeliveries(ctx context.Context, limit int) ([]Delivery, error)
	// DeliveryBacklog counts the received deliveries, due, postponed and
	// held, at the store's clock. Its cost follows the number pending.
	DeliveryBacklog(ctx context.Context) (Backlog, error)
	// FinishDelivery records the outcome of handling a delivery: done,
	// or failed with handleErr's text. Either way it counts an attempt,
	// drops the payload, and is kept for at least a week so a
	// redelivery is recognised.
	FinishDelivery(ctx context.Context, source, id string, handleErr error) error
	// RetryDelivery postpones a delivery to be handled again at next: it
	// stays received, counts the attempt and records handleErr's text
	// (when not nil).
	RetryDelivery(ctx context.Context, source, id string, next time.Time, handleErr error) error
	// HoldDelivery keeps a delivery back under hold (not empty) until
	// ReleaseDeliveries releases it: it stays received, counts the attempt
	// and records handleErr's text (when not nil).
	HoldDelivery(ctx context.Context, source, id, hold string, handleErr error) error
	// ReleaseDeliveries makes the deliveries held under hold due now, and
	// returns how many; hold "" releases every held delivery.
	ReleaseDeliveries(ctx context.Context, hold string) (int, error)

	// The launch queue of a scope (a pull request).

	// QueueLaunch appends a launch to scope's queue, synced, once per
	// key (queueing a key again changes nothing), and returns its
	// 1-based position.
	QueueLaunch(ctx context.Context, scope, key string, payload []byte) (int, error)
	// QueuedLaunches returns scope's queue, oldest first.
	QueuedLaunches(ctx context.Context, scope string) ([]QueuedLaunch, error)
	// DropLaunch removes a launch from scope's queue, synced; dropping
	// one that is not queued is not an error.
	DropLaunch(ctx context.Context, scope, key string) error

	// Posts.

	// RecordPost records that a channel's post extID (a comment id, a
	// Slack channel/ts) carries question ixID of run runID, so a reply
	// to it is routed there, and sets the interaction's post for the
	// channel. channel must not contain "/".
	RecordPost(ctx context.Context, runID, ixID, channel, extID string) error
	// RecordThread records that a channel's post extID is run runID's
	// own, not a question's (a Slack card, whose thread holds the run's
	// questions), so a reply to it is routed to the run: PostRef then
	// returns runID and an empty ixID. The run must exist; channel must
	// not contain "/".
	RecordThread(ctx context.Context, runID, channel, extID string) error
	// PostRef returns the question a post carries, or the run whose own
	// post it is (RecordThread) with an empty ixID.
	PostRef(ctx context.Context, channel, extID string) (runID, ixID string, err error)
	// ShortID numbers a question in scope, from 1: the same question
	// always gets the same number, and a number is never handed out
	// twice in a scope, even after its run is pruned.
	ShortID(ctx context.Context, scope, runID, ixID string) (int, error)
	// ShortRef returns the question numbered n in scope.
	ShortRef(ctx context.Context, scope string, n int) (runID, ixID string, err error)
	// ShortIDs returns the numbers of run runID's questions in scope, by
	// interaction id.
	ShortIDs(ctx context.Context, scope, runID string) (map[string]int, error)
	// SetRunPost records an external id of a run's own post (its status
	// comment) under name; the run must exist.
	SetRunPost(ctx context.Context, runID, name, value string) error
	// RunPosts returns the external ids recorded for a run, by name.
	RunPosts(ctx context.Context, runID string) (map[string]string, error)

	// RunsByRef returns the runs whose trigger Ref is ref, exactly as
	// written, in no particular order.
	RunsByRef(ctx context.Context, ref string) ([]*engine.Run, error)

	// Schedules.

	// PutSchedules replaces the schedules of source with defs, synced:
	// schedules of source not in defs are removed, with their fires still
	// to start (dropped); the others are written, each keeping the state
	// stored under its name (Cursor, Since, LastFire, LastFireAt, LastRun,
	// Posts) unless its Zone changed, and taking the Cursor and Since of
	// defs otherwise. Every def's Source must be source, and a name used
	// by another source is an error. It returns the schedules stored.
	PutSchedules(ctx context.Context, source string, defs []Schedule) ([]Schedule, error)
	// Schedules returns every schedule, by name.
	Schedules(ctx context.Context) ([]Schedule, error)
	// Schedule returns one schedule.
	Schedule(ctx context.Context, name string) (*Schedule, error)
	// AdvanceSchedule moves a schedule's Cursor to cursor, a tick passed
	// over without firing; a cursor not after the stored one (as text)
	// changes nothing.
	AdvanceSchedule(ctx context.Context, name, cursor string) error
	// ClaimFire records f (Schedule, Tick, At, Manual; State queued or
	// claimed) before its run starts, synced, and reports whether it is
	// new: false means the tick was recorded before, and nothing was
	// written. A new fire sets the schedule's LastFire and LastFireAt and,
	// unless Manual, moves its Cursor to f.Tick as AdvanceSchedule does.
	// The schedule must exist.
	ClaimFire(ctx context.Context, f Fire) (bool, error)
	// StartFire records that fire (schedule, tick) started run runID: it
	// is started, and the schedule's LastRun is runID.
	StartFire(ctx context.Context, schedule, tick, runID string) error
	// DropFire records that fire (schedule, tick) starts no run, for
	// reason.
	DropFire(ctx context.Context, schedule, tick, reason string) error
	// PromoteFire turns a queued fire into a claimed one (its turn came).
	PromoteFire(ctx context.Context, schedule, tick string) error
	// PendingFires returns the fires queued or claimed, of every
	// schedule, oldest fired first. Its cost follows their number.
	PendingFires(ctx context.Context) ([]Fire, error)
	// Fires returns a schedule's fires, newest tick first, at most limit
	// (<= 0: all). Started and dropped fires are kept at least a week.
	Fires(ctx context.Context, schedule string, limit int) ([]Fire, error)
	// SetSchedulePost records an external id of a schedule's own post
	// (its tracking issue) under name; the schedule must exist.
	SetSchedulePost(ctx context.Context, schedule, name, value string) error

	// OpenQuestions lists, newest first (RequestedAt, then run and
	// interaction id), every question that can still be answered, across
	// every run: the async questions of runs not finished or failed, and
	// the blocking question (a form, an ask_user; never an await) of a
	// run paused on it. Each comes with its run as read with it. Its cost
	// follows the number of open questions, not of all questions asked.
	OpenQuestions(ctx context.Context) ([]OpenQuestion, error)

	// Account links.

	// SetLink records that the chat user l.Team/l.User is the GitHub
	// account l.GitHubID (login l.Login), replacing the user's earlier
	// link; LinkedAt zero is the store's clock. Team and User must be set
	// and hold no "/".
	SetLink(ctx context.Context, l Link) error
	// Link returns a chat user's link.
	Link(ctx context.Context, team, user string) (Link, error)
	// DropLinks removes every link to the GitHub account githubID and
	// returns how many there were.
	DropLinks(ctx context.Context, githubID int64) (int, error)
	// UseNonce records nonce (1 to 128 bytes) as used until expires and
	// reports whether it was unused: a second use, until it expires, is
	// false.
	UseNonce(ctx context.Context, nonce string, expires time.Time) (bool, error)
}

// Link is a chat user (a Slack user of a workspace) linked to a GitHub
// account by the person, through GitHub's sign-in: keyed on the numeric
// GitHub id, which a rename does not change.
type Link struct {
	Team, User string
	GitHubID   int64
	Login      string
	LinkedAt   time.Time
}

// OpenQuestion is a question that waits for a person's answer, as
// Store.OpenQuestions lists it.
type OpenQuestion struct {
	RunID         string
	InteractionID string
	Kind          engine.InteractionKind
	RequestedAt   time.Time
	// Run is the question's run; the questions of one run share it.
	Run *engine.Run
}
