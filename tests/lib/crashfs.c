/* SPDX-License-Identifier: MIT */
/*
 * crashfs.c - the model of crashfs.h: the log of operations (kept, or written to a trace file and
 * read back), the points of a log a crash may come at, and the disk states a power loss or a kill
 * leaves there, built as an image and written to a directory. No daemon code: the taps that
 * record a journal's operations into a log are crashfs_tap.c's.
 */
#include "crashfs.h"

void cfs_init(struct cfs_log *l)
{
	memset(l, 0, sizeof(*l));
	l->trace_fd = -1;
	pthread_mutex_init(&l->lock, NULL);
}

void cfs_free(struct cfs_log *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].data);
	free(l->v);
	free(l->ino);
	pthread_mutex_destroy(&l->lock);
	memset(l, 0, sizeof(*l));
}

static void *cfs_grow(void *p, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return p;
	*cap = need > 2 * *cap ? need : 2 * *cap;
	p = realloc(p, *cap * size);
	if (!p)
		abort();
	return p;
}

/* An op in a trace file: this, then len bytes of data for a CFS_WRITE. */
struct cfs_trace_rec {
	uint32_t kind, file, req;
	int32_t res;
	uint64_t off;
	uint32_t len, data;
	char name[CFS_NAME], name2[CFS_NAME];
};

/*
 * Add op (its data owned by the log from now on), or write it to the trace file: one write of
 * header and data, so a process killed while tracing leaves whole records but perhaps the last.
 * With the lock held, or nobody recording.
 */
void cfs_push(struct cfs_log *l, struct cfs_op op)
{
	if (l->trace_fd >= 0) {
		struct cfs_trace_rec t = { .kind = op.kind, .file = op.file, .req = op.req, .res = op.res, .off = op.off,
					   .len = op.len, .data = op.data != NULL };
		struct iovec iov[2] = { { &t, sizeof(t) }, { op.data, op.data ? op.len : 0 } };

		memcpy(t.name, op.name, CFS_NAME);
		memcpy(t.name2, op.name2, CFS_NAME);
		if (writev(l->trace_fd, iov, 2) != (ssize_t)(sizeof(t) + iov[1].iov_len))
			abort();
		free(op.data);
		return;
	}
	l->v = cfs_grow(l->v, &l->cap, l->n + 1, sizeof(*l->v));
	l->v[l->n++] = op;
}

/* len bytes of p in a buffer of their own (never NULL; p may be NULL when len is 0: an empty
 * file of an image) */
uint8_t *cfs_copy(const void *p, size_t len)
{
	uint8_t *c = malloc(len ? len : 1);

	if (!c)
		abort();
	if (len)
		memcpy(c, p, len);
	return c;
}

void cfs_name(char *dst, const char *name)
{
	if (strlen(name) >= CFS_NAME) {
		fprintf(stderr, "crashfs: name '%s' too long\n", name);
		abort();
	}
	strcpy(dst, name);
}

/* The model file a real one is (its fd), given anew (file 0) or looked up. */
uint32_t cfs_file_of(struct cfs_log *l, int fd, uint32_t file)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		abort();
	if (file) {
		l->ino = cfs_grow(l->ino, &l->ino_cap, l->nino + 1, sizeof(*l->ino));
		l->ino[l->nino++] = (struct cfs_ino){ st.st_dev, st.st_ino, file };
		return file;
	}
	for (size_t i = l->nino; i-- > 0;)
		if (l->ino[i].dev == st.st_dev && l->ino[i].ino == st.st_ino)
			return l->ino[i].file;
	fprintf(stderr, "crashfs: fd %d is no file of the recorded directory\n", fd);
	abort();
}

/* A mark of the test's own (CFS_ACK, CFS_TRUNC), in order with what the taps record. */
void cfs_mark(struct cfs_log *l, enum cfs_kind kind, uint64_t lsn)
{
	pthread_mutex_lock(&l->lock);
	if (l->recording)
		cfs_push(l, (struct cfs_op){ .kind = kind, .off = lsn });
	pthread_mutex_unlock(&l->lock);
}

static bool cfs_is_name(enum cfs_kind k)
{
	return k == CFS_CREATE || k == CFS_RENAME || k == CFS_UNLINK;
}

/* The largest value of the marks of kind in [from, upto), or 0. */
uint64_t cfs_max(const struct cfs_log *l, enum cfs_kind kind, size_t from, size_t upto)
{
	uint64_t v = 0;

	for (size_t i = from; i < upto; i++)
		if (l->v[i].kind == kind && l->v[i].off > v)
			v = l->v[i].off;
	return v;
}

