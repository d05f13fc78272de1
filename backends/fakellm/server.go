package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// maxBody bounds a request body. Coding agents resend the whole
// conversation each turn, so this is generous.
const maxBody = 64 << 20

// Options configure a Server. The zero value means every default.
type Options struct {
	// Logger receives a debug record per model request and a warning per
	// request no turn answers. nil means no logging.
	Logger *slog.Logger
	// ChunkSize is the most bytes of text or tool-call JSON in one streamed
	// delta; text is cut on rune boundaries. 0 means 16.
	ChunkSize int
	// Now gives the OpenAI "created" timestamp. nil means time.Now.
	Now func() time.Time
	// Models are the ids GET /v1/models lists. nil means the models named
	// by the script's matches, or "fake-model" when it names none.
	Models []string
}

// Server is a scripted model server speaking the Anthropic Messages API
// and the OpenAI chat-completions API. It is safe for concurrent requests;
// turn selection and recording happen under one lock, so each request
// takes a distinct turn.
type Server struct {
	script Script
	logger *slog.Logger
	chunk  int
	now    func() time.Time
	models []string
	mux    *http.ServeMux

	mu      sync.Mutex
	used    []bool // by turn index; Repeat turns are never marked
	records []Recorded
	ids     int // ids generated, for tool calls and messages
}

// New returns a server answering from a copy of script; nil means an empty
// script, which answers every model request with the no-match error. New
// panics if the script fails Validate: a script in Go code is the
// program's own, and ParseScript and LoadScript have already checked
// scripts read from files.
func New(script *Script, opts Options) *Server {
	if err := script.Validate(); err != nil {
		panic("fakellm: invalid script: " + err.Error())
	}
	s := &Server{logger: opts.Logger, chunk: opts.ChunkSize, now: opts.Now, models: opts.Models}
	if script != nil {
		s.script = cloneScript(script)
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.chunk <= 0 {
		s.chunk = 16
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.models == nil {
		for _, t := range s.script.Turns {
			if m := t.Match.Model; m != "" && !slices.Contains(s.models, m) {
				s.models = append(s.models, m)
			}
		}
		if s.models == nil {
			s.models = []string{"fake-model"}
		}
	}
	s.used = make([]bool, len(s.script.Turns))
	s.mux = s.routes()
	return s
}

// cloneScript copies the script deeply enough that the caller changing its
// own value cannot race with the server. Tool inputs are copied through
// JSON, which Validate has shown to work.
func cloneScript(in *Script) Script {
	out := Script{Turns: make([]Turn, len(in.Turns))}
	for i := range in.Turns {
		out.Turns[i] = cloneTurn(&in.Turns[i])
	}
	if in.Fallback != nil {
		f := cloneTurn(in.Fallback)
		out.Fallback = &f
	}
	return out
}

func cloneTurn(t *Turn) Turn {
	c := *t
	if t.Match.HasToolResult != nil {
		b := *t.Match.HasToolResult
		c.Match.HasToolResult = &b
	}
	c.ToolCalls = make([]ToolCall, len(t.ToolCalls))
	for i, tc := range t.ToolCalls {
		c.ToolCalls[i] = tc
		if tc.Input != nil {
			data, _ := json.Marshal(tc.Input)
			c.ToolCalls[i].Input = nil
			_ = json.Unmarshal(data, &c.ToolCalls[i].Input)
		}
	}
	if t.Headers != nil {
		c.Headers = make(map[string]string, len(t.Headers))
		for k, v := range t.Headers {
			c.Headers[k] = v
		}
	}
	return c
}

// Handler returns the server's HTTP handler. Routes:
//
//	POST /v1/messages                  Anthropic Messages (query string ignored)
//	POST /v1/chat/completions          OpenAI chat completions
//	POST /v1/messages/count_tokens     {"input_tokens": estimate}
//	GET  /v1/models, /v1/models/{id}   model list and model, in a shape both SDKs read
//	GET, HEAD /, /healthz, /api/hello  200, for health probes (Claude Code sends HEAD /api/hello)
//
// Any other path is a 404 and a wrong method on a known path a 405, both
// with a JSON error body that both SDKs decode.
func (s *Server) Handler() http.Handler { return s.mux }

// Requests returns the model requests received since New or Reset, in
// arrival order.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.records)
}

// Unused returns the indexes of the turns without Repeat that have not
// answered yet, so a test can check that its whole script was played.
func (s *Server) Unused() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for i, used := range s.used {
		if !used && !s.script.Turns[i].Repeat {
			out = append(out, i)
		}
	}
	return out
}

