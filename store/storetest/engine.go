package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/iterion-bot/iterion/engine"
)

// RunEngine checks that a store implements the contract of
// engine.Store: every intent, one winner among concurrent answers, async
// ids that are never reused, node-scoped FIFO inboxes, per-run event
// sequences, the owner lease, and the outbox. Every implementation (this
// Badger one, a future PostgreSQL one) runs it from its tests.
//
// open must return a new, empty store for each call and close it in a
// t.Cleanup. The subtests run in parallel, so open must be safe to call
// concurrently. The suite does not depend on the store's clock: where order
// by time matters it gives the times itself.
func RunEngine(t *testing.T, open func(t *testing.T) engine.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s engine.Store)
	}{
		{"CreateRun", testCreateRun},
		{"Runs", testRuns},
		{"Acquire", testAcquire},
		{"CommitStatus", testCommitStatus},
		{"RequestStop", testRequestStop},
		{"CommitCheckpoint", testCommitCheckpoint},
		{"History", testHistory},
		{"CommitInteractions", testCommitInteractions},
		{"PostQuestion", testPostQuestion},
		{"AsyncIDs", testAsyncIDs},
		{"PostAgain", testPostAgain},
		{"Pending", testPending},
		{"Answer", testAnswer},
		{"AnswerRefusals", testAnswerRefusals},
		{"AnswerTwice", testAnswerTwice},
		{"ConcurrentAnswers", testConcurrentAnswers},
		{"DrainInbox", testDrainInbox},
		{"Events", testEvents},
		{"ConcurrentCommits", testConcurrentCommits},
		{"OutboxChannels", testOutboxChannels},
		{"OutboxDue", testOutboxDue},
		{"NotFound", testNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, open(t))
		})
	}
}

// suiteT0 is the suite's time origin; suiteTime gives the times the
// suite sets, hours after it.
var suiteT0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// noLimit is a limit larger than anything the suite stores; the suite does
// not assume what a limit of 0 means.
const noLimit = 1 << 20

func suiteTime(hours int) time.Time { return suiteT0.Add(time.Duration(hours) * time.Hour) }

// MustCreateRun creates a running run created at suiteT0 (plus hours) with the given
// channels and returns it as stored.
func MustCreateRun(t testing.TB, s engine.Store, id string, hours int, channels ...string) *engine.Run {
	t.Helper()
	run := &engine.Run{
		ID:           id,
		Workflow:     "wf",
		WorkflowHash: "h1",
		Status:       engine.StatusRunning,
		Trigger:      engine.Trigger{Source: "cli"},
		Channels:     channels,
		CreatedAt:    suiteTime(hours),
		UpdatedAt:    suiteTime(hours),
	}
	if err := s.CreateRun(t.Context(), run, nil); err != nil {
		t.Fatalf("CreateRun(%s): %v", id, err)
	}
	got, err := s.Run(t.Context(), id)
	if err != nil {
		t.Fatalf("Run(%s): %v", id, err)
	}
	return got
}

// MustPost posts the async question text for node.
func MustPost(t testing.TB, s engine.Store, run *engine.Run, node, text string) *engine.Interaction {
	t.Helper()
	ix, err := s.PostQuestion(t.Context(), engine.PostRequest{
		RunID:      run.ID,
		Generation: run.Generation,
		NodeID:     node,
		Questions:  map[string]any{engine.QuestionKey: text},
	})
	if err != nil {
		t.Fatalf("PostQuestion(%s, %s): %v", run.ID, node, err)
	}
	return ix
}

// MustAnswer answers a question.
func MustAnswer(t testing.TB, s engine.Store, runID, id, text, by string) *engine.AnswerResult {
	t.Helper()
	res, err := s.Answer(t.Context(), engine.AnswerRequest{RunID: runID, InteractionID: id, Text: text, By: by, Via: "cli"})
	if err != nil {
		t.Fatalf("Answer(%s): %v", id, err)
	}
	return res
}

// MustCommit commits c.
func MustCommit(t testing.TB, s engine.Store, c engine.Change) {
	t.Helper()
	if err := s.Commit(t.Context(), c); err != nil {
		t.Fatalf("Commit(%s): %v", c.RunID, err)
	}
}

// interactionIDs lists the ids of ixs, never nil.
func interactionIDs(ixs []*engine.Interaction) []string {
	out := []string{}
	for _, ix := range ixs {
		out = append(out, ix.ID)
	}
	return out
}

// eventLabels lists events as "<seq>:<type>", never nil.
func eventLabels(evs []engine.Event) []string {
	out := []string{}
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%d:%s", ev.Seq, ev.Type))
	}
	return out
}

// mustEvents returns all the events of a run.
func mustEvents(t testing.TB, s engine.Store, runID string) []engine.Event {
	t.Helper()
	evs, err := s.Events(t.Context(), runID, 0, noLimit)
	if err != nil {
		t.Fatalf("Events(%s): %v", runID, err)
	}
	return evs
}

func testCreateRun(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := &engine.Run{
		ID:           "r-create",
		Workflow:     "review",
		WorkflowHash: "abc",
		File:         "review.bot",
		Status:       engine.StatusRunning,
		Vars:         map[string]any{"pr": "42"},
		Trigger:      engine.Trigger{Source: "github", Actor: "alice", Ref: "github/o/r#42", Details: json.RawMessage(`{"repo":"o/r","pr":42,"comment_id":7}`)},
		Channels:     []string{"github", "slack"},
		CreatedAt:    suiteTime(0),
		UpdatedAt:    suiteTime(0),
	}
	events := []engine.Event{
		{Type: engine.EventRunStarted, Time: suiteTime(0)},
		{Type: engine.EventNodeStarted, NodeID: "plan", Time: suiteTime(0)},
	}
	if err := s.CreateRun(ctx, run, events); err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	got, err := s.Run(ctx, run.ID)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if diff := cmp.Diff(run, got); diff != "" {
		t.Errorf("Run mismatch (-want +got):\n%s", diff)
	}
	wantEvents := []engine.Event{
		{Seq: 1, Type: engine.EventRunStarted, RunID: run.ID, Time: suiteTime(0)},
		{Seq: 2, Type: engine.EventNodeStarted, RunID: run.ID, NodeID: "plan", Time: suiteTime(0)},
	}
	if diff := cmp.Diff(wantEvents, mustEvents(t, s, run.ID)); diff != "" {
		t.Errorf("Events mismatch (-want +got):\n%s", diff)
	}

	again := *run
	again.Workflow = "other"
	err = s.CreateRun(ctx, &again, []engine.Event{{Type: engine.EventRunStarted}})
	if !errors.Is(err, engine.ErrRunExists) {
		t.Errorf("CreateRun of a taken id: err=%v, want ErrRunExists", err)
	}
	got, err = s.Run(ctx, run.ID)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got.Workflow != "review" {
		t.Errorf("Workflow=%q after refused CreateRun, want review", got.Workflow)
	}
	if n := len(mustEvents(t, s, run.ID)); n != 2 {
		t.Errorf("%d events after refused CreateRun, want 2", n)
	}
}

