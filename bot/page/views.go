package page

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// pageData is what every page's layout reads.
type pageData struct {
	Title  string
	Nav    string // the section shown: questions, runs
	Viewer Viewer
	// Notice is a message of the last action (role=status).
	Notice string
	// Live, when set, is the address of the page's live events.
	Live string
	// FirstPage marks a list whose live additions go on top.
	FirstPage bool
}

func (s *Server) base(r *http.Request, title, nav string) pageData {
	return pageData{Title: title, Nav: nav, Viewer: viewerOf(r), Notice: notice(r.URL.Query())}
}

// notice is the message of the last action, named by the query of the
// redirect after it; nothing of it is taken as text but the ids, which
// the template escapes.
func notice(q url.Values) string {
	id := q.Get("id")
	if !plainID(id) {
		return ""
	}
	switch q.Get("done") {
	case "answered":
		return "Your answer to " + id + " was recorded."
	case "cancelled":
		return "Run " + id + " is cancelled."
	case "resumed":
		return "Run " + id + " is running again."
	case "bulk":
		if n, err := strconv.Atoi(q.Get("n")); err == nil && n >= 0 {
			return strconv.Itoa(n) + " run(s) cancelled."
		}
	case "defaults":
		if n, err := strconv.Atoi(q.Get("n")); err == nil && n >= 0 {
			return strconv.Itoa(n) + " question(s) answered with their defaults."
		}
	}
	return ""
}

// plainID reports whether id looks like a run's or a question's id, and
// so may be repeated from a URL into a notice.
func plainID(id string) bool {
	if len(id) > 200 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func (s *Server) funcs() template.FuncMap {
	return template.FuncMap{
		"ago":    func(t time.Time) string { return ago(s.now().Sub(t)) },
		"until":  func(t time.Time) string { return until(t.Sub(s.now())) },
		"iso":    func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"clock":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
		"via":    delivery.ViaWords,
		"add":    func(a, b int) int { return a + b },
		"json":   prettyJSON,
		"status": func(s any) string { return statusWords(engine.Status(fmt.Sprint(s))) },
		"join":   strings.Join,
	}
}

// ago writes a duration past as people say it.
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + " h ago"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + " days ago"
}

// until writes a duration to come, or past for a deadline passed.
func until(d time.Duration) string {
	switch {
	case d < 0:
		return "passed " + ago(-d)
	case d < time.Hour:
		return "in " + strconv.Itoa(int(d/time.Minute)) + " min"
	case d < 48*time.Hour:
		return "in " + strconv.Itoa(int(d/time.Hour)) + " h"
	}
	return "in " + strconv.Itoa(int(d/(24*time.Hour))) + " days"
}

// statusWords writes a run's status for people.
func statusWords(s engine.Status) string {
	switch s {
	case engine.StatusPausedWaitingHuman:
		return "waiting for an answer"
	case engine.StatusFailedResumable:
		return "failed (resumable)"
	}
	return string(s)
}

func prettyJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// render writes the template name with d.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, d any) {
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, name, d); err != nil {
		s.log.Error("rendering a page failed", "page", name, "path", r.URL.Path, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// errorData is the error page's.
type errorData struct {
	pageData
	Status  int
	Message string
}

// fail answers with the error page saying msg, for people.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	v, _, _ := s.viewer(r)
	d := errorData{pageData: pageData{Title: http.StatusText(status), Viewer: v}, Status: status, Message: msg}
	s.render(w, r, status, "error", d)
}

// internal answers 500 for an unexpected error, whose detail goes to the
// log.
func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Error("admin page request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	s.fail(w, r, http.StatusInternalServerError, "Something went wrong on the server; the log says what.")
}

// row is a question as a row of the list shows it, for one viewer.
type row struct {
	Q     api.Question
	Where Link
	// Open is set while it can be answered; Closed says why it cannot
	// any more, when it is not answered.
	Open   bool
	Closed string
	// May and Why say whether the viewer may answer it, and why not.
	May bool
	Why string
	Who string
	// Posts link where it was posted.
	Posts []Link
	Form  []field
	// Next is where the answer's form returns to.
	Next string
	// Error is what was wrong with an answer just sent.
	Error string
}

// field is one control of an answer's form.
type field struct {
	// Kind is radios, text, textarea or number.
	Kind, Name, ID, Label, Hint, Value, Step string
	Options                                  []choice
}

// choice is one radio button.
type choice struct {
	Value, Label string
	Checked      bool
}

// makeRow shows q for viewer v; values are an answer sent back, to fill
// the form again.
func (s *Server) makeRow(ctx context.Context, c *permissionCache, v Viewer, q api.Question, next string, values url.Values) row {
	rw := row{Q: q, Next: next, Where: s.where(ctx, q.Run, q.Place)}
	switch {
	case !q.Pending():
	case q.Run.Status == engine.StatusFinished || q.Run.Status == engine.StatusFailed:
		rw.Closed = "The run " + string(q.Run.Status) + " before this was answered."
	case q.Kind == engine.KindBlocking && q.Run.Status != engine.StatusPausedWaitingHuman:
		rw.Closed = "The run is " + statusWords(q.Run.Status) + ", not waiting for this; resume it to be asked again."
	default:
		rw.Open = true
	}
	if rw.Open {
		d := s.cachedMay(ctx, c, v, q.Run, ActAnswer)
		rw.May, rw.Why = d.OK || escalatedTo(q, v), d.Why
		rw.Who = s.cachedWho(ctx, c, q.Run)
		if len(q.EscalatedTo) > 0 {
			rw.Who += "; escalated to " + strings.Join(q.EscalatedTo, ", ")
		}
		if rw.May {
			rw.Form = formFor(q, values)
		}
	}
	rw.Posts = s.posts(ctx, q)
	return rw
}

// where is the place of a run, linked to its own post on its channel.
func (s *Server) where(ctx context.Context, run *engine.Run, p api.Place) Link {
	var l Link
	switch {
	case p.Repo != "" && p.PR != 0:
		l.Label = p.Repo + " #" + strconv.Itoa(p.PR)
	case p.Repo != "":
		l.Label = p.Repo
	case p.Schedule != "":
		l.Label = "schedule " + p.Schedule
	default:
		l.Label = "started from " + delivery.ViaWords(p.Channel)
	}
	if link := s.opts.RunLinks[p.Channel]; link != nil {
		if posts, err := s.store.RunPosts(ctx, run.ID); err == nil {
			l.URL = link(posts).URL
		}
	}
	return l
}

// posts links the channels' posts of q, read from the store: whatever
// channel recorded one shows, linked when the page knows how.
func (s *Server) posts(ctx context.Context, q api.Question) []Link {
	if len(q.Posts) == 0 {
		return nil
	}
	var runPosts map[string]string
	var out []Link
	for _, ch := range slices.Sorted(maps.Keys(q.Posts)) {
		linker := s.opts.Links[ch]
		if linker == nil {
			out = append(out, Link{Label: "on " + delivery.ViaWords(ch)})
			continue
		}
		if runPosts == nil {
			runPosts, _ = s.store.RunPosts(ctx, q.RunID)
		}
		out = append(out, linker(runPosts, q.Posts[ch]))
	}
	return out
}

// formFor is the form answering q: its options as radios and free text,
// or a form's fields typed from its schema.
func formFor(q api.Question, values url.Values) []field {
	id := func(name string) string { return "f-" + q.ID + "-" + name }
	if len(q.Fields) > 0 && !(len(q.Fields) == 1 && q.Fields[0].Name == engine.QuestionKey) {
		var out []field
		for _, f := range q.Fields {
			name := "f." + f.Name
			fl := field{Name: name, ID: id(f.Name), Label: f.Name, Hint: q.Hints[f.Name], Value: values.Get(name)}
			switch {
			case f.Type == "bool":
				fl.Kind = "radios"
				fl.Options = []choice{{Value: "true", Label: "yes"}, {Value: "false", Label: "no"}}
			case len(f.Enum) > 0:
				fl.Kind = "radios"
				for _, e := range f.Enum {
					fl.Options = append(fl.Options, choice{Value: e, Label: e})
				}
			case f.Type == "int":
				fl.Kind, fl.Step = "number", "1"
			case f.Type == "float":
				fl.Kind, fl.Step = "number", "any"
			case f.Type == "string":
				fl.Kind = "text"
			default:
				fl.Kind = "textarea"
				fl.Hint = strings.TrimSpace(fl.Hint + " (JSON)")
			}
			for i := range fl.Options {
				fl.Options[i].Checked = fl.Options[i].Value == fl.Value
			}
			out = append(out, fl)
		}
		return out
	}
	var out []field
	if len(q.Options) > 0 {
		fl := field{Kind: "radios", Name: "option", ID: id("option"), Label: "Options", Value: values.Get("option")}
		for _, o := range q.Options {
			// The label is what the agent reads back, as on every channel.
			fl.Options = append(fl.Options, choice{Value: o.Label, Label: o.Label, Checked: o.Label == fl.Value})
		}
		out = append(out, fl)
	}
	if q.FreeText || len(q.Options) == 0 {
		label := "Your answer"
		if len(q.Options) > 0 {
			label = "Or your own words"
		}
		out = append(out, field{Kind: "textarea", Name: "text", ID: id("text"), Label: label, Value: values.Get("text")})
	}
	return out
}

// questionsData is the list's.
type questionsData struct {
	pageData
	Rows    []row
	Total   int
	Filter  listFilter
	Prev    string
	NextURL string
	From    int
	To      int
}

// listFilter is the list's filters as the URL writes them.
type listFilter struct {
	Repo, Run, OlderThan, DeadlineWithin string
	Mine                                 bool
	Page                                 int
}

// pageSize is the list's rows per page.
const pageSize = 100

// parseListFilter reads the list's filters from the URL.
func parseListFilter(q url.Values) (listFilter, api.QuestionFilter, error) {
	lf := listFilter{Repo: q.Get("repo"), Run: q.Get("run"), OlderThan: q.Get("older_than"), DeadlineWithin: q.Get("deadline_within"), Mine: q.Get("mine") == "1"}
	lf.Page = 1
	if p := q.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return lf, api.QuestionFilter{}, fmt.Errorf("page=%q is not a page number: write 1, 2, …", p)
		}
		lf.Page = n
	}
	aq := url.Values{"repo": {lf.Repo}, "run": {lf.Run}, "older_than": {lf.OlderThan}, "deadline_within": {lf.DeadlineWithin}}
	f, err := api.ParseQuestionFilter(aq)
	if err != nil {
		return lf, f, err
	}
	f.Offset, f.Limit = (lf.Page-1)*pageSize, pageSize
	return lf, f, nil
}

