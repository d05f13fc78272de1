//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// launch is what a driver prepares for one process; start runs it.
type launch struct {
	path string
	argv []string
	env  []string
	dir  string
	// files become the child's descriptors 4, 5, … (3 is the gate's); the
	// parent closes them after the start.
	files []*os.File
	// nproc, when set, returns the RLIMIT_NPROC that enforces
	// Limits.Processes where no pids cgroup does.
	nproc func() int
	// selfLimited says that the driver enforces Limits itself (docker): no
	// rlimits are set on the started process.
	selfLimited bool
	// filesInside says that the driver applies OpenFiles and FileSize to
	// the command itself (bwrap, whose own work they would break).
	filesInside bool
	// needs says which cgroups to make for the tree.
	needs cgroupNeeds
	// helpers is the number of the driver's own processes in the tree,
	// added to Limits.Processes.
	helpers int
	// treeDead says that once the started process has exited, so has every
	// process of the tree (a pid namespace's init, a container's CLI).
	treeDead bool
	// killGroup kills the process group when the tree is stopped or the
	// process exits (the host driver).
	killGroup bool
	// waitsTree says that the started process is the command, so that its
	// resource usage covers the command and the descendants it waited for.
	// (bwrap exits on its init's word without reaping it, and the docker
	// CLI runs nothing of the tree: their usage says nothing.)
	waitsTree bool
	// afterStart runs once the process runs, before the supervision.
	afterStart func(p *Process)
	// kill stops the whole tree now; nil kills the process group and the
	// cgroup.
	kill func(p *Process)
	// afterExit runs when the started process has exited, before it is
	// reaped and before the cgroup is emptied.
	afterExit func(p *Process)
	// breach reports a limit the driver saw breached ("" if none), after
	// the process is reaped.
	breach func(p *Process) string
	// cleanup releases what the driver made (temporary directories).
	cleanup func()
}

// Process is a started sandboxed process. Wait must be called to release
// its resources; the tree is killed and cleaned up even when nobody waits,
// as soon as the process exits, ctx is done or a limit is reached.
type Process struct {
	pid    int
	proc   *os.Process
	start  time.Time
	spec   *Spec
	l      *launch
	cg     *cgroup
	stdout *stream
	stderr *stream
	stdinW *os.File

	exited   chan struct{} // the started process has exited (not reaped)
	killCh   chan struct{} // Kill was called
	killOnce sync.Once
	done     chan struct{} // res and err are set
	res      *Result
	err      error
}

// Pid is the host pid of the process the driver started: the command
// itself under the host driver, bwrap or the docker CLI otherwise.
func (p *Process) Pid() int { return p.pid }

// Wait waits until the process and its whole tree have ended and returns
// what they left. The error is nil when the command ran to its own end,
// whatever its exit status; it is a *LimitError when a limit stopped it,
// the context's error when ctx was done, ErrKilled after Kill, or an error
// writing to Spec.Stdout or Spec.Stderr. The Result is never nil.
func (p *Process) Wait() (*Result, error) {
	<-p.done
	return p.res, p.err
}

// Kill kills the whole process tree. Wait then returns ErrKilled. Kill
// after the end does nothing.
func (p *Process) Kill() {
	p.killOnce.Do(func() { close(p.killCh) })
}

// The reasons the sandbox stopped a process, besides the Limit* constants.
const (
	reasonContext = "context"
	reasonKill    = "kill"
)

