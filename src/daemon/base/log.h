/* SPDX-License-Identifier: MIT */
/*
 * log.h - hugepoold's log: one line per event on stderr.
 *
 * Under systemd (JOURNAL_STREAM set) each line carries a "<N>" syslog priority prefix that
 * journald understands; on a terminal it carries a level word instead. Lines are formatted
 * into one buffer and written with a single write(2), so threads never interleave inside a
 * line.
 *
 * One convention, on the boot path as everywhere: a failure is logged once, by the function
 * that decides it is one, as it returns it: return log_error_errno(r, "Journal '%s': cannot
 * ...: %m", ...). Its callers pass the negative errno up and log nothing more; main only maps a
 * failed boot step to its exit status. Helpers that cannot know what a failure means to their
 * caller (safedir, the config parser, jio_open's note) never log: they return the errno and,
 * where the errno alone would not say it, a text the caller puts in its one line.
 *
 * A line any client can cause (a refused connection, a killed peer, a failed accept) goes
 * through a struct log_ratelimit: at most `burst` lines per `interval` at that call site, then
 * silence until the interval ends, and the next line that passes says how many were dropped.
 * So a hostile client costs the log a few lines a second, not a line per attempt.
 */
#ifndef HP_LOG_H
#define HP_LOG_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <syslog.h>

void log_open(void);
void log_set_max_level(int level);
/* The last error the main thread logged, without prefix ("" if none): a failed boot's one line. */
const char *log_last_error(void);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct log_ratelimit {
	uint64_t interval_ns;
	unsigned burst;
	/* state, guarded by lock (call sites may be on any thread) */
	pthread_mutex_t lock;
	uint64_t begin_ns;
	unsigned printed, dropped;
};

/* At most BURST lines per INTERVAL_S seconds: static struct log_ratelimit rl = LOG_RATELIMIT(5, 10); */
#define LOG_RATELIMIT(interval_s, burst_) \
	{ .interval_ns = (uint64_t)(interval_s) * 1000000000ull, .burst = (burst_), .lock = PTHREAD_MUTEX_INITIALIZER }

void log_msg_ratelimited(struct log_ratelimit *rl, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Log a failure and return it, as a negative errno: err is an errno value of either sign, and
 * %m in fmt names it. return log_error_errno(errno, "Failed to bind '%s': %m", path);
 */
int log_msg_errno(int level, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define log_error_errno(err, ...) log_msg_errno(LOG_ERR, (err), __VA_ARGS__)
#define log_warning_errno(err, ...) log_msg_errno(LOG_WARNING, (err), __VA_ARGS__)
/* An allocation failed: return log_oom("the journal's batches"); logs and returns -ENOMEM. */
#define log_oom(what) log_msg_errno(LOG_ERR, ENOMEM, "Out of memory for %s", (what))

#define log_error(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
