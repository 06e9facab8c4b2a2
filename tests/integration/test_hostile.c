/* SPDX-License-Identifier: MIT */
/*
 * test_hostile.c - attacks on a real hugepoold by hostile local clients, one case per finding
 * of the "hostile local clients" audit that concerns the connection layer and the pool (the
 * journal's and the spill service's attacks live in test_journal_hostile.c and test_spill.c).
 *
 * Where an attack crosses users, the attacker and the victim are clients of two uids: the test
 * runs as root and runs the other side as HARNESS_OTHER_UID (harness_as_uid); without root
 * those cases are skipped with a message. Every case asserts what the attacker could not get
 * or do, and that other clients were served meanwhile. None asserts a duration.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hugepool.h"
#include "jring.h"
#include "proto.h"
#include "case.h"
#include "closer.h"
#include "fds.h"
#include "util.h"

#define MIB (1024ull * 1024)

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static bool all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

/* One request as bytes (header + payload) appended to out; returns the new length. */
static size_t put_request(uint8_t *out, size_t at, enum proto_type type, const void *payload, uint32_t len)
{
	struct proto_hdr h;

	proto_hdr_init(&h, type, len, 0);
	memcpy(out + at, &h, sizeof(h));
	if (len)
		memcpy(out + at + sizeof(h), payload, len);
	return at + sizeof(h) + len;
}

/* --- finding 1: a delayed GRANT must carry the buffer it names, nobody else's ------------- */

struct attack {
	const char *socket;
	int ready, held; /* pipes: attacker -> victim "go ahead", victim -> attacker "I hold it (y/n)" */
};

/*
 * The attacker (another uid) pipelines many status requests and an acquire without reading, so
 * that its GRANT waits in the daemon's reply queue; learns the lease id from its own status;
 * releases it; lets the victim acquire the buffer (renewed for the victim's uid: a new memfd);
 * then reads its replies. Before the fix the queued GRANT held only the fd *number*, which the
 * renewal had reused for the victim's memfd, so the attacker mapped the victim's memory.
 * Returns 0 when it got nothing of the victim's, 13 when it did, 20+ on a setup error.
 */
