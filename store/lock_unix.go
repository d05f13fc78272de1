//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockName is the lock file Open holds in the store directory. Badger
// keeps its own LOCK file beside it.
const lockName = "iterion.lock"

// lockDir takes an exclusive flock on dir's lock file and writes our pid
// into it. The kernel drops the lock when the process dies, so a file left
// behind by a crash does not block the next Open. Two opens in one process
// conflict too, because flock belongs to the open file.
func lockDir(dir string) (unlock func() error, err error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			owner := "another iterion process"
			if b, rerr := os.ReadFile(path); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
					owner += fmt.Sprintf(" (pid %d)", pid)
				}
			}
			return nil, fmt.Errorf("%s owns it; stop that process or go through its API: %w", owner, ErrLocked)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f.Close, nil
}
