// Package api is the REST API over runs and interactions. The process that
// owns a store serves it on a unix socket in a private directory of its
// user (ServeLocal), and iterion serve also on TCP behind a token
// (RequireToken); CLI commands in other processes use Client to reach the
// owner instead of opening the store, which Badger allows to one process
// only.
//
// The routes and shapes follow upstream iterion's server:
//
//	GET  /api/runs                                   {runs: [Run…]}       ?status=&limit=
//	GET  /api/runs/{id}                              Run
//	GET  /api/runs/{id}/events                       {events: [Event…]}   ?after=&limit=&wait=
//	GET  /api/runs/{id}/interactions/pending         {interactions: [Interaction…]}
//	POST /api/runs/{id}/interactions/{iid}/answer    {answer} or {answers: {field: value}}
//	                                                 → {run_id, interaction_id, queued, resumed}
//	POST /api/runs/{id}/cancel                       → {run_id, cancelled}
//	POST /api/runs                                   {file_path, vars?, run_id?, preset?} → {run_id, status}
//	GET  /api/schedules                              {schedules: [schedule.Status…]}
//	POST /api/schedules/{name}/run                   → {schedule, run_id}: fires it now
//
// A schedule's name holds slashes ("github/acme/app/nightly"): escape
// them in the path (%2F). A name that is no schedule's is looked for as
// the end of one ("nightly"), when only one ends so.
//
// and, beyond upstream's, what the admin page shows:
//
//	GET  /api/runs                                   {runs, total, offset} ?status=&repo=&channel=&offset=&limit=
//	POST /api/runs/{id}/resume                       → {run_id, status} (a cancelled or failed_resumable run)
//	GET  /api/runs/{id}/interactions                 {interactions: [Question…]}, each with its audit trail
//	GET  /api/runs/{id}/interactions/{iid}           Question, with its audit trail
//	GET  /api/questions                              {questions: [Question…], total, offset}: the open
//	                                                 questions of every run, newest first
//	                                                 ?repo=&run=&older_than=&deadline_within=&offset=&limit=
//
// A Question says what it asks (question, options, free_text, fields),
// where its run belongs (place: channel, repo, pr), when it was asked and
// its deadline, the channels' posts that carry it and, once answered,
// answered_by, via and answer; the audit trail lists asked, posted,
// answered and the run's events that name it (reminders).
//
//	GET  /api/store/backup                           the store's backup stream (application/octet-stream)
//
// The backup holds everything in the store, so it answers only callers on
// the local socket (the store's own user, Via "cli"); on TCP it is 403
// whatever the token. Its body is streamed as the store writes it, never
// scrubbed or held in memory: a failure once it began cuts the stream
// short, which the client reports (the file then does not restore).
//
// Events are long-polled with wait (a Go duration, such as 30s; at most
// MaxWait, more is cut to it): when the run has no event after "after",
// the request is held until one is stored, the run's status changes (it
// pauses, ends, resumes) or wait passes, which answers an empty list. A
// run that is over answers at once. Without wait, or with 0s, it answers
// at once, as upstream's does. A server shutting down ends the waits it
// holds with 503 (code shutting_down).
//
// The pending list holds every open question: async questions, the form
// of a paused human node and an agent's blocking ask_user, each with the
// fields its answer takes ("fields": [{name, type, enum}]). A form is
// answered with {"answers": {"approved": true, "reason": "…"}}, values as
// text or typed JSON; a question or a one-field form with {"answer": "…"}.
// A launch's vars may be JSON numbers and booleans for typed vars.
//
// Every request is authenticated, and who answers is the authenticated
// Caller: the OS user via "cli" on the socket, the token's name via "api"
// on TCP. Upstream's "by" and "via" in an answer's body are ignored.
//
// Errors are {error: "…", code: "…"} with 400 (bad request, an invalid
// answer: the message names each field), 401 (missing or wrong token), 403
// (another user on the socket), 404 (unknown run or question), 409
// (already answered, the run not waiting for it, or the wait of an agent
// rather than a question), 410 (the run has ended), 503 (the store's disk
// is nearly full: the message says how much is free; the server is
// shutting down).
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/iterion-bot/iterion/bot/schedule"
	"github.com/iterion-bot/iterion/engine"
)

