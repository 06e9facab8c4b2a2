/* SPDX-License-Identifier: MIT */
/*
 * hugepool.h - libhugepool, the client library of hugepoold. The whole public API.
 *
 * A process connects to the local hugepoold over its Unix socket and leases buffers from the
 * daemon's pool: shared memory that the daemon pre-faulted at boot (hugetlb pages when it could
 * get them), so a freshly started process holds gigabytes of ready memory in milliseconds.
 * Leases belong to the connection: hp_disconnect, exit or a crash (even SIGKILL) ends them all.
 *
 * Conventions: functions return 0 (or a count) on success and a negative errno on failure;
 * hp_strerror() explains one, hp_last_error() gives the daemon's own words for the last failure
 * on a connection. errno is not part of the API. The library never prints and never exits.
 *
 * Thread safety: an hp_conn is not thread-safe: use one connection per thread, or serialise
 * calls on a shared one yourself (a blocking hp_acquire holds the connection while it waits).
 * Different connections are independent. hp_strerror is thread-safe.
 */
#ifndef HUGEPOOL_H
#define HUGEPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HP_VERSION_MAJOR 0
#define HP_VERSION_MINOR 1
#define HP_DEFAULT_SOCKET "/run/hugepool/hugepoold.sock"
#define HP_NAME_MAX 32 /* class names, with the NUL */
#define HP_ACQUIRE_MAX 1024 /* buffers in one hp_acquire */

typedef struct hp_conn hp_conn;

/* A leased buffer, mapped read-write and shared into the calling process. */
struct hp_buffer {
	void *addr;
	size_t size;
	uint64_t lease_id; /* the daemon's name for this lease */
	char class_name[HP_NAME_MAX];
};

/*
 * Connect to hugepoold. socket_path NULL means $HUGEPOOL_SOCKET if set, else HP_DEFAULT_SOCKET.
 * Errors: -ENOENT/-ECONNREFUSED no daemon there, -EACCES not allowed to connect, -EUSERS the
 * daemon refuses more connections (of this uid, or at all), -EPROTONOSUPPORT protocol mismatch.
 */
int hp_connect(const char *socket_path, hp_conn **ret);

/* Close the connection; every buffer still leased through it is unmapped and released. NULL ok. */
void hp_disconnect(hp_conn *c);

/*
 * Lease n buffers (1..HP_ACQUIRE_MAX) of class class_name, all or none, and map them into
 * bufs[0..n-1]. timeout_ms: 0 = only if they are free now, > 0 = wait at most that long,
 * < 0 = wait as long as it takes. Waiters of a class are served in order of arrival.
 * Buffers come faulted in and mapped with their page tables populated; their content is what
 * the previous holder of the same uid left, or zeroes when it passes from another uid.
 * Errors: -ENOENT no such class, -E2BIG more buffers than the class has, -EINVAL n = 0,
 * -EAGAIN not free now (timeout 0), -ETIMEDOUT, -EDQUOT the uid's byte limit, -ENOMEM,
 * -ECONNRESET the daemon went away.
 */
int hp_acquire(hp_conn *c, const char *class_name, unsigned n, int64_t timeout_ms, struct hp_buffer *bufs);

/* Unmap and release n buffers obtained from hp_acquire on this connection. */
int hp_release(hp_conn *c, struct hp_buffer *bufs, unsigned n);

/*
 * Release as hp_release, but leave each buffer's address range mapped: before the daemon is
 * told, the range is replaced in place (mmap MAP_FIXED) by private anonymous memory, so a
 * reference to it that the caller cannot take back (a language runtime's view of the buffer)
 * reads zeroes and writes pages of its own, never faults and never reaches the buffer's next
 * holder. bufs[i].addr stays set; the range is the caller's to munmap(addr, size) once no such
 * reference is left (hp_disconnect does not touch it). -ENOMEM (the map count limit) when a
 * replacement fails: nothing is released (the buffers before it already read zeroes).
 */
int hp_release_keep_range(hp_conn *c, struct hp_buffer *bufs, unsigned n);

