/* SPDX-License-Identifier: MIT */
/*
 * Integration tests of spill streams against a real hugepoold, through libhugepool:
 * - the threshold: threshold - 1 and threshold stay in memory, threshold + 1 goes to a file,
 *   for a per-stream threshold and for the daemon's spill_threshold; read-back equality in
 *   both states, with hp_spill_read of odd sizes, hp_spill_next and rewinds;
 * - single-byte writes, one write larger than the threshold, a stream as an hp_merge input;
 * - status: streams in memory and on disk, bytes and files, per client; all back to zero;
 * - limits: spill_max_bytes_per_uid and spill_max_bytes hit mid-write, spill_max_files: an
 *   -EDQUOT naming the limit, the stream readable up to what it holds, nothing else broken;
 * - a client SIGKILLed with streams open: its quota comes back and no file remains;
 * - a full file system (a 1 MiB tmpfs, as root): -ENOSPC, the stream readable, bytes refunded;
 * - a raw client that writes past its charge is truncated; bad spill requests are answered;
 * - the quota bypasses of a hostile client (fallocate with KEEP_SIZE, writes after close, an fd
 *   passed to a process that outlives the connection) are undone, and such files count; the
 *   same attack by a client of another uid when the test runs as root;
 * - the daemon dying under a client: its streams stay readable.
 * Spill does not depend on hugepages: run-tests.sh runs this file once, with hugepages = off
 * (its hugepage_modes table).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hugepool.h"
#include "proto.h"
#include "case.h"
#include "util.h"

#define KIB 1024ull
#define MIB (1024ull * 1024)
#define CLASSES "[class s]\nsize = 2M\ncount = 1\n"

/* Deterministic bytes: byte i of stream `seed`. */
static unsigned char pattern(uint64_t seed, uint64_t i)
{
	uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed * 0xBF58476D1CE4E5B9ull;

	return (unsigned char)(x >> 29);
}

static unsigned char *make_data(uint64_t seed, size_t n)
{
	unsigned char *p = malloc(n ? n : 1);

	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = pattern(seed, i);
	return p;
}

/* Read the whole stream three ways and compare with expect[0..n). */
static void check_stream(hp_spill *s, const unsigned char *expect, size_t n)
{
	unsigned char *got = malloc(n + 1);
	size_t done = 0, step = 1;
	const void *view;
	ssize_t r;

	assert_non_null(got);
	assert_int_equal(hp_spill_size(s), n);
	/* hp_spill_read in growing odd sizes */
	assert_int_equal(hp_spill_rewind(s), 0);
	while ((r = hp_spill_read(s, got + done, MIN(step, n + 1 - done))) > 0) {
		done += (size_t)r;
		step = step * 3 + 1;
	}
	assert_int_equal(r, 0);
	assert_int_equal(done, n);
	assert_memory_equal(got, expect, n);
	/* one large read */
	assert_int_equal(hp_spill_rewind(s), 0);
	assert_int_equal(hp_spill_read(s, got, n + 1), (ssize_t)n);
	assert_memory_equal(got, expect, n);
	/* zero-copy views of 1 byte units */
	assert_int_equal(hp_spill_rewind(s), 0);
	done = 0;
	while ((r = hp_spill_next(s, &view, 1)) > 0) {
		assert_true(done + (size_t)r <= n);
		assert_memory_equal(view, expect + done, (size_t)r);
		done += (size_t)r;
	}
	assert_int_equal(r, 0);
	assert_int_equal(done, n);
	free(got);
}

static hp_spill *open_stream(hp_conn *c, uint64_t threshold)
{
	struct hp_spill_opts o = { .threshold = threshold };
	hp_spill *s = NULL;

	assert_int_equal(hp_spill_open(c, &o, &s), 0);
	return s;
}

/* Write n bytes of seed in one call, finish, check state and contents. */
static void round_trip(hp_conn *c, uint64_t threshold, size_t n, int want_state)
{
	unsigned char *data = make_data(n, n);
	hp_spill *s = open_stream(c, threshold);

	assert_int_equal(hp_spill_write(s, data, n), 0);
	assert_int_equal(hp_spill_state(s), want_state);
	assert_int_equal(hp_spill_finish(s), 0);
	check_stream(s, data, n);
	hp_spill_close(s);
	free(data);
}

static struct hp_status *await_spill(hp_conn *c, bool (*cond)(const struct hp_status *, uint64_t), uint64_t n);
static bool files_exactly(const struct hp_status *st, uint64_t n);

/*
 * The machine's spill numbers are back to nothing (once the audit has let go of files closed
 * while the client still had them open).
 */
static void assert_spill_idle(hp_conn *c)
{
	struct hp_status *st = await_spill(c, files_exactly, 0);

	assert_int_equal(st->spill.files, 0);
	assert_int_equal(st->spill.lingering, 0);
	assert_int_equal(st->spill.bytes, 0);
	assert_int_equal(st->spill.streams_memory, 0);
	assert_int_equal(st->spill.bytes_memory, 0);
	hp_status_free(st);
}