static int attacker_main(void *arg)
{
	const struct attack *at = arg;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const size_t nstatus = 4000;
	uint8_t *req = malloc((nstatus + 2) * (sizeof(struct proto_hdr) + sizeof(struct proto_acquire) + 16));
	struct proto_acquire acq = { .count = 1, .timeout_ms = 0 };
	struct hp_status *st = NULL;
	int a, fds[PROTO_MAX_FDS], got_fd = -1, leaked = 0;
	uint64_t id = 0;
	size_t len = 0, off = 0;
	hp_conn *c;
	char x;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", at->socket);
	if (!req || hp_connect(at->socket, &c) < 0)
		return 20;
	a = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (a < 0 || connect(a, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return 21;
	{
		struct proto_hello h = { .name = "attacker" };

		len = put_request(req, len, PROTO_HELLO, &h, sizeof(h));
	}
	/* replies it will not read for a while: far more than a socket holds */
	for (size_t i = 0; i < nstatus; i++) {
		struct proto_status_req sr = { 0 };

		len = put_request(req, len, PROTO_STATUS, &sr, sizeof(sr));
	}
	proto_set_name(acq.class_name, sizeof(acq.class_name), "one");
	len = put_request(req, len, PROTO_ACQUIRE, &acq, sizeof(acq));
	fcntl(a, F_SETFL, O_NONBLOCK);
	while (off < len) {
		ssize_t n = write(a, req + off, len - off);

		if (n < 0 && errno == EAGAIN)
			break; /* the daemon stopped reading it (backpressure): the acquire may not be in */
		if (n <= 0)
			return 22;
		off += (size_t)n;
	}
	/* if the daemon took the acquire, its GRANT waits behind the statuses: find its id */
	for (int i = 0; i < 200 && !id; i++) {
		if (hp_status(c, &st) < 0)
			return 23;
		for (uint32_t k = 0; k < st->nleases; k++)
			if (st->leases[k]->uid == getuid())
				id = st->leases[k]->lease_id;
		hp_status_free(st);
		if (!id)
			sleep_ms(5);
	}
	if (id && off == len) {
		struct {
			struct proto_release r;
			uint64_t id;
		} rl = { { .n = 1 }, id };

		len = put_request(req, 0, PROTO_RELEASE, &rl, sizeof(rl));
		if (write(a, req, len) != (ssize_t)len)
			id = 0; /* not taken: the daemon is not reading this connection */
	}
	/* the victim may take the buffer now; then read everything that was sent */
	if (write(at->ready, "r", 1) != 1 || read(at->held, &x, 1) != 1)
		return 24;
	fcntl(a, F_SETFL, 0);
	for (;;) {
		struct pollfd pfd = { .fd = a, .events = POLLIN };
		struct proto_hdr h;
		void *payload = NULL;

		if (poll(&pfd, 1, 2000) <= 0 || proto_recv(a, &h, &payload, fds, PROTO_MAX_FDS) < 0)
			break;
		free(payload);
		if (h.type == PROTO_GRANT && h.nfds == 1)
			got_fd = fds[0];
		if (h.type == PROTO_GRANT && !id)
			break; /* never released: nothing more comes */
		if (h.type == PROTO_RESULT && got_fd >= 0)
			break; /* the answer to the release */
	}
	if (got_fd >= 0 && x == 'y') {
		unsigned char *p = mmap(NULL, 2 * MIB, PROT_READ, MAP_SHARED, got_fd, 0);

		/* whatever the attacker holds, it must never be the victim's memory */
		if (p != MAP_FAILED && all_bytes(p, 2 * MIB, 0x5a))
			leaked = 1;
		if (p != MAP_FAILED)
			munmap(p, 2 * MIB);
	}
	close(a);
	hp_disconnect(c);
	free(req);
	return leaked ? 13 : 0;
}

static void test_delayed_grant_is_not_another_uids_buffer(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	struct attack at;
	int ready[2], held[2], code;
	struct hp_buffer buf;
	hp_conn *c;
	pid_t pid;
	char x;
	(void)state;

	if (!harness_two_uids())
		skip();
	start(&d, NULL, "[class one]\nsize = 2M\ncount = 1\n");
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(held), 0);
	at = (struct attack){ d.socket, ready[1], held[0] };
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(harness_as_uid(HARNESS_OTHER_UID, attacker_main, &at));
	/* the victim (this uid) takes the buffer once the attacker says so, and writes its secret */
	assert_int_equal(read(ready[0], &x, 1), 1);
	c = conn(&d);
	x = hp_acquire(c, "one", 1, 1500, &buf) == 0 ? 'y' : 'n';
	if (x == 'y')
		memset(buf.addr, 0x5a, buf.size);
	assert_int_equal(write(held[1], &x, 1), 1);
	assert_int_equal(waitpid(pid, &code, 0), pid);
	assert_true(WIFEXITED(code));
	assert_int_equal(WEXITSTATUS(code), 0);
	for (int i = 0; i < 2; i++) {
		close(ready[i]);
		close(held[i]);
	}
	hp_disconnect(c);
	stop(&d);
}

/* --- helpers that look at the daemon from outside ------------------------------------------ */

/* Resident memory of process pid in KiB. */
static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

/* Write as much of buf as the socket takes now; returns the bytes written. */
static size_t write_some(int fd, const void *buf, size_t len)
{
	size_t off = 0;
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	while (off < len) {
		ssize_t n = write(fd, (const char *)buf + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	fcntl(fd, F_SETFL, fl);
	return off;
}

/* The daemon still answers a new client (with its one class); then stop it cleanly. */
static void assert_serves_and_stop(struct daemon *d)
{
	hp_conn *c = conn(d);
	struct hp_status *st = status(c);

	assert_int_equal(st->nclasses, 1);
	hp_status_free(st);
	hp_disconnect(c);
	stop(d);
}

/* --- finding 3: an fd a client passes never gets to the daemon's event loop --------------- */

static bool kernel_refuses_fds(void)
{
	int sv[2], zero = 0;
	bool ok;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return false;
	ok = setsockopt(sv[0], SOL_SOCKET, 83 /* SO_PASSRIGHTS */, &zero, sizeof(zero)) == 0;
	close(sv[0]);
	close(sv[1]);
	return ok;
}

/*
 * A TCP connection on loopback whose close lingers: SO_LINGER for `seconds`, and unsent data
 * queued to a peer that never accepts it (the listener, returned in *listener). Whoever closes
 * its last reference waits until the data is taken or the time is up.
 */
static int lingering_socket(int *listener, int seconds)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t slen = sizeof(sin);
	struct linger lg = { 1, seconds };
	static char junk[1 << 16];
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), t;

	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sin, &slen), 0);
	t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(t, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(setsockopt(t, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	while (write_some(t, junk, sizeof(junk)) == sizeof(junk))
		; /* until the peer's window and our send buffer are full */
	*listener = l;
	return t;
}

/* Take what a lingering socket's peer was sent, until its close ends (EOF), so the linger ends. */
static void drain_listener(int l)
{
	static char junk[1 << 16];
	int peer = accept(l, NULL, NULL);

	assert_true(peer >= 0);
	for (;;) {
		struct pollfd pfd = { .fd = peer, .events = POLLIN };

		if (poll(&pfd, 1, 10000) <= 0 || read(peer, junk, sizeof(junk)) <= 0)
			break;
	}
	close(peer);
}

/*
 * Close a lingering socket whose last reference may be the caller's: its linger is turned off
 * first (the unsent data is dropped with a reset), so the close cannot wait for an hour.
 */
static void close_unlingered(int t)
{
	static const struct linger off = { .l_onoff = 1, .l_linger = 0 };

	assert_int_equal(setsockopt(t, SOL_SOCKET, SO_LINGER, &off, sizeof(off)), 0);
	close(t);
}

/*
 * The attack of the audit: a TCP socket whose close lingers (SO_LINGER 10 s, unsent data queued
 * to a peer that never reads), passed to the daemon. Closing the daemon's copy on the event loop
 * held it for the linger time. Now the kernel refuses the fd at the client's sendmsg (EPERM),
 * so it never reaches the daemon; on kernels without SO_PASSRIGHTS the connection is closed
 * and the fd closed on a background thread.
 */
static void test_passed_fd_refused(void **state)
{
	struct proto_status_req req = { 0 };
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	int l, t, fd, r;
	(void)state;

	start(&d, NULL, "[class one]\nsize = 2M\ncount = 1\n");
	t = lingering_socket(&l, 10);
	fd = raw_connect(&d);
	assert_true(fd >= 0);
	r = proto_send(fd, PROTO_STATUS, &req, sizeof(req), &t, 1);
	if (kernel_refuses_fds()) {
		assert_int_equal(r, -EPERM);
	} else {
		char b;

		assert_int_equal(r, 0);
		assert_int_equal(read(fd, &b, 1), 0); /* closed for it */
	}
	if (r == -EPERM)
		close_unlingered(t); /* refused: ours is the last reference, its close would linger */
	else
		close(t);
	close(l);
	/* the connection that tried is still served (nothing arrived), and so is everyone else */
	if (r == -EPERM) {
		struct proto_hdr h;
		void *payload = NULL;

		assert_int_equal(proto_send(fd, PROTO_STATUS, &req, sizeof(req), NULL, 0), 0);
		assert_int_equal(proto_recv(fd, &h, &payload, NULL, 0), 0);
		assert_int_equal(h.type, PROTO_STATUS_REPLY);
		free(payload);
	}
	close(fd);
	assert_serves_and_stop(&d);
}

/*
 * The same attack on a kernel without SO_PASSRIGHTS (the daemon runs under nopassrights, a
 * seccomp wrapper that makes setsockopt(SO_PASSRIGHTS) fail as before Linux 6.16): the fd
 * arrives, the connection is closed, and the fd is closed on the closer thread. Its linger
 * here is an hour and nothing drains the data until the test has its status answer, so a
 * daemon that closed the fd on its event loop would never answer (the suite's timeout ends
 * the test then).
 */
static void test_passed_fd_closed_off_loop(void **state)
{
	struct harness_opts o = { .wrapper = "tests/nopassrights" };
	struct proto_status_req req = { 0 };
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	int l, t, fd, r;
	char b;
	(void)state;

	r = harness_start_opts(&d, NULL, "[class one]\nsize = 2M\ncount = 1\n", &o);
	running = r == 0 ? &d : NULL;
	assert_int_equal(r, 0);
	assert_int_equal(harness_log_count(&d, "cannot refuse fds at the socket"), 1);
	t = lingering_socket(&l, 3600);
	fd = raw_connect(&d);
	assert_true(fd >= 0);
	/* the daemon's copy must be the last one: ours goes while the daemon cannot run, with the
	 * fd still in flight (had the daemon closed its copy first, this close would linger) */
	assert_int_equal(kill(d.pid, SIGSTOP), 0);
	assert_int_equal(proto_send(fd, PROTO_STATUS, &req, sizeof(req), &t, 1), 0);
	close(t);
	assert_int_equal(kill(d.pid, SIGCONT), 0);
	assert_true(read(fd, &b, 1) <= 0); /* closed for it (EOF, or a reset: it left a payload unread) */
	close(fd);
	/* answered while the passed socket still lingers */
	{
		hp_conn *c = conn(&d);
		struct hp_status *st = status(c);

		assert_true(st->protocol_errors >= 1);
		hp_status_free(st);
		hp_disconnect(c);
	}
	/* let the linger end: take the data, until the daemon's close sends FIN */
	drain_listener(l);
	close(l);
	stop(&d);
}

/* What became of fds passed to the daemon (pass_fds). */
enum pass { PASSED, REFUSED };

/*
 * Pass n fds (at most 253, SCM_MAX_FD) with a status request on a new raw connection of d's.
 * REFUSED when the daemon did not admit the connection (its uid has more than
 * CLOSER_PENDING_MAX fds still waiting to be closed): nothing was passed, and the caller's fds
 * are its own last references. A refusal is an answer other than WELCOME, or the connection
 * ending in its place: the daemon sends its refusal and closes at once, so the hello may be
 * cut off (EPIPE) or the answer lost to a reset (ECONNRESET) before the test reads it.
 * With give, fds are the daemon's once passed: the test closes its copies while the daemon is
 * stopped, so that the copies in flight are the last ones whatever the daemon does next.
 */
static enum pass pass_fds(const struct daemon *d, const int *fds, unsigned n, bool give)
{
	struct {
		struct proto_hdr h;
		struct proto_status_req req;
	} m = { .req = { 0 } };
	union {
		char buf[CMSG_SPACE(sizeof(int) * 253)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf,
			      .msg_controllen = CMSG_SPACE(sizeof(int) * n) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct proto_hello hello = { .name = "raw" };
	struct proto_hdr rh;
	void *payload = NULL;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

	assert_true(fd >= 0 && n <= 253);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->socket);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	r = proto_send(fd, PROTO_HELLO, &hello, sizeof(hello), NULL, 0);
	if (r == 0)
		r = proto_recv(fd, &rh, &payload, NULL, 0);
	free(payload);
	if (r == -EPIPE || r == -ECONNRESET || (r == 0 && rh.type != PROTO_WELCOME)) {
		close(fd);
		return REFUSED;
	}
	assert_int_equal(r, 0);
	proto_hdr_init(&m.h, PROTO_STATUS, sizeof(m.req), 0);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	if (give)
		assert_int_equal(kill(d->pid, SIGSTOP), 0);
	assert_int_equal(sendmsg(fd, &msg, MSG_NOSIGNAL), (ssize_t)sizeof(m));
	if (give) {
		for (unsigned i = 0; i < n; i++)
			close(fds[i]);
		assert_int_equal(kill(d->pid, SIGCONT), 0);
	}
	close(fd);
	return PASSED;
}

/* A client says hello and is welcomed (0), not refused (1) nor left without an answer (2). */
static int victim_main(void *arg)
{
	const char *path = arg; /* the daemon's socket */
	struct timeval tv = { .tv_sec = 30 }; /* only tells a hung loop from an answer */
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct proto_hello hello = { .name = "victim" };
	struct proto_hdr h;
	void *payload = NULL;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || proto_send(fd, PROTO_HELLO, &hello, sizeof(hello), NULL, 0) < 0)
		return 3;
	r = proto_recv(fd, &h, &payload, NULL, 0) < 0 ? 2 : h.type == PROTO_WELCOME ? 0 : 1;
	free(payload);
	close(fd);
	return r;
}

/*
 * Pass d an fd whose close blocks until the test lets it go (drain_listener(*listener)): a Unix
 * socket with a lingering TCP socket in flight in it. The daemon turns off the linger of the
 * sockets it receives, not of one inside another: closing the Unix socket releases the TCP
 * socket on the closing thread, which then waits for its unsent data to be taken. The closer
 * thread of the test's uid is stuck on it, and that uid's fds wait in its queue meanwhile.
 */
static void pass_blocker(const struct daemon *d, int *listener)
{
	struct proto_status_req req = { 0 };
	int sv[2], t = lingering_socket(listener, 3600);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(proto_send(sv[1], PROTO_STATUS, &req, sizeof(req), &t, 1), 0);
	close(t); /* its last reference is the one in flight in sv[0] */
	close(sv[1]);
	assert_int_equal(pass_fds(d, &sv[0], 1, true), PASSED);
}

/*
 * The second audit's read found the closer's queue bounded at 4096 and, once full, fds closed
 * on the event loop ("no better place left"). One uid blocked the closer thread with a socket
 * lingering for an hour, filled the queue with copies of /dev/null, and passed a second
 * lingering socket: the event loop sat in close() for the hour, nobody served. Now nothing is
 * ever closed on the loop (queues grow, per uid, each worked on by one thread), a socket's
 * linger is turned off before its close, and past CLOSER_PENDING_MAX fds waiting the uid's
 * connections are refused. Both ends of the race are taken in turn: the closer is held on a
 * blocker, so a lingering socket passed early is queued, and one passed once the queue is
 * past the bound is refused with its connection. A client of another uid is answered
 * throughout (the receive timeout only tells a hang from an answer).
 */
static void test_closer_never_blocks_loop(void **state)
{
	struct harness_opts o = { .wrapper = "tests/nopassrights" };
	static struct daemon d;
	static int nulls[253];
	int lb, l1, l2, t;
	unsigned batches = 0;

	(void)state;
	if (!harness_two_uids())
		skip();
	assert_int_equal(harness_start_opts(&d, NULL, "[class one]\nsize = 2M\ncount = 1\n", &o), 0);
	running = &d;
	pass_blocker(&d, &lb);
	/* queued behind the blocker: the daemon holds a reference, ours is not the last */
	t = lingering_socket(&l1, 3600);
	assert_int_equal(pass_fds(&d, &t, 1, false), PASSED);
	close(t);
	/* nothing drains the queue now: the uid is refused within a few batches past the bound
	 * (a batch is 253 fds and its connection; the daemon may not have read the last batches
	 * when it admits the next connection) */
	for (unsigned i = 0; i < ARRAY_SIZE(nulls); i++)
		assert_true((nulls[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0);
	while (batches < 16 && pass_fds(&d, nulls, ARRAY_SIZE(nulls), false) == PASSED)
		batches++;
	assert_true(batches >= CLOSER_PENDING_MAX / (ARRAY_SIZE(nulls) + 1) && batches < 16);
	/* refused with its connection: nothing passed, the test's copy is the last reference,
	 * and its close would wait for the hour */
	t = lingering_socket(&l2, 3600);
	assert_int_equal(pass_fds(&d, &t, 1, false), REFUSED);
	close_unlingered(t);
	/* a client of another uid is welcomed: the bound is per uid */
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, victim_main, (void *)d.socket), 0);
	/* let the blocked close end: the queue drains, and the daemon stops as usual */
	drain_listener(lb);
	for (unsigned i = 0; i < ARRAY_SIZE(nulls); i++)
		close(nulls[i]);
	close(lb);
	close(l1);
	close(l2);
	stop(&d);
}

/*
 * Found while mending the case above: on a kernel without SO_PASSRIGHTS a client may send fds
 * before its hello, into a connection the daemon has not accepted yet. A connection the daemon
 * refuses (here: past max_connections_per_uid) was closed on the event loop, and closing it
 * released the fds still in flight in it there: a lingering socket among them held the loop
 * for its linger time, nobody served. Now a refused connection is shut (its client can add
 * nothing more) and whatever it carried is closed on the closer's threads, charged to its uid.
 */
static void test_refused_connection_closed_off_loop(void **state)
{
	struct harness_opts o = { .wrapper = "tests/nopassrights" };
	struct proto_hello hello = { .name = "carrier" };
	static struct daemon d;
	hp_conn *held;
	int l, t, fd;

	(void)state;
	if (!harness_two_uids())
		skip();
	assert_int_equal(harness_start_opts(&d, "max_connections_per_uid = 1\n", "[class one]\nsize = 2M\ncount = 1\n", &o),
			 0);
	running = &d;
	held = conn(&d); /* the uid's one connection: the next is refused */
	t = lingering_socket(&l, 3600);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	{
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d.socket);
		/* stopped, the daemon accepts nothing: the hello and t wait in the new connection, and
		 * the copy in flight is t's last reference once ours is closed */
		assert_int_equal(kill(d.pid, SIGSTOP), 0);
		assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		assert_int_equal(proto_send(fd, PROTO_HELLO, &hello, sizeof(hello), &t, 1), 0);
		close(t);
		assert_int_equal(kill(d.pid, SIGCONT), 0);
	}
	/* refused: an answer that is not a welcome, or the connection's end */
	{
		struct proto_hdr h;
		void *payload = NULL;
		int r = proto_recv(fd, &h, &payload, NULL, 0);

		free(payload);
		assert_true(r == -ECONNRESET || (r == 0 && h.type == PROTO_RESULT));
	}
	close(fd);
	/* a client of another uid is welcomed while t still lingers */
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, victim_main, (void *)d.socket), 0);
	drain_listener(l);
	close(l);
	hp_disconnect(held);
	stop(&d);
}

