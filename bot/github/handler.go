package github

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/iterion-bot/iterion/bot/repoconfig"
	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// RunIndex is what the handler reads of runs and their questions.
type RunIndex interface {
	Run(ctx context.Context, id string) (*engine.Run, error)
	Runs(ctx context.Context, f engine.RunFilter) ([]*engine.Run, error)
	// RunsByRef returns the runs whose trigger Ref is ref; those of a
	// pull request have its PRScope.
	RunsByRef(ctx context.Context, ref string) ([]*engine.Run, error)
	Interactions(ctx context.Context, runID string) ([]*engine.Interaction, error)
	Interaction(ctx context.Context, runID, id string) (*engine.Interaction, error)
	// ShortRef maps a pull request's short question number (Q3) to its
	// interaction.
	ShortRef(ctx context.Context, scope string, n int) (runID, ixID string, err error)
	ShortIDs(ctx context.Context, scope, runID string) (map[string]int, error)
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
}

// Actions are what the handler does to runs.
type Actions interface {
	Answer(ctx context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error)
	// Cancel stops a run that is not over (executing or paused) and
	// reports whether it did.
	Cancel(ctx context.Context, runID, reason string) (bool, error)
	// Launch starts a run and returns its id; errors a user can fix say
	// what to fix.
	Launch(ctx context.Context, l Launch) (string, error)
}

// Permissions answers who may act on a repository.
type Permissions interface {
	CanWrite(ctx context.Context, installationID int64, owner, repo, user string) (bool, error)
}

// Handler acts on GitHub deliveries: it decodes them, reads the
// repository's .iterion.yml from the default branch, checks the sender's
// permission live, does what the comment asks and replies on the PR. It
// is the Worker's handle function.
type Handler struct {
	Client  func(installationID int64) (*gh.Client, error)
	Perms   Permissions
	Runs    RunIndex
	Actions Actions
	Replies *Commenter
	// Queue holds the runs asked for on a PR while another is active, for
	// .iterion.yml's concurrency: queue.
	Queue LaunchQueue
	// Installations, when set, learns of installation events (App.Installations).
	Installations *Installations
	Log           *slog.Logger

	mu      sync.Mutex
	prLocks map[string]*prLock
	jobs    sync.WaitGroup
}

// LaunchQueue is the store's per-PR queue of launches.
type LaunchQueue interface {
	QueueLaunch(ctx context.Context, scope, key string, payload []byte) (int, error)
	QueuedLaunches(ctx context.Context, scope string) ([]store.QueuedLaunch, error)
	DropLaunch(ctx context.Context, scope, key string) error
}

// Handle acts on one stored delivery. Errors are *RetryLater when GitHub
// asked for patience; the worker records any other error on the delivery.
func (h *Handler) Handle(ctx context.Context, d store.Delivery) error {
	t, err := Decode(d.Event, d.Payload)
	if ig := (*Ignored)(nil); errors.As(err, &ig) {
		h.log().Debug("delivery ignored", "delivery", d.ID, "reason", ig.Reason)
		return nil
	}
	if err != nil {
		return err
	}
	if t.Kind == TriggerInstallation {
		h.installationChanged(t)
		return nil
	}
	if t.Kind == TriggerPush {
		// .iterion.yml has no push triggers; schedules cover the branches.
		h.log().Debug("push not configured to start runs", "delivery", d.ID, "repo", t.Owner+"/"+t.Repo)
		return nil
	}
	return h.act(ctx, d.ID, t)
}

// installationChanged applies an installation event: uninstalled and
// suspended installations are held at once; installed, unsuspended and
// re-permitted ones are released, and their held work resumes.
func (h *Handler) installationChanged(t Trigger) {
	if h.Installations == nil {
		return
	}
	switch t.Action {
	case "deleted":
		h.Installations.Block(&InstallationError{ID: t.InstallationID, Status: http.StatusNotFound})
	case "suspend":
		h.Installations.Block(&InstallationError{ID: t.InstallationID, Status: http.StatusForbidden})
	default:
		h.Installations.Release(t.InstallationID, "installation "+t.Action)
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
		h.log().Error("telling a commenter that their comment failed failed too", "delivery", d.ID, "err", err)
	}
}

