// Package store keeps iterion's state in an embedded Badger database and
// implements engine.Store on it: every method is one intent carried out in
// one Badger transaction, retried as a whole when Badger reports a
// conflict, so a lost race re-reads the state instead of overwriting it.
//
// # Key layout
//
// Keys are ASCII paths. Run ids match [a-z0-9-] (engine.ValidRunID), so
// "<prefix>/<run>/" never matches another run's keys. Sequence numbers are
// zero-padded to 20 digits so that keys sort in numeric order.
//
//	run/<run>                          run record (engine.Run)
//	ckpt/<run>                         the run's last checkpoint
//	ix/<run>/<interaction>             interaction (engine.Interaction) and its creation order
//	ixpend/<run>/<order>/<interaction> pending async question: the index Pending scans,
//	                                   oldest first; removed by the answer
//	inbox/<run>/<seq>                  queued message for an agent (engine.InboxMessage)
//	ev/<run>/<seq>                     event log (engine.Event), seq from 1
//	hist/<run>/<series>/<index>        history entry (engine.HistoryEntry): a node's past output
//	                                   or an artifact's version; the series is path-escaped
//	outbox/<id>                        pending side effect (engine.OutboxRow), id from engine.NewID
//	seq/<run>/ev                       last event seq of the run
//	seq/<run>/inbox                    last inbox seq of the run
//	seq/<run>/ix                       last interaction order of the run
//	seq/<run>/async/<node>             last n of the node's async ids <run>_<node>_async_<n>
//
// Counters live in the store, never in memory, and hold the highest number
// handed out: an async id is 1 + the counter, so ids are never parsed and
// never reused, even after their questions are answered.
//
// # Values
//
// Every value is a JSON object whose first field is the format version,
// {"v":1,...}, followed by the record's own fields. Reading a record of
// another version fails with ErrUnknownVersion rather than guessing.
//
// # Durability
//
// Badger runs with SyncWrites off; the intents whose result is acknowledged
// to someone (CreateRun, Acquire, PostQuestion, Answer, and Commit with
// Sync) sync the database before they return, concurrent callers sharing
// one sync. The others (DrainInbox, outbox bookkeeping, Commit without
// Sync) reach the disk with the next sync or when Badger flushes: a crash
// of the machine may lose them, which costs a repeated node, a redelivered
// inbox message or a repeated (idempotent) outbox attempt; a crash of the
// process alone loses nothing, as Badger writes through mmap. BENCHMARKS.md
// has the measurements behind this choice.
//
// A committed transaction is visible to others just before its sync ends.
// If the machine dies in between, the write is lost although a concurrent
// reader saw it (a second answer refused as already answered, say); but
// the writer had not yet been told it succeeded.
//
// Badger allows one process per directory: Open takes a lock file in the
// directory (iterion.lock, an flock the kernel drops when the process dies)
// and fails with ErrLocked while another process holds it.
package store
