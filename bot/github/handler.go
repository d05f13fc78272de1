package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	gh "github.com/google/go-github/v62/github"

	"github.com/iterion-bot/iterion/bot/repoconfig"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// RunIndex is what the handler's commands read of runs and their
// questions, all together (each command names the part it reads).
type RunIndex interface {
	Run(ctx context.Context, id string) (*engine.Run, error)
	Runs(ctx context.Context, f engine.RunFilter) ([]*engine.Run, error)
	refRuns
	Interactions(ctx context.Context, runID string) ([]*engine.Interaction, error)
	Interaction(ctx context.Context, runID, id string) (*engine.Interaction, error)
	// ShortRef maps a pull request's short question number (Q3) to its
	// interaction.
	ShortRef(ctx context.Context, scope string, n int) (runID, ixID string, err error)
	ShortIDs(ctx context.Context, scope, runID string) (map[string]int, error)
}

// refRuns lists the runs of a place.
type refRuns interface {
	// RunsByRef returns the runs whose trigger Ref is ref; those of a
	// pull request have its PRScope.
	RunsByRef(ctx context.Context, ref string) ([]*engine.Run, error)
}

// Launch asks for a run of a repository's workflow.
type Launch struct {
	InstallationID int64
	Owner, Repo    string
	PR             int
	// Workflow is the name in .iterion.yml, Path its .bot file (read from
	// DefaultBranch) and Ref the commit the run works on.
	Workflow, Path, Ref string
	DefaultBranch       string
	Vars                map[string]string
	// Context is what the bot knows of the PR (repo, pr_number,
	// head_sha, base_ref, pr_title, pr_body, comment_body); each is passed
	// as a var when the workflow declares it and Vars do not set it.
	Context   map[string]string
	Actor     string
	CommentID int64
	// Key identifies the request (the delivery and the command in it): a
	// delivery handled again after a crash names the same key, and the
	// launcher starts no second run for it.
	Key string
	// Schedule and Tick name the schedule and tick of a scheduled run,
	// Issue its tracking issue (0: none). Slack is the run's Slack
	// channel (the schedule's, or slack.channel of the repository's
	// .iterion.yml), where it is shown too when the server has Slack; ""
	// for none.
	Schedule, Tick string
	Issue          int
	Slack          string
}

// Actions are what the handler's commands do to runs.
type Actions interface {
	answerer
	canceller
	launcher
}

// Permissions answers who may act on a repository.
type Permissions interface {
	CanWrite(ctx context.Context, installationID int64, owner, repo, user string) (bool, error)
}

// LaunchQueue is the store's per-PR queue of launches.
type LaunchQueue interface {
	QueueLaunch(ctx context.Context, scope, key string, payload []byte) (int, error)
	QueuedLaunches(ctx context.Context, scope string) ([]store.QueuedLaunch, error)
	DropLaunch(ctx context.Context, scope, key string) error
}

// poster writes the bot's comments and reactions on pull requests
// (*Commenter).
type poster interface {
	Post(ctx context.Context, installationID int64, owner, repo string, pr int, key, body string) (int64, error)
	React(ctx context.Context, installationID int64, owner, repo string, commentID int64, content string) error
}

// HandlerOptions configure a Handler. Every field is required but
// Installations and Log.
type HandlerOptions struct {
	// Client returns the API client of an installation (App.Installation).
	Client func(installationID int64) (*gh.Client, error)
	Perms  Permissions
	Runs   RunIndex
	// Actions are the engine's doors; a Service sets them once the engine
	// exists, before the first delivery.
	Actions Actions
	Replies *Commenter
	// Queue holds the runs asked for on a PR while another is active, for
	// .iterion.yml's concurrency: queue.
	Queue LaunchQueue
	// Installations, when set, learns of installation events (App.Installations).
	Installations *Installations
	// OnPush, when set, is told of every branch push (the Service reads
	// a default branch's schedules again).
	OnPush func(ctx context.Context, t Trigger) error
	// Revoked, when set, is told of a person who revoked their
	// authorization of the App, by GitHub id: their account links go.
	Revoked func(ctx context.Context, githubID int64) error
	// Log receives the handler's logs; nil means none.
	Log *slog.Logger
}

