package page

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/engine"
)

// Live updates: the engine hands every event to OnEvent, which passes it,
// without blocking, to each live view open (a GET /events stream). Each
// stream reads what changed from the store and sends it rendered, for its
// viewer and its page's filters, with the same templates as the page:
//
//	event: row        {id, run, open, html}   a question's row (the list, a question's page, a run's)
//	event: runrow     {id, html}              a run's row (the runs list)
//	event: runhead    {id, html}              a run's header: status, running steps, actions
//	event: timeline   {id, html}              one more event of a run's timeline
//	event: resync     {}                      updates were lost: read the page again
//
// A stream that falls behind (its buffer full) loses events, and is told
// to resync: a missed update costs a reload, never a wrong row, since
// every update is read from the store.

// subscriberBuffer is how many events a stream holds before it loses some.
const subscriberBuffer = 256

// keepalive is how often an idle stream says it is alive, so that proxies
// keep it open.
const keepalive = 25 * time.Second

type hub struct {
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool
	// seq counts the events published; recent keeps the last
	// replayEvents of them, so that a page's stream replays what came
	// between the page's rendering and its subscription.
	seq    int64
	recent []engine.Event
}

// replayEvents is how many recent events a new stream can catch up on.
const replayEvents = 1024

type subscriber struct {
	ch   chan engine.Event
	lost atomic.Bool
	done chan struct{}
}

// current is the count of events published so far: a page reads it
// before it reads the store, and its stream replays what follows.
func (h *hub) current() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seq
}

// subscribe opens a stream that first gets the events published after
// the since-th (missed, when they are no longer kept), then every new one.
func (h *hub) subscribe(since int64) (sub *subscriber, backlog []engine.Event, missed, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, false, false
	}
	sub = &subscriber{ch: make(chan engine.Event, subscriberBuffer), done: make(chan struct{})}
	h.subs[sub] = struct{}{}
	if since >= 0 && since < h.seq {
		n := h.seq - since
		if n > int64(len(h.recent)) {
			missed = true
		} else {
			backlog = slices.Clone(h.recent[len(h.recent)-int(n):])
		}
	}
	return sub, backlog, missed, true
}

func (h *hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, sub)
}

func (h *hub) publish(ev engine.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	if len(h.recent) == replayEvents {
		h.recent = append(h.recent[:0], h.recent[1:]...)
	}
	h.recent = append(h.recent, ev)
	for sub := range h.subs {
		select {
		case sub.ch <- ev:
		default:
			sub.lost.Store(true)
		}
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for sub := range h.subs {
		close(sub.done)
	}
	clear(h.subs)
}

// streams counts the live views open, for tests.
func (h *hub) streams() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// liveView is what one stream shows.
type liveView struct {
	view   string // questions, question, runs, run
	viewer Viewer
	list   listFilter
	filter api.QuestionFilter
	status string
	repo   string
	run    string
}

// events serves a page's live updates as server-sent events.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	lv := liveView{view: q.Get("view"), viewer: viewerOf(r), status: q.Get("status"), repo: q.Get("repo"), run: q.Get("run")}
	switch lv.view {
	case "questions", "question", "runs", "run":
	default:
		s.fail(w, r, http.StatusBadRequest, "view= must be questions, question, runs or run.")
		return
	}
	var err error
	if lv.list, lv.filter, err = parseListFilter(q); err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	since := int64(-1) // a stream of no page: new events only
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.fail(w, r, http.StatusBadRequest, "since= must be the event count the page was rendered at.")
			return
		}
		since = n
	}
	sub, backlog, missed, ok := s.hub.subscribe(since)
	if !ok {
		s.fail(w, r, http.StatusServiceUnavailable, "The server is shutting down.")
		return
	}
	defer s.hub.unsubscribe(sub)
	rc := http.NewResponseController(w)
	// The server's write timeout is for answers, not for a stream.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, "retry: 2000\n\nevent: hello\ndata: {}\n\n")
	// What changed between the page's rendering and now.
	for _, ev := range backlog {
		if lv.view == "run" && ev.RunID == lv.run {
			// The page may hold the event already: a timeline entry
			// replayed could be one twice. The page reads itself again.
			missed = true
			break
		}
	}
	if missed {
		send(w, "resync", map[string]string{})
		backlog = nil
	}
	for _, ev := range backlog {
		s.update(r.Context(), w, lv, ev) // rows and heads: read from the store, idempotent
	}
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(keepalive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.done:
			return
		case <-tick.C:
			_, _ = fmt.Fprint(w, ": keepalive\n\n")
		case ev := <-sub.ch:
			s.update(r.Context(), w, lv, ev)
			if sub.lost.Swap(false) {
				send(w, "resync", map[string]string{})
			}
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// send writes one server-sent event of data as JSON (one line: JSON
// escapes the newlines of the HTML it carries).
func send(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data) // strings and bools
	_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
}

