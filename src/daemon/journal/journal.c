/* SPDX-License-Identifier: MIT */
/*
 * journal.c - see journal.h. This file is the journal's API: journal_open (the directory,
 * recovery, the I/O backend, the flusher thread), the writers (a ring, a doorbell and the
 * uid's wake page each), truncation, the segments handed to readers, stats, and journal_close.
 *
 * The rest lives beside it: journal_flusher.c is the flusher thread (gather, the flush rule,
 * publish, wake-ups), journal_segments.c the files (segments, recovery, marker files), and
 * journal_internal.h the structs they share and the locking rules.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jformat.h"
#include "jio.h"
#include "journal.h"
#include "journal_internal.h"
#include "jring.h"
#include "log.h"
#include "ofd.h"
#include "safedir.h"
#include "memfd.h"
#include "size.h"
#include "util.h"

#define WRITERS_MAX 1024 /* per journal */

const char *journal_name(const struct journal *j)
{
	return j->cfg.name;
}

/* --- writers ---------------------------------------------------------------------------- */

/* A writer's reference to its uid's wake group, found or made (event loop thread). */
static int group_get(struct journal *j, uid_t uid, struct wake_group **ret)
{
	struct wake_group *g;
	char name[64];
	void *map;
	int fd;

	pthread_mutex_lock(&j->lock);
	LIST_FOREACH(g, &j->groups, link)
		if (g->uid == uid) {
			g->refs++;
			break;
		}
	pthread_mutex_unlock(&j->lock);
	if (g) {
		*ret = g;
		return 0;
	}
	/* only the event loop makes groups: nobody adds this uid's while the lock is let go */
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	snprintf(name, sizeof(name), "hugepool-journal-wake:%s", j->cfg.name);
	fd = sealed_memfd(name, 0, JRING_WAKE_SIZE, PROT_READ | PROT_WRITE, &map);
	if (fd < 0) {
		free(g);
		return fd;
	}
	*g = (struct wake_group){ .uid = uid, .refs = 1, .fd = fd, .wake = map };
	pthread_mutex_lock(&j->lock);
	LIST_INSERT_HEAD(&j->groups, g, link);
	pthread_mutex_unlock(&j->lock);
	*ret = g;
	return 0;
}

/* Under lock, or with the flusher stopped: the flusher walks the groups to wake them. */
static void group_put(struct wake_group *g)
{
	if (--g->refs)
		return;
	LIST_REMOVE(g, link);
	munmap(g->wake, JRING_WAKE_SIZE);
	close(g->fd);
	free(g);
}

void writer_free(struct journal_writer *w)
{
	if (w->doorbell >= 0) {
		/* the client still holds the eventfd: its registration would outlive our fd */
		epoll_ctl(w->j->epfd, EPOLL_CTL_DEL, w->doorbell, NULL);
		close(w->doorbell);
	}
	if (w->group)
		group_put(w->group);
	if (w->hdr)
		munmap(w->hdr, w->map_len);
	free(w);
}

int journal_writer_new(struct journal *j, uid_t uid, pid_t pid, uint64_t ring_size,
		       struct journal_writer **ret, int *ret_ring_fd, int *ret_doorbell_fd, int *ret_wake_fd)
{
	_cleanup_close_ int ring_fd = -1, wake_fd = -1, doorbell_fd = -1;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	struct journal_writer *w;
	char name[64];
	void *map;
	int r = 0;

