/* SPDX-License-Identifier: MIT */
/*
 * journal_segments.c - a journal's files, apart from the batches the flusher writes into them:
 *
 *   segments   NAME-NNN.seg, preallocated with zeros and reused in turn under a new generation
 *              (segment_start: its header durable before its records); opened by name only in
 *              the journal's own directory, never through a symlink, and only as regular files
 *              of the daemon's uid; one a reader may still hold gets a new file before it is
 *              reused (segment_renew), so an fd never shows a generation it was not given for;
 *   recovery   at start, where the journal ends (journal_recover): segments made durable as
 *              they are (a killed daemon leaves unsynced writes in the page cache), then in
 *              generation order, their records checked, a torn tail cut off, and after a crash
 *              the rest of the last segment zeroed; what it found said as information, a torn
 *              record as a warning, a hole refused with what to do;
 *   markers    NAME.clean (where a clean stop left the journal; read and removed at start) and
 *              NAME.retain (the truncation point, kept across restarts): small files replaced
 *              durably (a fresh temporary file, synced, renamed).
 *
 * The flusher calls segment_start and retain_persist; journal_open and journal_close the
 * rest, before the flusher starts or after it stopped. Every write, sync and name made here goes
 * through journal_fs.h, where the crash-point tests record it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jformat.h"
#include "jio.h"
#include "journal_fs.h"
#include "journal_internal.h"
#include "log.h"
#include "ofd.h"
#include "size.h"
#include "util.h"

/* --- segments --------------------------------------------------------------------------- */

/* pread all of len bytes at off: 0, the call's own errno (EINVAL for an unaligned O_DIRECT
 * read, EIO...), or -EIO for a read that came back short without one. (Writes, syncs and names
 * go through journal_fs.h, which the crash-point tests record.) */
static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n = pread(fd, buf, len, (off_t)off);

	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

static void segment_path(const struct journal *j, unsigned i, char *buf, size_t len)
{
	snprintf(buf, len, "%s-%03u.seg", j->cfg.name, i);
}

/* The temporary name a file is made under before its rename to name (segments, small files). */
static void tmp_path(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s.tmp", name);
}

static bool segment_reusable(const struct journal *j, unsigned i)
{
	const struct segment *s = &j->segs[i];

	return s->generation == 0 || s->end_lsn <= j->retain_lsn || j->cfg.recycle;
}

/*
 * Open the next segment for the next batch. The flusher calls this under the lock with no batch
 * in flight, so every record before the new segment's first LSN is durable; the header says so
 * (JFORMAT_SEG_ORDERED) and is written and synced before any record of the segment is, without
 * the lock (the event loop must not wait for a disk). A power loss thus leaves either the old
 * header (nothing of the new use was written) or the new one with whatever part of its records
 * made it, never records of a generation without their header. -ENOSPC: the next segment still
 * holds records after the truncation point.
 */
int segment_start(struct journal *j)
{
	unsigned next = (j->cur + 1) % j->cfg.segments;
	struct segment *s = &j->segs[next];
	struct jformat_seg_hdr h;
	struct jio_req req;
	int r;

	if (!segment_reusable(j, next))
		return -ENOSPC;
	/* probed under the lock: a reader given it from now on gets the new generation, allowed */
	if (s->shared && ofd_others(s->fd) != 0) {
		static struct log_ratelimit rl = LOG_RATELIMIT(2, 60);
		int fd;

		/* without the lock (the event loop must not wait for a disk): until it is replaced,
		 * readers may still be given the old file, of the old generation */
		pthread_mutex_unlock(&j->lock);
		r = segment_renew(j, next, 0, &fd);
		pthread_mutex_lock(&j->lock);
		if (r < 0)
			return r;
		log_msg_ratelimited(&rl, LOG_INFO,
				    "Journal '%s': segment %u may still be open in a reader: made anew before its reuse",
				    j->cfg.name, next);
		close(s->fd);
		s->fd = fd;
	}
	s->shared = false;
	j->segs[j->cur].end_lsn = j->next_lsn;
	j->cur = next;
	s->generation = ++j->max_gen;
	s->first_lsn = s->end_lsn = j->next_lsn;
	j->cur_off = JFORMAT_BLOCK;
	jformat_seg_hdr_init(&h, j->cfg.name, s->generation, s->first_lsn, j->cfg.segment_size, realtime_ns(),
			     JFORMAT_SEG_ORDERED);
	memset(j->hdr_block, 0, JFORMAT_BLOCK);
	memcpy(j->hdr_block, &h, sizeof(h));
	req = (struct jio_req){ .fd = s->fd, .niov = 1, .iov = { { j->hdr_block, JFORMAT_BLOCK, 0 } } };
	pthread_mutex_unlock(&j->lock);
	r = jio_run(j->io, &req);
	pthread_mutex_lock(&j->lock);
	return r;
}

