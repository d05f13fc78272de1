package runchannel

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
)

// ExecArgs is a parsed command line of `iterion sandbox-exec`.
type ExecArgs struct {
	// Forwards are the loopback listeners and the sockets they forward to.
	Forwards []Forward
	// Argv is the command to run under them.
	Argv []string
}

// Forward is one listener of sandbox-exec: every connection to Listen (a
// loopback address) is forwarded to the unix socket Socket.
type Forward struct {
	Listen string
	Socket string
}

// maxForwards bounds the --forward options of one command line.
const maxForwards = 16

// execUsage is the shape of the command line, for its errors.
const execUsage = "usage: iterion sandbox-exec [--forward 127.0.0.1:PORT=SOCKET]... -- COMMAND [ARG]..."

// ParseExecArgs reads the arguments of sandbox-exec (after its name):
//
//	args    = { "--forward" forward | "--forward=" forward } "--" command { arg } .
//	forward = loopback-ip ":" port "=" absolute-socket-path .
//
// The listener must be a loopback address with a port of 1 to 65535 (the
// CLI's base URL names it), and the socket an absolute path.
func ParseExecArgs(args []string) (ExecArgs, error) {
	var a ExecArgs
	for i := 0; i < len(args); i++ {
		arg := args[i]
		var spec string
		switch {
		case arg == "--":
			a.Argv = args[i+1:]
			if len(a.Argv) == 0 || a.Argv[0] == "" {
				return ExecArgs{}, errors.New("no command after --: " + execUsage)
			}
			for _, s := range a.Argv {
				if strings.ContainsRune(s, 0) {
					return ExecArgs{}, errors.New("an argument of the command holds a NUL byte, which no command line can carry")
				}
			}
			return a, nil
		case arg == "--forward":
			if i+1 == len(args) {
				return ExecArgs{}, errors.New("--forward needs LISTEN=SOCKET: " + execUsage)
			}
			i++
			spec = args[i]
		case strings.HasPrefix(arg, "--forward="):
			spec = strings.TrimPrefix(arg, "--forward=")
		default:
			return ExecArgs{}, fmt.Errorf("unexpected argument %q (the command comes after --): %s", clip(arg, 80), execUsage)
		}
		f, err := parseForward(spec)
		if err != nil {
			return ExecArgs{}, err
		}
		if len(a.Forwards) == maxForwards {
			return ExecArgs{}, fmt.Errorf("more than %d --forward options", maxForwards)
		}
		a.Forwards = append(a.Forwards, f)
	}
	return ExecArgs{}, errors.New("no -- before the command: " + execUsage)
}

func parseForward(spec string) (Forward, error) {
	listen, sock, ok := strings.Cut(spec, "=")
	if !ok {
		return Forward{}, fmt.Errorf("--forward %q: write LISTEN=SOCKET, such as 127.0.0.1:4180=/run/iterion/s", clip(spec, 120))
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return Forward{}, fmt.Errorf("--forward %q: the listener %q is not HOST:PORT", clip(spec, 120), clip(listen, 80))
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return Forward{}, fmt.Errorf("--forward %q: the listener must be a loopback address (127.0.0.1 or ::1), not %q: the forwarder never listens beyond the sandbox", clip(spec, 120), clip(host, 80))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return Forward{}, fmt.Errorf("--forward %q: the port %q is not a number from 1 to 65535", clip(spec, 120), clip(port, 20))
	}
	switch {
	case !filepath.IsAbs(sock):
		return Forward{}, fmt.Errorf("--forward %q: the socket %q is not an absolute path", clip(spec, 120), clip(sock, 120))
	case len(sock) > maxSocketPath:
		return Forward{}, fmt.Errorf("--forward: the socket path is over %d bytes, longer than a unix socket's may be", maxSocketPath)
	case strings.ContainsRune(sock, 0):
		return Forward{}, errors.New("--forward: the socket path holds a NUL byte")
	}
	return Forward{Listen: listen, Socket: sock}, nil
}

// Exit statuses of sandbox-exec's own failures, as env(1) and docker run
// use them.
const (
	// ExitFailed: sandbox-exec itself failed (its command line, a
	// listener).
	ExitFailed = 125
	// ExitCannotRun: the command was found but could not be started.
	ExitCannotRun = 126
	// ExitNotFound: the command was not found.
	ExitNotFound = 127
)
