/* SPDX-License-Identifier: MIT */
/*
 * config.c - the hugepoold.conf parser.
 *
 * A small, strict INI dialect: global "key = value" lines first, then sections: one
 * "[class NAME]" per buffer class and one "[journal NAME]" per journal. Each kind of section is a
 * row of section_kinds[] (its keys, how a section starts and how it is checked once complete), so
 * the line-level parser knows nothing about classes or journals. The daemon pre-faults gigabytes
 * and promises durability from this file at boot, so the parser never guesses: an unknown key, a
 * typo in a number or a size that does not fit the page size stops the load with
 * "FILE:LINE: reason". Everything here runs once on the main thread; nothing is logged or
 * printed, the caller decides what to do with the message.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "size.h"
#include "util.h"

#define CONFIG_FILE_MAX (1024 * 1024) /* bytes; real files are a few hundred */
#define CONFIG_LINE_MAX 4096 /* bytes, without the newline */
#define CONFIG_QUOTE_MAX 64 /* echo at most this much of a bad value back in a message */

#define PAGE_SIZE_4K UINT64_C(4096)
#define PAGE_SIZE_2M (UINT64_C(2) << 20)
#define PAGE_SIZE_1G (UINT64_C(1) << 30)

/* Journal limits; config.h says what each key means. */
#define JOURNAL_BLOCK UINT64_C(4096) /* segment header and O_DIRECT alignment */
#define JOURNAL_SEGMENT_MIN (UINT64_C(1) << 20)
#define JOURNAL_BATCH_MAX (UINT64_C(64) << 20)
#define JOURNAL_RING_MIN (UINT64_C(64) << 10)
#define JOURNAL_RING_MAX (UINT64_C(64) << 20)
#define JOURNAL_DELAY_MAX_NS UINT64_C(10000000000) /* 10s */
#define SPILL_THRESHOLD_MAX (UINT64_C(1) << 30)

#define SECTION_NAME_MAX 31 /* the longest name of any section kind, without the NUL */
#define KEYS_MAX 32 /* the most keys of any table: the global keys or a section kind's */

/* For "%.*s%s": a bad value is quoted back, but a 4 KiB line must not drown the reason. */
#define CLIP(s)                                                         \
	(int)MIN(strlen(s), (size_t)CONFIG_QUOTE_MAX), (s),             \
		strlen(s) > CONFIG_QUOTE_MAX ? "..." : ""

struct parser;

struct key {
	const char *name;
	int (*set)(struct parser *p, const struct key *k, const char *value);
	/* for the table-driven setters (set_u32, set_size, set_duration): the accepted range and
	 * where the value goes (in struct config for global keys, in the section's object for
	 * section keys: see parser.obj) */
	uint64_t min, max;
	size_t offset;
};

/*
 * One kind of section, "[kind NAME]". begin() checks that a section of that name may start
 * (unique, not too many) and points p->obj at its fresh object, filled with the defaults;
 * finish() checks the complete section (required keys, keys that depend on each other) once the
 * next header or the end of the file is reached. Errors from finish() point at the header's line.
 */
struct section_kind {
	const char *kind; /* "class": the word in the header */
	const struct key *keys;
	size_t nkeys;
	size_t name_max; /* characters in NAME, without the NUL */
	int (*begin)(struct parser *p, const char *name);
	int (*finish)(struct parser *p);
};

enum {
	CKEY_SIZE,
	CKEY_COUNT,
	CKEY_NUM,
};

enum {
	JKEY_DIRECTORY,
	JKEY_SEGMENT_SIZE,
	JKEY_SEGMENTS,
	JKEY_BACKEND,
	JKEY_DIRECT,
	JKEY_MAX_BATCH_DELAY,
	JKEY_MAX_BATCH_BYTES,
	JKEY_RING_SIZE,
	JKEY_WHEN_FULL,
	JKEY_APPEND,
	JKEY_READ,
	JKEY_TRUNCATE,
	JKEY_NUM,
};

_Static_assert(CKEY_NUM <= KEYS_MAX && JKEY_NUM <= KEYS_MAX, "KEYS_MAX covers every section kind");
_Static_assert(CONFIG_CLASS_NAME_MAX <= SECTION_NAME_MAX &&
		       CONFIG_JOURNAL_NAME_MAX <= SECTION_NAME_MAX,
	       "SECTION_NAME_MAX covers every section kind");