// Reset forgets the recorded requests, makes every turn unused again and
// restarts the generated ids.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = nil
	clear(s.used)
	s.ids = 0
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) { s.serveCompletion(w, r, Anthropic) })
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.serveCompletion(w, r, OpenAI) })
	mux.HandleFunc("POST /v1/messages/count_tokens", s.serveCountTokens)
	mux.HandleFunc("GET /v1/models", s.serveModels)
	mux.HandleFunc("GET /v1/models/{id}", s.serveModelInfo)
	for _, p := range []string{"/{$}", "/healthz", "/api/hello"} {
		mux.HandleFunc("GET "+p, serveHealth)
	}
	mux.HandleFunc("/", serveNotFound)
	return mux
}

// reply is a turn made concrete for one request: ids and usage filled in.
type reply struct {
	turn    *Turn // nil when no turn answered
	msgID   string
	calls   []ToolCall // the turn's calls with their ids
	inputs  []string   // JSON of each call's input
	usage   Usage
	stop    string // Anthropic stop_reason
	model   string
	created int64
	status  int
}

func (s *Server) serveCompletion(w http.ResponseWriter, r *http.Request, d Dialect) {
	rec := Recorded{Dialect: d, Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone()}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var body map[string]any
	if err == nil {
		err = json.Unmarshal(data, &body)
		if err == nil && body == nil {
			err = fmt.Errorf("got null")
		}
	}
	if err != nil {
		s.record(&rec, NoTurn, http.StatusBadRequest)
		writeError(w, d, http.StatusBadRequest, fmt.Sprintf("fakellm: the request body is not a JSON object: %v", err))
		return
	}
	rec.decodeRequest(body)
	rp := s.pick(&rec, len(data))
	if rp.turn == nil {
		s.logger.Warn("no turn for model request", "seq", rec.Seq, "dialect", d, "model", rec.Model)
		// The SDKs and Claude Code retry 5xx answers unless told not to;
		// retrying cannot make a turn appear.
		w.Header().Set("X-Should-Retry", "false")
		writeError(w, d, rp.status, s.noTurnMessage(&rec))
		return
	}
	s.logger.Debug("model request", "seq", rec.Seq, "dialect", d, "model", rec.Model, "stream", rec.Stream, "turn", rec.Turn)
	t := rp.turn
	for k, v := range t.Headers {
		w.Header().Set(k, v)
	}
	switch {
	case t.RawSSE != "":
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(rp.status)
		_, _ = io.WriteString(w, t.RawSSE)
	case t.Status != 0:
		msg := t.Error
		if msg == "" {
			msg = "scripted error"
		}
		writeError(w, d, t.Status, msg)
	case d == Anthropic && rec.Stream:
		s.streamAnthropic(w, rp)
	case d == Anthropic:
		writeJSON(w, http.StatusOK, anthropicResponse(rp))
	case rec.Stream:
		opts, _ := body["stream_options"].(map[string]any)
		withUsage, _ := opts["include_usage"].(bool)
		s.streamOpenAI(w, rp, withUsage)
	default:
		writeJSON(w, http.StatusOK, openAIResponse(rp))
	}
}

