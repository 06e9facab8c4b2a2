/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the journal I/O layer (jio.h), run for each backend (io_uring, libaio, sync):
 * writes land where asked, buffered and O_DIRECT; the depth limit; injected write and sync
 * faults; a request's sync waiting for the writes of earlier ones; real errors (EBADF, a short write under RLIMIT_FSIZE) including io_uring's cancelled
 * fsync; close with requests in flight; and JIO_AUTO (libaio, io_uring, sync) falling back when
 * a seccomp filter forbids io_setup, io_uring_setup, or both. Checks that need a process of their own (rlimit, seccomp)
 * run in a forked child that reports through its exit status.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libaio.h>

#include "jio.h"

#define BLK 4096u

static enum jio_kind k_uring = JIO_URING, k_aio = JIO_AIO, k_sync = JIO_SYNC;

static enum jio_kind kind_of(void **state)
{
	return *(enum jio_kind *)*state;
}

/* A backend that cannot be set up on this machine is skipped, with the reason; anything else
 * that goes wrong is a failure. */
static struct jio *open_kind(enum jio_kind kind, bool direct)
{
	struct jio *io = NULL;
	char note[256];
	int r = jio_open(kind, direct, &io, note, sizeof(note));

	if (r < 0 && kind != JIO_SYNC &&
	    (r == -EPERM || r == -ENOSYS || r == -EAGAIN || r == -EOPNOTSUPP)) {
		print_message("skipped: the %s backend cannot be opened here: %s\n", jio_kind_to_string(kind),
			      note);
		skip();
	}
	assert_int_equal(r, 0);
	assert_non_null(io);
	assert_string_equal(io->ops->name, jio_kind_to_string(kind));
	assert_string_equal(note, "");
	assert_int_equal(io->inflight, 0);
	return io;
}

struct tfile {
	int wfd; /* where requests write: O_RDWR, O_DIRECT if asked */
	int rfd; /* buffered, read-only: to check what landed */
};

/* A fresh file in /tmp, already unlinked. false if O_DIRECT was asked and is refused. */
static bool tfile_open(struct tfile *f, bool direct)
{
	char path[] = "/tmp/test_jio.XXXXXX";
	int fd = mkostemp(path, O_CLOEXEC);
	int err;

	assert_true(fd >= 0);
	f->rfd = open(path, O_RDONLY | O_CLOEXEC);
	f->wfd = direct ? open(path, O_RDWR | O_CLOEXEC | O_DIRECT) : fd;
	err = errno;
	assert_int_equal(unlink(path), 0);
	assert_true(f->rfd >= 0);
	if (direct) {
		close(fd);
		if (f->wfd < 0) {
			close(f->rfd);
			assert_int_equal(err, EINVAL);
			return false;
		}
	}
	return true;
}

static void tfile_close(struct tfile *f)
{
	close(f->wfd);
	close(f->rfd);
}

/* The bytes at [off, off + len) all equal c (a hole or a range past the end reads as zeros). */
static void assert_range(const struct tfile *f, uint64_t off, size_t len, unsigned char c)
{
	unsigned char *b = calloc(1, len);
	ssize_t n;

	assert_non_null(b);
	n = pread(f->rfd, b, len, (off_t)off);
	assert_true(n >= 0);
	for (size_t i = 0; i < len; i++)
		if (b[i] != c) {
			print_message("byte %zu of [%llu, +%zu): %#x, expected %#x\n", i,
				      (unsigned long long)off, len, b[i], c);
			fail();
		}
	free(b);
}

/* A request and its buffers, aligned for O_DIRECT whatever the case. */
struct treq {
	struct jio_req req;
	void *buf[JIO_MAX_IOV];
};

static void treq_add(struct treq *t, int fd, uint64_t off, size_t len, unsigned char c)
{
	unsigned i = t->req.niov++;

	assert_true(i < JIO_MAX_IOV);
	assert_int_equal(posix_memalign(&t->buf[i], BLK, len ? len : 1), 0);
	memset(t->buf[i], c, len);
	t->req.fd = fd;
	t->req.iov[i] = (struct jio_iov){ t->buf[i], len, off };
	t->req.res = 12345; /* must be overwritten on completion */
	t->req.data = t;
}