// questionEvents change a run's questions; runEvents its status, or the
// steps running.
var (
	questionEvents = []string{engine.EventHumanInputRequested, engine.EventInteractionAnswered, engine.EventHumanAnswers, engine.EventQuestionReminded, engine.EventQuestionEscalated}
	statusEvents   = []string{engine.EventRunStarted, engine.EventRunPaused, engine.EventRunResumed, engine.EventRunFinished, engine.EventRunFailed, engine.EventRunCancelled}
	stepEvents     = []string{engine.EventNodeStarted, engine.EventNodeFinished}
)

// update sends what ev changed of view lv.
func (s *Server) update(ctx context.Context, w http.ResponseWriter, lv liveView, ev engine.Event) {
	question, status, step := slices.Contains(questionEvents, ev.Type), slices.Contains(statusEvents, ev.Type), slices.Contains(stepEvents, ev.Type)
	switch lv.view {
	case "questions", "question":
		if (question || status) && (lv.run == "" || lv.run == ev.RunID) {
			s.sendRows(ctx, w, lv, ev.RunID)
		}
	case "runs":
		if status || step {
			s.sendRunRow(ctx, w, lv, ev.RunID)
		}
	case "run":
		if ev.RunID != lv.run {
			return
		}
		var b bytes.Buffer
		if s.tmpl.ExecuteTemplate(&b, "entry", entryOf(ev)) == nil {
			send(w, "timeline", map[string]string{"id": ev.RunID, "html": b.String()})
		}
		if status || step {
			run, err := s.store.Run(ctx, ev.RunID)
			if err != nil {
				return
			}
			b.Reset()
			if s.tmpl.ExecuteTemplate(&b, "runhead", s.runHead(ctx, lv.viewer, run)) == nil {
				send(w, "runhead", map[string]string{"id": run.ID, "html": b.String()})
			}
		}
		if question || status {
			s.sendRows(ctx, w, lv, ev.RunID)
		}
	}
}

// sendRows sends the rows of run runID's questions: the open ones that
// the view's filters keep, and the others (answered, closed) for the
// pages that show them to change.
func (s *Server) sendRows(ctx context.Context, w http.ResponseWriter, lv liveView, runID string) {
	run, err := s.store.Run(ctx, runID)
	if err != nil {
		return
	}
	qs, err := s.reader.RunQuestions(ctx, run)
	if err != nil {
		return
	}
	c := newPermissionCache()
	next := "/" + lv.list.query(lv.list.Page)
	if lv.view != "questions" {
		next = "/runs/" + runID
		if lv.view == "question" {
			next = "" // set per question below
		}
	}
	for _, q := range qs {
		n := next
		if n == "" {
			n = "/q/" + q.ID
		}
		rw := s.makeRow(ctx, c, lv.viewer, q, n, nil)
		if rw.Open && lv.view == "questions" && !s.keeps(ctx, c, lv, q) {
			continue
		}
		tmpl := "row"
		if lv.view != "questions" {
			tmpl = "card"
		}
		var b bytes.Buffer
		if err := s.tmpl.ExecuteTemplate(&b, tmpl, rw); err != nil {
			s.log.Error("rendering a live row failed", "question", q.ID, "err", err)
			continue
		}
		send(w, "row", map[string]any{"id": q.ID, "run": q.RunID, "open": rw.Open, "html": b.String()})
	}
}

// keeps reports whether the list's filters keep open question q.
func (s *Server) keeps(ctx context.Context, c *permissionCache, lv liveView, q api.Question) bool {
	f := lv.filter
	now := s.now()
	switch {
	case f.Repo != "" && !strings.EqualFold(q.Place.Repo, f.Repo):
		return false
	case f.RunID != "" && q.RunID != f.RunID:
		return false
	case f.OlderThan > 0 && now.Sub(q.AskedAt) < f.OlderThan:
		return false
	case f.DeadlineWithin > 0 && (q.Deadline.IsZero() || q.Deadline.Sub(now) > f.DeadlineWithin):
		return false
	case lv.list.Mine && !s.cachedMay(ctx, c, lv.viewer, q.Run, ActAnswer).OK:
		return false
	}
	return true
}

// sendRunRow sends the row of run runID for the runs list, when its
// filters keep it.
func (s *Server) sendRunRow(ctx context.Context, w http.ResponseWriter, lv liveView, runID string) {
	run, err := s.store.Run(ctx, runID)
	if err != nil {
		return
	}
	p := s.reader.Place(run)
	if lv.status != "" && string(run.Status) != lv.status || lv.repo != "" && !strings.EqualFold(p.Repo, lv.repo) {
		return
	}
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, "runrow", runRow{Run: run, Where: s.where(ctx, run, p)}); err != nil {
		s.log.Error("rendering a live run row failed", "run", runID, "err", err)
		return
	}
	send(w, "runrow", map[string]string{"id": run.ID, "html": b.String()})
}
