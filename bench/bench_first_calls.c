/* SPDX-License-Identifier: MIT */
/*
 * bench_first_calls.c - the C client's side of the Java binding's fresh-process figures
 * (bench/bench_java.sh, make bench): one fresh process making the calls FirstCalls.java makes
 * in a fresh JVM, in the same order, on the same daemon, each timed from the call to its return:
 * hp_connect, hp_acquire of N buffers of CLASS, a write per PAGE bytes of each (the touch),
 * hp_release, a journal writer opened as Java opens one (a connection of its own, then
 * hp_journal_open), the first hp_journal_append of 100 bytes, hp_journal_wait for it, and the
 * disconnects. Prints one line of NAME=NANOSECONDS pairs with FirstCalls' names, so that the
 * script sets the two side by side; it asserts nothing, and a failed call ends it with its
 * errno. Not run alone by run-bench.sh: it needs the script's daemon.
 * Usage: bench_first_calls SOCKET CLASS N PAGE JOURNAL
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "benchutil.h"
#include "hugepool.h"

static _Noreturn void fail(const char *what, int r)
{
	fprintf(stderr, "bench_first_calls: %s: %s\n", what, hp_strerror(r));
	exit(1);
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "connect", "acquire", "touch", "release", "journal_open",
					     "append", "append_wait", "close" };
	uint64_t t[9], sum = 0, ticket;
	struct hp_buffer *b;
	hp_conn *c, *wc;
	hp_journal *j;
	char rec[100] = { 0 };
	unsigned n;
	size_t page;
	int r;

	if (argc != 6) {
		fprintf(stderr, "usage: bench_first_calls SOCKET CLASS N PAGE JOURNAL\n");
		return 2;
	}
	n = (unsigned)strtoul(argv[3], NULL, 10);
	page = strtoul(argv[4], NULL, 10);
	if (n == 0 || n > HP_ACQUIRE_MAX || page == 0 || !(b = calloc(n, sizeof(*b))))
		return 2;
	t[0] = bench_now_ns();
	if ((r = hp_connect(argv[1], &c)) < 0)
		fail("connect", r);
	t[1] = bench_now_ns();
	if ((r = hp_acquire(c, argv[2], n, 60000, b)) < 0)
		fail("acquire", r);
	t[2] = bench_now_ns();
	for (unsigned i = 0; i < n; i++) {
		volatile uint64_t *p = b[i].addr;

		for (size_t off = 0; off < b[i].size; off += page) {
			p[off / sizeof(*p)] = ((uint64_t)i << 32) + off; /* unique per page, as FirstCalls */
			sum += p[off / sizeof(*p)];
		}
	}
	t[3] = bench_now_ns();
	if ((r = hp_release(c, b, n)) < 0)
		fail("release", r);
	t[4] = bench_now_ns();
	if ((r = hp_connect(argv[1], &wc)) < 0 || (r = hp_journal_open(wc, argv[5], &j)) < 0)
		fail("journal open", r);
	t[5] = bench_now_ns();
	if ((r = hp_journal_append(j, rec, sizeof(rec), &ticket)) < 0)
		fail("append", r);
	t[6] = bench_now_ns();
	if ((r = hp_journal_wait(j, ticket, -1)) < 0)
		fail("wait", r);
	t[7] = bench_now_ns();
	hp_journal_close(j);
	hp_disconnect(wc);
	hp_disconnect(c);
	t[8] = bench_now_ns();
	for (unsigned i = 0; i < 8; i++)
		printf("%s%s=%llu", i ? " " : "", names[i], (unsigned long long)(t[i + 1] - t[i]));
	printf(sum == 1 ? " \n" : "\n");
	free(b);
	return 0;
}