// pick chooses the turn answering rec, makes the reply and records the
// request, all under the lock.
func (s *Server) pick(rec *Recorded, bodyLen int) *reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := NoTurn
	var t *Turn
	for i := range s.script.Turns {
		c := &s.script.Turns[i]
		if (c.Repeat || !s.used[i]) && c.Match.matches(rec) {
			idx, t = i, c
			s.used[i] = !c.Repeat
			break
		}
	}
	if t == nil && s.script.Fallback != nil {
		idx, t = FallbackTurn, s.script.Fallback
	}
	rp := &reply{turn: t, status: http.StatusInternalServerError}
	if t != nil {
		rp.status = http.StatusOK
		if t.Status != 0 {
			rp.status = t.Status
		}
		if t.Status == 0 && t.RawSSE == "" {
			s.makeReply(rp, rec, bodyLen)
		}
	}
	s.recordLocked(rec, idx, rp.status)
	return rp
}

func (s *Server) makeReply(rp *reply, rec *Recorded, bodyLen int) {
	t := rp.turn
	rp.model = rec.Model
	if rp.model == "" {
		rp.model = "fake-model"
	}
	rp.created = s.now().Unix()
	s.ids++
	if rec.Dialect == Anthropic {
		rp.msgID = fmt.Sprintf("msg_01fake%06d", s.ids)
	} else {
		rp.msgID = fmt.Sprintf("chatcmpl-fake%06d", s.ids)
	}
	out := len(t.Text)
	for _, c := range t.ToolCalls {
		if c.ID == "" {
			s.ids++
			if rec.Dialect == Anthropic {
				c.ID = fmt.Sprintf("toolu_01fake%06d", s.ids)
			} else {
				c.ID = fmt.Sprintf("call_fake%06d", s.ids)
			}
		}
		input := []byte("{}")
		if c.Input != nil {
			input = marshal(c.Input)
		}
		rp.calls = append(rp.calls, c)
		rp.inputs = append(rp.inputs, string(input))
		out += len(input)
	}
	rp.usage = t.Usage
	if rp.usage.InputTokens == 0 {
		rp.usage.InputTokens = max(1, bodyLen/4)
	}
	if rp.usage.OutputTokens == 0 {
		rp.usage.OutputTokens = max(1, out/4)
	}
	rp.stop = t.StopReason
	switch {
	case rp.stop == "" && len(t.ToolCalls) > 0:
		rp.stop = "tool_use"
	case rp.stop == "":
		rp.stop = "end_turn"
	}
}

func (s *Server) record(rec *Recorded, turn, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recordLocked(rec, turn, status)
}

func (s *Server) recordLocked(rec *Recorded, turn, status int) {
	rec.Seq = len(s.records) + 1
	rec.Turn = turn
	rec.Status = status
	s.records = append(s.records, *rec)
}

