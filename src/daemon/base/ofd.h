/* SPDX-License-Identifier: MIT */
/*
 * ofd.h - open file descriptions the daemon hands out and the ones it keeps: a file opened again
 * as a description of its own, and whether anyone but the daemon still holds a file.
 *
 * A client given an fd of a file the daemon keeps (a spill file, a journal segment) gets a
 * description of its own (ofd_reopen), never a copy of the daemon's: then a write lease on the
 * daemon's one description tells whether any other is still open (ofd_others), through an fd,
 * a mapping or a process the fd was passed to, which is how the daemon knows when a client has
 * really let go of a file (fcntl(2), F_SETLEASE: refused with EAGAIN exactly while another
 * description of the file is open; the daemon must own the file and hold only that one).
 */
#ifndef HP_OFD_H
#define HP_OFD_H

/* A new open file description of the file behind fd, with flags (O_CLOEXEC added); -errno. */
int ofd_reopen(int fd, int flags);
/*
 * Is the file behind fd (the daemon's only description of it) open anywhere else? 1: yes, 0: no,
 * < 0: the probe does not work here (leases off: fs.leases-enable = 0; not the file's owner).
 */
int ofd_others(int fd);

#endif
