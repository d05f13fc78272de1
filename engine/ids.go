package engine

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"regexp"
	"sync"
	"time"
)

// Run ids are sortable: 10 characters of millisecond time then 10 of
// randomness, in lower-case Crockford base32 (ULID-like), so listing keys
// in order lists runs by creation time. A given id must match
// [a-z0-9-]{1,64}.

const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

var runIDPattern = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)

// ValidRunID reports whether id may name a run.
func ValidRunID(id string) bool { return runIDPattern.MatchString(id) }

// NewID returns a new sortable id for time now: 26 characters, time first.
func NewID(now time.Time) string {
	return encodeID(newIDBytes(now))
}

func newIDBytes(now time.Time) [16]byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(b[6:]) // crypto/rand never fails on Linux
	return b
}

// IDSequence hands out ids like NewID's that also sort in the order they
// were handed out: within one millisecond NewID's ids order by chance, so
// two rows written one after the other in that millisecond could be read
// back swapped. The zero value is ready to use; it is safe for concurrent
// use.
type IDSequence struct {
	mu   sync.Mutex
	last [16]byte
}

// Next returns an id for time now greater than every id it returned
// before.
func (q *IDSequence) Next(now time.Time) string {
	b := newIDBytes(now)
	q.mu.Lock()
	defer q.mu.Unlock()
	if bytes.Compare(b[:], q.last[:]) <= 0 {
		b = q.last
		for i := len(b) - 1; i >= 0; i-- { // the next 128-bit number
			if b[i]++; b[i] != 0 {
				break
			}
		}
	}
	q.last = b
	return encodeID(b)
}

// encodeID writes 128 bits as 26 base32 characters, most significant
// first, so that ids sort as their bits do.
func encodeID(b [16]byte) string {
	var out [26]byte
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | (hi&31)<<59
		hi >>= 5
	}
	return string(out[:])
}

// NewRunID returns a new run id: "r-" and a sortable id.
func NewRunID(now time.Time) string { return "r-" + NewID(now) }
