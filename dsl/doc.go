// Package dsl is the front end of the iterion workflow language (.bot
// files): a lexer, a parser to a syntax tree that keeps positions, and a
// compiler to the immutable IR the engine runs.
//
// The phases are lex → parse (File) → compile (Workflow). Each returns its
// result together with Diagnostics, never instead of them: a file with
// errors still yields a partial tree and IR, so every problem can be
// reported at once. Diagnostics carry upstream iterion's stable codes (E0xx
// for parse errors, Cxxx for compile errors; see codes.go), a position
// (1-based line and column in characters) and a fix hint, and Render prints
// them the same way on every surface:
//
//	w, diags := dsl.CompileSource("main.bot", src)
//	if diags.HasErrors() {
//		dsl.Render(os.Stderr, diags, map[string][]byte{"main.bot": src})
//		return
//	}
//	run(w) // only a workflow without errors may run
//
// Workflow files come from repositories the bot does not own, so the front
// end treats them as hostile: MaxFileSize, MaxTokens, MaxDepth and
// MaxDiagnostics bound the work one file can cause, and fuzz tests keep
// every input panic-free with every diagnostic inside the file.
//
// Format, behind iterion fmt, prints a file in its canonical layout from the
// tree and the comments the lexer records (File.Comments), and refuses a
// file whose tree the parser could only build by skipping part of it.
//
// Expressions (edge guards, compute fields, loop bounds) are parsed by the
// sub-package expr; the IR holds the parsed trees, which the engine
// evaluates.
package dsl
