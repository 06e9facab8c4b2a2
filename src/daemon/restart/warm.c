/* SPDX-License-Identifier: MIT */
/*
 * warm.c - see warm.h. The layout of the state memfd (version WARM_VERSION):
 *
 *   header   magic "HPWARM\0\0", version, header and record sizes, nbuffers, this memfd's id,
 *            lives, page size and hugetlb (version 2: of every buffer; 0 since), CRC-32C of the
 *            header before it
 *   buffers  nbuffers x struct warm_record: seq (odd while being written), CRC-32C of the rest,
 *            state, uid, index in class, log2 of its page size (version 3; 0 before), size,
 *            fd id, class name, connection and lease id
 *   conns    nconns x struct warm_conn_record: seq, CRC, state, credentials, name, the acquire
 *   spills   nspills x struct warm_spill_record: seq, CRC, state, uid, pid, connection, file id,
 *            charge, fd id
 *
 * Nothing in it is a pointer or an fd number: a record names its buffer's memfd by the name the
 * fd store keeps it under, so it means the same thing in the next process. Version 3 has version
 * 2's layout: the page size moved from the header into each record's spare word, so that a
 * pool's classes may have pages of different sizes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sched.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "fdstore.h"
#include "log.h"
#include "memfd.h"
#include "util.h"
#include "warm.h"

static const char magic[8] = "HPWARM";

struct warm_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;
	uint32_t record_size;
	uint32_t nbuffers;
	uint32_t conn_record_size;
	uint32_t nconns;
	uint32_t spill_record_size;
	uint32_t nspills;
	uint64_t id;
	uint64_t lives;
	uint64_t page_size; /* version 2: every buffer's (4096: regular shared memory); 0 since */
	uint32_t hugetlb; /* version 2: page_size is a hugetlb page's; 0 since */
	uint32_t crc; /* of everything before it */
};

struct warm_record {
	uint32_t seq; /* odd while being written */
	uint32_t crc; /* of everything after it */
	uint32_t state;
	uint32_t uid;
	uint32_t index;
	uint32_t page_shift; /* log2 of the page size; version 2 wrote 0 here (the header's) */
	uint64_t size;
	uint64_t fd_id;
	char class_name[WARM_CLASS_NAME_MAX];
	uint64_t conn_id;
	uint64_t lease_id;
	uint64_t since_rt;
};

struct warm_conn_record {
	uint32_t seq;
	uint32_t crc; /* of everything after it */
	uint32_t state;
	uint32_t uid, gid, pid;
	uint32_t version;
	uint32_t wait_count;
	uint64_t conn_id;
	uint64_t connected_rt;
	uint64_t wait_deadline;
	char name[WARM_CLIENT_NAME_MAX];
	char wait_class[WARM_CLASS_NAME_MAX];
};

struct warm_spill_record {
	uint32_t seq;
	uint32_t crc; /* of everything after it */
	uint32_t state;
	uint32_t uid, pid;
	uint32_t reserved;
	uint64_t conn_id;
	uint64_t file_id;
	uint64_t charged;
	uint64_t fd_id;
};

/* the FREE records of one kind, as a stack of their slots */
struct slots {
	int *free;
	uint32_t n;
};

struct warm {
	int fd;
	size_t size;
	struct warm_header *hdr;
	struct warm_record *recs;
	struct warm_conn_record *conns;
	struct warm_spill_record *spills;
	struct slots free_conns, free_spills;
	uint8_t *written[WARM_KINDS]; /* warm_track: a bit per record written since */
};

/* A record of kind k was written: remember it, if a take-over tracks what changes. */
static void mark(struct warm *w, enum warm_kind k, uint32_t i)
{
	if (w->written[k])
		w->written[k][i / 8] |= (uint8_t)(1u << (i % 8));
}

/* every kind of record: seq, crc, then what the crc covers */
#define RECORD_CRC(r) crc32c(0, &(r)->state, sizeof(*(r)) - offsetof(struct warm_record, state))
_Static_assert(offsetof(struct warm_record, state) == offsetof(struct warm_conn_record, state), "record heads");
_Static_assert(offsetof(struct warm_record, state) == offsetof(struct warm_spill_record, state), "record heads");

uint64_t warm_new_id(void)
{
	uint64_t id = 0;

	/* never fails for 8 bytes once the pool is initialised; 0 is as good an id as any */
	(void)getrandom(&id, sizeof(id), 0);
	return id;
}

