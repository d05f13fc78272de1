package page

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/iterion-bot/iterion/bot/api"
	"github.com/iterion-bot/iterion/engine"
)

// runRow is a run as the list shows it.
type runRow struct {
	Run   *engine.Run
	Where Link
}

// runsData is the runs list's.
type runsData struct {
	pageData
	Rows     []runRow
	Total    int
	Status   string
	Repo     string
	Statuses []string
	Prev     string
	NextURL  string
}

// runStatuses are the statuses the list filters by, in the order shown.
var runStatuses = []string{"running", "paused_waiting_human", "failed_resumable", "cancelled", "failed", "finished"}

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status, repo := q.Get("status"), strings.TrimSpace(q.Get("repo"))
	if status != "" && !slices.Contains(runStatuses, status) {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("status=%q is not a run status: use one of %s.", status, strings.Join(runStatuses, ", ")))
		return
	}
	p := 1
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("page=%q is not a page number: write 1, 2, …", v))
			return
		}
		p = n
	}
	page, err := s.reader.Runs(r.Context(), api.RunFilter{Status: engine.Status(status), Repo: repo, Offset: (p - 1) * pageSize, Limit: pageSize})
	if err != nil {
		s.internal(w, r, err)
		return
	}
	d := runsData{pageData: s.base(r, "Runs", "runs"), Total: page.Total, Status: status, Repo: repo, Statuses: runStatuses}
	d.Live = "/events" + liveQuery(q, "runs", liveSince(r))
	d.FirstPage = p == 1
	link := func(p int) string {
		v := url.Values{}
		if status != "" {
			v.Set("status", status)
		}
		if repo != "" {
			v.Set("repo", repo)
		}
		if p > 1 {
			v.Set("page", strconv.Itoa(p))
		}
		if len(v) == 0 {
			return "/runs"
		}
		return "/runs?" + v.Encode()
	}
	if p > 1 {
		d.Prev = link(p - 1)
	}
	if page.Offset+len(page.Runs) < page.Total {
		d.NextURL = link(p + 1)
	}
	for _, run := range page.Runs {
		d.Rows = append(d.Rows, runRow{Run: run, Where: s.where(r.Context(), run, s.reader.Place(run))})
	}
	s.render(w, r, http.StatusOK, "runs", d)
}

// runData is a run's page.
type runData struct {
	pageData
	Run   *engine.Run
	Where Link
	// Running are the steps executing now.
	Running []string
	// Timeline is the run's events, the last maxTimeline of them; Earlier
	// counts those left out.
	Timeline []entry
	Earlier  int
	// Outputs are the latest output of each node, Artifacts the latest
	// version of each artifact.
	Outputs   []named
	Artifacts []named
	Questions []row
	// CanCancel and CanResume say whether the run's status allows it;
	// Cancel and Resume whether the viewer may.
	CanCancel, CanResume bool
	Cancel, Resume       decision
}

// entry is one event of a run's timeline.
type entry struct {
	Seq    int64
	Time   time.Time
	Type   string
	Node   string
	Detail string
}

// named is a node's output or an artifact, as JSON.
type named struct {
	Name     string
	Versions int
	JSON     string
}

// maxTimeline bounds the events a run's page shows.
const maxTimeline = 500