func testRuns(t *testing.T, s engine.Store) {
	ctx := t.Context()
	for _, r := range []struct {
		id     string
		hours  int
		status engine.Status
	}{
		{"r-a", 0, engine.StatusFinished},
		{"r-b", 1, engine.StatusPausedWaitingHuman},
		{"r-c", 2, engine.StatusFinished},
		{"r-d", 2, engine.StatusRunning}, // same time as r-c: the greater id first
	} {
		run := &engine.Run{ID: r.id, Workflow: "wf", Status: r.status, CreatedAt: suiteTime(r.hours), UpdatedAt: suiteTime(r.hours)}
		if err := s.CreateRun(ctx, run, nil); err != nil {
			t.Fatalf("CreateRun(%s): %v", r.id, err)
		}
	}
	tests := []struct {
		name   string
		filter engine.RunFilter
		want   []string
	}{
		{"all", engine.RunFilter{}, []string{"r-d", "r-c", "r-b", "r-a"}},
		{"status", engine.RunFilter{Status: engine.StatusFinished}, []string{"r-c", "r-a"}},
		{"limit", engine.RunFilter{Limit: 2}, []string{"r-d", "r-c"}},
		{"status and limit", engine.RunFilter{Status: engine.StatusFinished, Limit: 1}, []string{"r-c"}},
		{"no match", engine.RunFilter{Status: engine.StatusCancelled}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runs, err := s.Runs(ctx, tc.filter)
			if err != nil {
				t.Fatalf("Runs: %v", err)
			}
			got := []string{}
			for _, r := range runs {
				got = append(got, r.ID)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Runs(%+v) mismatch (-want +got):\n%s", tc.filter, diff)
			}
		})
	}
}

func testAcquire(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-lease", 0)
	first, err := s.Acquire(ctx, run.ID, "server-a")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if first.Generation != run.Generation+1 || first.Owner != "server-a" {
		t.Errorf("after Acquire: Generation=%d Owner=%q, want %d server-a", first.Generation, first.Owner, run.Generation+1)
	}
	second, err := s.Acquire(ctx, run.ID, "server-b")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if second.Generation != first.Generation+1 || second.Owner != "server-b" {
		t.Errorf("after second Acquire: Generation=%d Owner=%q, want %d server-b", second.Generation, second.Owner, first.Generation+1)
	}

	stale := []struct {
		name string
		call func() error
	}{
		{"Commit", func() error {
			return s.Commit(ctx, engine.Change{
				RunID: run.ID, Generation: first.Generation, Status: engine.StatusFailed,
				Events: []engine.Event{{Type: engine.EventRunFailed}},
			})
		}},
		{"PostQuestion", func() error {
			_, err := s.PostQuestion(ctx, engine.PostRequest{
				RunID: run.ID, Generation: first.Generation, NodeID: "a",
				Questions: map[string]any{engine.QuestionKey: "q?"},
			})
			return err
		}},
	}
	for _, tc := range stale {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, engine.ErrStaleOwner) {
				t.Errorf("%s with the previous generation: err=%v, want ErrStaleOwner", tc.name, err)
			}
		})
	}
	got, err := s.Run(ctx, run.ID)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got.Status != engine.StatusRunning || got.Generation != second.Generation || got.Owner != "server-b" {
		t.Errorf("after refused writes: Status=%s Generation=%d Owner=%q, want running %d server-b", got.Status, got.Generation, got.Owner, second.Generation)
	}
	if evs := mustEvents(t, s, run.ID); len(evs) != 0 {
		t.Errorf("refused writes left events %v", eventLabels(evs))
	}
	pending, err := s.Pending(ctx, run.ID, "")
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	if len(pending) != 0 {
		t.Errorf("refused PostQuestion left pending questions %v", interactionIDs(pending))
	}
	MustCommit(t, s, engine.Change{RunID: run.ID, Generation: second.Generation, Status: engine.StatusFinished})
}

func testCommitStatus(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-status", 0)
	steps := []struct {
		name         string
		change       engine.Change
		wantStatus   engine.Status
		wantCode     string
		wantError    string
		wantFinished bool
	}{
		{
			name:       "pause",
			change:     engine.Change{Status: engine.StatusPausedWaitingHuman},
			wantStatus: engine.StatusPausedWaitingHuman,
		},
		{
			name:         "fail",
			change:       engine.Change{Status: engine.StatusFailedResumable, FailureCode: engine.CodeTimeout, Error: "gate timed out"},
			wantStatus:   engine.StatusFailedResumable,
			wantCode:     engine.CodeTimeout,
			wantError:    "gate timed out",
			wantFinished: true,
		},
		{
			name:         "no status keeps everything",
			change:       engine.Change{Events: []engine.Event{{Type: engine.EventBudgetWarning}}},
			wantStatus:   engine.StatusFailedResumable,
			wantCode:     engine.CodeTimeout,
			wantError:    "gate timed out",
			wantFinished: true,
		},
		{
			name:       "resume clears the failure",
			change:     engine.Change{Status: engine.StatusRunning},
			wantStatus: engine.StatusRunning,
		},
		{
			name:         "finish ignores failure fields",
			change:       engine.Change{Status: engine.StatusFinished, FailureCode: engine.CodeFailNode, Error: "stale", Sync: true},
			wantStatus:   engine.StatusFinished,
			wantFinished: true,
		},
	}
	for _, step := range steps {
		step.change.RunID = run.ID
		step.change.Generation = run.Generation
		MustCommit(t, s, step.change)
		got, err := s.Run(ctx, run.ID)
		if err != nil {
			t.Fatalf("%s: Run: %v", step.name, err)
		}
		if got.Status != step.wantStatus || got.FailureCode != step.wantCode || got.Error != step.wantError {
			t.Errorf("%s: Status=%s FailureCode=%q Error=%q, want %s %q %q", step.name, got.Status, got.FailureCode, got.Error, step.wantStatus, step.wantCode, step.wantError)
		}
		if finished := !got.FinishedAt.IsZero(); finished != step.wantFinished {
			t.Errorf("%s: FinishedAt=%v, want set=%v", step.name, got.FinishedAt, step.wantFinished)
		}
		if got.UpdatedAt.Before(run.UpdatedAt) {
			t.Errorf("%s: UpdatedAt=%v went back from %v", step.name, got.UpdatedAt, run.UpdatedAt)
		}
	}
}

