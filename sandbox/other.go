//go:build !linux

package sandbox

import (
	"context"
	"errors"
)

// errNotLinux is what every driver answers off Linux.
var errNotLinux = errors.New("sandbox: the sandbox drivers need Linux")

// Bwrap would run processes under bubblewrap; it needs Linux.
type Bwrap struct{}

// Host would run processes on the host; it needs Linux.
type Host struct{}

// Docker would run processes in containers; it needs Linux.
type Docker struct{}

// NewBwrap returns a driver that is not available off Linux.
func NewBwrap(Options) *Bwrap { return &Bwrap{} }

// NewHost returns a driver that is not available off Linux.
func NewHost(Options) *Host { return &Host{} }

// NewDocker returns a driver that is not available off Linux.
func NewDocker(Options) *Docker { return &Docker{} }

// Name returns "bwrap".
func (*Bwrap) Name() string { return "bwrap" }

// Name returns "host".
func (*Host) Name() string { return "host" }

// Name returns "docker".
func (*Docker) Name() string { return "docker" }

// Available returns an error: the driver needs Linux.
func (*Bwrap) Available() error { return errNotLinux }

// Available returns an error: the driver needs Linux.
func (*Host) Available() error { return errNotLinux }

// Available returns an error: the driver needs Linux.
func (*Docker) Available() error { return errNotLinux }

// Isolated returns true.
func (*Bwrap) Isolated() bool { return true }

// Isolated returns false.
func (*Host) Isolated() bool { return false }

// Isolated returns true.
func (*Docker) Isolated() bool { return true }

// Mechanism returns "none".
func (*Bwrap) Mechanism() string { return "none" }

// Mechanism returns "none".
func (*Host) Mechanism() string { return "none" }

// Mechanism returns "none".
func (*Docker) Mechanism() string { return "none" }

// Start returns an error: the driver needs Linux.
func (*Bwrap) Start(context.Context, Spec) (*Process, error) { return nil, errNotLinux }

// Start returns an error: the driver needs Linux.
func (*Host) Start(context.Context, Spec) (*Process, error) { return nil, errNotLinux }

// Start returns an error: the driver needs Linux.
func (*Docker) Start(context.Context, Spec) (*Process, error) { return nil, errNotLinux }

// Process is a started process; off Linux none is ever started.
type Process struct{}

// Pid returns 0.
func (*Process) Pid() int { return 0 }

// Wait returns an error: no process runs off Linux.
func (*Process) Wait() (*Result, error) { return &Result{}, errNotLinux }

// Kill does nothing.
func (*Process) Kill() {}
