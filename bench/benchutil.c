/* SPDX-License-Identifier: MIT */
/*
 * benchutil.c - see benchutil.h. Shared by every bench/bench_*.c binary (the Makefile links it in).
 *
 * Measures nothing by itself: it holds the clock, the formatting of "figure | baseline | ratio"
 * rows, the best-of-N bookkeeping, and the two memory loops the benchmarks use as references:
 * a memset split over threads (the bandwidth ceiling of already-faulted memory) and a
 * one-byte-per-page touch (proof that leased memory is usable). Hugepage availability comes
 * from the daemon's own pages_available (pages.h), so a bench skips exactly when the daemon
 * with hugepages = require would refuse to start.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/perf_event.h>

#include "benchutil.h"
#include "pages.h"
#include "prefault.h"
#include "size.h"

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double bench_gbps(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes / (double)ns : 0.0;
}

bool bench_env_has(const char *name, const char *word)
{
	const char *v = getenv(name);
	size_t n = strlen(word);

	if (!v || !*v)
		return true;
	for (const char *p = v; (p = strstr(p, word)); p += n)
		if ((p == v || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

unsigned bench_env_uint(const char *name, unsigned def, unsigned min, unsigned max)
{
	const char *s = getenv(name);
	uint64_t v;

	if (!s || !*s)
		return def;
	if (decimal_parse(s, &v) < 0 || v < min || v > max) {
		printf("%s=\"%s\" is not a whole number from %u to %u: using %u\n", name, s, min, max, def);
		return def;
	}
	return (unsigned)v;
}

unsigned bench_env_gib(unsigned def)
{
	return bench_env_uint("HP_BENCH_GIB", def, 1, 1024);
}

unsigned bench_cpus(void)
{
	return prefault_default_threads();
}

bool bench_hugetlb_ok(uint64_t bytes, uint64_t page_size, char *why, size_t whylen)
{
	uint64_t need = (bytes + page_size - 1) / page_size;
	uint64_t avail = pages_available(page_size);

	if (avail >= need)
		return true;
	snprintf(why, whylen,
		 "%" PRIu64 " free hugepages of %" PRIu64 " KiB, %" PRIu64 " needed (reserve them as root: "
		 "echo N > /sys/kernel/mm/hugepages/hugepages-%" PRIu64 "kB/nr_hugepages, or run make bench as root)",
		 avail, page_size / 1024, need, page_size / 1024);
	return false;
}

/* "/sys/kernel/mm/hugepages/hugepages-<kB>kB/<file>": its number, -1 if none. */
static long hugepages_get(uint64_t page_size, const char *file)
{
	char path[128], buf[32];
	ssize_t n;
	long v;
	int fd;

	snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%" PRIu64 "kB/%s", page_size / 1024, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	v = strtol(buf, NULL, 10);
	return v;
}

static void hugepages_set(uint64_t page_size, long v)
{
	char path[128], buf[32];
	int fd, n;

	snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%" PRIu64 "kB/nr_hugepages", page_size / 1024);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = snprintf(buf, sizeof(buf), "%ld\n", v);
	/* a refusal is seen by the caller, which reads back what the kernel did */
	(void)!write(fd, buf, (size_t)n);
	close(fd);
}

/* The persistent pool: nr_hugepages minus the surplus pages on their way out (hugeadm's count). */
static long hugepages_persistent(uint64_t page_size)
{
	long nr = hugepages_get(page_size, "nr_hugepages"), surplus = hugepages_get(page_size, "surplus_hugepages");

	return nr < 0 || surplus < 0 ? -1 : nr - surplus;
}

/* What bench_hugepages_reserve added: [0] 2 MiB pages, [1] 1 GiB pages. */
static volatile long reserved_added[2];

void bench_hugepages_give_back(void)
{
	static const uint64_t sizes[2] = { BENCH_HUGE_2M, BENCH_HUGE_1G };

	for (int k = 0; k < 2; k++) {
		long n = reserved_added[k], now;

		if (n <= 0)
			continue;
		reserved_added[k] = 0;
		now = hugepages_persistent(sizes[k]);
		hugepages_set(sizes[k], now > n ? now - n : 0);
	}
}

