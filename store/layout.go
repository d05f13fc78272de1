package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/iterion-bot/iterion/engine"
)

// The store's layout (which keys exist and what they hold) has a version,
// kept at layoutKey. Open reads it: a store of a newer layout is refused,
// one of an older layout is migrated in place, step by step, before
// anything else reads it. See "Layout versions" in the package comment.

// ErrNewerLayout means the store was written by a newer iterion, whose
// layout this build does not know.
var ErrNewerLayout = errors.New("store written by a newer iterion")

// layoutKey holds the layout version (a layoutRecord).
var layoutKey = []byte("meta/layout")

// layoutRecord is the value of layoutKey.
type layoutRecord struct {
	Layout int `json:"layout"`
}

// A migration moves a store from one layout version to the next. It runs
// in transactions of its own, as many as it needs (each bounded: a store
// may hold more than one transaction can), and must be idempotent: the
// version is written only after it returned, so a migration interrupted
// by a crash runs again, whole, at the next Open, over what it already
// did.
type migration struct {
	// name says what it does, for the log and errors.
	name string
	run  func(ctx context.Context, db *DB) error
}

// migrations[i] moves a store from layout version i+1 to i+2. Append a
// step to change the layout; never edit or remove one, since a store may
// be at any version.
var migrations = []migration{
	{"index the runs of pull requests (runpr/)", migrateIndexPRRuns},
	{"move GitHub's trigger details into the channel's ref and details (runref/)", migrateChannelRefs},
	{"index the pending deliveries (dlvpend/) and drop the payloads of handled ones", migrateDeliveryIndex},
	{"index the open questions across runs (openq/)", migrateOpenQuestions},
}

// layoutOf is the layout version of a store after steps.
func layoutOf(steps []migration) int { return len(steps) + 1 }

// LayoutVersion is the layout version this build writes.
func LayoutVersion() int { return layoutOf(migrations) }

// upgradeLayout checks the store's layout version and migrates it to the
// current one (that of steps, nil meaning migrations). A store without a
// version is at version 1 if it holds anything, and a new one otherwise,
// which is marked current at once.
func (db *DB) upgradeLayout(ctx context.Context, steps []migration) error {
	if steps == nil {
		steps = migrations
	}
	current := layoutOf(steps)
	version, empty, err := db.layout(ctx)
	if err != nil {
		return fmt.Errorf("reading the layout version: %w", err)
	}
	switch {
	case version > current:
		return fmt.Errorf("its layout is version %d, written by a newer iterion; this one reads versions up to %d: upgrade iterion, or give this one another store directory (--store-dir, $ITERION_STORE): %w",
			version, current, ErrNewerLayout)
	case version == current:
		return nil
	case empty:
		if db.readOnly != nil {
			return nil // nothing to read, and nothing written until reopened
		}
		return db.setLayout(ctx, current)
	case db.readOnly != nil:
		return fmt.Errorf("its layout (version %d) must be migrated to version %d before this iterion can read it, which writes, but %w", version, current, &diskFullError{dir: db.readOnly.dir, free: db.readOnly.free, need: db.readOnly.need})
	}
	// The migration rewrites the store in place: what it was stays in a
	// backup, for a rollback to the previous iterion.
	if _, err := db.backupBeforeMigration(ctx, version); err != nil {
		return fmt.Errorf("its layout (version %d) must be migrated to version %d, and backing it up first failed, so nothing was changed: %w (free space in %s, or run the previous iterion)",
			version, current, err, db.dir)
	}
	for ; version < current; version++ {
		step := steps[version-1]
		db.log.Info("store: migrating the layout", "dir", db.dir, "from", version, "to", version+1, "step", step.name)
		if err := step.run(ctx, db); err != nil {
			return fmt.Errorf("migrating the layout from version %d to %d (%s): %w", version, version+1, step.name, err)
		}
		if err := db.setLayout(ctx, version+1); err != nil {
			return fmt.Errorf("migrating the layout from version %d to %d: recording the version: %w", version, version+1, err)
		}
	}
	return nil
}

