/* SPDX-License-Identifier: MIT */
/*
 * counters.c - see counters.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "counters.h"
#include "memfd.h"

_Static_assert(sizeof(struct proto_counters_page) <= COUNTERS_PAGE_BYTES, "the counters page fits");

/* what sealed_memfd seals: a page nobody can resize under the daemon's mapping */
#define PAGE_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

void counters_init(struct counters *c)
{
	*c = (struct counters){ .fd = -1 };
}

int counters_create(struct counters *c, int *ret_fd)
{
	void *p;
	int fd = sealed_memfd("hugepool-counters", 0, COUNTERS_PAGE_BYTES, PROT_READ, &p);

	if (fd < 0)
		return fd;
	/* the daemon keeps one fd (for the fd store), the client gets the other */
	*ret_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (*ret_fd < 0) {
		int r = -errno;

		munmap(p, COUNTERS_PAGE_BYTES);
		close(fd);
		return r;
	}
	c->page = p;
	c->fd = fd;
	return 0;
}

bool counters_adopt(struct counters *c, int fd)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	void *p;

	if (seals < 0 || (seals & PAGE_SEALS) != PAGE_SEALS || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size != COUNTERS_PAGE_BYTES)
		return false;
	p = mmap(NULL, COUNTERS_PAGE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return false;
	c->page = p;
	c->fd = fd;
	return true;
}

void counters_read(struct counters *c)
{
	const struct proto_counters_page *p = c->page;

	memset(&c->seen, 0, sizeof(c->seen));
	if (!p)
		return;
	c->seen.streams = __atomic_load_n(&p->streams_memory, __ATOMIC_RELAXED);
	if (counters_read_hook)
		counters_read_hook(p);
	c->seen.bytes = __atomic_load_n(&p->bytes_memory, __ATOMIC_RELAXED);
	if (counters_read_hook)
		counters_read_hook(p);
#define READ_HEAPS(kind, type, name, metric)                                  \
	c->seen.heaps.name = __atomic_load_n(&p->name, __ATOMIC_RELAXED); \
	if (counters_read_hook)                                              \
		counters_read_hook(p);
	PROTO_STATUS_HEAPS_FIELDS(READ_HEAPS)
#undef READ_HEAPS
}

void counters_free(struct counters *c, bool close_fd)
{
	if (c->page)
		munmap((void *)(uintptr_t)c->page, COUNTERS_PAGE_BYTES);
	if (close_fd && c->fd >= 0)
		close(c->fd);
	counters_init(c);
}
