package extension_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/iterion-bot/iterion/backends/pi/extension"
)

// The committed bundle is what the source builds to: a forgotten rebuild
// would ship yesterday's extension with every binary.
func TestBundleIsFresh(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	js, err := extension.Build(root)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(js, extension.JS) {
		t.Errorf("%s is stale: run make pi-extension and commit it", extension.Bundle)
	}
}

// The bundle speaks the contract Go speaks, and imports nothing.
func TestBundleContractAndImports(t *testing.T) {
	m := regexp.MustCompile(`var CONTRACT = (\d+);`).FindSubmatch(extension.JS)
	if m == nil {
		t.Fatal("the bundle declares no CONTRACT")
	}
	if n, _ := strconv.Atoi(string(m[1])); n != extension.Contract {
		t.Errorf("the bundle speaks contract %d, Go %d", n, extension.Contract)
	}
	if regexp.MustCompile(`(?m)^\s*import\s|require\(`).Match(extension.JS) {
		t.Error("the bundle imports a module: the sandbox has none of ours")
	}
	if _, err := os.Stat("src/index.ts"); err != nil {
		t.Error(err)
	}
}
