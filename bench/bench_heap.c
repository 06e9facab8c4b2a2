/* SPDX-License-Identifier: MIT */
/*
 * bench_heap.c - "A cold process building a hash table or a vector of N GiB": libhugepool-heap
 * against glibc malloc and against jemalloc's default arena, in the same run.
 *
 * The parent starts $HP_BUILD/hugepoold (tests/integration/harness.c) with a class of 128 MiB
 * buffers (the bucket array, 64 MiB per GiB, must fit in one) holding the table with room to spare, on 2 MiB hugetlb pages when enough are free
 * (hugepages = require), else on 4 KiB pages (said so). Each measurement runs in a process of
 * its own, freshly exec'd (bench_heap --child ALLOCATOR SOCKET), so every allocator starts
 * cold, as an engine after its start: the child builds $HP_BENCH_HEAP_GIB GiB (default 1) of
 * nodes of 40-295 bytes (key, next, a value of mixed length written in full: several million
 * allocations), held either in a chained hash table (the bucket array from the same
 * allocator; each insert writes a random bucket) or in a vector (chunks of 1 Mi pointers from
 * the same allocator, filled in order: the build is allocation and first touch only), then
 * looks up as many random keys (table) or random indexes (vector). For the heap the build includes hp_connect
 * and hp_heap_create. The child reports build and lookup times, its page faults (getrusage,
 * minor + major) and, where the CPU's PMU is visible (not in most VMs), dTLB read misses
 * (perf_event_open); the parent prints them against glibc (and jemalloc), best of 3 runs.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h> /* MALLOCX_ZERO only: mallocx is looked up, see je_mallocx */

#include "../tests/integration/harness.h"
#include "benchutil.h"
#include "hugepool-heap.h"
#include "hugepool.h"

enum alloc_kind { HEAP, GLIBC, JEMALLOC, NKINDS };
enum shape { TABLE, VECTOR, NSHAPES };
static const char *const shape_names[NSHAPES] = { "table", "vector" };
static const char *const shape_titles[NSHAPES] = { "a hash table", "a vector" };
#define CHUNK_PTRS (1u << 20) /* pointers per chunk of the vector (8 MiB) */
static const char *const kind_names[NKINDS] = { "heap", "glibc", "jemalloc" };
static const char *const kind_titles[NKINDS] = { "hugepage heap", "glibc malloc", "jemalloc default arena" };

struct node {
	uint64_t key;
	struct node *next;
	uint32_t len;
	unsigned char val[];
};

/* What a child measured (written to its stdout pipe as one struct). */
struct result {
	int error; /* 0 or a negative errno */
	uint64_t build_ns, lookup_ns;
	uint64_t build_faults, lookup_faults;
	int64_t build_tlb, lookup_tlb; /* dTLB read misses; -1 = not available */
	uint64_t nodes, found;
	char tlb_why[64];
};

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* the allocator a child uses */
static enum alloc_kind kind;
static hp_heap *heap;
/*
 * jemalloc's mallocx, found in the libjemalloc that libhugepool-heap.so brings in: linking
 * -ljemalloc here would put it before libc and make it every child's malloc, glibc's included.
 */
static void *(*je_mallocx)(size_t size, int flags);

static void *xalloc(size_t n)
{
	switch (kind) {
	case HEAP:
		return hp_heap_alloc(heap, n);
	case JEMALLOC:
		return je_mallocx(n, 0); /* jemalloc's automatic arena and thread cache, as its malloc would */
	default:
		return malloc(n);
	}
}

static void *xcalloc(size_t n, size_t size)
{
	switch (kind) {
	case HEAP:
		return hp_heap_calloc(heap, n, size);
	case JEMALLOC:
		return je_mallocx(n * size, MALLOCX_ZERO);
	default:
		return calloc(n, size);
	}
}

static uint64_t faults(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_minflt + (uint64_t)ru.ru_majflt;
}

