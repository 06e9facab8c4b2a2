/* SPDX-License-Identifier: MIT */
/*
 * spill.c - see spill.h: the spill directory, the files handed to clients, and their limits.
 *
 * Accounting: sp->bytes/files are the machine's totals, struct spill_uid the totals of one uid
 * (shared by all its connections and lingering files, freed with the last of them), each
 * owner's files carry their own charge. Every path that changes a charge goes through
 * spill_charge_add / spill_charge_sub so the three levels never disagree. Event loop thread only.
 *
 * What a file may occupy. The client holds a read-write fd, so the daemon cannot stop it from
 * writing; it makes the charge hold against what the file really occupies instead:
 * - The audit (once a second, and before every raise) compares both the size and the
 *   allocated blocks with the charge, so fallocate(FALLOC_FL_KEEP_SIZE), which allocates
 *   without growing the size, is caught like a write past the end. A file over its charge is
 *   cut: truncated to what it may hold and every block past that freed (file_cut).
 * - The daemon's own fd of a file is an open file description of its own (reopened through
 *   /proc/self/fd), never the one the client holds. When a stream or its connection closes,
 *   the file is cut to nothing, then probed with a write lease (fcntl F_SETLEASE F_WRLCK, which
 *   the kernel grants only while no other open file description of the file exists: no fd,
 *   passed on or inherited, no mapping). A file someone still holds -- the client kept its
 *   fd, or passed it to a child -- lingers: it still counts as a file of its uid (so
 *   spill_max_files_per_uid bounds how many), is charged nothing, and the audit cuts whatever
 *   is written to it until the probe finds the last holder gone.
 * Between two audits a hostile client can hold at most what it writes in a second past its
 * charge; docs/ARCHITECTURE.md ("Security: the threat model") says why this was chosen over a
 * private size-limited mount or writes through the daemon.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "memfd.h"
#include "size.h"
#include "ofd.h"
#include "safedir.h"
#include "spill_internal.h"
#include "util.h"

#define AUDIT_INTERVAL_NS 1000000000ull
/* blocks a file may hold past its charge (rounded up to st_blksize): file-system metadata */
#define USAGE_SLACK (64u * 1024)
#define LEFTOVER_PREFIX "spill-"

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

/*
 * The disk a file of `charged` bytes may take: its size rounded up to whole blocks, plus some
 * for file-system metadata (extent blocks of a large file). A file charged nothing has no data
 * and so no extents: nothing (a lingering file, or one whose client never asked for bytes).
 */
static uint64_t usage_allowed(const struct stat *st, uint64_t charged)
{
	uint64_t blksize = st->st_blksize > 4096 ? (uint64_t)st->st_blksize : 4096;

	if (!charged)
		return 0;
	return (charged + blksize - 1) / blksize * blksize + USAGE_SLACK + charged / 256;
}

/*
 * Make the file hold at most `keep` bytes: truncate it, which on ext4, XFS and tmpfs also frees
 * blocks allocated past the end, and where blocks past keep remain (a file system whose
 * truncate keeps them), punch them. A cut to nothing is not checked: the file is either gone
 * at once (no other holder) or lingers, and then the audit looks at it.
 */
static int file_cut(int fd, uint64_t keep)
{
	struct stat st;

	if (ftruncate(fd, (off_t)keep) < 0)
		return -errno;
	if (keep && fstat(fd, &st) == 0 && (uint64_t)st.st_blocks * 512 > usage_allowed(&st, keep))
		/* the longest range the file system takes (EFBIG past its largest file) */
		for (uint64_t len = (uint64_t)INT64_MAX - keep; len >= 4096; len /= 2)
			if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)keep, (off_t)len) == 0 ||
			    errno != EFBIG)
				break;
	return 0;
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
	while ((de = readdir(d))) {
		struct stat st;

		/* only what the daemon itself made: a regular file of its own uid */
		if (!strncmp(de->d_name, LEFTOVER_PREFIX, strlen(LEFTOVER_PREFIX)) &&
		    fstatat(sp->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
		    st.st_uid == geteuid() && unlinkat(sp->dirfd, de->d_name, 0) == 0)
			n++;
	}
	closedir(d);
	if (n)
		log_notice("Removed %u spill files left in '%s' by an earlier run", n, sp->dir);
}

