package slack

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/iterion-bot/iterion/bot/delivery"
	ghbot "github.com/iterion-bot/iterion/bot/github"
	"github.com/iterion-bot/iterion/engine"
)

// RelayStore is what the relay needs of the store.
type RelayStore interface {
	delivery.Outbox
	Run(ctx context.Context, id string) (*engine.Run, error)
	Interaction(ctx context.Context, runID, id string) (*engine.Interaction, error)
	Interactions(ctx context.Context, runID string) ([]*engine.Interaction, error)
	Events(ctx context.Context, runID string, after int64, limit int) ([]engine.Event, error)
	Checkpoint(ctx context.Context, runID string) ([]byte, error)
	RecordPost(ctx context.Context, runID, ixID, channel, extID string) error
	RecordThread(ctx context.Context, runID, channel, extID string) error
	ShortID(ctx context.Context, scope, runID, ixID string) (int, error)
	ShortIDs(ctx context.Context, scope, runID string) (map[string]int, error)
	SetRunPost(ctx context.Context, runID, name, value string) error
	RunPosts(ctx context.Context, runID string) (map[string]string, error)
}

// Names of a run's own Slack posts in the store (RunPosts). An intent is
// recorded before a post: after a crash between the post and its record,
// the post is looked for by its metadata instead of posted again.
const (
	postCard           = "slack-card" // channel/ts of the run's card
	postCardIntent     = "slack-card-intent"
	postQuestionIntent = "slack-question-intent/" // + interaction id
	postAnswered       = "slack-answered/"        // + interaction id: the reply saying who answered
	postAnsweredIntent = "slack-answered-intent/"
)

// FailPosted is the failpoint of a Slack message posted and not yet
// recorded, for crash tests.
const FailPosted = "slack-posted"

// Relay performs Slack's side of outbox rows. Each run shown in Slack
// gets one root message, its card, updated in place with the run's
// state; each question is a reply in the card's thread, with its buttons,
// updated when it is answered (anywhere) or its run ends, and an answer
// posts one reply in the thread saying who answered and where, since an
// edit notifies nobody. Everything is rendered from the store, and every
// message carries metadata naming what it is, so a row performed again
// after a crash finds its messages instead of posting them twice.
type Relay struct {
	store       RelayStore
	client      *Client
	people      *People
	log         *slog.Logger
	botID       string
	workspace   string // the workspace's address, for links
	channel     string // the server's channel, for runs no repository names one for
	gitURL      string
	poll        time.Duration
	statusEvery time.Duration
	failpoint   func(name string)
	wake        chan struct{}
	now         func() time.Time

	mu       sync.Mutex
	written  map[string]string // message key → what this process last wrote there
	touched  map[string]bool
	synced   map[string]time.Time
	progress map[string]*progress
}

// RelayOptions configure a Relay; Store, Client and People are required.
type RelayOptions struct {
	Store  RelayStore
	Client *Client
	People *People
	// BotID is the bot's id (auth.test): only its messages are the bot's.
	BotID string
	// Workspace is the workspace's address (auth.test's url), for links
	// to messages; "" for none.
	Workspace string
	// Channel is where the runs go that no repository names a channel
	// for (started from the API, a schedule); "" leaves them out of Slack.
	Channel string
	// GitURL is GitHub's web base, for links to pull requests; "" means
	// github.com.
	GitURL string
	Log    *slog.Logger
	// Poll is how often due rows are looked for; 0 means a second.
	Poll time.Duration
	// StatusEvery bounds the updates of a card for progress (steps done):
	// at most one per StatusEvery; 0 means 10 seconds. State changes (a
	// question, an answer, the end) are shown at once.
	StatusEvery time.Duration
	// Failpoint, when set, is called at FailPosted and at
	// delivery.FailOutboxPerformed, for crash tests.
	Failpoint func(name string)
	// Clock is the relay's time; nil means time.Now.
	Clock func() time.Time
}

// NewRelay returns the relay o describes.
func NewRelay(o RelayOptions) *Relay {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return &Relay{
		store: o.Store, client: o.Client, people: o.People, log: cmpLog(o.Log), botID: o.BotID, workspace: o.Workspace, channel: o.Channel,
		gitURL: cmp.Or(o.GitURL, ghbot.DefaultGitURL), poll: cmp.Or(o.Poll, time.Second), statusEvery: cmp.Or(o.StatusEvery, 10*time.Second),
		failpoint: o.Failpoint, wake: make(chan struct{}, 1), now: o.Clock,
		written: map[string]string{}, touched: map[string]bool{}, synced: map[string]time.Time{}, progress: map[string]*progress{},
	}
}

// FailOutboxPerformed is the failpoint of a row performed and not yet
// acknowledged.
const FailOutboxPerformed = "slack-outbox-performed"