struct parser {
	const char *name;
	struct config *cfg;
	char *err;
	size_t errlen;
	unsigned line;
	/* The section being read: kind and obj are NULL before the first one. */
	const struct section_kind *kind;
	void *obj; /* struct config_class or struct config_journal: set_u32's base */
	char section_name[SECTION_NAME_MAX + 1];
	/* First line each key was set on (0 = not yet), for duplicate and missing-key messages. */
	unsigned global_lines[KEYS_MAX];
	unsigned section_lines[KEYS_MAX];
};

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail_at(struct parser *p, unsigned line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int vfail_at(struct parser *p, unsigned line, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

static int vfail_at(struct parser *p, unsigned line, const char *fmt, va_list ap)
{
	int n;

	if (!p->err || !p->errlen)
		return -EINVAL;
	if (line)
		n = snprintf(p->err, p->errlen, "%s:%u: ", p->name, line);
	else
		n = snprintf(p->err, p->errlen, "%s: ", p->name);
	if (n >= 0 && (size_t)n < p->errlen)
		vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
	return -EINVAL;
}

static int fail_at(struct parser *p, unsigned line, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfail_at(p, line, fmt, ap);
	va_end(ap);
	return r;
}

static int fail(struct parser *p, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfail_at(p, p->line, fmt, ap);
	va_end(ap);
	return r;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

static char *skip_blanks(char *s)
{
	while (is_blank(*s))
		s++;
	return s;
}

static void trim_right(char *s)
{
	size_t n = strlen(s);

	while (n > 0 && is_blank(s[n - 1]))
		s[--n] = '\0';
}

static bool is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '-';
}

/* Decimal only: a leading "0" must not turn "0755"-style typos into octal, and no sign at all. */
static int parse_u64(const char *s, uint64_t *ret)
{
	uint64_t v = 0;
	bool overflow = false;

	if (*s == '\0')
		return -EINVAL;
	for (; *s; s++) {
		unsigned d;

		if (*s < '0' || *s > '9')
			return -EINVAL;
		d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			overflow = true;
		else
			v = v * 10 + d;
	}
	if (overflow)
		return -ERANGE;
	*ret = v;
	return 0;
}

static int get_uint(struct parser *p, const char *key, const char *value, uint64_t min,
		    uint64_t max, uint64_t *ret)
{
	uint64_t v;
	int r;

	r = parse_u64(value, &v);
	if (r == -EINVAL)
		return fail(p, "bad number \"%.*s%s\" for \"%s\": expected a decimal integer from %" PRIu64
			       " to %" PRIu64,
			    CLIP(value), key, min, max);
	if (r < 0 || v < min || v > max)
		return fail(p, "value %.*s%s for \"%s\" is out of range: expected %" PRIu64 " to %" PRIu64,
			    CLIP(value), key, min, max);
	*ret = v;
	return 0;
}

static int get_size(struct parser *p, const char *key, const char *value, uint64_t *ret)
{
	int r;

	r = size_parse(value, ret);
	if (r == -ERANGE)
		return fail(p, "size \"%.*s%s\" for \"%s\" is too large: it does not fit in 64 bits",
			    CLIP(value), key);
	if (r < 0)
		return fail(p, "bad size \"%.*s%s\" for \"%s\": expected a number with an optional K, M, G or T suffix",
			    CLIP(value), key);
	return 0;
}

static uint64_t page_size_in_use(const struct config *cfg)
{
	return cfg->hugepages == HUGEPAGES_OFF ? PAGE_SIZE_4K : cfg->page_size;
}

static const char *page_size_name(uint64_t page)
{
	if (page == PAGE_SIZE_1G)
		return "1 GiB";
	if (page == PAGE_SIZE_2M)
		return "2 MiB";
	return "4 KiB, hugepages = off";
}

static int set_socket(struct parser *p, const struct key *k, const char *value)
{
	size_t n = strlen(value);

	(void)k;
	if (value[0] != '/')
		return fail(p, "socket path \"%.*s%s\" is not absolute", CLIP(value));
	if (n >= sizeof(p->cfg->socket_path))
		return fail(p, "socket path is too long: %zu bytes, at most %zu", n,
			    sizeof(p->cfg->socket_path) - 1);
	memcpy(p->cfg->socket_path, value, n + 1);
	return 0;
}

static int set_socket_mode(struct parser *p, const struct key *k, const char *value)
{
	const char *key = k->name;
	const char *s;
	unsigned v = 0;

	for (s = value; *s; s++) {
		if (*s < '0' || *s > '7')
			return fail(p, "bad mode \"%.*s%s\" for \"%s\": expected an octal number such as 0660",
				    CLIP(value), key);
		/* Saturate instead of wrapping so "10000000000000" is out of range, not 0. */
		if (v <= 07777)
			v = v * 8 + (unsigned)(*s - '0');
	}
	if (v > 0777)
		return fail(p, "mode %.*s%s for \"%s\" is out of range: at most 0777", CLIP(value),
			    key);
	p->cfg->socket_mode = (mode_t)v;
	return 0;
}

/* A group name into the char[CONFIG_GROUP_MAX] at k->offset of struct config. */
static int set_group_name(struct parser *p, const struct key *k, const char *value)
{
	const char *key = k->name;
	size_t n = strlen(value);

	if (n >= CONFIG_GROUP_MAX)
		return fail(p, "group name \"%.*s%s\" for \"%s\" is too long: at most %d bytes", CLIP(value),
			    key, CONFIG_GROUP_MAX - 1);
	/* Only stored: the group is resolved when the daemon starts serving, which logs failures. */
	memcpy((char *)p->cfg + k->offset, value, n + 1);
	return 0;
}

static int set_hugepages(struct parser *p, const struct key *k, const char *value)
{
	const char *key = k->name;
	if (!strcmp(value, "prefer"))
		p->cfg->hugepages = HUGEPAGES_PREFER;
	else if (!strcmp(value, "require"))
		p->cfg->hugepages = HUGEPAGES_REQUIRE;
	else if (!strcmp(value, "off"))
		p->cfg->hugepages = HUGEPAGES_OFF;
	else
		return fail(p, "bad value \"%.*s%s\" for \"%s\": expected require, prefer or off",
			    CLIP(value), key);
	return 0;
}

static int set_page_size(struct parser *p, const struct key *k, const char *value)
{
	const char *key = k->name;
	uint64_t v;
	int r;

	r = get_size(p, key, value, &v);
	if (r < 0)
		return r;
	if (v != PAGE_SIZE_2M && v != PAGE_SIZE_1G)
		return fail(p, "unsupported page size \"%.*s%s\" for \"%s\": expected 2M or 1G",
			    CLIP(value), key);
	p->cfg->page_size = v;
	return 0;
}

/* 65536 -> "64K": a limit as the file would spell it, for messages (exact suffixes only). */
static const char *size_short(uint64_t v, char *buf, size_t len)
{
	static const char suffix[] = "KMGT";
	int i = -1;

	while (i < 3 && v && v % 1024 == 0) {
		v /= 1024;
		i++;
	}
	if (i < 0)
		snprintf(buf, len, "%" PRIu64, v);
	else
		snprintf(buf, len, "%" PRIu64 "%c", v, suffix[i]);
	return buf;
}

/* A size from min to max bytes, both included. */
static int get_size_range(struct parser *p, const char *key, const char *value, uint64_t min,
			  uint64_t max, uint64_t *ret)
{
	char lo[24], hi[24];
	uint64_t v;
	int r;

	r = get_size(p, key, value, &v);
	if (r < 0)
		return r;
	if (v < min || v > max)
		return fail(p, "size \"%.*s%s\" for \"%s\" is out of range: expected %s to %s",
			    CLIP(value), key, size_short(min, lo, sizeof(lo)),
			    size_short(max, hi, sizeof(hi)));
	*ret = v;
	return 0;
}

static int set_class_size(struct parser *p, const struct key *k, const char *value)
{
	const char *key = k->name;
	struct config_class *c = p->obj;
	uint64_t page, v;
	int r;

	r = get_size(p, key, value, &v);
	if (r < 0)
		return r;
	if (v == 0)
		return fail(p, "size of class \"%s\" must be greater than 0", c->name);

	/*
	 * Global keys are only allowed before the first section, so the page size is final by now
	 * and the error can point at this line rather than at the end of the file.
	 */
	page = page_size_in_use(p->cfg);
	if (v % page) {
		uint64_t up = v - v % page + page;
		char buf[32];

		if (up < v)
			return fail(p, "size %" PRIu64 " of class \"%s\" is not a multiple of the page size (%s)",
				    v, c->name, page_size_name(page));
		return fail(p, "size %" PRIu64 " of class \"%s\" is not a multiple of the page size (%s): "
			       "round it up to %" PRIu64 " (%s)",
			    v, c->name, page_size_name(page), up, size_format(up, buf, sizeof(buf)));
	}
	c->size = v;
	return 0;
}

/*
 * Two spellings of one directory ("/var/j", "/var//j/") are the same for the kernel: compare
 * with runs of '/' taken as one and trailing ones ignored. "." and ".." are not resolved.
 */
static bool same_directory(const char *a, const char *b)
{
	for (;;) {
		if (*a == '/' && *b == '/') {
			while (*a == '/')
				a++;
			while (*b == '/')
				b++;
			if (!*a && !*b)
				return true;
			/* "/x" against "/x/" */
			if (!*a || !*b)
				return false;
			continue;
		}
		if (*a == '/' && !*b) {
			while (*a == '/')
				a++;
			return !*a;
		}
		if (*b == '/' && !*a) {
			while (*b == '/')
				b++;
			return !*b;
		}
		if (*a != *b)
			return false;
		if (!*a)
			return true;
		a++;
		b++;
	}
}

static int set_journal_directory(struct parser *p, const struct key *k, const char *value)
{
	struct config_journal *j = p->obj;
	size_t n = strlen(value);
	unsigned i;

	(void)k;
	if (value[0] != '/')
		return fail(p, "directory \"%.*s%s\" of journal \"%s\" is not absolute", CLIP(value),
			    j->name);
	if (n >= sizeof(j->directory))
		return fail(p, "directory of journal \"%s\" is too long: %zu bytes, at most %zu",
			    j->name, n, sizeof(j->directory) - 1);
	/* The journals before this one are complete: this one is the last of the array. */
	for (i = 0; i + 1 < p->cfg->njournals; i++)
		if (same_directory(p->cfg->journals[i].directory, value))
			return fail(p, "journals \"%s\" and \"%s\" share the directory \"%.*s%s\" "
				       "(journal \"%s\" is defined on line %u): each needs its own",
				    p->cfg->journals[i].name, j->name, CLIP(value),
				    p->cfg->journals[i].name, p->cfg->journals[i].line);
	if (same_directory(p->cfg->spill_directory, value))
		return fail(p, "journal \"%s\" would share the directory \"%.*s%s\" with spill_directory: "
			       "each needs its own",
			    j->name, CLIP(value));
	memcpy(j->directory, value, n + 1);
	return 0;
}

static int set_journal_segment_size(struct parser *p, const struct key *k, const char *value)
{
	struct config_journal *j = p->obj;
	uint64_t v;
	int r;

	r = get_size(p, k->name, value, &v);
	if (r < 0)
		return r;
	if (v < JOURNAL_SEGMENT_MIN)
		return fail(p, "size \"%.*s%s\" for \"%s\" is too small: at least 1M", CLIP(value),
			    k->name);
	if (v % JOURNAL_BLOCK) {
		uint64_t up = v - v % JOURNAL_BLOCK + JOURNAL_BLOCK;

		if (up < v)
			return fail(p, "size \"%.*s%s\" for \"%s\" is not a multiple of 4096",
				    CLIP(value), k->name);
		return fail(p, "size \"%.*s%s\" for \"%s\" is not a multiple of 4096: round it up to %" PRIu64,
			    CLIP(value), k->name, up);
	}
	j->segment_size = v;
	return 0;
}

static int set_journal_ring_size(struct parser *p, const struct key *k, const char *value)
{
	struct config_journal *j = p->obj;
	uint64_t v, lo;
	char a[24], b[24];
	int r;

	r = get_size_range(p, k->name, value, JOURNAL_RING_MIN, JOURNAL_RING_MAX, &v);
	if (r < 0)
		return r;
	if (v & (v - 1)) {
		/* in range and not a power of two, so both neighbours are in range too */
		lo = UINT64_C(1) << (63 - __builtin_clzll(v));
		return fail(p, "size \"%.*s%s\" for \"%s\" is not a power of two: the nearest are %s and %s",
			    CLIP(value), k->name, size_short(lo, a, sizeof(a)),
			    size_short(lo << 1, b, sizeof(b)));
	}
	j->ring_size = v;
	return 0;
}

static int set_journal_backend(struct parser *p, const struct key *k, const char *value)
{
	struct config_journal *j = p->obj;

	if (!strcmp(value, "auto"))
		j->backend = JOURNAL_BACKEND_AUTO;
	else if (!strcmp(value, "io_uring"))
		j->backend = JOURNAL_BACKEND_URING;
	else if (!strcmp(value, "libaio"))
		j->backend = JOURNAL_BACKEND_AIO;
	else if (!strcmp(value, "sync"))
		j->backend = JOURNAL_BACKEND_SYNC;
	else
		return fail(p, "bad value \"%.*s%s\" for \"%s\": expected auto, io_uring, libaio or sync",
			    CLIP(value), k->name);
	return 0;
}

static int set_journal_direct(struct parser *p, const struct key *k, const char *value)
{
	struct config_journal *j = p->obj;

	if (!strcmp(value, "on") || !strcmp(value, "yes") || !strcmp(value, "true"))
		j->direct = true;
	else if (!strcmp(value, "off") || !strcmp(value, "no") || !strcmp(value, "false"))
		j->direct = false;
	else
		return fail(p, "bad value \"%.*s%s\" for \"%s\": expected on, off, yes, no, true or false",
			    CLIP(value), k->name);
	return 0;
}

static int set_journal_when_full(struct parser *p, const struct key *k, const char *value)
{
	struct config_journal *j = p->obj;

	if (!strcmp(value, "block"))
		j->recycle = false;
	else if (!strcmp(value, "recycle"))
		j->recycle = true;
	else
		return fail(p, "bad value \"%.*s%s\" for \"%s\": expected block or recycle",
			    CLIP(value), k->name);
	return 0;
}

static const struct {
	const char *name;
	uint64_t ns;
} duration_units[] = {
	{ "ns", 1 },
	{ "us", 1000 },
	{ "ms", 1000000 },
	{ "s", 1000000000 },
};

/*
 * A duration: a decimal integer and a unit, with nothing between them ("500us", "2ms", "1s"),
 * in nanoseconds; a bare "0" is allowed since it is 0 in any unit. No sign, no fraction.
 */
static int get_duration(struct parser *p, const char *key, const char *value, uint64_t max_ns,
			uint64_t *ret)
{
	const char *s = value, *unit;
	uint64_t v = 0, mult = 0, ns;
	bool overflow = false, letters = true;
	char buf[24];
	size_t i;

	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			overflow = true;
		else
			v = v * 10 + d;
	}
	unit = s;
	if (unit == value)
		return fail(p, "bad duration \"%.*s%s\" for \"%s\": expected an integer and a unit "
			       "(ns, us, ms or s), as in 500us or 2ms",
			    CLIP(value), key);
	if (*unit == '.')
		return fail(p, "bad duration \"%.*s%s\" for \"%s\": no fractions, use a smaller unit "
			       "(1500us, not 1.5ms)",
			    CLIP(value), key);
	if (!*unit) {
		if (!overflow && v == 0) {
			*ret = 0;
			return 0;
		}
		return fail(p, "duration \"%.*s%s\" for \"%s\" has no unit: expected ns, us, ms or s "
			       "after the number, as in 2ms",
			    CLIP(value), key);
	}
	for (i = 0; i < ARRAY_SIZE(duration_units); i++)
		if (!strcmp(unit, duration_units[i].name))
			mult = duration_units[i].ns;
	if (!mult) {
		for (s = unit; *s; s++)
			if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
				letters = false;
		if (letters)
			return fail(p, "unknown unit \"%.*s%s\" in duration \"%.*s%s\" for \"%s\": "
				       "expected ns, us, ms or s",
				    CLIP(unit), CLIP(value), key);
		return fail(p, "bad duration \"%.*s%s\" for \"%s\": expected an integer and a unit "
			       "(ns, us, ms or s), as in 500us or 2ms",
			    CLIP(value), key);
	}
	if (overflow || __builtin_mul_overflow(v, mult, &ns) || ns > max_ns) {
		/* max_ns in the largest unit that says it exactly */
		for (i = ARRAY_SIZE(duration_units); i-- > 1;)
			if (max_ns % duration_units[i].ns == 0)
				break;
		snprintf(buf, sizeof(buf), "%" PRIu64 "%s", max_ns / duration_units[i].ns,
			 duration_units[i].name);
		return fail(p, "duration \"%.*s%s\" for \"%s\" is out of range: at most %s",
			    CLIP(value), key, buf);
	}
	*ret = ns;
	return 0;
}

/* Where the value of a key of the tables below goes: k->offset into the object being read. */
static void *key_field(struct parser *p, const struct key *k)
{
	/* inside a section only its own keys get here, before the first one only global ones */
	void *base = p->obj ? p->obj : (void *)p->cfg;

	return (char *)base + k->offset;
}

/* An integer key: the range check and the message are get_uint's. */
static int set_u32(struct parser *p, const struct key *k, const char *value)
{
	uint64_t v = 0;
	int r;

	r = get_uint(p, k->name, value, k->min, k->max, &v);
	if (r < 0)
		return r;
	*(uint32_t *)key_field(p, k) = (uint32_t)v;
	return 0;
}

/* A size key: the range check and the message are get_size_range's. */
static int set_size(struct parser *p, const struct key *k, const char *value)
{
	return get_size_range(p, k->name, value, k->min, k->max, key_field(p, k));
}

/* A duration key, at most k->max ns: the message is get_duration's. */
static int set_duration(struct parser *p, const struct key *k, const char *value)
{
	return get_duration(p, k->name, value, k->max, key_field(p, k));
}

/* A key one of the setters above stores, from lo to hi, in the ctype field of type. */
#define FIELD_KEY(n, setter, lo, hi, type, field, ctype)                 \
	{ .name = n, .set = setter, .min = lo, .max = hi,               \
	  .offset = _Generic(((type *)0)->field, ctype: offsetof(type, field)) }
#define U32_KEY(n, lo, hi, type, field) FIELD_KEY(n, set_u32, lo, hi, type, field, uint32_t)
#define SIZE_KEY(n, lo, hi, type, field) FIELD_KEY(n, set_size, lo, hi, type, field, uint64_t)
#define DURATION_KEY(n, hi, type, field) FIELD_KEY(n, set_duration, 0, hi, type, field, uint64_t)

#define ACQUIRE_WAIT_MAX_NS (86400ull * 1000000000ull) /* a day */

static int set_spill_directory(struct parser *p, const struct key *k, const char *value)
{
	size_t n = strlen(value);

	(void)k;
	if (value[0] != '/')
		return fail(p, "spill_directory \"%.*s%s\" is not absolute", CLIP(value));
	if (n >= sizeof(p->cfg->spill_directory))
		return fail(p, "spill_directory is too long: %zu bytes, at most %zu", n,
			    sizeof(p->cfg->spill_directory) - 1);
	memcpy(p->cfg->spill_directory, value, n + 1);
	return 0;
}

static const struct key global_keys[] = {
	{ .name = "socket", .set = set_socket },
	{ .name = "socket_mode", .set = set_socket_mode },
	{ .name = "socket_group", .set = set_group_name, .offset = offsetof(struct config, socket_group) },
	{ .name = "admin_group", .set = set_group_name, .offset = offsetof(struct config, admin_group) },
	{ .name = "hugepages", .set = set_hugepages },
	{ .name = "page_size", .set = set_page_size },
	U32_KEY("prefault_threads", 0, 1024, struct config, prefault_threads),
	U32_KEY("max_connections", 1, 65536, struct config, max_connections),
	U32_KEY("max_connections_per_uid", 0, 65536, struct config, max_connections_per_uid),
	SIZE_KEY("max_bytes_per_uid", 0, UINT64_MAX, struct config, max_bytes_per_uid),
	DURATION_KEY("max_acquire_wait", ACQUIRE_WAIT_MAX_NS, struct config, max_acquire_wait_ns),
	U32_KEY("max_journal_writers_per_uid", 0, 65536, struct config, max_journal_writers_per_uid),
	{ .name = "spill_directory", .set = set_spill_directory },
	SIZE_KEY("spill_threshold", 0, SPILL_THRESHOLD_MAX, struct config, spill_threshold),
	SIZE_KEY("spill_max_bytes", 0, UINT64_MAX, struct config, spill_max_bytes),
	U32_KEY("spill_max_files", 0, 1000000, struct config, spill_max_files),
	SIZE_KEY("spill_max_bytes_per_uid", 0, UINT64_MAX, struct config, spill_max_bytes_per_uid),
	U32_KEY("spill_max_files_per_uid", 0, 1000000, struct config, spill_max_files_per_uid),
};

_Static_assert(ARRAY_SIZE(global_keys) <= KEYS_MAX, "KEYS_MAX covers the global keys");

static const struct key class_keys[CKEY_NUM] = {
	[CKEY_SIZE] = { .name = "size", .set = set_class_size },
	[CKEY_COUNT] = U32_KEY("count", 1, 1000000, struct config_class, count),
};

/*
 * "append = alice 1001 @engines": who may; k->offset is the enum journal_op. Only the form is
 * checked here (names of letters, digits, '.', '_', '-'); the daemon resolves them at start.
 */
static int set_journal_access(struct parser *p, const struct key *k, const char *value)
{
	struct config_journal *j = p->obj;
	struct config_acl *acl = &j->access[k->offset];
	const char *v = value;

	*acl = (struct config_acl){ .set = true };
	while (*v) {
		struct config_acl_entry *e;
		size_t n;

		v += strspn(v, " \t");
		if (!*v)
			break;
		if (acl->n == CONFIG_ACL_MAX)
			return fail(p, "\"%s\" of journal \"%s\" names more than %d users and groups", k->name,
				    j->name, CONFIG_ACL_MAX);
		e = &acl->e[acl->n++];
		e->group = *v == '@';
		v += e->group;
		n = strcspn(v, " \t");
		if (n == 0 || n >= sizeof(e->name) || strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") < n)
			return fail(p, "bad %s \"%.*s\" in \"%s\" of journal \"%s\": expected a name or number of "
				       "at most %d characters (letters, digits, '.', '_', '-')",
				    e->group ? "group" : "user", (int)MIN(n, (size_t)CONFIG_QUOTE_MAX), v, k->name,
				    j->name, CONFIG_ACL_NAME_MAX - 1);
		memcpy(e->name, v, n);
		e->name[n] = '\0';
		v += n;
	}
	return 0;
}

static const struct key journal_keys[JKEY_NUM] = {
	[JKEY_DIRECTORY] = { .name = "directory", .set = set_journal_directory },
	[JKEY_SEGMENT_SIZE] = { .name = "segment_size", .set = set_journal_segment_size },
	[JKEY_SEGMENTS] = U32_KEY("segments", 2, 1024, struct config_journal, segments),
	[JKEY_BACKEND] = { .name = "backend", .set = set_journal_backend },
	[JKEY_DIRECT] = { .name = "direct", .set = set_journal_direct },
	[JKEY_MAX_BATCH_DELAY] = DURATION_KEY("max_batch_delay", JOURNAL_DELAY_MAX_NS, struct config_journal,
					      max_batch_delay_ns),
	/* <= segment_size - 4096 is finish_journal's: segment_size may come later */
	[JKEY_MAX_BATCH_BYTES] = SIZE_KEY("max_batch_bytes", JOURNAL_BLOCK, JOURNAL_BATCH_MAX, struct config_journal,
					  max_batch_bytes),
	[JKEY_RING_SIZE] = { .name = "ring_size", .set = set_journal_ring_size },
	[JKEY_WHEN_FULL] = { .name = "when_full", .set = set_journal_when_full },
	[JKEY_APPEND] = { .name = "append", .set = set_journal_access, .offset = JOURNAL_APPEND },
	[JKEY_READ] = { .name = "read", .set = set_journal_access, .offset = JOURNAL_READ },
	[JKEY_TRUNCATE] = { .name = "truncate", .set = set_journal_access, .offset = JOURNAL_TRUNCATE },
};

static int find_key(const struct key *keys, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(keys[i].name, name))
			return (int)i;
	return -1;
}

static int begin_class(struct parser *p, const char *name)
{
	struct config *cfg = p->cfg;
	struct config_class *c;
	unsigned i;

	for (i = 0; i < cfg->nclasses; i++)
		if (!strcmp(cfg->classes[i].name, name))
			return fail(p, "duplicate class \"%s\" (first defined on line %u)", name,
				    cfg->classes[i].line);
	if (cfg->nclasses >= CONFIG_CLASSES_MAX)
		return fail(p, "too many classes: at most %d are allowed", CONFIG_CLASSES_MAX);

	c = &cfg->classes[cfg->nclasses++];
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->line = p->line;
	p->obj = c;
	return 0;
}

/* The sum of size * count over the classes into *total; false if it overflows 64 bits. */
static bool pool_bytes(const struct config *cfg, uint64_t *total)
{
	uint64_t bytes;
	unsigned i;

	*total = 0;
	for (i = 0; i < cfg->nclasses; i++)
		if (__builtin_mul_overflow(cfg->classes[i].size, (uint64_t)cfg->classes[i].count,
					   &bytes) ||
		    __builtin_add_overflow(*total, bytes, total))
			return false;
	return true;
}

/* A class is complete once its section ends: both keys set and the pool total still in 64 bits. */
static int finish_class(struct parser *p)
{
	struct config_class *c = p->obj;
	uint64_t total;

	if (!p->section_lines[CKEY_SIZE])
		return fail_at(p, c->line, "class \"%s\" has no \"size\" key", c->name);
	if (!p->section_lines[CKEY_COUNT])
		return fail_at(p, c->line, "class \"%s\" has no \"count\" key", c->name);
	/* c is the last of cfg->classes, and the total of those before it fits */
	if (!pool_bytes(p->cfg, &total))
		return fail_at(p, c->line,
			       "class \"%s\" makes the pool larger than 2^64 bytes (size * count overflows)",
			       c->name);
	return 0;
}

static int begin_journal(struct parser *p, const char *name)
{
	struct config *cfg = p->cfg;
	struct config_journal *j;
	unsigned i;

	for (i = 0; i < cfg->njournals; i++)
		if (!strcmp(cfg->journals[i].name, name))
			return fail(p, "duplicate journal \"%s\" (first defined on line %u)", name,
				    cfg->journals[i].line);
	if (cfg->njournals >= CONFIG_JOURNALS_MAX)
		return fail(p, "too many journals: at most %d are allowed", CONFIG_JOURNALS_MAX);

	j = &cfg->journals[cfg->njournals++];
	memset(j, 0, sizeof(*j));
	snprintf(j->name, sizeof(j->name), "%s", name);
	j->segment_size = UINT64_C(64) << 20;
	j->segments = 4;
	j->backend = JOURNAL_BACKEND_AUTO;
	j->direct = false;
	j->max_batch_delay_ns = UINT64_C(2000000);
	j->max_batch_bytes = UINT64_C(1) << 20;
	j->ring_size = UINT64_C(1) << 20;
	j->recycle = false;
	j->line = p->line;
	p->obj = j;
	return 0;
}

/* Where a key's value came from, for messages about two keys: "set on line 7", "the default". */
static const char *key_origin(const struct parser *p, int k, char *buf, size_t len)
{
	if (!p->section_lines[k])
		return "the default";
	snprintf(buf, len, "set on line %u", p->section_lines[k]);
	return buf;
}

/* A journal is complete once its section ends: a directory, and a batch that fits a segment. */
static int finish_journal(struct parser *p)
{
	struct config_journal *j = p->obj;
	char a[24], b[24];
	uint64_t bytes;

	if (!p->section_lines[JKEY_DIRECTORY])
		return fail_at(p, j->line, "journal \"%s\" has no \"directory\" key", j->name);
	/* a batch is written after the segment's header block, and never spans two segments; a
	 * default that does not fit a small segment shrinks to fit, an explicit value is an error */
	if (!p->section_lines[JKEY_MAX_BATCH_BYTES] && j->max_batch_bytes > j->segment_size - JOURNAL_BLOCK)
		j->max_batch_bytes = j->segment_size - JOURNAL_BLOCK;
	if (j->max_batch_bytes > j->segment_size - JOURNAL_BLOCK)
		return fail_at(p, j->line,
			       "journal \"%s\": max_batch_bytes %" PRIu64 " (%s) is larger than "
			       "segment_size - 4096 = %" PRIu64 " (segment_size: %s): "
			       "a batch must fit in one segment after its 4096-byte header",
			       j->name, j->max_batch_bytes, key_origin(p, JKEY_MAX_BATCH_BYTES, a, sizeof(a)),
			       j->segment_size - JOURNAL_BLOCK,
			       key_origin(p, JKEY_SEGMENT_SIZE, b, sizeof(b)));
	if (__builtin_mul_overflow(j->segment_size, (uint64_t)j->segments, &bytes))
		return fail_at(p, j->line,
			       "journal \"%s\" is larger than 2^64 bytes (segment_size * segments overflows)",
			       j->name);
	return 0;
}

static const struct section_kind section_kinds[] = {
	{
		.kind = "class",
		.keys = class_keys,
		.nkeys = ARRAY_SIZE(class_keys),
		.name_max = CONFIG_CLASS_NAME_MAX,
		.begin = begin_class,
		.finish = finish_class,
	},
	{
		.kind = "journal",
		.keys = journal_keys,
		.nkeys = ARRAY_SIZE(journal_keys),
		.name_max = CONFIG_JOURNAL_NAME_MAX,
		.begin = begin_journal,
		.finish = finish_journal,
	},
};

/*
 * Every section kind for a message, each as "[kind]" plus suffix, joined with ", " and a final
 * conjunction: "[class NAME] and [journal NAME]", "[class] or [journal]".
 */
static const char *kind_list(char *buf, size_t len, const char *suffix, const char *conj)
{
	size_t i, n = 0, nk = ARRAY_SIZE(section_kinds);

	buf[0] = '\0';
	for (i = 0; i < nk && n < len; i++) {
		const char *sep = i == 0 ? "" : i + 1 < nk ? ", " : conj;
		int w = snprintf(buf + n, len - n, "%s[%s%s]", sep, section_kinds[i].kind, suffix);

		if (w < 0)
			break;
		n += (size_t)w;
	}
	return buf;
}

/* The section being read, if any, is complete: check it and leave the global state. */
static int finish_section(struct parser *p)
{
	int r;

	if (!p->kind)
		return 0;
	r = p->kind->finish(p);
	if (r < 0)
		return r;
	p->kind = NULL;
	p->obj = NULL;
	return 0;
}

/* s is the whole line, trimmed on the left, starting with '['. */
static int parse_section(struct parser *p, char *s)
{
	const struct section_kind *sk = NULL;
	char *close, *rest, *kind, *name;
	char list[128];
	size_t i, n;
	int r;

	close = strchr(s, ']');
	if (!close) {
		trim_right(s);
		return fail(p, "bad section header \"%.*s%s\": missing \"]\"", CLIP(s));
	}
	*close = '\0';
	rest = skip_blanks(close + 1);
	if (*rest && *rest != '#' && *rest != ';')
		return fail(p, "bad section header: unexpected text \"%.*s%s\" after \"]\"",
			    CLIP(rest));

	kind = skip_blanks(s + 1);
	trim_right(kind);
	if (!*kind)
		return fail(p, "bad section header \"[]\": expected %s",
			    kind_list(list, sizeof(list), " NAME", " or "));
	for (name = kind; *name && !is_blank(*name); name++)
		;
	if (*name)
		*name++ = '\0';
	name = skip_blanks(name);

	for (i = 0; i < ARRAY_SIZE(section_kinds); i++)
		if (!strcmp(kind, section_kinds[i].kind))
			sk = &section_kinds[i];
	if (!sk)
		return fail(p, "unknown section \"%.*s%s\": the only section kinds are %s", CLIP(kind),
			    kind_list(list, sizeof(list), " NAME", " and "));
	if (!*name)
		return fail(p, "bad section header \"[%s]\": the %s needs a name, as in [%s NAME]",
			    sk->kind, sk->kind, sk->kind);

	n = strlen(name);
	if (n > sk->name_max)
		return fail(p, "%s name \"%.*s%s\" is too long: %zu characters, at most %zu", sk->kind,
			    CLIP(name), n, sk->name_max);
	for (i = 0; i < n; i++)
		if (!is_name_char(name[i]))
			return fail(p, "bad %s name \"%s\": '%c' is not allowed, use only letters, digits, '_', '.' and '-'",
				    sk->kind, name, name[i]);

	r = finish_section(p);
	if (r < 0)
		return r;
	r = sk->begin(p, name);
	if (r < 0)
		return r;
	p->kind = sk;
	memcpy(p->section_name, name, n + 1);
	memset(p->section_lines, 0, sizeof(p->section_lines));
	return 0;
}

/* s is the whole line, trimmed on the left, not a comment and not a section header. */
static int parse_assignment(struct parser *p, char *s)
{
	char *eq, *key, *value, *q;
	unsigned *lines;
	const struct key *keys;
	size_t nkeys, i;
	int k;

	eq = strchr(s, '=');
	if (!eq) {
		trim_right(s);
		return fail(p, "missing \"=\": expected \"key = value\", got \"%.*s%s\"", CLIP(s));
	}
	*eq = '\0';
	key = s;
	trim_right(key);
	if (!*key)
		return fail(p, "missing key before \"=\"");

	/* The key first: "sise =" is better reported as a typo than as an empty value. */
	if (p->kind) {
		keys = p->kind->keys;
		nkeys = p->kind->nkeys;
		lines = p->section_lines;
	} else {
		keys = global_keys;
		nkeys = ARRAY_SIZE(global_keys);
		lines = p->global_lines;
	}

	k = find_key(keys, nkeys, key);
	if (k < 0) {
		if (p->kind && find_key(global_keys, ARRAY_SIZE(global_keys), key) >= 0)
			return fail(p, "key \"%s\" belongs before the first section", key);
		for (i = 0; i < ARRAY_SIZE(section_kinds); i++)
			if (&section_kinds[i] != p->kind &&
			    find_key(section_kinds[i].keys, section_kinds[i].nkeys, key) >= 0)
				return fail(p, "key \"%s\" is only valid inside a [%s NAME] section", key,
					    section_kinds[i].kind);
		if (p->kind)
			return fail(p, "unknown key \"%.*s%s\" in [%s %s]", CLIP(key), p->kind->kind,
				    p->section_name);
		return fail(p, "unknown key \"%.*s%s\" in the global section", CLIP(key));
	}
	if (lines[k]) {
		if (p->kind)
			return fail(p, "duplicate key \"%s\" in [%s %s] (first set on line %u)", key,
				    p->kind->kind, p->section_name, lines[k]);
		return fail(p, "duplicate key \"%s\" (first set on line %u)", key, lines[k]);
	}

	value = skip_blanks(eq + 1);
	if (*value == '"') {
		value++;
		q = strchr(value, '"');
		if (!q)
			return fail(p, "unterminated quote in the value of \"%.*s%s\"", CLIP(key));
		*q = '\0';
		q = skip_blanks(q + 1);
		if (*q && *q != '#')
			return fail(p, "unexpected text \"%.*s%s\" after the closing quote of \"%.*s%s\"",
				    CLIP(q), CLIP(key));
	} else {
		/* A '#' starts a comment only after a blank, so "/run/a#b.sock" stays one path. */
		for (q = value; *q; q++) {
			if (*q == '#' && (q == value || is_blank(q[-1]))) {
				*q = '\0';
				break;
			}
		}
		trim_right(value);
	}
	if (!*value)
		return fail(p, "empty value for \"%.*s%s\"", CLIP(key));

	lines[k] = p->line;
	return keys[k].set(p, &keys[k], value);
}

static int parse_line(struct parser *p, char *s)
{
	s = skip_blanks(s);
	if (!*s || *s == '#' || *s == ';')
		return 0;
	if (*s == '[')
		return parse_section(p, s);
	return parse_assignment(p, s);
}

/* text need not be NUL-terminated; len lets config_load report a NUL byte instead of stopping. */
static int parse_text(const char *name, const char *text, size_t len, struct config *cfg,
		      char *err, size_t errlen)
{
	struct parser p = {
		.name = name,
		.cfg = cfg,
		.err = err,
		.errlen = errlen,
	};
	char buf[CONFIG_LINE_MAX + 1];
	const char *s = text, *end = text + len;
	int r;

	config_init(cfg);
	if (err && errlen)
		err[0] = '\0';

	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);

		p.line++;
		if (n > CONFIG_LINE_MAX) {
			r = fail(&p, "line too long: %zu bytes, at most %d", n, CONFIG_LINE_MAX);
			goto out;
		}
		if (memchr(s, '\0', n)) {
			r = fail(&p, "NUL byte in the file: is this a text file?");
			goto out;
		}
		memcpy(buf, s, n);
		buf[n] = '\0';
		r = parse_line(&p, buf);
		if (r < 0)
			goto out;
		s += n + 1;
	}

	r = finish_section(&p);
	if (r < 0)
		goto out;
	if (!cfg->nclasses && !cfg->njournals) {
		char list[128];

		r = fail_at(&p, 0, "no %s section: nothing to serve",
			    kind_list(list, sizeof(list), "", " or "));
	}
