/* SPDX-License-Identifier: MIT */
/*
 * pool.c - see pool.h.
 *
 * Renewal instead of memset: when a buffer passes to another uid its old memfd is unmapped and
 * closed and a new one takes its place. The kernel hands out zeroed pages, which costs what a
 * memset would, and it also protects the next holder from a previous holder that kept its
 * mapping after release (a memset would leave it looking at the new holder's data). If the old
 * pages are still mapped somewhere, hugetlb memory may be short and renewal fails: the buffer
 * is then "broken" (fd -1) and renewal is retried the next time the buffer is wanted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/magic.h>
#include <linux/memfd.h>

#include "log.h"
#include "memfd.h"
#include "pool.h"
#include "size.h"
#include "util.h"

#define SMALL_PAGE 4096u

uint64_t pool_hugepages_available(uint64_t page_size)
{
	char path[128];
	uint64_t v[2] = { 0, 0 };
	const char *files[2] = { "free_hugepages", "resv_hugepages" };

	for (int i = 0; i < 2; i++) {
		FILE *f;

		snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%" PRIu64 "kB/%s",
			 page_size / 1024, files[i]);
		f = fopen(path, "re");
		if (!f)
			return 0;
		if (fscanf(f, "%" SCNu64, &v[i]) != 1)
			v[i] = 0;
		fclose(f);
	}
	/* reserved pages are promised to existing mappings, so they are not ours to take */
	return v[0] > v[1] ? v[0] - v[1] : 0;
}

static unsigned memfd_flags(const struct pool *p)
{
	return p->hugetlb ? MFD_HUGETLB | (p->page_size == (1ull << 30) ? MFD_HUGE_1GB : MFD_HUGE_2MB) : 0;
}

/* Create, size, seal and map one buffer. */
static int buffer_create(struct pool *p, struct pool_buffer *b)
{
	char name[64];
	void *addr;
	int fd;

	snprintf(name, sizeof(name), "hugepool:%s:%" PRIu32, p->classes[b->class_index].name,
		 b->index - p->classes[b->class_index].first);
	/* for hugetlb, mmap reserves the pages: a shortage fails here with ENOMEM, not later */
	fd = sealed_memfd(name, memfd_flags(p), b->size, PROT_READ | PROT_WRITE, &addr);
	if (fd < 0)
		return fd;
	if (!p->hugetlb)
		(void)madvise(addr, b->size, MADV_HUGEPAGE); /* best effort: needs shmem_enabled */
	b->addr = addr;
	b->fd = fd;
	b->fd_id = warm_new_id();
	b->boot_state = WARM_BUF_CLEAN;
	return 0;
}

/*
 * The daemon maps a buffer only to fault it in: its pages belong to the memfd, so afterwards
 * the fd is all it keeps. Unmapping here costs what the exit or a re-execution would otherwise
 * pay (tearing down the page tables of the whole pool) when a restart is waited for.
 */
static void buffer_unmap(struct pool_buffer *b)
{
	if (b->addr)
		munmap(b->addr, b->size);
	b->addr = NULL;
}

static void buffer_destroy(struct pool_buffer *b)
{
	if (b->addr)
		munmap(b->addr, b->size);
	if (b->fd >= 0)
		close(b->fd);
	b->addr = NULL;
	b->fd = -1;
}

static int create_all(struct pool *p, uint32_t *ret_failed)
{
	for (uint32_t i = 0; i < p->nbuffers; i++) {
		/* a retired class's buffer not adopted after all stays empty: it goes at once */
		int r = p->buffers[i].adopted || p->classes[p->buffers[i].class_index].retired
				? 0
				: buffer_create(p, &p->buffers[i]);

		if (r < 0) {
			*ret_failed = i;
			for (uint32_t j = 0; j < i; j++)
				if (!p->buffers[j].adopted && !p->classes[p->buffers[j].class_index].retired)
					buffer_destroy(&p->buffers[j]);
			return r;
		}
	}
	return 0;
}