func (s *Server) runPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	v := viewerOf(r)
	run, err := s.store.Run(ctx, r.PathValue("id"))
	if errors.Is(err, engine.ErrNotFound) {
		s.fail(w, r, http.StatusNotFound, "There is no run "+r.PathValue("id")+": it never was, or it was removed after its retention.")
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	d := runData{pageData: s.base(r, "Run "+run.ID, "runs"), Run: run, Where: s.where(ctx, run, s.reader.Place(run))}
	d.Live = "/events" + liveQuery(url.Values{"run": {run.ID}}, "run", liveSince(r))
	evs, err := s.store.Events(ctx, run.ID, 0, 0)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	d.Running = running(evs)
	if len(evs) > maxTimeline {
		d.Earlier = len(evs) - maxTimeline
		evs = evs[len(evs)-maxTimeline:]
	}
	for _, ev := range evs {
		d.Timeline = append(d.Timeline, entryOf(ev))
	}
	outputs, err := engine.ReadOutputs(ctx, s.store, run.ID)
	if err != nil {
		s.log.Warn("reading a run's outputs failed", "run", run.ID, "err", err)
	}
	for _, node := range slices.Sorted(maps.Keys(outputs)) {
		d.Outputs = append(d.Outputs, named{Name: node, JSON: cut(prettyJSON(outputs[node]), 20000)})
	}
	raw, err := s.store.Checkpoint(ctx, run.ID)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		s.internal(w, r, err)
		return
	}
	if snap, err := engine.ReadSnapshot(raw); err == nil {
		for _, name := range slices.Sorted(maps.Keys(snap.Artifacts)) {
			d.Artifacts = append(d.Artifacts, named{Name: name, Versions: snap.Versions[name], JSON: cut(prettyJSON(snap.Artifacts[name]), 20000)})
		}
	}
	qs, err := s.reader.RunQuestions(ctx, run)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	c := newPermissionCache()
	next := "/runs/" + url.PathEscape(run.ID)
	for _, q := range qs {
		d.Questions = append(d.Questions, s.makeRow(ctx, c, v, q, next, nil))
	}
	d.CanCancel = !run.Status.Terminal()
	d.CanResume = run.Status == engine.StatusCancelled || run.Status == engine.StatusFailedResumable
	if d.CanCancel {
		d.Cancel = s.cachedMay(ctx, c, v, run, ActCancel)
	}
	if d.CanResume {
		d.Resume = s.cachedMay(ctx, c, v, run, ActResume)
	}
	s.render(w, r, http.StatusOK, "run", d)
}

// running folds a run's events into the steps executing at the last one.
func running(evs []engine.Event) []string {
	var order []string
	on := map[string]bool{}
	for _, ev := range evs {
		key := ev.NodeID
		if ev.BranchID != "" {
			key = ev.BranchID + "/" + ev.NodeID
		}
		switch ev.Type {
		case engine.EventNodeStarted:
			if !on[key] {
				order = append(order, key)
			}
			on[key] = true
		case engine.EventNodeFinished:
			on[key] = false
		case engine.EventRunFinished, engine.EventRunFailed, engine.EventRunCancelled, engine.EventRunPaused:
			clear(on)
		}
	}
	var out []string
	for _, k := range order {
		if on[k] {
			out = append(out, k)
			on[k] = false
		}
	}
	return out
}

// entryOf shows an event in the timeline: its data but the bulky parts,
// cut short.
func entryOf(ev engine.Event) entry {
	e := entry{Seq: ev.Seq, Time: ev.Time, Type: ev.Type, Node: ev.NodeID}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(ev.Data)) {
		if k == "output" || k == "vars" {
			continue // on the page's outputs, and the run's header
		}
		parts = append(parts, k+"="+cut(dataText(ev.Data[k]), 200))
	}
	e.Detail = cut(strings.Join(parts, " "), 600)
	return e
}

// dataText writes an event's value: text as it is, anything else as JSON.
func dataText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// cut shortens s to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + " …"
}

// readRun reads the run of a form's action, writing the error page when
// there is none.
func (s *Server) readRun(w http.ResponseWriter, r *http.Request, id string) (*engine.Run, bool) {
	run, err := s.store.Run(r.Context(), id)
	if errors.Is(err, engine.ErrNotFound) {
		s.fail(w, r, http.StatusNotFound, "There is no run "+id+".")
		return nil, false
	}
	if err != nil {
		s.internal(w, r, err)
		return nil, false
	}
	return run, true
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r)
	run, ok := s.readRun(w, r, r.PathValue("id"))
	if !ok {
		return
	}
	if ok, why := s.may(r.Context(), v, run, ActCancel, true); !ok {
		s.fail(w, r, http.StatusForbidden, "You may not cancel run "+run.ID+": "+why+".")
		return
	}
	stopped, err := s.doors.Stop(r.Context(), run.ID, "cancelled by "+v.Login+" via the admin page")
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if !stopped {
		s.fail(w, r, http.StatusConflict, "Run "+run.ID+" had already stopped ("+statusWords(run.Status)+"); nothing was cancelled.")
		return
	}
	s.done(w, r, "cancelled", run.ID)
}

