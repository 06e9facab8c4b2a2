/* SPDX-License-Identifier: MIT */
/*
 * crashfs_tap.c - crashfs.h's recording: the two taps of a journal (jio's: the batches, their
 * completions, the acknowledgements, on the flusher's thread; journal_fs.h's: files and names,
 * on whichever thread makes them) add what they see to a log, under its lock, while it records.
 * Linked where the daemon's jio and journal_fs are (the crash-point harness, hugepoold-traced).
 */
#include "crashfs.h"

/* jio's tap: the batches, on the flusher's thread. */
static void cfs_jio_tap(void *arg, enum jio_tap_event ev, const struct jio_req *req, uint64_t lsn)
{
	struct cfs_log *l = arg;

	pthread_mutex_lock(&l->lock);
	if (!l->recording)
		goto out;
	if (ev == JIO_TAP_ACKED) {
		/* a batch is acknowledged only once it and every batch before it completed */
		if (lsn < l->acked && !l->misordered[0])
			snprintf(l->misordered, sizeof(l->misordered),
				 "LSN %" PRIu64 " acknowledged after LSN %" PRIu64 " (the durable LSN went back)", lsn,
				 l->acked);
		l->acked = lsn > l->acked ? lsn : l->acked;
		for (unsigned i = 0; i <= JIO_DEPTH && !l->misordered[0]; i++)
			if (l->inflight[i].req && l->inflight[i].first_lsn && l->inflight[i].first_lsn <= lsn)
				snprintf(l->misordered, sizeof(l->misordered),
					 "LSN %" PRIu64 " acknowledged while request %u, from LSN %" PRIu64 ", was in flight",
					 lsn, l->inflight[i].id, l->inflight[i].first_lsn);
		cfs_push(l, (struct cfs_op){ .kind = CFS_ACK, .off = lsn });
	} else if (ev == JIO_TAP_SUBMIT) {
		uint32_t id = ++l->nreq, file = cfs_file_of(l, req->fd, 0);
		struct jformat_rec rec = { 0 };
		unsigned i = 0;

		while (i <= JIO_DEPTH && l->inflight[i].req)
			i++;
		if (i > JIO_DEPTH)
			abort();
		/* a batch starts with a data record; a segment's header block holds none */
		if (req->niov && req->iov[0].len >= sizeof(rec) && !(req->iov[0].off == 0 && req->iov[0].len == JFORMAT_BLOCK))
			memcpy(&rec, req->iov[0].buf, sizeof(rec));
		l->inflight[i].req = req;
		l->inflight[i].id = id;
		l->inflight[i].first_lsn = rec.type == JREC_DATA ? rec.lsn : 0;
		for (unsigned k = 0; k < req->niov; k++)
			cfs_push(l, (struct cfs_op){ .kind = CFS_WRITE, .file = file, .req = id, .off = req->iov[k].off,
						     .len = (uint32_t)req->iov[k].len,
						     .data = cfs_copy(req->iov[k].buf, req->iov[k].len) });
	} else {
		unsigned i = 0;

		while (i <= JIO_DEPTH && l->inflight[i].req != req)
			i++;
		if (i > JIO_DEPTH)
			abort(); /* completed without being submitted: an injected write fault, not used here */
		cfs_push(l, (struct cfs_op){ .kind = CFS_DONE, .req = l->inflight[i].id, .res = req->res });
		l->inflight[i].req = NULL;
	}
out:
	pthread_mutex_unlock(&l->lock);
}

/* journal_fs.h's tap: files and names, on whichever thread makes them. */
static void cfs_fs_tap(void *arg, const struct jfs_event *ev)
{
	struct cfs_log *l = arg;
	struct cfs_op op = { 0 };

	pthread_mutex_lock(&l->lock);
	if (!l->recording)
		goto out;
	switch (ev->op) {
	case JFS_CREATE:
		op.kind = CFS_CREATE;
		op.file = cfs_file_of(l, ev->fd, ++l->nfiles);
		cfs_name(op.name, ev->name);
		break;
	case JFS_WRITE:
		op = (struct cfs_op){ .kind = CFS_WRITE, .file = cfs_file_of(l, ev->fd, 0), .off = ev->off,
				      .len = (uint32_t)ev->len, .data = cfs_copy(ev->buf, ev->len) };
		break;
	case JFS_SYNC:
		op = (struct cfs_op){ .kind = CFS_SYNC, .file = cfs_file_of(l, ev->fd, 0) };
		break;
	case JFS_DIRSYNC:
		op.kind = CFS_DIRSYNC;
		break;
	case JFS_RENAME:
		op.kind = CFS_RENAME;
		cfs_name(op.name, ev->name);
		cfs_name(op.name2, ev->name2);
		break;
	case JFS_UNLINK:
		op.kind = CFS_UNLINK;
		cfs_name(op.name, ev->name);
		break;
	}
	cfs_push(l, op);
out:
	pthread_mutex_unlock(&l->lock);
}

/* Record into l what journals opened from now on do, until cfs_stop. */
void cfs_record(struct cfs_log *l)
{
	pthread_mutex_lock(&l->lock);
	l->recording = true;
	pthread_mutex_unlock(&l->lock);
	jio_set_tap(cfs_jio_tap, l);
	jfs_set_tap(cfs_fs_tap, l);
}

/* Stop recording (a jio opened meanwhile keeps its tap: the log ignores it from now on). */
void cfs_stop(struct cfs_log *l)
{
	jio_set_tap(NULL, NULL);
	jfs_set_tap(NULL, NULL);
	pthread_mutex_lock(&l->lock);
	l->recording = false;
	pthread_mutex_unlock(&l->lock);
}
