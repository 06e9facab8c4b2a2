/* SPDX-License-Identifier: MIT */
/*
 * spill_internal.h - what spill.c (the files and their accounting) and spill_warm.c (keeping them
 * for the daemon's next life, and taking them over) share. Nothing outside those two includes it.
 */
#ifndef HP_SPILL_INTERNAL_H
#define HP_SPILL_INTERNAL_H

#include "spill.h"

/* What a status reports since start: for the machine, and for each uid (while it has an account). */
struct spill_counters {
	uint64_t files_created, bytes_charged_total, refusals, truncated;
};

struct spill_uid {
	uid_t uid;
	uint64_t bytes;
	uint32_t files; /* open and lingering */
	unsigned refs; /* owners and lingering files pointing here */
	struct spill_counters counted; /* since the account was made */
	struct spill_uid *next;
};

/* A file whose stream or connection closed while some other process still holds it open. */
struct spill_linger {
	int fd; /* the daemon's own */
	struct spill_uid *acct;
	pid_t pid; /* who created it, for the log */
	struct spill_kept kept;
};

struct spill {
	int dirfd;
	char dir[256];
	bool tmpfile; /* O_TMPFILE works in dir; else create and unlink */
	bool leases; /* the read-lease probe works in dir; else files are forgotten at close */
	uint64_t threshold, max_bytes, max_bytes_per_uid;
	uint32_t max_files, max_files_per_uid;
	uint64_t bytes, files;
	uint64_t next_id, next_name;
	struct spill_counters counted; /* since start */
	uint64_t next_audit;
	struct spill_uid *uids;
	struct spill_linger *linger;
	unsigned nlinger, linger_cap;
	TAILQ_HEAD(, spill_owner) owners; /* owners with a page or files */
	struct warm *warm; /* where files and pages are recorded for a next life; NULL: nowhere */
	bool sealed; /* stopping for a next life: records, store and files stay as they are */
};


/* The accounting spill.c keeps, for spill_warm.c to rebuild what a previous life had. */
struct spill_uid *spill_uid_get(struct spill *sp, uid_t uid); /* a reference; NULL: no memory */
void spill_uid_put(struct spill *sp, struct spill_uid *u);
void spill_owner_link(struct spill *sp, struct spill_owner *o);
void spill_charge_add(struct spill *sp, struct spill_owner *o, struct spill_file *f, uint64_t n);
void spill_charge_sub(struct spill *sp, struct spill_owner *o, struct spill_file *f, uint64_t n);
/* Add a lingering file (fd, kept as `kept`) of acct; false: no memory (nothing changed). */
bool spill_linger_add(struct spill *sp, int fd, struct spill_uid *acct, pid_t pid, const struct spill_kept *kept);

/*
 * spill_warm.c: keep a file or page in the fd store with its record, bring the record up to date
 * (its charge, or LINGER), forget both when the daemon lets go of the fd. No-ops without a warm
 * state and once sealed; a file or page the store or the records cannot take is simply not kept
 * (kept->slot -1), and its connection is then one the next life closes (spill_owner_kept).
 */
void spill_keep_file(struct spill *sp, const struct spill_owner *o, struct spill_file *f);
void spill_keep_update(struct spill *sp, const struct spill_owner *o, const struct spill_file *f);
void spill_keep_page(struct spill *sp, struct spill_owner *o, int fd);
void spill_keep_linger(struct spill *sp, const struct spill_linger *l);
void spill_keep_forget(struct spill *sp, struct spill_kept *kept, bool page);

#endif
