// Package expr implements the expression language of .bot workflow files:
// compute node expr: fields, edge guards (when "…"), fallback routes and
// loop caps.
//
// The language is upstream iterion's, so guards and compute fields written
// for it mean the same here. It is not expr-lang: upstream's lambdas
// (x => …), its truthiness (the string "no" is false), integer division,
// string + number concatenation, and bare names read as input fields would
// each need a rewrite of the source or a change of meaning, so a small
// parser of our own is the smaller and safer thing to own.
//
// # Syntax
//
// From lowest to highest precedence:
//
//	expr    := or
//	or      := and { ("||" | "or") and }
//	and     := not { ("&&" | "and") not }
//	not     := ("!" | "not") not | cmp
//	cmp     := add [ ("=="|"!="|"<"|"<="|">"|">=") add ]   // not chainable
//	add     := mul { ("+"|"-") mul }
//	mul     := unary { ("*"|"/"|"%") unary }
//	unary   := "-" unary | postfix
//	postfix := primary { "[" expr "]" | "." IDENT }
//	primary := INT | FLOAT | STRING | true | false | path | call
//	         | "(" expr ")" | "[" [expr {"," expr}] "]"
//	         | "{" [key ":" expr {"," key ":" expr}] "}"
//	call    := IDENT "(" [arg {"," arg}] ")"
//	lambda  := IDENT "=>" expr | "(" [IDENT {"," IDENT}] ")" "=>" expr
//
// Numbers are decimal (2, 2.5; no exponent, no sign). Strings use single or
// double quotes with the escapes \\ \" \' \n \t (any other \x is x). A
// lambda may only appear as the last argument of map, filter or reduce.
//
// # Names
//
// A path starts with a reserved namespace (vars, input, outputs, artifacts,
// loop, run), a lambda parameter, or any other identifier, which is read as
// a field of input: approved means input.approved. Absent paths evaluate to
// nil.
//
// # Values
//
// Evaluation produces bool, int64, float64, string, []any, map[string]any
// or nil. Values from the Env are normalised first (all integer types to
// int64, json.Number to int64 or float64, typed slices to []any, and so on).
// See Truthy for the truth rules used by !, &&, ||, if, filter and EvalBool.
//
// # Limits
//
// Parse rejects sources longer than MaxSourceLen bytes, nesting deeper than
// MaxDepth and trees of more than MaxNodes nodes. One evaluation may visit
// at most MaxElements collection elements in builtins and combinators, and
// build a bounded amount of text; beyond that it fails with
// "evaluation budget exceeded".
package expr
