/* SPDX-License-Identifier: MIT */
/*
 * test_restart.c - warm restart: a daemon handing its pool to its next life through the file
 * descriptor store, with the harness playing systemd's part (manager.h) exactly as the protocol
 * says: it keeps what the daemon stores, drops what it removes, and starts the next life with
 * the fds from 3 and LISTEN_* set; and restarts with no service manager at all (no_manager), as
 * a daemon run by hand or by a supervisor that knows nothing of sd_notify is restarted.
 *
 * A buffer is recognised across a restart by its content: a client fills each buffer of a class
 * with its own byte and releases them; a client of the same uid that acquires them after the
 * restart finds those bytes if the memory was taken over, zeros if it was faulted anew. A client
 * of another uid must always find zeros (the privacy rule survives the restart).
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
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <linux/sockios.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hugepool.h"
#include "manager.h"
#include "proto.h"
#include "case.h"
#include "fds.h"

#define MIB (1024ull * 1024)
#define NBUF 4
#define ONE "[class one]\nsize = 2M\ncount = 4\n"
#define TWO "[class two]\nsize = 4M\ncount = 1\n"
#define JCONF "[journal j]\ndirectory = @DIR@/j\nsegment_size = 1M\nsegments = 64\nmax_batch_bytes = 256K\n"

static const struct harness_opts with_store = { .fdstore_max = 4096 };

/*
 * warm.c's layout, which the tests that read or tear the state memfd rely on: a header (its size
 * at byte 12, nbuffers at 20, conn_record_size at 24, nconns at 28, spill_record_size at 32,
 * nspills at 36), then 96-byte buffer records, then the connection records, then the spill
 * records (state at byte 8 of a record, 0 = FREE; 3 = BUSY for a connection).
 */
#define STATE_BUF_RECORD 96
#define STATE_CONN_BUSY 3

static void start_store(struct daemon *d, const char *classes)
{
	int r = harness_start_opts(d, NULL, classes, &with_store);

	running = r == 0 ? d : NULL;
	if (r < 0)
		harness_dump_log(d);
	assert_int_equal(r, 0);
}

/*
 * Before a SIGKILL: wait until the daemon has noted every connection as not in the middle of a
 * request (it does so right after it sent a reply), reading its state memfd as the next life will,
 * and until the service manager holds every connection and spill file it recorded (the daemon
 * sends those once they have lived a second: fdstore.h).
 */
static void wait_settled(const struct daemon *d)
{
	uint32_t h[10];
	int fd = manager_dup(d->mgr, "s"), busy = 1;
	unsigned conns = 0, spills = 0, held = 0;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	for (int tries = 0; tries < 5000 && (busy || held < conns + spills); tries++) {
		off_t at = h[3] + (off_t)h[5] * STATE_BUF_RECORD;

		busy = 0;
		conns = spills = 0;
		for (uint32_t i = 0; i < h[7]; i++) {
			uint32_t st;

			assert_int_equal(pread(fd, &st, 4, at + (off_t)i * h[6] + 8), 4);
			busy += st == STATE_CONN_BUSY;
			conns += st != 0;
		}
		at += (off_t)h[7] * h[6];
		for (uint32_t i = 0; i < h[9]; i++) {
			uint32_t st;

			assert_int_equal(pread(fd, &st, 4, at + (off_t)i * h[8] + 8), 4);
			spills += st != 0;
		}
		held = manager_count(d->mgr, "c") + manager_count(d->mgr, "f") + manager_count(d->mgr, "p");
		if (busy || held < conns + spills)
			usleep(1000);
	}
	close(fd);
	assert_int_equal(busy, 0);
	assert_true(held >= conns + spills);
}

static void restart(struct daemon *d, bool kill_it)
{
	int r;

	if (kill_it)
		wait_settled(d);
	if (kill_it)
		assert_int_equal(harness_kill(d), 128 + SIGKILL);
	else
		assert_int_equal(harness_terminate(d), 0);
	running = NULL;
	r = harness_restart(d);
	if (r < 0)
		harness_dump_log(d);
	assert_int_equal(r, 0);
	running = d;
}

/* Fill every buffer of class one with its own byte (1..NBUF) and release them all. */
static void fill_and_release(const struct daemon *d)
{
	struct hp_buffer b[NBUF];
	hp_conn *c = conn(d);

	assert_int_equal(hp_acquire(c, "one", NBUF, 1000, b), 0);
	for (unsigned i = 0; i < NBUF; i++)
		memset(b[i].addr, (int)(i + 1), b[i].size);
	assert_int_equal(hp_release(c, b, NBUF), 0);
	hp_disconnect(c);
}

/*
 * Acquire every buffer of class one; the bytes found, one bit each (bit k: a buffer filled with
 * byte k, k 1..NBUF; bit 0: a zeroed one; a buffer not uniformly one byte fails the test).
 */
static unsigned contents(hp_conn *c)
{
	struct hp_buffer b[NBUF];
	unsigned seen = 0, zeros = 0;

	assert_int_equal(hp_acquire(c, "one", NBUF, 5000, b), 0);
	for (unsigned i = 0; i < NBUF; i++) {
		const uint8_t *p = b[i].addr;

		for (size_t k = 0; k < b[i].size; k += 4096)
			assert_int_equal(p[k], p[0]);
		assert_true(p[0] <= NBUF);
		seen |= 1u << p[0];
		zeros += p[0] == 0;
	}
	assert_int_equal(hp_release(c, b, NBUF), 0);
	return seen | (zeros > 1 ? 1u << 31 : 0);
}

static unsigned contents_now(const struct daemon *d)
{
	hp_conn *c = conn(d);
	unsigned seen = contents(c);

	hp_disconnect(c);
	return seen;
}

#define ALL_KEPT 0x1eu /* bits 1..4 */

static void check_warm(const struct daemon *d, const char *line)
{
	if (harness_log_count(d, line) != 1) {
		harness_dump_log(d);
		fail_msg("the daemon did not say \"%s\" once", line);
	}
}

/* SIGTERM and SIGKILL: the pool comes back as it was, its content kept, nothing faulted. */
static void test_pool_survives(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */

	(void)state;
	start_store(&d, ONE);
	/* what the daemon keeps: each buffer, its state, its listening socket */
	assert_int_equal(manager_count(d.mgr, "b"), NBUF);
	assert_int_equal(manager_count(d.mgr, "s"), 1);
	assert_int_equal(manager_count(d.mgr, "listen"), 1);
	fill_and_release(&d);
	restart(&d, false);
	check_warm(&d, "Warm start (life 2): adopted 4 buffers (8.0 MiB), faulted 0, dropped 0");
	/* what the store holds already is not sent again (the store would compare each copy with
	 * every fd it holds, most of a warm start for a large pool): only the new state is */
	assert_int_equal(manager_stores(d.mgr), 1);
	assert_int_equal(contents_now(&d), ALL_KEPT);
	/* the old state is gone from the store, the new one is there */
	assert_int_equal(manager_count(d.mgr, "s"), 1);
	assert_int_equal(manager_count(d.mgr, "b"), NBUF);

	restart(&d, true);
	check_warm(&d, "Warm start (life 3): adopted 4 buffers (8.0 MiB), faulted 0, dropped 0");
	assert_int_equal(contents_now(&d), ALL_KEPT);
	stop(&d);
}

/* Without a store (FileDescriptorStoreMax=0) the daemon starts cold, as before. */
static void test_no_store_is_cold(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */

	(void)state;
	start(&d, NULL, ONE);
	fill_and_release(&d);
	assert_int_equal(harness_terminate(&d), 0);
	running = NULL;
	assert_int_equal(harness_restart(&d), 0);
	running = &d;
	assert_int_equal(harness_log_count(&d, "Cold start: nothing was handed over"), 2);
	assert_int_equal(contents_now(&d) & ~(1u << 31), 1u);
	stop(&d);
}

/* A client holding buffers when the daemon is killed: they come back as that uid's, not fresh. */
static void test_leased_at_crash(void **state)
{
	struct hp_buffer b[NBUF];
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	hp_conn *c;

	(void)state;
	start_store(&d, ONE);
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", NBUF, 1000, b), 0);
	for (unsigned i = 0; i < NBUF; i++)
		memset(b[i].addr, (int)(i + 1), b[i].size);
	restart(&d, true);
	hp_disconnect(c); /* its daemon died: the connection is gone (for now) */
	assert_int_equal(contents_now(&d), ALL_KEPT);
	stop(&d);
}

/* Run check(c) on a connection of its own, for harness_as_uid: its result, 10 if none. */
struct on_conn {
	const struct daemon *d;
	int (*check)(hp_conn *c);
};

static int on_conn(void *arg)
{
	const struct on_conn *o = arg;
	hp_conn *c = NULL;
	int r;

	if (hp_connect(o->d->socket, &c) < 0)
		return 10;
	r = o->check(c);
	hp_disconnect(c);
	return r;
}

static int sees_zeros(hp_conn *c)
{
	return contents(c) == (1u | 1u << 31) ? 0 : 11;
}

/* Another uid gets fresh pages from adopted buffers, whether they were free or held at the crash. */
static void test_other_uid_after_restart(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */

	(void)state;
	if (!harness_two_uids())
		skip();
	start_store(&d, ONE);
	fill_and_release(&d);
	restart(&d, true);
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, on_conn, &(struct on_conn){ &d, sees_zeros }), 0);
	stop(&d);
}

/* A daemon with a store whose class-one buffers are filled and free, and its state memfd. */
static int start_with_state(struct daemon *d)
{
	int fd;

	start_store(d, ONE);
	fill_and_release(d);
	fd = manager_dup(d->mgr, "s");
	assert_true(fd >= 0);
	return fd;
}

/* A state the daemon cannot read means a cold start, said once, with nothing adopted. */
static void test_corrupt_state_is_cold(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	int fd;

	(void)state;
	fd = start_with_state(&d);
	assert_int_equal(pwrite(fd, "garbage!", 8, 0), 8);
	close(fd);
	restart(&d, true);
	check_warm(&d, "cannot be used (no state magic): starting cold");
	check_warm(&d, "Cold start: the state could not be used; faulted 4 buffers, dropped 4");
	assert_int_equal(contents_now(&d) & ~(1u << 31), 1u);
	/* the dropped buffers are gone from the store, the new ones in it */
	assert_int_equal(manager_count(d.mgr, "b"), NBUF);
	assert_int_equal(manager_count(d.mgr, "s"), 1);
	stop(&d);
}