// Handler acts on GitHub deliveries: it decodes them, reads the
// repository's .iterion.yml from the default branch, and hands each
// command of a comment to its own handler (run, answer, cancel, status,
// help), each over the few interfaces it reads; it then replies on the PR
// once for the whole comment. It is the Worker's handle function.
type Handler struct {
	client        func(installationID int64) (*gh.Client, error)
	perms         Permissions
	runs          RunIndex
	replies       poster
	installations *Installations
	onPush        func(ctx context.Context, t Trigger) error
	revoked       func(ctx context.Context, githubID int64) error
	log           *slog.Logger

	commands map[string]command
	answers  *answerCommand
	queue    *prQueue
}

// NewHandler returns the handler of one App's deliveries.
func NewHandler(o HandlerOptions) *Handler {
	h := &Handler{client: o.Client, perms: o.Perms, runs: o.Runs, replies: o.Replies,
		installations: o.Installations, onPush: o.OnPush, revoked: o.Revoked, log: cmpLog(o.Log)}
	h.queue = &prQueue{runs: o.Runs, queue: o.Queue, actions: o.Actions, replies: o.Replies, pulls: h.pull, log: h.log}
	h.answers = &answerCommand{perms: o.Perms, questions: o.Runs, answers: o.Actions}
	h.commands = map[string]command{
		CmdHelp:   helpCommand{},
		CmdStatus: statusCommand{runs: o.Runs},
		CmdAnswer: h.answers,
		CmdCancel: cancelCommand{perms: o.Perms, runs: o.Runs, runner: o.Actions},
		CmdRun:    runCommand{perms: o.Perms, pulls: h.pull, queue: h.queue},
	}
	return h
}

// request is what a command is asked in: the trigger (its comment), the
// repository's configuration, and the key of what it may start.
type request struct {
	t   Trigger
	cfg *repoconfig.Config
	key string
}

// outcome is what a command did, for the handler to show.
type outcome struct {
	// text is the reply's part for this command; "" says nothing.
	text string
	// react, when set, is a reaction on the comment ("+1": an answer taken).
	react string
	// started is the id of the run the command started.
	started string
}

// say is the outcome that only replies.
func say(format string, args ...any) outcome { return outcome{text: fmt.Sprintf(format, args...)} }

// command is one /iterion command's handler. Only failures of GitHub or
// the store are errors (the worker retries the delivery); everything a
// user can get wrong is an outcome saying what to fix.
type command interface {
	do(ctx context.Context, req request, c Command) (outcome, error)
}

// Handle acts on one stored delivery. Errors are *RetryLater when GitHub
// asked for patience; the worker records any other error on the delivery.
func (h *Handler) Handle(ctx context.Context, d store.Delivery) error {
	t, err := Decode(d.Event, d.Payload)
	if ig := (*Ignored)(nil); errors.As(err, &ig) {
		h.log.Debug("delivery ignored", "delivery", d.ID, "reason", ig.Reason)
		return nil
	}
	if err != nil {
		return err
	}
	if t.Kind == TriggerInstallation {
		h.installationChanged(t)
		return nil
	}
	if t.Kind == TriggerRevoked {
		if h.revoked == nil {
			return nil
		}
		return h.revoked(ctx, t.SenderID)
	}
	if t.Kind == TriggerPush {
		// .iterion.yml has no push triggers: a push to the default branch
		// only refreshes the repository's schedules.
		if h.onPush != nil {
			return h.onPush(ctx, t)
		}
		return nil
	}
	return h.act(ctx, d.ID, t)
}

