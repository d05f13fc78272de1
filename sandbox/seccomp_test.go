//go:build linux

package sandbox

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// runBPF runs a seccomp program over one system call as the kernel would,
// for the instructions the generator emits.
func runBPF(tb testing.TB, prog []bpfInsn, arch uint32, nr uint32, arg0 uint64) uint32 {
	tb.Helper()
	var data [64]byte // struct seccomp_data
	binary.LittleEndian.PutUint32(data[offNr:], nr)
	binary.LittleEndian.PutUint32(data[offArch:], arch)
	binary.LittleEndian.PutUint64(data[offArg0:], arg0)
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.code {
		case bpfLdWAbs:
			acc = binary.LittleEndian.Uint32(data[in.k:])
		case bpfJeqK, bpfJgeK, bpfJsetK:
			var taken bool
			switch in.code {
			case bpfJeqK:
				taken = acc == in.k
			case bpfJgeK:
				taken = acc >= in.k
			case bpfJsetK:
				taken = acc&in.k != 0
			}
			if taken {
				pc += int(in.jt)
			} else {
				pc += int(in.jf)
			}
		case bpfRetK:
			return in.k
		default:
			tb.Fatalf("instruction %d: unknown code %#x", pc, in.code)
		}
	}
	tb.Fatal("the program ran off its end")
	return 0
}

func TestSeccompVerdicts(t *testing.T) {
	const (
		eperm  = seccompRetErrno | errnoEPERM
		enosys = seccompRetErrno | errnoENOSYS
	)
	for goarch, arch := range seccompArches {
		prog, err := seccompProgram(goarch)
		if err != nil {
			t.Fatal(err)
		}
		if len(prog) > 4096 {
			t.Fatalf("%s: %d instructions, more than the kernel takes", goarch, len(prog))
		}
		allowed := map[string]uint32{}
		switch goarch {
		case "amd64":
			allowed = map[string]uint32{"read": 0, "write": 1, "openat": 257, "execve": 59, "getpid": 39, "fork": 57, "setsid": 112}
		case "arm64":
			allowed = map[string]uint32{"read": 63, "write": 64, "openat": 56, "execve": 221, "getpid": 172, "setsid": 157}
		}
		type call struct {
			name string
			arch uint32
			nr   uint32
			arg0 uint64
			want uint32
		}
		var calls []call
		for _, name := range deniedSyscalls {
			calls = append(calls, call{name, arch.audit, arch.nr[name], 0, eperm})
		}
		calls = append(calls,
			call{"clone3", arch.audit, arch.nr["clone3"], 0, enosys},
			call{"clone of a thread", arch.audit, arch.nr["clone"], 0x3d0f00, seccompRetAllow},
			call{"clone of a process", arch.audit, arch.nr["clone"], uint64(syscall.SIGCHLD), seccompRetAllow},
			call{"clone with a new user namespace", arch.audit, arch.nr["clone"], 0x10000000 | uint64(syscall.SIGCHLD), eperm},
			call{"clone with a new mount namespace", arch.audit, arch.nr["clone"], 0x00020000, eperm},
			call{"clone with a new network namespace", arch.audit, arch.nr["clone"], 0x40000000, eperm},
			call{"another architecture", 0x40000003 /* AUDIT_ARCH_I386 */, 1, 0, seccompRetKillProcess},
		)
		if arch.x32 != 0 {
			calls = append(calls, call{"x32 read", arch.audit, arch.x32 | 0, 0, seccompRetKillProcess})
		}
		for name, nr := range allowed {
			calls = append(calls, call{name, arch.audit, nr, 0, seccompRetAllow})
		}
		for _, c := range calls {
			t.Run(goarch+"/"+c.name, func(t *testing.T) {
				if got := runBPF(t, prog, c.arch, c.nr, c.arg0); got != c.want {
					t.Errorf("verdict = %#x, want %#x", got, c.want)
				}
			})
		}
	}
}

