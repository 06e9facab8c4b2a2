/* SPDX-License-Identifier: MIT */
/*
 * jio.c - the generic layer of jio.h: choosing a backend, the depth limit, fault injection,
 * and the tap the crash-point tests record a journal's writes with.
 *
 * jio_open allocates a struct jio_gen around the public struct jio; the backend keeps its own
 * state in io->priv. Completions made here (a request failed by an injected write fault) wait
 * in gen->done and are signalled on the same efd as the backend's, so the flusher cannot tell
 * them apart. One thread at a time, as jio.h says: nothing here locks. Functions return 0 or a
 * negative errno and never print; injected faults complete with -EIO, bad arguments are -EINVAL.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "jio_internal.h"
#include "size.h"
#include "util.h"

/* the most one write(2) moves on Linux (MAX_RW_COUNT): a longer buffer would come back short */
#define JIO_MAX_LEN 0x7ffff000u

struct jio_gen {
	struct jio io; /* first: a struct jio * is a struct jio_gen * */
	/* "stall:N:PATH": the Nth fdatasync from now waits on the FIFO at PATH (jio_datasync) */
	uint64_t stall_at, datasyncs;
	char stall_path[128];
	/* "stall-close:PATH": jio_close waits on the FIFO at PATH before it releases the queues */
	char stall_close[128];
	struct jio_fifo done; /* failed here, never seen by the backend */
	struct jio_req *fail_sync[JIO_DEPTH]; /* in the backend; -EIO when they come back */
	/* the queues (auto: io_uring's beside libaio's where both open); io->ops and io->priv are
	 * those of queue cur, swapped only while nothing is in flight */
	const struct jio_ops *q_ops[JIO_QUEUES];
	void *q_priv[JIO_QUEUES];
	unsigned nqueues, cur;
};

/* set by a test before it opens its journals; jio_open copies it */
static jio_tap_fn tap_fn;
static void *tap_arg;

void jio_set_tap(jio_tap_fn fn, void *arg)
{
	tap_fn = fn;
	tap_arg = arg;
}

static void tap(struct jio *io, enum jio_tap_event ev, const struct jio_req *req, uint64_t lsn)
{
	if (io->tap)
		io->tap(io->tap_arg, ev, req, lsn);
}

void jio_acked(struct jio *io, uint64_t lsn)
{
	tap(io, JIO_TAP_ACKED, NULL, lsn);
}

static struct jio_gen *gen_of(struct jio *io)
{
	return (struct jio_gen *)io;
}

static const struct jio_gen *cgen_of(const struct jio *io)
{
	return (const struct jio_gen *)io;
}

/* The one table of backend names: the configuration's values, the log's and status's words. */
static const char *const jio_kind_table[] = {
	[JIO_AUTO] = "auto",
	[JIO_URING] = "io_uring",
	[JIO_AIO] = "libaio",
	[JIO_SYNC] = "sync",
};

DEFINE_STRING_TABLE_LOOKUP(jio_kind, enum jio_kind)

void jio_signal(struct jio *io)
{
	uint64_t one = 1;
	ssize_t n;

	/* EAGAIN would mean the counter is at its maximum: readable already */
	do
		n = write(io->efd, &one, sizeof(one));
	while (n < 0 && errno == EINTR);
}

/*
 * An armed stall: meet the test at the FIFO (our open for writing returns once it has the
 * other end open), say so with a byte, and wait until it closes its end (POLLERR).
 */
static void stall(const char *path)
{
	struct pollfd p = { .events = 0 };

	p.fd = open(path, O_WRONLY | O_CLOEXEC);
	if (p.fd < 0)
		return;
	if (write(p.fd, "s", 1) == 1)
		while (poll(&p, 1, -1) < 0 && errno == EINTR)
			;
	close(p.fd);
}