// A stop requested on a run that is not over holds until the run ends
// cancelled: every other status is refused, checkpoints still land, the
// first reason is kept; a run that is over is left as it is.
func testRequestStop(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-stop", 0)
	got, err := s.RequestStop(ctx, run.ID, "cancelled by ana")
	if err != nil || got.StopRequested != "cancelled by ana" || got.Status != engine.StatusRunning {
		t.Fatalf("RequestStop = %+v, %v; want the run still running, marked", got, err)
	}
	if again, err := s.RequestStop(ctx, run.ID, "superseded"); err != nil || again.StopRequested != "cancelled by ana" {
		t.Errorf("second RequestStop = %+v, %v; want the first reason kept", again, err)
	}
	for _, st := range []engine.Status{engine.StatusFinished, engine.StatusPausedWaitingHuman, engine.StatusFailed, engine.StatusFailedResumable, engine.StatusRunning} {
		err := s.Commit(ctx, engine.Change{RunID: run.ID, Generation: run.Generation, Status: st})
		if !errors.Is(err, engine.ErrStopRequested) {
			t.Errorf("Commit(%s) after RequestStop: err=%v, want ErrStopRequested", st, err)
		}
	}
	MustCommit(t, s, engine.Change{RunID: run.ID, Generation: run.Generation, Checkpoint: []byte(`{"n":1}`)})
	MustCommit(t, s, engine.Change{RunID: run.ID, Generation: run.Generation, Status: engine.StatusCancelled, FailureCode: engine.CodeCancelled, Error: "cancelled by ana", Sync: true})
	got, err = s.Run(ctx, run.ID)
	if err != nil || got.Status != engine.StatusCancelled || got.StopRequested != "" {
		t.Fatalf("after the cancelled commit: %+v, %v; want cancelled with the request cleared", got, err)
	}
	// Over: nothing is marked, and its status stays.
	if over, err := s.RequestStop(ctx, run.ID, "late"); err != nil || over.StopRequested != "" || over.Status != engine.StatusCancelled {
		t.Errorf("RequestStop on a cancelled run = %+v, %v; want it unchanged", over, err)
	}
	done := MustCreateRun(t, s, "r-stop-done", 0)
	MustCommit(t, s, engine.Change{RunID: done.ID, Generation: done.Generation, Status: engine.StatusFinished})
	if over, err := s.RequestStop(ctx, done.ID, "late"); err != nil || over.StopRequested != "" || over.Status != engine.StatusFinished {
		t.Errorf("RequestStop on a finished run = %+v, %v; want it unchanged", over, err)
	}
	if _, err := s.RequestStop(ctx, "r-missing", "x"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("RequestStop on a missing run: err=%v, want ErrNotFound", err)
	}
}

func testCommitCheckpoint(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-ckpt", 0)
	checkpoint := func() []byte {
		t.Helper()
		b, err := s.Checkpoint(ctx, run.ID)
		if err != nil {
			t.Fatalf("Checkpoint: %v", err)
		}
		return b
	}
	if b := checkpoint(); b != nil {
		t.Errorf("Checkpoint of a new run=%q, want nil", b)
	}
	steps := []struct {
		checkpoint []byte
		want       string
	}{
		{[]byte(`{"frontier":["a"]}`), `{"frontier":["a"]}`},
		{nil, `{"frontier":["a"]}`}, // nil keeps the last one
		{[]byte("\x00binary\xff"), "\x00binary\xff"},
	}
	for i, step := range steps {
		MustCommit(t, s, engine.Change{RunID: run.ID, Generation: run.Generation, Checkpoint: step.checkpoint})
		if got := string(checkpoint()); got != step.want {
			t.Errorf("step %d: Checkpoint=%q, want %q", i, got, step.want)
		}
	}
}

func testCommitInteractions(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-ixs", 0)
	first := MustPost(t, s, run, "a", "first?")
	pause := &engine.Interaction{
		ID:          engine.PauseInteractionID(run.ID, "review", 0),
		NodeID:      "review",
		Kind:        engine.KindBlocking,
		Questions:   map[string]any{engine.QuestionKey: "approve?"},
		RequestedAt: suiteTime(1),
	}
	MustCommit(t, s, engine.Change{RunID: run.ID, Generation: run.Generation, Status: engine.StatusPausedWaitingHuman, Interactions: []*engine.Interaction{pause}})
	last := MustPost(t, s, run, "b", "last?")

	got, err := s.Interaction(ctx, run.ID, pause.ID)
	if err != nil {
		t.Fatalf("Interaction: %v", err)
	}
	want := *pause
	want.RunID = run.ID
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("Interaction mismatch (-want +got):\n%s", diff)
	}

	// Answering the pause rewrites it in place; the order stays.
	answered := want
	answered.Answers = map[string]any{engine.QuestionKey: "yes"}
	answered.AnsweredAt = suiteTime(2)
	answered.AnsweredBy = "alice"
	MustCommit(t, s, engine.Change{RunID: run.ID, Generation: run.Generation, Status: engine.StatusRunning, Interactions: []*engine.Interaction{&answered}})
	all, err := s.Interactions(ctx, run.ID)
	if err != nil {
		t.Fatalf("Interactions: %v", err)
	}
	if diff := cmp.Diff([]string{first.ID, pause.ID, last.ID}, interactionIDs(all)); diff != "" {
		t.Errorf("Interactions order mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&answered, all[1]); diff != "" {
		t.Errorf("answered pause mismatch (-want +got):\n%s", diff)
	}

	// Async questions belong to PostQuestion and Answer: a Commit that
	// writes one (new or over a posted one) is refused, so that it can never
	// undo an answer.
	overwrite := *first
	overwrite.Questions = map[string]any{engine.QuestionKey: "changed?"}
	fresh := &engine.Interaction{ID: run.ID + "_c_async_1", NodeID: "c", Kind: engine.KindAsync, Seq: 1, Questions: map[string]any{engine.QuestionKey: "q?"}}
	for _, ix := range []*engine.Interaction{&overwrite, fresh} {
		if err := s.Commit(ctx, engine.Change{RunID: run.ID, Generation: run.Generation, Interactions: []*engine.Interaction{ix}}); err == nil {
			t.Errorf("Commit of async interaction %s succeeded, want an error", ix.ID)
		}
	}
	got, err = s.Interaction(ctx, run.ID, first.ID)
	if err != nil {
		t.Fatalf("Interaction: %v", err)
	}
	if diff := cmp.Diff(first, got); diff != "" {
		t.Errorf("async question changed by a refused Commit (-want +got):\n%s", diff)
	}
}

