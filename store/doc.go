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
//	openq/<run>/<interaction>          a question open for an answer (async, or a blocking
//	                                   pause): the index OpenQuestions scans across runs;
//	                                   removed by the answer and when the run ends
//	inbox/<run>/<seq>                  queued message for an agent (engine.InboxMessage)
//	ev/<run>/<seq>                     event log (engine.Event), seq from 1
//	hist/<run>/<series>/<index>        history entry (engine.HistoryEntry): a node's past output
//	                                   or an artifact's version; the series is path-escaped
//	outbox/<id>                        pending side effect (engine.OutboxRow), id from engine.NewID
//	seq/<run>/ev                       last event seq of the run
//	seq/<run>/inbox                    last inbox seq of the run
//	seq/<run>/ix                       last interaction order of the run
//	seq/<run>/async/<node>             last n of the node's async ids <run>_<node>_async_<n>
//	rpost/<run>/<name>                 an external id of the run's own posts (a status comment)
//	runref/<ref>/<run>                 index of the runs by their trigger's Ref (a channel's
//	                                   place: a pull request, a Slack thread); the ref is
//	                                   path-escaped
//	ixref/<channel>/<external id>      the interaction a post carries, to route replies
//	short/<scope>/next                 last short question number handed out in scope
//	short/<scope>/n/<n>                the interaction numbered n
//	short/<scope>/ix/<run>/<ix>        the number of an interaction
//	launchq/<scope>/...                launches waiting for their scope's active run
//	dlv/<source>/<id>                  inbound delivery (a webhook), kept a week once handled,
//	                                   without its payload
//	dlvpend/<received>/<source>/<id>   index of the deliveries still to handle, oldest first
//	                                   (received in unix ns), with their postponement
//	link/<team>/<user>                 a chat user's link to a GitHub account (SetLink)
//	linkgh/<github id>/<team>/<user>   index of the links by GitHub account (DropLinks)
//	nonce/<nonce>                      a used single-use nonce, until it expires
//	timer/<due>/<run>/<ix>/<what>      a question's reminder, escalation or expiry (engine.Timer),
//	                                   due in unix ns: NextTimer reads the first; written with
//	                                   the question from its FollowUp, removed by FireTimer
//	prune/<run>                        a run being removed (see Prune)
//	sched/<schedule>                   a schedule: its definition and its state (cursor, last
//	                                   fire and run, tracking posts); the name is path-escaped
//	fires/<schedule>/<tick>            a fire of a tick, recorded before its run starts: a tick
//	                                   fires once; kept 8 days once started or dropped
//	firepend/<fired>/<schedule>/<tick> index of the fires still to start (queued behind a run, or
//	                                   claimed), oldest first (fired in unix ns)
//	meta/layout                        the layout version (below)
//
// The schedules' keys came without a layout version of their own: a store
// of layout 4 without them has no schedules, and an older build ignores
// them.
//
// A new key that holds a run's id in its path must be added to
// runPrefixes, and one that names a run only in its value to
// purgeReferences, for Prune to remove it with the run.
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
// # Layout versions
//
// The layout (the keys above and what they hold) has a version, stored at
// meta/layout. Open refuses a store of a newer version (ErrNewerLayout,
// naming both versions) and migrates one of an older version in place,
// one step per version, each in bounded transactions of its own and
// idempotent, the new version written after each step: a migration
// interrupted by a crash runs again at the next Open. A store without
// the key is at version 1 when it holds anything; a new store is written
// at the current version. To change the layout, append a step to
// migrations.
//
// Before the first step, Open writes a backup of the store as it was
// (Backup's format) to backups/layout-<old version>-<time>.backup in the
// store's directory, and logs its path: the way back to the previous
// iterion is to restore it (Restore) into a new directory. Inside the
// store's directory rather than beside it, because a container's volume
// is the store's directory and its parent is often not writable. A
// failed backup leaves the store untouched and Open fails.
//
// # Backup and restore
//
// Backup streams a consistent snapshot of a live store (Badger's backup
// stream, after a line naming the layout version); Restore loads one into
// a new or empty directory only (ErrNotEmpty otherwise), refuses a file
// that is not a backup (ErrNotBackup) or one of a newer layout, and opens
// the result once, which migrates a backup of an older layout.
//
//	1  the first layout: everything above but meta/layout, prune/, runref/ and dlvpend/
//	2  meta/layout; the runs of pull requests indexed (runpr/), which
//	   layout 1 did at every open, marked by meta/index/runpr
//	3  GitHub's details leave the run's trigger for its channel Ref and
//	   Details; runs are indexed by Ref (runref/), and runpr/ is gone
//	4  the deliveries still to handle indexed (dlvpend/); handled ones
//	   keep no payload
//	5  the open questions of every run indexed (openq/)
//
// # Memory
//
// The production settings bound what Badger keeps in memory: three
// memtables of 16 MiB, a 32 MiB block cache and a 16 MiB cache of table
// indexes (Badger's defaults: five of 64 MiB, 256 MiB, and every index in
// memory). Values above 4 KiB (checkpoints, node outputs) go to the value
// log rather than the tables, so compactions, whose table builders held
// over 1 GiB when 16 KiB events stayed in the tables, only move keys and
// small values (BENCHMARKS.md). A transaction holds about 2.4 MiB of small
// records and pointers to larger ones; a record may have up to 64 MiB,
// the size of a value-log file. Level 0 is compacted after every flush,
// which is what finds the overwritten values for the collection below.
//
// # Value-log collection
//
// Badger never reclaims an overwritten or deleted value of the value log
// by itself. Every five minutes (Options.GCInterval), and whenever 128 MiB
// were written since the last time, a goroutine of the DB rewrites the
// value-log files that are at least half dead, one after the other until
// none is, unless the disk is nearly full; Close stops it. A run looping
// over an 8 KiB checkpoint keeps under 400 MiB of value log for 2.2 GB
// written (BENCHMARKS.md).
//
// # Disk space
//
// Badger writes through mmap, into files it extends without allocating
// them: on a full filesystem a write is a SIGBUS that kills the process.
// So every write transaction first checks the free space of the store's
// filesystem (read with statfs at most once a second, the bytes written
// since counted against it) and is refused, with an error wrapping
// engine.ErrStorageFull that names the directory, the free space and what
// to do, below Options.DiskReserve (256 MiB). Writes that record what
// already happened (a run that stops, a stop requested, a post made, an
// outbox row done, a delivery handled) and deletions may go on until a
// quarter of the reserve is left, so that a run stopped by a full disk
// ends failed_resumable, saying so. Below the reserve Open opens an
// existing store read-only (ReadOnly): reads work, writes are refused
// until the store is opened again; first it trims the unallocated end of
// the logs a killed process left, whose replay would read unallocated
// pages, a SIGBUS on tmpfs. Such a store then fails to open, clearly,
// until space is freed. Linux only; elsewhere nothing is checked.
//
// # Retention
//
// Prune removes the runs that stopped (finished, failed, cancelled,
// failed_resumable) and have not changed since a cutoff, with every key
// of theirs, in bounded transactions; paused and running runs are never
// removed, nor runs whose end is still to be posted (an outbox row).
//
// Badger allows one process per directory: Open takes a lock file in the
// directory (iterion.lock, an flock the kernel drops when the process dies)
// and fails with ErrLocked while another process holds it.
package store
