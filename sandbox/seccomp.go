package sandbox

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// The seccomp filter that bwrap loads for the command (--seccomp) is a
// classic BPF program generated here, so that no libseccomp is needed. It
// is a deny-list: the system calls that reach the kernel's mount, namespace,
// tracing, keyring, BPF, module and reboot machinery fail with EPERM, and
// so does clone(2) asked for new namespaces. clone3(2) fails with ENOSYS,
// because its flags live in memory a filter cannot read; C libraries then
// fall back to clone(2), whose flags it checks. A system call made for
// another architecture (the i386 or arm32 entry points, or x32 numbers on
// x86_64) kills the process: a deny-list keyed on one architecture's
// numbers means nothing for another.

// deniedSyscalls fail with EPERM and denyENOSYS with ENOSYS.
var deniedSyscalls = []string{
	// Mounting, by the old and the new mount API.
	"mount", "umount2", "pivot_root", "open_tree", "open_tree_attr", "move_mount",
	"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	// Namespaces.
	"unshare", "setns",
	// Reading and writing other processes.
	"ptrace", "process_vm_readv", "process_vm_writev",
	// The kernel keyring.
	"keyctl", "add_key", "request_key",
	// Kernel programs and performance counters.
	"bpf", "perf_event_open",
	// Replacing, stopping or extending the kernel.
	"kexec_load", "kexec_file_load", "reboot", "init_module", "finit_module", "delete_module",
	"swapon", "swapoff",
	// Opening a file by handle walks around the mount namespace.
	"open_by_handle_at",
	// Page-fault handling in user space widens kernel races.
	"userfaultfd",
	// io_uring runs operations the filter never sees.
	"io_uring_setup", "io_uring_enter", "io_uring_register",
}

var denyENOSYS = []string{"clone3"}

// cloneNamespaces are the clone(2) flags that ask for a new namespace:
// CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
// CLONE_NEWPID, CLONE_NEWNET.
const cloneNamespaces = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

// seccompArch is one architecture's audit number and system call numbers.
type seccompArch struct {
	audit uint32
	// x32 is the bit that marks an x32 system call on x86_64, 0 elsewhere.
	x32 uint32
	nr  map[string]uint32
}

var seccompArches = map[string]seccompArch{
	"amd64": {
		audit: 0xc000003e, // AUDIT_ARCH_X86_64
		x32:   0x40000000,
		nr: map[string]uint32{
			"clone": 56, "ptrace": 101, "pivot_root": 155, "mount": 165, "umount2": 166,
			"swapon": 167, "swapoff": 168, "reboot": 169, "init_module": 175, "delete_module": 176,
			"kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272,
			"perf_event_open": 298, "open_by_handle_at": 304, "setns": 308,
			"process_vm_readv": 310, "process_vm_writev": 311, "finit_module": 313,
			"kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
			"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
			"open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
			"fspick": 433, "clone3": 435, "mount_setattr": 442, "open_tree_attr": 467,
		},
	},
	"arm64": {
		audit: 0xc00000b7, // AUDIT_ARCH_AARCH64
		nr: map[string]uint32{
			"umount2": 39, "mount": 40, "pivot_root": 41, "unshare": 97, "kexec_load": 104,
			"init_module": 105, "delete_module": 106, "ptrace": 117, "reboot": 142,
			"add_key": 217, "request_key": 218, "keyctl": 219, "clone": 220, "swapon": 224,
			"swapoff": 225, "perf_event_open": 241, "open_by_handle_at": 265, "setns": 268,
			"process_vm_readv": 270, "process_vm_writev": 271, "finit_module": 273, "bpf": 280,
			"userfaultfd": 282, "kexec_file_load": 294,
			"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
			"open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
			"fspick": 433, "clone3": 435, "mount_setattr": 442, "open_tree_attr": 467,
		},
	},
}

// Classic BPF as seccomp runs it.
type bpfInsn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

