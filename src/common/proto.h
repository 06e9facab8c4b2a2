/* SPDX-License-Identifier: MIT */
/*
 * proto.h - the wire protocol between hugepoold and its clients (libhugepool, hugepoolctl).
 *
 * A Unix stream socket carries control messages only; data lives in shared memory whose fds
 * travel with SCM_RIGHTS. Every message is a fixed 16-byte header followed by `len` payload
 * bytes; fixed-size payload structs are packed little-endian (the host order on every platform
 * we build for, asserted below). The protocol is strictly request/reply: a client sends one
 * request and reads messages until its reply is complete; the daemon never sends unsolicited.
 * proto_check_header() is the single place that decides whether a header is acceptable, before
 * any payload byte is read. docs/PROTOCOL.md is the prose form of this file.
 */
#ifndef HP_PROTO_H
#define HP_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire protocol is little-endian");

#define PROTO_MAGIC 0x50475548u /* "HUGP" */
/*
 * Versions. A client speaks PROTO_VERSION; the daemon serves every version from
 * PROTO_VERSION_MIN on, answering each connection in the version of its hello (a later message
 * in another version is a protocol error). A new version only adds: request types (refused on
 * connections of older versions) and sections at the end of a reply (not sent to them). So a
 * daemon upgraded under running clients (a warm restart) goes on serving them as they expect.
 * 2: journals (open sends 3 fds), njournals in status; 3: spill streams; 4: restart request,
 * the start section of status; 5: records per batch of each journal, and each client's heaps
 * (from its counters page) at the end of status; 6: what monitoring needs at the end of status
 * (connections and refusals, each class's acquires by outcome and their wait, each journal's
 * latencies and I/O errors, each uid's spill figures) and each journal's path to the disk
 * (inline or queued, and why); 7: each class's pages at the end of status (a pool's classes may
 * have pages of different sizes); 8: each journal's configuration at the end of status (when_full
 * and its batch limits: a client that keeps records until it truncates them must refuse a
 * journal that recycles).
 */
#define PROTO_VERSION 8
#define PROTO_VERSION_MIN 3
#define PROTO_NAME_MAX 32 /* class and client names on the wire, NUL-padded */
#define PROTO_MAX_FDS 32 /* fds in one message; grants larger than this are split */
#define PROTO_ACQUIRE_MAX 1024 /* buffers in one acquire */
#define PROTO_RELEASE_MAX 1024 /* leases in one release */
#define PROTO_REPLY_MAX (64u << 20) /* largest payload the daemon sends (status) */
#define PROTO_TEXT_MAX 256 /* error text in a result */

struct proto_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type; /* enum proto_type */
	uint32_t len; /* payload bytes after the header */
	uint32_t nfds; /* fds attached with SCM_RIGHTS to this message */
};
_Static_assert(sizeof(struct proto_hdr) == 16, "header size");

/*
 * Every message type, once; the enum, proto.c's rule table and parsers, and the daemon's
 * dispatch table are all generated from these two lists.
 *
 * A request: X(NAME, value, member, "wire-name", answer, min_len, max_len). member is its
 * union proto_request member and names its parser parse_<member> (proto.c) and its handler
 * handle_<member> (the daemon); answer is NOW when the handler has sent the reply by the time
 * it returns, LATER when a callback sends it (an acquire waits for buffers). Requests carry no
 * fds. The comment says what answers it; any request may instead get a RESULT with an error.
 *
 * A reply: Y(NAME, value, "wire-name", max_fds, min_len, max_len).
 *
 * The lengths come last so that PROTO_FIXED(type) may stand for both.
 */
#define PROTO_FIXED(type) sizeof(type), sizeof(type)
#define PROTO_REQUESTS(X)                                                                                     \
	X(HELLO, 1, hello, "hello", NOW, PROTO_FIXED(struct proto_hello)) /* WELCOME */                         \
	X(ACQUIRE, 2, acquire, "acquire", LATER, PROTO_FIXED(struct proto_acquire)) /* GRANT... */              \
	X(RELEASE, 3, release, "release", NOW, sizeof(struct proto_release) + 8,                                \
	  sizeof(struct proto_release) + 8 * PROTO_RELEASE_MAX) /* + ids; RESULT */                            \
	X(STATUS, 4, status, "status", NOW, PROTO_FIXED(struct proto_status_req)) /* STATUS_REPLY */           \
	X(JOURNAL_OPEN, 5, journal_open, "journal-open", NOW, PROTO_FIXED(struct proto_journal_open)) /* OPENED */   \
	X(JOURNAL_CLOSE, 6, journal_close, "journal-close", NOW, PROTO_FIXED(struct proto_journal_close))            \
	X(JOURNAL_TRUNCATE, 7, journal_truncate, "journal-truncate", NOW, PROTO_FIXED(struct proto_journal_truncate)) \
	X(JOURNAL_READ, 8, journal_read, "journal-read", NOW, PROTO_FIXED(struct proto_journal_read)) /* SEGMENTS */ \
	X(SPILL_ATTACH, 9, spill_attach, "spill-attach", NOW, PROTO_FIXED(struct proto_spill_attach)) /* ATTACHED */ \
	X(SPILL_CREATE, 10, spill_create, "spill-create", NOW, PROTO_FIXED(struct proto_spill_create)) /* CREATED */ \
	X(SPILL_CHARGE, 11, spill_charge, "spill-charge", NOW, PROTO_FIXED(struct proto_spill_charge))              \
	X(SPILL_CLOSE, 12, spill_close, "spill-close", NOW, PROTO_FIXED(struct proto_spill_close))               \
	X(RESTART, 13, restart, "restart", NOW, PROTO_FIXED(struct proto_restart)) /* v4; RESULT, then the next life */

