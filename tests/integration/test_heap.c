/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of libhugepool-heap against a real hugepoold: allocations of every size and
 * alignment come from leased buffers (checked in /proc/self/maps), realloc across buffers,
 * max_bytes and the daemon's per-uid limit give NULL then recover, heaps do not share memory,
 * threads allocate at once, a killed client leaves no lease, calloc zeroes a reused buffer, and
 * the process's own malloc never sees the heap's allocations.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hugepool.h"
#include "hugepool-heap.h"
#include "proto.h"
#include "case.h"

/*
 * Under TSan: jemalloc's fork handler takes every mutex of every arena before fork() (the
 * harness forks each daemon), more than the 64 held locks TSan's deadlock detector can track
 * ("CHECK failed: sanitizer_deadlock_detector.h:67"). Races are still detected; only lock-order
 * inversions are not. Ignored in builds without TSan.
 */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "detect_deadlocks=0";
}

#define MIB (1024ull * 1024)
#define BUF (8 * MIB)
#define CLASSES "[class heap]\nsize = 8M\ncount = 8\n"

/*
 * The mapping holding [p, p + len): 1 and its start when it is a buffer leased from the
 * daemon (its memfd is named "hugepool:CLASS:N"), 0 otherwise.
 */
static int leased_mapping(const void *p, size_t len, uintptr_t *ret_start)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int found = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
			continue;
		if ((uintptr_t)p >= lo && (uintptr_t)p + len <= hi) {
			found = strstr(line, "/memfd:hugepool:heap:") != NULL;
			if (ret_start)
				*ret_start = lo;
			break;
		}
	}
	fclose(f);
	return found;
}

static void fill(void *p, size_t n, unsigned seed)
{
	unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(seed + i * 7);
}

static void check_fill(const void *p, size_t n, unsigned seed)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i] != (unsigned char)(seed + i * 7))
			fail_msg("byte %zu of %zu at %p: %u, want %u", i, n, p, b[i], (unsigned char)(seed + i * 7));
}

static hp_heap *heap(hp_conn *c, size_t max_bytes)
{
	hp_heap *h = NULL;
	int r = hp_heap_create(c, "heap", max_bytes, 0, &h);

	if (r < 0)
		fail_msg("hp_heap_create: %s (%s)", hp_strerror(r), hp_last_error(c));
	return h;
}

static struct hp_heap_stats stats(hp_heap *h)
{
	struct hp_heap_stats s;

	assert_int_equal(hp_heap_stats(h, &s), 0);
	return s;
}

/* Every size from 8 B to 6 MiB (powers of two and odd neighbours): leased, usable, intact. */
static void test_sizes(void **state)
{
	static struct daemon d; /* static: teardown reads it after a failed assertion left the frame */
	hp_conn *c;
	hp_heap *h;
	void *p[64];
	size_t sz[64];
	unsigned n = 0;

	(void)state;
	start(&d, "", CLASSES);
	c = conn(&d);
	h = heap(c, 64 * MIB);
	for (size_t s = 8; s <= 6 * MIB; s *= 2)
		for (int k = -1; k <= 1; k++) {
			sz[n] = s + (size_t)k * 3;
			p[n] = hp_heap_alloc(h, sz[n]);
			assert_non_null(p[n]);
			assert_true(hp_heap_usable_size(h, p[n]) >= sz[n]);
			assert_true(leased_mapping(p[n], sz[n], NULL));
			fill(p[n], sz[n], n);
			n++;
		}
	for (unsigned i = 0; i < n; i++)
		check_fill(p[i], sz[i], i);
	assert_true(stats(h).allocated_bytes >= 12 * MIB);
	for (unsigned i = 0; i < n; i++)
		hp_heap_free(h, p[i]);
	assert_int_equal(stats(h).allocated_bytes, 0);
	/* calloc and zero-sized requests */
	unsigned char *z = hp_heap_calloc(h, 1000, 1000);
	assert_non_null(z);
	for (size_t i = 0; i < 1000 * 1000; i++)
		assert_int_equal(z[i], 0);
	hp_heap_free(h, z);
	z = hp_heap_alloc(h, 0);
	assert_non_null(z);
	hp_heap_free(h, z);
	hp_heap_free(h, NULL);
	errno = 0;
	assert_null(hp_heap_calloc(h, SIZE_MAX / 2, 3));
	assert_int_equal(errno, ENOMEM);
	hp_heap_destroy(h);
	hp_disconnect(c);
	stop(&d);
}

