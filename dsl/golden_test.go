package dsl

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestGolden runs every testdata/golden/*.txtar archive: in.bot is parsed
// and compiled, and the canonical AST, IR and rendered diagnostics are
// compared with out/ast, out/ir and out/diagnostics. go test ./dsl -update
// rewrites them.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/golden/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(name, func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			src := archiveFile(t, ar, "in.bot")
			f, pdiags := Parse("in.bot", src)
			w, cdiags := Compile(f)
			all := capDiagnostics(append(pdiags, cdiags...))
			got := map[string]string{
				"out/ast":         f.String(),
				"out/diagnostics": RenderString(all, map[string][]byte{"in.bot": src}),
			}
			if w != nil {
				got["out/ir"] = w.String()
			} else {
				got["out/ir"] = "<no workflow>\n"
			}
			if *update {
				var kept []txtar.File
				for _, af := range ar.Files {
					if !strings.HasPrefix(af.Name, "out/") {
						kept = append(kept, af)
					}
				}
				for _, k := range []string{"out/ast", "out/ir", "out/diagnostics"} {
					kept = append(kept, txtar.File{Name: k, Data: []byte(got[k])})
				}
				ar.Files = kept
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, k := range []string{"out/ast", "out/ir", "out/diagnostics"} {
				want := string(archiveFile(t, ar, k))
				if diff := cmp.Diff(want, got[k]); diff != "" {
					t.Errorf("%s mismatch (-want +got):\n%s\n(run go test ./dsl -update to accept)", k, diff)
				}
			}
		})
	}
}

func archiveFile(t *testing.T, ar *txtar.Archive, name string) []byte {
	t.Helper()
	for _, f := range ar.Files {
		if f.Name == name {
			return f.Data
		}
	}
	if *update && strings.HasPrefix(name, "out/") {
		return nil
	}
	t.Fatalf("archive has no %s", name)
	return nil
}

// TestCodes runs testdata/codes/*.txtar. Each archive names, in its
// "want" file, one code and the line:col it must be reported at for
// bad.bot; good.bot is a close variant that must not produce that code and
// must have no errors at all.
func TestCodes(t *testing.T) {
	files, err := filepath.Glob("testdata/codes/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no code cases: %v", err)
	}
	covered := map[Code]bool{}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(name, func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			fields := strings.Fields(string(archiveFile(t, ar, "want")))
			if len(fields) != 2 {
				t.Fatalf("want file must be \"CODE line:col\", got %q", fields)
			}
			code, where := Code(fields[0]), fields[1]
			covered[code] = true

			bad := archiveFile(t, ar, "bad.bot")
			_, ds := CompileSource("bad.bot", bad)
			found := false
			for _, d := range ds {
				if d.Code == code && d.Subject.Start.String() == where {
					found = true
				}
			}
			if !found {
				t.Errorf("bad.bot: no %s at %s; got:\n%s", code, where, RenderString(ds, map[string][]byte{"bad.bot": bad}))
			}
			for _, d := range ds {
				if d.Detail == "" {
					t.Errorf("bad.bot: diagnostic without a fix hint: %v", d)
				}
			}

			good := archiveFile(t, ar, "good.bot")
			_, ds = CompileSource("good.bot", good)
			for _, d := range ds {
				if d.Code == code || d.Severity == SevError {
					t.Errorf("good.bot: unexpected diagnostic:\n%s", RenderString(Diagnostics{d}, map[string][]byte{"good.bot": good}))
				}
			}
		})
	}
	if t.Failed() {
		return
	}
	for _, code := range implementedCodes {
		if !covered[code] && !exemptFromCases[code] {
			t.Errorf("code %s has no case under testdata/codes", code)
		}
	}
}

// exemptFromCases lists codes covered by a Go test instead of a
// testdata/codes case: E091 needs a file over MaxFileSize, built in memory
// by TestFileTooLarge (limits_test.go).
var exemptFromCases = map[Code]bool{ErrTooLarge: true}

// implementedCodes lists every code the front end reports; each must have
// a case under testdata/codes (or be in exemptFromCases).
var implementedCodes = []Code{
	ErrUnexpected, ErrExpected, ErrIndent, ErrUnterminated, ErrBadEscape, ErrNotUTF8, ErrUnknownDecl,
	ErrReservedName, ErrUnknownProp, ErrMissingProp, ErrDuplicate, ErrInvalidValue, ErrBadType,
	ErrDuplicateClause, ErrWhenAndElse, ErrClauseBeforeArrow, ErrProfile, ErrProfileNotFirst,
	ErrStrictEscapeInProfile2, ErrUnsupported, ErrTooLarge, ErrTooManyDiags, UnsafeCommandRef, RawUntrustedRef,
	LoopBoundOverCap,
	UndeclaredNode, UnknownSchema, UnknownPrompt, BadTemplate, LoopConflict, NoWorkflow, ManyWorkflows,
	BadEntry, InheritAtJoin, ManyDefaults, DuplicateCondition, NotExhaustive, ConditionNotBool,
	ConditionUnknownField, ElseAlone, Unreachable, HistoryOutsideLoop, MissingModel, UnboundedCycle,
	RoundRobinEdges, LLMRouterEdges, LLMRouterWhen, LLMOnlyProp, LoopMaxTooSmall, BadReasoningEffort,
	UnknownOutputNode, UnknownOutputField, SchemalessOutput, UndeclaredVar, UnknownInputField,
	UnknownArtifact, OutputNotBefore, NoExpressions, BadExpression, DuplicateNode, ReservedNode, BadCost,
	PresetUnknownVar, PresetType, DuplicatePreset, VarDefaultType, UnknownLoop, UnknownRunMember,
	BadTimeout, ManyElse, ElseAndDefault, EnumNotString, DefaultNotInEnum, EventMissing, WaitTimeout,
	DanglingEvent, UnknownTool, AsyncOnHuman, AwaitTimeout, AwaitFrom, FailCodeShape, FailCodeReserved, AsyncBackend, BadFollowUp,
	BadSandbox, SandboxOnHost, VerbatimQuoteEscape,
	DuplicateMCPServer, BadMCPServer, MCPAuthType, UnknownMCPServer, InertMCP,
}

// TestExamples validates the shipped examples: they must compile without
// any diagnostic, warnings included (C144 found the \" that made the first
// tool of pr-review and nightly print invalid JSON), and each says in its
// leading comment which backend and keys it needs.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/*/main.bot")
	if err != nil || len(files) < 4 {
		t.Fatalf("examples missing: %v %v", files, err)
	}
	for _, file := range files {
		t.Run(filepath.Base(filepath.Dir(file)), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			w, ds := CompileSource(file, src)
			if len(ds) > 0 {
				t.Fatalf("diagnostics:\n%s", RenderString(ds, map[string][]byte{file: src}))
			}
			if w == nil || w.Entry == "" || len(w.Nodes) == 0 {
				t.Fatalf("empty workflow: %v", w)
			}
			if !bytes.Contains(src, []byte("workflow ")) {
				t.Fatal("not a workflow file")
			}
			checkNeeds(t, w, leadingComment(src))
		})
	}
}