#define PROTO_REPLIES(Y)                                                                                      \
	Y(WELCOME, 64, "welcome", 0, PROTO_FIXED(struct proto_welcome))                                       \
	Y(RESULT, 65, "result", 0, sizeof(struct proto_result), sizeof(struct proto_result) + PROTO_TEXT_MAX) \
	/* + entries, one fd per entry */                                                                       \
	Y(GRANT, 66, "grant", PROTO_MAX_FDS, sizeof(struct proto_grant) + sizeof(struct proto_grant_entry),     \
	  sizeof(struct proto_grant) + PROTO_MAX_FDS * sizeof(struct proto_grant_entry))                        \
	/* + classes, clients, leases, journals, spill */                                                       \
	Y(STATUS_REPLY, 67, "status-reply", 0, sizeof(struct proto_status), PROTO_REPLY_MAX)                  \
	/* fds: the writer's ring memfd, its doorbell eventfd, its uid's wake page memfd */                     \
	Y(JOURNAL_OPENED, 68, "journal-opened", 3, PROTO_FIXED(struct proto_journal_opened))                  \
	/* + entries, one fd each */                                                                           \
	Y(JOURNAL_SEGMENTS, 69, "journal-segments", PROTO_MAX_FDS, sizeof(struct proto_journal_segments),      \
	  sizeof(struct proto_journal_segments) + PROTO_MAX_FDS * sizeof(struct proto_journal_segment))         \
	/* fd: the connection's counters page */                                                                  \
	Y(SPILL_ATTACHED, 70, "spill-attached", 1, PROTO_FIXED(struct proto_spill_attached))                  \
	/* fd: the spill file, read-write */                                                                   \
	Y(SPILL_CREATED, 71, "spill-created", 1, PROTO_FIXED(struct proto_spill_created))

#define PROTO_ENUM_REQUEST(name, value, ...) PROTO_##name = value,
#define PROTO_ENUM_REPLY(name, value, ...) PROTO_##name = value,
enum proto_type { PROTO_REQUESTS(PROTO_ENUM_REQUEST) PROTO_REPLIES(PROTO_ENUM_REPLY) };
#undef PROTO_ENUM_REQUEST
#undef PROTO_ENUM_REPLY

struct proto_hello {
	char name[PROTO_NAME_MAX]; /* the client's own name (its comm), for status; informative */
	uint32_t flags; /* must be 0 */
	uint32_t reserved; /* must be 0 */
};

struct proto_welcome {
	uint32_t version; /* PROTO_VERSION */
	uint32_t nclasses;
	uint64_t page_size; /* the smallest page size of any class (status says each one's) */
	char daemon_version[16];
};

struct proto_acquire {
	char class_name[PROTO_NAME_MAX];
	uint32_t count; /* 1..PROTO_ACQUIRE_MAX */
	uint32_t flags; /* must be 0 */
	int64_t timeout_ms; /* 0 = try once, < 0 = wait forever */
};

/* An acquire is answered by ceil(total / PROTO_MAX_FDS) grants, in order, then nothing more. */
struct proto_grant {
	uint32_t total; /* buffers granted by the acquire */
	uint32_t first; /* index of entries[0] among them */
	uint32_t n; /* entries (and fds) in this message */
	uint32_t reserved;
	/* followed by n struct proto_grant_entry */
};

struct proto_grant_entry {
	uint64_t lease_id;
	uint64_t size;
};

struct proto_release {
	uint32_t n; /* 1..PROTO_RELEASE_MAX */
	uint32_t reserved;
	/* followed by n uint64_t lease ids */
};

struct proto_result {
	int32_t err; /* 0 or a negative errno */
	uint32_t text_len; /* bytes of text that follow, 0..PROTO_TEXT_MAX, no NUL */
};

struct proto_status_req {
	uint32_t flags; /* must be 0 */
	uint32_t reserved;
};

struct proto_journal_open {
	char name[PROTO_NAME_MAX];
	uint64_t ring_size; /* 0 = the journal's default; else a power of two, 64 KiB..64 MiB */
	uint32_t flags; /* must be 0 */
	uint32_t reserved;
};

struct proto_journal_opened {
	uint64_t writer_id; /* names the writer in PROTO_JOURNAL_CLOSE */
	uint64_t ring_size;
	uint64_t durable_lsn;
};

struct proto_journal_close {
	uint64_t writer_id;
};

struct proto_journal_truncate {
	char name[PROTO_NAME_MAX];
	uint64_t lsn; /* records below it may be discarded */
};

struct proto_journal_read {
	char name[PROTO_NAME_MAX];
	uint64_t from_lsn;
};

/* The segment files holding from_lsn on, oldest first, each opened read-only. */
struct proto_journal_segments {
	uint32_t n; /* entries and fds, at most PROTO_MAX_FDS */
	uint32_t more; /* 1: more segments follow from_lsn = the last one's end */
	uint64_t durable_lsn; /* read no record above it */
	/* followed by n struct proto_journal_segment */
};

struct proto_journal_segment {
	uint64_t generation;
	uint64_t first_lsn;
	uint64_t size;
};

/*
 * Spill streams. A client attaches once per connection and gets the default threshold and its
 * counters page (struct proto_counters_page), where it counts its in-memory streams and its
 * heaps, which the daemon never sees otherwise. A stream that outgrows memory asks for a file: an unnamed file in the
 * daemon's spill directory, limited in number per uid and for the machine. Before writing
 * past what it was charged, the client asks for the stream's new total (PROTO_SPILL_CHARGE);
 * the daemon charges the difference against the uid's and the machine's byte limits, or
 * refuses with the limit's name. A lower total gives bytes back (after a failed write).
 * Closing the file, or the connection, truncates it, closes the daemon's fd and refunds all.
 */
struct proto_spill_attach {
	uint32_t flags; /* must be 0 */
	uint32_t reserved;
};

struct proto_spill_attached {
	uint64_t threshold; /* spill_threshold: the default in-memory bytes of a stream */
	uint64_t page_size; /* bytes of the counters page memfd sent with this message */
};

/* A field of the status lists below (and of the counters page): declared as it is named. */
#define PROTO_FIELD(kind, type, name, metric) type name;

/*
 * A client's hugepage heaps: words of its counters page (struct proto_counters_page), and from version
 * 5 on one struct proto_status_heaps per client record, in the same order, after the journals'
 * batches; the same names in struct hp_client_heaps.
 */