/* --- finding 4: fds a client makes the daemon queue are bounded ---------------------------- */

#define JOURNAL "[journal j]\ndirectory = @DIR@/j\nsegment_size = 1M\n"

/*
 * JOURNAL_READ answers with up to 32 segment fds. A client that pipelines reads without reading
 * the answers made the daemon queue fds without bound (until EMFILE for everyone). Now a
 * connection's next request is not read while any fd of its replies waits to be sent.
 */
static void test_queued_fds_bounded(void **state)
{
	struct proto_journal_read jr = { .from_lsn = 1 };
	const size_t nreq = 400;
	size_t len = 0, rl = sizeof(struct proto_hdr) + sizeof(jr);
	uint8_t *req = malloc(nreq * rl);
	char rec[4000] = { 1 };
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	hp_journal *j;
	uint64_t lsn;
	int a, base, most = 0;
	hp_conn *c;
	(void)state;

	start(&d, NULL, JOURNAL);
	c = conn(&d);
	/* a few segments' worth of records, so that each read answers with several fds */
	assert_int_equal(hp_journal_open(c, "j", &j), 0);
	for (int i = 0; i < 600; i++)
		assert_int_equal(hp_journal_append_wait(j, rec, sizeof(rec), &lsn), 0);
	hp_journal_close(j);
	base = count_fds_of(d.pid);
	assert_true(base > 0);
	proto_set_name(jr.name, sizeof(jr.name), "j");
	for (size_t i = 0; i < nreq; i++)
		len = put_request(req, len, PROTO_JOURNAL_READ, &jr, sizeof(jr));
	a = raw_connect(&d);
	assert_true(a >= 0);
	write_some(a, req, len);
	/* whatever the daemon took of it, it holds at most one reply's fds for this client */
	for (int i = 0; i < 50; i++) {
		most = MAX(most, count_fds_of(d.pid) - base);
		sleep_ms(10);
	}
	assert_true(most <= 1 + PROTO_MAX_FDS);
	close(a);
	free(req);
	hp_disconnect(c);
	stop(&d);
}

