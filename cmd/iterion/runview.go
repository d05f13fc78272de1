package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/iterion-bot/iterion/engine"
	"github.com/iterion-bot/iterion/store"
)

// runReader is what a run's view is read from: the owner's API or the
// store itself (runsAPI), so `runs show` says the same through both.
type runReader interface {
	Run(ctx context.Context, id string) (*engine.Run, error)
	Events(ctx context.Context, id string, after int64, limit int) ([]engine.Event, error)
	Pending(ctx context.Context, id string) ([]*engine.Interaction, error)
}

// dbReader reads runs from a store this process holds.
type dbReader struct{ db *store.DB }

func (r dbReader) Run(ctx context.Context, id string) (*engine.Run, error) { return r.db.Run(ctx, id) }
func (r dbReader) Events(ctx context.Context, id string, after int64, limit int) ([]engine.Event, error) {
	return r.db.Events(ctx, id, after, limit)
}
func (r dbReader) Pending(ctx context.Context, id string) ([]*engine.Interaction, error) {
	all, err := r.db.Interactions(ctx, id)
	return openQuestions(all), err
}

// runView is what a person is told about a run: where it is, what it
// waits for, what it produced. It is read from the run's record, its event
// log and its open questions (not its checkpoint, which only the store's
// owner can read), so it is the same with an owner alive or not.
type runView struct {
	*engine.Run
	// Interrupted is set for a run stored as running whose owner is gone.
	Interrupted *interruption `json:"interrupted,omitempty"`
	// Nodes are the nodes started and not finished: the ones executing,
	// or, for a run that stopped (cancelled, failed, interrupted), the ones
	// it stopped in, which run again when it is resumed. Several in a
	// fan-out.
	Nodes []activeNode `json:"nodes,omitempty"`
	// Pause is the question a paused run waits on.
	Pause *pauseView `json:"pause,omitempty"`
	// Questions are the open async questions.
	Questions []*engine.Interaction `json:"questions,omitempty"`
	// Outputs are the latest output of every node that finished.
	Outputs map[string]map[string]any `json:"outputs,omitempty"`
	// Artifacts are the latest version of each published artifact.
	Artifacts map[string]*artifactVersion `json:"artifacts,omitempty"`
	// Output is, for a finished run, the output of its last node.
	Output *nodeOutput `json:"output,omitempty"`

	store     storeInfo
	order     []string                      // nodes in the order of their latest finish
	unsettled []*artifactVersion            // published, the finish after them not read yet
	versions  map[string][]*artifactVersion // every version, oldest first
}

type activeNode struct {
	ID     string `json:"id"`
	Kind   string `json:"kind,omitempty"`
	Branch string `json:"branch,omitempty"`
}

type pauseView struct {
	InteractionID string                 `json:"interaction_id"`
	Node          string                 `json:"node"`
	Kind          engine.InteractionKind `json:"kind"`
	Questions     map[string]any         `json:"questions,omitempty"`
	// Fields are those a form's answer takes.
	Fields []engine.FormField `json:"fields,omitempty"`
	// Deadline is when a wait for answers gives up, as stored.
	Deadline string `json:"deadline,omitempty"`
}

type nodeOutput struct {
	Node   string         `json:"node"`
	Output map[string]any `json:"output"`
}

type artifactVersion struct {
	Node    string `json:"node"`
	Version int    `json:"version"`
	Data    any    `json:"data"`
	seq     int64
	prevSeq int64 // the publishing node's finish before it (0: none)
}

// interruption says why a run stored as running is not executing.
type interruption struct {
	Owner    string `json:"owner,omitempty"`
	OwnerPID int    `json:"owner_pid,omitempty"`
	// Holder is the live process holding the store (0: none), which keeps
	// `iterion resume` out until it exits.
	Holder  int    `json:"store_held_by,omitempty"`
	Recover string `json:"recover"`
}

// storeInfo is the store as a command sees it: the --store-dir that the
// commands it advises need ("" for the default store), and the live
// process holding it: the owner whose API the command reached, or 0 when
// the command opened the store itself.
type storeInfo struct {
	arg    string
	holder int
}

// storeOf says how r reaches the store at dir.
func (a *App) storeOf(dir string, r runsAPI) storeInfo {
	st := storeInfo{arg: a.storeArg(dir)}
	if info, ok := readOwner(dir); ok && r.live() {
		st.holder = info.PID
	}
	return st
}

// storeArg is the --store-dir flag that names dir, "" for the default.
func (a *App) storeArg(dir string) string {
	if dir == a.storeDir("") {
		return ""
	}
	return " --store-dir " + shellWord(dir)
}

// interrupted tells whether run, stored as running, has lost its owner:
// nobody holds the store, or the one who does is not the run's owner
// (Owner, "host:pid", is the engine that last took the run). A run being
// started has no owner yet and is not interrupted.
func interrupted(run *engine.Run, st storeInfo) *interruption {
	if run.Status != engine.StatusRunning {
		return nil
	}
	host, pid := ownerPID(run.Owner)
	if st.holder != 0 {
		self, _ := os.Hostname()
		if run.Owner == "" || (host == self && pid == st.holder) {
			return nil
		}
	}
	return &interruption{Owner: run.Owner, OwnerPID: pid, Holder: st.holder, Recover: "iterion resume --run-id " + shellWord(run.ID) + st.arg}
}

// ownerPID splits an engine's owner name, host:pid.
func ownerPID(owner string) (string, int) {
	i := strings.LastIndexByte(owner, ':')
	if i < 0 {
		return owner, 0
	}
	pid, err := strconv.Atoi(owner[i+1:])
	if err != nil || pid <= 0 {
		return owner, 0
	}
	return owner[:i], pid
}