#define PROTO_STATUS_HEAPS_FIELDS(X)                                                          \
	X(NUM, uint64_t, heaps, NOMETRIC) /* heaps open */ \
	X(NUM, uint64_t, heap_buffers, NOMETRIC) /* leased buffers they hold */ \
	X(NUM, uint64_t, heap_bytes, NOMETRIC) /* bytes of those buffers given to the heaps' allocator */

/*
 * The connection's counters page: written by the client (atomics), read by the daemon for status
 * only. Its spill streams in memory, and (version 5 on; zero before) its hugepage heaps
 * (libhugepool-heap), which the daemon cannot tell from other leases.
 */
struct proto_counters_page {
	uint64_t streams_memory; /* open streams that are still in memory */
	uint64_t bytes_memory; /* bytes those streams hold */
	PROTO_STATUS_HEAPS_FIELDS(PROTO_FIELD)
	uint64_t reserved[3];
};
_Static_assert(sizeof(struct proto_counters_page) == 64, "the counters page's layout is the wire's");

struct proto_spill_create {
	uint32_t flags; /* must be 0 */
	uint32_t reserved;
	uint64_t charge; /* bytes to charge at once (what the client writes first), as a charge */
};

struct proto_spill_created {
	uint64_t file_id; /* names the file in charge and close requests */
};

struct proto_spill_charge {
	uint64_t file_id;
	uint64_t total; /* bytes the file may hold from now on */
};

struct proto_spill_close {
	uint64_t file_id;
};

/*
 * A latency histogram, as the daemon measures one and a status reply carries it: buckets[i] counts
 * the samples above the bound i - 1 and at most bound i of PROTO_LATENCY_BOUNDS (in ns: 1 us to
 * 10 s, 1-2.5-5 in each decade, the buckets a Prometheus histogram has), the last those above
 * 10 s; count and sum_ns of all of them. proto_latency_add (proto.c) records n samples of ns
 * each: O(log buckets), no allocation; the owner of the struct serialises.
 */
#define PROTO_LATENCY_BOUNDS(X)                                                                \
	X(1000) X(2500) X(5000) X(10000) X(25000) X(50000) X(100000) X(250000) X(500000)     \
	X(1000000) X(2500000) X(5000000) X(10000000) X(25000000) X(50000000) X(100000000)    \
	X(250000000) X(500000000) X(1000000000) X(2500000000) X(5000000000) X(10000000000)
#define PROTO_LATENCY_ONE(ns) +1
#define PROTO_LATENCY_NBOUNDS (0 PROTO_LATENCY_BOUNDS(PROTO_LATENCY_ONE))

struct proto_latency {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t buckets[PROTO_LATENCY_NBOUNDS + 1];
};

/* The bounds, in order (PROTO_LATENCY_NBOUNDS of them). */
extern const uint64_t proto_latency_bounds[PROTO_LATENCY_NBOUNDS];
void proto_latency_add(struct proto_latency *h, uint64_t ns, uint64_t n);

/*
 * The numbers of a status section, described once: X(kind, type, name, metric) in wire order.
 * The wire struct is generated from the list; so are libhugepool's copy into the public struct
 * (which declares the same names) and hugepoolctl's JSON for every NUM and CALC field; the
 * daemon's copy from its own stats struct (same names) for every NUM field. A CALC field the
 * daemon computes (a percentile); an OWN field is on the wire like the others, but filled,
 * decoded and shown by hand (a state name, a bool, a scaled value). A HIST field is a struct
 * proto_latency, copied like a NUM one into the public struct hp_latency. An ENUM field is a
 * value of a table of names (when_full: PROTO_JOURNAL_WHEN_FULL): filled, checked against its
 * table and shown by its name by hand, as an OWN one; but the public struct holds the value
 * under the field's name (an int), and its metric is made from it as a NUM one's (a table of
 * two values, 0 and 1, makes a 0/1 gauge).
 * metric says what `hugepoolctl metrics` makes of a NUM, CALC or ENUM field: NOMETRIC, nothing; or
 * M(type, "name", "label", "help"): the sample of the family hugepool_<name> (Prometheus' names:
 * base units, _bytes and _seconds at the end; _total is added to a counter's samples) with that
 * constant label ("" or reason="limit": rows of one family follow each other), whose # HELP
 * is the help of its first row. type: GAUGE, COUNTER, GAUGE_S (a gauge in ns shown in seconds),
 * HIST (a HIST field: the histogram hugepool_<name>, in seconds).
 * A new counter: one line here, its line in hugepool.h, and the daemon code that counts it.
 * (PROTO_FIELD, which declares them, stands above struct proto_counters_page, its first user.)
 */
/* The machine's spill state in a status reply. */
#define PROTO_STATUS_SPILL_FIELDS(X)                                                          \
	X(NUM, uint64_t, threshold, M(GAUGE, "spill_threshold_bytes", "", "In-memory bytes of a spill stream before it asks for a file (spill_threshold)")) \
	X(NUM, uint64_t, max_bytes, M(GAUGE, "spill_limit_bytes", "", "spill_max_bytes: the most bytes charged to spill files at once (0: unlimited)")) \
	X(NUM, uint64_t, max_bytes_per_uid, M(GAUGE, "spill_uid_limit_bytes", "", "spill_max_bytes_per_uid: the most spill bytes of one uid (0: unlimited)")) \
	X(NUM, uint32_t, max_files, M(GAUGE, "spill_limit_files", "", "spill_max_files: the most spill files at once (0: unlimited)")) \
	X(NUM, uint32_t, max_files_per_uid, M(GAUGE, "spill_uid_limit_files", "", "spill_max_files_per_uid: the most spill files of one uid (0: unlimited)")) \
	X(NUM, uint64_t, bytes, M(GAUGE, "spill_bytes", "", "Bytes charged to spill files now")) \
	X(NUM, uint64_t, files, M(GAUGE, "spill_files", "", "Spill files now, lingering ones included")) \
	X(NUM, uint64_t, streams_memory, M(GAUGE, "spill_memory_streams", "", "Spill streams still in their clients' memory, as the clients report")) \
	X(NUM, uint64_t, bytes_memory, M(GAUGE, "spill_memory_bytes", "", "Bytes those streams hold, as the clients report")) \
	X(NUM, uint64_t, files_created, M(COUNTER, "spill_files_created", "", "Spill files made")) \
	X(NUM, uint64_t, bytes_charged_total, M(COUNTER, "spill_charged_bytes", "", "Bytes charged to spill files")) \
	X(NUM, uint64_t, refusals, M(COUNTER, "spill_refusals", "", "Spill files or bytes refused at a limit")) \
	X(NUM, uint64_t, truncated, M(COUNTER, "spill_truncations", "", "Spill files cut back to their charge by an audit")) \
	X(NUM, uint64_t, lingering, M(GAUGE, "spill_lingering_files", "", "Spill files closed by their streams but still open in some process"))