/* Alignments from 8 B to 2 MiB, small and large objects. */
static void test_alignment(void **state)
{
	static struct daemon d; /* static: teardown reads it after a failed assertion left the frame */
	hp_conn *c;
	hp_heap *h;
	void *p[2][22];

	(void)state;
	start(&d, "", CLASSES);
	c = conn(&d);
	h = heap(c, 64 * MIB);
	for (unsigned i = 0; i < 22; i++) {
		size_t a = (size_t)8 << (i % 19); /* 8 B .. 2 MiB */
		size_t s = i < 19 ? 24 : 3 * MIB / 2;

		p[0][i] = hp_heap_aligned_alloc(h, a, s);
		p[1][i] = hp_heap_aligned_alloc(h, a, a + 8);
		for (int k = 0; k < 2; k++) {
			size_t len = k ? a + 8 : s;

			assert_non_null(p[k][i]);
			if ((uintptr_t)p[k][i] % a)
				fail_msg("%p is not aligned to %zu", p[k][i], a);
			assert_true(leased_mapping(p[k][i], len, NULL));
			fill(p[k][i], len, i);
		}
	}
	for (unsigned i = 0; i < 22; i++) {
		check_fill(p[0][i], i < 19 ? 24 : 3 * MIB / 2, i);
		check_fill(p[1][i], ((size_t)8 << (i % 19)) + 8, i);
		hp_heap_free(h, p[0][i]);
		hp_heap_free(h, p[1][i]);
	}
	errno = 0;
	assert_null(hp_heap_aligned_alloc(h, 24, 8));
	assert_int_equal(errno, EINVAL);
	hp_heap_destroy(h);
	hp_disconnect(c);
	stop(&d);
}

/* realloc from 16 B to 6 MiB keeps the content while the object moves into further buffers. */
static void test_realloc_across_buffers(void **state)
{
	static struct daemon d; /* static: teardown reads it after a failed assertion left the frame */
	hp_conn *c;
	hp_heap *h;
	uintptr_t first = 0, last = 0;
	unsigned char *p;
	size_t n = 16;

	(void)state;
	start(&d, "", CLASSES);
	c = conn(&d);
	h = heap(c, 64 * MIB);
	p = hp_heap_alloc(h, n);
	assert_non_null(p);
	fill(p, n, 5);
	assert_true(leased_mapping(p, n, &first));
	while (n < 6 * MIB) {
		size_t next = n * 2 + 3 < 6 * MIB ? n * 2 + 3 : 6 * MIB;
		unsigned char *q = hp_heap_realloc(h, p, next);

		assert_non_null(q);
		check_fill(q, n, 5);
		fill(q, next, 5);
		p = q;
		n = next;
		assert_true(leased_mapping(p, n, &last));
	}
	assert_true(last != first);
	assert_true(stats(h).buffers >= 2);
	assert_null(hp_heap_realloc(h, p, 0)); /* frees */
	assert_int_equal(stats(h).allocated_bytes, 0);
	/* larger than a buffer: NULL, and the object stays as it was */
	p = hp_heap_alloc(h, MIB);
	assert_non_null(p);
	fill(p, MIB, 9);
	errno = 0;
	assert_null(hp_heap_realloc(h, p, 2 * BUF));
	assert_int_equal(errno, ENOMEM);
	check_fill(p, MIB, 9);
	hp_heap_free(h, p);
	hp_heap_destroy(h);
	hp_disconnect(c);
	stop(&d);
}

/*
 * Fill h with blocks of `size` until an allocation fails; returns how many succeeded (the
 * pointers in p, at most max).
 */
static unsigned fill_heap(hp_heap *h, void **p, unsigned max, size_t size)
{
	unsigned n = 0;

	while (n < max) {
		errno = 0;
		p[n] = hp_heap_alloc(h, size);
		if (!p[n]) {
			assert_int_equal(errno, ENOMEM);
			return n;
		}
		memset(p[n], (int)n, size);
		n++;
	}
	fail_msg("the heap never ran out after %u allocations", n);
	return n;
}

