/* SPDX-License-Identifier: MIT */
/*
 * test_restart.c - warm restart: a daemon handing its pool to its next life through the file
 * descriptor store, with the harness playing systemd's part (manager.h) exactly as the protocol
 * says: it keeps what the daemon stores, drops what it removes, and starts the next life with
 * the fds from 3 and LISTEN_* set.
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

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"
#include "hugepool.h"
#include "manager.h"
#include "proto.h"
#include "case.h"

#define MIB (1024ull * 1024)
#define NBUF 4
#define ONE "[class one]\nsize = 2M\ncount = 4\n"
#define TWO "[class two]\nsize = 4M\ncount = 1\n"

static const struct harness_opts with_store = { .fdstore_max = 4096 };

static void start_store(struct daemon *d, const char *classes)
{
	int r = harness_start_opts(d, NULL, classes, &with_store);

	running = r == 0 ? d : NULL;
	if (r < 0)
		harness_dump_log(d);
	assert_int_equal(r, 0);
}

static void restart(struct daemon *d, bool kill_it)
{
	int r;

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
	assert_int_equal(manager_count(d.mgr, "buf."), NBUF);
	assert_int_equal(manager_count(d.mgr, "state."), 1);
	assert_int_equal(manager_count(d.mgr, "listen"), 1);
	fill_and_release(&d);
	restart(&d, false);
	check_warm(&d, "Warm start (life 2): adopted 4 buffers (8.0 MiB), faulted 0, dropped 0");
	assert_int_equal(contents_now(&d), ALL_KEPT);
	/* the old state is gone from the store, the new one is there */
	assert_int_equal(manager_count(d.mgr, "state."), 1);
	assert_int_equal(manager_count(d.mgr, "buf."), NBUF);

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

static int other_uid_sees_zeros(void *arg)
{
	const struct daemon *d = arg;
	hp_conn *c = NULL;
	unsigned seen;

	if (hp_connect(d->socket, &c) < 0)
		return 10;
	seen = contents(c);
	hp_disconnect(c);
	return seen == (1u | 1u << 31) ? 0 : 11;
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
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, other_uid_sees_zeros, &d), 0);
	stop(&d);
}

/* A state the daemon cannot read means a cold start, said once, with nothing adopted. */
static void test_corrupt_state_is_cold(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	int fd;

	(void)state;
	start_store(&d, ONE);
	fill_and_release(&d);
	fd = manager_dup(d.mgr, "state.");
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "garbage!", 8, 0), 8);
	close(fd);
	restart(&d, true);
	check_warm(&d, "cannot be used (no state magic): starting cold");
	check_warm(&d, "Cold start: the state could not be used; faulted 4 buffers, dropped 4");
	assert_int_equal(contents_now(&d) & ~(1u << 31), 1u);
	/* the dropped buffers are gone from the store, the new ones in it */
	assert_int_equal(manager_count(d.mgr, "buf."), NBUF);
	assert_int_equal(manager_count(d.mgr, "state."), 1);
	stop(&d);
}

/* One record torn by a crash (odd sequence number): that buffer alone is not trusted. */
static void test_torn_record(void **state)
{
	const off_t header = 56, record = 72;
	uint32_t seq = 0;
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	unsigned seen;
	int fd;

	(void)state;
	start_store(&d, ONE);
	fill_and_release(&d);
	fd = manager_dup(d.mgr, "state.");
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &seq, 4, header + 2 * record), 4);
	seq |= 1;
	assert_int_equal(pwrite(fd, &seq, 4, header + 2 * record), 4);
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
	assert_int_equal(manager_count(d.mgr, "buf."), 7);
	/* the class's size changes: nothing of it can be adopted */
	assert_int_equal(harness_reconfigure(&d, NULL, "[class one]\nsize = 4M\ncount = 4\n"), 0);
	restart(&d, false);
	check_warm(&d, "Cold start: nothing the previous life left fits the configuration; faulted 4 buffers, "
		       "dropped 7");
	assert_int_equal(manager_count(d.mgr, "buf."), 4);
	assert_int_equal(contents_now(&d) & ~(1u << 31), 1u);
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
	};

	if (getenv("HP_TEST_FILTER"))
		cmocka_set_test_filter(getenv("HP_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