struct proto_status_spill {
	char directory[256];
	char method[16]; /* "O_TMPFILE" or "unlinked" */
	PROTO_STATUS_SPILL_FIELDS(PROTO_FIELD)
};

/* How this life of the daemon started (version 4: the last section of a status reply). */
#define PROTO_STATUS_START_FIELDS(X)                                                          \
	X(NUM, uint32_t, warm, M(GAUGE, "start_warm", "", "1: this life of the daemon took over the pool of the previous one (warm start); 0: cold")) \
	X(NUM, uint32_t, adopted_buffers, M(GAUGE, "start_adopted_buffers", "", "Buffers taken over from the previous life at this start")) \
	X(NUM, uint32_t, faulted_buffers, M(GAUGE, "start_faulted_buffers", "", "Buffers made and faulted in at this start")) \
	X(NUM, uint32_t, dropped_buffers, M(GAUGE, "start_dropped_buffers", "", "Buffers the previous life left that the configuration has no room for")) \
	X(NUM, uint32_t, adopted_connections, M(GAUGE, "start_adopted_connections", "", "Connections served on from the previous life")) \
	X(NUM, uint32_t, closed_connections, M(GAUGE, "start_closed_connections", "", "Connections the previous life left in the middle of a request, closed")) \
	X(NUM, uint64_t, lives, M(GAUGE, "lives", "", "Lives of the daemon that kept this pool, this one included (restarts + 1)")) \
	X(NUM, uint64_t, ready_ns, M(GAUGE_S, "start_ready_seconds", "", "From the start of this life of the daemon to ready"))

struct proto_status_start {
	PROTO_STATUS_START_FIELDS(PROTO_FIELD)
};

/*
 * Version 5 on: after the start section, one per journal (in the journals' order): how many
 * batches it wrote of each size in records. by_size[0]: at most 1 record; by_size[k], k from 1:
 * more than 2^(k-1) and at most 2^k; the last: more than 2^(PROTO_BATCH_BUCKETS - 2).
 */
#define PROTO_BATCH_BUCKETS 12
struct proto_status_batches {
	uint64_t by_size[PROTO_BATCH_BUCKETS];
};

struct proto_status_heaps {
	PROTO_STATUS_HEAPS_FIELDS(PROTO_FIELD)
};

/*
 * Version 6 on: after the heaps section, one per journal (in the journals' order): which way
 * its batches go to the disk, "inline-spin" (no more active writers than CPUs: written and
 * synced on the flusher's thread, the writers poll), "inline" (the same for more writers),
 * "queued" (through the backend's queue) or "queued-alt" (auto: through io_uring's queue beside
 * libaio's), and why. With backend = auto (adaptive) the journal measures which of these makes
 * more records durable per second for more writers than CPUs, and chosen names it once it
 * knows. queued_batches counts both queues; queued_rate is the faster queue's.
 */
#define PROTO_STATUS_JPATH_FIELDS(X)                                                          \
	X(NUM, uint32_t, adaptive, M(GAUGE, "journal_path_adaptive", "", "1: backend = auto chooses its path by measuring")) \
	X(NUM, uint32_t, cpus, NOMETRIC) /* up to this many active writers: inline-spin */    \
	X(NUM, uint64_t, inline_spin_batches, M(COUNTER, "journal_path_batches", "path=\"inline_spin\"", "Batches written by each path: inline_spin (no more active writers than CPUs), inline (on the flusher's thread, more writers), queued (through the backend's queue, or auto's two)")) \
	X(NUM, uint64_t, inline_batches, M(COUNTER, "journal_path_batches", "path=\"inline\"", "")) \
	X(NUM, uint64_t, queued_batches, M(COUNTER, "journal_path_batches", "path=\"queued\"", "")) \
	X(NUM, uint64_t, path_changes, M(COUNTER, "journal_path_changes", "", "backend = auto: times its measurements changed the path")) \
	X(NUM, uint64_t, inline_rate, NOMETRIC) /* adaptive: records/s of the last window of each path */ \
	X(NUM, uint64_t, queued_rate, NOMETRIC)

struct proto_status_jpath {
	char path[16]; /* the last batch's; "none" before the first */
	char chosen[16]; /* adaptive: "inline", "queued" or "queued-alt" once measured, else "" */
	PROTO_STATUS_JPATH_FIELDS(PROTO_FIELD)
	char why[256];
};

/*
 * Version 7 on: one per class, in the classes' order, after the journals' paths: the pages its
 * buffers are on. page_size: a hugetlb page's, or 4096 for regular shared memory;
 * want_page_size: the hugetlb page it asked for (its page_size, with auto 1 GiB or 2 MiB as the
 * daemon picked; 0 with hugepages = off); fallback: 1 when it has other pages than those,
 * fallback_reason why (too few were free at start, or mmap could not reserve them).
 */