/*
 * The status's records: hp_status() fills one struct per class, client, lease, journal and uid
 * with spill files, each reached through an array of pointers (st->journals[i]->name). A struct
 * grows only at its end, and the sections it holds (a journal's batches, durability and path; a
 * class's acquires; a client's heaps) never grow: a figure added later goes at the end of the
 * record that holds them. So a program built against this header keeps working with a later
 * libhugepool, which only ever adds members after those it knows.
 */

/*
 * A latency histogram: buckets[i] counts the samples above bound i - 1 and at most bound i of
 * 1, 2.5, 5, 10, 25, 50, 100, 250, 500 us, 1, 2.5, ... 500 ms, 1, 2.5, 5 and 10 s
 * (HP_LATENCY_BUCKETS bounds); buckets[HP_LATENCY_BUCKETS] those above 10 s.
 */
#define HP_LATENCY_BUCKETS 22
struct hp_latency {
	uint64_t count; /* samples */
	uint64_t sum_ns; /* their sum */
	uint64_t buckets[HP_LATENCY_BUCKETS + 1];
};

/* A class's acquires since the daemon started, by outcome (hp_class_status.acquire). */
struct hp_class_acquire {
	uint64_t acquires, granted, buffers_granted;
	/* refused or failed: over max_bytes_per_uid, timed out, not all free at once and not
	 * willing to wait, more than the class has, no fresh pages to be had */
	uint64_t refused_limit, refused_timeout, refused_all_or_nothing, refused_too_large, refused_renewal;
	uint64_t cancelled; /* its connection ended while it waited */
	struct hp_latency wait; /* from arrival to grant, every granted acquire */
};

/* A client's hugepage heaps (libhugepool-heap), as its library reports them to the daemon. */
struct hp_client_heaps {
	uint64_t heaps; /* open */
	uint64_t heap_buffers; /* leased buffers they hold (part of the client's leases) */
	uint64_t heap_bytes; /* of those buffers' bytes, given to the heaps' allocator */
};

/*
 * How many batches (one write and the sync that covers it) a journal wrote, by the records in
 * them: by_size[0] at most 1 record, by_size[k] more than 2^(k-1) and at most 2^k, the last
 * more than 2^(HP_BATCH_BUCKETS - 2) (1024).
 */
#define HP_BATCH_BUCKETS 12
struct hp_journal_batches {
	uint64_t by_size[HP_BATCH_BUCKETS];
};

/* A journal's latencies and I/O errors since the daemon started (hp_journal_status.durability). */
struct hp_journal_durability {
	uint64_t io_errors; /* writes and syncs that failed */
	uint64_t batch_records; /* records in the batches written (the sum of their sizes) */
	struct hp_latency to_durable; /* per record: taken from its writer's ring -> durable */
	struct hp_latency write_sync; /* per batch: its write and sync */
};

/*
 * How a journal's batches reach the disk. path: the last batch's, "inline-spin" (no more active
 * writers than cpus: written and synced on the daemon's flusher thread while the writers poll),
 * "inline" (the same for more writers than cpus), "queued" (through the I/O backend's queue) or
 * "queued-alt" (backend = auto: through io_uring's queue, set up beside libaio's); "none"
 * before the first batch. With backend = auto (adaptive = 1) the daemon measures which of
 * these makes more records durable per second for more writers than CPUs, and chosen names it
 * once it knows ("" before). why says it in words.
 */
struct hp_journal_path {
	char path[16];
	char chosen[16];
	uint32_t adaptive, cpus;
	uint64_t inline_spin_batches, inline_batches, queued_batches; /* since the daemon started (queued: both queues) */
	uint64_t path_changes; /* adaptive: times the measurements changed the path */
	uint64_t inline_rate, queued_rate; /* adaptive: records/s of each path when last measured (queued: the faster queue) */
	char why[256];
};

/*
 * What hugepoold.conf sets for a journal (hp_journal_status.config). when_full: HP_JOURNAL_BLOCK
 * (the default: with every segment holding records not truncated yet, appends wait for a
 * truncate) or HP_JOURNAL_RECYCLE (the oldest segment is reused: records in it that were not
 * truncated are lost, so a client that keeps records until it truncates them, a broker's
 * journal, must refuse such a journal). max_batch_delay_ns and max_batch_bytes bound a batch;
 * ring_size is the size of the shared-memory ring each writer appends into.
 */
