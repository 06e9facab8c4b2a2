/* SPDX-License-Identifier: MIT */
/*
 * spill.c - libhugepool's spill streams (hugepool.h): memory first, a daemon-made file past the
 * threshold.
 *
 * A stream is a file part and a memory tail: bytes [0, file_len) are in the file (fd, from the
 * daemon; -1 while the stream is in memory) and bytes [file_len, file_len + len) in buf. In
 * memory the tail is everything; in a file it is the chunk being filled (at most `chunk`
 * bytes), written with one pwrite once full, after the daemon agreed to charge it
 * (PROTO_SPILL_CHARGE). After a refused charge or a failed write the tail simply stays in
 * memory, so every byte the stream accepted stays readable.
 *
 * Reading: the memory tail is handed out in place; the file part goes through a read window
 * (rbuf) that holds a copy of stream bytes [rb_off, rb_off + rb_len), filled with pread (and
 * from the tail when a window straddles the two parts). Large hp_spill_read calls skip the
 * window. The connection's counters page (counters.c) counts in-memory streams for the daemon's
 * status. A file from the daemon is checked first (client_check_fd): a regular file open
 * read-write without O_APPEND (pwrite would append wherever the offset said).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client.h"
#include "util.h"

#define BUF_MIN 4096u /* first allocation of a stream in memory */
#define CHUNK_MIN (64u << 10) /* smallest write to the file; also the read window */
#define CHUNK_ALWAYS_FILE (1u << 20) /* chunk of a stream that starts as a file */
#define UNIT_MAX (64u << 10)

struct hp_spill {
	hp_conn *c;
	uint64_t threshold;
	size_t chunk;
	char *buf; /* the memory tail */
	size_t len, cap;
	int fd;
	uint64_t file_id, file_len, charged;
	int err; /* sticky: the write error that stopped the stream */
	bool reading;
	uint64_t pos; /* read position in the stream */
	char *rbuf; /* read window over the file part */
	size_t rb_cap, rb_len;
	uint64_t rb_off;
};

int hp_spill_open(hp_conn *c, const struct hp_spill_opts *opts, hp_spill **ret)
{
	uint64_t threshold = opts ? opts->threshold : 0;
	hp_spill *s;
	int r;

	if (ret)
		*ret = NULL;
	if (!c || !ret || (threshold > HP_SPILL_THRESHOLD_MAX && threshold != HP_SPILL_ALWAYS_FILE))
		return -EINVAL;
	if ((r = counters_attach(c)) < 0)
		return r;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->c = c;
	s->fd = -1;
	if (threshold == HP_SPILL_ALWAYS_FILE) {
		s->threshold = 0;
		s->chunk = CHUNK_ALWAYS_FILE;
	} else {
		s->threshold = threshold ? threshold : c->spill_threshold;
		s->chunk = MAX(s->threshold, CHUNK_MIN);
	}
	c->spill_streams++;
	counters_add_spill(c, 1, 0);
	*ret = s;
	return 0;
}

/* Make room for `need` bytes in buf, doubling from BUF_MIN up to limit (>= need). */
static int buf_reserve(hp_spill *s, size_t need, size_t limit)
{
	size_t cap = s->cap ? s->cap : BUF_MIN;
	char *n;

	if (need <= s->cap)
		return 0;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	cap = MIN(cap, MAX(limit, need));
	n = realloc(s->buf, cap);
	if (!n)
		return -ENOMEM;
	s->buf = n;
	s->cap = cap;
	return 0;
}

static int charge(hp_spill *s, uint64_t total)
{
	struct proto_spill_charge req = { .file_id = s->file_id, .total = total };
	int r = client_simple_request(s->c, PROTO_SPILL_CHARGE, &req, sizeof(req));

	if (r == 0)
		s->charged = total;
	return r;
}

/* Append n bytes at the end of the file part: charged first, given back if the write fails. */
static int file_append(hp_spill *s, const char *p, size_t n)
{
	size_t done = 0;
	int r;

	if (s->file_len + n > s->charged && (r = charge(s, s->file_len + n)) < 0)
		return r;
	while (done < n) {
		ssize_t w = pwrite(s->fd, p + done, n - done, (off_t)(s->file_len + done));

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			r = w < 0 ? -errno : -EIO;
			/* drop the partial write and its charge: the stream ends where it ended */
			if (ftruncate(s->fd, (off_t)s->file_len) == 0)
				charge(s, s->file_len);
			client_set_error(s->c, "writing a spill file failed: %s", strerror(-r));
			return r;
		}
		done += (size_t)w;
	}
	s->file_len += n;
	return 0;
}

