/* SPDX-License-Identifier: MIT */
/*
 * proto.c - header validation and the blocking send/receive used by clients.
 *
 * The rule table, generated from proto.h's PROTO_REQUESTS and PROTO_REPLIES lists, is the
 * single statement of which message goes which way, how long its payload may be, whether it
 * may carry fds and (for a request) how its payload is checked. The daemon's non-blocking I/O
 * (src/daemon/server/peer.c) decodes with proto_check_header() and proto_parse_request() from here;
 * the blocking helpers are for libhugepool and the tests. Nothing here keeps state.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto.h"
#include "util.h"

/* A request's parser: copy the payload into its union member, check it; a reason or NULL. */
typedef const char *(*parse_fn)(const struct proto_hdr *h, const void *payload, union proto_request *r);

struct type_rule {
	uint16_t type;
	const char *name;
	bool from_client;
	uint32_t min_len, max_len;
	uint32_t max_fds; /* fds allowed; grants must carry exactly their entry count */
	parse_fn parse; /* requests only */
};

/* --- the requests' parsers: parse_<member> for each row of PROTO_REQUESTS ------------------- */

#define COPY(member) memcpy(&r->member, payload, sizeof(r->member))

/* A fixed-size request with nothing to check. */
#define PARSE_PLAIN(member)                                                                              \
	static const char *parse_##member(const struct proto_hdr *h, const void *payload, union proto_request *r) \
	{                                                                                                \
		(void)h;                                                                                 \
		COPY(member);                                                                            \
		return NULL;                                                                             \
	}

/* A fixed-size request whose flags and reserved words must be zero. */
#define PARSE_FLAGS(member, what)                                                                        \
	static const char *parse_##member(const struct proto_hdr *h, const void *payload, union proto_request *r) \
	{                                                                                                \
		(void)h;                                                                                 \
		COPY(member);                                                                            \
		return r->member.flags || r->member.reserved ? what " with unknown flags" : NULL;        \
	}

/* A fixed-size request whose only check is a valid name. */
#define PARSE_NAMED(member, what)                                                                        \
	static const char *parse_##member(const struct proto_hdr *h, const void *payload, union proto_request *r) \
	{                                                                                                \
		(void)h;                                                                                 \
		COPY(member);                                                                            \
		return proto_name_valid(r->member.name, sizeof(r->member.name)) ? NULL                   \
										  : what " of a name that is not a name"; \
	}

PARSE_FLAGS(hello, "hello")
PARSE_FLAGS(status, "status")
PARSE_FLAGS(spill_attach, "spill attach")
PARSE_FLAGS(spill_create, "spill create")
PARSE_FLAGS(restart, "restart")
PARSE_PLAIN(journal_close)
PARSE_PLAIN(spill_charge)
PARSE_PLAIN(spill_close)
PARSE_NAMED(journal_truncate, "journal truncate")
PARSE_NAMED(journal_read, "journal read")

static const char *parse_acquire(const struct proto_hdr *h, const void *payload, union proto_request *r)
{
	(void)h;
	COPY(acquire);
	if (r->acquire.flags)
		return "acquire with unknown flags";
	if (!proto_name_valid(r->acquire.class_name, sizeof(r->acquire.class_name)))
		return "acquire of a class name that is not a name";
	return NULL;
}

static const char *parse_release(const struct proto_hdr *h, const void *payload, union proto_request *r)
{
	memcpy(&r->release.hdr, payload, sizeof(r->release.hdr));
	if (r->release.hdr.reserved || r->release.hdr.n == 0 || r->release.hdr.n > PROTO_RELEASE_MAX ||
	    h->len != sizeof(struct proto_release) + (size_t)r->release.hdr.n * sizeof(uint64_t))
		return "release whose length does not match its count";
	memcpy(r->release.ids, (const struct proto_release *)payload + 1, r->release.hdr.n * sizeof(uint64_t));
	return NULL;
}

static const char *parse_journal_open(const struct proto_hdr *h, const void *payload, union proto_request *r)
{
	(void)h;
	COPY(journal_open);
	if (r->journal_open.flags || r->journal_open.reserved)
		return "journal open with unknown flags";
	if (!proto_name_valid(r->journal_open.name, sizeof(r->journal_open.name)))
		return "journal open of a name that is not a name";
	return NULL;
}

#undef PARSE_PLAIN
#undef PARSE_FLAGS
#undef PARSE_NAMED
#undef COPY

/* --- the rule table, from proto.h's lists -------------------------------------------------- */

/* __VA_ARGS__: min_len, max_len (the fields that follow name in struct type_rule) */
#define REQUEST_RULE(name, value, member, wire, answer, ...) { PROTO_##name, wire, true, __VA_ARGS__, 0, parse_##member },
#define REPLY_RULE(name, value, wire, max_fds, ...) { PROTO_##name, wire, false, __VA_ARGS__, max_fds, NULL },
static const struct type_rule rules[] = { PROTO_REQUESTS(REQUEST_RULE) PROTO_REPLIES(REPLY_RULE) };