enum hp_journal_when_full {
	HP_JOURNAL_BLOCK = 0,
	HP_JOURNAL_RECYCLE = 1,
};
struct hp_journal_config {
	int when_full; /* enum hp_journal_when_full */
	uint64_t max_batch_delay_ns; /* 0: flushed at once */
	uint64_t max_batch_bytes;
	uint64_t ring_size;
};

/*
 * The pages a class's buffers are on (hp_class_status.pages): hugetlb pages of page_size, or
 * regular shared memory (hugetlb 0, page_size 4096). want_page_size is the hugetlb page size it
 * asked for (its page_size in hugepoold.conf, with auto the one the daemon picked; 0 with
 * hugepages = off); fallback is 1 when it has other pages than those, and fallback_reason says
 * why (too few were free when the daemon started).
 */
struct hp_class_pages {
	uint64_t page_size;
	uint64_t want_page_size;
	int hugetlb;
	int fallback;
	char fallback_reason[128];
};

struct hp_class_status {
	char name[HP_NAME_MAX];
	uint64_t size; /* bytes per buffer */
	uint32_t total, free, leased, waiters;
	uint32_t zeroing; /* being given fresh pages for another uid (counted in none of the others) */
	int retired; /* 1: no longer configured; its buffers still held after a restart, then gone */
	struct hp_class_acquire acquire; /* its acquires since the daemon started, by outcome */
	struct hp_class_pages pages; /* the pages its buffers are on */
};

struct hp_client_status {
	char name[HP_NAME_MAX];
	pid_t pid;
	uid_t uid;
	gid_t gid;
	uint32_t leases;
	uint64_t leased_bytes;
	uint64_t connected_ns; /* CLOCK_REALTIME, ns since the epoch */
	int waiting; /* 1 while an acquire of this client waits */
	uint32_t spill_files; /* spill streams of this client on disk */
	uint64_t spill_bytes; /* bytes charged to them */
	uint64_t spill_streams_memory, spill_bytes_memory; /* its streams in memory, as it reports */
	struct hp_client_heaps heaps; /* its hugepage heaps, as its library reports them */
};

struct hp_lease_status {
	uint64_t lease_id;
	pid_t pid;
	uid_t uid;
	uint32_t class_index; /* into hp_status.classes */
	uint64_t since_ns; /* CLOCK_REALTIME */
};

/* A journal's state (hp_journal_status.state); hp_journal_state_name names it ("ok", ...). */
enum hp_journal_state {
	HP_JOURNAL_OK = 0,
	HP_JOURNAL_FULL = 1, /* every segment holds records after the truncation point: appends wait */
	HP_JOURNAL_FAILED = 2, /* a write or sync failed: read-only until the daemon restarts */
};
const char *hp_journal_state_name(int state);

struct hp_journal_status {
	char name[HP_NAME_MAX];
	char backend[16]; /* "io_uring", "libaio", "sync" */
	int state; /* enum hp_journal_state */
	int error; /* when failed: the negative errno */
	uint64_t next_lsn, durable_lsn, retain_lsn;
	uint64_t appends, bytes, batches, syncs;
	uint32_t writers, segments, segments_used;
	int direct;
	uint64_t segment_size;
	uint64_t sync_p50_ns, sync_p99_ns, sync_p999_ns, sync_max_ns; /* write + sync of a batch */
	double mean_batch; /* records per batch */
	uint64_t recovered_records;
	char note[160]; /* why this backend, or what failed */
	char recovery[200]; /* what recovery found at start */
	struct hp_journal_batches batch_sizes; /* its batches by the records in them */
	struct hp_journal_durability durability; /* its latencies and I/O errors */
	struct hp_journal_path path; /* how its batches reach the disk */
	struct hp_journal_config config; /* what hugepoold.conf sets for it */
};

