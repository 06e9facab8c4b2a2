/* SPDX-License-Identifier: MIT */
/* Unit tests for the wire protocol: header rules, send/receive with fds, and hostile peers. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"
#include "util.h"
#include "../integration/fds.h"

#define MiB (UINT64_C(1) << 20)

/* A connected pair; reads time out, so a receive that waits for bytes never sent fails, not hangs. */
static void pair(int sv[2])
{
	struct timeval tv = { .tv_sec = 10 };

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(setsockopt(sv[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
}

static void close_pair(int sv[2])
{
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	sv[0] = sv[1] = -1;
}

/* A memfd without FD_CLOEXEC, holding one byte so it is told apart from others. */
static int make_memfd(char tag)
{
	int fd = memfd_create("test_proto", 0);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, &tag, 1), 1);
	return fd;
}

/* Send raw bytes in one sendmsg, with fds attached (any count the kernel takes). */
static void send_raw(int fd, const void *buf, size_t len, const int *fds, unsigned nfds)
{
	struct iovec iov = { .iov_base = (void *)(uintptr_t)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	char *cbuf = NULL;

	if (nfds) {
		cbuf = calloc(1, CMSG_SPACE(sizeof(int) * nfds));
		assert_non_null(cbuf);
		proto_put_fds(&msg, cbuf, fds, nfds);
	}
	assert_int_equal(sendmsg(fd, &msg, MSG_NOSIGNAL), (ssize_t)len);
	free(cbuf);
}

static void send_hdr(int fd, uint32_t magic, uint16_t version, uint16_t type, uint32_t len, uint32_t nfds,
		     const int *fds, unsigned nattached)
{
	struct proto_hdr h = { .magic = magic, .version = version, .type = type, .len = len, .nfds = nfds };

	send_raw(fd, &h, sizeof(h), fds, nattached);
}

static void read_exact(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);

		assert_true(n > 0);
		got += (size_t)n;
	}
}

/* Nothing left to read on fd right now. */
static void assert_drained(int fd)
{
	char c;

	assert_int_equal(recv(fd, &c, 1, MSG_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN);
}

static void fill(void *buf, size_t len, unsigned seed)
{
	unsigned char *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)((i * 2654435761u + seed) >> 7);
}

/* Receive one reply that must succeed; returns the payload (caller frees). */
static void *recv_ok(int fd, struct proto_hdr *h, int *fds, unsigned maxfds)
{
	void *payload = NULL;
	int r = proto_recv(fd, h, &payload, fds, maxfds);

	if (r != 0)
		fail_msg("proto_recv failed with %d (%s)", r, strerror(-r));
	assert_non_null(payload);
	return payload;
}

static int recv_err(int fd, unsigned maxfds)
{
	struct proto_hdr h;
	void *payload = NULL;
	int fds[PROTO_MAX_FDS];
	int r = proto_recv(fd, &h, &payload, fds, maxfds);

	if (r == 0) {
		free(payload);
		fail_msg("proto_recv succeeded (type %u, len %u, nfds %u), an error was expected", h.type, h.len,
			 h.nfds);
	}
	assert_null(payload); /* nothing handed out on failure */
	return r;
}

static void test_hdr_init_and_names(void **state)
{
	struct proto_hdr h;

	(void)state;
	memset(&h, 0xa5, sizeof(h));
	proto_hdr_init(&h, PROTO_GRANT, 48, 2);
	assert_int_equal(h.magic, PROTO_MAGIC);
	assert_int_equal(h.version, PROTO_VERSION);
	assert_int_equal(h.type, PROTO_GRANT);
	assert_int_equal(h.len, 48);
	assert_int_equal(h.nfds, 2);
	/* the wire layout: magic "HUGP" first, little-endian */
	assert_memory_equal(&h, "HUGP", 4);

	assert_string_equal(proto_type_name(PROTO_HELLO), "hello");
	assert_string_equal(proto_type_name(PROTO_ACQUIRE), "acquire");
	assert_string_equal(proto_type_name(PROTO_RELEASE), "release");
	assert_string_equal(proto_type_name(PROTO_STATUS), "status");
	assert_string_equal(proto_type_name(PROTO_WELCOME), "welcome");
	assert_string_equal(proto_type_name(PROTO_RESULT), "result");
	assert_string_equal(proto_type_name(PROTO_GRANT), "grant");
	assert_string_equal(proto_type_name(PROTO_STATUS_REPLY), "status-reply");
	assert_string_equal(proto_type_name(PROTO_JOURNAL_OPEN), "journal-open");
	assert_string_equal(proto_type_name(PROTO_JOURNAL_SEGMENTS), "journal-segments");
	assert_string_equal(proto_type_name(0), "unknown");
	assert_string_equal(proto_type_name(PROTO_SPILL_ATTACH), "spill-attach");
	assert_string_equal(proto_type_name(PROTO_SPILL_CREATED), "spill-created");
	assert_string_equal(proto_type_name(PROTO_RESTART), "restart");
	assert_string_equal(proto_type_name(14), "unknown");
	assert_string_equal(proto_type_name(0xffff), "unknown");

	/* the journals' tables of names */
	assert_string_equal(proto_journal_state_name(PROTO_JOURNAL_FULL), "full");
	assert_string_equal(proto_journal_state_name(3), "unknown");
	assert_string_equal(proto_journal_when_full_name(PROTO_JOURNAL_BLOCK), "block");
	assert_string_equal(proto_journal_when_full_name(PROTO_JOURNAL_RECYCLE), "recycle");
	assert_int_equal(PROTO_JOURNAL_NWHEN_FULL, 2);
	assert_string_equal(proto_journal_when_full_name(PROTO_JOURNAL_NWHEN_FULL), "unknown");
	assert_string_equal(proto_journal_when_full_name(UINT32_MAX), "unknown");
}