/* One record torn by a crash (odd sequence number): that buffer alone is not trusted. */
static void test_torn_record(void **state)
{
	uint32_t seq = 0, header = 0;
	off_t at;
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	unsigned seen;
	int fd;

	(void)state;
	fd = start_with_state(&d);
	assert_int_equal(pread(fd, &header, 4, 12), 4);
	at = header + 2 * STATE_BUF_RECORD; /* buffer record 2's seq */
	assert_int_equal(pread(fd, &seq, 4, at), 4);
	seq |= 1;
	assert_int_equal(pwrite(fd, &seq, 4, at), 4);
	close(fd);
	restart(&d, true);
	check_warm(&d, "Warm start (life 2): adopted 3 buffers (6.0 MiB), faulted 1, dropped 1");
	seen = contents_now(&d);
	/* three kept; the torn one's memfd dropped, a fresh buffer made in its place */
	assert_int_equal(__builtin_popcount(seen & ALL_KEPT), 3);
	assert_true(seen & 1u);
	stop(&d);
}

/* A changed configuration: what still fits is adopted, the rest faulted or dropped. */
static void test_config_changes(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */

	(void)state;
	start_store(&d, ONE TWO);
	fill_and_release(&d);
	/* a class grows, another is added, one goes away */
	assert_int_equal(harness_reconfigure(&d, NULL, "[class one]\nsize = 2M\ncount = 6\n"
							"[class three]\nsize = 2M\ncount = 1\n"),
			 0);
	restart(&d, false);
	check_warm(&d, "adopted 4 buffers (8.0 MiB), faulted 3, dropped 1");
	assert_int_equal(manager_count(d.mgr, "b"), 7);
	/* the class's size changes: nothing of it can be adopted */
	assert_int_equal(harness_reconfigure(&d, NULL, "[class one]\nsize = 4M\ncount = 4\n"), 0);
	restart(&d, false);
	check_warm(&d, "Cold start: nothing the previous life left fits the configuration; faulted 4 buffers, "
		       "dropped 7");
	assert_int_equal(manager_count(d.mgr, "b"), 4);
	assert_int_equal(contents_now(&d) & ~(1u << 31), 1u);
	stop(&d);
}


/*
 * A class before the one a client holds buffers of grows: its buffers move in the pool, and
 * the client keeps its connection and its leases under their old ids all the same.
 */
static void test_leases_survive_a_move(void **state)
{
	static struct daemon d;
	struct hp_buffer b[2];
	struct hp_status *st;
	hp_conn *c;

	(void)state;
	start_store(&d, "[class zero]\nsize = 2M\ncount = 1\n" ONE);
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 2, 1000, b), 0);
	memset(b[1].addr, 0x42, b[1].size);
	assert_int_equal(harness_reconfigure(&d, NULL, "[class zero]\nsize = 2M\ncount = 3\n" ONE), 0);
	restart(&d, false);
	check_warm(&d, "adopted 5 buffers (10.0 MiB), faulted 2, dropped 0; 1 connections served on, 0 closed");
	st = status(c);
	assert_int_equal(st->nleases, 2);
	hp_status_free(st);
	assert_int_equal(((uint8_t *)b[1].addr)[0], 0x42);
	assert_int_equal(hp_release(c, b, 2), 0);
	st = status(c);
	assert_int_equal(st->nleases, 0);
	hp_status_free(st);
	hp_disconnect(c);
	stop(&d);
}

/* The class of a held buffer is removed, another resized: held buffers stay until let go. */
static void test_retired_until_released(void **state)
{
	static struct daemon d;
	struct hp_buffer b[2], fresh[NBUF];
	struct hp_status *st;
	hp_conn *c;

	(void)state;
	start_store(&d, ONE TWO);
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 1, 1000, &b[0]), 0);
	assert_int_equal(hp_acquire(c, "two", 1, 1000, &b[1]), 0);
	memset(b[1].addr, 0x33, b[1].size);
	assert_int_equal(harness_reconfigure(&d, NULL, "[class one]\nsize = 4M\ncount = 4\n"), 0);
	restart(&d, false);
	/* "two" is gone and "one" changed size: the 2 held buffers are taken over, the 3 free
	 * ones of the old "one" dropped, the 4 of the new "one" made */
	check_warm(&d, "adopted 2 buffers (6.0 MiB), faulted 4, dropped 3; 1 connections served on, 0 closed");
	assert_int_equal(manager_count(d.mgr, "b"), 6);
	st = status(c);
	assert_int_equal(st->nclasses, 3);
	assert_int_equal(st->nleases, 2);
	assert_false(st->classes[0]->retired);
	assert_int_equal(st->classes[0]->size, 4 * MIB);
	for (unsigned k = 1; k < 3; k++) {
		assert_true(st->classes[k]->retired);
		assert_int_equal(st->classes[k]->total, 1);
		assert_int_equal(st->classes[k]->leased, 1);
	}
	hp_status_free(st);
	assert_int_equal(((uint8_t *)b[1].addr)[0], 0x33);
	assert_int_equal(hp_acquire(c, "two", 1, 0, fresh), -ENOENT);
	assert_int_equal(hp_acquire(c, "one", NBUF, 0, fresh), 0); /* only the new 4 MiB ones */
	assert_int_equal(fresh[0].size, 4 * MIB);
	assert_int_equal(hp_release(c, b, 2), 0);
	st = status(c);
	assert_int_equal(st->classes[1]->total + st->classes[2]->total, 0);
	hp_status_free(st);
	/* gone from the store too (the manager reads its notify socket in a thread of its own) */
	for (int i = 0; i < 5000 && manager_count(d.mgr, "b") != 4; i++)
		usleep(1000);
	assert_int_equal(manager_count(d.mgr, "b"), 4);
	/* and the next life knows nothing of them */
	restart(&d, true);
	check_warm(&d, "Warm start (life 3): adopted 4 buffers (16.0 MiB), faulted 0, dropped 0");
	hp_disconnect(c);
	stop(&d);
}

/* --- connections ------------------------------------------------------------------------ */

static void restart_both_ways(struct daemon *d, int round)
{
	restart(d, round % 2 == 1);
}

/*
 * A client holding buffers across a restart (SIGTERM, then SIGKILL) keeps its connection, its
 * leases and their content; nobody else was given them meanwhile; it releases them on the same
 * connection, to the new daemon.
 */
static void test_client_keeps_connection(void **state)
{
	static struct daemon d;
	struct hp_buffer b[2], o[3];
	struct hp_status *st;
	hp_conn *c, *other;

	(void)state;
	start_store(&d, ONE);
	c = conn(&d);
	for (int round = 0; round < 2; round++) {
		assert_int_equal(hp_acquire(c, "one", 2, 1000, b), 0);
		memset(b[0].addr, 0x5a, b[0].size);
		memset(b[1].addr, 0xa5, b[1].size);
		restart_both_ways(&d, round);
		assert_int_equal(harness_log_count(&d, "Warm start (life"), round + 1);
		/* the same connection: the new daemon knows who it is and what it holds */
		st = status(c);
		assert_int_equal(st->daemon_pid, d.pid);
		assert_int_equal(st->nleases, 2);
		assert_int_equal(st->classes[0]->leased, 2);
		assert_int_equal(st->classes[0]->free, 2);
		hp_status_free(st);
		/* only the two others are free for anybody else */
		other = conn(&d);
		assert_int_equal(hp_acquire(other, "one", 3, 0, o), -EAGAIN);
		assert_int_equal(hp_acquire(other, "one", 2, 0, o), 0);
		assert_true(o[0].addr != b[0].addr);
		hp_disconnect(other);
		assert_int_equal(((uint8_t *)b[0].addr)[4096], 0x5a);
		assert_int_equal(((uint8_t *)b[1].addr)[4096], 0xa5);
		assert_int_equal(hp_release(c, b, 2), 0);
	}
	hp_disconnect(c);
	stop(&d);
}

struct waiter {
	const struct daemon *d;
	hp_conn *c;
	int r;
	struct hp_buffer b[NBUF];
};

static void *wait_for_all(void *arg)
{
	struct waiter *w = arg;

	w->r = hp_acquire(w->c, "one", NBUF, 60000, w->b);
	return NULL;
}

static uint32_t waiters(const struct daemon *d)
{
	hp_conn *c = conn(d);
	struct hp_status *st = status(c);
	uint32_t n = st->classes[0]->waiters;

	hp_status_free(st);
	hp_disconnect(c);
	return n;
}

/* An acquire waiting when the daemon restarts is still served by the next life. */
static void test_waiting_acquire_served(void **state)
{
	static struct daemon d;
	struct hp_buffer b[NBUF];
	struct waiter w;
	pthread_t t;
	hp_conn *holder;

	(void)state;
	start_store(&d, ONE);
	for (int round = 0; round < 2; round++) {
		holder = conn(&d);
		assert_int_equal(hp_acquire(holder, "one", NBUF, 1000, b), 0);
		w = (struct waiter){ .d = &d, .c = conn(&d), .r = 1 };
		assert_int_equal(pthread_create(&t, NULL, wait_for_all, &w), 0);
		for (int i = 0; i < 5000 && waiters(&d) == 0; i++)
			usleep(1000);
		assert_int_equal(waiters(&d), 1);
		restart_both_ways(&d, round);
		/* still waiting in the new life, until the holder lets go */
		assert_int_equal(waiters(&d), 1);
		assert_int_equal(hp_release(holder, b, NBUF), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		assert_int_equal(w.r, 0);
		assert_int_equal(hp_release(w.c, w.b, NBUF), 0);
		hp_disconnect(w.c);
		hp_disconnect(holder);
	}
	stop(&d);
}

/* A client that left while the daemon was down has its leases back in the pool. */
static void test_client_left_while_down(void **state)
{
	static struct daemon d;
	struct hp_buffer b[NBUF];
	struct hp_status *st;
	hp_conn *c;

	(void)state;
	start_store(&d, ONE);
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 3, 1000, b), 0);
	assert_int_equal(harness_kill(&d), 128 + SIGKILL);
	running = NULL;
	hp_disconnect(c);
	assert_int_equal(harness_restart(&d), 0);
	running = &d;
	c = conn(&d);
	st = status(c);
	assert_int_equal(st->nleases, 0);
	assert_int_equal(st->nclients, 1);
	assert_int_equal(st->classes[0]->free, NBUF);
	hp_status_free(st);
	assert_int_equal(hp_acquire(c, "one", NBUF, 0, b), 0);
	hp_disconnect(c);
	stop(&d);
}

