package main

import (
	"os"
	"strings"
	"testing"
)

// The serve.yml examples of the docs are files serve accepts as they are.
func TestDocsConfigExamples(t *testing.T) {
	for _, doc := range []string{"../../docs/serve.md", "../../docs/sandbox.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks := strings.Split(string(b), "```yaml\n")
		if len(blocks) < 2 {
			t.Fatalf("%s has no yaml example", doc)
		}
		for i, block := range blocks[1:] {
			example, _, _ := strings.Cut(block, "```")
			cfg := defaultServeConfig()
			if err := parseServeConfig(doc, []byte(example), &cfg); err != nil {
				t.Errorf("%s, example %d: %v", doc, i+1, err)
			}
		}
	}
}
