/* SPDX-License-Identifier: MIT */
/*
 * spill.h - the daemon's side of spill streams: the spill directory, the unnamed files it hands
 * to clients, and the limits on them (bytes and files, per uid and for the machine).
 *
 * A client's stream lives in its own memory up to a threshold (libhugepool, src/lib/spill.c);
 * only past it does the client ask for a file. Files are created with O_TMPFILE (or created and
 * unlinked at once where the file system lacks it), so no name ever outlives its holders. The
 * daemon keeps its own fd (its own open file description) of every file: it charges bytes
 * before the client writes
 * them (spill_charge), audits sizes and allocated blocks against charges (spill_audit), cutting
 * a file that holds more than its charge, and cuts a file to nothing when its stream or
 * connection closes. A closed file that another process still holds open (the client
 * kept or passed on its fd) lingers, counted as a file of its uid and kept empty, until the
 * last holder is gone (spill.c says how that is found out).
 *
 * Everything here runs on the event loop thread (server.c); no locks. Each connection has a
 * struct spill_owner, attached with spill_owner_init and torn down with spill_owner_release.
 */
#ifndef HP_SPILL_H
#define HP_SPILL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "config.h"
#include "counters.h"
#include "proto.h"

struct spill;
struct spill_uid;
struct warm;
struct warm_prev;
struct fdstore_fd;

/* Where a file or page is kept for the daemon's next life (spill_warm.c). */
struct spill_kept {
	int slot; /* its record in the warm state; -1: not kept */
	uint64_t fd_id; /* its name in the fd store */
};

struct spill_file {
	uint64_t id;
	int fd; /* the daemon's own fd of the file: its own open file description, never the client's */
	uint64_t charged; /* bytes the client may have written */
	struct spill_kept kept;
};

struct spill_owner {
	uid_t uid;
	pid_t pid;
	uint64_t conn_id; /* its connection's id across the daemon's lives (warm.h) */
	struct spill_uid *acct; /* the uid's totals; NULL until the first file */
	struct spill_file *files;
	unsigned nfiles, cap;
	uint64_t bytes; /* charged to this owner's files */
	struct counters counters; /* its counters page (counters.h), made at spill_attach */
	struct spill_kept page_kept; /* where that page is kept for a next life */
	TAILQ_ENTRY(spill_owner) link;
	int linked;
};

/*
 * Create (0700, if missing) and check the spill directory, remove leftovers of an earlier run
 * (only "spill-*" names, which only the unlinked-file fallback creates; not beside a running
 * life, a take-over's next life, whose files they may be for a moment), and find out whether
 * O_TMPFILE works there. On failure logs why and returns a negative errno.
 */
int spill_open(const struct config *cfg, bool beside, struct spill **ret);
void spill_free(struct spill *sp);

void spill_owner_init(struct spill *sp, struct spill_owner *o, uid_t uid, pid_t pid);

/*
 * Close every file of the owner (truncated first), give its bytes back, unmap its page. Once
 * sealed (spill_seal), only the daemon's fds and mapping go: the files stay as they are for the
 * next life.
 */
void spill_owner_release(struct spill *sp, struct spill_owner *o);

/*
 * Warm restart (spill_warm.c). spill_set_warm: from now on every file and page is kept in the fd
 * store with a record in w, kept current. spill_seal: stopping for a next life: change neither
 * the records nor the store, and cut no file. spill_owner_kept: is everything o holds kept (else
 * its connection cannot be served on by a next life)?
 */
void spill_set_warm(struct spill *sp, struct warm *w);
void spill_seal(struct spill *sp);
bool spill_owner_kept(const struct spill_owner *o);
/*
 * Take over what the previous life recorded for connection conn_id into o (files with their
 * ids and charges, its page), each fd checked (a file of the spill directory with no name, a
 * sealed page-sized memfd). -EBADF: one is missing or is not what its record says; whatever was
 * taken is then o's, and the caller closes the connection, releasing it.
 */
