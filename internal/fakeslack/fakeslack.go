// Package fakeslack is a fake of Slack's Web API and Socket Mode for
// tests, served by httptest on the real method paths the bot calls
// (auth.test, chat.postMessage, chat.update, chat.postEphemeral,
// chat.getPermalink, views.open, conversations.replies,
// conversations.history, conversations.list, apps.connections.open) and a Socket Mode
// WebSocket. It keeps state as Slack does (messages by channel and ts,
// threads, message metadata, single-use trigger ids that expire), answers
// as Slack does ({"ok":false,"error":"…"}, 429 with Retry-After), applies
// Slack's limits on messages and modals, records every call, and fails
// the test on any method it does not serve.
package fakeslack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The workspace the fake serves, and its app's tokens, shaped like
// Slack's (a bot token starts xoxb-, an app-level token xapp-).
const (
	BotToken  = "xoxb-1111-2222-FakeBotToken"
	AppToken  = "xapp-1-A0FAKE-3333-FakeAppToken"
	TeamID    = "T0FAKE"
	TeamName  = "Acme"
	BotUserID = "U0BOT"
	BotID     = "B0BOT"
	AppID     = "A0FAKE"
	// Channel is the id of the channel named ChannelName, which every
	// fake has.
	Channel     = "C0ITERION"
	ChannelName = "iterion"
)

// Message is a message in a channel, as Slack keeps it.
type Message struct {
	Channel  string
	TS       string
	ThreadTS string // the thread's root ts; "" for a message not in a thread
	User     string // the author's user id (BotUserID for the bot's)
	BotID    string // set on the bot's messages
	Text     string
	Blocks   json.RawMessage
	Metadata *Metadata
	// Edits counts chat.update calls on the message.
	Edits int
	// Unfurls says Slack would show previews of the message's links or
	// media: unfurl_links or unfurl_media was not "false".
	Unfurls bool
	// At is when the fake took it, by its Clock.
	At time.Time
}

// Metadata is a message's metadata.
type Metadata struct {
	EventType    string         `json:"event_type"`
	EventPayload map[string]any `json:"event_payload"`
}

// Ephemeral is a message shown to one user.
type Ephemeral struct {
	Channel, User, ThreadTS, Text string
	Blocks                        json.RawMessage
}

// View is a modal opened with views.open.
type View struct {
	ID        string
	TriggerID string
	User      string
	// View is the view as sent.
	View json.RawMessage
}

// Call is one request the fake served.
type Call struct {
	Method string // the Web API method ("chat.postMessage"), or the path
	Error  string // Slack's error code; "" when ok
	Status int
}

// Server is the fake. Set its exported fields before the first request;
// read its state through the methods, which lock.
type Server struct {
	t   testing.TB
	srv *httptest.Server

	// Clock is the time the fake stamps messages with and expires trigger
	// ids by. nil means time.Now.
	Clock func() time.Time
	// ChannelPace, when set, answers 429 to a chat.postMessage in a
	// channel sooner than this after the previous one (Slack allows about
	// one message a second per channel), with Retry-After 1.
	ChannelPace time.Duration
	// PingEvery is how often a Socket Mode connection is pinged; 0 means 5
	// seconds.
	PingEvery time.Duration
	// AckWithin is how soon an envelope must be acknowledged, or the test
	// fails; 0 means Slack's 3 seconds.
	AckWithin time.Duration

	mu         sync.Mutex
	channels   map[string]string // name → id
	users      map[string]string // id → name
	seq        int64
	messages   []*Message
	ephemerals []Ephemeral
	views      []View
	triggers   map[string]*trigger
	lastPost   map[string]time.Time
	limits     map[string][]int // method → Retry-After of the next answers
	failures   map[string][]string
	calls      []Call
	changed    chan struct{}
	sock       socketState
}

type trigger struct {
	user string
	at   time.Time
	used bool
}

