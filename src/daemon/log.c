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

static bool to_journal;
static int max_level = LOG_INFO;

void log_open(void)
{
	to_journal = getenv("JOURNAL_STREAM") != NULL;
}

void log_set_max_level(int level)
{
	max_level = level;
}

void log_msg(int level, const char *fmt, ...)
{
	static const char *const words[] = { "emerg", "alert", "crit", "error",
					     "warning", "notice", "info", "debug" };
	char buf[1024];
	int saved = errno, n;
	va_list ap;

	if (level > max_level)
		return;
	if (to_journal)
		n = snprintf(buf, sizeof(buf), "<%d>", level);
	else
		n = snprintf(buf, sizeof(buf), "hugepoold: %s: ", words[level & 7]);
	errno = saved; /* so that %m in fmt names the caller's error */
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, (size_t)n) < 0) {
		/* nowhere left to report it */
	}
	errno = saved;
}