/* A client in another process that opens a spill file, writes one chunk, says so on fd ready and waits to die. */
static pid_t spill_child(const struct daemon *d, const uint8_t *chunk, size_t len)
{
	struct hp_spill_opts o = { .threshold = HP_SPILL_ALWAYS_FILE };
	int p[2];
	pid_t pid;
	char x;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		hp_conn *c;
		hp_spill *sp;

		close(p[0]);
		if (hp_connect(d->socket, &c) < 0 || hp_spill_open(c, &o, &sp) < 0 || hp_spill_write(sp, chunk, len) < 0)
			_exit(1);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &x, 1), 1);
	close(p[0]);
	return pid;
}

/*
 * A client's spill files, their charges and its counters page live on with its connection across a
 * restart (SIGTERM, then SIGKILL): it goes on writing, charged as before, reads everything back
 * and gets every byte back on close. A client that died while the daemon was down has its file
 * released by the next life.
 */
static void test_spill_survives(void **state)
{
	static struct daemon d;
	static uint8_t chunk[256 * 1024], back[256 * 1024];
	struct hp_spill_opts o = { .threshold = HP_SPILL_ALWAYS_FILE };
	struct hp_status *st;
	uint64_t bytes, files;
	hp_spill *sp;
	hp_conn *c;
	pid_t child;
	int status_;

	(void)state;
	start_store(&d, ONE);
	for (int round = 0; round < 2; round++) {
		c = conn(&d);
		assert_int_equal(hp_spill_open(c, &o, &sp), 0);
		for (unsigned k = 0; k < 4; k++) {
			memset(chunk, (int)(0x10 * round + k + 1), sizeof(chunk));
			assert_int_equal(hp_spill_write(sp, chunk, sizeof(chunk)), 0);
		}
		st = status(c);
		bytes = st->spill.bytes;
		files = st->spill.files;
		assert_int_equal(files, 1);
		hp_status_free(st);
		child = spill_child(&d, chunk, sizeof(chunk));
		if (round == 1)
			wait_settled(&d);
		assert_int_equal(round == 1 ? harness_kill(&d) : harness_terminate(&d), round == 1 ? 128 + SIGKILL : 0);
		running = NULL;
		kill(child, SIGKILL);
		assert_int_equal(waitpid(child, &status_, 0), child);
		assert_int_equal(harness_restart(&d), 0);
		running = &d;
		/* the same connection, its file and charge; the dead client's file is gone */
		st = status(c);
		assert_int_equal(st->spill.files, files);
		assert_int_equal(st->spill.bytes, bytes);
		hp_status_free(st);
		for (unsigned k = 4; k < 8; k++) {
			memset(chunk, (int)(0x10 * round + k + 1), sizeof(chunk));
			assert_int_equal(hp_spill_write(sp, chunk, sizeof(chunk)), 0);
		}
		assert_int_equal(hp_spill_finish(sp), 0);
		assert_int_equal(hp_spill_size(sp), 8 * sizeof(chunk));
		for (unsigned k = 0; k < 8; k++) {
			assert_int_equal(hp_spill_read(sp, back, sizeof(back)), (ssize_t)sizeof(back));
			memset(chunk, (int)(0x10 * round + k + 1), sizeof(chunk));
			assert_memory_equal(back, chunk, sizeof(chunk));
		}
		hp_spill_close(sp);
		st = status(c);
		assert_int_equal(st->spill.files, 0);
		assert_int_equal(st->spill.bytes, 0);
		hp_status_free(st);
		hp_disconnect(c);
	}
	stop(&d);
}

/* Killed in the middle of a request: that connection is closed. */
static void test_mid_request_closed(void **state)
{
	static struct daemon d;
	struct proto_hdr h = { .magic = PROTO_MAGIC, .version = PROTO_VERSION, .type = PROTO_STATUS,
			       .len = sizeof(struct proto_status_req) };
	int fd, unread = 1;
	char byte;

	(void)state;
	start_store(&d, ONE);
	fd = raw_connect(&d);
	/* half a request: the header, not its payload; wait until the daemon has read it */
	assert_int_equal(send(fd, &h, sizeof(h), MSG_NOSIGNAL), (ssize_t)sizeof(h));
	for (int i = 0; i < 10000 && unread > 0; i++) {
		assert_int_equal(ioctl(fd, SIOCOUTQ, &unread), 0);
		if (unread)
			usleep(1000);
	}
	assert_int_equal(unread, 0);
	/* the service manager holds the connection once it lived a second (fdstore.h) */
	for (int i = 0; i < 5000 && manager_count(d.mgr, "c") < 1; i++)
		usleep(1000);
	assert_int_equal(manager_count(d.mgr, "c"), 1);
	assert_int_equal(harness_kill(&d), 128 + SIGKILL);
	running = NULL;
	assert_int_equal(harness_restart(&d), 0);
	running = &d;
	check_warm(&d, "0 connections served on, 1 closed");
	check_warm(&d, "Closing connection of pid");
	check_warm(&d, "\"raw\"): the previous life of the daemon ended in the middle of one of its requests");
	assert_int_equal(recv(fd, &byte, 1, 0), 0); /* EOF */
	close(fd);
	stop(&d);
}

/* --- hugepoolctl restart and SIGUSR2: a take-over, or a re-execution in place --------------- */

static int restart_refused(hp_conn *c)
{
	return hp_daemon_restart(c) == -EPERM ? 0 : 11;
}

/* Status until it comes from life `lives` (a restart's answer comes before its end). */
static struct hp_status *status_of_life(hp_conn *c, uint64_t lives)
{
	struct hp_status *st = status(c);

	for (int i = 0; i < 5000 && st->start.lives < lives; i++) {
		hp_status_free(st);
		usleep(1000);
		st = status(c);
	}
	assert_int_equal(st->start.lives, lives);
	return st;
}

/*
 * How many threads of pid are not where the daemon runs: SCHED_OTHER at the nice the harness
 * gave it (this test's). The next life prepares idle (SCHED_IDLE, nice 19) and must be back there
 * from GO on. -1 if none could be read.
 */
static int threads_not_at_daemon_priority(pid_t pid)
{
	int nice = getpriority(PRIO_PROCESS, 0), off = 0, seen = 0;
	char path[320], line[1024];
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	while (d && (e = readdir(d))) {
		char *p;
		FILE *f;
		long v[40];
		int n = 0;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		p = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
		fclose(f);
		/* after the comm: field 3 (state) on; nice is field 19, policy field 41 */
		for (char *t = p ? strtok(p + 2, " ") : NULL; t && n < 40; t = strtok(NULL, " "))
			v[n++] = strtol(t, NULL, 10);
		if (n < 39)
			continue;
		seen++;
		if (v[19 - 3] != nice || v[41 - 3] != 0 /* SCHED_OTHER */) {
			print_message("thread %s of pid %d: nice %ld, policy %ld\n", e->d_name, (int)pid, v[19 - 3],
				      v[41 - 3]);
			off++;
		}
	}
	if (d)
		closedir(d);
	return seen ? off : -1;
}

/*
 * Under a service manager (restart = auto) the next life starts beside the running one, prepares,
 * and takes over; the manager follows it (MAINPID=). A client holding buffers keeps its
 * connection and its leases throughout; hugepoolctl restart says how warm; SIGUSR2 does the same.
 */
static void test_takeover(void **state)
{
	static struct daemon d;
	struct hp_buffer b[2];
	struct hp_status *st;
	char out[1024];
	pid_t first, second;
	hp_conn *c;

	(void)state;
	start(&d, NULL, ONE); /* no fd store: the running life hands everything over itself */
	first = d.pid;
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 2, 1000, b), 0);
	memset(b[0].addr, 0x77, b[0].size);
	assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "hugepoold restarted (pid "));
	assert_non_null(strstr(out, "Start:       warm (life 2): adopted 4 buffers, faulted 0, dropped 0; 2 connections "
				    "served on, 0 closed"));
	st = status_of_life(c, 2);
	second = st->daemon_pid;
	hp_status_free(st);
	assert_int_not_equal(second, first);
	assert_true(harness_follows(&d, second, 5000));
	/* it prepared idle; it serves at the daemon's priority */
	assert_int_equal(harness_log_count(&d, "; prepared idle"), 1);
	assert_int_equal(threads_not_at_daemon_priority(second), 0);
	/* SIGUSR2 to the new one: this connection is answered throughout, and served on again */
	kill(second, SIGUSR2);
	st = status_of_life(c, 3);
	assert_int_not_equal(st->daemon_pid, second);
	assert_true(harness_follows(&d, st->daemon_pid, 5000));
	assert_int_equal(st->start.warm, 1);
	assert_int_equal(st->start.adopted_buffers, NBUF);
	assert_int_equal(st->start.faulted_buffers, 0);
	assert_int_equal(st->nleases, 2);
	hp_status_free(st);
	assert_int_equal(((uint8_t *)b[0].addr)[0], 0x77);
	assert_int_equal(hp_release(c, b, 2), 0);
	if (harness_two_uids())
		assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, on_conn, &(struct on_conn){ &d, restart_refused }), 0);
	hp_disconnect(c);
	assert_int_equal(harness_log_count(&d, "Taken over by pid "), 2);
	assert_int_equal(harness_log_count(&d, "Re-executing '"), 0);
	/* the lives that handed over closed nothing and released nothing of this client's */
	assert_int_equal(harness_log_count(&d, "released its"), 0);
	stop(&d);
}

/*
 * A take-over that fails at a step (HUGEPOOLD_TAKEOVER_FAULT) costs the client nothing: a next
 * life killed before it is prepared has the restart refused with why, and the running life serves
 * on; one that refuses, or is killed, once the running life stopped has the running life
 * re-execute itself in place, which takes its own state over. Either way the connection, its
 * leases and their memory are there after, and the restart after a re-execution takes over; a
 * journal writer's connection is served on, or closed by the re-execution as by any restart.
 */
