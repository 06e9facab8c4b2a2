/* SPDX-License-Identifier: MIT */
/* Unit tests for the hugepoold.conf parser: every accepted form and every rejected line. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

#define NAME "hugepoold.conf"
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)
#define TiB (UINT64_C(1) << 40)

/* A config that is valid on its own: appended to texts that test global keys. */
#define ONE_CLASS "[class small]\nsize = 2M\ncount = 1\n"
/* The same with a journal: only the directory is required. */
#define ONE_JOURNAL "[journal j]\ndirectory = /var/lib/hugepool/j\n"
/* Another valid class, to put after a section under test. */
#define ONE_CLASS_B "[class other]\nsize = 2M\ncount = 1\n"

struct bad_case {
	const char *name;
	const char *text;
	const char *prefix; /* the message must start with this */
	const char *reason; /* ... and contain this */
};

static void assert_err(int r, int want_r, const char *err, const char *prefix, const char *reason)
{
	if (r != want_r)
		fail_msg("returned %d, want %d (message: \"%s\")", r, want_r, err);
	if (strncmp(err, prefix, strlen(prefix)))
		fail_msg("message \"%s\" does not start with \"%s\"", err, prefix);
	if (!strstr(err, reason))
		fail_msg("message \"%s\" does not contain \"%s\"", err, reason);
}

static void parse_ok(const char *text, struct config *cfg)
{
	char err[512] = "";
	int r = config_parse(NAME, text, cfg, err, sizeof(err));

	if (r != 0)
		fail_msg("config_parse failed with %d: %s", r, err);
	assert_string_equal(err, "");
}

static void parse_bad(const char *text, const char *prefix, const char *reason)
{
	struct config cfg;
	char err[512] = "";
	int r = config_parse(NAME, text, &cfg, err, sizeof(err));

	assert_err(r, -EINVAL, err, prefix, reason);
	/* A failed parse must not leave half a config behind. */
	assert_int_equal(cfg.nclasses, 0);
	assert_int_equal(cfg.njournals, 0);
	assert_string_equal(cfg.socket_path, CONFIG_DEFAULT_SOCKET);
}

/* The parsed class or journal of that name, or NULL: names are case-sensitive. */
static const struct config_class *find_class(const struct config *cfg, const char *name)
{
	for (unsigned i = 0; i < cfg->nclasses; i++)
		if (!strcmp(cfg->classes[i].name, name))
			return &cfg->classes[i];
	return NULL;
}

static const struct config_journal *find_journal(const struct config *cfg, const char *name)
{
	for (unsigned i = 0; i < cfg->njournals; i++)
		if (!strcmp(cfg->journals[i].name, name))
			return &cfg->journals[i];
	return NULL;
}

/* Write text (len bytes, NULs allowed) to a fresh temp file; the caller unlinks path. */
static void write_temp(char *path, const char *text, size_t len)
{
	int fd = mkstemp(path);
	size_t off = 0;

	assert_true(fd >= 0);
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);

		assert_true(n > 0);
		off += (size_t)n;
	}
	assert_int_equal(close(fd), 0);
}

static void test_defaults(void **state)
{
	struct config cfg;

	(void)state;
	memset(&cfg, 0xa5, sizeof(cfg));
	config_init(&cfg);
	assert_string_equal(cfg.socket_path, "/run/hugepool/hugepoold.sock");
	assert_int_equal(cfg.socket_mode, 0660);
	assert_string_equal(cfg.socket_group, "");
	assert_string_equal(cfg.admin_group, "");
	assert_string_equal(cfg.monitor_group, "");
	assert_int_equal(cfg.max_journal_writers_per_uid, 64);
	assert_true(cfg.max_acquire_wait_ns == 60000000000ull);
	assert_int_equal(cfg.hugepages, HUGEPAGES_PREFER);
	assert_true(cfg.page_size == 2 * MiB);
	assert_int_equal(cfg.prefault_threads, 0);
	assert_int_equal(cfg.max_connections, 1024);
	assert_int_equal(cfg.max_connections_per_uid, 64);
	assert_true(cfg.max_bytes_per_uid == 0);
	assert_string_equal(cfg.spill_directory, "/var/tmp/hugepool");
	assert_true(cfg.spill_threshold == 1 * MiB);
	assert_true(cfg.spill_max_bytes == 16 * GiB);
	assert_int_equal(cfg.spill_max_files, 4096);
	assert_true(cfg.spill_max_bytes_per_uid == 0);
	assert_int_equal(cfg.spill_max_files_per_uid, 1024);
	assert_int_equal(cfg.nclasses, 0);
	assert_int_equal(cfg.njournals, 0);
}

static void test_defaults_when_keys_absent(void **state)
{
	struct config cfg;

	(void)state;
	memset(&cfg, 0xa5, sizeof(cfg));
	parse_ok("[class only]\nsize = 4M\ncount = 3\n", &cfg);
	assert_string_equal(cfg.socket_path, CONFIG_DEFAULT_SOCKET);
	assert_int_equal(cfg.socket_mode, 0660);
	assert_string_equal(cfg.socket_group, "");
	assert_int_equal(cfg.hugepages, HUGEPAGES_PREFER);
	assert_true(cfg.page_size == 2 * MiB);
	assert_int_equal(cfg.prefault_threads, 0);
	assert_int_equal(cfg.max_connections, 1024);
	assert_int_equal(cfg.max_connections_per_uid, 64);
	assert_true(cfg.max_bytes_per_uid == 0);
	assert_int_equal(cfg.nclasses, 1);
	assert_string_equal(cfg.classes[0].name, "only");
	assert_true(cfg.classes[0].size == 4 * MiB);
	assert_int_equal(cfg.classes[0].count, 3);
	assert_int_equal(cfg.classes[0].line, 1);
}

static void test_full_config(void **state)
{
	static const char text[] =
		"# hugepoold.conf: every key\n"
		"socket = /run/hp/test.sock\n"
		"socket_mode = 0640\n"
		"socket_group = hugepool\n"
		"admin_group = adm\n"
		"monitor_group = nogroup\n"
		"max_journal_writers_per_uid = 9\n"
		"max_acquire_wait = 0s\n"
		"hugepages = require\n"
		"page_size = 2M\n"
		"prefault_threads = 8\n"
		"max_connections = 512\n"
		"max_connections_per_uid = 16\n"
		"max_bytes_per_uid = 8G\n"
		"spill_directory = /srv/spill\n"
		"spill_threshold = 256K\n"
		"spill_max_bytes = 1T\n"
		"spill_max_files = 0\n"
		"spill_max_bytes_per_uid = 100G\n"
		"spill_max_files_per_uid = 77\n"
		"\n"
		"[class small]\n"
		"size = 2M\n"
		"count = 256\n"
		"\n"
		"[class big]\n"
		"count = 16\n"
		"size = 64MiB\n"
		"[class Huge-1.x_y]\n"
		"size = 1G\n"
		"count = 2\n";
	struct config cfg;
	const struct config_class *c;

	(void)state;
	parse_ok(text, &cfg);
	assert_string_equal(cfg.socket_path, "/run/hp/test.sock");
	assert_int_equal(cfg.socket_mode, 0640);
	assert_string_equal(cfg.socket_group, "hugepool");
	assert_string_equal(cfg.admin_group, "adm");
	assert_string_equal(cfg.monitor_group, "nogroup");
	assert_int_equal(cfg.max_journal_writers_per_uid, 9);
	assert_true(cfg.max_acquire_wait_ns == 0);
	assert_int_equal(cfg.hugepages, HUGEPAGES_REQUIRE);
	assert_true(cfg.page_size == 2 * MiB);
	assert_int_equal(cfg.prefault_threads, 8);
	assert_int_equal(cfg.max_connections, 512);
	assert_int_equal(cfg.max_connections_per_uid, 16);
	assert_true(cfg.max_bytes_per_uid == 8 * GiB);
	assert_string_equal(cfg.spill_directory, "/srv/spill");
	assert_true(cfg.spill_threshold == 256 * 1024);
	assert_true(cfg.spill_max_bytes == 1024 * GiB);
	assert_int_equal(cfg.spill_max_files, 0);
	assert_true(cfg.spill_max_bytes_per_uid == 100 * GiB);
	assert_int_equal(cfg.spill_max_files_per_uid, 77);
	assert_int_equal(cfg.nclasses, 3);

	assert_string_equal(cfg.classes[0].name, "small");
	assert_true(cfg.classes[0].size == 2 * MiB);
	assert_int_equal(cfg.classes[0].count, 256);
	assert_int_equal(cfg.classes[0].line, 22);
	assert_string_equal(cfg.classes[1].name, "big");
	assert_true(cfg.classes[1].size == 64 * MiB);
	assert_int_equal(cfg.classes[1].count, 16);
	assert_int_equal(cfg.classes[1].line, 26);
	assert_string_equal(cfg.classes[2].name, "Huge-1.x_y");
	assert_true(cfg.classes[2].size == GiB);
	assert_int_equal(cfg.classes[2].count, 2);
	assert_int_equal(cfg.classes[2].line, 29);

	c = find_class(&cfg, "big");
	assert_ptr_equal(c, &cfg.classes[1]);
	assert_null(find_class(&cfg, "Big"));
	assert_null(find_class(&cfg, "nope"));
	assert_true(config_pool_bytes(&cfg) == 256 * 2 * MiB + 16 * 64 * MiB + 2 * GiB);
}

