package fakellm

import (
	"path/filepath"
	"testing"
)

// The scripts shipped with the examples load.
func TestExampleScriptsLoad(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*/fake-model.json")
	if len(files) == 0 {
		t.Fatal("no example scripts")
	}
	for _, f := range files {
		if _, err := LoadScript(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