static const struct type_rule *find_rule(uint16_t type)
{
	for (size_t i = 0; i < ARRAY_SIZE(rules); i++)
		if (rules[i].type == type)
			return &rules[i];
	return NULL;
}

const char *proto_type_name(uint16_t type)
{
	const struct type_rule *r = find_rule(type);

	return r ? r->name : "unknown";
}

int proto_check_header(const struct proto_hdr *h, bool from_client, const char **ret_reason)
{
	const struct type_rule *r;
	const char *why;
	int err = -EPROTO;

	if (h->magic != PROTO_MAGIC) {
		why = "bad magic (not a hugepool peer)";
	} else if (from_client ? h->version < PROTO_VERSION_MIN || h->version > PROTO_VERSION
			       : h->version != PROTO_VERSION) {
		why = "unsupported protocol version";
		err = -EPROTONOSUPPORT;
	} else if (!(r = find_rule(h->type)) || r->from_client != from_client) {
		why = from_client ? "unknown request type" : "unknown reply type";
	} else if (h->len < r->min_len) {
		why = "payload shorter than its type requires";
	} else if (h->len > r->max_len) {
		why = "payload longer than its type allows";
	} else if (h->nfds > r->max_fds) {
		why = "message announces fds its type may not carry";
	} else {
		return 0;
	}
	if (ret_reason)
		*ret_reason = why;
	return err;
}

int proto_parse_request(const struct proto_hdr *h, const void *payload, union proto_request *ret,
			const char **ret_reason)
{
	const struct type_rule *r = find_rule(h->type);
	const char *why = r && r->parse ? r->parse(h, payload, ret) : "not a request";

	if (why) {
		if (ret_reason)
			*ret_reason = why;
		return -EPROTO;
	}
	return 0;
}

void proto_hdr_init_version(struct proto_hdr *h, uint16_t version, enum proto_type type, uint32_t len, uint32_t nfds)
{
	*h = (struct proto_hdr){ .magic = PROTO_MAGIC, .version = version, .type = (uint16_t)type, .len = len,
				 .nfds = nfds };
}

void proto_hdr_init(struct proto_hdr *h, enum proto_type type, uint32_t len, uint32_t nfds)
{
	proto_hdr_init_version(h, PROTO_VERSION, type, len, nfds);
}

const char *proto_journal_state_name(uint32_t state)
{
#define STATE_NAME(state, name) [PROTO_JOURNAL_##state] = name,
	static const char *const names[] = { PROTO_JOURNAL_STATES(STATE_NAME) };
#undef STATE_NAME

	return state < ARRAY_SIZE(names) ? names[state] : "unknown";
}

const char *proto_journal_when_full_name(uint32_t when_full)
{
#define WHEN_FULL_NAME(policy, name) [PROTO_JOURNAL_##policy] = name,
	static const char *const names[] = { PROTO_JOURNAL_WHEN_FULL(WHEN_FULL_NAME) };
#undef WHEN_FULL_NAME

	return when_full < ARRAY_SIZE(names) ? names[when_full] : "unknown";
}

uint64_t proto_status_size(const struct proto_status *st, const struct proto_status_server *srv, uint16_t version)
{
	uint64_t n = sizeof(*st);

#define SECTION_SIZE(name, type, count, since)      \
	if (version >= (since))                         \
		n += (uint64_t)PROTO_STATUS_COUNT(st, srv, count) * sizeof(type);
	PROTO_STATUS_SECTIONS(SECTION_SIZE)
#undef SECTION_SIZE
	return n;
}

#define LATENCY_BOUND(ns) UINT64_C(ns),
const uint64_t proto_latency_bounds[PROTO_LATENCY_NBOUNDS] = { PROTO_LATENCY_BOUNDS(LATENCY_BOUND) };
#undef LATENCY_BOUND

void proto_latency_add(struct proto_latency *h, uint64_t ns, uint64_t n)
{
	unsigned lo = 0, hi = PROTO_LATENCY_NBOUNDS; /* the first bound >= ns, in [lo, hi] */

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (proto_latency_bounds[mid] < ns)
			lo = mid + 1;
		else
			hi = mid;
	}
	h->buckets[lo] += n;
	h->count += n;
	h->sum_ns += ns * n;
}

void proto_set_name(char *dst, size_t dstlen, const char *src)
{
	memset(dst, 0, dstlen);
	if (src)
		strncpy(dst, src, dstlen - 1);
}

bool proto_name_valid(const char *field, size_t len)
{
	size_t n = strnlen(field, len);

	if (n == 0 || n == len)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = field[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return false;
	}
	return true;
}

