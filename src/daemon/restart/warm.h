/* SPDX-License-Identifier: MIT */
/*
 * warm.h - the warm state: what the next life of hugepoold needs to take over this one's pool.
 *
 * The daemon keeps one memfd, mapped, that it never gives to a client: a header and one
 * fixed-size record per pool buffer saying which class and index it is, the size of its pages,
 * the name its memfd is kept under in the fd store (warm_name), and whether its pages are fresh (CLEAN), were last
 * written by a uid (DIRTY), are held by a connection (LEASED: which, under which lease id) or
 * must be renewed before anyone gets them (BROKEN); then one record per connection slot
 * (max_connections of them): its socket's name in the store, its credentials and name, whether
 * the next life can serve on it (struct warm_conn), and the acquire it waits in; then one record
 * per spill file or counters page the daemon keeps (struct warm_spill: whose, under which id and
 * charge, and the name of its fd in the store). The records are kept current as the lease table
 * changes (plain stores into shared memory, so they survive a SIGKILL as they are), and the
 * memfd itself is kept in the fd store too. Each record carries a sequence number that is odd
 * while it is being written and a CRC, so that a record torn by a crash, or garbage, is seen as
 * such: its buffer is then not trusted (renewed or dropped), never handed to a second holder.
 *
 * warm_read() copies a predecessor's memfd into private memory once and checks it; anything it
 * cannot understand (other magic or version, a bad header CRC, sizes that do not add up) is an
 * error with a reason, and the caller starts cold. It reads the state of the version before
 * too (WARM_VERSION_MIN: a daemon upgraded by a warm restart keeps its pool), whose header
 * named one page size for every buffer.
 */
#ifndef HP_WARM_H
#define HP_WARM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define WARM_VERSION 3 /* 2: spill records; 3: each buffer's page size in its record */
#define WARM_VERSION_MIN 2 /* the oldest state warm_read takes */
#define WARM_CLASS_NAME_MAX 32 /* with the NUL */

enum warm_buf_state {
	WARM_BUF_UNKNOWN = 0, /* never written, torn or corrupt: not trusted */
	WARM_BUF_CLEAN, /* fresh pages nobody wrote: may go to any uid */
	WARM_BUF_DIRTY, /* last written by uid, free now */
	WARM_BUF_LEASED, /* held by uid now */
	WARM_BUF_BROKEN, /* being renewed, or its renewal failed: renew before granting */
};

struct warm_buf {
	enum warm_buf_state state;
	uid_t uid; /* DIRTY, LEASED */
	uint32_t index; /* in its class */
	uint64_t size;
	uint64_t page_size; /* of its pages, a power of two: 4096 for regular shared memory */
	uint64_t fd_id; /* its memfd is kept as warm_name(WARM_NAME_BUF, fd_id) */
	char class_name[WARM_CLASS_NAME_MAX];
	/* LEASED: to which connection, under which lease id, since when */
	uint64_t conn_id;
	uint64_t lease_id;
	uint64_t since_rt;
};

/*
 * A connection's record. Only an IDLE connection (no request half read, no reply unsent) or a
 * WAITING one (an acquire queued, nothing granted yet) can be served on by the next life: a
 * crash in the middle of a request (BUSY) leaves the stream in a state nobody knows, and a
 * connection with journal writers, or with a spill file or page the store could not keep (OTHER),
 * has state the records do not hold; the next life closes those (their leases and spill files
 * end as at any disconnect).
 */
enum warm_conn_state {
	WARM_CONN_FREE = 0,
	WARM_CONN_IDLE,
	WARM_CONN_WAITING,
	WARM_CONN_BUSY,
	WARM_CONN_OTHER,
};

#define WARM_CLIENT_NAME_MAX 32

struct warm_conn {
	enum warm_conn_state state;
	uint64_t conn_id; /* its socket is kept as warm_name(WARM_NAME_CONN, conn_id) */
	uid_t uid;
	gid_t gid;
	pid_t pid;
	uint16_t version; /* of the protocol it spoke hello in; 0: no hello yet */
	uint64_t connected_rt;
	char name[WARM_CLIENT_NAME_MAX];
	/* WAITING: its acquire */
	char wait_class[WARM_CLASS_NAME_MAX];
	uint32_t wait_count;
	uint64_t wait_deadline; /* CLOCK_MONOTONIC ns (one clock for the whole machine); UINT64_MAX: none */
};

/*
 * A spill file or counters page the daemon holds (spill.h), kept in the fd store so that a client's
 * files and their charges live on with its connection. A LINGER file's stream has closed while
 * some process still holds it: it still counts as a file of uid.
 */
enum warm_spill_state {
	WARM_SPILL_FREE = 0,
	WARM_SPILL_FILE, /* kept as warm_name(WARM_NAME_SPILL, fd_id) */
	WARM_SPILL_LINGER, /* kept as warm_name(WARM_NAME_SPILL, fd_id) */
	WARM_SPILL_PAGE, /* a connection's counters page, kept as WARM_NAME_SPAGE */
};

struct warm_spill {
	enum warm_spill_state state;
	uid_t uid;
	pid_t pid; /* who made it, for the log */
	uint64_t conn_id; /* FILE, PAGE: the connection it belongs to */
	uint64_t file_id; /* FILE: the id the client knows it by */
	uint64_t charged; /* FILE: the bytes it may hold */
	uint64_t fd_id;
};

/* The kinds of records: a buffer's, a connection's, a spill file's or page's. */
enum warm_kind { WARM_KIND_BUF, WARM_KIND_CONN, WARM_KIND_SPILL, WARM_KINDS };

/* A record of a connection's: which (an index into warm_prev.bufs or .spills), whose. */
struct warm_ref {
	uint64_t conn_id;
	uint32_t record;
};