// query writes the filters back as a query string, page p.
func (lf listFilter) query(p int) string {
	q := url.Values{}
	for k, v := range map[string]string{"repo": lf.Repo, "run": lf.Run, "older_than": lf.OlderThan, "deadline_within": lf.DeadlineWithin} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if lf.Mine {
		q.Set("mine", "1")
	}
	if p > 1 {
		q.Set("page", strconv.Itoa(p))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// allowMine keeps, for "asked to me", the runs whose questions v may
// answer.
func (s *Server) allowMine(c *permissionCache, v Viewer) func(ctx context.Context, run *engine.Run, _ api.Place) bool {
	return func(ctx context.Context, run *engine.Run, _ api.Place) bool {
		return s.cachedMay(ctx, c, v, run, ActAnswer).OK
	}
}

func (s *Server) questionsPage(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r)
	lf, f, err := parseListFilter(r.URL.Query())
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "This list's address has a mistake: "+err.Error()+".")
		return
	}
	c := newPermissionCache()
	if lf.Mine {
		f.Allow = s.allowMine(c, v)
	}
	page, err := s.reader.Questions(r.Context(), f)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	d := questionsData{pageData: s.base(r, "Questions waiting for an answer", "questions"), Total: page.Total, Filter: lf}
	d.Live = "/events" + liveQuery(r.URL.Query(), "questions", liveSince(r))
	d.FirstPage = lf.Page == 1
	next := "/" + lf.query(lf.Page)
	for _, q := range page.Questions {
		d.Rows = append(d.Rows, s.makeRow(r.Context(), c, v, q, next, nil))
	}
	d.From, d.To = f.Offset+1, f.Offset+len(page.Questions)
	if lf.Page > 1 {
		d.Prev = "/" + lf.query(lf.Page-1)
	}
	if f.Offset+len(page.Questions) < page.Total {
		d.NextURL = "/" + lf.query(lf.Page+1)
	}
	s.render(w, r, http.StatusOK, "questions", d)
}