int spill_open(const struct config *cfg, bool beside, struct spill **ret)
{
	struct spill *sp = calloc(1, sizeof(*sp));
	char why[PATH_MAX + 160];
	struct stat st;
	int fd, r;

	if (!sp)
		return log_oom("spill streams");
	sp->dirfd = -1;
	snprintf(sp->dir, sizeof(sp->dir), "%s", cfg->spill_directory);
	sp->threshold = cfg->spill_threshold;
	sp->max_bytes = cfg->spill_max_bytes;
	sp->max_bytes_per_uid = cfg->spill_max_bytes_per_uid;
	sp->max_files = cfg->spill_max_files;
	sp->max_files_per_uid = cfg->spill_max_files_per_uid;
	TAILQ_INIT(&sp->owners);
	/* the default sits in /var/tmp: never where another user's symlink or directory leads */
	sp->dirfd = safedir_open(sp->dir, SAFEDIR_CREATE | SAFEDIR_OWN, why, sizeof(why));
	if (sp->dirfd < 0 || fstat(sp->dirfd, &st) < 0) {
		r = sp->dirfd < 0 ? sp->dirfd : -errno;
		r = log_error_errno(r, "Spill streams unavailable: cannot use spill_directory '%s': %s", sp->dir,
				    sp->dirfd < 0 ? why : strerror(-r));
		goto fail;
	}
	if (st.st_mode & 0077)
		log_notice("spill_directory '%s' has mode %04o; the files in it have no names, but 0700 is advised",
			   sp->dir, (unsigned)(st.st_mode & 07777));
	if (!beside)
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
		r = log_error_errno(fd, "Spill streams unavailable: cannot create a file in spill_directory '%s': %m",
				    sp->dir);
		goto fail;
	}
	r = ofd_reopen(fd, O_RDWR);
	close(fd);
	if (r < 0) {
		log_error_errno(r, "Spill streams unavailable: cannot reopen a spill file through /proc/self/fd "
				   "(is /proc mounted?): %m");
		goto fail;
	}
	fd = r;
	r = ofd_others(fd);
	close(fd);
	sp->leases = r == 0;
	if (!sp->leases)
		log_warning("spill_directory '%s' does not support leases (%s; is fs.leases-enable 0?): a spill "
			    "file is forgotten when its stream closes, so what a client writes to it afterwards is "
			    "not charged",
			    sp->dir, strerror(r < 0 ? -r : EAGAIN));
	*ret = sp;
	return 0;
fail:
	spill_free(sp);
	return r;
}

static void linger_drop(struct spill *sp, unsigned i);

void spill_free(struct spill *sp)
{
	if (!sp)
		return;
	if (sp->dirfd >= 0)
		close(sp->dirfd);
	/* owners are released by their connections first; uids go with their last reference */
	while (sp->nlinger)
		linger_drop(sp, sp->nlinger - 1);
	free(sp->linger);
	free(sp);
}

void spill_owner_init(struct spill *sp, struct spill_owner *o, uid_t uid, pid_t pid)
{
	(void)sp;
	memset(o, 0, sizeof(*o));
	o->uid = uid;
	o->pid = pid;
	counters_init(&o->counters);
	o->page_kept.slot = -1;
}

void spill_owner_link(struct spill *sp, struct spill_owner *o)
{
	if (!o->linked) {
		TAILQ_INSERT_TAIL(&sp->owners, o, link);
		o->linked = 1;
	}
}

struct spill_uid *spill_uid_get(struct spill *sp, uid_t uid)
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
	u->refs++;
	return u;
}

