package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/iterion-bot/iterion/dsl"
)

// checkpointVersion is the format version of the checkpoint JSON.
const checkpointVersion = 1

// checkpoint is the resumable state of a run between nodes: with the IR
// and the store's records it is the whole run. It is written after every
// node, so a crash re-runs at most the node that was executing.
type checkpoint struct {
	V  int `json:"v"`
	IR int `json:"ir"`
	// Node is the next node of the trunk to execute, with its input; a
	// terminal target when the run is ending.
	Node  string         `json:"node"`
	Input map[string]any `json:"input,omitempty"`
	// Outputs holds the latest output of every node that ran; History all
	// outputs of nodes that ran more than once.
	Outputs map[string]map[string]any `json:"outputs"`
	History map[string][]any          `json:"history,omitempty"`
	// Artifacts holds every published version, oldest first.
	Artifacts map[string][]any `json:"artifacts,omitempty"`
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

	// Pause describes the blocking question the run waits on.
	Pause *pauseState `json:"pause,omitempty"`
	// Gates are the parked await_answers nodes with their absolute
	// deadlines, keyed by branch id and node ("/gate" on the trunk,
	// "branch_split_gate/gate" in a fan-out branch): a restart re-arms each
	// with the same deadline, on the trunk or when its fan-out runs again.
	Gates map[string]time.Time `json:"gates,omitempty"`

	// encoded caches the JSON of each output, so writing the checkpoint
	// after every node does not re-encode every earlier output. An output
	// is never modified once recorded; recording a new one drops its entry.
	encoded map[string]json.RawMessage
}

// checkpointWire is checkpoint without its methods, for encoding.
type checkpointWire checkpoint

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
	return &checkpoint{
		V: checkpointVersion, IR: dsl.IRVersion, Node: w.Entry,
		Outputs: map[string]map[string]any{}, History: map[string][]any{}, Artifacts: map[string][]any{},
		Loops: map[string]int{}, LoopPrev: map[string]any{}, RoundRobin: map[string]int{},
		Visits: map[string]int{}, Emitted: map[string]map[string]any{}, Gates: map[string]time.Time{},
	}
}

func decodeCheckpoint(b []byte) (*checkpoint, error) {
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("decoding checkpoint: %w", err)
	}
	if c.V != checkpointVersion {
		return nil, fmt.Errorf("checkpoint format version %d is not supported (this build reads %d)", c.V, checkpointVersion)
	}
	if c.IR != dsl.IRVersion {
		return nil, fmt.Errorf("checkpoint was written for IR version %d, this build runs %d", c.IR, dsl.IRVersion)
	}
	for _, m := range []*map[string]map[string]any{&c.Outputs, &c.Emitted} {
		if *m == nil {
			*m = map[string]map[string]any{}
		}
	}
	if c.History == nil {
		c.History = map[string][]any{}
	}
	if c.Artifacts == nil {
		c.Artifacts = map[string][]any{}
	}
	if c.Loops == nil {
		c.Loops = map[string]int{}
	}
	if c.LoopPrev == nil {
		c.LoopPrev = map[string]any{}
	}
	if c.RoundRobin == nil {
		c.RoundRobin = map[string]int{}
	}
	if c.Visits == nil {
		c.Visits = map[string]int{}
	}
	if c.Gates == nil {
		c.Gates = map[string]time.Time{}
	}
	return &c, nil
}

func (c *checkpoint) encode() ([]byte, error) {
	if c.encoded == nil {
		c.encoded = map[string]json.RawMessage{}
	}
	outputs := make(map[string]json.RawMessage, len(c.Outputs))
	for id, out := range c.Outputs {
		b, ok := c.encoded[id]
		if !ok {
			var err error
			if b, err = json.Marshal(out); err != nil {
				return nil, fmt.Errorf("encoding the output of %s: %w", id, err)
			}
			c.encoded[id] = b
		}
		outputs[id] = b
	}
	// The outer Outputs field shadows the embedded one of the same name.
	wire := struct {
		*checkpointWire
		Outputs map[string]json.RawMessage `json:"outputs"`
	}{(*checkpointWire)(c), outputs}
	b, err := json.Marshal(wire)
	if err != nil {
		return nil, fmt.Errorf("encoding checkpoint: %w", err)
	}
	return b, nil
}

// setOutput records a node's output and drops its cached encoding.
func (c *checkpoint) setOutput(id string, out map[string]any) {
	c.Outputs[id] = out
	delete(c.encoded, id)
}

// Snapshot is what the outside world may be shown of a run's checkpoint:
// the status comment and the check run read it.
type Snapshot struct {
	// Gates are the deadlines of parked await_answers gates, by node id.
	Gates map[string]time.Time
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
	for name, versions := range ck.Artifacts {
		if len(versions) > 0 {
			out.Artifacts[name] = versions[len(versions)-1]
			out.Versions[name] = len(versions)
		}
	}
	out.Tokens, out.CostUSD = ck.Tokens, ck.CostUSD
	return out, nil
}
