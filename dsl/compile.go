package dsl

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxLoopBound is the loop bound above which the compiler warns
// (E095) when Options.MaxLoopBound is zero. A loop of 10,000 crossings of
// even a cheap node is far more than any review or maintenance workflow
// needs, and every crossing is stored.
const DefaultMaxLoopBound = 10_000

// Options are the compiler's settings. The zero value gives the defaults,
// which is what CompileSource and Compile use.
type Options struct {
	// MaxLoopBound is the largest loop bound (the N of as name(N), written
	// as a number) accepted without warning E095. Zero means
	// DefaultMaxLoopBound; a negative value turns the warning off. A bound
	// read from a var or an expression is known only at run time and is
	// not checked against it.
	MaxLoopBound int
	// Env reads the environment for the property values that reference it
	// (${NAME:-default}, see EnvRef): a variable's value and whether the
	// workflow may read it. nil reads nothing: every reference takes its
	// default, as iterion validate does.
	Env func(name string) (string, bool)
}

// loopCap returns the effective MaxLoopBound, or 0 for no cap.
func (o Options) loopCap() int {
	switch {
	case o.MaxLoopBound == 0:
		return DefaultMaxLoopBound
	case o.MaxLoopBound < 0:
		return 0
	}
	return o.MaxLoopBound
}

// CompileSource parses and compiles one workflow file with the default
// Options. It returns the workflow (partial when there are errors) and
// every diagnostic of both phases, sorted by position and capped.
func CompileSource(name string, src []byte) (*Workflow, Diagnostics) {
	return Options{}.CompileSource(name, src)
}

// CompileSource parses and compiles one workflow file with these options;
// see the package-level CompileSource.
func (o Options) CompileSource(name string, src []byte) (*Workflow, Diagnostics) {
	f, pdiags := Parse(name, src)
	w, cdiags := o.Compile(f)
	for _, d := range pdiags {
		if d.fatal {
			// The file was not read to its end: the compiler's view of it
			// (no workflow, unreachable nodes, …) would mislead.
			cdiags = nil
			break
		}
	}
	sum := sha256.Sum256(src)
	w.Hash = hex.EncodeToString(sum[:])
	all := append(pdiags, cdiags...)
	return w, capDiagnostics(all)
}

// capDiagnostics sorts ds, drops duplicates and keeps at most
// MaxDiagnostics, summarising the rest.
func capDiagnostics(ds Diagnostics) Diagnostics {
	ds.Sort()
	seen := map[string]bool{}
	out := ds[:0]
	for _, d := range ds {
		key := fmt.Sprintf("%s|%s|%s|%s", d.Code, d.Subject.File, d.Subject.Start, d.Summary)
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, d)
	}
	if len(out) <= MaxDiagnostics {
		return out
	}
	// Keep the first diagnostics by position, and every fatal one (a limit
	// that stopped a phase), then say how many were left out.
	var kept, fatal Diagnostics
	extra, extraErrors := 0, 0
	drop := func(d *Diagnostic) {
		extra++
		if d.Severity == SevError {
			extraErrors++
		}
	}
	for _, d := range out {
		switch {
		case d.fatal:
			fatal = append(fatal, d)
		case d.Code == ErrTooManyDiags:
			// a phase's own summary; counted in the one below
			extra += d.more
			if d.Severity == SevError {
				extraErrors++
			}
		case len(kept) < MaxDiagnostics-len(fatal):
			kept = append(kept, d)
		default:
			drop(d)
		}
	}
	for len(kept)+len(fatal) > MaxDiagnostics {
		drop(kept[len(kept)-1])
		kept = kept[:len(kept)-1]
	}
	kept = append(kept, fatal...)
	kept.Sort()
	if extra > 0 {
		last := kept[len(kept)-1]
		kept = append(kept, overflow(last.Stage, last.Subject, extra, extraErrors > 0))
	}
	return kept
}

// backends the compiler knows. asyncIncapable cannot expose the async
// question tools (C267).
var (
	knownBackends  = []string{"claw", "claude_code", "pi", "codex", "kimi", "grok", "opencode"}
	asyncIncapable = map[string]bool{"codex": true, "kimi": true, "grok": true, "opencode": true}
	// selfModelBackends pick a model of their own when none is given.
	selfModelBackends = map[string]bool{"claude_code": true, "pi": true, "codex": true, "kimi": true, "grok": true, "opencode": true}
)