static void treq_free(struct treq *t)
{
	for (unsigned i = 0; i < t->req.niov; i++)
		free(t->buf[i]);
	memset(t, 0, sizeof(*t));
}

/*
 * Reap until n requests came back, sleeping in poll() on efd in between as the flusher does:
 * a completion that does not make efd readable hangs here and fails after 10 s. Each returned
 * request lands in out[] in completion order; nothing more may come after the n-th.
 */
static void reap_n(struct jio *io, unsigned n, struct jio_req **out)
{
	unsigned got = 0;

	for (;;) {
		struct pollfd p = { .fd = io->efd, .events = POLLIN };
		struct jio_req *req;

		while ((req = jio_reap(io))) {
			assert_true(got < n);
			out[got++] = req;
		}
		if (got == n)
			break;
		assert_int_equal(poll(&p, 1, 10000), 1);
	}
	assert_null(jio_reap(io));
	assert_int_equal(io->inflight, 0);
}

/* Submit one request and wait for it; its result. */
static int run_one(struct jio *io, struct treq *t)
{
	struct jio_req *done;

	assert_int_equal(jio_submit(io, &t->req), 0);
	reap_n(io, 1, &done);
	assert_ptr_equal(done, &t->req);
	return done->res;
}

static void write_read(void **state, bool direct)
{
	enum jio_kind kind = kind_of(state);
	struct treq t[JIO_DEPTH + 1] = { 0 };
	struct jio_req *done[JIO_DEPTH];
	unsigned seen[JIO_DEPTH] = { 0 };
	struct tfile f;
	struct jio *io;

	if (!tfile_open(&f, direct)) {
		print_message("skipped: /tmp refuses O_DIRECT (EINVAL)\n");
		skip();
	}
	io = open_kind(kind, direct);

	/* one at a time, as a journal does: a 4 KiB header at 0 rewritten, data after it */
	for (unsigned i = 0; i < 3; i++) {
		size_t dlen = direct ? 2 * BLK : 1000 + 777 * i;

		treq_add(&t[i], f.wfd, 0, BLK, (unsigned char)('H' + i));
		treq_add(&t[i], f.wfd, BLK + i * 4 * BLK, dlen, (unsigned char)('a' + i));
		assert_int_equal(run_one(io, &t[i]), 0);
	}
	assert_range(&f, 0, BLK, 'H' + 2);
	for (unsigned i = 0; i < 3; i++) {
		assert_range(&f, t[i].req.iov[1].off, t[i].req.iov[1].len, (unsigned char)('a' + i));
		treq_free(&t[i]);
	}

	/* JIO_DEPTH in flight together, each at its own place; then one more is refused */
	for (unsigned i = 0; i < JIO_DEPTH; i++) {
		treq_add(&t[i], f.wfd, (64 + 2 * i) * BLK, BLK, (unsigned char)(0x40 + i));
		treq_add(&t[i], f.wfd, (65 + 2 * i) * BLK, direct ? BLK : BLK - 100 - i,
			 (unsigned char)(0x80 + i));
		assert_int_equal(jio_submit(io, &t[i].req), 0);
	}
	assert_int_equal(io->inflight, JIO_DEPTH);
	treq_add(&t[JIO_DEPTH], f.wfd, 200 * BLK, BLK, 0x11);
	assert_int_equal(jio_submit(io, &t[JIO_DEPTH].req), -EBUSY);
	assert_int_equal(io->inflight, JIO_DEPTH);
	reap_n(io, JIO_DEPTH, done);
	for (unsigned i = 0; i < JIO_DEPTH; i++) {
		unsigned k = (unsigned)((struct treq *)done[i]->data - t);

		assert_true(k < JIO_DEPTH);
		assert_ptr_equal(done[i], &t[k].req);
		assert_int_equal(done[i]->res, 0);
		seen[k]++;
	}
	for (unsigned i = 0; i < JIO_DEPTH; i++) {
		assert_int_equal(seen[i], 1);
		assert_range(&f, t[i].req.iov[0].off, BLK, (unsigned char)(0x40 + i));
		assert_range(&f, t[i].req.iov[1].off, t[i].req.iov[1].len, (unsigned char)(0x80 + i));
		treq_free(&t[i]);
	}
	/* room again: the one refused goes through now */
	assert_int_equal(run_one(io, &t[JIO_DEPTH]), 0);
	assert_range(&f, 200 * BLK, BLK, 0x11);
	treq_free(&t[JIO_DEPTH]);

	jio_close(io);
	tfile_close(&f);
}