// New starts a fake with the channel ChannelName.
func New(t testing.TB) *Server {
	s := &Server{
		t:        t,
		channels: map[string]string{ChannelName: Channel},
		users:    map[string]string{BotUserID: "iterion"},
		triggers: map[string]*trigger{}, lastPost: map[string]time.Time{},
		limits: map[string][]int{}, failures: map[string][]string{},
		changed: make(chan struct{}),
	}
	s.sock.init()
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.closeSockets()
		s.srv.Close()
	})
	return s
}

// URL is the Web API base, with its trailing slash (ITERION_SLACK_API_URL).
func (s *Server) URL() string { return s.srv.URL + "/api/" }

// AddChannel adds a channel and returns its id.
func (s *Server) AddChannel(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := "C" + strings.ToUpper(strings.ReplaceAll(name, "-", ""))
	s.channels[name] = id
	return id
}

// AddUser adds a person to the workspace.
func (s *Server) AddUser(id, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[id] = name
}

// Limit answers the next len(retryAfter) calls of method with 429 and
// those Retry-After seconds, as Slack does over its rate limits.
func (s *Server) Limit(method string, retryAfter ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits[method] = append(s.limits[method], retryAfter...)
}

// Fail answers the next calls of method with ok:false and these errors.
func (s *Server) Fail(method string, errs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], errs...)
}

// Sign returns the X-Slack-Signature of body sent at ts (unix seconds,
// X-Slack-Request-Timestamp) under the app's signing secret.
func Sign(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:", ts)
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// NewTrigger hands out a trigger id for an interaction of user, as Slack
// puts in interaction payloads: views.open takes it once, within 3
// seconds.
func (s *Server) NewTrigger(user string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	id := fmt.Sprintf("%d.%d.fake%08x", s.now().Unix(), s.seq, s.seq*2654435761)
	s.triggers[id] = &trigger{user: user, at: s.now()}
	return id
}

// Post writes a person's message in channel (in thread threadTS unless
// it is ""), as if written in Slack now, and returns it: the test then
// delivers the event that Slack would send for it.
func (s *Server) Post(channel, threadTS, user, text string) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &Message{Channel: channel, TS: s.nextTS(), ThreadTS: threadTS, User: user, Text: text, At: s.now()}
	s.messages = append(s.messages, m)
	s.changedLocked()
	return *m
}

// Messages returns the messages of channel (all channels when ""), in
// the order they were posted.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages {
		if channel == "" || m.Channel == channel {
			out = append(out, *m)
		}
	}
	return out
}

// BotMessages returns the bot's messages whose text or blocks contain
// substr, in the order they were posted.
func (s *Server) BotMessages(substr string) []Message {
	var out []Message
	for _, m := range s.Messages("") {
		if m.BotID == BotID && (strings.Contains(m.Text, substr) || strings.Contains(string(m.Blocks), substr)) {
			out = append(out, m)
		}
	}
	return out
}

// Message returns the message at channel/ts.
func (s *Server) Message(channel, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.find(channel, ts); m != nil {
		return *m, true
	}
	return Message{}, false
}

// Delete removes a message, as someone with the rights can.
func (s *Server) Delete(channel, ts string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages = slices.DeleteFunc(s.messages, func(m *Message) bool { return m.Channel == channel && m.TS == ts })
	s.changedLocked()
}

// Ephemerals returns the ephemeral messages shown to user (everyone's
// when "").
func (s *Server) Ephemerals(user string) []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Ephemeral
	for _, e := range s.ephemerals {
		if user == "" || e.User == user {
			out = append(out, e)
		}
	}
	return out
}

// Views returns the modals opened, in order.
func (s *Server) Views() []View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.views)
}

// Calls returns the requests served, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// CallCount counts the calls of method.
func (s *Server) CallCount(method string) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Method == method {
			n++
		}
	}
	return n
}

// WaitFor waits until cond holds, re-checking it whenever the fake's
// state changes, and fails the test after timeout.
func (s *Server) WaitFor(timeout time.Duration, what string, cond func() bool) {
	s.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			s.t.Fatalf("waited %s for %s", timeout, what)
		}
	}
}

// Changed returns a channel closed at the fake's next change of state,
// for tests that wait on it themselves (in a synctest bubble).
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *Server) now() time.Time {
	if s.Clock != nil {
		return s.Clock()
	}
	return time.Now()
}

