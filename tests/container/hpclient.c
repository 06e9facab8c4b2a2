/* SPDX-License-Identifier: MIT */
/*
 * hpclient.c - the client tests/container-test.sh runs inside the container as a non-root user,
 * against the packaged daemon and the packaged libhugepool.so.0 (built on the host against the
 * package build's library; the container has no compiler). One verb per run:
 *   hpclient lease CLASS N        lease N buffers of CLASS, fill them, check, release
 *   hpclient append JOURNAL N     append records "record 1".."record N", each waited for
 *   hpclient hold CLASS N         lease N buffers of CLASS and fill them, print "holding N
 *                                 buffers", wait until standard input ends (the test restarts
 *                                 the daemon meanwhile), then check the contents, ask for the
 *                                 status on the same connection and release: the connection and
 *                                 the leases lived through the daemon's restart
 *   hpclient loop CLASS           lease and release one buffer of CLASS in a loop on one
 *                                 connection, print "looping"; at each line on standard input
 *                                 print the longest round trip since the last ("longest N us of
 *                                 M round trips": the test restarts the daemon in between);
 *                                 when standard input ends, check the connection is the same
 *                                 and print "looped on the same connection"
 *   hpclient spill BYTES          a spill stream that always uses a file: write BYTES, finish,
 *                                 print "spilled BYTES in a file", then hold it until standard
 *                                 input ends, read it back and check it
 * and, without the daemon, as any local user against the metrics endpoint on 127.0.0.1:
 *   hpclient tcp-hold PORT N      open N connections from 127.0.0.2-5 (any user may bind them)
 *                                 that send nothing, print "holding N connections", wait until
 *                                 standard input ends
 *   hpclient tcp-burst PORT N     open and close N connections from 127.0.0.2-5 at once
 * Prints what it did on standard output; a failure says what failed and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <hugepool.h>

static hp_conn *conn;

static int fail(const char *what, int r)
{
	fprintf(stderr, "hpclient: %s: %s (%s)\n", what, hp_strerror(r), conn ? hp_last_error(conn) : "");
	return 1;
}

static int lease(const char *class_name, unsigned n)
{
	struct hp_buffer bufs[64];
	int r;

	if (n == 0 || n > 64)
		return fail("lease: 1 to 64 buffers", -22);
	r = hp_acquire(conn, class_name, n, 5000, bufs);
	if (r < 0)
		return fail("acquire", r);
	for (unsigned i = 0; i < n; i++) {
		unsigned char *p = bufs[i].addr;

		memset(p, 0x5a, bufs[i].size);
		if (p[0] != 0x5a || p[bufs[i].size - 1] != 0x5a)
			return fail("buffer content", -5);
	}
	printf("leased %u buffers of class %s, %zu bytes each\n", n, class_name, bufs[0].size);
	r = hp_release(conn, bufs, n);
	if (r < 0)
		return fail("release", r);
	return 0;
}

static int hold(const char *class_name, unsigned n)
{
	struct hp_buffer bufs[64];
	struct hp_status *st;
	int r;

	if (n == 0 || n > 64)
		return fail("hold: 1 to 64 buffers", -22);
	r = hp_acquire(conn, class_name, n, 5000, bufs);
	if (r < 0)
		return fail("acquire", r);
	for (unsigned i = 0; i < n; i++)
		memset(bufs[i].addr, (int)(0x30 + i), bufs[i].size);
	printf("holding %u buffers\n", n);
	fflush(stdout);
	while (getchar() != EOF)
		;
	for (unsigned i = 0; i < n; i++) {
		const unsigned char *p = bufs[i].addr;

		for (size_t k = 0; k < bufs[i].size; k += 4096)
			if (p[k] != 0x30 + i)
				return fail("held buffer content", -5);
	}
	r = hp_status(conn, &st);
	if (r < 0)
		return fail("status on the held connection", r);
	printf("daemon life %u\n", (unsigned)st->start.lives);
	hp_status_free(st);
	r = hp_release(conn, bufs, n);
	if (r < 0)
		return fail("release after the restart", r);
	printf("released %u buffers on the same connection\n", n);
	return 0;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int loop(const char *class_name)
{
	struct pollfd in = { .fd = 0, .events = POLLIN };
	uint64_t longest = 0, trips = 0;
	struct hp_status *st;
	char line[64];
	int r;

	printf("looping\n");
	fflush(stdout);
	for (;;) {
		struct hp_buffer buf;
		uint64_t t0 = now_us(), t;

		r = hp_acquire(conn, class_name, 1, 5000, &buf);
		if (r < 0)
			return fail("acquire", r);
		r = hp_release(conn, &buf, 1);
		if (r < 0)
			return fail("release", r);
		t = now_us() - t0;
		longest = t > longest ? t : longest;
		trips++;
		if (poll(&in, 1, 0) == 1) {
			if (!fgets(line, sizeof(line), stdin))
				break;
			printf("longest %llu us of %llu round trips\n", (unsigned long long)longest,
			       (unsigned long long)trips);
			fflush(stdout);
			longest = trips = 0;
		}
	}
	r = hp_status(conn, &st);
	if (r < 0)
		return fail("status on the looping connection", r);
	hp_status_free(st);
	printf("looped on the same connection\n");
	return 0;
}

static int append(const char *journal, unsigned n)
{
	hp_journal *j;
	uint64_t lsn = 0;
	char rec[64];
	int r;

	r = hp_journal_open(conn, journal, &j);
	if (r < 0)
		return fail("journal open", r);
	for (unsigned i = 1; i <= n; i++) {
		int len = snprintf(rec, sizeof(rec), "record %u", i);

		r = hp_journal_append_wait(j, rec, (size_t)len, &lsn);
		if (r < 0)
			return fail("journal append", r);
	}
	hp_journal_close(j);
	printf("appended %u records to %s, last LSN %llu\n", n, journal, (unsigned long long)lsn);
	return 0;
}

static int spill(size_t bytes)
{
	struct hp_spill_opts opts = { .threshold = HP_SPILL_ALWAYS_FILE };
	unsigned char buf[65536];
	hp_spill *s;
	size_t done;
	int r;

	r = hp_spill_open(conn, &opts, &s);
	if (r < 0)
		return fail("spill open", r);
	for (done = 0; done < bytes; done += sizeof(buf)) {
		size_t n = bytes - done < sizeof(buf) ? bytes - done : sizeof(buf);

		for (size_t i = 0; i < n; i++)
			buf[i] = (unsigned char)((done + i) * 7);
		r = hp_spill_write(s, buf, n);
		if (r < 0)
			return fail("spill write", r);
	}
	r = hp_spill_finish(s);
	if (r < 0)
		return fail("spill finish", r);
	if (hp_spill_state(s) != HP_SPILL_FILE)
		return fail("the stream is not in a file", -5);
	printf("spilled %zu bytes in a file\n", bytes);
	fflush(stdout);
	while (getchar() != EOF)
		;
	for (done = 0;;) {
		ssize_t n = hp_spill_read(s, buf, sizeof(buf));

		if (n < 0)
			return fail("spill read", (int)n);
		if (n == 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != (unsigned char)((done + (size_t)i) * 7))
				return fail("spill content", -5);
		done += (size_t)n;
	}
	if (done != bytes)
		return fail("spill length", -5);
	hp_spill_close(s);
	printf("read back %zu bytes\n", done);
	return 0;
}

/* A TCP connection from 127.0.0.(2 + i % 4) to 127.0.0.1:port, or -1. */
static int tcp_connect(unsigned port, unsigned i)
{
	struct sockaddr_in from = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002u + i % 4) };
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&from, sizeof(from)) < 0 ||
	    connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0) {
		fprintf(stderr, "hpclient: connection %u to port %u: %s\n", i, port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int tcp_hold(unsigned port, unsigned n)
{
	char c;

	for (unsigned i = 0; i < n; i++)
		if (tcp_connect(port, i) < 0)
			return 1;
	printf("holding %u connections\n", n);
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	return 0; /* exit closes them */
}

static int tcp_burst(unsigned port, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int fd = tcp_connect(port, i);

		if (fd < 0)
			return 1;
		close(fd);
	}
	printf("opened and closed %u connections\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	int r;

	if (argc < 3) {
		fprintf(stderr, "usage: hpclient lease CLASS N | hold CLASS N | loop CLASS | append JOURNAL N | spill BYTES | "
				"tcp-hold PORT N | tcp-burst PORT N\n");
		return 2;
	}
	if (!strcmp(argv[1], "tcp-hold") && argc == 4)
		return tcp_hold((unsigned)strtoul(argv[2], NULL, 10), (unsigned)strtoul(argv[3], NULL, 10));
	if (!strcmp(argv[1], "tcp-burst") && argc == 4)
		return tcp_burst((unsigned)strtoul(argv[2], NULL, 10), (unsigned)strtoul(argv[3], NULL, 10));
	r = hp_connect(NULL, &conn);
	if (r < 0)
		return fail("connect", r);
	if (!strcmp(argv[1], "lease") && argc == 4)
		r = lease(argv[2], (unsigned)strtoul(argv[3], NULL, 10));
	else if (!strcmp(argv[1], "hold") && argc == 4)
		r = hold(argv[2], (unsigned)strtoul(argv[3], NULL, 10));
	else if (!strcmp(argv[1], "loop") && argc == 3)
		r = loop(argv[2]);
	else if (!strcmp(argv[1], "append") && argc == 4)
		r = append(argv[2], (unsigned)strtoul(argv[3], NULL, 10));
	else if (!strcmp(argv[1], "spill") && argc == 3)
		r = spill(strtoull(argv[2], NULL, 10));
	else
		r = fail("unknown verb", -22);
	hp_disconnect(conn);
	return r;
}