/* What a predecessor left, as read and checked by warm_read. */
struct warm_prev {
	uint64_t id; /* its memfd was kept as warm_name(WARM_NAME_STATE, id) */
	uint64_t lives; /* daemon lives that handed this pool over, this one's predecessor included */
	/* its header's version and (version 2) page size: how its buffer records read again at a
	 * take-over (warm_prev_update) */
	uint32_t version;
	uint64_t page_size;
	uint32_t nbuffers;
	struct warm_buf *bufs;
	uint32_t nconns;
	struct warm_conn *conns; /* FREE ones included */
	uint32_t nspills;
	struct warm_spill *spills; /* FREE ones included */
	/* the LEASED buffer records and the FILE and PAGE spill records, by connection then record
	 * (warm_prev_leases, warm_prev_spills): a connection's are found without reading them all */
	struct warm_ref *leased, *spilled;
	uint32_t nleased, nspilled;
	uint32_t *lingering; /* the LINGER spill records */
	uint32_t nlingering;
};

/* The records of prev's buffers leased to conn_id (*ret: that many warm_refs, in record order). */
uint32_t warm_prev_leases(const struct warm_prev *prev, uint64_t conn_id, const struct warm_ref **ret);
/* The same for its spill files and counters page (records of prev->spills). */
uint32_t warm_prev_spills(const struct warm_prev *prev, uint64_t conn_id, const struct warm_ref **ret);

/*
 * Among the fds a previous life left (fdstore.h), take the state memfds, read them, and keep
 * the newest one that reads (the most lives; a life that died while replacing its state may
 * leave two). *ret NULL: none usable, why in err ("" when there was none at all). The chosen
 * memfd is closed too: the caller removes its name from the store (*ret)->id once its own state
 * is kept.
 */
struct fdstore_fd;
void warm_choose(struct fdstore_fd *fds, unsigned n, struct warm_prev **ret, char *err, size_t errlen);

/* Read the memfd fd (a predecessor's state) once and check it; on error, why in err. */
int warm_read(int fd, struct warm_prev **ret, char *err, size_t errlen);
/*
 * The same with a state its life still writes (a take-over's snapshot): a record caught while it
 * was being written is read again until it is whole (or decodes to nothing, as a torn one).
 */
int warm_read_live(int fd, struct warm_prev **ret, char *err, size_t errlen);
/*
 * Read the n records of kind k at indices recs again from fd (the state prev was read from, whose
 * life has changed them since), each decoded as warm_read decodes it, prev's indexes by
 * connection kept with them. -EBADMSG for an index prev does not have.
 */
int warm_prev_update(struct warm_prev *prev, int fd, enum warm_kind k, const uint32_t *recs, uint32_t n);
void warm_prev_free(struct warm_prev *prev);

/*
 * This life's state: a new memfd with nbuffers UNKNOWN records, nconns and nspills FREE ones.
 * Logs a failure and returns it as a negative errno. It is not published: a next life does not
 * read it (warm_read: "never published") until warm_publish writes its header's magic, which
 * this life does once its records say everything it took over, before it serves anyone. So a
 * life that dies while it boots, or while it prepares a take-over, leaves the state of the life
 * before it the one to read.
 */
struct warm;
int warm_create(uint32_t nbuffers, uint32_t nconns, uint32_t nspills, uint64_t lives, struct warm **ret);
void warm_publish(struct warm *w);
int warm_fd(const struct warm *w);
uint64_t warm_id(const struct warm *w);

/*
 * The records written from warm_track on (a take-over: what changed since its snapshot), of each
 * kind: warm_tracked returns how many and their indices in *ret (malloc'd; NULL when none).
 * warm_track_end stops recording. -ENOMEM from warm_track: nothing is recorded.
 */
int warm_track(struct warm *w);
uint32_t warm_tracked(const struct warm *w, enum warm_kind k, uint32_t **ret);
void warm_track_end(struct warm *w);
/* Write record i (its old content is replaced; the sequence number brackets the write). */
void warm_set(struct warm *w, uint32_t i, const struct warm_buf *b);
/* A FREE connection record for a new connection (-1: all taken), its record, giving it back. */
int warm_conn_take(struct warm *w);
void warm_conn_set(struct warm *w, int slot, const struct warm_conn *c);
void warm_conn_release(struct warm *w, int slot);
/* The same for spill records. */
int warm_spill_take(struct warm *w);
void warm_spill_set(struct warm *w, int slot, const struct warm_spill *sp);
void warm_spill_release(struct warm *w, int slot);
void warm_free(struct warm *w);

/* A fresh random id for a buffer's memfd name. */
uint64_t warm_new_id(void);

/*
 * The fd store's names: a letter for the kind and the id in 11 digits of 6 bits ("bAZ09-_..."),
 * 12 bytes, so that the most a configuration keeps still fits in LISTEN_FDNAMES (fdstore.h).
 * warm_parse_name takes the id back from a name of kind k (false: not one), also from the names
 * of daemons before this form ("buf.<16 hex digits>"); warm_upgrade_names rewrites those among
 * fds into this form, so that they are taken by the names this life looks for.
 */
enum warm_name_kind { WARM_NAME_BUF, WARM_NAME_STATE, WARM_NAME_CONN, WARM_NAME_SPILL, WARM_NAME_SPAGE };
#define WARM_NAME_MAX 32
#define WARM_NAME_LEN 12 /* of a name warm_name makes */
void warm_name(enum warm_name_kind k, uint64_t id, char name[WARM_NAME_MAX]);
bool warm_parse_name(const char *name, enum warm_name_kind k, uint64_t *id);
void warm_upgrade_names(struct fdstore_fd *fds, unsigned n);

#endif
