package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/iterion-bot/iterion/engine"
)

// PostQuestion stores a new pending async question of a node, synced, in
// one transaction with:
//
//   - the id <run>_<node>_async_<n>, n one more than the node's counter;
//   - the pending-index entry that Pending and the await gate read;
//   - a human_input_requested event {interaction_id, questions, async: true};
//   - a question_posted outbox row when the run has channels.
//
// A question the node already has pending asking the same (text, options
// and free text) is returned as it is, with nothing written: a node run again after a crash asks its
// questions again, and people must not see (nor a gate wait for) them
// twice.
//
// It fails with engine.ErrStaleOwner unless the run's generation is
// q.Generation.
func (db *DB) PostQuestion(ctx context.Context, q engine.PostRequest) (*engine.Interaction, error) {
	if q.NodeID == "" {
		return nil, fmt.Errorf("posting question in run %s: no node id", q.RunID)
	}
	if text, _ := q.Questions[engine.QuestionKey].(string); strings.TrimSpace(text) == "" {
		return nil, fmt.Errorf("posting question of node %s in run %s: %s holds no question text", q.NodeID, q.RunID, engine.QuestionKey)
	}
	var ix *engine.Interaction
	err := db.update(ctx, true, func(txn *tx) error {
		run, err := getRun(txn, q.RunID)
		if err != nil {
			return err
		}
		if err := checkOwner(run, q.Generation); err != nil {
			return err
		}
		if ix, err = pendingSame(txn, run.ID, q); err != nil || ix != nil {
			return err
		}
		now := db.now()
		n, err := reserve(txn, run.ID, asyncCounter(q.NodeID), 1)
		if err != nil {
			return err
		}
		order, err := reserve(txn, run.ID, counterInteractions, 1)
		if err != nil {
			return err
		}
		ix = &engine.Interaction{
			ID:          engine.AsyncInteractionID(run.ID, q.NodeID, int(n)),
			RunID:       run.ID,
			NodeID:      q.NodeID,
			Kind:        engine.KindAsync,
			Seq:         int(n),
			Questions:   maps.Clone(q.Questions),
			RequestedAt: now,
			AnswerOn:    slices.Clone(q.AnswerOn),
			Answerers:   slices.Clone(q.Answerers),
			FollowUp:    q.FollowUp,
		}
		// A blocking pause of a node named "x_async" in iteration n has the
		// same id as the n-th async question of node "x".
		if _, err := txn.Get(ixKey(run.ID, ix.ID)); err == nil {
			return fmt.Errorf("interaction %s already exists", ix.ID)
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		if err := put(txn, ixKey(run.ID, ix.ID), ixRecord{Interaction: ix, Order: order}); err != nil {
			return err
		}
		if err := put(txn, pendKey(run.ID, order, ix.ID), pendingRecord{InteractionID: ix.ID, NodeID: ix.NodeID}); err != nil {
			return err
		}
		if err := putOpenQuestion(txn, run.ID, ix, nil); err != nil {
			return err
		}
		if err := putTimers(txn, ix); err != nil {
			return err
		}
		ev := engine.Event{
			Type:     engine.EventHumanInputRequested,
			NodeID:   ix.NodeID,
			BranchID: q.BranchID,
			Data:     map[string]any{"interaction_id": ix.ID, "questions": ix.Questions, "async": true},
		}
		if err := appendEvents(txn, run.ID, []engine.Event{ev}, now); err != nil {
			return err
		}
		return putOutbox(txn, run, []engine.OutboxRow{{Kind: engine.OutboxQuestionPosted, InteractionID: ix.ID}}, now)
	})
	if err != nil {
		return nil, fmt.Errorf("posting question of node %s in run %s: %w", q.NodeID, q.RunID, err)
	}
	return ix, nil
}

// pendingSame returns q's node's pending question asking exactly what q
// asks (text, options, free text), if any.
func pendingSame(txn *tx, runID string, q engine.PostRequest) (*engine.Interaction, error) {
	want, err := normalJSON(q.Questions)
	if err != nil {
		return nil, err
	}
	var same *engine.Interaction
	err = scan(txn, pendPrefix(runID), nil, func(_ []byte, p *pendingRecord) (bool, error) {
		if p.NodeID != q.NodeID {
			return true, nil
		}
		rec, err := getInteraction(txn, runID, p.InteractionID)
		if err != nil {
			return false, err
		}
		if rec.Kind != engine.KindAsync {
			return true, nil
		}
		have, err := normalJSON(rec.Questions)
		if err == nil && bytes.Equal(have, want) {
			same = rec.Interaction
			return false, nil
		}
		return true, err
	})
	return same, err
}

// normalJSON is v's JSON as it reads back from the store: structs become
// maps, whose keys encoding/json sorts, so two values asking the same
// compare equal byte for byte.
func normalJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// Answer records the first answer to an async question, synced, in one
// transaction with the inbox message for the asking node, the
// interaction_answered event and, when the run has channels, a
// question_answered outbox row. The text is stored trimmed.
//
// It checks, in this order: the run exists and the question exists
// (engine.ErrNotFound), the text is not blank (engine.ErrEmptyAnswer), the
// question is async (engine.ErrNotAsync) and still pending (an
// *engine.AlreadyAnsweredError naming the first responder). Concurrent
// answers conflict in Badger and are re-run, so exactly one wins.
func (db *DB) Answer(ctx context.Context, a engine.AnswerRequest) (*engine.AnswerResult, error) {
	var res *engine.AnswerResult
	err := db.update(ctx, true, func(txn *tx) error {
		res = nil
		run, err := getRun(txn, a.RunID)
		if err != nil {
			return err
		}
		rec, err := getInteraction(txn, run.ID, a.InteractionID)
		if err != nil {
			return err
		}
		text := strings.TrimSpace(a.Text)
		switch {
		case text == "":
			return engine.ErrEmptyAnswer
		case rec.Kind != engine.KindAsync:
			return engine.ErrNotAsync
		case !rec.Pending():
			return &engine.AlreadyAnsweredError{
				InteractionID: rec.ID,
				AnsweredBy:    rec.AnsweredBy,
				Via:           rec.Via,
				AnsweredAt:    rec.AnsweredAt,
			}
		case run.Status == engine.StatusFinished || run.Status == engine.StatusFailed:
			// Nothing would ever read the answer.
			return fmt.Errorf("run %s is %s: %w", run.ID, run.Status, engine.ErrRunEnded)
		}
		now := db.now()
		ix := rec.Interaction
		ix.Answers = map[string]any{engine.QuestionKey: text}
		ix.AnsweredAt = now
		ix.AnsweredBy = a.By
		ix.Via = a.Via
		if err := put(txn, ixKey(run.ID, ix.ID), rec); err != nil {
			return err
		}
		if err := txn.Delete(pendKey(run.ID, rec.Order, ix.ID)); err != nil {
			return err
		}
		if err := putOpenQuestion(txn, run.ID, ix, nil); err != nil {
			return err
		}
		seq, err := reserve(txn, run.ID, counterInbox, 1)
		if err != nil {
			return err
		}
		msg := engine.InboxMessage{
			ID:            engine.NewID(now),
			RunID:         run.ID,
			NodeID:        ix.NodeID,
			InteractionID: ix.ID,
			Text:          engine.AnswerMessage(ix.ID, ix.Question(), text),
			Status:        engine.InboxQueued,
			Seq:           seq,
			QueuedAt:      now,
		}
		if err := put(txn, inboxKey(run.ID, seq), &msg); err != nil {
			return err
		}
		ev := engine.Event{
			Type:   engine.EventInteractionAnswered,
			NodeID: ix.NodeID,
			Data:   map[string]any{"interaction_id": ix.ID, "async": true, "answer": text},
		}
		if err := appendEvents(txn, run.ID, []engine.Event{ev}, now); err != nil {
			return err
		}
		if err := putOutbox(txn, run, []engine.OutboxRow{{Kind: engine.OutboxQuestionAnswered, InteractionID: ix.ID}}, now); err != nil {
			return err
		}
		res = &engine.AnswerResult{Interaction: ix, Message: msg}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("answering question %s of run %s: %w", a.InteractionID, a.RunID, err)
	}
	return res, nil
}

// Interaction returns one interaction of a run.
func (db *DB) Interaction(ctx context.Context, runID, id string) (*engine.Interaction, error) {
	var ix *engine.Interaction
	err := db.view(ctx, func(txn *tx) error {
		if _, err := getRun(txn, runID); err != nil {
			return err
		}
		rec, err := getInteraction(txn, runID, id)
		if err != nil {
			return err
		}
		ix = rec.Interaction
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading interaction %s of run %s: %w", id, runID, err)
	}
	return ix, nil
}

// Interactions returns the run's interactions in the order they were first
// stored.
func (db *DB) Interactions(ctx context.Context, runID string) ([]*engine.Interaction, error) {
	var recs []*ixRecord
	err := db.view(ctx, func(txn *tx) error {
		recs = nil
		if _, err := getRun(txn, runID); err != nil {
			return err
		}
		return scan(txn, ixPrefix(runID), nil, func(key []byte, rec *ixRecord) (bool, error) {
			if rec.Interaction == nil {
				return false, fmt.Errorf("decoding %s: empty interaction", key)
			}
			recs = append(recs, rec)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing interactions of run %s: %w", runID, err)
	}
	slices.SortFunc(recs, func(a, b *ixRecord) int {
		return cmp.Or(cmp.Compare(a.Order, b.Order), cmp.Compare(a.ID, b.ID))
	})
	out := make([]*engine.Interaction, len(recs))
	for i, rec := range recs {
		out[i] = rec.Interaction
	}
	return out, nil
}

// Pending returns the run's pending async questions, oldest first, only
// those of nodeID when it is not empty. It reads the pending index, so its
// cost follows the number of open questions, not of all questions asked.
func (db *DB) Pending(ctx context.Context, runID, nodeID string) ([]*engine.Interaction, error) {
	var out []*engine.Interaction
	err := db.view(ctx, func(txn *tx) error {
		out = nil
		if _, err := getRun(txn, runID); err != nil {
			return err
		}
		return scan(txn, pendPrefix(runID), nil, func(_ []byte, p *pendingRecord) (bool, error) {
			if nodeID != "" && p.NodeID != nodeID {
				return true, nil
			}
			rec, err := getInteraction(txn, runID, p.InteractionID)
			if err != nil {
				return false, fmt.Errorf("pending question %s: %w", p.InteractionID, err)
			}
			out = append(out, rec.Interaction)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing pending questions of run %s: %w", runID, err)
	}
	return out, nil
}

// DrainInbox marks delivered the queued messages for nodeID and those for
// no particular node, and returns them in the order they were queued.
// Messages for other nodes stay queued. Not synced: after a crash a
// message may be delivered again, never lost.
func (db *DB) DrainInbox(ctx context.Context, runID, nodeID string) ([]engine.InboxMessage, error) {
	var out []engine.InboxMessage
	err := db.update(ctx, false, func(txn *tx) error {
		out = nil
		if _, err := getRun(txn, runID); err != nil {
			return err
		}
		// Writes wait until the iterator is closed.
		err := scan(txn, inboxPrefix(runID), nil, func(_ []byte, m *engine.InboxMessage) (bool, error) {
			if m.Status == engine.InboxQueued && (m.NodeID == "" || m.NodeID == nodeID) {
				out = append(out, *m)
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		now := db.now()
		for i := range out {
			out[i].Status = engine.InboxDelivered
			out[i].DeliveredAt = now
			if err := put(txn, inboxKey(runID, out[i].Seq), &out[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("draining inbox of node %s in run %s: %w", nodeID, runID, err)
	}
	return out, nil
}

// Events returns up to limit events of a run with Seq > after, in order;
// limit <= 0 means all of them.
func (db *DB) Events(ctx context.Context, runID string, after int64, limit int) ([]engine.Event, error) {
	var out []engine.Event
	err := db.view(ctx, func(txn *tx) error {
		out = nil
		if _, err := getRun(txn, runID); err != nil {
			return err
		}
		return scan(txn, evPrefix(runID), evKey(runID, max(after, 0)+1), func(_ []byte, ev *engine.Event) (bool, error) {
			out = append(out, *ev)
			return limit <= 0 || len(out) < limit, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading events of run %s: %w", runID, err)
	}
	return out, nil
}