static void test_hugepages_modes(void **state)
{
	struct config cfg;

	(void)state;
	parse_ok("hugepages = prefer\n" ONE_CLASS, &cfg);
	assert_int_equal(cfg.hugepages, HUGEPAGES_PREFER);
	parse_ok("hugepages = require\n" ONE_CLASS, &cfg);
	assert_int_equal(cfg.hugepages, HUGEPAGES_REQUIRE);
	parse_ok("hugepages = off\n" ONE_CLASS, &cfg);
	assert_int_equal(cfg.hugepages, HUGEPAGES_OFF);
	assert_string_equal(hugepages_mode_to_string(HUGEPAGES_PREFER), "prefer");
	assert_string_equal(hugepages_mode_to_string(HUGEPAGES_REQUIRE), "require");
	assert_string_equal(hugepages_mode_to_string(HUGEPAGES_OFF), "off");
	assert_string_equal(hugepages_mode_to_string((enum hugepages_mode)42), "unknown");
}

static void test_page_size_1g(void **state)
{
	static const char *const spellings[] = { "1G", "1g", "1GiB", "1gb", "1024M", "1048576K",
						 "1073741824" };
	struct config cfg;
	char text[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(spellings) / sizeof(spellings[0]); i++) {
		snprintf(text, sizeof(text),
			 "page_size = %s\n[class g]\nsize = 1G\ncount = 2\n[class g2]\nsize = 2G\ncount = 1\n",
			 spellings[i]);
		parse_ok(text, &cfg);
		assert_true(cfg.page_size == GiB);
		assert_true(config_pool_bytes(&cfg) == 4 * GiB);
	}
}

static void test_page_size_2m_spellings(void **state)
{
	static const char *const spellings[] = { "2M", "2m", "2MiB", "2mb", "2048K", "2097152" };
	struct config cfg;
	char text[128];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(spellings) / sizeof(spellings[0]); i++) {
		snprintf(text, sizeof(text), "page_size = %s\n" ONE_CLASS, spellings[i]);
		parse_ok(text, &cfg);
		assert_true(cfg.page_size == 2 * MiB);
	}
}

static void test_hugepages_off_uses_4k(void **state)
{
	struct config cfg;

	(void)state;
	/* With hugepages off only 4 KiB alignment is needed, whatever page_size says. */
	parse_ok("hugepages = off\npage_size = 1G\n[class s]\nsize = 12K\ncount = 5\n", &cfg);
	assert_true(cfg.classes[0].size == 12 * 1024);
	assert_true(config_pool_bytes(&cfg) == 60 * 1024);
}

static void test_quoted_values(void **state)
{
	static const char text[] =
		"socket = \"/run/my dir/hp #1.sock\"   # the quotes keep the blanks and the #\n"
		"socket_group = \"hugepool\"\n"
		"hugepages = \"off\"\n"
		"socket_mode=\"0600\"\n"
		"[class q]\n"
		"size = \"8K\"\n"
		"count = \"7\"\t\n";
	struct config cfg;

	(void)state;
	parse_ok(text, &cfg);
	assert_string_equal(cfg.socket_path, "/run/my dir/hp #1.sock");
	assert_string_equal(cfg.socket_group, "hugepool");
	assert_int_equal(cfg.hugepages, HUGEPAGES_OFF);
	assert_int_equal(cfg.socket_mode, 0600);
	assert_true(cfg.classes[0].size == 8192);
	assert_int_equal(cfg.classes[0].count, 7);
}

static void test_comments_and_blanks(void **state)
{
	static const char text[] =
		"# comment\n"
		"; another comment\n"
		"   # indented comment\n"
		"\t; indented with a tab\n"
		"\n"
		"   \t \n"
		"socket = /run/a#b.sock # a # after a blank starts a comment\n"
		"max_connections = 10\t# tab before the #\n"
		"socket_group = wheel #\n"
		"  [ class   c1 ]   # comment after a section header\n"
		"  size   =   2M  \n"
		"count=4 ;not a comment marker after a value, but ';' lines are\n";
	struct config cfg;
	char err[256];
	int r;

	(void)state;
	/* ';' only starts a comment at the start of a line, so the count above is bad... */
	r = config_parse(NAME, text, &cfg, err, sizeof(err));
	assert_err(r, -EINVAL, err, NAME ":12: ", "bad number \"4 ;not a comment");

	/* ... and fine once written as a # comment. */
	{
		char fixed[sizeof(text)];
		char *semi;

		memcpy(fixed, text, sizeof(text));
		semi = strstr(fixed, " ;not");
		semi[1] = '#';
		parse_ok(fixed, &cfg);
	}
	assert_string_equal(cfg.socket_path, "/run/a#b.sock");
	assert_int_equal(cfg.max_connections, 10);
	assert_string_equal(cfg.socket_group, "wheel");
	assert_int_equal(cfg.nclasses, 1);
	assert_string_equal(cfg.classes[0].name, "c1");
	assert_int_equal(cfg.classes[0].line, 10);
	assert_true(cfg.classes[0].size == 2 * MiB);
	assert_int_equal(cfg.classes[0].count, 4);
}

static void test_crlf_and_no_final_newline(void **state)
{
	struct config cfg;

	(void)state;
	parse_ok("socket_mode = 0600\r\n[class w]\r\nsize = 2M\r\ncount = 9", &cfg);
	assert_int_equal(cfg.socket_mode, 0600);
	assert_int_equal(cfg.classes[0].count, 9);
}

static void test_limits_accepted(void **state)
{
	struct config cfg;
	char text[512];
	char path[108];

	(void)state;
	parse_ok("prefault_threads = 1024\nmax_connections = 65536\nmax_connections_per_uid = 65536\n"
		 "max_bytes_per_uid = 16777215T\nsocket_mode = 0777\n"
		 "[class a]\nsize = 2M\ncount = 1000000\n",
		 &cfg);
	assert_int_equal(cfg.prefault_threads, 1024);
	assert_int_equal(cfg.max_connections, 65536);
	assert_int_equal(cfg.max_connections_per_uid, 65536);
	assert_true(cfg.max_bytes_per_uid == (UINT64_C(16777215) << 40));
	assert_int_equal(cfg.socket_mode, 0777);
	assert_int_equal(cfg.classes[0].count, 1000000);

	parse_ok("prefault_threads = 0\nmax_connections = 1\nmax_connections_per_uid = 0\n"
		 "max_bytes_per_uid = 0\nsocket_mode = 0\n" ONE_CLASS,
		 &cfg);
	assert_int_equal(cfg.max_connections, 1);
	assert_int_equal(cfg.max_connections_per_uid, 0);
	assert_int_equal(cfg.socket_mode, 0);

	/* socket_mode is octal with or without the leading 0. */
	parse_ok("socket_mode = 644\n" ONE_CLASS, &cfg);
	assert_int_equal(cfg.socket_mode, 0644);

	/* 107 bytes plus the NUL fill sun_path exactly. */
	memset(path, 'p', 107);
	path[0] = '/';
	path[107] = '\0';
	snprintf(text, sizeof(text), "socket = %s\n" ONE_CLASS, path);
	parse_ok(text, &cfg);
	assert_string_equal(cfg.socket_path, path);

	/* 63 bytes of group name fit. */
	snprintf(text, sizeof(text), "socket_group = %.63s\n" ONE_CLASS,
		 "ggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggg");
	parse_ok(text, &cfg);
	assert_int_equal(strlen(cfg.socket_group), 63);

	/* The largest pool that still fits in 64 bits: 16 TiB * 1000000 < 2^64. */
	parse_ok("[class x]\nsize = 16T\ncount = 1000000\n", &cfg);
	assert_true(config_pool_bytes(&cfg) == 16 * TiB * 1000000);
}