out:
	/* Never hand back a half-parsed config: the caller may print it or keep running with it. */
	if (r < 0)
		config_init(cfg);
	return r;
}

void config_init(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	memcpy(cfg->socket_path, CONFIG_DEFAULT_SOCKET, sizeof(CONFIG_DEFAULT_SOCKET));
	cfg->socket_mode = 0660;
	cfg->hugepages = HUGEPAGES_PREFER;
	cfg->page_size = PAGE_SIZE_2M;
	cfg->prefault_threads = 0;
	cfg->max_connections = 1024;
	cfg->max_connections_per_uid = 64;
	cfg->max_journal_writers_per_uid = 64;
	cfg->max_acquire_wait_ns = 60ull * 1000000000ull;
	cfg->max_bytes_per_uid = 0;
	memcpy(cfg->spill_directory, CONFIG_DEFAULT_SPILL_DIR, sizeof(CONFIG_DEFAULT_SPILL_DIR));
	cfg->spill_threshold = UINT64_C(1) << 20;
	cfg->spill_max_bytes = UINT64_C(16) << 30;
	cfg->spill_max_files = 4096;
	cfg->spill_max_bytes_per_uid = 0;
	cfg->spill_max_files_per_uid = 1024;
}

int config_parse(const char *name, const char *text, struct config *cfg, char *err, size_t errlen)
{
	return parse_text(name, text, strlen(text), cfg, err, errlen);
}