// layout returns the stored layout version, 0 when none is stored, and
// whether the store holds nothing at all.
func (db *DB) layout(ctx context.Context) (version int, empty bool, err error) {
	err = db.view(ctx, func(txn *tx) error {
		version, empty, err = readLayout(txn)
		return err
	})
	return version, empty, err
}

// readLayout is layout in a transaction.
func readLayout(txn *tx) (version int, empty bool, err error) {
	var rec layoutRecord
	switch err := get(txn, layoutKey, &rec); {
	case err == nil:
		if rec.Layout < 1 {
			return 0, false, fmt.Errorf("%s holds version %d", layoutKey, rec.Layout)
		}
		return rec.Layout, false, nil
	case !errors.Is(err, engine.ErrNotFound):
		return 0, false, err
	}
	it := txn.NewIterator(badger.IteratorOptions{})
	defer it.Close()
	it.Rewind()
	if !it.Valid() {
		return 0, true, nil
	}
	return 1, false, nil
}

// setLayout records the layout version, synced.
func (db *DB) setLayout(ctx context.Context, version int) error {
	return db.update(ctx, true, func(txn *tx) error { return put(txn, layoutKey, layoutRecord{Layout: version}) })
}

// legacyRun is what layouts 1 and 2 stored of a run's trigger beyond its
// source and actor: GitHub's details, in the trigger itself.
type legacyRun struct {
	ID      string `json:"id"`
	Trigger struct {
		legacyGitHub
	} `json:"trigger"`
}

// legacyGitHub are the GitHub fields of a layout 1 or 2 trigger. Layout 3
// keeps them, under the same names, as the trigger's Details, which is
// the shape bot/github reads (its Origin).
type legacyGitHub struct {
	Repo         string `json:"repo,omitempty"`
	PR           int    `json:"pr,omitempty"`
	CommentID    int64  `json:"comment_id,omitempty"`
	Installation int64  `json:"installation,omitempty"`
	HeadSHA      string `json:"head_sha,omitempty"`
}

// migrationTxnBytes bounds what one migration transaction writes, well
// inside Badger's limit for a transaction (about 2.4 MiB with the
// production memtables).
const migrationTxnBytes = 1 << 20

// eachRunBatch calls fn for every run record, as stored, at most
// batchSize records and about migrationTxnBytes written per transaction.
func eachRunBatch(ctx context.Context, db *DB, fn func(txn *tx, key []byte, rec *json.RawMessage) error) error {
	var from []byte
	for {
		var next []byte
		err := db.update(ctx, false, func(txn *tx) error {
			next = nil
			n := 0
			return scan(txn, runPrefix, from, func(key []byte, rec *json.RawMessage) (bool, error) {
				if n == batchSize || txn.written >= migrationTxnBytes {
					next = key
					return false, nil
				}
				n++
				return true, fn(txn, key, rec)
			})
		})
		if err != nil || next == nil {
			return err
		}
		from = next
	}
}

// Version 1 to 2: index the runs of pull requests.

// prIndexedKey marked, in layout 1, a store whose runs from before the
// pull-request index had been indexed; layout 2 says as much.
var prIndexedKey = []byte("meta/index/runpr")

// migrateIndexPRRuns indexes the runs created before the pull-request
// index existed, in batches; indexing a run twice writes the same entry.
// Layout 3 replaces the index (migrateChannelRefs).
func migrateIndexPRRuns(ctx context.Context, db *DB) error {
	err := eachRunBatch(ctx, db, func(txn *tx, key []byte, rec *json.RawMessage) error {
		var run legacyRun
		if err := json.Unmarshal(*rec, &run); err != nil {
			return fmt.Errorf("decoding %s: %w", key, err)
		}
		t := run.Trigger
		if t.Repo == "" || t.PR == 0 {
			return nil
		}
		return put(txn, []byte("runpr/"+strings.ToLower(t.Repo)+"#"+strconv.Itoa(t.PR)+"/"+run.ID), ixRef{RunID: run.ID})
	})
	if err != nil {
		return err
	}
	return db.update(ctx, true, func(txn *tx) error { return txn.Delete(prIndexedKey) })
}

// Version 2 to 3: channel references.