func (s *Server) resumeRun(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r)
	run, ok := s.readRun(w, r, r.PathValue("id"))
	if !ok {
		return
	}
	if ok, why := s.may(r.Context(), v, run, ActResume, true); !ok {
		s.fail(w, r, http.StatusForbidden, "You may not resume run "+run.ID+": "+why+".")
		return
	}
	_, err := s.doors.Continue(r.Context(), run.ID, v.Login, Via)
	var notResumable *engine.NotResumableError
	switch {
	case errors.As(err, &notResumable):
		s.fail(w, r, http.StatusConflict, notResumable.Error()+".")
		return
	case errors.Is(err, engine.ErrWorkflowChanged):
		s.fail(w, r, http.StatusConflict, "Run "+run.ID+" cannot be resumed: its workflow changed since it started.")
		return
	case errors.Is(err, engine.ErrStatusChanged):
		s.fail(w, r, http.StatusConflict, "Run "+run.ID+" changed meanwhile (stopped or resumed by someone else); look at it again.")
		return
	case err != nil:
		s.internal(w, r, err)
		return
	}
	s.done(w, r, "resumed", run.ID)
}

// confirmData is the bulk cancel's confirm step.
type confirmData struct {
	pageData
	Runs []runRow
	// Refused are the runs the viewer may not cancel, or that stopped.
	Refused []refusal
}

type refusal struct {
	ID, Why string
}

// selectedRuns reads the runs ticked on the runs list for a bulk action:
// their ids, sorted and each once, at most api.MaxLimit. which says of the
// runs what the action needs ("to cancel"), and verb what it does with
// them ("cancel"), for the refusals, which it writes (ok false then).
func (s *Server) selectedRuns(w http.ResponseWriter, r *http.Request, which, verb string) (ids []string, ok bool) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "The selection could not be read: send it from the runs list.")
		return nil, false
	}
	ids = slices.Compact(slices.Sorted(slices.Values(r.PostForm["run"])))
	if len(ids) == 0 {
		s.fail(w, r, http.StatusBadRequest, "No run was selected: tick the runs "+which+" on the runs list first.")
		return nil, false
	}
	if len(ids) > api.MaxLimit {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%d runs selected; %s at most %d at once.", len(ids), verb, api.MaxLimit))
		return nil, false
	}
	return ids, true
}

// bulkCancel cancels the runs selected on the list: first a page that
// lists them and asks to confirm, then, confirmed, each through the
// engine's door, with its own permission check.
func (s *Server) bulkCancel(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r)
	ids, ok := s.selectedRuns(w, r, "to cancel", "cancel")
	if !ok {
		return
	}
	d := confirmData{pageData: s.base(r, "Cancel runs", "runs")}
	c := newPermissionCache()
	var runs []*engine.Run
	for _, id := range ids {
		run, err := s.store.Run(r.Context(), id)
		switch {
		case errors.Is(err, engine.ErrNotFound):
			d.Refused = append(d.Refused, refusal{ID: id, Why: "no such run"})
			continue
		case err != nil:
			s.internal(w, r, err)
			return
		case run.Status.Terminal():
			d.Refused = append(d.Refused, refusal{ID: id, Why: "already " + statusWords(run.Status)})
			continue
		}
		if dec := s.cachedMay(r.Context(), c, v, run, ActCancel); !dec.OK {
			d.Refused = append(d.Refused, refusal{ID: id, Why: dec.Why})
			continue
		}
		runs = append(runs, run)
	}
	if r.PostFormValue("confirm") != "yes" {
		for _, run := range runs {
			d.Runs = append(d.Runs, runRow{Run: run, Where: s.where(r.Context(), run, s.reader.Place(run))})
		}
		s.render(w, r, http.StatusOK, "confirm", d)
		return
	}
	n := 0
	for _, run := range runs {
		if ok, _ := s.may(r.Context(), v, run, ActCancel, true); !ok {
			continue
		}
		stopped, err := s.doors.Stop(r.Context(), run.ID, "cancelled by "+v.Login+" via the admin page")
		if err != nil {
			s.log.Error("cancelling a run of a bulk cancel failed", "run", run.ID, "err", err)
			continue
		}
		if stopped {
			n++
		}
	}
	http.Redirect(w, r, "/runs?done=bulk&id=runs&n="+strconv.Itoa(n), http.StatusSeeOther)
}

// defaultsData is the bulk apply-default's confirm step: the questions
// whose defaults would answer them, by run.
type defaultsData struct {
	pageData
	Runs    []runDefaults
	Refused []refusal
}

type runDefaults struct {
	Run       runRow
	Questions []questionDefault
}

type questionDefault struct {
	ID, Text, Default string
}

