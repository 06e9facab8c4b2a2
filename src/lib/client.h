/* SPDX-License-Identifier: MIT */
/*
 * client.h - libhugepool's private connection state, shared by its modules (client.c owns the
 * connection and the request/reply exchange, buffer.c the leases, status.c the status call,
 * journal.c and spill.c their streams).
 */
#ifndef HP_CLIENT_H
#define HP_CLIENT_H

#include "hugepool.h"
#include "proto.h"

struct hp_mapping {
	uint64_t lease_id;
	void *addr;
	size_t size;
};

struct hp_conn {
	int fd;
	uint64_t page_size;
	char last_error[PROTO_TEXT_MAX + 1];
	struct hp_mapping *maps; /* buffers leased through this connection */
	size_t nmaps, maps_cap;
	/* the counters page the daemon reads (counters.c) and the spill threshold, both set at the
	 * first spill stream or heap report; spill streams still open on this connection */
	struct proto_counters_page *counters;
	uint64_t spill_threshold;
	unsigned spill_streams;
};

/* Send one request. */
int client_send(hp_conn *c, enum proto_type type, const void *payload, uint32_t len);

/*
 * Receive one reply. A PROTO_RESULT is turned into its error code (0 or negative) with its text
 * stored in last_error, and *ret_payload is NULL; any other type returns 1 with the payload.
 * Up to maxfds fds are accepted (others make it fail with -EPROTO).
 */
int client_recv(hp_conn *c, struct proto_hdr *ret_hdr, void **ret_payload, int *fds, unsigned maxfds);

/* Send one request whose answer is a PROTO_RESULT; its error code (0 or negative). */
int client_simple_request(hp_conn *c, enum proto_type type, const void *payload, uint32_t len);

/*
 * Send one request whose answer is a `reply` carrying exactly nfds fds: 0 with the payload in
 * *ret_payload (the caller's to free; its length is at least the type's minimum) and the fds,
 * the daemon's error, or -EPROTO for any other answer (whatever fds came are closed).
 */
int client_call_fds(hp_conn *c, enum proto_type type, const void *req, uint32_t len, enum proto_type reply,
		    void **ret_payload, int *fds, unsigned nfds);

/*
 * What an fd from the daemon must be before it is mapped, read or written (client_check_fd). The
 * daemon makes every piece of shared memory with one call (sealed_memfd: sealed against
 * shrinking, so no mapping of it can ever reach past its end and fault), opens journal segments
 * read-only and spill files read-write, and rings doorbells that never block.
 */
enum client_fd_kind {
	CLIENT_FD_MEMORY, /* a memfd sealed F_SEAL_SHRINK, at least min_size bytes */
	CLIENT_FD_FILE, /* a regular file, at least min_size bytes (a journal segment) */
	CLIENT_FD_RW_FILE, /* a regular file open read-write, not O_APPEND (a spill file) */
	CLIENT_FD_EVENTFD, /* a non-blocking eventfd (min_size unused) */
};

/*
 * Check an fd the daemon sent against what it must be (what names it, "a buffer"): 0, or -EPROTO
 * with last_error saying what was wrong with it. The caller closes it either way.
 */
int client_check_fd(hp_conn *c, int fd, enum client_fd_kind kind, uint64_t min_size, const char *what);

/* Decode a status reply payload (untrusted bytes: every count is checked against len). */
int status_decode(const void *buf, size_t len, struct hp_status **ret);

void client_set_error(hp_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * counters.c: take the connection's counters page (and the spill threshold) from the daemon, once;
 * add to its spill streams' words.
 */
int counters_attach(hp_conn *c);
void counters_add_spill(hp_conn *c, int64_t streams, int64_t bytes);

#endif
