/* SPDX-License-Identifier: MIT */
/*
 * fds.h - how many fds this process (or the daemon) has open, for the tests that check that
 * nothing was left open (test_lying_daemon's lies, test_hostile's clients, test_restart's
 * re-executions). Header-only: include it after cmocka.h.
 */
#ifndef HP_TEST_FDS_H
#define HP_TEST_FDS_H

#include <dirent.h>
#include <stdio.h>
#include <sys/types.h>

/* Open fds of this process, not counting the one used to list them. */
static inline unsigned count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	unsigned n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;
}

/* Open fds of process pid (the caller is root or pid's user); -1 if they cannot be listed. */
static inline int count_fds_of(pid_t pid)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

#endif