/*
 * The kinds of fds kept, one row each: the letter a name starts with, and the prefix names had
 * before (a daemon upgraded by a warm restart gets its predecessor's fds under those).
 */
static const struct {
	char tag;
	const char *legacy;
} kinds[] = {
	[WARM_NAME_BUF] = { 'b', "buf" },     [WARM_NAME_STATE] = { 's', "state" },
	[WARM_NAME_CONN] = { 'c', "conn" },   [WARM_NAME_SPILL] = { 'f', "spill" },
	[WARM_NAME_SPAGE] = { 'p', "spage" },
};

/* 64 digits for 6 bits each, none of them ':' (systemd's fd names are printable ASCII but ':') */
static const char digits[64] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_";
#define ID_DIGITS 11 /* 64 bits */

void warm_name(enum warm_name_kind k, uint64_t id, char name[WARM_NAME_MAX])
{
	name[0] = kinds[k].tag;
	for (int i = ID_DIGITS; i >= 1; i--, id >>= 6)
		name[i] = digits[id & 63];
	name[ID_DIGITS + 1] = '\0';
}

static bool parse_legacy(const char *name, const char *prefix, uint64_t *id)
{
	size_t n = strlen(prefix);
	char *end;

	/* exactly 16 hex digits: strtoull alone would also take a sign, spaces or "0x" */
	if (strncmp(name, prefix, n) != 0 || name[n] != '.' || strlen(name + n + 1) != 16 ||
	    strspn(name + n + 1, "0123456789abcdefABCDEF") != 16)
		return false;
	errno = 0;
	*id = strtoull(name + n + 1, &end, 16);
	return !errno && !*end;
}

bool warm_parse_name(const char *name, enum warm_name_kind k, uint64_t *id)
{
	uint64_t v = 0;

	if (name[0] != kinds[k].tag || strlen(name) != ID_DIGITS + 1)
		return parse_legacy(name, kinds[k].legacy, id);
	for (int i = 1; i <= ID_DIGITS; i++) {
		const char *d = memchr(digits, name[i], sizeof(digits));

		/* the first digit holds the top 4 bits only */
		if (!d || !name[i] || (i == 1 && d - digits >= 16))
			return false;
		v = v << 6 | (uint64_t)(d - digits);
	}
	*id = v;
	return true;
}

void warm_upgrade_names(struct fdstore_fd *fds, unsigned n)
{
	bool renamed = false;

	for (unsigned i = 0; i < n; i++)
		for (unsigned k = 0; k < ARRAY_SIZE(kinds); k++) {
			uint64_t id;

			if (parse_legacy(fds[i].name, kinds[k].legacy, &id)) {
				warm_name((enum warm_name_kind)k, id, fds[i].name);
				renamed = true;
				break;
			}
		}
	if (renamed)
		fdstore_sort(fds, n);
}

/* The whole state memfd copied into private memory once (*ret_buf, *ret_len): only the copy is
 * looked at from then on. */
static int state_copy(int fd, uint8_t **ret_buf, size_t *ret_len, char *err, size_t errlen)
{
	_cleanup_free_ uint8_t *buf = NULL;
	struct stat st;
	size_t got = 0;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < sizeof(struct warm_header) ||
	    (uint64_t)st.st_size > (256u << 20)) {
		snprintf(err, errlen, "not a state memfd (%jd bytes)", (intmax_t)st.st_size);
		return -EBADMSG;
	}
	buf = malloc((size_t)st.st_size);
	if (!buf)
		return -ENOMEM;
	while (got < (size_t)st.st_size) {
		ssize_t n = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EBADMSG;
		got += (size_t)n;
	}
	*ret_len = got;
	*ret_buf = TAKE_PTR(buf);
	return 0;
}