func (s *Server) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// nextTS is a new message ts, unique in the workspace: the clock's second
// and a counter as the six digits after the dot.
func (s *Server) nextTS() string {
	s.seq++
	return fmt.Sprintf("%d.%06d", s.now().Unix(), s.seq%1000000)
}

func (s *Server) find(channel, ts string) *Message {
	for _, m := range s.messages {
		if m.Channel == channel && m.TS == ts {
			return m
		}
	}
	return nil
}

// errorAnswer is a Slack method's refusal.
type errorAnswer struct {
	code  string
	extra map[string]any
}

func fail(code string) *errorAnswer { return &errorAnswer{code: code} }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == socketPath {
		s.serveSocket(w, r)
		return
	}
	method, ok := strings.CutPrefix(r.URL.Path, "/api/")
	call := Call{Method: method, Status: http.StatusOK}
	defer func() {
		s.mu.Lock()
		s.calls = append(s.calls, call)
		s.changedLocked()
		s.mu.Unlock()
	}()
	handler := methods[method]
	if !ok || handler == nil {
		s.t.Errorf("fake Slack: unexpected call %s %s", r.Method, r.URL.Path)
		call.Error = "unknown_method"
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "unknown_method"})
		return
	}
	if err := r.ParseForm(); err != nil {
		call.Error = "invalid_form_data"
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_form_data"})
		return
	}
	in := request{r: r, form: r.Form}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		in.json = map[string]any{}
		if err := json.NewDecoder(r.Body).Decode(&in.json); err != nil && r.ContentLength != 0 {
			call.Error = "invalid_json"
			writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_json"})
			return
		}
	}
	s.mu.Lock()
	if ra := s.limits[method]; len(ra) > 0 {
		s.limits[method] = ra[1:]
		s.mu.Unlock()
		call.Status, call.Error = http.StatusTooManyRequests, "ratelimited"
		w.Header().Set("Retry-After", strconv.Itoa(ra[0]))
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error": "ratelimited"})
		return
	}
	if fs := s.failures[method]; len(fs) > 0 {
		s.failures[method] = fs[1:]
		s.mu.Unlock()
		call.Error = fs[0]
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": fs[0]})
		return
	}
	s.mu.Unlock()
	want := BotToken
	if method == "apps.connections.open" {
		want = AppToken
	}
	if tok := in.token(); tok != want {
		code := "invalid_auth"
		switch {
		case tok == "":
			code = "not_authed"
		case method == "apps.connections.open" && strings.HasPrefix(tok, "xoxb-"):
			code = "not_allowed_token_type"
		}
		call.Error = code
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": code})
		return
	}
	out, ferr := handler(s, &in)
	if ferr != nil {
		call.Error = ferr.code
		if ferr.code == "ratelimited" {
			call.Status = http.StatusTooManyRequests
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error": "ratelimited"})
			return
		}
		body := map[string]any{"ok": false, "error": ferr.code}
		for k, v := range ferr.extra {
			body[k] = v
		}
		writeJSON(w, http.StatusOK, body)
		return
	}
	out["ok"] = true
	writeJSON(w, http.StatusOK, out)
}

// request is one call's arguments: form fields, or a JSON body.
type request struct {
	r    *http.Request
	form url.Values
	json map[string]any
}

func (in *request) token() string {
	if a, ok := strings.CutPrefix(in.r.Header.Get("Authorization"), "Bearer "); ok {
		return a
	}
	return in.form.Get("token")
}

// arg reads an argument from the form or the JSON body.
func (in *request) arg(name string) string {
	if in.json != nil {
		switch v := in.json[name].(type) {
		case string:
			return v
		case nil:
		default:
			b, _ := json.Marshal(v)
			return string(b)
		}
	}
	return in.form.Get(name)
}

type methodFunc func(s *Server, in *request) (map[string]any, *errorAnswer)