void proto_put_fds(struct msghdr *msg, void *cbuf, const int *fds, unsigned nfds)
{
	struct cmsghdr *c;

	memset(cbuf, 0, CMSG_SPACE(sizeof(int) * nfds));
	msg->msg_control = cbuf;
	msg->msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
	c = CMSG_FIRSTHDR(msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
}

int proto_send(int fd, enum proto_type type, const void *payload, uint32_t len, const int *fds,
	       unsigned nfds)
{
	struct proto_hdr h;
	struct iovec iov[2];
	union {
		char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
		struct cmsghdr align;
	} cbuf;
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	size_t total = sizeof(h) + len, sent = 0;

	if (nfds > PROTO_MAX_FDS)
		return -EINVAL;
	proto_hdr_init(&h, type, len, nfds);
	iov[0] = (struct iovec){ .iov_base = &h, .iov_len = sizeof(h) };
	iov[1] = (struct iovec){ .iov_base = (void *)(uintptr_t)payload, .iov_len = len };
	if (nfds)
		proto_put_fds(&msg, cbuf.buf, fds, nfds);
	while (sent < total) {
		ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EPIPE ? -ECONNRESET : -errno;
		}
		sent += (size_t)n;
		/* fds went with the first byte; the rest is plain data */
		msg.msg_control = NULL;
		msg.msg_controllen = 0;
		while (msg.msg_iovlen && (size_t)n >= msg.msg_iov[0].iov_len) {
			n -= (ssize_t)msg.msg_iov[0].iov_len;
			msg.msg_iov++;
			msg.msg_iovlen--;
		}
		if (msg.msg_iovlen) {
			msg.msg_iov[0].iov_base = (char *)msg.msg_iov[0].iov_base + n;
			msg.msg_iov[0].iov_len -= (size_t)n;
		}
	}
	return 0;
}

static void close_all(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* Read exactly len bytes; the first recvmsg may bring fds along. */
static int recv_exact(int fd, void *buf, size_t len, int *fds, unsigned maxfds, unsigned *nfds)
{
	size_t got = 0;

	while (got < len) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = { .iov_base = (char *)buf + got, .iov_len = len - got };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf,
				      .msg_controllen = sizeof(cbuf.buf) };
		ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			int tmp[PROTO_MAX_FDS];

			memcpy(tmp, CMSG_DATA(c), sizeof(int) * MIN(k, PROTO_MAX_FDS));
			for (unsigned i = 0; i < k; i++) {
				if (*nfds < maxfds)
					fds[(*nfds)++] = tmp[i];
				else
					close(tmp[i]);
			}
			if (k > maxfds)
				msg.msg_flags |= MSG_CTRUNC;
		}
		if (msg.msg_flags & MSG_CTRUNC)
			return -EPROTO;
		if (n == 0)
			return -ECONNRESET;
		got += (size_t)n;
	}
	return 0;
}

int proto_recv(int fd, struct proto_hdr *ret_hdr, void **ret_payload, int *ret_fds,
	       unsigned maxfds)
{
	struct proto_hdr h;
	int fds[PROTO_MAX_FDS];
	unsigned nfds = 0;
	_cleanup_free_ void *payload = NULL;
	int r;

	maxfds = MIN(maxfds, PROTO_MAX_FDS);
	r = recv_exact(fd, &h, sizeof(h), fds, maxfds, &nfds);
	if (r < 0)
		goto fail;
	r = proto_check_header(&h, false, NULL);
	if (r < 0)
		goto fail;
	if (h.nfds != nfds) {
		r = -EPROTO;
		goto fail;
	}
	payload = malloc(h.len ? h.len : 1);
	if (!payload) {
		r = -ENOMEM;
		goto fail;
	}
	if (h.len) {
		unsigned extra = 0;
		int stray[PROTO_MAX_FDS];

		/* fds arrive only with a message's first byte, so any here are a peer's mistake */
		r = recv_exact(fd, payload, h.len, stray, PROTO_MAX_FDS, &extra);
		close_all(stray, extra);
		if (r == 0 && extra)
			r = -EPROTO;
		if (r < 0)
			goto fail;
	}
	*ret_hdr = h;
	*ret_payload = TAKE_PTR(payload);
	if (nfds)
		memcpy(ret_fds, fds, sizeof(int) * nfds);
	return 0;
fail:
	close_all(fds, nfds);
	return r;
}

const char *proto_batch_bucket_name(unsigned k, char *buf, size_t len)
{
	if (k <= 1)
		snprintf(buf, len, "%u", k + 1);
	else if (k == PROTO_BATCH_BUCKETS - 1)
		snprintf(buf, len, "%llu+", (1ull << (k - 1)) + 1);
	else
		snprintf(buf, len, "%llu-%llu", (1ull << (k - 1)) + 1, 1ull << k);
	return buf;
}