	if (ring_size == 0)
		ring_size = j->cfg.ring_size;
	if (ring_size < JRING_MIN_SIZE || ring_size > JRING_MAX_SIZE || (ring_size & (ring_size - 1)))
		return -EINVAL;
	pthread_mutex_lock(&j->lock);
	if (j->nwriters >= WRITERS_MAX)
		r = -EUSERS;
	else if (j->st.state == JOURNAL_FAILED)
		r = j->st.error;
	pthread_mutex_unlock(&j->lock);
	if (r < 0)
		return r;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->j = j;
	w->doorbell = -1;
	r = group_get(j, uid, &w->group);
	if (r < 0)
		goto out_free;
	snprintf(name, sizeof(name), "hugepool-journal:%s", j->cfg.name);
	ring_fd = sealed_memfd(name, 0, JRING_HDR_SIZE + ring_size, PROT_READ | PROT_WRITE, &map);
	if (ring_fd < 0) {
		r = ring_fd;
		goto out_free;
	}
	w->hdr = map;
	w->map_len = JRING_HDR_SIZE + ring_size;
	wake_fd = fcntl(w->group->fd, F_DUPFD_CLOEXEC, 0);
	if (wake_fd < 0) {
		r = -errno;
		goto out_free;
	}
	/*
	 * The doorbell: only this writer's client can ring it, drain it or change its flags, and
	 * the daemon never reads or writes it (edge-triggered epoll sees every write), so whatever
	 * the client does to it delays nobody else and cannot block the flusher.
	 */
	w->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->doorbell < 0 || epoll_ctl(j->epfd, EPOLL_CTL_ADD, w->doorbell, &ev) < 0) {
		r = -errno;
		if (w->doorbell >= 0)
			close(w->doorbell);
		w->doorbell = -1;
		goto out_free;
	}
	doorbell_fd = fcntl(w->doorbell, F_DUPFD_CLOEXEC, 0);
	if (doorbell_fd < 0) {
		r = -errno;
		goto out_free;
	}
	w->data = (uint8_t *)w->hdr + JRING_HDR_SIZE;
	w->size = ring_size;
	w->uid = uid;
	w->pid = pid;
	/* an entry's records must fit one batch on disk (the padding record included) */
	w->max_entry = j->cfg.max_batch_bytes - (j->cfg.direct ? JFORMAT_REC_HDR : 0);
	jring_init(w->hdr, ring_size, w->max_entry);
	pthread_mutex_lock(&j->lock);
	jring_set_durable_lsn(w->hdr, j->durable_lsn);
	/* the journal may have failed since the check above: journal_fail marked only the rings it
	 * knew, so this one learns it here, under the same lock */
	if (j->st.state == JOURNAL_FAILED)
		jring_set_error(w->hdr, j->st.error);
	TAILQ_INSERT_TAIL(&j->writers, w, link);
	j->nwriters++;
	j->st.writers = j->nwriters;
	pthread_mutex_unlock(&j->lock);
	*ret = w;
	*ret_ring_fd = TAKE_FD(ring_fd);
	*ret_doorbell_fd = TAKE_FD(doorbell_fd);
	*ret_wake_fd = TAKE_FD(wake_fd);
	return 0;
out_free:
	if (w->group) {
		/* the flusher walks the groups: let go of ours under its lock */
		pthread_mutex_lock(&j->lock);
		group_put(w->group);
		pthread_mutex_unlock(&j->lock);
		w->group = NULL;
	}
	writer_free(w);
	return r;
}

void journal_writer_close(struct journal_writer *w)
{
	struct journal *j = w->j;
	uint64_t one = 1;

	pthread_mutex_lock(&j->lock);
	w->closed = true;
	/* a client word, read once: gather_ring checks it against the ring like any tail */
	w->end_tail = jring_load_tail(w->hdr);
	pthread_mutex_unlock(&j->lock);
	/* let the flusher take what was committed and free the ring */
	if (write(j->doorbell, &one, sizeof(one)) < 0) {
		/* the counter is far from overflowing */
	}
}

unsigned journal_writers_of(struct journal *j, uid_t uid)
{
	struct journal_writer *w;
	unsigned n = 0;

	pthread_mutex_lock(&j->lock);
	TAILQ_FOREACH(w, &j->writers, link)
		n += w->uid == uid;
	pthread_mutex_unlock(&j->lock);
	return n;
}

uint64_t journal_writer_ring_size(const struct journal_writer *w)
{
	return w->size;
}

/* --- open, close, truncate, read, stats ------------------------------------------------- */

