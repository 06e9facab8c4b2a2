/* SPDX-License-Identifier: MIT */
/*
 * config_reader.c - a strict INI reader: the half of the hugepoold.conf parser that knows
 * nothing of hugepoold (its classes, journals and hugepages are config.c's).
 *
 * The dialect: "key = value" lines, then "[kind NAME]" section headers each followed by its
 * own keys; blank lines; comments from '#' or ';' at the start of a line, or from a '#' after a
 * blank in an unquoted value; a value may be in double quotes. Which keys and section kinds
 * there are, and what a value means, is the schema's (struct schema in config_internal.h): the
 * reader finds each key in the table in force (the global keys before the first section, the
 * kind's own inside one), refuses unknown, misplaced, duplicate and empty ones, and hands the
 * value as text to the key's setter. Setters convert values with the helpers here (sizes,
 * durations, integers), which report a bad value themselves; keys whose value is just a number
 * in a range need no setter of their own (U32_KEY, SIZE_KEY, DURATION_KEY).
 *
 * The reader never guesses: the first error stops it, as one line "FILE:LINE: reason" in the
 * caller's buffer (ini_fail), quoting a bad value back clipped to CONFIG_QUOTE_MAX bytes
 * (CLIP). Nothing is logged or printed. Runs once, on the main thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "config_internal.h"
#include "size.h"
#include "util.h"

#define CONFIG_FILE_MAX (1024 * 1024) /* bytes; real files are a few hundred */
#define CONFIG_LINE_MAX 4096 /* bytes, without the newline */

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

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

int ini_fail_at(struct parser *p, unsigned line, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfail_at(p, line, fmt, ap);
	va_end(ap);
	return r;
}

int ini_fail(struct parser *p, const char *fmt, ...)
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

static int get_uint(struct parser *p, const char *key, const char *value, uint64_t min,
		    uint64_t max, uint64_t *ret)
{
	uint64_t v;
	int r;

	r = decimal_parse(value, &v); /* a leading "0" is no octal, and no sign at all */
	if (r == -EINVAL)
		return ini_fail(p, "bad number \"%.*s%s\" for \"%s\": expected a decimal integer from %" PRIu64
				   " to %" PRIu64,
				CLIP(value), key, min, max);
	if (r < 0 || v < min || v > max)
		return ini_fail(p, "value %.*s%s for \"%s\" is out of range: expected %" PRIu64 " to %" PRIu64,
				CLIP(value), key, min, max);
	*ret = v;
	return 0;
}

int ini_get_size(struct parser *p, const char *key, const char *value, uint64_t *ret)
{
	int r;

	r = size_parse(value, ret);
	if (r == -ERANGE)
		return ini_fail(p, "size \"%.*s%s\" for \"%s\" is too large: it does not fit in 64 bits",
				CLIP(value), key);
	if (r < 0)
		return ini_fail(p, "bad size \"%.*s%s\" for \"%s\": expected a number with an optional K, M, G or T suffix",
				CLIP(value), key);
	return 0;
}

