package slack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"

	slackgo "github.com/slack-go/slack"

	"github.com/iterion-bot/iterion/bot/delivery"
	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/engine"
)

// handlerStore is what handling deliveries reads of the store.
type handlerStore interface {
	intakeStore
	Interactions(ctx context.Context, runID string) ([]*engine.Interaction, error)
	Runs(ctx context.Context, f engine.RunFilter) ([]*engine.Run, error)
	RunPosts(ctx context.Context, runID string) (map[string]string, error)
}

// Answerer records answers: the engine's door.
type Answerer interface {
	Answer(ctx context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error)
}

// Launch is a run asked for from Slack (/iterion run): the workflow's
// name under slack.workflows and its file, the vars given, and the run's
// id and trigger. The server compiles the file and launches it through the
// engine's door.
type Launch struct {
	RunID    string
	Workflow string
	File     string
	Vars     map[string]string
	Trigger  engine.Trigger
	// Channels are the channels the run is shown on: Slack.
	Channels []string
}

// LaunchError is a launch refused for a reason the person who asked can
// fix (the workflow does not compile, a var is missing): Msg says it.
type LaunchError struct{ Msg string }

func (e *LaunchError) Error() string { return e.Msg }

// Handler acts on stored Slack deliveries: a reply in a run's thread, an
// option clicked or picked, an answer modal submitted, and the slash
// command. Every answer is checked again here, whatever the message
// showed: the question still pending, and the Slack user one who may
// answer it. What the person must hear (a refusal, a command's outcome)
// is said to them alone (an ephemeral message); an accepted answer is
// shown by the relay, in the thread, for everyone.
type Handler struct {
	store     handlerStore
	client    *Client
	people    *People
	answers   func() Answerer
	launch    func(ctx context.Context, l Launch) (*engine.Run, error)
	workflows map[string]string
	team      string
	confirm   func(ctx context.Context, team, user, token string) (string, error)
	log       *slog.Logger
}

// HandlerOptions configure a Handler; Store, Client, People and Answers
// are required.
type HandlerOptions struct {
	Store  handlerStore
	Client *Client
	People *People
	// Answers returns the engine's door for answers (bound once the
	// engine exists, before the first delivery).
	Answers func() Answerer
	// Launch starts a run asked for with /iterion run; nil refuses them.
	Launch func(ctx context.Context, l Launch) (*engine.Run, error)
	// Workflows are the workflows /iterion run starts, by name: files of
	// the server's directory.
	Workflows map[string]string
	// Team is the workspace's id.
	Team string
	// Confirm completes a link from a GitHub sign-in (/iterion link
	// <confirmation>); nil without sign-in.
	Confirm func(ctx context.Context, team, user, token string) (string, error)
	Log     *slog.Logger
}

// NewHandler returns the handler o describes.
func NewHandler(o HandlerOptions) *Handler {
	return &Handler{store: o.Store, client: o.Client, people: o.People, answers: o.Answers, launch: o.Launch,
		workflows: o.Workflows, team: o.Team, confirm: o.Confirm, log: cmpLog(o.Log)}
}