func start(ctx context.Context, s *Spec, l *launch, cgs *cgroups) (_ *Process, err error) {
	var parentClose []*os.File
	defer func() {
		for _, f := range parentClose {
			f.Close()
		}
		for _, f := range l.files {
			f.Close()
		}
	}()
	var cg *cgroup
	defer func() {
		if err != nil {
			if cg != nil {
				cg.remove()
			}
			if l.cleanup != nil {
				l.cleanup()
			}
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sandbox: starting %s: %w", s.Argv[0], err)
	}
	if cgs != nil && l.needs.any() {
		if cg, err = cgs.create(l.needs, s.Limits, l.helpers); err != nil {
			return nil, err
		}
	}

	nproc := 0
	if l.nproc != nil && (cg == nil || cg.pids == "") {
		nproc = l.nproc()
	}
	var rlimits []rlimit
	nofile := 0
	if !l.selfLimited {
		lim := s.Limits
		if l.filesInside {
			lim.OpenFiles, lim.FileSize = 0, 0
		}
		rlimits = rlimitsFor(lim, cg, nproc)
		nofile = lim.OpenFiles
	}

	files := make([]*os.File, 4, 4+len(l.files))
	var stdinW *os.File
	switch in := s.Stdin.(type) {
	case nil:
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, fmt.Errorf("sandbox: opening %s: %w", os.DevNull, err)
		}
		parentClose = append(parentClose, f)
		files[0] = f
	case *os.File:
		files[0] = in
	default:
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("sandbox: stdin pipe: %w", err)
		}
		parentClose = append(parentClose, r)
		files[0], stdinW = r, w
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: stdout pipe: %w", err)
	}
	parentClose = append(parentClose, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		return nil, fmt.Errorf("sandbox: stderr pipe: %w", err)
	}
	parentClose = append(parentClose, errW)
	files[1], files[2] = outW, errW
	files = append(files, l.files...)

	// A gated child waits, in a shell, until it has been put in its cgroups
	// and given its rlimits, so that nothing it forks escapes them; then the
	// shell execs the real program (same pid). Without a gate there would
	// be no way to do either before the first fork: Go runs no code between
	// fork and exec. The gate is descriptor 3 (dash takes only one digit in
	// a redirection); without a gate, 3 is closed. RLIMIT_NOFILE is set by
	// the gate itself once it has closed 3: dash copies descriptors above
	// 10 while it redirects, which a low limit would refuse.
	path, argv := l.path, l.argv
	var gateW *os.File
	if cg != nil || len(rlimits) > 0 || nofile > 0 {
		gateR, w, err := os.Pipe()
		if err != nil {
			outR.Close()
			errR.Close()
			return nil, fmt.Errorf("sandbox: gate pipe: %w", err)
		}
		parentClose = append(parentClose, gateR)
		gateW = w
		files[3] = gateR
		script := `read -r go <&3 && exec 3<&- && `
		if nofile > 0 {
			script += fmt.Sprintf("ulimit -n %d && ", nofile)
		}
		argv = append([]string{"/bin/sh", "-c", script + `exec "$@"`, "iterion-sandbox", path}, argv[1:]...)
		path = "/bin/sh"
	}

	markInheritedCloexec()
	proc, err := os.StartProcess(path, argv, &os.ProcAttr{
		Dir:   l.dir,
		Env:   l.env,
		Files: files,
		Sys: &syscall.SysProcAttr{
			// A session (and so a process group) of its own: no controlling
			// terminal to read or inject keystrokes into under `iterion
			// run`, no terminal signals (Ctrl-C) reaching the tree, and a
			// group the host driver can kill.
			Setsid: true,
			// Pdeathsig fires when the thread that forked the child dies. Go
			// never ends its threads except those of a goroutine that exits
			// locked to one, which this package does not do.
			Pdeathsig: syscall.SIGKILL,
		},
	})
	if err != nil {
		outR.Close()
		errR.Close()
		if gateW != nil {
			gateW.Close()
		}
		if stdinW != nil {
			stdinW.Close()
		}
		return nil, fmt.Errorf("sandbox: starting %s: %w", s.Argv[0], err)
	}
	begin := time.Now()
	if gateW != nil {
		err := openGate(proc.Pid, cg, rlimits, gateW)
		if err != nil {
			proc.Kill()
			proc.Wait()
			outR.Close()
			errR.Close()
			if stdinW != nil {
				stdinW.Close()
			}
			return nil, err
		}
	}

	limit := s.Limits.Output
	if limit == 0 {
		limit = DefaultOutput
	}
	p := &Process{
		pid:    proc.Pid,
		proc:   proc,
		start:  begin,
		spec:   s,
		l:      l,
		cg:     cg,
		stdout: newStream(outR, s.Stdout, limit),
		stderr: newStream(errR, s.Stderr, limit),
		stdinW: stdinW,
		exited: make(chan struct{}),
		killCh: make(chan struct{}),
		done:   make(chan struct{}),
	}
	if stdinW != nil {
		go func() {
			io.Copy(stdinW, s.Stdin)
			stdinW.Close()
		}()
	}
	if l.afterStart != nil {
		l.afterStart(p)
	}
	go func() {
		waitExited(p.pid)
		close(p.exited)
	}()
	go p.supervise(ctx)
	return p, nil
}

// markInheritedCloexec sets close-on-exec on every descriptor of this
// process from 3 up. Go opens its own descriptors close-on-exec, and
// StartProcess passes only the files it is given, but a descriptor that the
// server inherited open from its parent (a supervisor, a shell) would pass
// into every child, and so into the sandbox.
func markInheritedCloexec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= 3 {
			syscall.CloseOnExec(fd)
		}
	}
}

