/* SPDX-License-Identifier: MIT */
/*
 * log.h - hugepoold's log: one line per event on stderr.
 *
 * Under systemd (JOURNAL_STREAM set) each line carries a "<N>" syslog priority prefix that
 * journald understands; on a terminal it carries a level word instead. Lines are formatted
 * into one buffer and written with a single write(2), so threads never interleave inside a
 * line. Library and helper code never logs: the daemon logs where it decides.
 */
#ifndef HP_LOG_H
#define HP_LOG_H

#include <stdbool.h>
#include <syslog.h>

void log_open(void);
void log_set_max_level(int level);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