/* At max_bytes the heap returns NULL, and serves again once objects are freed. */
static void test_max_bytes(void **state)
{
	static struct daemon d; /* static: teardown reads it after a failed assertion left the frame */
	hp_conn *c;
	hp_heap *h;
	void *p[64];
	unsigned n, again;
	struct hp_heap_stats s;

	(void)state;
	start(&d, "", CLASSES);
	c = conn(&d);
	h = heap(c, 2 * BUF + BUF / 2); /* room for two buffers */
	n = fill_heap(h, p, 64, MIB);
	s = stats(h);
	assert_int_equal(s.buffers, 2);
	assert_true(s.leased_bytes <= s.max_bytes);
	assert_true(n >= 1 && n * MIB <= s.leased_bytes);
	assert_int_equal(s.lease_failures, 0); /* never asked the daemon past max_bytes */
	for (unsigned i = 0; i < n; i++)
		hp_heap_free(h, p[i]);
	again = fill_heap(h, p, 64, MIB);
	assert_int_equal(again, n);
	assert_int_equal(stats(h).buffers, 2);
	for (unsigned i = 0; i < again; i++)
		hp_heap_free(h, p[i]);
	hp_heap_destroy(h);
	hp_disconnect(c);
	stop(&d);
}

/* The daemon's max_bytes_per_uid caps the heap below its max_bytes: NULL, -EDQUOT, recovery. */
static void test_uid_limit(void **state)
{
	static struct daemon d; /* static: teardown reads it after a failed assertion left the frame */
	hp_conn *c;
	hp_heap *h;
	void *p[64];
	unsigned n;
	struct hp_heap_stats s;

	(void)state;
	start(&d, "max_bytes_per_uid = 24M\n", CLASSES);
	c = conn(&d);
	h = heap(c, 64 * MIB);
	n = fill_heap(h, p, 64, MIB);
	s = stats(h);
	assert_int_equal(s.buffers, 3);
	assert_true(s.lease_failures >= 1);
	assert_int_equal(s.last_lease_error, -EDQUOT);
	assert_true(n >= 1 && n * MIB <= s.leased_bytes);
	hp_heap_free(h, p[n - 1]);
	p[n - 1] = hp_heap_alloc(h, MIB);
	assert_non_null(p[n - 1]);
	for (unsigned i = 0; i < n; i++)
		hp_heap_free(h, p[i]);
	hp_heap_destroy(h);
	hp_disconnect(c);
	stop(&d);
}

struct block {
	uintptr_t lo, hi;
};