static unsigned dir_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	unsigned n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void test_threshold(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	hp_conn *c;

	(void)state;
	start(&d, "spill_threshold = 8K", CLASSES);
	c = conn(&d);
	/* a stream's own threshold */
	round_trip(c, 64 * KIB, 64 * KIB - 1, HP_SPILL_MEMORY);
	round_trip(c, 64 * KIB, 64 * KIB, HP_SPILL_MEMORY);
	round_trip(c, 64 * KIB, 64 * KIB + 1, HP_SPILL_FILE);
	/* the daemon's spill_threshold (8K) when the stream names none */
	round_trip(c, 0, 8 * KIB - 1, HP_SPILL_MEMORY);
	round_trip(c, 0, 8 * KIB, HP_SPILL_MEMORY);
	round_trip(c, 0, 8 * KIB + 1, HP_SPILL_FILE);
	/* empty streams, and a file from the first byte */
	round_trip(c, 0, 0, HP_SPILL_MEMORY);
	round_trip(c, HP_SPILL_ALWAYS_FILE, 1, HP_SPILL_FILE);
	round_trip(c, HP_SPILL_ALWAYS_FILE, 3 * MIB + 7, HP_SPILL_FILE);
	assert_spill_idle(c);
	{
		char spilldir[128];

		snprintf(spilldir, sizeof(spilldir), "%s/spill", d.dir);
		assert_int_equal(dir_entries(spilldir), 0); /* nameless files only */
	}
	assert_int_equal(hp_spill_open(c, &(struct hp_spill_opts){ .threshold = HP_SPILL_THRESHOLD_MAX + 1 }, &(hp_spill *){ NULL }),
			 -EINVAL);
	hp_disconnect(c);
	stop(&d);
}

static void test_single_bytes(void **state)
{
	const size_t n = 300 * KIB + 17;
	unsigned char *data = make_data(7, n);
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	hp_spill *s;
	hp_conn *c;

	(void)state;
	start(&d, "", CLASSES);
	c = conn(&d);
	s = open_stream(c, 64 * KIB);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(hp_spill_write(s, data + i, 1), 0);
		assert_int_equal(hp_spill_state(s), i + 1 <= 64 * KIB ? HP_SPILL_MEMORY : HP_SPILL_FILE);
	}
	assert_int_equal(hp_spill_finish(s), 0);
	assert_int_equal(hp_spill_finish(s), 0); /* twice is fine */
	check_stream(s, data, n);
	check_stream(s, data, n); /* and again after rewinds */
	assert_int_equal(hp_spill_write(s, data, 1), -EINVAL); /* finished */
	hp_spill_close(s);
	free(data);
	hp_disconnect(c);
	stop(&d);
}

/*
 * hugepoolctl names a client the same way in every --json view: the members that say who it is,
 * as leases writes them, open the client's object in spill too.
 */
static void same_client_json(const struct daemon *d)
{
	static char status_out[65536], spill_out[65536];
	char *who, *end;

	assert_int_equal(ctl(d, "--json leases", status_out, sizeof(status_out)), 0);
	assert_int_equal(ctl(d, "--json spill", spill_out, sizeof(spill_out)), 0);
	who = strstr(status_out, "\"clients\":[{");
	assert_non_null(who);
	who += strlen("\"clients\":[");
	end = strstr(who, "\"connected\":\"");
	assert_non_null(end);
	end = strchr(end + strlen("\"connected\":\""), '"');
	assert_non_null(end);
	end[1] = '\0';
	assert_non_null(strstr(spill_out, who));
}

static void test_large_write_and_status(void **state)
{
	const size_t n = 5 * MIB + 3;
	unsigned char *data = make_data(3, n);
	struct hp_status *st;
	hp_spill *big, *small[3];
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	hp_conn *c;

	(void)state;
	start(&d, "", CLASSES);
	c = conn(&d);
	/* one call much larger than the (default 1 MiB) threshold */
	big = open_stream(c, 0);
	assert_int_equal(hp_spill_write(big, data, n), 0);
	assert_int_equal(hp_spill_state(big), HP_SPILL_FILE);
	for (int i = 0; i < 3; i++) {
		small[i] = open_stream(c, 0);
		assert_int_equal(hp_spill_write(small[i], data, 1000u * (unsigned)(i + 1)), 0);
	}
	assert_int_equal(hp_spill_finish(big), 0);
	st = status(c);
	assert_int_equal(st->spill.files, 1);
	assert_int_equal(st->spill.bytes, n); /* charged exactly what was written */
	assert_int_equal(st->spill.streams_memory, 3);
	assert_int_equal(st->spill.bytes_memory, 6000);
	assert_int_equal(st->spill.files_created, 1);
	assert_string_equal(st->spill.method, "O_TMPFILE");
	assert_int_equal(st->spill.threshold, 1 * MIB);
	assert_int_equal(st->nclients, 1);
	assert_int_equal(st->clients[0]->spill_files, 1);
	assert_int_equal(st->clients[0]->spill_bytes, n);
	assert_int_equal(st->clients[0]->spill_streams_memory, 3);
	assert_int_equal(st->clients[0]->spill_bytes_memory, 6000);
	/* the uid's account (version 6): the same file and bytes */
	assert_int_equal(st->nspill_uids, 1);
	assert_int_equal(st->spill_uids[0]->uid, getuid());
	assert_int_equal(st->spill_uids[0]->files, 1);
	assert_int_equal(st->spill_uids[0]->bytes, n);
	assert_int_equal(st->spill_uids[0]->files_created, 1);
	hp_status_free(st);
	same_client_json(&d);
	check_stream(big, data, n);
	hp_spill_close(big);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(hp_spill_finish(small[i]), 0);
		check_stream(small[i], data, 1000u * (unsigned)(i + 1));
		hp_spill_close(small[i]);
	}
	assert_spill_idle(c);
	free(data);
	hp_disconnect(c);
	stop(&d);
}

/*
 * Write total bytes in writes of step until one fails; returns that error (0 if none) and
 * checks the stream keeps a readable prefix of what was written.
 */