/*
 * Create a segment file: the first keep bytes of src (an fd of the file it replaces), zeros after
 * them, so that it is reused later by overwriting and fdatasync never needs metadata. It appears
 * under its name only complete and synced, replacing what had the name.
 */
static int segment_create(struct journal *j, const char *name, int src, uint64_t keep, int *ret_fd)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ uint8_t *buf = calloc(1, 1u << 20);
	char tmp[300];
	int r;

	if (!buf)
		return -ENOMEM;
	tmp_path(name, tmp, sizeof(tmp));
	r = jfs_unlink(j->dirfd, tmp);
	if (r < 0 && r != -ENOENT)
		return r;
	fd = jfs_create(j->dirfd, tmp, O_RDWR);
	if (fd < 0)
		return fd;
	for (uint64_t off = 0; off < j->cfg.segment_size; off += 1u << 20) {
		size_t len = (size_t)MIN((uint64_t)1 << 20, j->cfg.segment_size - off);

		if (off < keep && (r = read_at(src, buf, (size_t)MIN((uint64_t)len, keep - off), off)) < 0)
			return r;
		if (off + len > keep && off < keep) /* the last block kept: zeros after it */
			memset(buf + (keep - off), 0, len - (size_t)(keep - off));
		else if (off >= keep && off < keep + (1u << 20))
			memset(buf, 0, len);
		if ((r = jfs_write(fd, buf, len, off)) < 0)
			return r;
	}
	if ((r = jfs_datasync(fd)) < 0)
		return r;
	/* the rename and the new entry reach the disk */
	if ((r = jfs_rename(j->dirfd, tmp, name)) < 0 || (r = jfs_dirsync(j->dirfd)) < 0)
		return r;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/*
 * Open segment i by name, in the journal's directory only: never through a symlink, and only a
 * regular file of the daemon's uid (readers get these files: the name must not lead elsewhere).
 */
static int segment_open(struct journal *j, const char *name, int flags, const struct stat *same, struct stat *ret_st)
{
	int fd = openat(j->dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, ret_st) < 0 || !S_ISREG(ret_st->st_mode) || ret_st->st_uid != geteuid() ||
	    (same && (same->st_dev != ret_st->st_dev || same->st_ino != ret_st->st_ino))) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

int segment_open_all(struct journal *j)
{
	for (unsigned i = 0; i < j->cfg.segments; i++) {
		int direct = j->cfg.direct ? O_DIRECT : 0;
		char name[64], tmp[80];
		struct stat st;
		int fd, r;

		segment_path(j, i, name, sizeof(name));
		/*
		 * A segment being made anew (segment_create) when the daemon stopped left its
		 * temporary file: a segment's size of disk that nothing reads and that would stay
		 * until the same segment is made anew again. Its name never held records.
		 */
		tmp_path(name, tmp, sizeof(tmp));
		r = jfs_unlink(j->dirfd, tmp);
		if (r == 0)
			log_info("Journal '%s': removed '%s', left by a segment being made anew when the "
				 "daemon stopped", j->cfg.name, tmp);
		else if (r != -ENOENT)
			log_warning_errno(r, "Journal '%s': cannot remove the leftover '%s': %m", j->cfg.name, tmp);
		fd = segment_open(j, name, O_RDWR | direct, NULL, &st);
		if (fd >= 0 && (uint64_t)st.st_size != j->cfg.segment_size) {
			log_error("Journal '%s': segment '%s' is %jd bytes, the configuration says %" PRIu64
				  "; refusing to touch it (move the directory away to start afresh)",
				  j->cfg.name, name, (intmax_t)st.st_size, j->cfg.segment_size);
			close(fd);
			return -EINVAL;
		}
		if (fd == -ENOENT) {
			r = segment_create(j, name, -1, 0, &fd);
			if (r < 0)
				return log_error_errno(r, "Journal '%s': cannot create segment '%s': %m", j->cfg.name,
						       name);
			if (fstat(fd, &st) < 0)
				st = (struct stat){ 0 };
			if (direct) {
				close(fd);
				fd = segment_open(j, name, O_RDWR | direct, &st, &st);
			}
		}
		if (fd == -EPERM || fd == -ELOOP) {
			log_error("Journal '%s': segment '%s' is not a regular file of the daemon's uid %u (a "
				  "symlink, another owner, another type); refusing to use it",
				  j->cfg.name, name, (unsigned)geteuid());
			return -EPERM;
		}
		if (fd < 0)
			return log_error_errno(fd, "Journal '%s': cannot open segment '%s': %m%s", j->cfg.name, name,
					       fd == -EINVAL && direct ? " (direct = on: does the file system support O_DIRECT?)" : "");
		j->segs[i].fd = fd;
		/* a previous life's reader may hold it still: probed before its next use
		 * (segment_start), not here in every start (two fcntls a segment), but for the one the
		 * journal goes on in (segment_leave_readers) */
		j->segs[i].shared = true;
	}
	return 0;
}

