package main

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"unsafe"
)

// newPTY opens a pseudo-terminal: the command under test reads tty, a
// terminal like a person's; the test types into ptmx. What the terminal
// echoes back is discarded.
func newPTY(t testing.TB) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("the terminal tests need a pseudo-terminal (/dev/ptmx, devpts mounted): %v", err)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		ptmx.Close()
		t.Fatalf("the terminal tests need a pseudo-terminal: TIOCGPTN: %v", e)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		ptmx.Close()
		t.Fatalf("the terminal tests need a pseudo-terminal: TIOCSPTLCK: %v", e)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		ptmx.Close()
		t.Fatalf("the terminal tests need a pseudo-terminal: opening its terminal end: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, ptmx) }()
	t.Cleanup(func() {
		tty.Close()
		ptmx.Close()
	})
	return ptmx, tty
}