// engineCodes are failure codes the engine itself records; a fail node may
// not reuse them (C248).
var engineCodes = map[string]bool{
	"NODE_NOT_FOUND": true, "NO_OUTGOING_EDGE": true, "LOOP_EXHAUSTED": true, "BUDGET_EXCEEDED": true,
	"EXECUTION_FAILED": true, "WORKSPACE_SAFETY": true, "TIMEOUT": true, "CANCELLED": true,
	"INTERRUPTED": true, "JOIN_FAILED": true, "RESUME_INVALID": true, "SCHEMA_VALIDATION": true,
	"RATE_LIMITED": true, "CONTEXT_LENGTH_EXCEEDED": true, "TOOL_FAILED_TRANSIENT": true,
	"TOOL_FAILED_PERMANENT": true, "NETWORK_TRANSIENT": true, "EXPRESSION_FAILED": true,
	"USAGE_LIMIT_BLOCKED": true, "FAIL_NODE": true, "CAPABILITY_UNSUPPORTED": true,
	"AUTH_FAILED": true,
}

var upperSnake = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)

// compiler holds the state of one Compile call.
type compiler struct {
	opts Options
	f    *File
	sink *diagSink
	w    *Workflow

	// wfPermission and nodePermission are the permission declarations of
	// the workflow and of each agent and judge, resolved together once all
	// are read.
	wfPermission   permissionDecl
	nodePermission map[string]permissionDecl

	schemaDecls map[string]*SchemaDecl
	promptDecls map[string]*PromptDecl
	nodeDecls   map[string]*NodeDecl
	nodeOrder   []*NodeDecl
	wf          *WorkflowDecl

	// source positions of compiled things, for diagnostics
	edgeSrc   map[*Edge]edgeSource
	loopFirst map[string]*LoopClause
	// what each node's templates and expressions read, checked once the
	// graph is known
	sites []*refSite
	// computeKeys are the fields a compute node without output schema makes.
	computeKeys map[string][]string
	// fallbackBackends are the backends of an LLM node's fallback routes.
	fallbackBackends map[string][]namedValue
	// commands are the tool commands, for the raw-reference check.
	commands []toolCommand
	// outputSets and inputSets memoize outputFields and inputFields.
	outputSets, inputSets map[*Node]*fieldSet
	// producerIdx memoizes producers, once the graph is built.
	producerIdx *producerIndex
	// promptRefs are the positioned references of each prompt body.
	promptRefs map[*PromptDecl][]siteRef
	// refUses counts the references recorded in sites; past
	// MaxReferenceUses, refsStopped is set and no more are recorded.
	refUses     int
	refsStopped bool
	// schemaSets are the field sets of schemas, shared by the nodes that
	// use each one.
	schemaSets map[*Schema]*fieldSet
	// names of declarations, for "did you mean" hints
	nodeNames, schemaNames, promptNames []string
}

// suggest returns the candidate nearest to name, or "" once the diagnostic
// cap is reached (so a hostile file cannot make hints cost quadratic time).
func (c *compiler) suggest(name string, candidates []string) string {
	if c.sink.full() {
		return ""
	}
	return nearest(name, candidates)
}

type edgeSource struct {
	from, to Ident
	stmt     *EdgeStmt
}

type namedValue struct {
	name  string
	value string
	start Pos
	end   Pos
}

// refSite is one template or expression whose references are checked
// after the graph is built.
type refSite struct {
	where string // "prompt \"p\" of agent \"a\"", for messages
	// node is the node that reads the references ("" on an edge); for an
	// edge's with, from is the edge's source.
	node string
	edge *Edge
	refs []siteRef
}

// siteRef is one reference with its source range.
type siteRef struct {
	ns    string
	path  []string
	bare  bool // a bare expression name, read as an input field
	tmpl  bool // written as {{…}} in a template
	start Pos
	end   Pos
}

