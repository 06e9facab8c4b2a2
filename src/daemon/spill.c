/* SPDX-License-Identifier: MIT */
/*
 * spill.c - see spill.h: the spill directory, the files handed to clients, and their limits.
 *
 * Accounting: sp->bytes/files are the machine's totals, struct spill_uid the totals of one uid
 * (shared by all its connections, freed with its last owner that had a file), each owner's
 * files carry their own charge. Every path that changes a charge goes through charge_add /
 * charge_sub so the three levels never disagree. Event loop thread only.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "size.h"
#include "spill.h"
#include "util.h"

#define AUDIT_INTERVAL_NS 1000000000ull
#define SPILL_PAGE_BYTES 4096u
#define LEFTOVER_PREFIX "spill-"

_Static_assert(sizeof(struct proto_spill_page) <= SPILL_PAGE_BYTES, "spill page fits");

struct spill_uid {
	uid_t uid;
	uint64_t bytes;
	uint32_t files;
	unsigned owners; /* owners pointing here */
	struct spill_uid *next;
};

struct spill {
	int dirfd;
	char dir[256];
	bool tmpfile; /* O_TMPFILE works in dir; else create and unlink */
	uint64_t threshold, max_bytes, max_bytes_per_uid;
	uint32_t max_files, max_files_per_uid;
	uint64_t bytes, files;
	uint64_t next_id, next_name;
	uint64_t files_created, bytes_charged_total, refusals, truncated;
	uint64_t next_audit;
	struct spill_uid *uids;
	TAILQ_HEAD(, spill_owner) owners; /* owners with a page or files */
};