static void test_write_read(void **state)
{
	write_read(state, false);
}

static void test_write_read_direct(void **state)
{
	write_read(state, true);
}

static void test_fault_write(void **state)
{
	struct jio *io = open_kind(kind_of(state), false);
	struct treq p = { 0 }, a = { 0 }, b = { 0 }, c = { 0 };
	struct jio_req *done[3];
	struct tfile f;

	tfile_open(&f, false);
	/* two writes before arming: "write:2" counts from when it is armed */
	treq_add(&p, f.wfd, 0, BLK, 'p');
	treq_add(&p, f.wfd, BLK, 100, 'q');
	assert_int_equal(run_one(io, &p), 0);

	assert_int_equal(jio_set_fault(io, "write:2"), 0);
	treq_add(&a, f.wfd, 2 * BLK, BLK, 'A'); /* write 1 */
	treq_add(&b, f.wfd, 3 * BLK, BLK, 'B'); /* write 2: fails, and b with it */
	treq_add(&b, f.wfd, 4 * BLK, BLK, 'b');
	treq_add(&c, f.wfd, 5 * BLK, BLK, 'C'); /* the fault fired once: fine again */
	treq_add(&c, f.wfd, 6 * BLK, BLK, 'c');
	assert_int_equal(jio_submit(io, &a.req), 0);
	assert_int_equal(jio_submit(io, &b.req), 0);
	assert_int_equal(jio_submit(io, &c.req), 0);
	assert_int_equal(io->inflight, 3);
	reap_n(io, 3, done);
	assert_int_equal(a.req.res, 0);
	assert_int_equal(b.req.res, -EIO);
	assert_int_equal(c.req.res, 0);

	assert_range(&f, 0, BLK, 'p');
	assert_range(&f, 2 * BLK, BLK, 'A');
	assert_range(&f, 3 * BLK, 2 * BLK, 0); /* neither write of b happened */
	assert_range(&f, 5 * BLK, BLK, 'C');
	assert_range(&f, 6 * BLK, BLK, 'c');

	/* a failing write in the middle of a request: nothing of it is written either */
	assert_int_equal(jio_set_fault(io, "write:2"), 0);
	treq_free(&a);
	treq_add(&a, f.wfd, 8 * BLK, BLK, 'x');
	treq_add(&a, f.wfd, 9 * BLK, BLK, 'y');
	assert_int_equal(run_one(io, &a), -EIO);
	assert_range(&f, 8 * BLK, 2 * BLK, 0);

	treq_free(&p);
	treq_free(&a);
	treq_free(&b);
	treq_free(&c);
	jio_close(io);
	tfile_close(&f);
}

static void test_fault_sync(void **state)
{
	struct jio *io = open_kind(kind_of(state), false);
	struct treq a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 };
	struct jio_req *done[2];
	struct tfile f;

	tfile_open(&f, false);
	assert_int_equal(jio_set_fault(io, "sync:1"), 0);
	treq_add(&a, f.wfd, 0, BLK, 'a'); /* sync 1: written, but fails */
	treq_add(&a, f.wfd, BLK, 300, 'A');
	treq_add(&b, f.wfd, 2 * BLK, BLK, 'b');
	assert_int_equal(jio_submit(io, &a.req), 0);
	assert_int_equal(jio_submit(io, &b.req), 0);
	reap_n(io, 2, done);
	assert_int_equal(a.req.res, -EIO);
	assert_int_equal(b.req.res, 0);
	assert_range(&f, 0, BLK, 'a');
	assert_range(&f, BLK, 300, 'A');
	assert_range(&f, 2 * BLK, BLK, 'b');

	/* the second sync from now */
	assert_int_equal(jio_set_fault(io, "sync:2"), 0);
	treq_add(&c, f.wfd, 3 * BLK, BLK, 'c');
	treq_add(&d, f.wfd, 4 * BLK, BLK, 'd');
	assert_int_equal(run_one(io, &c), 0);
	assert_int_equal(run_one(io, &d), -EIO);
	assert_range(&f, 4 * BLK, BLK, 'd');

	treq_free(&a);
	treq_free(&b);
	treq_free(&c);
	treq_free(&d);
	jio_close(io);
	tfile_close(&f);
}

