/* SPDX-License-Identifier: MIT */
/*
 * case.h - cmocka helpers for integration test files that run one daemon per test case
 * (test_pool.c, test_spill.c, test_hostile.c, the test_journal_*.c ...): start and stop it with
 * assertions, stop it in the teardown when a case failed half-way (and then join the threads
 * the case left running, threads_cleanup), check that it refuses to start, connect (through
 * libhugepool, or raw to speak the protocol by hand), ask for status, run hugepoolctl against
 * it. A case that arms the harness's watchdog (harness_watchdog_arm) has start()'s daemon
 * killed when it overruns its budget, and stop() fails it then. run_cases() is a main's one
 * line. Header-only: include it once per test file, after cmocka.h, harness.h, hugepool.h and
 * proto.h.
 */
#ifndef HP_TEST_CASE_H
#define HP_TEST_CASE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static struct daemon *running; /* stopped by teardown when a test fails half-way */
static void (*threads_cleanup)(void); /* and then this joins the threads the case left running */

/*
 * Start the case's daemon (o may be NULL): its result, 0 or as harness_start_opts. Whatever it
 * is, teardown stops the daemon or removes its directory, and the watchdog watches it.
 */
static inline int start_try(struct daemon *d, const char *globals, const char *classes, const struct harness_opts *o)
{
	int r = harness_start_opts(d, globals, classes, o);

	running = d;
	harness_watchdog_watch(d);
	return r;
}

static inline void start_opts(struct daemon *d, const char *globals, const char *classes, const struct harness_opts *o)
{
	assert_int_equal(start_try(d, globals, classes, o), 0);
}

static inline void start(struct daemon *d, const char *globals, const char *classes)
{
	start_opts(d, globals, classes, NULL);
}

/* The daemon must refuse to start: exit with exit_status, saying why once in its log. */
static inline void start_refused_opts(struct daemon *d, const char *globals, const char *classes,
				      const struct harness_opts *o, int exit_status, const char *why)
{
	int r = start_try(d, globals, classes, o); /* teardown: its log, and a daemon that started stopped */

	assert_int_equal(r, -ECHILD);
	assert_int_equal(d->exit_status, exit_status);
	assert_int_equal(harness_log_count(d, why), 1);
	running = NULL;
	harness_cleanup(d);
}

static inline void start_refused(struct daemon *d, const char *globals, const char *classes, int exit_status,
				 const char *why)
{
	start_refused_opts(d, globals, classes, NULL, exit_status, why);
}

/* A clean stop; fails the case too when the watchdog had to kill the daemon. */
static inline void stop(struct daemon *d)
{
	bool fired = harness_watchdog_fired();
	int r;

	running = NULL;
	r = harness_stop(d);
	assert_false(fired);
	assert_int_equal(r, 0);
}

static inline int teardown(void **state)
{
	(void)state;
	harness_watchdog_disarm();
	/* the daemon goes first: threads blocked on it get errors and end */
	if (running) {
		harness_dump_log(running); /* the case failed: what did the daemon say? */
		if (running->pid > 0)
			harness_stop(running);
		else
			harness_cleanup(running); /* it had ended (killed, or it did not start) */
		running = NULL;
	}
	if (threads_cleanup) {
		threads_cleanup();
		threads_cleanup = NULL;
	}
	return 0;
}

static inline hp_conn *conn(const struct daemon *d)
{
	hp_conn *c = NULL;
	int r = hp_connect(d->socket, &c);

	if (r < 0)
		fprintf(stderr, "hp_connect: %s (%s)\n", hp_strerror(r), hp_last_error(NULL));
	assert_int_equal(r, 0);
	return c;
}

/* A raw protocol client: connect and say hello, without libhugepool. */
static inline int raw_connect(const struct daemon *d)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct proto_hello h = { .name = "raw" };
	struct proto_hdr rh;
	void *payload = NULL;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->socket);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(proto_send(fd, PROTO_HELLO, &h, sizeof(h), NULL, 0), 0);
	assert_int_equal(proto_recv(fd, &rh, &payload, NULL, 0), 0);
	assert_int_equal(rh.type, PROTO_WELCOME);
	free(payload);
	return fd;
}

static inline struct hp_status *status(hp_conn *c)
{
	struct hp_status *st = NULL;
	int r = hp_status(c, &st);

	if (r != 0)
		fail_msg("hp_status: %s%s", hp_strerror(r),
			 harness_watchdog_fired() ? " (the watchdog killed the daemon: it stopped answering)" : "");
	return st;
}

/* The class called name in st (the case fails without one). */
static inline const struct hp_class_status *status_class(const struct hp_status *st, const char *name)
{
	for (uint32_t i = 0; i < st->nclasses; i++)
		if (strcmp(st->classes[i]->name, name) == 0)
			return st->classes[i];
	fail_msg("no class %s in status", name);
	return NULL;
}

/* Run hugepoolctl with args against d: its exit status, its standard output and error in out. */
static inline int ctl(const struct daemon *d, const char *args, char *out, size_t outlen)
{
	char cmd[512];
	FILE *f;
	size_t n;
	int st;

	snprintf(cmd, sizeof(cmd), "%s/hugepoolctl -s %s %s 2>&1", harness_build(), d->socket, args);
	f = popen(cmd, "r");
	assert_non_null(f);
	n = fread(out, 1, outlen - 1, f);
	out[n] = '\0';
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/*
 * A failed case leaves what it held (records, connections, handles) behind: LeakSanitizer then
 * only repeats the failure. It still checks a run in which every case passed (of a file whose
 * main is run_cases).
 */
static int failed_cases;
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
	return failed_cases != 0;
}

/*
 * main's: run the group `tests` named `name`, return the number of failed cases.
 * HP_TEST_FILTER (a cmocka pattern such as "test_eio*") runs some cases only, for debugging;
 * empty, all of them.
 */
#define run_cases(name, tests)                                                                       \
	(getenv("HP_TEST_FILTER") && *getenv("HP_TEST_FILTER") ? cmocka_set_test_filter(getenv("HP_TEST_FILTER")) \
							       : (void)0,                                  \
	 failed_cases = cmocka_run_group_tests_name(name, tests, NULL, NULL))

#endif
