//go:build linux

package sandbox_test

import (
	"context"
	"testing"

	"github.com/iterion-bot/iterion/sandbox"
)

// BenchmarkStart measures a whole run of true(1), start to Wait: what each
// driver costs per process. host and bwrap run without limits;
// the -limits variants set Processes and Memory, which adds the cgroups
// (where writable) and the gate that puts the process in them.
func BenchmarkStart(b *testing.B) {
	limits := sandbox.Limits{Processes: 64, Memory: 256 << 20}
	for _, bc := range []struct {
		name   string
		d      sandbox.Driver
		limits sandbox.Limits
	}{
		{"host", newHost(b, sandbox.Options{}), sandbox.Limits{}},
		{"bwrap", newBwrap(b, sandbox.Options{}), sandbox.Limits{}},
		{"host-limits", newHost(b, sandbox.Options{}), limits},
		{"bwrap-limits", newBwrap(b, sandbox.Options{}), limits},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := sandbox.Spec{Argv: []string{"true"}, Dir: newWorkspace(b), Env: baseEnv, Limits: bc.limits}
			for b.Loop() {
				res, err := sandbox.Run(context.Background(), bc.d, s)
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("true: exit %d, %v", res.ExitCode, err)
				}
			}
		})
	}
}