static void test_bad_spec(void **state)
{
	static const char *const bad[] = {
		"", "write", "write:", "write:0", "write:-1", "write:+1", "write:1x", "write: 1",
		" write:1", "sync:", "sync:0", "read:1", "write:99999999999999999999999", "WRITE:1",
	};
	struct jio *io = open_kind(kind_of(state), false);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (jio_set_fault(io, bad[i]) != -EINVAL) {
			print_message("spec \"%s\" accepted\n", bad[i]);
			fail();
		}
	}
	assert_int_equal(jio_set_fault(io, NULL), -EINVAL);
	/* nothing got armed by the bad ones */
	assert_int_equal(io->fail_write_at, 0);
	assert_int_equal(io->fail_sync_at, 0);
	assert_int_equal(jio_set_fault(io, "write:18446744073709551615"), 0);
	assert_int_equal(jio_set_fault(io, "sync:1"), 0);
	jio_close(io);
}

/*
 * A write that does not finish until the test lets it: for libaio, io_submit below (it takes
 * the place of libaio's in this program) keeps a one-iocb submission on the held fd to itself
 * until release_held_write() hands it to the kernel; for io_uring the write goes to a full
 * pipe, and reading the pipe lets it through.
 */
static struct {
	int fd; /* -1: none */
	io_context_t ctx;
	struct iocb *cb;
} held = { .fd = -1 };

int io_submit(io_context_t ctx, long nr, struct iocb **ios)
{
	long r;

	if (held.fd >= 0 && nr == 1 && ios[0]->aio_fildes == held.fd && !held.cb) {
		held.ctx = ctx;
		held.cb = ios[0];
		return 1;
	}
	r = syscall(SYS_io_submit, ctx, nr, ios);
	return r < 0 ? -errno : (int)r;
}

static void release_held_write(enum jio_kind kind, int pipe_rd)
{
	char buf[1 << 16];

	if (kind == JIO_AIO) {
		assert_non_null(held.cb);
		assert_int_equal(syscall(SYS_io_submit, held.ctx, 1, &held.cb), 1);
		held.cb = NULL;
		held.fd = -1;
	} else {
		assert_true(read(pipe_rd, buf, sizeof(buf)) > 0);
	}
}

/*
 * A request's sync starts only once the writes of every earlier request are done (jio.h), so
 * that on their file it covers them: the device may finish writes in any order. Request a's
 * write is held up; request b's write goes through at once, but b must not come back (synced)
 * before a's write is done. (Not for the sync backend: it runs each request to its end inside
 * submit, so there is nothing to hold up.)
 */
static void test_sync_waits_for_earlier_writes(void **state)
{
	enum jio_kind kind = kind_of(state);
	struct treq a = { 0 }, b = { 0 };
	struct jio_req *done[2];
	struct tfile f, slow;
	int p[2] = { -1, -1 };
	struct jio *io;

	io = open_kind(kind, false);
	tfile_open(&f, false);
	if (kind == JIO_AIO) {
		tfile_open(&slow, false);
		held.fd = slow.wfd;
		treq_add(&a, slow.wfd, 0, BLK, 'a');
	} else {
		char fill[BLK];

		memset(fill, 'x', sizeof(fill));
		assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
		while (write(p[1], fill, sizeof(fill)) > 0)
			;
		assert_int_equal(fcntl(p[1], F_SETFL, 0), 0);
		treq_add(&a, p[1], 0, BLK, 'a');
	}
	treq_add(&b, f.wfd, 0, BLK, 'b');
	assert_int_equal(jio_submit(io, &a.req), 0);
	assert_int_equal(jio_submit(io, &b.req), 0);
	/* b's write is in the file soon; b itself stays out while a's write is held up */
	for (int i = 0; i < 50; i++) {
		struct pollfd pl = { .fd = io->efd, .events = POLLIN };
		struct jio_req *req = jio_reap(io);

		if (req)
			fail_msg("request %c came back while the write of request a was held up",
				 req == &a.req ? 'a' : 'b');
		poll(&pl, 1, 2);
	}
	assert_range(&f, 0, BLK, 'b');
	release_held_write(kind, p[0]);
	reap_n(io, 2, done);
	assert_int_equal(a.req.res, kind == JIO_AIO ? 0 : -EINVAL); /* fsync of a pipe: EINVAL */
	assert_int_equal(b.req.res, 0);
	treq_free(&a);
	treq_free(&b);
	jio_close(io);
	tfile_close(&f);
	if (kind == JIO_AIO)
		tfile_close(&slow);
	else {
		close(p[0]);
		close(p[1]);
	}
}