/* Spill streams, all clients together; limits of 0 mean unlimited. */
struct hp_spill_status {
	char directory[256];
	char method[16]; /* how files are made nameless: "O_TMPFILE" or "unlinked" */
	uint64_t threshold; /* the default in-memory bytes of a stream */
	uint64_t max_bytes, max_bytes_per_uid;
	uint32_t max_files, max_files_per_uid;
	uint64_t bytes, files; /* on disk now: bytes charged, files open */
	uint64_t streams_memory, bytes_memory; /* in memory now, as the clients report */
	uint64_t files_created, bytes_charged_total, refusals, truncated; /* since the daemon started */
	/* of files: closed by their stream or connection but still open in some process; each
	 * counts against its uid's files and is kept empty until the last holder closes it */
	uint64_t lingering;
};

/* How the daemon's current life started: warm (the pool taken over from the previous life) or cold. */
struct hp_start_status {
	uint32_t warm; /* 1: warm */
	uint32_t adopted_buffers, faulted_buffers, dropped_buffers;
	uint32_t adopted_connections, closed_connections; /* served on / closed (they were mid-request) */
	uint64_t lives; /* lives of the daemon that kept this pool, this one included */
	uint64_t ready_ns; /* from the start of this life to ready */
};

/* The daemon's connections, and what the status shows to whom asked. */
struct hp_server_status {
	uint32_t connections; /* open now */
	uint32_t max_connections;
	/* connections refused at a limit since start: max_connections, max_connections_per_uid,
	 * the uid's fds still waiting to be closed, the daemon out of fds */
	uint64_t refused_max_connections, refused_max_connections_per_uid, refused_pending_closes,
		refused_out_of_fds;
	uint64_t acquires_unknown_class; /* acquires naming no class */
	int sees_all; /* 1: the status shows every client and uid (admin or monitor_group) */
};

/* One uid's spill files (open and lingering) and bytes now; its counters since it last had none. */
struct hp_spill_uid_status {
	uid_t uid;
	uint32_t files;
	uint64_t bytes;
	uint64_t files_created, bytes_charged_total, refusals, truncated;
};

struct hp_status {
	char daemon_version[16];
	pid_t daemon_pid;
	uint64_t started_ns; /* CLOCK_REALTIME */
	/* every class's pages in one word (each class's: hp_class_status.pages) */
	uint64_t page_size; /* the smallest page size of any class */
	int hugetlb; /* 1: every class has hugetlb pages */
	int fallback; /* 1: a class has other pages than it asked for (too few were free) */
	char fallback_reason[128]; /* the first such class's reason, after its name */
	uint64_t pool_bytes;
	uint64_t boot_prefault_ns;
	uint32_t boot_threads;
	uint64_t connections_total, acquires, grants, releases, timeouts, denials, protocol_errors,
		recycled_buffers, disconnect_releases;
	uint32_t nclasses, nclients, nleases, njournals;
	struct hp_class_status **classes; /* nclasses */
	struct hp_client_status **clients; /* nclients */
	struct hp_lease_status **leases; /* nleases */
	struct hp_journal_status **journals; /* njournals */
	struct hp_spill_status spill;
	struct hp_start_status start;
	struct hp_server_status server;
	uint32_t nspill_uids;
	struct hp_spill_uid_status **spill_uids; /* each uid with spill files (only yours unless sees_all) */
};

/* The daemon's state. Free the result with hp_status_free. */
int hp_status(hp_conn *c, struct hp_status **ret);
void hp_status_free(struct hp_status *st);

/*
 * For libhugepool-heap: add to the heaps this connection reports in status (hp_client_heaps;
 * deltas, negative to give back). The first call sets up the connection's shared counters page
 * (as hp_spill_open does). Returns 0 or a negative errno.
 */
int hp_conn_report_heaps(hp_conn *c, int64_t heaps, int64_t buffers, int64_t bytes);

/*
 * Restart the daemon: a next life of its binary (a new version after an upgrade) takes over the
 * pool, the clients' connections and their leases, started beside it under a service manager,
 * else re-executed in place (hugepoold.conf(5) restart, hugepoold(8) WARM RESTART).
 * Returns 0 once the daemon has accepted: this connection goes on with the next life (the next
 * request waits until it is ready). -EPERM unless root, the daemon's user or in admin_group;
 * a restart its check refuses fails with the reason in hp_last_error (hp_daemon_restart(3)).
 */
int hp_daemon_restart(hp_conn *c);

