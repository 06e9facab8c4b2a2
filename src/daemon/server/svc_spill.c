/* SPDX-License-Identifier: MIT */
/*
 * svc_spill.c - the spill service of hugepoold's server: a connection's counters page, and its
 * files' creation, charges and closes (the accounting itself is spill.c's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "log.h"
#include "server_internal.h"

int handle_spill_attach(struct server *s, struct peer *p, const union proto_request *req)
{
	struct proto_spill_attached a = { .page_size = 4096 };
	int fd, r;

	(void)req;
	r = spill_attach(s->spill, &p->spill, &fd, &a.threshold);
	if (r < 0) {
		send_result(p, r, r == -EEXIST ? "this connection is attached already" : "cannot create the counters page");
		return 0;
	}
	peer_send_fds(p, PROTO_SPILL_ATTACHED, &a, sizeof(a), NULL, 0, &fd, 1, 1u, NULL);
	return 0;
}

/* what a client can make the daemon say, a few lines a minute whatever it asks */
static struct log_ratelimit refused_rl = LOG_RATELIMIT(10, 5);

int handle_spill_create(struct server *s, struct peer *p, const union proto_request *req)
{
	struct proto_spill_created c;
	char text[PROTO_TEXT_MAX];
	int fd, r;

	r = spill_create(s->spill, &p->spill, req->spill_create.charge, &c.file_id, &fd, text, sizeof(text));
	if (r < 0) {
		if (r == -EDQUOT)
			log_msg_ratelimited(&refused_rl, LOG_NOTICE, "Refused a spill file to pid %d (uid %u): %s",
					    (int)p->owner.pid, (unsigned)p->owner.uid, text);
		send_result(p, r, text);
		return 0;
	}
	peer_send_fds(p, PROTO_SPILL_CREATED, &c, sizeof(c), NULL, 0, &fd, 1, 1u, NULL);
	return 0;
}

int handle_spill_charge(struct server *s, struct peer *p, const union proto_request *req)
{
	char text[PROTO_TEXT_MAX];
	int r;

	r = spill_charge(s->spill, &p->spill, req->spill_charge.file_id, req->spill_charge.total, text, sizeof(text));
	if (r == -EDQUOT)
		log_msg_ratelimited(&refused_rl, LOG_NOTICE, "Refused spill bytes to pid %d (uid %u): %s",
				    (int)p->owner.pid, (unsigned)p->owner.uid, text);
	send_result(p, r, r < 0 ? text : NULL);
	return 0;
}

int handle_spill_close(struct server *s, struct peer *p, const union proto_request *req)
{
	if (!spill_owns(&p->spill, req->spill_close.file_id)) {
		send_result(p, -ENOENT, "no such spill file on this connection");
		return 0;
	}
	/* answer first: the client goes on while this thread truncates (frees the pages) */
	send_result(p, 0, NULL);
	spill_close_file(s->spill, &p->spill, req->spill_close.file_id);
	return 0;
}
