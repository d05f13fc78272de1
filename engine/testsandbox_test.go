package engine_test

import (
	"testing"

	"github.com/iterion-bot/iterion/internal/nodesandbox"
)

// testSandbox is the sandbox of the engine's tests: the real default,
// bubblewrap (make test installs it; without it, every process fails with
// the command that installs it).
func testSandbox(tb testing.TB) *nodesandbox.Sandboxes {
	tb.Helper()
	sb, err := nodesandbox.New(nodesandbox.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if err := sb.Default().Available(); err != nil {
		tb.Fatalf("the engine's tests run tool nodes under bubblewrap: %v", err)
	}
	return sb
}
