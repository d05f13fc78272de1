//go:build linux

package runchannel

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// forwardedSignals are passed on to the command.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT}

// Exec runs `iterion sandbox-exec` with args (after its name): it listens
// on each --forward address, forwarding every connection to its socket,
// then runs the command with this process's environment and streams, and
// returns the command's exit status when it ends: its own, or 128+n when
// signal n killed it, as a shell reports it. The signals this process
// receives (INT, TERM, HUP, QUIT, USR1, USR2, WINCH, CONT) are passed on to
// the command; the command dies with this process (SIGKILL), and when it
// ends, the rest of its process group is killed, so no process of its tree
// stays behind unless it left the group (the sandbox's own tree kill takes
// those). Exec's own failures exit 125, a command that cannot run 126, a
// command not found 127, with the reason on stderr.
func Exec(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	say := sayer(stderr)
	a, err := ParseExecArgs(args)
	if err != nil {
		say("%v", err)
		return ExitFailed
	}
	for _, f := range a.Forwards {
		ln, err := net.Listen("tcp", f.Listen)
		if err != nil {
			say("listening on %s for the run channel: %v", f.Listen, err)
			return ExitFailed
		}
		defer ln.Close()
		go forward(ln, f.Socket, say)
	}
	path, err := exec.LookPath(a.Argv[0])
	if err != nil {
		say("%s: %v", a.Argv[0], err)
		if errors.Is(err, fs.ErrPermission) {
			return ExitCannotRun
		}
		return ExitNotFound
	}
	cmd := &exec.Cmd{Path: path, Args: a.Argv, Stdin: stdin, Stdout: stdout, Stderr: stderr,
		// Its own process group, so that what it leaves running can be
		// ended with it; SIGKILL when this process dies.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
		// Streams that are not files are copied by goroutines: do not let
		// a stdin that never closes hold the exit.
		WaitDelay: time.Second,
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		// The kernel sends Pdeathsig when the thread that started the
		// child ends: this goroutine keeps its thread until the child is
		// reaped.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		pid := cmd.Process.Pid
		// Wait for the exit without reaping: while the child is a zombie
		// its pid, the group's id, cannot be reused, so the kill below
		// reaches its group and nothing else.
		var info unix.Siginfo
		for {
			if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
				break
			}
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		say("starting %s: %v", a.Argv[0], err)
		return ExitCannotRun
	}
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case err := <-done:
			return exitStatus(cmd, err, say)
		}
	}
}

// exitStatus is the status sandbox-exec exits with for the command.
func exitStatus(cmd *exec.Cmd, err error, say func(string, ...any)) int {
	ps := cmd.ProcessState
	if ps == nil {
		say("waiting for %s: %v", cmd.Args[0], err)
		return ExitFailed
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// forward serves the listener ln: each connection is joined to a new
// connection to the unix socket sock, until ln is closed.
func forward(ln net.Listener, sock string, say func(string, ...any)) {
	var warned sync.Once
	backoff := 5 * time.Millisecond
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors, say: wait, rather than spin or stop
			// serving the command.
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		go func() {
			defer c.Close()
			u, err := net.Dial("unix", sock)
			if err != nil {
				warned.Do(func() { say("the run channel %s cannot be reached: %v", sock, err) })
				return
			}
			defer u.Close()
			join(c, u)
		}()
	}
}

// join copies a to b and b to a until both directions end, passing on
// each half-close.
func join(a, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Add(2)
	go half(a, b)
	go half(b, a)
	wg.Wait()
}

// sayer writes sandbox-exec's messages to w, one at a time.
func sayer(w io.Writer) func(string, ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "iterion sandbox-exec: "+format+"\n", args...)
	}
}
