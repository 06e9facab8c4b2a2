/* SPDX-License-Identifier: MIT */
/*
 * views_metrics.c - hugepoolctl metrics: one hp_status as Prometheus metrics (expo.h writes
 * them in either format). The families come from proto.h's status field lists: each section's
 * rows become a table here (row_of, below) whose M(...) column names the family, its type, a
 * constant label and its help; a family's rows follow each other in the list, and its samples
 * are written record by record, with the section's key label (class, journal, uid). What no
 * row can say is written by hand below the tables: the up and build info gauges, the pool, the
 * start time, a journal's state (one series per state of PROTO_JOURNAL_STATES), the records per
 * batch histogram. No family names a pid or a client: a series per process would be churn.
 * The figures that name a uid (each uid's spill figures, and the machine's spill totals, which
 * sum every uid's) are written only when asked (--uids): metrics go wherever a scraper takes
 * them, to whoever reaches the endpoint and whoever may query the Prometheus that keeps them,
 * and Prometheus' security model presumes that is anyone. Even then they are left out, not
 * shown wrong, where the status says the asker does not see every uid; the gauge
 * hugepool_scrape_sees_all_uids says which it is.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "expo.h"
#include "util.h"
#include "views.h"

#define PREFIX "hugepool_"

enum metric_type { MT_NONE, MT_GAUGE, MT_COUNTER, MT_GAUGE_S, MT_HIST };

/* One row of a status field list, as a metric: where its value is in the public struct. */
struct metric_row {
	size_t offset, size; /* of the field in the public struct */
	enum metric_type type;
	const char *name, *label, *help; /* M(type, name, label, help) */
};

/* What M(...) and NOMETRIC of a row become here (proto.h says what they mean). */
#define M(type_, name_, label_, help_) .type = MT_##type_, .name = name_, .label = label_, .help = help_
#define NOMETRIC .type = MT_NONE
/*
 * A NUM, CALC, HIST or ENUM row of the public struct S (an ENUM row's value: the int the public
 * struct holds under its name, 4 bytes as row_value reads them); an OWN row is not in it under
 * its name. The metric arrives expanded (designated initializers, commas and all): the rest of
 * the arguments.
 */
#define ROW_OF(S, kind, name, ...) ROW_##kind(S, name, __VA_ARGS__)
#define ROW_NUM(S, name, ...) { .offset = offsetof(S, name), .size = sizeof(((S *)0)->name), __VA_ARGS__ },
#define ROW_CALC(S, name, ...) ROW_NUM(S, name, __VA_ARGS__)
#define ROW_HIST(S, name, ...) ROW_NUM(S, name, __VA_ARGS__)
#define ROW_ENUM(S, name, ...) ROW_NUM(S, name, __VA_ARGS__)
#define ROW_OWN(S, name, ...)

#define ROW_STATUS(kind, type, name, metric) ROW_OF(struct hp_status, kind, name, metric)
#define ROW_START(kind, type, name, metric) ROW_OF(struct hp_start_status, kind, name, metric)
#define ROW_SERVER(kind, type, name, metric) ROW_OF(struct hp_server_status, kind, name, metric)
#define ROW_CLASS(kind, type, name, metric) ROW_OF(struct hp_class_status, kind, name, metric)
#define ROW_ACQUIRE(kind, type, name, metric) ROW_OF(struct hp_class_acquire, kind, name, metric)
#define ROW_PAGES(kind, type, name, metric) ROW_OF(struct hp_class_pages, kind, name, metric)
#define ROW_JOURNAL(kind, type, name, metric) ROW_OF(struct hp_journal_status, kind, name, metric)
#define ROW_DURABILITY(kind, type, name, metric) ROW_OF(struct hp_journal_durability, kind, name, metric)
#define ROW_JPATH(kind, type, name, metric) ROW_OF(struct hp_journal_path, kind, name, metric)
#define ROW_JCONFIG(kind, type, name, metric) ROW_OF(struct hp_journal_config, kind, name, metric)
#define ROW_SPILL(kind, type, name, metric) ROW_OF(struct hp_spill_status, kind, name, metric)
#define ROW_SPILL_UID(kind, type, name, metric) ROW_OF(struct hp_spill_uid_status, kind, name, metric)