// Compile turns a syntax tree into a Workflow with the default Options. It
// always returns a workflow, partial when there are errors (a file without
// a workflow block still yields its schemas, prompts and nodes), and the
// compile diagnostics, sorted and capped. Only a workflow without errors
// may be run.
func Compile(f *File) (*Workflow, Diagnostics) {
	return Options{}.Compile(f)
}

// Compile turns a syntax tree into a Workflow with these options; see the
// package-level Compile.
func (o Options) Compile(f *File) (*Workflow, Diagnostics) {
	c := &compiler{
		opts:             o,
		f:                f,
		sink:             &diagSink{file: f.Name, stage: StageCompile, max: 4 * MaxDiagnostics},
		schemaDecls:      map[string]*SchemaDecl{},
		promptDecls:      map[string]*PromptDecl{},
		nodeDecls:        map[string]*NodeDecl{},
		edgeSrc:          map[*Edge]edgeSource{},
		loopFirst:        map[string]*LoopClause{},
		computeKeys:      map[string][]string{},
		fallbackBackends: map[string][]namedValue{},
		nodePermission:   map[string]permissionDecl{},
		outputSets:       map[*Node]*fieldSet{},
		inputSets:        map[*Node]*fieldSet{},
		promptRefs:       map[*PromptDecl][]siteRef{},
		schemaSets:       map[*Schema]*fieldSet{},
	}
	c.w = &Workflow{
		File: f.Name, Profile: f.Profile,
		nodes: map[string]*Node{}, schemas: map[string]*Schema{}, prompts: map[string]*Prompt{},
		vars: map[string]*Var{}, loops: map[string]*Loop{}, out: map[string][]*Edge{}, in: map[string][]*Edge{},
	}
	c.collect()
	c.compileSchemas()
	c.compilePrompts()
	c.compileVars()
	c.compilePresets()
	c.compileDefaults()
	c.compileNodes()
	c.compilePermissions()
	c.compileWorkflow()
	c.compileMCP()
	if c.wf != nil {
		c.checkGraph()
		c.checkNodesInGraph()
		c.checkRefs()
		c.checkRawRefs()
	}
	return c.w, capDiagnostics(c.sink.withOverflow())
}

func (c *compiler) errorf(start, end Pos, code Code, hint, format string, args ...any) *Diagnostic {
	return c.sink.add(SevError, code, Range{Start: start, End: end}, fmt.Sprintf(format, args...), hint)
}

func (c *compiler) warnf(start, end Pos, code Code, hint, format string, args ...any) *Diagnostic {
	return c.sink.add(SevWarning, code, Range{Start: start, End: end}, fmt.Sprintf(format, args...), hint)
}

func (c *compiler) errorAtValue(v Value, code Code, hint, format string, args ...any) *Diagnostic {
	s, e := v.Span()
	return c.errorf(s, e, code, hint, format, args...)
}