static int write_until_error(hp_spill *s, const unsigned char *data, size_t total, size_t step)
{
	size_t done = 0;
	int r = 0;

	while (done < total) {
		size_t n = MIN(step, total - done);

		r = hp_spill_write(s, data + done, n);
		if (r < 0)
			break;
		done += n;
	}
	if (r < 0) {
		/* everything before the failed write is kept, and nothing beyond it */
		assert_true(hp_spill_size(s) >= done);
		assert_true(hp_spill_size(s) <= done + MIN(step, total - done));
		assert_int_equal(hp_spill_write(s, data, 1), r); /* the stream stays stopped */
	}
	assert_int_equal(hp_spill_finish(s), 0);
	check_stream(s, data, (size_t)hp_spill_size(s));
	return r;
}

static void test_limits(void **state)
{
	const size_t n = 3 * MIB;
	unsigned char *data = make_data(11, n);
	struct hp_status *st;
	hp_spill *s, *t, *files[3];
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	hp_conn *c, *c2;

	(void)state;
	start(&d, "spill_max_bytes_per_uid = 2M\nspill_max_files = 3\nspill_max_files_per_uid = 0", CLASSES);
	c = conn(&d);
	c2 = conn(&d);
	/* the uid's byte limit, hit in the middle of a stream of 100 KiB writes */
	s = open_stream(c, 64 * KIB);
	assert_int_equal(write_until_error(s, data, n, 100 * KIB), -EDQUOT);
	assert_non_null(strstr(hp_last_error(c), "spill_max_bytes_per_uid"));
	assert_true(hp_spill_size(s) >= 2 * MIB - 64 * KIB);
	/* the same uid on another connection: only what is left */
	t = open_stream(c2, 64 * KIB);
	assert_int_equal(write_until_error(t, data, 1 * MIB, 64 * KIB), -EDQUOT);
	/* in-memory streams are not the daemon's to limit */
	round_trip(c2, 0, 512 * KIB, HP_SPILL_MEMORY);
	hp_spill_close(t);
	hp_spill_close(s);
	assert_spill_idle(c);
	/* after the close the whole limit is there again */
	round_trip(c, 64 * KIB, 2 * MIB, HP_SPILL_FILE);

	/* the machine's file limit: the 4th file is refused, the stream stays in memory */
	for (int i = 0; i < 3; i++) {
		files[i] = open_stream(c, 16 * KIB);
		assert_int_equal(hp_spill_write(files[i], data, 32 * KIB), 0);
		assert_int_equal(hp_spill_state(files[i]), HP_SPILL_FILE);
	}
	s = open_stream(c, 16 * KIB);
	assert_int_equal(hp_spill_write(s, data, 16 * KIB), 0);
	assert_int_equal(hp_spill_write(s, data + 16 * KIB, 1), -EDQUOT);
	assert_non_null(strstr(hp_last_error(c), "spill_max_files"));
	assert_int_equal(hp_spill_state(s), HP_SPILL_MEMORY);
	assert_int_equal(hp_spill_finish(s), 0);
	check_stream(s, data, 16 * KIB);
	st = status(c);
	assert_int_equal(st->spill.refusals, 3); /* two byte refusals, one file */
	assert_int_equal(st->spill.files, 3);
	hp_status_free(st);
	hp_spill_close(s);
	for (int i = 0; i < 3; i++)
		hp_spill_close(files[i]);
	assert_spill_idle(c);
	hp_disconnect(c2);
	hp_disconnect(c);
	stop(&d);

	/* the machine's byte limit, named as such */
	start(&d, "spill_max_bytes = 1M", CLASSES);
	c = conn(&d);
	s = open_stream(c, 64 * KIB);
	assert_int_equal(write_until_error(s, data, n, 1 * MIB), -EDQUOT);
	assert_non_null(strstr(hp_last_error(c), "spill_max_bytes ("));
	hp_spill_close(s);
	assert_spill_idle(c);
	hp_disconnect(c);
	stop(&d);
	free(data);
}

static void test_sigkill_returns_quota(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	struct hp_status *st;
	char spilldir[128];
	int ready[2];
	hp_conn *c;
	pid_t pid;
	char b;

	(void)state;
	start(&d, "spill_max_files_per_uid = 8\nspill_max_bytes_per_uid = 16M", CLASSES);
	snprintf(spilldir, sizeof(spilldir), "%s/spill", d.dir);
	assert_int_equal(pipe(ready), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		unsigned char *data = make_data(5, 2 * MIB);
		hp_conn *cc;
		hp_spill *s;

		if (hp_connect(d.socket, &cc) < 0)
			_exit(1);
		for (int i = 0; i < 8; i++) {
			/* 6 streams in files (2 MiB each), 2 in memory */
			if (hp_spill_open(cc, &(struct hp_spill_opts){ .threshold = 64 * KIB }, &s) < 0 ||
			    hp_spill_write(s, data, i < 6 ? 2 * MIB : 1000) < 0)
				_exit(2);
		}
		if (write(ready[1], "x", 1) != 1)
			_exit(3);
		pause();
		_exit(0);
	}
	close(ready[1]);
	assert_int_equal(read(ready[0], &b, 1), 1);
	close(ready[0]);
	c = conn(&d);
	st = status(c);
	assert_int_equal(st->spill.files, 6);
	assert_int_equal(st->spill.bytes, 12 * MIB);
	assert_int_equal(st->spill.streams_memory, 2);
	hp_status_free(st);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	/* the daemon sees the connection close; poll until it has (bounded: a liveness check) */
	for (int i = 0; i < 500; i++) {
		st = status(c);
		if (st->spill.files == 0) {
			hp_status_free(st);
			break;
		}
		hp_status_free(st);
		usleep(10000);
	}
	assert_spill_idle(c);
	assert_int_equal(dir_entries(spilldir), 0);
	/* and the uid has its whole quota again: 8 files of 2 MiB at once */
	hp_spill *again[8];

	for (int i = 0; i < 8; i++) {
		unsigned char *data = make_data(5, 2 * MIB);

		again[i] = open_stream(c, 64 * KIB);
		assert_int_equal(hp_spill_write(again[i], data, 2 * MIB), 0);
		free(data);
	}
	st = status(c);
	assert_int_equal(st->spill.bytes, 16 * MIB);
	hp_status_free(st);
	for (int i = 0; i < 8; i++)
		hp_spill_close(again[i]);
	assert_int_equal(harness_log_count(&d, "Spill: closed the 6 files"), 1);
	hp_disconnect(c);
	stop(&d);
}

