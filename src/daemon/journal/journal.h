/* SPDX-License-Identifier: MIT */
/*
 * journal.h - durable journals: many writers, one log, acknowledged only once synced.
 *
 * A journal is a directory of preallocated segment files (format: src/common/jformat.h) and a
 * flusher thread of its own. Writers (one per client handle) append into append rings in shared
 * memory (src/common/jring.h); the flusher gathers from every ring into batch buffers, assigns
 * LSNs, writes and syncs a batch through its I/O backend (jio.h) while the next one fills, and
 * then publishes durability into each ring and wakes the waiting clients with a futex. Batching
 * adapts: a lone writer is flushed at once; with several, a batch grows towards the size that
 * the measured arrival rate and sync latency predict, or until the time budget runs out.
 *
 * Threads: the event loop calls everything in this header; the flusher thread is private to
 * journal_flusher.c. `lock` in struct journal (journal_internal.h) guards what both touch (the
 * writer list, counters, state, the retention point); the rings themselves follow jring.h's
 * protocol. A failed write or sync turns the journal read-only for good (until restart):
 * nothing later is acknowledged.
 */
#ifndef HP_JOURNAL_H
#define HP_JOURNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "hist.h"
#include "journal_path.h"
#include "proto.h"

struct journal;
struct journal_writer;

/* proto.h's journal states, as the journal's code names them */
enum journal_state {
	JOURNAL_OK = PROTO_JOURNAL_OK,
	JOURNAL_FULL = PROTO_JOURNAL_FULL, /* every segment holds records not yet truncated (when_full = block) */
	JOURNAL_FAILED = PROTO_JOURNAL_FAILED, /* a write or sync failed: read-only */
};

struct journal_stats {
	enum journal_state state;
	int error; /* when FAILED: the negative errno */
	char backend[16];
	char note[160]; /* why the backend was chosen, or what failed */
	uint64_t next_lsn, durable_lsn, retain_lsn;
	uint64_t appends, bytes, batches, syncs;
	uint32_t writers, segments, segments_used;
	uint64_t segment_size;
	struct hist sync_ns; /* latency of each batch's write+sync */
	uint64_t batch_sizes[PROTO_BATCH_BUCKETS]; /* batches by records, proto_batch_bucket */
	struct proto_status_durability durability; /* I/O errors, and the latencies as status shows them */
	/* how batches go to the disk (journal_path.h); the names are proto.h's journal path fields */
	enum jpath path; /* the last batch's */
	uint32_t adaptive; /* 1: backend = auto chooses its path by measuring */
	uint32_t cpus; /* up to this many active writers: inline-spin */
	uint64_t inline_spin_batches, inline_batches, queued_batches;
	uint64_t queued_alt_batches; /* of queued_batches, those of auto's second queue (not on the wire) */
	uint64_t path_changes; /* adaptive: how often the measurements changed the path */
	uint64_t inline_rate, queued_rate; /* adaptive: records/s of each path's last window */
	char chosen[16]; /* adaptive: the path of more writers than CPUs once measured, else "" */
	char path_why[256]; /* which path, and why (journal_get_stats) */
	/* the flusher after a few writers' batch (not on the wire): rounds it looked for their next
	 * append, of which found one, and rounds that slept at once (the looks backing off) */
	uint64_t spins, spins_found, spins_skipped;
	/* what recovery found at start */
	uint64_t recovered_records;
	char recovery[200];
};

/*
 * Open (create, recover) the journal's directory and start its flusher. fault: for the tests, a
 * fault to inject in its I/O (jio_set_fault's spec; NULL: none). Logs.
 */
int journal_open(const struct config_journal *cfg, const char *fault, struct journal **ret);
/*
 * journal_open in two parts. journal_prepare: the directory checked, the I/O queues and buffers
 * made (a take-over's next life does it while the running life still serves).
 * journal_open_prepared, once no other life writes the journal (a take-over's GO): recovery
 * (after a clean stop, the end its marker names, no record read) and the flusher.
 * journal_prepare fails as journal_open does; when journal_open_prepared fails, the caller
 * closes the journal.
 */
int journal_prepare(const struct config_journal *cfg, const char *fault, struct journal **ret);
int journal_open_prepared(struct journal *j);
/*
 * Stop the flusher after publishing what completed, mark the end clean and close the files: the
 * journal is final on disk, for a next life to recover. Its writers, I/O queues and memory stay
 * until journal_close: a libaio context's release waits for the kernel's RCU grace periods
 * (20-60 ms measured), which a take-over keeps out of its pause by closing after the hand-over.
 * handover: a take-over's, whose next life reads the clean end at once: written without a sync
 * (two fewer syncs in the pause; a power failure then costs a scan of the last segment's tail).
 * Once only; NULL is fine.
 */
void journal_stop(struct journal *j, bool handover);
/*
 * journal_stop's first half, which returns at once: the flusher told to write what it took,
 * mark the end clean and end. A stop asks it as soon as the event loop stopped, so that the
 * flusher's wake-up, last batch and marker (100-150 us) overlap the rest of the stop
 * (the replies sent, the records made final) instead of following it. Once is enough; NULL is
 * fine. The handover of the first call holds.
 */
void journal_stop_begin(struct journal *j, bool handover);
/* journal_stop if it was not, then free everything (the I/O queues too). NULL is fine. */
void journal_close(struct journal *j);
/*
 * journal_close for n journals (NULLs fine), each on a thread of its own but the first: each
 * one's I/O queue release waits for the kernel's RCU grace periods (a libaio context: 30-60 ms
 * here), so n of them wait once instead of n times, in a stop's pause.
 */
void journal_close_all(struct journal **js, unsigned n);
const char *journal_name(const struct journal *j);

/*
 * A new writer for (uid, pid): a ring of ring_size bytes (0 = the journal's default; a power of
 * two within JRING_MIN/MAX_SIZE) in a new memfd. Returns the writer with three fds the caller
 * sends to the client and then closes: the ring memfd, the writer's own doorbell eventfd and
 * the wake page memfd of uid's writers of this journal (nothing is shared across uids; see
 * jring.h).
 */
int journal_writer_new(struct journal *j, uid_t uid, pid_t pid, uint64_t ring_size,
		       struct journal_writer **ret, int *ret_ring_fd, int *ret_doorbell_fd, int *ret_wake_fd);
/*
 * The writer's connection is gone or it closed: what it had committed when the flusher first
 * sees it closed is still written, nothing after; it is freed once that is durable.
 */
void journal_writer_close(struct journal_writer *w);
/* Writers of uid this journal holds: open, and closed ones not yet freed (their rings). */
unsigned journal_writers_of(struct journal *j, uid_t uid);
uint64_t journal_writer_ring_size(const struct journal_writer *w);

/* Allow the segments holding only records below lsn to be reused. */
void journal_truncate(struct journal *j, uint64_t lsn);

/*
 * Segments a reader needs from from_lsn on, oldest first: at most max of them, opened read-only
 * (the caller owns the fds). Also returns the durable LSN a reader may read up to.
 */
struct journal_segment_info {
	uint64_t generation;
	uint64_t first_lsn;
	uint64_t size;
};
int journal_read_segments(struct journal *j, uint64_t from_lsn, unsigned max, int *fds,
			  struct journal_segment_info *infos, unsigned *ret_n, uint64_t *ret_durable_lsn);

void journal_get_stats(struct journal *j, struct journal_stats *ret);

#endif
