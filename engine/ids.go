package engine

import (
	"crypto/rand"
	"encoding/binary"
	"regexp"
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
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(b[6:]) // crypto/rand never fails on Linux
	// 128 bits → 26 base32 characters, most significant first.
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
