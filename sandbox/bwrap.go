//go:build linux

package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Bwrap runs each process under bubblewrap, in new user, pid, mount, IPC,
// UTS, cgroup and (with NetworkNone) network namespaces, as uid 1000 with
// no capabilities and a seccomp filter. See the package documentation for
// what the sandbox sees.
type Bwrap struct {
	opts   Options
	cg     *cgroups
	system []string // the bind arguments for the system directories
	copied []string // the files of /etc copied into each sandbox
	proc   []string // the arguments that cover parts of /proc
	// prlimit is util-linux's prlimit(1), which sets OpenFiles and
	// FileSize on the command inside; "" means the shell's ulimit does.
	prlimit string

	once sync.Once
	bin  string
	err  error
}

var _ Driver = (*Bwrap)(nil)

// NewBwrap returns the bwrap driver. It finds the cgroups it can use (see
// Mechanism) unless opts.NoCgroups is set.
func NewBwrap(opts Options) *Bwrap {
	b := &Bwrap{opts: opts}
	b.system, b.copied = systemBinds()
	// prlimit(1) runs inside, from the read-only /usr.
	if p, err := exec.LookPath("prlimit"); err == nil && (strings.HasPrefix(p, "/usr/") || strings.HasPrefix(p, "/bin/")) {
		b.prlimit = p
	}
	if os.Geteuid() == 0 {
		b.proc = procCovers()
	}
	if !opts.NoCgroups {
		b.cg = hostCgroups(opts.CgroupParent)
	}
	return b
}

// Name returns "bwrap".
func (b *Bwrap) Name() string { return "bwrap" }

// Isolated returns true.
func (b *Bwrap) Isolated() bool { return true }

// Mechanism says how limits are enforced: with the cgroups found, and
// rlimits for the rest.
func (b *Bwrap) Mechanism() string {
	note := ""
	if os.Geteuid() == 0 {
		note = ": not enforced, the server runs as root"
	}
	return joinMechanism(b.cg.describe(), describeRlimits(b.cg, note))
}

func joinMechanism(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}

// errNoBwrap is what Available returns when bubblewrap is missing.
var errNoBwrap = errors.New("bubblewrap is not installed: apt-get install -y bubblewrap (or choose sandbox: host to run without isolation)")

// Available returns nil when bubblewrap is installed and can make its
// sandbox here, which it checks once by running true(1) in it.
func (b *Bwrap) Available() error {
	b.once.Do(func() { b.bin, b.err = b.probe() })
	return b.err
}