static void test_takeover_faults(void **state)
{
	static const struct {
		const char *env, *out, *logged;
		int status;
		uint64_t lives; /* the life serving after the failed restart */
		bool store; /* with the service manager's fd store, whose table the fallback hands on */
	} cases[] = {
		/* the next life is the manager's child (CLONE_PARENT): how it ended is the manager's to know */
		{ "HUGEPOOLD_TAKEOVER_FAULT=prepare@2", "(the next life) ended", "Refusing the restart: ", 3, 1, false },
		{ "HUGEPOOLD_TAKEOVER_FAULT=refuse@2", "hugepoold restarted (pid ", "re-executing '", 0, 2, false },
		{ "HUGEPOOLD_TAKEOVER_FAULT=go@2", "hugepoold restarted (pid ", "re-executing '", 0, 2, false },
		{ "HUGEPOOLD_TAKEOVER_FAULT=refuse@2", "hugepoold restarted (pid ", "re-executing '", 0, 2, true },
		{ "HUGEPOOLD_TAKEOVER_FAULT=go@2", "hugepoold restarted (pid ", "re-executing '", 0, 2, true },
	};
	static struct daemon d;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct harness_opts o = { .env = { cases[i].env }, .fdstore_max = cases[i].store ? 4096 : 0 };
		struct hp_buffer b[2];
		struct hp_status *st;
		uint32_t rec = 1;
		char out[1024];
		hp_journal *j;
		uint64_t lsn;
		pid_t first;
		hp_conn *c, *wc;

		start_opts(&d, NULL, ONE JCONF, &o);
		first = d.pid;
		c = conn(&d);
		assert_int_equal(hp_acquire(c, "one", 2, 1000, b), 0);
		memset(b[0].addr, 0x5a, b[0].size);
		/* a journal writer too: its journal is closed before the life holding it ends */
		wc = conn(&d);
		assert_int_equal(hp_journal_open(wc, "j", &j), 0);
		assert_int_equal(hp_journal_append_wait(j, &rec, sizeof(rec), &lsn), 0);
		assert_int_equal(ctl(&d, "restart", out, sizeof(out)), cases[i].status);
		if (!strstr(out, cases[i].out))
			fail_msg("%s: hugepoolctl restart said: %s", cases[i].env, out);
		st = status_of_life(c, cases[i].lives);
		assert_int_equal(st->daemon_pid, first); /* the running life, or its re-execution */
		assert_int_equal(st->nleases, 2);
		hp_status_free(st);
		assert_int_equal(harness_log_count(&d, cases[i].logged), 1);
		assert_int_equal(((uint8_t *)b[0].addr)[0], 0x5a);
		/* served on where nothing restarted; cut off by the re-execution, as by any restart */
		assert_int_equal(hp_journal_append_wait(j, &rec, sizeof(rec), &lsn), cases[i].lives == 1 ? 0 : -ECONNRESET);
		hp_journal_close(j);
		hp_disconnect(wc);
		/* past the faulty life (life 2 would be killed again): a take-over, served on */
		if (cases[i].lives == 2) {
			assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 0);
			st = status_of_life(c, 3);
			assert_int_not_equal(st->daemon_pid, first);
			assert_true(harness_follows(&d, st->daemon_pid, 5000));
			assert_int_equal(st->nleases, 2);
			hp_status_free(st);
		}
		assert_int_equal(hp_release(c, b, 2), 0);
		hp_disconnect(c);
		stop(&d);
	}
}

/* The pid the log gives the last next life ("the next life (pid N) is prepared"), or 0. */
static pid_t next_life_pid(const struct daemon *d)
{
	char line[1024];
	FILE *f = fopen(d->log, "re");
	int pid = 0;

	while (f && fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "the next life (pid ");

		if (p && sscanf(p, "the next life (pid %d)", &pid) != 1)
			pid = 0;
	}
	if (f)
		fclose(f);
	return pid;
}

/* Is pid running (not gone, not a zombie)? */
static bool process_runs(pid_t pid)
{
	char path[64], line[512], *p;
	FILE *f;
	bool runs;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	p = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
	fclose(f);
	runs = p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
	return runs;
}

/*
 * What a service manager does with what is left of a service whose main process died: SIGTERM,
 * and wait until it is gone (the harness is a subreaper: an orphaned life is this test's child).
 */
static void end_leftover(pid_t pid)
{
	if (pid <= 0 || kill(pid, SIGTERM) < 0)
		return;
	for (int i = 0; i < 30000; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid || (kill(pid, 0) < 0 && errno == ESRCH))
			return;
		usleep(1000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/*
 * A take-over whose lives both die once the next one has GO: the next life killed right after
 * it said TAKEN (HUGEPOOLD_TAKEOVER_FAULT=taken@2) while the running life ends as it does after
 * a take-over, or the running life killed once it sent GO (stop@1). With stop@1 the next life's
 * TAKEN finds nobody and it exits, its state published; or, sent before the dying life's end of
 * the channel closed, it is taken, and the next life serves until the service manager ends what
 * is left of the service. Either way the manager starts the daemon again from its fd store, and
 * that life takes over the state the next life had published: a client's connection, its leases
 * and their memory are all there.
 */
static void test_takeover_killed_after_go(void **state)
{
	static const char *const faults[] = { "HUGEPOOLD_TAKEOVER_FAULT=taken@2", "HUGEPOOLD_TAKEOVER_FAULT=stop@1" };
	static struct daemon d;

	(void)state;
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
		struct harness_opts o = { .env = { faults[i] }, .fdstore_max = 4096 };
		struct hp_buffer b[2];
		struct hp_status *st;
		hp_conn *c, *a;
		pid_t first, next;

		start_opts(&d, NULL, ONE, &o);
		first = d.pid;
		c = conn(&d);
		a = conn(&d);
		assert_int_equal(hp_acquire(c, "one", 2, 1000, b), 0);
		memset(b[0].addr, 0x33, b[0].size);
		wait_settled(&d);
		/*
		 * Answered once the next life is prepared. Not hugepoolctl restart, which then waits for
		 * a status on its connection: one the fd store kept (it lived a second) stays open with
		 * nobody serving it until the manager starts the daemon again, which here comes after.
		 */
		assert_int_equal(hp_daemon_restart(a), 0);
		hp_disconnect(a);
		for (int k = 0; k < 30000 && process_runs(first); k++)
			usleep(1000); /* the running life ends, after the hand-over or killed at it */
		next = next_life_pid(&d);
		assert_true(next > 0);
		(void)harness_kill(&d); /* the life the manager follows: dead, or about to end */
		running = NULL;
		end_leftover(next);
		assert_int_equal(harness_restart(&d), 0);
		running = &d;
		st = status_of_life(c, 3);
		assert_int_equal(st->start.warm, 1);
		assert_int_equal(st->nleases, 2);
		hp_status_free(st);
		/* taken@2: life 2 never served, the fault killed it first */
		if (i == 0 && harness_log_count(&d, "Warm start (life 2)") != 0)
			fail_msg("%s: life 2 served", faults[i]);
		assert_int_equal(harness_log_count(&d, "Warm start (life 3)"), 1);
		assert_int_equal(((uint8_t *)b[0].addr)[0], 0x33);
		assert_int_equal(hp_release(c, b, 2), 0);
		hp_disconnect(c);
		stop(&d);
	}
}

/*
 * A next life that prepares idle longer than the daemon gives it (a busy machine starves an idle
 * process: here it sleeps, HUGEPOOLD_TAKEOVER_FAULT=slow@2) is given the daemon's priority by the
 * running life, which says so once, and takes over as any other.
 */
static void test_takeover_slow_prepare(void **state)
{
	struct harness_opts o = { .env = { "HUGEPOOLD_TAKEOVER_FAULT=slow@2" } };
	static struct daemon d;
	struct hp_buffer b;
	struct hp_status *st;
	char out[1024];
	hp_conn *c;

	(void)state;
	start_opts(&d, NULL, ONE, &o);
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 1, 1000, &b), 0);
	assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	st = status_of_life(c, 2);
	assert_int_equal(harness_log_count(&d, "has prepared idle for 1 s: at the daemon's priority from now on"), 1);
	assert_int_equal(threads_not_at_daemon_priority(st->daemon_pid), 0);
	assert_int_equal(st->nleases, 1);
	hp_status_free(st);
	assert_int_equal(hp_release(c, &b, 1), 0);
	hp_disconnect(c);
	stop(&d);
}

/*
 * The life taken over makes its journals final on disk (stopped, marked clean, closed) before it
 * hands over, and releases their I/O queues only after: a libaio context's release waits for the
 * kernel's RCU grace periods (20-60 ms here), which every client waited through when it came
 * first. HUGEPOOLD_FAULT_INJECT=j:stall-close:FIFO holds that release until the test lets it go:
 * meanwhile the restart is answered and the next life serves, the journal's records recovered.
 * Not a timing check: before the change the hand-over waited for the held release, and the
 * restart was never answered (the watchdog's failure).
 */
static void test_takeover_releases_journals_after(void **state)
{
	static struct daemon d;
	char env[512], fifo[300], out[1024], byte;
	struct harness_opts o = { .env = { env } };
	struct hp_buffer b;
	struct hp_status *st;
	struct pollfd p;
	hp_journal *j;
	uint64_t lsn = 0;
	hp_conn *c;
	int rfd;

	(void)state;
	harness_watchdog_arm("a take-over while the life taken over releases its journals", 60);
	snprintf(fifo, sizeof(fifo), "/tmp/hugepool-stall-close.%d", (int)getpid());
	unlink(fifo);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	rfd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	assert_true(rfd >= 0);
	snprintf(env, sizeof(env), "HUGEPOOLD_FAULT_INJECT=j:stall-close:%s", fifo);
	start_opts(&d, NULL, ONE JCONF, &o);
	c = conn(&d);
	assert_int_equal(hp_journal_open(c, "j", &j), 0);
	assert_int_equal(hp_journal_append_wait(j, "one", 3, &lsn), 0);
	hp_journal_close(j);
	assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "hugepoold restarted (pid "));
	/* the life taken over is in its release, held */
	p = (struct pollfd){ .fd = rfd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 10000), 1);
	assert_int_equal(read(rfd, &byte, 1), 1);
	/* and the next life serves, the journal's record recovered */
	st = status_of_life(c, 2);
	hp_status_free(st);
	assert_int_equal(hp_acquire(c, "one", 1, 1000, &b), 0);
	assert_int_equal(hp_release(c, &b, 1), 0);
	assert_int_equal(hp_journal_open(c, "j", &j), 0);
	assert_int_equal(hp_journal_append_wait(j, "two", 3, &lsn), 0);
	assert_int_equal(lsn, 2);
	hp_journal_close(j);
	/* let it go (the next life's own release, at the stop, finds no FIFO) */
	unlink(fifo);
	close(rfd);
	hp_disconnect(c);
	stop(&d);
}