static int flush(hp_spill *s)
{
	int r = file_append(s, s->buf, s->len);

	if (r == 0)
		s->len = 0;
	return r;
}

/*
 * The stream outgrew memory: get a file, charged the `first` bytes about to be written; the
 * buffered bytes become its first chunk.
 */
static int to_file(hp_spill *s, uint64_t first)
{
	struct proto_spill_create req = { .charge = first };
	_cleanup_free_ void *payload = NULL;
	int fd, r;

	r = client_call_fds(s->c, PROTO_SPILL_CREATE, &req, sizeof(req), PROTO_SPILL_CREATED, &payload, &fd, 1);
	if (r < 0)
		return r;
	if ((r = client_check_fd(s->c, fd, CLIENT_FD_RW_FILE, 0, "a spill file")) < 0) {
		close(fd);
		return r;
	}
	s->fd = fd;
	s->file_id = ((const struct proto_spill_created *)payload)->file_id;
	s->charged = first;
	counters_add_spill(s->c, -1, -(int64_t)s->len);
	return buf_reserve(s, s->chunk, s->chunk);
}

static int fail(hp_spill *s, int r)
{
	s->err = r;
	return r;
}

int hp_spill_write(hp_spill *s, const void *data, size_t len)
{
	const char *p = data;
	int r;

	if (!s || (!data && len) || s->reading)
		return -EINVAL;
	if (s->err)
		return s->err;
	if (s->fd < 0) {
		if (len <= s->threshold - s->len) {
			if ((r = buf_reserve(s, s->len + len, (size_t)s->threshold)) < 0)
				return r;
			if (len)
				memcpy(s->buf + s->len, p, len);
			s->len += len;
			counters_add_spill(s->c, 0, (int64_t)len);
			return 0;
		}
		/* what the loop below writes first: whole chunks straight, or the buffer once full */
		if ((r = to_file(s, s->len == 0 && len >= s->chunk ? len - len % s->chunk : s->chunk)) < 0)
			return fail(s, r);
	}
	while (len) {
		size_t n;

		if (s->len == 0 && len >= s->chunk) {
			/* whole chunks straight from the caller's memory */
			n = len - len % s->chunk;
			if ((r = file_append(s, p, n)) < 0)
				return fail(s, r);
		} else {
			n = MIN(s->chunk - s->len, len);
			memcpy(s->buf + s->len, p, n);
			s->len += n;
			if (s->len == s->chunk && (r = flush(s)) < 0) {
				p += n;
				return fail(s, r);
			}
		}
		p += n;
		len -= n;
	}
	return 0;
}

int hp_spill_finish(hp_spill *s)
{
	int r = 0;

	if (!s)
		return -EINVAL;
	if (s->reading)
		return 0;
	if (s->fd >= 0 && s->len && !s->err && (r = flush(s)) < 0)
		s->err = r;
	/* a file charged a whole chunk at creation but written less: charge what it holds */
	if (s->fd >= 0 && !s->err && s->charged > s->file_len)
		charge(s, s->file_len);
	if (s->fd >= 0) {
		if (s->len == 0) {
			/* the write buffer becomes the read window */
			s->rbuf = TAKE_PTR(s->buf);
			s->rb_cap = s->cap;
			s->cap = 0;
		} else {
			/* a tail stayed after an error: it keeps the write buffer */
			s->rbuf = malloc(CHUNK_MIN);
			if (!s->rbuf)
				return -ENOMEM; /* still writing-side: finish may be called again */
			s->rb_cap = CHUNK_MIN;
		}
	}
	s->reading = true;
	s->pos = 0;
	return r;
}

/* Read stream bytes [off, off + n) of the file part and the tail into dst. */
static int copy_out(hp_spill *s, uint64_t off, char *dst, size_t n)
{
	while (n && off < s->file_len) {
		ssize_t got = pread(s->fd, dst, MIN(n, s->file_len - off), (off_t)off);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : -EIO;
		off += (uint64_t)got;
		dst += got;
		n -= (size_t)got;
	}
	if (n)
		memcpy(dst, s->buf + (off - s->file_len), n);
	return 0;
}