/* Is h the header of a state this daemon reads, whose records fit the len bytes copied? */
static int header_check(const struct warm_header *h, size_t len, char *err, size_t errlen)
{
	if (memcmp(h->magic, magic, sizeof(magic)) != 0) {
		static const char zeros[sizeof(magic)];

		/* warm_create's, until warm_publish: its life never served */
		snprintf(err, errlen, memcmp(h->magic, zeros, sizeof(zeros)) == 0 ? "a state never published"
										    : "no state magic");
		return -EBADMSG;
	}
	if (h->version < WARM_VERSION_MIN || h->version > WARM_VERSION) {
		snprintf(err, errlen, "state version %" PRIu32 ", this daemon reads %d to %d", h->version,
			 WARM_VERSION_MIN, WARM_VERSION);
		return -EBADMSG;
	}
	if (h->crc != crc32c(0, h, offsetof(struct warm_header, crc))) {
		snprintf(err, errlen, "state header checksum mismatch");
		return -EBADMSG;
	}
	if (h->header_size != sizeof(*h) || h->record_size != sizeof(struct warm_record) ||
	    h->conn_record_size != sizeof(struct warm_conn_record) ||
	    h->spill_record_size != sizeof(struct warm_spill_record) ||
	    (uint64_t)h->nbuffers * sizeof(struct warm_record) + (uint64_t)h->nconns * sizeof(struct warm_conn_record) +
			    (uint64_t)h->nspills * sizeof(struct warm_spill_record) + sizeof(*h) > (uint64_t)len) {
		snprintf(err, errlen, "state sizes do not add up (%" PRIu32 " records of %" PRIu32 " bytes in %zu)",
			 h->nbuffers, h->record_size, len);
		return -EBADMSG;
	}
	return 0;
}

/* The smallest and largest page a record may name: 4 KiB and 16 GiB (powerpc's largest). */
#define PAGE_SHIFT_MIN 12
#define PAGE_SHIFT_MAX 34

/*
 * One record of each kind, decoded from the copy at p into what the next life uses. A torn
 * record (odd sequence number), a corrupt one or one never written decodes to nothing: the
 * buffer is UNKNOWN and not trusted, the connection and the spill file FREE (closed, if kept).
 * A buffer's page size is its record's, or in a version 2 state the header's (h).
 */
static void buf_decode(const uint8_t *p, const struct warm_header *h, struct warm_buf *b)
{
	struct warm_record r;
	uint64_t page;

	memcpy(&r, p, sizeof(r));
	if ((r.seq & 1) || r.crc != RECORD_CRC(&r) || r.state > WARM_BUF_BROKEN ||
	    memchr(r.class_name, '\0', sizeof(r.class_name)) == NULL)
		return;
	page = h->version == 2 && r.page_shift == 0 ? h->page_size
	       : r.page_shift >= PAGE_SHIFT_MIN && r.page_shift <= PAGE_SHIFT_MAX ? UINT64_C(1) << r.page_shift
										: 0;
	if (page < (UINT64_C(1) << PAGE_SHIFT_MIN) || page > (UINT64_C(1) << PAGE_SHIFT_MAX) || (page & (page - 1)))
		return;
	b->state = (enum warm_buf_state)r.state;
	b->uid = (uid_t)r.uid;
	b->index = r.index;
	b->size = r.size;
	b->page_size = page;
	b->fd_id = r.fd_id;
	memcpy(b->class_name, r.class_name, sizeof(b->class_name));
	b->conn_id = r.conn_id;
	b->lease_id = r.lease_id;
	b->since_rt = r.since_rt;
}

static void conn_decode(const uint8_t *p, struct warm_conn *c)
{
	struct warm_conn_record r;

	memcpy(&r, p, sizeof(r));
	if ((r.seq & 1) || r.crc != RECORD_CRC(&r) || r.state > WARM_CONN_OTHER ||
	    !memchr(r.name, '\0', sizeof(r.name)) || !memchr(r.wait_class, '\0', sizeof(r.wait_class)))
		return;
	c->state = (enum warm_conn_state)r.state;
	c->conn_id = r.conn_id;
	c->uid = (uid_t)r.uid;
	c->gid = (gid_t)r.gid;
	c->pid = (pid_t)r.pid;
	c->version = (uint16_t)r.version;
	c->connected_rt = r.connected_rt;
	memcpy(c->name, r.name, sizeof(c->name));
	memcpy(c->wait_class, r.wait_class, sizeof(c->wait_class));
	c->wait_count = r.wait_count;
	c->wait_deadline = r.wait_deadline;
}

static void spill_decode(const uint8_t *p, struct warm_spill *sp)
{
	struct warm_spill_record r;

	memcpy(&r, p, sizeof(r));
	if ((r.seq & 1) || r.crc != RECORD_CRC(&r) || r.state > WARM_SPILL_PAGE)
		return;
	sp->state = (enum warm_spill_state)r.state;
	sp->uid = (uid_t)r.uid;
	sp->pid = (pid_t)r.pid;
	sp->conn_id = r.conn_id;
	sp->file_id = r.file_id;
	sp->charged = r.charged;
	sp->fd_id = r.fd_id;
}