/*
 * Crash points from `from` on: before each operation that makes something durable, and the end;
 * but only where something was written, named or acknowledged since the point before (from
 * `from` for the first): at a point after nothing but syncs, every state is one the point before
 * could leave, and must hold no more than it.
 */
size_t cfs_points(const struct cfs_log *l, size_t from, size_t *pts)
{
	size_t n = 0;
	bool changed = false;

	for (size_t i = from; i < l->n; i++) {
		enum cfs_kind k = l->v[i].kind;

		if (k == CFS_WRITE || k == CFS_ACK || cfs_is_name(k))
			changed = true;
		else if (changed && (k == CFS_SYNC || k == CFS_DIRSYNC || (k == CFS_DONE && !l->v[i].res))) {
			pts[n++] = i;
			changed = false;
		}
	}
	if (changed || !n)
		pts[n++] = l->n;
	return n;
}

/*
 * Pick n of the points pts (of cfs_points: their indexes, into ret), half of them near what is
 * rare and matters (two points either side of a name operation, a truncation, a jio write at
 * offset 0: a segment's header), the rest anywhere; each once.
 */
size_t cfs_pick(const struct cfs_log *l, const size_t *pts, size_t npts, size_t n, unsigned *rnd, size_t *ret)
{
	bool *near = calloc(npts, sizeof(bool)), *taken = calloc(npts, sizeof(bool));
	size_t *cand = malloc(npts * sizeof(*cand)), ncand = 0, k = 0, got = 0;

	if (!near || !taken || !cand)
		abort();
	for (size_t i = 0; i < l->n; i++) {
		const struct cfs_op *op = &l->v[i];

		while (k < npts && pts[k] <= i)
			k++;
		if (cfs_is_name(op->kind) || op->kind == CFS_TRUNC ||
		    (op->kind == CFS_WRITE && op->req && op->off == 0))
			for (size_t d = k >= 2 ? k - 2 : 0; d < (k + 2 < npts ? k + 2 : npts); d++)
				near[d] = true;
	}
	for (size_t i = 0; i < npts; i++)
		if (near[i])
			cand[ncand++] = i;
	/* half from near those, half anywhere */
	while (got < n && got < npts) {
		size_t i = (got % 2 == 0 && ncand) ? cand[(size_t)rand_r(rnd) % ncand] : (size_t)rand_r(rnd) % npts;
		unsigned tries = 0;

		while (taken[i] && tries++ < npts)
			i = (i + 1) % npts;
		if (taken[i])
			break;
		taken[i] = true;
		ret[got++] = i;
	}
	free(near);
	free(taken);
	free(cand);
	return got;
}

/* Read a trace file's ops into l (fresh): 0, or -errno. A record cut short ends it. */
int cfs_trace_read(const char *path, struct cfs_log *l)
{
	FILE *f = fopen(path, "re");
	struct cfs_trace_rec t;

	if (!f)
		return -errno;
	while (fread(&t, sizeof(t), 1, f) == 1) {
		struct cfs_op op = { .kind = (enum cfs_kind)t.kind, .file = t.file, .req = t.req, .res = t.res,
				     .off = t.off, .len = t.len };

		if (t.data) {
			op.data = malloc(t.len ? t.len : 1);
			if (!op.data)
				abort();
			if (t.len && fread(op.data, t.len, 1, f) != 1) {
				free(op.data);
				break;
			}
		}
		memcpy(op.name, t.name, CFS_NAME);
		memcpy(op.name2, t.name2, CFS_NAME);
		op.name[CFS_NAME - 1] = op.name2[CFS_NAME - 1] = '\0';
		if (op.file > l->nfiles)
			l->nfiles = op.file;
		if (op.req > l->nreq)
			l->nreq = op.req;
		cfs_push(l, op);
	}
	fclose(f);
	return 0;
}

/* --- images ------------------------------------------------------------------------------- */

void cfs_image_free(struct cfs_image *img)
{
	for (uint32_t f = 0; f < img->slots; f++)
		free(img->data[f]);
	free(img->data);
	free(img->size);
	free(img->cap);
	memset(img, 0, sizeof(*img));
}

/* An empty image with room for files 1..nfiles. */
static void cfs_image_reset(struct cfs_image *img, uint32_t nfiles)
{
	if (nfiles + 1 > img->slots) {
		img->data = realloc(img->data, (nfiles + 1) * sizeof(*img->data));
		img->size = realloc(img->size, (nfiles + 1) * sizeof(*img->size));
		img->cap = realloc(img->cap, (nfiles + 1) * sizeof(*img->cap));
		if (!img->data || !img->size || !img->cap)
			abort();
		for (uint32_t f = img->slots; f <= nfiles; f++) {
			img->data[f] = NULL;
			img->cap[f] = 0;
		}
		img->slots = nfiles + 1;
	}
	for (uint32_t f = 0; f < img->slots; f++)
		img->size[f] = 0;
	img->nnames = 0;
}