func testPostQuestion(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-post", 0)
	questions := map[string]any{
		engine.QuestionKey: "Which database?",
		engine.OptionsKey:  []any{map[string]any{"id": "pg", "label": "PostgreSQL"}},
		engine.FreeTextKey: true,
	}
	ix, err := s.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "plan", BranchID: "b1", Questions: questions})
	if err != nil {
		t.Fatalf("PostQuestion: %v", err)
	}
	want := &engine.Interaction{
		ID:        engine.AsyncInteractionID(run.ID, "plan", 1),
		RunID:     run.ID,
		NodeID:    "plan",
		Kind:      engine.KindAsync,
		Seq:       1,
		Questions: questions,
	}
	ignoreTime := cmpopts.IgnoreFields(engine.Interaction{}, "RequestedAt")
	if diff := cmp.Diff(want, ix, ignoreTime); diff != "" {
		t.Errorf("PostQuestion result mismatch (-want +got):\n%s", diff)
	}
	if ix.RequestedAt.IsZero() || !ix.Pending() {
		t.Errorf("RequestedAt=%v Pending=%v, want a time and pending", ix.RequestedAt, ix.Pending())
	}
	stored, err := s.Interaction(ctx, run.ID, ix.ID)
	if err != nil {
		t.Fatalf("Interaction: %v", err)
	}
	if diff := cmp.Diff(ix, stored); diff != "" {
		t.Errorf("stored question mismatch (-want +got):\n%s", diff)
	}
	evs := mustEvents(t, s, run.ID)
	wantEvents := []engine.Event{{
		Seq: 1, Type: engine.EventHumanInputRequested, RunID: run.ID, NodeID: "plan", BranchID: "b1",
		Data: map[string]any{"interaction_id": ix.ID, "questions": questions, "async": true},
	}}
	if diff := cmp.Diff(wantEvents, evs, cmpopts.IgnoreFields(engine.Event{}, "Time")); diff != "" {
		t.Errorf("Events mismatch (-want +got):\n%s", diff)
	}

	bad := []struct {
		name string
		req  engine.PostRequest
	}{
		{"no node", engine.PostRequest{RunID: run.ID, Questions: map[string]any{engine.QuestionKey: "q?"}}},
		{"no question", engine.PostRequest{RunID: run.ID, NodeID: "plan", Questions: map[string]any{engine.QuestionKey: "  "}}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.PostQuestion(ctx, tc.req); err == nil {
				t.Errorf("PostQuestion succeeded, want an error")
			}
		})
	}
}

func testAsyncIDs(t *testing.T, s engine.Store) {
	run := MustCreateRun(t, s, "r-ids", 0)
	steps := []struct {
		node   string
		answer bool // answer the question just posted
		wantN  int
	}{
		{node: "a", wantN: 1},
		{node: "a", wantN: 2},
		{node: "b", wantN: 1},
		{node: "a", wantN: 3, answer: true},
		{node: "b", wantN: 2, answer: true},
		{node: "a", wantN: 4}, // answered ids are not reused
		{node: "b", wantN: 3},
	}
	for i, step := range steps {
		ix := MustPost(t, s, run, step.node, fmt.Sprintf("question %d?", i))
		if want := engine.AsyncInteractionID(run.ID, step.node, step.wantN); ix.ID != want || ix.Seq != step.wantN {
			t.Errorf("step %d: ID=%s Seq=%d, want %s %d", i, ix.ID, ix.Seq, want, step.wantN)
		}
		if step.answer {
			MustAnswer(t, s, run.ID, ix.ID, "ok", "alice")
		}
	}
	other := MustCreateRun(t, s, "r-ids-2", 0)
	if ix := MustPost(t, s, other, "a", "q?"); ix.Seq != 1 {
		t.Errorf("first question of another run: Seq=%d, want 1", ix.Seq)
	}
}

// testPostAgain: a node that asks again what it has pending (it ran again
// after a crash) gets its pending question back, with nothing new stored;
// once answered, the same text is a new question.
func testPostAgain(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-again", 0, "github")
	first := MustPost(t, s, run, "plan", "Which licence?")
	again := MustPost(t, s, run, "plan", "Which licence?")
	elsewhere := MustPost(t, s, run, "review", "Which licence?")
	if again.ID != first.ID || !again.RequestedAt.Equal(first.RequestedAt) {
		t.Errorf("asked again: %s, want the pending %s", again.ID, first.ID)
	}
	if elsewhere.ID == first.ID {
		t.Errorf("another node's question took %s", first.ID)
	}
	if pending, _ := s.Pending(ctx, run.ID, "plan"); len(pending) != 1 {
		t.Errorf("%d pending questions of plan, want 1", len(pending))
	}
	rows, err := s.DueOutbox(ctx, suiteTime(24*365*100), noLimit)
	if err != nil {
		t.Fatalf("DueOutbox: %v", err)
	}
	posted := 0
	for _, r := range rows {
		if r.RunID == run.ID && r.Kind == engine.OutboxQuestionPosted {
			posted++
		}
	}
	if posted != 2 {
		t.Errorf("%d question_posted rows, want 2 (plan's once, review's)", posted)
	}
	// The same words with other options is another question.
	withOptions, err := s.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "plan", Questions: map[string]any{
		engine.QuestionKey: "Which licence?", engine.OptionsKey: []engine.Option{{ID: "mit", Label: "MIT"}}}})
	if err != nil || withOptions.ID == first.ID {
		t.Errorf("the same text with options: %v, %v; want a new question", withOptions, err)
	}
	again, err = s.PostQuestion(ctx, engine.PostRequest{RunID: run.ID, Generation: run.Generation, NodeID: "plan", Questions: map[string]any{
		engine.QuestionKey: "Which licence?", engine.OptionsKey: []engine.Option{{ID: "mit", Label: "MIT"}}}})
	if err != nil || again.ID != withOptions.ID {
		t.Errorf("the same text and options again: %v, %v; want %s", again, err, withOptions.ID)
	}
	MustAnswer(t, s, run.ID, first.ID, "MIT", "ana")
	if later := MustPost(t, s, run, "plan", "Which licence?"); later.ID == first.ID || later.Seq != 3 {
		t.Errorf("asked after the answer: %s (seq %d), want a new question", later.ID, later.Seq)
	}
}

