package api

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// errNoPeerCred means the system cannot tell a socket's peer.
var errNoPeerCred = errors.New("peer credentials are not available on this system")

// peerUID returns the uid of the process at the other end of c, as the
// kernel recorded it when that process connected (SO_PEERCRED).
func peerUID(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, fmt.Errorf("not a unix socket connection (%T)", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("reading the peer's credentials: %w", err)
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return -1, fmt.Errorf("reading the peer's credentials: %w", err)
	}
	if credErr != nil {
		return -1, fmt.Errorf("reading the peer's credentials: %w", credErr)
	}
	return int(cred.Uid), nil
}
