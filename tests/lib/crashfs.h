/* SPDX-License-Identifier: MIT */
/*
 * crashfs.h - what a power loss, or a killed process, can leave of a directory, for the
 * crash-point harness (test_crash_points.c), in the spirit of ALICE and CrashMonkey: a log of
 * every operation that changes what a power loss can leave, recorded through the journal's two
 * taps (jio's: the batches submitted with their bytes, their completions, the acknowledgements;
 * journal_fs.h's: files made, written, synced, renamed and removed, the directory synced), and
 * the disk states the persistence rules allow at any point of it, built in memory (an image:
 * the directory's names and each file's bytes) and written to a directory.
 *
 * The rules (ext4 with data=ordered and XFS; docs/ARCHITECTURE.md, "The crash-point harness",
 * says where each is documented), taken no further than the journal relies on them:
 *   - data written and then synced (fdatasync or fsync of its file; a jio request once it
 *     completed, being writes and then an fdatasync) is durable;
 *   - data not yet synced may or may not have reached the disk, each 512-byte sector of it on
 *     its own (a disk writes a sector whole), so a write can be torn at any sector; where
 *     writes overlap, a sector holds the later one's bytes once that one is there;
 *   - a name made, renamed or removed and then its directory synced is durable; of the name
 *     operations not yet synced, any prefix may be on the disk (ext4's jbd2 and XFS's log commit
 *     them in order, each whole);
 *   - a file is as long as its data on the disk reaches (appended data that did not reach it
 *     leaves the file shorter, a hole before data that did reads as zeros).
 * A killed process (SIGKILL: the page cache survives it) leaves everything it made, and of each
 * jio request in flight any of its 4 KiB pages; what it had not synced stays as undurable as it
 * was, so a power loss after the next life started can still take it (cfs_kill).
 *
 * Files are model ids 1, 2, ...; while recording, the log maps real files to them by device and
 * inode, so a tap's fd names its file whatever path or description it was opened through. One
 * directory: names are its entries. The taps lock the log (the flusher thread and the thread
 * that opens and closes the journal both report). A process that may be killed records into a
 * trace file instead (trace_fd: each op one write as it happens, tests/integration/traced.c),
 * which cfs_trace_read turns back into a log. The model is crashfs.c; the taps that record a
 * journal's operations are crashfs_tap.c (they need the daemon's jio and journal_fs).
 */
#ifndef HP_TEST_CRASHFS_H
#define HP_TEST_CRASHFS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "jformat.h"
#include "jio.h"
#include "journal_fs.h"

#define CFS_NAME 32
#define CFS_NAMES_MAX 32 /* entries of a directory */
#define CFS_SECTOR 512u /* what a disk writes whole */
#define CFS_PAGE 4096u /* what a killed process's write leaves whole */

enum cfs_kind {
	CFS_CREATE, /* name made: file, new and empty */
	CFS_WRITE, /* len bytes of data at off of file; req: its jio request (0: complete when made) */
	CFS_SYNC, /* file's data so far durable */
	CFS_DIRSYNC, /* every name operation so far durable */
	CFS_RENAME, /* name to name2, replacing */
	CFS_UNLINK, /* name removed */
	CFS_DONE, /* jio request req completed with res: its writes durable when res is 0 */
	CFS_ACK, /* the journal acknowledged every LSN up to off */
	CFS_TRUNC, /* the test truncated the journal at LSN off (records below it may go) */
};

struct cfs_op {
	enum cfs_kind kind;
	uint32_t file;
	uint32_t req;
	int res;
	uint64_t off;
	uint32_t len;
	uint8_t *data; /* WRITE: a copy of what was written (owned) */
	char name[CFS_NAME], name2[CFS_NAME];
};

struct cfs_ino {
	dev_t dev;
	ino_t ino;
	uint32_t file;
};

struct cfs_log {
	pthread_mutex_t lock;
	bool recording; /* the taps add to it */
	int trace_fd; /* >= 0: ops go to this file (cfs_trace_read reads them back), not to v */
	struct cfs_op *v;
	size_t n, cap;
	uint32_t nfiles, nreq;
	struct cfs_ino *ino; /* newest last: an inode number can be reused */
	size_t nino, ino_cap;
	struct {
		const struct jio_req *req;
		uint32_t id;
		uint64_t first_lsn; /* of its first record; 0: it holds none (a segment header) */
	} inflight[JIO_DEPTH + 1];
	/* acknowledgements as they came: the last LSN, and the first one out of order (of a record
	 * still in flight, or below an earlier one: whichever path each batch took), or "" */
	uint64_t acked;
	char misordered[200];
};