// openGate puts the gated child in its cgroups, sets its rlimits and lets
// it go.
func openGate(pid int, cg *cgroup, rl []rlimit, gate *os.File) error {
	defer gate.Close()
	if cg != nil {
		if err := cg.join(pid); err != nil {
			return err
		}
	}
	if err := setRlimits(pid, rl); err != nil {
		return err
	}
	if _, err := gate.Write([]byte("\n")); err != nil {
		return fmt.Errorf("sandbox: releasing the started process: %w", err)
	}
	return nil
}

// supervise stops the tree when it must and collects the result.
func (p *Process) supervise(ctx context.Context) {
	lim := p.spec.Limits
	// Wall time is real time on purpose: it bounds a real process, which no
	// injected clock slows down.
	var wall <-chan time.Time
	if lim.WallTime > 0 {
		t := time.NewTimer(lim.WallTime)
		defer t.Stop()
		wall = t.C
	}
	var cpu <-chan time.Time
	var cpuTimer *time.Timer
	if lim.CPUTime > 0 && p.cg.hasCPU() {
		cpuTimer = time.NewTimer(cpuCheckDelay(lim.CPUTime, 0))
		defer cpuTimer.Stop()
		cpu = cpuTimer.C
	}
	ctxDone, killCh := ctx.Done(), p.killCh
	reason := ""
	stop := func(why string) {
		if reason == "" {
			reason = why
			p.killTree()
		}
		ctxDone, killCh, wall, cpu = nil, nil, nil, nil
	}
wait:
	for {
		select {
		case <-p.exited:
			break wait
		case <-ctxDone:
			stop(reasonContext)
		case <-killCh:
			stop(reasonKill)
		case <-wall:
			stop(LimitWallTime)
		case <-cpu:
			used := p.cg.cpuUsage()
			if used >= lim.CPUTime {
				stop(LimitCPUTime)
				continue
			}
			cpuTimer.Reset(cpuCheckDelay(lim.CPUTime, used))
		}
	}
	end := time.Now()

	// The started process has exited but is not reaped, so its pid (and
	// process group id) cannot be reused while the rest of the tree is
	// finished off.
	if p.l.afterExit != nil {
		p.l.afterExit(p)
	}
	treeDead := p.l.treeDead
	if p.l.killGroup {
		syscall.Kill(-p.pid, syscall.SIGKILL)
	}
	if p.cg != nil {
		treeDead = p.cg.killAll() == nil || treeDead
	}
	state, werr := p.proc.Wait()
	if p.stdinW != nil {
		p.stdinW.Close()
	}
	// Once every process of the tree is gone the pipes reach EOF; a process
	// that escaped the host driver's group may hold them open, so then the
	// wait is bounded.
	if !treeDead {
		timer := time.AfterFunc(2*time.Second, func() {
			p.stdout.r.Close()
			p.stderr.r.Close()
		})
		defer timer.Stop()
	}
	<-p.stdout.done
	<-p.stderr.done
	p.stdout.r.Close()
	p.stderr.r.Close()

	res := &Result{Duration: end.Sub(p.start)}
	if werr == nil {
		ws := state.Sys().(syscall.WaitStatus)
		switch {
		case ws.Signaled():
			res.Signal = ws.Signal()
			res.ExitCode = 128 + int(res.Signal)
		default:
			res.ExitCode = ws.ExitStatus()
		}
		if p.l.waitsTree {
			res.CPUTime = state.UserTime() + state.SystemTime()
		}
	} else {
		res.ExitCode = -1
	}
	if reason != "" && res.Signal == 0 {
		res.Signal = syscall.SIGKILL
	}
	if p.cg.hasCPU() {
		res.CPUTime = p.cg.cpuUsage()
	}
	res.Stdout, res.StdoutTruncated = p.stdout.result()
	res.Stderr, res.StderrTruncated = p.stderr.result()

	breach := ""
	if p.cg != nil {
		breach = p.cg.breach(lim)
	}
	if breach == "" && p.l.breach != nil {
		breach = p.l.breach(p)
	}
	failed := res.ExitCode != 0 || res.Signal != 0
	var err error
	switch reason {
	case reasonContext:
		err = fmt.Errorf("sandbox: %s stopped: %w", p.spec.Argv[0], ctx.Err())
	case reasonKill:
		err = ErrKilled
	case LimitWallTime, LimitCPUTime:
		res.Limit = reason
		if breach != "" {
			res.Limit = breach
		}
	default:
		if failed {
			res.Limit = breach
			if res.Limit == "" {
				res.Limit = signalLimit(res, lim)
			}
		}
	}
	if res.Limit != "" {
		err = &LimitError{Limit: res.Limit, Value: limitValue(res.Limit, lim)}
	}
	if err == nil && werr != nil {
		err = fmt.Errorf("sandbox: waiting for %s: %w", p.spec.Argv[0], werr)
	}
	if err == nil && p.stdout.werr != nil {
		err = fmt.Errorf("sandbox: writing stdout: %w", p.stdout.werr)
	}
	if err == nil && p.stderr.werr != nil {
		err = fmt.Errorf("sandbox: writing stderr: %w", p.stderr.werr)
	}

	if p.cg != nil {
		p.cg.remove()
	}
	if p.l.cleanup != nil {
		p.l.cleanup()
	}
	p.res, p.err = res, err
	close(p.done)
}