/*
 * Journals. A journal is configured in hugepoold.conf ([journal NAME]); records appended to it
 * are numbered by LSN (1, 2, ...) in the order the daemon writes them, and are durable (on disk,
 * synced) only once a wait for them returned 0. The daemon batches the appends of every
 * process into as few writes and syncs as it can.
 *
 * An hp_journal is one writer with its own append ring in shared memory: appending copies the
 * record there, without a system call unless the daemon sleeps. Use one writer per thread; a
 * writer belongs to its connection and must be closed before it. The exception: other threads
 * may wait (hp_journal_wait, _wait_lsn, _durable_lsn, _set_wait_mode) while one thread appends.
 */
typedef struct hp_journal hp_journal;

int hp_journal_open(hp_conn *c, const char *name, hp_journal **ret);
void hp_journal_close(hp_journal *j);

/*
 * Append one record (len bytes, 0..1 MiB) without waiting for it to be durable. Blocks only
 * while the ring is full. *ret_ticket (may be NULL) names the append for hp_journal_wait.
 * Errors: -EMSGSIZE too large, -EIO (or the journal's error) when the journal failed and is
 * read-only, -ECONNRESET the daemon went away (stopped, or restarted: a restart recovers the
 * journal and closes its writers' connections; hp_last_error names the LSN up to which the
 * journal is durable; later records of this writer were not acknowledged and may or may not be
 * on disk: open the journal again on a new connection, read on from there, append what is
 * missing).
 */
int hp_journal_append(hp_journal *j, const void *data, size_t len, uint64_t *ret_ticket);

/* Append n records as one group: consecutive LSNs, durable together. */
int hp_journal_appendv(hp_journal *j, const struct iovec *recs, unsigned n, uint64_t *ret_ticket);

/*
 * hp_journal_appendv with flags (0: the same). HP_JOURNAL_APPEND_LAZY: nobody waits for these
 * records yet, so the daemon need not sync them at once: it holds them up to the journal's
 * max_batch_delay for a record someone waits for, and syncs them with it (what an Artemis
 * broker appends without a sync: a transaction's records before its commit). A wait for them (hp_journal_wait,
 * hp_journal_wait_lsn, hp_journal_close's drain) asks for them at once. They are the daemon's
 * once appended: the writer's process may die without losing them. A daemon older than lazy
 * appends takes them as any other. -EINVAL for an unknown flag.
 */
enum hp_journal_append_flags {
	HP_JOURNAL_APPEND_LAZY = 1u << 0,
};
int hp_journal_appendv_flags(hp_journal *j, const struct iovec *recs, unsigned n, unsigned flags, uint64_t *ret_ticket);

/* Wait until everything appended up to ticket is durable (timeout_ms < 0: no limit; -ETIMEDOUT). */
int hp_journal_wait(hp_journal *j, uint64_t ticket, int64_t timeout_ms);

/* Append and wait until durable; *ret_lsn (may be NULL) gets the record's (first) LSN. */
int hp_journal_append_wait(hp_journal *j, const void *data, size_t len, uint64_t *ret_lsn);
int hp_journal_appendv_wait(hp_journal *j, const struct iovec *recs, unsigned n, uint64_t *ret_first_lsn);

/* Wait until the journal is durable up to lsn, whoever appended it. */
int hp_journal_wait_lsn(hp_journal *j, uint64_t lsn, int64_t timeout_ms);

/* The highest LSN known durable (0: none yet). */
uint64_t hp_journal_durable_lsn(const hp_journal *j);

/*
 * How this writer's waits wait for a sync. HP_JOURNAL_WAIT_SPIN, the default: first polling,
 * yielding the CPU, for as long as the daemon hints it pays (its own thread writes the batch,
 * for about two syncs), then sleeping. HP_JOURNAL_WAIT_SLEEP: sleeping at once. Sleep where the
 * process has other work for the CPUs while this thread waits (a broker's appender thread, whose
 * broker makes the next batch meanwhile): polling takes the CPU time that work needs.
 */
enum hp_journal_wait_mode {
	HP_JOURNAL_WAIT_SPIN = 0,
	HP_JOURNAL_WAIT_SLEEP = 1,
};
int hp_journal_set_wait_mode(hp_journal *j, int mode);