#define PROTO_STATUS_PAGES_FIELDS(X)                                                          \
	X(NUM, uint64_t, page_size, M(GAUGE, "class_page_size_bytes", "", "Bytes of each page of the class's buffers: a hugetlb page's, or 4096 for regular shared memory")) \
	X(NUM, uint64_t, want_page_size, NOMETRIC) \
	X(NUM, uint32_t, hugetlb, NOMETRIC) /* 1: hugetlb pages of page_size */ \
	X(NUM, uint32_t, fallback, M(GAUGE, "class_page_fallback", "", "1: the class has other pages than it asked for (too few were free when the daemon started)"))

struct proto_status_pages {
	PROTO_STATUS_PAGES_FIELDS(PROTO_FIELD)
	char fallback_reason[128];
};

/* "1", "2", "3-4", ..., "1025+": the records of a batch in by_size[k]; returns buf. */
const char *proto_batch_bucket_name(unsigned k, char *buf, size_t len);

/* The by_size index of a batch of n records. */
static inline unsigned proto_batch_bucket(uint64_t n)
{
	unsigned k = 0;

	while (k < PROTO_BATCH_BUCKETS - 1 && (1ull << k) < n)
		k++;
	return k;
}

/* struct proto_status's one word for every class (the pages section says each one's) */
#define PROTO_POOL_HUGETLB 1u /* every class has hugetlb pages; page_size is the smallest */
#define PROTO_POOL_FALLBACK 2u /* a class has other pages than it asked for; fallback_reason: the first one's */

/* The daemon's counters since it started, in struct proto_status: a status list as those below. */
#define PROTO_STATUS_COUNTERS(X)                                                              \
	X(NUM, uint64_t, connections_total, M(COUNTER, "connections", "", "Connections accepted")) \
	X(NUM, uint64_t, acquires, NOMETRIC) /* every acquire; by class in struct proto_status_acquire */ \
	X(NUM, uint64_t, grants, NOMETRIC)                                                    \
	X(NUM, uint64_t, releases, M(COUNTER, "released_leases", "", "Leases released by their holders")) \
	X(NUM, uint64_t, timeouts, NOMETRIC)                                                  \
	X(NUM, uint64_t, denials, NOMETRIC) /* at the byte and the connection limits of uids */ \
	X(NUM, uint64_t, protocol_errors, M(COUNTER, "protocol_errors", "", "Connections closed for breaking the protocol")) \
	X(NUM, uint64_t, recycled_buffers, M(COUNTER, "renewed_buffers", "", "Buffers given fresh pages for another uid")) \
	X(NUM, uint64_t, disconnect_releases, M(COUNTER, "disconnect_released_leases", "", "Leases released because their connection ended"))

struct proto_status {
	uint32_t nclasses, nclients, nleases, pool_flags;
	uint32_t njournals, nspill; /* nspill: 1 = one struct proto_status_spill follows the journals */
	uint64_t page_size;
	uint64_t pool_bytes;
	uint64_t boot_prefault_ns;
	uint32_t boot_threads;
	uint32_t pid;
	uint64_t started_realtime_ns;
	PROTO_STATUS_COUNTERS(PROTO_FIELD)
	char daemon_version[16];
	char fallback_reason[128];
	/* followed by the sections of PROTO_STATUS_SECTIONS, in that order */
};
_Static_assert(sizeof(struct proto_status) == 280, "the status header's layout is the wire's");

#define PROTO_STATUS_CLASS_FIELDS(X)                                                          \
	X(NUM, uint64_t, size, M(GAUGE, "class_buffer_size_bytes", "", "Bytes of each buffer of the class")) \
	X(NUM, uint32_t, total, M(GAUGE, "class_buffers", "", "Buffers of the class")) \
	X(NUM, uint32_t, free, M(GAUGE, "class_free_buffers", "", "Buffers of the class free now")) \
	X(NUM, uint32_t, leased, M(GAUGE, "class_leased_buffers", "", "Buffers of the class leased now")) \
	X(NUM, uint32_t, waiters, M(GAUGE, "class_waiters", "", "Acquires waiting for buffers of the class now")) \
	X(NUM, uint32_t, zeroing, M(GAUGE, "class_zeroing_buffers", "", "Buffers of the class getting fresh pages for another uid now")) /* getting fresh pages for another uid right now (not in free) */ \
	X(OWN, uint32_t, flags, NOMETRIC) /* PROTO_CLASS_*; was reserved (0) before version 4 */

/* Not in the configuration any more: held buffers a restart took over (hugepoold(8)). */
#define PROTO_CLASS_RETIRED 1u

struct proto_status_class {
	char name[PROTO_NAME_MAX];
	PROTO_STATUS_CLASS_FIELDS(PROTO_FIELD)
};

#define PROTO_STATUS_CLIENT_FIELDS(X)                                                         \
	X(OWN, uint32_t, pid, NOMETRIC) \
	X(NUM, uint32_t, uid, NOMETRIC) \
	X(NUM, uint32_t, gid, NOMETRIC) \
	X(NUM, uint32_t, leases, NOMETRIC) \
	X(NUM, uint64_t, leased_bytes, NOMETRIC) \
	X(OWN, uint64_t, connected_realtime_ns, NOMETRIC) \
	X(OWN, uint32_t, waiting, NOMETRIC) /* 1 while an acquire of this client waits */ \
	X(NUM, uint32_t, spill_files, NOMETRIC) /* spill files open */ \
	X(NUM, uint64_t, spill_bytes, NOMETRIC) /* bytes charged to them */ \
	X(NUM, uint64_t, spill_streams_memory, NOMETRIC) /* from its counters page */ \
	X(NUM, uint64_t, spill_bytes_memory, NOMETRIC)

struct proto_status_client {
	char name[PROTO_NAME_MAX];
	PROTO_STATUS_CLIENT_FIELDS(PROTO_FIELD)
};

struct proto_status_lease {
	uint64_t lease_id;
	uint32_t pid, uid;
	uint32_t class_index;
	uint32_t reserved;
	uint64_t since_realtime_ns;
};

/* A client request, checked and copied out of its payload by proto_parse_request. */
/* Restart the daemon (re-execute it, handing everything over); admins only; since version 4. */
struct proto_restart {
	uint32_t flags; /* must be 0 */
	uint32_t reserved; /* must be 0 */
};