func testPending(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-pending", 0)
	a1 := MustPost(t, s, run, "a", "a1?")
	b1 := MustPost(t, s, run, "b", "b1?")
	a2 := MustPost(t, s, run, "a", "a2?")
	b2 := MustPost(t, s, run, "b", "b2?")
	MustAnswer(t, s, run.ID, a1.ID, "done", "alice")
	pause := &engine.Interaction{ID: engine.PauseInteractionID(run.ID, "a", 0), NodeID: "a", Kind: engine.KindBlocking, Questions: map[string]any{engine.QuestionKey: "go?"}}
	await := &engine.Interaction{ID: run.ID + "_gate", NodeID: "gate", Kind: engine.KindAwait, Questions: map[string]any{engine.AwaitPendingKey: []any{b1.ID}}}
	MustCommit(t, s, engine.Change{RunID: run.ID, Generation: run.Generation, Interactions: []*engine.Interaction{pause, await}})

	tests := []struct {
		node string
		want []string
	}{
		{"", []string{b1.ID, a2.ID, b2.ID}},
		{"a", []string{a2.ID}},
		{"b", []string{b1.ID, b2.ID}},
		{"gate", []string{}},
		{"nobody", []string{}},
	}
	for _, tc := range tests {
		t.Run("node="+tc.node, func(t *testing.T) {
			got, err := s.Pending(ctx, run.ID, tc.node)
			if err != nil {
				t.Fatalf("Pending: %v", err)
			}
			if diff := cmp.Diff(tc.want, interactionIDs(got)); diff != "" {
				t.Errorf("Pending(%q) mismatch (-want +got):\n%s", tc.node, diff)
			}
			for _, ix := range got {
				if !ix.Pending() || ix.Kind != engine.KindAsync {
					t.Errorf("Pending returned %s with Kind=%q Pending=%v", ix.ID, ix.Kind, ix.Pending())
				}
			}
		})
	}
}

func testAnswer(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-answer", 0)
	ix := MustPost(t, s, run, "plan", "Which database?")
	res, err := s.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: ix.ID, Text: "  PostgreSQL\n", By: "alice", Via: "github"})
	if err != nil {
		t.Fatalf("Answer: %v", err)
	}
	want := *ix
	want.Answers = map[string]any{engine.QuestionKey: "PostgreSQL"}
	want.AnsweredBy = "alice"
	want.Via = "github"
	if diff := cmp.Diff(&want, res.Interaction, cmpopts.IgnoreFields(engine.Interaction{}, "AnsweredAt")); diff != "" {
		t.Errorf("answered interaction mismatch (-want +got):\n%s", diff)
	}
	if res.Interaction.AnsweredAt.IsZero() || res.Interaction.Pending() {
		t.Errorf("AnsweredAt=%v, want a time", res.Interaction.AnsweredAt)
	}
	stored, err := s.Interaction(ctx, run.ID, ix.ID)
	if err != nil {
		t.Fatalf("Interaction: %v", err)
	}
	if diff := cmp.Diff(res.Interaction, stored); diff != "" {
		t.Errorf("stored interaction mismatch (-want +got):\n%s", diff)
	}

	wantMsg := engine.InboxMessage{
		RunID:         run.ID,
		NodeID:        "plan",
		InteractionID: ix.ID,
		Text:          engine.AnswerMessage(ix.ID, "Which database?", "PostgreSQL"),
		Status:        engine.InboxQueued,
		Seq:           1,
	}
	ignoreMsg := cmpopts.IgnoreFields(engine.InboxMessage{}, "ID", "QueuedAt", "DeliveredAt")
	if diff := cmp.Diff(wantMsg, res.Message, ignoreMsg); diff != "" {
		t.Errorf("Message mismatch (-want +got):\n%s", diff)
	}
	if res.Message.ID == "" || res.Message.QueuedAt.IsZero() {
		t.Errorf("Message ID=%q QueuedAt=%v, want both set", res.Message.ID, res.Message.QueuedAt)
	}
	if res.Resumed {
		t.Errorf("Resumed=true from the store, want false (the engine sets it)")
	}

	evs := mustEvents(t, s, run.ID)
	wantEvents := []engine.Event{
		{Seq: 1, Type: engine.EventHumanInputRequested, RunID: run.ID, NodeID: "plan",
			Data: map[string]any{"interaction_id": ix.ID, "questions": ix.Questions, "async": true}},
		{Seq: 2, Type: engine.EventInteractionAnswered, RunID: run.ID, NodeID: "plan",
			Data: map[string]any{"interaction_id": ix.ID, "async": true, "answer": "PostgreSQL"}},
	}
	if diff := cmp.Diff(wantEvents, evs, cmpopts.IgnoreFields(engine.Event{}, "Time")); diff != "" {
		t.Errorf("Events mismatch (-want +got):\n%s", diff)
	}
	pending, err := s.Pending(ctx, run.ID, "")
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	if len(pending) != 0 {
		t.Errorf("Pending after the answer=%v, want none", interactionIDs(pending))
	}
	msgs, err := s.DrainInbox(ctx, run.ID, "plan")
	if err != nil {
		t.Fatalf("DrainInbox: %v", err)
	}
	if len(msgs) != 1 || msgs[0].Text != wantMsg.Text {
		t.Errorf("DrainInbox=%+v, want the answer message", msgs)
	}
}

func testAnswerRefusals(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-refuse", 0)
	ix := MustPost(t, s, run, "plan", "q?")
	pause := &engine.Interaction{ID: engine.PauseInteractionID(run.ID, "review", 0), NodeID: "review", Kind: engine.KindBlocking, Questions: map[string]any{engine.QuestionKey: "approve?"}}
	await := &engine.Interaction{ID: run.ID + "_gate", NodeID: "gate", Kind: engine.KindAwait, Questions: map[string]any{engine.AwaitPendingKey: []any{ix.ID}}}
	MustCommit(t, s, engine.Change{RunID: run.ID, Generation: run.Generation, Interactions: []*engine.Interaction{pause, await}})
	eventsBefore := len(mustEvents(t, s, run.ID))

	tests := []struct {
		name  string
		runID string
		id    string
		text  string
		want  error
	}{
		{"unknown run", "r-nope", ix.ID, "yes", engine.ErrNotFound},
		{"unknown question", run.ID, run.ID + "_plan_async_9", "yes", engine.ErrNotFound},
		{"empty text", run.ID, ix.ID, "", engine.ErrEmptyAnswer},
		{"blank text", run.ID, ix.ID, " \n\t", engine.ErrEmptyAnswer},
		{"blocking", run.ID, pause.ID, "yes", engine.ErrNotAsync},
		{"await", run.ID, await.ID, "yes", engine.ErrNotAsync},
		{"empty text on blocking", run.ID, pause.ID, "", engine.ErrEmptyAnswer},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.Answer(ctx, engine.AnswerRequest{RunID: tc.runID, InteractionID: tc.id, Text: tc.text, By: "mallory", Via: "api"})
			if !errors.Is(err, tc.want) {
				t.Errorf("Answer: err=%v, want %v", err, tc.want)
			}
			if res != nil {
				t.Errorf("Answer returned %+v with its error", res)
			}
		})
	}
	for _, id := range []string{ix.ID, pause.ID, await.ID} {
		got, err := s.Interaction(ctx, run.ID, id)
		if err != nil {
			t.Fatalf("Interaction(%s): %v", id, err)
		}
		if !got.Pending() || got.Answers != nil {
			t.Errorf("%s after refused answers: AnsweredAt=%v Answers=%v, want untouched", id, got.AnsweredAt, got.Answers)
		}
	}
	pending, err := s.Pending(ctx, run.ID, "")
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	if diff := cmp.Diff([]string{ix.ID}, interactionIDs(pending)); diff != "" {
		t.Errorf("Pending after refused answers mismatch (-want +got):\n%s", diff)
	}
	if n := len(mustEvents(t, s, run.ID)); n != eventsBefore {
		t.Errorf("%d events after refused answers, want %d", n, eventsBefore)
	}
	for _, node := range []string{"plan", "review", "gate"} {
		msgs, err := s.DrainInbox(ctx, run.ID, node)
		if err != nil {
			t.Fatalf("DrainInbox: %v", err)
		}
		if len(msgs) != 0 {
			t.Errorf("refused answers queued messages for %s: %+v", node, msgs)
		}
	}
}