static void test_full_filesystem(void **state)
{
	char mnt[128], globals[256];
	unsigned char *data = make_data(9, 4 * MIB);
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	hp_spill *s;
	hp_conn *c;

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "test_full_filesystem: needs root to mount a small tmpfs; skipped\n");
		free(data);
		skip();
	}
	snprintf(mnt, sizeof(mnt), "/tmp/hugepool-spillfs.%d", (int)getpid());
	assert_int_equal(mkdir(mnt, 0700), 0);
	if (mount("hugepool-test", mnt, "tmpfs", 0, "size=1m,mode=0700") < 0) {
		fprintf(stderr, "test_full_filesystem: cannot mount tmpfs (%s); skipped\n", strerror(errno));
		rmdir(mnt);
		free(data);
		skip();
	}
	snprintf(globals, sizeof(globals), "spill_directory = %s", mnt);
	start(&d, globals, CLASSES);
	c = conn(&d);
	s = open_stream(c, 64 * KIB);
	assert_int_equal(write_until_error(s, data, 4 * MIB, 64 * KIB), -ENOSPC);
	assert_non_null(strstr(hp_last_error(c), "No space left"));
	assert_true(hp_spill_size(s) < 1 * MIB + 64 * KIB);
	{
		/* the failed chunk's bytes were given back: charged = what the file holds */
		struct hp_status *st = status(c);

		assert_int_equal(st->spill.files, 1);
		assert_true(st->spill.bytes <= hp_spill_size(s));
		hp_status_free(st);
	}
	hp_spill_close(s);
	assert_spill_idle(c);
	/* the space is back: a stream that fits works */
	round_trip(c, 64 * KIB, 512 * KIB, HP_SPILL_FILE);
	hp_disconnect(c);
	stop(&d);
	assert_int_equal(umount2(mnt, MNT_DETACH), 0);
	rmdir(mnt);
	free(data);
}

/* A raw connection's counters page, mapped writable, as a client that lies in it. */
static struct proto_counters_page *raw_page(int fd)
{
	struct proto_spill_attach at = { 0 };
	struct proto_counters_page *page;
	struct proto_hdr h;
	void *payload = NULL;
	int pfd[1] = { -1 };

	assert_int_equal(proto_send(fd, PROTO_SPILL_ATTACH, &at, sizeof(at), NULL, 0), 0);
	assert_int_equal(proto_recv(fd, &h, &payload, pfd, 1), 0);
	assert_int_equal(h.type, PROTO_SPILL_ATTACHED);
	free(payload);
	page = mmap(NULL, sizeof(*page), PROT_READ | PROT_WRITE, MAP_SHARED, pfd[0], 0);
	assert_true(page != MAP_FAILED);
	close(pfd[0]);
	return page;
}

/* Send a request and receive its answer: the result's error, or 1 with *ret_fd for a file. */
static int raw_request(int fd, enum proto_type type, const void *req, uint32_t len, uint64_t *ret_id, int *ret_fd)
{
	struct proto_hdr h;
	void *payload = NULL;
	int fds[1] = { -1 }, r;

	assert_int_equal(proto_send(fd, type, req, len, NULL, 0), 0);
	r = proto_recv(fd, &h, &payload, fds, 1);
	if (r < 0)
		return r;
	if (h.type == PROTO_RESULT) {
		r = ((struct proto_result *)payload)->err;
	} else {
		assert_int_equal(h.type, PROTO_SPILL_CREATED);
		*ret_id = ((struct proto_spill_created *)payload)->file_id;
		*ret_fd = fds[0];
		r = 1;
	}
	free(payload);
	return r;
}

/* Status, polled until cond(st, n) holds: the daemon audits spill files once a second. */
static struct hp_status *await_spill(hp_conn *c, bool (*cond)(const struct hp_status *, uint64_t), uint64_t n)
{
	for (int i = 0; i < 3000; i++) { /* bounded only so a broken daemon cannot hang the suite */
		struct hp_status *st = status(c);

		if (cond(st, n))
			return st;
		hp_status_free(st);
		usleep(10000);
	}
	fail_msg("the daemon's spill state never reached what the test waits for");
	return NULL;
}

static bool truncated_at_least(const struct hp_status *st, uint64_t n)
{
	return st->spill.truncated >= n;
}

static bool lingering_exactly(const struct hp_status *st, uint64_t n)
{
	return st->spill.lingering == n;
}

static bool files_exactly(const struct hp_status *st, uint64_t n)
{
	return st->spill.files == n;
}