static void test_class_name_limits(void **state)
{
	struct config cfg;
	char text[256];

	(void)state;
	snprintf(text, sizeof(text), "[class %s]\nsize = 2M\ncount = 1\n",
		 "abcdefghijklmnopqrstuvwxyz01234");
	parse_ok(text, &cfg);
	assert_int_equal(strlen(cfg.classes[0].name), CONFIG_CLASS_NAME_MAX);

	snprintf(text, sizeof(text), "[class %s]\nsize = 2M\ncount = 1\n",
		 "abcdefghijklmnopqrstuvwxyz012345");
	parse_bad(text, NAME ":1: ", "is too long: 32 characters, at most 31");
}

static void test_same_key_in_two_classes(void **state)
{
	struct config cfg;

	(void)state;
	parse_ok("[class a]\nsize = 2M\ncount = 1\n[class b]\nsize = 2M\ncount = 1\n", &cfg);
	assert_int_equal(cfg.nclasses, 2);
}

/* Builds "[class cN] ..." n times. */
static char *many_classes(unsigned n)
{
	size_t cap = (size_t)n * 64 + 1, len = 0;
	char *text = malloc(cap);
	unsigned i;

	assert_non_null(text);
	text[0] = '\0';
	for (i = 0; i < n; i++)
		len += (size_t)snprintf(text + len, cap - len, "[class c%u]\nsize = 2M\ncount = 1\n", i);
	return text;
}

static void test_max_classes(void **state)
{
	struct config cfg;
	char *text = many_classes(CONFIG_CLASSES_MAX);

	(void)state;
	parse_ok(text, &cfg);
	assert_int_equal(cfg.nclasses, CONFIG_CLASSES_MAX);
	assert_non_null(find_class(&cfg, "c63"));
	assert_true(config_pool_bytes(&cfg) == CONFIG_CLASSES_MAX * 2 * MiB);
	free(text);
}

static void test_too_many_classes(void **state)
{
	char *text = many_classes(CONFIG_CLASSES_MAX + 1);

	(void)state;
	/* Each class takes three lines, so the 65th header is on line 193. */
	parse_bad(text, NAME ":193: ", "too many classes: at most 64");
	free(text);
}

static void test_line_length(void **state)
{
	struct config cfg;
	char *text = malloc(5000);

	(void)state;
	assert_non_null(text);
	/* A 4096-byte comment line is fine... */
	text[0] = '#';
	memset(text + 1, 'x', 4095);
	strcpy(text + 4096, "\n" ONE_CLASS);
	parse_ok(text, &cfg);

	/* ... one more byte is not, even in a comment; so is an over-long last line. */
	text[0] = '\n';
	text[1] = '#';
	memset(text + 2, 'x', 4096);
	strcpy(text + 4098, "\n" ONE_CLASS);
	parse_bad(text, NAME ":2: ", "line too long: 4097 bytes, at most 4096");

	memcpy(text, ONE_CLASS, strlen(ONE_CLASS));
	memset(text + strlen(ONE_CLASS), ' ', 4097);
	text[strlen(ONE_CLASS) + 4097] = '\0';
	parse_bad(text, NAME ":4: ", "line too long");
	free(text);
}

static void test_name_used_as_given(void **state)
{
	struct config cfg;
	char err[256];
	int r;

	(void)state;
	r = config_parse("./conf.d/../my config", "bogus\n", &cfg, err, sizeof(err));
	assert_err(r, -EINVAL, err, "./conf.d/../my config:1: ", "missing \"=\"");
}

static void test_error_buffer_edge_cases(void **state)
{
	struct config cfg;
	char err[16];
	int r;

	(void)state;
	/* A short buffer truncates but stays a string; no buffer at all is allowed too. */
	memset(err, 'x', sizeof(err));
	r = config_parse(NAME, "foo = 1\n", &cfg, err, sizeof(err));
	assert_int_equal(r, -EINVAL);
	assert_int_equal(strlen(err), sizeof(err) - 1);
	assert_string_equal(err, "hugepoold.conf:");

	assert_int_equal(config_parse(NAME, "foo = 1\n", &cfg, NULL, 0), -EINVAL);
	assert_int_equal(config_parse(NAME, ONE_CLASS, &cfg, NULL, 0), 0);
	assert_int_equal(config_load("/nonexistent/hugepoold.conf", &cfg, NULL, 0), -ENOENT);

	/* Success clears a stale message. */
	strcpy(err, "stale");
	assert_int_equal(config_parse(NAME, ONE_CLASS, &cfg, err, sizeof(err)), 0);
	assert_string_equal(err, "");
}

static void test_parse_reinitialises(void **state)
{
	struct config cfg;

	(void)state;
	parse_ok("max_connections = 5\n[class a]\nsize = 2M\ncount = 1\n[class b]\nsize = 4M\ncount = 1\n",
		 &cfg);
	assert_int_equal(cfg.nclasses, 2);
	/* Parsing again starts from the defaults, not from the previous result. */
	parse_ok(ONE_CLASS, &cfg);
	assert_int_equal(cfg.nclasses, 1);
	assert_int_equal(cfg.max_connections, 1024);
}

static void test_load_file(void **state)
{
	static const char good[] = "socket_mode = 0600\n[class f]\nsize = 4M\ncount = 2\n";
	static const char text[] = "# from a file\nsocket_mode = 0600\n[class f]\nsize = 1M\n"
				   "count = 2\n";
	char path[] = "/tmp/test_config.XXXXXX";
	struct config cfg;
	char err[256] = "";
	int r;

	(void)state;
	write_temp(path, good, strlen(good));
	r = config_load(path, &cfg, err, sizeof(err));
	if (r)
		fail_msg("config_load: %d %s", r, err);
	assert_int_equal(cfg.socket_mode, 0600);
	assert_true(cfg.classes[0].size == 4 * MiB);
	assert_int_equal(cfg.classes[0].count, 2);
	unlink(path);

	/* Messages from a file carry its path as given. */
	strcpy(path, "/tmp/test_config.XXXXXX");
	write_temp(path, text, sizeof(text) - 1);
	r = config_load(path, &cfg, err, sizeof(err));
	assert_int_equal(r, -EINVAL);
	{
		char prefix[64];

		snprintf(prefix, sizeof(prefix), "%s:4: ", path);
		assert_err(r, -EINVAL, err, prefix,
			   "size 1048576 of class \"f\" is not a multiple of the page size (2 MiB)");
	}
	unlink(path);
}

static void test_load_missing_file(void **state)
{
	struct config cfg;
	char err[256];
	int r;

	(void)state;
	r = config_load("/nonexistent-dir/hugepoold.conf", &cfg, err, sizeof(err));
	assert_err(r, -ENOENT, err, "/nonexistent-dir/hugepoold.conf: cannot open: ",
		   "No such file or directory");
	/* The config is still usable as defaults. */
	assert_string_equal(cfg.socket_path, CONFIG_DEFAULT_SOCKET);
	assert_int_equal(cfg.nclasses, 0);
}

static void test_load_directory(void **state)
{
	struct config cfg;
	char err[256];
	int r;

	(void)state;
	r = config_load("/tmp", &cfg, err, sizeof(err));
	assert_err(r, -EISDIR, err, "/tmp: cannot read: ", "Is a directory");
}

static void test_load_nul_byte(void **state)
{
	static const char text[] = "socket_mode = 0600\n[class f]\nsize = 2M\0junk\ncount = 2\n";
	char path[] = "/tmp/test_config.XXXXXX";
	char prefix[64];
	struct config cfg;
	char err[256];
	int r;

	(void)state;
	write_temp(path, text, sizeof(text) - 1);
	r = config_load(path, &cfg, err, sizeof(err));
	snprintf(prefix, sizeof(prefix), "%s:3: ", path);
	assert_err(r, -EINVAL, err, prefix, "NUL byte in the file");
	assert_int_equal(cfg.nclasses, 0);
	unlink(path);
}

static void test_load_too_large(void **state)
{
	const size_t limit = 1024 * 1024;
	char path[] = "/tmp/test_config.XXXXXX";
	struct config cfg;
	char err[256];
	char *text;
	size_t len;
	int r;

	(void)state;
	text = malloc(limit + 1);
	assert_non_null(text);

	/* Exactly 1 MiB of comment lines ending in a class is still accepted. */
	memset(text, '\n', limit);
	len = strlen(ONE_CLASS);
	memcpy(text + limit - len, ONE_CLASS, len);
	write_temp(path, text, limit);
	r = config_load(path, &cfg, err, sizeof(err));
	if (r)
		fail_msg("config_load: %d %s", r, err);
	assert_int_equal(cfg.nclasses, 1);
	unlink(path);

	strcpy(path, "/tmp/test_config.XXXXXX");
	text[limit] = '\n';
	write_temp(path, text, limit + 1);
	r = config_load(path, &cfg, err, sizeof(err));
	{
		char prefix[64];

		snprintf(prefix, sizeof(prefix), "%s: ", path);
		assert_err(r, -EFBIG, err, prefix, "file too large: more than 1048576 bytes (1 MiB)");
	}
	assert_int_equal(cfg.nclasses, 0);
	unlink(path);
	free(text);
}