void spill_uid_put(struct spill *sp, struct spill_uid *u)
{
	struct spill_uid **pp;

	if (--u->refs)
		return;
	for (pp = &sp->uids; *pp != u; pp = &(*pp)->next)
		;
	*pp = u->next;
	free(u);
}

void spill_charge_add(struct spill *sp, struct spill_owner *o, struct spill_file *f, uint64_t n)
{
	f->charged += n;
	o->bytes += n;
	o->acct->bytes += n;
	sp->bytes += n;
	sp->counted.bytes_charged_total += n;
	o->acct->counted.bytes_charged_total += n;
}

void spill_charge_sub(struct spill *sp, struct spill_owner *o, struct spill_file *f, uint64_t n)
{
	f->charged -= n;
	o->bytes -= n;
	o->acct->bytes -= n;
	sp->bytes -= n;
}

/* The end of a file: the daemon lets go of it; it is no longer one of its uid's files. */
static void file_forget(struct spill *sp, struct spill_uid *acct, int fd, struct spill_kept *kept)
{
	spill_keep_forget(sp, kept, false);
	close(fd);
	acct->files--;
	sp->files--;
}

static void linger_drop(struct spill *sp, unsigned i)
{
	struct spill_linger *l = &sp->linger[i];
	struct spill_uid *acct = l->acct;

	file_forget(sp, acct, l->fd, &l->kept);
	sp->linger[i] = sp->linger[--sp->nlinger];
	spill_uid_put(sp, acct);
}

bool spill_linger_add(struct spill *sp, int fd, struct spill_uid *acct, pid_t pid, const struct spill_kept *kept)
{
	if (ARRAY_RESERVE_ONE(sp->linger, sp->nlinger, sp->linger_cap, 8) < 0)
		return false;
	sp->linger[sp->nlinger++] = (struct spill_linger){ .fd = fd, .acct = acct, .pid = pid, .kept = *kept };
	acct->refs++;
	spill_keep_linger(sp, &sp->linger[sp->nlinger - 1]);
	return true;
}

/*
 * Close file i of o: cut to nothing so its blocks are free even if the client keeps an fd, then
 * forgotten -- or, while some other process still holds it open, kept as a lingering file.
 */
static void file_drop(struct spill *sp, struct spill_owner *o, unsigned i)
{
	static struct log_ratelimit rl = LOG_RATELIMIT(10, 5);
	struct spill_file f = o->files[i];
	int r;

	spill_charge_sub(sp, o, &o->files[i], f.charged);
	o->files[i] = o->files[--o->nfiles];
	if ((r = file_cut(f.fd, 0)) < 0)
		log_warning_errno(r, "Failed to truncate a spill file of pid %d: %m", (int)o->pid);
	if (!sp->leases || ofd_others(f.fd) <= 0) {
		file_forget(sp, o->acct, f.fd, &f.kept);
		return;
	}
	if (!spill_linger_add(sp, f.fd, o->acct, o->pid, &f.kept)) {
		log_warning("Spill: no memory to keep track of a file pid %d still writes to", (int)o->pid);
		file_forget(sp, o->acct, f.fd, &f.kept);
		return;
	}
	log_msg_ratelimited(&rl, LOG_NOTICE,
			    "Spill: a file of pid %d (uid %u) is still open in some process after its stream closed; "
			    "it counts as one of uid %u's files, and is kept empty, until the last holder closes it",
			    (int)o->pid, (unsigned)o->uid, (unsigned)o->uid);
}

