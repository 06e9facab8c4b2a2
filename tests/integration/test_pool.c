/* SPDX-License-Identifier: MIT */
/* Integration tests of the buffer pool against a real hugepoold, driven through libhugepool. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hugepool.h"
#include "proto.h"
#include "case.h"

#define MIB (1024ull * 1024)
#define CLASSES "[class small]\nsize = 2M\ncount = 4\n[class big]\nsize = 8M\ncount = 2\n"
#define NOBODY 65534

static const struct hp_class_status *cls(const struct hp_status *st, const char *name)
{
	for (uint32_t i = 0; i < st->nclasses; i++)
		if (strcmp(st->classes[i]->name, name) == 0)
			return st->classes[i];
	fail_msg("no class %s in status", name);
	return NULL;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Wait (bounded) until the class shows `waiters` waiting requests: the daemon's state, not time. */
static void wait_waiters(hp_conn *c, const char *name, uint32_t waiters)
{
	for (int i = 0; i < 2000; i++) {
		struct hp_status *st = status(c);
		uint32_t w = cls(st, name)->waiters;

		hp_status_free(st);
		if (w == waiters)
			return;
		sleep_ms(5);
	}
	fail_msg("class %s never had %u waiters", name, waiters);
}

/* Wait (bounded) until the daemon counts `n` clients: a close is seen asynchronously. */
static void wait_clients(hp_conn *c, uint32_t n)
{
	for (int i = 0; i < 2000; i++) {
		struct hp_status *st = status(c);
		uint32_t k = st->nclients;

		hp_status_free(st);
		if (k == n)
			return;
		sleep_ms(5);
	}
	fail_msg("the daemon never counted %u clients", n);
}

static void test_acquire_release(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	struct hp_buffer b[2];
	struct hp_status *st;
	hp_conn *c;
	(void)state;

	start(&d, NULL, CLASSES);
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "small", 2, 0, b), 0);
	for (int i = 0; i < 2; i++) {
		assert_non_null(b[i].addr);
		assert_int_equal(b[i].size, 2 * MIB);
		assert_string_equal(b[i].class_name, "small");
		memset(b[i].addr, 0x5a, b[i].size);
	}
	assert_true(b[0].lease_id != b[1].lease_id);
	st = status(c);
	assert_int_equal(cls(st, "small")->leased, 2);
	assert_int_equal(cls(st, "small")->free, 2);
	assert_int_equal(cls(st, "big")->free, 2);
	assert_int_equal(st->nleases, 2);
	assert_int_equal(st->nclients, 1);
	assert_int_equal(st->clients[0]->pid, getpid());
	assert_int_equal(st->clients[0]->leased_bytes, 4 * MIB);
	hp_status_free(st);

	assert_int_equal(hp_release(c, b, 2), 0);
	assert_null(b[0].addr);
	st = status(c);
	assert_int_equal(cls(st, "small")->free, 4);
	assert_int_equal(cls(st, "small")->leased, 0);
	assert_int_equal(st->nleases, 0);
	assert_int_equal(st->releases, 2);
	hp_status_free(st);
	/* released already: the library refuses, nothing reaches the daemon */
	assert_int_equal(hp_release(c, b, 1), -EINVAL);
	assert_int_equal(hp_acquire(c, "nosuch", 1, 0, b), -ENOENT);
	assert_non_null(strstr(hp_last_error(c), "nosuch"));
	assert_int_equal(hp_acquire(c, "big", 3, 0, b), -E2BIG);
	hp_disconnect(c);
	stop(&d);
}

static void test_timeout(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	struct hp_buffer held[4], b[1];
	struct hp_status *st;
	hp_conn *a, *c;
	double t0;
	(void)state;

	start(&d, NULL, CLASSES);
	a = conn(&d);
	c = conn(&d);
	assert_int_equal(hp_acquire(a, "small", 4, 0, held), 0);
	assert_int_equal(hp_acquire(c, "small", 1, 0, b), -EAGAIN);
	assert_non_null(strstr(hp_last_error(c), "not free"));
	t0 = harness_ms();
	assert_int_equal(hp_acquire(c, "small", 1, 300, b), -ETIMEDOUT);
	/* it did wait: a timeout is not a refusal */
	assert_true(harness_ms() - t0 >= 300 - 1);
	st = status(c);
	assert_int_equal(st->timeouts, 1);
	assert_int_equal(cls(st, "small")->waiters, 0);
	hp_status_free(st);
	/* after a release the same call succeeds */
	assert_int_equal(hp_release(a, held, 1), 0);
	assert_int_equal(hp_acquire(c, "small", 1, 300, b), 0);
	hp_disconnect(a);
	hp_disconnect(c);
	stop(&d);
}