func cmpLog(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// asker is who asked for something, and where to answer them.
type asker struct {
	user, channel, thread string
}

// Handle acts on one stored delivery (the delivery worker's handler).
func (h *Handler) Handle(ctx context.Context, d delivery.Delivery) error {
	var (
		who  asker
		text string
		err  error
	)
	switch d.Event {
	case EventMessage:
		who, text, err = h.reply(ctx, d.Payload)
	case EventClick:
		who, text, err = h.click(ctx, d.Payload)
	case EventSubmit:
		who, text, err = h.submit(ctx, d.Payload)
	case EventCommand:
		var blocks []slackgo.Block
		who, text, blocks, err = h.command(ctx, d.Payload)
		if err == nil && text != "" {
			return h.client.Ephemeral(ctx, who.channel, who.user, "", text, blocks...)
		}
	default:
		h.log.Debug("a Slack delivery of no kind the bot acts on", "delivery", d.ID, "event", d.Event)
		return nil
	}
	if err != nil || text == "" {
		return err
	}
	return h.client.Ephemeral(ctx, who.channel, who.user, who.thread, text)
}

// GiveUp tells the person whose request failed for good that it did,
// instead of leaving them waiting; the error's details stay in the log.
func (h *Handler) GiveUp(ctx context.Context, d delivery.Delivery, _ error) {
	var who asker
	switch d.Event {
	case EventMessage:
		var o outer
		if json.Unmarshal(d.Payload, &o) == nil {
			who = asker{user: o.Event.User, channel: o.Event.Channel, thread: o.Event.ThreadTS}
		}
	case EventClick, EventSubmit:
		var cb slackgo.InteractionCallback
		if json.Unmarshal(d.Payload, &cb) == nil {
			who = asker{user: cb.User.ID, channel: cb.Container.ChannelID, thread: cb.Container.ThreadTs}
			var meta modalMeta
			if json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta) == nil && meta.Channel != "" {
				who.channel = meta.Channel
			}
		}
	case EventCommand:
		var c slackgo.SlashCommand
		if json.Unmarshal(d.Payload, &c) == nil {
			who = asker{user: c.UserID, channel: c.ChannelID}
		}
	}
	if who.user == "" || who.channel == "" {
		return
	}
	msg := fmt.Sprintf("iterion could not act on this (internal error, delivery `%s`); the server's log has the details. Try again in a while.", d.ID)
	if err := h.client.Ephemeral(ctx, who.channel, who.user, who.thread, msg); err != nil {
		h.log.Warn("telling a Slack user that their request failed failed too", "delivery", d.ID, "err", err)
	}
}

// leadingQ reads a reply that names its question first: "Q3 yes",
// "q3: yes", "Q3 - yes".
var leadingQ = regexp.MustCompile(`^\s*[Qq](\d{1,9})\b[\s:.,)\-–—]*`)

// reply answers a person's reply in a run's thread: the one question
// pending there, or the one it names (Q3) when several are.
func (h *Handler) reply(ctx context.Context, payload []byte) (asker, string, error) {
	var o outer
	if err := json.Unmarshal(payload, &o); err != nil {
		return asker{}, "", fmt.Errorf("decoding a stored message event: %w", err)
	}
	e := o.Event
	who := asker{user: e.User, channel: e.Channel, thread: e.ThreadTS}
	runID, _, err := h.store.PostRef(ctx, "slack", e.Channel+"/"+e.ThreadTS)
	if errors.Is(err, engine.ErrNotFound) {
		return who, "", nil
	}
	if err != nil {
		return who, "", err
	}
	run, err := h.store.Run(ctx, runID)
	if errors.Is(err, engine.ErrNotFound) {
		return who, "", nil // pruned since
	}
	if err != nil {
		return who, "", err
	}
	ixs, err := h.store.Interactions(ctx, runID)
	if err != nil {
		return who, "", err
	}
	nums, err := h.store.ShortIDs(ctx, scopeOf(run), run.ID)
	if err != nil {
		return who, "", err
	}
	text := fromSlack(e.Text)
	var shown, pending []*engine.Interaction
	for _, ix := range ixs {
		if ix.Kind != engine.KindAwait && ix.Posts["slack"] != "" {
			shown = append(shown, ix)
			if ix.Pending() {
				pending = append(pending, ix)
			}
		}
	}
	qids := func(list []*engine.Interaction) string {
		var ids []string
		for _, ix := range list {
			ids = append(ids, "Q"+strconv.Itoa(nums[ix.ID]))
		}
		return strings.Join(ids, ", ")
	}
	var target *engine.Interaction
	if m := leadingQ.FindStringSubmatch(text); m != nil {
		n, _ := strconv.Atoi(m[1])
		i := slices.IndexFunc(shown, func(ix *engine.Interaction) bool { return nums[ix.ID] == n })
		if i < 0 {
			if len(pending) == 0 {
				return who, fmt.Sprintf("there is no question Q%d in this thread, and none is waiting.", n), nil
			}
			return who, fmt.Sprintf("there is no question Q%d in this thread; the ones waiting are %s.", n, qids(pending)), nil
		}
		target, text = shown[i], strings.TrimSpace(text[len(m[0]):])
	} else {
		switch len(pending) {
		case 0:
			return who, "", nil // talk in the thread, with nothing to answer
		case 1:
			target = pending[0]
		default:
			return who, fmt.Sprintf("several questions wait in this thread (%s), so I cannot tell which one you answer: start your reply with its id, like `%s your answer`, or use its buttons.", qids(pending), qids(pending[:1])), nil
		}
	}
	if text == "" {
		return who, fmt.Sprintf("your reply names Q%d but holds no answer: write it after the id.", nums[target.ID]), nil
	}
	msg, err := h.answer(ctx, who, target, "Q"+strconv.Itoa(nums[target.ID]), text, nil)
	return who, msg, err
}