/* 65536 -> "64K": a limit as the file would spell it, for messages (exact suffixes only). */
const char *ini_size_short(uint64_t v, char *buf, size_t len)
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
int ini_get_size_range(struct parser *p, const char *key, const char *value, uint64_t min,
		       uint64_t max, uint64_t *ret)
{
	char lo[24], hi[24];
	uint64_t v;
	int r;

	r = ini_get_size(p, key, value, &v);
	if (r < 0)
		return r;
	if (v < min || v > max)
		return ini_fail(p, "size \"%.*s%s\" for \"%s\" is out of range: expected %s to %s",
				CLIP(value), key, ini_size_short(min, lo, sizeof(lo)),
				ini_size_short(max, hi, sizeof(hi)));
	*ret = v;
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
	const char *s, *unit = value;
	uint64_t v = 0, mult = 0, ns;
	bool overflow, letters = true;
	char buf[24];
	size_t i;
	int r;

	r = decimal_prefix(value, &unit, &v);
	overflow = r == -ERANGE;
	if (r == -EINVAL)
		return ini_fail(p, "bad duration \"%.*s%s\" for \"%s\": expected an integer and a unit "
				   "(ns, us, ms or s), as in 500us or 2ms",
				CLIP(value), key);
	if (*unit == '.')
		return ini_fail(p, "bad duration \"%.*s%s\" for \"%s\": no fractions, use a smaller unit "
				   "(1500us, not 1.5ms)",
				CLIP(value), key);
	if (!*unit) {
		if (!overflow && v == 0) {
			*ret = 0;
			return 0;
		}
		return ini_fail(p, "duration \"%.*s%s\" for \"%s\" has no unit: expected ns, us, ms or s "
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
			return ini_fail(p, "unknown unit \"%.*s%s\" in duration \"%.*s%s\" for \"%s\": "
					   "expected ns, us, ms or s",
					CLIP(unit), CLIP(value), key);
		return ini_fail(p, "bad duration \"%.*s%s\" for \"%s\": expected an integer and a unit "
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
		return ini_fail(p, "duration \"%.*s%s\" for \"%s\" is out of range: at most %s",
				CLIP(value), key, buf);
	}
	*ret = ns;
	return 0;
}

/* Where a U32_KEY, SIZE_KEY or DURATION_KEY row's value goes: k->offset into the object read. */
static void *key_field(struct parser *p, const struct key *k)
{
	/* inside a section only its own keys get here, before the first one only global ones */
	void *base = p->obj ? p->obj : p->global;

	return (char *)base + k->offset;
}

/* An integer key: the range check and the message are get_uint's. */
int ini_set_u32(struct parser *p, const struct key *k, const char *value)
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
int ini_set_size(struct parser *p, const struct key *k, const char *value)
{
	return ini_get_size_range(p, k->name, value, k->min, k->max, key_field(p, k));
}

/* A duration key, at most k->max ns: the message is get_duration's. */
int ini_set_duration(struct parser *p, const struct key *k, const char *value)
{
	return get_duration(p, k->name, value, k->max, key_field(p, k));
}

static int find_key(const struct key *keys, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(keys[i].name, name))
			return (int)i;
	return -1;
}

/*
 * Every section kind for a message, each as "[kind]" plus suffix, joined with ", " and a final
 * conjunction: "[class NAME] and [journal NAME]", "[class] or [journal]".
 */
const char *ini_kind_list(const struct parser *p, char *buf, size_t len, const char *suffix,
			  const char *conj)
{
	size_t i, n = 0, nk = p->schema->nkinds;

	buf[0] = '\0';
	for (i = 0; i < nk && n < len; i++) {
		const char *sep = i == 0 ? "" : i + 1 < nk ? ", " : conj;
		int w = snprintf(buf + n, len - n, "%s[%s%s]", sep, p->schema->kinds[i].kind, suffix);

		if (w < 0)
			break;
		n += (size_t)w;
	}
	return buf;
}

/* Where key k of the section being read got its value, for messages about two keys. */
const char *ini_key_origin(const struct parser *p, int k, char *buf, size_t len)
{
	if (!p->section_lines[k])
		return "the default";
	snprintf(buf, len, "set on line %u", p->section_lines[k]);
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
		return ini_fail(p, "bad section header \"%.*s%s\": missing \"]\"", CLIP(s));
	}
	*close = '\0';
	rest = skip_blanks(close + 1);
	if (*rest && *rest != '#' && *rest != ';')
		return ini_fail(p, "bad section header: unexpected text \"%.*s%s\" after \"]\"",
				CLIP(rest));

	kind = skip_blanks(s + 1);
	trim_right(kind);
	if (!*kind)
		return ini_fail(p, "bad section header \"[]\": expected %s",
				ini_kind_list(p, list, sizeof(list), " NAME", " or "));
	for (name = kind; *name && !is_blank(*name); name++)
		;
	if (*name)
		*name++ = '\0';
	name = skip_blanks(name);

	for (i = 0; i < p->schema->nkinds; i++)
		if (!strcmp(kind, p->schema->kinds[i].kind))
			sk = &p->schema->kinds[i];
	if (!sk)
		return ini_fail(p, "unknown section \"%.*s%s\": the only section kinds are %s", CLIP(kind),
				ini_kind_list(p, list, sizeof(list), " NAME", " and "));
	if (!*name)
		return ini_fail(p, "bad section header \"[%s]\": the %s needs a name, as in [%s NAME]",
				sk->kind, sk->kind, sk->kind);

	n = strlen(name);
	if (n > sk->name_max)
		return ini_fail(p, "%s name \"%.*s%s\" is too long: %zu characters, at most %zu", sk->kind,
				CLIP(name), n, sk->name_max);
	for (i = 0; i < n; i++)
		if (!is_name_char(name[i]))
			return ini_fail(p, "bad %s name \"%s\": '%c' is not allowed, use only letters, digits, '_', '.' and '-'",
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
		return ini_fail(p, "missing \"=\": expected \"key = value\", got \"%.*s%s\"", CLIP(s));
	}
	*eq = '\0';
	key = s;
	trim_right(key);
	if (!*key)
		return ini_fail(p, "missing key before \"=\"");

	/* The key first: "sise =" is better reported as a typo than as an empty value. */
	if (p->kind) {
		keys = p->kind->keys;
		nkeys = p->kind->nkeys;
		lines = p->section_lines;
	} else {
		keys = p->schema->keys;
		nkeys = p->schema->nkeys;
		lines = p->global_lines;
	}

	k = find_key(keys, nkeys, key);
	if (k < 0) {
		const char *other = NULL; /* another kind of section that has the key */

		for (i = 0; i < p->schema->nkinds && !other; i++)
			if (&p->schema->kinds[i] != p->kind &&
			    find_key(p->schema->kinds[i].keys, p->schema->kinds[i].nkeys, key) >= 0)
				other = p->schema->kinds[i].kind;
		/* a key both global and of a section (page_size): say both places */
		if (p->kind && find_key(p->schema->keys, p->schema->nkeys, key) >= 0)
			return other ? ini_fail(p, "key \"%s\" belongs before the first section or in a [%s NAME] section",
						key, other)
				     : ini_fail(p, "key \"%s\" belongs before the first section", key);
		if (other)
			return ini_fail(p, "key \"%s\" is only valid inside a [%s NAME] section", key, other);
		if (p->kind)
			return ini_fail(p, "unknown key \"%.*s%s\" in [%s %s]", CLIP(key), p->kind->kind,
					p->section_name);
		return ini_fail(p, "unknown key \"%.*s%s\" in the global section", CLIP(key));
	}
	if (lines[k]) {
		if (p->kind)
			return ini_fail(p, "duplicate key \"%s\" in [%s %s] (first set on line %u)", key,
					p->kind->kind, p->section_name, lines[k]);
		return ini_fail(p, "duplicate key \"%s\" (first set on line %u)", key, lines[k]);
	}

	value = skip_blanks(eq + 1);
	if (*value == '"') {
		value++;
		q = strchr(value, '"');
		if (!q)
			return ini_fail(p, "unterminated quote in the value of \"%.*s%s\"", CLIP(key));
		*q = '\0';
		q = skip_blanks(q + 1);
		if (*q && *q != '#')
			return ini_fail(p, "unexpected text \"%.*s%s\" after the closing quote of \"%.*s%s\"",
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
		return ini_fail(p, "empty value for \"%.*s%s\"", CLIP(key));

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

/* text need not be NUL-terminated; len lets ini_load report a NUL byte instead of stopping. */
int ini_parse(const struct schema *schema, void *global, const char *name, const char *text,
	      size_t len, char *err, size_t errlen)
{
	struct parser p = {
		.schema = schema,
		.global = global,
		.name = name,
		.err = err,
		.errlen = errlen,
	};
	char buf[CONFIG_LINE_MAX + 1];
	const char *s = text, *end = text + len;
	int r;

	schema->init(global);
	if (err && errlen)
		err[0] = '\0';

	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);

		p.line++;
		if (n > CONFIG_LINE_MAX) {
			r = ini_fail(&p, "line too long: %zu bytes, at most %d", n, CONFIG_LINE_MAX);
			goto out;
		}
		if (memchr(s, '\0', n)) {
			r = ini_fail(&p, "NUL byte in the file: is this a text file?");
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
	r = schema->finish(&p);
out:
	/* Never hand back half an object: the caller may print it or keep running with it. */
	if (r < 0)
		schema->init(global);
	return r;
}

int ini_load(const struct schema *schema, void *global, const char *path, char *err,
	     size_t errlen)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r;

	schema->init(global);

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

	return ini_parse(schema, global, path, buf, len, err, errlen);
}