void spill_owner_release(struct spill *sp, struct spill_owner *o)
{
	static struct log_ratelimit closed_rl = LOG_RATELIMIT(10, 5);
	uint64_t bytes = o->bytes;
	unsigned n = o->nfiles;

	if (sp->sealed) /* the files are the next life's: as they are, and still counted there */
		for (; o->nfiles; o->nfiles--)
			close(o->files[o->nfiles - 1].fd);
	while (o->nfiles)
		file_drop(sp, o, o->nfiles - 1);
	if (n && !sp->sealed)
		log_msg_ratelimited(&closed_rl, LOG_INFO, "Spill: closed the %u files (%" PRIu64 " bytes) of pid %d (uid %u)",
				    n, bytes, (int)o->pid, (unsigned)o->uid);
	free(o->files);
	o->files = NULL;
	o->cap = 0;
	if (o->acct)
		spill_uid_put(sp, o->acct);
	o->acct = NULL;
	if (o->counters.page)
		spill_keep_forget(sp, &o->page_kept, true);
	counters_free(&o->counters, true);
	if (o->linked)
		TAILQ_REMOVE(&sp->owners, o, link);
	o->linked = 0;
}

int spill_attach(struct spill *sp, struct spill_owner *o, int *ret_fd, uint64_t *ret_threshold)
{
	int r;

	if (o->counters.page)
		return -EEXIST;
	r = counters_create(&o->counters, ret_fd);
	if (r < 0)
		return r;
	spill_owner_link(sp, o);
	spill_keep_page(sp, o, o->counters.fd);
	*ret_threshold = sp->threshold;
	return 0;
}

/* May the owner's uid take `more` bytes? If not, err names the limit. */
static int bytes_allowed(struct spill *sp, const struct spill_owner *o, uint64_t more, char *err, size_t errlen)
{
	char a[32], b[32], c[32];

	if (sp->max_bytes && (more > sp->max_bytes || sp->bytes > sp->max_bytes - more)) {
		snprintf(err, errlen,
			 "spill_max_bytes (%s) would be exceeded: the machine's spill files hold %s, %s more asked",
			 size_format(sp->max_bytes, a, sizeof(a)), size_format(sp->bytes, b, sizeof(b)),
			 size_format(more, c, sizeof(c)));
		sp->counted.refusals++;
		o->acct->counted.refusals++;
		return -EDQUOT;
	}
	if (sp->max_bytes_per_uid && (more > sp->max_bytes_per_uid || o->acct->bytes > sp->max_bytes_per_uid - more)) {
		snprintf(err, errlen,
			 "spill_max_bytes_per_uid (%s) would be exceeded: uid %u's spill files hold %s, %s more asked",
			 size_format(sp->max_bytes_per_uid, a, sizeof(a)), (unsigned)o->uid,
			 size_format(o->acct->bytes, b, sizeof(b)), size_format(more, c, sizeof(c)));
		sp->counted.refusals++;
		o->acct->counted.refusals++;
		return -EDQUOT;
	}
	return 0;
}