// leadingComment returns the comment lines at the top of src.
func leadingComment(src []byte) string {
	var b strings.Builder
	for line := range strings.Lines(string(src)) {
		if !strings.HasPrefix(line, "#") {
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// providerKeys are the keys claw reads for a model's provider.
var providerKeys = map[string]string{"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}

// checkNeeds checks that an example's header has a "Needs:" paragraph
// naming every backend its model nodes run on and, for claw, the key of
// each provider, or saying "no model" when it has none.
func checkNeeds(t *testing.T, w *Workflow, header string) {
	t.Helper()
	if !strings.Contains(header, "## Needs: ") {
		t.Fatalf("the leading comment has no \"## Needs: \" paragraph saying which backend and keys the example needs:\n%s", header)
	}
	llm := false
	for _, n := range w.Nodes {
		if n.LLM == nil {
			continue
		}
		llm = true
		backend := n.LLM.Backend
		if backend == "" {
			backend = w.DefaultBackend
		}
		if backend == "" {
			backend = "claw"
		}
		if !strings.Contains(header, backend) {
			t.Errorf("node %q runs on backend %s, which the header does not name", n.ID, backend)
		}
		provider, _, _ := strings.Cut(n.LLM.Model, "/")
		if key := providerKeys[provider]; backend == "claw" && key != "" && !strings.Contains(header, key) {
			t.Errorf("node %q uses model %s, whose key %s the header does not name", n.ID, n.LLM.Model, key)
		}
	}
	if !llm && !strings.Contains(header, "no model") {
		t.Errorf("the example has no model node; its header should say it needs no model")
	}
}