/* A real error, not an injected one: writing through a read-only fd. For io_uring the fsync
 * linked after the write comes back -ECANCELED, which must not be what is reported. */
static void test_ebadf(void **state)
{
	struct jio *io = open_kind(kind_of(state), false);
	struct treq t = { 0 };
	struct stat st;
	struct tfile f;

	tfile_open(&f, false);
	treq_add(&t, f.rfd, 0, BLK, 'r');
	treq_add(&t, f.rfd, BLK, BLK, 'R');
	assert_int_equal(run_one(io, &t), -EBADF);
	assert_int_equal(fstat(f.rfd, &st), 0);
	assert_int_equal(st.st_size, 0);
	treq_free(&t);
	jio_close(io);
	tfile_close(&f);
}

/* Report a failed check of a forked child on stderr, and make it the child's exit status. */
#define CHILD_CHECK(cond)                                                                    \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "child: line %d: %s\n", __LINE__, #cond);            \
			return 1;                                                            \
		}                                                                            \
	} while (0)

static int run_child(int (*fn)(void *), void *arg)
{
	pid_t pid;
	int st;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn(arg));
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* Poll and reap one request in a child (no cmocka there). */
static struct jio_req *child_wait_one(struct jio *io)
{
	for (int i = 0; i < 1000; i++) {
		struct pollfd p = { .fd = io->efd, .events = POLLIN };
		struct jio_req *req = jio_reap(io);

		if (req)
			return req;
		poll(&p, 1, 10);
	}
	return NULL;
}

/* Under RLIMIT_FSIZE the second write stops short at the limit. */
static int short_write_child(void *arg)
{
	enum jio_kind kind = *(enum jio_kind *)arg;
	char path[] = "/tmp/test_jio.XXXXXX";
	struct rlimit rl = { 6144, 6144 };
	static char buf[2][BLK];
	struct jio_req req = { 0 }, *done;
	struct jio *io;
	int fd;

	signal(SIGXFSZ, SIG_IGN);
	fd = mkostemp(path, O_CLOEXEC);
	CHILD_CHECK(fd >= 0);
	unlink(path);
	CHILD_CHECK(jio_open(kind, false, &io, NULL, 0) == 0);
	CHILD_CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
	req.fd = fd;
	req.niov = 2;
	req.iov[0] = (struct jio_iov){ buf[0], BLK, 0 };
	req.iov[1] = (struct jio_iov){ buf[1], BLK, BLK };
	CHILD_CHECK(jio_submit(io, &req) == 0);
	done = child_wait_one(io);
	CHILD_CHECK(done == &req);
	/* the sync backend carries on after a short write and gets the kernel's reason */
	if (kind == JIO_SYNC)
		CHILD_CHECK(req.res == -EFBIG);
	else
		CHILD_CHECK(req.res == -EIO);
	jio_close(io);
	return 0;
}

static void test_short_write(void **state)
{
	jio_close(open_kind(kind_of(state), false)); /* skips where it cannot open */
	assert_int_equal(run_child(short_write_child, *state), 0);
}

/* Requests in flight when the jio is closed: dropped, and their buffers are free afterwards
 * (ASan would see a write into freed memory otherwise). */
static void test_close_in_flight(void **state)
{
	struct jio *io = open_kind(kind_of(state), false);
	struct treq t[JIO_DEPTH] = { 0 };
	struct tfile f;

	tfile_open(&f, false);
	for (unsigned i = 0; i < JIO_DEPTH; i++) {
		treq_add(&t[i], f.wfd, i * 64 * BLK, 64 * BLK, (unsigned char)i);
		assert_int_equal(jio_submit(io, &t[i].req), 0);
	}
	jio_close(io);
	for (unsigned i = 0; i < JIO_DEPTH; i++)
		treq_free(&t[i]);
	tfile_close(&f);
}