static int ref_cmp(const void *a, const void *b)
{
	const struct warm_ref *x = a, *y = b;

	if (x->conn_id != y->conn_id)
		return x->conn_id < y->conn_id ? -1 : 1;
	return x->record < y->record ? -1 : x->record > y->record;
}

/* prev's connections' records, sorted: warm_prev_leases and warm_prev_spills look them up. */
static int index_by_conn(struct warm_prev *prev)
{
	prev->leased = calloc(prev->nbuffers ? prev->nbuffers : 1, sizeof(*prev->leased));
	prev->spilled = calloc(prev->nspills ? prev->nspills : 1, sizeof(*prev->spilled));
	prev->lingering = calloc(prev->nspills ? prev->nspills : 1, sizeof(*prev->lingering));
	if (!prev->leased || !prev->spilled || !prev->lingering)
		return -ENOMEM;
	for (uint32_t i = 0; i < prev->nbuffers; i++)
		if (prev->bufs[i].state == WARM_BUF_LEASED)
			prev->leased[prev->nleased++] = (struct warm_ref){ prev->bufs[i].conn_id, i };
	for (uint32_t i = 0; i < prev->nspills; i++)
		if (prev->spills[i].state == WARM_SPILL_FILE || prev->spills[i].state == WARM_SPILL_PAGE)
			prev->spilled[prev->nspilled++] = (struct warm_ref){ prev->spills[i].conn_id, i };
		else if (prev->spills[i].state == WARM_SPILL_LINGER)
			prev->lingering[prev->nlingering++] = i;
	qsort(prev->leased, prev->nleased, sizeof(*prev->leased), ref_cmp);
	qsort(prev->spilled, prev->nspilled, sizeof(*prev->spilled), ref_cmp);
	return 0;
}