union proto_request {
	struct proto_hello hello;
	struct proto_acquire acquire;
	struct {
		struct proto_release hdr;
		uint64_t ids[PROTO_RELEASE_MAX];
	} release;
	struct proto_status_req status;
	struct proto_journal_open journal_open;
	struct proto_journal_close journal_close;
	struct proto_journal_truncate journal_truncate;
	struct proto_journal_read journal_read;
	struct proto_spill_attach spill_attach;
	struct proto_spill_create spill_create;
	struct proto_spill_charge spill_charge;
	struct proto_spill_close spill_close;
	struct proto_restart restart;
};

/*
 * Check a client request whose header passed proto_check_header and whose h->len payload bytes
 * are in payload: reserved fields and flags zero, names valid, a release's length matching its
 * count. Returns 0 with the request in *ret, or -EPROTO with a static reason. Range checks that
 * deserve an answer rather than a closed connection (an acquire's count) are left to the caller.
 */
int proto_parse_request(const struct proto_hdr *h, const void *payload, union proto_request *ret,
			const char **ret_reason);

/*
 * A journal's state, one row each: its value on the wire (and in hugepool.h's
 * enum hp_journal_state) and its name, the one table of both (proto_journal_state_name).
 */
#define PROTO_JOURNAL_STATES(X)                                                     \
	X(OK, "ok")                                                                 \
	X(FULL, "full") /* every segment holds records not yet truncated (block) */ \
	X(FAILED, "failed") /* a write or sync failed: read-only */

#define PROTO_JOURNAL_STATE_ENUM(state, name) PROTO_JOURNAL_##state,
enum proto_journal_state { PROTO_JOURNAL_STATES(PROTO_JOURNAL_STATE_ENUM) };
#undef PROTO_JOURNAL_STATE_ENUM

/* The state's name, "unknown" for a value not in the table. */
const char *proto_journal_state_name(uint32_t state);

#define PROTO_STATUS_JOURNAL_FIELDS(X)                                                        \
	X(OWN, uint32_t, state, NOMETRIC) /* enum proto_journal_state */ \
	X(OWN, int32_t, error, NOMETRIC) \
	X(NUM, uint64_t, next_lsn, M(GAUGE, "journal_next_lsn", "", "The LSN the journal gives its next record")) \
	X(NUM, uint64_t, durable_lsn, M(GAUGE, "journal_durable_lsn", "", "The last durable LSN of the journal (0: none yet)")) \
	X(NUM, uint64_t, retain_lsn, M(GAUGE, "journal_retain_lsn", "", "The truncation point: records below it may be discarded")) \
	X(NUM, uint64_t, appends, M(COUNTER, "journal_appends", "", "Records appended to the journal")) \
	X(NUM, uint64_t, bytes, M(COUNTER, "journal_written_bytes", "", "Bytes of records written, their headers included")) \
	X(NUM, uint64_t, batches, M(COUNTER, "journal_batches", "", "Batches written (one write and the sync that covers it)")) \
	X(NUM, uint64_t, syncs, M(COUNTER, "journal_syncs", "", "Syncs of the journal's files")) \
	X(NUM, uint32_t, writers, M(GAUGE, "journal_writers", "", "Writers of the journal now")) \
	X(NUM, uint32_t, segments, M(GAUGE, "journal_segments", "", "Segment files of the journal")) \
	X(NUM, uint32_t, segments_used, M(GAUGE, "journal_used_segments", "", "Segments holding records not truncated yet")) \
	X(OWN, uint32_t, direct, NOMETRIC) \
	X(NUM, uint64_t, segment_size, M(GAUGE, "journal_segment_size_bytes", "", "Bytes of each segment file")) \
	X(CALC, uint64_t, sync_p50_ns, NOMETRIC) \
	X(CALC, uint64_t, sync_p99_ns, NOMETRIC) \
	X(CALC, uint64_t, sync_p999_ns, NOMETRIC) \
	X(CALC, uint64_t, sync_max_ns, NOMETRIC) \
	X(OWN, uint64_t, mean_batch_milli, NOMETRIC) /* records per batch x 1000 */ \
	X(NUM, uint64_t, recovered_records, M(GAUGE, "journal_recovered_records", "", "Records recovery found when the daemon started"))

struct proto_status_journal {
	char name[PROTO_NAME_MAX];
	char backend[16];
	PROTO_STATUS_JOURNAL_FIELDS(PROTO_FIELD)
	char note[160];
	char recovery[200];
};

/*
 * Version 6 on: the server's own figures, one, the first section after those of version 5 (so
 * that a reader finds it where a version 5 reply would end: nuids counts a later section). view:
 * PROTO_VIEW_ALL when the asker sees every client and uid (an admin, or of monitor_group), else
 * the reply holds its own uid's clients, spill figures and spill_uid record only.
 */
#define PROTO_VIEW_ALL 1u
#define PROTO_STATUS_SERVER_FIELDS(X)                                                         \
	X(OWN, uint32_t, nuids, NOMETRIC) /* struct proto_status_spill_uid records that follow */ \
	X(OWN, uint32_t, view, NOMETRIC) /* PROTO_VIEW_* */                                   \
	X(NUM, uint32_t, connections, M(GAUGE, "connections_open", "", "Connections open now")) \
	X(NUM, uint32_t, max_connections, M(GAUGE, "max_connections", "", "max_connections: the most connections served at once")) \
	X(NUM, uint64_t, refused_max_connections, M(COUNTER, "connections_refused", "limit=\"max_connections\"", "Connections refused, by the limit they met: max_connections, max_connections_per_uid, pending_closes (the uid's passed fds not closed yet), fds (the daemon out of fds)")) \
	X(NUM, uint64_t, refused_max_connections_per_uid, M(COUNTER, "connections_refused", "limit=\"max_connections_per_uid\"", "")) \
	X(NUM, uint64_t, refused_pending_closes, M(COUNTER, "connections_refused", "limit=\"pending_closes\"", "")) \
	X(NUM, uint64_t, refused_out_of_fds, M(COUNTER, "connections_refused", "limit=\"fds\"", "")) \
	X(NUM, uint64_t, acquires_unknown_class, M(COUNTER, "acquires_unknown_class", "", "Acquires naming no class the daemon has"))

