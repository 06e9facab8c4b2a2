/* SPDX-License-Identifier: MIT */
/*
 * test_restart_hostile.c - warm restart against large pools and hostile clients (the second
 * audit, finding 1 and the renewal race): what a restart hands over never passes through a
 * channel that cannot hold it; a restart that cannot happen is refused before anything stops,
 * and the daemon goes on serving; a buffer renewed while the daemon re-executes is not lost.
 *
 * The attacker is a client of another uid (HARNESS_OTHER_UID, the test runs as root; without
 * root those cases are skipped) that stays within every per-uid limit. Pools are many small
 * buffers of regular shared memory (hugepages = off), so that thousands of fds cost little.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hugepool.h"
#include "manager.h"
#include "proto.h"
#include "case.h"

static void check_log(const struct daemon *d, const char *line, int times)
{
	if (harness_log_count(d, line) != times) {
		harness_dump_log(d);
		fail_msg("the daemon did not say \"%s\" %d times", line, times);
	}
}

/* --- finding 1: names that no environment string holds ------------------------------------ */

#define CONNS 64 /* max_connections_per_uid's default */
#define STREAMS_PER_CONN 16 /* 1024 spill files */

struct attacker {
	const char *socket;
	struct harness_other o;
};

/*
 * As the other uid, within its limits: 64 connections, each with a counters page and 16 spill
 * files. Once the daemon restarted, every connection must still be served and every file
 * still readable. 0 when so, 20+ on a setup error, 13 when something was lost.
 */
static int hoarder_main(void *arg)
{
	struct attacker *a = arg;
	static hp_conn *c[CONNS];
	static hp_spill *sp[CONNS][STREAMS_PER_CONN];
	struct hp_spill_opts o = { .threshold = HP_SPILL_ALWAYS_FILE };
	char buf[8];
	int lost = 0;

	harness_other_child(&a->o);
	for (int i = 0; i < CONNS; i++) {
		if (hp_connect(a->socket, &c[i]) < 0)
			return 20;
		for (int k = 0; k < STREAMS_PER_CONN; k++)
			if (hp_spill_open(c[i], &o, &sp[i][k]) < 0 || hp_spill_write(sp[i][k], "attacker", 8) < 0)
				return 21;
	}
	if (harness_other_ready(&a->o) < 0)
		return 22;
	for (int i = 0; i < CONNS; i++) {
		struct hp_status *st = NULL;

		lost += hp_status(c[i], &st) < 0;
		hp_status_free(st);
		for (int k = 0; k < STREAMS_PER_CONN; k++) {
			lost += hp_spill_finish(sp[i][k]) < 0 || hp_spill_read(sp[i][k], buf, 8) != 8 ||
				memcmp(buf, "attacker", 8) != 0;
			hp_spill_close(sp[i][k]);
		}
		hp_disconnect(c[i]);
	}
	return lost ? 13 : 0;
}

/*
 * The re-execution passed every fd's name in one LISTEN_FDNAMES string; past 128 KiB execve
 * failed with E2BIG after the daemon had torn itself down, and it exited: pool, leases, every
 * client gone. A pool of 5000 buffers and one uid within its limits (64 connections, 1024 spill
 * files) made it so. Now the names travel in a memfd: everything comes back; and a take-over
 * (restart = auto under a manager) hands the same over through its channel.
 */
static void check_everything_back(struct daemon *d, hp_conn *c, uint64_t lives)
{
	struct hp_status *st = status(c);

	assert_true(harness_follows(d, st->daemon_pid, 5000));
	assert_int_equal(st->start.lives, lives);
	assert_int_equal(st->start.adopted_buffers, 5000);
	assert_int_equal(st->start.adopted_connections, CONNS + 2);
	assert_int_equal(st->start.closed_connections, 0);
	assert_int_equal(st->spill.files, CONNS * STREAMS_PER_CONN);
	hp_status_free(st);
}