/* Where ref is, or goes, in refs (sorted by connection, then record). */
static uint32_t ref_place(const struct warm_ref *refs, uint32_t n, const struct warm_ref *ref)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (ref_cmp(&refs[mid], ref) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* One ref out of, or into, a sorted index (its room: one per record, allocated by index_by_conn). */
static void ref_remove(struct warm_ref *refs, uint32_t *n, struct warm_ref ref)
{
	uint32_t at = ref_place(refs, *n, &ref);

	if (at < *n && ref_cmp(&refs[at], &ref) == 0) {
		memmove(&refs[at], &refs[at + 1], (*n - at - 1) * sizeof(*refs));
		(*n)--;
	}
}

static void ref_insert(struct warm_ref *refs, uint32_t *n, struct warm_ref ref)
{
	uint32_t at = ref_place(refs, *n, &ref);

	memmove(&refs[at + 1], &refs[at], (*n - at) * sizeof(*refs));
	refs[at] = ref;
	(*n)++;
}

static uint32_t refs_of(const struct warm_ref *refs, uint32_t n, uint64_t conn_id, const struct warm_ref **ret)
{
	uint32_t lo = 0, hi = n, end;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (refs[mid].conn_id < conn_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (end = lo; end < n && refs[end].conn_id == conn_id; end++)
		;
	*ret = refs + lo;
	return end - lo;
}

uint32_t warm_prev_leases(const struct warm_prev *prev, uint64_t conn_id, const struct warm_ref **ret)
{
	return refs_of(prev->leased, prev->nleased, conn_id, ret);
}

uint32_t warm_prev_spills(const struct warm_prev *prev, uint64_t conn_id, const struct warm_ref **ret)
{
	return refs_of(prev->spilled, prev->nspilled, conn_id, ret);
}

/*
 * Was the record of size bytes at p caught while being written: an odd sequence number, or a
 * checksum a whole record would not have (read between its seq and its end)? Not one never
 * written (all zeros).
 */
static bool record_torn(const uint8_t *p, size_t size)
{
	uint32_t seq, crc;

	memcpy(&seq, p, sizeof(seq));
	memcpy(&crc, p + 4, sizeof(crc));
	if (seq & 1)
		return true;
	if (crc == crc32c(0, p + 8, size - 8))
		return false;
	for (size_t i = 0; i < size; i++)
		if (p[i])
			return true;
	return false;
}

/*
 * A state its life still writes (a take-over's snapshot): each record copied while it was being
 * written is read again until it is whole, TORN_TRIES times at most (then it decodes to nothing,
 * as a torn one does). Its life writes a record in a moment, and whatever it writes from the
 * snapshot on is handed over again once it stopped.
 */
#define TORN_TRIES 1000
static void untear(int fd, uint8_t *buf, const struct warm_header *h)
{
	static const size_t size[WARM_KINDS] = { sizeof(struct warm_record), sizeof(struct warm_conn_record),
						 sizeof(struct warm_spill_record) };
	uint32_t count[WARM_KINDS] = { h->nbuffers, h->nconns, h->nspills };
	size_t at = sizeof(*h);

	for (int k = 0; k < WARM_KINDS; k++)
		for (uint32_t i = 0; i < count[k]; i++, at += size[k])
			for (int tries = 0; tries < TORN_TRIES && record_torn(buf + at, size[k]); tries++) {
				sched_yield();
				if (pread(fd, buf + at, size[k], (off_t)at) != (ssize_t)size[k])
					break;
			}
}

static int read_state(int fd, bool live, struct warm_prev **ret, char *err, size_t errlen)
{
	_cleanup_free_ uint8_t *buf = NULL;
	struct warm_header h;
	struct warm_prev *prev;
	const uint8_t *p;
	size_t len = 0;
	int r;

	r = state_copy(fd, &buf, &len, err, errlen);
	if (r < 0)
		return r;
	memcpy(&h, buf, sizeof(h));
	r = header_check(&h, len, err, errlen);
	if (r < 0)
		return r;
	if (live)
		untear(fd, buf, &h);
	prev = calloc(1, sizeof(*prev));
	if (!prev || !(prev->bufs = calloc(h.nbuffers ? h.nbuffers : 1, sizeof(*prev->bufs))) ||
	    !(prev->conns = calloc(h.nconns ? h.nconns : 1, sizeof(*prev->conns))) ||
	    !(prev->spills = calloc(h.nspills ? h.nspills : 1, sizeof(*prev->spills)))) {
		warm_prev_free(prev);
		return -ENOMEM;
	}
	prev->id = h.id;
	prev->lives = h.lives;
	prev->version = h.version;
	prev->page_size = h.page_size;
	prev->nbuffers = h.nbuffers;
	prev->nconns = h.nconns;
	prev->nspills = h.nspills;
	/* the records follow the header: the buffers', the connections', the spill files' */
	p = buf + sizeof(h);
	for (uint32_t i = 0; i < h.nbuffers; i++, p += sizeof(struct warm_record))
		buf_decode(p, &h, &prev->bufs[i]);
	for (uint32_t i = 0; i < h.nconns; i++, p += sizeof(struct warm_conn_record))
		conn_decode(p, &prev->conns[i]);
	for (uint32_t i = 0; i < h.nspills; i++, p += sizeof(struct warm_spill_record))
		spill_decode(p, &prev->spills[i]);
	if (index_by_conn(prev) < 0) {
		warm_prev_free(prev);
		return -ENOMEM;
	}
	*ret = prev;
	return 0;
}

int warm_read(int fd, struct warm_prev **ret, char *err, size_t errlen)
{
	return read_state(fd, false, ret, err, errlen);
}

int warm_read_live(int fd, struct warm_prev **ret, char *err, size_t errlen)
{
	return read_state(fd, true, ret, err, errlen);
}

int warm_prev_update(struct warm_prev *prev, int fd, enum warm_kind k, const uint32_t *recs, uint32_t n)
{
	static const size_t size[WARM_KINDS] = { sizeof(struct warm_record), sizeof(struct warm_conn_record),
						 sizeof(struct warm_spill_record) };
	uint32_t count = k == WARM_KIND_BUF ? prev->nbuffers : k == WARM_KIND_CONN ? prev->nconns : prev->nspills;
	const struct warm_header hdr = { .version = prev->version, .page_size = prev->page_size };
	off_t base = (off_t)sizeof(struct warm_header);
	union {
		struct warm_record b;
		struct warm_conn_record c;
		struct warm_spill_record s;
	} rec;

	if (k != WARM_KIND_BUF)
		base += (off_t)prev->nbuffers * (off_t)sizeof(struct warm_record);
	if (k == WARM_KIND_SPILL)
		base += (off_t)prev->nconns * (off_t)sizeof(struct warm_conn_record);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t r = recs[i];

		if (r >= count)
			return -EBADMSG;
		if (pread(fd, &rec, size[k], base + (off_t)r * (off_t)size[k]) != (ssize_t)size[k])
			return -EIO;
		/* what the record says now, or (torn, corrupt) nothing; the indexes follow */
		if (k == WARM_KIND_BUF) {
			if (prev->bufs[r].state == WARM_BUF_LEASED)
				ref_remove(prev->leased, &prev->nleased, (struct warm_ref){ prev->bufs[r].conn_id, r });
			prev->bufs[r] = (struct warm_buf){ 0 };
			buf_decode((const uint8_t *)&rec, &hdr, &prev->bufs[r]);
			if (prev->bufs[r].state == WARM_BUF_LEASED)
				ref_insert(prev->leased, &prev->nleased, (struct warm_ref){ prev->bufs[r].conn_id, r });
		} else if (k == WARM_KIND_CONN) {
			prev->conns[r] = (struct warm_conn){ 0 };
			conn_decode((const uint8_t *)&rec, &prev->conns[r]);
		} else {
			struct warm_spill *sp = &prev->spills[r];

			if (sp->state == WARM_SPILL_FILE || sp->state == WARM_SPILL_PAGE)
				ref_remove(prev->spilled, &prev->nspilled, (struct warm_ref){ sp->conn_id, r });
			for (uint32_t l = 0; sp->state == WARM_SPILL_LINGER && l < prev->nlingering; l++)
				if (prev->lingering[l] == r)
					prev->lingering[l--] = prev->lingering[--prev->nlingering];
			*sp = (struct warm_spill){ 0 };
			spill_decode((const uint8_t *)&rec, sp);
			if (sp->state == WARM_SPILL_FILE || sp->state == WARM_SPILL_PAGE)
				ref_insert(prev->spilled, &prev->nspilled, (struct warm_ref){ sp->conn_id, r });
			else if (sp->state == WARM_SPILL_LINGER)
				prev->lingering[prev->nlingering++] = r;
		}
	}
	return 0;
}

void warm_choose(struct fdstore_fd *fds, unsigned n, struct warm_prev **ret, char *err, size_t errlen)
{
	struct warm_prev *best = NULL;

	err[0] = '\0';
	for (unsigned i = 0; i < n; i++) {
		struct warm_prev *prev = NULL;
		uint64_t id;
		int r;

		if (fds[i].fd < 0 || !warm_parse_name(fds[i].name, WARM_NAME_STATE, &id))
			continue;
		r = warm_read(fds[i].fd, &prev, err, errlen);
		if (r == -ENOMEM)
			snprintf(err, errlen, "out of memory reading the state");
		else if (r < 0 && !err[0])
			snprintf(err, errlen, "cannot read the state: %s", strerror(-r));
		if (r == 0 && prev->id != id) {
			snprintf(err, errlen, "state %s names itself %016" PRIx64, fds[i].name, prev->id);
			warm_prev_free(prev);
			prev = NULL;
		}
		close(fds[i].fd);
		fds[i].fd = -1;
		if (!prev) {
			fdstore_remove(fds[i].name);
			continue;
		}
		if (best && prev->lives <= best->lives) {
			fdstore_remove(fds[i].name);
			warm_prev_free(prev);
			continue;
		}
		if (best) {
			char name[WARM_NAME_MAX];

			warm_name(WARM_NAME_STATE, best->id, name);
			fdstore_remove(name);
			warm_prev_free(best);
		}
		best = prev;
	}
	if (best)
		err[0] = '\0';
	*ret = best;
}

void warm_prev_free(struct warm_prev *prev)
{
	if (!prev)
		return;
	free(prev->bufs);
	free(prev->conns);
	free(prev->spills);
	free(prev->leased);
	free(prev->spilled);
	free(prev->lingering);
	free(prev);
}

static int slots_init(struct slots *sl, uint32_t n)
{
	sl->free = calloc(n ? n : 1, sizeof(int));
	if (!sl->free)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		sl->free[sl->n++] = (int)(n - 1 - i); /* slot 0 first */
	return 0;
}

/* A free slot, or -1 when none is; and a slot given back. */
static int slots_take(struct slots *sl)
{
	return sl->n ? sl->free[--sl->n] : -1;
}

static void slots_put(struct slots *sl, int slot)
{
	sl->free[sl->n++] = slot;
}

int warm_create(uint32_t nbuffers, uint32_t nconns, uint32_t nspills, uint64_t lives, struct warm **ret)
{
	struct warm *w = calloc(1, sizeof(*w));
	size_t w_size;
	void *map;
	int fd;

	if (!w || slots_init(&w->free_conns, nconns) < 0 || slots_init(&w->free_spills, nspills) < 0) {
		if (w) {
			free(w->free_conns.free);
			free(w);
		}
		return log_oom("the warm state's slots");
	}
	w->size = sizeof(struct warm_header) + (size_t)nbuffers * sizeof(struct warm_record) +
		  (size_t)nconns * sizeof(struct warm_conn_record) + (size_t)nspills * sizeof(struct warm_spill_record);
	w_size = w->size;
	fd = sealed_memfd("hugepool:state", 0, w->size, PROT_READ | PROT_WRITE, &map);
	if (fd < 0) {
		free(w->free_conns.free);
		free(w->free_spills.free);
		free(w);
		return log_error_errno(fd, "Failed to create the warm state memfd (%zu bytes): %m", w_size);
	}
	w->fd = fd;
	w->hdr = map;
	w->recs = (struct warm_record *)(w->hdr + 1);
	w->conns = (struct warm_conn_record *)(w->recs + nbuffers);
	w->spills = (struct warm_spill_record *)(w->conns + nconns);
	*w->hdr = (struct warm_header){ .version = WARM_VERSION, .header_size = sizeof(struct warm_header),
					.record_size = sizeof(struct warm_record), .nbuffers = nbuffers,
					.conn_record_size = sizeof(struct warm_conn_record), .nconns = nconns,
					.spill_record_size = sizeof(struct warm_spill_record), .nspills = nspills,
					.id = warm_new_id(), .lives = lives };
	/* the checksum is of the published header: only the magic is missing until then */
	memcpy(w->hdr->magic, magic, sizeof(magic));
	w->hdr->crc = crc32c(0, w->hdr, offsetof(struct warm_header, crc));
	memset(w->hdr->magic, 0, sizeof(magic));
	*ret = w;
	return 0;
}

void warm_publish(struct warm *w)
{
	/* every record is written before the magic: stores the compiler keeps in order suffice,
	 * the next life reads the memory after this process ended */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	memcpy(w->hdr->magic, magic, sizeof(magic));
}

static uint32_t kind_count(const struct warm *w, enum warm_kind k)
{
	return k == WARM_KIND_BUF ? w->hdr->nbuffers : k == WARM_KIND_CONN ? w->hdr->nconns : w->hdr->nspills;
}

int warm_track(struct warm *w)
{
	for (int k = 0; k < WARM_KINDS; k++) {
		w->written[k] = calloc(kind_count(w, (enum warm_kind)k) / 8 + 1, 1);
		if (!w->written[k]) {
			warm_track_end(w);
			return -ENOMEM;
		}
	}
	return 0;
}

uint32_t warm_tracked(const struct warm *w, enum warm_kind k, uint32_t **ret)
{
	uint32_t n = 0, total = kind_count(w, k);
	uint32_t *list;

	*ret = NULL;
	if (!w->written[k])
		return 0;
	for (uint32_t i = 0; i < total; i++)
		n += (w->written[k][i / 8] >> (i % 8)) & 1;
	if (!n || !(list = malloc(n * sizeof(*list))))
		return 0;
	n = 0;
	for (uint32_t i = 0; i < total; i++)
		if ((w->written[k][i / 8] >> (i % 8)) & 1)
			list[n++] = i;
	*ret = list;
	return n;
}

void warm_track_end(struct warm *w)
{
	for (int k = 0; k < WARM_KINDS; k++) {
		free(w->written[k]);
		w->written[k] = NULL;
	}
}

int warm_fd(const struct warm *w)
{
	return w->fd;
}

uint64_t warm_id(const struct warm *w)
{
	return w->hdr->id;
}

/*
 * A record is odd (being written) between these two, and carries its CRC and an even seq
 * after. Only the compiler could reorder the stores (the process dies, the memory stays).
 */
#define record_begin(r)                                                        \
	do {                                                                   \
		__atomic_store_n(&(r)->seq, (r)->seq | 1, __ATOMIC_RELAXED);   \
		__atomic_signal_fence(__ATOMIC_SEQ_CST);                       \
	} while (0)
#define record_end(r)                                                          \
	do {                                                                   \
		(r)->crc = RECORD_CRC(r);                                      \
		__atomic_signal_fence(__ATOMIC_SEQ_CST);                       \
		__atomic_store_n(&(r)->seq, (r)->seq + 1, __ATOMIC_RELAXED);   \
	} while (0)

void warm_set(struct warm *w, uint32_t i, const struct warm_buf *b)
{
	struct warm_record *r = &w->recs[i];

	mark(w, WARM_KIND_BUF, i);
	record_begin(r);
	r->state = b->state;
	r->uid = (uint32_t)b->uid;
	r->index = b->index;
	r->page_shift = b->page_size ? (uint32_t)__builtin_ctzll(b->page_size) : 0;
	r->size = b->size;
	r->fd_id = b->fd_id;
	memset(r->class_name, 0, sizeof(r->class_name));
	snprintf(r->class_name, sizeof(r->class_name), "%s", b->class_name);
	r->conn_id = b->state == WARM_BUF_LEASED ? b->conn_id : 0;
	r->lease_id = b->state == WARM_BUF_LEASED ? b->lease_id : 0;
	r->since_rt = b->state == WARM_BUF_LEASED ? b->since_rt : 0;
	record_end(r);
}

int warm_conn_take(struct warm *w)
{
	return slots_take(&w->free_conns);
}

void warm_conn_set(struct warm *w, int slot, const struct warm_conn *c)
{
	struct warm_conn_record *r = &w->conns[slot];

	mark(w, WARM_KIND_CONN, (uint32_t)slot);
	record_begin(r);
	r->state = c->state;
	r->uid = (uint32_t)c->uid;
	r->gid = (uint32_t)c->gid;
	r->pid = (uint32_t)c->pid;
	r->version = c->version;
	r->conn_id = c->conn_id;
	r->connected_rt = c->connected_rt;
	memset(r->name, 0, sizeof(r->name));
	snprintf(r->name, sizeof(r->name), "%s", c->name);
	memset(r->wait_class, 0, sizeof(r->wait_class));
	if (c->state == WARM_CONN_WAITING)
		snprintf(r->wait_class, sizeof(r->wait_class), "%s", c->wait_class);
	r->wait_count = c->state == WARM_CONN_WAITING ? c->wait_count : 0;
	r->wait_deadline = c->state == WARM_CONN_WAITING ? c->wait_deadline : 0;
	record_end(r);
}

void warm_conn_release(struct warm *w, int slot)
{
	struct warm_conn_record *r = &w->conns[slot];

	mark(w, WARM_KIND_CONN, (uint32_t)slot);
	record_begin(r);
	r->state = WARM_CONN_FREE;
	record_end(r);
	slots_put(&w->free_conns, slot);
}

int warm_spill_take(struct warm *w)
{
	return slots_take(&w->free_spills);
}

void warm_spill_set(struct warm *w, int slot, const struct warm_spill *sp)
{
	struct warm_spill_record *r = &w->spills[slot];

	mark(w, WARM_KIND_SPILL, (uint32_t)slot);
	record_begin(r);
	r->state = sp->state;
	r->uid = (uint32_t)sp->uid;
	r->pid = (uint32_t)sp->pid;
	r->reserved = 0;
	r->conn_id = sp->state == WARM_SPILL_LINGER ? 0 : sp->conn_id;
	r->file_id = sp->state == WARM_SPILL_FILE ? sp->file_id : 0;
	r->charged = sp->state == WARM_SPILL_FILE ? sp->charged : 0;
	r->fd_id = sp->fd_id;
	record_end(r);
}

void warm_spill_release(struct warm *w, int slot)
{
	struct warm_spill_record *r = &w->spills[slot];

	mark(w, WARM_KIND_SPILL, (uint32_t)slot);
	record_begin(r);
	r->state = WARM_SPILL_FREE;
	record_end(r);
	slots_put(&w->free_spills, slot);
}

void warm_free(struct warm *w)
{
	if (!w)
		return;
	munmap(w->hdr, w->size);
	close(w->fd);
	warm_track_end(w);
	free(w->free_conns.free);
	free(w->free_spills.free);
	free(w);
}
