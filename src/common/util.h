/* SPDX-License-Identifier: MIT */
/*
 * util.h - small helpers shared by the daemon, the library and the CLI.
 *
 * Cleanup attributes (systemd style) for fds and heap memory, array sizing, and monotonic time.
 * Header-only, no state, no logging: everything here is safe from any thread.
 */
#ifndef HP_UTIL_H
#define HP_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))

/*
 * 0 or a negative errno, as a peer may send one (a result, a ring's error): errnos end at the
 * kernel's MAX_ERRNO, 4095. Anything else is no error code (and -INT_MIN is no int).
 */
#define ERRNO_MAX 4095
#define ERRNO_VALID(err) ((err) <= 0 && (err) >= -ERRNO_MAX)

/*
 * Room for one more element in a growing array arr of n used and cap allocated elements: when
 * full, cap doubles (from first). 0, or -ENOMEM with arr and cap unchanged. (systemd's
 * GREEDY_REALLOC, for the one growth rule every array here uses.)
 */
#define ARRAY_RESERVE_ONE(arr, n, cap, first)                                              \
	({                                                                                 \
		int _r = 0;                                                                \
		if ((n) >= (cap)) {                                                        \
			__typeof__(cap) _cap = (cap) ? (cap) * 2 : (first);                \
			void *_p = realloc((arr), (size_t)_cap * sizeof(*(arr)));          \
			if (_p) {                                                          \
				(arr) = _p;                                                \
				(cap) = _cap;                                              \
			} else {                                                           \
				_r = -ENOMEM;                                              \
			}                                                                  \
		}                                                                          \
		_r;                                                                        \
	})

static inline void freep(void *p)
{
	free(*(void **)p);
}

static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}

#define _cleanup_free_ __attribute__((cleanup(freep)))
#define _cleanup_close_ __attribute__((cleanup(closep)))

/* Hand ownership of an fd out of a _cleanup_close_ variable. */
#define TAKE_FD(fd)                   \
	({                            \
		int _fd_ = (fd);      \
		(fd) = -1;            \
		_fd_;                 \
	})

#define TAKE_PTR(p)                        \
	({                                 \
		__typeof__(p) _p_ = (p);   \
		(p) = NULL;                \
		_p_;                       \
	})

/*
 * An enum's names as one table read both ways (systemd's DEFINE_STRING_TABLE_LOOKUP): with
 * `static const char *const NAME_table[] = { [VALUE] = "word", ... };` in a .c file,
 * DEFINE_STRING_TABLE_LOOKUP(NAME, TYPE) defines NAME_to_string(v) ("unknown" for a value the
 * table has no word for) and NAME_from_string(s, &v) (0, or -EINVAL with v untouched). The .c
 * file includes <string.h> and <errno.h>.
 */
#define DEFINE_STRING_TABLE_LOOKUP(name, type)                                                    \
	const char *name##_to_string(type v)                                                      \
	{                                                                                         \
		return (size_t)v < ARRAY_SIZE(name##_table) && name##_table[v] ? name##_table[v] : "unknown"; \
	}                                                                                         \
	int name##_from_string(const char *s, type *ret)                                          \
	{                                                                                         \
		for (size_t i = 0; i < ARRAY_SIZE(name##_table); i++)                             \
			if (name##_table[i] && strcmp(name##_table[i], s) == 0) {                  \
				*ret = (type)i;                                                     \
				return 0;                                                           \
			}                                                                           \
		return -EINVAL;                                                                     \
	}

/* In a spin-wait loop: let the sibling hyperthread run, save power. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The CLOCK_REALTIME instant ms from now: a pthread_cond_timedwait deadline. */
static inline struct timespec realtime_in_ms(unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

#endif