static void test_journal_full(void **state)
{
	static const char text[] =
		"# a journal with every key\n"
		"[journal orders]\n"
		"directory = \"/var/lib/hugepool/order journal\"  # quoted: it has a blank\n"
		"segment_size = 256M\n"
		"segments = 8\n"
		"backend = io_uring\n"
		"direct = on\n"
		"max_batch_delay = 500us\n"
		"max_batch_bytes = 4M\n"
		"ring_size = 8M\n"
		"when_full = recycle\n";
	struct config cfg;
	const struct config_journal *j;

	(void)state;
	memset(&cfg, 0xa5, sizeof(cfg));
	parse_ok(text, &cfg);
	assert_int_equal(cfg.nclasses, 0);
	assert_int_equal(cfg.njournals, 1);
	j = &cfg.journals[0];
	assert_string_equal(j->name, "orders");
	assert_string_equal(j->directory, "/var/lib/hugepool/order journal");
	assert_true(j->segment_size == 256 * MiB);
	assert_int_equal(j->segments, 8);
	assert_int_equal(j->backend, JOURNAL_BACKEND_URING);
	assert_true(j->direct);
	assert_true(j->max_batch_delay_ns == 500000);
	assert_true(j->max_batch_bytes == 4 * MiB);
	assert_true(j->ring_size == 8 * MiB);
	assert_true(j->recycle);
	assert_int_equal(j->line, 2);

	assert_ptr_equal(find_journal(&cfg, "orders"), j);
	assert_null(find_journal(&cfg, "Orders"));
	assert_null(find_journal(&cfg, "nope"));
	/* journals are not classes: nothing to lease, no pool memory */
	assert_null(find_class(&cfg, "orders"));
	assert_true(config_pool_bytes(&cfg) == 0);
}

static void test_journal_defaults(void **state)
{
	struct config cfg;
	const struct config_journal *j;

	(void)state;
	memset(&cfg, 0xa5, sizeof(cfg));
	parse_ok(ONE_JOURNAL, &cfg);
	assert_int_equal(cfg.njournals, 1);
	j = &cfg.journals[0];
	assert_string_equal(j->name, "j");
	assert_string_equal(j->directory, "/var/lib/hugepool/j");
	assert_true(j->segment_size == 64 * MiB);
	assert_int_equal(j->segments, 4);
	assert_int_equal(j->backend, JOURNAL_BACKEND_AUTO);
	assert_false(j->direct);
	assert_true(j->max_batch_delay_ns == 2000000);
	assert_true(j->max_batch_bytes == MiB);
	assert_true(j->ring_size == MiB);
	assert_false(j->recycle);
	assert_int_equal(j->line, 1);
	/* the global keys keep their defaults too */
	assert_string_equal(cfg.socket_path, CONFIG_DEFAULT_SOCKET);
	assert_int_equal(cfg.max_connections, 1024);

	/* without a directory key, a journal gets one of its own under the state directory
	 * (StateDirectory= of the unit), wherever its section ends */
	parse_ok(ONE_CLASS "\n[journal orders]\nsegments = 4\n" ONE_CLASS_B "[journal j]\n", &cfg);
	assert_string_equal(cfg.journals[0].directory, "/var/lib/hugepool/orders");
	assert_string_equal(cfg.journals[1].directory, "/var/lib/hugepool/j");

	/* a default batch larger than a small segment allows shrinks to fit; an explicit one does
	 * not (journal_batch_vs_segment_set in the bad cases) */
	parse_ok("[journal j]\ndirectory = /j\nsegment_size = 1M\n" ONE_CLASS, &cfg);
	assert_true(cfg.journals[0].max_batch_bytes == MiB - 4096);
}

/* append/read/truncate: lists of users, uids, @groups and @gids, checked for form only. */
static void test_journal_access(void **state)
{
	struct config cfg;
	const struct config_acl *a;
	char text[2048];
	(void)state;

	parse_ok("[journal j]\ndirectory = /var/lib/j\nread = alice 1001  @engines\t@42\ntruncate = root\n", &cfg);
	a = &cfg.journals[0].access[JOURNAL_READ];
	assert_true(a->set);
	assert_int_equal(a->n, 4);
	assert_false(a->e[0].group);
	assert_string_equal(a->e[0].name, "alice");
	assert_string_equal(a->e[1].name, "1001");
	assert_true(a->e[2].group);
	assert_string_equal(a->e[2].name, "engines");
	assert_true(a->e[3].group);
	assert_string_equal(a->e[3].name, "42");
	assert_true(cfg.journals[0].access[JOURNAL_TRUNCATE].set);
	assert_int_equal(cfg.journals[0].access[JOURNAL_TRUNCATE].n, 1);
	assert_false(cfg.journals[0].access[JOURNAL_APPEND].set);
	parse_bad("[journal j]\ndirectory = /var/lib/j\nappend = al/ice\n", NAME ":3:", "bad user \"al/ice\"");
	parse_bad("[journal j]\ndirectory = /var/lib/j\nappend = @\n", NAME ":3:", "bad group");
	snprintf(text, sizeof(text), "[journal j]\ndirectory = /var/lib/j\nread = %s\n",
		 "a b c d e f g h i j k l m n o p q");
	parse_bad(text, NAME ":3:", "more than 16 users and groups");
	snprintf(text, sizeof(text), "[journal j]\ndirectory = /var/lib/j\nread = %s\n",
		 "abcdefghijklmnopqrstuvwxyz0123456");
	parse_bad(text, NAME ":3:", "at most 31 characters");
}

static void test_journal_values(void **state)
{
	static const struct {
		const char *key, *value;
		enum journal_backend backend;
		bool flag;
	} choices[] = {
		{ "backend", "auto", JOURNAL_BACKEND_AUTO, false },
		{ "backend", "io_uring", JOURNAL_BACKEND_URING, false },
		{ "backend", "libaio", JOURNAL_BACKEND_AIO, false },
		{ "backend", "sync", JOURNAL_BACKEND_SYNC, false },
		{ "direct", "on", JOURNAL_BACKEND_AUTO, true },
		{ "direct", "yes", JOURNAL_BACKEND_AUTO, true },
		{ "direct", "true", JOURNAL_BACKEND_AUTO, true },
		{ "direct", "off", JOURNAL_BACKEND_AUTO, false },
		{ "direct", "no", JOURNAL_BACKEND_AUTO, false },
		{ "direct", "false", JOURNAL_BACKEND_AUTO, false },
		{ "when_full", "block", JOURNAL_BACKEND_AUTO, false },
		{ "when_full", "recycle", JOURNAL_BACKEND_AUTO, true },
	};
	static const struct {
		const char *value;
		uint64_t ns;
	} durations[] = {
		{ "0", 0 },
		{ "0ns", 0 },
		{ "0s", 0 },
		{ "1ns", 1 },
		{ "750ns", 750 },
		{ "500us", 500000 },
		{ "2ms", 2000000 },
		{ "1s", 1000000000 },
		{ "10s", 10000000000 },
		{ "10000ms", 10000000000 },
		{ "10000000000ns", 10000000000 },
		{ "00000000000000000000002ms", 2000000 },
	};
	struct config cfg;
	char text[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(choices) / sizeof(choices[0]); i++) {
		snprintf(text, sizeof(text), ONE_JOURNAL "%s = %s\n", choices[i].key, choices[i].value);
		parse_ok(text, &cfg);
		assert_int_equal(cfg.journals[0].backend, choices[i].backend);
		if (!strcmp(choices[i].key, "direct"))
			assert_int_equal(cfg.journals[0].direct, choices[i].flag);
		if (!strcmp(choices[i].key, "when_full"))
			assert_int_equal(cfg.journals[0].recycle, choices[i].flag);
	}
	for (i = 0; i < sizeof(durations) / sizeof(durations[0]); i++) {
		snprintf(text, sizeof(text), ONE_JOURNAL "max_batch_delay = %s\n", durations[i].value);
		parse_ok(text, &cfg);
		assert_true(cfg.journals[0].max_batch_delay_ns == durations[i].ns);
	}

	assert_string_equal(journal_backend_name(JOURNAL_BACKEND_AUTO), "auto");
	assert_string_equal(journal_backend_name(JOURNAL_BACKEND_URING), "io_uring");
	assert_string_equal(journal_backend_name(JOURNAL_BACKEND_AIO), "libaio");
	assert_string_equal(journal_backend_name(JOURNAL_BACKEND_SYNC), "sync");
	assert_string_equal(journal_backend_name((enum journal_backend)42), "unknown");
}

