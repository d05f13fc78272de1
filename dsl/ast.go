package dsl

// The syntax tree. Every node keeps the positions of its parts so that the
// compiler can point each diagnostic at the offending text. The tree is what
// the file says, not what it means: names are not resolved and values are not
// checked against their properties until Compile.

// File is the syntax tree of one workflow file.
type File struct {
	// Name is the file name diagnostics are reported against.
	Name string
	// Profile is the syntax profile: 1, or 2 with a "dsl: 2" header.
	Profile int
	// Decls are the top-level declarations in source order.
	Decls []Decl
	// Header is the position of the "dsl: N" profile header; invalid when
	// the file has none.
	Header Pos
	// Comments are the file's comments in source order. They mean nothing
	// to the compiler; the formatter puts each back where it was.
	Comments []Comment

	// partial is set when the tree is not the whole file: the lexer
	// reported an error, or the parser skipped tokens to recover from one
	// (an unsupported declaration's body aside), or a repeated clause
	// replaced an earlier one. Format refuses such a tree.
	partial bool
}

// Comment is one # or ## comment: Text runs from the # to the end of the
// line, trailing blanks removed. OwnLine is set when the comment is alone on
// its line, and unset when it trails code.
type Comment struct {
	Text    string
	Start   Pos
	End     Pos
	OwnLine bool
}

// Ident is a name with its position.
type Ident struct {
	Name  string
	Start Pos
	End   Pos
}

// Decl is a top-level declaration: one of *PromptDecl, *SchemaDecl,
// *VarsDecl, *PresetsDecl, *NodeDecl, *WorkflowDecl, *MCPServerDecl or
// *UnsupportedDecl.
type Decl interface {
	// Keyword is the declaration keyword, such as "agent" or "workflow".
	Keyword() Ident
	declNode()
}

// PromptDecl is "prompt name:" followed by an indented text body.
type PromptDecl struct {
	Kw   Ident
	Name Ident
	Body *StringLit
}

// SchemaDecl is "schema name:" followed by typed fields.
type SchemaDecl struct {
	Kw     Ident
	Name   Ident
	Fields []*FieldDecl
}

// VarsDecl is a "vars:" block, at top level or inside a workflow.
type VarsDecl struct {
	Kw     Ident
	Fields []*FieldDecl
}

// FieldDecl is one schema field or var: "name: type [enum: …] = default".
type FieldDecl struct {
	Name Ident
	// Type is the type name ("string", "int", …); List is set for "string[]".
	Type Ident
	List bool
	// Enum holds the allowed values of an enum, nil when there is none.
	Enum    []Value
	EnumPos Pos
	// Default is the value after "=", nil when there is none.
	Default Value
}

// PresetsDecl is a "presets:" block of named var sets.
type PresetsDecl struct {
	Kw      Ident
	Presets []*PresetDecl
}

// PresetDecl is one named set of var values.
type PresetDecl struct {
	Name   Ident
	Values []*Property
}

// NodeDecl declares a node: agent, judge, human, router, tool, compute,
// emit, wait, await_answers or fail. Kind is the keyword.
type NodeDecl struct {
	Kind  Ident
	Name  Ident
	Props []*Property
}

// WorkflowDecl is "workflow name:" with its properties, vars and edges.
type WorkflowDecl struct {
	Kw    Ident
	Name  Ident
	Props []*Property
	Vars  *VarsDecl
	Edges []*EdgeStmt
}

// MCPServerDecl is "mcp_server name:" with its properties: an MCP server
// the workflow's agents and judges may use.
type MCPServerDecl struct {
	Kw    Ident
	Name  Ident
	Props []*Property
}

// UnsupportedDecl is an upstream declaration this implementation does not
// run (subbot, group, import, …). Its body is skipped; the parser reports it.
type UnsupportedDecl struct {
	Kw   Ident
	Name Ident
}

// Keyword implements Decl.
func (d *PromptDecl) Keyword() Ident      { return d.Kw }
func (d *SchemaDecl) Keyword() Ident      { return d.Kw }
func (d *VarsDecl) Keyword() Ident        { return d.Kw }
func (d *PresetsDecl) Keyword() Ident     { return d.Kw }
func (d *NodeDecl) Keyword() Ident        { return d.Kind }
func (d *WorkflowDecl) Keyword() Ident    { return d.Kw }
func (d *MCPServerDecl) Keyword() Ident   { return d.Kw }
func (d *UnsupportedDecl) Keyword() Ident { return d.Kw }

