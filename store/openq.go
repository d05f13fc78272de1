package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// Open questions: the index of every question that waits for a person,
// across every run, for the admin page and GET /api/questions. It holds
// one entry per open question, all in its key, written and deleted in the
// same transaction as the question's own record:
//
//   - PostQuestion adds an async question's entry, Answer removes it;
//   - Commit adds a blocking question's entry (a human node's form, an
//     agent's ask_user) when it stores it pending, and removes it when it
//     stores it answered; await pauses are not questions and have none;
//   - Commit removes every entry of a run that ends finished or failed,
//     whose questions nobody can answer any more; Prune removes what is
//     left of a run it removes.

func openqPrefix(run string) []byte { return []byte("openq/" + run + "/") }

// openqKey is openq/<run>/<asked, unix ns, 20 digits>/<kind>/<interaction>:
// everything the list sorts and filters by is in the key, so listing reads
// no value. The kind is a for async, b for blocking.
func openqKey(run string, ix *engine.Interaction) []byte {
	kind := "b"
	if ix.Kind == engine.KindAsync {
		kind = "a"
	}
	return []byte("openq/" + run + "/" + pad(ix.RequestedAt.UnixNano()) + "/" + kind + "/" + ix.ID)
}

var openqAll = []byte("openq/")

// OpenQuestion is a question that waits for an answer.
type OpenQuestion = delivery.OpenQuestion

// openqValue is the value of every entry: the key says it all.
var openqValue = struct{}{}

// putOpenQuestion indexes interaction ix of run as open, or removes it
// from the index once answered; old, when set, is the record ix replaces
// (a blocking question asked again), whose entry goes. Await pauses are
// never indexed.
func putOpenQuestion(txn *tx, runID string, ix, old *engine.Interaction) error {
	if old != nil && old.Kind != engine.KindAwait {
		if err := txn.Delete(openqKey(runID, old)); err != nil {
			return err
		}
	}
	if ix.Kind == engine.KindAwait {
		return nil
	}
	if !ix.Pending() {
		return txn.Delete(openqKey(runID, ix))
	}
	return put(txn, openqKey(runID, ix), openqValue)
}

// dropOpenQuestions removes the index entries of a run.
func dropOpenQuestions(txn *tx, runID string) error {
	// Collected first: writes wait until the iterator is closed.
	for _, k := range keysUnder(txn, openqPrefix(runID), math.MaxInt) {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// OpenQuestions lists, newest first, every question that can still be
// answered, across every run: the async questions of runs that have not
// ended (finished or failed), and the blocking question a paused run
// waits on. Questions of a cancelled or failed_resumable run that wait on
// no pause are listed (an async question of a stopped run can be
// answered, and is read when the run is resumed); a blocking one is not,
// since only a paused run takes it. Each comes with its run, read in the
// same transaction.
//
// It reads the index entries and one record per run that has open
// questions: its cost follows the number of open questions, not of all
// the questions ever asked.
func (db *DB) OpenQuestions(ctx context.Context) ([]OpenQuestion, error) {
	var out []OpenQuestion
	err := db.view(ctx, func(txn *tx) error {
		out = make([]OpenQuestion, 0, 1024)
		runs := map[string]*engine.Run{}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: openqAll})
		defer it.Close()
		for it.Seek(openqAll); it.ValidForPrefix(openqAll); it.Next() {
			key := it.Item().Key()
			q, ok := splitOpenqKey(key)
			if !ok {
				return fmt.Errorf("decoding %s: not an open question's key", key)
			}
			run, seen := runs[q.RunID]
			if !seen {
				r, err := getRun(txn, q.RunID)
				if err != nil {
					return fmt.Errorf("open question %s: %w", q.InteractionID, err)
				}
				run, runs[q.RunID] = r, r
			}
			switch {
			case run.Status == engine.StatusFinished || run.Status == engine.StatusFailed:
				continue
			case q.Kind == engine.KindBlocking && run.Status != engine.StatusPausedWaitingHuman:
				continue
			}
			q.Run = run
			out = append(out, q)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the open questions: %w", err)
	}
	slices.SortFunc(out, func(a, b OpenQuestion) int {
		return cmp.Or(b.RequestedAt.Compare(a.RequestedAt), cmp.Compare(a.RunID, b.RunID), cmp.Compare(a.InteractionID, b.InteractionID))
	})
	return out, nil
}

// splitOpenqKey reads openq/<run>/<asked>/<kind>/<interaction>: run ids
// hold no '/', and the time and the kind are of fixed width.
func splitOpenqKey(key []byte) (OpenQuestion, bool) {
	var q OpenQuestion
	rest := string(key[len(openqAll):])
	run, rest, ok := strings.Cut(rest, "/")
	if !ok || len(rest) < 20+1+1+1+1 || rest[20] != '/' || rest[22] != '/' {
		return q, false
	}
	ns, err := strconv.ParseInt(rest[:20], 10, 64)
	if err != nil {
		return q, false
	}
	q.RunID, q.InteractionID, q.RequestedAt = run, rest[23:], time.Unix(0, ns).UTC()
	switch rest[21] {
	case 'a':
		q.Kind = engine.KindAsync
	case 'b':
		q.Kind = engine.KindBlocking
	default:
		return q, false
	}
	return q, run != ""
}
