package engine

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// CodeContextLengthExceeded (upstream's CONTEXT_LENGTH_EXCEEDED) fails a
// model node whose prompt is larger than a model can take; the engine
// refuses to render one past maxRendered.
const CodeContextLengthExceeded = "CONTEXT_LENGTH_EXCEEDED"

// DefaultMaxStoredBytes is the stored-bytes budget of a run: what it may
// hand to the store over its life, counting every event, history entry,
// interaction and outbox row once and every checkpoint each time it is
// written. A run that reaches it fails BUDGET_EXCEEDED before its next
// node. 1 GiB holds about two million iterations of a loop of small
// nodes, or 250 tool outputs of the 4 MiB a tool may print.
const DefaultMaxStoredBytes = 1 << 30

// maxHistoryBytes bounds the outputs a run keeps in memory for .history
// reads (their size as stored): a template or expression that reads a
// node's history gets all of it, so the whole history must be held.
const maxHistoryBytes = 64 << 20

// runLimits bound what one run may store and hold.
type runLimits struct {
	// storedBytes is the stored-bytes budget; 0 or less means none.
	storedBytes int64
	// historyBytes bounds the outputs kept for .history reads.
	historyBytes int64
}

// limits returns the limits of the engine's runs: Options.MaxStoredBytes
// (0 meaning DefaultMaxStoredBytes, negative meaning none).
func (e *Engine) limits() runLimits {
	budget := e.maxStored
	switch {
	case budget == 0:
		budget = DefaultMaxStoredBytes
	case budget < 0:
		budget = 0
	}
	return runLimits{storedBytes: budget, historyBytes: maxHistoryBytes}
}

// jsonSize is the length of v's JSON encoding (as encoding/json writes
// it), found without encoding it, for the values the engine builds: maps,
// lists, strings, numbers and booleans. Anything else counts as its %v
// text, an estimate.
func jsonSize(v any) int64 {
	switch x := v.(type) {
	case nil:
		return 4
	case bool:
		if x {
			return 4
		}
		return 5
	case string:
		return stringSize(x)
	case int:
		return intSize(int64(x))
	case int64:
		return intSize(x)
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return 4
		}
		return floatSize(x)
	case []byte:
		return 2 + int64(4*((len(x)+2)/3)) // base64
	case map[string]any:
		n := int64(2)
		for k, e := range x {
			n += stringSize(k) + 1 + jsonSize(e) + 1
		}
		if len(x) > 0 {
			n--
		}
		return n
	case []any:
		n := int64(2)
		for _, e := range x {
			n += jsonSize(e) + 1
		}
		if len(x) > 0 {
			n--
		}
		return n
	}
	return int64(len(fmt.Sprint(v)))
}

// intSize is the number of characters of n in decimal.
func intSize(n int64) int64 {
	var buf [20]byte
	return int64(len(strconv.AppendInt(buf[:0], n, 10)))
}

// floatSize is the length of f as encoding/json writes it: like ES6, in
// plain notation from 1e-6 to 1e21, else with an exponent of at least
// one digit.
func floatSize(f float64) int64 {
	var buf [32]byte
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(buf[:0], f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		return int64(n - 1) // e-07 is written e-7
	}
	return int64(len(b))
}

// stringSize is the length of s as a JSON string: encoding/json escapes
// quotes, backslashes and control characters, writes <, >, &, U+2028 and
// U+2029 as \uXXXX, and replaces invalid UTF-8 with \ufffd.
func stringSize(s string) int64 {
	n := int64(2 + len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				n++
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 5
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 5 // one byte becomes \ufffd
		case r == '\u2028' || r == '\u2029':
			n += 3
		}
		i += size
	}
	return n
}