// Wake asks for a look at the outbox now; it never blocks.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Touch says run runID made progress; its card shows it at the next
// update StatusEvery allows. It never blocks.
func (r *Relay) Touch(runID string) {
	r.mu.Lock()
	r.touched[runID] = true
	r.mu.Unlock()
}

// Run performs due rows until ctx ends.
func (r *Relay) Run(ctx context.Context) {
	tick := time.NewTicker(r.poll)
	defer tick.Stop()
	for {
		r.Drain(ctx)
		r.syncTouched(ctx)
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-tick.C:
		}
	}
}

// Drain performs every Slack row due now, in order (delivery.Relay).
func (r *Relay) Drain(ctx context.Context) {
	core := delivery.Relay{Channel: "slack", Store: r.store, Perform: r.perform, Log: r.log, Now: r.now}
	if r.failpoint != nil {
		core.Failpoint = func() { r.failpoint(FailOutboxPerformed) }
	}
	core.Drain(ctx)
}

func (r *Relay) syncTouched(ctx context.Context) {
	r.mu.Lock()
	now := r.now()
	var due []string
	for id := range r.touched {
		if now.Sub(r.synced[id]) >= r.statusEvery {
			due = append(due, id)
			delete(r.touched, id)
		}
	}
	r.mu.Unlock()
	slices.Sort(due)
	for _, id := range due {
		run, err := r.store.Run(ctx, id)
		if err != nil || !slices.Contains(run.Channels, "slack") {
			continue
		}
		posts, err := r.store.RunPosts(ctx, id)
		if err != nil || posts[postCard] == "" {
			continue // the card comes with the run's first row
		}
		if err := r.sync(ctx, run, splitRef(posts[postCard])); err != nil && ctx.Err() == nil {
			r.log.Warn("updating a run's Slack card failed", "run", id, "err", err)
		}
	}
}

// place returns the channel run is shown in: where it was started in
// Slack; else the channel its trigger names (a repository's .iterion.yml
// or a schedule's report.slack, under "slack" in the details); else, for
// a run of no repository, the server's; "" for none.
func (r *Relay) place(run *engine.Run) string {
	if o, ok := OriginOf(run); ok {
		return o.Channel
	}
	if o, ok := ghbot.OriginOf(run); ok {
		return o.Slack
	}
	var named struct {
		Slack string `json:"slack"`
	}
	if len(run.Trigger.Details) > 0 && json.Unmarshal(run.Trigger.Details, &named) == nil && named.Slack != "" {
		return named.Slack
	}
	return r.channel
}

// ref is a message's place: its channel's id and its ts.
type ref struct{ channel, ts string }

func (m ref) String() string { return m.channel + "/" + m.ts }

func splitRef(s string) ref {
	ch, ts, _ := strings.Cut(s, "/")
	return ref{ch, ts}
}

// perform does a row's side of Slack for its run: the card (posted with
// the run's first row), a question's reply for a question or a blocking
// pause, the reply saying who answered for an answer, then an update of
// whatever changed. Rows of runs not shown in Slack are done.
func (r *Relay) perform(ctx context.Context, row engine.OutboxRow) error {
	run, err := r.store.Run(ctx, row.RunID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	channel := r.place(run)
	if channel == "" {
		return nil
	}
	card, err := r.ensureCard(ctx, run, channel)
	if err != nil {
		return err
	}
	if row.InteractionID != "" {
		ix, err := r.store.Interaction(ctx, run.ID, row.InteractionID)
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			return err
		}
		if ix != nil && ix.Kind != engine.KindAwait {
			if ix.Posts["slack"] == "" && (row.Kind == engine.OutboxQuestionPosted || row.Kind == engine.OutboxRunPaused || !ix.Pending()) {
				if err := r.postQuestion(ctx, run, ix, card); err != nil {
					return err
				}
			}
			if row.Kind == engine.OutboxQuestionAnswered && !ix.Pending() {
				if err := r.postAnswered(ctx, run, ix, card); err != nil {
					return err
				}
			}
		}
	}
	return r.sync(ctx, run, card)
}

// once posts a message at most once across crashes: recorded is its
// record ("" when none). Its intent, recorded before the post, says it
// may have been posted, and then find looks for it (by its metadata)
// before post posts it; record records what was found or posted.
func (r *Relay) once(ctx context.Context, runID, intent, recorded string, find, post func() (string, error), record func(string) error) (string, error) {
	if recorded != "" {
		return recorded, nil
	}
	posts, err := r.store.RunPosts(ctx, runID)
	if err != nil {
		return "", err
	}
	if posts[intent] != "" {
		found, err := find()
		if err != nil {
			return "", err
		}
		if found != "" {
			r.log.Info("a Slack message posted before a crash was found again", "run", runID, "post", intent)
			return found, record(found)
		}
	}
	if err := r.store.SetRunPost(ctx, runID, intent, "1"); err != nil {
		return "", err
	}
	v, err := post()
	if err != nil {
		return "", err
	}
	if r.failpoint != nil {
		r.failpoint(FailPosted)
	}
	return v, record(v)
}

