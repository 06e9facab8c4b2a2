/* SPDX-License-Identifier: MIT */
/*
 * log.c - see log.h. The two settings are written once by the main thread before any other
 * thread starts and only read afterwards.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

static bool to_journal;
static int max_level = LOG_INFO;
/* the text of the last error logged (log_last_error); the main thread's: a boot's one failure */
static char last_error[512];
static pthread_t main_thread;

void log_open(void)
{
	to_journal = getenv("JOURNAL_STREAM") != NULL;
	main_thread = pthread_self();
}

const char *log_last_error(void)
{
	return last_error;
}

void log_set_max_level(int level)
{
	max_level = level;
}

static void log_vmsg(int level, unsigned dropped, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

void log_msg(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, 0, fmt, ap);
	va_end(ap);
}

int log_msg_errno(int level, int err, const char *fmt, ...)
{
	va_list ap;

	err = err < 0 ? -err : err;
	errno = err; /* %m names err, whatever ran between the failure and this call */
	va_start(ap, fmt);
	log_vmsg(level, 0, fmt, ap);
	va_end(ap);
	return -err;
}

void log_msg_ratelimited(struct log_ratelimit *rl, int level, const char *fmt, ...)
{
	int saved = errno; /* %m names the caller's error */
	uint64_t now = now_ns();
	unsigned dropped = 0;
	bool print;
	va_list ap;

	if (level > max_level)
		return;
	pthread_mutex_lock(&rl->lock);
	if (now - rl->begin_ns >= rl->interval_ns) {
		rl->begin_ns = now;
		rl->printed = 0;
	}
	print = rl->printed < rl->burst;
	if (print) {
		rl->printed++;
		dropped = rl->dropped;
		rl->dropped = 0;
	} else {
		rl->dropped++;
	}
	pthread_mutex_unlock(&rl->lock);
	if (!print)
		return;
	errno = saved;
	va_start(ap, fmt);
	log_vmsg(level, dropped, fmt, ap);
	va_end(ap);
}

static void log_vmsg(int level, unsigned dropped, const char *fmt, va_list ap)
{
	static const char *const words[] = { "emerg", "alert", "crit", "error",
					     "warning", "notice", "info", "debug" };
	char buf[1024];
	int saved = errno, n, prefix;

	if (level > max_level)
		return;
	if (to_journal)
		n = snprintf(buf, sizeof(buf), "<%d>", level);
	else
		n = snprintf(buf, sizeof(buf), "hugepoold: %s: ", words[level & 7]);
	prefix = n;
	errno = saved; /* so that %m in fmt names the caller's error */
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	if (level <= LOG_ERR && pthread_equal(pthread_self(), main_thread))
		snprintf(last_error, sizeof(last_error), "%s", buf + prefix);
	if (dropped && n < (int)sizeof(buf))
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, " (%u similar messages dropped)", dropped);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, (size_t)n) < 0) {
		/* nowhere left to report it */
	}
	errno = saved;
}