/*
 * Each version's status reply is the one before it and its own sections: version 8 adds a
 * journal's configuration per journal, laid out with no padding, and nothing else.
 */
static void test_status_size_by_version(void **state)
{
	struct proto_status st = { .nclasses = 2, .nclients = 3, .nleases = 4, .njournals = 5, .nspill = 1 };
	struct proto_status_server srv = { .nuids = 2 };

	(void)state;
	assert_int_equal(proto_status_size(&st, &srv, 8) - proto_status_size(&st, &srv, 7),
			 5 * sizeof(struct proto_status_jconfig));
	assert_int_equal(proto_status_size(&st, &srv, 7) - proto_status_size(&st, &srv, 6),
			 2 * sizeof(struct proto_status_pages));
	assert_int_equal(sizeof(struct proto_status_jconfig), 32);
	assert_int_equal(offsetof(struct proto_status_jconfig, max_batch_delay_ns), 0);
	assert_int_equal(offsetof(struct proto_status_jconfig, max_batch_bytes), 8);
	assert_int_equal(offsetof(struct proto_status_jconfig, ring_size), 16);
	assert_int_equal(offsetof(struct proto_status_jconfig, when_full), 24);
	assert_int_equal(offsetof(struct proto_status_jconfig, reserved), 28);
	/* no journal, no record */
	st.njournals = 0;
	assert_int_equal(proto_status_size(&st, &srv, 8), proto_status_size(&st, &srv, 7));
}

/* Every client request as the daemon would read it: raw header and payload. */
static void test_roundtrip_requests(void **state)
{
	int sv[2];
	struct proto_hello hello = { .flags = 0 };
	struct proto_acquire acq = { .count = 3, .timeout_ms = -1 };
	struct {
		struct proto_release r;
		uint64_t ids[3];
	} rel = { { .n = 3 }, { 1, UINT64_C(0x100000002), UINT64_MAX } };
	struct proto_status_req st = { 0 };
	const struct {
		enum proto_type type;
		const void *payload;
		uint32_t len;
	} msgs[] = {
		{ PROTO_HELLO, &hello, sizeof(hello) },
		{ PROTO_ACQUIRE, &acq, sizeof(acq) },
		{ PROTO_RELEASE, &rel, sizeof(rel) },
		{ PROTO_STATUS, &st, sizeof(st) },
	};

	(void)state;
	proto_set_name(hello.name, sizeof(hello.name), "test-client");
	proto_set_name(acq.class_name, sizeof(acq.class_name), "small");
	pair(sv);
	for (size_t i = 0; i < ARRAY_SIZE(msgs); i++) {
		struct proto_hdr h;
		char buf[64];
		const char *why = NULL;

		assert_true(msgs[i].len <= sizeof(buf));
		assert_int_equal(proto_send(sv[0], msgs[i].type, msgs[i].payload, msgs[i].len, NULL, 0), 0);
		read_exact(sv[1], &h, sizeof(h));
		assert_int_equal(h.magic, PROTO_MAGIC);
		assert_int_equal(h.version, PROTO_VERSION);
		assert_int_equal(h.type, msgs[i].type);
		assert_int_equal(h.len, msgs[i].len);
		assert_int_equal(h.nfds, 0);
		assert_int_equal(proto_check_header(&h, true, &why), 0);
		read_exact(sv[1], buf, h.len);
		assert_memory_equal(buf, msgs[i].payload, msgs[i].len);
		assert_drained(sv[1]);
	}

	/* the client side refuses a request coming its way */
	assert_int_equal(proto_send(sv[0], PROTO_HELLO, &hello, sizeof(hello), NULL, 0), 0);
	assert_int_equal(recv_err(sv[1], PROTO_MAX_FDS), -EPROTO);
	close_pair(sv);
}