/* CPUs the writers and the flusher share (the machine's: clients run on it too). */
static unsigned online_cpus(void)
{
	long c = sysconf(_SC_NPROCESSORS_ONLN);

	return c > 0 ? (unsigned)c : 1u;
}

/*
 * journal_open's steps, in order (open_steps). Each takes the journal as the steps before it left
 * it, logs its own failure once, and returns 0 or -errno; journal_close undoes whatever any of
 * them did. `fault` is what HUGEPOOLD_FAULT_INJECT armed for this journal (NULL: nothing), and
 * the steps that use it consume it.
 */

/* Whoever may write the directory, or one on the way, may plant names in it: only the daemon's
 * uid may (safedir.h), and nobody else may write it. */
static int open_directory(struct journal *j, const char **fault)
{
	const struct config_journal *cfg = &j->cfg;
	char why[PATH_MAX + 160];
	struct stat st;

	(void)fault;
	j->dirfd = safedir_open(cfg->directory, SAFEDIR_CREATE | SAFEDIR_OWN, why, sizeof(why));
	if (j->dirfd < 0)
		return log_error_errno(j->dirfd, "Journal '%s': cannot use directory '%s': %s; refusing it", cfg->name,
				       cfg->directory, why);
	if (fstat(j->dirfd, &st) < 0)
		return log_error_errno(errno, "Journal '%s': cannot open directory '%s': %m", cfg->name, cfg->directory);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return log_error_errno(-EPERM,
				       "Journal '%s': directory '%s' has mode %04o, writable by group or others; refusing "
				       "it (chmod 0700)",
				       cfg->name, cfg->directory, (unsigned)(st.st_mode & 07777));
	return 0;
}

/* The segment files, recovered, and the segments readers held when the last life ended.
 * Each logs its own failure (journal_segments.c). */
static int open_segments(struct journal *j, const char **fault)
{
	int r;

	(void)fault;
	r = segment_open_all(j);
	if (r >= 0)
		r = journal_recover(j);
	if (r >= 0)
		r = segment_leave_readers(j);
	return r < 0 ? r : 0;
}

/* The I/O backend asked for, or the one it falls back to (said in the log and the status). */
static int open_backend(struct journal *j, const char **fault)
{
	const struct config_journal *cfg = &j->cfg;
	char note[160] = "";
	int r;

	(void)fault;
	r = jio_open((enum jio_kind)cfg->backend, cfg->direct, &j->io, note, sizeof(note));
	if (r < 0)
		return log_error_errno(r, "Journal '%s': no I/O backend could be set up%s%s%s: %m", cfg->name,
				       note[0] ? " (" : "", note, note[0] ? ")" : "");
	if (note[0])
		log_notice("Journal '%s': %s; using %s", cfg->name, note, j->io->ops->name);
	snprintf(j->st.backend, sizeof(j->st.backend), "%s", j->io->ops->name);
	snprintf(j->st.note, sizeof(j->st.note), "%s", note);
	return 0;
}

/* backend = auto with a queue to compare with: the controller that measures which way more
 * writers than CPUs go (journal_path.h), inline first, which needs no drain to start; the tests'
 * choice of path instead ("path:SPEC[,FAULT]", jpath_set_test). */
static int open_path_controller(struct journal *j, const char **fault)
{
	const struct config_journal *cfg = &j->cfg;
	const char *spec = *fault;
	int r;

	j->st.cpus = online_cpus();
	j->adaptive = cfg->backend == JOURNAL_BACKEND_AUTO && j->io->ops->queue;
	j->st.adaptive = j->adaptive;
	jpath_init(&j->path, JPATH_INLINE);
	if (jio_queues(j->io) > 1)
		jpath_add_queue(&j->path);
	if (!spec || strncmp(spec, "path:", 5))
		return 0;
	r = j->adaptive ? jpath_set_test(&j->path, spec + 5, fault) : -EINVAL;
	if (r < 0)
		return log_error_errno(r, "Journal '%s': bad path for the tests (HUGEPOOLD_FAULT_INJECT, which needs backend = "
				       "auto with io_uring or libaio): '%s'", cfg->name, spec);
	log_warning("Journal '%s': path chosen by the tests: %s", cfg->name, spec);
	if (!**fault)
		*fault = NULL;
	return 0;
}