/*
 * Out of fds, accept() fails and the listener stays readable: the loop spun and logged each
 * failure (~260,000 lines/s). The daemon runs here with a limit of 48 fds and gets 80
 * connections: the failure is logged a few times, the extra connections are closed, and once
 * they are gone it serves again.
 */
static void test_out_of_fds(void **state)
{
	char wrapper[128];
	struct harness_opts o = { .wrapper = wrapper };
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	int fds[80], r;
	FILE *f;
	(void)state;

	snprintf(wrapper, sizeof(wrapper), "/tmp/hugepool-test-ulimit.%d", (int)getpid());
	f = fopen(wrapper, "we");
	assert_non_null(f);
	fputs("#!/bin/sh\nulimit -n 48\nexec \"$@\"\n", f);
	fclose(f);
	chmod(wrapper, 0755);
	r = harness_start_opts(&d, NULL, "[class one]\nsize = 2M\ncount = 1\n", &o);
	unlink(wrapper);
	running = r == 0 ? &d : NULL;
	assert_int_equal(r, 0);
	for (unsigned i = 0; i < ARRAY_SIZE(fds); i++) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d.socket);
		fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(fds[i] >= 0);
		assert_int_equal(connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	/* until the daemon met its limit (the deadline only tells a hang from an answer) */
	for (unsigned i = 0; i < 3000 && harness_log_count(&d, "Cannot accept connections") == 0; i++)
		sleep_ms(10);
	for (unsigned i = 0; i < ARRAY_SIZE(fds); i++)
		close(fds[i]);
	/* logged a few times, not once per attempt */
	r = harness_log_count(&d, "ccept");
	assert_true(r >= 1);
	assert_true(r <= 6);
	/* served again once it closed the connections that took its fds: until then a new one is
	 * accepted on the reserve fd and closed (or not accepted while the listener pauses) */
	for (unsigned i = 0; i < 3000; i++) {
		hp_conn *c = NULL;

		if (hp_connect(d.socket, &c) == 0) {
			hp_disconnect(c);
			break;
		}
		sleep_ms(10);
	}
	assert_serves_and_stop(&d);
}

/* --- finding 8: a client that does not read its replies holds little of the daemon -------- */

/*
 * Status requests pipelined without reading the answers: the daemon read them all and queued the
 * replies (8 connections held 534 MB). Now it stops reading that client while its replies wait,
 * so the daemon's memory hardly grows while the client sends far more than that.
 */
static void test_unread_replies_bounded(void **state)
{
	const size_t nreq = 40000;
	size_t rl = sizeof(struct proto_hdr) + sizeof(struct proto_status_req), len = 0, sent = 0;
	uint8_t *req = malloc(nreq * rl);
	struct proto_status_req sr = { 0 };
	hp_conn *idle[40];
	long base, most = 0;
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	int a;
	(void)state;

	start(&d, NULL, "[class one]\nsize = 2M\ncount = 1\n");
	/* a larger status: one entry per client */
	for (unsigned i = 0; i < ARRAY_SIZE(idle); i++)
		idle[i] = conn(&d);
	for (size_t i = 0; i < nreq; i++)
		len = put_request(req, len, PROTO_STATUS, &sr, sizeof(sr));
	a = raw_connect(&d);
	assert_true(a >= 0);
	base = rss_kib(d.pid);
	for (int i = 0; i < 50; i++) {
		sent += write_some(a, req + sent, len - sent);
		most = MAX(most, rss_kib(d.pid) - base);
		sleep_ms(10);
	}
	/* each status is about 6 KB here: all of them would be 240 MB */
	assert_true(most < 16 * 1024);
	close(a);
	for (unsigned i = 0; i < ARRAY_SIZE(idle); i++)
		hp_disconnect(idle[i]);
	free(req);
	stop(&d);
}

/* --- finding 11: status names other users' clients only to administrators ----------------- */

/* As another uid: status must show our own client but no pid, name or lease of uid 0's. */
static int peek_main(void *arg)
{
	const char *socket = arg; /* the daemon's */
	struct hp_status *st;
	bool own = false, foreign = false;
	hp_conn *c;

	if (hp_connect(socket, &c) < 0 || hp_status(c, &st) < 0)
		return 20;
	for (uint32_t i = 0; i < st->nclients; i++) {
		own |= st->clients[i]->uid == getuid() && st->clients[i]->pid == getpid();
		foreign |= st->clients[i]->uid != getuid();
		/* uid 0's client reports heaps; none of its figures may show here */
		foreign |= st->clients[i]->heaps.heaps != 0 || st->clients[i]->heaps.heap_bytes != 0;
	}
	for (uint32_t i = 0; i < st->nleases; i++)
		foreign |= st->leases[i]->uid != getuid();
	/* the pool's own figures name nobody and stay visible */
	if (st->nclasses != 1 || st->classes[0]->leased != 1)
		return 21;
	hp_status_free(st);
	hp_disconnect(c);
	return !own ? 22 : foreign ? 13 : 0;
}

static void test_status_hides_other_uids(void **state)
{
	struct hp_buffer b;
	struct hp_status *st;
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	hp_conn *c;
	(void)state;

	if (!harness_two_uids())
		skip();
	start(&d, NULL, "[class one]\nsize = 2M\ncount = 2\n");
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 1, 1000, &b), 0);
	assert_int_equal(hp_conn_report_heaps(c, 7, 1, 12345), 0);
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, peek_main, d.socket), 0);
	/* root still sees everyone, and its client's heaps */
	st = status(c);
	assert_int_equal(st->nleases, 1);
	assert_true(st->nclients >= 1);
	for (uint32_t i = 0; i < st->nclients; i++)
		if (st->clients[i]->pid == getpid()) {
			assert_int_equal(st->clients[i]->heaps.heaps, 7);
			assert_int_equal(st->clients[i]->heaps.heap_bytes, 12345);
		}
	hp_status_free(st);
	hp_release(c, &b, 1);
	hp_disconnect(c);
	stop(&d);
}