/* Records from..to-1 of journal j, each NUMBERED_LEN bytes of its number's low byte, durable. */
#define NUMBERED_LEN 10240
static void append_numbered(hp_conn *c, unsigned from, unsigned to)
{
	static uint8_t rec[NUMBERED_LEN];
	uint64_t lsn = 0;
	hp_journal *j;

	assert_int_equal(hp_journal_open(c, "j", &j), 0);
	for (unsigned i = from; i < to; i++) {
		memset(rec, (int)i, sizeof(rec));
		assert_int_equal(hp_journal_append_wait(j, rec, sizeof(rec), &lsn), 0);
	}
	hp_journal_close(j);
}

/*
 * Ask for a restart from a child process and return once life `life` prepared its journals while
 * it prepares (its boot got to the step after them, logged at debug level): with
 * HUGEPOOLD_TAKEOVER_FAULT=slow@LIFE it then prepares 1.5 s longer. restarted() waits for the
 * answer.
 */
static pid_t restart_preparing(struct daemon *d, unsigned life)
{
	char out[1024];
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(ctl(d, "restart", out, sizeof(out)) == 0 ? 0 : 1);
	while (harness_log_count(d, "hugepoold: debug: Boot: spill") < (int)life)
		usleep(5000);
	return pid;
}

/* The journal's records from LSN from on are exactly append_numbered's records from-1..to-2. */
static void expect_numbered(hp_conn *c, uint64_t from, uint64_t to)
{
	hp_journal_reader *r = NULL;
	const void *data;
	uint64_t lsn, n = from;
	size_t len;
	int rc;

	assert_int_equal(hp_journal_reader_open(c, "j", from, &r), 0);
	while ((rc = hp_journal_reader_next(r, &lsn, &data, &len)) == 1) {
		assert_int_equal(lsn, n);
		assert_int_equal(len, NUMBERED_LEN);
		assert_int_equal(((const uint8_t *)data)[len - 1], (uint8_t)(lsn - 1));
		n++;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(n, to);
	hp_journal_reader_close(r);
}

static void restarted(pid_t pid)
{
	int rc;

	assert_int_equal(waitpid(pid, &rc, 0), pid);
	assert_int_equal(rc, 0);
}

/*
 * A take-over's next life takes the journal's end from the running life's clean stop and reads no
 * record: a journal's size is not in the clients' pause. 300 records of 10 KiB fill three 1 MiB
 * segments, then a restart. Then 5 more, the last segment's end and a fourth segment, appended
 * while the next life of a second restart prepares (held there by HUGEPOOLD_TAKEOVER_FAULT=slow@3,
 * its journals prepared): the end it takes is after them, and all 305 are there, each once.
 */
static void test_takeover_journal_not_walked(void **state)
{
	struct harness_opts o = { .env = { "HUGEPOOLD_TAKEOVER_FAULT=slow@3" } };
	static struct daemon d;
	char out[1024];
	hp_conn *c;
	pid_t pid;

	(void)state;
	start_opts(&d, NULL, ONE JCONF, &o);
	c = conn(&d);
	append_numbered(c, 0, 300);
	assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	hp_status_free(status_of_life(c, 2));
	assert_int_equal(harness_log_count(&d, "recovered 300 records (LSN 1..300) in 3 segments; clean end, not walked"),
			 1);
	/* the second restart's next life prepares 1.5 s longer: 5 records appended meanwhile */
	pid = restart_preparing(&d, 3);
	append_numbered(c, 300, 305);
	restarted(pid);
	hp_status_free(status_of_life(c, 3));
	assert_int_equal(harness_log_count(&d, "recovered 305 records (LSN 1..305) in 4 segments; clean end, not walked"),
			 1);
	/* every record once, in order, its bytes as appended */
	expect_numbered(c, 1, 306);
	hp_disconnect(c);
	stop(&d);
}

/*
 * The end a take-over's next life takes holds for a journal that changed all over while it
 * prepared: a recycling journal of three segments wrapped twice meanwhile (held by
 * HUGEPOOLD_TAKEOVER_FAULT=slow@2, its journals prepared). Every record appended meanwhile is
 * there and the journal goes on after the last one.
 */
static void test_takeover_journal_reused_while_preparing(void **state)
{
	struct harness_opts o = { .env = { "HUGEPOOLD_TAKEOVER_FAULT=slow@2" } };
	static struct daemon d;
	uint64_t lsn = 0;
	hp_conn *c;
	hp_journal *j;
	pid_t pid;

	(void)state;
	start_opts(&d, NULL, ONE "[journal j]\ndirectory = @DIR@/j\nsegment_size = 1M\nsegments = 3\nwhen_full = recycle\n",
		   &o);
	c = conn(&d);
	append_numbered(c, 0, 150);
	pid = restart_preparing(&d, 2);
	/* 500 more: every segment reused at least once since the walk */
	append_numbered(c, 150, 650);
	restarted(pid);
	hp_status_free(status_of_life(c, 2));
	/* taken over (not refused, and re-executed in place) */
	assert_int_equal(harness_log_count(&d, "recovered 246 records (LSN 405..650) in 3 segments; clean end, not walked"),
			 1);
	assert_int_equal(harness_log_count(&d, "Re-executing '"), 0);
	/* the last segment's records, each as appended, and the journal goes on at 651 */
	expect_numbered(c, 600, 651);
	assert_int_equal(hp_journal_open(c, "j", &j), 0);
	assert_int_equal(hp_journal_append_wait(j, "next", 4, &lsn), 0);
	assert_int_equal(lsn, 651);
	hp_journal_close(j);
	hp_disconnect(c);
	stop(&d);
}

/*
 * restart = exec: the same process becomes the daemon's binary again, handing its fds over
 * itself, and keeps its pid (the way for supervisors that follow no MAINPID=).
 */
static void test_reexec_in_place(void **state)
{
	static struct daemon d;
	struct hp_buffer b[2], free_bufs[NBUF - 2];
	struct hp_status *st;
	char out[1024];
	int nfds;
	pid_t pid;
	hp_conn *c, *c2;

	(void)state;
	start(&d, "restart = exec\n", ONE);
	pid = d.pid;
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 2, 1000, b), 0);
	memset(b[0].addr, 0x77, b[0].size);
	memset(b[1].addr, 0x78, b[1].size);
	assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "hugepoold restarted (pid "));
	assert_non_null(strstr(out, "Start:       warm (life 2): adopted 4 buffers, faulted 0, dropped 0; 2 connections "
				    "served on, 0 closed"));
	kill(pid, SIGUSR2);
	st = status_of_life(c, 3);
	assert_int_equal(st->daemon_pid, pid);
	assert_int_equal(st->start.warm, 1);
	assert_int_equal(st->start.adopted_buffers, NBUF);
	assert_int_equal(st->nleases, 2);
	hp_status_free(st);
	assert_int_equal(((uint8_t *)b[0].addr)[0], 0x77);
	/* a life ends by its exec, not by closing what it holds one by one: every fd it does not
	 * hand over must be close-on-exec, or each re-execution would leave one more open */
	nfds = count_fds_of(pid);
	assert_true(nfds > 0);
	kill(pid, SIGUSR2);
	hp_status_free(status_of_life(c, 4));
	assert_int_equal(count_fds_of(pid), nfds);
	/* each fd came back under its own name (the first re-execution moved most of them to 3, 4,
	 * ..., the later ones none): the two buffers c holds are not among those free */
	c2 = conn(&d);
	assert_int_equal(hp_acquire(c2, "one", NBUF - 2, 1000, free_bufs), 0);
	for (unsigned i = 0; i < NBUF - 2; i++) {
		uint8_t v = ((uint8_t *)free_bufs[i].addr)[0];

		assert_true(v != 0x77 && v != 0x78);
	}
	assert_int_equal(hp_release(c2, free_bufs, NBUF - 2), 0);
	hp_disconnect(c2);
	assert_int_equal(((uint8_t *)b[1].addr)[0], 0x78);
	assert_int_equal(hp_release(c, b, 2), 0);
	hp_disconnect(c);
	assert_int_equal(harness_log_count(&d, "Re-executing '"), 3);
	assert_int_equal(harness_log_count(&d, "released its"), 0);
	assert_int_equal(d.pid, pid);
	stop(&d);
}

/* How many processes have pid for parent (zombies too), from /proc/N/stat. */
static int children_of(pid_t pid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		char path[300], buf[512], *p;
		int ppid, fd;
		ssize_t len;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = '\0';
		/* pid (comm) state ppid ...: comm may hold spaces and parentheses */
		p = strrchr(buf, ')');
		if (p && sscanf(p + 1, " %*c %d", &ppid) == 1 && ppid == pid)
			n++;
	}
	closedir(d);
	return n;
}

static const struct harness_opts no_manager = { .no_manager = true };

/* Of 50 looks at pid's state 2 ms apart, how many found it running: an idle daemon sleeps. */
static int running_looks(pid_t pid)
{
	char path[64], buf[512], *p;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (int i = 0; i < 50; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t len = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

		if (fd >= 0)
			close(fd);
		assert_true(len > 0);
		buf[len] = '\0';
		p = strrchr(buf, ')');
		n += p && p[1] == ' ' && p[2] == 'R';
		usleep(2000);
	}
	return n;
}

/*
 * A daemon started under o with globals (restart = ...), and a client *c holding a buffer *b
 * filled with byte v: the daemon's pid.
 */