// click answers the question of the message whose option was clicked or
// picked.
func (h *Handler) click(ctx context.Context, payload []byte) (asker, string, error) {
	var cb slackgo.InteractionCallback
	if err := json.Unmarshal(payload, &cb); err != nil || len(cb.ActionCallback.BlockActions) == 0 {
		return asker{}, "", fmt.Errorf("decoding a stored click: %v", err)
	}
	who := asker{user: cb.User.ID, channel: cb.Container.ChannelID, thread: cb.Container.ThreadTs}
	ix, q, err := h.questionOf(ctx, cb.Container.ChannelID, cb.Container.MessageTs)
	if err != nil || ix == nil {
		return who, "", err
	}
	a := cb.ActionCallback.BlockActions[0]
	value := a.Value
	if a.ActionID == ActionSelect {
		value = a.SelectedOption.Value
	}
	labels := options(ix)
	i, err := strconv.Atoi(value)
	if err != nil || i < 0 || i >= len(labels) {
		return who, fmt.Sprintf("that option is not one of %s's; the message may be out of date.", q), nil
	}
	msg, err := h.answer(ctx, who, ix, q, labels[i], nil)
	return who, msg, err
}

// submit answers the question of a submitted answer modal (checked
// against its schema already, when it was taken in).
func (h *Handler) submit(ctx context.Context, payload []byte) (asker, string, error) {
	var cb slackgo.InteractionCallback
	if err := json.Unmarshal(payload, &cb); err != nil {
		return asker{}, "", fmt.Errorf("decoding a stored modal submission: %w", err)
	}
	var meta modalMeta
	if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta); err != nil {
		return asker{}, "", fmt.Errorf("decoding a stored modal's metadata: %w", err)
	}
	who := asker{user: cb.User.ID, channel: meta.Channel, thread: meta.Thread}
	ix, q, err := h.questionOf(ctx, meta.Channel, meta.TS)
	if err != nil || ix == nil {
		return who, "", err
	}
	text, fields := submitted(ix, cb.View.State)
	msg, err := h.answer(ctx, who, ix, q, text, fields)
	return who, msg, err
}

// questionOf returns the question a bot's message carries and its short
// id; nil when it carries none (a pruned run).
func (h *Handler) questionOf(ctx context.Context, channel, ts string) (*engine.Interaction, string, error) {
	t := taker{store: h.store}
	return t.question(ctx, channel, ts)
}

