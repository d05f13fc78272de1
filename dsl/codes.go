package dsl

// Code is a stable diagnostic code. The codes and their meanings are
// upstream iterion's, so files and tooling written for upstream keep
// working: parse codes are E0xx, compile codes Cxxx. This list is
// append-only; a code is never renumbered or reused for another meaning.
// Codes E090–E099 are this implementation's own (limits, constructs it
// does not run, warnings about tool commands and loop bounds); upstream
// leaves that band unused.
type Code string

// Parse codes.
const (
	// ErrUnexpected (E001): a token that does not belong where it stands.
	//	agent a:
	//	  model "x"      ← E001/E002: expected ":" after property
	ErrUnexpected Code = "E001"
	// ErrExpected (E002): a specific token or value shape was expected,
	// such as a name after "agent", a ":" after a property or a quoted value.
	//	timeout: 20m     ← E002: value 20m must be quoted
	ErrExpected Code = "E002"
	// ErrIndent (E003): indentation with tabs, a dedent to a column no
	// enclosing block uses, or nesting too deep.
	ErrIndent Code = "E003"
	// ErrUnterminated (E004): a string without its closing quote.
	ErrUnterminated Code = "E004"
	// ErrBadEscape (E005): an unknown escape sequence where escapes are
	// decoded (profile 2 or strict-escape).
	ErrBadEscape Code = "E005"
	// ErrNotUTF8 (E006): the source is not valid UTF-8.
	ErrNotUTF8 Code = "E006"
	// ErrUnknownDecl (E010): a top-level word that is not a declaration.
	//	agnet a:         ← E010: unknown declaration "agnet"; did you mean "agent"?
	ErrUnknownDecl Code = "E010"
	// ErrReservedName (E011): a prompt or schema named done or fail.
	ErrReservedName Code = "E011"
	// ErrUnknownProp (E012): a property the declaration does not have,
	// reported with the nearest valid name.
	//	agent a:
	//	  modle: "anthropic/claude-sonnet-4-6"   ← E012: did you mean "model"?
	ErrUnknownProp Code = "E012"
	// ErrMissingProp (E013): a required property is missing.
	ErrMissingProp Code = "E013"
	// ErrDuplicate (E014): a property, map key or top-level block given twice.
	ErrDuplicate Code = "E014"
	// ErrInvalidValue (E020): a value outside the property's allowed set
	// (session, await, interaction, router mode, …) or of the wrong kind.
	//	interaction: sometimes    ← E020
	ErrInvalidValue Code = "E020"
	// ErrBadType (E021): an unknown type in a schema field or var.
	ErrBadType Code = "E021"
	// ErrDuplicateClause (E030): when, as or with given twice on one edge.
	ErrDuplicateClause Code = "E030"
	// ErrWhenAndElse (E031): an edge with both when and else.
	ErrWhenAndElse Code = "E031"
	// ErrClauseBeforeArrow (E032): a clause in the middle of a chain.
	//	a -> b when ok -> c       ← E032
	ErrClauseBeforeArrow Code = "E032"
	// ErrProfile (E040): a malformed or unknown "dsl:" profile header.
	ErrProfile Code = "E040"
	// ErrProfileNotFirst (E041): the profile header after a declaration, or
	// given twice.
	ErrProfileNotFirst Code = "E041"
	// ErrStrictEscapeInProfile2 (E042): the profile 1 strict-escape
	// directive in a profile 2 file, where escapes are always decoded.
	ErrStrictEscapeInProfile2 Code = "E042"
	// ErrUnsupported (E090): an upstream construct (subbot, group, import,
	// mcp_server, foreach loops, sandbox build: and mounts:, …) that this
	// implementation parses but does not run. It is an error so nothing is
	// silently ignored.
	ErrUnsupported Code = "E090"
	// ErrTooLarge (E091): the file exceeds MaxFileSize.
	ErrTooLarge Code = "E091"
	// ErrTooManyDiags (E092): the diagnostic cap was reached; the rest are
	// counted, not listed.
	ErrTooManyDiags Code = "E092"
	// UnsafeCommandRef (E093, warning): a reference in a tool command stands
	// where no quoting keeps its value inert, so a hostile value could still
	// run: inside backticks, at command position, in a heredoc or pipeline a
	// shell runs, in a program of another interpreter, in ssh's arguments.
	// (In arithmetic, variable-name places and scripts handed to a second
	// shell the engine does keep values inert; see docs/dsl.md.)
	//	command: "echo `git log {{vars.base}}`"    ← E093: inside backticks
	//	command: "python3 -c 'print(\"{{vars.title}}\")'"  ← E093: in a program python3 runs
	UnsafeCommandRef Code = "E093"
	// RawUntrustedRef (E094, warning): a raw reference {{!…}}, spliced into a
	// tool command as shell text, takes a value a pull request or a model
	// controls: pr_title, pr_body, comment_body, or the output of an agent,
	// a judge, a human or an await_answers node (directly, through an
	// artifact, an edge's with, or a loop's previous_output).
	//	command: "echo {{!vars.pr_title}}"   ← E094: drop the !
	RawUntrustedRef Code = "E094"
	// LoopBoundOverCap (E095, warning): a loop bound written as a number
	// above the compiler's cap, Options.MaxLoopBound (DefaultMaxLoopBound,
	// 10,000, unless the program that compiles the file sets another).
	// Each crossing runs and stores the loop's nodes again, so such a bound
	// is almost always a typo or a way to loop forever.
	//	a -> a as retry(1000000000)    ← E095: above the cap of 10000
	LoopBoundOverCap Code = "E095"
	// UnknownMCPServer (E096): an mcp: block names a server no mcp_server
	// declares. Upstream finds this only when the run starts, because a
	// project's .mcp.json may declare it; this implementation does not read
	// .mcp.json, so the file alone decides.
	//	mcp:
	//	  servers: [githb]        ← E096: did you mean "github"?
	UnknownMCPServer Code = "E096"
	// InertMCP (E097, warning): an MCP setting that does nothing here,
	// said with what happens instead: autoload_project: true (the
	// project's .mcp.json is not loaded), or MCP servers on a readonly
	// node (an MCP tool may change anything, so none is offered).
	InertMCP Code = "E097"
)