/* Declare records below lsn no longer needed: their segments may be reused. */
int hp_journal_truncate(hp_conn *c, const char *name, uint64_t lsn);

/*
 * A reader replays durable records from from_lsn on, straight from the segment files (mapped
 * read-only; nothing is copied through the daemon). next returns 1 with a record (data valid
 * until the next call), 0 when no more durable records exist right now (call again later for
 * newer ones), or a negative errno: -ESTALE when the records were recycled while being read,
 * -EUCLEAN when a segment is corrupt before the durable end.
 */
typedef struct hp_journal_reader hp_journal_reader;

int hp_journal_reader_open(hp_conn *c, const char *name, uint64_t from_lsn, hp_journal_reader **ret);
int hp_journal_reader_next(hp_journal_reader *r, uint64_t *ret_lsn, const void **ret_data, size_t *ret_len);
void hp_journal_reader_close(hp_journal_reader *r);

/*
 * Merging sorted runs. hp_merge merges k inputs, each sorted by the caller's ordering, into one
 * sorted output that the caller consumes in batches; with a combine function, rows that compare
 * equal are folded into one. Rows have a fixed size (row_size bytes: put keys and values, or
 * offsets into your own memory, in them). Inputs are cursors the caller supplies (arrays, spill
 * streams, callbacks): each call of next gives the input's following batch of rows.
 *
 * The merge runs on a worker pool created once per process (on first use), one thread per
 * online CPU, shared by all merges of the process: a merge uses the workers free at the moment
 * (a busy pool means a serial merge, never a wait for workers), with first-level tasks that
 * merge groups of inputs and a final merge of their outputs; rows move between tasks in
 * batches. Tasks yield after a number of rows that adapts to a target time slice.
 *
 * A merge is driven from one thread; different merges may run at once from different threads.
 * The callbacks (next, cmp, combine) may be called from worker threads, several at a time for
 * different inputs but never concurrently for the same input; cmp and combine must be
 * thread-safe.
 */
struct hp_merge_input {
	/*
	 * Give the input's next batch: set *ret_rows to n rows (n * row_size bytes, valid until the
	 * next call for this input) and return n > 0; return 0 at the end, or a negative errno,
	 * which ends the whole merge with that error.
	 */
	long (*next)(void *ctx, const void **ret_rows);
	void *ctx;
};

struct hp_merge_opts {
	size_t row_size; /* bytes per row, > 0 */
	/* < 0, 0, > 0 as a sorts before, with, after b */
	int (*cmp)(const void *a, const void *b, void *ud);
	/*
	 * optional: fold row into acc (both compare equal); acc is the output row being built.
	 * It must keep the key and be associative: a parallel merge folds within groups of inputs
	 * first, so row may itself be a folded row.
	 */
	void (*combine)(void *acc, const void *row, void *ud);
	void *ud;
	unsigned max_threads; /* threads including the caller's: 0 = as many as useful and free; 1 = serial */
	size_t batch_rows; /* rows per output batch; 0 = 4096 */
	uint64_t slice_ns; /* target time slice of a task before it yields; 0 = 1 ms */
};

typedef struct hp_merge hp_merge;

/* Start a merge of k (1..65536) inputs; the inputs and opts must outlive the merge. */
int hp_merge_open(const struct hp_merge_input *inputs, unsigned k, const struct hp_merge_opts *opts,
		  hp_merge **ret);

/*
 * The next batch of merged rows: *ret_rows points to n rows (valid until the next call) and n > 0
 * is returned; 0 when the merge is complete; a negative errno when an input failed (its error)
 * or the merge was cancelled (-ECANCELED).
 */
long hp_merge_next(hp_merge *m, const void **ret_rows);

/* Stop the merge early (from any thread); hp_merge_next then returns -ECANCELED. */
void hp_merge_cancel(hp_merge *m);

/* Release the merge; waits for its tasks to stop. NULL is fine. */
void hp_merge_close(hp_merge *m);

