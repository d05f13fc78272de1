package dsl

import (
	"time"

	"github.com/iterion-bot/iterion/dsl/expr"
	"github.com/iterion-bot/iterion/engine/permission"
)

// The intermediate representation: what a workflow means, resolved and
// checked. The engine consumes only the IR, never the syntax tree.
//
// The IR is immutable once Compile returns: it is shared by every run of the
// workflow, concurrently, so nothing may modify it. Slices are in source
// order; lookups go through the methods of Workflow.

// IRVersion marks the semantics of the IR. It changes whenever a change to
// the compiler would make an existing checkpoint mean something else.
const IRVersion = 1

// Terminal edge targets. They are implicit: a node may not be named so.
const (
	// TargetDone ends the run as finished.
	TargetDone = "done"
	// TargetFail ends the run as failed with failure code FAIL_NODE.
	TargetFail = "fail"
)

// Workflow is a compiled workflow file.
type Workflow struct {
	// Name is the workflow's declared name.
	Name string
	// File is the source file name.
	File string
	// Hash is the hex SHA-256 of the source, recorded with each run so a
	// resume can tell whether the file changed.
	Hash string
	// Profile is the syntax profile the file was read with.
	Profile int
	// Entry is the id of the first node.
	Entry string
	// DefaultBackend is the backend of LLM nodes that name none ("" when the
	// workflow leaves the choice to the environment).
	DefaultBackend string
	// Interaction is the default interaction mode of agents and judges.
	Interaction Interaction
	// Budget holds the run's caps; zero fields are unbounded.
	Budget Budget
	// Vars are the declared variables, top-level ones first.
	Vars []*Var
	// Presets are the named var sets.
	Presets []*Preset
	// Schemas are the declared schemas.
	Schemas []*Schema
	// Prompts are the declared prompts.
	Prompts []*Prompt
	// Nodes are the declared nodes in source order.
	Nodes []*Node
	// Edges are the edges in source order; chains are split into edges.
	Edges []*Edge
	// Loops are the declared loops, in order of first use.
	Loops []*Loop
	// Sandbox is the workflow's sandbox: declaration, which every node
	// without one of its own runs in; nil leaves the choice to the server's
	// configured driver. See SandboxFor.
	Sandbox *Sandbox
	// EnvRefs are the property values that read the environment, as the
	// compiler resolved them (Options.Env).
	EnvRefs []EnvRef
	// MCPServers are the declared mcp_server blocks, in source order.
	// Which ones a node uses is its LLM.MCPServers.
	MCPServers []*MCPServer

	nodes   map[string]*Node
	schemas map[string]*Schema
	prompts map[string]*Prompt
	vars    map[string]*Var
	loops   map[string]*Loop
	mcp     map[string]*MCPServer
	out     map[string][]*Edge
	in      map[string][]*Edge
}

// Node returns the node with the given id, or nil.
func (w *Workflow) Node(id string) *Node { return w.nodes[id] }

// Schema returns the schema with the given name, or nil.
func (w *Workflow) Schema(name string) *Schema { return w.schemas[name] }

// Prompt returns the prompt with the given name, or nil.
func (w *Workflow) Prompt(name string) *Prompt { return w.prompts[name] }

// Var returns the variable with the given name, or nil.
func (w *Workflow) Var(name string) *Var { return w.vars[name] }

// Loop returns the loop with the given name, or nil.
func (w *Workflow) Loop(name string) *Loop { return w.loops[name] }

// MCPServer returns the mcp_server with the given name, or nil.
func (w *Workflow) MCPServer(name string) *MCPServer { return w.mcp[name] }

// SandboxFor returns the sandbox declaration n runs under: its own, else
// the workflow's, else nil, which means the server's configured driver with
// the defaults of n's kind. A node's declaration replaces the workflow's as a
// whole; the two are not merged field by field. Only agents, judges and tools
// start processes, so only their answer matters.
func (w *Workflow) SandboxFor(n *Node) *Sandbox {
	if n != nil && n.Sandbox != nil {
		return n.Sandbox
	}
	return w.Sandbox
}

// Outgoing returns the edges leaving node id, in source order.
func (w *Workflow) Outgoing(id string) []*Edge { return w.out[id] }

// Incoming returns the edges entering node id, in source order.
func (w *Workflow) Incoming(id string) []*Edge { return w.in[id] }