/* Say so when MADV_HUGEPAGE on shared memory cannot work: regular pages cost 512 faults per 2 MiB. */
static void check_shmem_thp(void)
{
	char buf[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "re");

	if (!f)
		return;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	if (strstr(buf, "[never]") || strstr(buf, "[deny]"))
		log_notice("Regular shared memory will use 4 KiB pages only: transparent hugepages for shmem "
			   "are off (/sys/kernel/mm/transparent_hugepage/shmem_enabled); 'advise' lets "
			   "MADV_HUGEPAGE work");
}

static void use_small_pages(struct pool *p, const char *why)
{
	p->hugetlb = false;
	p->page_size = SMALL_PAGE;
	if (why) {
		p->fallback = true;
		snprintf(p->fallback_reason, sizeof(p->fallback_reason), "%s", why);
	}
}

/* Is fd a buffer this pool can take over: a sealed memfd of size bytes? Its page size in *page. */
static bool buffer_adoptable(int fd, uint64_t size, uint64_t *page, bool *hugetlb, bool *intact)
{
	const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	struct statfs sfs;
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != size ||
	    fcntl(fd, F_GET_SEALS) != seals || fstatfs(fd, &sfs) < 0)
		return false;
	if (sfs.f_type == HUGETLBFS_MAGIC) {
		*hugetlb = true;
		*page = (uint64_t)sfs.f_bsize;
	} else if (sfs.f_type == TMPFS_MAGIC) {
		*hugetlb = false;
		*page = SMALL_PAGE;
	} else {
		return false;
	}
	*intact = (uint64_t)st.st_blocks * 512 >= size;
	return true;
}

/* Close a received fd nobody takes, and have the service manager drop its copy too. */
static void drop_fd(struct pool_adopt *a, int fd, uint64_t fd_id)
{
	char name[WARM_NAME_MAX];

	warm_name(WARM_NAME_BUF, fd_id, name);
	fdstore_remove(name);
	close(fd);
	a->dropped++;
}

/*
 * A buffer of the retired class named as wb's, made if need be (classes are at most
 * CONFIG_CLASSES_MAX in all: past that, NULL and the lease ends). Retired classes come after
 * the configured ones and each buffer is appended to the pool, which grows here, at creation.
 */
static struct pool_buffer *retired_buffer(struct pool *p, const struct warm_buf *wb)
{
	struct pool_buffer *bufs;
	struct pool_class *pc = NULL, *cls;
	unsigned c;

	for (c = 0; c < p->nclasses && !pc; c++)
		if (p->classes[c].retired && strcmp(p->classes[c].name, wb->class_name) == 0 &&
		    p->classes[c].size == wb->size)
			pc = &p->classes[c];
	if (!pc) {
		if (p->nclasses >= CONFIG_CLASSES_MAX)
			return NULL;
		cls = realloc(p->classes, (p->nclasses + 1) * sizeof(*cls));
		if (!cls)
			return NULL;
		p->classes = cls;
		pc = &p->classes[p->nclasses++];
		*pc = (struct pool_class){ .size = wb->size, .first = p->nbuffers, .retired = true };
		snprintf(pc->name, sizeof(pc->name), "%s", wb->class_name);
	}
	/* a retired class's buffers are the last ones, so appending keeps each class contiguous,
	 * provided they arrive class by class: move the later classes' buffers if not */
	bufs = realloc(p->buffers, (p->nbuffers + 1) * sizeof(*bufs));
	if (!bufs)
		return NULL;
	p->buffers = bufs;
	c = (unsigned)(pc - p->classes);
	memmove(&p->buffers[pc->first + pc->count + 1], &p->buffers[pc->first + pc->count],
		(p->nbuffers - pc->first - pc->count) * sizeof(*bufs));
	for (unsigned k = c + 1; k < p->nclasses; k++)
		p->classes[k].first++;
	p->nbuffers++;
	p->buffers[pc->first + pc->count] = (struct pool_buffer){ .fd = -1, .size = wb->size, .class_index = c };
	pc->count++;
	for (uint32_t i = 0; i < p->nbuffers; i++)
		p->buffers[i].index = i;
	p->bytes += wb->size;
	return &p->buffers[pc->first + pc->count - 1];
}