static void test_reexec_hands_over_everything(void **state)
{
	static struct daemon d;
	struct attacker a;
	char out[2048];
	pid_t pid;
	hp_conn *c;

	(void)state;
	if (!harness_two_uids())
		skip();
	start(&d, "hugepages = off\nrestart = exec\n", "[class many]\nsize = 4K\ncount = 5000\n");
	pid = d.pid;
	a.socket = d.socket;
	assert_int_equal(harness_other_start(&a.o, HARNESS_OTHER_UID, hoarder_main, &a), 0);
	c = conn(&d);
	/* the next life takes over (the running one re-executes itself in place first) */
	assert_int_equal(harness_reconfigure(&d, "hugepages = off\n", "[class many]\nsize = 4K\ncount = 5000\n"), 0);
	assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	check_everything_back(&d, c, 2);
	assert_int_equal(d.pid, pid);
	assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	check_everything_back(&d, c, 3);
	assert_int_not_equal(d.pid, pid);
	assert_int_equal(harness_other_finish(&a.o), 0);
	hp_disconnect(c);
	stop(&d);
}

/*
 * Under a service manager the names come back in LISTEN_FDNAMES, which systemd fills however
 * long (execve then fails, 203/EXEC, and the store is lost at the start limit). The daemon now
 * sends it only what fits, and says so: a crash with a pool of 11000 buffers (more names than
 * 128 KiB holds even at 12 bytes each) comes back warm, the rest of the pool made anew.
 */
static void test_store_within_what_comes_back(void **state)
{
	static struct daemon d;
	static const struct harness_opts o = { .fdstore_max = 20000 };
	struct hp_status *st;
	hp_conn *c;
	int r;

	(void)state;
	r = harness_start_opts(&d, "hugepages = off\n", "[class many]\nsize = 4K\ncount = 11000\n", &o);
	running = r == 0 ? &d : NULL;
	assert_int_equal(r, 0);
	assert_int_equal(harness_kill(&d), 128 + SIGKILL);
	running = NULL;
	r = harness_restart(&d);
	if (r < 0)
		harness_dump_log(&d);
	assert_int_equal(r, 0); /* before: the manager's execve failed with E2BIG, exit status 127 */
	running = &d;
	check_log(&d, "The service manager's file descriptor store holds", 2);
	assert_true(manager_count(d.mgr, NULL) < 11000);
	c = conn(&d);
	st = status(c);
	assert_int_equal(st->start.warm, 1);
	assert_true(st->start.adopted_buffers > 9000);
	assert_int_equal(st->start.adopted_buffers + st->start.faulted_buffers, 11000);
	hp_status_free(st);
	hp_disconnect(c);
	stop(&d);
}

/* --- a restart that cannot happen is refused, and the daemon goes on ---------------------- */

#define ONE "[class one]\nsize = 4K\ncount = 4\n"

/* The daemon's binary copied into its directory, for a test that replaces it. */
static void copy_binary(const char *dir, char *path, size_t len)
{
	char cmd[512];

	snprintf(path, len, "%s/hugepoold", dir);
	snprintf(cmd, sizeof(cmd), "cp %s/hugepoold %s", harness_build(), path);
	assert_int_equal(system(cmd), 0);
}

/*
 * An administrator breaks the configuration, or the binary, and asks for a restart (systemctl
 * reload runs hugepoolctl restart): the daemon used to tear itself down first and its next life
 * refused to start, or never ran. Now the restart is refused with the reason, the same daemon
 * serves on with its pool and clients, and a restart with the mistake undone works.
 */
