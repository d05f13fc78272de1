package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Redacted is what a scrubbed secret value reads as.
const Redacted = "[redacted]"

// MinSecretLen is the shortest value a Redactor scrubs. Shorter values are
// ignored: scrubbing "a" or "true" would destroy ordinary text, and so
// short a secret is no secret. (Lines of a multi-line value are held to it
// too, so the short last line of a PEM block stays.)
const MinSecretLen = 8

// Redactor replaces the server's secret values (model API keys, the API
// token, the webhook secret, the App's private key, configured secrets)
// with Redacted in text that leaves a run: run errors, events, outbox
// payloads, node outputs, comments, check runs, API answers and logs.
// Besides the values it is given, it always scrubs text shaped like a
// GitHub token (ghs_…, ghp_…, gho_…, ghu_…, ghr_… and github_pat_…), so
// every installation token the App mints is covered without being told.
//
// Each value is scrubbed as given (spaces around it trimmed), in its JSON
// string form (so a secret inside stored JSON is found too), and, for a
// value of several lines such as a PEM key, line by line (a leak of some
// of its lines matters), except PEM armour lines (-----BEGIN …). Where
// secrets overlap or touch in a text, the whole stretch they cover becomes
// one Redacted.
//
// A nil *Redactor scrubs nothing. A Redactor is safe for concurrent use:
// Add may be called while others scrub.
type Redactor struct {
	mu sync.Mutex // serializes Add
	m  atomic.Pointer[matcher]
}

// NewRedactor returns a Redactor of values; those shorter than
// MinSecretLen are ignored. The zero Redactor is one of no values.
func NewRedactor(values ...string) *Redactor {
	r := &Redactor{}
	r.Add(values...)
	return r
}

// Add adds secret values, for instance a token obtained at run time.
func (r *Redactor) Add(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.m.Load()
	var forms []string
	if old != nil {
		forms = old.values
	}
	added := false
	for _, v := range values {
		for _, f := range secretForms(v) {
			if !slices.Contains(forms, f) {
				forms = append(slices.Clip(forms), f)
				added = true
			}
		}
	}
	if added || old == nil {
		r.m.Store(newMatcher(forms))
	}
}

// String returns s with every secret replaced by Redacted.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	m := r.m.Load()
	if m == nil { // a zero Redactor: tokens only
		return noSecrets.replace(s)
	}
	return m.replace(s)
}

var noSecrets = newMatcher(nil)

// Map returns m with its values scrubbed as Value does; m itself is not
// changed. A nil map stays nil.
func (r *Redactor) Map(m map[string]any) map[string]any {
	if r == nil || m == nil {
		return m
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = r.Value(v)
	}
	return out
}

// Value returns v scrubbed in depth: strings, and the strings inside maps,
// lists, JSON text (json.RawMessage) and question options, in copies (v
// itself is not changed). Map keys are kept, and values of other types
// (numbers, booleans, times) are returned as they are.
func (r *Redactor) Value(v any) any {
	if r == nil {
		return v
	}
	switch x := v.(type) {
	case string:
		return r.String(x)
	case map[string]any:
		return r.Map(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.Value(e)
		}
		return out
	case map[string]string:
		out := make(map[string]string, len(x))
		for k, e := range x {
			out[k] = r.String(e)
		}
		return out
	case []string:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = r.String(e)
		}
		return out
	case []map[string]any:
		out := make([]map[string]any, len(x))
		for i, e := range x {
			out[i] = r.Map(e)
		}
		return out
	case []Option:
		out := make([]Option, len(x))
		for i, o := range x {
			out[i] = Option{ID: r.String(o.ID), Label: r.String(o.Label)}
		}
		return out
	case json.RawMessage:
		return json.RawMessage(r.String(string(x)))
	}
	return v
}

