/* SPDX-License-Identifier: MIT */
/*
 * config.c - hugepoold.conf's schema: which keys there are and what they mean; config.h's API.
 *
 * The file has global "key = value" lines first, then sections: one "[class NAME]" per buffer
 * class and one "[journal NAME]" per journal. This file says which keys each part has
 * (global_keys, class_keys, journal_keys), how a value is checked and stored (a row of those
 * tables, or a set_* function for what is more than a number in a range), the defaults
 * (config_init for the globals, begin_class and begin_journal for a section), and what is
 * checked once a section or the whole file is complete (finish_class, finish_journal,
 * finish_file). Reading the text -- lines, comments, quotes, headers, unknown and duplicate
 * keys, numbers, sizes and durations -- is config_reader.c's, which knows nothing of hugepoold.
 *
 * The daemon pre-faults gigabytes and promises durability from this file at boot, so nothing
 * is guessed: an unknown key, a typo in a number or a size that does not fit the page size
 * stops the load with "FILE:LINE: reason". Everything here runs once on the main thread.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "config_internal.h"
#include "size.h"
#include "util.h"

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
#define ACQUIRE_WAIT_MAX_NS (86400ull * 1000000000ull) /* a day */

enum {
	CKEY_SIZE,
	CKEY_COUNT,
	CKEY_PAGE_SIZE,
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

/*
 * What a class's buffer size must be a multiple of: the page the class may be backed by. auto
 * picks 1 GiB pages only for sizes that are multiples of it, so it needs 2 MiB.
 */
static uint64_t class_page_floor(const struct config *cfg, const struct config_class *c)
{
	if (cfg->hugepages == HUGEPAGES_OFF)
		return PAGE_SIZE_4K;
	return c->page_size == PAGE_SIZE_1G ? PAGE_SIZE_1G : PAGE_SIZE_2M;
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
	struct config *cfg = p->global;
	size_t n = strlen(value);

	(void)k;
	if (value[0] != '/')
		return ini_fail(p, "socket path \"%.*s%s\" is not absolute", CLIP(value));
	if (n >= sizeof(cfg->socket_path))
		return ini_fail(p, "socket path is too long: %zu bytes, at most %zu", n,
				sizeof(cfg->socket_path) - 1);
	memcpy(cfg->socket_path, value, n + 1);
	return 0;
}

static int set_socket_mode(struct parser *p, const struct key *k, const char *value)
{
	struct config *cfg = p->global;
	const char *key = k->name;
	const char *s;
	unsigned v = 0;

	for (s = value; *s; s++) {
		if (*s < '0' || *s > '7')
			return ini_fail(p, "bad mode \"%.*s%s\" for \"%s\": expected an octal number such as 0660",
					CLIP(value), key);
		/* Saturate instead of wrapping so "10000000000000" is out of range, not 0. */
		if (v <= 07777)
			v = v * 8 + (unsigned)(*s - '0');
	}
	if (v > 0777)
		return ini_fail(p, "mode %.*s%s for \"%s\" is out of range: at most 0777", CLIP(value),
				key);
	cfg->socket_mode = (mode_t)v;
	return 0;
}

/* A group name into the char[CONFIG_GROUP_MAX] at k->offset of struct config. */
static int set_group_name(struct parser *p, const struct key *k, const char *value)
{
	struct config *cfg = p->global;
	const char *key = k->name;
	size_t n = strlen(value);

	if (n >= CONFIG_GROUP_MAX)
		return ini_fail(p, "group name \"%.*s%s\" for \"%s\" is too long: at most %d bytes", CLIP(value),
				key, CONFIG_GROUP_MAX - 1);
	/* Only stored: the group is resolved when the daemon starts serving, which logs failures. */
	memcpy((char *)cfg + k->offset, value, n + 1);
	return 0;
}

/* The values of `hugepages`, and their words in --check-config's summary. */
static const char *const hugepages_mode_table[] = {
	[HUGEPAGES_PREFER] = "prefer",
	[HUGEPAGES_REQUIRE] = "require",
	[HUGEPAGES_OFF] = "off",
};

DEFINE_STRING_TABLE_LOOKUP(hugepages_mode, enum hugepages_mode)

static int set_hugepages(struct parser *p, const struct key *k, const char *value)
{
	struct config *cfg = p->global;

	if (hugepages_mode_from_string(value, &cfg->hugepages) < 0)
		return ini_fail(p, "bad value \"%.*s%s\" for \"%s\": expected require, prefer or off",
				CLIP(value), k->name);
	return 0;
}

/* The values of `restart`. */
static const char *const restart_mode_table[] = {
	[RESTART_AUTO] = "auto",
	[RESTART_TAKEOVER] = "takeover",
	[RESTART_EXEC] = "exec",
};

DEFINE_STRING_TABLE_LOOKUP(restart_mode, enum restart_mode)

static int set_restart(struct parser *p, const struct key *k, const char *value)
{
	struct config *cfg = p->global;

	if (restart_mode_from_string(value, &cfg->restart) < 0)
		return ini_fail(p, "bad value \"%.*s%s\" for \"%s\": expected auto, takeover or exec", CLIP(value),
				k->name);
	return 0;
}

/* The global page_size (every class's default) or a class's own. */
static int set_page_size(struct parser *p, const struct key *k, const char *value)
{
	struct config *cfg = p->global;
	uint64_t *dst = p->obj ? &((struct config_class *)p->obj)->page_size : &cfg->page_size;
	const char *key = k->name;
	uint64_t v;
	int r;

	if (!strcmp(value, "auto")) {
		*dst = CONFIG_PAGE_SIZE_AUTO;
		return 0;
	}
	r = ini_get_size(p, key, value, &v);
	if (r < 0)
		return r;
	if (v != PAGE_SIZE_2M && v != PAGE_SIZE_1G)
		return ini_fail(p, "unsupported page size \"%.*s%s\" for \"%s\": expected 2M, 1G or auto",
				CLIP(value), key);
	*dst = v;
	return 0;
}

static int set_class_size(struct parser *p, const struct key *k, const char *value)
{
	const char *key = k->name;
	struct config_class *c = p->obj;
	uint64_t v;
	int r;

	r = ini_get_size(p, key, value, &v);
	if (r < 0)
		return r;
	if (v == 0)
		return ini_fail(p, "size of class \"%s\" must be greater than 0", c->name);
	/* whether it fits the class's pages is finish_class's: page_size may come later */
	c->size = v;
	return 0;
}

/* The class's size is a multiple of its pages; the error points at the size's line. */
static int check_class_size(struct parser *p, const struct config_class *c)
{
	uint64_t page = class_page_floor(p->global, c), v = c->size;
	unsigned line = p->section_lines[CKEY_SIZE];
	uint64_t up = v - v % page + page;
	char buf[32];

	if (v % page == 0)
		return 0;
	if (up < v)
		return ini_fail_at(p, line, "size %" PRIu64 " of class \"%s\" is not a multiple of the page size (%s)",
				   v, c->name, page_size_name(page));
	return ini_fail_at(p, line, "size %" PRIu64 " of class \"%s\" is not a multiple of the page size (%s): "
				    "round it up to %" PRIu64 " (%s)",
			   v, c->name, page_size_name(page), up, size_format(up, buf, sizeof(buf)));
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

/*
 * Check and store the directory of journal j (the last of the array: the journals before it
 * are complete), written on the given line or, for the default, its section's.
 */
static int store_journal_directory(struct parser *p, struct config_journal *j, const char *value, unsigned line)
{
	struct config *cfg = p->global;
	size_t n = strlen(value);
	unsigned i;

	if (value[0] != '/')
		return ini_fail_at(p, line, "directory \"%.*s%s\" of journal \"%s\" is not absolute", CLIP(value),
				   j->name);
	if (n >= sizeof(j->directory))
		return ini_fail_at(p, line, "directory of journal \"%s\" is too long: %zu bytes, at most %zu",
				   j->name, n, sizeof(j->directory) - 1);
	for (i = 0; i + 1 < cfg->njournals; i++)
		if (same_directory(cfg->journals[i].directory, value))
			return ini_fail_at(p, line,
					   "journals \"%s\" and \"%s\" share the directory \"%.*s%s\" "
					   "(journal \"%s\" is defined on line %u): each needs its own",
					   cfg->journals[i].name, j->name, CLIP(value), cfg->journals[i].name,
					   cfg->journals[i].line);
	if (same_directory(cfg->spill_directory, value))
		return ini_fail_at(p, line,
				   "journal \"%s\" would share the directory \"%.*s%s\" with spill_directory: "
				   "each needs its own",
				   j->name, CLIP(value));
	memcpy(j->directory, value, n + 1);
	return 0;
}

static int set_journal_directory(struct parser *p, const struct key *k, const char *value)
{
	(void)k;
	return store_journal_directory(p, p->obj, value, p->line);
}

static int set_journal_segment_size(struct parser *p, const struct key *k, const char *value)
{
	struct config_journal *j = p->obj;
	uint64_t v;
	int r;

	r = ini_get_size(p, k->name, value, &v);
	if (r < 0)
		return r;
	if (v < JOURNAL_SEGMENT_MIN)
		return ini_fail(p, "size \"%.*s%s\" for \"%s\" is too small: at least 1M", CLIP(value),
				k->name);
	if (v % JOURNAL_BLOCK) {
		uint64_t up = v - v % JOURNAL_BLOCK + JOURNAL_BLOCK;

		if (up < v)
			return ini_fail(p, "size \"%.*s%s\" for \"%s\" is not a multiple of 4096",
					CLIP(value), k->name);
		return ini_fail(p, "size \"%.*s%s\" for \"%s\" is not a multiple of 4096: round it up to %" PRIu64,
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

	r = ini_get_size_range(p, k->name, value, JOURNAL_RING_MIN, JOURNAL_RING_MAX, &v);
	if (r < 0)
		return r;
	if (v & (v - 1)) {
		/* in range and not a power of two, so both neighbours are in range too */
		lo = UINT64_C(1) << (63 - __builtin_clzll(v));
		return ini_fail(p, "size \"%.*s%s\" for \"%s\" is not a power of two: the nearest are %s and %s",
				CLIP(value), k->name, ini_size_short(lo, a, sizeof(a)),
				ini_size_short(lo << 1, b, sizeof(b)));
	}
	j->ring_size = v;
	return 0;
}

static int set_journal_backend(struct parser *p, const struct key *k, const char *value)
{
	struct config_journal *j = p->obj;
	enum jio_kind kind;

	if (jio_kind_from_string(value, &kind) == 0)
		j->backend = (enum journal_backend)kind;
	else
		return ini_fail(p, "bad value \"%.*s%s\" for \"%s\": expected auto, io_uring, libaio or sync",
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
		return ini_fail(p, "bad value \"%.*s%s\" for \"%s\": expected on, off, yes, no, true or false",
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
		return ini_fail(p, "bad value \"%.*s%s\" for \"%s\": expected block or recycle",
				CLIP(value), k->name);
	return 0;
}

static int set_spill_directory(struct parser *p, const struct key *k, const char *value)
{
	struct config *cfg = p->global;
	size_t n = strlen(value);

	(void)k;
	if (value[0] != '/')
		return ini_fail(p, "spill_directory \"%.*s%s\" is not absolute", CLIP(value));
	if (n >= sizeof(cfg->spill_directory))
		return ini_fail(p, "spill_directory is too long: %zu bytes, at most %zu", n,
				sizeof(cfg->spill_directory) - 1);
	memcpy(cfg->spill_directory, value, n + 1);
	return 0;
}

static const struct key global_keys[] = {
	{ .name = "socket", .set = set_socket },
	{ .name = "socket_mode", .set = set_socket_mode },
	{ .name = "socket_group", .set = set_group_name, .offset = offsetof(struct config, socket_group) },
	{ .name = "admin_group", .set = set_group_name, .offset = offsetof(struct config, admin_group) },
	{ .name = "monitor_group", .set = set_group_name, .offset = offsetof(struct config, monitor_group) },
	{ .name = "hugepages", .set = set_hugepages },
	{ .name = "page_size", .set = set_page_size },
	U32_KEY("prefault_threads", 0, 1024, struct config, prefault_threads),
	{ .name = "restart", .set = set_restart },
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
	[CKEY_PAGE_SIZE] = { .name = "page_size", .set = set_page_size },
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
			return ini_fail(p, "\"%s\" of journal \"%s\" names more than %d users and groups", k->name,
					j->name, CONFIG_ACL_MAX);
		e = &acl->e[acl->n++];
		e->group = *v == '@';
		v += e->group;
		n = strcspn(v, " \t");
		if (n == 0 || n >= sizeof(e->name) || strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") < n)
			return ini_fail(p, "bad %s \"%.*s\" in \"%s\" of journal \"%s\": expected a name or number of "
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

static int begin_class(struct parser *p, const char *name)
{
	struct config *cfg = p->global;
	struct config_class *c;
	unsigned i;

	for (i = 0; i < cfg->nclasses; i++)
		if (!strcmp(cfg->classes[i].name, name))
			return ini_fail(p, "duplicate class \"%s\" (first defined on line %u)", name,
					cfg->classes[i].line);
	if (cfg->nclasses >= CONFIG_CLASSES_MAX)
		return ini_fail(p, "too many classes: at most %d are allowed", CONFIG_CLASSES_MAX);

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

/*
 * A class is complete once its section ends: size and count set, a page size (its own or the
 * global one) that its size is a multiple of, and the pool total still in 64 bits.
 */
static int finish_class(struct parser *p)
{
	struct config *cfg = p->global;
	struct config_class *c = p->obj;
	uint64_t total;
	int r;

	if (!p->section_lines[CKEY_SIZE])
		return ini_fail_at(p, c->line, "class \"%s\" has no \"size\" key", c->name);
	if (!p->section_lines[CKEY_COUNT])
		return ini_fail_at(p, c->line, "class \"%s\" has no \"count\" key", c->name);
	/* global keys are only allowed before the first section: the default is final by now */
	if (!p->section_lines[CKEY_PAGE_SIZE])
		c->page_size = cfg->page_size;
	if ((r = check_class_size(p, c)) < 0)
		return r;
	/* c is the last of cfg->classes, and the total of those before it fits */
	if (!pool_bytes(cfg, &total))
		return ini_fail_at(p, c->line,
				   "class \"%s\" makes the pool larger than 2^64 bytes (size * count overflows)",
				   c->name);
	return 0;
}

static int begin_journal(struct parser *p, const char *name)
{
	struct config *cfg = p->global;
	struct config_journal *j;
	unsigned i;

	for (i = 0; i < cfg->njournals; i++)
		if (!strcmp(cfg->journals[i].name, name))
			return ini_fail(p, "duplicate journal \"%s\" (first defined on line %u)", name,
					cfg->journals[i].line);
	if (cfg->njournals >= CONFIG_JOURNALS_MAX)
		return ini_fail(p, "too many journals: at most %d are allowed", CONFIG_JOURNALS_MAX);

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

/* A journal is complete once its section ends: a directory (given or the default), and a batch
 * that fits a segment. */
static int finish_journal(struct parser *p)
{
	struct config_journal *j = p->obj;
	char a[24], b[24];
	uint64_t bytes;

	/* no directory: one of its own under the service's state directory */
	if (!p->section_lines[JKEY_DIRECTORY]) {
		char dir[sizeof(j->directory)];
		int r;

		snprintf(dir, sizeof(dir), "%s/%s", CONFIG_DEFAULT_STATE_DIR, j->name);
		r = store_journal_directory(p, j, dir, j->line);
		if (r < 0)
			return r;
	}
	/* a batch is written after the segment's header block, and never spans two segments; a
	 * default that does not fit a small segment shrinks to fit, an explicit value is an error */
	if (!p->section_lines[JKEY_MAX_BATCH_BYTES] && j->max_batch_bytes > j->segment_size - JOURNAL_BLOCK)
		j->max_batch_bytes = j->segment_size - JOURNAL_BLOCK;
	if (j->max_batch_bytes > j->segment_size - JOURNAL_BLOCK)
		return ini_fail_at(p, j->line,
				   "journal \"%s\": max_batch_bytes %" PRIu64 " (%s) is larger than "
				   "segment_size - 4096 = %" PRIu64 " (segment_size: %s): "
				   "a batch must fit in one segment after its 4096-byte header",
				   j->name, j->max_batch_bytes, ini_key_origin(p, JKEY_MAX_BATCH_BYTES, a, sizeof(a)),
				   j->segment_size - JOURNAL_BLOCK,
				   ini_key_origin(p, JKEY_SEGMENT_SIZE, b, sizeof(b)));
	if (__builtin_mul_overflow(j->segment_size, (uint64_t)j->segments, &bytes))
		return ini_fail_at(p, j->line,
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

/* The whole file is read: it must give the daemon something to do. */
static int finish_file(struct parser *p)
{
	struct config *cfg = p->global;
	char list[128];

	if (!cfg->nclasses && !cfg->njournals)
		return ini_fail_at(p, 0, "no %s section: nothing to serve",
				   ini_kind_list(p, list, sizeof(list), "", " or "));
	return 0;
}

static void init(void *cfg)
{
	config_init(cfg);
}

static const struct schema schema = {
	.keys = global_keys,
	.nkeys = ARRAY_SIZE(global_keys),
	.kinds = section_kinds,
	.nkinds = ARRAY_SIZE(section_kinds),
	.init = init,
	.finish = finish_file,
};

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
	return ini_parse(&schema, cfg, name, text, strlen(text), err, errlen);
}

int config_load(const char *path, struct config *cfg, char *err, size_t errlen)
{
	return ini_load(&schema, cfg, path, err, errlen);
}

uint64_t config_pool_bytes(const struct config *cfg)
{
	uint64_t total;

	/* The parser rejects overflowing configs; saturate anyway for hand-built ones. */
	return pool_bytes(cfg, &total) ? total : UINT64_MAX;
}

uint64_t config_buffers(const struct config *cfg)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < cfg->nclasses; i++)
		n += cfg->classes[i].count;
	return n;
}

const char *config_page_size_name(uint64_t page_size)
{
	if (page_size == CONFIG_PAGE_SIZE_AUTO)
		return "auto";
	return page_size == PAGE_SIZE_1G ? "1G" : "2M";
}

const char *journal_backend_name(enum journal_backend b)
{
	return jio_kind_to_string((enum jio_kind)b);
}