/* Find what the previous life left for each buffer of p; the fds stay in b->fd, unmapped. */
static void adopt_find(struct pool *p, struct pool_adopt *a)
{
	const struct warm_prev *prev = a->prev;

	for (uint32_t r = 0; prev && r < prev->nbuffers; r++) {
		const struct warm_buf *wb = &prev->bufs[r];
		char name[WARM_NAME_MAX];
		struct pool_buffer *b = NULL;
		uint64_t page;
		bool hugetlb, intact;
		int fd;

		if (wb->state == WARM_BUF_UNKNOWN)
			continue;
		warm_name(WARM_NAME_BUF, wb->fd_id, name);
		fd = fdstore_take(a->fds, a->nfds, name);
		if (fd < 0)
			continue;
		for (unsigned c = 0; c < p->nclasses && !b; c++)
			if (!p->classes[c].retired && strcmp(p->classes[c].name, wb->class_name) == 0 &&
			    wb->index < p->classes[c].count && p->classes[c].size == wb->size)
				b = &p->buffers[p->classes[c].first + wb->index];
		/* its pages must be what its record says: a kept fd is never taken for another */
		if ((b && b->fd >= 0) || !buffer_adoptable(fd, wb->size, &page, &hugetlb, &intact) ||
		    page != wb->page_size) {
			drop_fd(a, fd, wb->fd_id);
			continue;
		}
		/* held, in a class that is gone or resized: kept until its holder lets go */
		if (!b && (wb->state != WARM_BUF_LEASED || !(b = retired_buffer(p, wb)))) {
			drop_fd(a, fd, wb->fd_id);
			continue;
		}
		b->fd = fd;
		b->fd_id = wb->fd_id;
		b->adopted = true;
		b->prev_record = r;
		b->boot_state = intact ? wb->state : WARM_BUF_BROKEN;
		b->boot_uid = wb->uid;
	}
	/* every other buffer fd: its pages may be wanted by the buffers made now */
	for (unsigned i = 0; i < a->nfds; i++) {
		uint64_t id;

		if (a->fds[i].fd >= 0 && warm_parse_name(a->fds[i].name, WARM_NAME_BUF, &id)) {
			drop_fd(a, a->fds[i].fd, id);
			a->fds[i].fd = -1;
		}
	}
	if (a->dropped)
		(void)fdstore_barrier(5000);
}

/* The page size of an adopted buffer's pages, as its record says (adopt_find checked the fd). */
static uint64_t adopted_page(const struct pool_adopt *a, const struct pool_buffer *b)
{
	return a->prev->bufs[b->prev_record].page_size;
}

/* Keep what adopt_find found if it fits the backing decided; drop what does not. */
static void adopt_keep(struct pool *p, struct pool_adopt *a)
{
	for (uint32_t i = 0; i < p->nbuffers; i++) {
		struct pool_buffer *b = &p->buffers[i];

		if (!b->adopted)
			continue;
		if (adopted_page(a, b) != p->page_size) {
			drop_fd(a, b->fd, b->fd_id);
			*b = (struct pool_buffer){ .fd = -1, .size = b->size, .class_index = b->class_index,
						   .index = b->index };
			continue;
		}
		a->adopted++;
		a->retired += p->classes[b->class_index].retired;
		a->adopted_bytes += b->size;
	}
}

