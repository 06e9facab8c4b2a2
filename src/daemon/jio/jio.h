/* SPDX-License-Identifier: MIT */
/*
 * jio.h - how a journal's batches reach the disk: one interface, several backends.
 *
 * A journal's flusher thread owns one struct jio. It submits a request (up to JIO_MAX_IOV
 * buffers written at given offsets of one file, then made durable with fdatasync semantics) and
 * later collects the completion. Completion is signalled on jio->efd (an eventfd), so the
 * flusher can sleep in poll() on that and its doorbell together. A request completes exactly
 * once, with res = 0 when every write was complete and the sync that followed them succeeded,
 * or a negative errno: the first failure, never a partial success (a short write is -EIO).
 *
 * Order: the sync of a request starts only once the writes of every earlier request are done,
 * so on the same file it covers them too, whatever order the device finishes writes in; the
 * request completes after it. Requests may still complete out of order (an earlier request's
 * sync can take longer), and a sync covers nothing of another file: a caller that needs one
 * request durable before another is written (a journal opening its next segment) waits for
 * the first to complete before it submits the second. Until a request completes, any part of
 * its writes may or may not be on the disk after a power loss.
 *
 * Backends: io_uring (writes linked to an fdatasync), libaio (io_submit, then fdatasync on the
 * submitting thread), sync (pwrite + fdatasync inside submit). jio_open with JIO_AUTO tries
 * libaio, io_uring, sync, in that order (jio.c says why libaio first), and says in ret_note why
 * one was passed over; with libaio open it also opens io_uring's queue beside it where it can
 * (jio_use_queue), so that a journal can measure both. The fault backend wraps another and
 * fails the Nth write or sync with EIO, for the crash and error tests.
 *
 * Thread model: a struct jio is used by one thread only.
 */
#ifndef HP_JIO_H
#define HP_JIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JIO_MAX_IOV 4 /* buffers in one request (header, data) */
#define JIO_DEPTH 8 /* requests in flight at most */
#define JIO_QUEUES 2 /* queues one struct jio may hold (auto: libaio's and io_uring's) */

enum jio_kind { JIO_AUTO, JIO_URING, JIO_AIO, JIO_SYNC };

struct jio_iov {
	const void *buf;
	size_t len;
	uint64_t off; /* file offset of this buffer */
};

struct jio_req {
	int fd;
	unsigned niov;
	struct jio_iov iov[JIO_MAX_IOV];
	int res; /* set on completion */
	void *data; /* the caller's */
};

struct jio;

/* What a tap hears (see jio_set_tap). */
enum jio_tap_event {
	JIO_TAP_SUBMIT, /* req taken: its buffers hold what it writes */
	JIO_TAP_COMPLETE, /* req finished, req->res set */
	JIO_TAP_ACKED, /* the caller acknowledged everything up to lsn */
};
typedef void (*jio_tap_fn)(void *arg, enum jio_tap_event ev, const struct jio_req *req, uint64_t lsn);

struct jio_ops {
	const char *name;
	/* submit hands the request to a queue and returns before it is durable (io_uring, libaio);
	 * false: it writes and syncs inside submit (sync), so jio_run gains nothing over it */
	bool queue;
	/* the writes and the sync run on the thread that submits and reaps (libaio: io_submit of a
	 * buffered write copies on it, and reap syncs on it; sync), not on threads of the kernel's
	 * (io_uring's io-wq): a request in flight needs no CPU of anyone else's */
	bool on_caller;
	int (*submit)(struct jio *io, struct jio_req *req);
	/* write and sync on the caller's thread, now: the request's result (jio_run) */
	int (*run)(struct jio *io, const struct jio_req *req);
	/* one completed request, or NULL when none is ready (never blocks) */
	struct jio_req *(*reap)(struct jio *io);
	void (*close)(struct jio *io);
};