// runEngine is what the API needs from the engine: its doors.
type runEngine interface {
	Answer(ctx context.Context, req engine.AnswerRequest) (*engine.AnswerResult, error)
	Stop(ctx context.Context, runID, reason string) (bool, error)
	Continue(ctx context.Context, runID, by, via string) (*engine.Run, error)
	WaitChange(ctx context.Context, runID string, after int64) error
}

// MaxWait is the longest an events request waits for a change.
const MaxWait = time.Minute

// ErrShuttingDown is the answer to a wait the server ended, or would not
// begin, because it is shutting down.
var ErrShuttingDown = errors.New("the store's owner is shutting down: ask again once it is back, or once it has stopped (commands then read the store themselves)")

// Server serves the API.
type Server struct {
	engine runEngine
	store  ReadStore
	reader *Reader
	log    *slog.Logger
	launch func(ctx context.Context, req LaunchRequest) (*engine.Run, error)
	redact *engine.Redactor
	backup func(ctx context.Context, w io.Writer) error
	waits  waits

	schedules Schedules
}

// waits are the events requests waiting for a change, ended by Close.
type waits struct {
	mu     sync.Mutex
	closed bool
	cancel map[*int]context.CancelCauseFunc
}

// begin registers a wait under parent; end, called once, unregisters
// it. After Close the wait's context is cancelled from the start.
func (w *waits) begin(parent context.Context) (ctx context.Context, end func()) {
	ctx, cancel := context.WithCancelCause(parent)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		cancel(ErrShuttingDown)
		return ctx, func() {}
	}
	if w.cancel == nil {
		w.cancel = map[*int]context.CancelCauseFunc{}
	}
	key := new(int)
	w.cancel[key] = cancel
	return ctx, func() {
		w.mu.Lock()
		delete(w.cancel, key)
		w.mu.Unlock()
		cancel(nil)
	}
}

// Close ends the waits of events requests in progress, which answer 503
// shutting_down, and makes later ones answer so instead of waiting. Call
// it when the server starts shutting down, before http.Server.Shutdown,
// which would otherwise wait for them. Other requests are served as
// before.
func (s *Server) Close() {
	s.waits.mu.Lock()
	defer s.waits.mu.Unlock()
	s.waits.closed = true
	for _, cancel := range s.waits.cancel {
		cancel(ErrShuttingDown)
	}
	clear(s.waits.cancel)
}

// Options configure a Server. Zero fields mean the defaults noted.
type Options struct {
	// Logger receives request errors. nil means none.
	Logger *slog.Logger
	// Launch starts a run for POST /api/runs and returns it as it started
	// (the run goes on in the background); CallerFrom(ctx) says who asks.
	// nil means the route is absent.
	Launch func(ctx context.Context, req LaunchRequest) (*engine.Run, error)
	// Redactor scrubs the server's secrets from every answer's body (run
	// records, events, questions, errors). nil means nothing is scrubbed.
	Redactor *engine.Redactor
	// Schedules lists and fires the server's schedules for
	// /api/schedules. nil means the routes are absent.
	Schedules Schedules
	// Backup writes a backup of the store to w, for GET /api/store/backup
	// (store.DB.Backup). nil means the route is absent.
	Backup func(ctx context.Context, w io.Writer) error
	// Place says where a run belongs (its repository), for the repo
	// filters and the questions' place. nil means nowhere but its channel.
	Place func(*engine.Run) Place
}

// Schedules are the server's schedules, as the API shows and fires them.
type Schedules interface {
	// List returns every schedule with its last and next fires.
	List(ctx context.Context) ([]schedule.Status, error)
	// Fire fires schedule name now and returns the run it started.
	Fire(ctx context.Context, name string) (runID string, err error)
}

// FireError is a fire refused because of what the caller asked (an
// unknown or ambiguous schedule) or because its run could not start;
// the message says which, and what to do.
type FireError struct{ Err error }

func (e *FireError) Error() string { return e.Err.Error() }
func (e *FireError) Unwrap() error { return e.Err }

// LaunchRequest is the body of POST /api/runs.
type LaunchRequest struct {
	// FilePath is the workflow file, relative to the server's directory.
	FilePath string `json:"file_path"`
	RunID    string `json:"run_id,omitempty"`
	// Vars are text, or JSON numbers and booleans for typed vars.
	Vars   map[string]any `json:"vars,omitempty"`
	Preset string         `json:"preset,omitempty"`
}