func (*PromptDecl) declNode()      {}
func (*SchemaDecl) declNode()      {}
func (*VarsDecl) declNode()        {}
func (*PresetsDecl) declNode()     {}
func (*NodeDecl) declNode()        {}
func (*WorkflowDecl) declNode()    {}
func (*MCPServerDecl) declNode()   {}
func (*UnsupportedDecl) declNode() {}

// Property is "key: value" in a declaration body, or "with { … }" (Key
// "with", Value a *MapLit). Value is nil when the value is missing.
type Property struct {
	Key   Ident
	Value Value
}

// EdgeStmt is one edge line of a workflow: a chain "a -> b -> c" and the
// clauses that bind to its last segment.
type EdgeStmt struct {
	Chain []Ident
	When  *Guard
	// Else is the position of an "else" clause; invalid when there is none.
	Else Pos
	Loop *LoopClause
	With *MapLit
}

// Guard is a "when" clause: "when [not] field" or "when "expression"".
type Guard struct {
	When  Pos
	Not   bool
	Field *Ident
	Expr  *StringLit
}

// LoopClause is "as name(count)". Count is an int literal, a template or
// an expression string.
type LoopClause struct {
	As    Pos
	Name  Ident
	Count Value
}

// Value is a property value: *StringLit, *WordLit, *NumberLit, *BoolLit,
// *ListLit, *MapLit or *BlockLit.
type Value interface {
	// Span returns the first and the just-past-last position of the value.
	Span() (Pos, Pos)
	valueNode()
}

// StringStyle records how a string was written.
type StringStyle int

const (
	// StyleInvalid is the zero StringStyle.
	StyleInvalid StringStyle = iota
	// StyleQuoted is "double quoted".
	StyleQuoted
	// StyleRaw is `backtick raw`.
	StyleRaw
	// StyleBlock is a | block scalar or a prompt body.
	StyleBlock
)

// StringLit is a string value. Value is decoded; pieces map offsets in
// Value back to the source, so diagnostics inside a string (a template, an
// expression) point at the right character.
type StringLit struct {
	Value  string
	Style  StringStyle
	Start  Pos
	End    Pos
	pieces []piece
}

// cursor returns a position cursor over the value, for mapping many
// increasing offsets in linear time.
func (s *StringLit) cursor() *posCursor {
	return &posCursor{val: s.Value, pieces: s.pieces, fallback: s.Start}
}

// PosAt returns the source position of byte offset off in Value.
func (s *StringLit) PosAt(off int) Pos {
	if len(s.pieces) == 0 {
		return s.Start
	}
	return posInValue(s.Value, s.pieces, off)
}

// WordLit is a bare word used as a value (backend: claw, output: verdict),
// possibly dotted (prefix.node).
type WordLit struct{ Ident }

// NumberLit is an integer or decimal literal, kept as written.
type NumberLit struct {
	Text    string
	IsFloat bool
	Start   Pos
	End     Pos
}

// BoolLit is true or false.
type BoolLit struct {
	Value bool
	Start Pos
	End   Pos
}

// ListLit is "[a, b]" or a dashed list.
type ListLit struct {
	Items []Value
	Start Pos
	End   Pos
}

// MapLit is "{ key: value, … }".
type MapLit struct {
	Entries []*Property
	Start   Pos
	End     Pos
}

// BlockLit is an indented block of properties under "key:".
type BlockLit struct {
	Props []*Property
	Start Pos
	End   Pos
}

// Span implements Value.
func (v *StringLit) Span() (Pos, Pos) { return v.Start, v.End }
func (v *WordLit) Span() (Pos, Pos)   { return v.Start, v.End }
func (v *NumberLit) Span() (Pos, Pos) { return v.Start, v.End }
func (v *BoolLit) Span() (Pos, Pos)   { return v.Start, v.End }
func (v *ListLit) Span() (Pos, Pos)   { return v.Start, v.End }
func (v *MapLit) Span() (Pos, Pos)    { return v.Start, v.End }
func (v *BlockLit) Span() (Pos, Pos)  { return v.Start, v.End }

func (*StringLit) valueNode() {}
func (*WordLit) valueNode()   {}
func (*NumberLit) valueNode() {}
func (*BoolLit) valueNode()   {}
func (*ListLit) valueNode()   {}
func (*MapLit) valueNode()    {}
func (*BlockLit) valueNode()  {}