/* A dTLB read-miss counter of this process, or -1 with the reason in why. */
static int tlb_open(char *why, size_t len)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_HW_CACHE,
		.size = sizeof(a),
		.config = PERF_COUNT_HW_CACHE_DTLB | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
			  (PERF_COUNT_HW_CACHE_RESULT_MISS << 16),
		.disabled = 1,
		.exclude_kernel = 1,
		.exclude_hv = 1,
	};
	int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0)
		snprintf(why, len, "perf_event_open: %s", strerror(errno));
	return fd;
}

static void tlb_start(int fd)
{
	if (fd >= 0) {
		ioctl(fd, PERF_EVENT_IOC_RESET, 0);
		ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
	}
}

static int64_t tlb_stop(int fd)
{
	uint64_t v;

	if (fd < 0)
		return -1;
	ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
	return read(fd, &v, sizeof(v)) == sizeof(v) ? (int64_t)v : -1;
}

/* The vector's build: nodes in order, their pointers in chunks; random indexes looked up. */
static void vector_child(uint64_t bytes, struct result *res, int tfd)
{
	uint64_t seed = 42, t0, f0, used = 0, sum = 0, nchunks = bytes / 40 / CHUNK_PTRS + 1;
	struct node ***chunks;

	t0 = bench_now_ns();
	f0 = faults();
	tlb_start(tfd);
	chunks = xcalloc(nchunks, sizeof(*chunks));
	if (!chunks) {
		res->error = -ENOMEM;
		return;
	}
	while (used < bytes) {
		uint64_t r = splitmix(&seed), i = res->nodes;
		uint32_t len = 16 + (uint32_t)(r >> 56); /* 16..271 */
		struct node *n = xalloc(sizeof(*n) + len);

		if (i % CHUNK_PTRS == 0)
			chunks[i / CHUNK_PTRS] = xalloc(CHUNK_PTRS * sizeof(**chunks));
		if (!n || !chunks[i / CHUNK_PTRS]) {
			res->error = -ENOMEM;
			return;
		}
		n->key = r;
		n->len = len;
		n->next = NULL;
		memset(n->val, (int)(r & 0xff), len);
		chunks[i / CHUNK_PTRS][i % CHUNK_PTRS] = n;
		used += sizeof(*n) + len;
		res->nodes++;
	}
	res->build_tlb = tlb_stop(tfd);
	res->build_faults = faults() - f0;
	res->build_ns = bench_now_ns() - t0;

	t0 = bench_now_ns();
	f0 = faults();
	tlb_start(tfd);
	for (uint64_t i = 0; i < res->nodes; i++) {
		uint64_t k = (i * UINT64_C(0x9e3779b97f4a7c15)) % res->nodes;
		const struct node *n = chunks[k / CHUNK_PTRS][k % CHUNK_PTRS];

		sum += n->val[n->len - 1];
		res->found += n->len >= 16;
	}
	res->lookup_tlb = tlb_stop(tfd);
	res->lookup_faults = faults() - f0;
	res->lookup_ns = bench_now_ns() - t0;
	bench_clobber(&sum);
}

