/* SPDX-License-Identifier: MIT */
/*
 * traced.c - hugepoold with its journals' operations traced, for test_journal_power.c: linked
 * beside main.c into build/tests/hugepoold-traced (never installed, not a test of its own). When
 * HP_JOURNAL_TRACE names a file, it sets both of the journal's taps before main runs (jio's: the
 * batches, their completions, the acknowledgements; journal_fs.h's: the files and names), and
 * each operation is appended to that file as it happens, one write each (crashfs.h's trace
 * records): whatever a SIGKILL interrupts, what the daemon did is there for the test to build
 * the states a power loss then could leave. It traces a daemon started on an empty journal
 * directory: a file it did not see made is unknown to the trace, and stops the daemon (abort).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "../lib/crashfs.h"

static struct cfs_log trace;

__attribute__((constructor)) static void trace_start(void)
{
	const char *path = getenv("HP_JOURNAL_TRACE");

	if (!path)
		return;
	cfs_init(&trace);
	trace.trace_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (trace.trace_fd < 0)
		abort();
	cfs_record(&trace);
}
