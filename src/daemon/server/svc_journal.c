/* SPDX-License-Identifier: MIT */
/*
 * svc_journal.c - the journal service of hugepoold's server: opening and closing writers
 * (each connection's and each uid's limits), reading (segment fds) and truncating, each
 * checked against the journal's access lists (access.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "server_internal.h"
#include "util.h"

/* The journal called name if p may do op to it; otherwise answer p and return NULL. */
static struct journal *journal_or_answer(struct server *s, struct peer *p, const char *name, enum journal_op op)
{
	static const char *const verbs[JOURNAL_OPS] = { "append to", "read", "truncate" };
	static const char *const keys[JOURNAL_OPS] = { "append", "read", "truncate" };
	char text[PROTO_TEXT_MAX];
	unsigned i = 0;

	while (i < s->njournals && strcmp(journal_name(s->journals[i]), name) != 0)
		i++;
	if (i == s->njournals) {
		snprintf(text, sizeof(text), "no journal \"%s\"", name);
		send_result(p, -ENOENT, text);
		return NULL;
	}
	if (!access_allows(&s->jaccess[i][op], &p->creds)) {
		snprintf(text, sizeof(text), "uid %u may not %s journal \"%s\" (\"%s\" in hugepoold.conf)",
			 (unsigned)p->owner.uid, verbs[op], name, keys[op]);
		send_result(p, -EACCES, text);
		return NULL;
	}
	return s->journals[i];
}

/*
 * Journal writers uid holds in all journals: open ones, and closed ones whose rings the daemon
 * still holds (a closed writer is freed only once what it had committed is durable).
 */
static unsigned uid_writers(const struct server *s, uid_t uid)
{
	unsigned n = 0;

	for (unsigned i = 0; i < s->njournals; i++)
		n += journal_writers_of(s->journals[i], uid);
	return n;
}

int handle_journal_open(struct server *s, struct peer *p, const union proto_request *req)
{
	static struct log_ratelimit writers_rl = LOG_RATELIMIT(10, 5);
	struct journal *j = journal_or_answer(s, p, req->journal_open.name, JOURNAL_APPEND);
	struct proto_journal_opened o;
	struct journal_writer *w;
	struct journal_stats st;
	char text[PROTO_TEXT_MAX];
	int fds[3], r;

	if (!j)
		return 0;
	if (p->nwriters >= PEER_WRITERS_MAX) {
		snprintf(text, sizeof(text), "this connection already has %u journal writers", PEER_WRITERS_MAX);
		send_result(p, -EMFILE, text);
		return 0;
	}
	if (s->cfg->max_journal_writers_per_uid && uid_writers(s, p->owner.uid) >= s->cfg->max_journal_writers_per_uid) {
		snprintf(text, sizeof(text), "uid %u already has %u journal writers open (max_journal_writers_per_uid)",
			 (unsigned)p->owner.uid, s->cfg->max_journal_writers_per_uid);
		log_msg_ratelimited(&writers_rl, LOG_NOTICE, "Refused a journal writer to pid %d: %s", (int)p->owner.pid,
				    text);
		send_result(p, -EUSERS, text);
		return 0;
	}
	r = journal_writer_new(j, p->owner.uid, p->owner.pid, req->journal_open.ring_size, &w, &fds[0], &fds[1], &fds[2]);
	if (r < 0) {
		snprintf(text, sizeof(text), "cannot open a writer of journal \"%s\": %s", req->journal_open.name,
			 r == -EINVAL ? "ring size must be a power of two from 64 KiB to 64 MiB" : strerror(-r));
		send_result(p, r, text);
		return 0;
	}
	journal_get_stats(j, &st);
	p->writers[p->nwriters++] = (struct peer_writer){ ++s->next_writer_id, w };
	o = (struct proto_journal_opened){ .writer_id = s->next_writer_id, .ring_size = journal_writer_ring_size(w),
					   .durable_lsn = st.durable_lsn };
	/* the message owns the three fds (dups of the daemon's) and closes them once sent */
	peer_send_fds(p, PROTO_JOURNAL_OPENED, &o, sizeof(o), NULL, 0, fds, 3, 7u, NULL);
	return 0;
}

int handle_journal_close(struct server *s, struct peer *p, const union proto_request *req)
{
	(void)s;
	for (unsigned i = 0; i < p->nwriters; i++) {
		if (p->writers[i].id != req->journal_close.writer_id)
			continue;
		journal_writer_close(p->writers[i].w);
		p->writers[i] = p->writers[--p->nwriters];
		send_result(p, 0, NULL);
		return 0;
	}
	send_result(p, -EINVAL, "no such journal writer on this connection");
	return 0;
}

int handle_journal_truncate(struct server *s, struct peer *p, const union proto_request *req)
{
	struct journal *j = journal_or_answer(s, p, req->journal_truncate.name, JOURNAL_TRUNCATE);

	if (j) {
		journal_truncate(j, req->journal_truncate.lsn);
		send_result(p, 0, NULL);
	}
	return 0;
}

int handle_journal_read(struct server *s, struct peer *p, const union proto_request *req)
{
	struct journal *j = journal_or_answer(s, p, req->journal_read.name, JOURNAL_READ);
	struct journal_segment_info infos[PROTO_MAX_FDS];
	struct proto_journal_segment e[PROTO_MAX_FDS];
	struct proto_journal_segments h = { 0 };
	int fds[PROTO_MAX_FDS];
	unsigned n = 0;
	int r;

	if (!j)
		return 0;
	r = journal_read_segments(j, req->journal_read.from_lsn, PROTO_MAX_FDS, fds, infos, &n, &h.durable_lsn);
	if (r < 0) {
		send_result(p, r, "cannot open the journal's segments");
		return 0;
	}
	for (unsigned i = 0; i < n; i++)
		e[i] = (struct proto_journal_segment){ infos[i].generation, infos[i].first_lsn, infos[i].size };
	h.n = n;
	h.more = n == PROTO_MAX_FDS;
	peer_send_fds(p, PROTO_JOURNAL_SEGMENTS, &h, sizeof(h), e, n * sizeof(e[0]), fds, n,
		      n ? (uint32_t)((1ull << n) - 1) : 0, NULL);
	return 0;
}