// NewServer returns a server over an engine and its store.
func NewServer(e runEngine, s ReadStore, opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Server{engine: e, store: s, reader: NewReader(s, opts.Place, nil), log: log, launch: opts.Launch, redact: opts.Redactor, schedules: opts.Schedules, backup: opts.Backup}
}

// Handler returns the API's routes. They answer only requests with a
// Caller, so mount them behind RequireToken or ServeLocal; any other
// request gets 401.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/runs", s.listRuns)
	mux.HandleFunc("GET /api/runs/{id}", s.getRun)
	mux.HandleFunc("GET /api/runs/{id}/events", s.events)
	mux.HandleFunc("GET /api/runs/{id}/interactions/pending", s.pending)
	mux.HandleFunc("POST /api/runs/{id}/interactions/{iid}/answer", s.answer)
	mux.HandleFunc("POST /api/runs/{id}/cancel", s.cancel)
	mux.HandleFunc("POST /api/runs/{id}/resume", s.resume)
	mux.HandleFunc("GET /api/runs/{id}/interactions", s.runQuestions)
	mux.HandleFunc("GET /api/runs/{id}/interactions/{iid}", s.question)
	mux.HandleFunc("GET /api/questions", s.questions)
	if s.launch != nil {
		mux.HandleFunc("POST /api/runs", s.launchRun)
	}
	if s.schedules != nil {
		mux.HandleFunc("GET /api/schedules", s.listSchedules)
		mux.HandleFunc("POST /api/schedules/{name}/run", s.fireSchedule)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := CallerFrom(r.Context()); !ok {
			unauthorized(w, "unauthenticated request")
			return
		}
		if r.URL.Path == backupPath {
			// Streamed as is: a backup is no JSON answer to scrub, and
			// may be larger than memory.
			s.serveBackup(w, r)
			return
		}
		scrubBodies(s.redact, mux).ServeHTTP(w, r)
	})
}

// maxBody bounds request bodies.
const maxBody = 1 << 20

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r, "limit", DefaultLimit)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	offset, err := intParam(r, "offset", 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	q := r.URL.Query()
	status := engine.Status(q.Get("status"))
	if status != "" && !knownStatus(status) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("status=%q is not a run status: use running, paused_waiting_human, finished, failed, failed_resumable or cancelled", status))
		return
	}
	page, err := s.reader.Runs(r.Context(), RunFilter{Status: status, Repo: q.Get("repo"), Channel: q.Get("channel"), Offset: int(offset), Limit: int(limit)})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// knownStatus reports whether s is a run status.