/* proto_parse_request on the spill requests: flags and reserved words must be zero. */
static void test_parse_spill(void **state)
{
	union proto_request req;
	struct proto_spill_attach at = { 0 };
	struct proto_spill_create cr = { 0 };
	struct proto_spill_charge ch = { .file_id = 7, .total = UINT64_MAX };
	struct proto_spill_close cl = { .file_id = 7 };
	struct proto_hdr h;
	const char *why = NULL;

	(void)state;
	proto_hdr_init(&h, PROTO_SPILL_ATTACH, sizeof(at), 0);
	assert_int_equal(proto_check_header(&h, true, &why), 0);
	assert_int_equal(proto_parse_request(&h, &at, &req, &why), 0);
	at.reserved = 1;
	assert_int_equal(proto_parse_request(&h, &at, &req, &why), -EPROTO);
	assert_string_equal(why, "spill attach with unknown flags");
	proto_hdr_init(&h, PROTO_SPILL_CREATE, sizeof(cr), 0);
	assert_int_equal(proto_parse_request(&h, &cr, &req, &why), 0);
	cr.flags = 2;
	assert_int_equal(proto_parse_request(&h, &cr, &req, &why), -EPROTO);
	proto_hdr_init(&h, PROTO_SPILL_CHARGE, sizeof(ch), 0);
	assert_int_equal(proto_parse_request(&h, &ch, &req, &why), 0);
	assert_int_equal(req.spill_charge.total, UINT64_MAX);
	proto_hdr_init(&h, PROTO_SPILL_CLOSE, sizeof(cl), 0);
	assert_int_equal(proto_parse_request(&h, &cl, &req, &why), 0);
	assert_int_equal(req.spill_close.file_id, 7);
	/* a spill charge one byte short, or carrying an fd, is refused by its header */
	proto_hdr_init(&h, PROTO_SPILL_CHARGE, sizeof(ch) - 1, 0);
	assert_int_equal(proto_check_header(&h, true, &why), -EPROTO);
	proto_hdr_init(&h, PROTO_SPILL_CREATE, sizeof(cr), 1);
	assert_int_equal(proto_check_header(&h, true, &why), -EPROTO);
	/* the replies come from the daemon only, each with its one fd */
	proto_hdr_init(&h, PROTO_SPILL_CREATED, sizeof(struct proto_spill_created), 1);
	assert_int_equal(proto_check_header(&h, false, &why), 0);
	assert_int_equal(proto_check_header(&h, true, &why), -EPROTO);
}

static void test_roundtrip_replies(void **state)
{
	int sv[2], fds[PROTO_MAX_FDS];
	struct proto_welcome w = { .version = PROTO_VERSION, .nclasses = 3, .page_size = 2 * MiB };
	struct {
		struct proto_result r;
		char text[PROTO_TEXT_MAX];
	} res;
	struct {
		struct proto_status s;
		struct proto_status_class c[2];
	} st;

	(void)state;
	snprintf(w.daemon_version, sizeof(w.daemon_version), "0.1.0");
	memset(&res, 'x', sizeof(res));
	res.r = (struct proto_result){ .err = -EAGAIN, .text_len = PROTO_TEXT_MAX };
	fill(&st, sizeof(st), 7);

	const struct {
		enum proto_type type;
		const void *payload;
		uint32_t len;
	} msgs[] = {
		{ PROTO_WELCOME, &w, sizeof(w) },
		{ PROTO_RESULT, &res, sizeof(struct proto_result) }, /* no text */
		{ PROTO_RESULT, &res, sizeof(res) }, /* longest text */
		{ PROTO_STATUS_REPLY, &st, sizeof(struct proto_status) },
		{ PROTO_STATUS_REPLY, &st, sizeof(st) },
	};

	pair(sv);
	for (size_t i = 0; i < ARRAY_SIZE(msgs); i++) {
		struct proto_hdr h;
		void *p;

		memset(&h, 0, sizeof(h));
		assert_int_equal(proto_send(sv[0], msgs[i].type, msgs[i].payload, msgs[i].len, NULL, 0), 0);
		p = recv_ok(sv[1], &h, fds, PROTO_MAX_FDS);
		assert_int_equal(h.magic, PROTO_MAGIC);
		assert_int_equal(h.version, PROTO_VERSION);
		assert_int_equal(h.type, msgs[i].type);
		assert_int_equal(h.len, msgs[i].len);
		assert_int_equal(h.nfds, 0);
		assert_memory_equal(p, msgs[i].payload, msgs[i].len);
		free(p);
		assert_drained(sv[1]);
	}
	close_pair(sv);
}

static void check_same_file(int a, int b)
{
	struct stat sa, sb;

	assert_int_equal(fstat(a, &sa), 0);
	assert_int_equal(fstat(b, &sb), 0);
	assert_true(sa.st_ino == sb.st_ino);
	assert_true(sa.st_dev == sb.st_dev);
}