// methods are the Web API methods the fake serves.
var methods = map[string]methodFunc{
	"auth.test":             (*Server).authTest,
	"chat.postMessage":      (*Server).postMessage,
	"chat.update":           (*Server).update,
	"chat.postEphemeral":    (*Server).postEphemeral,
	"chat.getPermalink":     (*Server).permalink,
	"views.open":            (*Server).openView,
	"conversations.replies": (*Server).replies,
	"conversations.history": (*Server).history,
	"conversations.list":    (*Server).list,
	"apps.connections.open": (*Server).openConnection,
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) authTest(_ *request) (map[string]any, *errorAnswer) {
	return map[string]any{"url": "https://acme.slack.com/", "team": TeamName, "user": "iterion", "team_id": TeamID,
		"user_id": BotUserID, "bot_id": BotID}, nil
}

// channelID resolves a channel argument (an id, a name, #name).
func (s *Server) channelID(arg string) (string, bool) {
	name := strings.TrimPrefix(arg, "#")
	if id, ok := s.channels[name]; ok {
		return id, true
	}
	for _, id := range s.channels {
		if id == arg {
			return id, true
		}
	}
	return "", false
}

func (s *Server) postMessage(in *request) (map[string]any, *errorAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channelID(in.arg("channel"))
	if !ok {
		return nil, fail("channel_not_found")
	}
	m, ferr := s.compose(in)
	if ferr != nil {
		return nil, ferr
	}
	if s.ChannelPace > 0 {
		if last, ok := s.lastPost[ch]; ok && s.now().Sub(last) < s.ChannelPace {
			return nil, fail("ratelimited")
		}
		s.lastPost[ch] = s.now()
	}
	m.Channel, m.TS, m.User, m.BotID, m.At = ch, s.nextTS(), BotUserID, BotID, s.now()
	m.Unfurls = in.arg("unfurl_links") != "false" || in.arg("unfurl_media") != "false"
	if th := in.arg("thread_ts"); th != "" {
		root := s.find(ch, th)
		if root == nil {
			return nil, fail("thread_not_found")
		}
		// A reply to a reply goes to the root's thread, as in Slack.
		m.ThreadTS = root.TS
		if root.ThreadTS != "" {
			m.ThreadTS = root.ThreadTS
		}
	}
	s.messages = append(s.messages, m)
	return map[string]any{"channel": ch, "ts": m.TS, "message": s.messageJSON(m, true)}, nil
}

// compose checks a message's text, blocks and metadata against Slack's
// limits and returns the message they make.
func (s *Server) compose(in *request) (*Message, *errorAnswer) {
	m := &Message{Text: in.arg("text")}
	if len([]rune(m.Text)) > 40000 {
		return nil, fail("msg_too_long")
	}
	if b := in.arg("blocks"); b != "" {
		if ferr := checkBlocks([]byte(b), 50, false); ferr != nil {
			return nil, ferr
		}
		m.Blocks = json.RawMessage(b)
	}
	if m.Text == "" && m.Blocks == nil {
		return nil, fail("no_text")
	}
	if md := in.arg("metadata"); md != "" {
		var meta Metadata
		if err := json.Unmarshal([]byte(md), &meta); err != nil || meta.EventType == "" || meta.EventPayload == nil {
			return nil, fail("invalid_metadata_format")
		}
		m.Metadata = &meta
	}
	return m, nil
}

func (s *Server) update(in *request) (map[string]any, *errorAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channelID(in.arg("channel"))
	if !ok || !strings.HasPrefix(in.arg("channel"), "C") {
		// chat.update wants the conversation's id, not its name.
		return nil, fail("channel_not_found")
	}
	m := s.find(ch, in.arg("ts"))
	if m == nil {
		return nil, fail("message_not_found")
	}
	if m.BotID != BotID {
		return nil, fail("cant_update_message")
	}
	next, ferr := s.compose(in)
	if ferr != nil {
		return nil, ferr
	}
	m.Text = next.Text
	if next.Blocks != nil {
		m.Blocks = next.Blocks // omitted blocks stay as they were
	}
	if next.Metadata != nil {
		m.Metadata = next.Metadata
	}
	m.Edits++
	return map[string]any{"channel": ch, "ts": m.TS, "text": m.Text}, nil
}