func knownStatus(s engine.Status) bool {
	switch s {
	case engine.StatusRunning, engine.StatusPausedWaitingHuman, engine.StatusFinished, engine.StatusFailed, engine.StatusFailedResumable, engine.StatusCancelled:
		return true
	}
	return false
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	run, err := s.store.Run(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	after, err := intParam(r, "after", 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	limit, err := intParam(r, "limit", 1000)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	wait, err := waitParam(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	id := r.PathValue("id")
	if _, err = s.store.Run(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	evs, err := s.store.Events(r.Context(), id, after, int(limit))
	if err == nil && len(evs) == 0 && wait > 0 {
		if err = s.waitChange(r.Context(), id, after, wait); err == nil {
			evs, err = s.store.Events(r.Context(), id, after, int(limit))
		}
	}
	if r.Context().Err() != nil {
		return // the caller is gone
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if evs == nil {
		evs = []engine.Event{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": evs})
}

// waitChange waits up to wait for run id to change after seq after: nil
// when it did or the wait passed, ErrShuttingDown when Close ended it.
func (s *Server) waitChange(parent context.Context, id string, after int64, wait time.Duration) error {
	ctx, end := s.waits.begin(parent)
	defer end()
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err := s.engine.WaitChange(ctx, id, after)
	switch {
	case err == nil, parent.Err() != nil:
		return err
	case errors.Is(context.Cause(ctx), ErrShuttingDown):
		return ErrShuttingDown
	case errors.Is(err, context.DeadlineExceeded):
		return nil // the wait passed: no events
	}
	return err
}

func (s *Server) pending(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.store.Run(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	all, err := s.store.Interactions(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ixs := []*engine.Interaction{}
	for _, ix := range all {
		// The wait of an agent (kind await) is not a question: its async
		// questions are listed themselves.
		if ix.Pending() && ix.Kind != engine.KindAwait {
			if ix.Kind == engine.KindAsync && ix.Fields == nil {
				ix.Fields = []engine.FormField{{Name: engine.QuestionKey, Type: "string"}}
			}
			ixs = append(ixs, ix)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"interactions": ixs})
}

// AnswerBody is the body of an answer request. Who answers is not part of
// it: the server records the authenticated Caller, and ignores the "by"
// and "via" fields that upstream's clients send.
type AnswerBody struct {
	Answer string `json:"answer,omitempty"`
	// Answers are a form's fields: text, or typed JSON values.
	Answers map[string]any `json:"answers,omitempty"`
}

// AnswerResponse is the reply to an accepted answer.
type AnswerResponse struct {
	RunID         string `json:"run_id"`
	InteractionID string `json:"interaction_id"`
	Queued        bool   `json:"queued"`
	Resumed       bool   `json:"resumed"`
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	var body AnswerBody
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("reading the answer: %w (send {\"answer\": \"…\"}, or {\"answers\": {\"field\": value}} for a form)", err))
		return
	}
	if body.Answer != "" && body.Answers != nil {
		writeError(w, http.StatusBadRequest, errors.New(`send either "answer" (a question, a one-field form) or "answers" (a form's fields), not both`))
		return
	}
	c, _ := CallerFrom(r.Context()) // Handler let only callers in
	req := engine.AnswerRequest{RunID: r.PathValue("id"), InteractionID: r.PathValue("iid"), Text: body.Answer, Fields: body.Answers, By: c.Name, Via: c.Via}
	res, err := s.engine.Answer(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, AnswerResponse{RunID: req.RunID, InteractionID: req.InteractionID, Queued: true, Resumed: res.Resumed})
}

// launchRun starts a run: 201 {run_id, status}; 400 for a bad request or
// workflow (the message says what to fix).
func (s *Server) launchRun(w http.ResponseWriter, r *http.Request) {
	var req LaunchRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil || req.FilePath == "" {
		writeError(w, http.StatusBadRequest, errors.New(`send {"file_path": "workflow.bot", "vars": {…}}`))
		return
	}
	run, err := s.launch(r.Context(), req)
	if err != nil {
		var bad *BadRequestError
		if errors.As(err, &bad) {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"run_id": run.ID, "status": run.Status})
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	list, err := s.schedules.List(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if list == nil {
		list = []schedule.Status{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"schedules": list})
}

func (s *Server) fireSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	list, err := s.schedules.List(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	full, err := schedule.Find(list, name)
	if err != nil {
		writeJSON(w, http.StatusNotFound, errorBody{Error: err.Error(), Code: "not_found"})
		return
	}
	id, err := s.schedules.Fire(r.Context(), full)
	var refused *FireError
	if errors.As(err, &refused) {
		writeJSON(w, http.StatusConflict, errorBody{Error: err.Error(), Code: "fire_refused"})
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"schedule": full, "run_id": id})
}

// BadRequestError is a launch refused because of what the caller sent.
type BadRequestError struct{ Err error }

func (e *BadRequestError) Error() string { return e.Err.Error() }
func (e *BadRequestError) Unwrap() error { return e.Err }

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.store.Run(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	c, _ := CallerFrom(r.Context())
	stopped, err := s.engine.Stop(r.Context(), id, "cancelled by "+c.Name+" via "+c.Via)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"run_id": id, "cancelled": stopped})
}

// fail maps engine errors to statuses; anything unexpected is a 500 whose
// detail goes to the log, not to the caller.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var bad *engine.InvalidAnswerError
	if errors.As(err, &bad) {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error(), Code: "invalid_answer", Fields: bad.Fields})
		return
	}
	var notResumable *engine.NotResumableError
	if errors.As(err, &notResumable) {
		writeJSON(w, http.StatusConflict, errorBody{Error: err.Error(), Code: "not_resumable"})
		return
	}
	for _, m := range errorCodes {
		if errors.Is(err, m.err) {
			writeJSON(w, m.status, errorBody{Error: err.Error(), Code: m.code})
			return
		}
	}
	s.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeJSON(w, http.StatusInternalServerError, errorBody{Error: "internal error", Code: "internal"})
}

// errorCodes maps the engine's sentinels to statuses and to the codes
// clients turn back into the same sentinels.
var errorCodes = []struct {
	err    error
	status int
	code   string
}{
	{engine.ErrNotFound, http.StatusNotFound, "not_found"},
	{engine.ErrEmptyAnswer, http.StatusBadRequest, "empty_answer"},
	{engine.ErrTextAndFields, http.StatusBadRequest, "bad_request"},
	{engine.ErrAlreadyAnswered, http.StatusConflict, "already_answered"},
	{engine.ErrNotAsync, http.StatusConflict, "not_async"},
	{engine.ErrStatusChanged, http.StatusConflict, "not_waiting"},
	{engine.ErrWorkflowChanged, http.StatusConflict, "workflow_changed"},
	{engine.ErrRunEnded, http.StatusGone, "run_ended"},
	{engine.ErrStorageFull, http.StatusServiceUnavailable, "storage_full"},
	{ErrShuttingDown, http.StatusServiceUnavailable, "shutting_down"},
}

// errorBody is the JSON of an error reply.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	// Fields, for an invalid answer, are the form's fields.
	Fields []engine.FormField `json:"fields,omitempty"`
}

func intParam(r *http.Request, name string, def int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("query parameter %s=%q is not a non-negative integer", name, v)
	}
	return n, nil
}

