package engine

import "errors"

// ErrStorageFull means the store refused a write because the filesystem it
// lives on is (nearly) full: the write could otherwise crash the process
// (Badger writes through mmap, and a full disk is a SIGBUS there). Nothing
// of the write was stored, and reads still work. The store's message names
// the directory, the free bytes and what to do.
//
// A run whose write is refused with it stops failed_resumable with
// CodeStorageFull: once space is freed it continues from its checkpoint. A
// channel refuses what it cannot store (a webhook gets 503, for the sender
// to deliver again).
var ErrStorageFull = errors.New("storage full")

// CodeStorageFull is the failure code of a run stopped by ErrStorageFull.
const CodeStorageFull = "STORAGE_FULL"