// act does what trigger t asks; id names the request (the delivery), so
// doing it again after a crash replies and launches nothing twice.
func (h *Handler) act(ctx context.Context, id string, t Trigger) error {
	client, err := h.Client(t.InstallationID)
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
	if t.Kind == TriggerPullRequest {
		return h.pullRequest(ctx, id, t, cfg)
	}
	if t.Kind == TriggerRerun {
		return h.rerun(ctx, id, t, cfg)
	}
	if !cfg.CommentsEnabled() {
		h.log().Debug("comment commands are off", "repo", t.Owner+"/"+t.Repo)
		return nil
	}
	if t.Reply != nil {
		text, err := h.quoteReply(ctx, t, cfg)
		if err != nil {
			return err
		}
		return h.reply(ctx, id, t, text)
	}
	// 👀 says the bot saw the commands, before the work they ask for.
	if len(t.Commands) > 0 {
		if err := h.Replies.React(ctx, t.InstallationID, t.Owner, t.Repo, t.CommentID, "eyes"); err != nil {
			return err
		}
	}
	// One reply answers the whole comment, its parts in the comment's order.
	var parts []string
	for _, p := range t.Problems {
		parts = append(parts, problemText(p))
	}
	// What a comment starts is keyed by the comment, not by the delivery:
	// X-GitHub-Delivery is not signed, so a signed payload sent again
	// under new delivery ids must start nothing more.
	key := id
	if t.CommentID != 0 {
		key = fmt.Sprintf("comment-%d", t.CommentID)
	}
	for i, c := range t.Commands {
		text, err := h.command(ctx, t, cfg, c, fmt.Sprintf("%s-%d", key, i+1))
		if err != nil {
			return err
		}
		parts = append(parts, strings.TrimSpace(text))
	}
	return h.reply(ctx, id, t, strings.Join(parts, "\n\n"))
}

// pullRequest starts the workflow .iterion.yml maps the PR's action to.
// A PR from a fork carries code the repository's owners have not
// reviewed: it runs only when someone with write permission asks with
// `/iterion run`, and the bot says so once per PR head.
func (h *Handler) pullRequest(ctx context.Context, id string, t Trigger, cfg *repoconfig.Config) error {
	name := cfg.Triggers.PullRequest[t.Action]
	if name == "" {
		h.log().Debug("pull_request action not configured", "delivery", id, "action", t.Action)
		return nil
	}
	if t.Fork {
		_, err := h.Replies.Post(ctx, t.InstallationID, t.Owner, t.Repo, t.PR, "fork-"+t.HeadSHA,
			fmt.Sprintf("This pull request comes from a fork, so workflow `%s` does not start by itself. A maintainer who has read the change at %s can start it with `/iterion run %s %s=%s`.", inert(name), inert(shortSHA(t.HeadSHA)), inert(name), ApproveVar, inert(t.HeadSHA)))
		return err
	}
	text, err := h.start(ctx, t, cfg, Launch{
		InstallationID: t.InstallationID, Owner: t.Owner, Repo: t.Repo, PR: t.PR,
		Workflow: name, Path: cfg.Workflows[name], Ref: t.HeadSHA, DefaultBranch: t.DefaultBranch, Actor: t.Sender, Key: id,
		Context: prContext(t, t.PullRequest),
	})
	if err != nil {
		return err
	}
	if strings.HasPrefix(text, "started run") {
		// A run the PR's own event started needs no reply: its status
		// comment says it all.
		h.log().Info("run started", "workflow", name, "repo", t.Owner+"/"+t.Repo, "pr", t.PR, "action", t.Action, "reply", text)
		return nil
	}
	return h.reply(ctx, id, t, fmt.Sprintf("workflow `%s` (on pull_request %s): %s", name, t.Action, text))
}