/*
 * As another uid in monitor_group: status shows uid 0's client, its lease and its heaps, and the
 * machine's spill figures (uid 0 holds a spill file; the uid has none of its own); a restart is
 * still refused.
 */
static int monitor_main(void *arg)
{
	const char *socket = arg; /* the daemon's */
	struct hp_status *st;
	bool foreign = false;
	hp_conn *c;
	int r;

	if (hp_connect(socket, &c) < 0 || hp_status(c, &st) < 0)
		return 20;
	for (uint32_t i = 0; i < st->nclients; i++)
		foreign |= st->clients[i]->uid == 0 && st->clients[i]->heaps.heaps == 7;
	r = !foreign ? 13 : st->nleases != 1 || st->leases[0]->uid != 0 ? 14 : st->spill.files != 1 ? 15 : 0;
	/* version 6: root's spill account, and the reply says it shows all */
	if (r == 0 && (st->nspill_uids != 1 || st->spill_uids[0]->uid != 0 || !st->server.sees_all))
		r = 17;
	hp_status_free(st);
	if (r == 0 && hp_daemon_restart(c) != -EPERM)
		r = 16;
	hp_disconnect(c);
	return r;
}

static void test_monitor_group_sees_all(void **state)
{
	struct hp_spill_opts o = { .threshold = HP_SPILL_ALWAYS_FILE };
	struct hp_buffer b;
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	hp_spill *sp;
	hp_conn *c;
	(void)state;

	if (!harness_two_uids())
		skip();
	/* the other uid's only group is HARNESS_OTHER_UID's, nogroup */
	start(&d, "monitor_group = nogroup\n", "[class one]\nsize = 2M\ncount = 2\n");
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 1, 1000, &b), 0);
	assert_int_equal(hp_conn_report_heaps(c, 7, 1, 12345), 0);
	assert_int_equal(hp_spill_open(c, &o, &sp), 0);
	assert_int_equal(hp_spill_write(sp, "x", 1), 0);
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, monitor_main, d.socket), 0);
	/* without it, the same uid sees none of it (test_status_hides_other_uids) */
	hp_spill_close(sp);
	hp_release(c, &b, 1);
	hp_disconnect(c);
	stop(&d);
}

/* --- finding 6 (limits): one uid cannot take every journal writer slot ------------------- */

/* As another uid: open writers over several connections until refused; 0 if refused with
 * -EUSERS after exactly 5 (max_journal_writers_per_uid below). */
static int writers_main(void *arg)
{
	const char *socket = arg; /* the daemon's */
	hp_conn *c[3];
	hp_journal *j[12];
	int n = 0, r = 0;

	for (int i = 0; i < 3; i++)
		if (hp_connect(socket, &c[i]) < 0)
			return 20;
	while (n < 12 && (r = hp_journal_open(c[n % 3], "j", &j[n])) == 0)
		n++;
	for (int i = 0; i < n; i++)
		hp_journal_close(j[i]);
	for (int i = 0; i < 3; i++)
		hp_disconnect(c[i]);
	return n == 5 && r == -EUSERS ? 0 : 13;
}

static void test_journal_writers_per_uid(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	hp_journal *j;
	hp_conn *c;
	(void)state;

	if (!harness_two_uids())
		skip();
	start(&d, "max_journal_writers_per_uid = 5\n", JOURNAL "append = 65534\n");
	c = conn(&d);
	/* uid 0 holds one writer throughout; the other uid's limit is its own */
	assert_int_equal(hp_journal_open(c, "j", &j), 0);
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, writers_main, d.socket), 0);
	hp_journal_close(j);
	hp_disconnect(c);
	stop(&d);
}

/* --- finding 9: a buffer whose pages a holder punched out is not handed back warm --------- */

/*
 * The seals do not stop fallocate(PUNCH_HOLE): a holder can give a leased buffer's pages back
 * to the kernel. Handed back as it is to the same uid (the warm path), the buffer then faults
 * its pages in again, and with hugetlb pages short that is SIGBUS in the next holder. Now the
 * daemon sees the hole and renews the buffer first: fresh, whole, zeroed.
 */
static void test_punched_buffer_renewed(void **state)
{
	struct hp_buffer b;
	struct hp_status *st;
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	hp_conn *c;
	(void)state;

	start(&d, NULL, "[class one]\nsize = 2M\ncount = 1\n");
	c = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 1, 1000, &b), 0);
	memset(b.addr, 0x11, b.size);
	/* MADV_REMOVE punches the hole through the mapping, as fallocate would through the fd */
	assert_int_equal(madvise(b.addr, b.size, MADV_REMOVE), 0);
	assert_int_equal(hp_release(c, &b, 1), 0);
	assert_int_equal(hp_acquire(c, "one", 1, 1000, &b), 0);
	st = status(c);
	assert_int_equal(st->recycled_buffers, 1);
	hp_status_free(st);
	assert_true(all_bytes(b.addr, b.size, 0));
	assert_int_equal(hp_release(c, &b, 1), 0);
	hp_disconnect(c);
	assert_int_equal(harness_log_count(&d, "punched out"), 1);
	stop(&d);
}

/* --- finding 9 (defaults): a waiter cannot hold back its class for ever ------------------ */

struct hog {
	const char *socket;
	int result;
};

static void *hog_main(void *arg)
{
	struct hog *h = arg;
	struct hp_buffer b[2];
	hp_conn *c;

	h->result = hp_connect(h->socket, &c);
	if (h->result < 0)
		return NULL;
	/* the whole class, waiting "for ever": at the head of the queue it holds back everyone */
	h->result = hp_acquire(c, "one", 2, -1, b);
	if (h->result == 0)
		hp_release(c, b, 2);
	hp_disconnect(c);
	return NULL;
}

static void test_acquire_wait_capped(void **state)
{
	struct hog h;
	struct hp_buffer held, b;
	struct hp_status *st;
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	pthread_t t;
	hp_conn *c, *v;
	uint32_t waiters = 0;
	(void)state;

	/* the cap is long enough that a loaded machine still sees the hog wait before it is cut */
	start(&d, "max_acquire_wait = 2s\n", "[class one]\nsize = 2M\ncount = 2\n");
	c = conn(&d);
	v = conn(&d);
	assert_int_equal(hp_acquire(c, "one", 1, 1000, &held), 0);
	h = (struct hog){ d.socket, 1 };
	assert_int_equal(pthread_create(&t, NULL, hog_main, &h), 0);
	for (int i = 0; i < 6000 && waiters == 0; i++) { /* bounded only so a broken daemon cannot hang */
		st = status(c);
		waiters = st->classes[0]->waiters;
		hp_status_free(st);
		if (!waiters)
			sleep_ms(5);
	}
	assert_int_equal(waiters, 1);
	/* one buffer is free, but the hog is ahead: the victim is served once its wait is cut */
	assert_int_equal(hp_acquire(v, "one", 1, 10000, &b), 0);
	pthread_join(t, NULL);
	assert_int_equal(h.result, -ETIMEDOUT);
	hp_release(v, &b, 1);
	hp_release(c, &held, 1);
	hp_disconnect(v);
	hp_disconnect(c);
	stop(&d);
}

