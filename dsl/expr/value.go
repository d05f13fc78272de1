package expr

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// norm converts a value to the evaluator's representation, one level deep:
// every integer type becomes int64, float32 becomes float64, json.Number
// becomes int64 or float64, other slices and arrays become []any, maps with
// string keys become map[string]any, named scalar types become their base
// type and pointers are followed. Elements of collections are normalised
// when they are read. Values of any other type are kept as opaque values.
func norm(v any) any {
	switch x := v.(type) {
	case nil, bool, int64, float64, string, []any, map[string]any:
		return v
	case int:
		return int64(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case uint:
		return uintValue(uint64(x))
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		return uintValue(x)
	case float32:
		return float64(x)
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return string(x)
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, s := range x {
			out[k] = s
		}
		return out
	}
	return normReflect(reflect.ValueOf(v), v)
}

func uintValue(u uint64) any {
	if u > math.MaxInt64 {
		return float64(u)
	}
	return int64(u)
}

// normReflect handles named and composite types through reflection.
func normReflect(rv reflect.Value, orig any) any {
	for range 16 {
		if rv.Kind() != reflect.Pointer && rv.Kind() != reflect.Interface {
			break
		}
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Bool:
		return rv.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintValue(rv.Uint())
	case reflect.Float32, reflect.Float64:
		return rv.Float()
	case reflect.String:
		return rv.String()
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return []any{}
		}
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = rv.Index(i).Interface()
		}
		return out
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return orig
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			out[it.Key().String()] = it.Value().Interface()
		}
		return out
	}
	if rv.IsValid() && rv.CanInterface() {
		return rv.Interface()
	}
	return orig
}

// Result normalisation limits (deepNorm).
const (
	maxResultDepth = 10000
	maxResultNodes = 1_000_000
)

// deepNorm normalises v and everything it contains, copying collections
// only where something changes.
func deepNorm(v any, depth int, count *int) (any, error) {
	*count++
	if depth > maxResultDepth || *count > maxResultNodes {
		return nil, fmt.Errorf("result is too large or too deeply nested")
	}
	v = norm(v)
	switch x := v.(type) {
	case []any:
		var out []any
		for i, e := range x {
			ne, err := deepNorm(e, depth+1, count)
			if err != nil {
				return nil, err
			}
			if out == nil && !sameValue(ne, e) {
				out = make([]any, len(x))
				copy(out, x[:i])
			}
			if out != nil {
				out[i] = ne
			}
		}
		if out != nil {
			return out, nil
		}
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			ne, err := deepNorm(e, depth+1, count)
			if err != nil {
				return nil, err
			}
			if out == nil && !sameValue(ne, e) {
				out = make(map[string]any, len(x))
				for k2, e2 := range x {
					out[k2] = e2
				}
			}
			if out != nil {
				out[k] = ne
			}
		}
		if out != nil {
			return out, nil
		}
	}
	return v, nil
}

// sameValue reports whether normalising left a value untouched.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	case nil, bool, int64, float64, string:
		if reflect.TypeOf(a) != reflect.TypeOf(b) {
			return false
		}
		if f, ok := a.(float64); ok {
			g := b.(float64)
			return f == g || (f != f && g != g)
		}
		return a == b
	}
	return false
}

// Truthy reports the truth value of v: nil is false; a bool is itself; a
// string is false if, trimmed and lower-cased, it is "", "false", "no" or
// "0"; a number is false if it is 0; a list or map is false if it is empty;
// anything else is true.
func Truthy(v any) bool {
	switch x := norm(v).(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "", "false", "no", "0":
			return false
		}
		return true
	case int64:
		return x != 0
	case float64:
		return x != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// TypeName names the type of a value as expressions see it (nil, bool,
// int, float, string, list, map), for error messages.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "string"
	case []any:
		return "list"
	case map[string]any:
		return "map"
	}
	return fmt.Sprintf("%T", v)
}

func isNumber(v any) bool {
	switch v.(type) {
	case int64, float64:
		return true
	}
	return false
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

// asInt returns v as an int64 if it is an int or an integral float within
// the int64 range.
func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case float64:
		if x == math.Trunc(x) && x >= -(1<<63) && x < 1<<63 {
			return int64(x), true
		}
	}
	return 0, false
}

// equal implements ==: integral numbers compare as integers, other numbers
// as floats; nil equals only nil; strings and bools compare by value; every
// other combination (including any two collections) is unequal.
func equal(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case int64, float64:
		if !isNumber(b) {
			return false
		}
		ai, aok := asInt(a)
		bi, bok := asInt(b)
		if aok && bok {
			return ai == bi
		}
		return toFloat(a) == toFloat(b)
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return false
}

// numCompare orders two numbers: -1, 0 or +1. Two ints compare exactly,
// anything else as floats (NaN compares as equal to everything).
func numCompare(a, b any) int {
	if x, ok := a.(int64); ok {
		if y, ok := b.(int64); ok {
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
	}
	x, y := toFloat(a), toFloat(b)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// formatNumber renders a number as %v does.
func formatNumber(v any) string {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// textWriter renders values as fmt's %v verb does, but charges every byte
// to the evaluation's string budget so that huge or self-similar values
// cannot exhaust memory.
type textWriter struct {
	b  strings.Builder
	st *evalState
}

func (w *textWriter) write(s string) error {
	if err := w.st.chargeBytes(len(s)); err != nil {
		return err
	}
	w.b.WriteString(s)
	return nil
}

func (w *textWriter) value(v any, depth int) error {
	if depth > maxResultDepth {
		return errBudget
	}
	v = norm(v)
	switch x := v.(type) {
	case string:
		return w.write(x)
	case nil:
		return w.write("<nil>")
	case bool:
		return w.write(strconv.FormatBool(x))
	case int64, float64:
		return w.write(formatNumber(x))
	case []any:
		if err := w.write("["); err != nil {
			return err
		}
		for i, e := range x {
			if i > 0 {
				if err := w.write(" "); err != nil {
					return err
				}
			}
			if err := w.value(e, depth+1); err != nil {
				return err
			}
		}
		return w.write("]")
	case map[string]any:
		keys := sortedKeys(x)
		if err := w.write("map["); err != nil {
			return err
		}
		for i, k := range keys {
			if i > 0 {
				if err := w.write(" "); err != nil {
					return err
				}
			}
			if err := w.write(k + ":"); err != nil {
				return err
			}
			if err := w.value(x[k], depth+1); err != nil {
				return err
			}
		}
		return w.write("]")
	}
	return w.write(fmt.Sprint(v))
}

// text renders v as %v would.
func (st *evalState) text(v any) (string, error) {
	v = norm(v)
	switch x := v.(type) {
	case string:
		return x, nil
	case nil:
		return "<nil>", nil
	case bool:
		return strconv.FormatBool(x), nil
	case int64, float64:
		return formatNumber(x), nil
	}
	w := &textWriter{st: st}
	if err := w.value(v, 0); err != nil {
		return "", err
	}
	return w.b.String(), nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