struct proto_status_server {
	PROTO_STATUS_SERVER_FIELDS(PROTO_FIELD)
};

/* Version 6 on: one per class, in the classes' order: its acquires by outcome, and their wait. */
#define PROTO_STATUS_ACQUIRE_FIELDS(X)                                                        \
	X(NUM, uint64_t, acquires, M(COUNTER, "class_acquires", "", "Acquires asking for buffers of the class")) \
	X(NUM, uint64_t, granted, M(COUNTER, "class_acquires_granted", "", "Acquires granted")) \
	X(NUM, uint64_t, buffers_granted, M(COUNTER, "class_granted_buffers", "", "Buffers granted")) \
	X(NUM, uint64_t, refused_limit, M(COUNTER, "class_acquires_refused", "reason=\"limit\"", "Acquires refused or failed, by reason: limit (max_bytes_per_uid), timeout (waited as long as allowed), all_or_nothing (not all free at once, and the client would not wait), too_large (more than the class has), renewal (fresh pages could not be had)")) \
	X(NUM, uint64_t, refused_timeout, M(COUNTER, "class_acquires_refused", "reason=\"timeout\"", "")) \
	X(NUM, uint64_t, refused_all_or_nothing, M(COUNTER, "class_acquires_refused", "reason=\"all_or_nothing\"", "")) \
	X(NUM, uint64_t, refused_too_large, M(COUNTER, "class_acquires_refused", "reason=\"too_large\"", "")) \
	X(NUM, uint64_t, refused_renewal, M(COUNTER, "class_acquires_refused", "reason=\"renewal\"", "")) \
	X(NUM, uint64_t, cancelled, M(COUNTER, "class_acquires_cancelled", "", "Acquires whose connection ended while they waited")) \
	X(HIST, struct proto_latency, wait, M(HIST, "class_acquire_wait_seconds", "", "From an acquire's arrival to its grant, for every granted acquire"))

struct proto_status_acquire {
	PROTO_STATUS_ACQUIRE_FIELDS(PROTO_FIELD)
};

/* Version 6 on: one per journal, in the journals' order: its latencies and I/O errors. */
#define PROTO_STATUS_DURABILITY_FIELDS(X)                                                     \
	X(NUM, uint64_t, io_errors, M(COUNTER, "journal_io_errors", "", "Writes and syncs of the journal that failed")) \
	X(NUM, uint64_t, batch_records, NOMETRIC) /* records in the batches written: the sum of the batch sizes */ \
	X(HIST, struct proto_latency, to_durable, M(HIST, "journal_append_durable_seconds", "", "Per record: from the daemon taking it from its writer's ring to the record being durable")) \
	X(HIST, struct proto_latency, write_sync, M(HIST, "journal_sync_seconds", "", "Per batch: the write and the sync that makes it durable"))

struct proto_status_durability {
	PROTO_STATUS_DURABILITY_FIELDS(PROTO_FIELD)
};

/*
 * Version 6 on: one per uid that has spill files (open or lingering) or a spill account, as many
 * as the server section's nuids; to whom does not see all, its own uid's only.
 */
#define PROTO_STATUS_SPILL_UID_FIELDS(X)                                                      \
	X(OWN, uint32_t, uid, NOMETRIC)                                                       \
	X(NUM, uint32_t, files, M(GAUGE, "spill_uid_files", "", "Spill files of the uid now, lingering ones included")) \
	X(NUM, uint64_t, bytes, M(GAUGE, "spill_uid_bytes", "", "Spill bytes charged to the uid now")) \
	X(NUM, uint64_t, files_created, M(COUNTER, "spill_uid_files_created", "", "Spill files made for the uid, since it last had none")) \
	X(NUM, uint64_t, bytes_charged_total, M(COUNTER, "spill_uid_charged_bytes", "", "Bytes charged to the uid's spill files, since it last had none")) \
	X(NUM, uint64_t, refusals, M(COUNTER, "spill_uid_refusals", "", "Spill files or bytes refused to the uid at a limit, since it last had none")) \
	X(NUM, uint64_t, truncated, M(COUNTER, "spill_uid_truncations", "", "The uid's spill files cut back to their charge, since it last had none"))

struct proto_status_spill_uid {
	PROTO_STATUS_SPILL_UID_FIELDS(PROTO_FIELD)
};

/*
 * What a journal does when every segment holds records not truncated yet (when_full in
 * hugepoold.conf), one row each: its value on the wire (and in hugepool.h's
 * enum hp_journal_when_full) and its name, the one table of both (proto_journal_when_full_name).
 */
#define PROTO_JOURNAL_WHEN_FULL(X)                                                               \
	X(BLOCK, "block") /* appends wait for a truncate; no record is lost */                     \
	X(RECYCLE, "recycle") /* the oldest segment is reused: its records not truncated are lost */

#define PROTO_JOURNAL_WHEN_FULL_ENUM(policy, name) PROTO_JOURNAL_##policy,
enum proto_journal_when_full { PROTO_JOURNAL_WHEN_FULL(PROTO_JOURNAL_WHEN_FULL_ENUM) };
#undef PROTO_JOURNAL_WHEN_FULL_ENUM
#define PROTO_JOURNAL_WHEN_FULL_ONE(policy, name) +1
#define PROTO_JOURNAL_NWHEN_FULL (0 PROTO_JOURNAL_WHEN_FULL(PROTO_JOURNAL_WHEN_FULL_ONE))

/* The policy's name, "unknown" for a value not in the table. */
const char *proto_journal_when_full_name(uint32_t when_full);