// collect indexes the declarations and reports duplicates and reserved names.
func (c *compiler) collect() {
	names := map[string]Ident{}  // node ids
	kinds := map[string]string{} // node id → kind
	var workflows []*WorkflowDecl
	for _, d := range c.f.Decls {
		switch d := d.(type) {
		case *SchemaDecl:
			if c.reservedDeclName(d.Name, "schema") {
				continue
			}
			if prev, ok := c.schemaDecls[d.Name.Name]; ok {
				c.errorf(d.Name.Start, d.Name.End, DuplicateNode, "rename one of the schemas", "duplicate schema %q (first declared at %s)", d.Name.Name, prev.Name.Start)
				continue
			}
			c.schemaDecls[d.Name.Name] = d
		case *PromptDecl:
			if c.reservedDeclName(d.Name, "prompt") {
				continue
			}
			if prev, ok := c.promptDecls[d.Name.Name]; ok {
				c.errorf(d.Name.Start, d.Name.End, DuplicateNode, "rename one of the prompts", "duplicate prompt %q (first declared at %s)", d.Name.Name, prev.Name.Start)
				continue
			}
			c.promptDecls[d.Name.Name] = d
		case *NodeDecl:
			id := d.Name.Name
			if id == TargetDone || id == TargetFail {
				c.errorf(d.Name.Start, d.Name.End, ReservedNode, "pick another name: done and fail are the implicit terminal targets", "%s %q uses the reserved name %q", d.Kind.Name, id, id)
				continue
			}
			if prev, ok := names[id]; ok {
				c.errorf(d.Name.Start, d.Name.End, DuplicateNode, "node ids are unique across all kinds: rename one",
					"duplicate node id %q: already declared as %s at %s, redeclared as %s", id, kinds[id], prev.Start, d.Kind.Name)
				continue
			}
			names[id] = d.Name
			kinds[id] = d.Kind.Name
			c.nodeDecls[id] = d
			c.nodeOrder = append(c.nodeOrder, d)
		case *WorkflowDecl:
			workflows = append(workflows, d)
		}
	}
	c.nodeNames = append(keys(c.nodeDecls), TargetDone, TargetFail)
	c.schemaNames = keys(c.schemaDecls)
	c.promptNames = keys(c.promptDecls)
	switch len(workflows) {
	case 0:
		c.errorf(Pos{Line: 1, Col: 1}, Pos{Line: 1, Col: 1}, NoWorkflow, "add a workflow block: workflow name: with entry: and edges", "no workflow declaration found")
	default:
		c.wf = workflows[0]
		c.w.Name = c.wf.Name.Name
		for _, extra := range workflows[1:] {
			c.errorf(extra.Name.Start, extra.Name.End, ManyWorkflows, "keep one workflow per file", "more than one workflow: %q is declared after %q", extra.Name.Name, c.wf.Name.Name)
		}
	}
}

func (c *compiler) reservedDeclName(name Ident, what string) bool {
	if name.Name != TargetDone && name.Name != TargetFail {
		return false
	}
	c.sink.add(SevError, ErrReservedName, Range{Start: name.Start, End: name.End},
		fmt.Sprintf("cannot use reserved name %q as %s name", name.Name, what), "pick another name")
	return true
}

// ---- schemas, prompts, vars, presets ----

func (c *compiler) compileSchemas() {
	for _, d := range c.f.Decls {
		sd, ok := d.(*SchemaDecl)
		if !ok || c.schemaDecls[sd.Name.Name] != sd {
			continue
		}
		s := &Schema{Name: sd.Name.Name}
		seen := map[string]bool{}
		for _, fd := range sd.Fields {
			if seen[fd.Name.Name] {
				c.errorf(fd.Name.Start, fd.Name.End, ErrDuplicate, "keep one of them", "duplicate field %q in schema %q", fd.Name.Name, s.Name)
				continue
			}
			seen[fd.Name.Name] = true
			ty, ok := c.fieldType(fd, true)
			if !ok {
				continue
			}
			f := &Field{Name: fd.Name.Name, Type: ty, Enum: c.enumValues(fd, ty)}
			if fd.Default != nil {
				c.errorAtValue(fd.Default, ErrUnexpected, "schema fields have no defaults; declare defaults on vars", "schema field %q has a default", fd.Name.Name)
			}
			s.Fields = append(s.Fields, f)
		}
		c.w.Schemas = append(c.w.Schemas, s)
		c.w.schemas[s.Name] = s
	}
}

func (c *compiler) fieldType(fd *FieldDecl, allowFile bool) (Type, bool) {
	kind, ok := typeNames[fd.Type.Name]
	if !ok || (kind == TypeFile && !allowFile) || (fd.List && kind != TypeString) {
		hint := "use one of: string, bool, int, float, json, string[]"
		if alias, isAlias := typeAliases[fd.Type.Name]; isAlias {
			hint = fmt.Sprintf("write %s: the DSL's types are string, bool, int, float, json and string[]", alias)
		} else if near := nearest(fd.Type.Name, []string{"string", "bool", "int", "float", "json"}); near != "" && !ok {
			hint = fmt.Sprintf("did you mean %q?", near)
		}
		c.sink.add(SevError, ErrBadType, Range{Start: fd.Type.Start, End: fd.Type.End}, fmt.Sprintf("invalid type %q for %q", fd.Type.Name+map[bool]string{true: "[]"}[fd.List], fd.Name.Name), hint)
		return Type{}, false
	}
	return Type{Kind: kind, List: fd.List}, true
}

