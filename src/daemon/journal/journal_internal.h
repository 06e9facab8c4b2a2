/* SPDX-License-Identifier: MIT */
/*
 * journal_internal.h - what the journal's files share: the structs of a journal, its writers
 * and its batches, and the few functions one of the files calls in another. The rest of the
 * daemon uses journal.h only.
 *
 *   journal.c           the API of journal.h: open and close a journal, writers (their rings,
 *                       doorbells and per-uid wake pages), truncate, readers' segments, stats;
 *   journal_flusher.c   the flusher thread: gather from the rings into batches, the flush rule,
 *                       write and sync, publish what is durable and wake the writers;
 *   journal_segments.c  the files: segments (create, open, move on), recovery at start, and
 *                       the NAME.clean and NAME.retain marker files;
 *   journal_fs.c        the system calls by which those files change (made, written, synced,
 *                       renamed, removed), each told to a tap the crash-point tests record;
 *   journal_path.c      which way a batch goes to the disk, and backend = auto's controller
 *                       that measures inline against queued (its own header, journal_path.h).
 *
 * Locking: `lock` guards the writer list, state, counters and retain_lsn; the flusher holds it
 * while it gathers and publishes, and drops it while it sleeps and around every call into jio
 * (no I/O and no sync under a lock the event loop takes). Segment bookkeeping, batches
 * and the LSN counter belong to the flusher alone (journal_read_segments reads them under the
 * lock, which the flusher holds whenever it changes them).
 */
#ifndef HP_JOURNAL_INTERNAL_H
#define HP_JOURNAL_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "jformat.h"
#include "jio.h"
#include "journal.h"
#include "journal_path.h"
#include "jring.h"

#define JOURNAL_INFLIGHT 2
#define NBATCH (JOURNAL_INFLIGHT + 1)
#define SEGMENTS_MAX 1024 /* the most a journal's `segments` may say (config.c) */

struct segment {
	int fd; /* the daemon's one description of the file (ofd.h); readers get their own */
	/*
	 * Someone may hold this file: a reader was given it since it was made, or the daemon started
	 * since (a previous life's reader may hold any segment). Before a new generation goes into
	 * it, a write lease probes whether anyone does, and if so it gets a new file, so that nobody
	 * reads a generation through an fd handed out for an earlier one (segment_start,
	 * segment_renew).
	 */
	bool shared;
	uint64_t generation; /* 0: never used */
	uint64_t first_lsn;
	uint64_t end_lsn; /* after its last record; for the current segment see j->next_lsn */
};

struct journal_writer {
	struct journal *j;
	struct jring_hdr *hdr; /* the shared mapping: header page then data */
	uint8_t *data;
	uint64_t size, map_len;
	uint64_t head; /* consumed, the daemon's own copy (the shared one is only informative) */
	uint64_t max_entry; /* disk bytes of one entry: our copy, the client can write the header */
	int doorbell; /* its eventfd, in the flusher's epoll set; shared with its client */
	struct wake_group *group; /* the wake page of its uid's writers of this journal */
	uid_t uid;
	pid_t pid;
	bool closed; /* under lock: its client is gone; freed once no batch refers to it */
	uint64_t end_tail; /* closed: the ring's tail then (under lock); nothing past it is taken */
	bool broken; /* its ring broke the protocol: consumed no further */
	unsigned refs; /* batches in flight that will publish into it (flusher only) */
	uint64_t active_ns; /* when it last had something to gather */
	bool in_batch; /* contributed to the filling batch */
	uint64_t lazy_end; /* the end of its lazy entries in the filling batch (0: none; jring.h) */
	uint64_t want_seen; /* the most of the client's `want` taken (jring_take_want: it only grows) */
	TAILQ_ENTRY(journal_writer) link;
};

/*
 * The wake page of one uid's writers of a journal. Writers of one uid share it, so one
 * FUTEX_WAKE wakes all of them (a publish covers many writers: one wake-up per uid, not per
 * writer); writers of different uids never share one, so what a client scribbles on its page
 * delays only its own uid, which can do worse to itself anyway.
 */
struct wake_group {
	uid_t uid;
	unsigned refs; /* writers using it */
	int fd; /* the memfd, duplicated for each writer's client */
	struct jring_wake *wake;
	LIST_ENTRY(wake_group) link;
};

struct batch_ref {
	struct journal_writer *w;
	uint64_t end; /* ring position durable once this batch is */
};

/*
 * The records of a batch taken in one gather pass (at time t): once the batch is durable, each
 * counts now - t in the journal's append-to-durable latency. A batch filled in more passes than
 * BATCH_WAVES counts the last ones from the time of its last wave, never later than their own.
 */
#define BATCH_WAVES 8
struct batch_wave {
	uint64_t t;
	uint64_t records;
};