/*
 * Spill streams: somewhere to put a run of bytes (a sorted run, a partial aggregate) that may be
 * tiny or huge, to read it back later. A stream keeps its bytes in the process's own heap up to
 * its threshold (opts->threshold, else the daemon's spill_threshold, 1 MiB by default); only
 * when a write would take it past the threshold does it get a file from hugepoold, move what
 * it holds there and go on writing in chunks of max(threshold, 64 KiB) (1 MiB for
 * HP_SPILL_ALWAYS_FILE). So small runs never touch a file system, and a stream holds at most
 * one chunk of memory (its buffer grows from 4 KiB by doubling as it fills).
 *
 * Files are unnamed (O_TMPFILE) in the daemon's spill directory, so nothing remains when the
 * process or the daemon dies. Their bytes are charged before they are written against the
 * daemon's limits (spill_max_bytes and spill_max_files for the machine, *_per_uid for each
 * user), and given back on hp_spill_close, on disconnect or death, and after a failed write.
 *
 * Over a limit (-EDQUOT; hp_last_error(c) names the limit) or on a file system error (-ENOSPC,
 * -EIO), hp_spill_write fails and the stream keeps what it held: hp_spill_size says how much (a
 * prefix of everything written), hp_spill_finish and reads still work, further writes fail.
 *
 * A stream is written, finished, then read (any number of times, with rewinds) and closed; it
 * belongs to its connection (close it first) and, like the connection, to one thread at a time.
 */
typedef struct hp_spill hp_spill;

#define HP_SPILL_MEMORY 0 /* hp_spill_state: the bytes are in memory */
#define HP_SPILL_FILE 1 /* in a file (the last chunk may still be in memory after an error) */
#define HP_SPILL_THRESHOLD_MAX (1ull << 30)

struct hp_spill_opts {
	/* in-memory bytes before the stream moves to a file: 0 = the daemon's spill_threshold;
	 * HP_SPILL_ALWAYS_FILE = a file from the first byte; at most HP_SPILL_THRESHOLD_MAX */
	uint64_t threshold;
};
#define HP_SPILL_ALWAYS_FILE UINT64_MAX

/* A new, empty stream (opts may be NULL). The first stream of a connection asks the daemon for
 * its defaults once; later in-memory streams cost no system call. */
int hp_spill_open(hp_conn *c, const struct hp_spill_opts *opts, hp_spill **ret);

/* Append len bytes (any size, 0 included). Errors: see above; -EINVAL after hp_spill_finish. */
int hp_spill_write(hp_spill *s, const void *data, size_t len);

/* End writing: flush to the file if there is one, and start reading from the first byte. */
int hp_spill_finish(hp_spill *s);

/* Copy the next bytes into buf: returns how many (0 at the end) or a negative errno (-EIO). */
ssize_t hp_spill_read(hp_spill *s, void *buf, size_t len);

/*
 * The next bytes without copying: *ret_data points to n bytes (valid until the next call on s),
 * n a multiple of unit (1 to 64 KiB; 1 for any length) and n >= unit unless the stream ends; 0 at
 * the end; -EBADMSG when fewer than unit bytes remain (read them with hp_spill_read).
 * Rows of unit bytes written to a stream come back whole: a ready hp_merge input.
 */
ssize_t hp_spill_next(hp_spill *s, const void **ret_data, size_t unit);

/* Read again from the first byte. */
int hp_spill_rewind(hp_spill *s);

/* HP_SPILL_MEMORY or HP_SPILL_FILE. */
int hp_spill_state(const hp_spill *s);

/* Bytes the stream holds. */
uint64_t hp_spill_size(const hp_spill *s);

/* Free the stream; its file (if any) is truncated and its bytes given back. NULL is fine. */
void hp_spill_close(hp_spill *s);

/* A message for a negative errno returned by this library (static, thread-safe). */
const char *hp_strerror(int err);

/*
 * The daemon's explanation of the last failure on c ("" if none or it gave none). With c NULL:
 * why the calling thread's last hp_connect failed (a refusal's reason from the daemon, or the
 * socket path and system error), "" after a successful one. The text stays valid until the
 * next call on c (or the thread's next hp_connect).
 */
const char *hp_last_error(const hp_conn *c);

#ifdef __cplusplus
}
#endif
#endif
