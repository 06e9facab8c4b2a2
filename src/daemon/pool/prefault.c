/* SPDX-License-Identifier: MIT */
/*
 * prefault.c - see prefault.h.
 *
 * Shared state of one run lives in struct run on the caller's stack: `next` (chunk counter),
 * `done_bytes`, `failed` and `err` are atomics written by workers; `lock`/`cond` only carry
 * the "a worker finished" wake-up to the waiting caller. The SIGBUS guard is a thread-local
 * jump buffer armed only while that thread touches pages; the handler is installed once.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prefault.h"
#include "util.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static __thread sigjmp_buf *bus_guard;
static atomic_int madvise_missing;

static void sigbus_handler(int sig, siginfo_t *si, void *uctx)
{
	(void)si;
	(void)uctx;
	if (bus_guard)
		siglongjmp(*bus_guard, 1);
	/* not ours: die as the default action would */
	signal(sig, SIG_DFL);
	raise(sig);
}

static void install_sigbus(void)
{
	struct sigaction sa = { .sa_sigaction = sigbus_handler, .sa_flags = SA_SIGINFO };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

static int touch_pages(void *addr, size_t len)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	volatile char *p = addr;
	sigjmp_buf jb;
	size_t off = 0;

	pthread_once(&once, install_sigbus);
	if (sigsetjmp(jb, 1)) {
		bus_guard = NULL;
		return -EFAULT;
	}
	bus_guard = &jb;
	/* writing (not reading) makes the kernel allocate the page rather than map the zero page */
	for (; off < len; off += 4096)
		p[off] = 0;
	bus_guard = NULL;
	return 0;
}

int prefault_populate(void *addr, size_t len)
{
	if (!atomic_load_explicit(&madvise_missing, memory_order_relaxed)) {
		for (;;) {
			if (madvise(addr, len, MADV_POPULATE_WRITE) == 0)
				return 0;
			if (errno == EINTR)
				continue;
			if (errno != EINVAL)
				return -errno;
			/* EINVAL: a kernel before 5.14 that does not know the advice */
			atomic_store(&madvise_missing, 1);
			break;
		}
	}
	return touch_pages(addr, len);
}

unsigned prefault_default_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (unsigned)n : 1;
}

struct run {
	const struct prefault_range *ranges;
	size_t nranges;
	size_t chunk;
	size_t *first_chunk; /* first_chunk[i]: global index of range i's first chunk; [n] = total */
	size_t total_chunks;
	atomic_size_t next;
	atomic_uint_fast64_t done_bytes;
	atomic_int err;
	atomic_size_t failed;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned running; /* guarded by lock */
};

static size_t range_of_chunk(const struct run *r, size_t k)
{
	size_t lo = 0, hi = r->nranges;

	/* the last range whose first chunk is <= k */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->first_chunk[mid] <= k)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static void *worker(void *arg)
{
	struct run *r = arg;

	for (;;) {
		size_t k = atomic_fetch_add(&r->next, 1);

		if (k >= r->total_chunks)
			break;
		size_t i = range_of_chunk(r, k);
		size_t off = (k - r->first_chunk[i]) * r->chunk;
		size_t len = MIN(r->chunk, r->ranges[i].len - off);
		int e = prefault_populate((char *)r->ranges[i].addr + off, len);

		if (e < 0) {
			int zero = 0;

			if (atomic_compare_exchange_strong(&r->err, &zero, e))
				atomic_store(&r->failed, i);
			/* make everyone stop at their next chunk */
			atomic_store(&r->next, r->total_chunks);
			break;
		}
		atomic_fetch_add(&r->done_bytes, len);
	}
	pthread_mutex_lock(&r->lock);
	r->running--;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int prefault_run(const struct prefault_range *ranges, size_t n, unsigned threads, size_t chunk,
		 prefault_progress_fn progress, unsigned interval_ms, void *userdata,
		 struct prefault_stats *ret_stats, size_t *ret_failed)
{
	struct run r = { .ranges = ranges, .nranges = n };
	_cleanup_free_ size_t *first = NULL;
	_cleanup_free_ pthread_t *tids = NULL;
	uint64_t total = 0, t0;
	unsigned started = 0;
	bool cancelled = false;
	int err;

	if (ret_failed)
		*ret_failed = n; /* until a range fails */
	r.chunk = MAX(chunk, (size_t)PREFAULT_MIN_CHUNK);
	first = calloc(n + 1, sizeof(*first));
	if (!first)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		first[i + 1] = first[i] + DIV_ROUND_UP(ranges[i].len, r.chunk);
		total += ranges[i].len;
	}
	r.first_chunk = first;
	r.total_chunks = first[n];
	if (threads == 0)
		threads = prefault_default_threads();
	if (threads > r.total_chunks)
		threads = r.total_chunks ? (unsigned)r.total_chunks : 1;
	tids = calloc(threads, sizeof(*tids));
	if (!tids)
		return -ENOMEM;
	pthread_mutex_init(&r.lock, NULL);
	pthread_cond_init(&r.cond, NULL);

	t0 = now_ns();
	pthread_mutex_lock(&r.lock);
	for (err = 0; started < threads; started++) {
		r.running++;
		err = pthread_create(&tids[started], NULL, worker, &r);
		if (err) {
			r.running--;
			break;
		}
	}
	if (started == 0) {
		pthread_mutex_unlock(&r.lock);
		return -err;
	}
	while (r.running > 0) {
		struct timespec ts = realtime_in_ms(interval_ms);

		if (pthread_cond_timedwait(&r.cond, &r.lock, &ts) == ETIMEDOUT && progress && !cancelled) {
			pthread_mutex_unlock(&r.lock);
			if (!progress(atomic_load(&r.done_bytes), total, userdata)) {
				cancelled = true;
				int zero = 0;

				atomic_compare_exchange_strong(&r.err, &zero, -ECANCELED);
				atomic_store(&r.next, r.total_chunks);
			}
			pthread_mutex_lock(&r.lock);
		}
	}
	pthread_mutex_unlock(&r.lock);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	pthread_cond_destroy(&r.cond);
	pthread_mutex_destroy(&r.lock);

	err = atomic_load(&r.err);
	if (err < 0) {
		if (ret_failed)
			*ret_failed = atomic_load(&r.failed);
		return err;
	}
	if (ret_stats)
		*ret_stats = (struct prefault_stats){ .bytes = total, .ns = now_ns() - t0, .threads = started,
						      .used_madvise = !atomic_load(&madvise_missing) };
	return 0;
}