func (b *Bwrap) probe() (string, error) {
	name := b.opts.BwrapPath
	if name == "" {
		name = "bwrap"
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		return "", errNoBwrap
	}
	if _, err := seccompFilter(runtime.GOARCH); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "iterion-bwrap-probe-")
	if err != nil {
		return "", fmt.Errorf("sandbox: probing bubblewrap: %w", err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := b.start(ctx, bin, Spec{Argv: []string{"true"}, Dir: dir})
	if err != nil {
		return "", fmt.Errorf("sandbox: probing bubblewrap: %w", err)
	}
	res, err := p.Wait()
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit status %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	if err != nil {
		return "", fmt.Errorf("bubblewrap cannot make its sandbox here (%v); user namespaces may be disabled (sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone, or a container that forbids them): enable them, or choose sandbox: docker or host", err)
	}
	return bin, nil
}

// Start starts s under bubblewrap.
func (b *Bwrap) Start(ctx context.Context, s Spec) (*Process, error) {
	if err := b.Available(); err != nil {
		return nil, err
	}
	return b.start(ctx, b.bin, s)
}

// sandboxHome is HOME inside when Spec.Home is empty: a private tmpfs.
const sandboxHome = "/home/iterion"

// The descriptors bwrap reads its inputs from; the files it copies into
// the sandbox follow from fdFiles on.
const (
	fdArgs    = 4
	fdSeccomp = 5
	fdInfo    = 6
	fdFiles   = 7
)

// maxCopied is the largest /etc file copied into each sandbox; a larger
// one is bound instead.
const maxCopied = 256 << 10

func (b *Bwrap) start(ctx context.Context, bin string, s Spec) (_ *Process, err error) {
	if err := checkSpec(&s); err != nil {
		return nil, err
	}
	home := s.Home
	if home == "" {
		home = sandboxHome
	}
	filter, err := seccompFilter(runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	// passwd and group are the sandbox's own; the small files of /etc are
	// read now, so that a changed resolv.conf reaches the next process.
	paths := []string{"/etc/passwd", "/etc/group"}
	data := [][]byte{
		fmt.Appendf(nil, "root:x:0:0:root:/root:/usr/sbin/nologin\niterion:x:1000:1000:iterion sandbox:%s:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", home),
		[]byte("root:x:0:\niterion:x:1000:\nnogroup:x:65534:\n"),
	}
	for _, p := range b.copied {
		if d, err := os.ReadFile(p); err == nil {
			paths, data = append(paths, p), append(data, d)
		}
	}
	args := b.args(&s, home, paths)
	// The command's environment is set inside, by bwrap: the processes
	// that run outside the namespaces (the gate, bwrap itself) get only
	// hostEnv and run in /, so nothing of Spec.Env (LD_PRELOAD, say, naming
	// a library a pull request ships in the workspace) touches them.
	env := append([]string{"--clearenv"}, setenvArgs(mergeEnv(s.Env, home, "/tmp", s.Dir))...)
	args = append(env, args...)
	var files []*os.File
	defer func() {
		if err != nil {
			for _, f := range files {
				f.Close()
			}
		}
	}()
	for _, d := range [][]byte{[]byte(strings.Join(args, "\x00") + "\x00"), filter} {
		r, err := dataPipe(d)
		if err != nil {
			return nil, err
		}
		files = append(files, r)
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: info pipe: %w", err)
	}
	files = append(files, infoW)
	for _, d := range data {
		r, err := dataPipe(d)
		if err != nil {
			infoR.Close()
			return nil, err
		}
		files = append(files, r)
	}

	init := &bwrapInit{ready: make(chan struct{}), pidfd: -1}
	lim := s.Limits
	l := &launch{
		path:        bin,
		argv:        append([]string{bin, "--args", strconv.Itoa(fdArgs), "--"}, b.inside(lim, s.Argv)...),
		env:         hostEnv(),
		dir:         "/",
		files:       files,
		needs:       needsFor(lim, false),
		filesInside: true,
		helpers:     2, // bwrap, and the sandbox's init
		treeDead:    true,
		afterStart: func(p *Process) {
			init.started = true
			go init.read(infoR, p.pid)
		},
		kill:      init.kill,
		afterExit: init.waitGone,
		cleanup: func() {
			init.close()
			infoR.Close()
		},
	}
	if lim.Processes > 0 {
		l.nproc = func() int { return lim.Processes + l.helpers }
	}
	return start(ctx, &s, l, b.cg)
}

// hostEnv is the environment of the processes a driver runs outside the
// sandbox (the gate shell, bwrap, the docker CLI): a fixed PATH, nothing of
// the command's environment.
func hostEnv() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
}

// setenvArgs are bwrap's --setenv options for env, in order (the last of a
// key wins, as in Spec.Env).
func setenvArgs(env []string) []string {
	var a []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	return a
}

// inside returns the command bwrap runs: argv, under prlimit(1) or the
// shell's ulimit when OpenFiles or FileSize is set. Set on bwrap itself,
// those would stop it: it holds a descriptor per copied file, and writes
// the copies. prlimit execs the command (same pid, no helper process).
func (b *Bwrap) inside(lim Limits, argv []string) []string {
	if lim.OpenFiles == 0 && lim.FileSize == 0 {
		return argv
	}
	if b.prlimit != "" {
		pre := []string{b.prlimit}
		if lim.OpenFiles > 0 {
			pre = append(pre, fmt.Sprintf("--nofile=%d:%d", lim.OpenFiles, lim.OpenFiles))
		}
		if lim.FileSize > 0 {
			pre = append(pre, fmt.Sprintf("--fsize=%d:%d", lim.FileSize, lim.FileSize))
		}
		return append(append(pre, "--"), argv...)
	}
	// dash's ulimit -f counts 512-byte blocks: the limit is rounded up.
	script := ""
	if lim.OpenFiles > 0 {
		script += fmt.Sprintf("ulimit -n %d && ", lim.OpenFiles)
	}
	if lim.FileSize > 0 {
		script += fmt.Sprintf("ulimit -f %d && ", (lim.FileSize+511)/512)
	}
	return append([]string{"/bin/sh", "-c", script + `exec "$@"`, "iterion-sandbox"}, argv...)
}

// args returns bwrap's options, passed through --args so that they do not
// show in the sandbox's /proc/1/cmdline (bwrap wants the command itself on
// its command line). copied are the files it copies in, from the
// descriptors fdFiles, fdFiles+1, and so on.
func (b *Bwrap) args(s *Spec, home string, copied []string) []string {
	fd := strconv.Itoa
	a := []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--uid", "1000", "--gid", "1000", "--hostname", "iterion",
	}
	if s.Network == NetworkOpen {
		a = append(a, "--share-net")
	}
	a = append(a, "--perms", "0755", "--dir", "/etc")
	a = append(a, b.system...)
	for i, p := range copied {
		a = append(a, "--perms", "0644", "--file", fd(fdFiles+i), p)
	}
	a = append(a, "--proc", "/proc")
	a = append(a, b.proc...)
	a = append(a,
		// The sandbox's init is bwrap's: its memory holds nothing the
		// sandbox lacks, but there is no reason to let it be read.
		"--ro-bind", "/dev/null", "/proc/1/mem",
		"--dev", "/dev",
	)
	tmpfs := func(dir string) {
		if s.Limits.Memory > 0 {
			a = append(a, "--size", strconv.FormatInt(s.Limits.Memory, 10))
		}
		a = append(a, "--tmpfs", dir)
	}
	tmpfs("/tmp")
	if s.Home == "" {
		tmpfs(home)
	} else {
		a = append(a, "--bind", s.Home, s.Home)
	}
	if s.ReadOnlyDir {
		a = append(a, "--ro-bind", s.Dir, s.Dir)
	} else {
		a = append(a, "--bind", s.Dir, s.Dir)
	}
	for _, m := range s.Mounts {
		t := m.Target
		if t == "" {
			t = m.Source
		}
		op := "--ro-bind"
		if m.Writable {
			op = "--bind"
		}
		a = append(a, op, m.Source, t)
	}
	// The root itself is a tmpfs that holds the mount points and the
	// copied files; nothing outside the writable mounts may be written.
	a = append(a, "--remount-ro", "/")
	return append(a, "--chdir", s.Dir, "--seccomp", fd(fdSeccomp), "--info-fd", fd(fdInfo))
}

