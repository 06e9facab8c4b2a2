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
 *
 * Backing, class by class in the configuration's order: a class takes the first page size it may
 * (pages_candidates) of which enough pages are free for its buffers not adopted on such pages,
 * and those pages are no longer free for the classes after it. Too few of any: regular shared
 * memory with prefer (logged, and in status), no start with require. 1 GiB and 2 MiB pages are
 * separate pools of the kernel, so small classes on 2 MiB pages and large ones on 1 GiB pages
 * fall back each on its own.
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
#include "pages.h"
#include "pool.h"
#include "size.h"
#include "util.h"

#define SMALL_PAGE PAGES_4K

static unsigned memfd_flags(const struct pool_class *pc)
{
	return pc->hugetlb ? MFD_HUGETLB | (pc->page_size == PAGES_1G ? MFD_HUGE_1GB : MFD_HUGE_2MB) : 0;
}

/* Create, size, seal and map one buffer. */
static int buffer_create(struct pool *p, struct pool_buffer *b)
{
	const struct pool_class *pc = &p->classes[b->class_index];
	char name[64];
	void *addr;
	int fd;

	snprintf(name, sizeof(name), "hugepool:%s:%" PRIu32, pc->name, b->index - pc->first);
	/* for hugetlb, mmap reserves the pages: a shortage fails here with ENOMEM, not later */
	fd = sealed_memfd(name, memfd_flags(pc), b->size, PROT_READ | PROT_WRITE, &addr);
	if (fd < 0)
		return fd;
	if (!pc->hugetlb)
		(void)madvise(addr, b->size, MADV_HUGEPAGE); /* best effort: needs shmem_enabled */
	b->addr = addr;
	b->fd = fd;
	b->fd_id = warm_new_id();
	b->unverified = false; /* made here */
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

/*
 * Create the buffers of class c that were not adopted; on failure destroy those made here and
 * say which failed in *ret_failed. A retired class's buffer not adopted after all stays empty:
 * it goes at once.
 */
static int class_create(struct pool *p, unsigned c, uint32_t *ret_failed)
{
	const struct pool_class *pc = &p->classes[c];

	if (pc->retired)
		return 0;
	for (uint32_t i = pc->first; i < pc->first + pc->count; i++) {
		int r = p->buffers[i].adopted ? 0 : buffer_create(p, &p->buffers[i]);

		if (r < 0) {
			*ret_failed = i;
			for (uint32_t j = pc->first; j < i; j++)
				if (!p->buffers[j].adopted)
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

/* Class pc on pages of page (SMALL_PAGE: regular shared memory); why, if any, is a fallback's. */
static void use_pages(struct pool_class *pc, uint64_t page, const char *why)
{
	pc->hugetlb = page != SMALL_PAGE;
	pc->page_size = page;
	if (why) {
		pc->fallback = true;
		snprintf(pc->fallback_reason, sizeof(pc->fallback_reason), "%s", why);
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
	/* its buffers all had the class's pages in the life that had the class */
	if (pc && pc->page_size != wb->page_size)
		return NULL;
	if (!pc) {
		if (p->nclasses >= CONFIG_CLASSES_MAX)
			return NULL;
		cls = realloc(p->classes, (p->nclasses + 1) * sizeof(*cls));
		if (!cls)
			return NULL;
		p->classes = cls;
		pc = &p->classes[p->nclasses++];
		*pc = (struct pool_class){ .size = wb->size, .first = p->nbuffers, .retired = true,
					   .want_page = wb->page_size };
		use_pages(pc, wb->page_size, NULL);
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
		int fd;

		if (wb->state == WARM_BUF_UNKNOWN)
			continue;
		warm_name(WARM_NAME_BUF, wb->fd_id, name);
		fd = fdstore_take(a->fds, a->nfds, name);
		if (fd < 0 && !a->snapshot)
			continue;
		for (unsigned c = 0; c < p->nclasses && !b; c++)
			if (!p->classes[c].retired && strcmp(p->classes[c].name, wb->class_name) == 0 &&
			    wb->index < p->classes[c].count && p->classes[c].size == wb->size)
				b = &p->buffers[p->classes[c].first + wb->index];
		if (fd < 0) { /* a snapshot's buffer being renewed: its memfd comes later */
			if (b && !b->adopted) {
				b->fd_id = wb->fd_id;
				b->adopted = true;
				b->prev_record = r;
				b->boot_state = WARM_BUF_BROKEN;
				b->boot_uid = wb->uid;
			}
			continue;
		}
		if (b && (b->fd >= 0 || b->adopted)) {
			drop_fd(a, fd, wb->fd_id);
			continue;
		}
		/* held, in a class that is gone or resized: kept until its holder lets go */
		if (!b && (wb->state != WARM_BUF_LEASED || !(b = retired_buffer(p, wb)))) {
			drop_fd(a, fd, wb->fd_id);
			continue;
		}
		/* what the file is, is looked at before it is first handed out (pool_buffer_usable) */
		b->fd = fd;
		b->fd_id = wb->fd_id;
		b->adopted = true;
		b->unverified = true;
		b->prev_record = r;
		b->boot_state = wb->state;
		b->boot_uid = wb->uid;
	}
	/* every other buffer fd: its pages may be wanted by the buffers made now; not a
	 * snapshot's, which the running life holds anyway: a record may name it once it stopped */
	for (unsigned i = 0; i < a->nfds && !a->snapshot; i++) {
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

/* Keep what adopt_find found if it has the pages decided for its class; drop what does not. */
static void adopt_keep(struct pool *p, struct pool_adopt *a)
{
	for (uint32_t i = 0; i < p->nbuffers; i++) {
		struct pool_buffer *b = &p->buffers[i];

		if (!b->adopted)
			continue;
		if (adopted_page(a, b) != p->classes[b->class_index].page_size) {
			if (b->fd >= 0) /* not a snapshot's buffer still to come: the running life's */
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

/* Bytes of class c's buffers adopted on pages of page: they hold those pages already. */
static uint64_t adopted_on(const struct pool *p, const struct pool_adopt *a, unsigned c, uint64_t page)
{
	const struct pool_class *pc = &p->classes[c];
	uint64_t bytes = 0;

	for (uint32_t i = pc->first; a && i < pc->first + pc->count; i++)
		if (p->buffers[i].adopted && adopted_page(a, &p->buffers[i]) == page)
			bytes += p->buffers[i].size;
	return bytes;
}

/*
 * Decide the backing of configured class c: the first page size it may take (pages.h) of which
 * avail (free pages of 2M, 1G: what the classes before it left) has enough for its buffers not
 * adopted on such pages; those are taken from avail. A page size its adopted buffers have goes
 * first: a warm restart keeps a class where it was. None fits: regular shared memory (prefer),
 * or no start (require). A fallback is logged here, once.
 */
static int class_backing(struct pool *p, const struct config *cfg, unsigned c, const struct pool_adopt *a,
			 uint64_t avail[PAGES_HUGE_SIZES])
{
	struct pool_class *pc = &p->classes[c];
	uint64_t cand[PAGES_HUGE_SIZES], need = 0;
	unsigned n = pages_candidates(&cfg->classes[c], cand);
	char why[128] = "", b1[32], b2[32];
	size_t len = 0;

	if (cfg->hugepages == HUGEPAGES_OFF) {
		use_pages(pc, SMALL_PAGE, NULL);
		return 0;
	}
	if (n > 1 && adopted_on(p, a, c, cand[1]) > adopted_on(p, a, c, cand[0])) {
		uint64_t t = cand[0];

		cand[0] = cand[1];
		cand[1] = t;
	}
	pc->want_page = cand[0];
	for (unsigned k = 0; k < n; k++) {
		uint64_t *free_pages = &avail[cand[k] == PAGES_1G];

		need = (pc->size * pc->count - adopted_on(p, a, c, cand[k])) / cand[k];
		if (*free_pages >= need) {
			*free_pages -= need;
			use_pages(pc, cand[k], k ? why : NULL);
			if (k)
				log_warning("Not enough hugepages for class \"%s\": %s; it takes %s pages instead "
					    "(page_size = auto)",
					    pc->name, why, size_format(cand[k], b1, sizeof(b1)));
			return 0;
		}
		if (len < sizeof(why))
			len += (size_t)snprintf(why + len, sizeof(why) - len, "%s%" PRIu64 " hugepages of %s needed, %" PRIu64
						" free", k ? "; " : "", need, size_format(cand[k], b1, sizeof(b1)),
						*free_pages);
	}
	if (cfg->hugepages == HUGEPAGES_REQUIRE)
		return log_error_errno(-ENOMEM,
				       "Not enough hugepages for class \"%s\" (hugepages = require): %s. Reserve more "
				       "with 'echo %" PRIu64 " > /sys/kernel/mm/hugepages/hugepages-%" PRIu64
				       "kB/nr_hugepages' (plus what other programs use) or hugeadm --pool-pages-min, "
				       "or set hugepages = prefer",
				       pc->name, why, need, cand[n - 1] / 1024);
	log_warning("Not enough hugepages for class \"%s\" (%s of buffers): %s; falling back to regular shared "
		    "memory with MADV_HUGEPAGE (hugepages = prefer)",
		    pc->name, size_format(pc->size * pc->count, b2, sizeof(b2)), why);
	use_pages(pc, SMALL_PAGE, why);
	return 0;
}

/* Does class c keep buffers adopted on the pages it has? Those cannot move to other pages. */
static bool class_keeps_adopted(const struct pool *p, unsigned c)
{
	const struct pool_class *pc = &p->classes[c];

	for (uint32_t i = pc->first; i < pc->first + pc->count; i++)
		if (p->buffers[i].adopted)
			return true;
	return false;
}

/*
 * Class c's hugepages could not be had at mmap (buffer `failed`): free pages looked sufficient
 * but were taken meanwhile, or a cgroup limit says no. It falls back to the next page size it
 * may take (auto), else to regular shared memory (prefer); false when it may not (require, or
 * buffers adopted on its pages).
 */
static bool class_fall_back(struct pool *p, const struct config *cfg, unsigned c, uint32_t failed)
{
	struct pool_class *pc = &p->classes[c];
	uint64_t cand[PAGES_HUGE_SIZES];
	unsigned n = pages_candidates(&cfg->classes[c], cand), k = 0;
	char why[128], b1[32], b2[32];

	if (!pc->hugetlb || class_keeps_adopted(p, c))
		return false;
	snprintf(why, sizeof(why), "hugepages of %s could not be reserved at mmap (ENOMEM)",
		 size_format(pc->page_size, b1, sizeof(b1)));
	while (k < n && cand[k] != pc->page_size)
		k++;
	if (k + 1 < n) {
		log_warning("Could not reserve hugepages for buffer %" PRIu32 " of class \"%s\": %s; it takes %s "
			    "pages instead (page_size = auto)",
			    failed - pc->first + 1, pc->name, why, size_format(cand[k + 1], b2, sizeof(b2)));
		use_pages(pc, cand[k + 1], why);
		return true;
	}
	if (cfg->hugepages != HUGEPAGES_PREFER)
		return false;
	log_warning("Could not reserve hugepages for buffer %" PRIu32 " of class \"%s\": %s; falling back to "
		    "regular shared memory (hugepages = prefer)",
		    failed - pc->first + 1, pc->name, why);
	use_pages(pc, SMALL_PAGE, why);
	check_shmem_thp();
	return true;
}

/* The pool's one-word summary of its classes' backings (pool.h). */
static void summarize(struct pool *p)
{
	p->page_size = 0;
	p->hugetlb = p->nclasses > 0;
	for (unsigned c = 0; c < p->nclasses; c++) {
		const struct pool_class *pc = &p->classes[c];

		if (!p->page_size || pc->page_size < p->page_size)
			p->page_size = pc->page_size;
		p->hugetlb &= pc->hugetlb;
		if (pc->fallback && !p->fallback) {
			p->fallback = true;
			snprintf(p->fallback_reason, sizeof(p->fallback_reason), "class %s: %s", pc->name,
				 pc->fallback_reason);
		}
	}
	if (!p->page_size)
		p->page_size = SMALL_PAGE;
}

/* "8.0 MiB on 2.0 MiB hugetlb pages, 8.0 GiB on 1.0 GiB hugetlb pages": the bytes on each backing. */
static void backings_format(const struct pool *p, char *buf, size_t len)
{
	static const uint64_t pages[] = { SMALL_PAGE, PAGES_2M, PAGES_1G };
	size_t at = 0;

	buf[0] = '\0';
	for (size_t k = 0; k < ARRAY_SIZE(pages); k++) {
		uint64_t bytes = 0;
		char b1[32], b2[32];

		for (unsigned c = 0; c < p->nclasses; c++)
			if (p->classes[c].page_size == pages[k])
				bytes += p->classes[c].size * p->classes[c].count;
		if (bytes && at < len)
			at += (size_t)snprintf(buf + at, len - at, "%s%s on %s%s pages", at ? ", " : "",
					       size_format(bytes, b1, sizeof(b1)),
					       pages[k] == SMALL_PAGE ? "regular" : size_format(pages[k], b2, sizeof(b2)),
					       pages[k] == SMALL_PAGE ? "" : " hugetlb");
	}
}

int pool_create(const struct config *cfg, struct pool_adopt *adopt, struct pool **ret)
{
	uint64_t avail[PAGES_HUGE_SIZES] = { pages_available(PAGES_2M), pages_available(PAGES_1G) };
	struct pool *p;
	uint32_t n = 0, failed = 0;
	bool small = false;
	char b1[32], b2[32], backings[160];
	int r = 0;

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
	if (adopt)
		adopt_find(p, adopt);
	/* the configured classes: retired ones (after them) have their adopted buffers' pages */
	for (unsigned c = 0; c < cfg->nclasses && r == 0; c++)
		r = class_backing(p, cfg, c, adopt, avail);
	if (r < 0) {
		pool_free(p);
		return r;
	}
	if (adopt)
		adopt_keep(p, adopt);

	for (unsigned c = 0; c < p->nclasses; c++)
		small |= !p->classes[c].hugetlb;
	if (small)
		check_shmem_thp();
	for (unsigned c = 0; c < p->nclasses && r == 0; c++) {
		r = class_create(p, c, &failed);
		while (r == -ENOMEM && c < cfg->nclasses && class_fall_back(p, cfg, c, failed))
			r = class_create(p, c, &failed);
		if (r < 0)
			log_error_errno(r, "Failed to create buffer %" PRIu32 " of %" PRIu32 " (class \"%s\", %s, %s %s pages): %m",
					failed + 1, p->nbuffers, p->classes[c].name,
					size_format(p->buffers[failed].size, b1, sizeof(b1)),
					size_format(p->classes[c].page_size, b2, sizeof(b2)),
					p->classes[c].hugetlb ? "hugetlb" : "regular");
	}
	if (r < 0) {
		pool_free(p);
		return r;
	}
	summarize(p);
	if (adopt)
		for (uint32_t i = 0; i < p->nbuffers; i++)
			adopt->created += !p->buffers[i].adopted && p->buffers[i].fd >= 0;
	backings_format(p, backings, sizeof(backings));
	log_info("Created %" PRIu32 " buffers in %u classes, %s: %s", p->nbuffers, p->nclasses,
		 size_format(p->bytes, b1, sizeof(b1)), backings);
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

void pool_buffer_replace(struct pool_buffer *b, int fd, uint64_t fd_id, int *ret_old)
{
	*ret_old = b->fd;
	b->fd = fd;
	b->fd_id = fd_id;
	b->unverified = true;
}

bool pool_buffer_usable(const struct pool *p, struct pool_buffer *b)
{
	uint64_t page;
	bool hugetlb, intact;

	if (!b->unverified)
		return pool_buffer_intact(b);
	/* its pages must be its class's, which adoption matched with its record (adopted_page) */
	if (b->fd < 0 || !buffer_adoptable(b->fd, b->size, &page, &hugetlb, &intact) ||
	    hugetlb != p->classes[b->class_index].hugetlb || page != p->classes[b->class_index].page_size)
		return false; /* not what its record said: renewed, a fresh memfd in its place */
	b->unverified = false;
	return intact;
}

/* Is range k of those pool_prefault faults (the buffers made now, in order) of hugetlb pages? */
static bool range_hugetlb(const struct pool *p, size_t k)
{
	for (uint32_t i = 0; i < p->nbuffers; i++)
		if (!p->buffers[i].adopted && p->buffers[i].addr && k-- == 0)
			return p->classes[p->buffers[i].class_index].hugetlb;
	return false;
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
	uint64_t bytes = 0, chunk = 0;

	/* adopted buffers have their pages already */
	for (uint32_t i = 0; i < p->nbuffers; i++)
		if (!p->buffers[i].adopted && p->buffers[i].addr) {
			ranges[n++] = (struct prefault_range){ p->buffers[i].addr, p->buffers[i].size };
			bytes += p->buffers[i].size;
			chunk = MAX(chunk, p->classes[p->buffers[i].class_index].page_size);
		}
	if (n == 0)
		return 0;
	/* a chunk is whole pages of every buffer: of the largest pages faulted */
	r = prefault_run(ranges, n, threads, (size_t)chunk, progress, 250, userdata, &p->boot, &failed);
	if (r == -ECANCELED) {
		log_info("Pre-faulting cancelled");
		return r;
	}
	if (r < 0 && failed >= n)
		return log_error_errno(r, "Failed to start pre-faulting %zu buffers: %m", n);
	if (r < 0)
		return log_error_errno(r, "Failed to fault in buffer %zu of %zu (%s): %m%s", failed + 1, n,
				       size_format(ranges[failed].len, b1, sizeof(b1)),
				       range_hugetlb(p, failed) ? " (a hugetlb cgroup limit or a hugepage shortage?)" : "");
	for (uint32_t i = 0; i < p->nbuffers; i++)
		buffer_unmap(&p->buffers[i]);
	log_info("Pre-faulted %s in %zu buffers with %u threads in %.3f s (%.2f GB/s, %s)",
		 size_format(bytes, b1, sizeof(b1)), n, p->boot.threads, (double)p->boot.ns / 1e9,
		 p->boot.ns ? (double)bytes / (double)p->boot.ns : 0.0,
		 p->boot.used_madvise ? "MADV_POPULATE_WRITE" : "touching pages");
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