static bool fd_is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

/* Every descriptor the backend opens is close-on-exec; efd does not block. */
static void test_fds(void **state)
{
	bool before[256];
	struct jio *io;

	for (int fd = 0; fd < 256; fd++)
		before[fd] = fd_is_open(fd);
	io = open_kind(kind_of(state), false);
	assert_true(fcntl(io->efd, F_GETFL) & O_NONBLOCK);
	for (int fd = 0; fd < 256; fd++)
		if (!before[fd] && fd_is_open(fd))
			assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	/* nothing to reap: NULL, and efd not readable */
	assert_null(jio_reap(io));
	{
		struct pollfd p = { .fd = io->efd, .events = POLLIN };

		assert_int_equal(poll(&p, 1, 0), 0);
	}
	jio_close(io);
	for (int fd = 0; fd < 256; fd++)
		assert_int_equal(fd_is_open(fd), before[fd]);
}

static void test_invalid(void **state)
{
	struct jio *io = open_kind(kind_of(state), false);
	struct jio_req req = { .fd = 0 };
	static char b[16];

	assert_int_equal(jio_submit(io, &req), -EINVAL);
	for (unsigned i = 0; i < JIO_MAX_IOV; i++)
		req.iov[i] = (struct jio_iov){ b, sizeof(b), 0 };
	req.niov = JIO_MAX_IOV + 1;
	assert_int_equal(jio_submit(io, &req), -EINVAL);
	req.niov = 1;
	req.iov[0] = (struct jio_iov){ NULL, 16, 0 };
	assert_int_equal(jio_submit(io, &req), -EINVAL);
	req.iov[0] = (struct jio_iov){ b, sizeof(b), UINT64_MAX - 8 };
	assert_int_equal(jio_submit(io, &req), -EINVAL);
	assert_int_equal(jio_submit(io, NULL), -EINVAL);
	assert_int_equal(io->inflight, 0);
	jio_close(io);
}

static void test_open_auto(void **state)
{
	struct jio *io = NULL;
	char note[256];
	(void)state;

	assert_int_equal(jio_open(JIO_AUTO, false, &io, note, sizeof(note)), 0);
	/* libaio, with io_uring's queue beside it, unless the note says why not */
	if (strcmp(io->ops->name, "libaio")) {
		print_message("note: auto picked %s: %s\n", io->ops->name, note);
		assert_non_null(strstr(note, "libaio: "));
		assert_int_equal(jio_queues(io), 1);
	} else if (jio_queues(io) == 1) {
		print_message("note: auto has libaio's queue alone: %s\n", note);
		assert_non_null(strstr(note, "io_uring: "));
	} else {
		assert_string_equal(note, "");
	}
	jio_close(io);
	assert_int_equal(jio_open((enum jio_kind)42, false, &io, note, sizeof(note)), -EINVAL);
	assert_int_equal(jio_open(JIO_SYNC, false, NULL, NULL, 0), -EINVAL);
	/* the note is optional */
	assert_int_equal(jio_open(JIO_SYNC, false, &io, NULL, 0), 0);
	jio_close(io);
	jio_close(NULL);
	assert_string_equal(jio_kind_to_string(JIO_AUTO), "auto");
	assert_string_equal(jio_kind_to_string(JIO_URING), "io_uring");
	assert_string_equal(jio_kind_to_string(JIO_AIO), "libaio");
	assert_string_equal(jio_kind_to_string(JIO_SYNC), "sync");
}

/*
 * auto with libaio and io_uring: both queues open, requests go to the queue in use, the queue
 * changes only with nothing in flight, and fault injection counts across the two.
 */
