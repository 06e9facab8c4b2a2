/* SPDX-License-Identifier: MIT */
/*
 * case.h - cmocka helpers for integration test files that run one daemon per test case
 * (test_pool.c, test_spill.c, test_hostile.c): start and stop it with assertions, stop it in the
 * teardown when a case failed half-way, check that it refuses to start, connect (through libhugepool, or raw to speak the
 * protocol by hand), ask for status, run hugepoolctl against it. Header-only: include it once per test file, after
 * cmocka.h, harness.h, hugepool.h and proto.h.
 */
#ifndef HP_TEST_CASE_H
#define HP_TEST_CASE_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static struct daemon *running; /* stopped by teardown when a test fails half-way */

static inline void start(struct daemon *d, const char *globals, const char *classes)
{
	int r = harness_start(d, globals, classes);

	running = r == 0 ? d : NULL;
	if (r < 0)
		harness_dump_log(d);
	assert_int_equal(r, 0);
}

/* The daemon must refuse to start: exit with exit_status, saying why once in its log. */
static inline void start_refused(struct daemon *d, const char *globals, const char *classes, int exit_status,
			  const char *why)
{
	int r = harness_start(d, globals, classes);

	running = NULL;
	if (r != -ECHILD || d->exit_status != exit_status || harness_log_count(d, why) != 1)
		harness_dump_log(d);
	assert_int_equal(r, -ECHILD);
	assert_int_equal(d->exit_status, exit_status);
	assert_int_equal(harness_log_count(d, why), 1);
	harness_cleanup(d);
}

static inline void stop(struct daemon *d)
{
	running = NULL;
	assert_int_equal(harness_stop(d), 0);
}

static inline int teardown(void **state)
{
	(void)state;
	if (running) {
		harness_dump_log(running); /* the case failed: what did the daemon say? */
		harness_stop(running);
		running = NULL;
	}
	return 0;
}

static inline hp_conn *conn(const struct daemon *d)
{
	hp_conn *c = NULL;
	int r = hp_connect(d->socket, &c);

	if (r < 0)
		fprintf(stderr, "hp_connect: %s\n", hp_strerror(r));
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

	assert_int_equal(hp_status(c, &st), 0);
	return st;
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

#endif