// procReadOnly are the parts of /proc bound read-only over the sandbox's
// own, and procMasked those hidden, as Docker does for a container. The
// sandbox's uid is the server's outside, and when the server runs as root
// the kernel lets the sandbox write sysctls: it checks the uid there, not
// a capability. (bwrap covers /proc/sys itself only when it finds the
// directory writable, which it never is.)
var (
	procReadOnly = []string{"bus", "fs", "irq", "sys", "sysrq-trigger"}
	procMasked   = []string{"acpi", "asound", "kcore", "keys", "latency_stats", "sched_debug", "scsi", "timer_list", "timer_stats"}
)

// procCovers returns the bwrap arguments for procReadOnly and procMasked,
// for the entries this kernel has; they are used when the server runs as
// root (for another user the kernel already refuses what they cover). The sources are the host's /proc, whose
// files show the same kernel state (the per-namespace sysctls follow the
// namespaces of the process that opens them).
func procCovers() []string {
	var a []string
	for _, e := range procReadOnly {
		p := "/proc/" + e
		if _, err := os.Stat(p); err == nil {
			a = append(a, "--ro-bind", p, p)
		}
	}
	for _, e := range procMasked {
		p := "/proc/" + e
		fi, err := os.Stat(p)
		switch {
		case err != nil:
		case fi.IsDir():
			a = append(a, "--tmpfs", p, "--remount-ro", p)
		default:
			a = append(a, "--ro-bind", "/dev/null", p)
		}
	}
	return a
}