static void test_impossible_restart_refused(void **state)
{
	static struct daemon d;
	static char dir[64], bin[128];
	struct harness_opts o = { 0 };
	struct hp_buffer b;
	struct hp_status *st;
	char out[2048];
	pid_t pid;
	hp_conn *c;
	int r;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/hugepool-bin.XXXXXX");
	assert_non_null(mkdtemp(dir));
	copy_binary(dir, bin, sizeof(bin));
	o.binary = bin;
	r = harness_start_opts(&d, "hugepages = off\n", ONE, &o);
	running = r == 0 ? &d : NULL;
	assert_int_equal(r, 0);
	pid = d.pid;
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 1, 1000, &b), 0);
	memset(b.addr, 0x5a, b.size);

	/* a configuration the next life would refuse */
	assert_int_equal(harness_reconfigure(&d, "hugepages = off\nno_such_key = 1\n", ONE), 0);
	assert_int_not_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	/* the next life is the (test's) manager's child: how it ended is the manager's to know */
	assert_non_null(strstr(out, "(the next life) ended"));
	assert_non_null(strstr(out, "no_such_key"));
	check_log(&d, "Refusing the restart: ", 1);

	/* a binary that does not run */
	assert_int_equal(harness_reconfigure(&d, "hugepages = off\n", ONE), 0);
	assert_int_equal(rename(bin, "/tmp/hugepool-bin-saved"), 0);
	{
		FILE *f = fopen(bin, "w");

		assert_non_null(f);
		fputs("not an executable\n", f);
		fclose(f);
		assert_int_equal(chmod(bin, 0755), 0);
	}
	assert_int_not_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "cannot run"));
	/* SIGUSR2 is refused the same way */
	kill(pid, SIGUSR2);
	for (int i = 0; i < 5000 && harness_log_count(&d, "Refusing the restart: cannot run") < 2; i++)
		usleep(1000);
	check_log(&d, "Refusing the restart: cannot run", 2);
	check_log(&d, "Re-executing '", 0);
	check_log(&d, "Taken over by", 0);

	/* the same life served on throughout: its lease and the buffer's bytes are there */
	st = status(c);
	assert_int_equal(st->daemon_pid, pid);
	assert_int_equal(st->start.lives, 1);
	assert_int_equal(st->nleases, 1);
	hp_status_free(st);
	assert_int_equal(((uint8_t *)b.addr)[0], 0x5a);

	/* undone: the restart happens, warm */
	assert_int_equal(rename("/tmp/hugepool-bin-saved", bin), 0);
	assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	st = status(c);
	assert_true(harness_follows(&d, st->daemon_pid, 5000));
	assert_int_equal(st->start.lives, 2);
	assert_int_equal(st->nleases, 1);
	hp_status_free(st);
	assert_int_equal(hp_release(c, &b, 1), 0);
	hp_disconnect(c);
	stop(&d);
	unlink(bin);
	rmdir(dir);
}

/* --- the renewal race: a buffer renewed during the hand-over is not dropped --------------- */

struct churn {
	const char *socket;
	atomic_bool stop;
};

/* Acquire and release the whole class in a loop: each grant to the other uid needs a renewal. */
static int churn_main(void *arg)
{
	struct churn *ch = arg;
	struct hp_buffer b[4];
	hp_conn *c = NULL;

	while (!atomic_load(&ch->stop)) {
		if (!c && hp_connect(ch->socket, &c) < 0) {
			c = NULL;
			usleep(1000);
			continue;
		}
		if (hp_acquire(c, "one", 4, 1000, b) == 0)
			hp_release(c, b, 4);
		else {
			hp_disconnect(c); /* restarted under it: a new connection */
			c = NULL;
		}
	}
	if (c)
		hp_disconnect(c);
	return 0;
}

static void *root_churn(void *arg)
{
	churn_main(arg);
	return NULL;
}

/*
 * Two uids take turns with the same buffers, so that the recycler renews one after another,
 * while the daemon re-executes again and again. A renewal still running when the fds were
 * copied for the hand-over kept its new memfd after the copy: the next life had no fd for that
 * buffer and dropped it ("dropped 1" in most warm starts). Now the renewal ends and is recorded
 * before the hand-over: no warm start drops anything.
 */
static struct churn ch; /* the case's churners, for renewal_churners_stop */
static pthread_t churn_thread;
static pid_t churn_other = -1;

/* Stop the case's two churners, whether it passed or failed half-way (teardown's threads_cleanup). */
static void renewal_churners_stop(void)
{
	atomic_store(&ch.stop, true);
	if (churn_other > 0) {
		kill(churn_other, SIGKILL);
		waitpid(churn_other, NULL, 0);
		churn_other = -1;
	}
	pthread_join(churn_thread, NULL);
}

static void test_renewal_during_reexec(void **state)
{
	static struct daemon d;
	pid_t other;
	char out[2048];

	(void)state;
	if (!harness_two_uids())
		skip();
	start(&d, "hugepages = off\n", "[class one]\nsize = 8M\ncount = 4\n");
	ch.socket = d.socket;
	atomic_store(&ch.stop, false);
	other = fork(); /* the other uid's churner, stopped by a signal */
	assert_true(other >= 0);
	if (other == 0) {
		gid_t g = HARNESS_OTHER_UID;

		if (setgroups(1, &g) < 0 || setresgid(g, g, g) < 0 || setresuid(HARNESS_OTHER_UID, HARNESS_OTHER_UID,
										HARNESS_OTHER_UID) < 0)
			_exit(126);
		churn_main(&ch);
		_exit(0);
	}
	churn_other = other;
	assert_int_equal(pthread_create(&churn_thread, NULL, root_churn, &ch), 0);
	threads_cleanup = renewal_churners_stop; /* a failed restart below must not leave them churning */
	for (int i = 0; i < 20; i++) {
		usleep(20000);
		assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	}
	threads_cleanup = NULL;
	renewal_churners_stop();
	check_log(&d, "Warm start (life ", 20);
	check_log(&d, ", dropped 0;", 20);
	stop(&d);
}


