package engine_test

import (
	"testing"

	"github.com/iterion-bot/iterion/internal/nodesandbox"
	"github.com/iterion-bot/iterion/internal/nodesandbox/nodesandboxtest"
)

// testSandbox is the sandbox of the engine's tests: the real default,
// bubblewrap (make test installs it).
func testSandbox(tb testing.TB) *nodesandbox.Sandboxes {
	return nodesandboxtest.New(tb, nodesandbox.Options{})
}