static void test_misbehaving_peer(void **state)
{
	struct proto_spill_create create = { 0 }; /* no charge at creation */
	struct proto_spill_charge charge;
	struct proto_spill_close cl;
	unsigned char *data = make_data(1, 1 * MIB);
	struct hp_status *st;
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	struct stat sb;
	uint64_t id = 0;
	int fd, file = -1;
	hp_conn *c;

	(void)state;
	start(&d, "", CLASSES);
	c = conn(&d);
	fd = raw_connect(&d);
	/* a file without a counters page is fine; write 1 MiB without asking for a charge */
	assert_int_equal(raw_request(fd, PROTO_SPILL_CREATE, &create, sizeof(create), &id, &file), 1);
	assert_int_equal(pwrite(file, data, 1 * MIB, 0), (ssize_t)(1 * MIB));
	/* the audit (once a second) cuts it to its charge: nothing */
	st = await_spill(c, truncated_at_least, 1);
	assert_int_equal(st->spill.bytes, 0);
	hp_status_free(st);
	assert_int_equal(fstat(file, &sb), 0);
	assert_int_equal(sb.st_size, 0);
	/* charges of a file that is not ours are answered, not fatal */
	charge = (struct proto_spill_charge){ .file_id = id + 1000, .total = 10 };
	assert_int_equal(raw_request(fd, PROTO_SPILL_CHARGE, &charge, sizeof(charge), NULL, NULL), -ENOENT);
	/* a charge then a cut: the daemon truncates to the cut */
	charge = (struct proto_spill_charge){ .file_id = id, .total = 1 * MIB };
	assert_int_equal(raw_request(fd, PROTO_SPILL_CHARGE, &charge, sizeof(charge), NULL, NULL), 0);
	assert_int_equal(pwrite(file, data, 1 * MIB, 0), (ssize_t)(1 * MIB));
	charge.total = 1000;
	assert_int_equal(raw_request(fd, PROTO_SPILL_CHARGE, &charge, sizeof(charge), NULL, NULL), 0);
	assert_int_equal(fstat(file, &sb), 0);
	assert_int_equal(sb.st_size, 1000);
	/* close: the daemon truncates the file even though we keep our fd (it answers first,
	 * then truncates: a status round trip after it has) */
	cl = (struct proto_spill_close){ .file_id = id };
	assert_int_equal(raw_request(fd, PROTO_SPILL_CLOSE, &cl, sizeof(cl), NULL, NULL), 0);
	hp_status_free(status(c));
	assert_int_equal(fstat(file, &sb), 0);
	assert_int_equal(sb.st_size, 0);
	assert_int_equal(raw_request(fd, PROTO_SPILL_CLOSE, &cl, sizeof(cl), NULL, NULL), -ENOENT);
	/* a second attach on a connection is refused; unknown flags close only that connection */
	{
		struct proto_spill_attach at = { 0 };
		struct proto_hdr h;
		void *payload = NULL;
		int pfd[1] = { -1 };

		munmap(raw_page(fd), sizeof(struct proto_counters_page));
		assert_int_equal(raw_request(fd, PROTO_SPILL_ATTACH, &at, sizeof(at), NULL, NULL), -EEXIST);
		create.flags = 1;
		assert_int_equal(proto_send(fd, PROTO_SPILL_CREATE, &create, sizeof(create), NULL, 0), 0);
		assert_int_equal(proto_recv(fd, &h, &payload, pfd, 1), -ECONNRESET);
	}
	close(fd);
	close(file);
	/* everyone else is served as before */
	round_trip(c, 64 * KIB, 200 * KIB, HP_SPILL_FILE);
	assert_spill_idle(c);
	free(data);
	hp_disconnect(c);
	stop(&d);
}

/* Bytes of disk the file behind fd occupies. */
static uint64_t disk_bytes(int fd)
{
	struct stat sb;

	assert_int_equal(fstat(fd, &sb), 0);
	return (uint64_t)sb.st_blocks * 512;
}

/*
 * The three ways past a spill charge of the hostile-clients audit (finding 5), each against the
 * space the file really takes on disk: blocks allocated without size, writes after the stream
 * closed, and an fd handed to another process that outlives the connection. What the daemon
 * cannot stop it must undo, and every file some process still writes to counts against its uid.
 */