// typeAliases are type names from other languages people reach for.
var typeAliases = map[string]string{
	"text": "string", "str": "string", "integer": "int", "number": "float", "double": "float",
	"boolean": "bool", "object": "json", "map": "json", "array": "string[]", "list": "string[]", "any": "json",
}

func (c *compiler) enumValues(fd *FieldDecl, ty Type) []string {
	if fd.Enum == nil {
		return nil
	}
	if ty.Kind != TypeString || ty.List {
		c.errorf(fd.EnumPos, fd.EnumPos, EnumNotString, "enums apply to string fields only", "enum on %q of type %s", fd.Name.Name, ty)
		return nil
	}
	var vals []string
	for _, v := range fd.Enum {
		s, ok := stringValue(v)
		if !ok {
			c.errorAtValue(v, ErrExpected, `quote enum values: [enum: "a", "b"]`, "enum value of %q must be a string", fd.Name.Name)
			continue
		}
		vals = append(vals, s)
	}
	return vals
}

func (c *compiler) compilePrompts() {
	for _, d := range c.f.Decls {
		pd, ok := d.(*PromptDecl)
		if !ok || c.promptDecls[pd.Name.Name] != pd {
			continue
		}
		p := &Prompt{Name: pd.Name.Name, Body: &Template{}}
		if pd.Body != nil {
			p.Body = c.template(pd.Body, fmt.Sprintf("prompt %q", p.Name))
		}
		c.w.Prompts = append(c.w.Prompts, p)
		c.w.prompts[p.Name] = p
	}
}

func (c *compiler) compileVars() {
	var blocks []*VarsDecl
	top := 0
	for _, d := range c.f.Decls {
		if vd, ok := d.(*VarsDecl); ok {
			if top++; top > 1 {
				c.errorf(vd.Kw.Start, vd.Kw.End, ErrDuplicate, "merge the vars blocks into one", "duplicate vars: block")
			}
			blocks = append(blocks, vd)
		}
	}
	if c.wf != nil && c.wf.Vars != nil {
		blocks = append(blocks, c.wf.Vars)
	}
	for _, vd := range blocks {
		inBlock := map[string]bool{}
		for _, fd := range vd.Fields {
			if inBlock[fd.Name.Name] {
				c.errorf(fd.Name.Start, fd.Name.End, ErrDuplicate, "keep one declaration of the var", "duplicate var %q", fd.Name.Name)
				continue
			}
			inBlock[fd.Name.Name] = true
			ty, ok := c.fieldType(fd, false)
			if !ok {
				// Still declare it, so its uses are not reported as undeclared.
				v := &Var{Name: fd.Name.Name}
				if c.w.vars[v.Name] == nil {
					c.w.Vars = append(c.w.Vars, v)
					c.w.vars[v.Name] = v
				}
				continue
			}
			v := &Var{Name: fd.Name.Name, Type: ty, Enum: c.enumValues(fd, ty)}
			if fd.Default != nil {
				val, ok := c.literal(fd.Default, ty, VarDefaultType, fmt.Sprintf("default of var %q", v.Name))
				if ok {
					v.Default, v.HasDefault = val, true
					if s, isStr := val.(string); isStr && len(v.Enum) > 0 && !slices.Contains(v.Enum, s) {
						c.errorAtValue(fd.Default, DefaultNotInEnum, "use one of: "+strings.Join(v.Enum, ", "), "default %q of var %q is not in its enum", s, v.Name)
					}
				}
			}
			if prev := c.w.vars[v.Name]; prev != nil {
				// A workflow-level var overrides a top-level one of the same name.
				idx := slices.Index(c.w.Vars, prev)
				c.w.Vars[idx] = v
			} else {
				c.w.Vars = append(c.w.Vars, v)
			}
			c.w.vars[v.Name] = v
		}
	}
}

