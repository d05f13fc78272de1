//go:build !linux

package runchannel

import (
	"fmt"
	"io"
)

// Exec would run sandbox-exec; it needs Linux, as the sandboxes do.
func Exec(_ []string, _ io.Reader, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "iterion sandbox-exec: it needs Linux, as the sandbox drivers do")
	return ExitFailed
}
