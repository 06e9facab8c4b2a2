/* SPDX-License-Identifier: MIT */
/* memfd.c - see memfd.h: sized, sealed, mapped memfds. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memfd.h"
#include "util.h"

int sealed_memfd(const char *name, unsigned extra_flags, uint64_t size, int prot, void **ret_map)
{
	_cleanup_close_ int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | extra_flags);
	void *map;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return -errno;
	map = mmap(NULL, size, prot, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	*ret_map = map;
	return TAKE_FD(fd);
}