// answer records who's answer (text, or a form's fields) to ix, shown as
// q, through the engine's door, once the checks hold: the question waits,
// its run goes on, and the Slack user is a GitHub account that may
// answer. It returns what to tell who: "" when the answer is taken (the
// relay says so in the thread).
func (h *Handler) answer(ctx context.Context, who asker, ix *engine.Interaction, q, text string, fields map[string]any) (string, error) {
	if ix.Kind == engine.KindAwait {
		return "", nil
	}
	if labels := options(ix); text != "" && len(labels) > 0 {
		text = pickOption(text, labels)
	}
	login, err := h.people.Login(ctx, h.team, who.user)
	if err != nil {
		return "", err
	}
	if !ix.Pending() {
		if ix.Via == "slack" && login != "" && ix.AnsweredBy == login && (ix.Answer() == text || fields != nil) {
			return "", nil // the same answer again: a double click
		}
		return alreadyAnswered(q, ix.AnsweredBy, ix.Via), nil
	}
	run, err := h.store.Run(ctx, ix.RunID)
	if err != nil {
		return "", err
	}
	if run.Status.Terminal() {
		return fmt.Sprintf("run `%s` has ended; %s can no longer be answered.", run.ID, q), nil
	}
	if login == "" {
		return h.people.unlinked(h.team, who.user), nil
	}
	// A question escalated to login may be answered by them, whatever
	// the run's own rules say (escalate: to:).
	if !ix.EscalatedTo(login) {
		if refusal, err := h.people.mayAnswer(ctx, run, login); err != nil || refusal != "" {
			return refusal, err
		}
	}
	req := engine.AnswerRequest{RunID: ix.RunID, InteractionID: ix.ID, Text: text, Fields: fields, By: login, Via: "slack"}
	if isForm(ix) && fields == nil {
		// A reply in words to a form: "field: value" lines.
		var names []string
		for _, f := range ix.Fields {
			names = append(names, f.Name)
		}
		values, rest := ghbot.ParseForm(text, names)
		if len(values) > 0 {
			req.Text, req.Fields = "", map[string]any{}
			for k, v := range values {
				req.Fields[k] = v
			}
		} else {
			req.Text = rest
		}
	}
	_, err = h.answers().Answer(ctx, req)
	var already *engine.AlreadyAnsweredError
	var bad *engine.InvalidAnswerError
	var notWaiting *engine.NotWaitingError
	var offChannel *engine.ChannelRefusedError
	var notAnswerer *engine.AnswererRefusedError
	switch {
	case errors.As(err, &offChannel):
		return fmt.Sprintf("%s cannot be answered from Slack: its workflow lets it be answered only through %s (`answer_on`). Your answer was not recorded.", q, escape(delivery.ViaList(offChannel.AnswerOn))), nil
	case errors.As(err, &notAnswerer):
		names := make([]string, len(notAnswerer.Answerers))
		for i, a := range notAnswerer.Answerers {
			names[i] = "@" + escape(a)
		}
		return fmt.Sprintf("only GitHub %s may answer %s (its workflow's `answerers`); you are GitHub @%s, so your answer was not recorded.", strings.Join(names, ", "), q, escape(login)), nil
	case errors.As(err, &already):
		if already.Via == "slack" && already.AnsweredBy == login {
			return "", nil // answered a moment ago by the same click, twice
		}
		return alreadyAnswered(q, already.AnsweredBy, already.Via), nil
	case errors.As(err, &bad):
		return fmt.Sprintf("your answer to %s was not taken: %s.", q, escape(oneLine(bad.Error(), 500))), nil
	case errors.As(err, &notWaiting):
		return fmt.Sprintf("run `%s` is %s, not waiting for %s; your answer was not used.", ix.RunID, notWaiting.Status, q), nil
	case errors.Is(err, engine.ErrRunEnded):
		return fmt.Sprintf("run `%s` has ended; %s can no longer be answered.", ix.RunID, q), nil
	case errors.Is(err, engine.ErrWorkflowChanged):
		return fmt.Sprintf("run `%s` cannot continue: its workflow changed since it started.", ix.RunID), nil
	case errors.Is(err, engine.ErrEmptyAnswer), errors.Is(err, engine.ErrNotAsync), errors.Is(err, engine.ErrTextAndFields):
		return fmt.Sprintf("your answer to %s was not taken: %s.", q, escape(err.Error())), nil
	case err != nil:
		return "", err
	}
	h.log.Info("question answered from Slack", "run", ix.RunID, "question", ix.ID, "by", login)
	return "", nil
}