static void test_quota_bypass(void **state)
{
	struct proto_spill_create create = { .charge = 1 * MIB };
	struct proto_spill_close cl;
	unsigned char *data = make_data(3, 4 * MIB);
	struct hp_status *st;
	hp_spill *streams[4];
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	uint64_t id = 0, cuts;
	int fd, file = -1, passed = -1, go[2];
	hp_conn *c;
	pid_t child;
	char b;

	(void)state;
	start(&d, "spill_max_files_per_uid = 4", CLASSES);
	c = conn(&d);
	fd = raw_connect(&d);

	/* 1. fallocate(FALLOC_FL_KEEP_SIZE): 8 MiB of blocks in a file of size 0 charged 1 MiB */
	assert_int_equal(raw_request(fd, PROTO_SPILL_CREATE, &create, sizeof(create), &id, &file), 1);
	assert_int_equal(fallocate(file, FALLOC_FL_KEEP_SIZE, 0, 8 * MIB), 0);
	assert_true(disk_bytes(file) >= 8 * MIB);
	hp_status_free(await_spill(c, truncated_at_least, 1));
	assert_true(disk_bytes(file) <= 1 * MIB + 128 * KIB);
	/* within its charge, a write stays whole */
	assert_int_equal(pwrite(file, data, 1 * MIB, 0), (ssize_t)(1 * MIB));

	/* 2. writes after SPILL_CLOSE, the fd kept: the file lingers, counted, and is kept empty */
	cl = (struct proto_spill_close){ .file_id = id };
	assert_int_equal(raw_request(fd, PROTO_SPILL_CLOSE, &cl, sizeof(cl), NULL, NULL), 0);
	st = status(c); /* the daemon answers the close, then cuts: after this round trip it has */
	assert_int_equal(st->spill.files, 1);
	assert_int_equal(st->spill.lingering, 1);
	assert_int_equal(st->spill.bytes, 0);
	cuts = st->spill.truncated;
	hp_status_free(st);
	assert_int_equal(disk_bytes(file), 0);
	assert_int_equal(pwrite(file, data, 4 * MIB, 0), (ssize_t)(4 * MIB));
	hp_status_free(await_spill(c, truncated_at_least, cuts + 1));
	assert_int_equal(disk_bytes(file), 0);

	/* 3. an fd passed to another process, which outlives the connection that had the file */
	assert_int_equal(raw_request(fd, PROTO_SPILL_CREATE, &create, sizeof(create), &id, &passed), 1);
	assert_int_equal(pipe(go), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		/* keep the fd; write 4 MiB after the connection is gone, then wait to be killed */
		close(fd);
		close(go[1]);
		if (read(go[0], &b, 1) != 1 || pwrite(passed, data, 4 * MIB, 0) != (ssize_t)(4 * MIB))
			_exit(1);
		pause();
		_exit(0);
	}
	close(go[0]);
	close(passed);
	close(fd); /* the connection goes: both its files are cut, and both linger */
	st = await_spill(c, lingering_exactly, 2);
	assert_int_equal(st->spill.files, 2);
	cuts = st->spill.truncated;
	hp_status_free(st);
	/* lingering files count against the uid: 4 files, so 2 more streams on disk, not 3 */
	for (int i = 0; i < 3; i++) {
		streams[i] = open_stream(c, 64 * KIB);
		assert_int_equal(hp_spill_write(streams[i], data, 128 * KIB), i < 2 ? 0 : -EDQUOT);
	}
	assert_int_equal(write(go[1], "x", 1), 1);
	hp_status_free(await_spill(c, truncated_at_least, cuts + 1));
	for (int i = 0; i < 3; i++)
		hp_spill_close(streams[i]);
	/* the last holders go: the kept fd here, the child there; so do the files */
	close(file);
	kill(child, SIGKILL);
	assert_int_equal(waitpid(child, NULL, 0), child);
	close(go[1]);
	st = await_spill(c, files_exactly, 0);
	assert_int_equal(st->spill.lingering, 0);
	hp_status_free(st);
	/* everyone is served as before */
	round_trip(c, 64 * KIB, 200 * KIB, HP_SPILL_FILE);
	assert_spill_idle(c);
	free(data);
	hp_disconnect(c);
	stop(&d);
}

/* The status of the daemon at socket, as a client without assertions (another uid's child). */
static int other_spill(const char *path, uint64_t *files, uint64_t *lingering, uint64_t *truncated)
{
	struct hp_status *st = NULL;
	hp_conn *c = NULL;
	int r = hp_connect(path, &c);

	if (r == 0)
		r = hp_status(c, &st);
	if (r == 0) {
		*files = st->spill.files;
		*lingering = st->spill.lingering;
		*truncated = st->spill.truncated;
		hp_status_free(st);
	}
	hp_disconnect(c);
	return r;
}

/* Poll (bounded) until the truncated count reaches n; 0 or -1. */
static int other_await_cut(const char *path, uint64_t n)
{
	uint64_t f, l, t = 0;

	for (int i = 0; i < 3000; i++) {
		if (other_spill(path, &f, &l, &t) == 0 && t >= n)
			return 0;
		usleep(10000);
	}
	return -1;
}

/*
 * The quota bypasses as another uid, against a daemon that root started: the attacker gets its
 * spill file over the protocol, allocates 8 MiB past its charge, closes the stream but keeps the
 * fd and writes 4 MiB. Exit status: 0 when the daemon cut both and counted the kept file, else
 * the step that failed.
 */
static int bypass_as_other(void *arg)
{
	const char *path = arg;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct proto_hello hello = { .name = "bypass" };
	struct proto_spill_create create = { .charge = 64 * KIB };
	struct proto_spill_close cl;
	struct proto_hdr h;
	void *payload = NULL;
	unsigned char *data = make_data(9, 4 * MIB);
	uint64_t files, lingering, cut0, t;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), file = -1;
	struct stat sb;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    proto_send(fd, PROTO_HELLO, &hello, sizeof(hello), NULL, 0) < 0 || proto_recv(fd, &h, &payload, NULL, 0) < 0)
		return 1;
	free(payload);
	if (other_spill(path, &files, &lingering, &cut0) < 0 ||
	    proto_send(fd, PROTO_SPILL_CREATE, &create, sizeof(create), NULL, 0) < 0 ||
	    proto_recv(fd, &h, &payload, &file, 1) < 0 || h.type != PROTO_SPILL_CREATED)
		return 2;
	cl.file_id = ((struct proto_spill_created *)payload)->file_id;
	free(payload);
	if (fallocate(file, FALLOC_FL_KEEP_SIZE, 0, 8 * MIB) < 0 || other_await_cut(path, cut0 + 1) < 0 ||
	    fstat(file, &sb) < 0 || (uint64_t)sb.st_blocks * 512 > 64 * KIB + 128 * KIB)
		return 3;
	if (proto_send(fd, PROTO_SPILL_CLOSE, &cl, sizeof(cl), NULL, 0) < 0 || proto_recv(fd, &h, &payload, NULL, 0) < 0)
		return 4;
	free(payload);
	if (other_spill(path, &files, &lingering, &t) < 0 || files != 1 || lingering != 1)
		return 5;
	if (pwrite(file, data, 4 * MIB, 0) != (ssize_t)(4 * MIB) || other_await_cut(path, t + 1) < 0 ||
	    fstat(file, &sb) < 0 || sb.st_blocks != 0)
		return 6;
	close(file);
	close(fd);
	free(data);
	return 0;
}