/* --- a connection in the store that is not the one its record names ----------------------- */

/*
 * warm.c's layout, as the next life reads it: the header's size at byte 12, the buffer records
 * (nbuffers at 20) of 96 bytes, then the connection records (their size at 24, count at 28), each
 * with its state at byte 8 (1 IDLE, 2 WAITING) and its connection's id at byte 32.
 */
#define STATE_BUF_RECORD 96
#define CONN_IDLE 1
#define CONN_WAITING 2
#define NAME_MAX_ 32

/* warm_name's form: a letter for the kind, the id in 11 digits of 6 bits, the highest first. */
static void conn_name(uint64_t id, char name[NAME_MAX_])
{
	static const char digits[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_";

	name[0] = 'c';
	for (int i = 11; i >= 1; i--, id >>= 6)
		name[i] = digits[id & 63];
	name[12] = '\0';
}

/* The fd store's name of the first connection whose record is in state st, from the state memfd. */
static void conn_named(const struct daemon *d, uint32_t st, char name[NAME_MAX_])
{
	uint32_t h[8];
	int fd = manager_dup(d->mgr, "s");

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	for (uint32_t i = 0; i < h[7]; i++) {
		off_t at = h[3] + (off_t)h[5] * STATE_BUF_RECORD + (off_t)i * h[6];
		uint32_t state;
		uint64_t id;

		assert_int_equal(pread(fd, &state, 4, at + 8), 4);
		assert_int_equal(pread(fd, &id, 8, at + 32), 8);
		if (state == st) {
			conn_name(id, name);
			close(fd);
			return;
		}
	}
	fail_msg("no connection record in state %u", st);
}

/*
 * A process connected to a socket of the test's (so its credentials are not the client's the
 * record names): with ask, it sends a status request. It exits 0 when it reads nothing before
 * the end of the connection, 1 when the daemon answered or sent it anything.
 */
static pid_t impostor(const char *path, bool ask, int *ret_fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), fd;
	pid_t pid;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 1), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct {
			struct proto_hdr h;
			struct proto_status_req req;
		} msg = { { .magic = PROTO_MAGIC, .version = PROTO_VERSION, .type = PROTO_STATUS,
			    .len = sizeof(struct proto_status_req) },
			  { 0 } };
		char buf[256];
		ssize_t n, got = 0;
		int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		alarm(60);
		if (connect(c, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			_exit(20);
		/* sent before the daemon has it: read by the next life once it polls the socket */
		if (ask && send(c, &msg, sizeof(msg), MSG_NOSIGNAL) != (ssize_t)sizeof(msg))
			_exit(21);
		while ((n = recv(c, buf, sizeof(buf), 0)) > 0)
			got += n;
		_exit(got ? 1 : 0);
	}
	fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	assert_true(fd >= 0);
	close(l);
	unlink(path);
	*ret_fd = fd;
	return pid;
}

static int wait_exit(pid_t pid)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct waiter {
	hp_conn *c;
	struct hp_buffer b;
	int r;
};

static void *wait_for_one(void *arg)
{
	struct waiter *w = arg;

	w->r = hp_acquire(w->c, "one", 1, 60000, &w->b);
	return NULL;
}

/*
 * The next life takes a connection over without looking at its socket, and compares the socket's
 * credentials with the record when it is first read or written (peer_verify). Sockets of other
 * processes put in the store in the places of an idle connection holding the whole class and of
 * one waiting in an acquire: the first asks for status, and is closed unanswered, its leases
 * released; the buffer that frees would be granted to the second, which is closed instead of
 * getting it.
 */
