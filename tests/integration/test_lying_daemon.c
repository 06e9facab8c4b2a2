/* SPDX-License-Identifier: MIT */
/*
 * test_lying_daemon.c - libhugepool and hugepoolctl against a daemon that lies (finding 5 of
 * the second hostile-clients audit): whatever answers on the socket a client is pointed at
 * ($HUGEPOOL_SOCKET, -s) may be another user's program.
 *
 * The liar is a thread of this test on a private socket. It says hello as hugepoold does, then
 * answers each request with the case's lie: fds of the wrong type or shorter than announced,
 * counts and error codes out of range, strings full of terminal escapes. Each case first shows
 * that the liar's honest answer passes (so the checks refuse the lie, not the daemon), then that
 * the lie gets an error that says what was wrong: the library returns -EPROTO, leaks no fd and
 * no mapping, and never crashes its caller; hugepoolctl prints nothing of the daemon's raw and
 * exits non-zero with a message, never by a signal.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fds.h"
#include "harness.h"
#include "hugepool.h"
#include "jformat.h"
#include "jring.h"
#include "proto.h"
#include "util.h"

#define MIB (1024ull * 1024)

/* Terminal escapes that set the title, clear the screen and forge a line; invalid UTF-8, a C1 CSI. */
#define EVIL "\x1b]0;pwned\x07\x1b[2J\rhugepool OK\n\xff\xc2\x9b"
#define EVIL_ESCAPED "\\x1b]0;pwned\\x07\\x1b[2J\\rhugepool OK\\n\\xff\\xc2\\x9b"
/* The same as a label value of the exposition formats: EVIL_ESCAPED with its backslashes escaped. */
#define EVIL_LABEL "\\\\x1b]0;pwned\\\\x07\\\\x1b[2J\\\\rhugepool OK\\\\n\\\\xff\\\\xc2\\\\x9b"

extern char **environ;

/* --- the liar ------------------------------------------------------------------------------ */

/* Answer one request (h, its payload) on fd, with the lie of the case (or the truth). */
typedef void (*answer_fn)(int fd, const struct proto_hdr *h, const void *req);

static struct {
	char dir[64], socket[96];
	int listen_fd;
	int conn_fd; /* the connection being served, or -1 */
	pthread_mutex_t lock; /* conn_fd against liar_stop */
	pthread_t thread;
	bool running;
	answer_fn answer;
	/* set by the case, read by the liar's thread (atomics: what orders them is the socket) */
	_Atomic int lie; /* which lie of the case: 0 = the honest answer */
	_Atomic int32_t hello_err; /* answer the hello with this error instead of WELCOME */
	_Atomic int cut_fd; /* the last big segment sent (lie 5 of answer_reader), for the case to cut */
} liar;

static void reply(int fd, enum proto_type type, const void *payload, uint32_t len, int *fds, unsigned nfds)
{
	/* the client may have hung up already (it refused an earlier answer) */
	(void)proto_send(fd, type, payload, len, fds, nfds);
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
}

static void reply_result(int fd, int32_t err, const char *text)
{
	struct {
		struct proto_result r;
		char text[PROTO_TEXT_MAX];
	} m = { .r = { .err = err, .text_len = (uint32_t)strlen(text) } };

	memcpy(m.text, text, m.r.text_len);
	reply(fd, PROTO_RESULT, &m, (uint32_t)(sizeof(m.r) + m.r.text_len), NULL, 0);
}