static void test_two_queues(void **state)
{
	struct treq t[3] = { 0 };
	struct jio_req *done;
	struct jio *io = NULL;
	struct tfile f;
	char note[256];
	(void)state;

	assert_int_equal(jio_open(JIO_AUTO, false, &io, note, sizeof(note)), 0);
	if (jio_queues(io) < 2) {
		print_message("skipped: auto opened one queue here (%s): %s\n", io->ops->name, note);
		jio_close(io);
		skip();
	}
	assert_string_equal(note, "");
	assert_string_equal(jio_queue_name(io, 0), "libaio");
	assert_string_equal(jio_queue_name(io, 1), "io_uring");
	assert_null(jio_queue_name(io, 2));
	assert_int_equal(jio_queue_current(io), 0);
	assert_true(tfile_open(&f, false));
	treq_add(&t[0], f.wfd, 0, BLK, 'a');
	treq_add(&t[1], f.wfd, BLK, BLK, 'b');
	treq_add(&t[2], f.wfd, 2 * BLK, BLK, 'c');

	/* in flight on libaio's queue: no change */
	assert_int_equal(jio_submit(io, &t[0].req), 0);
	assert_int_equal(jio_use_queue(io, 1), -EBUSY);
	assert_string_equal(io->ops->name, "libaio");
	assert_int_equal(jio_use_queue(io, 2), -EINVAL);
	reap_n(io, 1, &done);
	assert_ptr_equal(done, &t[0].req);
	assert_int_equal(done->res, 0);

	/* drained: io_uring's queue takes the next, and the Nth write fails whichever queue has it */
	assert_int_equal(jio_use_queue(io, 1), 0);
	assert_int_equal(jio_queue_current(io), 1);
	assert_string_equal(io->ops->name, "io_uring");
	assert_int_equal(jio_set_fault(io, "write:2"), 0);
	assert_int_equal(run_one(io, &t[1]), 0);
	assert_int_equal(jio_use_queue(io, 0), 0);
	assert_int_equal(run_one(io, &t[2]), -EIO);
	assert_range(&f, 0, BLK, 'a');
	assert_range(&f, BLK, BLK, 'b');
	assert_range(&f, 2 * BLK, BLK, 0);
	for (unsigned i = 0; i < 3; i++)
		treq_free(&t[i]);
	tfile_close(&f);
	jio_close(io);
}

#if defined(__x86_64__)
/* Make the given system calls fail with EPERM in this process from now on, as a container's
 * seccomp profile does with io_uring. */
static int forbid(const int *nrs, unsigned n)
{
	struct sock_filter f[4 + 2 * 4 + 1];
	struct sock_fprog prog;
	unsigned k = 0;

	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, arch));
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	for (unsigned i = 0; i < n && i < 4; i++) {
		f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nrs[i], 0, 1);
		f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
	}
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	prog = (struct sock_fprog){ .len = (unsigned short)k, .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		return -errno;
	return 0;
}

/* The chosen backend still does its job. */
static int child_roundtrip(struct jio *io)
{
	char path[] = "/tmp/test_jio.XXXXXX";
	static char buf[BLK];
	struct jio_req req = { .niov = 1 };
	char back[BLK];
	int fd = mkostemp(path, O_CLOEXEC);

	CHILD_CHECK(fd >= 0);
	unlink(path);
	memset(buf, 'z', sizeof(buf));
	req.fd = fd;
	req.iov[0] = (struct jio_iov){ buf, BLK, BLK };
	CHILD_CHECK(jio_submit(io, &req) == 0);
	CHILD_CHECK(child_wait_one(io) == &req);
	CHILD_CHECK(req.res == 0);
	CHILD_CHECK(pread(fd, back, BLK, BLK) == BLK && !memcmp(back, buf, BLK));
	close(fd);
	return 0;
}

/* One queue's setup call denied (run_child's arg): auto takes the other, alone, and its note
 * says why the denied one is not there (passed over, or not opened beside libaio); the denied
 * one asked for by name is refused with its reason, the other one opens with nothing to say. */
struct denied {
	int nr; /* __NR_io_setup or __NR_io_uring_setup */
	enum jio_kind kind; /* its backend */
	enum jio_kind other;
};