static const struct metric_row counter_rows[] = { PROTO_STATUS_COUNTERS(ROW_STATUS) };
static const struct metric_row start_rows[] = { PROTO_STATUS_START_FIELDS(ROW_START) };
static const struct metric_row server_rows[] = { PROTO_STATUS_SERVER_FIELDS(ROW_SERVER) };
static const struct metric_row class_rows[] = { PROTO_STATUS_CLASS_FIELDS(ROW_CLASS) };
static const struct metric_row acquire_rows[] = { PROTO_STATUS_ACQUIRE_FIELDS(ROW_ACQUIRE) };
static const struct metric_row pages_rows[] = { PROTO_STATUS_PAGES_FIELDS(ROW_PAGES) };
static const struct metric_row journal_rows[] = { PROTO_STATUS_JOURNAL_FIELDS(ROW_JOURNAL) };
static const struct metric_row durability_rows[] = { PROTO_STATUS_DURABILITY_FIELDS(ROW_DURABILITY) };
static const struct metric_row jpath_rows[] = { PROTO_STATUS_JPATH_FIELDS(ROW_JPATH) };
static const struct metric_row jconfig_rows[] = { PROTO_STATUS_JCONFIG_FIELDS(ROW_JCONFIG) };
static const struct metric_row spill_rows[] = { PROTO_STATUS_SPILL_FIELDS(ROW_SPILL) };
static const struct metric_row spill_uid_rows[] = { PROTO_STATUS_SPILL_UID_FIELDS(ROW_SPILL_UID) };

#undef M
#undef NOMETRIC

/* A section's records: its one, or count of them through the status's array, and each one's key label. */
struct records {
	const void *one; /* the section's one record; or */
	const void *const *each; /* each record of the status's array of them, */
	size_t at; /* and the section at this offset in it (a journal's path or config, a class's acquires or pages) */
	uint32_t count;
	/* writes record i's labels (expo_label) into buf; NULL: the section has one record, no label */
	void (*labels)(const struct hp_status *st, uint32_t i, char *buf, size_t len);
};