/* What reached the disk of the operations not durable at a crash. */
enum cfs_pending {
	CFS_NONE, /* nothing */
	CFS_ALL, /* everything */
	CFS_PAGES, /* each 4 KiB page of each write, or not */
	CFS_SECTORS, /* each 512-byte sector of each write, or not */
};

struct cfs_choice {
	enum cfs_pending pending;
	int names; /* how many of the name operations not synced (a prefix): -1 all, -2 any */
};

struct cfs_image {
	struct {
		char name[CFS_NAME];
		uint32_t file;
	} names[CFS_NAMES_MAX];
	unsigned nnames;
	uint32_t slots; /* data, size, cap: by file id, [0, slots) */
	uint8_t **data;
	uint64_t *size, *cap;
};

/* A log, empty and not recording; and freed with every op's data. */
void cfs_init(struct cfs_log *l);
void cfs_free(struct cfs_log *l);
/*
 * Add op (its data owned by the log from now on), or write it to the trace file: one write of
 * header and data, so a process killed while tracing leaves whole records but perhaps the last.
 * With the lock held, or nobody recording.
 */
void cfs_push(struct cfs_log *l, struct cfs_op op);
/* A copy of len bytes at p, for an op's data (aborts when out of memory, as the whole model does). */
uint8_t *cfs_copy(const void *p, size_t len);
/* A mark of the test's own (CFS_ACK, CFS_TRUNC), in order with what the taps record. */
void cfs_mark(struct cfs_log *l, enum cfs_kind kind, uint64_t lsn);
/* The largest value of the marks of kind in [from, upto), or 0. */
uint64_t cfs_max(const struct cfs_log *l, enum cfs_kind kind, size_t from, size_t upto);
/*
 * Crash points from `from` on: before each operation that makes something durable, and the end;
 * but only where something was written, named or acknowledged since the point before (from
 * `from` for the first): at a point after nothing but syncs, every state is one the point before
 * could leave, and must hold no more than it.
 */
size_t cfs_points(const struct cfs_log *l, size_t from, size_t *pts);
/*
 * Pick n of the points pts (of cfs_points: their indexes, into ret), half of them near what is
 * rare and matters (two points either side of a name operation, a truncation, a jio write at
 * offset 0: a segment's header), the rest anywhere; each once.
 */
size_t cfs_pick(const struct cfs_log *l, const size_t *pts, size_t npts, size_t n, unsigned *rnd, size_t *ret);
/* Read a trace file's ops into l (fresh): 0, or -errno. A record cut short ends it. */
int cfs_trace_read(const char *path, struct cfs_log *l);
/* --- images ------------------------------------------------------------------------------- */

/* An image's memory given back (it is empty after). */
void cfs_image_free(struct cfs_image *img);
/*
 * The disk a power loss right before op `upto` of l leaves, as c chooses among what the rules
 * allow (random choices from rnd), into img (reset first).
 */
void cfs_build(const struct cfs_log *l, size_t upto, struct cfs_choice c, unsigned *rnd, struct cfs_image *img);
/*
 * The process recording l was killed right before op `upto`: l ends there, and each write of a
 * request then in flight is replaced by what of it the page cache got (pending: none, all, or
 * random 4 KiB pages), as writes complete when made and not synced. Built with every pending
 * operation (CFS_ALL, names -1), l is the page cache the next life finds; recorded on, a power
 * loss can still take what the killed one left unsynced.
 */
void cfs_kill(struct cfs_log *l, size_t upto, enum cfs_pending pending, unsigned *rnd);
/* --- directories ------------------------------------------------------------------------- */

/* Remove every entry of dir (files only), creating dir if it is missing. */
void cfs_clear_dir(const char *dir);
/*
 * Make dir hold img and nothing else. With reg: the files written are its files from now on
 * (recording goes on in reg). With base as well: reg is a new log, and img its durable start
 * (each file made, written and synced, the directory synced).
 */
void cfs_write_dir(const struct cfs_image *img, const char *dir, struct cfs_log *reg, bool base);
/* The bytes of name in img (NULL if it has no such name), its size in *ret_size. */
const uint8_t *cfs_file(const struct cfs_image *img, const char *name, uint64_t *ret_size);

/* crashfs_tap.c: recording through the journal's taps (links the daemon's jio and journal_fs) */
/* Record into l what journals opened from now on do, until cfs_stop. */
void cfs_record(struct cfs_log *l);
/* Stop recording (a jio opened meanwhile keeps its tap: the log ignores it from now on). */
void cfs_stop(struct cfs_log *l);

/* crashfs.c, for crashfs_tap.c: a name copied into an op, and the model file a real one is */
void cfs_name(char *dst, const char *name);
uint32_t cfs_file_of(struct cfs_log *l, int fd, uint32_t file);

#endif