/* The child: build, look up, report on fd 1. */
static int child(const char *which, const char *shape, const char *socket_path, uint64_t bytes)
{
	struct result res = { .build_tlb = -1, .lookup_tlb = -1 };
	uint64_t nbuckets = 1, seed = 42, t0, f0, used = 0, sum = 0;
	struct node **buckets;
	hp_conn *c = NULL;
	int tfd;

	for (kind = 0; kind < NKINDS && strcmp(kind_names[kind], which) != 0; kind++)
		;
	if (kind == NKINDS || (strcmp(shape, "table") && strcmp(shape, "vector")))
		return 2;
	je_mallocx = (void *(*)(size_t, int))dlsym(RTLD_DEFAULT, "mallocx");
	if (!je_mallocx)
		return 2;
	/* ~160 bytes per node on average: a bucket per node, a power of two */
	while (nbuckets < bytes / 160)
		nbuckets <<= 1;
	tfd = tlb_open(res.tlb_why, sizeof(res.tlb_why));

	t0 = bench_now_ns();
	f0 = faults();
	tlb_start(tfd);
	if (kind == HEAP) {
		res.error = hp_connect(socket_path, &c);
		if (res.error == 0)
			res.error = hp_heap_create(c, "bench", bytes + bytes / 2, 0, &heap); /* the whole pool */
		if (res.error < 0)
			goto out;
	}
	if (strcmp(shape, "vector") == 0) {
		uint64_t connect_ns = bench_now_ns() - t0, connect_faults = faults() - f0;

		/* the heap's connect and create count in its build, as for the table */
		vector_child(bytes, &res, tfd);
		res.build_ns += connect_ns;
		res.build_faults += connect_faults;
		goto out;
	}
	buckets = xcalloc(nbuckets, sizeof(*buckets));
	if (!buckets) {
		res.error = -ENOMEM;
		goto out;
	}
	while (used < bytes) {
		uint64_t r = splitmix(&seed);
		uint32_t len = 16 + (uint32_t)(r >> 56); /* 16..271 */
		struct node *n = xalloc(sizeof(*n) + len);

		if (!n) {
			res.error = -ENOMEM;
			goto out;
		}
		n->key = r;
		n->len = len;
		memset(n->val, (int)(r & 0xff), len);
		n->next = buckets[r & (nbuckets - 1)];
		buckets[r & (nbuckets - 1)] = n;
		used += sizeof(*n) + len;
		res.nodes++;
	}
	res.build_tlb = tlb_stop(tfd);
	res.build_faults = faults() - f0;
	res.build_ns = bench_now_ns() - t0;

	/* random lookups of keys present: the same sequence of keys, visited in another order */
	t0 = bench_now_ns();
	f0 = faults();
	tlb_start(tfd);
	for (uint64_t i = 0; i < res.nodes; i++) {
		uint64_t s = 42 + ((i * UINT64_C(0x9e3779b97f4a7c15)) % res.nodes) * UINT64_C(0x9e3779b97f4a7c15);
		uint64_t key = splitmix(&s);

		for (struct node *n = buckets[key & (nbuckets - 1)]; n; n = n->next)
			if (n->key == key) {
				sum += n->val[n->len - 1];
				res.found++;
				break;
			}
	}
	res.lookup_tlb = tlb_stop(tfd);
	res.lookup_faults = faults() - f0;
	res.lookup_ns = bench_now_ns() - t0;
	bench_clobber(&sum);
out:
	if (write(1, &res, sizeof(res)) != (ssize_t)sizeof(res))
		return 1;
	/* exit frees everything at once (the heap's leases end with the connection) */
	return 0;
}