/*
 * Version 8 on: one per journal, in the journals' order, after the classes' pages: what
 * hugepoold.conf sets for it (a client that keeps its records until it truncates them, a
 * broker's journal, refuses one that recycles). max_batch_delay_ns (0: every batch is written
 * at once) and max_batch_bytes bound a batch; ring_size is the ring a writer gets unless it asks
 * for another; when_full is enum proto_journal_when_full; reserved is 0.
 */
#define PROTO_STATUS_JCONFIG_FIELDS(X)                                                        \
	X(NUM, uint64_t, max_batch_delay_ns, NOMETRIC) \
	X(NUM, uint64_t, max_batch_bytes, NOMETRIC) \
	X(NUM, uint64_t, ring_size, NOMETRIC) \
	X(ENUM, uint32_t, when_full, M(GAUGE, "journal_recycle", "", "1: when_full = recycle: a full journal reuses its oldest segment, and records in it not truncated are lost; 0: block"))

struct proto_status_jconfig {
	PROTO_STATUS_JCONFIG_FIELDS(PROTO_FIELD)
	uint32_t reserved;
};
_Static_assert(sizeof(struct proto_status_jconfig) == 32, "the jconfig section's layout is the wire's");

/*
 * The sections of a status reply after struct proto_status, in this order, one row each: its
 * name, its wire struct, how many there are (a count of struct proto_status, or `one`) and the
 * first protocol version that has it (a client of an older version gets a reply without it).
 * The reply's size (proto_status_size), the daemon's encoder and libhugepool's decoder are all
 * made from this list: a section is added here, and in the one function on each side that
 * writes or reads one of its records.
 */
#define PROTO_STATUS_SECTIONS(X)                                              \
	X(class, struct proto_status_class, nclasses, 3)                      \
	X(client, struct proto_status_client, nclients, 3)                    \
	X(lease, struct proto_status_lease, nleases, 3)                       \
	X(journal, struct proto_status_journal, njournals, 3)                 \
	X(spill, struct proto_status_spill, nspill, 3)                        \
	X(start, struct proto_status_start, one, 4) /* how this life started */ \
	X(batches, struct proto_status_batches, njournals, 5)                 \
	X(heaps, struct proto_status_heaps, nclients, 5)                      \
	X(server, struct proto_status_server, one, 6) /* first of version 6 */ \
	X(acquire, struct proto_status_acquire, nclasses, 6)                  \
	X(durability, struct proto_status_durability, njournals, 6)           \
	X(spill_uid, struct proto_status_spill_uid, nuids, 6)                 \
	X(jpath, struct proto_status_jpath, njournals, 6)                     \
	X(pages, struct proto_status_pages, nclasses, 7)                      \
	X(jconfig, struct proto_status_jconfig, njournals, 8)

/*
 * How many records a section of PROTO_STATUS_SECTIONS has in the reply whose header is st and
 * whose server section is srv (NULL: not known yet, its counts 0).
 */
#define PROTO_STATUS_COUNT(st, srv, count) PROTO_STATUS_COUNT_##count(st, srv)
#define PROTO_STATUS_COUNT_one(st, srv) 1u
#define PROTO_STATUS_COUNT_nclasses(st, srv) ((st)->nclasses)
#define PROTO_STATUS_COUNT_nclients(st, srv) ((st)->nclients)
#define PROTO_STATUS_COUNT_nleases(st, srv) ((st)->nleases)
#define PROTO_STATUS_COUNT_njournals(st, srv) ((st)->njournals)
#define PROTO_STATUS_COUNT_nspill(st, srv) ((st)->nspill)
#define PROTO_STATUS_COUNT_nuids(st, srv) proto_status_nuids(srv)

static inline uint32_t proto_status_nuids(const struct proto_status_server *srv)
{
	return srv ? srv->nuids : 0u;
}

/*
 * The bytes of the reply st and srv describe, in protocol version (all of its sections, header
 * included). Where a reply of version 6 on holds its server section: proto_status_size(st,
 * NULL, 5) bytes in.
 */
uint64_t proto_status_size(const struct proto_status *st, const struct proto_status_server *srv, uint16_t version);

/* What a header may announce: returns 0 or a negative errno and a static reason string. */
int proto_check_header(const struct proto_hdr *h, bool from_client, const char **ret_reason);

/* Fill a header. */
void proto_hdr_init(struct proto_hdr *h, enum proto_type type, uint32_t len, uint32_t nfds);
/* The same for a message of another version (the daemon answers each client in its own). */
void proto_hdr_init_version(struct proto_hdr *h, uint16_t version, enum proto_type type, uint32_t len, uint32_t nfds);

/* Copy a C string into a fixed NUL-padded wire field (truncating). */
void proto_set_name(char *dst, size_t dstlen, const char *src);

/* True when a fixed wire field holds a NUL-terminated, non-empty name of [A-Za-z0-9_.-]. */
bool proto_name_valid(const char *field, size_t len);

/*
 * Blocking helpers for clients: send one whole message (header, payload and fds, MSG_NOSIGNAL),
 * receive one whole message (header and up to maxlen payload bytes into *payload, malloc'd,
 * and its fds, MSG_CMSG_CLOEXEC). proto_recv fails with -EPROTO on a bad header, on MSG_CTRUNC
 * or on an fd count that differs from the header (closing any fds received), -ECONNRESET on
 * EOF. The caller owns *payload and ret_fds.
 */
struct msghdr;
/*
 * Attach nfds fds (at least 1) to msg as one SCM_RIGHTS message, in cbuf (at least
 * CMSG_SPACE(sizeof(int) * nfds) bytes, aligned for struct cmsghdr): every sender of fds
 * (proto_send, the daemon's out-queue, the tests) builds its control message here.
 */
void proto_put_fds(struct msghdr *msg, void *cbuf, const int *fds, unsigned nfds);

int proto_send(int fd, enum proto_type type, const void *payload, uint32_t len, const int *fds,
	       unsigned nfds);
int proto_recv(int fd, struct proto_hdr *ret_hdr, void **ret_payload, int *ret_fds,
	       unsigned maxfds);

const char *proto_type_name(uint16_t type);

#endif