// secretForms are the texts scrubbed for a secret value: see Redactor.
func secretForms(v string) []string {
	v = strings.TrimSpace(v)
	if len(v) < MinSecretLen {
		return nil
	}
	forms := []string{v}
	add := func(f string) {
		if len(f) >= MinSecretLen && !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	// JSON's string escapes, with and without the HTML escapes.
	quoted, _ := json.Marshal(v)
	add(string(quoted[1 : len(quoted)-1]))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	add(strings.TrimSuffix(strings.TrimSpace(buf.String()), `"`)[1:])
	if strings.ContainsAny(v, "\r\n") {
		for line := range strings.Lines(v) {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "-----") {
				add(line)
			}
		}
	}
	return forms
}

// matcher finds secrets in text. Every secret is at least MinSecretLen
// bytes long, so one scan reads the text's 8-byte windows as integers: a
// bitmap over a hash of the secrets' first 8 bytes turns nearly every
// window away at the cost of a multiply, and the few that pass are
// compared with the secrets starting with those bytes. That costs the
// same whatever the number of secrets, unlike one search per secret. A
// matcher is never changed once built.
type matcher struct {
	values []string // every form, in the order added
	bloom  [1 << (bloomBits - 6)]uint64
	heads  map[uint64][]string // first 8 bytes → forms, longest first
}

const bloomBits = 16

func bloomHash(w uint64) uint64 { return (w * 0x9E3779B97F4A7C15) >> (64 - bloomBits) }

func word(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func newMatcher(values []string) *matcher {
	m := &matcher{values: values, heads: map[uint64][]string{}}
	for _, v := range values {
		w := word(v)
		h := bloomHash(w)
		m.bloom[h>>6] |= 1 << (h & 63)
		m.heads[w] = append(m.heads[w], v)
	}
	for _, list := range m.heads {
		slices.SortFunc(list, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	}
	return m
}

// span is a stretch [start, end) of text to scrub.
type span struct{ start, end int }

func (m *matcher) replace(s string) string {
	spans := m.find(s, nil)
	spans = findTokens(s, spans)
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	var b strings.Builder
	b.Grow(len(s))
	at := 0
	for i := 0; i < len(spans); {
		start, end := spans[i].start, spans[i].end
		for i++; i < len(spans) && spans[i].start <= end; i++ {
			end = max(end, spans[i].end)
		}
		b.WriteString(s[at:start])
		b.WriteString(Redacted)
		at = end
	}
	b.WriteString(s[at:])
	return b.String()
}

// find appends the stretches of s that secrets cover, by start.
func (m *matcher) find(s string, spans []span) []span {
	if len(m.values) == 0 || len(s) < MinSecretLen {
		return spans
	}
	w := word(s)
	covered := 0 // the end of the last stretch found
	for i := 0; ; i++ {
		if h := bloomHash(w); m.bloom[h>>6]&(1<<(h&63)) != 0 {
			for _, v := range m.heads[w] {
				if strings.HasPrefix(s[i:], v) {
					// The longest secret starting here; a shorter one
					// inside a stretch already found adds nothing.
					if i+len(v) > covered {
						spans = append(spans, span{i, i + len(v)})
						covered = i + len(v)
					}
					break
				}
			}
		}
		if i+MinSecretLen >= len(s) {
			return spans
		}
		w = w>>8 | uint64(s[i+MinSecretLen])<<56
	}
}

// tokenPrefixes start GitHub's tokens: installation (ghs_), personal
// (ghp_, github_pat_), OAuth (gho_), user-to-server (ghu_) and refresh
// (ghr_) tokens, each followed by at least 30 letters and digits
// (github_pat_ also by underscores).
var tokenPrefixes = []string{"ghs_", "ghp_", "gho_", "ghu_", "ghr_", "github_pat_"}

const minTokenTail = 30

// findTokens appends the stretches of s shaped like GitHub tokens.
func findTokens(s string, spans []span) []span {
	for i := 0; ; i++ {
		j := strings.IndexByte(s[i:], 'g')
		if j < 0 {
			return spans
		}
		i += j
		if i+1 < len(s) && s[i+1] != 'h' && s[i+1] != 'i' {
			continue // neither gh…_ nor github_pat_
		}
		for _, p := range tokenPrefixes {
			if !strings.HasPrefix(s[i:], p) {
				continue
			}
			end := i + len(p)
			for end < len(s) && tokenByte(s[end], p == "github_pat_") {
				end++
			}
			if end-i-len(p) >= minTokenTail {
				spans = append(spans, span{i, end})
				i = end - 1 // on past the token
			}
			break
		}
	}
}

func tokenByte(c byte, underscore bool) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || underscore && c == '_'
}

// RedactingHandler returns a slog handler that scrubs the message and the
// attributes' values of every record with r before h handles it. Strings,
// errors and Stringers are scrubbed as text, maps and lists in depth;
// values of other types are printed and scrubbed only when their text
// holds a secret. A nil r returns h itself.
func RedactingHandler(h slog.Handler, r *Redactor) slog.Handler {
	if r == nil {
		return h
	}
	return &redactingHandler{h: h, r: r}
}

type redactingHandler struct {
	h slog.Handler
	r *Redactor
}

func (h *redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.h.Enabled(ctx, l)
}

func (h *redactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	scrubbed := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		scrubbed[i] = h.attr(a)
	}
	return &redactingHandler{h: h.h.WithAttrs(scrubbed), r: h.r}
}

