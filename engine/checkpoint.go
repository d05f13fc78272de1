package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/dsl"
)

// checkpointVersion is the format version of the checkpoint JSON. Version
// 1 held every output, history and artifact version inline; decoding one
// moves them to Unstored, and the run's next commit stores them apart.
const checkpointVersion = 2

// checkpoint is the resumable state of a run between nodes: with the IR
// and the store's records it is the whole run. It is written after every
// node, so a crash re-runs at most the node that was executing.
//
// Outputs are not in it, but for small ones: each is a history entry of
// its node's series, stored once (Change.History), and the checkpoint
// counts them. So its size depends on the workflow, not on how long the
// run has looped or how large its outputs are.
type checkpoint struct {
	V  int `json:"v"`
	IR int `json:"ir"`
	// Node is the next node of the trunk to execute, with its input; a
	// terminal target when the run is ending.
	Node  string         `json:"node"`
	Input map[string]any `json:"input,omitempty"`
	// Entries counts the stored entries of each history series.
	// "outputs.<node>" holds every output of a node whose .history is read,
	// and of any other node its latest alone (index 0, replaced each time)
	// unless that is in Small; either way a node's latest output is the last
	// entry of its series. "artifacts.<name>" holds every published
	// version, oldest first.
	Entries map[string]int `json:"entries,omitempty"`
	// Small holds the latest output of the nodes whose history nobody
	// reads when it is at most maxInlineOutput bytes: one more stored
	// record per node costs more than carrying it.
	Small map[string]json.RawMessage `json:"small_outputs,omitempty"`
	// Unstored holds the entries recorded since the run last committed a
	// checkpoint; that commit stores them apart and drops them from here.
	Unstored []HistoryEntry `json:"unstored,omitempty"`
	// Artifacts holds the latest published version of each artifact.
	Artifacts map[string]any `json:"latest_artifacts,omitempty"`
	// Loops counts the crossings of each loop; LoopPrev is the output that
	// last crossed it.
	Loops      map[string]int `json:"loops,omitempty"`
	LoopPrev   map[string]any `json:"loop_prev,omitempty"`
	RoundRobin map[string]int `json:"round_robin,omitempty"`
	// Visits counts executions per node (a node's iteration).
	Visits map[string]int `json:"visits,omitempty"`
	// Emitted is the sticky registry of emit nodes: event → payload.
	Emitted map[string]map[string]any `json:"emitted,omitempty"`

	// Budget consumption, never reset on resume.
	Iterations int64   `json:"iterations"`
	Tokens     int64   `json:"tokens"`
	CostUSD    float64 `json:"cost_usd"`
	ElapsedNS  int64   `json:"elapsed_ns"`
	// StoredBytes counts what the run has handed to the store: events,
	// history entries, interactions, outbox rows, and each checkpoint it
	// wrote (see runLimits.storedBytes).
	StoredBytes int64 `json:"stored_bytes,omitempty"`

	// Pause describes the blocking question the run waits on.
	Pause *pauseState `json:"pause,omitempty"`
	// Gates are the parked await_answers nodes with their absolute
	// deadlines, keyed by branch id and node ("/gate" on the trunk,
	// "branch_split_gate/gate" in a fan-out branch): a restart re-arms each
	// with the same deadline, on the trunk or when its fan-out runs again.
	Gates map[string]time.Time `json:"gates,omitempty"`

	// Outputs holds the latest output of every node that ran, and History
	// all outputs of the nodes whose .history is read (historyBytes their
	// size as stored); both are read from the store by load, and kept up to
	// date by record.
	Outputs      map[string]map[string]any `json:"-"`
	History      map[string][]any          `json:"-"`
	historyBytes int64
	loaded       bool
}

type pauseState struct {
	InteractionID string          `json:"interaction_id"`
	Node          string          `json:"node"`
	Kind          InteractionKind `json:"kind"`
	// Conversation and PendingToolUseID resume an LLM node's ask_user.
	Conversation     []byte `json:"conversation,omitempty"`
	PendingToolUseID string `json:"pending_tool_use_id,omitempty"`
	// Deadline, when set, is when a paused await fails if its questions
	// are still unanswered: the asking node's timeout, or a parked gate's.
	Deadline time.Time `json:"deadline,omitzero"`
	// Gate marks an await_answers node parked durably (ParkGates): it
	// waits for the pending questions of From ("" means every node), not
	// for those of its own node.
	Gate bool   `json:"gate,omitempty"`
	From string `json:"from,omitempty"`
}

// scope is the node whose pending questions an await pause waits for,
// "" for every node.
func (p *pauseState) scope() string {
	if p.Gate {
		return p.From
	}
	return p.Node
}

func newCheckpoint(w *dsl.Workflow) *checkpoint {
	c := &checkpoint{V: checkpointVersion, IR: dsl.IRVersion, Node: w.Entry, loaded: true}
	c.init()
	return c
}

// init makes the nil maps of a new or decoded checkpoint empty.
func (c *checkpoint) init() {
	for _, m := range []*map[string]map[string]any{&c.Outputs, &c.Emitted} {
		if *m == nil {
			*m = map[string]map[string]any{}
		}
	}
	for _, m := range []*map[string]int{&c.Entries, &c.Loops, &c.RoundRobin, &c.Visits} {
		if *m == nil {
			*m = map[string]int{}
		}
	}
	for _, m := range []*map[string]any{&c.Artifacts, &c.LoopPrev} {
		if *m == nil {
			*m = map[string]any{}
		}
	}
	if c.History == nil {
		c.History = map[string][]any{}
	}
	if c.Small == nil {
		c.Small = map[string]json.RawMessage{}
	}
	if c.Gates == nil {
		c.Gates = map[string]time.Time{}
	}
}

