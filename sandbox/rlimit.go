//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// rlimit is one resource limit set on a child: soft and hard to value,
// except RLIMIT_CPU whose hard limit is one second more so that the
// process first gets SIGXCPU (which a driver can recognise) and only then
// SIGKILL.
type rlimit struct {
	resource int
	name     string
	value    uint64
}

const (
	rlimitCPU   = 0
	rlimitFsize = 1
	rlimitNproc = 6
	rlimitAS    = 9
)

// rlimitsFor returns the rlimits that enforce lim where no cgroup does,
// except OpenFiles, which the gate sets (see start). nproc is the
// RLIMIT_NPROC to set for Limits.Processes (0 for none).
func rlimitsFor(lim Limits, cg *cgroup, nproc int) []rlimit {
	var rl []rlimit
	if lim.CPUTime > 0 && !cg.hasCPU() {
		secs := uint64((lim.CPUTime + 999_999_999) / 1_000_000_000)
		rl = append(rl, rlimit{rlimitCPU, "cpu", secs})
	}
	if lim.Memory > 0 && (cg == nil || cg.memory == "") {
		rl = append(rl, rlimit{rlimitAS, "as", uint64(lim.Memory)})
	}
	if nproc > 0 && (cg == nil || cg.pids == "") {
		rl = append(rl, rlimit{rlimitNproc, "nproc", uint64(nproc)})
	}
	if lim.FileSize > 0 {
		rl = append(rl, rlimit{rlimitFsize, "fsize", uint64(lim.FileSize)})
	}
	return rl
}

// setRlimits sets rl on the process pid with prlimit(2). A limit is never
// raised above the process's current hard limit, which only a privileged
// server could do.
func setRlimits(pid int, rl []rlimit) error {
	for _, r := range rl {
		var old syscall.Rlimit
		if err := prlimit(pid, r.resource, nil, &old); err != nil {
			return fmt.Errorf("sandbox: reading rlimit %s: %w", r.name, err)
		}
		soft, hard := r.value, r.value
		if r.resource == rlimitCPU {
			hard = soft + 1
		}
		hard = min(hard, old.Max)
		soft = min(soft, hard)
		if err := prlimit(pid, r.resource, &syscall.Rlimit{Cur: soft, Max: hard}, nil); err != nil {
			return fmt.Errorf("sandbox: setting rlimit %s: %w", r.name, err)
		}
	}
	return nil
}

func prlimit(pid, resource int, set, old *syscall.Rlimit) error {
	_, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(resource),
		uintptr(unsafe.Pointer(set)), uintptr(unsafe.Pointer(old)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// userTasks counts the tasks (threads included) of processes that uid
// owns, which is what RLIMIT_NPROC counts for a process outside a user
// namespace. It is approximate: /proc/<pid> is owned by the effective uid,
// and processes come and go while it counts.
func userTasks(uid int) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		fi, err := os.Stat(filepath.Join("/proc", e.Name()))
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
			continue
		}
		tasks, err := os.ReadDir(filepath.Join("/proc", e.Name(), "task"))
		if err != nil {
			continue
		}
		n += len(tasks)
	}
	return n
}

// describeRlimits names the rlimits that a tree with every limit set would
// get, for Mechanism.
func describeRlimits(c *cgroups, nprocNote string) string {
	var names []string
	if !c.has("cpu") {
		names = append(names, "cpu per process")
	}
	if !c.has("memory") {
		names = append(names, "as")
	}
	if !c.has("pids") {
		names = append(names, "nproc"+nprocNote)
	}
	names = append(names, "nofile", "fsize")
	return "rlimits (" + strings.Join(names, ", ") + ")"
}

// pidfdOpen returns a pidfd for pid. A pidfd names one process for good:
// signals sent through it never reach a process that reused the pid.
func pidfdOpen(pid int) (int, error) {
	const sysPidfdOpen = 434 // the same on every architecture
	fd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func pidfdKill(fd int) error {
	const sysPidfdSendSignal = 424
	_, _, e := syscall.Syscall6(sysPidfdSendSignal, uintptr(fd), uintptr(syscall.SIGKILL), 0, 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// pidfdWait waits until the process of pidfd fd has exited or timeout
// milliseconds have passed; it reports whether it has exited.
func pidfdWait(fd int, timeoutMS int) bool {
	type pollFd struct {
		fd      int32
		events  int16
		revents int16
	}
	const pollIn = 0x1
	pfd := pollFd{fd: int32(fd), events: pollIn}
	ts := syscall.NsecToTimespec(int64(timeoutMS) * 1_000_000)
	for {
		n, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		return e == 0 && n == 1
	}
}

// parentPid returns the PPid of /proc/<pid>/status.
func parentPid(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("sandbox: no PPid in /proc/%d/status", pid)
}