/*
 * The per-uid byte limits stay unlimited by default (one engine owns the usual pool); a socket
 * open to every user with either of them 0 is said at start, once; with both set, or a socket
 * for the daemon's group only, nothing is said.
 */
static void test_open_socket_without_uid_limits(void **state)
{
	static const char *const notice = "Every user of this machine may connect";
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */

	(void)state;
	start(&d, "", "[class one]\nsize = 2M\ncount = 1\n"); /* the harness's socket is 0666 */
	assert_int_equal(harness_log_count(&d, notice), 1);
	assert_int_equal(harness_log_count(&d, "max_bytes_per_uid (the pool) and spill_max_bytes_per_uid"), 1);
	stop(&d);
	start(&d, "max_bytes_per_uid = 2M\nspill_max_bytes_per_uid = 1G\n", "[class one]\nsize = 2M\ncount = 1\n");
	assert_int_equal(harness_log_count(&d, notice), 0);
	stop(&d);
	start(&d, "socket_mode = 0660\n", "[class one]\nsize = 2M\ncount = 1\n");
	assert_int_equal(harness_log_count(&d, notice), 0);
	stop(&d);
}

/* --- finding 6 (access): a journal is appended, read and truncated by whom it says -------- */

/* As another uid: a bit for each of append, read and truncate that was allowed. */
static int jaccess_main(void *arg)
{
	const char *socket = arg; /* the daemon's */
	hp_journal_reader *r;
	hp_journal *j;
	hp_conn *c;
	int allowed = 0, e;

	if (hp_connect(socket, &c) < 0)
		return 100;
	e = hp_journal_open(c, "j", &j);
	if (e == 0) {
		allowed |= 1;
		hp_journal_close(j);
	} else if (e != -EACCES) {
		return 101;
	}
	e = hp_journal_reader_open(c, "j", 1, &r);
	if (e == 0) {
		allowed |= 2;
		hp_journal_reader_close(r);
	} else if (e != -EACCES) {
		return 102;
	}
	e = hp_journal_truncate(c, "j", 1);
	if (e == 0)
		allowed |= 4;
	else if (e != -EACCES)
		return 103;
	hp_disconnect(c);
	return allowed;
}

/*
 * Any client could read any journal's records, truncate it (losing other users' unconsumed
 * records) or append to it. Now each is allowed to root, the daemon's uid and whom the journal's
 * "append", "read" and "truncate" name, by default the socket's group (here root's, so not the
 * other uid).
 */
static void test_journal_access(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	hp_journal *j;
	uint64_t lsn;
	hp_conn *c;
	(void)state;

	if (!harness_two_uids())
		skip();
	start(&d, NULL, JOURNAL);
	c = conn(&d);
	assert_int_equal(hp_journal_open(c, "j", &j), 0);
	assert_int_equal(hp_journal_append_wait(j, "x", 1, &lsn), 0);
	hp_journal_close(j);
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, jaccess_main, d.socket), 0);
	hp_disconnect(c);
	stop(&d);
	/* named by uid and by group, one operation each */
	start(&d, NULL, JOURNAL "read = 65534\ntruncate = @65534\nappend = root\n");
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, jaccess_main, d.socket), 2 | 4);
	stop(&d);
	/* a name that does not exist stops the daemon at start */
	start_refused(&d, NULL, JOURNAL "read = no-such-user-here\n", 4, "no user \"no-such-user-here\"");
}

/* --- second audit, finding 2: one uid's connect loop takes no slot from another ---------- */

#define FLOODERS 32

struct flood {
	const char *socket;
	struct harness_other o;
};

/* Connect and disconnect in a loop until the pipe fd says stop (its other end closed). */
static void flood_loop(const char *path, int stop)
{
	struct pollfd pfd = { .fd = stop, .events = POLLIN };

	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	while (poll(&pfd, 1, 0) == 0) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		/* not even a hello: as fast as connections can be made */
		(void)connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		close(fd);
	}
}

/*
 * As the other uid: hold max_connections_per_uid connections, then connect in a loop from 32
 * processes (each attempt refused: the uid is at its limit) until told to stop. Processes, not
 * threads: a thread sanitizer cannot start threads in the child of a process with threads.
 * 0, or 20+.
 */
static int flooder_main(void *arg)
{
	struct flood *f = arg;
	static hp_conn *held[64];
	pid_t kids[FLOODERS];

	harness_other_child(&f->o);
	for (int i = 0; i < 64; i++)
		if (hp_connect(f->socket, &held[i]) < 0)
			return 20;
	for (int i = 0; i < FLOODERS; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			return 21;
		if (kids[i] == 0) {
			flood_loop(f->socket, f->o.go[0]);
			_exit(0);
		}
	}
	if (harness_other_ready(&f->o) < 0)
		return 22;
	for (int i = 0; i < FLOODERS; i++)
		waitpid(kids[i], NULL, 0);
	for (int i = 0; i < 64; i++)
		hp_disconnect(held[i]);
	return 0;
}

/*
 * The daemon accepted every waiting connection in one turn and counted the refused ones against
 * max_connections until the turn ended, so a uid at its limit, reconnecting in a loop, made
 * another uid's connections fail with EUSERS ("already serves 100 connections") while ~65
 * connections were alive. Now a refused connection is never counted (it is answered and closed
 * at once) and the loop accepts a bounded number per turn: every one of the victim's
 * connect+hello+status is served.
 */
static void test_connect_flood_takes_no_slot(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	struct flood f;
	int failed = 0;

	(void)state;
	if (!harness_two_uids())
		skip();
	start(&d, "max_connections = 100\n", "[class one]\nsize = 2M\ncount = 1\n");
	f.socket = d.socket;
	assert_int_equal(harness_other_start(&f.o, HARNESS_OTHER_UID, flooder_main, &f), 0);
	for (int i = 0; i < 200; i++) {
		struct hp_status *st = NULL;
		hp_conn *c;
		int r = hp_connect(d.socket, &c);

		if (r == 0) {
			r = hp_status(c, &st);
			if (r == 0 && st->nclients > 100)
				r = -EOVERFLOW; /* more connections than allowed are alive */
			hp_status_free(st);
			hp_disconnect(c);
		}
		if (r < 0 && failed++ == 0)
			fprintf(stderr, "victim's connection %d: %s: %s\n", i, hp_strerror(r), hp_last_error(NULL));
	}
	if (failed)
		fprintf(stderr, "%d of the victim's 200 connections failed\n", failed);
	assert_int_equal(harness_other_finish(&f.o), 0);
	assert_int_equal(failed, 0);
	stop(&d);
}

/* --- second audit, finding 3: a revoked reader reads nothing written after its revocation -- */

#define RJOURNAL "[journal j]\ndirectory = @DIR@/j\nsegment_size = 1M\nsegments = 3\nwhen_full = recycle\n"
#define NEW_MARK "new record after the revocation"

struct revoked {
	const struct daemon *d;
	struct harness_other o;
};

/*
 * As the other uid, allowed to read j: keep the segment fds a JOURNAL_READ gave it, then once
 * its access is revoked and other records written, look at everything those fds show. 0 when no
 * record written after the revocation is there and a new read is refused; 13 when the records
 * leaked, 14 when the read was not refused, 20+ on a setup error.
 */