struct waiter {
	const char *socket;
	unsigned n;
	hp_conn *c;
	struct hp_buffer b[4];
	atomic_int done; /* 1 when hp_acquire returned */
	int ret;
	int order;
};

static atomic_int grant_order;

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	w->ret = hp_acquire(w->c, "small", w->n, -1, w->b);
	w->order = atomic_fetch_add(&grant_order, 1);
	atomic_store(&w->done, 1);
	return NULL;
}

static void test_fifo_and_all_or_nothing(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	struct hp_buffer held[4];
	struct waiter wb = { .n = 3 }, wc = { .n = 1 };
	pthread_t tb, tc;
	struct hp_status *st;
	hp_conn *a;
	(void)state;

	start(&d, NULL, CLASSES);
	a = conn(&d);
	wb.c = conn(&d);
	wc.c = conn(&d);
	assert_int_equal(hp_acquire(a, "small", 4, 0, held), 0);
	pthread_create(&tb, NULL, waiter_main, &wb);
	wait_waiters(a, "small", 1);
	pthread_create(&tc, NULL, waiter_main, &wc);
	wait_waiters(a, "small", 2);

	/* one free: C could use it, but B is first in line and needs 3 */
	assert_int_equal(hp_release(a, &held[0], 1), 0);
	st = status(a);
	assert_int_equal(cls(st, "small")->free, 1);
	assert_int_equal(cls(st, "small")->waiters, 2);
	/* all or nothing: B took none of the free one */
	assert_int_equal(cls(st, "small")->leased, 3);
	hp_status_free(st);
	assert_int_equal(atomic_load(&wb.done) + atomic_load(&wc.done), 0);

	/* three free: B gets all three at once, C still waits */
	assert_int_equal(hp_release(a, &held[1], 2), 0);
	pthread_join(tb, NULL);
	assert_int_equal(wb.ret, 0);
	wait_waiters(a, "small", 1);
	assert_int_equal(atomic_load(&wc.done), 0);

	assert_int_equal(hp_release(wb.c, wb.b, 3), 0);
	pthread_join(tc, NULL);
	assert_int_equal(wc.ret, 0);
	assert_true(wb.order < wc.order);
	hp_disconnect(a);
	hp_disconnect(wb.c);
	hp_disconnect(wc.c);
	stop(&d);
}

static void test_uid_limits(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	struct hp_buffer b[4];
	hp_conn *c[4] = { NULL }, *extra = NULL;
	struct hp_status *st;
	double t0;
	(void)state;

	start(&d, "max_bytes_per_uid = 6M\nmax_connections_per_uid = 3\n", CLASSES);
	for (int i = 0; i < 3; i++)
		c[i] = conn(&d);
	/* the fourth connection of this uid is refused with a reason, never hangs */
	assert_int_equal(hp_connect(d.socket, &extra), -EUSERS);
	assert_int_equal(hp_acquire(c[0], "small", 2, 0, b), 0);
	/* 4 MiB held, 4 more asked > 6 MiB: refused at once even though it would wait forever */
	t0 = harness_ms();
	assert_int_equal(hp_acquire(c[1], "small", 2, -1, b + 2), -EDQUOT);
	assert_true(harness_ms() - t0 < 30000);
	assert_non_null(strstr(hp_last_error(c[1]), "max_bytes_per_uid"));
	/* up to the limit is fine, on any connection of the uid */
	assert_int_equal(hp_acquire(c[1], "small", 1, 0, b + 2), 0);
	assert_int_equal(hp_acquire(c[2], "small", 1, 0, b + 3), -EDQUOT);
	st = status(c[0]);
	assert_true(st->denials >= 3);
	hp_status_free(st);
	/* a closed connection gives back its bytes and its connection slot */
	hp_disconnect(c[0]);
	wait_clients(c[1], 2);
	assert_int_equal(hp_connect(d.socket, &c[3]), 0);
	assert_int_equal(hp_acquire(c[3], "small", 2, 0, b), 0);
	for (int i = 1; i < 4; i++)
		hp_disconnect(c[i]);
	stop(&d);
}