func testAnswerTwice(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-twice", 0, "github")
	ix := MustPost(t, s, run, "plan", "q?")
	first, err := s.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: ix.ID, Text: "first", By: "alice", Via: "github"})
	if err != nil {
		t.Fatalf("first Answer: %v", err)
	}
	_, err = s.Answer(ctx, engine.AnswerRequest{RunID: run.ID, InteractionID: ix.ID, Text: "second", By: "bob", Via: "slack"})
	if !errors.Is(err, engine.ErrAlreadyAnswered) {
		t.Fatalf("second Answer: err=%v, want ErrAlreadyAnswered", err)
	}
	var already *engine.AlreadyAnsweredError
	if !errors.As(err, &already) {
		t.Fatalf("second Answer: err=%v, want an *AlreadyAnsweredError", err)
	}
	want := &engine.AlreadyAnsweredError{InteractionID: ix.ID, AnsweredBy: "alice", Via: "github", AnsweredAt: first.Interaction.AnsweredAt}
	if diff := cmp.Diff(want, already); diff != "" {
		t.Errorf("AlreadyAnsweredError mismatch (-want +got):\n%s", diff)
	}
	got, err := s.Interaction(ctx, run.ID, ix.ID)
	if err != nil {
		t.Fatalf("Interaction: %v", err)
	}
	if got.Answer() != "first" || got.AnsweredBy != "alice" {
		t.Errorf("answer=%q by %q, want first by alice", got.Answer(), got.AnsweredBy)
	}
	rows, err := s.DueOutbox(ctx, suiteTime(24*365*100), noLimit)
	if err != nil {
		t.Fatalf("DueOutbox: %v", err)
	}
	answered := 0
	for _, row := range rows {
		if row.Kind == engine.OutboxQuestionAnswered {
			answered++
		}
	}
	if answered != 1 {
		t.Errorf("%d question_answered rows, want 1", answered)
	}
}