/* Bytes available at pos without a copy into the caller's buffer: *ret points to them. */
static ssize_t view(hp_spill *s, const char **ret, size_t unit)
{
	uint64_t total = s->file_len + s->len, left = total - s->pos;
	size_t n;
	int r;

	if (left == 0)
		return 0;
	if (s->pos >= s->file_len) {
		*ret = s->buf + (s->pos - s->file_len);
		return (ssize_t)MIN(left, (uint64_t)SSIZE_MAX);
	}
	if (s->pos < s->rb_off || s->pos + unit > s->rb_off + s->rb_len) {
		/* refill the window from pos; it may run into the tail */
		n = (size_t)MIN((uint64_t)s->rb_cap, left);
		if ((r = copy_out(s, s->pos, s->rbuf, n)) < 0) {
			s->rb_len = 0;
			return r;
		}
		s->rb_off = s->pos;
		s->rb_len = n;
	}
	*ret = s->rbuf + (s->pos - s->rb_off);
	return (ssize_t)(s->rb_off + s->rb_len - s->pos);
}

ssize_t hp_spill_next(hp_spill *s, const void **ret_data, size_t unit)
{
	const char *p;
	ssize_t n;

	if (!s || !ret_data || unit == 0 || unit > UNIT_MAX || !s->reading)
		return -EINVAL;
	if (s->file_len + s->len - s->pos == 0)
		return 0;
	if (s->file_len + s->len - s->pos < unit)
		return -EBADMSG;
	n = view(s, &p, unit);
	if (n < 0)
		return n;
	n -= n % (ssize_t)unit;
	*ret_data = p;
	s->pos += (uint64_t)n;
	return n;
}

ssize_t hp_spill_read(hp_spill *s, void *buf, size_t len)
{
	char *dst = buf;
	size_t done = 0;
	int r;

	if (!s || (!buf && len) || !s->reading)
		return -EINVAL;
	len = MIN(len, (size_t)SSIZE_MAX);
	while (done < len) {
		uint64_t left = s->file_len + s->len - s->pos;
		const char *p;
		ssize_t n;

		if (left == 0)
			break;
		if (s->pos < s->file_len && len - done >= s->rb_cap &&
		    (s->pos < s->rb_off || s->pos >= s->rb_off + s->rb_len)) {
			/* large read outside the window: straight into the caller's buffer */
			size_t m = (size_t)MIN((uint64_t)(len - done), left);

			if ((r = copy_out(s, s->pos, dst + done, m)) < 0)
				return done ? (ssize_t)done : r;
			s->pos += m;
			done += m;
			continue;
		}
		n = view(s, &p, 1);
		if (n < 0)
			return done ? (ssize_t)done : n;
		n = (ssize_t)MIN((size_t)n, len - done);
		memcpy(dst + done, p, (size_t)n);
		s->pos += (uint64_t)n;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int hp_spill_rewind(hp_spill *s)
{
	if (!s || !s->reading)
		return -EINVAL;
	s->pos = 0;
	return 0;
}

int hp_spill_state(const hp_spill *s)
{
	return s && s->fd >= 0 ? HP_SPILL_FILE : HP_SPILL_MEMORY;
}

uint64_t hp_spill_size(const hp_spill *s)
{
	return s ? s->file_len + s->len : 0;
}

void hp_spill_close(hp_spill *s)
{
	if (!s)
		return;
	if (s->fd >= 0) {
		struct proto_spill_close req = { .file_id = s->file_id };

		/*
		 * Free the pages here, on the CPU that just used them and will soon want new ones
		 * (the daemon's own truncate, which it does whatever we do, then finds nothing),
		 * and close our fd before the daemon hears of it: a file still open
		 * when its stream closes lingers as one of our uid's files until the next audit.
		 */
		if (ftruncate(s->fd, 0) < 0) {
			/* the daemon truncates anyway */
		}
		close(s->fd);
		client_simple_request(s->c, PROTO_SPILL_CLOSE, &req, sizeof(req));
	} else {
		counters_add_spill(s->c, -1, -(int64_t)s->len);
	}
	s->c->spill_streams--;
	free(s->buf);
	free(s->rbuf);
	free(s);
}