static pid_t start_holding(struct daemon *d, const char *globals, const struct harness_opts *o, hp_conn **c,
			   struct hp_buffer *b, int v)
{
	start_opts(d, globals, ONE, o);
	*c = conn(d);
	assert_int_equal(hp_acquire(*c, "one", 1, 1000, b), 0);
	memset(b->addr, v, b->size);
	return d->pid;
}

/* The client still sees its buffer's byte v, releases it and goes; the daemon stops clean. */
static void end_holding(struct daemon *d, hp_conn *c, struct hp_buffer *b, int v)
{
	assert_int_equal(((uint8_t *)b->addr)[0], v);
	assert_int_equal(hp_release(c, b, 1), 0);
	hp_disconnect(c);
	stop(d);
}

/*
 * The daemon goes on in a life of `lives` with another pid, orphaned to this subreaper when the
 * process at old ended: d follows it, the client's one lease kept. How old ended (wait status).
 */
static int follow_other_life(struct daemon *d, hp_conn *c, uint64_t lives, pid_t old)
{
	struct hp_status *st = status_of_life(c, lives);
	int ended;

	assert_int_equal(st->nleases, 1);
	assert_true(st->daemon_pid != old);
	assert_int_equal(waitpid(old, &ended, 0), old);
	d->pid = st->daemon_pid;
	hp_status_free(st);
	return ended;
}

/* hugepoolctl restart, answered once the service is back with the daemon's own pid; its words in out. */
static void restart_keeps_pid(const struct daemon *d, pid_t pid, char *out, size_t len)
{
	char said[64];

	assert_int_equal(ctl(d, "restart", out, len), 0);
	snprintf(said, sizeof(said), "hugepoold restarted (pid %d)", (int)pid);
	assert_non_null(strstr(out, said));
}

/*
 * restart = takeover with no service manager: the next life serves, and then idles as any life
 * does (it once spun its event loop for ever: a flush to the manager it waited for stayed due).
 */
static void test_takeover_without_manager(void **state)
{
	static struct daemon d;
	struct hp_buffer b;
	char out[1024];
	pid_t pid;
	int ended;
	hp_conn *c;

	(void)state;
	pid = start_holding(&d, "restart = takeover\n", &no_manager, &c, &b, 0x59);
	assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	/* the life before ended clean */
	ended = follow_other_life(&d, c, 2, pid);
	assert_true(WIFEXITED(ended) && WEXITSTATUS(ended) == 0);
	assert_true(running_looks(d.pid) < 25);
	end_holding(&d, c, &b, 0x59);
}

/*
 * restart = exec with no service manager: the pid stays, by two take-overs, so that each pause
 * is a take-over's and not a whole start: a next life takes the service over and hands it back
 * to the daemon's own process, executed again, and ends (reaped by it). The client that asked is
 * answered once the service is coming back, so hugepoolctl reports the daemon's own pid; a
 * client keeps its buffer and its content through both, and through SIGUSR2's.
 */
static void test_exec_hands_back(void **state)
{
	static struct daemon d;
	struct hp_buffer b;
	struct hp_status *st;
	char out[1024];
	hp_conn *c;
	pid_t pid;

	(void)state;
	pid = start_holding(&d, "restart = exec\n", &no_manager, &c, &b, 0x5a);
	restart_keeps_pid(&d, pid, out, sizeof(out));
	assert_non_null(strstr(out, "Start:       warm (life 3)"));
	kill(pid, SIGUSR2);
	st = status_of_life(c, 5);
	assert_int_equal(st->daemon_pid, pid);
	assert_int_equal(st->start.warm, 1);
	assert_int_equal(st->nleases, 1);
	hp_status_free(st);
	assert_int_equal(harness_log_count(&d, "Restart: handing the service back to pid"), 2);
	assert_int_equal(harness_log_count(&d, "Re-executing '"), 0);
	/* the lives in between ended, reaped by the daemon */
	for (int i = 0; i < 5000 && children_of(pid) > 0; i++)
		usleep(1000);
	assert_int_equal(children_of(pid), 0);
	/* and the daemon idles as it did before: no flush to a manager that is not there is due */
	assert_true(running_looks(pid) < 25);
	assert_int_equal(d.pid, pid);
	end_holding(&d, c, &b, 0x5a);
}

/*
 * hugepoold as a container's init: the first process of its pid namespace, under a service
 * manager (an nspawn or podman container passing $NOTIFY_SOCKET in). Its exit would end the
 * namespace and kill every process in it, a next life too, so restart = auto keeps the pid by
 * executing in place, and restart = takeover is refused with the reason while the daemon serves
 * on. Before the daemon knew, auto took over there: the client's connection and the daemon
 * ended with the life before.
 */
static void test_first_process_keeps_pid(void **state)
{
	static const struct harness_opts init = { .wrapper = "tests/pidns" };
	static struct daemon d;
	struct hp_buffer b;
	struct hp_status *st;
	char out[1024];
	pid_t outside;
	hp_conn *c;

	(void)state;
	if (geteuid() != 0) {
		skip(); /* a pid namespace needs root */
		return;
	}
	outside = start_holding(&d, "", &init, &c, &b, 0x5b);
	assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "hugepoold restarted (pid 1)"));
	st = status_of_life(c, 2);
	assert_int_equal(st->daemon_pid, 1);
	assert_int_equal(st->start.warm, 1);
	assert_int_equal(st->nleases, 1);
	hp_status_free(st);
	assert_int_equal(harness_log_count(&d, "Re-executing '"), 1);
	assert_int_equal(kill(outside, 0), 0);
	assert_int_equal(d.pid, outside);

	/* restart = takeover (read by the next restart, still in place): refused with the reason,
	 * and the daemon serves on in the same life */
	assert_int_equal(harness_reconfigure(&d, "restart = takeover\n", ONE), 0);
	assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	hp_status_free(status_of_life(c, 3));
	assert_int_not_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "pid namespace's first process"));
	st = status_of_life(c, 3);
	assert_int_equal(st->daemon_pid, 1);
	assert_int_equal(st->nleases, 1);
	hp_status_free(st);
	end_holding(&d, c, &b, 0x5b);
}

/*
 * The daemon's process dies before it has the service back: the life serving it serves on, with
 * its own pid, and the client that asked for the restart is told why.
 */
static void test_exec_back_fails(void **state)
{
	static struct daemon d;
	static const struct harness_opts killed = { .no_manager = true, .env = { "HUGEPOOLD_TAKEOVER_FAULT=prepare@3" } };
	struct hp_buffer b;
	char out[1024];
	pid_t pid;
	int ended;
	hp_conn *c;

	(void)state;
	pid = start_holding(&d, "restart = exec\n", &killed, &c, &b, 0x5b);
	assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 3);
	assert_non_null(strstr(out, "ended before it had the service back"));
	/* the life that was to hand back serves on (life 2) */
	ended = follow_other_life(&d, c, 2, pid);
	assert_true(WIFSIGNALED(ended) && WTERMSIG(ended) == SIGKILL);
	assert_int_equal(harness_log_count(&d, "serves on as the daemon"), 1);
	end_holding(&d, c, &b, 0x5b);
}

/*
 * A `restart = exec` without a manager whose life in between fails as o's fault says: the
 * daemon's process re-executes in place, keeping its pid, its client's buffer (holding pattern
 * pat) and answering the restart, and logs `logged` once.
 */
static void exec_reexecutes_in_place(struct daemon *d, const struct harness_opts *o, uint8_t pat, const char *logged)
{
	struct hp_buffer b;
	char out[1024];
	pid_t pid;
	hp_conn *c;

	pid = start_holding(d, "restart = exec\n", o, &c, &b, pat);
	restart_keeps_pid(d, pid, out, sizeof(out));
	assert_int_equal(harness_log_count(d, logged), 1);
	assert_int_equal(d->pid, pid);
	end_holding(d, c, &b, pat);
}

/*
 * The life that was to hand the service back dies right after it took over, before it took up
 * the channel it was to hand back on: the daemon's process, which still holds every fd, does not
 * execute itself into a next life with nobody to hand over; it re-executes in place instead.
 */
static void test_exec_back_dies_after_taken(void **state)
{
	static struct daemon d;
	static const struct harness_opts dying = { .no_manager = true, .env = { "HUGEPOOLD_TAKEOVER_FAULT=taken@2" } };

	(void)state;
	exec_reexecutes_in_place(&d, &dying, 0x5d, "ended before it could hand the service back; re-executing '");
}

/*
 * The life handing the service back dies once it sent GO to the daemon's process: that one has
 * everything and, with no service manager to start the daemon again, serves on (it once exited,
 * and nothing served).
 */
static void test_exec_back_running_life_dies(void **state)
{
	static struct daemon d;
	static const struct harness_opts dying = { .no_manager = true,
						   .env = { "HUGEPOOLD_TAKEOVER_FAULT=stop@2,orphan@3" } };
	struct hp_buffer b;
	struct hp_status *st;
	pid_t pid;
	hp_conn *c;

	(void)state;
	pid = start_holding(&d, "restart = exec\n", &dying, &c, &b, 0x5e);
	kill(pid, SIGUSR2);
	st = status_of_life(c, 3);
	assert_int_equal(st->daemon_pid, pid);
	assert_int_equal(st->nleases, 1);
	hp_status_free(st);
	assert_int_equal(harness_log_count(&d, "went away as this one took over"), 1);
	end_holding(&d, c, &b, 0x5e);
}

/*
 * The life that was to hand the service back refuses at GO: the daemon's process re-executes in
 * place instead, keeping its pid, and the client that asked is answered by the life after.
 */
static void test_exec_refused_at_go(void **state)
{
	static struct daemon d;
	static const struct harness_opts refusing = { .no_manager = true, .env = { "HUGEPOOLD_TAKEOVER_FAULT=refuse@2" } };

	(void)state;
	exec_reexecutes_in_place(&d, &refusing, 0x5c, "re-executing '");
}

/* The limit of open files under which pid has exactly `spare` fd numbers free, or -1. */
static int nofile_leaving(pid_t pid, int spare)
{
	char path[64];
	struct dirent *e;
	bool open_fd[65536] = { false };
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) < 65536)
			open_fd[atoi(e->d_name)] = true;
	closedir(d);
	for (int n = 0; n < 65536; n++)
		if (!open_fd[n] && --spare == 0)
			return n + 1;
	return -1;
}