func testConcurrentAnswers(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-race", 0, "slack")
	ix := MustPost(t, s, run, "plan", "q?")
	const n = 20
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make([]error, n)
		winners = make([]*engine.AnswerResult, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			winners[i], results[i] = s.Answer(ctx, engine.AnswerRequest{
				RunID: run.ID, InteractionID: ix.ID, Text: fmt.Sprintf("answer %d", i), By: fmt.Sprintf("user%d", i), Via: "slack",
			})
		}()
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range results {
		if err == nil {
			if winner >= 0 {
				t.Errorf("answers %d and %d both won", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no answer won: %v", results)
	}
	winnerName := fmt.Sprintf("user%d", winner)
	for i, err := range results {
		if i == winner {
			continue
		}
		var already *engine.AlreadyAnsweredError
		if !errors.As(err, &already) {
			t.Errorf("answer %d: err=%v, want an *AlreadyAnsweredError", i, err)
			continue
		}
		if already.AnsweredBy != winnerName {
			t.Errorf("answer %d: AlreadyAnsweredError names %q, want the winner %q", i, already.AnsweredBy, winnerName)
		}
	}
	got, err := s.Interaction(ctx, run.ID, ix.ID)
	if err != nil {
		t.Fatalf("Interaction: %v", err)
	}
	if want := fmt.Sprintf("answer %d", winner); got.Answer() != want || got.AnsweredBy != winnerName {
		t.Errorf("stored answer %q by %q, want %q by %q", got.Answer(), got.AnsweredBy, want, winnerName)
	}
	msgs, err := s.DrainInbox(ctx, run.ID, "plan")
	if err != nil {
		t.Fatalf("DrainInbox: %v", err)
	}
	if len(msgs) != 1 || msgs[0].Text != winners[winner].Message.Text {
		t.Errorf("inbox=%+v, want only the winner's message", msgs)
	}
	answeredEvents := 0
	for _, ev := range mustEvents(t, s, run.ID) {
		if ev.Type == engine.EventInteractionAnswered {
			answeredEvents++
		}
	}
	if answeredEvents != 1 {
		t.Errorf("%d interaction_answered events, want 1", answeredEvents)
	}
}

func testDrainInbox(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-inbox", 0)
	a1 := MustPost(t, s, run, "a", "a1?")
	b1 := MustPost(t, s, run, "b", "b1?")
	a2 := MustPost(t, s, run, "a", "a2?")
	// Answered out of order: the inbox keeps the order of the answers.
	MustAnswer(t, s, run.ID, a2.ID, "two", "alice")
	MustAnswer(t, s, run.ID, b1.ID, "bee", "bob")
	MustAnswer(t, s, run.ID, a1.ID, "one", "alice")

	steps := []struct {
		node string
		want []string // interaction ids, in delivery order
	}{
		{"c", []string{}},
		{"a", []string{a2.ID, a1.ID}},
		{"a", []string{}}, // delivered once
		{"b", []string{b1.ID}},
		{"b", []string{}},
	}
	var lastSeq int64
	for i, step := range steps {
		msgs, err := s.DrainInbox(ctx, run.ID, step.node)
		if err != nil {
			t.Fatalf("step %d: DrainInbox(%s): %v", i, step.node, err)
		}
		got := []string{}
		for _, m := range msgs {
			got = append(got, m.InteractionID)
			if m.Status != engine.InboxDelivered || m.DeliveredAt.IsZero() || m.NodeID != step.node {
				t.Errorf("step %d: message %s Status=%s DeliveredAt=%v NodeID=%s, want delivered to %s", i, m.InteractionID, m.Status, m.DeliveredAt, m.NodeID, step.node)
			}
			if step.node == "a" && m.Seq <= lastSeq {
				t.Errorf("step %d: Seq %d after %d, want increasing", i, m.Seq, lastSeq)
			}
			lastSeq = m.Seq
		}
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("step %d: DrainInbox(%s) mismatch (-want +got):\n%s", i, step.node, diff)
		}
	}
}

func testEvents(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-events", 0)
	other := MustCreateRun(t, s, "r-events-2", 0)
	MustCommit(t, s, engine.Change{RunID: run.ID, Generation: run.Generation, Events: []engine.Event{
		{Type: engine.EventRunStarted, Time: suiteTime(1)},
		{Type: engine.EventNodeStarted, NodeID: "a"},
		{Type: engine.EventNodeFinished, NodeID: "a", RunID: "ignored"},
	}})
	MustCommit(t, s, engine.Change{RunID: other.ID, Generation: other.Generation, Events: []engine.Event{{Type: engine.EventRunStarted}}})
	MustCommit(t, s, engine.Change{RunID: run.ID, Generation: run.Generation, Events: []engine.Event{
		{Type: engine.EventEdgeSelected}, {Type: engine.EventRunFinished},
	}})

	evs := mustEvents(t, s, run.ID)
	for _, ev := range evs {
		if ev.RunID != run.ID || ev.Time.IsZero() {
			t.Errorf("event %d: RunID=%q Time=%v, want %s and a time", ev.Seq, ev.RunID, ev.Time, run.ID)
		}
	}
	if !evs[0].Time.Equal(suiteTime(1)) {
		t.Errorf("event 1 Time=%v, want the given %v", evs[0].Time, suiteTime(1))
	}
	tests := []struct {
		name  string
		run   string
		after int64
		limit int
		want  []string
	}{
		{"all", run.ID, 0, noLimit, []string{"1:run_started", "2:node_started", "3:node_finished", "4:edge_selected", "5:run_finished"}},
		{"after", run.ID, 3, noLimit, []string{"4:edge_selected", "5:run_finished"}},
		{"limit", run.ID, 0, 2, []string{"1:run_started", "2:node_started"}},
		{"after and limit", run.ID, 1, 3, []string{"2:node_started", "3:node_finished", "4:edge_selected"}},
		{"after the end", run.ID, 5, 10, []string{}},
		{"other run", other.ID, 0, noLimit, []string{"1:run_started"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := s.Events(ctx, tc.run, tc.after, tc.limit)
			if err != nil {
				t.Fatalf("Events: %v", err)
			}
			if diff := cmp.Diff(tc.want, eventLabels(evs)); diff != "" {
				t.Errorf("Events(%s, %d, %d) mismatch (-want +got):\n%s", tc.run, tc.after, tc.limit, diff)
			}
		})
	}
}

func testConcurrentCommits(t *testing.T, s engine.Store) {
	runs := []*engine.Run{MustCreateRun(t, s, "r-conc-1", 0), MustCreateRun(t, s, "r-conc-2", 0)}
	const writers, commits, perCommit = 6, 5, 2
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, run := range runs {
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for c := range commits {
					evs := make([]engine.Event, perCommit)
					for e := range evs {
						evs[e] = engine.Event{Type: engine.EventNodeFinished, NodeID: fmt.Sprintf("w%d-c%d-e%d", w, c, e)}
					}
					if err := s.Commit(t.Context(), engine.Change{RunID: run.ID, Generation: run.Generation, Events: evs}); err != nil {
						t.Errorf("Commit by writer %d: %v", w, err)
						return
					}
				}
			}()
		}
	}
	close(start)
	wg.Wait()

	for _, run := range runs {
		evs := mustEvents(t, s, run.ID)
		if len(evs) != writers*commits*perCommit {
			t.Fatalf("%s: %d events, want %d", run.ID, len(evs), writers*commits*perCommit)
		}
		seen := map[string]bool{}
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				t.Errorf("%s: event %d has Seq %d, want %d", run.ID, i, ev.Seq, i+1)
			}
			if seen[ev.NodeID] {
				t.Errorf("%s: event %s stored twice", run.ID, ev.NodeID)
			}
			seen[ev.NodeID] = true
			// The events of one commit are consecutive.
			if i%perCommit == 1 {
				var w1, c1, w2, c2, e int
				fmt.Sscanf(evs[i-1].NodeID, "w%d-c%d-e%d", &w1, &c1, &e)
				fmt.Sscanf(ev.NodeID, "w%d-c%d-e%d", &w2, &c2, &e)
				if w1 != w2 || c1 != c2 {
					t.Errorf("%s: events %d and %d are from different commits (%s, %s)", run.ID, i, i+1, evs[i-1].NodeID, ev.NodeID)
				}
			}
		}
	}
}

func testOutboxChannels(t *testing.T, s engine.Store) {
	ctx := t.Context()
	attached := MustCreateRun(t, s, "r-attached", 0, "github", "slack")
	cli := MustCreateRun(t, s, "r-cli", 0)
	for _, run := range []*engine.Run{attached, cli} {
		ix := MustPost(t, s, run, "plan", "q?")
		MustAnswer(t, s, run.ID, ix.ID, "a", "alice")
		MustCommit(t, s, engine.Change{RunID: run.ID, Generation: run.Generation, Status: engine.StatusFinished,
			Outbox: []engine.OutboxRow{{Kind: engine.OutboxRunFinished}}})
	}
	rows, err := s.DueOutbox(ctx, suiteTime(24*365*100), noLimit)
	if err != nil {
		t.Fatalf("DueOutbox: %v", err)
	}
	type row struct {
		Kind, Run, Interaction string
		Channels               []string
	}
	var got []row
	for _, r := range rows {
		got = append(got, row{r.Kind, r.RunID, r.InteractionID, r.Channels})
		if r.ID == "" || r.CreatedAt.IsZero() || r.NextAt.IsZero() || r.Attempts != 0 {
			t.Errorf("row %+v: want ID, CreatedAt and NextAt set and no attempts", r)
		}
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Kind < got[j].Kind })
	ixID := engine.AsyncInteractionID(attached.ID, "plan", 1)
	// One row per channel, so that each channel acknowledges its own.
	gh, sl := []string{"github"}, []string{"slack"}
	want := []row{
		{engine.OutboxQuestionAnswered, attached.ID, ixID, gh},
		{engine.OutboxQuestionAnswered, attached.ID, ixID, sl},
		{engine.OutboxQuestionPosted, attached.ID, ixID, gh},
		{engine.OutboxQuestionPosted, attached.ID, ixID, sl},
		{engine.OutboxRunFinished, attached.ID, "", gh},
		{engine.OutboxRunFinished, attached.ID, "", sl},
		{engine.OutboxRunStarted, attached.ID, "", gh},
		{engine.OutboxRunStarted, attached.ID, "", sl},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outbox rows mismatch (-want +got):\n%s", diff)
	}
	// Acknowledging GitHub's rows leaves Slack's, and postponing Slack's
	// leaves GitHub's due.
	for _, r := range rows {
		if r.RunID != attached.ID {
			continue
		}
		var err error
		switch r.Channels[0] {
		case "github":
			err = s.AckOutbox(ctx, r.ID)
		case "slack":
			err = s.RetryOutbox(ctx, r.ID, suiteTime(24*365*150))
		}
		if err != nil {
			t.Fatalf("row %s: %v", r.ID, err)
		}
	}
	left, err := s.DueOutbox(ctx, suiteTime(24*365*100), noLimit)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range left {
		if r.RunID == attached.ID {
			t.Errorf("row %s (%s, %v) is still due", r.ID, r.Kind, r.Channels)
		}
	}
	later, err := s.DueOutbox(ctx, suiteTime(24*365*190), noLimit)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range later {
		if r.RunID == attached.ID {
			n++
			if r.Channels[0] != "slack" {
				t.Errorf("row %s of %v is left after its acknowledgement", r.ID, r.Channels)
			}
		}
	}
	if n != 4 {
		t.Errorf("%d of Slack's rows left, want 4", n)
	}
}