// installationChanged applies an installation event: uninstalled and
// suspended installations are held at once; installed, unsuspended and
// re-permitted ones are released, and their held work resumes.
func (h *Handler) installationChanged(t Trigger) {
	if h.installations == nil {
		return
	}
	switch t.Action {
	case "deleted":
		h.installations.Block(&InstallationError{ID: t.InstallationID, Status: http.StatusNotFound})
	case "suspend":
		h.installations.Block(&InstallationError{ID: t.InstallationID, Status: http.StatusForbidden})
	default:
		h.installations.Release(t.InstallationID, "installation "+t.Action)
	}
}

// GiveUp tells the author of a comment whose handling failed for good
// that it did: a 👀 followed by silence would leave them waiting. The
// error's details stay in the log.
func (h *Handler) GiveUp(ctx context.Context, d store.Delivery, cause error) {
	t, err := Decode(d.Event, d.Payload)
	if err != nil || t.Kind != TriggerComment {
		return
	}
	text := "I could not finish what this comment asks: GitHub or this server failed while I was at it. Nothing more will happen for it; please ask again in a few minutes."
	var later *RetryLater
	if errors.As(cause, &later) {
		text = "I could not finish what this comment asks: GitHub kept asking me to slow down. Nothing more will happen for it; please ask again in a few minutes."
	}
	if err := h.reply(ctx, d.ID, t, text); err != nil {
		h.log.Error("telling a commenter that their comment failed failed too", "delivery", d.ID, "err", err)
	}
}

// act does what trigger t asks; id names the request (the delivery), so
// doing it again after a crash replies and launches nothing twice.
func (h *Handler) act(ctx context.Context, id string, t Trigger) error {
	client, err := h.client(t.InstallationID)
	if err != nil {
		return err
	}
	cfg, _, err := FetchConfig(ctx, client, t.Owner, t.Repo, t.DefaultBranch)
	var cfgErrs repoconfig.Errors
	if errors.As(err, &cfgErrs) {
		return h.reply(ctx, id, t, fmt.Sprintf("I cannot act on this: the repository's %s on `%s` has mistakes.\n\n```\n%s\n```", repoconfig.FileName, inert(t.DefaultBranch), unfenced(err.Error())))
	}
	if err != nil {
		return err
	}
	switch {
	case t.Kind == TriggerPullRequest:
		return h.pullRequest(ctx, id, t, cfg)
	case t.Kind == TriggerRerun:
		return h.rerun(ctx, id, t, cfg)
	case !cfg.CommentsEnabled():
		h.log.Debug("comment commands are off", "repo", t.Owner+"/"+t.Repo)
		return nil
	case t.Reply != nil:
		out, err := h.answers.quoteReply(ctx, request{t: t, cfg: cfg}, *t.Reply)
		if err != nil {
			return err
		}
		return h.show(ctx, id, t, []outcome{out})
	}
	// 👀 says the bot saw the commands, before the work they ask for.
	if len(t.Commands) > 0 {
		if err := h.replies.React(ctx, t.InstallationID, t.Owner, t.Repo, t.CommentID, "eyes"); err != nil {
			return err
		}
	}
	// One reply answers the whole comment, its parts in the comment's order.
	var outs []outcome
	for _, p := range t.Problems {
		outs = append(outs, outcome{text: problemText(p)})
	}
	// What a comment starts is keyed by the comment, not by the delivery:
	// X-GitHub-Delivery is not signed, so a signed payload sent again
	// under new delivery ids must start nothing more.
	key := id
	if t.CommentID != 0 {
		key = fmt.Sprintf("comment-%d", t.CommentID)
	}
	for i, c := range t.Commands {
		cmd, ok := h.commands[c.Name]
		if !ok {
			return fmt.Errorf("no handler for command %q", c.Name) // ParseComment knows no other
		}
		out, err := cmd.do(ctx, request{t: t, cfg: cfg, key: fmt.Sprintf("%s-%d", key, i+1)}, c)
		if err != nil {
			return err
		}
		outs = append(outs, out)
	}
	return h.show(ctx, id, t, outs)
}