/* The tests' fault in the I/O backend (jio_set_fault), if one is left to arm. */
static int open_faults(struct journal *j, const char **fault)
{
	int r;

	if (!*fault)
		return 0;
	r = jio_set_fault(j->io, *fault);
	if (r < 0)
		return log_error_errno(r, "Journal '%s': bad fault to inject (HUGEPOOLD_FAULT_INJECT): '%s'", j->cfg.name,
				       *fault);
	log_warning("Journal '%s': fault injection armed: %s", j->cfg.name, *fault);
	return 0;
}

/* The batch buffers (block-aligned for O_DIRECT) and the segment header's block. */
static int open_buffers(struct journal *j, const char **fault)
{
	(void)fault;
	for (unsigned i = 0; i < NBATCH; i++) {
		struct batch *b = &j->batches[i];

		b->cap = j->cfg.max_batch_bytes + JFORMAT_BLOCK;
		if (posix_memalign((void **)&b->buf, JFORMAT_BLOCK, b->cap))
			return log_oom("a journal's batch buffers (max_batch_bytes)");
		/* the padding record must still fit after max_batch_bytes of records */
		b->cap = j->cfg.max_batch_bytes;
	}
	if (posix_memalign((void **)&j->hdr_block, JFORMAT_BLOCK, JFORMAT_BLOCK))
		return log_oom("a journal's header block");
	return 0;
}

/* What wakes the flusher: the daemon's doorbell and the epoll set of the writers' doorbells. */
static int open_wakeups(struct journal *j, const char **fault)
{
	(void)fault;
	j->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (j->doorbell < 0)
		return log_error_errno(errno, "Journal '%s': cannot create its doorbell (eventfd): %m", j->cfg.name);
	j->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (j->epfd < 0)
		return log_error_errno(errno, "Journal '%s': cannot create its flusher's epoll: %m", j->cfg.name);
	return 0;
}

/* The status's first figures, and the flusher thread (journal_flusher.c). */
static int open_flusher(struct journal *j, const char **fault)
{
	int r;

	(void)fault;
	batch_reset(j, &j->batches[0]); /* at the LSN recovery found */
	j->st.segments = j->cfg.segments;
	j->st.segment_size = j->cfg.segment_size;
	j->st.next_lsn = j->next_lsn;
	j->st.durable_lsn = j->durable_lsn;
	r = -pthread_create(&j->thread, NULL, flusher_main, j);
	if (r < 0)
		return log_error_errno(r, "Journal '%s': cannot start its flusher thread: %m", j->cfg.name);
	j->thread_started = true;
	return 0;
}

/*
 * The steps in two parts: those that need no stopped running life (journal_prepare: a take-over's
 * next life runs them while it prepares), and those that do (journal_open_prepared, after GO).
 */
static int (*const prepare_steps[])(struct journal *j, const char **fault) = {
	open_directory, open_backend, open_path_controller, open_faults, open_buffers, open_wakeups,
};
static int (*const finish_steps[])(struct journal *j, const char **fault) = {
	open_segments,
	open_flusher,
};

static int run_steps(struct journal *j, int (*const *steps)(struct journal *, const char **), size_t n,
		     const char **fault)
{
	for (size_t i = 0; i < n; i++) {
		int r = steps[i](j, fault);

		if (r < 0)
			return r;
	}
	return 0;
}