int pool_create(const struct config *cfg, struct pool_adopt *adopt, struct pool **ret)
{
	struct pool *p;
	uint32_t n = 0, failed = 0;
	uint64_t adopted_huge = 0;
	char b1[32], b2[32];
	int r;

	p = calloc(1, sizeof(*p));
	if (!p)
		return log_oom("the pool");
	p->nclasses = cfg->nclasses;
	p->classes = calloc(cfg->nclasses, sizeof(*p->classes));
	n = (uint32_t)config_buffers(cfg);
	p->buffers = calloc(n ? n : 1, sizeof(*p->buffers));
	if (!p->classes || !p->buffers) {
		pool_free(p);
		return log_oom("the pool's table of buffers");
	}
	p->nbuffers = n;
	n = 0;
	for (unsigned c = 0; c < cfg->nclasses; c++) {
		struct pool_class *pc = &p->classes[c];

		snprintf(pc->name, sizeof(pc->name), "%s", cfg->classes[c].name);
		pc->size = cfg->classes[c].size;
		pc->count = cfg->classes[c].count;
		pc->first = n;
		for (uint32_t i = 0; i < pc->count; i++, n++)
			p->buffers[n] = (struct pool_buffer){ .fd = -1, .size = pc->size, .class_index = c,
							      .index = n };
		p->bytes += pc->size * pc->count;
	}
	if (adopt) {
		adopt_find(p, adopt);
		for (uint32_t i = 0; i < p->nbuffers; i++)
			if (p->buffers[i].adopted && adopted_page(adopt, &p->buffers[i]) == cfg->page_size)
				adopted_huge += p->buffers[i].size;
	}

	if (cfg->hugepages == HUGEPAGES_OFF) {
		use_small_pages(p, NULL);
	} else {
		/* the adopted buffers hold their hugepages already */
		uint64_t need = (p->bytes - adopted_huge) / cfg->page_size;
		uint64_t avail = pool_hugepages_available(cfg->page_size);

		p->hugetlb = true;
		p->page_size = cfg->page_size;
		if (avail < need) {
			char why[128];

			size_format(cfg->page_size, b1, sizeof(b1));
			snprintf(why, sizeof(why), "%" PRIu64 " hugepages of %s needed, %" PRIu64 " free", need,
				 b1, avail);
			if (cfg->hugepages == HUGEPAGES_REQUIRE) {
				pool_free(p);
				return log_error_errno(-ENOMEM,
						       "Not enough hugepages (hugepages = require): %s. Reserve more with "
						       "'echo %" PRIu64 " > /sys/kernel/mm/hugepages/hugepages-%" PRIu64
						       "kB/nr_hugepages' (plus what other programs use) or hugeadm "
						       "--pool-pages-min, or set hugepages = prefer",
						       why, need, cfg->page_size / 1024);
			}
			log_warning("Not enough hugepages: %s; falling back to regular shared memory "
				    "with MADV_HUGEPAGE (hugepages = prefer)", why);
			use_small_pages(p, why);
		}
	}
	if (adopt)
		adopt_keep(p, adopt);

	if (!p->hugetlb)
		check_shmem_thp();
	r = create_all(p, &failed);
	if (r == -ENOMEM && p->hugetlb && cfg->hugepages == HUGEPAGES_PREFER && (!adopt || !adopt->adopted)) {
		/* free pages looked sufficient but were taken meanwhile, or a cgroup limit says no */
		log_warning("Could not reserve hugepages for buffer %" PRIu32 " of %" PRIu32
			    ": %s; falling back to regular shared memory (hugepages = prefer)",
			    failed + 1, p->nbuffers, strerror(-r));
		use_small_pages(p, "hugepage reservation failed at mmap (ENOMEM)");
		check_shmem_thp();
		r = create_all(p, &failed);
	}
	if (r < 0) {
		log_error_errno(r, "Failed to create buffer %" PRIu32 " of %" PRIu32 " (class \"%s\", %s, %s): %m",
				failed + 1, p->nbuffers, p->classes[p->buffers[failed].class_index].name,
				size_format(p->buffers[failed].size, b1, sizeof(b1)),
				p->hugetlb ? "hugetlb" : "shared memory");
		pool_free(p);
		return r;
	}
	if (adopt)
		for (uint32_t i = 0; i < p->nbuffers; i++)
			adopt->created += !p->buffers[i].adopted && p->buffers[i].fd >= 0;
	log_info("Created %" PRIu32 " buffers in %u classes, %s, backed by %s pages of %s", p->nbuffers,
		 p->nclasses, size_format(p->bytes, b1, sizeof(b1)), p->hugetlb ? "hugetlb" : "regular",
		 size_format(p->page_size, b2, sizeof(b2)));
	*ret = p;
	return 0;
}

unsigned pool_store_fds(struct pool *p)
{
	unsigned failed = 0;

	for (uint32_t i = 0; i < p->nbuffers; i++) {
		char name[WARM_NAME_MAX];

		if (p->buffers[i].fd < 0)
			continue;
		warm_name(WARM_NAME_BUF, p->buffers[i].fd_id, name);
		failed += fdstore_add(name, p->buffers[i].fd, 0) < 0;
	}
	return failed;
}