func (h *redactingHandler) WithGroup(name string) slog.Handler {
	return &redactingHandler{h: h.h.WithGroup(name), r: h.r}
}

func (h *redactingHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		scrubbed := make([]slog.Attr, len(group))
		for i, g := range group {
			scrubbed[i] = h.attr(g)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(scrubbed...)}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.r.String(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, h.r.String(x.String()))
		case []byte:
			return slog.String(a.Key, h.r.String(string(x)))
		case string, map[string]any, []any, map[string]string, []string, []map[string]any:
			return slog.Any(a.Key, h.r.Value(x))
		default:
			text := fmt.Sprintf("%+v", x)
			if scrubbed := h.r.String(text); scrubbed != text {
				return slog.String(a.Key, scrubbed)
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// redactingStore scrubs, on their way into the store, the parts of a run
// that people read: failure messages, events, outbox payloads, questions
// and answers, stop reasons. Reads pass through. A run's vars and its
// checkpoint are kept as they are (a resume needs them); node outputs are
// scrubbed before they are recorded in it (runState.step).
type redactingStore struct {
	Store
	r *Redactor
}

func (s redactingStore) CreateRun(ctx context.Context, run *Run, events []Event) error {
	if run.Error != "" {
		cp := *run
		cp.Error = s.r.String(run.Error)
		run = &cp
	}
	return s.Store.CreateRun(ctx, run, s.r.events(events))
}

func (s redactingStore) Commit(ctx context.Context, c Change) error {
	c.Error = s.r.String(c.Error)
	c.Events = s.r.events(c.Events)
	if c.Interactions != nil {
		ixs := make([]*Interaction, len(c.Interactions))
		for i, ix := range c.Interactions {
			ixs[i] = s.r.interaction(ix)
		}
		c.Interactions = ixs
	}
	if c.Outbox != nil {
		rows := slices.Clone(c.Outbox)
		for i := range rows {
			rows[i].Payload = json.RawMessage(s.r.String(string(rows[i].Payload)))
		}
		c.Outbox = rows
	}
	return s.Store.Commit(ctx, c)
}

func (s redactingStore) RequestStop(ctx context.Context, runID, reason string) (*Run, error) {
	return s.Store.RequestStop(ctx, runID, s.r.String(reason))
}

func (s redactingStore) PostQuestion(ctx context.Context, q PostRequest) (*Interaction, error) {
	q.Questions = s.r.Map(q.Questions)
	return s.Store.PostQuestion(ctx, q)
}

// events returns copies of evs with their data scrubbed.
func (r *Redactor) events(evs []Event) []Event {
	if r == nil || evs == nil {
		return evs
	}
	out := make([]Event, len(evs))
	for i, ev := range evs {
		ev.Data = r.Map(ev.Data)
		out[i] = ev
	}
	return out
}

// interaction returns a copy of ix with its questions and answers
// scrubbed.
func (r *Redactor) interaction(ix *Interaction) *Interaction {
	if r == nil || ix == nil {
		return ix
	}
	cp := *ix
	cp.Questions, cp.Answers = r.Map(ix.Questions), r.Map(ix.Answers)
	return &cp
}