// migrateChannelRefs moves the GitHub fields of each run's trigger into
// its Details, sets the Ref that bot/github gives a pull request's runs
// (PRScope: "github/<owner/name, lower case>#<pr>"), indexes the run by it
// (runref/), and removes the pull-request index (runpr/). A record
// already moved has no GitHub fields left, so a second pass skips it.
func migrateChannelRefs(ctx context.Context, db *DB) error {
	err := eachRunBatch(ctx, db, func(txn *tx, key []byte, rec *json.RawMessage) error {
		var old legacyRun
		if err := json.Unmarshal(*rec, &old); err != nil {
			return fmt.Errorf("decoding %s: %w", key, err)
		}
		gh := old.Trigger.legacyGitHub
		if gh == (legacyGitHub{}) {
			return nil
		}
		run := new(engine.Run)
		if err := decode(key, *rec, run); err != nil {
			return err
		}
		details, err := json.Marshal(gh)
		if err != nil {
			return err
		}
		run.Trigger.Details = details
		if gh.Repo != "" && gh.PR != 0 {
			run.Trigger.Ref = "github/" + strings.ToLower(gh.Repo) + "#" + strconv.Itoa(gh.PR)
		}
		if err := put(txn, key, run); err != nil {
			return err
		}
		return putRefIndex(txn, run)
	})
	if err != nil {
		return err
	}
	return db.deletePrefix(ctx, []byte("runpr/"))
}

// Version 3 to 4: the pending deliveries indexed.

// migrateDeliveryIndex indexes every delivery still received, and drops
// the payload of those handled, keeping their expiry. Both are idempotent.
func migrateDeliveryIndex(ctx context.Context, db *DB) error {
	prefix := []byte("dlv/")
	var from []byte
	for {
		var next []byte
		err := db.update(ctx, false, func(txn *tx) error {
			next = nil
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 16})
			defer it.Close()
			if from == nil {
				from = prefix
			}
			n := 0
			for it.Seek(from); it.ValidForPrefix(prefix); it.Next() {
				item := it.Item()
				if n == batchSize || txn.written >= migrationTxnBytes {
					next = item.KeyCopy(nil)
					return nil
				}
				n++
				key := item.KeyCopy(nil)
				var d Delivery
				if err := item.Value(func(v []byte) error { return decode(key, v, &d) }); err != nil {
					return err
				}
				switch {
				case d.State == DeliveryReceived:
					if err := putPendingDelivery(txn, &d); err != nil {
						return err
					}
				case d.Payload != nil:
					d.Payload = nil
					b, err := encode(&d)
					if err != nil {
						return err
					}
					e := badger.NewEntry(key, b)
					e.ExpiresAt = item.ExpiresAt()
					if err := txn.SetEntry(e); err != nil {
						return err
					}
					txn.written += int64(len(key) + len(b))
				}
			}
			return nil
		})
		if err != nil || next == nil {
			return err
		}
		from = next
	}
}

// Version 4 to 5: the open questions indexed.

// migrateOpenQuestions indexes every question still pending (but await
// pauses) of the runs that have not ended, in batches; indexing one twice
// writes the same entry.
func migrateOpenQuestions(ctx context.Context, db *DB) error {
	prefix := []byte("ix/")
	var from []byte
	for {
		var next []byte
		err := db.update(ctx, false, func(txn *tx) error {
			next = nil
			n := 0
			runs := map[string]*engine.Run{}
			return scan(txn, prefix, from, func(key []byte, rec *ixRecord) (bool, error) {
				if n == batchSize || txn.written >= migrationTxnBytes {
					next = key
					return false, nil
				}
				n++
				if rec.Interaction == nil || !rec.Pending() || rec.Kind == engine.KindAwait {
					return true, nil
				}
				runID := string(key[len(prefix):])
				runID, _, _ = strings.Cut(runID, "/")
				run, seen := runs[runID]
				if !seen {
					r, err := getRun(txn, runID)
					if err != nil && !errors.Is(err, engine.ErrNotFound) {
						return false, err
					}
					run, runs[runID] = r, r
				}
				if run == nil || run.Status == engine.StatusFinished || run.Status == engine.StatusFailed {
					return true, nil
				}
				return true, putOpenQuestion(txn, runID, rec.Interaction, nil)
			})
		})
		if err != nil || next == nil {
			return err
		}
		from = next
	}
}
