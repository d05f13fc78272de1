package main

import (
	"fmt"
	"strings"
)

// unifiedDiff is iterion fmt -d's output: the changes from a (the file
// name) to b (its formatted form) as a unified diff with three lines of
// context, "" when they are equal.
func unifiedDiff(name, a, b string) string {
	if a == b {
		return ""
	}
	x, y := splitLines(a), splitLines(b)
	ops := diffLines(x, y)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s (formatted)\n", name, name)
	const context = 3
	for i := 0; i < len(ops); {
		if ops[i].kind == '=' {
			i++
			continue
		}
		// A hunk starts context lines before this change and runs until
		// more than 2*context equal lines separate it from the next.
		start := max(0, i-context)
		end := i
		for end < len(ops) {
			if ops[end].kind != '=' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == '=' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(end+context, run)
				break
			}
			end = run
		}
		writeHunk(&out, ops[start:end], x, y)
		i = end
	}
	return out.String()
}

// writeHunk writes one hunk, its header counting the lines of each side.
func writeHunk(out *strings.Builder, ops []diffOp, x, y []string) {
	aStart, bStart, aLen, bLen := -1, -1, 0, 0
	for _, op := range ops {
		if op.kind != '+' {
			if aStart < 0 {
				aStart = op.a
			}
			aLen++
		}
		if op.kind != '-' {
			if bStart < 0 {
				bStart = op.b
			}
			bLen++
		}
	}
	// An empty side is numbered by the line before it, as diff -u does.
	aStart, bStart = hunkStart(aStart, aLen, ops, true), hunkStart(bStart, bLen, ops, false)
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
	for _, op := range ops {
		line := ""
		switch op.kind {
		case '+':
			line = y[op.b]
		default:
			line = x[op.a]
		}
		prefix := map[byte]string{'=': " ", '-': "-", '+': "+"}[op.kind]
		out.WriteString(prefix + line)
		if !strings.HasSuffix(line, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

func hunkStart(start, n int, ops []diffOp, aSide bool) int {
	if n > 0 {
		return start + 1
	}
	// No line of this side in the hunk: the position is after the line
	// before the hunk's first change.
	op := ops[0]
	if aSide {
		return op.a
	}
	return op.b
}

func hunkRange(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}

// splitLines splits s after each newline; a last line without one is kept.
func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// diffOp is one line of an edit script: kind '=' keeps a[a] (equal to
// b[b]), '-' deletes a[a], '+' inserts b[b]. For a '+', a is the index in
// a the insertion comes before; for a '-', b likewise.
type diffOp struct {
	kind byte
	a, b int
}

// maxEdits bounds the edit distance diffLines searches; past it the whole
// file is shown replaced, which keeps the search's memory bounded.
const maxEdits = 4000

// diffLines is Myers' O(ND) shortest edit script between two line lists.
func diffLines(a, b []string) []diffOp {
	n, m := len(a), len(b)
	limit := min(n+m, maxEdits)
	off := limit + 1
	v := make([]int, 2*limit+3)
	var trace [][]int // trace[d] holds v[off-d : off+d+1] before step d
	found := -1
	for d := 0; d <= limit && found < 0; d++ {
		trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				found = d
				break
			}
		}
	}
	if found < 0 {
		var ops []diffOp
		for i := range a {
			ops = append(ops, diffOp{'-', i, 0})
		}
		for j := range b {
			ops = append(ops, diffOp{'+', n, j})
		}
		return ops
	}
	var rev []diffOp
	x, y := n, m
	for d := found; d > 0; d-- {
		prev := trace[d] // prev[k+d] is v[k] before step d
		k := x - y
		var pk int
		if k == -d || (k != d && prev[k-1+d] < prev[k+1+d]) {
			pk = k + 1 // reached by a step down: an insertion
		} else {
			pk = k - 1 // by a step right: a deletion
		}
		px := prev[pk+d]
		py := px - pk
		mx, my := px+1, py
		if pk == k+1 {
			mx, my = px, py+1
		}
		for x > mx && y > my {
			rev = append(rev, diffOp{'=', x - 1, y - 1})
			x--
			y--
		}
		if pk == k+1 {
			rev = append(rev, diffOp{'+', px, py})
		} else {
			rev = append(rev, diffOp{'-', px, py})
		}
		x, y = px, py
	}
	for x > 0 && y > 0 {
		rev = append(rev, diffOp{'=', x - 1, y - 1})
		x--
		y--
	}
	ops := make([]diffOp, len(rev))
	for i, op := range rev {
		ops[len(rev)-1-i] = op
	}
	return ops
}
