/* SPDX-License-Identifier: MIT */
/*
 * spill_warm.c - spill files and pages across a warm restart (hugepoold(8), WARM RESTART): each
 * file the daemon holds (its own fd of it) and each connection's counters page is kept in the fd
 * store, with a record in the warm state (warm.h: whose, which id the client knows it by, its
 * charge) kept current as charges change; the next life takes them over with the connection, so
 * a client's files, their charges and its page live on, and releases the files of connections it
 * does not serve on as at any disconnect. The accounting itself is spill.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdstore.h"
#include "log.h"
#include "spill_internal.h"
#include "util.h"
#include "warm.h"


void spill_set_warm(struct spill *sp, struct warm *w)
{
	sp->warm = w;
}

void spill_seal(struct spill *sp)
{
	sp->sealed = true;
}

bool spill_owner_kept(const struct spill_owner *o)
{
	if (o->counters.page && o->page_kept.slot < 0)
		return false;
	for (unsigned i = 0; i < o->nfiles; i++)
		if (o->files[i].kept.slot < 0)
			return false;
	return true;
}

/* Keep fd in the store under its name and take a record for it; kept->slot -1 if either fails. */
static void keep_fd(struct spill *sp, struct spill_kept *kept, bool page, int fd)
{
	char name[WARM_NAME_MAX];

	kept->slot = -1;
	if (!sp->warm || sp->sealed)
		return;
	warm_name(page ? WARM_NAME_SPAGE : WARM_NAME_SPILL, kept->fd_id, name);
	if (fdstore_add(name, fd, FDSTORE_CLIENT) < 0)
		return;
	kept->slot = warm_spill_take(sp->warm);
	if (kept->slot < 0)
		fdstore_remove(name);
}

static void record(struct spill *sp, const struct spill_kept *kept, const struct warm_spill *ws)
{
	if (kept->slot >= 0 && sp->warm && !sp->sealed)
		warm_spill_set(sp->warm, kept->slot, ws);
}

void spill_keep_update(struct spill *sp, const struct spill_owner *o, const struct spill_file *f)
{
	struct warm_spill ws = { .state = WARM_SPILL_FILE, .uid = o->uid, .pid = o->pid, .conn_id = o->conn_id,
				 .file_id = f->id, .charged = f->charged, .fd_id = f->kept.fd_id };

	record(sp, &f->kept, &ws);
}

void spill_keep_file(struct spill *sp, const struct spill_owner *o, struct spill_file *f)
{
	f->kept.fd_id = warm_new_id();
	keep_fd(sp, &f->kept, false, f->fd);
	spill_keep_update(sp, o, f);
}

void spill_keep_page(struct spill *sp, struct spill_owner *o, int fd)
{
	struct warm_spill ws = { .state = WARM_SPILL_PAGE, .uid = o->uid, .pid = o->pid, .conn_id = o->conn_id };

	o->page_kept.fd_id = ws.fd_id = warm_new_id();
	keep_fd(sp, &o->page_kept, true, fd);
	record(sp, &o->page_kept, &ws);
}

void spill_keep_linger(struct spill *sp, const struct spill_linger *l)
{
	struct warm_spill ws = { .state = WARM_SPILL_LINGER, .uid = l->acct->uid, .pid = l->pid,
				 .fd_id = l->kept.fd_id };

	record(sp, &l->kept, &ws);
}

void spill_keep_forget(struct spill *sp, struct spill_kept *kept, bool page)
{
	char name[WARM_NAME_MAX];

	if (kept->slot < 0 || !sp->warm || sp->sealed)
		return;
	warm_name(page ? WARM_NAME_SPAGE : WARM_NAME_SPILL, kept->fd_id, name);
	fdstore_remove(name);
	warm_spill_release(sp->warm, kept->slot);
	kept->slot = -1;
}

/* --- taking over what a previous life kept ------------------------------------------------ */

/* Is fd a spill file of this daemon's: a nameless regular file of the spill directory, open read-write? */
static bool is_spill_file(const struct spill *sp, int fd)
{
	struct stat st, dir;
	int fl = fcntl(fd, F_GETFL);

	return fl >= 0 && (fl & O_ACCMODE) == O_RDWR && fstat(fd, &st) == 0 && fstat(sp->dirfd, &dir) == 0 &&
	       S_ISREG(st.st_mode) && st.st_nlink == 0 && st.st_dev == dir.st_dev;
}

/* Take the fd of record ws out of the hand-over, or -1. */
static int take(const struct warm_spill *ws, struct fdstore_fd *fds, unsigned nfds)
{
	char name[WARM_NAME_MAX];

	warm_name(ws->state == WARM_SPILL_PAGE ? WARM_NAME_SPAGE : WARM_NAME_SPILL, ws->fd_id, name);
	return fdstore_take(fds, nfds, name);
}

/* A file fd of o's as record ws says: counted, charged, kept. */
static int adopt_file(struct spill *sp, struct spill_owner *o, const struct warm_spill *ws, int fd)
{
	struct spill_file *f;

	if (!o->acct && !(o->acct = spill_uid_get(sp, o->uid)))
		return -ENOMEM;
	if (ARRAY_RESERVE_ONE(o->files, o->nfiles, o->cap, 8) < 0)
		return -ENOMEM;
	f = &o->files[o->nfiles++];
	*f = (struct spill_file){ .id = ws->file_id, .fd = fd, .kept = { .slot = -1, .fd_id = ws->fd_id } };
	o->acct->files++;
	sp->files++;
	spill_charge_add(sp, o, f, ws->charged);
	spill_owner_link(sp, o);
	/* ids stay unique on the connection: new ones come after every id handed out before */
	if (ws->file_id > sp->next_id)
		sp->next_id = ws->file_id;
	keep_fd(sp, &f->kept, false, fd);
	spill_keep_update(sp, o, f);
	return 0;
}