static void test_journal_limits_accepted(void **state)
{
	struct config cfg;
	char text[512];
	char dir[256];

	(void)state;
	/* the smallest segment, with the largest batch that fits after its header */
	parse_ok(ONE_JOURNAL "segment_size = 1M\nmax_batch_bytes = 1020K\nsegments = 2\n"
			     "ring_size = 64K\n",
		 &cfg);
	assert_true(cfg.journals[0].segment_size == MiB);
	assert_true(cfg.journals[0].max_batch_bytes == MiB - 4096);
	assert_int_equal(cfg.journals[0].segments, 2);
	assert_true(cfg.journals[0].ring_size == 64 * 1024);

	/* max_batch_bytes may come before segment_size: the check waits for the section's end */
	parse_ok("[journal j]\nmax_batch_bytes = 4096\nsegment_size = 1052672\nsegments = 1024\n"
		 "ring_size = 64M\ndirectory = /j\n",
		 &cfg);
	assert_true(cfg.journals[0].max_batch_bytes == 4096);
	assert_true(cfg.journals[0].segment_size == 1052672);
	assert_int_equal(cfg.journals[0].segments, 1024);
	assert_true(cfg.journals[0].ring_size == 64 * MiB);

	parse_ok(ONE_JOURNAL "segment_size = 128M\nmax_batch_bytes = 64M\n", &cfg);
	assert_true(cfg.journals[0].max_batch_bytes == 64 * MiB);

	/* 255 bytes of directory fit */
	memset(dir, 'd', 255);
	dir[0] = '/';
	dir[255] = '\0';
	snprintf(text, sizeof(text), "[journal j]\ndirectory = %s\n", dir);
	parse_ok(text, &cfg);
	assert_string_equal(cfg.journals[0].directory, dir);

	/* a directory is kept as written */
	parse_ok("[journal j]\ndirectory = /var//lib/j/\n", &cfg);
	assert_string_equal(cfg.journals[0].directory, "/var//lib/j/");

	/* names: 31 characters, the same alphabet as classes */
	parse_ok("[journal abcdefghijklmnopqrstuvwxyz-._AB]\ndirectory = /j\n", &cfg);
	assert_int_equal(strlen(cfg.journals[0].name), CONFIG_JOURNAL_NAME_MAX);
}

/* Builds "[journal jN] ..." n times, each in its own directory. */
static char *many_journals(unsigned n)
{
	size_t cap = (size_t)n * 64 + 1, len = 0;
	char *text = malloc(cap);
	unsigned i;

	assert_non_null(text);
	text[0] = '\0';
	for (i = 0; i < n; i++)
		len += (size_t)snprintf(text + len, cap - len, "[journal j%u]\ndirectory = /j/%u\n", i, i);
	return text;
}

static void test_max_journals(void **state)
{
	struct config cfg;
	char *text = many_journals(CONFIG_JOURNALS_MAX);

	(void)state;
	parse_ok(text, &cfg);
	assert_int_equal(cfg.njournals, CONFIG_JOURNALS_MAX);
	assert_non_null(find_journal(&cfg, "j15"));
	assert_string_equal(find_journal(&cfg, "j15")->directory, "/j/15");
	free(text);

	/* each journal takes two lines, so the 17th header is on line 33 */
	text = many_journals(CONFIG_JOURNALS_MAX + 1);
	parse_bad(text, NAME ":33: ", "too many journals: at most 16 are allowed");
	free(text);
}

static void test_only_journals(void **state)
{
	struct config cfg;

	(void)state;
	/* a daemon that only journals needs no class, and its global keys still apply */
	parse_ok("hugepages = off\nmax_connections = 8\n"
		 "[journal a]\ndirectory = /j/a\n[journal b]\ndirectory = /j/b\nbackend = sync\n",
		 &cfg);
	assert_int_equal(cfg.nclasses, 0);
	assert_int_equal(cfg.njournals, 2);
	assert_int_equal(cfg.hugepages, HUGEPAGES_OFF);
	assert_int_equal(cfg.max_connections, 8);
	assert_int_equal(find_journal(&cfg, "b")->backend, JOURNAL_BACKEND_SYNC);
	assert_int_equal(find_journal(&cfg, "a")->backend, JOURNAL_BACKEND_AUTO);
}

static void test_classes_and_journals_mixed(void **state)
{
	static const char *const texts[] = {
		/* journal first, then classes and journals in turn */
		"socket_mode = 0600\n"
		"[journal j1]\ndirectory = /j/1\nsegments = 3\n"
		"[class c1]\nsize = 2M\ncount = 5\n"
		"[journal j2]\ndirectory = /j/2\nsegments = 6\n"
		"[class c2]\ncount = 7\nsize = 4M\n",
		/* classes first, both journals last */
		"socket_mode = 0600\n"
		"[class c1]\nsize = 2M\ncount = 5\n"
		"[class c2]\ncount = 7\nsize = 4M\n"
		"[journal j1]\ndirectory = /j/1\nsegments = 3\n"
		"[journal j2]\nsegments = 6\ndirectory = /j/2\n",
		/* journals first */
		"socket_mode = 0600\n"
		"[journal j1]\nsegments = 3\ndirectory = /j/1\n"
		"[journal j2]\ndirectory = /j/2\nsegments = 6\n"
		"[class c1]\nsize = 2M\ncount = 5\n"
		"[class c2]\ncount = 7\nsize = 4M\n",
	};
	struct config cfg;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		parse_ok(texts[i], &cfg);
		assert_int_equal(cfg.socket_mode, 0600);
		assert_int_equal(cfg.nclasses, 2);
		assert_int_equal(cfg.njournals, 2);
		/* each key went to its own section's object */
		assert_string_equal(cfg.classes[0].name, "c1");
		assert_true(cfg.classes[0].size == 2 * MiB);
		assert_int_equal(cfg.classes[0].count, 5);
		assert_string_equal(cfg.classes[1].name, "c2");
		assert_true(cfg.classes[1].size == 4 * MiB);
		assert_int_equal(cfg.classes[1].count, 7);
		assert_string_equal(cfg.journals[0].name, "j1");
		assert_string_equal(cfg.journals[0].directory, "/j/1");
		assert_int_equal(cfg.journals[0].segments, 3);
		assert_string_equal(cfg.journals[1].name, "j2");
		assert_string_equal(cfg.journals[1].directory, "/j/2");
		assert_int_equal(cfg.journals[1].segments, 6);
		assert_true(config_pool_bytes(&cfg) == 5 * 2 * MiB + 7 * 4 * MiB);
	}
	/* the first text's lines */
	parse_ok(texts[0], &cfg);
	assert_int_equal(cfg.journals[0].line, 2);
	assert_int_equal(cfg.classes[0].line, 5);
	assert_int_equal(cfg.journals[1].line, 8);
	assert_int_equal(cfg.classes[1].line, 11);

	/* classes and journals have separate names: one of each may share a name */
	parse_ok("[class orders]\nsize = 2M\ncount = 1\n[journal orders]\ndirectory = /j\n", &cfg);
	assert_string_equal(find_class(&cfg, "orders")->name, "orders");
	assert_string_equal(find_journal(&cfg, "orders")->directory, "/j");

	/* parsing again forgets the journals of the previous result */
	parse_ok(ONE_CLASS, &cfg);
	assert_int_equal(cfg.njournals, 0);
	assert_null(find_journal(&cfg, "orders"));
}

static void run_bad_case(void **state)
{
	const struct bad_case *c = *state;

	parse_bad(c->text, c->prefix, c->reason);
}

#define L(n) NAME ":" #n ": "

static struct bad_case bad_cases[] = {
	/* Keys in the wrong place or unknown. */
	{ "unknown_global_key", "sockett = /run/x\n" ONE_CLASS, L(1),
	  "unknown key \"sockett\" in the global section" },
	{ "unknown_class_key", "[class big]\nsize = 2M\nsise = 4M\ncount = 1\n", L(3),
	  "unknown key \"sise\" in [class big]" },
	{ "global_key_in_class", ONE_CLASS "socket = /run/x.sock\n", L(4),
	  "key \"socket\" belongs before the first section" },
	{ "page_size_in_class", ONE_CLASS "page_size = 1G\n", L(4),
	  "key \"page_size\" belongs before the first section" },
	{ "class_key_in_global", "count = 4\n" ONE_CLASS, L(1),
	  "key \"count\" is only valid inside a [class NAME] section" },
	{ "unknown_key_before_empty_value", "[class a]\nsise =\n", L(2),
	  "unknown key \"sise\" in [class a]" },
	{ "keys_are_case_sensitive", "Socket = /run/x\n" ONE_CLASS, L(1), "unknown key \"Socket\"" },