int spill_adopt_owner(struct spill *sp, struct spill_owner *o, uint64_t conn_id, const struct warm_prev *prev,
		      struct fdstore_fd *fds, unsigned nfds);
/*
 * After the connections: take over the lingering files, and release (cut, or keep lingering)
 * the files of connections that were not served on. Logs what it took over.
 */
void spill_adopt_rest(struct spill *sp, const struct warm_prev *prev, struct fdstore_fd *fds, unsigned nfds);
/*
 * Undo spill_adopt_owner (a take-over takes the connection again, its records having changed):
 * the owner's files and page are no longer counted, kept or recorded here, and their fds go
 * back into fds under their names (closed when the array has no place for one).
 */
void spill_owner_unadopt(struct spill *sp, struct spill_owner *o, struct fdstore_fd *fds, unsigned nfds);

/*
 * Give the owner its counters page (counters.h): *ret_fd is a sealed memfd (the caller's to
 * send and close) and *ret_threshold the default threshold. -EEXIST if it has one already.
 */
int spill_attach(struct spill *sp, struct spill_owner *o, int *ret_fd, uint64_t *ret_threshold);

/*
 * A new empty file for the owner, charged `charge` bytes at once (what the client will write
 * first: one round trip instead of two): *ret_fd is the client's read-write fd (the caller's to
 * send and close). -EDQUOT over a file or byte limit, with the limit named in err; other
 * errors (-ENOSPC, -EMFILE) from the file system, also explained in err.
 */
int spill_create(struct spill *sp, struct spill_owner *o, uint64_t charge, uint64_t *ret_id, int *ret_fd,
		 char *err, size_t errlen);

/*
 * Set what file id may hold to total bytes. A raise is charged against the uid's and the
 * machine's byte limits (-EDQUOT naming the limit, nothing charged); a cut gives bytes back and
 * truncates the file to total. -ENOENT: no such file of this owner.
 */
int spill_charge(struct spill *sp, struct spill_owner *o, uint64_t id, uint64_t total, char *err,
		 size_t errlen);

/* Does the owner have file id? */
bool spill_owns(struct spill_owner *o, uint64_t id);

/* Close file id: cut it to nothing, give its bytes back, forget it or keep it lingering. */
int spill_close_file(struct spill *sp, struct spill_owner *o, uint64_t id);

/*
 * Check every file's size and allocated blocks against its charge and cut those that hold
 * more (a client that ignored the protocol); let go of lingering files whose last holder is
 * gone. Unless forced, runs at most once a second; returns the time of the next audit
 * (UINT64_MAX when there are no files).
 */
uint64_t spill_audit(struct spill *sp, uint64_t now, bool force);

/*
 * The machine's state for a status reply (only non-NULL: for a client who is no administrator,
 * the figures of that uid alone, its counters since it last had no stream or file). Reads each owner's page
 * once (the only place that reads a page); call it before spill_owner_status, which reports
 * what it read. Sums of the pages' words saturate at UINT64_MAX.
 */
void spill_get_status(struct spill *sp, const uid_t *only, struct proto_status_spill *st);


/*
 * Each uid's spill account (files open and lingering, bytes, counters since it was made) for a
 * status reply: spill_uid_count says how many there are (only non-NULL: that uid's alone),
 * spill_uid_status writes at most max of them into recs and returns how many it wrote.
 */
unsigned spill_uid_count(const struct spill *sp, const uid_t *only);
unsigned spill_uid_status(const struct spill *sp, const uid_t *only, struct proto_status_spill_uid *recs,
			  unsigned max);

/* One owner's numbers for a status reply, its page as spill_get_status last read it. */
void spill_owner_status(const struct spill_owner *o, uint32_t *files, uint64_t *bytes,
			uint64_t *streams_memory, uint64_t *bytes_memory);
/* What the owner's page said of its heaps at the last spill_get_status (zeros without a page). */
void spill_owner_heaps(const struct spill_owner *o, struct proto_status_heaps *ret);

#endif