static void test_grant_with_fds(void **state)
{
	int sv[2], sent[PROTO_MAX_FDS], got[PROTO_MAX_FDS];
	unsigned before = count_fds();
	struct {
		struct proto_grant g;
		struct proto_grant_entry e[PROTO_MAX_FDS];
	} grant;

	(void)state;
	pair(sv);
	for (unsigned i = 0; i < PROTO_MAX_FDS; i++) {
		sent[i] = make_memfd((char)('A' + i));
		grant.e[i] = (struct proto_grant_entry){ .lease_id = (UINT64_C(1) << 32) | i, .size = 2 * MiB };
		assert_int_equal(fcntl(sent[i], F_GETFD) & FD_CLOEXEC, 0);
	}

	/* 3 fds, then the most one message may carry */
	const unsigned counts[] = { 1, 3, PROTO_MAX_FDS };

	for (size_t k = 0; k < ARRAY_SIZE(counts); k++) {
		unsigned n = counts[k];
		uint32_t len = (uint32_t)(sizeof(struct proto_grant) + n * sizeof(struct proto_grant_entry));
		struct proto_hdr h;
		void *p;

		grant.g = (struct proto_grant){ .total = n, .first = 0, .n = n };
		memset(got, -1, sizeof(got));
		assert_int_equal(proto_send(sv[0], PROTO_GRANT, &grant, len, sent, n), 0);
		p = recv_ok(sv[1], &h, got, PROTO_MAX_FDS);
		assert_int_equal(h.type, PROTO_GRANT);
		assert_int_equal(h.len, len);
		assert_int_equal(h.nfds, n);
		assert_memory_equal(p, &grant, len);
		free(p);
		for (unsigned i = 0; i < n; i++) {
			char c = 0;

			assert_true(got[i] >= 0);
			check_same_file(got[i], sent[i]);
			assert_int_equal(pread(got[i], &c, 1, 0), 1);
			assert_int_equal(c, 'A' + (int)i); /* in order */
			assert_int_equal(fcntl(got[i], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
			close(got[i]);
		}
		if (n < PROTO_MAX_FDS)
			assert_int_equal(got[n], -1); /* nothing written past the fds received */
	}

	/* more than one message may carry is refused before anything is sent */
	int many[PROTO_MAX_FDS + 1];

	for (unsigned i = 0; i <= PROTO_MAX_FDS; i++)
		many[i] = sent[0];
	assert_int_equal(proto_send(sv[0], PROTO_GRANT, &grant, sizeof(grant), many, PROTO_MAX_FDS + 1), -EINVAL);
	assert_drained(sv[1]);

	for (unsigned i = 0; i < PROTO_MAX_FDS; i++)
		close(sent[i]);
	close_pair(sv);
	assert_int_equal(count_fds(), before);
}

struct big_send {
	int fd;
	const void *payload;
	uint32_t len;
	int r;
};

static void *big_sender(void *arg)
{
	struct big_send *b = arg;

	b->r = proto_send(b->fd, PROTO_STATUS_REPLY, b->payload, b->len, NULL, 0);
	return NULL;
}

/* A status reply of several MiB: far more than the socket buffer, so sent from a thread. */
static void test_large_payload(void **state)
{
	int sv[2], fds[1];
	uint32_t len = 24 * (uint32_t)MiB + 13;
	void *payload = malloc(len), *p;
	struct big_send b;
	struct proto_hdr h;
	pthread_t t;

	(void)state;
	assert_non_null(payload);
	fill(payload, len, 42);
	pair(sv);
	b = (struct big_send){ .fd = sv[0], .payload = payload, .len = len, .r = 1 };
	assert_int_equal(pthread_create(&t, NULL, big_sender, &b), 0);
	p = recv_ok(sv[1], &h, fds, 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(b.r, 0);
	assert_int_equal(h.type, PROTO_STATUS_REPLY);
	assert_int_equal(h.len, len);
	assert_int_equal(h.nfds, 0);
	assert_memory_equal(p, payload, len);
	free(p);
	free(payload);
	assert_drained(sv[1]);
	close_pair(sv);
}

static void on_sigusr1(int sig)
{
	(void)sig;
}

/*
 * A send interrupted by a signal after part of the message went out returns a short count;
 * proto_send must go on from there (and retry an EINTR with nothing sent).
 */
static void test_send_interrupted(void **state)
{
	int sv[2], fds[1];
	uint32_t len = 4 * (uint32_t)MiB + 5;
	void *payload = malloc(len), *p;
	struct sigaction sa = { .sa_handler = on_sigusr1 }, old; /* no SA_RESTART */
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	struct big_send b;
	struct proto_hdr h;
	pthread_t t;

	(void)state;
	assert_non_null(payload);
	fill(payload, len, 3);
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
	pair(sv);
	b = (struct big_send){ .fd = sv[0], .payload = payload, .len = len, .r = 1 };
	assert_int_equal(pthread_create(&t, NULL, big_sender, &b), 0);
	/* the sender fills the socket buffer and blocks; interrupt it a few times */
	for (int i = 0; i < 3; i++) {
		nanosleep(&ts, NULL);
		assert_int_equal(pthread_kill(t, SIGUSR1), 0);
	}
	p = recv_ok(sv[1], &h, fds, 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
	assert_int_equal(b.r, 0);
	assert_int_equal(h.len, len);
	assert_memory_equal(p, payload, len);
	free(p);
	free(payload);
	assert_drained(sv[1]);
	close_pair(sv);
}

struct slow_send {
	int fd, memfd;
	const unsigned char *bytes;
	size_t len;
};

/* Dribble a message out a few bytes at a time, the fd with the first byte. */
static void *slow_sender(void *arg)
{
	struct slow_send *s = arg;
	const size_t cuts[] = { 1, 5, 16, 17, 30 };
	size_t off = 0;

	for (size_t i = 0; i <= ARRAY_SIZE(cuts); i++) {
		size_t end = i < ARRAY_SIZE(cuts) ? cuts[i] : s->len;
		struct timespec ts = { 0, 5 * 1000 * 1000 };

		send_raw(s->fd, s->bytes + off, end - off, i == 0 ? &s->memfd : NULL, i == 0 ? 1 : 0);
		off = end;
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void test_recv_in_pieces(void **state)
{
	int sv[2], got[2] = { -1, -1 };
	struct {
		struct proto_hdr h;
		struct proto_grant g;
		struct proto_grant_entry e;
	} msg;
	struct slow_send s;
	struct proto_hdr h;
	pthread_t t;
	void *p;

	(void)state;
	pair(sv);
	proto_hdr_init(&msg.h, PROTO_GRANT, sizeof(msg.g) + sizeof(msg.e), 1);
	msg.g = (struct proto_grant){ .total = 1, .n = 1 };
	msg.e = (struct proto_grant_entry){ .lease_id = 77, .size = 2 * MiB };
	s = (struct slow_send){ .fd = sv[0], .memfd = make_memfd('z'), .bytes = (const unsigned char *)&msg,
				.len = sizeof(msg) };
	assert_int_equal(pthread_create(&t, NULL, slow_sender, &s), 0);
	p = recv_ok(sv[1], &h, got, 2);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(h.type, PROTO_GRANT);
	assert_int_equal(h.nfds, 1);
	assert_memory_equal(p, &msg.g, sizeof(msg.g) + sizeof(msg.e));
	check_same_file(got[0], s.memfd);
	assert_int_equal(got[1], -1);
	free(p);
	close(got[0]);
	close(s.memfd);
	close_pair(sv);
}

static void test_check_header(void **state)
{
	static const struct {
		uint16_t type;
		bool from_client;
		uint32_t min, max, max_fds;
	} rules[] = {
		{ PROTO_HELLO, true, sizeof(struct proto_hello), sizeof(struct proto_hello), 0 },
		{ PROTO_ACQUIRE, true, sizeof(struct proto_acquire), sizeof(struct proto_acquire), 0 },
		{ PROTO_RELEASE, true, sizeof(struct proto_release) + 8,
		  sizeof(struct proto_release) + 8 * PROTO_RELEASE_MAX, 0 },
		{ PROTO_STATUS, true, sizeof(struct proto_status_req), sizeof(struct proto_status_req), 0 },
		{ PROTO_WELCOME, false, sizeof(struct proto_welcome), sizeof(struct proto_welcome), 0 },
		{ PROTO_RESULT, false, sizeof(struct proto_result), sizeof(struct proto_result) + PROTO_TEXT_MAX, 0 },
		{ PROTO_GRANT, false, sizeof(struct proto_grant) + sizeof(struct proto_grant_entry),
		  sizeof(struct proto_grant) + PROTO_MAX_FDS * sizeof(struct proto_grant_entry), PROTO_MAX_FDS },
		{ PROTO_STATUS_REPLY, false, sizeof(struct proto_status), PROTO_REPLY_MAX, 0 },
	};

	(void)state;
	/* the sizes the rules rest on */
	assert_int_equal(sizeof(struct proto_hello), 40);
	assert_int_equal(sizeof(struct proto_acquire), 48);
	assert_int_equal(sizeof(struct proto_release), 8);
	assert_int_equal(sizeof(struct proto_welcome), 32);
	assert_int_equal(sizeof(struct proto_result), 8);
	assert_int_equal(sizeof(struct proto_grant), 16);
	assert_int_equal(sizeof(struct proto_grant_entry), 16);

	for (size_t i = 0; i < ARRAY_SIZE(rules); i++) {
		struct proto_hdr h;
		const char *why;
		bool fc = rules[i].from_client;
		const struct {
			uint32_t len, nfds;
			int want;
		} cases[] = {
			{ rules[i].min, rules[i].max_fds ? 1 : 0, 0 },
			{ rules[i].max, rules[i].max_fds, 0 },
			{ rules[i].min - 1, 0, -EPROTO },
			{ rules[i].max + 1, 0, -EPROTO },
			{ 0, 0, -EPROTO },
			{ UINT32_MAX, 0, -EPROTO },
			{ rules[i].min, rules[i].max_fds + 1, -EPROTO },
			{ rules[i].min, UINT32_MAX, -EPROTO },
		};

		for (size_t k = 0; k < ARRAY_SIZE(cases); k++) {
			int r;

			proto_hdr_init(&h, (enum proto_type)rules[i].type, cases[k].len, cases[k].nfds);
			why = NULL;
			r = proto_check_header(&h, fc, &why);
			if (r != cases[k].want)
				fail_msg("type %u len %u nfds %u: %d, want %d", rules[i].type, cases[k].len,
					 cases[k].nfds, r, cases[k].want);
			if (r < 0)
				assert_true(why && why[0]);
			/* a reason pointer is optional */
			assert_int_equal(proto_check_header(&h, fc, NULL), cases[k].want);
		}

		/* the right type in the wrong direction */
		proto_hdr_init(&h, (enum proto_type)rules[i].type, rules[i].min, 0);
		why = NULL;
		assert_int_equal(proto_check_header(&h, !fc, &why), -EPROTO);
		assert_true(why && why[0]);

		/* magic before version before anything else */
		h.magic = 0x50475549;
		why = NULL;
		assert_int_equal(proto_check_header(&h, fc, &why), -EPROTO);
		assert_non_null(strstr(why, "magic"));
		h.version = PROTO_VERSION + 1;
		assert_int_equal(proto_check_header(&h, fc, NULL), -EPROTO);
		h.magic = PROTO_MAGIC;
		why = NULL;
		assert_int_equal(proto_check_header(&h, fc, &why), -EPROTONOSUPPORT);
		assert_non_null(strstr(why, "version"));
		h.version = 0;
		assert_int_equal(proto_check_header(&h, fc, NULL), -EPROTONOSUPPORT);
		h.version = PROTO_VERSION_MIN - 1;
		assert_int_equal(proto_check_header(&h, fc, NULL), -EPROTONOSUPPORT);
		/* the daemon serves every version from PROTO_VERSION_MIN; a client takes only its own */
		for (uint16_t v = PROTO_VERSION_MIN; v < PROTO_VERSION; v++) {
			h.version = v;
			assert_int_equal(proto_check_header(&h, fc, NULL), fc ? 0 : -EPROTONOSUPPORT);
		}
		h.version = PROTO_VERSION;
		h.len = rules[i].max + 1;
		assert_int_equal(proto_check_header(&h, fc, NULL), -EPROTO);
	}

	/* unknown types, either way */
	const uint16_t unknown[] = { 0, 5, 63, 68, 128, 0xffff };

	for (size_t i = 0; i < ARRAY_SIZE(unknown); i++) {
		struct proto_hdr h;
		const char *why = NULL;

		proto_hdr_init(&h, (enum proto_type)unknown[i], 16, 0);
		assert_int_equal(proto_check_header(&h, true, &why), -EPROTO);
		assert_non_null(strstr(why, "type"));
		assert_int_equal(proto_check_header(&h, false, NULL), -EPROTO);
	}
}

static void test_recv_eof(void **state)
{
	int sv[2];
	struct proto_hdr h;
	unsigned before = count_fds();
	struct {
		struct proto_result r;
		char text[10];
	} res = { { .err = -EINVAL, .text_len = 10 }, "0123456789" };

	(void)state;
	/* nothing at all */
	pair(sv);
	close(sv[0]);
	sv[0] = -1;
	assert_int_equal(recv_err(sv[1], PROTO_MAX_FDS), -ECONNRESET);
	close_pair(sv);

	/* half a header */
	pair(sv);
	proto_hdr_init(&h, PROTO_RESULT, sizeof(res), 0);
	send_raw(sv[0], &h, 7, NULL, 0);
	close(sv[0]);
	sv[0] = -1;
	assert_int_equal(recv_err(sv[1], PROTO_MAX_FDS), -ECONNRESET);
	close_pair(sv);

	/* a header and part of its payload */
	pair(sv);
	send_raw(sv[0], &h, sizeof(h), NULL, 0);
	send_raw(sv[0], &res, sizeof(res) - 3, NULL, 0);
	shutdown(sv[0], SHUT_WR);
	assert_int_equal(recv_err(sv[1], PROTO_MAX_FDS), -ECONNRESET);
	close_pair(sv);

	/* the same with an fd that came with the header: closed again */
	int memfd = make_memfd('e'), sent_before = (int)count_fds();

	pair(sv);
	proto_hdr_init(&h, PROTO_GRANT, sizeof(struct proto_grant) + sizeof(struct proto_grant_entry), 1);
	send_raw(sv[0], &h, sizeof(h), &memfd, 1);
	send_raw(sv[0], "abc", 3, NULL, 0);
	close(sv[0]);
	sv[0] = -1;
	assert_int_equal(recv_err(sv[1], PROTO_MAX_FDS), -ECONNRESET);
	close_pair(sv);
	assert_int_equal((int)count_fds(), sent_before);
	close(memfd);
	assert_int_equal(count_fds(), before);
}

static void test_recv_fd_mismatch(void **state)
{
	int sv[2], memfd[3];
	unsigned before;
	const uint32_t glen = sizeof(struct proto_grant) + sizeof(struct proto_grant_entry);

	(void)state;
	for (unsigned i = 0; i < 3; i++)
		memfd[i] = make_memfd((char)('0' + i));
	before = count_fds();

	/* header announces an fd, none came */
	pair(sv);
	send_hdr(sv[0], PROTO_MAGIC, PROTO_VERSION, PROTO_GRANT, glen, 1, NULL, 0);
	assert_int_equal(recv_err(sv[1], PROTO_MAX_FDS), -EPROTO);
	close_pair(sv);

	/* an fd came, the header says none (a type that may carry them, and one that may not) */
	pair(sv);
	send_hdr(sv[0], PROTO_MAGIC, PROTO_VERSION, PROTO_GRANT, glen, 0, memfd, 1);
	assert_int_equal(recv_err(sv[1], PROTO_MAX_FDS), -EPROTO);
	send_hdr(sv[0], PROTO_MAGIC, PROTO_VERSION, PROTO_RESULT, sizeof(struct proto_result), 0, memfd, 2);
	assert_int_equal(recv_err(sv[1], PROTO_MAX_FDS), -EPROTO);
	/* fds with a header that is refused outright */
	send_hdr(sv[0], 0xdeadbeef, PROTO_VERSION, PROTO_GRANT, glen, 1, memfd, 1);
	assert_int_equal(recv_err(sv[1], PROTO_MAX_FDS), -EPROTO);
	send_hdr(sv[0], PROTO_MAGIC, PROTO_VERSION + 1, PROTO_GRANT, glen, 1, memfd, 1);
	assert_int_equal(recv_err(sv[1], PROTO_MAX_FDS), -EPROTONOSUPPORT);
	close_pair(sv);
	assert_int_equal(count_fds(), before);

	/* two announced, three came */
	pair(sv);
	send_hdr(sv[0], PROTO_MAGIC, PROTO_VERSION, PROTO_GRANT, glen + sizeof(struct proto_grant_entry), 2, memfd,
		 3);
	assert_int_equal(recv_err(sv[1], PROTO_MAX_FDS), -EPROTO);
	close_pair(sv);
	assert_int_equal(count_fds(), before);

	/* fds that arrive with the payload instead of the header */
	pair(sv);
	char body[sizeof(struct proto_result) + 4] = { 0 };

	send_hdr(sv[0], PROTO_MAGIC, PROTO_VERSION, PROTO_RESULT, sizeof(body), 0, NULL, 0);
	send_raw(sv[0], body, sizeof(body), memfd, 2);
	assert_int_equal(recv_err(sv[1], PROTO_MAX_FDS), -EPROTO);
	close_pair(sv);
	assert_int_equal(count_fds(), before);

	for (unsigned i = 0; i < 3; i++)
		close(memfd[i]);
}

static void test_recv_too_many_fds(void **state)
{
	int sv[2], memfd, many[40];
	unsigned before;
	const uint32_t glen3 = sizeof(struct proto_grant) + 3 * sizeof(struct proto_grant_entry);

	(void)state;
	memfd = make_memfd('m');
	for (unsigned i = 0; i < ARRAY_SIZE(many); i++)
		many[i] = memfd;
	before = count_fds();

	/* three announced and sent, the caller takes two: truncated, nothing kept */
	pair(sv);
	send_hdr(sv[0], PROTO_MAGIC, PROTO_VERSION, PROTO_GRANT, glen3, 3, many, 3);
	assert_int_equal(recv_err(sv[1], 2), -EPROTO);
	close_pair(sv);
	assert_int_equal(count_fds(), before);

	/* the caller takes none */
	pair(sv);
	send_hdr(sv[0], PROTO_MAGIC, PROTO_VERSION, PROTO_GRANT, glen3, 3, many, 3);
	assert_int_equal(recv_err(sv[1], 0), -EPROTO);
	close_pair(sv);
	assert_int_equal(count_fds(), before);

	/* more than any message may carry: the kernel truncates (MSG_CTRUNC) */
	pair(sv);
	send_hdr(sv[0], PROTO_MAGIC, PROTO_VERSION, PROTO_GRANT, glen3, 3, many, ARRAY_SIZE(many));
	assert_int_equal(recv_err(sv[1], PROTO_MAX_FDS), -EPROTO);
	close_pair(sv);
	assert_int_equal(count_fds(), before);

	/*
	 * The count in the header matches what the caller keeps, but more came: still refused.
	 * The payload follows, so only the fd checks stand between this and a success.
	 */
	char payload[sizeof(struct proto_grant) + PROTO_MAX_FDS * sizeof(struct proto_grant_entry)] = { 0 };
	const uint32_t glen2 = sizeof(struct proto_grant) + 2 * sizeof(struct proto_grant_entry);

	pair(sv);
	send_hdr(sv[0], PROTO_MAGIC, PROTO_VERSION, PROTO_GRANT, glen2, 2, many, 3);
	send_raw(sv[0], payload, glen2, NULL, 0);
	assert_int_equal(recv_err(sv[1], 2), -EPROTO);
	close_pair(sv);
	assert_int_equal(count_fds(), before);
	pair(sv);
	send_hdr(sv[0], PROTO_MAGIC, PROTO_VERSION, PROTO_GRANT, sizeof(payload), PROTO_MAX_FDS, many,
		 ARRAY_SIZE(many));
	send_raw(sv[0], payload, sizeof(payload), NULL, 0);
	assert_int_equal(recv_err(sv[1], PROTO_MAX_FDS), -EPROTO);
	close_pair(sv);
	assert_int_equal(count_fds(), before);

	/* maxfds above PROTO_MAX_FDS is capped, not trusted */
	pair(sv);
	send_hdr(sv[0], PROTO_MAGIC, PROTO_VERSION, PROTO_GRANT, glen3, 3, many, PROTO_MAX_FDS + 1);
	assert_int_equal(recv_err(sv[1], 1000), -EPROTO);
	close_pair(sv);
	assert_int_equal(count_fds(), before);
	close(memfd);
}

/* A header is judged before any payload byte is read: what follows stays in the socket. */
static void test_recv_refuses_before_payload(void **state)
{
	int sv[2];
	char mark[4];
	const struct {
		uint32_t magic;
		uint16_t version, type;
		uint32_t len;
		int want;
	} cases[] = {
		{ PROTO_MAGIC, PROTO_VERSION, PROTO_STATUS_REPLY, PROTO_REPLY_MAX + 1, -EPROTO },
		{ PROTO_MAGIC, PROTO_VERSION, PROTO_STATUS_REPLY, UINT32_MAX, -EPROTO },
		{ PROTO_MAGIC, PROTO_VERSION, PROTO_RESULT, sizeof(struct proto_result) + PROTO_TEXT_MAX + 1,
		  -EPROTO },
		{ PROTO_MAGIC, PROTO_VERSION, PROTO_WELCOME, sizeof(struct proto_welcome) - 1, -EPROTO },
		{ PROTO_MAGIC, PROTO_VERSION, PROTO_ACQUIRE, sizeof(struct proto_acquire), -EPROTO },
		{ PROTO_MAGIC, PROTO_VERSION, 99, 8, -EPROTO },
		{ 0x48554750 /* byte-swapped */, PROTO_VERSION, PROTO_RESULT, 8, -EPROTO },
		{ PROTO_MAGIC, PROTO_VERSION + 1, PROTO_RESULT, 8, -EPROTONOSUPPORT },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int r;

		pair(sv);
		send_hdr(sv[0], cases[i].magic, cases[i].version, cases[i].type, cases[i].len, 0, NULL, 0);
		send_raw(sv[0], "MARK", 4, NULL, 0);
		r = recv_err(sv[1], PROTO_MAX_FDS);
		if (r != cases[i].want)
			fail_msg("case %zu: %d, want %d", i, r, cases[i].want);
		read_exact(sv[1], mark, sizeof(mark));
		assert_memory_equal(mark, "MARK", 4);
		close_pair(sv);
	}
}

static void test_send_to_closed_peer(void **state)
{
	int sv[2];
	struct proto_status_req st = { 0 };

	(void)state;
	pair(sv);
	close(sv[1]);
	sv[1] = -1;
	/* no SIGPIPE: the process is still here to see the error */
	assert_int_equal(proto_send(sv[0], PROTO_STATUS, &st, sizeof(st), NULL, 0), -ECONNRESET);
	close_pair(sv);
}

static void test_name_valid(void **state)
{
	char f[PROTO_NAME_MAX];

	(void)state;
	memset(f, 0, sizeof(f));
	assert_false(proto_name_valid(f, sizeof(f))); /* empty */

	memset(f, 'a', sizeof(f));
	assert_false(proto_name_valid(f, sizeof(f))); /* full length, no NUL */
	f[sizeof(f) - 1] = '\0';
	assert_true(proto_name_valid(f, sizeof(f))); /* 31 bytes and a NUL */

	const char *good[] = { "a", "small", "Big_2M", "x.y-z", "0", "A-Za-z0-9_.-" };

	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		memset(f, 0, sizeof(f));
		memcpy(f, good[i], strlen(good[i]));
		if (!proto_name_valid(f, sizeof(f)))
			fail_msg("\"%s\" refused", good[i]);
	}

	const char *bad[] = { "a b", "a/b", "../x", "tab\there", "new\nline", "semi;", "quote\"", "a*",
			      "\xc3\xa4", "\x7f", " lead", "trail " };

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(f, 0, sizeof(f));
		memcpy(f, bad[i], strlen(bad[i]));
		if (proto_name_valid(f, sizeof(f)))
			fail_msg("\"%s\" accepted", bad[i]);
	}

	/* only what comes before the NUL is the name */
	memset(f, 0, sizeof(f));
	memcpy(f, "ok\0/ /", 6);
	assert_true(proto_name_valid(f, sizeof(f)));
	/* a field shorter than the name has no NUL in it */
	assert_false(proto_name_valid("abcd", 4));
	assert_true(proto_name_valid("abcd", 5));
}

static void test_set_name(void **state)
{
	char f[PROTO_NAME_MAX], want[PROTO_NAME_MAX];
	char longname[64];

	(void)state;
	memset(f, 0x7e, sizeof(f));
	proto_set_name(f, sizeof(f), "abc");
	memset(want, 0, sizeof(want));
	memcpy(want, "abc", 3);
	assert_memory_equal(f, want, sizeof(f)); /* NUL-padded to the end */

	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	memset(f, 0x7e, sizeof(f));
	proto_set_name(f, sizeof(f), longname);
	assert_int_equal(strnlen(f, sizeof(f)), PROTO_NAME_MAX - 1); /* truncated, still terminated */
	assert_int_equal(f[PROTO_NAME_MAX - 1], '\0');
	assert_memory_equal(f, longname, PROTO_NAME_MAX - 1);
	assert_true(proto_name_valid(f, sizeof(f)));

	/* exactly the longest name that fits, and one more */
	longname[PROTO_NAME_MAX - 1] = '\0';
	proto_set_name(f, sizeof(f), longname);
	assert_string_equal(f, longname);
	longname[PROTO_NAME_MAX - 1] = 'x';
	longname[PROTO_NAME_MAX] = '\0';
	proto_set_name(f, sizeof(f), longname);
	assert_int_equal(strlen(f), PROTO_NAME_MAX - 1);
	assert_int_equal(f[PROTO_NAME_MAX - 2], 'n');

	memset(f, 0x7e, sizeof(f));
	proto_set_name(f, sizeof(f), NULL);
	memset(want, 0, sizeof(want));
	assert_memory_equal(f, want, sizeof(f));

	/* a small field */
	char small[4];

	proto_set_name(small, sizeof(small), "hello");
	assert_memory_equal(small, "hel", 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hdr_init_and_names),
		cmocka_unit_test(test_status_size_by_version),
		cmocka_unit_test(test_roundtrip_requests),
		cmocka_unit_test(test_parse_spill),
		cmocka_unit_test(test_roundtrip_replies),
		cmocka_unit_test(test_grant_with_fds),
		cmocka_unit_test(test_large_payload),
		cmocka_unit_test(test_send_interrupted),
		cmocka_unit_test(test_recv_in_pieces),
		cmocka_unit_test(test_check_header),
		cmocka_unit_test(test_recv_eof),
		cmocka_unit_test(test_recv_fd_mismatch),
		cmocka_unit_test(test_recv_too_many_fds),
		cmocka_unit_test(test_recv_refuses_before_payload),
		cmocka_unit_test(test_send_to_closed_peer),
		cmocka_unit_test(test_name_valid),
		cmocka_unit_test(test_set_name),
	};

	return cmocka_run_group_tests_name("proto", tests, NULL, NULL);
}
