/* SPDX-License-Identifier: MIT */
/*
 * fds.h - how many fds this process has open, for the tests that check that nothing was left
 * open (test_proto's messages with fds, test_lying_daemon's lies). Header-only: include it after
 * cmocka.h.
 */
#ifndef HP_TEST_FDS_H
#define HP_TEST_FDS_H

#include <dirent.h>

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

#endif
