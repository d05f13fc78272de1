//go:build unix

package page_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used, user and system: what a
// benchmark costs when the machine is shared and the wall clock says more
// about the neighbours than about the code.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