	/* Sizes. */
	{ "bad_size_suffix", "[class a]\nsize = 12Q\ncount = 1\n", L(2),
	  "bad size \"12Q\" for \"size\": expected a number with an optional K, M, G or T suffix" },
	{ "bad_size_fraction", "[class a]\nsize = 1.5G\ncount = 1\n", L(2), "bad size \"1.5G\"" },
	{ "bad_size_negative", "[class a]\nsize = -2M\ncount = 1\n", L(2), "bad size \"-2M\"" },
	{ "bad_size_hex", "[class a]\nsize = 0x200000\ncount = 1\n", L(2), "bad size \"0x200000\"" },
	{ "bad_size_inner_space", "[class a]\nsize = 2 M\ncount = 1\n", L(2), "bad size \"2 M\"" },
	{ "size_overflow", "[class a]\nsize = 99999999T\ncount = 1\n", L(2),
	  "size \"99999999T\" for \"size\" is too large: it does not fit in 64 bits" },
	{ "size_zero", "[class a]\nsize = 0\ncount = 1\n", L(2),
	  "size of class \"a\" must be greater than 0" },
	{ "bad_max_bytes_per_uid", "max_bytes_per_uid = lots\n" ONE_CLASS, L(1),
	  "bad size \"lots\" for \"max_bytes_per_uid\"" },
	{ "spill_directory_relative", "spill_directory = tmp/spill\n" ONE_CLASS, L(1),
	  "spill_directory \"tmp/spill\" is not absolute" },
	{ "spill_threshold_too_large", "spill_threshold = 2G\n" ONE_CLASS, L(1),
	  "size \"2G\" for \"spill_threshold\" is out of range: expected 0 to 1G" },
	{ "bad_spill_max_bytes", "spill_max_bytes = 5 G\n" ONE_CLASS, L(1), "bad size \"5 G\" for \"spill_max_bytes\"" },
	{ "bad_spill_max_files", "spill_max_files = -1\n" ONE_CLASS, L(1), "for \"spill_max_files\"" },
	{ "spill_max_files_per_uid_range", "spill_max_files_per_uid = 1000001\n" ONE_CLASS, L(1),
	  "value 1000001 for \"spill_max_files_per_uid\" is out of range: expected 0 to 1000000" },
	{ "journal_in_spill_directory", "spill_directory = /var/x\n[journal j]\ndirectory = /var//x/\n", L(3),
	  "journal \"j\" would share the directory \"/var//x/\" with spill_directory: each needs its own" },
	{ "not_page_multiple_2m", "\n\n\n\n\n[class big]\nsize = 3000000\ncount = 1\n", L(7),
	  "size 3000000 of class \"big\" is not a multiple of the page size (2 MiB): "
	  "round it up to 4194304 (4.0 MiB)" },
	{ "not_page_multiple_1g", "page_size = 1G\n[class g]\nsize = 1536M\ncount = 1\n", L(3),
	  "size 1610612736 of class \"g\" is not a multiple of the page size (1 GiB)" },
	{ "not_page_multiple_4k", "hugepages = off\n[class s]\nsize = 6000\ncount = 1\n", L(3),
	  "size 6000 of class \"s\" is not a multiple of the page size (4 KiB, hugepages = off)" },
	{ "not_page_multiple_near_max", "hugepages = off\n[class s]\nsize = 18446744073709551615\ncount = 1\n",
	  L(3), "size 18446744073709551615 of class \"s\" is not a multiple of the page size (4 KiB" },
	{ "page_size_unsupported", "page_size = 4M\n" ONE_CLASS, L(1),
	  "unsupported page size \"4M\" for \"page_size\": expected 2M or 1G" },
	{ "page_size_4k", "page_size = 4K\n" ONE_CLASS, L(1), "unsupported page size \"4K\"" },
	{ "page_size_bad", "page_size = huge\n" ONE_CLASS, L(1),
	  "bad size \"huge\" for \"page_size\"" },

	/* Integers. */
	{ "count_zero", "[class a]\nsize = 2M\ncount = 0\n", L(3),
	  "value 0 for \"count\" is out of range: expected 1 to 1000000" },
	{ "count_too_big", "[class a]\nsize = 2M\ncount = 1000001\n", L(3),
	  "value 1000001 for \"count\" is out of range" },
	{ "count_trailing_junk", "[class a]\nsize = 2M\ncount = 12abc\n", L(3),
	  "bad number \"12abc\" for \"count\": expected a decimal integer from 1 to 1000000" },
	{ "count_negative", "[class a]\nsize = 2M\ncount = -1\n", L(3), "bad number \"-1\"" },
	{ "count_plus", "[class a]\nsize = 2M\ncount = +1\n", L(3), "bad number \"+1\"" },
	{ "count_suffix", "[class a]\nsize = 2M\ncount = 1K\n", L(3), "bad number \"1K\"" },
	{ "count_overflow", "[class a]\nsize = 2M\ncount = 99999999999999999999999\n", L(3),
	  "value 99999999999999999999999 for \"count\" is out of range" },
	{ "count_inner_space", "[class a]\nsize = 2M\ncount = 1 2\n", L(3), "bad number \"1 2\"" },
	{ "prefault_threads_too_big", "prefault_threads = 1025\n" ONE_CLASS, L(1),
	  "value 1025 for \"prefault_threads\" is out of range: expected 0 to 1024" },
	{ "prefault_threads_negative", "prefault_threads = -1\n" ONE_CLASS, L(1),
	  "bad number \"-1\" for \"prefault_threads\"" },
	{ "max_connections_zero", "max_connections = 0\n" ONE_CLASS, L(1),
	  "value 0 for \"max_connections\" is out of range: expected 1 to 65536" },
	{ "max_connections_too_big", "max_connections = 65537\n" ONE_CLASS, L(1),
	  "value 65537 for \"max_connections\" is out of range" },
	{ "max_connections_hex", "max_connections = 0x10\n" ONE_CLASS, L(1),
	  "bad number \"0x10\" for \"max_connections\"" },
	{ "max_connections_per_uid_too_big", "max_connections_per_uid = 65537\n" ONE_CLASS, L(1),
	  "value 65537 for \"max_connections_per_uid\" is out of range: expected 0 to 65536" },
	{ "max_connections_per_uid_overflow", "max_connections_per_uid = 18446744073709551616\n" ONE_CLASS,
	  L(1), "value 18446744073709551616 for \"max_connections_per_uid\" is out of range" },
	{ "socket_mode_not_octal", "socket_mode = 0689\n" ONE_CLASS, L(1),
	  "bad mode \"0689\" for \"socket_mode\": expected an octal number such as 0660" },
	{ "socket_mode_junk", "socket_mode = 0660x\n" ONE_CLASS, L(1), "bad mode \"0660x\"" },
	{ "socket_mode_negative", "socket_mode = -0660\n" ONE_CLASS, L(1), "bad mode \"-0660\"" },
	{ "socket_mode_too_big", "socket_mode = 01777\n" ONE_CLASS, L(1),
	  "mode 01777 for \"socket_mode\" is out of range: at most 0777" },
	{ "socket_mode_overflow", "socket_mode = 7777777777777777777777777\n" ONE_CLASS, L(1),
	  "is out of range: at most 0777" },

	/* Enumerations and strings. */
	{ "hugepages_bad", "hugepages = maybe\n" ONE_CLASS, L(1),
	  "bad value \"maybe\" for \"hugepages\": expected require, prefer or off" },
	{ "hugepages_case", "hugepages = Off\n" ONE_CLASS, L(1), "bad value \"Off\"" },
	{ "socket_relative", "socket = run/hugepool.sock\n" ONE_CLASS, L(1),
	  "socket path \"run/hugepool.sock\" is not absolute" },
	{ "socket_too_long",
	  "socket = /run/hugepool/0123456789012345678901234567890123456789012345678901234567890123456789"
	  "012345678901234567890123\n" ONE_CLASS,
	  L(1), "socket path is too long: 108 bytes, at most 107" },
	{ "socket_group_too_long",
	  "socket_group = gggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggg\n" ONE_CLASS,
	  L(1), "for \"socket_group\" is too long: at most 63 bytes" },