// viewRun reads the view of run id.
func viewRun(ctx context.Context, r runReader, id string, st storeInfo) (*runView, error) {
	run, err := r.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	v := &runView{Run: run, Outputs: map[string]map[string]any{}, Artifacts: map[string]*artifactVersion{}, versions: map[string][]*artifactVersion{}}
	v.store = st
	v.Interrupted = interrupted(run, st)
	if err := v.readEvents(ctx, r); err != nil {
		return nil, err
	}
	pending, err := r.Pending(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, ix := range pending {
		switch {
		case !ix.Pending():
		case ix.Kind == engine.KindAsync:
			v.Questions = append(v.Questions, ix)
		case v.Pause != nil && ix.ID == v.Pause.InteractionID:
			v.Pause.Fields = ix.Fields
		}
	}
	if run.Status != engine.StatusPausedWaitingHuman {
		v.Pause = nil
	}
	if run.Status != engine.StatusFinished {
		v.Output = nil
	}
	return v, nil
}

// eventPage is how many events are read at a time.
const eventPage = 1000

// readEvents replays the run's event log into the view.
func (v *runView) readEvents(ctx context.Context, r runReader) error {
	active := map[string]activeNode{} // by branch/node
	lastFinish := map[string]int64{}  // by node: seq of its latest finish
	asked := map[string]*pauseView{}  // human_input_requested, by interaction
	var after int64
	for {
		evs, err := r.Events(ctx, v.ID, after, eventPage)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			after = ev.Seq
			key := ev.BranchID + "/" + ev.NodeID
			switch ev.Type {
			case engine.EventNodeStarted:
				kind, _ := ev.Data["kind"].(string)
				active[key] = activeNode{ID: ev.NodeID, Kind: kind, Branch: ev.BranchID}
			case engine.EventNodeFinished:
				delete(active, key)
				out, _ := ev.Data["output"].(map[string]any)
				v.Outputs[ev.NodeID] = out
				v.order = slices.DeleteFunc(v.order, func(n string) bool { return n == ev.NodeID })
				v.order = append(v.order, ev.NodeID)
				v.settle(ev.NodeID, ev.Seq, out)
				lastFinish[ev.NodeID] = ev.Seq
				if ev.BranchID == "" {
					v.Output = &nodeOutput{Node: ev.NodeID, Output: out}
				}
			case engine.EventArtifactWritten:
				name, _ := ev.Data["publish"].(string)
				version := len(v.versions[name])
				if f, ok := ev.Data["version"].(float64); ok {
					version = int(f)
				}
				a := &artifactVersion{Node: ev.NodeID, Version: version, seq: ev.Seq, prevSeq: lastFinish[ev.NodeID]}
				a.Data = v.Outputs[ev.NodeID] // the finish before it, until a nearer one comes
				v.versions[name] = append(v.versions[name], a)
				v.unsettled = append(v.unsettled, a)
				v.Artifacts[name] = a
			case engine.EventHumanInputRequested:
				if ev.Data["async"] == true {
					continue
				}
				id, _ := ev.Data["interaction_id"].(string)
				q, _ := ev.Data["questions"].(map[string]any)
				kind := engine.KindBlocking
				if ev.Data["await"] == true {
					kind = engine.KindAwait
				}
				deadline, _ := ev.Data["deadline"].(string)
				asked[id] = &pauseView{InteractionID: id, Node: ev.NodeID, Kind: kind, Questions: q, Deadline: deadline}
			case engine.EventRunPaused:
				id, _ := ev.Data["interaction_id"].(string)
				if p, ok := asked[id]; ok {
					v.Pause = p
				} else {
					v.Pause = &pauseView{InteractionID: id, Node: ev.NodeID}
				}
			case engine.EventRunResumed:
				// The resumed run starts again whatever it runs next.
				clear(active)
				v.Pause = nil
				clear(asked)
			}
		}
		// Until a page comes back empty: a server may cap the page below
		// what was asked.
		if len(evs) == 0 {
			break
		}
	}
	for _, n := range active {
		v.Nodes = append(v.Nodes, n)
	}
	slices.SortFunc(v.Nodes, func(a, b activeNode) int { return strings.Compare(a.Branch+"/"+a.ID, b.Branch+"/"+b.ID) })
	return nil
}

// settle gives the artifacts that node published just before this finish
// (at seq) its output, when this finish is nearer to them than the one
// before them. A node's artifact is its output: the engine writes
// artifact_written and node_finished in one commit, in an order that
// depends on the node's kind, so the finish nearest the artifact is its.
func (v *runView) settle(node string, seq int64, out map[string]any) {
	v.unsettled = slices.DeleteFunc(v.unsettled, func(a *artifactVersion) bool {
		if a.Node != node {
			return false
		}
		if a.prevSeq == 0 || seq-a.seq < a.seq-a.prevSeq {
			a.Data = out
		}
		return true
	})
}

// artifact returns version (or the latest, when version < 0) of the
// artifact name, or an error naming those there are.
func (v *runView) artifact(name string, version int) (*artifactVersion, error) {
	versions, ok := v.versions[name]
	if !ok || len(versions) == 0 {
		names := slices.Sorted(maps.Keys(v.versions))
		if len(names) == 0 {
			return nil, fmt.Errorf("run %s has published no artifact yet", v.ID)
		}
		return nil, fmt.Errorf("run %s has no artifact %q (its artifacts: %s)", v.ID, name, strings.Join(names, ", "))
	}
	if version < 0 {
		return versions[len(versions)-1], nil
	}
	for _, a := range versions {
		if a.Version == version {
			return a, nil
		}
	}
	return nil, fmt.Errorf("artifact %s of run %s has no version %d (its versions: 0 to %d)", name, v.ID, version, len(versions)-1)
}