int journal_prepare(const struct config_journal *cfg, const char *fault, struct journal **ret)
{
	struct journal *j = calloc(1, sizeof(*j));
	int r;

	if (!j)
		return log_oom("a journal");
	j->cfg = *cfg;
	j->dirfd = j->doorbell = j->epfd = -1;
	TAILQ_INIT(&j->writers);
	LIST_INIT(&j->groups);
	pthread_mutex_init(&j->lock, NULL);
	j->segs = calloc(cfg->segments, sizeof(*j->segs));
	if (!j->segs) {
		journal_close(j);
		return log_oom("a journal's segments");
	}
	for (unsigned i = 0; i < cfg->segments; i++)
		j->segs[i].fd = -1;
	r = run_steps(j, prepare_steps, ARRAY_SIZE(prepare_steps), &fault);
	if (r < 0) {
		journal_close(j);
		return r;
	}
	*ret = j;
	return 0;
}

int journal_open_prepared(struct journal *j)
{
	const char *fault = NULL;
	char size[32];
	int r;

	r = run_steps(j, finish_steps, ARRAY_SIZE(finish_steps), &fault);
	if (r < 0)
		return r;
	log_info("Journal '%s' in '%s': %u segments of %s, backend %s%s; recovered %s", j->cfg.name, j->cfg.directory,
		 j->cfg.segments, size_format(j->cfg.segment_size, size, sizeof(size)), j->io->ops->name,
		 j->cfg.direct ? " (O_DIRECT)" : "", j->st.recovery);
	return 0;
}

int journal_open(const struct config_journal *cfg, const char *fault, struct journal **ret)
{
	struct journal *j;
	int r = journal_prepare(cfg, fault, &j);

	if (r < 0)
		return r;
	r = journal_open_prepared(j);
	if (r < 0) {
		journal_close(j);
		return r;
	}
	*ret = j;
	return 0;
}

void journal_stop_begin(struct journal *j, bool handover)
{
	uint64_t one = 1;

	if (!j || !j->thread_started)
		return;
	pthread_mutex_lock(&j->lock);
	if (!j->stop)
		j->mark_durable = !handover;
	j->stop = true;
	pthread_mutex_unlock(&j->lock);
	if (write(j->doorbell, &one, sizeof(one)) < 0) {
		/* cannot fail on a fresh eventfd */
	}
}

void journal_stop(struct journal *j, bool handover)
{
	if (!j || j->stopped)
		return;
	j->stopped = true;
	if (j->thread_started) {
		journal_stop_begin(j, handover);
		pthread_join(j->thread, NULL); /* it marked the end clean */
		j->thread_started = false;
	}
	for (unsigned i = 0; j->segs && i < j->cfg.segments; i++) {
		if (j->segs[i].fd >= 0)
			close(j->segs[i].fd);
		j->segs[i].fd = -1;
	}
	if (j->dirfd >= 0)
		close(j->dirfd);
	j->dirfd = -1;
}

void journal_close(struct journal *j)
{
	struct journal_writer *w;

	if (!j)
		return;
	journal_stop(j, false);
	while ((w = TAILQ_FIRST(&j->writers))) {
		TAILQ_REMOVE(&j->writers, w, link);
		writer_free(w);
	}
	for (unsigned i = 0; i < NBATCH; i++) {
		free(j->batches[i].buf);
		free(j->batches[i].refs);
	}
	jio_close(j->io);
	free(j->hdr_block);
	if (j->doorbell >= 0)
		close(j->doorbell);
	if (j->epfd >= 0)
		close(j->epfd);
	pthread_mutex_destroy(&j->lock);
	free(j->segs);
	free(j);
}

static void *close_thread(void *arg)
{
	journal_close(arg);
	return NULL;
}

void journal_close_all(struct journal **js, unsigned n)
{
	pthread_t t[CONFIG_JOURNALS_MAX];
	bool started[CONFIG_JOURNALS_MAX] = { false };

	n = MIN(n, (unsigned)CONFIG_JOURNALS_MAX);
	for (unsigned i = 1; i < n; i++)
		started[i] = js[i] && pthread_create(&t[i], NULL, close_thread, js[i]) == 0;
	for (unsigned i = 0; i < n; i++) {
		if (started[i])
			pthread_join(t[i], NULL);
		else
			journal_close(js[i]);
	}
}