	/* Line syntax. */
	{ "missing_equals", "socket /run/x.sock\n" ONE_CLASS, L(1),
	  "missing \"=\": expected \"key = value\", got \"socket /run/x.sock\"" },
	{ "missing_key", ONE_CLASS "= 5\n", L(4), "missing key before \"=\"" },
	{ "empty_value", "socket_group =\n" ONE_CLASS, L(1), "empty value for \"socket_group\"" },
	{ "blank_value", "[class a]\nsize = 2M\ncount =  \t \n", L(3), "empty value for \"count\"" },
	{ "comment_only_value", "socket = # nothing\n" ONE_CLASS, L(1), "empty value for \"socket\"" },
	{ "empty_quoted_value", "socket_group = \"\"\n" ONE_CLASS, L(1),
	  "empty value for \"socket_group\"" },
	{ "unterminated_quote", "\nsocket = \"/run/x.sock\n" ONE_CLASS, L(2),
	  "unterminated quote in the value of \"socket\"" },
	{ "text_after_quote", "socket = \"/run/x.sock\" extra\n" ONE_CLASS, L(1),
	  "unexpected text \"extra\" after the closing quote of \"socket\"" },
	{ "duplicate_global_key", "socket_mode = 0600\n\nsocket_mode = 0640\n" ONE_CLASS, L(3),
	  "duplicate key \"socket_mode\" (first set on line 1)" },
	{ "duplicate_class_key", "[class a]\nsize = 2M\ncount = 1\ncount = 2\n", L(4),
	  "duplicate key \"count\" in [class a] (first set on line 3)" },

	/* Section headers and class names. */
	{ "unknown_section", ONE_CLASS "[foo]\n", L(4),
	  "unknown section \"foo\": the only section kinds are [class NAME] and [journal NAME]" },
	{ "unknown_section_with_name", "[pool big]\n", L(1), "unknown section \"pool\"" },
	{ "section_kind_case", "[Class big]\n", L(1), "unknown section \"Class\"" },
	{ "section_unclosed", "[class big\nsize = 2M\ncount = 1\n", L(1),
	  "bad section header \"[class big\": missing \"]\"" },
	{ "section_empty", "[ ]\n", L(1),
	  "bad section header \"[]\": expected [class NAME] or [journal NAME]" },
	{ "section_no_name", "[class]\n", L(1), "the class needs a name, as in [class NAME]" },
	{ "section_trailing_text", "[class a] b\n", L(1),
	  "bad section header: unexpected text \"b\" after \"]\"" },
	{ "class_name_space", "[class a b]\n", L(1),
	  "bad class name \"a b\": ' ' is not allowed, use only letters, digits, '_', '.' and '-'" },
	{ "class_name_slash", "[class a/b]\n", L(1), "bad class name \"a/b\": '/' is not allowed" },
	{ "class_name_quote", "[class \"a\"]\n", L(1), "'\"' is not allowed" },
	{ "class_name_too_long", "[class a23456789012345678901234567890123]\n", L(1),
	  "class name \"a23456789012345678901234567890123\" is too long: 33 characters, at most 31" },
	{ "duplicate_class", "\n\n\n[class big]\nsize = 2M\ncount = 1\n\n\n[class big]\n", L(9),
	  "duplicate class \"big\" (first defined on line 4)" },

	/* Journal sections: headers and names. */
	{ "journal_no_name", "[journal]\n", L(1), "the journal needs a name, as in [journal NAME]" },
	{ "journal_kind_case", "[Journal j]\n", L(1), "unknown section \"Journal\"" },
	{ "journal_name_slash", "[journal a/b]\n", L(1),
	  "bad journal name \"a/b\": '/' is not allowed, use only letters, digits, '_', '.' and '-'" },
	{ "journal_name_too_long", "[journal a23456789012345678901234567890123]\n", L(1),
	  "journal name \"a23456789012345678901234567890123\" is too long: 33 characters, at most 31" },
	{ "duplicate_journal", ONE_CLASS "[journal j]\ndirectory = /j/1\n" ONE_CLASS_B
	  "[journal j]\ndirectory = /j/2\n", L(9), "duplicate journal \"j\" (first defined on line 4)" },

	/* Journal keys in the wrong place or unknown. */
	{ "journal_key_in_global", "directory = /j\n" ONE_JOURNAL, L(1),
	  "key \"directory\" is only valid inside a [journal NAME] section" },
	{ "journal_key_in_class", "[class a]\nsize = 2M\nsegments = 4\ncount = 1\n", L(3),
	  "key \"segments\" is only valid inside a [journal NAME] section" },
	{ "class_key_in_journal", ONE_JOURNAL "count = 1\n", L(3),
	  "key \"count\" is only valid inside a [class NAME] section" },
	{ "global_key_in_journal", ONE_JOURNAL "max_connections = 5\n", L(3),
	  "key \"max_connections\" belongs before the first section" },
	{ "unknown_journal_key", ONE_JOURNAL "segment = 4\n", L(3),
	  "unknown key \"segment\" in [journal j]" },
	{ "duplicate_journal_key", ONE_JOURNAL "segments = 4\n\nsegments = 8\n", L(5),
	  "duplicate key \"segments\" in [journal j] (first set on line 3)" },
	{ "journal_empty_value", ONE_JOURNAL "backend =\n", L(3), "empty value for \"backend\"" },

	/* directory */
	{ "journal_default_directory_shared", "[journal a]\ndirectory = /var/lib/hugepool/b\n" ONE_CLASS "[journal b]\n",
	  L(6), "journals \"a\" and \"b\" share the directory \"/var/lib/hugepool/b\" (journal \"a\" is defined on line 1)" },
	{ "journal_default_directory_spill", "spill_directory = /var/lib/hugepool/s\n[journal s]\nsegments = 4\n",
	  L(2), "journal \"s\" would share the directory \"/var/lib/hugepool/s\" with spill_directory" },
	{ "journal_directory_relative", "[journal j]\ndirectory = var/lib/j\n", L(2),
	  "directory \"var/lib/j\" of journal \"j\" is not absolute" },
	{ "journal_directory_too_long",
	  "[journal j]\ndirectory = /012345678901234567890123456789012345678901234567890123456789012"
	  "3456789012345678901234567890123456789012345678901234567890123456789012345678901234567890"
	  "1234567890123456789012345678901234567890123456789012345678901234567890123456789012345678"
	  "9012345678901234\n",
	  L(2), "directory of journal \"j\" is too long: 256 bytes, at most 255" },
	{ "journal_directory_shared", "[journal a]\ndirectory = /j\n" ONE_CLASS "[journal b]\ndirectory = /j\n",
	  L(7), "journals \"a\" and \"b\" share the directory \"/j\" (journal \"a\" is defined on line 1)" },
	{ "journal_directory_shared_spelling", "[journal a]\ndirectory = /var/lib/j/\n"
	  "[journal b]\ndirectory = /var//lib/j\n",
	  L(4), "journals \"a\" and \"b\" share the directory \"/var//lib/j\"" },

	/* segment_size and segments */
	{ "journal_segment_size_bad", ONE_JOURNAL "segment_size = 64X\n", L(3),
	  "bad size \"64X\" for \"segment_size\": expected a number with an optional K, M, G or T suffix" },
	{ "journal_segment_size_small", ONE_JOURNAL "segment_size = 1020K\n", L(3),
	  "size \"1020K\" for \"segment_size\" is too small: at least 1M" },
	{ "journal_segment_size_unaligned", ONE_JOURNAL "segment_size = 1049000\n", L(3),
	  "size \"1049000\" for \"segment_size\" is not a multiple of 4096: round it up to 1052672" },
	{ "journal_segment_size_near_max", ONE_JOURNAL "segment_size = 18446744073709551615\n", L(3),
	  "size \"18446744073709551615\" for \"segment_size\" is not a multiple of 4096" },
	{ "journal_segment_size_overflow", ONE_JOURNAL "segment_size = 99999999T\n", L(3),
	  "size \"99999999T\" for \"segment_size\" is too large: it does not fit in 64 bits" },
	{ "journal_segments_one", ONE_JOURNAL "segments = 1\n", L(3),
	  "value 1 for \"segments\" is out of range: expected 2 to 1024" },
	{ "journal_segments_too_many", ONE_JOURNAL "segments = 1025\n", L(3),
	  "value 1025 for \"segments\" is out of range" },
	{ "journal_segments_junk", ONE_JOURNAL "segments = 4x\n", L(3),
	  "bad number \"4x\" for \"segments\": expected a decimal integer from 2 to 1024" },
	{ "journal_disk_overflow", "\n[journal j]\ndirectory = /j\nsegment_size = 16777215T\n", L(2),
	  "journal \"j\" is larger than 2^64 bytes (segment_size * segments overflows)" },

	/* backend, direct, when_full */
	{ "journal_backend_bad", ONE_JOURNAL "backend = uring\n", L(3),
	  "bad value \"uring\" for \"backend\": expected auto, io_uring, libaio or sync" },
	{ "journal_backend_case", ONE_JOURNAL "backend = Sync\n", L(3), "bad value \"Sync\"" },
	{ "journal_direct_bad", ONE_JOURNAL "direct = 1\n", L(3),
	  "bad value \"1\" for \"direct\": expected on, off, yes, no, true or false" },
	{ "journal_direct_case", ONE_JOURNAL "direct = ON\n", L(3), "bad value \"ON\" for \"direct\"" },
	{ "journal_when_full_bad", ONE_JOURNAL "when_full = drop\n", L(3),
	  "bad value \"drop\" for \"when_full\": expected block or recycle" },