int segment_renew(struct journal *j, unsigned i, uint64_t keep, int *ret_fd)
{
	_cleanup_close_ int src = -1;
	char name[64];
	struct stat st;
	int fd, r;

	segment_path(j, i, name, sizeof(name));
	/* the old file read through a description without O_DIRECT: any length, any buffer */
	if (keep && (src = ofd_reopen(j->segs[i].fd, O_RDONLY)) < 0)
		return src;
	r = segment_create(j, name, src, keep, &fd);
	if (r < 0)
		return r;
	if (j->cfg.direct) {
		if (fstat(fd, &st) < 0)
			st = (struct stat){ 0 };
		close(fd);
		fd = segment_open(j, name, O_RDWR | O_DIRECT, &st, &st);
		if (fd < 0)
			return fd;
	}
	*ret_fd = fd;
	return 0;
}

int segment_leave_readers(struct journal *j)
{
	struct segment *s = &j->segs[j->cur];
	int held = ofd_others(s->fd), fd, r;

	if (held < 0)
		log_notice("Journal '%s': cannot tell whether a process holds its segments (%s; fs.leases-enable?): "
			   "each one is made anew before it is used again",
			   j->cfg.name, strerror(-held));
	if (!s->generation || held == 0) {
		s->shared = false;
		return 0;
	}
	r = segment_renew(j, j->cur, j->cur_off, &fd);
	if (r < 0)
		return log_error_errno(r, "Journal '%s': cannot give segment %u a new file: %m", j->cfg.name, j->cur);
	log_info("Journal '%s': segment %u %s when the daemon started: made anew, so that what is appended from "
		 "now on is not read through an fd handed out before",
		 j->cfg.name, j->cur, held > 0 ? "was open in a process" : "may have been open in a process");
	close(s->fd);
	s->fd = fd;
	s->shared = false;
	return 0;
}

/* --- marker files ----------------------------------------------------------------------- */

/* A regular file of the daemon's uid? */
static bool file_ours(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
}

/*
 * Replace the small file name in the journal's directory with text (tmp, rename), durably: the
 * file synced before the rename, the directory after it. Not durable: neither (what a power
 * failure then leaves is the old file, none, or an empty or partly written one, never another
 * text: a reader's parse rejects all but a whole one).
 */
static int small_file_write(struct journal *j, const char *name, const char *text, bool durable)
{
	char tmp[96];
	_cleanup_close_ int fd = -1;
	int r;

	tmp_path(name, tmp, sizeof(tmp));
	/* a fresh file, never one a name happened to point to (a leftover of a crash goes first) */
	r = jfs_unlink(j->dirfd, tmp);
	if (r < 0 && r != -ENOENT)
		return r;
	fd = jfs_create(j->dirfd, tmp, O_WRONLY);
	if (fd < 0)
		return fd;
	if ((r = jfs_write(fd, text, strlen(text), 0)) < 0 || (durable && (r = jfs_fsync(fd)) < 0) ||
	    (r = jfs_rename(j->dirfd, tmp, name)) < 0)
		return r;
	return durable ? jfs_dirsync(j->dirfd) : 0;
}

