/* SPDX-License-Identifier: MIT */
/*
 * config_internal.h - what the two halves of the hugepoold.conf parser share.
 *
 *   config_reader.c  a strict INI reader (the ini_* functions): lines, comments, quotes,
 *                    "[kind NAME]" headers, "key = value" lines checked against the tables it
 *                    is given, the value helpers (integers, sizes, durations) and the
 *                    "FILE:LINE: reason" errors. It knows nothing of hugepoold.
 *   config.c         hugepoold's schema: the global keys, [class] and [journal], their setters,
 *                    defaults and checks, and config.h's functions.
 *
 * A schema is a struct schema: the global keys, the section kinds (each with its keys), a
 * function that gives the global object its defaults, and a last check of the whole file. The
 * reader calls a key's set() with the value as text; set() converts it (the ini_get_* helpers
 * report a bad value themselves) and stores it in the object being read: p->global before the
 * first section, p->obj inside one. Everything here runs once, on the main thread.
 */
#ifndef HP_CONFIG_INTERNAL_H
#define HP_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util.h"

#define CONFIG_QUOTE_MAX 64 /* echo at most this much of a bad value back in a message */
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
	/* for the table-driven setters (ini_set_u32, ini_set_size, ini_set_duration): the accepted
	 * range and where the value goes (in the global object for global keys, in the section's
	 * object for section keys: see parser.obj) */
	uint64_t min, max;
	size_t offset;
};

/* A key one of the table-driven setters stores, from lo to hi, in the ctype field of type. */
#define FIELD_KEY(n, setter, lo, hi, type, field, ctype)                 \
	{ .name = n, .set = setter, .min = lo, .max = hi,               \
	  .offset = _Generic(((type *)0)->field, ctype: offsetof(type, field)) }
#define U32_KEY(n, lo, hi, type, field) FIELD_KEY(n, ini_set_u32, lo, hi, type, field, uint32_t)
#define SIZE_KEY(n, lo, hi, type, field) FIELD_KEY(n, ini_set_size, lo, hi, type, field, uint64_t)
#define DURATION_KEY(n, hi, type, field) FIELD_KEY(n, ini_set_duration, 0, hi, type, field, uint64_t)

/*
 * One kind of section, "[kind NAME]". begin() checks that a section of that name may start
 * (unique, not too many) and points p->obj at its fresh object, filled with the defaults;
 * finish() checks the complete section (required keys, keys that depend on each other) once the
 * next header or the end of the file is reached. Errors from finish() point at the header's line.
 */
struct section_kind {
	const char *kind; /* "class": the word in the header */
	const struct key *keys;
	size_t nkeys; /* at most KEYS_MAX */
	size_t name_max; /* characters in NAME, without the NUL; at most SECTION_NAME_MAX */
	int (*begin)(struct parser *p, const char *name);
	int (*finish)(struct parser *p);
};

/* What a file may hold, and what becomes of it. */
struct schema {
	const struct key *keys; /* the global keys, before the first section; at most KEYS_MAX */
	size_t nkeys;
	const struct section_kind *kinds;
	size_t nkinds;
	/* Give the global object its defaults: before reading, and again after an error, so that a
	 * failed read never hands back half of one. */
	void (*init)(void *global);
	/* The last section is finished: checks of the whole file (they fail with no line: 0). */
	int (*finish)(struct parser *p);
};

struct parser {
	const struct schema *schema;
	void *global; /* the object the global keys describe */
	const char *name; /* the file's, for messages */
	char *err;
	size_t errlen;
	unsigned line;
	/* The section being read: kind and obj are NULL before the first one. */
	const struct section_kind *kind;
	void *obj; /* the section's object, from begin() */
	char section_name[SECTION_NAME_MAX + 1];
	/* First line each key was set on (0 = not yet), for duplicate and missing-key messages. */
	unsigned global_lines[KEYS_MAX];
	unsigned section_lines[KEYS_MAX];
};

/*
 * Read text (len bytes, not necessarily NUL-terminated) into global as schema says; name is
 * the file's in messages. ini_load reads the file at path first. On failure: a negative errno,
 * a one-line message in err (config.h's config_load says which), global as schema->init left it.
 */
int ini_parse(const struct schema *schema, void *global, const char *name, const char *text,
	      size_t len, char *err, size_t errlen);
int ini_load(const struct schema *schema, void *global, const char *path, char *err,
	     size_t errlen);

/* Stop the read with "FILE:LINE: reason" for the current line, or for line (0: "FILE: reason").
 * Both return -EINVAL. */
int ini_fail(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ini_fail_at(struct parser *p, unsigned line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* value, the text of key, as a size in bytes (from min to max); a bad one fails the read. */
int ini_get_size(struct parser *p, const char *key, const char *value, uint64_t *ret);
int ini_get_size_range(struct parser *p, const char *key, const char *value, uint64_t min,
		       uint64_t max, uint64_t *ret);

/* The set() of U32_KEY, SIZE_KEY and DURATION_KEY rows. */
int ini_set_u32(struct parser *p, const struct key *k, const char *value);
int ini_set_size(struct parser *p, const struct key *k, const char *value);
int ini_set_duration(struct parser *p, const struct key *k, const char *value);

/* For messages: 65536 as "64K"; every section kind ("[class NAME] and [journal NAME]"); where
 * the current section's key k got its value ("set on line 7", "the default"). */
const char *ini_size_short(uint64_t v, char *buf, size_t len);
const char *ini_kind_list(const struct parser *p, char *buf, size_t len, const char *suffix,
			  const char *conj);
const char *ini_key_origin(const struct parser *p, int k, char *buf, size_t len);

#endif