// literal converts a literal value to the type ty, reporting mismatches
// with code. json and string[] values are written as quoted JSON.
func (c *compiler) literal(v Value, ty Type, code Code, what string) (any, bool) {
	mismatch := func() (any, bool) {
		c.errorAtValue(v, code, fmt.Sprintf("write %s %s value", article(ty.String()), ty), "%s is not %s %s", what, article(ty.String()), ty)
		return nil, false
	}
	switch {
	case ty.List || ty.Kind == TypeJSON:
		switch v := v.(type) {
		case *StringLit:
			var x any
			if err := json.Unmarshal([]byte(v.Value), &x); err != nil {
				if ty.List {
					return mismatch()
				}
				return v.Value, true // a plain string is a valid JSON value too
			}
			if ty.List {
				if _, ok := x.([]any); !ok {
					return mismatch()
				}
			}
			return x, true
		case *ListLit:
			var items []any
			for _, it := range v.Items {
				s, ok := stringValue(it)
				if !ok {
					return mismatch()
				}
				items = append(items, s)
			}
			return items, true
		case *NumberLit, *BoolLit:
			if ty.Kind == TypeJSON {
				return c.scalar(v)
			}
		}
		return mismatch()
	case ty.Kind == TypeString:
		if s, ok := stringValue(v); ok {
			return s, true
		}
		return mismatch()
	case ty.Kind == TypeBool:
		if b, ok := v.(*BoolLit); ok {
			return b.Value, true
		}
		return mismatch()
	case ty.Kind == TypeInt:
		if n, ok := v.(*NumberLit); ok && !n.IsFloat {
			i, err := strconv.ParseInt(n.Text, 10, 64)
			if err != nil {
				c.errorAtValue(v, code, "use a smaller number", "%s is out of range", what)
				return nil, false
			}
			return i, true
		}
		return mismatch()
	case ty.Kind == TypeFloat:
		if n, ok := v.(*NumberLit); ok {
			f, err := strconv.ParseFloat(n.Text, 64)
			if err != nil || math.IsInf(f, 0) {
				return mismatch()
			}
			return f, true
		}
		return mismatch()
	}
	return mismatch()
}

func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

func (c *compiler) scalar(v Value) (any, bool) {
	switch v := v.(type) {
	case *BoolLit:
		return v.Value, true
	case *NumberLit:
		if v.IsFloat {
			f, err := strconv.ParseFloat(v.Text, 64)
			return f, err == nil
		}
		i, err := strconv.ParseInt(v.Text, 10, 64)
		return i, err == nil
	}
	s, ok := stringValue(v)
	return s, ok
}

func (c *compiler) compilePresets() {
	seenBlock := false
	names := map[string]bool{}
	for _, d := range c.f.Decls {
		pd, ok := d.(*PresetsDecl)
		if !ok {
			continue
		}
		if seenBlock {
			c.errorf(pd.Kw.Start, pd.Kw.End, ErrDuplicate, "merge the presets blocks into one", "duplicate presets: block")
		}
		seenBlock = true
		for _, pr := range pd.Presets {
			if names[pr.Name.Name] {
				c.errorf(pr.Name.Start, pr.Name.End, DuplicatePreset, "rename one of them", "duplicate preset %q", pr.Name.Name)
				continue
			}
			names[pr.Name.Name] = true
			p := &Preset{Name: pr.Name.Name, Values: map[string]any{}}
			for _, kv := range pr.Values {
				v := c.w.vars[kv.Key.Name]
				if v == nil {
					hint := "declare it under vars:"
					if near := nearest(kv.Key.Name, c.varNames()); near != "" {
						hint = fmt.Sprintf("did you mean %q?", near)
					}
					c.errorf(kv.Key.Start, kv.Key.End, PresetUnknownVar, hint, "preset %q sets undeclared var %q", p.Name, kv.Key.Name)
					continue
				}
				if kv.Value == nil {
					continue
				}
				val, ok := c.literal(kv.Value, v.Type, PresetType, fmt.Sprintf("value of %q in preset %q", v.Name, p.Name))
				if !ok {
					continue
				}
				if s, isStr := val.(string); isStr && len(v.Enum) > 0 && !slices.Contains(v.Enum, s) {
					c.errorAtValue(kv.Value, PresetType, "use one of: "+strings.Join(v.Enum, ", "), "value %q of %q in preset %q is not in the var's enum", s, v.Name, p.Name)
					continue
				}
				p.Values[v.Name] = val
			}
			c.w.Presets = append(c.w.Presets, p)
		}
	}
}