// alreadyAnswered is the word to someone who answers a question answered
// before, anywhere.
func alreadyAnswered(q, by, via string) string {
	if by == "" {
		by = "someone"
	}
	return fmt.Sprintf("%s was already answered by %s via %s; your answer was not used.", q, code(by), viaWords(via))
}

// slackMarkup is what Slack writes into a message's text for what people
// typed: <@U1> mentions, <#C1|name> channels, <url|label> links.
var slackMarkup = regexp.MustCompile(`<([^<>|]*)(?:\|([^<>]*))?>`)

// fromSlack turns a message's text as Slack sends it into the words the
// person typed: links and mentions unwrapped, entities unescaped.
func fromSlack(text string) string {
	text = slackMarkup.ReplaceAllStringFunc(text, func(m string) string {
		sub := slackMarkup.FindStringSubmatch(m)
		if sub[2] != "" {
			return sub[2]
		}
		return sub[1]
	})
	return strings.TrimSpace(html.UnescapeString(text))
}

// slashHelp is the reply to /iterion help.
const slashHelp = "iterion's commands:\n" +
	"• `/iterion run <workflow> [key=value …]` starts a workflow of the server's configuration here; its card and questions come in this channel\n" +
	"• `/iterion status` lists the runs and questions waiting in this channel\n" +
	"• `/iterion link` links your Slack account to your GitHub account, which says whether you may answer\n" +
	"• `/iterion help` shows this text\n" +
	"Answer a question with its buttons, or by replying in its run's thread."

// command answers a slash command.
func (h *Handler) command(ctx context.Context, payload []byte) (asker, string, []slackgo.Block, error) {
	var c slackgo.SlashCommand
	if err := json.Unmarshal(payload, &c); err != nil {
		return asker{}, "", nil, fmt.Errorf("decoding a stored slash command: %w", err)
	}
	who := asker{user: c.UserID, channel: c.ChannelID}
	verb, rest, _ := strings.Cut(strings.TrimSpace(c.Text), " ")
	switch strings.ToLower(verb) {
	case "", "help":
		return who, slashHelp, nil, nil
	case "link":
		if rest = strings.TrimSpace(rest); rest != "" && h.confirm != nil {
			text, err := h.confirm(ctx, h.team, who.user, rest)
			return who, text, nil, err
		}
		text, err := h.link(ctx, who)
		return who, text, nil, err
	case "status":
		text, err := h.status(ctx, c.ChannelID)
		return who, text, nil, err
	case "run":
		text, err := h.run(ctx, c, rest)
		return who, text, nil, err
	}
	return who, fmt.Sprintf("`%s` is not one of iterion's commands.\n%s", escape(oneLine(verb, 40)), slashHelp), nil, nil
}

// link answers /iterion link: the way to link one's GitHub account, and
// the account linked already.
func (h *Handler) link(ctx context.Context, who asker) (string, error) {
	login, err := h.people.Login(ctx, h.team, who.user)
	if err != nil {
		return "", err
	}
	switch {
	case h.people.linkURL == nil && login != "":
		return fmt.Sprintf("you are GitHub @%s for iterion, as the server's configuration maps you (`slack.users`).", escape(login)), nil
	case h.people.linkURL == nil:
		return h.people.unlinked(h.team, who.user), nil
	case login != "":
		return fmt.Sprintf("you are linked to GitHub @%s. To link another account, <%s|sign in to GitHub> with it (the link is good for 10 minutes).", escape(login), h.people.linkURL(h.team, who.user)), nil
	}
	return fmt.Sprintf("<%s|Link your GitHub account>: you sign in to GitHub once, and iterion then knows who you are there (the link is good for 10 minutes).", h.people.linkURL(h.team, who.user)), nil
}