static void test_swapped_connections_not_served(void **state)
{
	static const struct harness_opts o = { .fdstore_max = 4096 };
	static struct daemon d;
	char idle[NAME_MAX_], waiting[NAME_MAX_], path[128];
	struct hp_buffer b[4];
	struct hp_status *st;
	struct waiter w = { .r = 1 };
	pthread_t t;
	pid_t asks, silent;
	hp_conn *holder, *c;
	int fd;

	(void)state;
	start_opts(&d, "hugepages = off\n", ONE, &o);
	holder = conn(&d);
	assert_int_equal(hp_acquire(holder, "one", 4, 1000, b), 0);
	w.c = conn(&d);
	assert_int_equal(pthread_create(&t, NULL, wait_for_one, &w), 0);
	/* the service manager holds connections once they lived a second (fdstore.h) */
	for (int i = 0; i < 5000 && manager_count(d.mgr, "c") < 2; i++)
		usleep(1000);
	usleep(100000); /* and the waiter's record says WAITING */
	conn_named(&d, CONN_IDLE, idle);
	conn_named(&d, CONN_WAITING, waiting);
	snprintf(path, sizeof(path), "%s/impostor", d.dir);
	asks = impostor(path, true, &fd);
	assert_int_equal(manager_swap(d.mgr, idle, fd), 0);
	close(fd);
	silent = impostor(path, false, &fd);
	assert_int_equal(manager_swap(d.mgr, waiting, fd), 0);
	close(fd);
	assert_int_equal(harness_kill(&d), 128 + SIGKILL);
	running = NULL;
	assert_int_equal(harness_restart(&d), 0);
	running = &d;
	assert_int_equal(wait_exit(asks), 0);
	assert_int_equal(wait_exit(silent), 0);
	check_log(&d, "its socket is not the connection the previous life of the daemon recorded", 2);
	/* the real clients' connections ended with the first life (the store had the impostors) */
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(w.r < 0);
	c = conn(&d);
	st = status(c);
	assert_int_equal(st->nleases, 0);
	assert_int_equal(st->classes[0]->free, 4);
	hp_status_free(st);
	hp_disconnect(c);
	hp_disconnect(w.c);
	hp_disconnect(holder);
	stop(&d);
}

/*
 * A buffer is taken over without looking at its memfd, which is checked before it is first
 * handed out (pool_buffer_usable). A memfd of the wrong size put in the store under a buffer's
 * name: the client that acquires the class gets every buffer, that one with fresh pages in a new
 * memfd (the others as it left them), and never the file the store held.
 */
static void test_swapped_buffer_renewed(void **state)
{
	static const struct harness_opts o = { .fdstore_max = 4096 };
	static struct daemon d;
	struct hp_buffer b[4];
	char name[NAME_MAX_];
	unsigned zeros = 0;
	hp_conn *c;
	int fd;

	(void)state;
	start_opts(&d, "hugepages = off\n", ONE, &o);
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 4, 1000, b), 0);
	for (int i = 0; i < 4; i++)
		memset(b[i].addr, 0x5a, b[i].size);
	assert_int_equal(hp_release(c, b, 4), 0);
	assert_true(manager_name(d.mgr, "b", name, sizeof(name)));
	/* with every page of a buffer there: what the intact check alone would let through */
	fd = memfd_create("impostor", MFD_CLOEXEC);
	assert_true(fd >= 0);
	{
		static uint8_t page[8192];

		memset(page, 0x77, sizeof(page));
		assert_int_equal(write(fd, page, sizeof(page)), (ssize_t)sizeof(page));
	}
	assert_int_equal(manager_swap(d.mgr, name, fd), 0);
	close(fd);
	hp_disconnect(c);
	assert_int_equal(harness_kill(&d), 128 + SIGKILL);
	running = NULL;
	assert_int_equal(harness_restart(&d), 0);
	running = &d;
	check_log(&d, "Warm start (life 2): adopted 4 buffers", 1);
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 4, 1000, b), 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(b[i].size, 4096);
		zeros += ((uint8_t *)b[i].addr)[0] == 0;
	}
	assert_int_equal(zeros, 1);
	check_log(&d, "is not the memfd the previous life recorded", 1);
	assert_int_equal(hp_release(c, b, 4), 0);
	hp_disconnect(c);
	stop(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_reexec_hands_over_everything, teardown),
		cmocka_unit_test_teardown(test_store_within_what_comes_back, teardown),
		cmocka_unit_test_teardown(test_impossible_restart_refused, teardown),
		cmocka_unit_test_teardown(test_renewal_during_reexec, teardown),
		cmocka_unit_test_teardown(test_swapped_connections_not_served, teardown),
		cmocka_unit_test_teardown(test_swapped_buffer_renewed, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	if (getenv("HP_TEST_FILTER"))
		cmocka_set_test_filter(getenv("HP_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
