/* SPDX-License-Identifier: MIT */
/*
 * safedir.h - the directories the daemon keeps files in (journals, spill files, its socket),
 * opened so that nobody else can make it use another one.
 *
 * The daemon runs as root outside systemd, and a configured directory may sit in a directory
 * every user can write (the default spill directory in /var/tmp, a socket under /tmp). A user who
 * creates the name first, as a symlink to somewhere else or as a directory of their own, or who
 * can rename a directory on the way, would have the daemon put files, delete files or bind its
 * socket where that user chose. So the path is walked one component at a time from "/", never
 * following a symlink nobody trusted made: a directory is trusted when it belongs to root or to
 * the daemon's uid and nobody else may write it (group or others), or it is sticky (/tmp), where
 * only the owner of an entry may rename or remove it, so its next component must belong to root
 * or the daemon too. A symlink is followed only when root or the daemon's uid owns it (/var/run ->
 * /run). The directory itself must belong to the daemon's uid when it is one the daemon fills
 * (SAFEDIR_OWN), and is created 0700 when missing (SAFEDIR_CREATE).
 *
 * Once a directory is opened this way, every name in it is the daemon's alone: callers then
 * work with *at() calls on the fd, and may use the path too (nobody can change where it leads).
 */
#ifndef HP_SAFEDIR_H
#define HP_SAFEDIR_H

#include <stddef.h>

enum {
	SAFEDIR_CREATE = 1 << 0, /* mkdir 0700 when missing */
	SAFEDIR_OWN = 1 << 1, /* must belong to the daemon's uid */
};

/*
 * Open the directory at path (absolute) as above: an O_DIRECTORY, close-on-exec fd, or a
 * negative errno with why in err ("'/var/tmp' ... lets others replace 'hugepool'").
 */
int safedir_open(const char *path, unsigned flags, char *err, size_t errlen);

#endif
