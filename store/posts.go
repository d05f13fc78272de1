package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strconv"
	"strings"

	"github.com/iterion-bot/iterion/engine"
)

// Posts: what the bot's channels put out for runs and questions. The
// outbox worker records the external id of each post (a PR comment id, a
// check run id, a Slack channel/ts) so that a later edit finds it and a
// reply to it routes to its question.

func ixrefKey(channel, extID string) []byte { return []byte("ixref/" + channel + "/" + extID) }
func runPostPrefix(run string) []byte       { return []byte("rpost/" + run + "/") }
func runPostKey(run, name string) []byte    { return []byte("rpost/" + run + "/" + name) }
func shortCounterKey(scope string) []byte   { return []byte("short/" + scope + "/next") }
func shortNumKey(scope string, n int64) []byte {
	return []byte("short/" + scope + "/n/" + pad(n))
}
func shortIxKey(scope, run, ix string) []byte {
	return []byte("short/" + scope + "/ix/" + run + "/" + ix)
}

// ixRef locates an interaction.
type ixRef struct {
	RunID         string `json:"run_id"`
	InteractionID string `json:"interaction_id"`
}

// shortRecord is a short number handed out in a scope.
type shortRecord struct {
	N int64 `json:"n"`
}

// runPostRecord is one external id recorded for a run.
type runPostRecord struct {
	Value string `json:"value"`
}

// RecordPost records, synced, that channel carries interaction ixID of
// run runID in the post extID: the interaction's Posts[channel] and the
// ixref/<channel>/<extID> entry that PostRef reads.
func (db *DB) RecordPost(ctx context.Context, runID, ixID, channel, extID string) error {
	if channel == "" || extID == "" || strings.Contains(channel, "/") {
		return fmt.Errorf("recording a post of interaction %s: channel %q and external id %q must be set (channel without /)", ixID, channel, extID)
	}
	err := db.write(ctx, bookkeeping, true, func(txn *tx) error {
		rec, err := getInteraction(txn, runID, ixID)
		if err != nil {
			return err
		}
		posts := maps.Clone(rec.Posts)
		if posts == nil {
			posts = map[string]string{}
		}
		posts[channel] = extID
		rec.Posts = posts
		if err := put(txn, ixKey(runID, ixID), rec); err != nil {
			return err
		}
		return put(txn, ixrefKey(channel, extID), ixRef{RunID: runID, InteractionID: ixID})
	})
	if err != nil {
		return fmt.Errorf("recording the %s post of interaction %s of run %s: %w", channel, ixID, runID, err)
	}
	return nil
}

// RecordThread records, synced, that channel's post extID is run runID's
// own (a Slack card): the ixref/<channel>/<extID> entry, naming no
// interaction, that PostRef reads.
func (db *DB) RecordThread(ctx context.Context, runID, channel, extID string) error {
	if channel == "" || extID == "" || strings.Contains(channel, "/") {
		return fmt.Errorf("recording a post of run %s: channel %q and external id %q must be set (channel without /)", runID, channel, extID)
	}
	err := db.write(ctx, bookkeeping, true, func(txn *tx) error {
		if _, err := getRun(txn, runID); err != nil {
			return err
		}
		return put(txn, ixrefKey(channel, extID), ixRef{RunID: runID})
	})
	if err != nil {
		return fmt.Errorf("recording the %s thread of run %s: %w", channel, runID, err)
	}
	return nil
}

// PostRef returns the interaction that channel's post extID carries, or
// the run whose own post it is (RecordThread) with an empty ixID;
// engine.ErrNotFound when it carries neither.
func (db *DB) PostRef(ctx context.Context, channel, extID string) (runID, ixID string, err error) {
	var ref ixRef
	err = db.view(ctx, func(txn *tx) error { return get(txn, ixrefKey(channel, extID), &ref) })
	if err != nil {
		return "", "", fmt.Errorf("finding the question of %s post %s: %w", channel, extID, err)
	}
	return ref.RunID, ref.InteractionID, nil
}