// ensureCard posts the run's card in channel unless it is posted, and
// returns it; its thread routes replies to the run.
func (r *Relay) ensureCard(ctx context.Context, run *engine.Run, channel string) (ref, error) {
	meta := &slackgo.SlackMetadata{EventType: metaRun, EventPayload: map[string]any{"run_id": run.ID}}
	var text string
	var blocks []slackgo.Block
	posts, err := r.store.RunPosts(ctx, run.ID)
	if err != nil {
		return ref{}, err
	}
	got, err := r.once(ctx, run.ID, postCardIntent, posts[postCard],
		func() (string, error) {
			id, err := r.client.ChannelID(ctx, channel)
			if err != nil || id == "" {
				return "", err
			}
			ts, err := r.client.Find(ctx, id, "", r.botID, metaRun, "run_id", run.ID)
			if err != nil || ts == "" {
				return "", err
			}
			return id + "/" + ts, nil
		},
		func() (string, error) {
			v, err := r.read(ctx, run.ID)
			if err != nil {
				return "", err
			}
			text, blocks = renderCard(v)
			ch, ts, err := r.client.Post(ctx, channel, message{text: text, blocks: blocks, meta: meta})
			if err != nil {
				return "", err
			}
			return ch + "/" + ts, nil
		},
		func(v string) error { return r.store.SetRunPost(ctx, run.ID, postCard, v) })
	if err != nil {
		return ref{}, err
	}
	card := splitRef(got)
	if blocks != nil {
		r.remember("card/"+run.ID, renderKey(text, blocks))
	}
	// Recorded each time (it is idempotent), so a crash between the post's
	// record and this one costs nothing.
	if err := r.store.RecordThread(ctx, run.ID, "slack", card.String()); err != nil {
		return ref{}, err
	}
	return card, nil
}

// postQuestion numbers a question in its scope and posts its reply in
// the card's thread, unless posted, and records it on the question.
func (r *Relay) postQuestion(ctx context.Context, run *engine.Run, ix *engine.Interaction, card ref) error {
	if _, err := r.store.ShortID(ctx, scopeOf(run), run.ID, ix.ID); err != nil {
		return err
	}
	meta := &slackgo.SlackMetadata{EventType: metaQuestion, EventPayload: map[string]any{"run_id": run.ID, "question_id": ix.ID}}
	_, err := r.once(ctx, run.ID, postQuestionIntent+ix.ID, ix.Posts["slack"],
		func() (string, error) {
			ts, err := r.client.Find(ctx, card.channel, card.ts, r.botID, metaQuestion, "question_id", ix.ID)
			if err != nil || ts == "" {
				return "", err
			}
			return card.channel + "/" + ts, nil
		},
		func() (string, error) {
			v, err := r.read(ctx, run.ID)
			if err != nil {
				return "", err
			}
			text, blocks := renderQuestion(v, v.find(ix.ID, ix))
			ch, ts, err := r.client.Post(ctx, card.channel, message{text: text, blocks: blocks, meta: meta, thread: card.ts})
			if err != nil {
				return "", err
			}
			r.remember("q/"+ix.ID, renderKey(text, blocks))
			return ch + "/" + ts, nil
		},
		func(v string) error { return r.store.RecordPost(ctx, run.ID, ix.ID, "slack", v) })
	return err
}

// postAnswered posts, once, the thread reply saying who answered a
// question and where.
func (r *Relay) postAnswered(ctx context.Context, run *engine.Run, ix *engine.Interaction, card ref) error {
	meta := &slackgo.SlackMetadata{EventType: metaAnswered, EventPayload: map[string]any{"run_id": run.ID, "question_id": ix.ID}}
	posts, err := r.store.RunPosts(ctx, run.ID)
	if err != nil {
		return err
	}
	_, err = r.once(ctx, run.ID, postAnsweredIntent+ix.ID, posts[postAnswered+ix.ID],
		func() (string, error) {
			return r.client.Find(ctx, card.channel, card.ts, r.botID, metaAnswered, "question_id", ix.ID)
		},
		func() (string, error) {
			v, err := r.read(ctx, run.ID)
			if err != nil {
				return "", err
			}
			text := renderAnswered(v, v.find(ix.ID, ix))
			_, ts, err := r.client.Post(ctx, card.channel, message{text: text, blocks: []slackgo.Block{slackgo.NewSectionBlock(mrkdwn(text), nil, nil)}, meta: meta, thread: card.ts})
			return ts, err
		},
		func(v string) error { return r.store.SetRunPost(ctx, run.ID, postAnswered+ix.ID, v) })
	return err
}

