/* SPDX-License-Identifier: MIT */
/*
 * harness.h - run a real hugepoold for integration tests.
 *
 * harness_start() writes a configuration (a socket in a fresh temporary directory, hugepages
 * from $HP_TEST_HUGEPAGES, default "prefer", plus the caller's classes and limits), starts
 * $HP_BUILD/hugepoold (default build/) with its own NOTIFY_SOCKET and returns once the daemon
 * sent READY=1, so tests never sleep waiting for it. harness_stop() sends SIGTERM and reports
 * how the daemon ended, so a test can assert a clean exit (sanitizer builds exit non-zero on
 * any error they found).
 */
#ifndef HP_HARNESS_H
#define HP_HARNESS_H

#include <stdbool.h>
#include <sys/types.h>

struct daemon {
	pid_t pid;
	char dir[64];
	char socket[96];
	char conf[128];
	char log[128];
	int exit_status; /* when harness_start returned -ECHILD: how the daemon ended */
};

/*
 * globals: more global keys; classes: the [class] sections. Returns 0 once READY=1 came, or
 * -ECHILD when the daemon exited first (exit_status says how; the directory is kept).
 */
int harness_start(struct daemon *d, const char *globals, const char *classes);
/* SIGTERM, wait; returns the exit status (0 = clean) or 128 + signal. Removes the directory. */
int harness_stop(struct daemon *d);
/* Remove the temporary directory (after a start that returned -ECHILD). */
void harness_cleanup(struct daemon *d);
/* Print the daemon's log to stderr (for a failing test). */
void harness_dump_log(const struct daemon *d);
/* Count the lines of the daemon's log that contain s. */
int harness_log_count(const struct daemon *d, const char *s);

/* Milliseconds since an arbitrary start (CLOCK_MONOTONIC). */
double harness_ms(void);

#endif