func (s *Server) postEphemeral(in *request) (map[string]any, *errorAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channelID(in.arg("channel"))
	if !ok {
		return nil, fail("channel_not_found")
	}
	user := in.arg("user")
	if user == "" || !strings.ContainsRune("UW", rune(user[0])) {
		return nil, fail("user_not_found")
	}
	m, ferr := s.compose(in)
	if ferr != nil {
		return nil, ferr
	}
	s.ephemerals = append(s.ephemerals, Ephemeral{Channel: ch, User: user, ThreadTS: in.arg("thread_ts"), Text: m.Text, Blocks: m.Blocks})
	return map[string]any{"message_ts": s.nextTS()}, nil
}

func (s *Server) permalink(in *request) (map[string]any, *errorAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := in.arg("channel")
	m := s.find(ch, in.arg("message_ts"))
	if m == nil {
		return nil, fail("message_not_found")
	}
	link := "https://acme.slack.com/archives/" + ch + "/p" + strings.ReplaceAll(m.TS, ".", "")
	if m.ThreadTS != "" {
		link += "?thread_ts=" + m.ThreadTS + "&cid=" + ch
	}
	return map[string]any{"channel": ch, "permalink": link}, nil
}

func (s *Server) openView(in *request) (map[string]any, *errorAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := in.arg("trigger_id")
	tr := s.triggers[id]
	switch {
	case tr == nil:
		return nil, fail("invalid_trigger_id")
	case tr.used:
		return nil, fail("exchanged_trigger_id")
	case s.now().Sub(tr.at) > 3*time.Second:
		return nil, fail("expired_trigger_id")
	}
	tr.used = true
	raw, _ := json.Marshal(in.json["view"])
	var v struct {
		Type            string          `json:"type"`
		Title           *textObject     `json:"title"`
		Submit          *textObject     `json:"submit"`
		Close           *textObject     `json:"close"`
		CallbackID      string          `json:"callback_id"`
		PrivateMetadata string          `json:"private_metadata"`
		Blocks          json.RawMessage `json:"blocks"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.Type != "modal" || v.Title == nil {
		return nil, invalidArgs("view must be a modal with a title")
	}
	for _, t := range []*textObject{v.Title, v.Submit, v.Close} {
		if t != nil && len([]rune(t.Text)) > 24 {
			return nil, invalidArgs("title, submit and close must be at most 24 characters")
		}
	}
	if len(v.PrivateMetadata) > 3000 || len(v.CallbackID) > 255 {
		return nil, invalidArgs("private_metadata must be at most 3000 characters, callback_id 255")
	}
	if ferr := checkBlocks(v.Blocks, 100, true); ferr != nil {
		return nil, ferr
	}
	s.seq++
	view := View{ID: fmt.Sprintf("V%06d", s.seq), TriggerID: id, User: tr.user, View: raw}
	s.views = append(s.views, view)
	return map[string]any{"view": map[string]any{"id": view.ID, "type": "modal", "callback_id": v.CallbackID}}, nil
}

func invalidArgs(msg string) *errorAnswer {
	return &errorAnswer{code: "invalid_arguments", extra: map[string]any{"response_metadata": map[string]any{"messages": []string{"[ERROR] " + msg}}}}
}

// list is conversations.list: the workspace's channels, by name, a page
// of limit at a time.
func (s *Server) list(in *request) (map[string]any, *errorAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := slices.Sorted(maps.Keys(s.channels))
	start, _ := strconv.Atoi(in.arg("cursor"))
	limit, _ := strconv.Atoi(in.arg("limit"))
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	start = min(start, len(names))
	end := min(start+limit, len(names))
	chans := []map[string]any{}
	for _, n := range names[start:end] {
		chans = append(chans, map[string]any{"id": s.channels[n], "name": n, "is_channel": true, "is_member": true})
	}
	next := ""
	if end < len(names) {
		next = strconv.Itoa(end)
	}
	return map[string]any{"channels": chans, "response_metadata": map[string]any{"next_cursor": next}}, nil
}

// replies is conversations.replies: a thread's root and its replies,
// oldest first, from oldest, a page of limit at a time.
func (s *Server) replies(in *request) (map[string]any, *errorAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channelID(in.arg("channel"))
	if !ok {
		return nil, fail("channel_not_found")
	}
	root := s.find(ch, in.arg("ts"))
	if root == nil {
		return nil, fail("thread_not_found")
	}
	var thread []*Message
	for _, m := range s.messages {
		if m.Channel == ch && (m == root || m.ThreadTS == root.TS && m.TS != root.TS) {
			thread = append(thread, m)
		}
	}
	return s.page(in, thread)
}

// history is conversations.history: a channel's messages outside
// threads (and the roots of threads), newest first.
func (s *Server) history(in *request) (map[string]any, *errorAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channelID(in.arg("channel"))
	if !ok {
		return nil, fail("channel_not_found")
	}
	var list []*Message
	for i := len(s.messages) - 1; i >= 0; i-- {
		if m := s.messages[i]; m.Channel == ch && m.ThreadTS == "" {
			list = append(list, m)
		}
	}
	return s.page(in, list)
}

func (s *Server) page(in *request, list []*Message) (map[string]any, *errorAnswer) {
	oldest, latest := tsValue(in.arg("oldest")), tsValue(in.arg("latest"))
	var kept []*Message
	for _, m := range list {
		if v := tsValue(m.TS); (oldest == 0 || v >= oldest) && (latest == 0 || v <= latest) {
			kept = append(kept, m)
		}
	}
	start, _ := strconv.Atoi(in.arg("cursor"))
	limit, _ := strconv.Atoi(in.arg("limit"))
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	start = min(start, len(kept))
	end := min(start+limit, len(kept))
	meta := in.arg("include_all_metadata") == "1" || in.arg("include_all_metadata") == "true"
	msgs := []map[string]any{}
	for _, m := range kept[start:end] {
		msgs = append(msgs, s.messageJSON(m, meta))
	}
	out := map[string]any{"messages": msgs, "has_more": end < len(kept)}
	if end < len(kept) {
		out["response_metadata"] = map[string]any{"next_cursor": strconv.Itoa(end)}
	}
	return out, nil
}

// tsValue orders message timestamps: seconds and the digits after the
// dot, as a number.
func tsValue(ts string) float64 {
	f, _ := strconv.ParseFloat(ts, 64)
	return f
}

func (s *Server) messageJSON(m *Message, withMeta bool) map[string]any {
	out := map[string]any{"type": "message", "ts": m.TS, "text": m.Text}
	if m.User != "" {
		out["user"] = m.User
	}
	if m.BotID != "" {
		out["bot_id"] = m.BotID
	}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
	}
	if m.Blocks != nil {
		out["blocks"] = m.Blocks
	}
	if withMeta && m.Metadata != nil {
		out["metadata"] = m.Metadata
	}
	return out
}

type textObject struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// checkBlocks applies Slack's limits on blocks: how many, the lengths of
// texts, ids and values, unique block ids, and unique action ids within a
// block. Input blocks are allowed in modals only.
func checkBlocks(raw []byte, maxBlocks int, modal bool) *errorAnswer {
	if len(raw) == 0 {
		return nil
	}
	var blocks []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return fail("invalid_blocks_format")
	}
	bad := func(format string, args ...any) *errorAnswer {
		return &errorAnswer{code: "invalid_blocks", extra: map[string]any{"errors": []string{fmt.Sprintf(format, args...)}}}
	}
	if len(blocks) > maxBlocks {
		return bad("no more than %d items allowed [json-pointer:/blocks]", maxBlocks)
	}
	blockIDs := map[string]bool{}
	for i, b := range blocks {
		var typ, id string
		_ = json.Unmarshal(b["type"], &typ)
		_ = json.Unmarshal(b["block_id"], &id)
		if len(id) > 255 {
			return bad("block_id must be at most 255 characters [json-pointer:/blocks/%d/block_id]", i)
		}
		if id != "" {
			if blockIDs[id] {
				return bad("block_id %q is not unique [json-pointer:/blocks/%d/block_id]", id, i)
			}
			blockIDs[id] = true
		}
		text := func(key string, max int) *errorAnswer {
			var t textObject
			if b[key] != nil && json.Unmarshal(b[key], &t) == nil && len([]rune(t.Text)) > max {
				return bad("must be at most %d characters [json-pointer:/blocks/%d/%s/text]", max, i, key)
			}
			return nil
		}
		switch typ {
		case "header":
			if e := text("text", 150); e != nil {
				return e
			}
		case "section":
			if e := text("text", 3000); e != nil {
				return e
			}
			var fields []textObject
			_ = json.Unmarshal(b["fields"], &fields)
			if len(fields) > 10 {
				return bad("no more than 10 items allowed [json-pointer:/blocks/%d/fields]", i)
			}
			for _, f := range fields {
				if len([]rune(f.Text)) > 2000 {
					return bad("must be at most 2000 characters [json-pointer:/blocks/%d/fields]", i)
				}
			}
			if e := checkElements(b["accessory"], i, bad, true); e != nil {
				return e
			}
		case "actions":
			var els []json.RawMessage
			_ = json.Unmarshal(b["elements"], &els)
			if len(els) > 25 {
				return bad("no more than 25 items allowed [json-pointer:/blocks/%d/elements]", i)
			}
			if e := checkElements(b["elements"], i, bad, false); e != nil {
				return e
			}
		case "context":
			var els []json.RawMessage
			_ = json.Unmarshal(b["elements"], &els)
			if len(els) > 10 {
				return bad("no more than 10 items allowed [json-pointer:/blocks/%d/elements]", i)
			}
		case "input":
			if !modal {
				return bad("input blocks are only allowed in modals [json-pointer:/blocks/%d]", i)
			}
			if e := text("label", 2000); e != nil {
				return e
			}
			if e := checkElements(b["element"], i, bad, true); e != nil {
				return e
			}
		case "divider", "rich_text", "markdown":
		default:
			return bad("unsupported type %q [json-pointer:/blocks/%d/type]", typ, i)
		}
	}
	return nil
}

// checkElements checks the interactive elements of block i (one, or a
// list): button texts at most 75 characters, values 2000, action ids
// 255 and unique within the block, at most 100 options in a select.
func checkElements(raw json.RawMessage, i int, bad func(string, ...any) *errorAnswer, one bool) *errorAnswer {
	if len(raw) == 0 {
		return nil
	}
	var els []map[string]json.RawMessage
	if one {
		var el map[string]json.RawMessage
		if json.Unmarshal(raw, &el) != nil {
			return bad("invalid element [json-pointer:/blocks/%d]", i)
		}
		els = append(els, el)
	} else if json.Unmarshal(raw, &els) != nil {
		return bad("invalid elements [json-pointer:/blocks/%d/elements]", i)
	}
	actions := map[string]bool{}
	for _, el := range els {
		var typ, action, value string
		var text textObject
		var options []json.RawMessage
		_ = json.Unmarshal(el["type"], &typ)
		_ = json.Unmarshal(el["action_id"], &action)
		_ = json.Unmarshal(el["value"], &value)
		_ = json.Unmarshal(el["text"], &text)
		_ = json.Unmarshal(el["options"], &options)
		switch {
		case len(action) > 255:
			return bad("action_id must be at most 255 characters [json-pointer:/blocks/%d]", i)
		case action != "" && actions[action]:
			return bad("action_id %q is not unique in its block [json-pointer:/blocks/%d]", action, i)
		case typ == "button" && len([]rune(text.Text)) > 75:
			return bad("button text must be at most 75 characters [json-pointer:/blocks/%d]", i)
		case len(value) > 2000:
			return bad("value must be at most 2000 characters [json-pointer:/blocks/%d]", i)
		case len(options) > 100:
			return bad("no more than 100 options allowed [json-pointer:/blocks/%d]", i)
		}
		actions[action] = action != ""
	}
	return nil
}
