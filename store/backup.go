package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// A backup is one line naming what it is and the layout version of the
// store it was taken from, then Badger's backup stream (DB.Backup: every
// key's versions, length-prefixed protobuf lists). The line lets Restore
// refuse a file that is not a backup, or one of a newer layout, before it
// writes anything; the stream alone loads with Badger's own tools once the
// line is cut (tail -n +2).
const backupMagic = "iterion-store-backup"

// backupFormat is the version of the file's framing (the line and the
// stream after it), not the store's layout.
const backupFormat = 1

// ErrNotBackup means a file given to Restore is not a store backup.
var ErrNotBackup = errors.New("not an iterion store backup")

// ErrNotEmpty means Restore was given a directory that holds something.
var ErrNotEmpty = errors.New("directory is not empty")

// BackupsDir is the directory, inside the store's, where Open writes the
// backup it takes before migrating the layout.
const BackupsDir = "backups"

// Backup writes a backup of the whole store to w: a consistent snapshot,
// taken while writers go on (what they commit after it began is not in
// it). It stops when ctx is done or w fails.
func (db *DB) Backup(ctx context.Context, w io.Writer) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	version, _, err := db.layoutLocked(ctx)
	if err != nil {
		return fmt.Errorf("backing up: reading the layout version: %w", err)
	}
	return db.backupLocked(ctx, w, version)
}

// backupLocked writes the backup, the layout line saying version; db.mu
// is held.
func (db *DB) backupLocked(ctx context.Context, w io.Writer, version int) error {
	bw := bufio.NewWriterSize(&ctxWriter{ctx: ctx, w: w}, 256<<10)
	if _, err := fmt.Fprintf(bw, "%s %d layout=%d\n", backupMagic, backupFormat, version); err != nil {
		return fmt.Errorf("backing up: %w", err)
	}
	if _, err := db.bdb.Backup(bw, 0); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("backing up: %w", ctx.Err())
		}
		return fmt.Errorf("backing up: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("backing up: %w", err)
	}
	return nil
}

// layoutLocked is layout for a caller holding db.mu.
func (db *DB) layoutLocked(ctx context.Context) (version int, empty bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	err = db.bdb.View(func(txn *badger.Txn) error {
		version, empty, err = readLayout(&tx{Txn: txn, maxValue: db.maxValue})
		return err
	})
	return version, empty, err
}

// ctxWriter fails its writes once ctx is done, which ends Badger's
// backup stream (its Backup takes no context).
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c *ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// BackupInfo is what the first line of a backup says.
type BackupInfo struct {
	// Layout is the layout version of the store it was taken from.
	Layout int
}

// readBackupHeader reads and checks the first line of a backup.
func readBackupHeader(br *bufio.Reader) (BackupInfo, error) {
	var info BackupInfo
	line, err := br.ReadSlice('\n')
	if err != nil || len(line) > 100 {
		return info, fmt.Errorf("%w: it does not start with the line %q", ErrNotBackup, backupMagic+" …")
	}
	fields := strings.Fields(string(line))
	if len(fields) != 3 || fields[0] != backupMagic {
		return info, fmt.Errorf("%w: it does not start with the line %q", ErrNotBackup, backupMagic+" …")
	}
	if f, err := strconv.Atoi(fields[1]); err != nil || f != backupFormat {
		return info, fmt.Errorf("its framing is version %s, which this iterion does not read (it reads version %d): restore it with the iterion that wrote it, or a newer one", fields[1], backupFormat)
	}
	v, ok := strings.CutPrefix(fields[2], "layout=")
	if info.Layout, err = strconv.Atoi(v); !ok || err != nil || info.Layout < 1 {
		return info, fmt.Errorf("%w: its first line names no layout version", ErrNotBackup)
	}
	if info.Layout > LayoutVersion() {
		return info, fmt.Errorf("it holds a store of layout version %d, written by a newer iterion; this one reads versions up to %d: restore it with a newer iterion: %w",
			info.Layout, LayoutVersion(), ErrNewerLayout)
	}
	return info, nil
}

// Restore loads the backup read from r into a new store in dir, which
// must be missing or empty (else ErrNotEmpty), and opens it once with
// opts, which migrates a backup of an older layout (taking a backup of
// it first, as every migration does). On failure what it wrote in dir is
// removed. Its errors do not repeat that they are a restore's.
func Restore(dir string, r io.Reader, opts Options) (BackupInfo, error) {
	var info BackupInfo
	if dir == "" {
		return info, errors.New("no directory given")
	}
	if err := checkEmpty(dir); err != nil {
		return info, err
	}
	br := bufio.NewReaderSize(r, 256<<10)
	info, err := readBackupHeader(br)
	if err != nil {
		return info, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return info, err
	}
	if err := load(dir, br, opts); err != nil {
		clearDir(dir)
		return info, err
	}
	db, err := Open(dir, opts)
	if err != nil {
		clearDir(dir)
		return info, err // names dir
	}
	if err := db.Close(); err != nil {
		return info, err
	}
	return info, nil
}

// load opens Badger alone in dir (no layout check: the backup's own
// layout key is loaded) and loads the stream of br into it.
func load(dir string, br *bufio.Reader, opts Options) error {
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	bdb, err := badger.Open(tune(badger.DefaultOptions(dir), opts))
	if err != nil {
		return err
	}
	if err := bdb.Load(br, 256); err != nil {
		_ = bdb.Close()
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("the backup is cut short (a copy that did not finish?): %w", err)
		}
		return fmt.Errorf("loading the backup: %w", err)
	}
	return bdb.Close()
}

// checkEmpty refuses a directory that exists and holds anything.
func checkEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) > 0:
		names := make([]string, 0, 3)
		for _, e := range entries[:min(3, len(entries))] {
			names = append(names, e.Name())
		}
		more := ""
		if len(entries) > 3 {
			more = fmt.Sprintf(" and %d more", len(entries)-3)
		}
		return fmt.Errorf("%s: the %w (it holds %s%s): restore into a new or empty directory, and point the server at it (--store-dir, $ITERION_STORE)",
			dir, ErrNotEmpty, strings.Join(names, ", "), more)
	}
	return nil
}

// clearDir removes what a failed restore wrote in dir, which was empty.
func clearDir(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// backupBeforeMigration writes a backup of the store, at layout version
// from, into BackupsDir of its directory before a migration changes it,
// and logs where. A store in memory has nothing to keep.
func (db *DB) backupBeforeMigration(ctx context.Context, from int) (string, error) {
	if db.dir == "" {
		return "", nil
	}
	dir := filepath.Join(db.dir, BackupsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	name := fmt.Sprintf("layout-%d-%s.backup", from, db.now().Format("20060102T150405Z"))
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path+".part", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return "", err
	}
	db.mu.RLock()
	err = db.backupLocked(ctx, f, from)
	db.mu.RUnlock()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(path+".part", path)
	}
	if err != nil {
		_ = os.Remove(path + ".part")
		return "", err
	}
	// A warning, not a notice: commands that log only warnings (iterion
	// run) must say it too, since the store changes under the operator.
	db.log.Warn("store: migrating the layout; backed up first: restore the backup with iterion store restore to go back to the previous iterion",
		"dir", db.dir, "layout", from, "backup", path)
	return path, nil
}