struct batch {
	uint8_t *buf; /* aligned, cap bytes */
	size_t cap, len;
	unsigned seg;
	uint64_t off; /* file offset of buf[0] */
	uint64_t first_lsn, end_lsn;
	uint64_t t_first, t_submit;
	struct batch_ref *refs;
	unsigned nrefs, refs_cap;
	struct batch_wave waves[BATCH_WAVES];
	unsigned nwaves;
	bool urgent; /* holds an entry someone waits for (or a writer that has no lazy entries) */
	bool inflight, done;
	int res;
	enum jpath path; /* how it went to the disk */
	unsigned writers; /* writers open when it was submitted */
	size_t rec_len; /* bytes of its records, before the padding of O_DIRECT */
	struct jio_req req;
};

struct journal {
	struct config_journal cfg;
	int dirfd;
	struct segment *segs;
	unsigned cur; /* segment being written */
	uint64_t cur_off; /* next write offset in it */
	uint64_t next_lsn, durable_lsn, max_gen;
	struct jio *io;
	uint8_t *hdr_block; /* JFORMAT_BLOCK aligned bytes: the header of a segment being opened */
	int doorbell; /* the daemon's own: closes, truncates, stop; never handed out */
	int epfd; /* the writers' doorbells, edge-triggered: never read or written by the daemon */
	pthread_t thread;
	bool thread_started;
	bool stopped; /* journal_stop done: final on disk, files closed */
	/* recovery removed the clean-stop marker and the directory is not synced since: sync it
	 * (journal_marker_sync) before this life writes in a segment */
	bool dir_unsynced;
	pthread_mutex_t lock;
	TAILQ_HEAD(, journal_writer) writers;
	unsigned nwriters;
	LIST_HEAD(, wake_group) groups; /* under lock; created by the event loop only */
	struct batch batches[NBATCH];
	unsigned fill; /* index of the filling batch */
	unsigned order[NBATCH], norder; /* in-flight batches, oldest first */
	/* the adaptive estimate (flusher only) */
	double ewma_sync_ns, ewma_rate; /* bytes per ns */
	uint64_t last_submit_ns;
	bool wake_pending; /* published since the last wake_writers (flusher only) */
	bool few_recent; /* the last batch served no more writers than CPUs (flusher only) */
	unsigned spin_skip, spin_skip_left; /* spin_for_append's back-off (flusher only) */
	/* backend = auto with a queue: more writers than CPUs go inline or through a queue as path says
	 * (journal_path.h); the controller is the flusher's, status reads it under lock */
	bool adaptive;
	struct jpath_ctl path;
	/* under lock */
	bool stop;
	bool mark_durable; /* with stop: the flusher's last act, clean_mark, syncs the marker */
	uint64_t retain_lsn;
	bool retain_dirty; /* retain_lsn changed since it was last written to NAME.retain */
	struct journal_stats st;
};

/* journal.c */
/* Why batches of more writers than CPUs go the way they do (backend = auto), in words, with the
 * names of the jio queues behind queued and queued-alt. Returns buf. */
const char *journal_path_words(const struct journal *j, char *buf, size_t len);
/* Free a writer no batch refers to: under the lock, or with the flusher stopped (it lets go of
 * the writer's wake group, which the flusher walks). */
void writer_free(struct journal_writer *w);

/* journal_flusher.c */
/* Make b the empty filling batch, starting at the next LSN. */
void batch_reset(struct journal *j, struct batch *b);
/* The flusher thread (arg: the journal). Returns once stop is set and nothing is in flight, the
 * end marked clean (clean_mark). */
void *flusher_main(void *arg);

/* journal_segments.c */
/* Open the next segment for the next batch, its header durable (the flusher, under the lock,
 * with no batch in flight); -ENOSPC when it still holds needed records. */
int segment_start(struct journal *j);
/* Save the truncation point in NAME.retain (the flusher, without the lock). */
void retain_persist(struct journal *j, uint64_t lsn);
/* The flusher's last act: record where the journal ends in NAME.clean (durable: synced). */
void clean_mark(struct journal *j, bool durable);
/* Open (create when missing) every segment file, each taken as held by a reader (shared) until
 * probed. Logs. */
int segment_open_all(struct journal *j);
/* Find where the journal ends; sets the segments, the LSNs and the retention point. Logs. */
int journal_recover(struct journal *j);
/* Make the clean-stop marker's removal durable, if recovery left it not yet (dir_unsynced):
 * before the first write in a segment of this life. 0 or -errno. */
int journal_marker_sync(struct journal *j);
/*
 * After recovery: if someone holds the segment the journal goes on in (a reader of a previous
 * life, whose access may be revoked now), give it a new file with the same records, so that
 * nothing appended from now on reaches that reader. Logs.
 */
int segment_leave_readers(struct journal *j);
/*
 * Give segment i a new file under its name: its first keep bytes copied, zeros after them,
 * durable before it replaces the old one, which whoever holds it keeps as it was. The new fd
 * in *ret_fd; the caller swaps it in. Without the lock (it writes the whole segment).
 */
int segment_renew(struct journal *j, unsigned i, uint64_t keep, int *ret_fd);
/* The used segments (a generation given), oldest first: fills order (SEGMENTS_MAX), returns
 * how many. */
unsigned segments_in_order(const struct journal *j, unsigned *order);

#endif