// Budget holds the caps of a run. Zero means unbounded.
type Budget struct {
	MaxParallelBranches int
	MaxDuration         time.Duration
	MaxCostUSD          float64
	MaxTokens           int64
	WarnTokens          int64
	MaxIterations       int64
}

// TypeKind is the base type of a field or var.
type TypeKind int

const (
	// TypeInvalid is the zero TypeKind.
	TypeInvalid TypeKind = iota
	TypeString
	TypeBool
	TypeInt
	TypeFloat
	TypeJSON
	// TypeFile is a file upload, valid only on human node outputs.
	TypeFile
)

var typeNames = map[string]TypeKind{
	"string": TypeString, "bool": TypeBool, "int": TypeInt, "float": TypeFloat, "json": TypeJSON, "file": TypeFile,
}

// String returns the DSL spelling of the type.
func (k TypeKind) String() string {
	for name, kk := range typeNames {
		if kk == k {
			return name
		}
	}
	return "invalid"
}

// Type is a field or var type: a base kind, or a list of strings.
type Type struct {
	Kind TypeKind
	// List is set for string[].
	List bool
}

// String returns the DSL spelling, such as "string[]".
func (t Type) String() string {
	if t.List {
		return t.Kind.String() + "[]"
	}
	return t.Kind.String()
}

// Var is a declared workflow variable.
type Var struct {
	Name string
	Type Type
	// Enum lists the allowed values of a string var; nil when unrestricted.
	Enum []string
	// Default is the default value (string, int64, float64, bool, []any or
	// a decoded JSON value); HasDefault tells an absent default from a zero.
	Default    any
	HasDefault bool
}

// Preset is a named set of var values.
type Preset struct {
	Name string
	// Values maps var names to values of the var's type.
	Values map[string]any
}

// Schema is a named record type: a node's input or output.
type Schema struct {
	Name   string
	Fields []*Field
}