int config_load(const char *path, struct config *cfg, char *err, size_t errlen)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r;

	config_init(cfg);

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		r = -errno;
		set_err(err, errlen, "%s: cannot open: %s", path, strerror(-r));
		return r;
	}

	/* One byte more than the limit, so that a file of exactly the limit is still accepted. */
	buf = malloc(CONFIG_FILE_MAX + 1);
	if (!buf) {
		set_err(err, errlen, "%s: cannot read: %s", path, strerror(ENOMEM));
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, CONFIG_FILE_MAX + 1 - len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			set_err(err, errlen, "%s: cannot read: %s", path, strerror(-r));
			return r;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > CONFIG_FILE_MAX) {
			set_err(err, errlen, "%s: file too large: more than %d bytes (1 MiB)", path,
				CONFIG_FILE_MAX);
			return -EFBIG;
		}
	}

	return parse_text(path, buf, len, cfg, err, errlen);
}

uint64_t config_pool_bytes(const struct config *cfg)
{
	uint64_t total;

	/* The parser rejects overflowing configs; saturate anyway for hand-built ones. */
	return pool_bytes(cfg, &total) ? total : UINT64_MAX;
}

const char *hugepages_mode_name(enum hugepages_mode m)
{
	switch (m) {
	case HUGEPAGES_PREFER:
		return "prefer";
	case HUGEPAGES_REQUIRE:
		return "require";
	case HUGEPAGES_OFF:
		return "off";
	}
	return "unknown";
}

const char *journal_backend_name(enum journal_backend b)
{
	switch (b) {
	case JOURNAL_BACKEND_AUTO:
		return "auto";
	case JOURNAL_BACKEND_URING:
		return "io_uring";
	case JOURNAL_BACKEND_AIO:
		return "libaio";
	case JOURNAL_BACKEND_SYNC:
		return "sync";
	}
	return "unknown";
}
