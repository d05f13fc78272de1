package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/iterion-bot/iterion/bot/delivery"
	"github.com/iterion-bot/iterion/engine"
)

// Open questions: the index of every question that waits for a person,
// across every run, for the admin page and GET /api/questions. It holds
// one small entry per open question, written and deleted in the same
// transaction as the question's own record:
//
//   - PostQuestion adds an async question's entry, Answer removes it;
//   - Commit adds a blocking question's entry (a human node's form, an
//     agent's ask_user) when it stores it pending, and removes it when it
//     stores it answered; await pauses are not questions and have none;
//   - Commit removes every entry of a run that ends finished or failed,
//     whose questions nobody can answer any more; Prune removes what is
//     left of a run it removes.

func openqPrefix(run string) []byte  { return []byte("openq/" + run + "/") }
func openqKey(run, ix string) []byte { return []byte("openq/" + run + "/" + ix) }

var openqAll = []byte("openq/")

// openqRecord is the value of an open question's entry: what sorting and
// filtering need without reading the interaction.
type openqRecord struct {
	NodeID      string                 `json:"node_id"`
	Kind        engine.InteractionKind `json:"kind"`
	RequestedAt time.Time              `json:"requested_at"`
}

// OpenQuestion is a question that waits for an answer.
type OpenQuestion = delivery.OpenQuestion

// putOpenQuestion indexes interaction ix of run as open, or removes it
// from the index once answered. Await pauses are never indexed.
func putOpenQuestion(txn *tx, runID string, ix *engine.Interaction) error {
	if ix.Kind == engine.KindAwait {
		return nil
	}
	if !ix.Pending() {
		return txn.Delete(openqKey(runID, ix.ID))
	}
	return put(txn, openqKey(runID, ix.ID), openqRecord{NodeID: ix.NodeID, Kind: ix.Kind, RequestedAt: ix.RequestedAt})
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
		out = nil
		runs := map[string]*engine.Run{}
		return scan(txn, openqAll, nil, func(key []byte, rec *openqRecord) (bool, error) {
			runID, ixID, ok := splitOpenqKey(key)
			if !ok {
				return false, fmt.Errorf("decoding %s: not an open question's key", key)
			}
			run, seen := runs[runID]
			if !seen {
				r, err := getRun(txn, runID)
				if err != nil {
					return false, fmt.Errorf("open question %s: %w", ixID, err)
				}
				run, runs[runID] = r, r
			}
			switch {
			case run.Status == engine.StatusFinished || run.Status == engine.StatusFailed:
				return true, nil
			case rec.Kind == engine.KindBlocking && run.Status != engine.StatusPausedWaitingHuman:
				return true, nil
			}
			out = append(out, OpenQuestion{RunID: runID, InteractionID: ixID, NodeID: rec.NodeID, Kind: rec.Kind, RequestedAt: rec.RequestedAt, Run: run})
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing the open questions: %w", err)
	}
	slices.SortFunc(out, func(a, b OpenQuestion) int {
		return cmp.Or(b.RequestedAt.Compare(a.RequestedAt), cmp.Compare(a.RunID, b.RunID), cmp.Compare(a.InteractionID, b.InteractionID))
	})
	return out, nil
}

// splitOpenqKey reads openq/<run>/<interaction>: run ids hold no '/', and
// an interaction id may not either (it is a key's last part).
func splitOpenqKey(key []byte) (run, ix string, ok bool) {
	rest := string(key[len(openqAll):])
	for i := 0; i < len(rest); i++ {
		if rest[i] == '/' {
			return rest[:i], rest[i+1:], i > 0 && i+1 < len(rest)
		}
	}
	return "", "", false
}
