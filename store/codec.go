package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/dgraph-io/badger/v4"
	"github.com/iterion-bot/iterion/engine"
)

// formatVersion is the "v" written into every value.
const formatVersion = 1

// Keys; see the package comment for the layout.

func runKey(run string) []byte  { return []byte("run/" + run) }
func ckptKey(run string) []byte { return []byte("ckpt/" + run) }

func ixPrefix(run string) []byte      { return []byte("ix/" + run + "/") }
func ixKey(run, id string) []byte     { return []byte("ix/" + run + "/" + id) }
func pendPrefix(run string) []byte    { return []byte("ixpend/" + run + "/") }
func inboxPrefix(run string) []byte   { return []byte("inbox/" + run + "/") }
func evPrefix(run string) []byte      { return []byte("ev/" + run + "/") }
func outboxKey(id string) []byte      { return []byte("outbox/" + id) }
func counterKey(run, c string) []byte { return []byte("seq/" + run + "/" + c) }

func pendKey(run string, order int64, id string) []byte {
	return []byte("ixpend/" + run + "/" + pad(order) + "/" + id)
}
func inboxKey(run string, seq int64) []byte { return []byte("inbox/" + run + "/" + pad(seq)) }
func evKey(run string, seq int64) []byte    { return []byte("ev/" + run + "/" + pad(seq)) }

var outboxPrefix = []byte("outbox/")
var runPrefix = []byte("run/")

// Counter names under seq/<run>/.
const (
	counterEvents       = "ev"
	counterInbox        = "inbox"
	counterInteractions = "ix"
)

func asyncCounter(node string) string { return "async/" + node }

// pad writes n in 20 digits, enough for any int64, so keys sort numerically.
func pad(n int64) string {
	s := strconv.FormatInt(n, 10)
	const zeros = "00000000000000000000"
	if len(s) < len(zeros) {
		s = zeros[len(s):] + s
	}
	return s
}

// Records that are not an engine type as is.

// ixRecord is an interaction with its creation order in the run, which
// sorts Interactions and names its pending-index key.
type ixRecord struct {
	*engine.Interaction
	Order int64 `json:"order"`
}

// checkpointRecord holds the engine's opaque checkpoint bytes.
type checkpointRecord struct {
	Data []byte `json:"data"`
}

// counterRecord holds the highest number a counter has handed out.
type counterRecord struct {
	N int64 `json:"n"`
}

// pendingRecord is the value of a pending-index key.
type pendingRecord struct {
	InteractionID string `json:"interaction_id"`
	NodeID        string `json:"node_id"`
}

// encode marshals v, which must marshal to a JSON object, with the format
// version spliced in as its first field.
func encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[0] != '{' {
		return nil, fmt.Errorf("encoding %T: not a JSON object", v)
	}
	out := make([]byte, 0, len(b)+8)
	out = append(out, `{"v":`...)
	out = strconv.AppendInt(out, formatVersion, 10)
	if len(b) > 2 {
		out = append(out, ',')
	}
	return append(out, b[1:]...), nil
}

// currentHead starts every value this build writes.
var currentHead = []byte(`{"v":` + strconv.Itoa(formatVersion))

// decode unmarshals the value stored at key into v after checking its
// format version.
func decode(key, data []byte, v any) error {
	// encode writes the version first: a value that starts with this
	// build's needs no second parse to find it.
	if bytes.HasPrefix(data, currentHead) && len(data) > len(currentHead) && (data[len(currentHead)] == ',' || data[len(currentHead)] == '}') {
		if err := json.Unmarshal(data, v); err != nil {
			return fmt.Errorf("decoding %s: %w", key, err)
		}
		return nil
	}
	var head struct {
		V *json.Number `json:"v"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("decoding %s: %w", key, err)
	}
	if head.V == nil {
		return fmt.Errorf("decoding %s: no format version: %w", key, ErrUnknownVersion)
	}
	if head.V.String() != strconv.Itoa(formatVersion) {
		return fmt.Errorf("decoding %s: format version %s, this build reads %d: %w", key, head.V, formatVersion, ErrUnknownVersion)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decoding %s: %w", key, err)
	}
	return nil
}

// get decodes the record at key into v. A missing key is
// engine.ErrNotFound, unwrapped, for the caller to say what was missing.
func get(txn *tx, key []byte, v any) error {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return engine.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", key, err)
	}
	return item.Value(func(val []byte) error { return decode(key, val, v) })
}

// put encodes v and stores it at key.
func put(txn *tx, key []byte, v any) error {
	b, err := encode(v)
	if err != nil {
		return err
	}
	// Badger's own error for this dumps the value into the message.
	if len(b) > txn.maxValue {
		return fmt.Errorf("writing %s: the record has %d bytes, more than the store's limit of %d", key, len(b), txn.maxValue)
	}
	if err := txn.Set(key, b); err != nil {
		return fmt.Errorf("writing %s: %w", key, err)
	}
	txn.written += int64(len(key) + len(b))
	return nil
}

// scan decodes every record under prefix, in key order, starting at the
// first key >= from (from nil means the prefix), and passes each to fn
// until fn returns false or an error. fn gets the key, which it may keep.
func scan[T any](txn *tx, prefix, from []byte, fn func(key []byte, v *T) (more bool, err error)) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 16})
	defer it.Close()
	if from == nil {
		from = prefix
	}
	for it.Seek(from); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		key := item.KeyCopy(nil)
		v := new(T)
		if err := item.Value(func(val []byte) error { return decode(key, val, v) }); err != nil {
			return err
		}
		more, err := fn(key, v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// reserve takes the next n numbers of the run's counter c and returns the
// first; the counter then holds the last.
func reserve(txn *tx, run, c string, n int64) (int64, error) {
	key := counterKey(run, c)
	var rec counterRecord
	if err := get(txn, key, &rec); err != nil && !errors.Is(err, engine.ErrNotFound) {
		return 0, err
	}
	first := rec.N + 1
	rec.N += n
	if err := put(txn, key, rec); err != nil {
		return 0, err
	}
	return first, nil
}

// getRun reads a run record.
func getRun(txn *tx, id string) (*engine.Run, error) {
	run := new(engine.Run)
	if err := get(txn, runKey(id), run); err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			return nil, fmt.Errorf("run %w", engine.ErrNotFound)
		}
		return nil, err
	}
	return run, nil
}

// getInteraction reads an interaction record.
func getInteraction(txn *tx, run, id string) (*ixRecord, error) {
	rec := &ixRecord{Interaction: new(engine.Interaction)}
	if err := get(txn, ixKey(run, id), rec); err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			return nil, fmt.Errorf("interaction %w", engine.ErrNotFound)
		}
		return nil, err
	}
	return rec, nil
}