// show reacts as the outcomes ask, then replies once with their texts.
func (h *Handler) show(ctx context.Context, id string, t Trigger, outs []outcome) error {
	var parts []string
	var reacted []string
	for _, o := range outs {
		if o.react != "" && !slices.Contains(reacted, o.react) {
			if err := h.replies.React(ctx, t.InstallationID, t.Owner, t.Repo, t.CommentID, o.react); err != nil {
				return err
			}
			reacted = append(reacted, o.react)
		}
		if s := strings.TrimSpace(o.text); s != "" {
			parts = append(parts, s)
		}
	}
	return h.reply(ctx, id, t, strings.Join(parts, "\n\n"))
}

// reply posts the reply to request id (a delivery); its marker comes
// from id, so a request handled again after a crash does not reply twice.
func (h *Handler) reply(ctx context.Context, id string, t Trigger, text string) error {
	if text == "" {
		return nil
	}
	// A comment's reply is keyed by the comment, so the same comment met
	// again (redelivered, or read back at start-up) is answered once.
	key := "delivery-" + id
	if t.CommentID != 0 {
		key = fmt.Sprintf("comment-%d", t.CommentID)
	}
	// The words are ours, but they echo what the commenter wrote (a
	// command's arguments, a suggestion): none may mention anyone.
	body := fmt.Sprintf("@%s %s", t.Sender, Disarm(text))
	_, err := h.replies.Post(ctx, t.InstallationID, t.Owner, t.Repo, t.PR, key, body)
	return err
}

// pull reads t's pull request.
func (h *Handler) pull(ctx context.Context, t Trigger) (*gh.PullRequest, error) {
	client, err := h.client(t.InstallationID)
	if err != nil {
		return nil, err
	}
	pr, resp, err := client.PullRequests.Get(ctx, t.Owner, t.Repo, t.PR)
	if err != nil {
		return nil, classify(fmt.Sprintf("reading %s/%s#%d", t.Owner, t.Repo, t.PR), resp, err)
	}
	return pr, nil
}

func problemText(p Problem) string {
	// Both echo what the commenter wrote.
	text := fmt.Sprintf("line %d: %s.", p.Line, plain(p.Message, 300))
	if p.Suggestion != "" {
		text += fmt.Sprintf(" Did you mean `%s`?", inert(p.Suggestion))
	}
	if p.Help {
		text += "\n\n" + HelpText
	}
	return text
}

// mayChange checks that t's sender may run command name, which changes
// things: write permission, asked live, or for an answer a listing under
// the configuration's answerers. It returns the refusal to reply, "" when
// allowed.
func mayChange(ctx context.Context, perms Permissions, t Trigger, cfg *repoconfig.Config, name string) (string, error) {
	ok, err := perms.CanWrite(ctx, t.InstallationID, t.Owner, t.Repo, t.Sender)
	switch {
	case err != nil:
		return "", err
	case ok:
		return "", nil
	case name == CmdAnswer && slices.Contains(cfg.Answerers, t.Sender):
		return "", nil
	case name == CmdAnswer:
		return notAnswerer(t), nil
	}
	return fmt.Sprintf("`/iterion %s` needs write permission on %s/%s, which you do not have.", name, t.Owner, t.Repo), nil
}

// prRuns returns the runs started for t's pull request, newest first.
func prRuns(ctx context.Context, runs refRuns, t Trigger) ([]*engine.Run, error) {
	all, err := runs.RunsByRef(ctx, PRScope(t.Owner+"/"+t.Repo, t.PR))
	if err != nil {
		return nil, err
	}
	var out []*engine.Run
	for _, r := range all {
		if r.Trigger.Source == "github" {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *engine.Run) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

// StartQueued starts, as a job of its own, the next run queued on the
// pull request of run, an ended run (prQueue.startQueued). WaitJobs waits
// for the jobs.
func (h *Handler) StartQueued(ctx context.Context, run *engine.Run) error {
	h.queue.startQueued(ctx, run)
	return nil
}

// WaitJobs waits for the jobs StartQueued started; they end with the
// context they were given.
func (h *Handler) WaitJobs() { h.queue.jobs.Wait() }
