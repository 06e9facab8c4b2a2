/* SPDX-License-Identifier: MIT */
/*
 * journal_fs.c - see journal_fs.h: the system calls that change a journal's files other than
 * through jio, each told to the tap once it succeeded. No state but the tap; any thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "journal_fs.h"

/* set by a test before it opens its journals, cleared after it closed them */
/* atomic: a journal's flusher thread may make its first event while a test sets or clears it */
static _Atomic(jfs_tap_fn) tap_fn;
static void *_Atomic tap_arg;

void jfs_set_tap(jfs_tap_fn fn, void *arg)
{
	atomic_store(&tap_arg, arg);
	atomic_store(&tap_fn, fn);
}

static void tell(struct jfs_event ev)
{
	jfs_tap_fn fn = atomic_load(&tap_fn);

	if (fn)
		fn(atomic_load(&tap_arg), &ev);
}

int jfs_create(int dirfd, const char *name, int flags)
{
	int fd = openat(dirfd, name, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	tell((struct jfs_event){ .op = JFS_CREATE, .dirfd = dirfd, .fd = fd, .name = name });
	return fd;
}

int jfs_write(int fd, const void *buf, size_t len, uint64_t off)
{
	ssize_t n = pwrite(fd, buf, len, (off_t)off);

	if (n != (ssize_t)len)
		return n < 0 ? -errno : -EIO;
	tell((struct jfs_event){ .op = JFS_WRITE, .fd = fd, .buf = buf, .len = len, .off = off });
	return 0;
}

int jfs_datasync(int fd)
{
	if (fdatasync(fd) < 0)
		return -errno;
	tell((struct jfs_event){ .op = JFS_SYNC, .fd = fd });
	return 0;
}

int jfs_fsync(int fd)
{
	if (fsync(fd) < 0)
		return -errno;
	tell((struct jfs_event){ .op = JFS_SYNC, .fd = fd });
	return 0;
}

int jfs_dirsync(int dirfd)
{
	if (fsync(dirfd) < 0)
		return -errno;
	tell((struct jfs_event){ .op = JFS_DIRSYNC, .dirfd = dirfd });
	return 0;
}

int jfs_rename(int dirfd, const char *from, const char *to)
{
	if (renameat(dirfd, from, dirfd, to) < 0)
		return -errno;
	tell((struct jfs_event){ .op = JFS_RENAME, .dirfd = dirfd, .name = from, .name2 = to });
	return 0;
}

int jfs_unlink(int dirfd, const char *name)
{
	if (unlinkat(dirfd, name, 0) < 0)
		return -errno;
	tell((struct jfs_event){ .op = JFS_UNLINK, .dirfd = dirfd, .name = name });
	return 0;
}