static void test_quota_bypass_other_uid(void **state)
{
	struct hp_status *st;
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	hp_conn *c;

	(void)state;
	if (!harness_two_uids())
		skip();
	start(&d, "", CLASSES);
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, bypass_as_other, d.socket), 0);
	c = conn(&d);
	st = await_spill(c, files_exactly, 0); /* the attacker is gone, and so is its file */
	assert_int_equal(st->spill.lingering, 0);
	assert_true(st->spill.truncated >= 2);
	hp_status_free(st);
	hp_disconnect(c);
	stop(&d);
}

/* A spill stream of sorted 16-byte rows as an hp_merge input. */
struct row {
	uint64_t key, val;
};

static long spill_next(void *ctx, const void **ret_rows)
{
	ssize_t n = hp_spill_next(ctx, ret_rows, sizeof(struct row));

	return n < 0 ? (long)n : (long)(n / (ssize_t)sizeof(struct row));
}

static int row_cmp(const void *a, const void *b, void *ud)
{
	const struct row *x = a, *y = b;

	(void)ud;
	return x->key < y->key ? -1 : x->key > y->key;
}

static void row_sum(void *acc, const void *row, void *ud)
{
	(void)ud;
	((struct row *)acc)->val += ((const struct row *)row)->val;
}

static void test_merge_of_streams(void **state)
{
	enum { K = 8 };
	struct hp_merge_input in[K];
	struct hp_merge_opts o = { .row_size = sizeof(struct row), .cmp = row_cmp, .combine = row_sum };
	hp_spill *s[K];
	uint64_t sum = 0, want = 0, last = 0, rows = 0;
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	hp_merge *m;
	hp_conn *c;
	const void *out;
	long n;

	(void)state;
	start(&d, "", CLASSES);
	c = conn(&d);
	for (int i = 0; i < K; i++) {
		/* streams 0-3 stay in memory, 4-7 go to files */
		uint64_t nrows = i < 4 ? 100 + 50 * (uint64_t)i : 20000 + 1000 * (uint64_t)i;

		s[i] = open_stream(c, 64 * KIB);
		for (uint64_t r = 0; r < nrows; r++) {
			struct row w = { .key = r * 3 + (uint64_t)i % 3, .val = r + 1 };

			assert_int_equal(hp_spill_write(s[i], &w, sizeof(w)), 0);
			want += w.val;
		}
		assert_int_equal(hp_spill_state(s[i]), i < 4 ? HP_SPILL_MEMORY : HP_SPILL_FILE);
		assert_int_equal(hp_spill_finish(s[i]), 0);
		in[i] = (struct hp_merge_input){ .next = spill_next, .ctx = s[i] };
	}
	assert_int_equal(hp_merge_open(in, K, &o, &m), 0);
	while ((n = hp_merge_next(m, &out)) > 0) {
		const struct row *r = out;

		for (long i = 0; i < n; i++) {
			assert_true(rows == 0 || r[i].key > last); /* sorted, equal keys combined */
			last = r[i].key;
			sum += r[i].val;
			rows++;
		}
	}
	assert_int_equal(n, 0);
	assert_int_equal(sum, want);
	hp_merge_close(m);
	for (int i = 0; i < K; i++)
		hp_spill_close(s[i]);
	hp_disconnect(c);
	stop(&d);
}

static void test_daemon_dies(void **state)
{
	unsigned char *data = make_data(4, 1 * MIB);
	hp_spill *mem, *file, *late;
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	hp_conn *c;

	(void)state;
	start(&d, "", CLASSES);
	c = conn(&d);
	mem = open_stream(c, 64 * KIB);
	file = open_stream(c, 64 * KIB);
	assert_int_equal(hp_spill_write(mem, data, 10 * KIB), 0);
	assert_int_equal(hp_spill_write(file, data, 1 * MIB), 0);
	running = NULL;
	assert_int_equal(harness_kill(&d), 128 + SIGKILL);
	/* what a stream holds stays readable; what needs the daemon fails cleanly */
	assert_int_equal(hp_spill_write(mem, data + 10 * KIB, 100 * KIB), -ECONNRESET);
	assert_int_equal(hp_spill_write(file, data, 64 * KIB), -ECONNRESET); /* no charge without it */
	assert_int_equal(hp_spill_finish(mem), 0);
	check_stream(mem, data, 10 * KIB);
	assert_int_equal(hp_spill_finish(file), 0);
	check_stream(file, data, 1 * MIB);
	assert_int_equal(hp_spill_open(c, NULL, &late), 0); /* in memory: needs no daemon */
	hp_spill_close(late);
	hp_spill_close(mem);
	hp_spill_close(file);
	hp_disconnect(c);
	free(data);
	harness_cleanup(&d);
}