static int block_cmp(const void *a, const void *b)
{
	const struct block *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Two heaps of one process: separate buffers, no object of one inside the other's memory. */
static void test_two_heaps(void **state)
{
	enum { N = 3000 };
	static struct daemon d; /* static: teardown reads it after a failed assertion left the frame */
	hp_conn *c[2];
	hp_heap *h[2];
	static void *p[2][N];
	static struct block all[2 * N];
	uintptr_t map;

	(void)state;
	start(&d, "", CLASSES);
	for (int k = 0; k < 2; k++) {
		c[k] = conn(&d);
		h[k] = heap(c[k], 32 * MIB);
	}
	for (unsigned i = 0; i < N; i++)
		for (int k = 0; k < 2; k++) {
			size_t s = 16 + (i * 37) % 4000;

			p[k][i] = hp_heap_alloc(h[k], s);
			assert_non_null(p[k][i]);
			fill(p[k][i], s, (unsigned)k);
			all[2 * i + (unsigned)k] = (struct block){ (uintptr_t)p[k][i], (uintptr_t)p[k][i] + s };
		}
	qsort(all, 2 * N, sizeof(all[0]), block_cmp);
	for (unsigned i = 1; i < 2 * N; i++)
		assert_true(all[i].lo >= all[i - 1].hi);
	/* the buffers differ: a mapping of heap 0 holds no object of heap 1 */
	assert_true(leased_mapping(p[0][0], 16, &map));
	for (unsigned i = 0; i < N; i++) {
		uintptr_t m1;

		assert_true(leased_mapping(p[1][i], 16, &m1));
		assert_true(m1 != map);
		if (i % 100 == 0)
			hp_heap_free(h[1], p[1][i]), p[1][i] = NULL;
	}
	for (unsigned i = 0; i < N; i++)
		check_fill(p[0][i], 16 + (i * 37) % 4000, 0);
	for (int k = 0; k < 2; k++) {
		hp_heap_destroy(h[k]);
		hp_disconnect(c[k]);
	}
	stop(&d);
}

/* The heaps a client of pid pid reports, as another connection's status shows them. */
static struct hp_client_heaps heaps_of(hp_conn *watcher, pid_t pid, unsigned nth)
{
	struct hp_client_heaps ret = { 0 };
	struct hp_status *st;
	unsigned seen = 0;

	assert_int_equal(hp_status(watcher, &st), 0);
	for (uint32_t i = 0; i < st->nclients; i++)
		if (st->clients[i]->pid == pid && seen++ == nth)
			ret = st->clients[i]->heaps;
	hp_status_free(st);
	return ret;
}

/* hugepoolctl's view of a client's heaps: open, buffers held, bytes carved; zeros after destroy. */
static void test_status_shows_heaps(void **state)
{
	static struct daemon d;
	hp_conn *c, *watcher;
	hp_heap *h[2];
	struct hp_client_heaps seen;
	void *p;
	struct hp_heap_stats s0, s1;

	(void)state;
	start(&d, "", CLASSES);
	c = conn(&d);
	watcher = conn(&d);
	seen = heaps_of(watcher, getpid(), 0);
	assert_int_equal(seen.heaps, 0);
	h[0] = heap(c, 32 * MIB);
	h[1] = heap(c, 32 * MIB);
	for (int i = 0; i < 3; i++) { /* objects of 5 MiB: a buffer each */
		p = hp_heap_alloc(h[0], 5 * MIB);
		assert_non_null(p);
	}
	assert_non_null(hp_heap_alloc(h[1], 100));
	s0 = stats(h[0]);
	s1 = stats(h[1]);
	seen = heaps_of(watcher, getpid(), 0);
	assert_int_equal(seen.heaps, 2);
	assert_int_equal(seen.heap_buffers, s0.buffers + s1.buffers);
	assert_true(seen.heap_buffers >= 4);
	assert_int_equal(seen.heap_bytes, s0.carved_bytes + s1.carved_bytes);
	assert_true(seen.heap_bytes >= 15 * MIB);
	/* the watcher holds none */
	assert_int_equal(heaps_of(watcher, getpid(), 1).heaps, 0);
	hp_heap_destroy(h[1]);
	seen = heaps_of(watcher, getpid(), 0);
	assert_int_equal(seen.heaps, 1);
	assert_int_equal(seen.heap_buffers, s0.buffers);
	assert_int_equal(seen.heap_bytes, s0.carved_bytes);
	hp_heap_destroy(h[0]);
	seen = heaps_of(watcher, getpid(), 0);
	assert_int_equal(seen.heaps, 0);
	assert_int_equal(seen.heap_buffers, 0);
	assert_int_equal(seen.heap_bytes, 0);
	hp_disconnect(watcher);
	hp_disconnect(c);
	stop(&d);
}

struct worker {
	hp_heap *h;
	unsigned seed;
	int failed;
};

/* Random allocations, reallocations and frees of mixed sizes, content checked before each free. */
static void *worker_main(void *arg)
{
	enum { SLOTS = 256, OPS = 20000 };
	struct worker *w = arg;
	void *p[SLOTS] = { 0 };
	size_t sz[SLOTS] = { 0 };
	unsigned x = w->seed;

	for (unsigned op = 0; op < OPS && !w->failed; op++) {
		unsigned i;
		size_t s;

		x = x * 1103515245u + 12345u;
		i = (x >> 8) % SLOTS;
		s = (x >> 16) % 8 == 0 ? 4096 + (x >> 4) % 200000 : 8 + (x >> 4) % 500;
		if (p[i]) {
			const unsigned char *b = p[i];

			for (size_t k = 0; k < sz[i]; k += 97)
				if (b[k] != (unsigned char)(i + k))
					w->failed = 1;
			if (op % 3 == 0) {
				unsigned char *q = hp_heap_realloc(w->h, p[i], s);

				if (!q) {
					w->failed = 1;
					break;
				}
				for (size_t k = 0; k < s; k++)
					q[k] = (unsigned char)(i + k);
				p[i] = q;
				sz[i] = s;
				continue;
			}
			hp_heap_free(w->h, p[i]);
			p[i] = NULL;
			continue;
		}
		p[i] = hp_heap_alloc(w->h, s);
		if (!p[i]) {
			w->failed = 1;
			break;
		}
		sz[i] = s;
		for (size_t k = 0; k < s; k++)
			((unsigned char *)p[i])[k] = (unsigned char)(i + k);
	}
	for (unsigned i = 0; i < SLOTS; i++)
		hp_heap_free(w->h, p[i]);
	return NULL;
}

/* Four threads on one heap at once (run under TSan by make check-all). */
static void test_threads(void **state)
{
	enum { T = 4 };
	static struct daemon d; /* static: teardown reads it after a failed assertion left the frame */
	hp_conn *c;
	hp_heap *h;
	pthread_t th[T];
	struct worker w[T];

	(void)state;
	start(&d, "", CLASSES);
	c = conn(&d);
	h = heap(c, 64 * MIB);
	for (unsigned i = 0; i < T; i++) {
		w[i] = (struct worker){ .h = h, .seed = i + 1 };
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	for (unsigned i = 0; i < T; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(w[i].failed, 0);
	}
	assert_int_equal(stats(h).allocated_bytes, 0);
	hp_heap_destroy(h);
	hp_disconnect(c);
	stop(&d);
}

/*
 * Thread caches across heaps that come and go: threads that outlive the heaps they used (their
 * caches destroyed with each heap) use the next heaps, which may sit at the same address, and a
 * thread uses more heaps than it has cache slots. Every object must come from its own heap.
 */
enum { CT = 3, CROUNDS = 6, CHEAPS = 2, COBJ = 100 };
static hp_heap *cache_heaps[CHEAPS];
static pthread_barrier_t cache_barrier;

static void *cache_worker(void *arg)
{
	int *failed = arg;

	for (unsigned r = 0; r < CROUNDS; r++) {
		uintptr_t map[CHEAPS][COBJ];
		void *p[CHEAPS][COBJ];

		pthread_barrier_wait(&cache_barrier); /* the round's heaps exist */
		for (unsigned k = 0; k < CHEAPS; k++)
			for (unsigned i = 0; i < COBJ; i++) {
				p[k][i] = hp_heap_alloc(cache_heaps[k], 24 + (i % 7) * 40);
				if (!p[k][i] || !leased_mapping(p[k][i], 24, &map[k][i]))
					(*failed)++;
			}
		for (unsigned i = 0; i < COBJ; i++)
			for (unsigned j = 0; j < COBJ; j++)
				*failed += map[0][i] == map[1][j]; /* the two heaps never share a buffer */
		for (unsigned k = 0; k < CHEAPS; k++)
			for (unsigned i = 0; i < COBJ; i++)
				hp_heap_free(cache_heaps[k], p[k][i]);
		pthread_barrier_wait(&cache_barrier); /* done with them: the main thread destroys them */
	}
	return NULL;
}

/* Leases the daemon counts now (this test's only client holds them all). */
static uint32_t stats_leases(hp_conn *c)
{
	struct hp_status *st;
	uint32_t n;

	assert_int_equal(hp_status(c, &st), 0);
	n = st->nleases;
	hp_status_free(st);
	return n;
}

static void test_thread_caches(void **state)
{
	enum { MANY = 11 };
	static struct daemon d;
	hp_conn *c;
	hp_heap *many[MANY];
	pthread_t th[CT];
	int failed[CT] = { 0 };

	(void)state;
	start(&d, "", "[class heap]\nsize = 2M\ncount = 16\n");
	c = conn(&d);
	pthread_barrier_init(&cache_barrier, NULL, CT + 1);
	for (unsigned i = 0; i < CT; i++)
		assert_int_equal(pthread_create(&th[i], NULL, cache_worker, &failed[i]), 0);
	for (unsigned r = 0; r < CROUNDS; r++) {
		for (unsigned k = 0; k < CHEAPS; k++) {
			void *p;

			cache_heaps[k] = heap(c, 4 * MIB); /* often where the last round's was */
			p = hp_heap_alloc(cache_heaps[k], 64); /* this thread's cache of it, too */
			assert_non_null(p);
			hp_heap_free(cache_heaps[k], p);
		}
		pthread_barrier_wait(&cache_barrier);
		pthread_barrier_wait(&cache_barrier);
		for (unsigned k = 0; k < CHEAPS; k++)
			hp_heap_destroy(cache_heaps[k]);
		assert_int_equal(stats_leases(c), 0);
	}
	for (unsigned i = 0; i < CT; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(failed[i], 0);
	}
	pthread_barrier_destroy(&cache_barrier);
	/* more heaps at once than a thread has cache slots: each still serves its own */
	for (unsigned k = 0; k < MANY; k++) {
		void *p;

		many[k] = heap(c, 2 * MIB);
		p = hp_heap_alloc(many[k], 100);
		assert_non_null(p);
		assert_true(leased_mapping(p, 100, NULL));
		hp_heap_free(many[k], p);
		assert_int_equal(stats(many[k]).allocated_bytes, 0);
	}
	for (unsigned k = 0; k < MANY; k++)
		hp_heap_destroy(many[k]);
	hp_disconnect(c);
	stop(&d);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* A client SIGKILLed while its heap holds three buffers leaves no lease behind. */
static void test_killed_client(void **state)
{
	static struct daemon d; /* static: teardown reads it after a failed assertion left the frame */
	hp_conn *c;
	struct hp_status *st;
	int pfd[2];
	char ok = 0;
	pid_t pid;
	int wst;

	(void)state;
	start(&d, "", CLASSES);
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		hp_conn *cc;
		hp_heap *h;
		char r = 'n';

		close(pfd[0]);
		if (hp_connect(d.socket, &cc) == 0 && hp_heap_create(cc, "heap", 64 * MIB, 0, &h) == 0) {
			for (int i = 0; i < 20; i++)
				memset(hp_heap_alloc(h, MIB), 1, MIB); /* three buffers' worth */
			r = 'y';
		}
		if (write(pfd[1], &r, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(pfd[1]);
	assert_int_equal(read(pfd[0], &ok, 1), 1);
	close(pfd[0]);
	assert_int_equal(ok, 'y');
	c = conn(&d);
	st = status(c);
	assert_true(st->nleases >= 3);
	hp_status_free(st);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &wst, 0), pid);
	/* the daemon sees the close asynchronously: wait (bounded) for its state, not for time */
	for (int i = 0;; i++) {
		uint32_t n;

		st = status(c);
		n = st->nleases;
		hp_status_free(st);
		if (n == 0)
			break;
		if (i == 2000)
			fail_msg("%u leases left after the client was killed", n);
		sleep_ms(5);
	}
	hp_disconnect(c);
	stop(&d);
}

/*
 * A buffer handed back with garbage in it and leased again (same uid: the daemon leaves the
 * content) still gives zeroed memory to calloc.
 */
static void test_calloc_reused_buffer(void **state)
{
	static struct daemon d; /* static: teardown reads it after a failed assertion left the frame */
	hp_conn *c;
	hp_heap *h;
	unsigned char *p;

	(void)state;
	start(&d, "", "[class heap]\nsize = 8M\ncount = 1\n");
	c = conn(&d);
	h = heap(c, BUF);
	p = hp_heap_alloc(h, 6 * MIB);
	assert_non_null(p);
	memset(p, 0xa5, 6 * MIB);
	hp_heap_destroy(h);
	h = heap(c, BUF); /* the same (only) buffer again */
	p = hp_heap_calloc(h, 6, MIB);
	assert_non_null(p);
	for (size_t i = 0; i < 6 * MIB; i++)
		if (p[i])
			fail_msg("byte %zu of a calloc'ed block is %#x", i, p[i]);
	hp_heap_destroy(h);
	hp_disconnect(c);
	stop(&d);
}

/*
 * Bytes allocated in one of jemalloc's arenas. mallctl is looked up, not linked: a program that
 * names -ljemalloc gets jemalloc's malloc instead of glibc's, which is what this test checks.
 */
static size_t arena_allocated(unsigned arena)
{
	int (*mallctl)(const char *, void *, size_t *, void *, size_t) =
		(int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT, "mallctl");
	uint64_t epoch = 1;
	size_t small = 0, large = 0, sz = sizeof(epoch);
	char key[64];

	assert_non_null(mallctl);

	assert_int_equal(mallctl("epoch", &epoch, &sz, &epoch, sz), 0);
	sz = sizeof(size_t);
	snprintf(key, sizeof(key), "stats.arenas.%u.small.allocated", arena);
	assert_int_equal(mallctl(key, &small, &sz, NULL, 0), 0);
	snprintf(key, sizeof(key), "stats.arenas.%u.large.allocated", arena);
	assert_int_equal(mallctl(key, &large, &sz, NULL, 0), 0);
	return small + large;
}

/*
 * The process's malloc (glibc's here) and jemalloc's own automatic arena see nothing of the
 * heap's allocations: their statistics do not move while the heap allocates and frees within
 * its first buffer, and the heap's pointers are never in the process heap.
 */
static void test_process_malloc_untouched(void **state)
{
	enum { N = 2000 };
	static struct daemon d; /* static: teardown reads it after a failed assertion left the frame */
	hp_conn *c;
	hp_heap *h;
	static void *p[N];
	struct mallinfo2 before, after;
	size_t je_before, je_after;

	(void)state;
	start(&d, "", CLASSES);
	c = conn(&d);
	h = heap(c, 64 * MIB);
	/* this thread's first use makes its jemalloc thread cache for the heap: metadata that
	 * jemalloc keeps in its arena 0 (hugepool-heap(3)); the allocations after it take nothing */
	hp_heap_free(h, hp_heap_alloc(h, 8));
	je_before = arena_allocated(0);
	before = mallinfo2();
	for (unsigned i = 0; i < N; i++) {
		p[i] = hp_heap_alloc(h, 8 + i % 2000); /* ~2 MiB: the first buffer suffices */
		assert_non_null(p[i]);
	}
	for (unsigned i = 0; i < N; i += 2)
		hp_heap_free(h, p[i]);
	after = mallinfo2();
	je_after = arena_allocated(0);
	assert_int_equal(after.uordblks, before.uordblks);
	assert_int_equal(after.arena, before.arena);
	assert_int_equal(after.hblkhd, before.hblkhd);
	assert_int_equal(je_after, je_before);
	assert_int_equal(stats(h).buffers, 1);
	for (unsigned i = 1; i < N; i += 2) {
		assert_true(leased_mapping(p[i], 8, NULL));
		hp_heap_free(h, p[i]);
	}
	hp_heap_destroy(h);
	hp_disconnect(c);
	stop(&d);
}

/* Bad arguments, an unknown class, max_bytes below one buffer: errors, no heap, no lease kept. */
static void test_create_errors(void **state)
{
	static struct daemon d; /* static: teardown reads it after a failed assertion left the frame */
	hp_conn *c;
	hp_heap *h = NULL;
	struct hp_status *st;

	(void)state;
	start(&d, "", CLASSES);
	c = conn(&d);
	assert_int_equal(hp_heap_create(c, "nosuch", 64 * MIB, 0, &h), -ENOENT);
	assert_int_equal(hp_heap_create(c, "heap", BUF - 1, 0, &h), -EINVAL);
	assert_int_equal(hp_heap_create(c, "heap", 0, 0, &h), -EINVAL);
	assert_int_equal(hp_heap_create(c, "heap", BUF, 0x100, &h), -EINVAL);
	assert_int_equal(hp_heap_create(NULL, "heap", BUF, 0, &h), -EINVAL);
	assert_null(h);
	st = status(c);
	assert_int_equal(st->nleases, 0);
	hp_status_free(st);
	hp_heap_destroy(NULL);
	hp_disconnect(c);
	stop(&d);
}

/* examples/heap_allocator.cpp, built by make tests when there is a C++ compiler, runs. */
static void test_cxx_example(void **state)
{
	static struct daemon d; /* static: teardown reads it after a failed assertion left the frame */
	char path[512];
	pid_t pid;
	int st;

	(void)state;
	snprintf(path, sizeof(path), "%s/examples/heap_allocator", harness_build());
	if (access(path, X_OK) != 0) {
		fprintf(stderr, "no %s (no C++ compiler when the tests were built): skipped\n", path);
		skip();
	}
	start(&d, "", CLASSES);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl(path, path, d.socket, "heap", (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	stop(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_sizes, teardown),
		cmocka_unit_test_teardown(test_alignment, teardown),
		cmocka_unit_test_teardown(test_realloc_across_buffers, teardown),
		cmocka_unit_test_teardown(test_max_bytes, teardown),
		cmocka_unit_test_teardown(test_uid_limit, teardown),
		cmocka_unit_test_teardown(test_two_heaps, teardown),
		cmocka_unit_test_teardown(test_status_shows_heaps, teardown),
		cmocka_unit_test_teardown(test_threads, teardown),
		cmocka_unit_test_teardown(test_thread_caches, teardown),
		cmocka_unit_test_teardown(test_killed_client, teardown),
		cmocka_unit_test_teardown(test_calloc_reused_buffer, teardown),
		cmocka_unit_test_teardown(test_process_malloc_untouched, teardown),
		cmocka_unit_test_teardown(test_create_errors, teardown),
		cmocka_unit_test_teardown(test_cxx_example, teardown),
	};

	return cmocka_run_group_tests_name("heap", tests, NULL, NULL);
}