static uint64_t row_value(const struct metric_row *r, const void *rec)
{
	const char *p = (const char *)rec + r->offset;

	if (r->size == sizeof(uint32_t)) {
		uint32_t v;

		memcpy(&v, p, sizeof(v));
		return v;
	}
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* The le labels of struct hp_latency's bounds, in seconds: "1e-06" ... "10". */
static const char *const *latency_bounds(void)
{
	static char text[HP_LATENCY_BUCKETS][24];
	static const char *bounds[HP_LATENCY_BUCKETS];

	if (!bounds[0])
		for (unsigned i = 0; i < HP_LATENCY_BUCKETS; i++) {
			snprintf(text[i], sizeof(text[i]), "%.9g", (double)proto_latency_bounds[i] / 1e9);
			bounds[i] = text[i];
		}
	return bounds;
}

/* One sample of row r for record rec, with the record's labels and the row's own. */
static void row_sample(struct expo *e, const struct metric_row *r, const void *rec, const char *labels)
{
	char all[256];

	snprintf(all, sizeof(all), "%s%s%s", labels, *labels && *r->label ? "," : "", r->label);
	switch (r->type) {
	case MT_HIST: {
		const struct hp_latency *h = (const struct hp_latency *)(const void *)((const char *)rec + r->offset);

		expo_histogram(e, all, latency_bounds(), HP_LATENCY_BUCKETS, h->buckets, h->count, &h->sum_ns, 0);
		break;
	}
	case MT_GAUGE_S:
		expo_sample_ns(e, all, row_value(r, rec));
		break;
	default:
		expo_sample(e, all, row_value(r, rec));
	}
}

static enum expo_type expo_type_of(enum metric_type t)
{
	return t == MT_COUNTER ? EXPO_COUNTER : t == MT_HIST ? EXPO_HISTOGRAM : EXPO_GAUGE;
}

/*
 * Every family of a table, each with every record's sample of each of its rows (rows of one
 * family follow each other: one # HELP and # TYPE for them). keep, when not NULL, picks rows.
 */
static void print_rows(struct expo *e, const struct hp_status *st, const struct metric_row *rows, size_t n,
		       const struct records *recs, bool (*keep)(const struct metric_row *r))
{
	const char *family = NULL;
	char name[128], labels[192];

	for (size_t i = 0; i < n; i++) {
		const struct metric_row *r = &rows[i];

		if (r->type == MT_NONE || (keep && !keep(r)))
			continue;
		if (!family || strcmp(family, r->name) != 0) {
			snprintf(name, sizeof(name), PREFIX "%s", r->name);
			expo_family(e, name, expo_type_of(r->type), r->help);
			family = r->name;
		}
		for (uint32_t k = 0; k < recs->count; k++) {
			labels[0] = '\0';
			if (recs->labels)
				recs->labels(st, k, labels, sizeof(labels));
			row_sample(e, r, recs->one ? recs->one : (const char *)recs->each[k] + recs->at, labels);
		}
	}
}

static void class_labels(const struct hp_status *st, uint32_t i, char *buf, size_t len)
{
	expo_label(buf, len, "class", st->classes[i]->name);
}

static void journal_labels(const struct hp_status *st, uint32_t i, char *buf, size_t len)
{
	expo_label(buf, len, "journal", st->journals[i]->name);
}

static void uid_labels(const struct hp_status *st, uint32_t i, char *buf, size_t len)
{
	char uid[16];

	snprintf(uid, sizeof(uid), "%u", (unsigned)st->spill_uids[i]->uid);
	expo_label(buf, len, "uid", uid);
}

/* One record of a section that has one, unlabelled. */
#define ONE(p) (&(const struct records){ .one = (p), .count = 1 })
/* Each record of an array of them (st->journals), or the section member of each. */
#define EACH(array, n, fn) (&(const struct records){ .each = (const void *const *)(array), .count = (n), .labels = (fn) })
#define EACH_IN(array, n, member, fn)                                                            \
	(&(const struct records){ .each = (const void *const *)(array), .at = offsetof(__typeof__(**(array)), member), \
				  .count = (n), .labels = (fn) })
#define PRINT_ROWS(e, st, rows, recs, keep) print_rows(e, st, rows, ARRAY_SIZE(rows), recs, keep)

/* Of the machine's spill figures, those that name nobody: its limits and threshold. */
static bool spill_names_nobody(const struct metric_row *r)
{
	return strstr(r->name, "limit") || strstr(r->name, "threshold");
}

/* One gauge family with one unlabelled sample. */
static void gauge(struct expo *e, const char *name, const char *help, uint64_t v)
{
	expo_family(e, name, EXPO_GAUGE, help);
	expo_sample(e, "", v);
}

/* The first families, whether the daemon answered or not. */
static void print_up(struct expo *e, bool up)
{
	char labels[64] = "";

	gauge(e, PREFIX "up", "1: hugepoolctl got the daemon's status; 0: it could not, and nothing else follows", up);
	expo_family(e, PREFIX "exporter_build", EXPO_INFO, "The version of hugepoolctl that made these metrics");
	expo_sample(e, expo_label(labels, sizeof(labels), "version", HUGEPOOL_VERSION), 1);
}

/* The records per batch of each journal (PROTO_BATCH_BUCKETS powers of two), as a histogram. */
static void print_batch_sizes(struct expo *e, const struct hp_status *st)
{
	static const char *const bounds[HP_BATCH_BUCKETS - 1] = {
		"1", "2", "4", "8", "16", "32", "64", "128", "256", "512", "1024",
	};
	char labels[96];

	expo_family(e, PREFIX "journal_batch_records", EXPO_HISTOGRAM,
		    "Records per batch written (a batch: one write and the sync that covers it)");
	for (uint32_t i = 0; i < st->njournals; i++) {
		const uint64_t *by = st->journals[i]->batch_sizes.by_size;

		labels[0] = '\0';
		journal_labels(st, i, labels, sizeof(labels));
		expo_histogram(e, labels, bounds, HP_BATCH_BUCKETS - 1, by, st->journals[i]->batches, NULL,
			       st->journals[i]->durability.batch_records);
	}
}

/* Each journal's state as one series per state, 1 for the one it is in (PROTO_JOURNAL_STATES). */
static void print_journal_states(struct expo *e, const struct hp_status *st)
{
	static const char *const states[] = {
#define STATE_NAME(state, name) name,
		PROTO_JOURNAL_STATES(STATE_NAME)
#undef STATE_NAME
	};
	char labels[128];

	expo_family(e, PREFIX "journal_state", EXPO_GAUGE,
		    "1 for the state the journal is in: ok, full (appends wait for a truncate) "
		    "or failed (read-only until the daemon restarts)");
	for (uint32_t i = 0; i < st->njournals; i++)
		for (unsigned k = 0; k < ARRAY_SIZE(states); k++) {
			labels[0] = '\0';
			journal_labels(st, i, labels, sizeof(labels));
			expo_label(labels, sizeof(labels), "state", states[k]);
			expo_sample(e, labels, strcmp(hp_journal_state_name(st->journals[i]->state), states[k]) == 0);
		}
}

/* The pool's bytes by class: size x buffers, what `hugepoolctl classes` shows as sizes. */
static void print_class_bytes(struct expo *e, const struct hp_status *st)
{
	char labels[96];

	expo_family(e, PREFIX "class_bytes", EXPO_GAUGE, "Bytes of the class's buffers");
	for (uint32_t i = 0; i < st->nclasses; i++) {
		labels[0] = '\0';
		class_labels(st, i, labels, sizeof(labels));
		expo_sample(e, labels, st->classes[i]->size * st->classes[i]->total);
	}
	expo_family(e, PREFIX "class_leased_bytes", EXPO_GAUGE, "Bytes of the class's buffers leased now");
	for (uint32_t i = 0; i < st->nclasses; i++) {
		labels[0] = '\0';
		class_labels(st, i, labels, sizeof(labels));
		expo_sample(e, labels, st->classes[i]->size * st->classes[i]->leased);
	}
}

void metrics_print(struct expo *e, const struct hp_status *st, bool uids)
{
	bool all;

	print_up(e, st != NULL);
	if (!st) {
		expo_end(e);
		return;
	}
	all = uids && st->server.sees_all;
	gauge(e, PREFIX "scrape_sees_all_uids",
	      "1: these metrics show every uid's spill figures (hugepoolctl metrics --uids as an admin or in "
	      "monitor_group); 0: none but the spill limits (its own uid's too with --uids)",
	      (uint64_t)all);
	/* the daemon and its life */
	expo_family(e, PREFIX "start_time_seconds", EXPO_GAUGE,
		    "When this life of the daemon started, in seconds since the epoch");
	expo_sample_ns(e, "", st->started_ns);
	expo_family(e, PREFIX "boot_prefault_seconds", EXPO_GAUGE,
		    "How long this life's start took to fault in the buffers it made");
	expo_sample_ns(e, "", st->boot_prefault_ns);
	PRINT_ROWS(e, st, start_rows, ONE(&st->start), NULL);
	/* the pool */
	gauge(e, PREFIX "pool_bytes", "Bytes of the pool's buffers", st->pool_bytes);
	gauge(e, PREFIX "pool_page_size_bytes", "The smallest page size of any class (each class's: class_page_size_bytes)",
	      st->page_size);
	gauge(e, PREFIX "pool_hugetlb", "1: every class is backed by hugetlb pages", (uint64_t)st->hugetlb);
	gauge(e, PREFIX "pool_fallback",
	      "1: a class has other pages than it asked for (which: class_page_fallback)", (uint64_t)st->fallback);
	PRINT_ROWS(e, st, class_rows, EACH(st->classes, st->nclasses, class_labels), NULL);
	print_class_bytes(e, st);
	PRINT_ROWS(e, st, pages_rows, EACH_IN(st->classes, st->nclasses, pages, class_labels), NULL);
	PRINT_ROWS(e, st, acquire_rows, EACH_IN(st->classes, st->nclasses, acquire, class_labels), NULL);
	/* connections and the daemon's counters */
	PRINT_ROWS(e, st, server_rows, ONE(&st->server), NULL);
	PRINT_ROWS(e, st, counter_rows, ONE(st), NULL);
	/* journals */
	PRINT_ROWS(e, st, journal_rows, EACH(st->journals, st->njournals, journal_labels), NULL);
	print_journal_states(e, st);
	print_batch_sizes(e, st);
	PRINT_ROWS(e, st, durability_rows, EACH_IN(st->journals, st->njournals, durability, journal_labels), NULL);
	PRINT_ROWS(e, st, jpath_rows, EACH_IN(st->journals, st->njournals, path, journal_labels), NULL);
	PRINT_ROWS(e, st, jconfig_rows, EACH_IN(st->journals, st->njournals, config, journal_labels), NULL);
	/* spill: the machine's (its limits only, but to whom asked and sees every uid), each uid's */
	PRINT_ROWS(e, st, spill_rows, ONE(&st->spill), all ? NULL : spill_names_nobody);
	if (uids)
		PRINT_ROWS(e, st, spill_uid_rows, EACH(st->spill_uids, st->nspill_uids, uid_labels), NULL);
	expo_end(e);
}