// Field returns the field with the given name, or nil.
func (s *Schema) Field(name string) *Field {
	for _, f := range s.Fields {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// Field is one field of a schema.
type Field struct {
	Name string
	Type Type
	// Enum lists the allowed values of a string field.
	Enum []string
}

// JSONSchema returns the schema as a JSON Schema object (draft 2020-12
// vocabulary), for validating outputs and for model structured output.
// Every field is required; extra properties are allowed, since engines stamp
// keys such as _tokens on outputs.
func (s *Schema) JSONSchema() map[string]any {
	props := map[string]any{}
	required := []any{}
	for _, f := range s.Fields {
		props[f.Name] = f.jsonSchema()
		required = append(required, f.Name)
	}
	return map[string]any{"type": "object", "properties": props, "required": required}
}

func (f *Field) jsonSchema() map[string]any {
	var m map[string]any
	switch f.Type.Kind {
	case TypeString, TypeFile:
		m = map[string]any{"type": "string"}
	case TypeBool:
		m = map[string]any{"type": "boolean"}
	case TypeInt:
		m = map[string]any{"type": "integer"}
	case TypeFloat:
		m = map[string]any{"type": "number"}
	default:
		m = map[string]any{}
	}
	if len(f.Enum) > 0 {
		enum := make([]any, len(f.Enum))
		for i, e := range f.Enum {
			enum[i] = e
		}
		m["enum"] = enum
	}
	if f.Type.List {
		return map[string]any{"type": "array", "items": m}
	}
	return m
}

// Prompt is a named prompt text.
type Prompt struct {
	Name string
	Body *Template
}

// NodeKind is the kind of a node.
type NodeKind int

const (
	// NodeInvalid is the zero NodeKind.
	NodeInvalid NodeKind = iota
	NodeAgent
	NodeJudge
	NodeHuman
	NodeRouter
	NodeTool
	NodeCompute
	NodeEmit
	NodeWait
	NodeAwaitAnswers
	NodeFail
)

var nodeKindNames = []string{"invalid", "agent", "judge", "human", "router", "tool", "compute", "emit", "wait", "await_answers", "fail"}

// String returns the declaration keyword of the kind.
func (k NodeKind) String() string {
	if int(k) < len(nodeKindNames) {
		return nodeKindNames[k]
	}
	return "invalid"
}

// Interaction is how a node may interact with a human.
type Interaction int

const (
	// InteractionUnset is the zero Interaction: inherit the default.
	InteractionUnset Interaction = iota
	// InteractionNone: interaction requests fail.
	InteractionNone
	// InteractionHuman: a question pauses the run for a human.
	InteractionHuman
	// InteractionLLM: a model answers instead of a human.
	InteractionLLM
	// InteractionLLMOrHuman: a model answers unless it flags that a human
	// is needed.
	InteractionLLMOrHuman
	// InteractionAsync: the agent may post questions and keep working
	// (ask_user_async, await_answers), besides the blocking ask_user.
	InteractionAsync
)

var interactionNames = []string{"", "none", "human", "llm", "llm_or_human", "async"}

// String returns the DSL spelling; "" for unset.
func (i Interaction) String() string {
	if int(i) < len(interactionNames) {
		return interactionNames[i]
	}
	return "invalid"
}

// Session says which conversation an LLM node starts from.
type Session int

const (
	// SessionFresh (the zero value) starts a new conversation.
	SessionFresh Session = iota
	SessionInherit
	SessionInheritIfAvailable
	SessionFork
	SessionArtifactsOnly
	SessionPersist
)

var sessionNames = []string{"fresh", "inherit", "inherit_if_available", "fork", "artifacts_only", "persist"}

// String returns the DSL spelling.
func (s Session) String() string {
	if int(s) < len(sessionNames) {
		return sessionNames[s]
	}
	return "invalid"
}

// AwaitMode is how a convergence node treats failed branches.
type AwaitMode int

const (
	// AwaitUnset is the zero AwaitMode: the node is not declared a
	// convergence point (it may still be one by having several predecessors,
	// in which case wait_all applies).
	AwaitUnset AwaitMode = iota
	// AwaitWaitAll fails if any branch failed.
	AwaitWaitAll
	// AwaitBestEffort runs with the surviving branches.
	AwaitBestEffort
)

var awaitNames = []string{"", "wait_all", "best_effort"}

// String returns the DSL spelling; "" for unset.
func (a AwaitMode) String() string {
	if int(a) < len(awaitNames) {
		return awaitNames[a]
	}
	return "invalid"
}

// RouterMode is how a router picks its outgoing edges.
type RouterMode int

const (
	// RouterInvalid is the zero RouterMode.
	RouterInvalid RouterMode = iota
	// RouterFanOutAll starts a branch on every outgoing edge.
	RouterFanOutAll
	// RouterCondition follows the first edge whose guard holds.
	RouterCondition
	// RouterRoundRobin follows one edge per traversal, in turn.
	RouterRoundRobin
	// RouterLLM lets a model pick the edge (or several with Multi).
	RouterLLM
)

var routerModeNames = []string{"invalid", "fan_out_all", "condition", "round_robin", "llm"}

// String returns the DSL spelling.
func (m RouterMode) String() string {
	if int(m) < len(routerModeNames) {
		return routerModeNames[m]
	}
	return "invalid"
}

// Node is one node of the workflow graph. The kind-specific part is in the
// field named for the kind; the others are nil.
type Node struct {
	ID          string
	Kind        NodeKind
	Description string
	// Input and Output are the node's schemas, nil when undeclared.
	Input  *Schema
	Output *Schema
	// Publish names the artifact the node's output is published as.
	Publish string
	// Await marks a convergence node and its policy.
	Await AwaitMode
	// Timeout bounds one execution of the node; 0 means none.
	Timeout time.Duration

	// LLM is set on agents, judges, llm routers and model-answered humans.
	LLM *LLM
	// Human is set on human nodes.
	Human *Human
	// FollowUp, when set, reminds, escalates and expires the node's
	// questions to people (human nodes, and async agents and judges).
	FollowUp *FollowUp
	// Router is set on routers.
	Router *Router
	// Tool is set on tool nodes.
	Tool *Tool
	// Compute is set on compute nodes.
	Compute *Compute
	// Event is set on emit and wait nodes.
	Event *Event
	// AwaitAnswers is set on await_answers nodes.
	AwaitAnswers *AwaitAnswers
	// Fail is set on fail nodes.
	Fail *Fail

	// Sandbox is the node's own sandbox: declaration (agents, judges and
	// tools only); nil inherits the workflow's. Read it through
	// Workflow.SandboxFor.
	Sandbox *Sandbox

	// AnswerOn, when set, lists the channels the node's questions may be
	// answered on (answer_on: [github, page]; agents, judges and humans);
	// nil means every channel. Answerers, when set, narrows who may answer
	// them to these GitHub logins (still with the repository's permission).
	AnswerOn  []string
	Answerers []string
}

// AnswerChannels are the channels answer_on may name.
var AnswerChannels = []string{"github", "slack", "page", "cli", "api"}

// LLM is the model-facing configuration of a node.
type LLM struct {
	// Model is "<provider>/<model>" or a backend-specific name; "" leaves it
	// to the backend.
	Model string
	// Backend names the backend; "" means the workflow default, then the
	// environment's choice.
	Backend string
	// System and User are the prompt templates; nil when not given.
	System *Template
	User   *Template
	// Session is where the conversation starts.
	Session Session
	// Interaction is the effective interaction mode (the workflow default
	// applied).
	Interaction Interaction
	// Tools are the workspace tools the node may use.
	Tools []string
	// ToolMaxSteps bounds tool-loop iterations; 0 is the backend default.
	ToolMaxSteps int
	// MaxTokens bounds the output tokens of one model call; 0 is the default.
	MaxTokens int
	// ReasoningEffort is low, medium, high, xhigh, max or "" for default.
	ReasoningEffort string
	// Multi lets an llm router pick several edges.
	Multi bool
	// Permission is the node's tool-call policy (its own permission: and
	// rule lists over the workflow's); nil when nothing declares one.
	// PermissionModeSet reports whether a mode was written, so the
	// server's default (ITERION_PERMISSION) applies otherwise.
	Permission        *permission.Policy
	PermissionModeSet bool
	// ReadOnly gives the node read-only tools and a read-only workspace.
	ReadOnly bool
	// MCPServers names the MCP servers the node uses, in order: the
	// workflow's mcp: servers unless the node's mcp: says inherit: false,
	// then the node's own servers, less the disabled ones. Each is declared
	// (Workflow.MCPServer). Empty on a readonly node, which gets none.
	MCPServers []string
}

// Human is the configuration of a human node.
type Human struct {
	// Instructions is the text shown to the person answering.
	Instructions *Template
	// Interaction is human, llm or llm_or_human.
	Interaction Interaction
}

// Router is the configuration of a router node.
type Router struct {
	Mode RouterMode
}

// Tool is the configuration of a tool node.
type Tool struct {
	// Command is run with bash -c in the run's workspace. A reference's
	// value reaches it as data, in an environment variable whose expansion
	// is written for the place it stands in (dsl/shell), unless written
	// {{!…}}, which splices it as shell text.
	Command *Template
	// Script, instead of Command, is a program in Language (sh, the
	// default, bash, js or py), read by its interpreter from standard
	// input. In a shell script a reference is given as in a command; in js
	// and py it stands for its value as JSON, read from the environment.
	Script   *Template
	Language string
}

// Compute is the configuration of a compute node: one expression per
// output field, in source order.
type Compute struct {
	Fields []*ComputeField
}

// ComputeField is one expr: entry.
type ComputeField struct {
	Name string
	Expr *expr.Expr
}

// Event is the configuration of an emit or wait node.
type Event struct {
	// Name is the event name.
	Name string
	// With is the payload an emit node publishes, in source order.
	With []*Mapping
}

// AwaitAnswers is the configuration of an await_answers node.
type AwaitAnswers struct {
	// From restricts the gate to one asking node's questions; "" means the
	// whole run.
	From string
}

// Fail is the configuration of a typed fail node.
type Fail struct {
	// Code is the failure code recorded on the run.
	Code string
	// Message is rendered when the node is reached.
	Message *Template
	// Resumable parks the run as failed_resumable instead of failed.
	Resumable bool
}

// SandboxMode is the driver a sandbox: declaration asks for.
type SandboxMode int

const (
	// SandboxInvalid is the zero SandboxMode: a declaration whose mode did
	// not compile. It never appears in a workflow without errors.
	SandboxInvalid SandboxMode = iota
	// SandboxAuto is the server's configured driver (sandbox: auto).
	SandboxAuto
	// SandboxHost runs processes on the host, without isolation (sandbox:
	// none or host). The server refuses it unless the operator allows it.
	SandboxHost
	// SandboxBwrap runs processes under bubblewrap (sandbox: bwrap).
	SandboxBwrap
	// SandboxDocker runs processes in a docker container (sandbox: docker,
	// or a block with image:), of Sandbox.Image or else the server's image.
	SandboxDocker
)

var sandboxModeNames = []string{"invalid", "auto", "host", "bwrap", "docker"}

// String returns the driver's name: auto, host, bwrap or docker.
func (m SandboxMode) String() string {
	if int(m) < len(sandboxModeNames) {
		return sandboxModeNames[m]
	}
	return "invalid"
}

// The values of Sandbox.Network besides "", the default: no network for
// tool nodes and agents' shell tools, and model-only for a CLI agent
// backend's own process.
const (
	// SandboxNetworkNone cuts the sandbox off from the network.
	SandboxNetworkNone = "none"
	// SandboxNetworkOpen gives the sandbox the network the server has.
	SandboxNetworkOpen = "open"
	// SandboxNetworkModelOnly cuts the sandbox off from the network, except
	// that an agent CLI reaches its model provider through the run's model
	// proxy (which holds the key). For tool nodes and agents' shell tools
	// it is none.
	SandboxNetworkModelOnly = "model-only"
)

// Sandbox is a sandbox: declaration, on the workflow or on a node. It
// says which of the server's drivers runs the processes and what they get;
// the mounts, limits and everything else are the operator's, set in the
// server's configuration, and no workflow file can change them.
type Sandbox struct {
	// Mode is the driver.
	Mode SandboxMode
	// Image is the docker image, for SandboxDocker; "" means the server's
	// configured image.
	Image string
	// Network is "" (the default for the node kind), SandboxNetworkNone,
	// SandboxNetworkOpen or SandboxNetworkModelOnly.
	Network string
	// Env is extra environment for the sandboxed processes: literal,
	// non-secret values (no templates, nothing read from the server's
	// environment), with names that are valid and not reserved (PATH, HOME,
	// ITERION_*). nil when none is declared.
	Env map[string]string
	// Range is where the declaration is written, for messages.
	Range Range
}

// MCPTransport is how iterion talks to an MCP server.
type MCPTransport int

const (
	// MCPInvalid is the zero MCPTransport: a declaration whose transport
	// did not compile. It never appears in a workflow without errors.
	MCPInvalid MCPTransport = iota
	// MCPStdio starts the server as a process in the node's sandbox and
	// speaks to it over its standard input and output.
	MCPStdio
	// MCPHTTP is the Streamable HTTP transport (2025-03-26 and later).
	MCPHTTP
	// MCPSSE is the legacy HTTP+SSE transport (2024-11-05): an event
	// stream opened with GET, messages POSTed where it says.
	MCPSSE
)

var mcpTransportNames = []string{"invalid", "stdio", "http", "sse"}

// String returns the DSL spelling: stdio, http or sse.
func (t MCPTransport) String() string {
	if int(t) < len(mcpTransportNames) {
		return mcpTransportNames[t]
	}
	return "invalid"
}

// MCPServer is an mcp_server declaration.
type MCPServer struct {
	Name      string
	Transport MCPTransport
	// Command and Args start a stdio server, in the node's sandbox (Command
	// is looked up in the sandbox's PATH, or relative to the workspace).
	Command string
	Args    []string
	// URL is an http or sse server's endpoint.
	URL string
	// Env is what a stdio server gets beyond the sandbox's environment:
	// literal values, with the names a sandbox: env accepts. nil when none.
	Env map[string]string
	// Range is where the declaration is written, for messages.
	Range Range
}

// Edge is a directed edge between two nodes (or to done/fail).
type Edge struct {
	From string
	To   string
	// When is the guard; nil on an unconditional or else edge.
	When *Condition
	// Else marks the fallback taken when no sibling guard holds.
	Else bool
	// Loop is the loop this edge counts against; nil when none.
	Loop *Loop
	// With maps target input fields to templates, in source order.
	With []*Mapping
}

// ID names the edge in diagnostics and events: "from->to".
func (e *Edge) ID() string { return e.From + "->" + e.To }

// Condition is an edge guard: a bool field of the source's output, or an
// expression evaluated with the source's output as input.
type Condition struct {
	Field string
	Not   bool
	Expr  *expr.Expr
}

// Mapping is one key of a with { … } map.
type Mapping struct {
	Key   string
	Value *Template
}

// Loop is a bounded loop: the edges that carry it may be crossed at most
// Max times per run (N crossings, so N+1 executions of the body).
type Loop struct {
	Name string
	// Max is the literal bound; 0 when the bound is computed by MaxExpr.
	Max int
	// MaxExpr computes the bound at each crossing; nil for a literal.
	MaxExpr *expr.Expr
}