static bool read_exact(int fd, void *buf, size_t len)
{
	for (size_t got = 0; got < len;) {
		ssize_t n = read(fd, (char *)buf + got, len - got);

		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return true;
}

static void serve(int fd)
{
	union proto_request req;
	struct proto_hdr h;

	while (read_exact(fd, &h, sizeof(h)) && h.magic == PROTO_MAGIC && h.len <= sizeof(req) &&
	       read_exact(fd, &req, h.len)) {
		if (h.type == PROTO_HELLO && liar.hello_err) {
			reply_result(fd, liar.hello_err, EVIL);
			return;
		}
		if (h.type == PROTO_HELLO) {
			struct proto_welcome w = { .version = PROTO_VERSION, .nclasses = 1, .page_size = 4096 };

			proto_set_name(w.daemon_version, sizeof(w.daemon_version), "0.1.0");
			reply(fd, PROTO_WELCOME, &w, sizeof(w), NULL, 0);
		} else if (liar.answer) {
			liar.answer(fd, &h, &req);
		} else {
			reply_result(fd, -EINVAL, "the liar has no answer to this");
		}
	}
}

static void *liar_main(void *arg)
{
	int fd;

	(void)arg;
	/* one connection at a time: every client here is sequential */
	while ((fd = accept4(liar.listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		pthread_mutex_lock(&liar.lock);
		liar.conn_fd = fd;
		pthread_mutex_unlock(&liar.lock);
		serve(fd);
		pthread_mutex_lock(&liar.lock);
		liar.conn_fd = -1;
		close(fd);
		pthread_mutex_unlock(&liar.lock);
	}
	return NULL;
}

static void liar_start(answer_fn answer, int lie)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	liar.answer = answer;
	liar.lie = lie;
	liar.hello_err = 0;
	if (liar.running)
		return; /* the same socket serves the next lie of the case */
	snprintf(liar.dir, sizeof(liar.dir), "/tmp/hp-liar-XXXXXX");
	assert_non_null(mkdtemp(liar.dir));
	snprintf(liar.socket, sizeof(liar.socket), "%s/sock", liar.dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", liar.socket);
	liar.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(liar.listen_fd >= 0);
	assert_int_equal(bind(liar.listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(liar.listen_fd, 8), 0);
	liar.conn_fd = -1;
	pthread_mutex_init(&liar.lock, NULL);
	assert_int_equal(pthread_create(&liar.thread, NULL, liar_main, NULL), 0);
	liar.running = true;
}

static int liar_stop(void **state)
{
	(void)state;
	if (!liar.running)
		return 0;
	/* accept returns, and so does a read on a connection a failed case left open: the thread ends */
	shutdown(liar.listen_fd, SHUT_RDWR);
	pthread_mutex_lock(&liar.lock);
	if (liar.conn_fd >= 0)
		shutdown(liar.conn_fd, SHUT_RDWR);
	pthread_mutex_unlock(&liar.lock);
	pthread_join(liar.thread, NULL);
	close(liar.listen_fd);
	unlink(liar.socket);
	rmdir(liar.dir);
	liar.running = false;
	return 0;
}

static hp_conn *liar_conn(void)
{
	hp_conn *c = NULL;

	assert_int_equal(hp_connect(liar.socket, &c), 0);
	return c;
}

/* --- what a lie may not leave behind ------------------------------------------------------- */

/* A case's end: its connection closed, the liar gone, and no fd left that came with a lie. */
static void liar_end(hp_conn *c, unsigned fds)
{
	hp_disconnect(c);
	liar_stop(NULL);
	assert_int_equal(count_fds(), fds);
}

/* Mappings of the liar's memfds this process still holds. */
static int liar_mappings(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int n = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "memfd:liar") != NULL;
	fclose(f);
	return n;
}

/*
 * The call on c failed as a lie must: -EPROTO, hp_last_error saying why, nothing kept of what
 * came with the lie (the liar's memfds mapped: only the maps the connection held before).
 */
static void assert_refused_keeping(hp_conn *c, int r, const char *why, int maps)
{
	if (r != -EPROTO || !strstr(hp_last_error(c), why))
		fprintf(stderr, "lie %d: returned %d (%s), hp_last_error '%s', expected '%s'\n", liar.lie, r,
			hp_strerror(r), hp_last_error(c), why);
	assert_int_equal(r, -EPROTO);
	assert_non_null(strstr(hp_last_error(c), why));
	assert_int_equal(liar_mappings(), maps);
}

static void assert_refused(hp_conn *c, int r, const char *why)
{
	assert_refused_keeping(c, r, why, 0);
}

/* --- fds to lie with ---------------------------------------------------------------------- */

static int memfd(uint64_t size, bool sealed)
{
	int fd = memfd_create("liar", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	if (sealed)
		assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
	return fd;
}

/* The read end of a pipe: no file, no size, not mappable. */
static int pipe_fd(void)
{
	int p[2];

	assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	close(p[1]);
	return p[0];
}

/* A file in the liar's directory, size bytes, opened with flags. */
static int file_fd(uint64_t size, int flags)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/file", liar.dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	close(fd);
	fd = open(path, flags | O_CLOEXEC);
	assert_true(fd >= 0);
	unlink(path);
	return fd;
}

/* --- buffers ------------------------------------------------------------------------------- */

#define BUF_SIZE (2 * MIB)

/* One buffer of BUF_SIZE, the lie in its fd. */
static void answer_buffer(int fd, const struct proto_hdr *h, const void *req)
{
	struct {
		struct proto_grant g;
		struct proto_grant_entry e;
	} m = { { .total = 1, .n = 1 }, { .lease_id = 7, .size = BUF_SIZE } };
	int buf;

	if (h->type != PROTO_ACQUIRE) {
		reply_result(fd, 0, ""); /* the release of what was refused */
		return;
	}
	(void)req;
	switch ((int)liar.lie) {
	case 0:
		buf = memfd(BUF_SIZE, true);
		break;
	case 1: /* shorter than the grant says: the first touch past its end is SIGBUS */
		buf = memfd(4096, true);
		break;
	case 2: /* the right size, not sealed: the daemon can cut it under the client */
		buf = memfd(BUF_SIZE, false);
		break;
	case 3: /* no memory at all */
		buf = pipe_fd();
		m.e.size = 0;
		break;
	default: /* a regular file of the right size: not a memfd */
		buf = file_fd(BUF_SIZE, O_RDWR);
		break;
	}
	reply(fd, PROTO_GRANT, &m, sizeof(m), &buf, 1);
}

static void test_buffer_lies(void **state)
{
	static const char *const why[] = {
		NULL,
		"the daemon sent a buffer of 4096 bytes where it announced 2097152",
		"the daemon sent a buffer that is not a memfd sealed against shrinking",
		"the daemon sent a buffer of 0 bytes",
		"the daemon sent a buffer that is not a memfd sealed against shrinking",
	};
	unsigned fds = count_fds();
	struct hp_buffer b;
	hp_conn *c;

	(void)state;
	liar_start(answer_buffer, 0);
	c = liar_conn();
	assert_int_equal(hp_acquire(c, "one", 1, 0, &b), 0);
	memset(b.addr, 0x5a, b.size);
	assert_int_equal(hp_release(c, &b, 1), 0);
	for (int lie = 1; lie < (int)ARRAY_SIZE(why); lie++) {
		liar.lie = lie;
		assert_refused(c, hp_acquire(c, "one", 1, 0, &b), why[lie]);
	}
	liar_end(c, fds);
}

/* --- journal writers: the ring, the doorbell, the wake page -------------------------------- */

#define RING_SIZE JRING_MIN_SIZE

/* A ring memfd of size bytes whose header says ring_size data bytes and tail. */
static int ring_fd(uint64_t size, bool sealed, uint64_t ring_size, uint64_t tail, int32_t error)
{
	int fd = memfd(size, false);
	struct jring_hdr *h = mmap(NULL, JRING_HDR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	assert_true(h != MAP_FAILED);
	jring_init(h, ring_size, JFORMAT_RECORD_MAX);
	h->tail = tail;
	h->error = error;
	munmap(h, JRING_HDR_SIZE);
	if (sealed)
		assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
	return fd;
}

static void answer_writer(int fd, const struct proto_hdr *h, const void *req)
{
	struct proto_journal_opened o = { .writer_id = 1, .ring_size = RING_SIZE };
	uint64_t full = JRING_HDR_SIZE + RING_SIZE;
	int fds[3];

	(void)req;
	if (h->type != PROTO_JOURNAL_OPEN) {
		reply_result(fd, 0, ""); /* the close */
		return;
	}
	fds[0] = liar.lie == 1 ? ring_fd(JRING_HDR_SIZE + 4096, true, RING_SIZE, 0, 0)
		 : liar.lie == 2 ? ring_fd(full, false, RING_SIZE, 0, 0)
		 : liar.lie == 6 ? ring_fd(full, true, RING_SIZE, RING_SIZE - 8, 0)
		 : liar.lie == 8 ? ring_fd(full, true, 2 * RING_SIZE, 0, 0)
		 : liar.lie == 9 ? ring_fd(full, true, RING_SIZE, 0, INT32_MIN)
				 : ring_fd(full, true, RING_SIZE, 0, 0);
	fds[1] = liar.lie == 3 ? pipe_fd() : eventfd(0, EFD_CLOEXEC | (liar.lie == 4 ? 0 : EFD_NONBLOCK));
	fds[2] = memfd(liar.lie == 5 ? 0 : JRING_WAKE_SIZE, true);
	if (liar.lie == 7)
		o.ring_size = RING_SIZE + 4096;
	reply(fd, PROTO_JOURNAL_OPENED, &o, sizeof(o), fds, 3);
}

static void test_writer_lies(void **state)
{
	static const char *const why[] = {
		NULL,
		"the daemon sent a journal ring of 8192 bytes where it announced 69632",
		"the daemon sent a journal ring that is not a memfd sealed against shrinking",
		"the daemon sent a journal doorbell that is not a non-blocking eventfd",
		"the daemon sent a journal doorbell that is not a non-blocking eventfd",
		"the daemon sent a journal wake page of 0 bytes where it announced 4096",
		"the daemon sent a journal ring with a tail that is not an entry's start",
		"the daemon announced a journal ring of 69632 bytes",
		"the daemon sent a journal ring with a header that is not its own",
	};
	unsigned fds = count_fds();
	uint64_t ticket;
	hp_journal *j;
	hp_conn *c;

	(void)state;
	liar_start(answer_writer, 0);
	c = liar_conn();
	assert_int_equal(hp_journal_open(c, "j", &j), 0);
	assert_int_equal(hp_journal_append(j, "x", 1, &ticket), 0);
	hp_journal_close(j);
	for (int lie = 1; lie < (int)ARRAY_SIZE(why); lie++) {
		liar.lie = lie;
		assert_refused(c, hp_journal_open(c, "j", &j), why[lie]);
	}
	/* an error in the ring that is no errno: the append's error is a protocol error, not INT_MIN */
	liar.lie = 9;
	assert_int_equal(hp_journal_open(c, "j", &j), 0);
	assert_int_equal(hp_journal_append(j, "x", 1, &ticket), -EPROTO);
	hp_journal_close(j);
	liar_end(c, fds);
}

/* --- journal readers: the segments ---------------------------------------------------------- */

#define SEG_SIZE (64 * 1024)
#define SEG_RECORDS 3

/* A big segment: full of records of BIG_LEN bytes, many more than a pipe holds once printed. */
#define BIG_SIZE (1024 * 1024)
#define BIG_LEN 200
#define BIG_RECORDS ((BIG_SIZE - JFORMAT_BLOCK) / jformat_rec_size(BIG_LEN))

/* A segment of journal "j", seg_size bytes, with records 1..n of len bytes ("recordrecord..."), cut to size bytes. */
static int segment_fd(uint64_t seg_size, uint64_t n, uint32_t len, uint64_t size)
{
	uint8_t *seg = calloc(1, seg_size);
	char payload[BIG_LEN];
	struct jformat_seg_hdr h;
	uint64_t off = JFORMAT_BLOCK;
	int fd = file_fd(0, O_RDWR);

	assert_non_null(seg);
	assert_true(len <= sizeof(payload));
	for (uint32_t i = 0; i < len; i++)
		payload[i] = "record"[i % 6];
	jformat_seg_hdr_init(&h, "j", 1, 1, seg_size, 0, JFORMAT_SEG_ORDERED);
	memcpy(seg, &h, sizeof(h));
	for (uint64_t lsn = 1; lsn <= n; lsn++) {
		jformat_rec_write(seg + off, lsn, 1, JREC_DATA, payload, len);
		off += jformat_rec_size(len);
	}
	assert_true(off <= seg_size);
	assert_int_equal(pwrite(fd, seg, size, 0), (ssize_t)size);
	free(seg);
	return fd;
}

static void answer_reader(int fd, const struct proto_hdr *h, const void *req)
{
	struct {
		struct proto_journal_segments s;
		struct proto_journal_segment e;
	} m = { { .n = 1, .durable_lsn = SEG_RECORDS }, { .generation = 1, .first_lsn = 1, .size = SEG_SIZE } };
	int seg;

	(void)req;
	if (h->type != PROTO_JOURNAL_READ) {
		reply_result(fd, -EINVAL, "not a read");
		return;
	}
	switch ((int)liar.lie) {
	case 1: /* the header only: the first record lies past the end of the file */
		seg = segment_fd(SEG_SIZE, SEG_RECORDS, 6, JFORMAT_BLOCK);
		break;
	case 2:
		seg = pipe_fd();
		break;
	case 3:
		seg = segment_fd(SEG_SIZE, SEG_RECORDS, 6, SEG_SIZE);
		m.e.size = 100;
		break;
	case 4: /* two entries announced, one sent */
		seg = segment_fd(SEG_SIZE, SEG_RECORDS, 6, SEG_SIZE);
		m.s.n = 2;
		break;
	case 5: /* the truth, in a big segment the case cuts later through liar.cut_fd */
		seg = segment_fd(BIG_SIZE, BIG_RECORDS, BIG_LEN, BIG_SIZE);
		m.s.durable_lsn = BIG_RECORDS;
		m.e.size = BIG_SIZE;
		liar.cut_fd = dup(seg);
		break;
	default:
		seg = segment_fd(SEG_SIZE, SEG_RECORDS, 6, SEG_SIZE);
		break;
	}
	reply(fd, PROTO_JOURNAL_SEGMENTS, &m, sizeof(m), &seg, 1);
}

static void test_reader_lies(void **state)
{
	static const char *const why[] = {
		NULL,
		"the daemon sent a journal segment of 4096 bytes where it announced 65536",
		"the daemon sent a journal segment that is not a regular file",
		"the daemon announced a journal segment of 100 bytes",
		"malformed journal segments from the daemon",
	};
	unsigned fds = count_fds();
	hp_journal_reader *r;
	const void *data;
	uint64_t lsn;
	size_t len;
	hp_conn *c;

	(void)state;
	liar_start(answer_reader, 0);
	c = liar_conn();
	assert_int_equal(hp_journal_reader_open(c, "j", 1, &r), 0);
	for (uint64_t want = 1; want <= SEG_RECORDS; want++) {
		assert_int_equal(hp_journal_reader_next(r, &lsn, &data, &len), 1);
		assert_int_equal(lsn, want);
		assert_memory_equal(data, "record", 6);
	}
	assert_int_equal(hp_journal_reader_next(r, &lsn, &data, &len), 0);
	hp_journal_reader_close(r);
	for (int lie = 1; lie < (int)ARRAY_SIZE(why); lie++) {
		liar.lie = lie;
		r = NULL;
		assert_refused(c, hp_journal_reader_open(c, "j", 1, &r), why[lie]);
		assert_null(r);
	}
	liar_end(c, fds);
}

/* --- spill streams: the counters page and the files ---------------------------------------- */

static void answer_spill(int fd, const struct proto_hdr *h, const void *req)
{
	(void)req;
	if (h->type == PROTO_SPILL_ATTACH) {
		struct proto_spill_attached a = { .threshold = 4096, .page_size = 4096 };
		int page = memfd(liar.lie == 1 ? 0 : 4096, liar.lie != 2);

		if (liar.lie == 3)
			a.page_size = 1ull << 40;
		reply(fd, PROTO_SPILL_ATTACHED, &a, sizeof(a), &page, 1);
	} else if (h->type == PROTO_SPILL_CREATE) {
		struct proto_spill_created cr = { .file_id = 1 };
		int file = liar.lie == 4 ? pipe_fd()
			   : liar.lie == 5 ? file_fd(0, O_RDONLY)
			   : liar.lie == 6 ? file_fd(0, O_RDWR | O_APPEND)
					   : file_fd(0, O_RDWR);

		reply(fd, PROTO_SPILL_CREATED, &cr, sizeof(cr), &file, 1);
	} else {
		reply_result(fd, 0, ""); /* charges and closes */
	}
}

static void test_spill_lies(void **state)
{
	static const char *const why[] = {
		NULL,
		"the daemon sent a counters page of 0 bytes where it announced 4096",
		"the daemon sent a counters page that is not a memfd sealed against shrinking",
		"the daemon sent a counters page of 4096 bytes where it announced 1099511627776",
		"the daemon sent a spill file that is not a regular file",
		"the daemon sent a spill file that is not open read-write",
		"the daemon sent a spill file that is not open read-write",
	};
	char in[3 * 4096], out[sizeof(in)];
	unsigned fds = count_fds();
	hp_spill *s;
	hp_conn *c;

	(void)state;
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (char)(i * 7);
	liar_start(answer_spill, 0);
	c = liar_conn();
	assert_int_equal(hp_spill_open(c, NULL, &s), 0);
	assert_int_equal(hp_spill_write(s, in, sizeof(in)), 0);
	assert_int_equal(hp_spill_state(s), HP_SPILL_FILE);
	assert_int_equal(hp_spill_finish(s), 0);
	assert_int_equal(hp_spill_read(s, out, sizeof(out)), (ssize_t)sizeof(out));
	assert_memory_equal(in, out, sizeof(in));
	hp_spill_close(s);
	hp_disconnect(c);
	for (int lie = 1; lie < (int)ARRAY_SIZE(why); lie++) {
		liar.lie = lie;
		c = liar_conn(); /* the page comes once per connection */
		if (lie <= 3) {
			assert_refused(c, hp_spill_open(c, NULL, &s), why[lie]);
		} else {
			assert_int_equal(hp_spill_open(c, NULL, &s), 0);
			/* the connection's page stays mapped, as it should */
			assert_refused_keeping(c, hp_spill_write(s, in, sizeof(in)), why[lie], 1);
			hp_spill_close(s);
		}
		hp_disconnect(c);
	}
	liar_end(NULL, fds);
}

/* --- status replies and error codes ---------------------------------------------------------- */

/*
 * A whole status reply: one class, client, lease, two journals, the spill and start sections, and
 * version 6's server section with one spill_uid record, and the journals' paths, and version 7's
 * pages of the class, and version 8's configuration of the journals.
 */
struct status_reply {
	uint8_t bytes[sizeof(struct proto_status) + sizeof(struct proto_status_class) +
		      sizeof(struct proto_status_client) + sizeof(struct proto_status_lease) +
		      2 * sizeof(struct proto_status_journal) + sizeof(struct proto_status_spill) +
		      sizeof(struct proto_status_start) + 2 * sizeof(struct proto_status_batches) +
		      sizeof(struct proto_status_heaps) + sizeof(struct proto_status_server) +
		      sizeof(struct proto_status_acquire) + 2 * sizeof(struct proto_status_durability) +
		      sizeof(struct proto_status_spill_uid) + 2 * sizeof(struct proto_status_jpath) +
		      sizeof(struct proto_status_pages) + 2 * sizeof(struct proto_status_jconfig)];
	size_t len;
	struct proto_status *s;
	struct proto_status_class *cls;
	struct proto_status_client *client;
	struct proto_status_lease *lease;
	struct proto_status_journal *journal; /* two: "j" and another */
	struct proto_status_spill *spill;
	struct proto_status_server *server;
	struct proto_status_jpath *jpath; /* two, as the journals */
	struct proto_status_pages *pages;
	struct proto_status_jconfig *jconfig; /* two, as the journals */
};

static void *status_put(struct status_reply *m, size_t size)
{
	void *p = m->bytes + m->len;

	m->len += size;
	assert_true(m->len <= sizeof(m->bytes));
	return p;
}

/* Every string the daemon sends is set to text (cut to its field, NUL-ended); journal 0 is "j". */
static void status_build(struct status_reply *m, const char *text)
{
	memset(m, 0, sizeof(*m));
	m->s = status_put(m, sizeof(*m->s));
	m->cls = status_put(m, sizeof(*m->cls));
	m->client = status_put(m, sizeof(*m->client));
	m->lease = status_put(m, sizeof(*m->lease));
	m->journal = status_put(m, 2 * sizeof(*m->journal));
	m->spill = status_put(m, sizeof(*m->spill));
	status_put(m, sizeof(struct proto_status_start) + 2 * sizeof(struct proto_status_batches) +
			      sizeof(struct proto_status_heaps));
	m->server = status_put(m, sizeof(*m->server));
	status_put(m, sizeof(struct proto_status_acquire) + 2 * sizeof(struct proto_status_durability) +
			      sizeof(struct proto_status_spill_uid));
	m->server->nuids = 1;
	m->jpath = status_put(m, 2 * sizeof(*m->jpath));
	m->pages = status_put(m, sizeof(*m->pages));
	m->jconfig = status_put(m, 2 * sizeof(*m->jconfig));
	*m->s = (struct proto_status){ .nclasses = 1, .nclients = 1, .nleases = 1, .njournals = 2, .nspill = 1,
				       .pool_flags = PROTO_POOL_FALLBACK, .page_size = 4096, .pool_bytes = 2 * MIB,
				       .pid = 1 };
	proto_set_name(m->s->daemon_version, sizeof(m->s->daemon_version), text);
	proto_set_name(m->s->fallback_reason, sizeof(m->s->fallback_reason), text);
	proto_set_name(m->cls->name, sizeof(m->cls->name), text);
	m->cls->size = 2 * MIB;
	m->cls->total = 1;
	*m->pages = (struct proto_status_pages){ .page_size = 4096, .want_page_size = 2 * MIB, .fallback = 7 };
	proto_set_name(m->pages->fallback_reason, sizeof(m->pages->fallback_reason), text);
	proto_set_name(m->client->name, sizeof(m->client->name), text);
	m->client->pid = 1;
	m->client->spill_files = 1;
	m->lease->class_index = 0;
	for (int i = 0; i < 2; i++) {
		proto_set_name(m->journal[i].name, sizeof(m->journal[i].name), i == 0 ? "j" : text);
		proto_set_name(m->journal[i].backend, sizeof(m->journal[i].backend), text);
		proto_set_name(m->journal[i].note, sizeof(m->journal[i].note), text);
		proto_set_name(m->journal[i].recovery, sizeof(m->journal[i].recovery), text);
		m->journal[i].durable_lsn = SEG_RECORDS;
		m->journal[i].next_lsn = SEG_RECORDS + 1;
		proto_set_name(m->jpath[i].path, sizeof(m->jpath[i].path), text);
		proto_set_name(m->jpath[i].chosen, sizeof(m->jpath[i].chosen), text);
		proto_set_name(m->jpath[i].why, sizeof(m->jpath[i].why), text);
		/* journal 1 recycles; a reserved word that is not 0 is not read */
		m->jconfig[i] = (struct proto_status_jconfig){ .max_batch_delay_ns = 2000000, .max_batch_bytes = MIB,
							       .ring_size = MIB, .when_full = (uint32_t)i, .reserved = 9 };
	}
	proto_set_name(m->spill->directory, sizeof(m->spill->directory), text);
	proto_set_name(m->spill->method, sizeof(m->spill->method), text);
}

static void answer_status(int fd, const struct proto_hdr *h, const void *req)
{
	struct status_reply m;

	(void)req;
	if (h->type != PROTO_STATUS) {
		reply_result(fd, INT32_MIN, ""); /* no errno */
		return;
	}
	status_build(&m, "ok");
	switch ((int)liar.lie) {
	case 1:
		m.s->nclasses = UINT32_MAX;
		break;
	case 2:
		m.lease->class_index = 5;
		break;
	case 3:
		m.journal[0].error = INT32_MIN;
		break;
	case 4:
		m.journal[0].error = 5;
		break;
	case 5:
		m.s->nspill = 2;
		break;
	case 6:
		reply_result(fd, 0, "");
		return;
	case 8: /* more spill_uid records than there are bytes */
		m.server->nuids = UINT32_MAX;
		break;
	case 9: /* a version 5 reply: no server section */
		m.len = (size_t)((uint8_t *)m.server - m.bytes);
		break;
	case 10: /* a version 6 reply: no pages section */
		m.len = (size_t)((uint8_t *)m.pages - m.bytes);
		break;
	case 11: /* a version 7 reply: no journals' configuration */
		m.len = (size_t)((uint8_t *)m.jconfig - m.bytes);
		break;
	case 12: /* a when_full that is neither block nor recycle */
		m.jconfig[1].when_full = PROTO_JOURNAL_NWHEN_FULL;
		break;
	case 7: /* no string ends within its field */
		memset(m.cls->name, 'A', sizeof(m.cls->name));
		memset(m.s->fallback_reason, 'B', sizeof(m.s->fallback_reason));
		memset(m.spill->directory, 'C', sizeof(m.spill->directory));
		memset(m.jpath[0].why, 'D', sizeof(m.jpath[0].why));
		memset(m.jpath[0].path, 'E', sizeof(m.jpath[0].path));
		memset(m.pages->fallback_reason, 'F', sizeof(m.pages->fallback_reason));
		break;
	}
	reply(fd, PROTO_STATUS_REPLY, m.bytes, (uint32_t)m.len, NULL, 0);
}

static void test_status_lies(void **state)
{
	static const char *const why[] = {
		NULL,
		"malformed status reply from the daemon",
		"malformed status reply from the daemon",
		"malformed status reply from the daemon",
		"malformed status reply from the daemon",
		"malformed status reply from the daemon",
		"the daemon answered a status request with a result",
		NULL, /* 7: below */
		"malformed status reply from the daemon",
		"malformed status reply from the daemon",
		"malformed status reply from the daemon",
		"malformed status reply from the daemon",
		"malformed status reply from the daemon",
	};
	struct hp_status *st;
	hp_conn *c;

	(void)state;
	liar_start(answer_status, 0);
	c = liar_conn();
	assert_int_equal(hp_status(c, &st), 0);
	assert_string_equal(st->classes[0]->name, "ok");
	assert_int_equal(st->nspill_uids, 1);
	/* a flag is 0 or 1 whatever the daemon sends */
	assert_int_equal(st->classes[0]->pages.fallback, 1);
	assert_string_equal(st->classes[0]->pages.fallback_reason, "ok");
	/* each journal's configuration, in the journals' order */
	assert_int_equal(st->journals[0]->config.when_full, HP_JOURNAL_BLOCK);
	assert_int_equal(st->journals[1]->config.when_full, HP_JOURNAL_RECYCLE);
	assert_int_equal(st->journals[1]->config.max_batch_delay_ns, 2000000);
	assert_int_equal(st->journals[1]->config.max_batch_bytes, MIB);
	assert_int_equal(st->journals[1]->config.ring_size, MIB);
	hp_status_free(st);
	for (int lie = 1; lie < (int)ARRAY_SIZE(why); lie++) {
		if (!why[lie])
			continue;
		liar.lie = lie;
		assert_refused(c, hp_status(c, &st), why[lie]);
	}
	/* strings without their NUL end within their public fields */
	liar.lie = 7;
	assert_int_equal(hp_status(c, &st), 0);
	assert_int_equal(strlen(st->classes[0]->name), sizeof(st->classes[0]->name) - 1);
	assert_int_equal(strlen(st->fallback_reason), sizeof(st->fallback_reason) - 1);
	assert_int_equal(strlen(st->spill.directory), sizeof(st->spill.directory) - 1);
	assert_int_equal(strlen(st->journals[0]->path.why), sizeof(st->journals[0]->path.why) - 1);
	assert_int_equal(strlen(st->journals[0]->path.path), sizeof(st->journals[0]->path.path) - 1);
	assert_int_equal(strlen(st->classes[0]->pages.fallback_reason), sizeof(st->classes[0]->pages.fallback_reason) - 1);
	hp_status_free(st);
	/* a result whose error is no errno */
	assert_refused(c, hp_journal_truncate(c, "j", 1), "malformed result from the daemon");
	assert_string_equal(hp_strerror(INT32_MIN), "unknown error");
	hp_disconnect(c);
}

/* --- hugepoolctl ----------------------------------------------------------------------------- */

/* A hugepoolctl running against the liar, its stdout and stderr in one pipe. */
struct ctl {
	const char *args;
	pid_t pid;
	int out;
};

/* Start hugepoolctl -s <the liar> with args (one string, split at spaces). */
static void ctl_start(const char *args, struct ctl *cl)
{
	char bin[256], words[256], *argv[16] = { bin, "-s", liar.socket };
	posix_spawn_file_actions_t fa;
	int p[2], argc = 3;

	snprintf(bin, sizeof(bin), "%s/hugepoolctl", harness_build());
	snprintf(words, sizeof(words), "%s", args);
	for (char *w = strtok(words, " "); w && argc < 15; w = strtok(NULL, " "))
		argv[argc++] = w;
	argv[argc] = NULL;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	assert_int_equal(posix_spawn(&cl->pid, bin, &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	cl->args = args;
	cl->out = p[0];
}

/*
 * Read what it prints (the first outlen - 1 bytes into out), wait for it; its exit status, after
 * asserting that no signal ended it and that it printed nothing a terminal would obey: every
 * byte printable ASCII or a newline, but for the "é" the liar sends in one place (valid UTF-8 is
 * printed as it is).
 */
static int ctl_finish(struct ctl *cl, char *out, size_t outlen)
{
	char rest[4096];
	size_t n = 0;
	ssize_t k;
	int st;

	while ((k = read(cl->out, out + n, outlen - 1 - n)) > 0 && (n += (size_t)k) < outlen - 1)
		;
	while (read(cl->out, rest, sizeof(rest)) > 0)
		; /* what does not fit: it must not block the program */
	out[n] = '\0';
	close(cl->out);
	assert_int_equal(waitpid(cl->pid, &st, 0), cl->pid);
	if (WIFSIGNALED(st))
		fprintf(stderr, "hugepoolctl %s: killed by signal %d after printing:\n%.2000s\n", cl->args, WTERMSIG(st), out);
	assert_false(WIFSIGNALED(st));
	for (size_t i = 0; i < n; i++) {
		bool ok = (out[i] >= 0x20 && out[i] < 0x7f) || out[i] == '\n';

		if (memcmp(out + i, "é", 2) == 0) {
			i++;
			continue;
		}
		if (!ok)
			fprintf(stderr, "hugepoolctl %s: byte 0x%02x at %zu of:\n%s\n", cl->args, (unsigned char)out[i], i, out);
		assert_true(ok);
	}
	/* nothing passes for a line of hugepoolctl's own */
	assert_null(strstr(out, "\nhugepool OK"));
	assert_true(strncmp(out, "hugepool OK", 11) != 0);
	return WEXITSTATUS(st);
}

/* Run hugepoolctl with args to its end (ctl_start, ctl_finish). */
static int ctl(const char *args, char *out, size_t outlen)
{
	struct ctl cl;

	ctl_start(args, &cl);
	return ctl_finish(&cl, out, outlen);
}

/* A status naming journal "j", and its segments as answer_reader lies about them. */
static void answer_journal(int fd, const struct proto_hdr *h, const void *req)
{
	struct status_reply m;

	if (h->type != PROTO_STATUS) {
		answer_reader(fd, h, req);
		return;
	}
	status_build(&m, "ok");
	reply(fd, PROTO_STATUS_REPLY, m.bytes, (uint32_t)m.len, NULL, 0);
}

/*
 * A segment cut short after hugepoolctl had it checked and mapped (by the liar, who keeps the
 * file): the next record read past the new end must end journal dump with a message, not SIGBUS.
 */
static void test_ctl_segment_cut(void **state)
{
	static char out[256 * 1024];
	struct ctl cl;
	char first;

	(void)state;
	liar_start(answer_journal, 5);
	ctl_start("journal dump j", &cl);
	/* its first output: it is printing records, and cannot finish before we read the rest */
	assert_int_equal(read(cl.out, &first, 1), 1);
	assert_int_equal(ftruncate(liar.cut_fd, JFORMAT_BLOCK), 0);
	close(liar.cut_fd);
	assert_int_equal(ctl_finish(&cl, out, sizeof(out)), 3);
	assert_non_null(strstr(out, "hugepoolctl: reading journal \"j\": Bad address (a segment was cut short while it "
				    "was read, after the daemon had handed it over)"));
}

static void test_ctl_short_segment(void **state)
{
	char out[4096];

	(void)state;
	liar_start(answer_journal, 0);
	assert_int_equal(ctl("journal dump j", out, sizeof(out)), 0);
	assert_string_equal(out, "1 6 \"record\"\n2 6 \"record\"\n3 6 \"record\"\n");
	assert_int_equal(ctl("journal verify j", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "Result:   intact"));
	liar.lie = 1; /* a segment cut short: mapped as announced, its records would be SIGBUS */
	assert_int_equal(ctl("journal dump j", out, sizeof(out)), 3);
	assert_non_null(strstr(out, "the daemon sent a journal segment of 4096 bytes where it announced 65536"));
	assert_int_equal(ctl("journal verify j", out, sizeof(out)), 3);
	assert_non_null(strstr(out, "the daemon sent a journal segment of 4096 bytes where it announced 65536"));
}

/* The status of answer_status, every string EVIL; the spill directory also holds an "é". */
static void answer_evil_status(int fd, const struct proto_hdr *h, const void *req)
{
	struct status_reply m;

	(void)req;
	if (h->type != PROTO_STATUS) {
		reply_result(fd, -EINVAL, EVIL);
		return;
	}
	status_build(&m, EVIL);
	proto_set_name(m.spill->directory, sizeof(m.spill->directory), "/var/tmp/é/" EVIL);
	reply(fd, PROTO_STATUS_REPLY, m.bytes, (uint32_t)m.len, NULL, 0);
}

static void test_ctl_escapes_strings(void **state)
{
	static const char *const views[] = { "status", "classes", "leases", "spill", "journal list", "journal stat j" };
	char out[16384], args[64];

	(void)state;
	liar_start(answer_evil_status, 0);
	for (size_t i = 0; i < ARRAY_SIZE(views); i++) {
		assert_int_equal(ctl(views[i], out, sizeof(out)), 0);
		if (!strstr(out, EVIL_ESCAPED))
			fprintf(stderr, "hugepoolctl %s:\n%s\n", views[i], out);
		assert_non_null(strstr(out, EVIL_ESCAPED));
		snprintf(args, sizeof(args), "--json %s", views[i]);
		assert_int_equal(ctl(args, out, sizeof(out)), 0);
		assert_non_null(strstr(out, "\\u001b]0;pwned\\u0007"));
	}
	assert_int_equal(ctl("spill", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "Directory:   /var/tmp/é/" EVIL_ESCAPED));
	assert_int_equal(ctl("--json spill", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "\"directory\":\"/var/tmp/é/\\u001b]0;pwned\\u0007"));
	assert_non_null(strstr(out, "\\u00ff\\u009b\""));
	/* the exposition formats: names as label values, escaped as the text is, then for the format */
	assert_int_equal(ctl("metrics", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "hugepool_class_buffers{class=\"" EVIL_LABEL "\"} 1\n"));
	assert_non_null(strstr(out, "hugepool_journal_durable_lsn{journal=\"" EVIL_LABEL "\"} "));
	assert_int_equal(ctl("metrics --openmetrics", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "hugepool_class_buffers{class=\"" EVIL_LABEL "\"} 1\n"));
	assert_int_equal(ctl("stats", out, sizeof(out)), 0);
}

/* Every request but the hello refused, with EVIL as the daemon's words. */
static void answer_refusal(int fd, const struct proto_hdr *h, const void *req)
{
	(void)h;
	(void)req;
	reply_result(fd, liar.lie == 1 ? -ENOENT : -EPERM, EVIL);
}

static void test_ctl_escapes_errors(void **state)
{
	char out[4096];

	(void)state;
	liar_start(answer_refusal, 0);
	liar.hello_err = -EUSERS; /* the daemon's reason for refusing the connection */
	assert_int_equal(ctl("status", out, sizeof(out)), 3);
	assert_non_null(strstr(out, "hugepoolctl: " EVIL_ESCAPED));
	liar.hello_err = 0;
	assert_int_equal(ctl("status", out, sizeof(out)), 3);
	assert_non_null(strstr(out, "(" EVIL_ESCAPED ")"));
	liar.lie = 1; /* "no such journal", in the daemon's words */
	assert_int_equal(ctl("journal truncate j 5", out, sizeof(out)), 3);
	assert_non_null(strstr(out, "hugepoolctl: " EVIL_ESCAPED));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_buffer_lies, liar_stop),
		cmocka_unit_test_teardown(test_writer_lies, liar_stop),
		cmocka_unit_test_teardown(test_reader_lies, liar_stop),
		cmocka_unit_test_teardown(test_spill_lies, liar_stop),
		cmocka_unit_test_teardown(test_status_lies, liar_stop),
		cmocka_unit_test_teardown(test_ctl_short_segment, liar_stop),
		cmocka_unit_test_teardown(test_ctl_segment_cut, liar_stop),
		cmocka_unit_test_teardown(test_ctl_escapes_strings, liar_stop),
		cmocka_unit_test_teardown(test_ctl_escapes_errors, liar_stop),
	};

	alarm(60); /* a client the liar left waiting must not hang the suite */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