/*
 * A re-execution needs a few fds of its own once the daemon has stopped (the names' memfd, its
 * binaries moved above the ones it hands over): they are kept when the restart is checked, and
 * a daemon with none to spare refuses the restart and serves on, where it would otherwise stop
 * and fail its exec, its clients' connections and leases lost.
 */
static void test_reexec_refused_without_fds(void **state)
{
	static struct daemon d;
	struct rlimit was, few;
	struct hp_buffer b;
	struct hp_status *st;
	pid_t pid;
	hp_conn *c;
	int lim = -1;

	(void)state;
	start(&d, "restart = exec\n", ONE);
	pid = d.pid;
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 1, 1000, &b), 0);
	memset(b.addr, 0x55, b.size);
	/* the client's fd has gone to the manager (after a second), so nothing else opens one */
	usleep(1500000);
	assert_int_equal(prlimit(pid, RLIMIT_NOFILE, NULL, &was), 0);
	/* room for the check (a pipe and the binary) and one fd more: not for the spares as well;
	 * the same three times over 20 ms, so that no fd the daemon opens for a moment (a datagram
	 * to the manager) is counted */
	for (int same = 0, tries = 0; same < 3 && tries < 1000; tries++) {
		int now = nofile_leaving(pid, 4);

		same = now == lim ? same + 1 : 1;
		lim = now;
		usleep(10000);
	}
	assert_true(lim > 0);
	few = (struct rlimit){ .rlim_cur = (rlim_t)lim, .rlim_max = was.rlim_max };
	assert_int_equal(prlimit(pid, RLIMIT_NOFILE, &few, NULL), 0);
	kill(pid, SIGUSR2);
	for (int i = 0; i < 10000 && harness_log_count(&d, "Refusing the restart") == 0; i++)
		usleep(1000);
	assert_int_equal(harness_log_count(&d, "Refusing the restart: no fds to spare for the re-execution"), 1);
	/* still the same life, serving the same client its same buffer */
	st = status(c);
	assert_int_equal(st->start.lives, 1);
	assert_int_equal(st->nleases, 1);
	hp_status_free(st);
	assert_int_equal(((uint8_t *)b.addr)[0], 0x55);
	/* with its fds back, the same restart goes through */
	assert_int_equal(prlimit(pid, RLIMIT_NOFILE, &was, NULL), 0);
	kill(pid, SIGUSR2);
	st = status_of_life(c, 2);
	assert_int_equal(st->nleases, 1);
	hp_status_free(st);
	assert_int_equal(hp_release(c, &b, 1), 0);
	hp_disconnect(c);
	assert_int_equal(d.pid, pid);
	stop(&d);
}

/* --- protocol compatibility: clients of version 3 against this daemon ------------------------ */

/*
 * One message in one sendmsg: a daemon that closes the connection on reading the header (a
 * request it refuses) must not make a second send of the payload fail with EPIPE.
 */
static void raw_send(int fd, uint16_t version, uint16_t type, const void *payload, uint32_t len)
{
	struct proto_hdr h = { .magic = PROTO_MAGIC, .version = version, .type = type, .len = len };
	struct iovec iov[2] = { { &h, sizeof(h) }, { (void *)(uintptr_t)payload, len } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };

	assert_int_equal(sendmsg(fd, &m, MSG_NOSIGNAL), (ssize_t)(sizeof(h) + len));
}

/* One message, read by hand (proto_recv takes only this version's); its payload length. */
static uint32_t raw_recv(int fd, struct proto_hdr *h, void *buf, size_t cap)
{
	size_t got = 0;

	assert_int_equal(recv(fd, h, sizeof(*h), MSG_WAITALL), (ssize_t)sizeof(*h));
	assert_true(h->len <= cap);
	while (got < h->len) {
		ssize_t n = recv(fd, (char *)buf + got, h->len - got, 0);

		assert_true(n > 0);
		got += (size_t)n;
	}
	return h->len;
}

static int connect_version(const struct daemon *d, uint16_t version, struct proto_hdr *h, void *buf, size_t cap)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct proto_hello hello = { .name = "old" };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->socket);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	raw_send(fd, version, PROTO_HELLO, &hello, sizeof(hello));
	raw_recv(fd, h, buf, cap);
	return fd;
}

/*
 * A client of protocol version 3 (libhugepool before warm restart) is served in version 3:
 * its replies carry its version and the status it knows, without the start section; the
 * restart request does not exist for it. Each later version gets its own sections more (4 the
 * start, 5 the batches and heaps, 6 the journals' paths, 7 the classes' pages, 8 the journals'
 * configuration), and no record of an earlier section grows. Version 2 is refused, saying which
 * are spoken.
 */
static void test_old_protocol_client(void **state)
{
	static struct daemon d;
	static uint8_t buf[1 << 16];
	struct proto_status_req sreq = { 0 };
	struct proto_restart rreq = { 0 };
	struct proto_hdr h;
	uint32_t len3, len4, len5, len6, len7, len8;
	int v3, v4, v5, v6, v7, v8, v2;
	struct proto_status_jconfig jc[2];

	(void)state;
	/* two journals: versions 5, 6 and 8 add a section per journal */
	start(&d, NULL, ONE "[journal a]\ndirectory = @DIR@/a\n[journal b]\ndirectory = @DIR@/b\nwhen_full = recycle\n");
	v3 = connect_version(&d, 3, &h, buf, sizeof(buf));
	assert_int_equal(h.type, PROTO_WELCOME);
	assert_int_equal(h.version, 3);
	assert_int_equal(((struct proto_welcome *)buf)->version, 3);
	v4 = connect_version(&d, 4, &h, buf, sizeof(buf));
	assert_int_equal(h.version, 4);
	v5 = connect_version(&d, 5, &h, buf, sizeof(buf));
	assert_int_equal(h.version, 5);
	v6 = connect_version(&d, 6, &h, buf, sizeof(buf));
	assert_int_equal(h.version, 6);
	v7 = connect_version(&d, 7, &h, buf, sizeof(buf));
	assert_int_equal(h.version, 7);
	v8 = connect_version(&d, 8, &h, buf, sizeof(buf)); /* all six connected: the same clients */
	assert_int_equal(h.version, 8);
	raw_send(v3, 3, PROTO_STATUS, &sreq, sizeof(sreq));
	len3 = raw_recv(v3, &h, buf, sizeof(buf));
	assert_int_equal(h.type, PROTO_STATUS_REPLY);
	assert_int_equal(h.version, 3);
	raw_send(v4, 4, PROTO_STATUS, &sreq, sizeof(sreq));
	len4 = raw_recv(v4, &h, buf, sizeof(buf));
	assert_int_equal(h.version, 4);
	assert_int_equal(len4 - len3, sizeof(struct proto_status_start));
	raw_send(v5, 5, PROTO_STATUS, &sreq, sizeof(sreq));
	len5 = raw_recv(v5, &h, buf, sizeof(buf));
	assert_int_equal(h.version, 5);
	/* two journals, six clients (v3 to v8) */
	assert_int_equal(len5 - len4, 2 * sizeof(struct proto_status_batches) + 6 * sizeof(struct proto_status_heaps));
	raw_send(v6, 6, PROTO_STATUS, &sreq, sizeof(sreq));
	len6 = raw_recv(v6, &h, buf, sizeof(buf));
	assert_int_equal(h.version, 6);
	/* one class, two journals, no spill account */
	assert_int_equal(len6 - len5, sizeof(struct proto_status_server) + sizeof(struct proto_status_acquire) +
					      2 * sizeof(struct proto_status_durability) +
					      2 * sizeof(struct proto_status_jpath));
	raw_send(v7, 7, PROTO_STATUS, &sreq, sizeof(sreq));
	len7 = raw_recv(v7, &h, buf, sizeof(buf));
	assert_int_equal(h.version, 7);
	/* one class: its pages */
	assert_int_equal(len7 - len6, sizeof(struct proto_status_pages));
	raw_send(v8, 8, PROTO_STATUS, &sreq, sizeof(sreq));
	len8 = raw_recv(v8, &h, buf, sizeof(buf));
	assert_int_equal(h.version, 8);
	/* two journals: their configuration, at the end, in their order (b recycles) */
	assert_int_equal(len8 - len7, 2 * sizeof(struct proto_status_jconfig));
	memcpy(jc, buf + len8 - sizeof(jc), sizeof(jc));
	assert_int_equal(jc[0].when_full, PROTO_JOURNAL_BLOCK);
	assert_int_equal(jc[1].when_full, PROTO_JOURNAL_RECYCLE);
	assert_int_equal(jc[1].max_batch_delay_ns, 2000000); /* the defaults */
	assert_int_equal(jc[1].max_batch_bytes, 1 << 20);
	assert_int_equal(jc[1].ring_size, 1 << 20);
	assert_int_equal(jc[1].reserved, 0);
	close(v5);
	close(v6);
	close(v7);
	close(v8);
	/* a request of another version than its hello's, and one its version does not have */
	raw_send(v4, 3, PROTO_STATUS, &sreq, sizeof(sreq));
	assert_true(recv(v4, buf, 1, 0) <= 0); /* closed (reset: its payload was left unread) */
	raw_send(v3, 3, PROTO_RESTART, &rreq, sizeof(rreq));
	assert_true(recv(v3, buf, 1, 0) <= 0);
	close(v3);
	close(v4);
	/* too old: refused with the range */
	v2 = connect_version(&d, 2, &h, buf, sizeof(buf) - 1);
	assert_int_equal(h.type, PROTO_RESULT);
	buf[h.len] = '\0';
	assert_non_null(memmem(buf, h.len, "protocol version 2 is not supported (daemon speaks 3 to 8)", 58));
	close(v2);
	stop(&d);
}

/*
 * A stop closes its journals together (journal_close_all: each on a thread, so that their I/O
 * queues' releases, tens of ms each, overlap): three journals with records stop clean, and each
 * starts again at its clean end with all its records.
 */
