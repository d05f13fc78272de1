//go:build !linux

package api

import (
	"errors"
	"net"
)

// errNoPeerCred means the system cannot tell a socket's peer.
var errNoPeerCred = errors.New("peer credentials are not available on this system")

// peerUID is not implemented off Linux: there the private directory and
// the token alone keep other users out, and the caller is named as the
// owner's user.
func peerUID(net.Conn) (int, error) { return -1, errNoPeerCred }