// run answers /iterion run: it starts a workflow of the server's
// configuration in this channel, for someone the server allows.
func (h *Handler) run(ctx context.Context, c slackgo.SlashCommand, args string) (string, error) {
	cmds, problems := ghbot.ParseComment("/iterion run " + args)
	if len(problems) > 0 {
		return fmt.Sprintf("%s. Write `/iterion run <workflow> [key=value …]`.", escape(problems[0].Message)), nil
	}
	if len(cmds) != 1 {
		return "write `/iterion run <workflow> [key=value …]`.", nil
	}
	cmd := cmds[0]
	login, err := h.people.Login(ctx, h.team, c.UserID)
	if err != nil {
		return "", err
	}
	if login == "" {
		return h.people.unlinked(h.team, c.UserID), nil
	}
	if refusal := h.people.mayRun(login); refusal != "" {
		return refusal, nil
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range h.workflows {
			if !yield(n) {
				return
			}
		}
	})
	file, ok := h.workflows[cmd.Workflow]
	if !ok || h.launch == nil {
		if len(names) == 0 {
			return "this server starts no workflows from Slack: its configuration lists none under `slack.workflows`.", nil
		}
		if cmd.Workflow == "" {
			return fmt.Sprintf("name a workflow: `/iterion run <workflow>`; the server's are %s.", codeList(names)), nil
		}
		return fmt.Sprintf("no workflow %s; the server's are %s.", code(cmd.Workflow), codeList(names)), nil
	}
	sum := sha256.Sum256([]byte(h.team + "\x00" + c.TriggerID))
	id := "sl-" + hex.EncodeToString(sum[:10])
	o := Origin{Team: h.team, Channel: c.ChannelID, User: c.UserID}
	run, err := h.launch(ctx, Launch{RunID: id, Workflow: cmd.Workflow, File: file, Vars: cmd.Vars, Trigger: o.Trigger(login), Channels: []string{"slack"}})
	var refused *LaunchError
	switch {
	case errors.As(err, &refused):
		return fmt.Sprintf("workflow %s did not start: %s", code(cmd.Workflow), escape(oneLine(refused.Msg, 2000))), nil
	case errors.Is(err, engine.ErrRunExists):
		// The same command handled again after a crash.
	case err != nil:
		return "", err
	default:
		id = run.ID
	}
	h.log.Info("run started from Slack", "run", id, "workflow", cmd.Workflow, "by", login, "channel", c.ChannelID)
	return fmt.Sprintf("started run %s of %s: its card comes in this channel, and its questions in the card's thread.", code(id), code(cmd.Workflow)), nil
}

func codeList(names []string) string {
	var out []string
	for _, n := range names {
		out = append(out, code(n))
	}
	return strings.Join(out, ", ")
}

// status answers /iterion status: the runs shown in this channel that
// have not ended, and their questions waiting.
func (h *Handler) status(ctx context.Context, channel string) (string, error) {
	runs, err := h.store.Runs(ctx, engine.RunFilter{Limit: 500})
	if err != nil {
		return "", err
	}
	var lines []string
	for _, run := range runs {
		if run.Status.Terminal() || !slices.Contains(run.Channels, "slack") {
			continue
		}
		posts, err := h.store.RunPosts(ctx, run.ID)
		if err != nil {
			return "", err
		}
		ch, _, _ := strings.Cut(posts[postCard], "/")
		if ch != channel {
			continue
		}
		title, icon := statusLook(run.Status)
		lines = append(lines, fmt.Sprintf("%s run %s of %s: %s", icon, code(run.ID), code(run.Workflow), title))
		ixs, err := h.store.Interactions(ctx, run.ID)
		if err != nil {
			return "", err
		}
		nums, err := h.store.ShortIDs(ctx, scopeOf(run), run.ID)
		if err != nil {
			return "", err
		}
		for _, ix := range ixs {
			if ix.Pending() && ix.Kind != engine.KindAwait {
				lines = append(lines, fmt.Sprintf("    • Q%d: %s", nums[ix.ID], escape(oneLine(questionText(ix), 120))))
			}
		}
		if len(lines) >= 40 {
			lines = append(lines, "…and more.")
			break
		}
	}
	if len(lines) == 0 {
		return "no run is going on in this channel.", nil
	}
	return "Runs in this channel:\n" + strings.Join(lines, "\n"), nil
}
