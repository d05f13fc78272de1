package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ParseOutput turns the final text into the node's output: the JSON object
// it holds when the node has a schema (checked for the schema's required
// fields; the engine validates fully), else {text: …}.
func ParseOutput(text string, schema map[string]any) (map[string]any, error) {
	if schema == nil {
		return map[string]any{"text": text}, nil
	}
	s := strings.TrimSpace(text)
	if i := strings.Index(s, "{"); i >= 0 {
		if j := strings.LastIndex(s, "}"); j > i {
			s = s[i : j+1]
		}
	}
	var out map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil || out == nil {
		return nil, errors.New("it is not a JSON object")
	}
	out = normalizeNumbers(out).(map[string]any)
	if req, ok := schema["required"].([]any); ok {
		var missing []string
		for _, r := range req {
			if name, _ := r.(string); name != "" {
				if _, ok := out[name]; !ok {
					missing = append(missing, name)
				}
			}
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("fields %s are missing", strings.Join(missing, ", "))
		}
	}
	return out, nil
}

// normalizeNumbers turns json.Number into int64 or float64.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// OutputRepairPrompt is the message an agent gets once when its final
// answer is not valid output (perr says why): every backend gives it one
// repair turn.
func OutputRepairPrompt(perr error) string {
	return fmt.Sprintf("Your final answer could not be used: %v. Reply with only a JSON object that matches the output schema, and nothing else.", perr)
}

// OutputSection is the part of a node's system prompt that asks for its
// output schema, on every backend.
func OutputSection(schema map[string]any) string {
	b, _ := json.Marshal(schema)
	return "[OUTPUT]\nWhen you are done, reply with only a JSON object matching this JSON Schema, and nothing else:\n" + string(b)
}