int spill_create(struct spill *sp, struct spill_owner *o, uint64_t charge, uint64_t *ret_id, int *ret_fd,
		 char *err, size_t errlen)
{
	struct spill_file *f;
	int fd, cfd, r;

	if (!o->acct && !(o->acct = spill_uid_get(sp, o->uid)))
		return -ENOMEM;
	if (sp->max_files && sp->files >= sp->max_files) {
		snprintf(err, errlen, "spill_max_files reached: the machine has %" PRIu64 " of %u spill files open",
			 sp->files, sp->max_files);
		sp->counted.refusals++;
		o->acct->counted.refusals++;
		return -EDQUOT;
	}
	if (sp->max_files_per_uid && o->acct->files >= sp->max_files_per_uid) {
		snprintf(err, errlen, "spill_max_files_per_uid reached: uid %u has %u of %u spill files open",
			 (unsigned)o->uid, o->acct->files, sp->max_files_per_uid);
		sp->counted.refusals++;
		o->acct->counted.refusals++;
		return -EDQUOT;
	}
	if ((r = bytes_allowed(sp, o, charge, err, errlen)) < 0)
		return r;
	if (ARRAY_RESERVE_ONE(o->files, o->nfiles, o->cap, 8) < 0)
		return -ENOMEM;
	cfd = file_create(sp);
	if (cfd < 0) {
		snprintf(err, errlen, "cannot create a spill file in '%s': %s", sp->dir, strerror(-cfd));
		return cfd;
	}
	fd = ofd_reopen(cfd, O_RDWR); /* the daemon's own description, never the client's */
	if (fd < 0) {
		close(cfd);
		snprintf(err, errlen, "cannot create a spill file: %s", strerror(-fd));
		return fd;
	}
	if (cfd < 3) { /* the client's fd goes out over the socket; keep stdio free */
		r = fcntl(cfd, F_DUPFD_CLOEXEC, 3);
		r = r < 0 ? -errno : r;
		close(cfd);
		if (r < 0) {
			close(fd);
			snprintf(err, errlen, "cannot create a spill file: %s", strerror(-r));
			return r;
		}
		cfd = r;
	}
	f = &o->files[o->nfiles++];
	*f = (struct spill_file){ .id = ++sp->next_id, .fd = fd, .charged = 0 };
	o->acct->files++;
	sp->files++;
	sp->counted.files_created++;
	o->acct->counted.files_created++;
	spill_charge_add(sp, o, f, charge);
	spill_owner_link(sp, o);
	spill_keep_file(sp, o, f);
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

/*
 * Cut the file behind fd if it holds more than `charged` bytes allow: past its end, or in blocks
 * (fallocate with FALLOC_FL_KEEP_SIZE allocates without growing the size). True if it did.
 */
static bool file_audit(struct spill *sp, pid_t pid, struct spill_uid *acct, int fd, uint64_t charged)
{
	static struct log_ratelimit written = LOG_RATELIMIT(10, 5), allocated = LOG_RATELIMIT(10, 5);
	struct stat st;
	uint64_t used;
	int r;

	if (fstat(fd, &st) < 0)
		return false;
	used = (uint64_t)st.st_blocks * 512;
	if ((uint64_t)st.st_size <= charged && used <= usage_allowed(&st, charged))
		return false;
	r = file_cut(fd, MIN((uint64_t)st.st_size, charged));
	if ((uint64_t)st.st_size > charged)
		log_msg_ratelimited(&written, LOG_WARNING,
				    "Spill: pid %d (uid %u) wrote %" PRIu64 " bytes to a file charged %" PRIu64 "; %s",
				    (int)pid, (unsigned)acct->uid, (uint64_t)st.st_size, charged,
				    r < 0 ? "failed to cut it to its charge" : "cut to its charge");
	else /* fallocate past the end, or the file system's own preallocation (XFS) */
		log_msg_ratelimited(&allocated, LOG_NOTICE,
				    "Spill: a file of pid %d (uid %u) charged %" PRIu64 " bytes held %" PRIu64
				    " bytes of disk; %s the blocks past its end",
				    (int)pid, (unsigned)acct->uid, charged, used, r < 0 ? "failed to free" : "freed");
	sp->counted.truncated++;
	acct->counted.truncated++;
	return true;
}

int spill_charge(struct spill *sp, struct spill_owner *o, uint64_t id, uint64_t total, char *err,
		 size_t errlen)
{
	struct spill_file *f = file_find(o, id, NULL);
	uint64_t more;
	int r;

	if (!f) {
		snprintf(err, errlen, "no spill file %" PRIu64 " on this connection", id);
		return -ENOENT;
	}
	if (total <= f->charged) {
		if ((r = file_cut(f->fd, total)) < 0)
			log_warning_errno(r, "Spill: failed to truncate a file of pid %d: %m", (int)o->pid);
		spill_charge_sub(sp, o, f, f->charged - total);
		spill_keep_update(sp, o, f);
		return 0;
	}
	file_audit(sp, o->pid, o->acct, f->fd, f->charged);
	more = total - f->charged;
	if ((r = bytes_allowed(sp, o, more, err, errlen)) < 0)
		return r;
	spill_charge_add(sp, o, f, more);
	spill_keep_update(sp, o, f);
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
			file_audit(sp, o->pid, o->acct, o->files[i].fd, o->files[i].charged);
	for (unsigned i = sp->nlinger; i-- > 0;) {
		struct spill_linger *l = &sp->linger[i];

		if (ofd_others(l->fd) > 0)
			file_audit(sp, l->pid, l->acct, l->fd, 0);
		else
			linger_drop(sp, i);
	}
	sp->next_audit = now + AUDIT_INTERVAL_NS;
	return sp->files ? sp->next_audit : UINT64_MAX;
}

/* a + b, or UINT64_MAX: the clients' own words must not wrap what the daemon reports */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

void spill_get_status(struct spill *sp, const uid_t *only, struct proto_status_spill *st)
{
	static const struct spill_counters none;
	const struct spill_counters *counted = only ? &none : &sp->counted;
	struct spill_owner *o;

	memset(st, 0, sizeof(*st));
	proto_set_name(st->directory, sizeof(st->directory), sp->dir);
	proto_set_name(st->method, sizeof(st->method), sp->tmpfile ? "O_TMPFILE" : "unlinked");
	st->threshold = sp->threshold;
	st->max_bytes = sp->max_bytes;
	st->max_bytes_per_uid = sp->max_bytes_per_uid;
	st->max_files = sp->max_files;
	st->max_files_per_uid = sp->max_files_per_uid;
	/* every page is read, so that each owner's numbers are current for the client records */
	TAILQ_FOREACH(o, &sp->owners, link) {
		counters_read(&o->counters);
		if (only && o->uid != *only)
			continue;
		st->streams_memory = add_sat(st->streams_memory, o->counters.seen.streams);
		st->bytes_memory = add_sat(st->bytes_memory, o->counters.seen.bytes);
	}
	if (only) {
		/* the uid's own: what others spill is not its business */
		for (const struct spill_uid *u = sp->uids; u; u = u->next)
			if (u->uid == *only) {
				st->bytes = u->bytes;
				st->files = u->files;
				counted = &u->counted;
			}
		for (unsigned i = 0; i < sp->nlinger; i++)
			st->lingering += sp->linger[i].acct->uid == *only;
	} else {
		st->bytes = sp->bytes;
		st->files = sp->files;
		st->lingering = sp->nlinger;
	}
	st->files_created = counted->files_created;
	st->bytes_charged_total = counted->bytes_charged_total;
	st->refusals = counted->refusals;
	st->truncated = counted->truncated;
}

unsigned spill_uid_count(const struct spill *sp, const uid_t *only)
{
	unsigned n = 0;

	for (const struct spill_uid *u = sp->uids; u; u = u->next)
		n += !only || u->uid == *only;
	return n;
}

unsigned spill_uid_status(const struct spill *sp, const uid_t *only, struct proto_status_spill_uid *recs,
			  unsigned max)
{
	unsigned n = 0;

	for (const struct spill_uid *u = sp->uids; u && n < max; u = u->next)
		if (!only || u->uid == *only)
			recs[n++] = (struct proto_status_spill_uid){ .uid = (uint32_t)u->uid,
								     .files = u->files,
								     .bytes = u->bytes,
								     .files_created = u->counted.files_created,
								     .bytes_charged_total = u->counted.bytes_charged_total,
								     .refusals = u->counted.refusals,
								     .truncated = u->counted.truncated };
	return n;
}

void spill_owner_heaps(const struct spill_owner *o, struct proto_status_heaps *ret)
{
	*ret = o->counters.seen.heaps;
}

void spill_owner_status(const struct spill_owner *o, uint32_t *files, uint64_t *bytes,
			uint64_t *streams_memory, uint64_t *bytes_memory)
{
	*files = o->nfiles;
	*bytes = o->bytes;
	*streams_memory = o->counters.seen.streams;
	*bytes_memory = o->counters.seen.bytes;
}
