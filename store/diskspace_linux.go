package store

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// freeSpace returns the bytes of dir's filesystem that this process may
// still write to (those reserved for root not included).
func freeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// lseek's whence values that find holes (linux/fs.h).
const (
	seekData = 3
	seekHole = 4
)

// trimTrailingHoles shortens Badger's memtable logs (*.mem) to their last
// allocated block, before a read-only open on a nearly full filesystem.
//
// Badger creates each log at twice the memtable's size without allocating
// it, and a log left by a process that did not close the store keeps that
// size. Opening the store replays the log and reads past its end, into
// the unallocated part. On tmpfs even reading a page allocates it, so on
// a full tmpfs that read is a SIGBUS: iterion runs list would crash. The
// unallocated end reads as zeros, and Badger's replay stops at zeros as it
// stops at the end of the file, so cutting it off changes nothing Badger
// reads; shortening a file needs no free space.
func trimTrailingHoles(dir string) error {
	logs, err := filepath.Glob(filepath.Join(dir, "*.mem"))
	if err != nil {
		return err
	}
	var errs []error
	for _, path := range logs {
		errs = append(errs, trimTrailingHole(path))
	}
	return errors.Join(errs...)
}

// trimTrailingHole truncates the file at path where its trailing hole
// starts, if it ends in one and holds data before it.
func trimTrailingHole(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	fd := int(f.Fd())
	hole, err := syscall.Seek(fd, 0, seekHole)
	if err != nil || hole == 0 || hole >= fi.Size() {
		return nil // no hole before the end (or no way to tell), or no data at all
	}
	if _, err := syscall.Seek(fd, hole, seekData); !errors.Is(err, syscall.ENXIO) {
		return nil // data after the hole: not a trailing hole
	}
	return f.Truncate(hole)
}