// applyDefaults answers, in the runs selected on the list, every open
// question that has a default with it, as if it had expired: first a
// page that lists the runs and their questions with their defaults, then,
// confirmed, each through the engine's Answer door as the viewer via the
// page, with its run's permission check.
func (s *Server) applyDefaults(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r)
	ids, ok := s.selectedRuns(w, r, "whose questions get their defaults", "apply the defaults of")
	if !ok {
		return
	}
	d := defaultsData{pageData: s.base(r, "Answer questions with their defaults", "runs")}
	c := newPermissionCache()
	type todo struct {
		run *engine.Run
		qs  []*engine.Interaction
	}
	var work []todo
	for _, id := range ids {
		run, err := s.store.Run(r.Context(), id)
		switch {
		case errors.Is(err, engine.ErrNotFound):
			d.Refused = append(d.Refused, refusal{ID: id, Why: "no such run"})
			continue
		case err != nil:
			s.internal(w, r, err)
			return
		case run.Status == engine.StatusFinished || run.Status == engine.StatusFailed:
			d.Refused = append(d.Refused, refusal{ID: id, Why: "already " + statusWords(run.Status)})
			continue
		}
		if dec := s.cachedMay(r.Context(), c, v, run, ActAnswer); !dec.OK {
			d.Refused = append(d.Refused, refusal{ID: id, Why: dec.Why})
			continue
		}
		all, err := s.store.Interactions(r.Context(), run.ID)
		if err != nil {
			s.internal(w, r, err)
			return
		}
		t := todo{run: run}
		for _, ix := range all {
			if ix.Pending() && ix.Kind != engine.KindAwait && ix.FollowUp != nil && len(ix.FollowUp.Default) > 0 {
				t.qs = append(t.qs, ix)
			}
		}
		if len(t.qs) == 0 {
			d.Refused = append(d.Refused, refusal{ID: id, Why: "no open question with a default"})
			continue
		}
		work = append(work, t)
	}
	if r.PostFormValue("confirm") != "yes" {
		for _, t := range work {
			rd := runDefaults{Run: runRow{Run: t.run, Where: s.where(r.Context(), t.run, s.reader.Place(t.run))}}
			for _, ix := range t.qs {
				text := ix.Question()
				if text == "" {
					text, _ = ix.Questions["_instructions"].(string)
				}
				rd.Questions = append(rd.Questions, questionDefault{ID: ix.ID, Text: cut(text, 300), Default: defaultWords(ix.FollowUp.Default)})
			}
			d.Runs = append(d.Runs, rd)
		}
		s.render(w, r, http.StatusOK, "defaults", d)
		return
	}
	n := 0
	for _, t := range work {
		if ok, _ := s.may(r.Context(), v, t.run, ActAnswer, true); !ok {
			continue
		}
		for _, ix := range t.qs {
			req := engine.AnswerRequest{RunID: t.run.ID, InteractionID: ix.ID, By: v.Login, Via: Via}
			if text, ok := ix.FollowUp.Default[engine.QuestionKey]; ok && ix.Kind == engine.KindAsync {
				req.Text = text
			} else {
				req.Fields = map[string]any{}
				for k, val := range ix.FollowUp.Default {
					req.Fields[k] = val
				}
			}
			if _, err := s.doors.Answer(r.Context(), req); err != nil {
				s.log.Warn("answering a question with its default failed", "run", t.run.ID, "question", ix.ID, "err", err)
				continue
			}
			n++
		}
	}
	http.Redirect(w, r, "/runs?done=defaults&id=runs&n="+strconv.Itoa(n), http.StatusSeeOther)
}

// defaultWords writes a default answer for people.
func defaultWords(d map[string]string) string {
	if text, ok := d[engine.QuestionKey]; ok && len(d) == 1 {
		return text
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(d)) {
		parts = append(parts, k+": "+d[k])
	}
	return strings.Join(parts, ", ")
}

// runHead is what a run page's live update of its header reads.
func (s *Server) runHead(ctx context.Context, v Viewer, run *engine.Run) runData {
	d := runData{Run: run, Where: s.where(ctx, run, s.reader.Place(run)), pageData: pageData{Viewer: v}}
	if evs, err := s.store.Events(ctx, run.ID, 0, 0); err == nil {
		d.Running = running(evs)
	}
	c := newPermissionCache()
	d.CanCancel = !run.Status.Terminal()
	d.CanResume = run.Status == engine.StatusCancelled || run.Status == engine.StatusFailedResumable
	if d.CanCancel {
		d.Cancel = s.cachedMay(ctx, c, v, run, ActCancel)
	}
	if d.CanResume {
		d.Resume = s.cachedMay(ctx, c, v, run, ActResume)
	}
	return d
}