static void test_bad_arguments(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	const void *v;
	hp_spill *s;
	hp_conn *c;
	char b[4];

	(void)state;
	start(&d, "", CLASSES);
	c = conn(&d);
	assert_int_equal(hp_spill_open(NULL, NULL, &s), -EINVAL);
	assert_int_equal(hp_spill_open(c, NULL, NULL), -EINVAL);
	s = open_stream(c, 0);
	assert_int_equal(hp_spill_read(s, b, 1), -EINVAL); /* not finished */
	assert_int_equal(hp_spill_rewind(s), -EINVAL);
	assert_int_equal(hp_spill_write(s, NULL, 1), -EINVAL);
	assert_int_equal(hp_spill_write(s, "abcde", 5), 0);
	assert_int_equal(hp_spill_finish(s), 0);
	assert_int_equal(hp_spill_next(s, &v, 0), -EINVAL);
	assert_int_equal(hp_spill_next(s, &v, 64 * KIB + 1), -EINVAL);
	assert_int_equal(hp_spill_next(s, &v, 2), 4);
	assert_int_equal(hp_spill_next(s, &v, 2), -EBADMSG); /* one byte left */
	assert_int_equal(hp_spill_read(s, b, 4), 1);
	assert_int_equal(b[0], 'e');
	assert_int_equal(hp_spill_read(s, b, 4), 0);
	hp_spill_close(s);
	hp_spill_close(NULL);
	assert_int_equal(hp_spill_size(NULL), 0);
	hp_disconnect(c);
	stop(&d);
}

/* --- second audit, finding 6: the totals show no other uid's spill activity --------------- */

/* As the other uid: its status's spill totals; 0 when they show nothing of root's streams. */
static int totals_main(void *arg)
{
	const char *socket = arg;
	struct hp_status *st = NULL;
	hp_conn *c;
	int r;

	if (hp_connect(socket, &c) < 0 || hp_status(c, &st) < 0)
		return 20;
	/* nor root's spill account, nor that it sees but part */
	r = st->spill.streams_memory == 0 && st->spill.bytes_memory == 0 && st->spill.files == 0 &&
			    st->spill.bytes == 0 && st->spill.files_created == 0 && st->nspill_uids == 0 &&
			    !st->server.sees_all
		    ? 0
		    : 13;
	if (r)
		fprintf(stderr, "the other uid sees %" PRIu64 " streams, %" PRIu64 " bytes in memory, %" PRIu64
				" files\n",
			st->spill.streams_memory, st->spill.bytes_memory, st->spill.files);
	hp_status_free(st);
	hp_disconnect(c);
	return r;
}

/*
 * Another uid's status counted root's in-memory streams in its spill totals (they sum every
 * connection's page), although root's client record was hidden from it. Now a non-administrator
 * sees its own uid's figures only. And two clients that each write half of 2^64 into their page
 * no longer wrap the administrator's total to a small number: it saturates.
 */
static void test_totals_hide_other_uids(void **state)
{
	static uint8_t chunk[4096];
	struct hp_spill_opts o = { .threshold = 1 << 20 }, ofile = { .threshold = HP_SPILL_ALWAYS_FILE };
	struct proto_counters_page *p1, *p2;
	struct hp_status *st;
	hp_spill *sp[4];
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	hp_conn *c;
	int f1, f2;

	(void)state;
	if (!harness_two_uids())
		skip();
	start(&d, "", CLASSES);
	c = conn(&d);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(hp_spill_open(c, &o, &sp[i]), 0);
		assert_int_equal(hp_spill_write(sp[i], chunk, sizeof(chunk)), 0);
	}
	/* and a file: root's spill account */
	assert_int_equal(hp_spill_open(c, &ofile, &sp[3]), 0);
	assert_int_equal(hp_spill_write(sp[3], chunk, sizeof(chunk)), 0);
	st = status(c);
	assert_int_equal(st->spill.streams_memory, 3);
	assert_int_equal(st->nspill_uids, 1);
	hp_status_free(st);
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, totals_main, d.socket), 0);
	for (int i = 0; i < 4; i++)
		hp_spill_close(sp[i]);
	f1 = raw_connect(&d);
	f2 = raw_connect(&d);
	p1 = raw_page(f1);
	p2 = raw_page(f2);
	p1->streams_memory = p2->streams_memory = 1ull << 63;
	p1->bytes_memory = p2->bytes_memory = (1ull << 63) + 5;
	st = status(c);
	assert_true(st->spill.streams_memory == UINT64_MAX);
	assert_true(st->spill.bytes_memory == UINT64_MAX);
	hp_status_free(st);
	munmap(p1, sizeof(*p1));
	munmap(p2, sizeof(*p2));
	close(f1);
	close(f2);
	hp_disconnect(c);
	stop(&d);
}

static void test_boot_errors(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */

	(void)state;
	/* a spill directory the daemon cannot create: exit 6, said in the log */
	start_refused(&d, "spill_directory = /proc/hugepool-no", CLASSES, 6,
		      "Spill streams unavailable: cannot use spill_directory '/proc/hugepool-no': cannot create");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_threshold, teardown),
		cmocka_unit_test_teardown(test_single_bytes, teardown),
		cmocka_unit_test_teardown(test_large_write_and_status, teardown),
		cmocka_unit_test_teardown(test_limits, teardown),
		cmocka_unit_test_teardown(test_sigkill_returns_quota, teardown),
		cmocka_unit_test_teardown(test_full_filesystem, teardown),
		cmocka_unit_test_teardown(test_misbehaving_peer, teardown),
		cmocka_unit_test_teardown(test_quota_bypass, teardown),
		cmocka_unit_test_teardown(test_quota_bypass_other_uid, teardown),
		cmocka_unit_test_teardown(test_merge_of_streams, teardown),
		cmocka_unit_test_teardown(test_daemon_dies, teardown),
		cmocka_unit_test_teardown(test_bad_arguments, teardown),
		cmocka_unit_test_teardown(test_boot_errors, teardown),
		cmocka_unit_test_teardown(test_totals_hide_other_uids, teardown),
	};

	/* HP_TEST_FILTER=test_quota* runs some tests only (for debugging) */
	if (getenv("HP_TEST_FILTER"))
		cmocka_set_test_filter(getenv("HP_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