// killTree stops the whole tree now.
func (p *Process) killTree() {
	if p.l.kill != nil {
		p.l.kill(p)
		return
	}
	syscall.Kill(-p.pid, syscall.SIGKILL)
	p.proc.Kill()
	if p.cg != nil {
		p.cg.killAll()
	}
}

// signalLimit recognises the rlimit breaches that show only as the signal
// the kernel sends: SIGXCPU for RLIMIT_CPU (then SIGKILL at the hard
// limit, which cannot be told from any other kill) and SIGXFSZ for
// RLIMIT_FSIZE. Under bwrap the command's signal arrives as exit status
// 128+n. This is a heuristic: a command that dies of another process's
// SIGXFSZ, or exits 153 on its own, is reported the same.
func signalLimit(res *Result, lim Limits) string {
	is := func(sig syscall.Signal) bool { return res.Signal == sig || res.ExitCode == 128+int(sig) }
	switch {
	case lim.CPUTime > 0 && is(syscall.SIGXCPU):
		return LimitCPUTime
	case lim.FileSize > 0 && is(syscall.SIGXFSZ):
		return LimitFileSize
	}
	return ""
}

func limitValue(limit string, l Limits) string {
	switch limit {
	case LimitWallTime:
		return l.WallTime.String()
	case LimitCPUTime:
		return l.CPUTime.String()
	case LimitMemory:
		return fmt.Sprintf("%d bytes", l.Memory)
	case LimitProcesses:
		return fmt.Sprintf("%d tasks", l.Processes)
	case LimitFileSize:
		return fmt.Sprintf("%d bytes", l.FileSize)
	}
	return "?"
}

// cpuCheckDelay is how long the CPU watchdog can sleep: the tree cannot
// use more than one second of CPU per second per processor, so the budget
// cannot run out sooner. It is clamped so that the watchdog neither spins
// near the end nor overshoots by much if the tree spreads to more
// processors than runtime.NumCPU counts.
func cpuCheckDelay(budget, used time.Duration) time.Duration {
	d := (budget - used) / time.Duration(runtime.NumCPU())
	return min(max(d, 2*time.Millisecond), time.Second)
}

// waitExited blocks until the process pid (a child of ours) has exited,
// without reaping it.
func waitExited(pid int) error {
	const (
		pPID    = 1
		wExited = 0x4
		wNoWait = 0x1000000
	)
	var info [128]byte // siginfo_t, unread
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		switch e {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		}
		return e
	}
}

// stream reads one of the process's output pipes.
type stream struct {
	r         *os.File
	w         io.Writer // nil: capture
	limit     int
	buf       []byte
	truncated bool
	werr      error
	done      chan struct{}
}

func newStream(r *os.File, w io.Writer, limit int) *stream {
	s := &stream{r: r, w: w, limit: limit, done: make(chan struct{})}
	go s.run()
	return s
}

func (s *stream) run() {
	defer close(s.done)
	chunk := make([]byte, 32<<10)
	for {
		n, err := s.r.Read(chunk)
		if n > 0 {
			s.take(chunk[:n])
		}
		if err != nil {
			return
		}
	}
}

func (s *stream) take(b []byte) {
	if s.w != nil {
		if s.werr == nil {
			if _, err := s.w.Write(b); err != nil {
				s.werr = err
			}
		}
		return
	}
	if room := s.limit - len(s.buf); len(b) > room {
		b = b[:max(room, 0)]
		s.truncated = true
	}
	s.buf = append(s.buf, b...)
}

// result is valid once done is closed.
func (s *stream) result() ([]byte, bool) {
	if s.w != nil {
		return nil, false
	}
	if s.buf == nil {
		return []byte{}, s.truncated
	}
	return s.buf, s.truncated
}
