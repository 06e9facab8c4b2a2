/* SPDX-License-Identifier: MIT */
/*
 * ofd.c - see ofd.h. The reopen goes through /proc/self/fd: a magic link, followed to the file
 * itself and never resolved by name, so nobody can swap the file in between.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>

#include "ofd.h"

int ofd_reopen(int fd, int flags)
{
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	r = open(path, flags | O_CLOEXEC);
	return r < 0 ? -errno : r;
}

int ofd_others(int fd)
{
	if (fcntl(fd, F_SETLEASE, F_WRLCK) == 0) {
		(void)fcntl(fd, F_SETLEASE, F_UNLCK); /* granted: drop it at once */
		return 0;
	}
	return errno == EAGAIN ? 1 : -errno;
}