func decodeCheckpoint(b []byte) (*checkpoint, error) {
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("decoding checkpoint: %w", err)
	}
	if c.V != checkpointVersion && c.V != 1 {
		return nil, fmt.Errorf("checkpoint format version %d is not supported (this build reads 1 and %d)", c.V, checkpointVersion)
	}
	if c.IR != dsl.IRVersion {
		return nil, fmt.Errorf("checkpoint was written for IR version %d, this build runs %d", c.IR, dsl.IRVersion)
	}
	c.init()
	if c.V == 1 {
		var old checkpointV1
		if err := json.Unmarshal(b, &old); err != nil {
			return nil, fmt.Errorf("decoding checkpoint: %w", err)
		}
		if err := c.migrateV1(&old); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// checkpointV1 is what version 1 kept inline that version 2 stores apart.
type checkpointV1 struct {
	Outputs   map[string]map[string]any `json:"outputs"`
	History   map[string][]any          `json:"history"`
	Artifacts map[string][]any          `json:"artifacts"`
}

// migrateV1 turns the inline outputs, history and artifact versions of a
// version 1 checkpoint into unstored entries.
func (c *checkpoint) migrateV1(old *checkpointV1) error {
	series := func(name string, values []any) error {
		for i, v := range values {
			b, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("migrating checkpoint: %s: %w", name, err)
			}
			c.Unstored = append(c.Unstored, HistoryEntry{Series: name, Index: i, Data: b})
		}
		c.Entries[name] = len(values)
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(old.Outputs)) {
		values := old.History[id]
		if len(values) == 0 {
			values = []any{old.Outputs[id]}
		}
		if err := series(outputSeries(id), values); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(old.Artifacts)) {
		versions := old.Artifacts[name]
		if len(versions) == 0 {
			continue
		}
		if err := series(artifactSeries(name), versions); err != nil {
			return err
		}
		c.Artifacts[name] = versions[len(versions)-1]
	}
	c.V = checkpointVersion
	return nil
}

func (c *checkpoint) encode() ([]byte, error) {
	b, err := json.Marshal((*checkpointWire)(c))
	if err != nil {
		return nil, fmt.Errorf("encoding checkpoint: %w", err)
	}
	return b, nil
}

// maxInlineOutput is the largest output Small holds.
const maxInlineOutput = 512

// checkpointWire is checkpoint without its methods, for encoding.
type checkpointWire checkpoint

// outputSeries and artifactSeries name the history series of a node's
// outputs and of an artifact's versions.
func outputSeries(node string) string   { return "outputs." + node }
func artifactSeries(name string) string { return "artifacts." + name }

// Snapshot is what the outside world may be shown of a run's checkpoint:
// the status comment and the check run read it.
type Snapshot struct {
	// Gates are the deadlines of parked await_answers gates, by node id.
	Gates map[string]time.Time
	// PauseDeadline, when set, is when the run's pause fails if its
	// questions are still unanswered (an await's deadline).
	PauseDeadline time.Time
	// Artifacts are the latest published version of each artifact, by
	// publish name, with the number of versions.
	Artifacts map[string]any
	Versions  map[string]int
	Tokens    int64
	CostUSD   float64
}

// ReadSnapshot reads a run's stored checkpoint; a nil checkpoint (a run
// that has not finished a node) reads as empty.
func ReadSnapshot(raw []byte) (*Snapshot, error) {
	out := &Snapshot{Gates: map[string]time.Time{}, Artifacts: map[string]any{}, Versions: map[string]int{}}
	if raw == nil {
		return out, nil
	}
	ck, err := decodeCheckpoint(raw)
	if err != nil {
		return nil, err
	}
	for key, at := range ck.Gates {
		// Keys are <branch>/<node>; node ids hold no '/'.
		node := key[strings.LastIndexByte(key, '/')+1:]
		if prev, ok := out.Gates[node]; !ok || at.Before(prev) {
			out.Gates[node] = at
		}
	}
	for name, latest := range ck.Artifacts {
		out.Artifacts[name] = latest
		out.Versions[name] = ck.Entries[artifactSeries(name)]
	}
	if ck.Pause != nil {
		out.PauseDeadline = ck.Pause.Deadline
	}
	out.Tokens, out.CostUSD = ck.Tokens, ck.CostUSD
	return out, nil
}

// ReadOutputs reads the latest output of every node of a run that has
// produced one: the checkpoint counts them, the store keeps them. A run
// without a checkpoint has none.
func ReadOutputs(ctx context.Context, s Store, runID string) (map[string]map[string]any, error) {
	raw, err := s.Checkpoint(ctx, runID)
	if err != nil || raw == nil {
		return map[string]map[string]any{}, err
	}
	ck, err := decodeCheckpoint(raw)
	if err != nil {
		return nil, err
	}
	if err := ck.load(ctx, s, runID, nil, maxHistoryBytes); err != nil {
		return nil, err
	}
	return ck.Outputs, nil
}