func testOutboxDue(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-outbox", 0, "github")
	MustCommit(t, s, engine.Change{RunID: run.ID, Generation: run.Generation, Outbox: []engine.OutboxRow{
		{ID: "o-late", Kind: engine.OutboxRunPaused, CreatedAt: suiteTime(3), NextAt: suiteTime(3)},
		{ID: "o-first", Kind: engine.OutboxRunPaused, CreatedAt: suiteTime(1), NextAt: suiteTime(1)},
		{ID: "o-future", Kind: engine.OutboxRunPaused, CreatedAt: suiteTime(0), NextAt: suiteTime(10)},
		{ID: "o-second", Kind: engine.OutboxRunPaused, CreatedAt: suiteTime(2), NextAt: suiteTime(1)},
		{ID: "o-tie", Kind: engine.OutboxRunPaused, CreatedAt: suiteTime(2), NextAt: suiteTime(2)},
	}})
	due := func(now time.Time, limit int) []string {
		t.Helper()
		rows, err := s.DueOutbox(ctx, now, limit)
		if err != nil {
			t.Fatalf("DueOutbox: %v", err)
		}
		out := []string{}
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return out
	}
	tests := []struct {
		name  string
		now   time.Time
		limit int
		want  []string
	}{
		{"nothing due", suiteTime(0), noLimit, []string{}},
		{"due at its time", suiteTime(1), noLimit, []string{"o-first", "o-second"}},
		{"oldest first", suiteTime(5), noLimit, []string{"o-first", "o-second", "o-tie", "o-late"}},
		{"limit", suiteTime(5), 2, []string{"o-first", "o-second"}},
		{"all", suiteTime(10), noLimit, []string{"o-future", "o-first", "o-second", "o-tie", "o-late"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, due(tc.now, tc.limit)); diff != "" {
				t.Errorf("DueOutbox(%v, %d) mismatch (-want +got):\n%s", tc.now, tc.limit, diff)
			}
		})
	}

	if err := s.RetryOutbox(ctx, "o-first", suiteTime(20)); err != nil {
		t.Fatalf("RetryOutbox: %v", err)
	}
	if err := s.RetryOutbox(ctx, "o-first", suiteTime(30)); err != nil {
		t.Fatalf("RetryOutbox: %v", err)
	}
	if diff := cmp.Diff([]string{"o-future", "o-second", "o-tie", "o-late"}, due(suiteTime(29), noLimit)); diff != "" {
		t.Errorf("after RetryOutbox, DueOutbox mismatch (-want +got):\n%s", diff)
	}
	rows, err := s.DueOutbox(ctx, suiteTime(30), 1)
	if err != nil {
		t.Fatalf("DueOutbox: %v", err)
	}
	if len(rows) != 1 || rows[0].ID != "o-future" {
		t.Fatalf("DueOutbox(at 30, 1)=%+v, want o-future", rows)
	}
	all, err := s.DueOutbox(ctx, suiteTime(30), noLimit)
	if err != nil {
		t.Fatalf("DueOutbox: %v", err)
	}
	for _, r := range all {
		if r.ID == "o-first" && (r.Attempts != 2 || !r.NextAt.Equal(suiteTime(30))) {
			t.Errorf("o-first after two retries: Attempts=%d NextAt=%v, want 2 %v", r.Attempts, r.NextAt, suiteTime(30))
		}
	}

	for _, id := range []string{"o-first", "o-late"} {
		if err := s.AckOutbox(ctx, id); err != nil {
			t.Fatalf("AckOutbox(%s): %v", id, err)
		}
	}
	if diff := cmp.Diff([]string{"o-future", "o-second", "o-tie"}, due(suiteTime(100), noLimit)); diff != "" {
		t.Errorf("after AckOutbox, DueOutbox mismatch (-want +got):\n%s", diff)
	}
	if err := s.AckOutbox(ctx, "o-first"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("second AckOutbox: err=%v, want ErrNotFound", err)
	}
	if err := s.RetryOutbox(ctx, "o-first", suiteTime(40)); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("RetryOutbox of an acknowledged row: err=%v, want ErrNotFound", err)
	}
}

func testNotFound(t *testing.T, s engine.Store) {
	ctx := t.Context()
	run := MustCreateRun(t, s, "r-known", 0)
	const missing = "r-missing"
	tests := []struct {
		name string
		call func() error
	}{
		{"Run", func() error { _, err := s.Run(ctx, missing); return err }},
		{"Acquire", func() error { _, err := s.Acquire(ctx, missing, "me"); return err }},
		{"Commit", func() error { return s.Commit(ctx, engine.Change{RunID: missing}) }},
		{"Checkpoint", func() error { _, err := s.Checkpoint(ctx, missing); return err }},
		{"PostQuestion", func() error {
			_, err := s.PostQuestion(ctx, engine.PostRequest{RunID: missing, NodeID: "a", Questions: map[string]any{engine.QuestionKey: "q?"}})
			return err
		}},
		{"Interaction of unknown run", func() error { _, err := s.Interaction(ctx, missing, "x"); return err }},
		{"Interaction", func() error { _, err := s.Interaction(ctx, run.ID, run.ID+"_a_async_1"); return err }},
		{"Interactions", func() error { _, err := s.Interactions(ctx, missing); return err }},
		{"Pending", func() error { _, err := s.Pending(ctx, missing, ""); return err }},
		{"DrainInbox", func() error { _, err := s.DrainInbox(ctx, missing, "a"); return err }},
		{"Events", func() error { _, err := s.Events(ctx, missing, 0, noLimit); return err }},
		{"AckOutbox", func() error { return s.AckOutbox(ctx, "nope") }},
		{"RetryOutbox", func() error { return s.RetryOutbox(ctx, "nope", suiteTime(1)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("err=%v, want ErrNotFound", err)
			}
		})
	}
}