func (h *Handler) log() *slog.Logger {
	if h.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Log
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
	_, err := h.Replies.Post(ctx, t.InstallationID, t.Owner, t.Repo, t.PR, key, body)
	return err
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

// command does c and returns the reply. Only failures of GitHub itself
// are errors; everything a user can get wrong is a reply saying what to fix.
func (h *Handler) command(ctx context.Context, t Trigger, cfg *repoconfig.Config, c Command, key string) (string, error) {
	switch c.Name {
	case CmdHelp:
		return HelpText, nil
	case CmdStatus:
		return h.status(ctx, t)
	}
	// run, answer and cancel change things: they need write permission
	// (answer also admits the configured answerers), asked live.
	ok, err := h.Perms.CanWrite(ctx, t.InstallationID, t.Owner, t.Repo, t.Sender)
	if err != nil {
		return "", err
	}
	if !ok && c.Name == CmdAnswer && !slices.Contains(cfg.Answerers, t.Sender) {
		return notAnswerer(t), nil
	}
	if !ok && c.Name != CmdAnswer {
		return fmt.Sprintf("`/iterion %s` needs write permission on %s/%s, which you do not have.", c.Name, t.Owner, t.Repo), nil
	}
	switch c.Name {
	case CmdAnswer:
		text, err := h.answer(ctx, t, c.QuestionID, c.Text)
		if errors.Is(err, errAccepted) {
			return text, h.Replies.React(ctx, t.InstallationID, t.Owner, t.Repo, t.CommentID, "+1")
		}
		return text, err
	case CmdCancel:
		return h.cancel(ctx, t, c)
	default:
		return h.run(ctx, t, cfg, c, key)
	}
}

// prRuns returns the runs started for t's pull request, newest first.
func (h *Handler) prRuns(ctx context.Context, t Trigger) ([]*engine.Run, error) {
	all, err := h.Runs.RunsByRef(ctx, PRScope(t.Owner+"/"+t.Repo, t.PR))
	if err != nil {
		return nil, err
	}
	var runs []*engine.Run
	for _, r := range all {
		if r.Trigger.Source == "github" {
			runs = append(runs, r)
		}
	}
	slices.SortFunc(runs, func(a, b *engine.Run) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return runs, nil
}

func (h *Handler) status(ctx context.Context, t Trigger) (string, error) {
	runs, err := h.prRuns(ctx, t)
	if err != nil {
		return "", err
	}
	if len(runs) == 0 {
		return "no iterion runs on this pull request yet; `/iterion run` starts one.", nil
	}
	var b strings.Builder
	b.WriteString("iterion runs on this pull request:\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "- `%s` %s: %s\n", r.ID, r.Workflow, r.Status)
		ixs, err := h.Runs.Interactions(ctx, r.ID)
		if err != nil {
			return "", err
		}
		numbers, err := h.Runs.ShortIDs(ctx, PRScope(t.Owner+"/"+t.Repo, t.PR), r.ID)
		if err != nil {
			return "", err
		}
		for _, ix := range ixs {
			if !ix.Pending() || ix.Kind == engine.KindAwait || r.Status.Terminal() {
				continue
			}
			id := "`" + ix.ID + "`"
			if n := numbers[ix.ID]; n > 0 {
				id = fmt.Sprintf("Q%d (%s)", n, id)
			}
			fmt.Fprintf(&b, "  - open question %s: %s\n", id, Disarm(oneLine(questionText(ix), 200)))
		}
	}
	return b.String(), nil
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}

// notAnswerer is the polite refusal of an answer from someone who may
// not answer.
func notAnswerer(t Trigger) string {
	return fmt.Sprintf("thank you, but only people with write permission on %s/%s, or listed under `answerers` in %s, can answer iterion's questions, so this answer was not recorded.",
		t.Owner, t.Repo, repoconfig.FileName)
}

// quoteReply answers the question a comment quotes, with the rest of the
// comment as the answer, and returns the reply: none for an answer taken,
// which gets 👍. Only failures of GitHub or the store are errors (the
// worker retries the delivery).
func (h *Handler) quoteReply(ctx context.Context, t Trigger, cfg *repoconfig.Config) (string, error) {
	r := t.Reply
	if len(r.Questions) > 1 {
		var ids []string
		for _, n := range r.Questions {
			ids = append(ids, fmt.Sprintf("Q%d", n))
		}
		return fmt.Sprintf("your comment quotes several questions (%s), so I cannot tell which one it answers. Quote only one, or answer each with `/iterion answer %s <your answer>`.", strings.Join(ids, ", "), ids[0]), nil
	}
	qid := fmt.Sprintf("Q%d", r.Questions[0])
	if r.Text == "" {
		return fmt.Sprintf("your comment quotes question %s but holds no answer; write the answer below the quote.", qid), nil
	}
	ok, err := h.Perms.CanWrite(ctx, t.InstallationID, t.Owner, t.Repo, t.Sender)
	if err != nil {
		return "", err
	}
	if !ok && !slices.Contains(cfg.Answerers, t.Sender) {
		return notAnswerer(t), nil
	}
	// The quote must be of the bot's question: anyone can write a comment
	// that looks like one, for a maintainer to answer by mistake.
	ix, err := h.findQuestion(ctx, t, qid)
	if err != nil {
		return "", err
	}
	if ix != nil && ix.Pending() && !QuotesQuestion(r.Quoted, questionText(ix)) {
		return fmt.Sprintf("your comment quotes a %s that is not iterion's question %s (%s), so nothing was recorded. Quote the bot's question comment, or answer with `/iterion answer %s <your answer>`.",
			"\"Question "+qid+"\"", qid, plain(strconv.Quote(oneLine(questionText(ix), 80)), 200), qid), nil
	}
	text, err := h.answer(ctx, t, qid, r.Text)
	if errors.Is(err, errAccepted) {
		return "", h.Replies.React(ctx, t.InstallationID, t.Owner, t.Repo, t.CommentID, "+1")
	}
	return text, err
}

// errAccepted marks an answer taken: the caller reacts with 👍.
var errAccepted = errors.New("answer accepted")

// findQuestion finds a question of this PR by its short id (Q3) or its
// interaction id. Only this PR's runs are searched: a comment elsewhere
// cannot answer another repository's question.
func (h *Handler) findQuestion(ctx context.Context, t Trigger, id string) (*engine.Interaction, error) {
	if n, ok := ShortQuestionID(id); ok {
		runID, ixID, err := h.Runs.ShortRef(ctx, PRScope(t.Owner+"/"+t.Repo, t.PR), n)
		if errors.Is(err, engine.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return h.Runs.Interaction(ctx, runID, ixID)
	}
	runs, err := h.prRuns(ctx, t)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		ixs, err := h.Runs.Interactions(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		for _, ix := range ixs {
			if ix.ID == id {
				return ix, nil
			}
		}
	}
	return nil, nil
}

// answer records text as the answer to question id and returns the reply;
// errAccepted when the answer was taken.
func (h *Handler) answer(ctx context.Context, t Trigger, id, text string) (string, error) {
	ix, err := h.findQuestion(ctx, t, id)
	if err != nil {
		return "", err
	}
	if ix == nil || ix.Kind == engine.KindAwait {
		return fmt.Sprintf("no question `%s` on this pull request; `/iterion status` lists the open ones.", inert(id)), nil
	}
	if !ix.Pending() {
		// The same answer met again (a comment both delivered and found by
		// the start-up reconciliation) is taken, not refused; a different
		// one is not used, even from the same person.
		same := strings.TrimSpace(text)
		if labels := options(ix); len(labels) > 0 {
			same = pickOption(same, labels)
		}
		if ix.Via == "github" && ix.AnsweredBy == t.Sender && (ix.Kind == engine.KindBlocking || ix.Answer() == same) {
			// (A form's answers are stored coerced; a second form from the
			// same person in the same breath is this one met again.)
			return fmt.Sprintf("answer to `%s` recorded.", id), errAccepted
		}
		return fmt.Sprintf("question `%s` was already answered by %s via %s; your answer was not used.", id, inert(cmp.Or(ix.AnsweredBy, "someone")), inert(viaWords(ix.Via))), nil
	}
	text = strings.TrimSpace(text)
	if labels := options(ix); len(labels) > 0 {
		text = pickOption(text, labels)
	}
	if ix.Kind == engine.KindBlocking {
		req := engine.AnswerRequest{RunID: ix.RunID, InteractionID: ix.ID, By: t.Sender, Via: "github", Text: text}
		if fields := formFields(ix); len(fields) > 0 {
			values, rest := ParseForm(text, fields)
			req.Text = ""
			if len(values) == 0 && len(fields) == 1 {
				req.Text = rest // a one-field form answered with a bare text
			} else {
				req.Fields = map[string]any{}
				for k, v := range values {
					req.Fields[k] = v
				}
			}
		}
		_, err := h.Actions.Answer(ctx, req)
		var bad *engine.InvalidAnswerError
		var notWaiting *engine.NotWaitingError
		var already *engine.AlreadyAnsweredError
		switch {
		case errors.As(err, &bad):
			return fmt.Sprintf("your answer to `%s` was not taken: %s. Write one line per field, `field: value`.", inert(id), plain(bad.Error(), 300)), nil
		case errors.As(err, &already):
			return fmt.Sprintf("question `%s` was already answered by %s via %s; your answer was not used.", id, inert(cmp.Or(already.AnsweredBy, "someone")), inert(viaWords(already.Via))), nil
		case errors.As(err, &notWaiting):
			return fmt.Sprintf("run `%s` is %s, not waiting for `%s`; your answer was not used.", ix.RunID, notWaiting.Status, id), nil
		case errors.Is(err, engine.ErrRunEnded):
			return fmt.Sprintf("run `%s` has ended; question `%s` can no longer be answered.", ix.RunID, id), nil
		case errors.Is(err, engine.ErrWorkflowChanged):
			return fmt.Sprintf("run `%s` cannot continue: its workflow changed since it started.", ix.RunID), nil
		case err != nil:
			return "", err
		}
		return fmt.Sprintf("answer to `%s` recorded; run `%s` continues.", id, ix.RunID), errAccepted
	}
	_, err = h.Actions.Answer(ctx, engine.AnswerRequest{RunID: ix.RunID, InteractionID: ix.ID, Text: text, By: t.Sender, Via: "github"})
	var already *engine.AlreadyAnsweredError
	switch {
	case errors.As(err, &already):
		// Answered between the look above and now: the same answer from the
		// same person (the comment met twice at start-up) is taken.
		if already.Via == "github" && already.AnsweredBy == t.Sender {
			if again, gerr := h.Runs.Interaction(ctx, ix.RunID, ix.ID); gerr == nil && again.Answer() == text {
				return fmt.Sprintf("answer to `%s` recorded.", id), errAccepted
			}
		}
		return fmt.Sprintf("question `%s` was already answered by %s via %s; your answer was not used.", id, inert(cmp.Or(already.AnsweredBy, "someone")), inert(viaWords(already.Via))), nil
	case errors.Is(err, engine.ErrRunEnded):
		return fmt.Sprintf("run `%s` has ended; question `%s` can no longer be answered.", ix.RunID, id), nil
	case errors.Is(err, engine.ErrNotAsync), errors.Is(err, engine.ErrEmptyAnswer):
		return err.Error(), nil
	case err != nil:
		return "", err
	}
	return fmt.Sprintf("answer to `%s` recorded; the agent reads it at its next turn.", id), errAccepted
}

// viaWords names the channel an answer came through, as a PR comment says
// it: "via Slack", "via the admin page".
func viaWords(via string) string {
	switch via {
	case "github":
		return "GitHub"
	case "slack":
		return "Slack"
	case "page":
		return "the admin page"
	case "cli":
		return "the command line"
	case "api":
		return "the REST API"
	case "timer":
		return "its timer"
	case "":
		return "an unknown channel"
	}
	return via
}

// pickOption turns a bare option number or label into the option's label;
// other text is the answer as written.
func pickOption(text string, labels []string) string {
	if n, err := strconv.Atoi(strings.TrimSuffix(text, ".")); err == nil && n >= 1 && n <= len(labels) {
		return labels[n-1]
	}
	for _, l := range labels {
		if strings.EqualFold(l, text) {
			return l
		}
	}
	return text
}

func (h *Handler) cancel(ctx context.Context, t Trigger, c Command) (string, error) {
	runs, err := h.prRuns(ctx, t)
	if err != nil {
		return "", err
	}
	for _, r := range runs {
		if c.RunID != "" && r.ID != c.RunID {
			continue
		}
		if c.RunID == "" && r.Status.Terminal() {
			continue
		}
		if r.Status.Terminal() {
			return fmt.Sprintf("run `%s` already ended (%s).", r.ID, r.Status), nil
		}
		stopped, err := h.Actions.Cancel(ctx, r.ID, "cancelled by "+t.Sender+" on GitHub")
		if err != nil {
			return "", err
		}
		if !stopped {
			return fmt.Sprintf("run `%s` is %s; there is nothing to cancel.", r.ID, r.Status), nil
		}
		return fmt.Sprintf("run `%s` cancelled.", r.ID), nil
	}
	if c.RunID != "" {
		return fmt.Sprintf("no run `%s` on this pull request; `/iterion status` lists them.", inert(c.RunID)), nil
	}
	return "no run in progress on this pull request.", nil
}

func (h *Handler) run(ctx context.Context, t Trigger, cfg *repoconfig.Config, c Command, key string) (string, error) {
	name := c.Workflow
	if name == "" {
		name = cfg.DefaultWorkflow
	}
	if name == "" {
		return fmt.Sprintf("name a workflow (`/iterion run <workflow>`) or set `default_workflow` in %s.", repoconfig.FileName), nil
	}
	path, ok := cfg.Workflows[name]
	if !ok {
		names := make([]string, 0, len(cfg.Workflows))
		for n := range cfg.Workflows {
			names = append(names, "`"+n+"`")
		}
		slices.Sort(names)
		if len(names) == 0 {
			return fmt.Sprintf("no workflow `%s`: %s on `%s` lists no workflows.", inert(name), repoconfig.FileName, inert(t.DefaultBranch)), nil
		}
		return fmt.Sprintf("no workflow `%s` in %s; the workflows are %s.", inert(name), repoconfig.FileName, strings.Join(names, ", ")), nil
	}
	client, err := h.Client(t.InstallationID)
	if err != nil {
		return "", err
	}
	pr, resp, err := client.PullRequests.Get(ctx, t.Owner, t.Repo, t.PR)
	if err != nil {
		return "", classify(fmt.Sprintf("reading %s/%s#%d", t.Owner, t.Repo, t.PR), resp, err)
	}
	if pr.GetState() != "open" {
		return "this pull request is closed; reopen it to run workflows on it.", nil
	}
	head := pr.GetHead().GetSHA()
	vars := maps.Clone(c.Vars)
	approved := vars[ApproveVar]
	delete(vars, ApproveVar)
	if isFork(pr) {
		// The approval is for the commit the maintainer read: code pushed
		// after it does not run on the strength of it.
		// The whole SHA: a prefix can be matched by a commit made for it.
		switch {
		case approved == "":
			return fmt.Sprintf("this pull request comes from a fork, so its code runs only with the approval of the commit you reviewed. If you have read the change at %s, start the run with:\n\n```\n/iterion run %s %s=%s\n```", shortSHA(head), name, ApproveVar, head), nil
		case !strings.EqualFold(head, approved):
			return fmt.Sprintf("nothing started: you approved `%s`, but the pull request's head is `%s` (approve it by its full SHA). Read the commits up to it, then start the run with `/iterion run %s %s=%s`.", inert(approved), inert(head), name, ApproveVar, inert(head)), nil
		}
	}
	return h.start(ctx, t, cfg, Launch{
		InstallationID: t.InstallationID, Owner: t.Owner, Repo: t.Repo, PR: t.PR,
		Workflow: name, Path: path, Ref: head, DefaultBranch: t.DefaultBranch, Vars: vars,
		Context: prContext(t, pr), Actor: t.Sender, CommentID: t.CommentID, Key: key,
	})
}

// start launches l under the PR's concurrency rule and returns the reply:
// with another run of the PR active, queue (the default) keeps l until
// the runs before it end, supersede cancels them, reject refuses l. One
// request at a time per PR decides, so two arriving together cannot both
// find the PR idle.
func (h *Handler) start(ctx context.Context, t Trigger, cfg *repoconfig.Config, l Launch) (string, error) {
	scope := PRScope(t.Owner+"/"+t.Repo, t.PR)
	defer h.lockPR(scope)()
	id := RunID(l.Owner, l.Repo, l.Key)
	active, seen, err := h.active(ctx, t, scope)
	if err != nil {
		return "", err
	}
	if seen[id] {
		// Asked again (a redelivery): it already started.
		return fmt.Sprintf("started run `%s` of `%s` on %s.", id, l.Workflow, shortSHA(l.Ref)), nil
	}
	queued, err := h.Queue.QueuedLaunches(ctx, scope)
	if err != nil {
		return "", err
	}
	if len(active) == 0 && len(queued) > 0 {
		// A queue whose turn came while nothing was there to start it.
		if err := h.startNext(ctx, t, scope); err != nil {
			return "", err
		}
		if active, _, err = h.active(ctx, t, scope); err != nil {
			return "", err
		}
		if queued, err = h.Queue.QueuedLaunches(ctx, scope); err != nil {
			return "", err
		}
	}
	switch cfg.Concurrency {
	case repoconfig.ConcurrencyReject:
		if len(active) > 0 {
			return fmt.Sprintf("nothing started: run `%s` of `%s` is still %s on this pull request, and %s allows one at a time (`concurrency: reject`). Cancel it with `/iterion cancel`, or ask again when it ends.",
				active[0].ID, active[0].Workflow, active[0].Status, repoconfig.FileName), nil
		}
	case repoconfig.ConcurrencySupersede:
		for _, r := range active {
			if _, err := h.Actions.Cancel(ctx, r.ID, fmt.Sprintf("superseded by a newer run asked for by %s", l.Actor)); err != nil {
				return "", err
			}
		}
		for _, q := range queued {
			if err := h.dropQueued(ctx, t, scope, q, fmt.Sprintf("a newer run asked for by %s superseded it", l.Actor)); err != nil {
				return "", err
			}
		}
	default:
		if len(active) > 0 || len(queued) > 0 {
			payload, err := json.Marshal(l)
			if err != nil {
				return "", err
			}
			pos, err := h.Queue.QueueLaunch(ctx, scope, l.Key, payload)
			if err != nil {
				return "", err
			}
			ahead := "the run before it ends"
			if len(active) > 0 {
				ahead = fmt.Sprintf("run `%s` ends", active[0].ID)
			}
			return fmt.Sprintf("queued `%s` on %s (position %d): it starts when %s, as %s asks (`concurrency: queue`).", l.Workflow, shortSHA(l.Ref), pos, ahead, repoconfig.FileName), nil
		}
	}
	id, err = h.Actions.Launch(ctx, l)
	if err != nil {
		var user *LaunchError
		if errors.As(err, &user) {
			return fmt.Sprintf("could not start `%s`: %s", l.Workflow, user.Msg), nil
		}
		return "", err
	}
	msg := fmt.Sprintf("started run `%s` of `%s` on %s.", id, l.Workflow, shortSHA(l.Ref))
	if cfg.Concurrency == repoconfig.ConcurrencySupersede && len(active) > 0 {
		msg += fmt.Sprintf(" It supersedes run `%s`, cancelled.", active[0].ID)
	}
	return msg, nil
}

// lockPR serializes the decisions about one PR's runs; it returns the
// unlock.
func (h *Handler) lockPR(scope string) func() {
	h.mu.Lock()
	if h.prLocks == nil {
		h.prLocks = map[string]*prLock{}
	}
	l := h.prLocks[scope]
	if l == nil {
		l = &prLock{}
		h.prLocks[scope] = l
	}
	l.users++
	h.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		h.mu.Lock()
		// Kept only while someone holds or waits for it: the map has an
		// entry per PR being acted on, not per PR ever seen.
		if l.users--; l.users == 0 {
			delete(h.prLocks, scope)
		}
		h.mu.Unlock()
	}
}

// prLock is one PR's lock and how many hold or wait for it.
type prLock struct {
	mu    sync.Mutex
	users int
}

// active returns the PR's runs that are running or waiting for answers,
// newest first; seen holds every run id of the PR. (A launched run's
// record is stored before Launch returns, so none is missed.)
func (h *Handler) active(ctx context.Context, t Trigger, scope string) (active []*engine.Run, seen map[string]bool, err error) {
	runs, err := h.prRuns(ctx, t)
	if err != nil {
		return nil, nil, err
	}
	seen = map[string]bool{}
	for _, r := range runs {
		seen[r.ID] = true
		if r.Status == engine.StatusRunning || r.Status == engine.StatusPausedWaitingHuman {
			active = append(active, r)
		}
	}
	return active, seen, nil
}

// StartQueued starts, as a job of its own, the next run queued on the
// pull request of run, an ended run, unless another of the PR's runs is
// still active. The relay calls it for each end of a PR run and goes on
// at once: a checkout being cloned for one PR holds up no other PR's
// comments. The job waits out GitHub's "later" and tries again; a queue
// it leaves (the server stopping) is taken up by the PR's next command
// or run end. WaitJobs waits for the jobs.
func (h *Handler) StartQueued(ctx context.Context, run *engine.Run) error {
	o, ok := OriginOf(run)
	if !ok || o.PR == 0 {
		return nil // not a pull request's run: nothing queues behind it
	}
	owner, repo := o.split()
	t := Trigger{InstallationID: o.Installation, Owner: owner, Repo: repo, PR: o.PR}
	scope := PRScope(o.Repo, o.PR)
	h.jobs.Go(func() {
		for {
			unlock := h.lockPR(scope)
			err := h.startNext(ctx, t, scope)
			unlock()
			var later *RetryLater
			switch {
			case err == nil || ctx.Err() != nil:
				return
			case errors.As(err, &later):
				h.log().Warn("starting a PR's queued run is postponed", "pr", scope, "retry_in", later.After, "err", err)
				timer := time.NewTimer(later.After)
				select {
				case <-timer.C:
				case <-ctx.Done():
					timer.Stop()
					return
				}
			default:
				h.log().Error("starting a PR's queued run failed; the queue waits for the PR's next command or run end", "pr", scope, "err", err)
				return
			}
		}
	})
	return nil
}

// WaitJobs waits for the jobs StartQueued started; they end with the
// context they were given.
func (h *Handler) WaitJobs() { h.jobs.Wait() }

// startNext starts the oldest queued launch of the PR when none of its
// runs is active. A launch that cannot start is reported to whoever asked
// for it and dropped, and the next is tried; only GitHub's "later" is an
// error. The caller holds the PR's lock.
func (h *Handler) startNext(ctx context.Context, t Trigger, scope string) error {
	for {
		queued, err := h.Queue.QueuedLaunches(ctx, scope)
		if err != nil || len(queued) == 0 {
			return err
		}
		active, seen, err := h.active(ctx, t, scope)
		if err != nil || len(active) > 0 {
			return err // the end of the active run starts the next
		}
		if open, err := h.prOpen(ctx, t); err != nil {
			return err
		} else if !open {
			for _, q := range queued {
				if err := h.dropQueued(ctx, t, scope, q, "the pull request was closed before its turn came; reopen it and ask again"); err != nil {
					return err
				}
			}
			return nil
		}
		next := queued[0]
		var l Launch
		if err := json.Unmarshal(next.Payload, &l); err != nil {
			h.log().Error("a queued launch cannot be read; dropped", "pr", scope, "key", next.Key, "err", err)
			if err := h.Queue.DropLaunch(ctx, scope, next.Key); err != nil {
				return err
			}
			continue
		}
		if seen[RunID(l.Owner, l.Repo, l.Key)] {
			// Started before a crash kept it queued; it has run since.
			if err := h.Queue.DropLaunch(ctx, scope, next.Key); err != nil {
				return err
			}
			continue
		}
		id, err := h.Actions.Launch(ctx, l)
		var later *RetryLater
		if errors.As(err, &later) {
			return err
		}
		if err != nil {
			var user *LaunchError
			reason := "something went wrong; ask again with `/iterion run`"
			if errors.As(err, &user) {
				reason = user.Msg
			} else {
				h.log().Error("starting a queued run failed", "pr", scope, "key", next.Key, "err", err)
			}
			if err := h.dropQueued(ctx, t, scope, next, "it could not start: "+reason); err != nil {
				return err
			}
			continue
		}
		// Dropped first: a post GitHub refuses must not leave the started
		// launch at the head of the queue.
		if err := h.Queue.DropLaunch(ctx, scope, next.Key); err != nil {
			return err
		}
		text := fmt.Sprintf("@%s started queued run `%s` of `%s` on %s.", l.Actor, id, l.Workflow, shortSHA(l.Ref))
		_, err = h.Replies.Post(ctx, t.InstallationID, t.Owner, t.Repo, t.PR, "queued-"+l.Key, text)
		return err
	}
}

// prOpen reports whether t's pull request is still open.
func (h *Handler) prOpen(ctx context.Context, t Trigger) (bool, error) {
	client, err := h.Client(t.InstallationID)
	if err != nil {
		return false, err
	}
	pr, resp, err := client.PullRequests.Get(ctx, t.Owner, t.Repo, t.PR)
	if err != nil {
		return false, classify(fmt.Sprintf("reading %s/%s#%d", t.Owner, t.Repo, t.PR), resp, err)
	}
	return pr.GetState() == "open", nil
}

// dropQueued removes a queued launch and tells whoever asked for it why.
func (h *Handler) dropQueued(ctx context.Context, t Trigger, scope string, q store.QueuedLaunch, why string) error {
	var l Launch
	if err := json.Unmarshal(q.Payload, &l); err == nil && l.Actor != "" {
		text := fmt.Sprintf("@%s the queued run of `%s` was dropped: %s", l.Actor, l.Workflow, Disarm(why))
		if _, err := h.Replies.Post(ctx, t.InstallationID, t.Owner, t.Repo, t.PR, "queued-"+q.Key, text); err != nil {
			return err
		}
	}
	return h.Queue.DropLaunch(ctx, scope, q.Key)
}

// prContext is the PR's context vars; comment_body is the triggering
// comment's, when a comment started the run.
func prContext(t Trigger, pr *gh.PullRequest) map[string]string {
	ctx := map[string]string{
		"repo":      t.Owner + "/" + t.Repo,
		"pr_number": strconv.Itoa(t.PR),
		"head_sha":  pr.GetHead().GetSHA(),
		"base_ref":  pr.GetBase().GetRef(),
		"pr_title":  pr.GetTitle(),
		"pr_body":   pr.GetBody(),
	}
	if t.Kind == TriggerComment {
		ctx["comment_body"] = t.CommentBody
	}
	return ctx
}

// LaunchError is a launch failure the commenter can fix (a workflow that
// does not compile, a missing file); Msg says what to fix.
type LaunchError struct{ Msg string }

func (e *LaunchError) Error() string { return e.Msg }

func shortSHA(s string) string {
	if len(s) > 7 {
		return s[:7]
	}
	return s
}

// ApproveVar is the argument of `/iterion run` that names the commit a
// maintainer approves on a pull request from a fork.
const ApproveVar = "approve"

// isFork reports whether pr's head lives in another repository; a head
// whose repository is gone (a deleted fork) counts as one.
func isFork(pr *gh.PullRequest) bool {
	head := pr.GetHead().GetRepo().GetFullName()
	return head == "" || !strings.EqualFold(head, pr.GetBase().GetRepo().GetFullName())
}