/* Run one child for kind k; 0 and its result, or a negative errno. */
static int run_child(enum alloc_kind k, enum shape sh, const char *socket_path, struct result *res)
{
	int p[2], st;
	pid_t pid;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(p[1], 1);
		execl("/proc/self/exe", "bench_heap", "--child", kind_names[k], shape_names[sh], socket_path,
		      (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	n = read(p[0], res, sizeof(*res));
	close(p[0]);
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	if (n != (ssize_t)sizeof(*res) || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -ECHILD;
	return res->error;
}

static double best_ms(const struct bench_series *s)
{
	return (double)bench_series_best(s) / 1e6;
}

/* Every allocator building shape sh, best of BENCH_REPS runs each: printed against the heap. */
static int measure(enum shape sh, const char *socket_path)
{
	struct bench_series build[NKINDS] = { 0 }, lookup[NKINDS] = { 0 };
	uint64_t fb[NKINDS] = { 0 }, fl[NKINDS] = { 0 };
	int64_t tb[NKINDS], tl[NKINDS];
	struct result res;
	char buf[2][96];
	int r;

	printf("\n   -- %s --\n", shape_titles[sh]);
	for (int k = 0; k < NKINDS; k++)
		tb[k] = tl[k] = -1;
	for (unsigned rep = 0; rep < BENCH_REPS; rep++)
		for (int k = 0; k < NKINDS; k++) {
			bench_settle();
			r = run_child(k, sh, socket_path, &res);
			if (r < 0) {
				bench_note("%s: run failed: %s", kind_titles[k], strerror(-r));
				return r;
			}
			bench_series_add(&build[k], res.build_ns);
			bench_series_add(&lookup[k], res.lookup_ns);
			/* faults and misses of the best run, by build time */
			if (bench_series_best(&build[k]) == res.build_ns) {
				fb[k] = res.build_faults;
				fl[k] = res.lookup_faults;
				tb[k] = res.build_tlb;
				tl[k] = res.lookup_tlb;
			}
			if (rep == 0 && k == 0)
				bench_note("%" PRIu64 " nodes, all %" PRIu64 " found; dTLB: %s", res.nodes, res.found,
					   res.build_tlb >= 0 ? "counted" : res.tlb_why);
		}
	for (int k = GLIBC; k < NKINDS; k++) {
		bench_row("build, hugepage heap", best_ms(&build[HEAP]) / 1e3, kind_titles[k], best_ms(&build[k]) / 1e3,
			  "s", "baseline/ours", best_ms(&build[k]) / best_ms(&build[HEAP]));
		bench_row("lookups, hugepage heap", best_ms(&lookup[HEAP]) / 1e3, kind_titles[k],
			  best_ms(&lookup[k]) / 1e3, "s", "baseline/ours", best_ms(&lookup[k]) / best_ms(&lookup[HEAP]));
		bench_row("page faults (build), heap", (double)fb[HEAP], kind_titles[k], (double)fb[k], "", "baseline/ours",
			  (double)fb[k] / (double)(fb[HEAP] ? fb[HEAP] : 1));
		bench_row("page faults (lookups), heap", (double)fl[HEAP], kind_titles[k], (double)fl[k], "",
			  "baseline/ours", (double)fl[k] / (double)(fl[HEAP] ? fl[HEAP] : 1));
		if (tb[HEAP] >= 0 && tb[k] >= 0) {
			bench_row("dTLB misses (build), heap", (double)tb[HEAP], kind_titles[k], (double)tb[k], "",
				  "baseline/ours", (double)tb[k] / (double)(tb[HEAP] ? tb[HEAP] : 1));
			bench_row("dTLB misses (lookups), heap", (double)tl[HEAP], kind_titles[k], (double)tl[k], "",
				  "baseline/ours", (double)tl[k] / (double)(tl[HEAP] ? tl[HEAP] : 1));
		}
	}
	for (int k = 0; k < NKINDS; k++)
		bench_note("all runs, s: %s build %s | lookups %s", kind_titles[k],
			   bench_series_str(&build[k], false, buf[0], sizeof(buf[0])),
			   bench_series_str(&lookup[k], false, buf[1], sizeof(buf[1])));
	return 0;
}

int main(int argc, char **argv)
{
	unsigned gib = bench_env_uint("HP_BENCH_HEAP_GIB", 1, 1, 1024);
	uint64_t bytes = (uint64_t)gib * BENCH_GIB, pool = bytes + bytes / 2;
	unsigned nbufs = (unsigned)(pool / (128 * BENCH_MIB));
	char classes[128], why[256];
	struct daemon d;
	bool huge;
	int r;

	if (argc == 5 && strcmp(argv[1], "--child") == 0)
		return child(argv[2], argv[3], argv[4], bytes);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("bench_heap: a cold process building a hash table, then a vector, of %u GiB ($HP_BENCH_HEAP_GIB) of "
	       "40-295 byte nodes, then as many random lookups; a fresh process per run\n", gib);
	bench_settle_init();
	huge = bench_hugetlb_ok(pool, BENCH_HUGE_2M, why, sizeof(why));
	bench_title("hugepage heap on %s (a pool of %u x 128 MiB), best of %d runs", huge ? "2 MiB hugetlb pages" : "4 KiB pages",
		    nbufs, BENCH_REPS);
	if (!huge)
		bench_note("no hugetlb: %s", why);
	snprintf(classes, sizeof(classes), "[class bench]\nsize = 128M\ncount = %u\n", nbufs);
	r = harness_start(&d, huge ? "hugepages = require\n" : "hugepages = off\n", classes);
	if (r < 0) {
		bench_note("could not start hugepoold: %s", strerror(-r));
		if (r == -ECHILD) {
			harness_dump_log(&d);
			harness_cleanup(&d);
		}
		return 0;
	}
	for (int sh = 0; sh < NSHAPES; sh++)
		if (measure((enum shape)sh, d.socket) < 0)
			break;
	harness_stop(&d);
	printf("\n");
	return 0;
}
