package engine_test

import (
	"strings"
	"testing"

	"github.com/iterion-bot/iterion/engine"
)

func TestParseOutput(t *testing.T) {
	schema := map[string]any{"type": "object", "required": []any{"ok", "n"}}
	tests := []struct {
		name    string
		text    string
		want    map[string]any
		wantErr string
	}{
		{"plain json", `{"ok": true, "n": 3}`, map[string]any{"ok": true, "n": int64(3)}, ""},
		{"fenced json", "Here:\n```json\n{\"ok\": false, \"n\": 1.5}\n```", map[string]any{"ok": false, "n": 1.5}, ""},
		{"missing field", `{"ok": true}`, nil, "fields n are missing"},
		{"not json", "all done", nil, "not a JSON object"},
	}
	for _, tc := range tests {
		got, err := engine.ParseOutput(tc.text, schema)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) || got["ok"] != tc.want["ok"] || got["n"] != tc.want["n"] {
			t.Errorf("%s: got %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if got, _ := engine.ParseOutput("free text", nil); got["text"] != "free text" {
		t.Errorf("schemaless output = %v", got)
	}
}
