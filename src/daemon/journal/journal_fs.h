/* SPDX-License-Identifier: MIT */
/*
 * journal_fs.h - the calls by which a journal's files change what a power loss can leave of
 * them, apart from the batches jio writes: a file made in the journal's directory, written,
 * synced, renamed or removed, and the directory synced. journal_segments.c makes each such call
 * here and nowhere else, so that the crash-point tests can record them all with a tap, as jio's
 * tap records the batches (tests/unit/test_crash_points.c builds from both the disk states a
 * power loss could leave). The journal truncates and fallocates nothing (segments are
 * preallocated by writing zeros): a call of either would belong here too.
 *
 * Each function makes one system call and returns 0 (jfs_create: the new fd) or a negative
 * errno, and never logs: the caller knows what a failure means. A call that succeeded is then
 * told to the tap, on the calling thread; one that failed is not (what it changed, the caller
 * treats as lost).
 *
 * The tap is one process-wide setting: set it before the journals are opened and clear it once
 * they are closed (the flusher threads read it without a lock). NULL, the default, is none.
 */
#ifndef HP_JOURNAL_FS_H
#define HP_JOURNAL_FS_H

#include <stddef.h>
#include <stdint.h>

enum jfs_op {
	JFS_CREATE, /* name made in dirfd, a new empty file, open as fd */
	JFS_WRITE, /* len bytes of buf written at off of fd (the page cache holds them) */
	JFS_SYNC, /* fd's data (and what reading it needs: its size) durable: fdatasync, or fsync of a file */
	JFS_DIRSYNC, /* every name made, renamed or removed in dirfd so far durable: fsync of it */
	JFS_RENAME, /* name renamed to name2 in dirfd, replacing what had that name */
	JFS_UNLINK, /* name removed from dirfd */
};

struct jfs_event {
	enum jfs_op op;
	int dirfd; /* CREATE, DIRSYNC, RENAME, UNLINK */
	int fd; /* CREATE, WRITE, SYNC */
	const char *name, *name2; /* CREATE, UNLINK: name; RENAME: name to name2 */
	const void *buf; /* WRITE */
	size_t len;
	uint64_t off;
};

typedef void (*jfs_tap_fn)(void *arg, const struct jfs_event *ev);

void jfs_set_tap(jfs_tap_fn fn, void *arg);

/* openat(dirfd, name, O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | flags, 0600): a new file. */
int jfs_create(int dirfd, const char *name, int flags);
/* pwrite all of len bytes at off: the call's own errno (EINVAL for an unaligned O_DIRECT
 * transfer, EIO...), or -EIO for a write that came back short without one. */
int jfs_write(int fd, const void *buf, size_t len, uint64_t off);
/* fdatasync(fd). */
int jfs_datasync(int fd);
/* fsync(fd) of a regular file: its data and all its metadata. */
int jfs_fsync(int fd);
/* fsync(dirfd) of the directory: the names made, renamed and removed in it. */
int jfs_dirsync(int dirfd);
int jfs_rename(int dirfd, const char *from, const char *to);
/* unlinkat(dirfd, name, 0); -ENOENT when there was none. */
int jfs_unlink(int dirfd, const char *name);

#endif