// etcEntries are the parts of /etc the sandbox sees, read-only: name
// resolution, certificates, the dynamic linker's cache, time zone, the
// alternatives links of Debian's commands, shell start-up files.
// Everything else of /etc stays out, because the sandbox's user is the
// server's user outside (as root, /etc/shadow or SSH host keys would be
// readable); tools that need more get it through Spec.Mounts. /etc/passwd
// and /etc/group are written for the sandbox.
var etcEntries = []string{
	"alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf",
	"crypto-policies", "debian_version", "gai.conf", "host.conf", "hosts",
	"inputrc", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",
	"mime.types", "nsswitch.conf", "os-release", "pki", "profile",
	"protocols", "resolv.conf", "services", "shells", "ssl", "timezone",
}

// systemBinds returns the bwrap arguments that show the system
// directories and the directories of etcEntries read-only, as they are on
// the host (a merged /usr's /bin → usr/bin symlinks stay symlinks), and
// the files of etcEntries to copy in at each start. Copying a small file
// is much cheaper for bwrap than binding it: every read-only bind costs it
// a remount and a pass over the mount table.
func systemBinds() (binds, copied []string) {
	for _, d := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if t, err := os.Readlink(d); err == nil {
				binds = append(binds, "--symlink", t, d)
			}
		case fi.IsDir():
			binds = append(binds, "--ro-bind", d, d)
		}
	}
	for _, e := range etcEntries {
		p := "/etc/" + e
		fi, err := os.Stat(p)
		switch {
		case err != nil:
		case fi.Mode().IsRegular() && fi.Size() <= maxCopied:
			copied = append(copied, p)
		default:
			binds = append(binds, "--ro-bind", p, p)
		}
	}
	// Private keys under /etc/ssl are hidden behind an empty tmpfs.
	if fi, err := os.Stat("/etc/ssl/private"); err == nil && fi.IsDir() {
		binds = append(binds, "--tmpfs", "/etc/ssl/private")
	}
	return binds, copied
}

// dataPipe returns the read end of a pipe that delivers data, then EOF.
// The write happens in a goroutine: data may exceed the pipe's buffer. If
// the reader goes away first, the write fails with EPIPE and the goroutine
// ends.
func dataPipe(data []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: pipe: %w", err)
	}
	go func() {
		w.Write(data)
		w.Close()
	}()
	return r, nil
}

// bwrapInit knows the sandbox's init, which bwrap reports on --info-fd.
// Killing the init makes the kernel kill every process of its pid
// namespace, and bwrap reaps it only after that, so waiting for bwrap is
// waiting for the whole tree. Killing bwrap instead would leave the
// namespace to die a moment later, after Wait returned.
type bwrapInit struct {
	ready   chan struct{} // closed when read has returned
	started bool          // read runs

	mu    sync.Mutex
	pidfd int
}

func (k *bwrapInit) read(r *os.File, bwrapPid int) {
	defer close(k.ready)
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(r).Decode(&info); err != nil || info.ChildPid <= 0 {
		return
	}
	fd, err := pidfdOpen(info.ChildPid)
	if err != nil {
		return
	}
	// The pidfd names bwrap's child only if bwrap is still its parent: a
	// pid reaped and reused before pidfd_open would have another.
	if pp, err := parentPid(info.ChildPid); err != nil || pp != bwrapPid {
		syscall.Close(fd)
		return
	}
	k.mu.Lock()
	k.pidfd = fd
	k.mu.Unlock()
}

func (k *bwrapInit) fd() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pidfd
}

func (k *bwrapInit) kill(p *Process) {
	// bwrap reports its child within a millisecond or so of starting.
	select {
	case <-k.ready:
	case <-p.exited:
	case <-time.After(2 * time.Second):
	}
	if fd := k.fd(); fd >= 0 && pidfdKill(fd) == nil {
		go func() {
			select {
			case <-p.exited:
			case <-time.After(5 * time.Second):
				syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}()
		return
	}
	// No init known: bwrap may not have made it yet. Killing bwrap kills
	// its child too (--die-with-parent); waitGone waits for the child if
	// it is known by then.
	syscall.Kill(p.pid, syscall.SIGKILL)
}

// waitGone waits, once bwrap has exited, until its init has too.
func (k *bwrapInit) waitGone(p *Process) {
	<-k.ready
	if fd := k.fd(); fd >= 0 {
		pidfdWait(fd, 10_000)
	}
}

func (k *bwrapInit) close() {
	if !k.started {
		return
	}
	<-k.ready
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pidfd >= 0 {
		syscall.Close(k.pidfd)
		k.pidfd = -1
	}
}