/* Bytes [off, off + len) of file become src's, the file growing (with zeros) as needed. */
static void cfs_put(struct cfs_image *img, uint32_t file, uint64_t off, const uint8_t *src, uint64_t len)
{
	uint64_t end = off + len;

	if (end > img->cap[file]) {
		uint64_t cap = end > 2 * img->cap[file] ? end : 2 * img->cap[file];

		img->data[file] = realloc(img->data[file], cap);
		if (!img->data[file])
			abort();
		img->cap[file] = cap;
	}
	if (off > img->size[file])
		memset(img->data[file] + img->size[file], 0, off - img->size[file]);
	if (len) /* an empty file of an image, written again as a base: no data, no buffer */
		memcpy(img->data[file] + off, src, len);
	if (end > img->size[file])
		img->size[file] = end;
}

static int cfs_lookup(const struct cfs_image *img, const char *name)
{
	for (unsigned i = 0; i < img->nnames; i++)
		if (!strcmp(img->names[i].name, name))
			return (int)i;
	return -1;
}

static void cfs_apply_name(struct cfs_image *img, const struct cfs_op *op)
{
	int i = cfs_lookup(img, op->name), k;

	switch (op->kind) {
	case CFS_CREATE:
		if (i >= 0 || img->nnames == CFS_NAMES_MAX)
			abort(); /* O_EXCL: the name was free */
		cfs_name(img->names[img->nnames].name, op->name);
		img->names[img->nnames++].file = op->file;
		break;
	case CFS_RENAME:
		if (i < 0)
			abort();
		k = cfs_lookup(img, op->name2);
		if (k >= 0) {
			img->names[k].file = img->names[i].file;
			img->names[i] = img->names[--img->nnames];
		} else {
			cfs_name(img->names[i].name, op->name2);
		}
		break;
	case CFS_UNLINK:
		if (i < 0)
			abort();
		img->names[i] = img->names[--img->nnames];
		break;
	default:
		break;
	}
}

/* Where the piece (of size piece) after the one holding p starts, or end if sooner. */
static uint64_t cfs_next(uint64_t p, uint64_t piece, uint64_t end)
{
	uint64_t next = (p / piece + 1) * piece;

	return next < end ? next : end;
}

/* Write op's data into img, all of it or, piece by piece, what rnd picks. */
static void cfs_apply_write(struct cfs_image *img, const struct cfs_op *op, enum cfs_pending how, unsigned *rnd)
{
	uint32_t piece = how == CFS_SECTORS ? CFS_SECTOR : CFS_PAGE;

	if (how == CFS_ALL) {
		cfs_put(img, op->file, op->off, op->data, op->len);
		return;
	}
	if (how == CFS_NONE)
		return;
	for (uint64_t p = op->off; p < op->off + op->len;) {
		uint64_t next = cfs_next(p, piece, op->off + op->len);

		if (rand_r(rnd) & 1)
			cfs_put(img, op->file, p, op->data + (p - op->off), next - p);
		p = next;
	}
}

/*
 * The disk a power loss right before op `upto` of l leaves, as c chooses among what the rules
 * allow (random choices from rnd), into img (reset first).
 */
void cfs_build(const struct cfs_log *l, size_t upto, struct cfs_choice c, unsigned *rnd,
	       struct cfs_image *img)
{
	bool *done = calloc(l->nreq + 1, sizeof(bool));
	size_t *synced = calloc(l->nfiles + 1, sizeof(size_t)); /* index of the file's last sync, +1 */
	size_t dirsynced = 0, pending = 0, keep;

	if (!done || !synced)
		abort();
	cfs_image_reset(img, l->nfiles);
	for (size_t i = 0; i < upto; i++) {
		const struct cfs_op *op = &l->v[i];

		if (op->kind == CFS_DONE && op->res == 0)
			done[op->req] = true;
		else if (op->kind == CFS_SYNC)
			synced[op->file] = i + 1;
		else if (op->kind == CFS_DIRSYNC)
			dirsynced = i + 1;
	}
	for (size_t i = dirsynced; i < upto; i++)
		pending += cfs_is_name(l->v[i].kind);
	keep = c.names == -1 ? pending : c.names == -2 ? (size_t)rand_r(rnd) % (pending + 1) : (size_t)c.names;
	for (size_t i = 0; i < upto; i++) {
		const struct cfs_op *op = &l->v[i];

		if (cfs_is_name(op->kind)) {
			/* a prefix of those not synced: none after the first left out */
			if (i < dirsynced) {
				cfs_apply_name(img, op);
			} else if (keep > 0) {
				cfs_apply_name(img, op);
				keep--;
			}
		} else if (op->kind == CFS_WRITE) {
			bool durable = op->req ? done[op->req] : i < synced[op->file];

			cfs_apply_write(img, op, durable ? CFS_ALL : c.pending, rnd);
		}
	}
	free(done);
	free(synced);
}