int pool_prefault(struct pool *p, unsigned threads, prefault_progress_fn progress, void *userdata)
{
	_cleanup_free_ struct prefault_range *ranges = calloc(p->nbuffers ? p->nbuffers : 1, sizeof(*ranges));
	size_t failed = 0;
	char b1[32];
	int r;

	if (!ranges)
		return log_oom("the pre-fault's ranges");
	size_t n = 0;
	uint64_t bytes = 0;

	/* adopted buffers have their pages already */
	for (uint32_t i = 0; i < p->nbuffers; i++)
		if (!p->buffers[i].adopted) {
			ranges[n++] = (struct prefault_range){ p->buffers[i].addr, p->buffers[i].size };
			bytes += p->buffers[i].size;
		}
	if (n == 0)
		return 0;
	r = prefault_run(ranges, n, threads, (size_t)p->page_size, progress, 250, userdata,
			 &p->boot, &failed);
	if (r == -ECANCELED) {
		log_info("Pre-faulting cancelled");
		return r;
	}
	if (r < 0 && failed >= n)
		return log_error_errno(r, "Failed to start pre-faulting %zu buffers: %m", n);
	if (r < 0)
		return log_error_errno(r, "Failed to fault in buffer %zu of %zu (%s): %m%s", failed + 1, n,
				       size_format(ranges[failed].len, b1, sizeof(b1)),
				       p->hugetlb ? " (a hugetlb cgroup limit or a hugepage shortage?)" : "");
	for (uint32_t i = 0; i < p->nbuffers; i++)
		buffer_unmap(&p->buffers[i]);
	log_info("Pre-faulted %s in %zu buffers with %u threads in %.3f s (%.2f GB/s, %s, page size %s)",
		 size_format(bytes, b1, sizeof(b1)), n, p->boot.threads, (double)p->boot.ns / 1e9,
		 p->boot.ns ? (double)bytes / (double)p->boot.ns : 0.0,
		 p->boot.used_madvise ? "MADV_POPULATE_WRITE" : "touching pages",
		 p->hugetlb ? (p->page_size == (1ull << 30) ? "1G hugetlb" : "2M hugetlb") : "4K");
	return 0;
}

int pool_buffer_renew(struct pool *p, struct pool_buffer *b)
{
	char name[WARM_NAME_MAX];
	int r;

	/* release the old pages first: with hugetlb the new ones may need exactly those, so the
	 * service manager must have let go of its copy of the old memfd too */
	if (b->fd >= 0) {
		warm_name(WARM_NAME_BUF, b->fd_id, name);
		fdstore_remove(name);
		(void)fdstore_barrier(5000);
	}
	buffer_destroy(b);
	r = buffer_create(p, b);
	if (r < 0)
		return r;
	r = prefault_populate(b->addr, b->size);
	if (r < 0) {
		buffer_destroy(b);
		return r;
	}
	buffer_unmap(b);
	warm_name(WARM_NAME_BUF, b->fd_id, name);
	if ((r = fdstore_add(name, b->fd, 0)) < 0)
		log_warning_errno(r, "Buffer %u will not survive a restart of the daemon: cannot keep its memfd: %m",
				  b->index);
	return 0;
}

bool pool_buffer_intact(const struct pool_buffer *b)
{
	struct stat st;

	if (b->fd < 0)
		return false;
	/* the pool's pages were all faulted at boot or renewal, so a buffer has size / 512 blocks
	 * until someone punches pages out (hugetlbfs and shmem both count them in i_blocks; shmem
	 * counts swapped-out pages too) */
	if (fstat(b->fd, &st) < 0)
		return true; /* cannot tell: assume so */
	return (uint64_t)st.st_blocks * 512 >= b->size;
}

void pool_free(struct pool *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; p->buffers && i < p->nbuffers; i++)
		buffer_destroy(&p->buffers[i]);
	free(p->buffers);
	free(p->classes);
	free(p);
}