static void give_back_on_signal(int sig)
{
	bench_hugepages_give_back();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Ask the kernel to compact memory, so that more large contiguous ranges are free. */
static void compact_memory(void)
{
	int fd = open("/proc/sys/vm/compact_memory", O_WRONLY | O_CLOEXEC);

	if (fd >= 0) {
		(void)!write(fd, "1\n", 2);
		close(fd);
	}
}

long bench_hugepages_reserve(uint64_t page_size, uint64_t n, char *why, size_t whylen)
{
	static bool hooked;
	long free_now = (long)pages_available(page_size), before = hugepages_persistent(page_size), got;

	if (free_now >= (long)n)
		return free_now;
	if (before < 0) {
		snprintf(why, whylen, "this kernel has no hugepages of %" PRIu64 " KiB", page_size / 1024);
		return -EOPNOTSUPP;
	}
	if (geteuid() != 0) {
		snprintf(why, whylen, "%ld free hugepages of %" PRIu64 " KiB, %" PRIu64 " needed, and only root may reserve "
				      "more (run make bench as root)", free_now, page_size / 1024, n);
		return free_now;
	}
	if (!hooked) {
		hooked = true;
		atexit(bench_hugepages_give_back);
		signal(SIGINT, give_back_on_signal);
		signal(SIGTERM, give_back_on_signal);
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		long now = hugepages_persistent(page_size);

		free_now = (long)pages_available(page_size);
		if (free_now >= (long)n)
			break;
		if (attempt)
			compact_memory();
		hugepages_set(page_size, now + ((long)n - free_now));
		got = hugepages_persistent(page_size) - now;
		if (got > 0)
			reserved_added[page_size == BENCH_HUGE_1G] += got;
	}
	free_now = (long)pages_available(page_size);
	if (free_now < (long)n)
		snprintf(why, whylen, "%" PRIu64 " free hugepages of %" PRIu64 " KiB wanted, the kernel found %ld (memory "
				      "too fragmented: reserve them at boot, hugepagesz=1G hugepages=N)",
			 n, page_size / 1024, free_now);
	return free_now;
}

int bench_counter_open(uint32_t type, uint64_t config, char *why, size_t whylen)
{
	struct perf_event_attr a = { .size = sizeof(a), .type = type, .config = config, .disabled = 0,
				     .exclude_kernel = 1, .exclude_hv = 1 };
	long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0) {
		int e = errno;

		snprintf(why, whylen, "perf_event_open: %s%s", strerror(e),
			 e == ENOENT || e == EOPNOTSUPP ? " (no hardware counters here: a VM without a virtual PMU?)" : "");
		return -e;
	}
	return (int)fd;
}

void bench_counter_reset(int fd)
{
	(void)ioctl(fd, PERF_EVENT_IOC_RESET, 0);
}