static void test_sigkill_releases(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	struct hp_buffer b[4];
	struct hp_status *st;
	int pfd[2];
	char ok = 0;
	pid_t pid;
	hp_conn *c;
	(void)state;

	start(&d, NULL, CLASSES);
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		hp_conn *cc;
		struct hp_buffer cb[4];

		close(pfd[0]);
		if (hp_connect(d.socket, &cc) < 0 || hp_acquire(cc, "small", 4, 0, cb) < 0)
			_exit(1);
		memset(cb[0].addr, 1, cb[0].size);
		if (write(pfd[1], "1", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(pfd[1]);
	assert_int_equal(read(pfd[0], &ok, 1), 1);
	c = conn(&d);
	st = status(c);
	assert_int_equal(cls(st, "small")->leased, 4);
	hp_status_free(st);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* all four come back within a second of the kill */
	assert_int_equal(hp_acquire(c, "small", 4, 1000, b), 0);
	st = status(c);
	assert_int_equal(st->disconnect_releases, 4);
	hp_status_free(st);
	assert_int_equal(harness_log_count(&d, "released its 4 leases"), 1);
	close(pfd[0]);
	hp_disconnect(c);
	stop(&d);
}

/* Acquire one buffer over a raw connection; returns its memfd and lease id. */
static int raw_acquire(int fd, const char *cls_name, uint64_t *ret_id)
{
	struct proto_acquire a = { .count = 1, .timeout_ms = 1000 };
	struct proto_hdr h;
	void *payload = NULL;
	int fds[PROTO_MAX_FDS];

	proto_set_name(a.class_name, sizeof(a.class_name), cls_name);
	assert_int_equal(proto_send(fd, PROTO_ACQUIRE, &a, sizeof(a), NULL, 0), 0);
	assert_int_equal(proto_recv(fd, &h, &payload, fds, PROTO_MAX_FDS), 0);
	assert_int_equal(h.type, PROTO_GRANT);
	assert_int_equal(h.nfds, 1);
	*ret_id = ((struct proto_grant_entry *)((struct proto_grant *)payload + 1))->lease_id;
	free(payload);
	return fds[0];
}

static void test_sealed_buffers(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	struct hp_status *st;
	uint64_t id;
	int fd, mfd;
	char *p;
	hp_conn *c;
	(void)state;

	start(&d, NULL, CLASSES);
	fd = raw_connect(&d);
	mfd = raw_acquire(fd, "small", &id);
	/* no client can shrink or grow a buffer under the daemon or another holder */
	assert_int_equal(ftruncate(mfd, 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(mfd, 64 * MIB), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(fcntl(mfd, F_ADD_SEALS, F_SEAL_WRITE), -1);
	assert_int_equal(errno, EPERM);
	assert_true(fcntl(mfd, F_GET_SEALS) & F_SEAL_SHRINK);
	assert_int_equal(fcntl(mfd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	p = mmap(NULL, 2 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	assert_true(p != MAP_FAILED);
	memset(p, 3, 2 * MIB);
	munmap(p, 2 * MIB);
	close(mfd);
	/* the daemon lives on and still counts the lease */
	c = conn(&d);
	st = status(c);
	assert_int_equal(cls(st, "small")->leased, 1);
	hp_status_free(st);
	close(fd);
	hp_disconnect(c);
	stop(&d);
}

/* Send bytes, half-close, and expect the daemon to close the connection. */
static void assert_closed(int fd);

static void expect_closed(const struct daemon *d, const void *bytes, size_t len, bool hello_first)
{
	int fd;

	if (hello_first) {
		fd = raw_connect(d);
	} else {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->socket);
		assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	if (len)
		(void)send(fd, bytes, len, MSG_NOSIGNAL);
	shutdown(fd, SHUT_WR);
	assert_closed(fd);
	close(fd);
}

/* The daemon closed fd: EOF, or a reset because it closed with our bytes unread; not a timeout. */
static void assert_closed(int fd)
{
	struct timeval tv = { 10, 0 };
	char buf[4096];
	ssize_t n;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
		;
	if (n < 0 && errno != ECONNRESET)
		fail_msg("connection not closed by the daemon: %s", strerror(errno));
}

static void test_garbage_input(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	struct hp_buffer b[1];
	struct hp_status *st;
	struct proto_hdr h;
	unsigned char junk[512];
	hp_conn *good;
	int closed = 0;
	(void)state;

	start(&d, NULL, CLASSES);
	good = conn(&d);
	assert_int_equal(hp_acquire(good, "small", 1, 0, b), 0);
	srand(1234);
	for (int i = 0; i < 40; i++) {
		size_t len = 1 + (size_t)(rand() % (int)sizeof(junk));

		for (size_t j = 0; j < len; j++)
			junk[j] = (unsigned char)rand();
		expect_closed(&d, junk, len, i % 2);
		closed++;
	}
	/* well-formed headers with bad contents */
	proto_hdr_init(&h, PROTO_ACQUIRE, 1u << 30, 0); /* far too long: never read */
	expect_closed(&d, &h, sizeof(h), true);
	proto_hdr_init(&h, PROTO_GRANT, sizeof(struct proto_grant), 0); /* a daemon-only type */
	expect_closed(&d, &h, sizeof(h), true);
	proto_hdr_init(&h, PROTO_STATUS, sizeof(struct proto_status_req), 0); /* before hello */
	{
		unsigned char m[sizeof(h) + sizeof(struct proto_status_req)] = { 0 };

		memcpy(m, &h, sizeof(h));
		expect_closed(&d, m, sizeof(m), false);
	}
	proto_hdr_init(&h, PROTO_HELLO, sizeof(struct proto_hello), 0);
	h.version = 99;
	expect_closed(&d, &h, sizeof(h), false);
	{
		/* an acquire with a class name that is not a name */
		unsigned char m[sizeof(h) + sizeof(struct proto_acquire)];
		struct proto_acquire a = { .count = 1 };

		memset(a.class_name, 'x', sizeof(a.class_name));
		proto_hdr_init(&h, PROTO_ACQUIRE, sizeof(a), 0);
		memcpy(m, &h, sizeof(h));
		memcpy(m + sizeof(h), &a, sizeof(a));
		expect_closed(&d, m, sizeof(m), true);
	}
	closed += 5;
	{
		/* a client that sends fds: refused by the kernel (SO_PASSRIGHTS, Linux 6.16+), or
		 * else the connection is closed (test_hostile.c covers the fds themselves) */
		int fd = raw_connect(&d), devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
		struct proto_status_req r = { 0 };
		int sent = proto_send(fd, PROTO_STATUS, &r, sizeof(r), &devnull, 1);

		if (sent != -EPERM) {
			assert_int_equal(sent, 0);
			assert_closed(fd);
			closed++;
		}
		close(fd);
		close(devnull);
	}
	/* everyone else was served all along (the connection refused fds by the kernel is still
	 * open until the daemon sees its close) */
	wait_clients(good, 1);
	st = status(good);
	assert_int_equal(cls(st, "small")->leased, 1);
	assert_int_equal(st->nclients, 1);
	assert_true(st->protocol_errors >= (uint64_t)closed - 2);
	hp_status_free(st);
	assert_int_equal(hp_release(good, b, 1), 0);
	hp_disconnect(good);
	stop(&d);
}

#define NCLIENTS 200
#define ROUNDS 10

struct worker {
	const char *socket;
	int id;
	int err; /* 0, or what went wrong */
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	hp_conn *c;
	int r = hp_connect(w->socket, &c);

	if (r < 0) {
		w->err = r;
		return NULL;
	}
	for (int i = 0; i < ROUNDS && !w->err; i++) {
		struct hp_buffer b;
		uint32_t *p;

		r = hp_acquire(c, "small", 1, -1, &b);
		if (r < 0) {
			w->err = r;
			break;
		}
		p = b.addr;
		p[0] = (uint32_t)w->id;
		p[b.size / 4 - 1] = (uint32_t)w->id;
		sched_yield();
		if (p[0] != (uint32_t)w->id || p[b.size / 4 - 1] != (uint32_t)w->id)
			w->err = -EIO; /* someone else wrote into our lease */
		r = hp_release(c, &b, 1);
		if (r < 0)
			w->err = r;
	}
	hp_disconnect(c);
	return NULL;
}

static void test_many_clients(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	static struct worker w[NCLIENTS];
	pthread_t t[NCLIENTS];
	struct hp_status *st;
	hp_conn *c;
	(void)state;

	start(&d, "max_connections_per_uid = 0\n", "[class small]\nsize = 2M\ncount = 8\n");
	for (int i = 0; i < NCLIENTS; i++) {
		w[i] = (struct worker){ .socket = d.socket, .id = i + 1 };
		assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < NCLIENTS; i++) {
		pthread_join(t[i], NULL);
		if (w[i].err)
			fprintf(stderr, "client %d: %s\n", i, hp_strerror(w[i].err));
		assert_int_equal(w[i].err, 0);
	}
	c = conn(&d);
	st = status(c);
	assert_int_equal(cls(st, "small")->free, 8);
	assert_int_equal(st->nleases, 0);
	assert_int_equal(st->grants, NCLIENTS * ROUNDS);
	assert_int_equal(st->connections_total, NCLIENTS + 1);
	hp_status_free(st);
	hp_disconnect(c);
	stop(&d);
}

static bool all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

static void test_content_same_uid(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	struct hp_buffer b;
	hp_conn *c;
	(void)state;

	start(&d, NULL, "[class one]\nsize = 2M\ncount = 1\n");
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 1, 0, &b), 0);
	assert_true(all_bytes(b.addr, b.size, 0)); /* fresh from boot */
	memset(b.addr, 0xab, b.size);
	hp_disconnect(c);
	/* the next holder of the same uid finds the data as it was left (warm reuse) */
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 1, 1000, &b), 0);
	assert_true(all_bytes(b.addr, b.size, 0xab));
	hp_disconnect(c);
	stop(&d);
}

/*
 * hp_release_keep_range: the range stays mapped to private zeroes, so a reference kept past the
 * release reads zeroes and never reaches the next holder (the same uid: warm, so a shared range
 * would show it every byte); the caller unmaps it, hp_disconnect leaves it alone.
 */
static void test_release_keep_range(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	struct hp_buffer b, next;
	hp_conn *c;
	unsigned char *stale;
	(void)state;

	start(&d, NULL, "[class one]\nsize = 2M\ncount = 1\n");
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 1, 0, &b), 0);
	memset(b.addr, 0x3c, b.size);
	stale = b.addr;
	assert_int_equal(hp_release_keep_range(c, &b, 1), 0);
	assert_ptr_equal(b.addr, stale);
	assert_true(all_bytes(stale, b.size, 0));
	memset(stale, 0xee, b.size); /* the stale writer's own pages */
	assert_int_equal(hp_acquire(c, "one", 1, 1000, &next), 0);
	assert_true(all_bytes(next.addr, next.size, 0x3c));
	assert_int_equal(hp_release_keep_range(c, &b, 1), -EINVAL); /* released already */
	hp_disconnect(c); /* unmaps next, not the kept range */
	assert_true(all_bytes(stale, b.size, 0xee));
	assert_int_equal(munmap(stale, b.size), 0);
	stop(&d);
}

static void test_content_other_uid(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	struct hp_status *st;
	uint64_t id;
	unsigned char *old;
	int fd, mfd, status_code;
	pid_t pid;
	hp_conn *c;
	(void)state;

	if (geteuid() != 0) {
		fprintf(stderr, "skipped: needs root to run a client as another uid\n");
		skip();
	}
	start(&d, NULL, "[class one]\nsize = 2M\ncount = 1\n");
	/* uid 0 writes, releases, but keeps its mapping (a misbehaving client) */
	fd = raw_connect(&d);
	mfd = raw_acquire(fd, "one", &id);
	old = mmap(NULL, 2 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	assert_true(old != MAP_FAILED);
	memset(old, 0xab, 2 * MIB);
	close(mfd);
	{
		struct {
			struct proto_release r;
			uint64_t id;
		} rel = { { .n = 1 }, id };
		struct proto_hdr h;
		void *payload = NULL;

		assert_int_equal(proto_send(fd, PROTO_RELEASE, &rel, sizeof(rel), NULL, 0), 0);
		assert_int_equal(proto_recv(fd, &h, &payload, NULL, 0), 0);
		assert_int_equal(h.type, PROTO_RESULT);
		assert_int_equal(((struct proto_result *)payload)->err, 0);
		free(payload);
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct hp_buffer b;
		hp_conn *cc;

		if (setgid(NOBODY) < 0 || setuid(NOBODY) < 0)
			_exit(10);
		if (hp_connect(d.socket, &cc) < 0)
			_exit(11);
		if (hp_acquire(cc, "one", 1, 5000, &b) < 0)
			_exit(12);
		if (!all_bytes(b.addr, b.size, 0))
			_exit(13); /* uid 0's data leaked to uid 65534 */
		memset(b.addr, 0xcd, b.size);
		hp_disconnect(cc);
		_exit(0);
	}
	waitpid(pid, &status_code, 0);
	assert_true(WIFEXITED(status_code));
	assert_int_equal(WEXITSTATUS(status_code), 0);
	/* and the stale mapping of uid 0 never saw uid 65534's data */
	assert_true(all_bytes(old, 2 * MIB, 0xab));
	munmap(old, 2 * MIB);
	close(fd);
	c = conn(&d);
	st = status(c);
	assert_true(st->recycled_buffers >= 1);
	hp_status_free(st);
	hp_disconnect(c);
	stop(&d);
}

static void test_boot_errors(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	(void)state;

	/* a bad configuration: exit 2, naming file and line */
	start_refused(&d, "prefault_threads = many\n", CLASSES, 2, "hugepoold.conf:4:");
	/* hugepages required but far more than any test machine reserves: exit 3 with the numbers */
	start_refused(&d, "hugepages = require\n", "[class huge]\nsize = 2M\ncount = 1000000\n", 3,
		      "1000000 hugepages of 2.0 MiB needed");
}

static void test_status_pool(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	struct hp_status *st;
	const char *mode = getenv("HP_TEST_HUGEPAGES");
	hp_conn *c;
	(void)state;

	start(&d, NULL, CLASSES);
	c = conn(&d);
	st = status(c);
	assert_int_equal(st->pool_bytes, 4 * 2 * MIB + 2 * 8 * MIB);
	assert_int_equal(st->daemon_pid, d.pid);
	assert_true(st->boot_threads >= 1);
	if (mode && strcmp(mode, "off") == 0) {
		assert_int_equal(st->hugetlb, 0);
		assert_int_equal(st->fallback, 0);
		assert_int_equal(st->page_size, 4096);
	} else if (st->hugetlb) {
		assert_int_equal(st->page_size, 2 * MIB);
		assert_int_equal(st->fallback, 0);
	} else {
		/* prefer without enough hugepages: the fallback is visible with its reason */
		assert_int_equal(st->fallback, 1);
		assert_non_null(strstr(st->fallback_reason, "needed"));
	}
	hp_status_free(st);
	hp_disconnect(c);
	stop(&d);
}

/* The class's acquire counters in a fresh status. */
static struct hp_class_acquire acquires_of(hp_conn *c, const char *name)
{
	struct hp_status *st = status(c);
	struct hp_class_acquire a = cls(st, name)->acquire;

	hp_status_free(st);
	return a;
}

/* A blocking acquire of one big buffer on its own thread: it waits while the test releases. */
struct big_waiter {
	hp_conn *c;
	struct hp_buffer b;
	int r;
};

static void *big_waiter_main(void *arg)
{
	struct big_waiter *w = arg;

	w->r = hp_acquire(w->c, "big", 1, -1, &w->b);
	return NULL;
}

/*
 * Status counts each class's acquires by outcome (version 6) and the wait of those granted; the
 * server counts connections refused at each limit and acquires of no class.
 */
static void test_acquire_outcomes(void **state)
{
	struct proto_acquire req = { .count = 2, .timeout_ms = -1 };
	struct hp_buffer b[4], big[2];
	struct big_waiter w = { 0 };
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	int raw;
	struct hp_class_acquire a;
	struct hp_status *st;
	hp_conn *c, *c2, *extra = NULL;
	pthread_t t;
	uint64_t slow = 0;
	(void)state;

	start(&d, "max_bytes_per_uid = 26M\nmax_connections_per_uid = 3\n", CLASSES);
	c = conn(&d);
	c2 = conn(&d);
	w.c = conn(&d);
	assert_int_equal(hp_connect(d.socket, &extra), -EUSERS);
	/* granted at once, twice: two waits in the first bucket or so */
	assert_int_equal(hp_acquire(c, "big", 2, 0, big), 0);
	assert_int_equal(hp_acquire(c2, "small", 1, 0, b), 0);
	/* too large, none free and no wait, a class that does not exist (18 of 26 MiB held) */
	assert_int_equal(hp_acquire(c2, "small", 5, 0, b + 1), -E2BIG);
	assert_int_equal(hp_acquire(c2, "big", 1, 0, b + 1), -EAGAIN);
	assert_int_equal(hp_acquire(c2, "nosuch", 1, 0, b + 1), -ENOENT);
	/* waits 50 ms, then its deadline */
	assert_int_equal(hp_acquire(c2, "big", 1, 50, b + 1), -ETIMEDOUT);
	/* waits until a release, about 100 ms */
	assert_int_equal(pthread_create(&t, NULL, big_waiter_main, &w), 0);
	wait_waiters(c, "big", 1);
	sleep_ms(100);
	assert_int_equal(hp_release(c, big, 1), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(w.r, 0);
	/* over the uid's bytes: 18 held, 16 more asked */
	assert_int_equal(hp_acquire(c, "big", 2, -1, big), -EDQUOT);
	a = acquires_of(c, "big");
	assert_int_equal(a.acquires, 5);
	assert_int_equal(a.granted, 2);
	assert_int_equal(a.buffers_granted, 3);
	assert_int_equal(a.refused_all_or_nothing, 1);
	assert_int_equal(a.refused_timeout, 1);
	assert_int_equal(a.refused_limit, 1);
	assert_int_equal(a.refused_too_large + a.refused_renewal + a.cancelled, 0);
	assert_int_equal(a.wait.count, 2);
	for (unsigned i = 0; i <= HP_LATENCY_BUCKETS; i++)
		slow += i >= 13 ? a.wait.buckets[i] : 0; /* above 25 ms: the one that waited */
	assert_int_equal(slow, 1);
	assert_true(a.wait.sum_ns >= 100 * 1000000ull);
	a = acquires_of(c, "small");
	assert_int_equal(a.acquires, 2);
	assert_int_equal(a.granted, 1);
	assert_int_equal(a.refused_too_large, 1);
	/* an acquire whose connection ends while it waits (2 big: one is free, c holds the other) */
	hp_disconnect(w.c);
	wait_clients(c, 2);
	raw = raw_connect(&d);
	proto_set_name(req.class_name, sizeof(req.class_name), "big");
	assert_int_equal(proto_send(raw, PROTO_ACQUIRE, &req, sizeof(req), NULL, 0), 0);
	wait_waiters(c, "big", 1);
	close(raw);
	wait_waiters(c, "big", 0);
	a = acquires_of(c, "big");
	assert_int_equal(a.cancelled, 1);
	st = status(c);
	assert_int_equal(st->server.acquires_unknown_class, 1);
	assert_int_equal(st->server.refused_max_connections_per_uid, 1);
	assert_int_equal(st->server.refused_max_connections, 0);
	assert_int_equal(st->server.max_connections, 1024);
	assert_int_equal(st->server.sees_all, 1); /* root */
	hp_status_free(st);
	hp_disconnect(c2);
	hp_disconnect(c);
	stop(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_acquire_release, teardown),
		cmocka_unit_test_teardown(test_timeout, teardown),
		cmocka_unit_test_teardown(test_fifo_and_all_or_nothing, teardown),
		cmocka_unit_test_teardown(test_uid_limits, teardown),
		cmocka_unit_test_teardown(test_sigkill_releases, teardown),
		cmocka_unit_test_teardown(test_sealed_buffers, teardown),
		cmocka_unit_test_teardown(test_garbage_input, teardown),
		cmocka_unit_test_teardown(test_many_clients, teardown),
		cmocka_unit_test_teardown(test_content_same_uid, teardown),
		cmocka_unit_test_teardown(test_release_keep_range, teardown),
		cmocka_unit_test_teardown(test_content_other_uid, teardown),
		cmocka_unit_test_teardown(test_boot_errors, teardown),
		cmocka_unit_test_teardown(test_status_pool, teardown),
		cmocka_unit_test_teardown(test_acquire_outcomes, teardown),
	};

	return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