// ShortID returns the short number of interaction ixID of run runID in
// scope (a pull request, say), handing out the scope's next number, from
// 1, the first time it is asked. People read and type the number (Q3)
// instead of the interaction id; ShortRef maps it back.
func (db *DB) ShortID(ctx context.Context, scope, runID, ixID string) (int, error) {
	if scope == "" {
		return 0, errors.New("short id: no scope")
	}
	var n int64
	err := db.update(ctx, true, func(txn *tx) error {
		var rec shortRecord
		err := get(txn, shortIxKey(scope, runID, ixID), &rec)
		if err == nil {
			n = rec.N
			return nil
		}
		if !errors.Is(err, engine.ErrNotFound) {
			return err
		}
		var next counterRecord
		if err := get(txn, shortCounterKey(scope), &next); err != nil && !errors.Is(err, engine.ErrNotFound) {
			return err
		}
		next.N++
		n = next.N
		if err := put(txn, shortCounterKey(scope), next); err != nil {
			return err
		}
		if err := put(txn, shortIxKey(scope, runID, ixID), shortRecord{N: n}); err != nil {
			return err
		}
		return put(txn, shortNumKey(scope, n), ixRef{RunID: runID, InteractionID: ixID})
	})
	if err != nil {
		return 0, fmt.Errorf("numbering interaction %s in %s: %w", ixID, scope, err)
	}
	return int(n), nil
}

// ShortRef returns the interaction numbered n in scope; engine.ErrNotFound
// when the number was never handed out.
func (db *DB) ShortRef(ctx context.Context, scope string, n int) (runID, ixID string, err error) {
	var ref ixRef
	err = db.view(ctx, func(txn *tx) error { return get(txn, shortNumKey(scope, int64(n)), &ref) })
	if err != nil {
		return "", "", fmt.Errorf("finding question %s in %s: %w", strconv.Itoa(n), scope, err)
	}
	return ref.RunID, ref.InteractionID, nil
}

// SetRunPost records, synced, an external id of a run's own posts under
// name ("github-status-comment", "github-check-run").
func (db *DB) SetRunPost(ctx context.Context, runID, name, value string) error {
	err := db.write(ctx, bookkeeping, true, func(txn *tx) error {
		if _, err := getRun(txn, runID); err != nil {
			return err
		}
		return put(txn, runPostKey(runID, name), runPostRecord{Value: value})
	})
	if err != nil {
		return fmt.Errorf("recording post %s of run %s: %w", name, runID, err)
	}
	return nil
}

// RunPosts returns the external ids recorded for a run, by name.
func (db *DB) RunPosts(ctx context.Context, runID string) (map[string]string, error) {
	out := map[string]string{}
	err := db.view(ctx, func(txn *tx) error {
		prefix := runPostPrefix(runID)
		return scan(txn, prefix, nil, func(key []byte, rec *runPostRecord) (bool, error) {
			out[string(key[len(prefix):])] = rec.Value
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading the posts of run %s: %w", runID, err)
	}
	return out, nil
}

// ShortIDs returns the short numbers handed out in scope to the
// interactions of run runID, by interaction id.
func (db *DB) ShortIDs(ctx context.Context, scope, runID string) (map[string]int, error) {
	out := map[string]int{}
	prefix := []byte("short/" + scope + "/ix/" + runID + "/")
	err := db.view(ctx, func(txn *tx) error {
		return scan(txn, prefix, nil, func(key []byte, rec *shortRecord) (bool, error) {
			out[string(key[len(prefix):])] = int(rec.N)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading the question numbers of run %s: %w", runID, err)
	}
	return out, nil
}

// The runs of a channel's place (a pull request, a Slack thread), indexed
// by their trigger's Ref when a run is created.

// maxRefLen bounds a trigger's Ref, which is part of a key.
const maxRefLen = 1024

func refIndexPrefix(ref string) []byte {
	return []byte("runref/" + url.PathEscape(ref) + "/")
}

// putRefIndex indexes a run by its trigger's Ref, if it has one.
func putRefIndex(txn *tx, run *engine.Run) error {
	if run.Trigger.Ref == "" {
		return nil
	}
	return put(txn, append(refIndexPrefix(run.Trigger.Ref), run.ID...), ixRef{RunID: run.ID})
}

// RunsByRef returns the runs whose trigger's Ref is ref, exactly as the
// channel wrote it, in no particular order.
func (db *DB) RunsByRef(ctx context.Context, ref string) ([]*engine.Run, error) {
	var out []*engine.Run
	err := db.view(ctx, func(txn *tx) error {
		out = nil
		return scan(txn, refIndexPrefix(ref), nil, func(_ []byte, r *ixRef) (bool, error) {
			run, err := getRun(txn, r.RunID)
			if err != nil {
				return false, err
			}
			out = append(out, run)
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing the runs of %s: %w", ref, err)
	}
	return out, nil
}
