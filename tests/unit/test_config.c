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
	assert_string_equal(cfg.socket_path, CONFIG_DEFAULT_SOCKET);
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
	assert_int_equal(cfg.hugepages, HUGEPAGES_PREFER);
	assert_true(cfg.page_size == 2 * MiB);
	assert_int_equal(cfg.prefault_threads, 0);
	assert_int_equal(cfg.max_connections, 1024);
	assert_int_equal(cfg.max_connections_per_uid, 64);
	assert_true(cfg.max_bytes_per_uid == 0);
	assert_int_equal(cfg.nclasses, 0);
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
		"hugepages = require\n"
		"page_size = 2M\n"
		"prefault_threads = 8\n"
		"max_connections = 512\n"
		"max_connections_per_uid = 16\n"
		"max_bytes_per_uid = 8G\n"
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
	assert_int_equal(cfg.hugepages, HUGEPAGES_REQUIRE);
	assert_true(cfg.page_size == 2 * MiB);
	assert_int_equal(cfg.prefault_threads, 8);
	assert_int_equal(cfg.max_connections, 512);
	assert_int_equal(cfg.max_connections_per_uid, 16);
	assert_true(cfg.max_bytes_per_uid == 8 * GiB);
	assert_int_equal(cfg.nclasses, 3);

	assert_string_equal(cfg.classes[0].name, "small");
	assert_true(cfg.classes[0].size == 2 * MiB);
	assert_int_equal(cfg.classes[0].count, 256);
	assert_int_equal(cfg.classes[0].line, 12);
	assert_string_equal(cfg.classes[1].name, "big");
	assert_true(cfg.classes[1].size == 64 * MiB);
	assert_int_equal(cfg.classes[1].count, 16);
	assert_int_equal(cfg.classes[1].line, 16);
	assert_string_equal(cfg.classes[2].name, "Huge-1.x_y");
	assert_true(cfg.classes[2].size == GiB);
	assert_int_equal(cfg.classes[2].count, 2);
	assert_int_equal(cfg.classes[2].line, 19);

	c = config_find_class(&cfg, "big");
	assert_ptr_equal(c, &cfg.classes[1]);
	assert_null(config_find_class(&cfg, "Big"));
	assert_null(config_find_class(&cfg, "nope"));
	assert_null(config_find_class(&cfg, NULL));
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
	assert_string_equal(hugepages_mode_name(HUGEPAGES_PREFER), "prefer");
	assert_string_equal(hugepages_mode_name(HUGEPAGES_REQUIRE), "require");
	assert_string_equal(hugepages_mode_name(HUGEPAGES_OFF), "off");
	assert_string_equal(hugepages_mode_name((enum hugepages_mode)42), "unknown");
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
	assert_non_null(config_find_class(&cfg, "c63"));
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
	  "key \"socket\" belongs before the first [class] section" },
	{ "page_size_in_class", ONE_CLASS "page_size = 1G\n", L(4),
	  "key \"page_size\" belongs before the first [class] section" },
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
	  "unknown section \"foo\": the only section kind is [class NAME]" },
	{ "unknown_section_with_name", "[pool big]\n", L(1), "unknown section \"pool\"" },
	{ "section_kind_case", "[Class big]\n", L(1), "unknown section \"Class\"" },
	{ "section_unclosed", "[class big\nsize = 2M\ncount = 1\n", L(1),
	  "bad section header \"[class big\": missing \"]\"" },
	{ "section_empty", "[ ]\n", L(1), "bad section header \"[]\": expected [class NAME]" },
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

	/* Whole-file checks. */
	{ "class_missing_size", "# c\n[class big]\ncount = 1\n" ONE_CLASS, L(2),
	  "class \"big\" has no \"size\" key" },
	{ "class_missing_count", ONE_CLASS "[class big]\nsize = 2M\n", L(4),
	  "class \"big\" has no \"count\" key" },
	{ "class_empty", "[class e]\n\n", L(1), "class \"e\" has no \"size\" key" },
	{ "no_class", "socket_mode = 0600\n", NAME ": ", "no [class] section: the pool would be empty" },
	{ "empty_file", "", NAME ": ", "no [class] section" },
	{ "comments_only", "# nothing\n; here\n", NAME ": ", "no [class] section" },
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