static int revoked_reader_main(void *arg)
{
	const struct revoked *rv = arg;
	struct proto_journal_read jr = { .from_lsn = 1 };
	int fds[PROTO_MAX_FDS], a = raw_connect(rv->d), leaked = 0, e;
	hp_journal_reader *r;
	struct proto_hdr h;
	void *payload = NULL;
	hp_conn *c;

	harness_other_child(&((struct revoked *)arg)->o);
	proto_set_name(jr.name, sizeof(jr.name), "j");
	if (proto_send(a, PROTO_JOURNAL_READ, &jr, sizeof(jr), NULL, 0) < 0 ||
	    proto_recv(a, &h, &payload, fds, PROTO_MAX_FDS) < 0 || h.type != PROTO_JOURNAL_SEGMENTS || h.nfds == 0)
		return 20;
	free(payload);
	if (harness_other_ready(&((struct revoked *)arg)->o) < 0)
		return 21;
	for (uint32_t i = 0; i < h.nfds; i++) {
		struct stat st;
		char *buf;

		if (fstat(fds[i], &st) < 0 || !(buf = malloc((size_t)st.st_size)) ||
		    pread(fds[i], buf, (size_t)st.st_size, 0) != st.st_size)
			return 22;
		leaked += memmem(buf, (size_t)st.st_size, NEW_MARK, strlen(NEW_MARK)) != NULL;
		free(buf);
		close(fds[i]);
	}
	close(a);
	if (hp_connect(rv->d->socket, &c) < 0)
		return 23;
	e = hp_journal_reader_open(c, "j", 1, &r);
	hp_disconnect(c);
	return leaked ? 13 : e == -EACCES ? 0 : 14;
}

/* Append n records (with mark) in batches, each batch waited for. */
static void append_many(hp_conn *c, const char *mark, unsigned n)
{
	static char rec[1000];
	struct iovec iov[50];
	hp_journal *j;
	uint64_t lsn;

	snprintf(rec, sizeof(rec), "%s", mark);
	for (unsigned i = 0; i < 50; i++)
		iov[i] = (struct iovec){ rec, sizeof(rec) };
	assert_int_equal(hp_journal_open(c, "j", &j), 0);
	for (unsigned i = 0; i < n; i += 50)
		assert_int_equal(hp_journal_appendv_wait(j, iov, 50, &lsn), 0);
	hp_journal_close(j);
}

/*
 * uid A may read journal j and keeps the segment fds JOURNAL_READ gave it. The administrator
 * takes A out of "read =" and restarts the daemon (a re-execution, or a stop and a start): A's
 * new requests are refused, but segments were reused in place (the same files), so the records
 * the victim appended afterwards were readable through A's old fds. Now a segment a reader may
 * still hold gets a new file before it is used again, and the one the journal goes on in gets
 * one at the start: the old fds show only what A was allowed to read.
 */
static void revoked_reader_case(bool warm)
{
	static struct daemon d;
	struct revoked rv = { .d = &d };
	char out[1024];
	hp_conn *c;

	if (!harness_two_uids())
		skip();
	start(&d, NULL, RJOURNAL "read = 65534\n");
	c = conn(&d);
	append_many(c, "old record, A may read it", 200);
	hp_disconnect(c);
	assert_int_equal(harness_other_start(&rv.o, HARNESS_OTHER_UID, revoked_reader_main, &rv), 0);
	/* A is no reader any more */
	assert_int_equal(harness_reconfigure(&d, NULL, RJOURNAL), 0);
	if (warm) {
		assert_int_equal(ctl(&d, "restart", out, sizeof(out)), 0);
	} else {
		running = NULL;
		assert_int_equal(harness_terminate(&d), 0);
		assert_int_equal(harness_restart(&d), 0);
		running = &d;
	}
	/* the victim's records, over every segment several times */
	c = conn(&d);
	append_many(c, NEW_MARK, 5000);
	hp_disconnect(c);
	assert_int_equal(harness_other_finish(&rv.o), 0);
	stop(&d);
}

static void test_revoked_reader_warm(void **state)
{
	(void)state;
	revoked_reader_case(true);
}

static void test_revoked_reader_cold(void **state)
{
	(void)state;
	revoked_reader_case(false);
}

/* --- the second read: a closed journal writer takes no more records, and counts until freed */

static bool never_gone(void *arg)
{
	(void)arg;
	return false;
}

