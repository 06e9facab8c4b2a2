/* SPDX-License-Identifier: MIT */
/*
 * views.h - what hugepoolctl prints about the daemon: each view as text for people and as JSON
 * for programs (--json), printed to stdout. The views of a whole hp_status come in pairs that
 * the command table in hugepoolctl.c names: NAME_text prints the view, NAME_json writes its
 * members into the one object the verb has opened. The journal verbs' output is one call each.
 */
#ifndef HP_CLI_VIEWS_H
#define HP_CLI_VIEWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hugepool.h"
#include "json.h"
#include "proto.h"

/* views_status.c: status, classes, leases, stats */
void status_text(const struct hp_status *st);
/* How the daemon's life started (warm or cold): a line of status, and of restart. */
void start_text(const struct hp_status *st);
void start_json(struct json *j, const struct hp_status *st);
void status_json(struct json *j, const struct hp_status *st);
void classes_text(const struct hp_status *st);
void classes_json(struct json *j, const struct hp_status *st);
void leases_text(const struct hp_status *st);
void leases_json(struct json *j, const struct hp_status *st);
void stats_text(const struct hp_status *st);
void stats_json(struct json *j, const struct hp_status *st);
/* One client of st->clients as a JSON object: who it is, then the parts asked for. */
enum { CLIENT_LEASES = 1 << 0, CLIENT_HEAPS = 1 << 1, CLIENT_SPILL = 1 << 2 };
void client_json(struct json *j, const struct hp_status *st, uint32_t i, unsigned parts);

/* views_spill.c: spill; st's clients must be in spill_order */
void spill_order(struct hp_status *st); /* sort the clients by uid, then pid */
void spill_text(const struct hp_status *st);
void spill_json(struct json *j, const struct hp_status *st);

/*
 * views_metrics.c: hugepoolctl metrics, st as Prometheus metrics (st NULL: the daemon did not
 * answer); uids: also the figures that name a uid, as far as st shows them (--uids).
 */
struct expo;
void metrics_print(struct expo *e, const struct hp_status *st, bool uids);

/* views_journal.c: journal list, stat, verify and dump */
void journals_text(const struct hp_status *st);
void journals_json(struct json *j, const struct hp_status *st);

/* Everything the daemon reports about st's journal i: its status, batches by size, latencies,
 * path to the disk and configuration. */
void journal_stat_print(const struct hp_journal_status *js, bool json);

/* What journal verify found. */
struct journal_check {
	const char *journal;
	uint64_t records, bytes; /* read in order from LSN 1 on, till the end or the first problem */
	uint64_t first_lsn, last_lsn; /* of those records (0: none) */
	uint64_t durable_lsn; /* when the check began */
	int error; /* the reader's negative errno, or 0 */
	bool damaged; /* with a problem: the journal is damaged, not just unchecked to the end */
	char problem[256]; /* "" when intact */
};

void journal_verify_print(const struct journal_check *c, bool json);

/* One record of journal dump, on a line of its own: text or an object, hex or (JSON) base64. */
void journal_record_print(uint64_t lsn, const void *data, size_t len, bool json, bool hex);

/*
 * The JSON member of a NUM, CALC or HIST field of proto.h's status lists (src is the public
 * struct); OWN and ENUM fields by hand (an ENUM one as its name). A latency histogram is an
 * object: count, sum_ns and buckets, the bucket counts in the order of their bounds (hp_latency,
 * in hugepool.h).
 */
#define JSON_FIELD(kind, type, name, metric) JSON_FIELD_##kind(name)
#define JSON_FIELD_OWN(name)
#define JSON_FIELD_ENUM(name)
#define JSON_FIELD_CALC(name) JSON_FIELD_NUM(name)
#define JSON_FIELD_NUM(name) json_u64(j, #name, src->name);
#define JSON_FIELD_HIST(name) json_latency(j, #name, &src->name);

/* The same as lines of text, "name value" (a histogram: its count and mean). */
#define TEXT_FIELD(kind, type, name, metric) TEXT_FIELD_##kind(name)
#define TEXT_FIELD_OWN(name)
#define TEXT_FIELD_ENUM(name)
#define TEXT_FIELD_CALC(name) TEXT_FIELD_NUM(name)
#define TEXT_FIELD_NUM(name) printf("%-32s %" PRIu64 "\n", #name, (uint64_t)src->name);
#define TEXT_FIELD_HIST(name)                                                                   \
	printf("%-32s %" PRIu64 " (mean %.1f us)\n", #name, src->name.count,                      \
	       src->name.count ? (double)src->name.sum_ns / (double)src->name.count / 1e3 : 0.0);

#endif