int jio_datasync(struct jio *io, int fd)
{
	struct jio_gen *g = gen_of(io);

	if (g->stall_at && ++g->datasyncs == g->stall_at) {
		g->stall_at = 0;
		stall(g->stall_path);
	}
	while (fdatasync(fd) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

static void drain(int efd)
{
	uint64_t v;

	while (read(efd, &v, sizeof(v)) < 0 && errno == EINTR)
		;
}

/* What usually stands behind an errno when a backend cannot be set up. */
static const char *open_hint(enum jio_kind k, int err)
{
	if (err == -EMFILE || err == -ENFILE)
		return "out of file descriptors";
	if (k == JIO_URING) {
		switch (err) {
		case -EPERM:
			return "kernel.io_uring_disabled or a seccomp filter";
		case -ENOSYS:
			return "kernel built without CONFIG_IO_URING, or a seccomp filter";
		case -ENOMEM:
			return "RLIMIT_MEMLOCK too small for the rings before Linux 5.12: ulimit -l";
		case -EINVAL:
		case -EOPNOTSUPP:
			return "kernel too old: IORING_OP_WRITE needs Linux 5.6";
		}
	} else if (k == JIO_AIO) {
		switch (err) {
		case -EPERM:
			return "a seccomp filter";
		case -ENOSYS:
			return "kernel built without CONFIG_AIO, or a seccomp filter";
		case -EAGAIN:
			return "fs.aio-max-nr reached";
		}
	}
	return NULL;
}

/* Append "backend: error text (hint)" to the note, after a "; " when it holds one already. */
static void note_add(char *note, size_t len, enum jio_kind k, int err)
{
	const char *hint = open_hint(k, err);
	char buf[128];
	size_t used;

	if (!note || !len)
		return;
	used = strnlen(note, len - 1);
	snprintf(note + used, len - used, "%s%s: %s%s%s%s", used ? "; " : "", jio_kind_to_string(k),
		 strerror_r(-err, buf, sizeof(buf)), hint ? " (" : "", hint ? hint : "", hint ? ")" : "");
}

/*
 * auto, once libaio's queue is open: io_uring's beside it, so that the journal can measure
 * which of the two (and inline) makes more records durable per second (journal_path.h).
 * libaio syncs on the flusher's thread, with no hop, which wins while a batch is small;
 * io_uring syncs on an io-wq worker while the flusher gathers the next batch, which won by
 * 1.15x where 128 writers made batches of 0.5-1 MB (docs/MEASURED.md, "Durable appends"). The note says
 * why io_uring could not be opened; libaio's queue alone then serves.
 */
static void second_queue(struct jio_gen *g, char *note, size_t notelen)
{
	const struct jio_ops *ops = g->io.ops;
	void *priv = g->io.priv;
	int r = jio_uring_open(&g->io);

	if (r < 0) {
		note_add(note, notelen, JIO_URING, r);
		return;
	}
	g->q_ops[1] = g->io.ops;
	g->q_priv[1] = g->io.priv;
	g->nqueues = 2;
	g->io.ops = ops;
	g->io.priv = priv;
}

int jio_open(enum jio_kind kind, bool direct, struct jio **ret, char *ret_note, size_t notelen)
{
	static int (*const open_fn[])(struct jio *) = {
		[JIO_URING] = jio_uring_open,
		[JIO_AIO] = jio_aio_open,
		[JIO_SYNC] = jio_sync_open,
	};
	/*
	 * auto: libaio first. Its submission writes (buffered writes inside io_submit, O_DIRECT
	 * ones in the background) and its reap syncs on the flusher's own thread, where io_uring
	 * sends each fdatasync to an io-wq worker (and, on ext4, each buffered write too) and
	 * wakes the flusher when it is done: a thread hop per batch that auto's queued path does
	 * not need. Measured in the same turns on a 2-vCPU VM, 32-128 writers: auto queuing
	 * through libaio made 1.03x (page cache) and 1.06x (O_DIRECT) the appends/s of auto
	 * queuing through io_uring, in geometric mean (docs/MEASURED.md, "Durable appends").
	 */
	static const enum jio_kind auto_order[] = { JIO_AIO, JIO_URING, JIO_SYNC };
	_cleanup_free_ struct jio_gen *g = NULL;
	const enum jio_kind *order = kind == JIO_AUTO ? auto_order : &kind;
	size_t norder = kind == JIO_AUTO ? ARRAY_SIZE(auto_order) : 1;
	int r = -EINVAL;

	if (ret_note && notelen)
		ret_note[0] = '\0';
	if (!ret || (unsigned)kind > JIO_SYNC)
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->io.direct = direct;
	g->io.tap = tap_fn;
	g->io.tap_arg = tap_arg;
	g->io.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (g->io.efd < 0)
		return -errno;
	for (size_t i = 0; i < norder; i++) {
		r = open_fn[order[i]](&g->io);
		if (r == 0) {
			g->q_ops[0] = g->io.ops;
			g->q_priv[0] = g->io.priv;
			g->nqueues = 1;
			if (kind == JIO_AUTO && order[i] == JIO_AIO)
				second_queue(g, ret_note, notelen);
			*ret = &TAKE_PTR(g)->io;
			return 0;
		}
		note_add(ret_note, notelen, order[i], r);
	}
	close(g->io.efd);
	return r;
}

unsigned jio_queues(const struct jio *io)
{
	return cgen_of(io)->nqueues;
}

const char *jio_queue_name(const struct jio *io, unsigned q)
{
	const struct jio_gen *g = cgen_of(io);

	return q < g->nqueues ? g->q_ops[q]->name : NULL;
}

unsigned jio_queue_current(const struct jio *io)
{
	return cgen_of(io)->cur;
}

bool jio_on_caller(const struct jio *io)
{
	return io->ops->on_caller;
}

int jio_use_queue(struct jio *io, unsigned q)
{
	struct jio_gen *g = gen_of(io);

	if (q >= g->nqueues)
		return -EINVAL;
	if (q == g->cur)
		return 0;
	if (io->inflight)
		return -EBUSY;
	g->cur = q;
	io->ops = g->q_ops[q];
	io->priv = g->q_priv[q];
	return 0;
}

void jio_close(struct jio *io)
{
	struct jio_gen *g;

	if (!io)
		return;
	g = gen_of(io);
	if (g->stall_close[0])
		stall(g->stall_close);
	for (unsigned q = 0; q < g->nqueues; q++) {
		io->ops = g->q_ops[q];
		io->priv = g->q_priv[q];
		io->ops->close(io);
	}
	close(io->efd);
	free(g);
}

static bool req_valid(const struct jio_req *req)
{
	if (!req || req->niov == 0 || req->niov > JIO_MAX_IOV)
		return false;
	for (unsigned i = 0; i < req->niov; i++) {
		const struct jio_iov *v = &req->iov[i];

		if ((!v->buf && v->len) || v->len > JIO_MAX_LEN || v->off > (uint64_t)INT64_MAX - v->len)
			return false;
	}
	return true;
}

/*
 * Fault injection, decided once for a request about to be written (jio_submit and jio_run
 * alike): FAULT_WRITE, the request holds the write that is to fail (it and what follows it never
 * happen, as when a real write fails; the writes up to it are counted); FAULT_SYNC, its sync is
 * the one to fail (written, then -EIO); else FAULT_NONE.
 */
enum fault { FAULT_NONE, FAULT_WRITE, FAULT_SYNC };

static enum fault fault_take(struct jio *io, const struct jio_req *req)
{
	if (io->fail_write_at > io->writes && io->fail_write_at - io->writes <= req->niov) {
		io->writes = io->fail_write_at;
		io->fail_write_at = 0;
		return FAULT_WRITE;
	}
	return io->fail_sync_at && io->fail_sync_at == io->syncs + 1 ? FAULT_SYNC : FAULT_NONE;
}

/* A request taken by the backend: what it writes and syncs is counted, a sync fault spent. */
static void counted(struct jio *io, const struct jio_req *req, enum fault f)
{
	tap(io, JIO_TAP_SUBMIT, req, 0);
	io->writes += req->niov;
	io->syncs++;
	if (f == FAULT_SYNC)
		io->fail_sync_at = 0;
}

int jio_submit(struct jio *io, struct jio_req *req)
{
	struct jio_gen *g = gen_of(io);
	enum fault f;
	int r;

	if (!req_valid(req))
		return -EINVAL;
	if (io->inflight >= JIO_DEPTH)
		return -EBUSY;
	f = fault_take(io, req);
	if (f == FAULT_WRITE) {
		req->res = -EIO;
		jio_fifo_push(&g->done, req);
		io->inflight++;
		jio_signal(io);
		return 0;
	}
	r = io->ops->submit(io, req);
	if (r < 0)
		return r; /* not taken: nothing counted, a sync fault still armed */
	counted(io, req, f);
	if (f == FAULT_SYNC)
		for (unsigned i = 0; i < JIO_DEPTH; i++)
			if (!g->fail_sync[i]) {
				g->fail_sync[i] = req;
				break;
			}
	io->inflight++;
	return 0;
}

int jio_run(struct jio *io, struct jio_req *req)
{
	enum fault f;

	if (!req_valid(req))
		return -EINVAL;
	f = fault_take(io, req);
	if (f == FAULT_WRITE)
		return req->res = -EIO;
	counted(io, req, f);
	req->res = io->ops->run(io, req);
	if (f == FAULT_SYNC && req->res == 0)
		req->res = -EIO; /* a real error came first: that one is reported */
	tap(io, JIO_TAP_COMPLETE, req, 0);
	return req->res;
}

static struct jio_req *reap_one(struct jio *io)
{
	struct jio_req *req = jio_fifo_pop(&gen_of(io)->done);

	return req ? req : io->ops->reap(io);
}

struct jio_req *jio_reap(struct jio *io)
{
	struct jio_gen *g = gen_of(io);
	struct jio_req *req = reap_one(io);

	if (!req) {
		/* Drain, then look again: a completion that arrived in between is returned now
		 * rather than left behind an efd that no longer wakes anyone. */
		drain(io->efd);
		req = reap_one(io);
		if (!req)
			return NULL;
	}
	io->inflight--;
	for (unsigned i = 0; i < JIO_DEPTH; i++)
		if (g->fail_sync[i] == req) {
			g->fail_sync[i] = NULL;
			/* a real error came first: that one is reported */
			if (req->res == 0)
				req->res = -EIO;
			break;
		}
	tap(io, JIO_TAP_COMPLETE, req, 0);
	return req;
}

int jio_set_fault(struct jio *io, const char *spec)
{
	uint64_t n = 0, base, *at;
	const char *p;

	if (!spec)
		return -EINVAL;
	if (!strncmp(spec, "stall-close:", 12)) {
		struct jio_gen *g = gen_of(io);

		if (!spec[12] || strlen(spec + 12) >= sizeof(g->stall_close))
			return -EINVAL;
		snprintf(g->stall_close, sizeof(g->stall_close), "%s", spec + 12);
		return 0;
	}
	if (!strncmp(spec, "stall:", 6)) {
		struct jio_gen *g = gen_of(io);
		const char *path;

		if (decimal_prefix(spec + 6, &path, &n) < 0 || *path != ':' || n == 0 || !path[1] ||
		    strlen(path + 1) >= sizeof(g->stall_path))
			return -EINVAL;
		snprintf(g->stall_path, sizeof(g->stall_path), "%s", path + 1);
		g->datasyncs = 0;
		g->stall_at = n;
		return 0;
	}
	if (!strncmp(spec, "write:", 6)) {
		p = spec + 6;
		at = &io->fail_write_at;
		base = io->writes;
	} else if (!strncmp(spec, "sync:", 5)) {
		p = spec + 5;
		at = &io->fail_sync_at;
		base = io->syncs;
	} else {
		return -EINVAL;
	}
	if (decimal_parse(p, &n) < 0 || n == 0 || n > UINT64_MAX - base)
		return -EINVAL;
	*at = base + n;
	return 0;
}