void journal_truncate(struct journal *j, uint64_t lsn)
{
	uint64_t one = 1;

	pthread_mutex_lock(&j->lock);
	if (lsn > j->durable_lsn + 1)
		lsn = j->durable_lsn + 1;
	if (lsn > j->retain_lsn) {
		j->retain_lsn = lsn;
		j->retain_dirty = true;
	}
	j->st.retain_lsn = j->retain_lsn;
	pthread_mutex_unlock(&j->lock);
	/* a full journal may go on now */
	if (write(j->doorbell, &one, sizeof(one)) < 0) {
		/* cannot overflow */
	}
}

int journal_read_segments(struct journal *j, uint64_t from_lsn, unsigned max, int *fds,
			  struct journal_segment_info *infos, unsigned *ret_n, uint64_t *ret_durable_lsn)
{
	unsigned order[SEGMENTS_MAX], n, k = 0;
	int r = 0;

	pthread_mutex_lock(&j->lock);
	n = segments_in_order(j, order);
	for (unsigned x = 0; x < n && k < max; x++) {
		struct segment *s = &j->segs[order[x]];
		uint64_t end = order[x] == j->cur ? j->next_lsn : s->end_lsn;
		int fd;

		if (end <= from_lsn)
			continue; /* everything in it is below from_lsn */
		/* the file the daemon writes, not whatever its name leads to now, in a description of
		 * the reader's own: the daemon can tell when every reader has let go of it */
		fd = ofd_reopen(s->fd, O_RDONLY);
		if (fd < 0) {
			r = fd;
			break;
		}
		s->shared = true;
		fds[k] = fd;
		infos[k++] = (struct journal_segment_info){ s->generation, s->first_lsn, j->cfg.segment_size };
	}
	*ret_durable_lsn = j->durable_lsn;
	pthread_mutex_unlock(&j->lock);
	if (r < 0) {
		while (k)
			close(fds[--k]);
		return r;
	}
	*ret_n = k;
	return 0;
}

const char *journal_path_words(const struct journal *j, char *buf, size_t len)
{
	return jpath_describe(&j->path, jio_queue_name(j->io, 0), jio_queue_name(j->io, 1), buf, len);
}

/* The path figures of status from the controller, and why batches go the way they do (under lock). */
static void path_status(struct journal *j)
{
	const char *queue = jio_queue_name(j->io, 0);
	char more[200];

	if (j->adaptive) {
		const struct jpath_ctl *c = &j->path;

		j->st.path_changes = c->changes;
		j->st.inline_rate = (uint64_t)c->load.rate[JPATH_INLINE];
		j->st.queued_rate = (uint64_t)MAX(c->load.rate[JPATH_QUEUED], c->load.rate[JPATH_QUEUED_ALT]);
		snprintf(j->st.chosen, sizeof(j->st.chosen), "%s", c->decisions ? jpath_name(c->load.chosen) : "");
		journal_path_words(j, more, sizeof(more));
	} else if (j->cfg.backend == JOURNAL_BACKEND_AUTO) {
		snprintf(more, sizeof(more), "queued through %s, which writes and syncs inside its submit (auto found no "
			 "other backend)", queue);
	} else {
		snprintf(more, sizeof(more), "queued through %s, as configured (backend = %s; auto would measure)", queue,
			 queue);
	}
	snprintf(j->st.path_why, sizeof(j->st.path_why), "up to %u active writers (the CPUs): inline-spin; more: %s",
		 j->st.cpus, more);
}

void journal_get_stats(struct journal *j, struct journal_stats *ret)
{
	unsigned used = 0;

	pthread_mutex_lock(&j->lock);
	for (unsigned i = 0; i < j->cfg.segments; i++)
		used += j->segs[i].generation != 0 &&
			(i == j->cur || j->segs[i].end_lsn > j->retain_lsn);
	j->st.segments_used = used;
	j->st.next_lsn = j->next_lsn;
	path_status(j);
	*ret = j->st;
	pthread_mutex_unlock(&j->lock);
}