static int denied_child(void *arg)
{
	const struct denied *d = arg;
	struct jio *io;
	char note[256], why[64];

	snprintf(why, sizeof(why), "%s: Operation not permitted", jio_kind_to_string(d->kind));
	CHILD_CHECK(forbid(&d->nr, 1) == 0);
	CHILD_CHECK(jio_open(JIO_AUTO, false, &io, note, sizeof(note)) == 0);
	CHILD_CHECK(!strcmp(io->ops->name, jio_kind_to_string(d->other)));
	CHILD_CHECK(jio_queues(io) == 1);
	CHILD_CHECK(strstr(note, why) == note);
	CHILD_CHECK(!strstr(note, jio_kind_to_string(d->other)));
	CHILD_CHECK(child_roundtrip(io) == 0);
	jio_close(io);
	CHILD_CHECK(jio_open(d->kind, false, &io, note, sizeof(note)) == -EPERM);
	CHILD_CHECK(strstr(note, why) == note);
	CHILD_CHECK(jio_open(d->other, false, &io, note, sizeof(note)) == 0);
	CHILD_CHECK(!strcmp(note, ""));
	jio_close(io);
	return 0;
}

static int no_uring_no_aio_child(void *arg)
{
	const int nrs[] = { __NR_io_uring_setup, __NR_io_setup };
	struct jio *io;
	char note[256], small[12];
	(void)arg;

	CHILD_CHECK(forbid(nrs, 2) == 0);
	CHILD_CHECK(jio_open(JIO_AUTO, false, &io, note, sizeof(note)) == 0);
	CHILD_CHECK(!strcmp(io->ops->name, "sync"));
	CHILD_CHECK(strstr(note, "libaio: Operation not permitted") == note);
	CHILD_CHECK(strstr(note, "; io_uring: Operation not permitted"));
	CHILD_CHECK(child_roundtrip(io) == 0);
	jio_close(io);
	CHILD_CHECK(jio_open(JIO_AIO, false, &io, note, sizeof(note)) == -EPERM);
	CHILD_CHECK(jio_open(JIO_URING, false, &io, note, sizeof(note)) == -EPERM);
	/* a short note is cut, still a string */
	CHILD_CHECK(jio_open(JIO_AUTO, false, &io, small, sizeof(small)) == 0);
	CHILD_CHECK(strlen(small) == sizeof(small) - 1 && !strncmp(small, "libaio: ", 8));
	jio_close(io);
	return 0;
}
#endif

static void test_auto_fallback(void **state)
{
#if defined(__x86_64__)
	/* libaio denied: auto, which tries it first, says why and takes io_uring */
	struct denied no_aio = { __NR_io_setup, JIO_AIO, JIO_URING };
	/* io_uring denied: auto has libaio's queue alone, and says why */
	struct denied no_uring = { __NR_io_uring_setup, JIO_URING, JIO_AIO };

	(void)state;
	assert_int_equal(run_child(denied_child, &no_aio), 0);
	assert_int_equal(run_child(denied_child, &no_uring), 0);
	assert_int_equal(run_child(no_uring_no_aio_child, NULL), 0);
#else
	(void)state;
	print_message("skipped: the seccomp filter of this test is written for x86_64\n");
	skip();
#endif
}

/* the test once per backend, named after it: "test_ebadf/io_uring" */
#define PER_BACKEND(f)                                  \
	{ #f "/io_uring", f, NULL, NULL, &k_uring },    \
	{ #f "/libaio", f, NULL, NULL, &k_aio },        \
	{ #f "/sync", f, NULL, NULL, &k_sync }

int main(void)
{
	const struct CMUnitTest tests[] = {
		PER_BACKEND(test_write_read),
		PER_BACKEND(test_write_read_direct),
		PER_BACKEND(test_fault_write),
		PER_BACKEND(test_fault_sync),
		{ "test_sync_waits_for_earlier_writes/io_uring", test_sync_waits_for_earlier_writes, NULL, NULL, &k_uring },
		{ "test_sync_waits_for_earlier_writes/libaio", test_sync_waits_for_earlier_writes, NULL, NULL, &k_aio },
		PER_BACKEND(test_bad_spec),
		PER_BACKEND(test_ebadf),
		PER_BACKEND(test_short_write),
		PER_BACKEND(test_close_in_flight),
		PER_BACKEND(test_fds),
		PER_BACKEND(test_invalid),
		cmocka_unit_test(test_open_auto),
		cmocka_unit_test(test_two_queues),
		cmocka_unit_test(test_auto_fallback),
	};

	return cmocka_run_group_tests_name("jio", tests, NULL, NULL);
}