/*
 * The process recording l was killed right before op `upto`: l ends there, and each write of a
 * request then in flight is replaced by what of it the page cache got (pending: none, all, or
 * random 4 KiB pages), as writes complete when made and not synced. Built with every pending
 * operation (CFS_ALL, names -1), l is the page cache the next life finds; recorded on, a power
 * loss can still take what the killed one left unsynced.
 */
void cfs_kill(struct cfs_log *l, size_t upto, enum cfs_pending pending, unsigned *rnd)
{
	bool *done = calloc(l->nreq + 1, sizeof(bool));
	struct cfs_op *v = NULL;
	size_t n = 0, cap = 0;

	if (!done)
		abort();
	for (size_t i = 0; i < upto; i++)
		if (l->v[i].kind == CFS_DONE && l->v[i].res == 0)
			done[l->v[i].req] = true;
	for (size_t i = 0; i < l->n; i++) {
		struct cfs_op *op = &l->v[i];

		if (i >= upto || op->kind != CFS_WRITE || !op->req || done[op->req]) {
			if (i < upto) {
				v = cfs_grow(v, &cap, n + 1, sizeof(*v));
				v[n++] = *op;
			} else {
				free(op->data);
			}
			continue;
		}
		for (uint64_t p = op->off, end = op->off + op->len; p < end;) {
			uint64_t run = p;

			/* a run of pages the page cache got: one write */
			while (p < end && (pending == CFS_ALL || (pending == CFS_PAGES && (rand_r(rnd) & 1))))
				p = cfs_next(p, CFS_PAGE, end);
			if (p > run) {
				v = cfs_grow(v, &cap, n + 1, sizeof(*v));
				v[n++] = (struct cfs_op){ .kind = CFS_WRITE, .file = op->file, .off = run, .len = (uint32_t)(p - run),
							  .data = cfs_copy(op->data + (run - op->off), p - run) };
			} else {
				p = cfs_next(p, CFS_PAGE, end); /* a page it did not get */
			}
		}
		free(op->data);
	}
	free(l->v);
	l->v = v;
	l->n = n;
	l->cap = cap;
	memset(l->inflight, 0, sizeof(l->inflight));
	free(done);
}

/* --- directories ------------------------------------------------------------------------- */

/* Remove every entry of dir (files only), creating dir if it is missing. */
void cfs_clear_dir(const char *dir)
{
	DIR *d;
	struct dirent *e;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		abort();
	d = opendir(dir);
	if (!d)
		abort();
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && unlinkat(dirfd(d), e->d_name, 0) < 0)
			abort();
	closedir(d);
}

/*
 * Make dir hold img and nothing else. With reg: the files written are its files from now on
 * (recording goes on in reg). With base as well: reg is a new log, and img its durable start
 * (each file made, written and synced, the directory synced).
 */
void cfs_write_dir(const struct cfs_image *img, const char *dir, struct cfs_log *reg, bool base)
{
	cfs_clear_dir(dir);
	for (unsigned i = 0; i < img->nnames; i++) {
		uint32_t file = img->names[i].file;
		char p[512];
		int fd;

		snprintf(p, sizeof(p), "%s/%s", dir, img->names[i].name);
		fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 || pwrite(fd, img->data[file], img->size[file], 0) != (ssize_t)img->size[file])
			abort();
		if (reg && base) {
			uint32_t f = ++reg->nfiles;

			cfs_file_of(reg, fd, f);
			cfs_push(reg, (struct cfs_op){ .kind = CFS_CREATE, .file = f });
			cfs_name(reg->v[reg->n - 1].name, img->names[i].name);
			cfs_push(reg, (struct cfs_op){ .kind = CFS_WRITE, .file = f, .len = (uint32_t)img->size[file],
						       .data = cfs_copy(img->data[file], img->size[file]) });
			cfs_push(reg, (struct cfs_op){ .kind = CFS_SYNC, .file = f });
		} else if (reg) {
			cfs_file_of(reg, fd, file);
		}
		close(fd);
	}
	if (reg && base)
		cfs_push(reg, (struct cfs_op){ .kind = CFS_DIRSYNC });
}

/* The bytes of name in img (NULL if it has no such name), its size in *ret_size. */
const uint8_t *cfs_file(const struct cfs_image *img, const char *name, uint64_t *ret_size)
{
	int i = cfs_lookup(img, name);

	if (i < 0)
		return NULL;
	*ret_size = img->size[img->names[i].file];
	return img->data[img->names[i].file];
}