// liveQuery is the query of a page's live events: its own filters, and
// the view.
func liveQuery(q url.Values, view string, since int64) string {
	out := url.Values{"view": {view}, "since": {strconv.FormatInt(since, 10)}}
	for _, k := range []string{"repo", "run", "mine", "older_than", "deadline_within", "status"} {
		if v := q.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	return "?" + out.Encode()
}

// splitQuestionID finds the run of a question id: run ids match
// [a-z0-9-] (engine.ValidRunID), and every interaction id starts with its
// run's id and an underscore.
func splitQuestionID(id string) (runID string, ok bool) {
	runID, _, ok = strings.Cut(id, "_")
	return runID, ok && engine.ValidRunID(runID)
}

// questionData is the question page's.
type questionData struct {
	pageData
	Row row
}

func (s *Server) questionPage(w http.ResponseWriter, r *http.Request) {
	s.showQuestion(w, r, http.StatusOK, r.PathValue("id"), nil, "")
}

// showQuestion writes the page of question id, with values and problem
// from an answer that was not taken.
func (s *Server) showQuestion(w http.ResponseWriter, r *http.Request, status int, id string, values url.Values, problem string) {
	runID, ok := splitQuestionID(id)
	if !ok {
		s.fail(w, r, http.StatusNotFound, "There is no question "+id+".")
		return
	}
	q, err := s.reader.Question(r.Context(), runID, id)
	if errors.Is(err, engine.ErrNotFound) {
		s.fail(w, r, http.StatusNotFound, "There is no question "+id+": it never was, or its run was removed.")
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	next := localPath(r.PostFormValue("next"))
	if r.Method == http.MethodGet {
		next = "/q/" + url.PathEscape(id)
	}
	d := questionData{pageData: s.base(r, "Question "+id, "questions")}
	d.Live = "/events" + liveQuery(url.Values{"run": {runID}}, "question", liveSince(r))
	d.Row = s.makeRow(r.Context(), newPermissionCache(), viewerOf(r), q, next, values)
	d.Row.Error = problem
	s.render(w, r, status, "question", d)
}

// answer takes an answer from the form, through the engine's door, as
// every channel does; it sends the person back, or shows the form again
// with what to fix.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r)
	id := r.PathValue("id")
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "The answer could not be read: send it from the question's form.")
		return
	}
	runID, ok := splitQuestionID(id)
	if !ok {
		s.fail(w, r, http.StatusNotFound, "There is no question "+id+".")
		return
	}
	q, err := s.reader.Question(r.Context(), runID, id)
	if errors.Is(err, engine.ErrNotFound) {
		s.fail(w, r, http.StatusNotFound, "There is no question "+id+".")
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if ok, why := s.may(r.Context(), v, q.Run, ActAnswer, true); !ok && !escalatedTo(q, v) {
		s.fail(w, r, http.StatusForbidden, "You may not answer this question: "+why+".")
		return
	}
	req := engine.AnswerRequest{RunID: runID, InteractionID: id, By: v.Login, Via: Via}
	if len(q.Fields) > 0 && !(len(q.Fields) == 1 && q.Fields[0].Name == engine.QuestionKey) {
		req.Fields = map[string]any{}
		for _, f := range q.Fields {
			if val, ok := r.PostForm["f."+f.Name]; ok && len(val) > 0 && val[0] != "" {
				req.Fields[f.Name] = val[0]
			}
		}
	} else {
		req.Text = strings.TrimSpace(r.PostFormValue("text"))
		if req.Text == "" {
			req.Text = r.PostFormValue("option")
		}
		if req.Text == "" {
			s.showQuestion(w, r, http.StatusUnprocessableEntity, id, r.PostForm, "Write an answer, or pick an option, before sending.")
			return
		}
	}
	_, err = s.doors.Answer(r.Context(), req)
	var bad *engine.InvalidAnswerError
	var already *engine.AlreadyAnsweredError
	var notWaiting *engine.NotWaitingError
	switch {
	case errors.As(err, &bad):
		s.showQuestion(w, r, http.StatusUnprocessableEntity, id, r.PostForm, "Your answer was not taken: "+bad.Error()+".")
		return
	case errors.As(err, &already):
		s.fail(w, r, http.StatusConflict, fmt.Sprintf("This question was already answered by %s via %s; your answer was not used.", already.AnsweredBy, delivery.ViaWords(already.Via)))
		return
	case errors.As(err, &notWaiting):
		s.fail(w, r, http.StatusConflict, fmt.Sprintf("Run %s is %s, not waiting for this question; your answer was not used.", runID, statusWords(notWaiting.Status)))
		return
	case errors.Is(err, engine.ErrRunEnded):
		s.fail(w, r, http.StatusGone, "Run "+runID+" has ended; this question can no longer be answered.")
		return
	case errors.Is(err, engine.ErrEmptyAnswer):
		s.showQuestion(w, r, http.StatusUnprocessableEntity, id, r.PostForm, "Write an answer before sending.")
		return
	case errors.Is(err, engine.ErrWorkflowChanged):
		s.fail(w, r, http.StatusConflict, "Run "+runID+" cannot continue: its workflow changed since it started.")
		return
	case err != nil:
		s.internal(w, r, err)
		return
	}
	s.done(w, r, "answered", id)
}

// escalatedTo reports whether q was escalated to v's GitHub login, who
// may then answer it too.
func escalatedTo(q api.Question, v Viewer) bool {
	if v.Admin {
		return false
	}
	return slices.ContainsFunc(q.EscalatedTo, func(who string) bool { return strings.EqualFold(who, v.Login) })
}

// done sends the person back where the form said, with the notice of
// what was done.
func (s *Server) done(w http.ResponseWriter, r *http.Request, what, id string) {
	u, err := url.Parse(localPath(r.PostFormValue("next")))
	if err != nil {
		u = &url.URL{Path: "/"}
	}
	q := u.Query()
	q.Set("done", what)
	q.Set("id", id)
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}