// The numbers of the build architecture agree with package syscall for the
// calls it knows on every architecture.
func TestSeccompNumbers(t *testing.T) {
	arch, ok := seccompArches[runtime.GOARCH]
	if !ok {
		t.Fatalf("no seccomp table for %s", runtime.GOARCH)
	}
	known := map[string]uintptr{
		"mount": syscall.SYS_MOUNT, "umount2": syscall.SYS_UMOUNT2, "pivot_root": syscall.SYS_PIVOT_ROOT,
		"unshare": syscall.SYS_UNSHARE, "ptrace": syscall.SYS_PTRACE, "keyctl": syscall.SYS_KEYCTL,
		"add_key": syscall.SYS_ADD_KEY, "request_key": syscall.SYS_REQUEST_KEY, "kexec_load": syscall.SYS_KEXEC_LOAD,
		"reboot": syscall.SYS_REBOOT, "init_module": syscall.SYS_INIT_MODULE, "delete_module": syscall.SYS_DELETE_MODULE,
		"perf_event_open": syscall.SYS_PERF_EVENT_OPEN, "clone": syscall.SYS_CLONE, "swapon": syscall.SYS_SWAPON,
		"swapoff": syscall.SYS_SWAPOFF,
	}
	for name, want := range known {
		if got := arch.nr[name]; uintptr(got) != want {
			t.Errorf("%s: %s is %d, package syscall says %d", runtime.GOARCH, name, got, want)
		}
	}
}

// Inside bwrap, the filtered calls really fail, with the errno the filter
// returns rather than the kernel's own answer (perl, part of every Debian
// system, makes raw system calls). Each call is made with arguments that
// would get another answer without the filter: ptrace(PTRACE_TRACEME) and
// unshare(0) succeed, setns(0, 0) is EINVAL, clone3(NULL, 0) EINVAL, and
// so on.
func TestSeccompInsideBwrap(t *testing.T) {
	b := NewBwrap(Options{})
	if err := b.Available(); err != nil {
		t.Fatalf("bwrap driver not available: %v", err)
	}
	arch := seccompArches[runtime.GOARCH]
	want := map[string]string{}
	var args []string
	for _, name := range deniedSyscalls {
		args = append(args, fmt.Sprintf("%s=%d=0", name, arch.nr[name]))
		want[name] = "-1 1"
	}
	args = append(args, fmt.Sprintf("clone3=%d=0", arch.nr["clone3"]))
	want["clone3"] = "-1 38"
	// CLONE_NEWUSER|CLONE_FS is refused by the kernel with EINVAL when
	// the filter lets it through, so no process is forked either way.
	args = append(args, fmt.Sprintf("clone-newuser=%d=%d", arch.nr["clone"], 0x10000000|0x200))
	want["clone-newuser"] = "-1 1"
	script := `for (@ARGV) { ($n, $nr, $a) = split /=/; $! = 0; $r = syscall($nr + 0, $a + 0, 0, 0, 0, 0); printf "%s %d %d\n", $n, $r, $r == -1 ? $! + 0 : 0 }`
	dir := t.TempDir()
	p, err := b.Start(context.Background(), Spec{Argv: append([]string{"perl", "-e", script}, args...), Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("perl: exit %d, %v: %s", res.ExitCode, err, res.Stderr)
	}
	got := map[string]string{}
	for line := range strings.Lines(string(res.Stdout)) {
		name, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		got[name] = v
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s inside bwrap returned %q (result errno), want %q", name, got[name], w)
		}
	}
}

// The seccomp filter must not break what a sandboxed process does: fork,
// threads, exec.
func TestSeccompAllowsOrdinaryWork(t *testing.T) {
	b := NewBwrap(Options{})
	if err := b.Available(); err != nil {
		t.Fatalf("bwrap driver not available: %v", err)
	}
	p, err := b.Start(context.Background(), Spec{
		Argv: []string{"bash", "-c", "(echo sub) && echo $(echo cmd) | cat && sort -u --parallel=4 /etc/services | head -c 0 && echo ok"},
		Dir:  t.TempDir(),
		Env:  []string{"PATH=/usr/bin:/bin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "sub\ncmd\nok\n" {
		t.Errorf("got exit %d stdout %q stderr %q err %v", res.ExitCode, res.Stdout, res.Stderr, err)
	}
}