const (
	bpfLdWAbs = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK   = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJgeK   = 0x35 // BPF_JMP | BPF_JGE | BPF_K
	bpfJsetK  = 0x45 // BPF_JMP | BPF_JSET | BPF_K
	bpfRetK   = 0x06 // BPF_RET | BPF_K

	seccompRetKillProcess = 0x80000000
	seccompRetErrno       = 0x00050000
	seccompRetAllow       = 0x7fff0000

	errnoEPERM  = 1
	errnoENOSYS = 38

	// Offsets in struct seccomp_data.
	offNr   = 0
	offArch = 4
	offArg0 = 16 // the low 32 bits on a little-endian machine
)

// The ends a jump can go to; resolved when the program is finished.
type bpfLabel int

const (
	toNext bpfLabel = iota
	toAllow
	toEPERM
	toENOSYS
	toKill
)

type bpfAsm struct {
	prog []bpfInsn
	jmps []bpfJump
}

type bpfJump struct {
	at     int
	jt, jf bpfLabel
}

func (a *bpfAsm) stmt(code uint16, k uint32) {
	a.prog = append(a.prog, bpfInsn{code: code, k: k})
}

func (a *bpfAsm) jump(code uint16, k uint32, jt, jf bpfLabel) {
	a.jmps = append(a.jmps, bpfJump{at: len(a.prog), jt: jt, jf: jf})
	a.prog = append(a.prog, bpfInsn{code: code, k: k})
}

// finish appends the four returns and resolves the jumps to them.
func (a *bpfAsm) finish() ([]bpfInsn, error) {
	ends := map[bpfLabel]int{}
	for _, r := range []struct {
		l bpfLabel
		k uint32
	}{
		{toAllow, seccompRetAllow},
		{toEPERM, seccompRetErrno | errnoEPERM},
		{toENOSYS, seccompRetErrno | errnoENOSYS},
		{toKill, seccompRetKillProcess},
	} {
		ends[r.l] = len(a.prog)
		a.stmt(bpfRetK, r.k)
	}
	off := func(at int, l bpfLabel) (uint8, error) {
		if l == toNext {
			return 0, nil
		}
		d := ends[l] - at - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("sandbox: seccomp jump of %d instructions", d)
		}
		return uint8(d), nil
	}
	for _, j := range a.jmps {
		var err error
		if a.prog[j.at].jt, err = off(j.at, j.jt); err != nil {
			return nil, err
		}
		if a.prog[j.at].jf, err = off(j.at, j.jf); err != nil {
			return nil, err
		}
	}
	return a.prog, nil
}

// seccompProgram builds the filter for goarch.
func seccompProgram(goarch string) ([]bpfInsn, error) {
	arch, ok := seccompArches[goarch]
	if !ok {
		return nil, fmt.Errorf("sandbox: no seccomp filter for %s (only amd64 and arm64)", goarch)
	}
	var a bpfAsm
	a.stmt(bpfLdWAbs, offArch)
	a.jump(bpfJeqK, arch.audit, toNext, toKill)
	a.stmt(bpfLdWAbs, offNr)
	if arch.x32 != 0 {
		a.jump(bpfJgeK, arch.x32, toKill, toNext)
	}
	for _, group := range []struct {
		names []string
		to    bpfLabel
	}{{deniedSyscalls, toEPERM}, {denyENOSYS, toENOSYS}} {
		names := slices.Clone(group.names)
		slices.Sort(names)
		for _, name := range names {
			nr, ok := arch.nr[name]
			if !ok {
				return nil, fmt.Errorf("sandbox: no %s system call number for %s", goarch, name)
			}
			a.jump(bpfJeqK, nr, group.to, toNext)
		}
	}
	a.jump(bpfJeqK, arch.nr["clone"], toNext, toAllow)
	a.stmt(bpfLdWAbs, offArg0)
	a.jump(bpfJsetK, cloneNamespaces, toEPERM, toAllow)
	return a.finish()
}

// seccompFilter returns the filter for goarch in the form bwrap reads: an
// array of struct sock_filter in the machine's byte order.
func seccompFilter(goarch string) ([]byte, error) {
	prog, err := seccompProgram(goarch)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		out = binary.NativeEndian.AppendUint16(out, in.code)
		out = append(out, in.jt, in.jf)
		out = binary.NativeEndian.AppendUint32(out, in.k)
	}
	return out, nil
}