	/* max_batch_delay: a duration */
	{ "journal_delay_no_unit", ONE_JOURNAL "max_batch_delay = 500\n", L(3),
	  "duration \"500\" for \"max_batch_delay\" has no unit: expected ns, us, ms or s after the number" },
	{ "journal_delay_unknown_unit", ONE_JOURNAL "max_batch_delay = 2sec\n", L(3),
	  "unknown unit \"sec\" in duration \"2sec\" for \"max_batch_delay\": expected ns, us, ms or s" },
	{ "journal_delay_unit_case", ONE_JOURNAL "max_batch_delay = 2MS\n", L(3), "unknown unit \"MS\"" },
	{ "journal_delay_micro_sign", ONE_JOURNAL "max_batch_delay = 2\xc2\xb5s\n", L(3),
	  "bad duration \"2\xc2\xb5s\" for \"max_batch_delay\": expected an integer and a unit" },
	{ "journal_delay_fraction", ONE_JOURNAL "max_batch_delay = 1.5ms\n", L(3),
	  "bad duration \"1.5ms\" for \"max_batch_delay\": no fractions, use a smaller unit" },
	{ "journal_delay_no_number", ONE_JOURNAL "max_batch_delay = ms\n", L(3),
	  "bad duration \"ms\" for \"max_batch_delay\": expected an integer and a unit (ns, us, ms or s), as in 500us or 2ms" },
	{ "journal_delay_negative", ONE_JOURNAL "max_batch_delay = -1ms\n", L(3), "bad duration \"-1ms\"" },
	{ "journal_delay_inner_space", ONE_JOURNAL "max_batch_delay = 2 ms\n", L(3), "bad duration \"2 ms\"" },
	{ "journal_delay_too_long", ONE_JOURNAL "max_batch_delay = 11s\n", L(3),
	  "duration \"11s\" for \"max_batch_delay\" is out of range: at most 10s" },
	{ "journal_delay_just_too_long", ONE_JOURNAL "max_batch_delay = 10000000001ns\n", L(3),
	  "duration \"10000000001ns\" for \"max_batch_delay\" is out of range" },
	{ "journal_delay_mul_overflow", ONE_JOURNAL "max_batch_delay = 18446744073709551615s\n", L(3),
	  "is out of range: at most 10s" },
	{ "journal_delay_overflow", ONE_JOURNAL "max_batch_delay = 99999999999999999999999us\n", L(3),
	  "duration \"99999999999999999999999us\" for \"max_batch_delay\" is out of range" },
	{ "journal_delay_overflow_no_unit", ONE_JOURNAL "max_batch_delay = 99999999999999999999999\n",
	  L(3), "has no unit" },

	/* max_batch_bytes and ring_size */
	{ "journal_batch_small", ONE_JOURNAL "max_batch_bytes = 2K\n", L(3),
	  "size \"2K\" for \"max_batch_bytes\" is out of range: expected 4K to 64M" },
	{ "journal_batch_large", ONE_JOURNAL "max_batch_bytes = 65537K\n", L(3),
	  "size \"65537K\" for \"max_batch_bytes\" is out of range" },
	{ "journal_batch_bad", ONE_JOURNAL "max_batch_bytes = 1M!\n", L(3),
	  "bad size \"1M!\" for \"max_batch_bytes\"" },
	{ "journal_batch_vs_segment_set", "\n[journal j]\nmax_batch_bytes = 2M\nsegment_size = 2M\n"
	  "directory = /j\n",
	  L(2), "max_batch_bytes 2097152 (set on line 3) is larger than segment_size - 4096 = 2093056 "
	  "(segment_size: set on line 4)" },
	{ "journal_batch_vs_default_segment", ONE_JOURNAL "max_batch_bytes = 64M\n", L(1),
	  "max_batch_bytes 67108864 (set on line 3) is larger than segment_size - 4096 = 67104768 "
	  "(segment_size: the default)" },
	{ "journal_ring_small", ONE_JOURNAL "ring_size = 32K\n", L(3),
	  "size \"32K\" for \"ring_size\" is out of range: expected 64K to 64M" },
	{ "journal_ring_large", ONE_JOURNAL "ring_size = 128M\n", L(3),
	  "size \"128M\" for \"ring_size\" is out of range: expected 64K to 64M" },
	{ "journal_ring_not_power", ONE_JOURNAL "ring_size = 100K\n", L(3),
	  "size \"100K\" for \"ring_size\" is not a power of two: the nearest are 64K and 128K" },
	{ "journal_ring_not_power_bytes", ONE_JOURNAL "ring_size = 3145728\n", L(3),
	  "the nearest are 2M and 4M" },
	{ "journal_ring_bad", ONE_JOURNAL "ring_size = big\n", L(3), "bad size \"big\" for \"ring_size\"" },

	/* Whole-file checks. */
	{ "class_missing_size", "# c\n[class big]\ncount = 1\n" ONE_CLASS, L(2),
	  "class \"big\" has no \"size\" key" },
	{ "class_missing_count", ONE_CLASS "[class big]\nsize = 2M\n", L(4),
	  "class \"big\" has no \"count\" key" },
	{ "class_empty", "[class e]\n\n", L(1), "class \"e\" has no \"size\" key" },
	{ "no_section", "socket_mode = 0600\n", NAME ": ",
	  "no [class] or [journal] section: nothing to serve" },
	{ "empty_file", "", NAME ": ", "no [class] or [journal] section" },
	{ "comments_only", "# nothing\n; here\n", NAME ": ", "no [class] or [journal] section" },
	{ "class_product_overflow", "[class x]\nsize = 32T\ncount = 1000000\n", L(1),
	  "class \"x\" makes the pool larger than 2^64 bytes" },
	{ "pool_sum_overflow",
	  "[class x]\nsize = 16T\ncount = 1000000\n[class y]\nsize = 16T\ncount = 1000000\n", L(4),
	  "class \"y\" makes the pool larger than 2^64 bytes" },
	{ "long_value_is_clipped",
	  "hugepages = 0123456789012345678901234567890123456789012345678901234567890123456789\n", L(1),
	  "bad value \"0123456789012345678901234567890123456789012345678901234567890123...\"" },
};

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_defaults_when_keys_absent),
		cmocka_unit_test(test_full_config),
		cmocka_unit_test(test_hugepages_modes),
		cmocka_unit_test(test_page_size_1g),
		cmocka_unit_test(test_page_size_2m_spellings),
		cmocka_unit_test(test_hugepages_off_uses_4k),
		cmocka_unit_test(test_quoted_values),
		cmocka_unit_test(test_comments_and_blanks),
		cmocka_unit_test(test_crlf_and_no_final_newline),
		cmocka_unit_test(test_limits_accepted),
		cmocka_unit_test(test_class_name_limits),
		cmocka_unit_test(test_same_key_in_two_classes),
		cmocka_unit_test(test_max_classes),
		cmocka_unit_test(test_too_many_classes),
		cmocka_unit_test(test_line_length),
		cmocka_unit_test(test_name_used_as_given),
		cmocka_unit_test(test_error_buffer_edge_cases),
		cmocka_unit_test(test_parse_reinitialises),
		cmocka_unit_test(test_load_file),
		cmocka_unit_test(test_load_missing_file),
		cmocka_unit_test(test_load_directory),
		cmocka_unit_test(test_load_nul_byte),
		cmocka_unit_test(test_load_too_large),
		cmocka_unit_test(test_journal_full),
		cmocka_unit_test(test_journal_defaults),
		cmocka_unit_test(test_journal_values),
		cmocka_unit_test(test_journal_access),
		cmocka_unit_test(test_journal_limits_accepted),
		cmocka_unit_test(test_max_journals),
		cmocka_unit_test(test_only_journals),
		cmocka_unit_test(test_classes_and_journals_mixed),
	};
	struct CMUnitTest bad_tests[sizeof(bad_cases) / sizeof(bad_cases[0])];
	size_t i;
	int failed;

	/* One named test per bad line, so a failure says which case broke. */
	for (i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		bad_tests[i] = (struct CMUnitTest){
			.name = bad_cases[i].name,
			.test_func = run_bad_case,
			.initial_state = &bad_cases[i],
		};
	}

	failed = cmocka_run_group_tests_name("config", tests, NULL, NULL);
	failed += cmocka_run_group_tests_name("config_errors", bad_tests, NULL, NULL);
	return failed;
}