// waitParam reads the wait of an events request: a Go duration, cut to
// MaxWait; none means 0, no wait.
func waitParam(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("query parameter wait=%q is not a duration: use one such as 30s (at most %s)", v, MaxWait)
	}
	return min(d, MaxWait), nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, errorBody{Error: err.Error(), Code: "bad_request"})
}

// questions lists the open questions across runs: {questions, total,
// offset}, newest first.
func (s *Server) questions(w http.ResponseWriter, r *http.Request) {
	f, err := ParseQuestionFilter(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	page, err := s.reader.Questions(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// ParseQuestionFilter reads the filters of a list of questions from a
// query string: repo, run, older_than and deadline_within (durations such
// as 2h), offset and limit. The errors say what to write instead.
func ParseQuestionFilter(q url.Values) (QuestionFilter, error) {
	f := QuestionFilter{Repo: strings.TrimSpace(q.Get("repo")), RunID: strings.TrimSpace(q.Get("run"))}
	for _, d := range []struct {
		name string
		to   *time.Duration
	}{{"older_than", &f.OlderThan}, {"deadline_within", &f.DeadlineWithin}} {
		v := strings.TrimSpace(q.Get(d.name))
		if v == "" {
			continue
		}
		dur, err := time.ParseDuration(v)
		if err != nil || dur < 0 {
			return f, fmt.Errorf("%s=%q is not a duration: write one such as 30m, 2h or 48h", d.name, v)
		}
		*d.to = dur
	}
	for _, n := range []struct {
		name string
		to   *int
	}{{"offset", &f.Offset}, {"limit", &f.Limit}} {
		v := q.Get(n.name)
		if v == "" {
			continue
		}
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 {
			return f, fmt.Errorf("%s=%q is not a non-negative integer", n.name, v)
		}
		*n.to = i
	}
	return f, nil
}

// runQuestions lists a run's questions with their audit trails.
func (s *Server) runQuestions(w http.ResponseWriter, r *http.Request) {
	run, err := s.store.Run(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	qs, err := s.reader.RunQuestions(r.Context(), run)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"interactions": qs})
}

// question is one question with its audit trail.
func (s *Server) question(w http.ResponseWriter, r *http.Request) {
	q, err := s.reader.Question(r.Context(), r.PathValue("id"), r.PathValue("iid"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, q)
}

// resume continues a cancelled or failed_resumable run: {run_id, status}.
func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	c, _ := CallerFrom(r.Context())
	run, err := s.engine.Continue(r.Context(), r.PathValue("id"), c.Name, c.Via)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"run_id": run.ID, "status": run.Status})
}