/* Create an empty unnamed read-write file in the spill directory. */
static int file_create(struct spill *sp)
{
	char name[64];
	int fd;

	if (sp->tmpfile) {
		/* O_EXCL: the file can never be linked into the file system (open(2), O_TMPFILE) */
		fd = openat(sp->dirfd, ".", O_TMPFILE | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
		return fd < 0 ? -errno : fd;
	}
	snprintf(name, sizeof(name), LEFTOVER_PREFIX "%d-%" PRIu64, (int)getpid(), ++sp->next_name);
	fd = openat(sp->dirfd, name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (unlinkat(sp->dirfd, name, 0) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

/* Remove the names the unlinked-file fallback may have left when a daemon died between the two steps. */
static void remove_leftovers(struct spill *sp)
{
	int fd = openat(sp->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	unsigned n = 0;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, LEFTOVER_PREFIX, strlen(LEFTOVER_PREFIX)) &&
		    unlinkat(sp->dirfd, de->d_name, 0) == 0)
			n++;
	closedir(d);
	if (n)
		log_notice("Removed %u spill files left in '%s' by an earlier run", n, sp->dir);
}

int spill_open(const struct config *cfg, struct spill **ret, char *err, size_t errlen)
{
	struct spill *sp = calloc(1, sizeof(*sp));
	struct stat st;
	int fd, r;

	if (!sp)
		return -ENOMEM;
	sp->dirfd = -1;
	snprintf(sp->dir, sizeof(sp->dir), "%s", cfg->spill_directory);
	sp->threshold = cfg->spill_threshold;
	sp->max_bytes = cfg->spill_max_bytes;
	sp->max_bytes_per_uid = cfg->spill_max_bytes_per_uid;
	sp->max_files = cfg->spill_max_files;
	sp->max_files_per_uid = cfg->spill_max_files_per_uid;
	TAILQ_INIT(&sp->owners);
	if (mkdir(sp->dir, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		snprintf(err, errlen, "cannot create spill_directory '%s': %s", sp->dir, strerror(-r));
		goto fail;
	}
	sp->dirfd = open(sp->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sp->dirfd < 0 || fstat(sp->dirfd, &st) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot open spill_directory '%s': %s", sp->dir, strerror(-r));
		goto fail;
	}
	if (st.st_uid != geteuid()) {
		r = -EPERM;
		snprintf(err, errlen, "spill_directory '%s' belongs to uid %u, not to the daemon (uid %u)", sp->dir,
			 (unsigned)st.st_uid, (unsigned)geteuid());
		goto fail;
	}
	if (st.st_mode & 0077)
		log_notice("spill_directory '%s' has mode %04o; the files in it have no names, but 0700 is advised",
			   sp->dir, (unsigned)(st.st_mode & 07777));
	remove_leftovers(sp);
	sp->tmpfile = true;
	fd = file_create(sp);
	if (fd == -EOPNOTSUPP || fd == -EISDIR || fd == -EINVAL) {
		sp->tmpfile = false;
		log_notice("spill_directory '%s' has no O_TMPFILE support (%s): spill files are created and "
			   "unlinked at once",
			   sp->dir, strerror(-fd));
		fd = file_create(sp);
	}
	if (fd < 0) {
		r = fd;
		snprintf(err, errlen, "cannot create a file in spill_directory '%s': %s", sp->dir, strerror(-r));
		goto fail;
	}
	close(fd);
	*ret = sp;
	return 0;
fail:
	spill_free(sp);
	return r;
}

void spill_free(struct spill *sp)
{
	if (!sp)
		return;
	if (sp->dirfd >= 0)
		close(sp->dirfd);
	/* owners are released by their connections first; uids go with their last owner */
	free(sp);
}

void spill_owner_init(struct spill *sp, struct spill_owner *o, uid_t uid, pid_t pid)
{
	(void)sp;
	memset(o, 0, sizeof(*o));
	o->uid = uid;
	o->pid = pid;
}

static void owner_link(struct spill *sp, struct spill_owner *o)
{
	if (!o->linked) {
		TAILQ_INSERT_TAIL(&sp->owners, o, link);
		o->linked = 1;
	}
}

static struct spill_uid *uid_get(struct spill *sp, uid_t uid)
{
	struct spill_uid *u;

	for (u = sp->uids; u; u = u->next)
		if (u->uid == uid)
			break;
	if (!u) {
		u = calloc(1, sizeof(*u));
		if (!u)
			return NULL;
		u->uid = uid;
		u->next = sp->uids;
		sp->uids = u;
	}
	u->owners++;
	return u;
}

static void uid_put(struct spill *sp, struct spill_uid *u)
{
	struct spill_uid **pp;

	if (--u->owners)
		return;
	for (pp = &sp->uids; *pp != u; pp = &(*pp)->next)
		;
	*pp = u->next;
	free(u);
}

static void charge_add(struct spill *sp, struct spill_owner *o, struct spill_file *f, uint64_t n)
{
	f->charged += n;
	o->bytes += n;
	o->acct->bytes += n;
	sp->bytes += n;
	sp->bytes_charged_total += n;
}

static void charge_sub(struct spill *sp, struct spill_owner *o, struct spill_file *f, uint64_t n)
{
	f->charged -= n;
	o->bytes -= n;
	o->acct->bytes -= n;
	sp->bytes -= n;
}

/* Close file i of o: truncated first so its blocks are free even if the client keeps an fd. */
static void file_drop(struct spill *sp, struct spill_owner *o, unsigned i)
{
	struct spill_file *f = &o->files[i];

	if (ftruncate(f->fd, 0) < 0)
		log_warning("Failed to truncate a spill file of pid %d: %m", (int)o->pid);
	close(f->fd);
	charge_sub(sp, o, f, f->charged);
	o->acct->files--;
	sp->files--;
	o->files[i] = o->files[--o->nfiles];
}

void spill_owner_release(struct spill *sp, struct spill_owner *o)
{
	uint64_t bytes = o->bytes;
	unsigned n = o->nfiles;

	while (o->nfiles)
		file_drop(sp, o, o->nfiles - 1);
	if (n)
		log_info("Spill: closed the %u files (%" PRIu64 " bytes) of pid %d (uid %u)", n, bytes, (int)o->pid,
			 (unsigned)o->uid);
	free(o->files);
	o->files = NULL;
	o->cap = 0;
	if (o->acct)
		uid_put(sp, o->acct);
	o->acct = NULL;
	if (o->page)
		munmap((void *)(uintptr_t)o->page, SPILL_PAGE_BYTES);
	o->page = NULL;
	if (o->linked)
		TAILQ_REMOVE(&sp->owners, o, link);
	o->linked = 0;
}

int spill_attach(struct spill *sp, struct spill_owner *o, int *ret_fd, uint64_t *ret_threshold)
{
	_cleanup_close_ int fd = -1;
	void *p;

	if (o->page)
		return -EEXIST;
	fd = memfd_create("hugepool-spill-page", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, SPILL_PAGE_BYTES) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return -errno;
	p = mmap(NULL, SPILL_PAGE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	o->page = p;
	owner_link(sp, o);
	*ret_fd = TAKE_FD(fd);
	*ret_threshold = sp->threshold;
	return 0;
}

/* May the owner's uid take `more` bytes? If not, text names the limit. */
static int bytes_allowed(struct spill *sp, const struct spill_owner *o, uint64_t more, char *text, size_t textlen)
{
	char a[32], b[32], c[32];

	if (sp->max_bytes && (more > sp->max_bytes || sp->bytes > sp->max_bytes - more)) {
		snprintf(text, textlen,
			 "spill_max_bytes (%s) would be exceeded: the machine's spill files hold %s, %s more asked",
			 size_format(sp->max_bytes, a, sizeof(a)), size_format(sp->bytes, b, sizeof(b)),
			 size_format(more, c, sizeof(c)));
		sp->refusals++;
		return -EDQUOT;
	}
	if (sp->max_bytes_per_uid && (more > sp->max_bytes_per_uid || o->acct->bytes > sp->max_bytes_per_uid - more)) {
		snprintf(text, textlen,
			 "spill_max_bytes_per_uid (%s) would be exceeded: uid %u's spill files hold %s, %s more asked",
			 size_format(sp->max_bytes_per_uid, a, sizeof(a)), (unsigned)o->uid,
			 size_format(o->acct->bytes, b, sizeof(b)), size_format(more, c, sizeof(c)));
		sp->refusals++;
		return -EDQUOT;
	}
	return 0;
}

int spill_create(struct spill *sp, struct spill_owner *o, uint64_t charge, uint64_t *ret_id, int *ret_fd,
		 char *text, size_t textlen)
{
	struct spill_file *f;
	int fd, cfd, r;

	if (!o->acct && !(o->acct = uid_get(sp, o->uid)))
		return -ENOMEM;
	if (sp->max_files && sp->files >= sp->max_files) {
		snprintf(text, textlen, "spill_max_files reached: the machine has %" PRIu64 " of %u spill files open",
			 sp->files, sp->max_files);
		sp->refusals++;
		return -EDQUOT;
	}
	if (sp->max_files_per_uid && o->acct->files >= sp->max_files_per_uid) {
		snprintf(text, textlen, "spill_max_files_per_uid reached: uid %u has %u of %u spill files open",
			 (unsigned)o->uid, o->acct->files, sp->max_files_per_uid);
		sp->refusals++;
		return -EDQUOT;
	}
	if ((r = bytes_allowed(sp, o, charge, text, textlen)) < 0)
		return r;
	if (o->nfiles == o->cap) {
		unsigned cap = o->cap ? o->cap * 2 : 8;
		void *n = realloc(o->files, cap * sizeof(*o->files));

		if (!n)
			return -ENOMEM;
		o->files = n;
		o->cap = cap;
	}
	fd = file_create(sp);
	if (fd < 0) {
		snprintf(text, textlen, "cannot create a spill file in '%s': %s", sp->dir, strerror(-fd));
		return fd;
	}
	cfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (cfd < 0) {
		r = -errno;
		close(fd);
		snprintf(text, textlen, "cannot create a spill file: %s", strerror(-r));
		return r;
	}
	f = &o->files[o->nfiles++];
	*f = (struct spill_file){ .id = ++sp->next_id, .fd = fd, .charged = 0 };
	o->acct->files++;
	sp->files++;
	sp->files_created++;
	charge_add(sp, o, f, charge);
	owner_link(sp, o);
	*ret_id = f->id;
	*ret_fd = cfd;
	return 0;
}

static struct spill_file *file_find(struct spill_owner *o, uint64_t id, unsigned *ret_index)
{
	for (unsigned i = 0; i < o->nfiles; i++)
		if (o->files[i].id == id) {
			if (ret_index)
				*ret_index = i;
			return &o->files[i];
		}
	return NULL;
}

/* Truncate f to its charge if the client wrote past it; true if it had. */
static bool file_audit(struct spill *sp, struct spill_owner *o, struct spill_file *f)
{
	struct stat st;

	if (fstat(f->fd, &st) < 0 || (uint64_t)st.st_size <= f->charged)
		return false;
	log_warning("Spill: pid %d (uid %u) wrote %" PRIu64 " bytes to a file charged %" PRIu64
		    "; truncated to its charge",
		    (int)o->pid, (unsigned)o->uid, (uint64_t)st.st_size, f->charged);
	if (ftruncate(f->fd, (off_t)f->charged) < 0)
		log_warning("Spill: failed to truncate the file: %m");
	sp->truncated++;
	return true;
}

int spill_charge(struct spill *sp, struct spill_owner *o, uint64_t id, uint64_t total, char *text,
		 size_t textlen)
{
	struct spill_file *f = file_find(o, id, NULL);
	uint64_t more;
	int r;

	if (!f) {
		snprintf(text, textlen, "no spill file %" PRIu64 " on this connection", id);
		return -ENOENT;
	}
	if (total <= f->charged) {
		if (ftruncate(f->fd, (off_t)total) < 0)
			log_warning("Spill: failed to truncate a file of pid %d: %m", (int)o->pid);
		charge_sub(sp, o, f, f->charged - total);
		return 0;
	}
	file_audit(sp, o, f);
	more = total - f->charged;
	if ((r = bytes_allowed(sp, o, more, text, textlen)) < 0)
		return r;
	charge_add(sp, o, f, more);
	return 0;
}

bool spill_owns(struct spill_owner *o, uint64_t id)
{
	return file_find(o, id, NULL) != NULL;
}

int spill_close_file(struct spill *sp, struct spill_owner *o, uint64_t id)
{
	unsigned i;

	if (!file_find(o, id, &i))
		return -ENOENT;
	file_drop(sp, o, i);
	return 0;
}

uint64_t spill_audit(struct spill *sp, uint64_t now, bool force)
{
	struct spill_owner *o;

	if (!sp->files)
		return UINT64_MAX;
	if (!force && now < sp->next_audit)
		return sp->next_audit;
	TAILQ_FOREACH(o, &sp->owners, link)
		for (unsigned i = 0; i < o->nfiles; i++)
			file_audit(sp, o, &o->files[i]);
	sp->next_audit = now + AUDIT_INTERVAL_NS;
	return sp->next_audit;
}

static void page_read(const struct spill_owner *o, uint64_t *streams, uint64_t *bytes)
{
	/* the client's words: informative, never trusted for a decision */
	*streams = o->page ? __atomic_load_n(&o->page->streams_memory, __ATOMIC_RELAXED) : 0;
	*bytes = o->page ? __atomic_load_n(&o->page->bytes_memory, __ATOMIC_RELAXED) : 0;
}

void spill_get_status(struct spill *sp, struct proto_status_spill *st)
{
	struct spill_owner *o;

	memset(st, 0, sizeof(*st));
	proto_set_name(st->directory, sizeof(st->directory), sp->dir);
	proto_set_name(st->method, sizeof(st->method), sp->tmpfile ? "O_TMPFILE" : "unlinked");
	st->threshold = sp->threshold;
	st->max_bytes = sp->max_bytes;
	st->max_bytes_per_uid = sp->max_bytes_per_uid;
	st->max_files = sp->max_files;
	st->max_files_per_uid = sp->max_files_per_uid;
	st->bytes = sp->bytes;
	st->files = sp->files;
	TAILQ_FOREACH(o, &sp->owners, link) {
		uint64_t s, b;

		page_read(o, &s, &b);
		st->streams_memory += s;
		st->bytes_memory += b;
	}
	st->files_created = sp->files_created;
	st->bytes_charged_total = sp->bytes_charged_total;
	st->refusals = sp->refusals;
	st->truncated = sp->truncated;
}

void spill_owner_status(const struct spill_owner *o, uint32_t *files, uint64_t *bytes,
			uint64_t *streams_memory, uint64_t *bytes_memory)
{
	*files = o->nfiles;
	*bytes = o->bytes;
	page_read(o, streams_memory, bytes_memory);
}