uint64_t bench_counter_read(int fd)
{
	uint64_t v = 0;

	if (read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		return 0;
	return v;
}

static unsigned settle_ms;

/* Is there a virtio-balloon (device id 5) that negotiated feature bit 5 (REPORTING)? */
static bool free_page_reporting(void)
{
	DIR *d = opendir("/sys/bus/virtio/devices");
	struct dirent *e;
	bool on = false;

	if (!d)
		return false;
	while (!on && (e = readdir(d))) {
		char path[300], buf[160] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/bus/virtio/devices/%s/device", e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (!fgets(buf, sizeof(buf), f) || strtoul(buf, NULL, 0) != 5) {
			fclose(f);
			continue;
		}
		fclose(f);
		snprintf(path, sizeof(path), "/sys/bus/virtio/devices/%s/features", e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		/* one character per feature bit, bit 0 first */
		if (fgets(buf, sizeof(buf), f) && strlen(buf) > 5 && buf[5] == '1')
			on = true;
		fclose(f);
	}
	closedir(d);
	return on;
}

void bench_settle_init(void)
{
	bool reporting = free_page_reporting();

	settle_ms = bench_env_uint("HP_BENCH_SETTLE_MS", reporting ? 3000 : 0, 0, 600000);
	if (reporting)
		printf("  note: free page reporting is on (virtio-balloon): memory freed here goes back to the host "
		       "and costs a host fault when touched again; each timed step that takes 4 KiB pages from "
		       "the free lists waits %u ms first so every run starts handed back ($HP_BENCH_SETTLE_MS)\n",
		       settle_ms);
	else if (settle_ms)
		printf("  note: waiting %u ms before each timed step ($HP_BENCH_SETTLE_MS)\n", settle_ms);
	fflush(stdout);
}

unsigned bench_settle_ms(void)
{
	return settle_ms;
}

void bench_settle(void)
{
	struct timespec ts = { settle_ms / 1000, (long)(settle_ms % 1000) * 1000000L };

	if (settle_ms)
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
}

int bench_hugetlb_warmup(uint64_t bytes, uint64_t *ret_ns)
{
	uint64_t t0 = bench_now_ns();
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE,
		       -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	*ret_ns = bench_now_ns() - t0;
	munmap(p, bytes);
	return 0;
}

static void read_setting(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	char line[256];
	const char *lb, *rb;

	snprintf(buf, len, "?");
	if (!f)
		return;
	if (fgets(line, sizeof(line), f)) {
		/* the active value is the one in brackets: "always [madvise] never" */
		lb = strchr(line, '[');
		rb = lb ? strchr(lb, ']') : NULL;
		if (lb && rb)
			snprintf(buf, len, "%.*s", (int)(rb - lb - 1), lb + 1);
	}
	fclose(f);
}

void bench_thp_settings(char *buf, size_t len)
{
	char anon[32], shmem[32];

	read_setting("/sys/kernel/mm/transparent_hugepage/enabled", anon, sizeof(anon));
	read_setting("/sys/kernel/mm/transparent_hugepage/shmem_enabled", shmem, sizeof(shmem));
	snprintf(buf, len, "THP for anonymous memory: %s, for shmem: %s", anon, shmem);
}

struct memset_job {
	const struct bench_range *r;
	size_t n;
	uint64_t lo, hi; /* byte offsets into the concatenation of all ranges */
	int c;
};

static void *memset_worker(void *arg)
{
	const struct memset_job *j = arg;
	uint64_t base = 0;

	for (size_t i = 0; i < j->n; base += j->r[i].len, i++) {
		uint64_t a = base > j->lo ? base : j->lo;
		uint64_t b = base + j->r[i].len < j->hi ? base + j->r[i].len : j->hi;

		if (a >= b)
			continue;
		memset((char *)j->r[i].addr + (a - base), j->c, (size_t)(b - a));
		bench_clobber(j->r[i].addr);
	}
	return NULL;
}

uint64_t bench_memset(const struct bench_range *r, size_t n, unsigned threads, int c)
{
	struct memset_job jobs[256];
	pthread_t tids[256];
	uint64_t total = 0, t0, t1;
	unsigned started = 0;

	if (threads < 1)
		threads = 1;
	if (threads > 256)
		threads = 256;
	for (size_t i = 0; i < n; i++)
		total += r[i].len;
	for (unsigned t = 0; t < threads; t++) {
		/* page-aligned cuts so that no two threads write the same page */
		jobs[t] = (struct memset_job){ .r = r, .n = n, .c = c,
					       .lo = total * t / threads / 4096 * 4096,
					       .hi = t + 1 == threads ? total : total * (t + 1) / threads / 4096 * 4096 };
	}
	t0 = bench_now_ns();
	if (threads == 1) {
		memset_worker(&jobs[0]);
	} else {
		for (; started < threads; started++)
			if (pthread_create(&tids[started], NULL, memset_worker, &jobs[started]) != 0)
				break;
		/* a thread that could not start: do its share here rather than skip memory */
		for (unsigned t = started; t < threads; t++)
			memset_worker(&jobs[t]);
		for (unsigned t = 0; t < started; t++)
			pthread_join(tids[t], NULL);
	}
	t1 = bench_now_ns();
	return t1 - t0;
}

uint64_t bench_touch(const struct bench_range *r, size_t n, size_t stride)
{
	uint64_t t0 = bench_now_ns();

	for (size_t i = 0; i < n; i++) {
		volatile char *p = r[i].addr;

		for (size_t off = 0; off < r[i].len; off += stride)
			p[off] = 1;
	}
	return bench_now_ns() - t0;
}

void bench_series_add(struct bench_series *s, uint64_t ns)
{
	if (s->n < BENCH_REPS)
		s->ns[s->n++] = ns;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_median(double *v, unsigned n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(v[0]), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

uint64_t bench_series_best(const struct bench_series *s)
{
	uint64_t best = 0;

	for (unsigned i = 0; i < s->n; i++)
		if (i == 0 || s->ns[i] < best)
			best = s->ns[i];
	return best;
}

const char *bench_series_str(const struct bench_series *s, bool ms, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < s->n && off < len; i++) {
		int w = ms ? snprintf(buf + off, len - off, "%s%.1f", i ? " " : "", (double)s->ns[i] / 1e6)
			   : snprintf(buf + off, len - off, "%s%.3f", i ? " " : "", (double)s->ns[i] / 1e9);

		if (w < 0)
			break;
		off += (size_t)w;
	}
	return buf;
}

void bench_title(const char *fmt, ...)
{
	va_list ap;

	printf("\n== ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" ==\n");
	fflush(stdout);
}

void bench_note(const char *fmt, ...)
{
	va_list ap;

	printf("   ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

void bench_row(const char *what, double figure, const char *baseline_what, double baseline,
	       const char *unit, const char *ratio_name, double ratio)
{
	printf("   %-36s %9.2f %-4s | %-28s %9.2f %-4s | %-14s %6.2fx\n", what, figure, unit, baseline_what,
	       baseline, unit, ratio_name, ratio);
	fflush(stdout);
}