static int small_file_read(struct journal *j, const char *name, char *buf, size_t len)
{
	_cleanup_close_ int fd = openat(j->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	if (!file_ours(fd))
		return -EPERM;
	n = read(fd, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/* A marker's text, as written here: n decimal numbers apart by single spaces, then a newline. */
static bool marker_parse(const char *text, uint64_t *v, unsigned n)
{
	const char *p = text;

	for (unsigned i = 0; i < n; i++) {
		if (decimal_prefix(p, &p, &v[i]) < 0 || *p != (i + 1 < n ? ' ' : '\n'))
			return false;
		p++;
	}
	return *p == '\0';
}

/*
 * Keep the truncation point across restarts, in NAME.retain. Called by the flusher without the
 * lock. Losing the latest value in a crash only keeps segments longer.
 */
void retain_persist(struct journal *j, uint64_t lsn)
{
	char name[64], text[32];
	int r;

	snprintf(name, sizeof(name), "%s.retain", j->cfg.name);
	snprintf(text, sizeof(text), "%" PRIu64 "\n", lsn);
	r = small_file_write(j, name, text, true);
	if (r < 0)
		log_warning_errno(r, "Journal '%s': cannot save the truncation point (LSN %" PRIu64 ") in '%s': %m; "
			    "after a restart it will have to be set again",
			    j->cfg.name, lsn, name);
}

static uint64_t retain_load(struct journal *j)
{
	char name[64], text[32];

	uint64_t lsn;

	snprintf(name, sizeof(name), "%s.retain", j->cfg.name);
	if (small_file_read(j, name, text, sizeof(text)) < 0)
		return 0;
	if (!marker_parse(text, &lsn, 1)) {
		log_warning("Journal '%s': ignoring '%s', which holds no truncation point; it has to be set again",
			    j->cfg.name, name);
		return 0;
	}
	return lsn;
}

/*
 * After a clean stop, say where the journal ends (NAME.clean: segment, offset, next LSN). In a
 * reused segment, what follows the last record is whatever the earlier use left, and may look
 * torn; recovery trusts this marker instead, and removes it before anything is appended.
 * Without durable (a take-over, whose next life reads and removes it at once), a power failure
 * may lose it, or leave it empty: recovery then zeroes the last segment's tail, as after a crash.
 */
void clean_mark(struct journal *j, bool durable)
{
	char name[64], text[80];
	int r;

	if (j->st.state == JOURNAL_FAILED || j->cur_off > j->cfg.segment_size)
		return;
	snprintf(name, sizeof(name), "%s.clean", j->cfg.name);
	snprintf(text, sizeof(text), "%u %" PRIu64 " %" PRIu64 "\n", j->cur, j->cur_off, j->next_lsn);
	r = small_file_write(j, name, text, durable);
	if (r < 0)
		log_warning_errno(r, "Journal '%s': cannot record the clean stop in '%s': %m", j->cfg.name, name);
}

/*
 * The clean-stop marker, removed as it is read: a later crash must not find it once this life
 * writes in a segment. The directory sync that makes the removal durable comes before the first
 * such write (dir_unsynced: journal_marker_sync), not here: a take-over's next life would
 * otherwise spend it (0.15-0.27 ms) in the clients' pause.
 */
static bool clean_take(struct journal *j, unsigned *ret_seg, uint64_t *ret_off, uint64_t *ret_lsn)
{
	char name[64], text[80];
	uint64_t v[3];
	bool ok;

	snprintf(name, sizeof(name), "%s.clean", j->cfg.name);
	if (small_file_read(j, name, text, sizeof(text)) < 0)
		return false;
	ok = marker_parse(text, v, 3) && v[0] <= UINT_MAX;
	if (ok) {
		*ret_seg = (unsigned)v[0];
		*ret_off = v[1];
		*ret_lsn = v[2];
	}
	if (jfs_unlink(j->dirfd, name) < 0)
		return false; /* cannot make sure it is gone: do not rely on it */
	j->dir_unsynced = true;
	return ok;
}

int journal_marker_sync(struct journal *j)
{
	int r;

	if (!j->dir_unsynced)
		return 0;
	r = jfs_dirsync(j->dirfd);
	if (r == 0)
		j->dir_unsynced = false;
	return r;
}

/* --- recovery --------------------------------------------------------------------------- */

/* Zero a segment from off to its end, and sync: what lay there was never acknowledged. */
static int segment_zero_tail(struct journal *j, unsigned i, uint64_t off)
{
	_cleanup_free_ uint8_t *zeros = NULL;
	const size_t chunk = 1u << 20;
	int fd = j->segs[i].fd, r;

	if (posix_memalign((void **)&zeros, JFORMAT_BLOCK, chunk))
		return -ENOMEM;
	memset(zeros, 0, chunk);
	/* under O_DIRECT writes start on a block: the partial block is rewritten whole below */
	if (off % JFORMAT_BLOCK) {
		_cleanup_free_ uint8_t *blk = NULL;
		uint64_t base = off / JFORMAT_BLOCK * JFORMAT_BLOCK;

		if (posix_memalign((void **)&blk, JFORMAT_BLOCK, JFORMAT_BLOCK))
			return -ENOMEM;
		r = read_at(fd, blk, JFORMAT_BLOCK, base);
		if (r < 0)
			return r;
		memset(blk + (off - base), 0, JFORMAT_BLOCK - (off - base));
		r = jfs_write(fd, blk, JFORMAT_BLOCK, base);
		if (r < 0)
			return r;
		off = base + JFORMAT_BLOCK;
	}
	for (; off < j->cfg.segment_size; off += chunk) {
		r = jfs_write(fd, zeros, (size_t)MIN((uint64_t)chunk, j->cfg.segment_size - off), off);
		if (r < 0)
			return r;
	}
	return jfs_datasync(fd);
}

/*
 * Under O_DIRECT every batch starts on a block. When recovery ends inside a block, end that
 * block with a padding record (read, fill, write back, sync), so that readers walk on to where
 * the next batch will start instead of stopping at a gap.
 */
static int segment_pad_block(struct journal *j, unsigned i, uint64_t off, uint64_t lsn)
{
	_cleanup_free_ uint8_t *blk = NULL;
	uint64_t base = off / JFORMAT_BLOCK * JFORMAT_BLOCK;
	uint64_t target = (off + JFORMAT_REC_HDR + JFORMAT_BLOCK - 1) / JFORMAT_BLOCK * JFORMAT_BLOCK;
	uint64_t len = target - base;
	int fd = j->segs[i].fd, r;

	if (target > j->cfg.segment_size) {
		/* no room for a padding record: the segment is done, the next batch opens another */
		j->cur_off = j->cfg.segment_size;
		return 0;
	}
	if (posix_memalign((void **)&blk, JFORMAT_BLOCK, len))
		return -ENOMEM;
	r = read_at(fd, blk, len, base);
	if (r < 0)
		return r;
	jformat_rec_write(blk + (off - base), lsn, j->segs[i].generation, JREC_PAD, NULL,
			  (uint32_t)(target - off - JFORMAT_REC_HDR));
	r = jfs_write(fd, blk, len, base);
	if (r < 0)
		return r;
	r = jfs_datasync(fd);
	if (r < 0)
		return r;
	j->cur_off = target;
	return 0;
}

static int by_generation(const void *a, const void *b, void *arg)
{
	const struct segment *s = arg;
	uint64_t ga = s[*(const unsigned *)a].generation, gb = s[*(const unsigned *)b].generation;

	return ga < gb ? -1 : ga > gb;
}

unsigned segments_in_order(const struct journal *j, unsigned *order)
{
	unsigned n = 0;

	for (unsigned i = 0; i < j->cfg.segments; i++)
		if (j->segs[i].generation)
			order[n++] = i;
	qsort_r(order, n, sizeof(order[0]), by_generation, j->segs);
	return n;
}

/*
 * A hole before segment h: could it hold an acknowledged record? Records are acknowledged in
 * LSN order, each only once its batch and every earlier one was synced. A segment opened by
 * this version (JFORMAT_SEG_ORDERED) was opened only once every record before it was durable:
 * a hole before it lost synced records, and the journal is refused. An older version wrote a
 * segment's header and first batch while the last batch of the segment before could still be
 * in flight (at most two batches were): a power loss could leave the new segment's first batch
 * on the disk and not that last batch. Neither was acknowledged, so the tail is cut, if the
 * state is that one: the segment is the last, the walk of the one before stopped short of its
 * end, the missing LSNs come after it, and the segment holds no more than one batch.
 */
static bool unacknowledged_split(const struct journal *j, const struct jformat_seg_hdr *h,
				 const struct jformat_scan *scan, const struct jformat_scan *prev, bool last)
{
	return !(h->flags & JFORMAT_SEG_ORDERED) && last && prev->stop_err && h->first_lsn > prev->next_lsn &&
	       scan->end - JFORMAT_BLOCK <= j->cfg.max_batch_bytes + JFORMAT_BLOCK;
}

/* Append to the text in buf (len bytes in all), cut short where it must be. */
static void text_append(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void text_append(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strnlen(buf, len);
	va_list ap;

	va_start(ap, fmt);
	if (used + 1 < len)
		vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

/* Where segment i lives, for messages: its directory and name. */
static void segment_where(const struct journal *j, unsigned i, char *buf, size_t len)
{
	char name[64];

	segment_path(j, i, name, sizeof(name));
	snprintf(buf, len, "%s/%s", j->cfg.directory, name);
}

/* Read every segment's header: the generation and first LSN of those valid. Logs. */
static int recover_headers(struct journal *j)
{
	for (unsigned i = 0; i < j->cfg.segments; i++) {
		struct jformat_seg_hdr h;
		const char *why;
		char where[PATH_MAX];
		int r;

		segment_where(j, i, where, sizeof(where));
		if (read_at(j->segs[i].fd, &h, sizeof(h), 0) < 0) {
			/* O_DIRECT wants an aligned read of a whole block */
			_cleanup_free_ uint8_t *blk = NULL;

			r = posix_memalign((void **)&blk, JFORMAT_BLOCK, JFORMAT_BLOCK) ? -ENOMEM
										   : read_at(j->segs[i].fd, blk, JFORMAT_BLOCK, 0);
			if (r < 0)
				return log_error_errno(r, "Journal '%s': cannot read the header of segment %u ('%s'): %m",
						       j->cfg.name, i, where);
			memcpy(&h, blk, sizeof(h));
		}
		if (jformat_seg_hdr_check(&h, j->cfg.name, &why) < 0) {
			/* a header is synced before any record of its generation is written: one that
			 * does not check out was damaged, or its segment was being opened, still empty */
			if (h.magic != 0)
				log_warning("Journal '%s': segment %u ('%s') has no valid header (%s); taking it as unused. "
					    "If it held records, they are lost: keep a copy of the directory and check the "
					    "device; a file of another journal or version does not belong in it",
					    j->cfg.name, i, where, why);
			continue;
		}
		j->segs[i].generation = h.generation;
		j->segs[i].first_lsn = h.first_lsn;
		j->max_gen = MAX(j->max_gen, h.generation);
	}
	return 0;
}

/*
 * Make durable what recovery is about to trust, where the journal did not end clean (a clean
 * stop left it durable: journal_recover). After a process was killed, what it wrote and
 * had not synced is in the page cache, where the walk finds it, and not necessarily on the disk;
 * this life appends after the records it finds and acknowledges its own as durable, which says
 * the ones before them are. So: every segment in use (a batch that filled a segment to its very
 * end was taken as it was, nothing zeroed after it, and a power loss once the next segment held
 * acknowledged records left a hole before them), and the directory (a segment made anew and
 * renamed into place just before the kill was written by this life while a power loss could
 * still undo the rename, and take what this life acknowledged in it along). Logs.
 */
static int recover_sync(struct journal *j, const unsigned *order, unsigned n)
{
	int r;

	for (unsigned k = 0; k < n; k++) {
		r = jfs_datasync(j->segs[order[k]].fd);
		if (r < 0)
			return log_error_errno(r, "Journal '%s': cannot sync segment %u: %m", j->cfg.name, order[k]);
	}
	r = jfs_dirsync(j->dirfd);
	if (r < 0)
		return log_error_errno(r, "Journal '%s': cannot sync its directory '%s': %m", j->cfg.name,
				       j->cfg.directory);
	j->dir_unsynced = false;
	return 0;
}

/* What the walk of the used segments found. */
struct recover_walk {
	unsigned n; /* segments in the journal */
	unsigned last; /* the one it goes on in */
	struct jformat_scan last_scan; /* where its records end, and why */
	uint64_t records, next_lsn;
	bool walked; /* false: a clean end trusted (recover_trusted), no record read */
	char split[160]; /* an unacknowledged tail cut at a segment switch: what, or "" */
};

/*
 * Can the clean-stop marker (segment seg, offset off, next LSN lsn) be taken for where the journal
 * ends, without walking its records? A clean stop wrote it once every record was durable, and
 * recovery removes it before this life writes (journal_marker_sync), so it can only be stale if
 * that removal was lost and the journal went on: then it does not name the last segment, or a
 * record of that segment's generation carrying lsn lies at off. Anything else amiss (a segment
 * starting before the one before it, an offset outside the segment) walks the journal too.
 */
static bool clean_trusted(struct journal *j, const unsigned *order, unsigned n, unsigned seg, uint64_t off,
			  uint64_t lsn)
{
	const struct segment *s = &j->segs[seg];
	_cleanup_free_ uint8_t *blk = NULL;
	uint64_t at = off & ~(uint64_t)(JFORMAT_BLOCK - 1);
	size_t len = off - at + JFORMAT_REC_HDR > JFORMAT_BLOCK ? 2 * JFORMAT_BLOCK : JFORMAT_BLOCK;
	struct jformat_rec rec;

	if (n == 0 || order[n - 1] != seg || off < JFORMAT_BLOCK || off > j->cfg.segment_size || off % 8 ||
	    lsn < s->first_lsn)
		return false;
	for (unsigned k = 1; k < n; k++)
		if (j->segs[order[k]].first_lsn < j->segs[order[k - 1]].first_lsn)
			return false;
	if (off + JFORMAT_REC_HDR > j->cfg.segment_size)
		return true; /* no room for a record after it */
	/* one or two whole blocks, aligned: what an O_DIRECT description reads */
	if (at + len > j->cfg.segment_size || posix_memalign((void **)&blk, JFORMAT_BLOCK, len) ||
	    read_at(s->fd, blk, len, at) < 0)
		return false;
	memcpy(&rec, blk + (off - at), sizeof(rec));
	return !(rec.lsn == lsn && rec.gen == (uint32_t)s->generation);
}

/* A clean end trusted: each segment ends where the next one starts, the last at the marker. */
static void recover_trusted(struct journal *j, const unsigned *order, unsigned n, uint64_t off, uint64_t lsn,
			    struct recover_walk *w)
{
	for (unsigned k = 0; k + 1 < n; k++)
		j->segs[order[k]].end_lsn = j->segs[order[k + 1]].first_lsn;
	j->segs[order[n - 1]].end_lsn = lsn;
	*w = (struct recover_walk){ .n = n, .last = order[n - 1], .next_lsn = lsn, .walked = false,
				    .records = lsn - j->segs[order[0]].first_lsn };
	w->last_scan = (struct jformat_scan){ .end = off, .next_lsn = lsn };
}

/*
 * Walk the used segments' records in generation order; each segment must start where the one
 * before ended. A hole is refused (exit 5) with what to do, but for an older version's
 * unacknowledged tail split across a segment switch, which is zeroed. Logs.
 */
static int recover_walk(struct journal *j, const unsigned *order, unsigned n, struct recover_walk *w)
{
	uint64_t expected = 0;

	*w = (struct recover_walk){ .n = n, .walked = true };
	for (unsigned k = 0; k < n; k++) {
		struct segment *s = &j->segs[order[k]];
		struct jformat_seg_hdr h;
		struct jformat_scan scan;
		char where[PATH_MAX], where_prev[PATH_MAX];
		void *map;
		int r;

		map = mmap(NULL, j->cfg.segment_size, PROT_READ, MAP_SHARED, s->fd, 0);
		if (map == MAP_FAILED)
			return log_error_errno(errno, "Journal '%s': cannot map segment %u to read it: %m", j->cfg.name,
					       order[k]);
		memcpy(&h, map, sizeof(h));
		jformat_scan_segment(map, j->cfg.segment_size, &h, NULL, NULL, &scan);
		munmap(map, j->cfg.segment_size);
		if (k > 0 && h.first_lsn != expected) {
			if (!unacknowledged_split(j, &h, &scan, &w->last_scan, k == n - 1)) {
				segment_where(j, order[k], where, sizeof(where));
				segment_where(j, w->last, where_prev, sizeof(where_prev));
				snprintf(j->st.recovery, sizeof(j->st.recovery),
					 "records %" PRIu64 "..%" PRIu64 " are missing before segment %u", expected,
					 h.first_lsn - 1, order[k]);
				log_error("Journal '%s': records %" PRIu64 "..%" PRIu64 " are missing: segment %u ('%s') "
					  "ends at offset %" PRIu64 " (%s) and the next, segment %u ('%s'), starts at LSN %" PRIu64
					  ". Records that may have been acknowledged are lost, so the journal is refused. Keep "
					  "a copy of '%s' to find out why (is the device failing? dmesg, smartctl), then "
					  "restore it from a backup, or move it away to start an empty journal",
					  j->cfg.name, expected, h.first_lsn - 1, w->last, where_prev, w->last_scan.end,
					  w->last_scan.stop_reason ? w->last_scan.stop_reason : "its end", order[k], where,
					  h.first_lsn, j->cfg.directory);
				return -EUCLEAN;
			}
			/* never acknowledged, all of it: zeroed, so that no later recovery finds it */
			r = segment_zero_tail(j, order[k], 0);
			if (r < 0)
				return log_error_errno(r, "Journal '%s': cannot zero segment %u: %m", j->cfg.name,
						       order[k]);
			snprintf(w->split, sizeof(w->split),
				 "; cut an unacknowledged tail split across a segment switch: records %" PRIu64
				 "..%" PRIu64 " never reached the disk, the %" PRIu64 " after them in segment %u dropped",
				 expected, h.first_lsn - 1, scan.records, order[k]);
			*s = (struct segment){ .fd = s->fd, .shared = s->shared };
			w->n--;
			break;
		}
		s->end_lsn = scan.next_lsn;
		expected = scan.next_lsn;
		w->records += scan.records;
		w->last = order[k];
		w->last_scan = scan;
	}
	w->next_lsn = expected;
	return 0;
}

/*
 * Find where the journal ends: order the used segments by generation; after a clean stop, where
 * its marker says (clean_trusted), reading no record. Else make them durable, walk their records
 * and require each segment to start where the previous one ended. The first record that does not
 * check out ends the journal; unless a clean stop ended it there, the rest of that
 * segment is zeroed so that no record written after it (never acknowledged) can ever be mistaken
 * for a valid one. What it found is the status's recovery text: an end of the log after a clean
 * stop or a crash is logged as information, a torn or corrupt record of the journal's last use as
 * a warning, with its LSN, its place and what it means.
 */
int journal_recover(struct journal *j)
{
	unsigned order[SEGMENTS_MAX], n, clean_seg = 0;
	uint64_t clean_off = 0, clean_lsn = 0, end;
	struct recover_walk w;
	const struct jformat_scan *scan = &w.last_scan;
	char where[PATH_MAX], ending[120];
	bool clean, clean_end;
	int r;

	r = recover_headers(j);
	if (r < 0)
		return r;
	/* a valid header has a generation, and only those were set: the segments just found */
	n = segments_in_order(j, order);
	clean = clean_take(j, &clean_seg, &clean_off, &clean_lsn);
	if (n == 0) {
		r = recover_sync(j, order, 0);
		if (r < 0)
			return r;
		j->next_lsn = 1;
		j->cur = j->cfg.segments - 1; /* the first batch opens segment 0 */
		j->cur_off = j->cfg.segment_size;
		snprintf(j->st.recovery, sizeof(j->st.recovery), "new journal");
		w = (struct recover_walk){ .next_lsn = 1 };
		goto done;
	}
	/*
	 * After a clean stop the marker says where the journal ends, and its records are not read:
	 * a restart's start does not grow with the journal (a walk is 5 ms for 32 MiB here), and a
	 * take-over's next life has nothing to walk in the clients' pause. Else (a crash, or a
	 * marker that does not hold) every record is walked; after a clean stop only zeros or what
	 * an earlier use of the file left follow the last one.
	 */
	if (clean && clean_trusted(j, order, n, clean_seg, clean_off, clean_lsn)) {
		recover_trusted(j, order, n, clean_off, clean_lsn, &w);
		clean_end = true;
	} else {
		r = recover_walk(j, order, n, &w);
		if (r < 0)
			return r;
		clean_end = clean && clean_seg == w.last && clean_off == scan->end && clean_lsn == w.next_lsn;
	}
	/*
	 * A clean stop synced everything its life wrote, and that life's recovery what lives before
	 * it left (or they stopped clean too): only where the journal did not end clean is what the
	 * walk trusted made durable here (and clean_take synced the directory). A take-over's next
	 * life skips three or so syncs of 0.1-0.4 ms each in the clients' pause.
	 */
	if (!clean_end) {
		r = recover_sync(j, order, w.n);
		if (r < 0)
			return r;
	}
	j->cur = w.last;
	j->cur_off = end = scan->end;
	j->next_lsn = w.next_lsn;
	/*
	 * After a crash, whatever stopped the walk (zeros, what an earlier use left, a torn record), a
	 * later batch may have reached the disk while an earlier one did not: its records lie further
	 * on, never acknowledged, and would be taken for a later life's own once that life's records
	 * line up with them. Zero them all.
	 */
	if (scan->stop_err && !clean_end) {
		r = segment_zero_tail(j, j->cur, end);
		if (r < 0)
			return log_error_errno(r, "Journal '%s': cannot zero segment %u after offset %" PRIu64 ": %m",
					       j->cfg.name, j->cur, end);
	}
	if (j->cfg.direct && j->cur_off % JFORMAT_BLOCK) {
		r = journal_marker_sync(j);
		if (r == 0)
			r = segment_pad_block(j, j->cur, j->cur_off, j->next_lsn);
		if (r < 0)
			return log_error_errno(r, "Journal '%s': cannot pad the block at offset %" PRIu64 " of segment %u: %m",
					       j->cfg.name, j->cur_off, j->cur);
	}
	if (clean_end)
		snprintf(ending, sizeof(ending), "; clean end%s", w.walked ? "" : ", not walked");
	else if (scan->stop_err == -EINVAL)
		snprintf(ending, sizeof(ending), "; cut a torn record (LSN %" PRIu64 " at segment %u offset %" PRIu64 "): %s",
			 w.next_lsn, j->cur, end, scan->stop_reason);
	else
		snprintf(ending, sizeof(ending), "; no clean stop: ends at segment %u offset %" PRIu64 " (%s)", j->cur, end,
			 scan->stop_err ? scan->stop_reason : "the segment's end");
	snprintf(j->st.recovery, sizeof(j->st.recovery), "%" PRIu64 " records (LSN %" PRIu64 "..%" PRIu64 ") in %u segments",
		 w.records, j->segs[order[0]].first_lsn, j->next_lsn - 1, w.n);
	text_append(j->st.recovery, sizeof(j->st.recovery), "%s%s", ending, w.split);
	segment_where(j, j->cur, where, sizeof(where));
	if (!clean_end && scan->stop_err == -EINVAL)
		log_warning("Journal '%s': record %" PRIu64 " at offset %" PRIu64 " of segment %u ('%s') is torn or corrupt "
			    "(%s): the journal ends before it, with %" PRIu64 " records (LSN %" PRIu64 "..%" PRIu64 "), "
			    "and the rest of the segment is zeroed. After a power failure this is the last batch being "
			    "written, never acknowledged, and nothing is to be done; otherwise the device may have damaged "
			    "it: check it (dmesg, smartctl)",
			    j->cfg.name, w.next_lsn, end, j->cur, where, scan->stop_reason, w.records,
			    j->segs[order[0]].first_lsn, j->next_lsn - 1);
	if (w.split[0])
		log_warning("Journal '%s': recovered %s", j->cfg.name, j->st.recovery);
done:
	j->st.recovered_records = w.records;
	j->durable_lsn = j->next_lsn - 1;
	/* the truncation point the clients last declared still holds */
	j->retain_lsn = MIN(retain_load(j), j->next_lsn);
	j->st.retain_lsn = j->retain_lsn;
	return 0;
}