static void test_journals_stop_together(void **state)
{
	static struct daemon d;
	static const char *const names[] = { "a", "b", "c" };
	char want[160];
	hp_conn *c;

	(void)state;
	start(&d, NULL, ONE "[journal a]\ndirectory = @DIR@/a\nsegment_size = 1M\n[journal b]\ndirectory = @DIR@/b\n"
			  "segment_size = 1M\n[journal c]\ndirectory = @DIR@/c\nsegment_size = 1M\n");
	c = conn(&d);
	for (unsigned k = 0; k < 3; k++) {
		hp_journal *j;
		uint64_t lsn = 0;

		assert_int_equal(hp_journal_open(c, names[k], &j), 0);
		for (unsigned i = 0; i <= k; i++)
			assert_int_equal(hp_journal_append_wait(j, "rec", 3, &lsn), 0);
		assert_int_equal(lsn, k + 1);
		hp_journal_close(j);
	}
	hp_disconnect(c);
	restart(&d, false);
	for (unsigned k = 0; k < 3; k++) {
		/* a, b and c hold 1, 2 and 3 records: the line is each one's */
		snprintf(want, sizeof(want), "; recovered %u records (LSN 1..%u) in 1 segments; clean end", k + 1, k + 1);
		if (harness_log_count(&d, want) != 1) {
			harness_dump_log(&d);
			fail_msg("no \"%s\"", want);
		}
	}
	stop(&d);
}

/* --- journals across restarts -------------------------------------------------------------- */

#define JWRITERS 32
#define JRESTARTS 50
#define JMAX_ACKS 100000
struct jwriter {
	pthread_t t;
	const char *socket;
	unsigned id;
	uint32_t next_seq; /* records are "writer id, seq", seq never reused */
	uint32_t nacked;
	uint32_t *acked; /* the seqs acknowledged */
	unsigned reopens;
	unsigned resets, unexplained; /* appends that failed with -ECONNRESET; those without the LSN said */
};

static atomic_bool jstop;
static atomic_ulong jacks;
/*
 * Acknowledgements the writers stop at until the next restart: the journal (64 MiB, never
 * truncated) must hold what they append in 50 restarts however long each takes. A take-over's
 * next life prepares while they go on: under TSan on a loaded machine that took 1.3 s of 32
 * writers' appends at a time, and filled the journal by the 25th restart.
 */
#define JACKS_PER_RESTART 5000
static atomic_ulong jacks_cap;

/* Append, wait for each; on any error (the daemon restarted) open a new connection and writer. */
static void *jwriter_main(void *arg)
{
	struct jwriter *w = arg;
	hp_conn *c = NULL;
	hp_journal *j = NULL;

	while (!atomic_load(&jstop)) {
		uint32_t rec[25] = { w->id, w->next_seq }; /* 100 bytes */
		uint64_t lsn;
		int rc;

		if (atomic_load(&jacks) >= atomic_load(&jacks_cap)) {
			usleep(1000);
			continue;
		}
		if (!j) {
			if (hp_connect(w->socket, &c) < 0 || hp_journal_open(c, "j", &j) < 0) {
				hp_disconnect(c);
				c = NULL;
				j = NULL;
				usleep(2000);
				continue;
			}
		}
		w->next_seq++; /* an append that fails is never sent again under its seq */
		rc = hp_journal_append_wait(j, rec, sizeof(rec), &lsn);
		if (rc == 0) {
			if (w->nacked < JMAX_ACKS)
				w->acked[w->nacked++] = rec[1];
			atomic_fetch_add(&jacks, 1);
			continue;
		}
		if (rc == -ECONNRESET) {
			w->resets++;
			w->unexplained += strstr(hp_last_error(c), "durable up to LSN") == NULL;
		}
		hp_journal_close(j);
		hp_disconnect(c);
		j = NULL;
		c = NULL;
		w->reopens++;
	}
	if (j)
		hp_journal_close(j);
	hp_disconnect(c);
	return NULL;
}

/*
 * 32 writers append and wait, the daemon is restarted 50 times (warm: through the fd store after
 * SIGTERM, after SIGKILL, and by take-over, in turn) under them, the writers reopen after each.
 * Then every record an append was acknowledged for is in the journal exactly once, and no record
 * at all is there twice (the daemon never writes one again).
 */
static void test_journal_across_restarts(void **state)
{
	static struct daemon d;
	static struct jwriter w[JWRITERS];
	hp_journal_reader *r = NULL;
	unsigned resets = 0;
	uint8_t *seen[JWRITERS];
	const void *data;
	uint64_t lsn;
	size_t len;
	hp_conn *c;
	int rc;

	(void)state;
	start_store(&d, ONE JCONF);
	atomic_store(&jstop, false);
	atomic_store(&jacks_cap, atomic_load(&jacks) + JACKS_PER_RESTART);
	for (unsigned i = 0; i < JWRITERS; i++) {
		w[i] = (struct jwriter){ .socket = d.socket, .id = i, .acked = calloc(JMAX_ACKS, sizeof(uint32_t)) };
		assert_non_null(w[i].acked);
		assert_int_equal(pthread_create(&w[i].t, NULL, jwriter_main, &w[i]), 0);
	}
	for (unsigned k = 0; k < JRESTARTS; k++) {
		unsigned long base = atomic_load(&jacks);

		atomic_store(&jacks_cap, base + JACKS_PER_RESTART);
		for (int i = 0; i < 20000 && atomic_load(&jacks) < base + 200; i++)
			usleep(500);
		assert_true(atomic_load(&jacks) >= base + 200); /* appending goes on after each restart */
		if (k % 3 == 2) { /* the journal is closed by one life and recovered by the next beside it */
			char out[1024];

			assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 0);
			continue;
		}
		if (k % 3)
			assert_int_equal(harness_kill(&d), 128 + SIGKILL);
		else
			assert_int_equal(harness_terminate(&d), 0);
		running = NULL;
		assert_int_equal(harness_restart(&d), 0);
		running = &d;
	}
	atomic_store(&jstop, true);
	for (unsigned i = 0; i < JWRITERS; i++)
		pthread_join(w[i].t, NULL);
	assert_int_equal(harness_log_count(&d, "Warm start (life"), JRESTARTS);

	for (unsigned i = 0; i < JWRITERS; i++) {
		seen[i] = calloc(w[i].next_seq + 1, 1);
		assert_non_null(seen[i]);
	}
	c = conn(&d);
	assert_int_equal(hp_journal_reader_open(c, "j", 1, &r), 0);
	while ((rc = hp_journal_reader_next(r, &lsn, &data, &len)) == 1) {
		uint32_t rec[2];

		assert_int_equal(len, 100);
		memcpy(rec, data, sizeof(rec));
		assert_true(rec[0] < JWRITERS && rec[1] < w[rec[0]].next_seq);
		if (seen[rec[0]][rec[1]]++)
			fail_msg("writer %u's record %u is in the journal twice", rec[0], rec[1]);
	}
	assert_int_equal(rc, 0);
	hp_journal_reader_close(r);
	/* a writer cut off by a restart is told up to which LSN the journal is durable */
	for (unsigned i = 0; i < JWRITERS; i++) {
		resets += w[i].resets;
		assert_int_equal(w[i].unexplained, 0);
	}
	assert_true(resets > 0);
	for (unsigned i = 0; i < JWRITERS; i++) {
		for (uint32_t k = 0; k < w[i].nacked; k++)
			if (!seen[i][w[i].acked[k]])
				fail_msg("writer %u's record %u was acknowledged and is not in the journal", i, w[i].acked[k]);
		free(seen[i]);
		free(w[i].acked);
	}
	print_message("%lu acknowledged appends over %d restarts, %u writers cut off\n", atomic_load(&jacks), JRESTARTS,
		      resets);
	hp_disconnect(c);
	stop(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_pool_survives, teardown),
		cmocka_unit_test_teardown(test_no_store_is_cold, teardown),
		cmocka_unit_test_teardown(test_leased_at_crash, teardown),
		cmocka_unit_test_teardown(test_other_uid_after_restart, teardown),
		cmocka_unit_test_teardown(test_corrupt_state_is_cold, teardown),
		cmocka_unit_test_teardown(test_torn_record, teardown),
		cmocka_unit_test_teardown(test_config_changes, teardown),
		cmocka_unit_test_teardown(test_leases_survive_a_move, teardown),
		cmocka_unit_test_teardown(test_retired_until_released, teardown),
		cmocka_unit_test_teardown(test_client_keeps_connection, teardown),
		cmocka_unit_test_teardown(test_waiting_acquire_served, teardown),
		cmocka_unit_test_teardown(test_client_left_while_down, teardown),
		cmocka_unit_test_teardown(test_spill_survives, teardown),
		cmocka_unit_test_teardown(test_mid_request_closed, teardown),
		cmocka_unit_test_teardown(test_takeover, teardown),
		cmocka_unit_test_teardown(test_takeover_faults, teardown),
		cmocka_unit_test_teardown(test_takeover_slow_prepare, teardown),
		cmocka_unit_test_teardown(test_takeover_releases_journals_after, teardown),
		cmocka_unit_test_teardown(test_takeover_journal_not_walked, teardown),
		cmocka_unit_test_teardown(test_takeover_journal_reused_while_preparing, teardown),
		cmocka_unit_test_teardown(test_takeover_killed_after_go, teardown),
		cmocka_unit_test_teardown(test_reexec_in_place, teardown),
		cmocka_unit_test_teardown(test_reexec_refused_without_fds, teardown),
		cmocka_unit_test_teardown(test_takeover_without_manager, teardown),
		cmocka_unit_test_teardown(test_exec_hands_back, teardown),
		cmocka_unit_test_teardown(test_exec_back_fails, teardown),
		cmocka_unit_test_teardown(test_exec_refused_at_go, teardown),
		cmocka_unit_test_teardown(test_first_process_keeps_pid, teardown),
		cmocka_unit_test_teardown(test_exec_back_dies_after_taken, teardown),
		cmocka_unit_test_teardown(test_exec_back_running_life_dies, teardown),
		cmocka_unit_test_teardown(test_old_protocol_client, teardown),
		cmocka_unit_test_teardown(test_journals_stop_together, teardown),
		cmocka_unit_test_teardown(test_journal_across_restarts, teardown),
	};

	if (getenv("HP_TEST_FILTER"))
		cmocka_set_test_filter(getenv("HP_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