struct jio {
	const struct jio_ops *ops;
	int efd; /* readable when reap may return something */
	unsigned inflight;
	bool direct; /* the files are opened O_DIRECT: buffers, lengths, offsets are aligned */
	/* fault injection (0 = off): fail the Nth write / sync from now with EIO */
	uint64_t fail_write_at, fail_sync_at, writes, syncs;
	jio_tap_fn tap; /* NULL: none */
	void *tap_arg;
	void *priv; /* the backend's */
};

/*
 * Open a backend of kind (JIO_AUTO: libaio with io_uring's queue beside it, else io_uring, else
 * sync). direct: the caller uses O_DIRECT files. ret_note receives why a backend was passed
 * over, or why auto has no io_uring queue beside libaio's ("io_uring: Operation not permitted
 * (kernel.io_uring_disabled or a seccomp filter)"), or "" if neither. Returns 0 or a negative
 * errno.
 */
int jio_open(enum jio_kind kind, bool direct, struct jio **ret, char *ret_note, size_t notelen);
void jio_close(struct jio *io);

/*
 * Submit a request (at most JIO_DEPTH in flight; -EBUSY beyond). With fault injection armed, a
 * request holding the failing write completes with -EIO without writing anything, and one
 * whose sync is to fail is written but completes with -EIO.
 */
int jio_submit(struct jio *io, struct jio_req *req);

/*
 * Write and sync a request on the calling thread, now, whatever the backend (pwrite and
 * fdatasync), with the same fault injection as jio_submit. For a journal with few writers (no
 * more than the CPUs): a request that nothing else could join gains nothing from a queue and
 * would pay its thread hops. Returns req->res.
 */
int jio_run(struct jio *io, struct jio_req *req);

/*
 * The queues of io: 1, or 2 where auto opened io_uring's beside libaio's (queue 0 is the one
 * jio_open chose, whose name io->ops->name gives while it is in use). jio_use_queue sends the
 * requests submitted from now on to queue q: -EBUSY while any request is in flight (a sync
 * covers only its own queue's writes, and completions are reaped from the queue in use),
 * -EINVAL for a queue that does not exist. Fault injection, the tap and the depth limit are
 * shared by the queues: the Nth write from now fails whichever queue takes it.
 */
unsigned jio_queues(const struct jio *io);
const char *jio_queue_name(const struct jio *io, unsigned q); /* NULL: no such queue */
unsigned jio_queue_current(const struct jio *io);
int jio_use_queue(struct jio *io, unsigned q);
/* Whether the queue in use writes and syncs on the caller's thread only (jio_ops.on_caller). */
bool jio_on_caller(const struct jio *io);

/* Collect one finished request (reads efd when nothing is left), or NULL. */
struct jio_req *jio_reap(struct jio *io);

/*
 * Arm fault injection from a spec "write:N" or "sync:N" (the Nth from now fails with EIO), as
 * HUGEPOOLD_FAULT_INJECT gives it to the daemon for tests. "stall:N:PATH" holds the Nth
 * fdatasync that the sync or libaio backend makes from now (io_uring's run in the kernel) until
 * a test lets it go: it opens the FIFO at PATH for writing (meeting the test's reader), writes
 * one byte, and waits until the reader closes. "stall-close:PATH" holds jio_close the same way
 * before it releases the queues (a take-over's running life releases them after its hand-over).
 * -EINVAL on a bad spec.
 */
int jio_set_fault(struct jio *io, const char *spec);

/*
 * A tap, for the crash-point tests (tests/unit/test_recovery.c): every jio opened while one is
 * set reports to fn, on the thread that uses it, each request it takes, each one it completes
 * and each jio_acked, in that thread's order. The process-wide setting is read by jio_open
 * only; NULL (the default) opens jios without one.
 */
void jio_set_tap(jio_tap_fn fn, void *arg);
/* The caller acknowledged everything up to lsn (a journal: what it published as durable);
 * only a tap hears it. */
void jio_acked(struct jio *io, uint64_t lsn);

const char *jio_kind_to_string(enum jio_kind k);
/* The kind a configuration value names ("auto", "io_uring", "libaio", "sync"); -EINVAL if none. */
int jio_kind_from_string(const char *name, enum jio_kind *ret);

#endif