// noTurnMessage explains a request no turn answers: what it carried and
// which turns are left.
func (s *Server) noTurnMessage(rec *Recorded) string {
	var b strings.Builder
	fmt.Fprintf(&b, "fakellm: the script has no turn for request #%d (%s, model %q", rec.Seq, rec.Dialect, rec.Model)
	var last []string
	for _, m := range rec.LastUserTurn() {
		last = append(last, m.Text)
	}
	fmt.Fprintf(&b, ", last user turn %q", clip(strings.Join(last, "\n"), 200))
	for _, r := range rec.ToolResults {
		if r.Name != "" {
			fmt.Fprintf(&b, ", tool result for %s", r.Name)
		}
	}
	b.WriteString(")")
	s.mu.Lock()
	var unused []string
	for i, used := range s.used {
		if !used {
			u := strconv.Itoa(i)
			if n := s.script.Turns[i].Name; n != "" {
				u += " " + strconv.Quote(n)
			}
			unused = append(unused, u)
		}
	}
	s.mu.Unlock()
	if len(unused) > 20 {
		unused = append(unused[:20], fmt.Sprintf("and %d more", len(unused)-20))
	}
	if len(unused) == 0 {
		b.WriteString("; every turn is used")
	} else {
		fmt.Fprintf(&b, "; no unused turn matches it (unused: %s)", strings.Join(unused, ", "))
	}
	b.WriteString("; add a matching turn or a fallback")
	return b.String()
}

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// chunks cuts s into pieces of at most n bytes on rune boundaries (a rune
// longer than n is kept whole).
func chunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		end := min(n, len(s))
		for end < len(s) && end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
		if end == 0 {
			_, end = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

func (s *Server) serveCountTokens(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil || !json.Valid(data) {
		writeError(w, Anthropic, http.StatusBadRequest, "fakellm: the request body is not JSON")
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": max(1, len(data)/4)})
}

// model is a model entry in both the Anthropic and the OpenAI shapes.
type model struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
}

func newModel(id string) model {
	return model{ID: id, Type: "model", DisplayName: id, CreatedAt: "2025-01-01T00:00:00Z", Object: "model", Created: 1735689600, OwnedBy: "fakellm"}
}

func (s *Server) serveModels(w http.ResponseWriter, _ *http.Request) {
	list := struct {
		Object  string  `json:"object"`
		Data    []model `json:"data"`
		HasMore bool    `json:"has_more"`
		FirstID string  `json:"first_id"`
		LastID  string  `json:"last_id"`
	}{Object: "list", Data: []model{}}
	for _, id := range s.models {
		list.Data = append(list.Data, newModel(id))
	}
	if n := len(s.models); n > 0 {
		list.FirstID, list.LastID = s.models[0], s.models[n-1]
	}
	writeJSON(w, http.StatusOK, list)
}

// serveModelInfo answers for any model id: a fake server serves whatever
// model the client names.
func (s *Server) serveModelInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, newModel(r.PathValue("id")))
}

func serveHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
	}
}

var knownMethods = map[string]string{
	"/v1/messages":              "POST",
	"/v1/chat/completions":      "POST",
	"/v1/messages/count_tokens": "POST",
	"/v1/models":                "GET, HEAD",
	"/":                         "GET, HEAD",
	"/healthz":                  "GET, HEAD",
	"/api/hello":                "GET, HEAD",
}

func serveNotFound(w http.ResponseWriter, r *http.Request) {
	status, typ := http.StatusNotFound, "not_found_error"
	msg := fmt.Sprintf("fakellm: no route for %s %s; model requests go to POST /v1/messages or POST /v1/chat/completions", r.Method, r.URL.Path)
	if allow, ok := knownMethods[r.URL.Path]; ok || strings.HasPrefix(r.URL.Path, "/v1/models/") {
		if !ok {
			allow = "GET, HEAD"
		}
		w.Header().Set("Allow", allow)
		status, typ = http.StatusMethodNotAllowed, "invalid_request_error"
		msg = fmt.Sprintf("fakellm: %s %s is not allowed; use %s", r.Method, r.URL.Path, allow)
	}
	// One body both SDKs read: Anthropic's {"type":"error","error":{type,
	// message}} and OpenAI's {"error":{message,type,param,code}}.
	writeJSON(w, status, map[string]any{
		"type":  "error",
		"error": map[string]any{"type": typ, "message": msg, "param": nil, "code": nil},
	})
}

// writeError writes an API error in the dialect's format.
func writeError(w http.ResponseWriter, d Dialect, status int, msg string) {
	if d == Anthropic {
		writeJSON(w, status, anthropicError{Type: "error", Error: anthropicErrorDetail{Type: anthropicErrorType(status), Message: msg}})
		return
	}
	typ, code := openAIErrorType(status)
	writeJSON(w, status, openAIError{Error: openAIErrorDetail{Message: msg, Type: typ, Code: code}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data := marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// marshal encodes v without escaping <, > and & (the API does not, and
// scripts often hold markup). Every value written is built here from
// marshalable parts, and Validate has checked the scripted tool inputs.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("fakellm: encoding response: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