func (c *compiler) varNames() []string {
	names := make([]string, 0, len(c.w.Vars))
	for _, v := range c.w.Vars {
		names = append(names, v.Name)
	}
	return names
}

// ---- values ----

// stringValue accepts a string literal or a bare word.
func stringValue(v Value) (string, bool) {
	switch v := v.(type) {
	case *StringLit:
		return v.Value, true
	case *WordLit:
		return v.Name, true
	}
	return "", false
}

func (c *compiler) str(p *Property) (string, bool) {
	if p.Value == nil {
		return "", false
	}
	s, ok := stringValue(p.Value)
	if !ok {
		c.errorAtValue(p.Value, ErrExpected, fmt.Sprintf(`write %s: "text"`, p.Key.Name), "%s must be a string", p.Key.Name)
	}
	return s, ok
}

func (c *compiler) intProp(p *Property) (int64, bool) {
	if n, ok := p.Value.(*NumberLit); ok && !n.IsFloat {
		i, err := strconv.ParseInt(n.Text, 10, 64)
		if err == nil && i >= 0 {
			return i, true
		}
	}
	if p.Value != nil {
		c.errorAtValue(p.Value, ErrInvalidValue, fmt.Sprintf("write %s: 10", p.Key.Name), "%s must be a non-negative integer", p.Key.Name)
	}
	return 0, false
}

func (c *compiler) boolProp(p *Property) (bool, bool) {
	if b, ok := p.Value.(*BoolLit); ok {
		return b.Value, true
	}
	if p.Value != nil {
		c.errorAtValue(p.Value, ErrInvalidValue, fmt.Sprintf("write %s: true or %s: false", p.Key.Name, p.Key.Name), "%s must be true or false", p.Key.Name)
	}
	return false, false
}

// choice checks p's value against allowed and returns its index there.
func (c *compiler) choice(p *Property, allowed []string) (int, bool) {
	s, ok := c.str(p)
	if !ok {
		return 0, false
	}
	if i := slices.Index(allowed, s); i >= 0 && s != "" {
		return i, true
	}
	var shown []string
	for _, a := range allowed {
		if a != "" && a != "invalid" {
			shown = append(shown, a)
		}
	}
	hint := "use one of: " + strings.Join(shown, ", ")
	if near := nearest(s, shown); near != "" {
		hint = fmt.Sprintf("did you mean %q? (one of: %s)", near, strings.Join(shown, ", "))
	}
	c.errorAtValue(p.Value, ErrInvalidValue, hint, "invalid %s %q", p.Key.Name, s)
	return 0, false
}

// duration parses a positive Go duration; it reports nothing.
func duration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("must be positive")
	}
	return d, nil
}

func (c *compiler) stringList(p *Property) []string {
	var out []string
	switch v := p.Value.(type) {
	case *ListLit:
		for _, it := range v.Items {
			s, ok := stringValue(it)
			if !ok {
				c.errorAtValue(it, ErrExpected, "list names or quoted strings", "%s items must be names", p.Key.Name)
				continue
			}
			out = append(out, s)
		}
	case *WordLit, *StringLit:
		s, _ := stringValue(v)
		out = append(out, s)
	case nil:
	default:
		c.errorAtValue(v, ErrExpected, fmt.Sprintf("write %s: [a, b]", p.Key.Name), "%s must be a list", p.Key.Name)
	}
	return out
}

// template compiles a string literal into a template and records its
// references for checking; where names the site in messages.
func (c *compiler) template(lit *StringLit, where string) *Template {
	t, errs := parseTemplate(lit.Value)
	cur := lit.cursor()
	for _, e := range errs {
		if c.sink.full() {
			break
		}
		start := cur.at(e.off)
		c.errorf(start, cur.at(e.end), e.code, e.hint, "%s: %s", where, e.msg)
	}
	return t
}

// siteRefs turns a template's references into positioned siteRefs.
func templateSiteRefs(t *Template, lit *StringLit) []siteRef {
	var refs []siteRef
	cur := lit.cursor()
	for _, r := range t.Refs() {
		start := cur.at(r.Offset)
		refs = append(refs, siteRef{ns: r.Namespace, path: r.Path, tmpl: true, start: start, end: cur.at(r.End)})
	}
	return refs
}