int spill_adopt_owner(struct spill *sp, struct spill_owner *o, uint64_t conn_id, const struct warm_prev *prev,
		      struct fdstore_fd *fds, unsigned nfds)
{
	const struct warm_ref *refs = NULL;
	uint32_t n = prev ? warm_prev_spills(prev, conn_id, &refs) : 0;
	int ret = 0;

	o->conn_id = conn_id;
	for (uint32_t i = 0; i < n; i++) {
		const struct warm_spill *ws = &prev->spills[refs[i].record];
		int fd;

		fd = take(ws, fds, nfds);
		if (fd < 0) {
			ret = -EBADF;
			continue;
		}
		if (ws->state == WARM_SPILL_PAGE && ws->uid == o->uid && !o->counters.page &&
		    counters_adopt(&o->counters, fd)) {
			o->page_kept = (struct spill_kept){ .slot = -1, .fd_id = ws->fd_id };
			spill_owner_link(sp, o);
			keep_fd(sp, &o->page_kept, true, fd);
			record(sp, &o->page_kept, ws);
			continue;
		}
		if (ws->state == WARM_SPILL_FILE && ws->uid == o->uid && is_spill_file(sp, fd)) {
			int r = adopt_file(sp, o, ws, fd);

			if (r == 0)
				continue;
			ret = r;
		} else {
			ret = -EBADF;
		}
		close(fd);
	}
	return ret;
}

void spill_adopt_rest(struct spill *sp, const struct warm_prev *prev, struct fdstore_fd *fds, unsigned nfds)
{
	unsigned lingering = 0, released = 0;

	/* the records in use only (warm_prev's indexes): most of a state is free records */
	for (uint32_t i = 0; prev && i < prev->nlingering; i++) {
		const struct warm_spill *ws = &prev->spills[prev->lingering[i]];
		struct spill_kept kept = { .slot = -1, .fd_id = ws->fd_id };
		struct spill_uid *acct;
		int fd = take(ws, fds, nfds);

		if (fd < 0 || !is_spill_file(sp, fd) || !(acct = spill_uid_get(sp, ws->uid))) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		keep_fd(sp, &kept, false, fd);
		acct->files++;
		sp->files++;
		if (spill_linger_add(sp, fd, acct, ws->pid, &kept)) {
			lingering++;
		} else {
			spill_keep_forget(sp, &kept, false);
			close(fd);
			acct->files--;
			sp->files--;
		}
		spill_uid_put(sp, acct);
	}
	for (uint32_t i = 0; prev && i < prev->nspilled; i++) {
		/* a connection the new life does not serve on: its files end as at a disconnect */
		const struct warm_spill *ws = &prev->spills[prev->spilled[i].record];
		struct spill_owner o;
		char name[WARM_NAME_MAX];

		warm_name(ws->state == WARM_SPILL_PAGE ? WARM_NAME_SPAGE : WARM_NAME_SPILL, ws->fd_id, name);
		if (!fdstore_has(fds, nfds, name))
			continue; /* taken with its connection, or gone */
		spill_owner_init(sp, &o, ws->uid, ws->pid);
		(void)spill_adopt_owner(sp, &o, ws->conn_id, prev, fds, nfds);
		released += o.nfiles;
		spill_owner_release(sp, &o);
	}
	if (lingering || released)
		log_info("Spill: took over %u lingering files; released %u files of connections not served on",
			 lingering, released);
	/* what the clients wrote while no daemon looked is audited soon, a system call a file, but
	 * not before the requests that waited for this life are served */
	if (sp->files)
		sp->next_audit = now_ns() + 10000000ull;
}

/* Forget kept here only (the object lives on under its name) and give fd back to fds, by name. */
static void give_back(struct spill *sp, struct spill_kept *kept, bool page, int fd, struct fdstore_fd *fds,
		      unsigned nfds)
{
	char name[WARM_NAME_MAX];

	warm_name(page ? WARM_NAME_SPAGE : WARM_NAME_SPILL, kept->fd_id, name);
	if (kept->slot >= 0) {
		fdstore_forget(name);
		if (sp->warm && !sp->sealed)
			warm_spill_release(sp->warm, kept->slot);
		kept->slot = -1;
	}
	if (fdstore_untake(fds, nfds, name, fd) < 0)
		close(fd);
}

void spill_owner_unadopt(struct spill *sp, struct spill_owner *o, struct fdstore_fd *fds, unsigned nfds)
{
	while (o->nfiles) {
		struct spill_file *f = &o->files[o->nfiles - 1];

		spill_charge_sub(sp, o, f, f->charged);
		give_back(sp, &f->kept, false, f->fd, fds, nfds);
		o->acct->files--;
		sp->files--;
		o->nfiles--;
	}
	free(o->files);
	o->files = NULL;
	o->cap = 0;
	if (o->counters.page) {
		int fd = o->counters.fd;

		counters_free(&o->counters, false);
		give_back(sp, &o->page_kept, true, fd, fds, nfds);
	}
	if (o->acct)
		spill_uid_put(sp, o->acct);
	o->acct = NULL;
	if (o->linked)
		TAILQ_REMOVE(&sp->owners, o, link);
	o->linked = 0;
}