// Lexer-level aliases, kept for readability at the call sites.
const (
	ErrTabIndent      = ErrIndent
	ErrBadDedent      = ErrIndent
	ErrTooDeep        = ErrIndent
	ErrProfileSyntax  = ErrProfile
	ErrProfileUnknown = ErrProfile
	ErrBadChar        = ErrUnexpected
	ErrUnquoted       = ErrExpected
	ErrExpectedName   = ErrExpected
	ErrExpectedColon  = ErrExpected
	ErrExpectedValue  = ErrExpected
	ErrExpectedType   = ErrBadType
	ErrDuplicateProp  = ErrDuplicate
	ErrDuplicateKey   = ErrDuplicate
	ErrEmptyBody      = ErrMissingProp
)

// Compile codes.
const (
	// UndeclaredNode (C001): an edge names a node that is not declared.
	UndeclaredNode Code = "C001"
	// UnknownSchema (C002): input: or output: names no schema.
	UnknownSchema Code = "C002"
	// UnknownPrompt (C003): system:, user: or instructions: names no prompt.
	UnknownPrompt Code = "C003"
	// BadTemplate (C004): a malformed {{…}} reference, or a tool without
	// exactly one command.
	BadTemplate Code = "C004"
	// LoopConflict (C005): one loop name declared with different maxima.
	LoopConflict Code = "C005"
	// NoWorkflow (C006): the file declares no workflow.
	NoWorkflow Code = "C006"
	// ManyWorkflows (C007): the file declares more than one workflow.
	ManyWorkflows Code = "C007"
	// BadEntry (C008): entry: is missing or names no node.
	BadEntry Code = "C008"
	// InheritAtJoin (C009): session inherit, inherit_if_available or fork on
	// a convergence node, where there is no single conversation to inherit.
	InheritAtJoin Code = "C009"
	// ManyDefaults (C010): a non-router node with more than one unconditional
	// outgoing edge (the loop-exhaustion exit pair excepted).
	ManyDefaults Code = "C010"
	// DuplicateCondition (C011): two edges from one node on the same field
	// with the same polarity.
	DuplicateCondition Code = "C011"
	// NotExhaustive (C012): conditional edges that may all be false, with no
	// fallback edge.
	NotExhaustive Code = "C012"
	// ConditionNotBool (C013): when names a field that is not a bool.
	ConditionNotBool Code = "C013"
	// ConditionUnknownField (C014): when names a field the source's output
	// schema does not have.
	ConditionUnknownField Code = "C014"
	// ElseAlone (C015): an else edge without a conditional sibling.
	ElseAlone Code = "C015"
	// Unreachable (C016): a node no path from entry reaches.
	Unreachable Code = "C016"
	// HistoryOutsideLoop (C017): {{outputs.n.history}} where n is in no loop.
	HistoryOutsideLoop Code = "C017"
	// MissingModel (C018): an LLM node with neither model nor backend (an
	// error on agents and judges and LLM-answered human nodes, a warning on
	// llm routers).
	MissingModel Code = "C018"
	// UnboundedCycle (C019): a cycle with no loop declaration on it.
	UnboundedCycle Code = "C019"
	// RoundRobinEdges (C020): a round_robin router with fewer than two edges.
	RoundRobinEdges Code = "C020"
	// LLMRouterEdges (C021): an llm router with fewer than two edges.
	LLMRouterEdges Code = "C021"
	// LLMRouterWhen (C022): a when clause on an llm router's edge.
	LLMRouterWhen Code = "C022"
	// LLMOnlyProp (C023): model, system, user or multi on a non-llm router.
	LLMOnlyProp Code = "C023"
	// LoopMaxTooSmall (C026): a loop maximum below 1.
	LoopMaxTooSmall Code = "C026"
	// BadReasoningEffort (C027): reasoning_effort outside its values.
	BadReasoningEffort Code = "C027"
	// BadPermission (C110): permission: not off, ask or deny, or an
	// allow/ask/deny rule that does not parse.
	BadPermission Code = "C110"
	// PermissionRulesInert (C111, warning): allow rules under permission:
	// off, which allows everything anyway.
	PermissionRulesInert Code = "C111"
	// ToolPermissionInert (C112, warning): permission: on a tool node,
	// which runs a fixed command.
	ToolPermissionInert Code = "C112"
	// DuplicateMCPServer (C024): an mcp_server name declared twice.
	DuplicateMCPServer Code = "C024"
	// BadMCPServer (C025): an mcp_server whose properties do not fit its
	// transport: stdio needs command: and takes no url:; http and sse need
	// url: and take no command: or args:; the transport is stdio, http or
	// sse. Also a reserved or malformed server name, a bad env: entry.
	//	mcp_server api:
	//	  transport: http      ← C025: transport http needs url:
	BadMCPServer Code = "C025"
	// MCPAuthType (C038): mcp_server auth: with a type other than oauth2.
	MCPAuthType Code = "C038"
	// UnknownOutputNode (C029): {{outputs.X}} where X is no node.
	UnknownOutputNode Code = "C029"
	// UnknownOutputField (C031): {{outputs.X.f}} where f is not in X's
	// output schema.
	UnknownOutputField Code = "C031"
	// SchemalessOutput (C032, warning): a field of a node without an output
	// schema, which cannot be checked.
	SchemalessOutput Code = "C032"
	// UndeclaredVar (C033): {{vars.X}} or vars.X where X is not declared.
	UndeclaredVar Code = "C033"
	// UnknownInputField (C034): {{input.f}} not in the node's input schema,
	// or, in an edge's with, not in the source's output schema.
	UnknownInputField Code = "C034"
	// UnknownArtifact (C035): {{artifacts.X}} where no node publishes X.
	UnknownArtifact Code = "C035"
	// OutputNotBefore (C036): {{outputs.X}} read by a node X cannot have run
	// before.
	OutputNotBefore Code = "C036"
	// NoExpressions (C039): a compute node without expr:.
	NoExpressions Code = "C039"
	// BadExpression (C040): an expression that does not parse or names an
	// unknown function.
	BadExpression Code = "C040"
	// DuplicateNode (C041): two declarations with the same name.
	DuplicateNode Code = "C041"
	// ReservedNode (C042): a node named done or fail.
	ReservedNode Code = "C042"
	// BadSandbox (C044): a sandbox: declaration whose mode is not one of
	// auto, none, bwrap, docker, host (or, in a block, inline), or whose
	// parts contradict it: image: and build: together, image: with a driver
	// other than docker, a block without mode: (so mode: inline) and no
	// image:.
	//	sandbox: podman       ← C044: the modes are auto, none, bwrap, docker, host, or a block
	BadSandbox Code = "C044"
	// C045 is reserved by upstream iterion in the sandbox band; it is not
	// reported.

	// BadCost (C046): a negative max_cost_usd.
	BadCost Code = "C046"
	// PresetUnknownVar (C070): a preset sets an undeclared var.
	PresetUnknownVar Code = "C070"
	// PresetType (C071): a preset value of the wrong type.
	PresetType Code = "C071"
	// DuplicatePreset (C072): two presets with one name.
	DuplicatePreset Code = "C072"
	// VarDefaultType (C109): a var default of the wrong type.
	VarDefaultType Code = "C109"
	// BadTimeout (C122): a node timeout that is not a positive duration.
	BadTimeout Code = "C122"
	// ManyElse (C123): more than one else edge from one node.
	ManyElse Code = "C123"
	// ElseAndDefault (C124): an else edge beside an unconditional edge.
	ElseAndDefault Code = "C124"
	// EnumNotString (C125): an enum on a type other than string.
	EnumNotString Code = "C125"
	// DefaultNotInEnum (C126): a default outside its enum.
	DefaultNotInEnum Code = "C126"
	// SandboxOnHost (C128, warning): sandbox: none (or host) runs the
	// processes on the host, with the server's view of the machine; iterion
	// serve refuses such a file unless its operator allows host sandboxes.
	//	sandbox: none         ← C128
	SandboxOnHost Code = "C128"
	// UnknownTool (C135): a name in tools: that the node's backend has no
	// tool for. Upstream reports it for claw; here it is reported for a
	// claude_code node, whose tools map onto Claude Code's built-ins
	// (ClaudeCodeTool), because such a node runs with those tools only.
	//	backend: "claude_code"
	//	tools: [read_file, list_dirs]     ← C135: no Claude Code tool for list_dirs
	UnknownTool Code = "C135"
	// VerbatimQuoteEscape (C144, warning): a "…" string of a profile 1 file
	// (no dsl: 2 header, no strict-escape comment) holds \", which profile 1
	// keeps as a backslash and a quote where profile 2 reads a quote. It is
	// upstream's warning for a file that profile 2 would read differently,
	// reported here for \", the case that breaks things: a tool that prints
	// JSON with it prints invalid JSON. The lexer reports it, once per
	// string; backtick strings and | blocks are never decoded and need no
	// backslash.
	//	command: "printf '{\"ok\": true}'"     ← C144: prints {\"ok\": true}
	//	command: `printf '{"ok": true}'`       ← the same, as meant
	VerbatimQuoteEscape Code = "C144"
	// UnknownLoop (C147, warning): {{loop.X…}} where no edge declares loop
	// X, or a member loops do not have; it reads as empty.
	UnknownLoop Code = "C147"
	// UnknownRunMember (C153, warning): {{run.X}} where run has no member X.
	UnknownRunMember Code = "C153"
	// EventMissing (C196): an emit or wait node without event:.
	EventMissing Code = "C196"
	// WaitTimeout (C197): a wait node without a positive timeout:.
	WaitTimeout Code = "C197"
	// DanglingEvent (C198, warning): an event emitted that nothing waits
	// for, or waited for that nothing emits.
	DanglingEvent Code = "C198"
	// AsyncOnHuman (C240): interaction: async on a human node; a human node
	// is itself the blocking question.
	AsyncOnHuman Code = "C240"
	// AwaitTimeout (C241): an await_answers node without a positive
	// timeout: (the no-silent-infinity invariant).
	AwaitTimeout Code = "C241"
	// AwaitFrom (C242, warning): await_answers from: names a missing node or
	// one that is not an interaction: async agent or judge, so the gate could
	// only ever time out.
	AwaitFrom Code = "C242"
	// FailCodeShape (C247): a fail node code: that is not UPPER_SNAKE.
	FailCodeShape Code = "C247"
	// FailCodeReserved (C248): a fail node code: equal to an engine code.
	FailCodeReserved Code = "C248"
	// AsyncBackend (C267): an interaction: async agent or judge whose
	// backend, or an explicit fallback, is codex, kimi, grok or opencode,
	// which cannot expose ask_user_async and await_answers.
	AsyncBackend Code = "C267"
	// BadFollowUp (C270): a question's remind:, escalate:, expire: or
	// default: that is not well formed: a duration that is not positive, a
	// reminder or escalation after the expiry, a default outside the
	// form's options, or any of them on a node that asks no person.
	//	remind: "0s"                 ← C270
	//	default: "maybe"             ← C270 on a bool field
	BadFollowUp Code = "C270"
)