// sync brings the run's card and its questions' messages in line with
// the store: each is rendered and updated only when it differs from what
// this process last wrote there, so a sync repeated is harmless.
func (r *Relay) sync(ctx context.Context, run *engine.Run, card ref) error {
	v, err := r.read(ctx, run.ID)
	if err != nil {
		return err
	}
	text, blocks := renderCard(v)
	if err := r.update(ctx, "card/"+run.ID, card, text, blocks); err != nil {
		return err
	}
	for _, ix := range v.ixs {
		post := ix.Posts["slack"]
		if post == "" || ix.Kind == engine.KindAwait {
			continue
		}
		text, blocks := renderQuestion(v, ix)
		if err := r.update(ctx, "q/"+ix.ID, splitRef(post), text, blocks); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.synced[run.ID] = r.now()
	if len(r.synced) > 10000 {
		clear(r.synced)
	}
	r.mu.Unlock()
	return nil
}

// update writes a message unless this process last wrote the same there.
func (r *Relay) update(ctx context.Context, key string, at ref, text string, blocks []slackgo.Block) error {
	k := renderKey(text, blocks)
	r.mu.Lock()
	same := r.written[key] == k
	r.mu.Unlock()
	if same {
		return nil
	}
	if err := r.client.Update(ctx, at.channel, at.ts, message{text: text, blocks: blocks}); err != nil {
		return err
	}
	r.remember(key, k)
	return nil
}

func (r *Relay) remember(key, value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.written) > 10000 {
		clear(r.written) // only a cache: a forgotten message costs one update
	}
	r.written[key] = value
}

// renderKey is what a rendering is compared by.
func renderKey(text string, blocks []slackgo.Block) string {
	b, _ := json.Marshal(slackgo.Blocks{BlockSet: blocks})
	return text + "\x00" + string(b)
}

// read is what one rendering of a run reads from the store.
func (r *Relay) read(ctx context.Context, runID string) (*runView, error) {
	run, err := r.store.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	v := &runView{run: run, who: r.people.who(run), name: r.people.name, workspace: r.workspace}
	if posts, err := r.store.RunPosts(ctx, runID); err != nil {
		return nil, err
	} else if card := posts[postCard]; card != "" {
		v.thread = splitRef(card).ts
	}
	v.pr, v.prURL = prOf(run, r.gitURL)
	if v.ixs, err = r.store.Interactions(ctx, runID); err != nil {
		return nil, err
	}
	if v.numbers, err = r.store.ShortIDs(ctx, scopeOf(run), runID); err != nil {
		return nil, err
	}
	r.mu.Lock()
	p := r.progress[runID]
	if p == nil {
		if len(r.progress) > 10000 {
			clear(r.progress) // only a cache: a forgotten run reads its log again
		}
		p = &progress{running: map[string]bool{}}
		r.progress[runID] = p
	}
	after := p.after
	r.mu.Unlock()
	events, err := r.store.Events(ctx, runID, after, 0)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	p.add(events)
	v.done, v.current = p.done, p.now()
	r.mu.Unlock()
	raw, err := r.store.Checkpoint(ctx, runID)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return nil, err
	}
	if v.snap, err = engine.ReadSnapshot(raw); err != nil {
		r.log.Warn("reading a run's checkpoint for its Slack card failed", "run", runID, "err", err)
		v.snap, _ = engine.ReadSnapshot(nil)
	}
	return v, nil
}

// find returns the view's copy of interaction id (fresher than the
// row's), else fallback.
func (v *runView) find(id string, fallback *engine.Interaction) *engine.Interaction {
	for _, ix := range v.ixs {
		if ix.ID == id {
			return ix
		}
	}
	return fallback
}

// progress is what a run's event log says of its steps, folded as the
// log grows.
type progress struct {
	after   int64
	done    int
	running map[string]bool
	order   []string
}

func (p *progress) add(events []engine.Event) {
	for _, ev := range events {
		if ev.Seq <= p.after {
			continue
		}
		p.after = ev.Seq
		switch ev.Type {
		case engine.EventNodeStarted:
			if _, seen := p.running[ev.NodeID]; !seen {
				p.order = append(p.order, ev.NodeID)
			}
			p.running[ev.NodeID] = true
		case engine.EventNodeFinished:
			p.done++
			p.running[ev.NodeID] = false
		case engine.EventRunResumed, engine.EventRunPaused:
			for n := range p.running {
				p.running[n] = false
			}
		}
	}
}

// now names the nodes executing, in the order they first started.
func (p *progress) now() []string {
	var out []string
	for _, n := range p.order {
		if p.running[n] {
			out = append(out, n)
		}
	}
	return out
}