/* A writer over the raw protocol, its ring mapped as a client keeps it; its writer id. */
static uint64_t raw_writer(int a, struct jring_client *ring)
{
	struct proto_journal_open jo = { 0 };
	struct proto_hdr h;
	void *payload = NULL, *map, *wake;
	const char *why;
	uint64_t size, id;
	int fds[3];

	proto_set_name(jo.name, sizeof(jo.name), "j");
	assert_int_equal(proto_send(a, PROTO_JOURNAL_OPEN, &jo, sizeof(jo), NULL, 0), 0);
	assert_int_equal(proto_recv(a, &h, &payload, fds, 3), 0);
	assert_int_equal(h.type, PROTO_JOURNAL_OPENED);
	id = ((struct proto_journal_opened *)payload)->writer_id;
	size = ((struct proto_journal_opened *)payload)->ring_size;
	free(payload);
	map = mmap(NULL, JRING_HDR_SIZE + size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	wake = mmap(NULL, JRING_WAKE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fds[2], 0);
	assert_true(map != MAP_FAILED && wake != MAP_FAILED);
	assert_int_equal(jring_client_init(ring, map, size, wake, fds[1], never_gone, NULL, &why), 0);
	close(fds[0]);
	close(fds[2]);
	return id;
}

/* A request: the error of the result it is answered with, or 1 for another answer (fds closed). */
static int raw_result(int a, enum proto_type type, const void *req, uint32_t len)
{
	struct proto_hdr h;
	void *payload = NULL;
	int fds[PROTO_MAX_FDS], r = 1;

	assert_int_equal(proto_send(a, type, req, len, NULL, 0), 0);
	assert_int_equal(proto_recv(a, &h, &payload, fds, PROTO_MAX_FDS), 0);
	if (h.type == PROTO_RESULT)
		r = ((struct proto_result *)payload)->err;
	for (uint32_t i = 0; i < h.nfds; i++)
		close(fds[i]);
	free(payload);
	return r;
}

static const struct hp_journal_status *jstatus(hp_conn *c, struct hp_status **st)
{
	hp_status_free(*st);
	*st = status(c);
	return (*st)->journals[0];
}

/*
 * A client opened a writer, closed it (JOURNAL_CLOSE) and went on appending to the ring it kept
 * mapped: the daemon went on taking its records, never freed it while the ring had something in
 * it, and counted it against no limit: under max_journal_writers_per_uid = 2 a client had tens
 * of rings appending (and up to 1024, the journal's limit, for everyone). Now a closed writer
 * gives what it had committed at its close and nothing after, and counts against its uid's
 * limit until it is freed. Shown on a full journal, where the daemon cannot take anything until
 * a truncate, so that nothing depends on timing.
 */
static void test_closed_writer_takes_nothing(void **state)
{
	static struct daemon d; /* teardown may use it after a failed assertion left the frame */
	static char rec[1000];
	struct iovec iov = { rec, sizeof(rec) };
	struct proto_journal_close jc;
	struct proto_journal_open jo = { 0 };
	struct jring_client ring;
	struct hp_status *st = NULL;
	uint64_t ticket, pos, lsn;
	hp_journal *w;
	hp_conn *c;
	int a, n;

	(void)state;
	start(&d, "max_journal_writers_per_uid = 2\n", JOURNAL "segments = 2\n");
	c = conn(&d);
	/* fill the journal: its appends then wait for a truncate */
	assert_int_equal(hp_journal_open(c, "j", &w), 0);
	for (n = 0; n < 5000 && jstatus(c, &st)->state == 0; n++)
		assert_int_equal(hp_journal_append(w, rec, sizeof(rec), &ticket), 0);
	assert_int_equal(jstatus(c, &st)->state, 1);
	lsn = st->journals[0]->next_lsn;
	/* a raw writer: one record committed, closed, then another one appended to its ring */
	a = raw_connect(&d);
	jc.writer_id = raw_writer(a, &ring);
	assert_int_equal(jring_append(&ring, &iov, 1, false, &pos), 0);
	assert_int_equal(raw_result(a, PROTO_JOURNAL_CLOSE, &jc, sizeof(jc)), 0);
	assert_int_equal(jring_append(&ring, &iov, 1, false, &pos), 0);
	/* the library's writer and the closed one are held: a third is over the uid's limit */
	proto_set_name(jo.name, sizeof(jo.name), "j");
	assert_int_equal(raw_result(a, PROTO_JOURNAL_OPEN, &jo, sizeof(jo)), -EUSERS);
	/* room again: everything committed before the close is written, nothing after it */
	hp_journal_close(w);
	assert_int_equal(hp_journal_truncate(c, "j", lsn), 0);
	for (int i = 0; i < 5000 && jstatus(c, &st)->writers > 0; i++)
		usleep(1000);
	assert_int_equal(st->journals[0]->writers, 0);
	assert_int_equal(st->journals[0]->state, 0);
	/* LSNs 1..n: the library writer's, all of them; n + 1: the closed one's first, not its second */
	assert_int_equal(st->journals[0]->next_lsn, (uint64_t)n + 2);
	hp_status_free(st);
	close(ring.doorbell);
	munmap(ring.hdr, JRING_HDR_SIZE + ring.size);
	munmap(ring.wake, JRING_WAKE_SIZE);
	hp_disconnect(c);
	close(a);
	stop(&d);
}

/*
 * --- issue 39, finding 8: the monitoring identity sees figures and does nothing else ----------
 *
 * The packaged metrics services ran in the socket's group to connect, which is also every
 * journal's default access list and the right to lease: their identity could dump and truncate
 * journals. monitor_group now connects through an ACL entry on the socket, and a client that
 * only that entry let in may ask for the status and nothing else. Here the other uid is in
 * monitor_group (nogroup) and not in the socket's group (root's, mode 0660).
 */
static int status_only_main(void *arg)
{
	struct hp_spill_opts so = { .threshold = HP_SPILL_ALWAYS_FILE };
	const char *socket = arg; /* the daemon's */
	hp_journal_reader *rd;
	struct hp_status *st;
	struct hp_buffer b;
	hp_journal *w;
	hp_spill *sp;
	hp_conn *c;
	int r = 0;

	if (hp_connect(socket, &c) < 0)
		return 20; /* main: the socket's mode kept it out */
	if (hp_status(c, &st) < 0)
		return 21;
	/* every uid's figures, as monitor_group's: root's client and its journal's records */
	if (!st->server.sees_all || st->nclients < 1 || st->clients[0]->uid != 0 || st->journals[0]->durable_lsn != 3)
		r = 22;
	hp_status_free(st);
	if (r == 0 && hp_journal_reader_open(c, "orders", 1, &rd) != -EACCES)
		r = 23;
	if (r == 0 && hp_journal_truncate(c, "orders", 3) != -EACCES)
		r = 24;
	if (r == 0 && hp_journal_open(c, "orders", &w) != -EACCES)
		r = 25;
	if (r == 0 && hp_acquire(c, "one", 1, 0, &b) != -EACCES)
		r = 26;
	if (r == 0 && hp_spill_open(c, &so, &sp) == 0 && hp_spill_write(sp, "x", 1) == 0)
		r = 27; /* a stream in memory is the client's own; a file is the daemon's to make */
	if (r == 0 && hp_daemon_restart(c) != -EACCES)
		r = 28;
	/* and the connection still serves the status */
	if (r == 0 && hp_status(c, &st) == 0)
		hp_status_free(st);
	else if (r == 0)
		r = 29;
	hp_disconnect(c);
	return r;
}

/* Not in monitor_group either: the ACL entry lets nobody else in. */
static int outsider_main(void *arg)
{
	hp_conn *c;

	if (hp_connect(arg, &c) == 0) {
		hp_disconnect(c);
		return 30;
	}
	return 0;
}

static void test_monitor_group_status_only(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	struct hp_status *st;
	uint64_t lsn, retain;
	hp_journal *w;
	hp_conn *c;
	(void)state;

	if (!harness_two_uids())
		skip();
	start(&d, "socket_mode = 0660\nmonitor_group = nogroup\n",
	      "[class one]\nsize = 2M\ncount = 2\n[journal orders]\ndirectory = @DIR@/orders\nsegment_size = 1M\n"
	      "segments = 2\n");
	c = conn(&d);
	assert_int_equal(hp_journal_open(c, "orders", &w), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(hp_journal_append_wait(w, "record", 6, &lsn), 0);
	st = status(c);
	retain = st->journals[0]->retain_lsn;
	hp_status_free(st);
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, status_only_main, d.socket), 0);
	/* nothing was truncated, leased or spilled by it */
	st = status(c);
	assert_int_equal(st->journals[0]->retain_lsn, retain);
	assert_int_equal(st->classes[0]->free, 2);
	assert_int_equal(st->spill.files, 0);
	hp_status_free(st);
	hp_journal_close(w);
	hp_disconnect(c);
	stop(&d);
	/* the same uid outside monitor_group stays out, as the mode says */
	start(&d, "socket_mode = 0660\n", "[class one]\nsize = 2M\ncount = 2\n");
	assert_int_equal(harness_as_uid(HARNESS_OTHER_UID, outsider_main, d.socket), 0);
	stop(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_delayed_grant_is_not_another_uids_buffer, teardown),
		cmocka_unit_test_teardown(test_passed_fd_refused, teardown),
		cmocka_unit_test_teardown(test_passed_fd_closed_off_loop, teardown),
		cmocka_unit_test_teardown(test_closer_never_blocks_loop, teardown),
		cmocka_unit_test_teardown(test_refused_connection_closed_off_loop, teardown),
		cmocka_unit_test_teardown(test_queued_fds_bounded, teardown),
		cmocka_unit_test_teardown(test_out_of_fds, teardown),
		cmocka_unit_test_teardown(test_unread_replies_bounded, teardown),
		cmocka_unit_test_teardown(test_status_hides_other_uids, teardown),
		cmocka_unit_test_teardown(test_monitor_group_sees_all, teardown),
		cmocka_unit_test_teardown(test_journal_writers_per_uid, teardown),
		cmocka_unit_test_teardown(test_punched_buffer_renewed, teardown),
		cmocka_unit_test_teardown(test_acquire_wait_capped, teardown),
		cmocka_unit_test_teardown(test_open_socket_without_uid_limits, teardown),
		cmocka_unit_test_teardown(test_journal_access, teardown),
		cmocka_unit_test_teardown(test_connect_flood_takes_no_slot, teardown),
		cmocka_unit_test_teardown(test_revoked_reader_warm, teardown),
		cmocka_unit_test_teardown(test_revoked_reader_cold, teardown),
		cmocka_unit_test_teardown(test_closed_writer_takes_nothing, teardown),
		cmocka_unit_test_teardown(test_monitor_group_status_only, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return run_cases("hostile", tests);
}
