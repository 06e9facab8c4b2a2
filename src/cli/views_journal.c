/* SPDX-License-Identifier: MIT */
/*
 * views_journal.c - what the journal verbs print: the daemon's view of its journals (journal
 * list, journal stat), the result of journal verify and the records of journal dump, each as
 * text or as JSON. The verbs in hugepoolctl.c fetch, read and check; these only print.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "size.h"
#include "util.h"
#include "views.h"

static double us_of(uint64_t ns)
{
	return (double)ns / 1e3;
}

void journals_text(const struct hp_status *st)
{
	int w = 7;
	char segs[32];

	if (st->njournals == 0) {
		printf("No journals.\n");
		return;
	}
	for (uint32_t i = 0; i < st->njournals; i++)
		w = MAX(w, (int)strlen(ESCAPED(st->journals[i]->name)));
	printf("%-*s %-6s %-8s %10s %7s %8s %10s %9s %6s %9s %9s %9s\n", w, "JOURNAL", "STATE", "BACKEND",
	       "DURABLE", "WRITERS", "SEGMENTS", "APPENDS", "BATCHES", "MEAN", "P50(us)", "P99(us)", "P999(us)");
	for (uint32_t i = 0; i < st->njournals; i++) {
		const struct hp_journal_status *js = st->journals[i];

		snprintf(segs, sizeof(segs), "%" PRIu32 "/%" PRIu32, js->segments_used, js->segments);
		/* a journal that loses records when full says so at the end of its line */
		printf("%-*s %-6s %-8s %10" PRIu64 " %7" PRIu32 " %8s %10" PRIu64 " %9" PRIu64
		       " %6.1f %9.1f %9.1f %9.1f%s\n",
		       w, ESCAPED(js->name), hp_journal_state_name(js->state), ESCAPED(js->backend), js->durable_lsn, js->writers, segs,
		       js->appends, js->batches, js->mean_batch, us_of(js->sync_p50_ns), us_of(js->sync_p99_ns),
		       us_of(js->sync_p999_ns), js->config.when_full == HP_JOURNAL_RECYCLE ? "  recycle" : "");
	}
}

/* The journal's latencies and I/O errors (version 6), as the member "durability". */
static void durability_json(struct json *j, const struct hp_journal_durability *src)
{
	json_open(j, "durability", '{');
	PROTO_STATUS_DURABILITY_FIELDS(JSON_FIELD)
	json_close(j, '}');
}

/* The members of struct hp_journal_path under their names, why as path_why. */
static void journal_path_json(struct json *j, const struct hp_journal_path *src)
{
	json_str(j, "path", src->path);
	json_str(j, "chosen", src->chosen);
	PROTO_STATUS_JPATH_FIELDS(JSON_FIELD)
	json_str(j, "path_why", src->why);
}

/* What hugepoold.conf sets for the journal (version 8), as the member "config", when_full as a word. */
static void config_json(struct json *j, const struct hp_journal_config *src)
{
	json_open(j, "config", '{');
	json_str(j, "when_full", proto_journal_when_full_name((uint32_t)src->when_full));
	PROTO_STATUS_JCONFIG_FIELDS(JSON_FIELD)
	json_close(j, '}');
}

/* Every member of a journal's record (struct hp_journal_status) under its own name (state as a
 * word), the batches by size as an array of HP_BATCH_BUCKETS counts, its latencies and I/O
 * errors as "durability", its path to the disk, and its configuration as "config". */
static void journal_json_members(struct json *j, const struct hp_journal_status *src)
{
	const struct hp_journal_batches *batches = &src->batch_sizes;

	json_str(j, "name", src->name);
	json_str(j, "state", hp_journal_state_name(src->state));
	json_int(j, "error", src->error);
	json_str(j, "error_text", src->error < 0 ? strerror(-src->error) : "");
	json_str(j, "backend", src->backend);
	json_bool(j, "direct", src->direct);
	PROTO_STATUS_JOURNAL_FIELDS(JSON_FIELD)
	json_double(j, "mean_batch", src->mean_batch);
	json_str(j, "note", src->note);
	json_str(j, "recovery", src->recovery);
	json_open(j, "batch_sizes", '[');
	for (unsigned k = 0; k < HP_BATCH_BUCKETS; k++)
		json_u64(j, NULL, batches->by_size[k]);
	json_close(j, ']');
	durability_json(j, &src->durability);
	journal_path_json(j, &src->path);
	config_json(j, &src->config);
}

void journals_json(struct json *j, const struct hp_status *st)
{
	json_open(j, "journals", '[');
	for (uint32_t i = 0; i < st->njournals; i++) {
		json_open(j, NULL, '{');
		journal_json_members(j, st->journals[i]);
		json_close(j, '}');
	}
	json_close(j, ']');
}

/* The journal's configuration: what a full journal does, and its batches' and rings' sizes. */
static void config_text(const struct hp_journal_config *cfg)
{
	char d[32], b[32], r[32];

	/* libhugepool let no other value through */
	if (cfg->when_full == HP_JOURNAL_RECYCLE)
		printf("When full:    recycle (the oldest segment is reused; records not truncated are lost)\n");
	else
		printf("When full:    block (appends wait for a truncate)\n");
	size_format(cfg->max_batch_bytes, b, sizeof(b));
	size_format(cfg->ring_size, r, sizeof(r));
	if (cfg->max_batch_delay_ns)
		printf("Batches at:   %s or %s, whichever comes first; rings of %s per writer\n",
		       span_format(cfg->max_batch_delay_ns, d, sizeof(d)), b, r);
	else
		printf("Batches at:   %s, or at once (max_batch_delay 0); rings of %s per writer\n", b, r);
}

static void journal_stat_text(const struct hp_journal_status *js)
{
	const struct hp_journal_batches *batches = &js->batch_sizes;
	const struct hp_journal_durability *durability = &js->durability;
	const struct hp_journal_path *path = &js->path;
	char b[32];
	bool any = false;

	printf("Journal:      %s\n", ESCAPED(js->name));
	if (js->state == 1)
		printf("State:        full (every segment holds records not truncated yet; appends wait)\n");
	else if (js->state == 2)
		printf("State:        failed, read-only until the daemon restarts: %s\n",
		       js->error < 0 ? strerror(-js->error) : "unknown error");
	else
		printf("State:        %s\n", hp_journal_state_name(js->state));
	printf("Backend:      %s, %s\n", ESCAPED(js->backend), js->direct ? "O_DIRECT" : "page cache");
	printf("Note:         %s\n", js->note[0] ? ESCAPED(js->note) : "-");
	printf("Segments:     %" PRIu32 " of %" PRIu32 " in use, %s each\n", js->segments_used, js->segments,
	       size_format(js->segment_size, b, sizeof(b)));
	config_text(&js->config);
	printf("LSNs:         next %" PRIu64 ", durable up to %" PRIu64 "%s\n", js->next_lsn, js->durable_lsn,
	       js->durable_lsn ? "" : " (none yet)");
	if (js->retain_lsn)
		printf("Truncated:    below LSN %" PRIu64 "\n", js->retain_lsn);
	else
		printf("Truncated:    never\n");
	printf("Writers:      %" PRIu32 "\n", js->writers);
	printf("Appends:      %" PRIu64 " records, %s on disk with their headers\n", js->appends,
	       size_format(js->bytes, b, sizeof(b)));
	printf("Batches:      %" PRIu64 ", %.2f records each on average; %" PRIu64 " syncs\n", js->batches,
	       js->mean_batch, js->syncs);
	printf("Batch sizes: ");
	for (unsigned k = 0; k < HP_BATCH_BUCKETS; k++)
		if (batches->by_size[k]) {
			printf("%s %s: %" PRIu64, any ? "," : "", proto_batch_bucket_name(k, b, sizeof(b)), batches->by_size[k]);
			any = true;
		}
	printf("%s\n", any ? " (records: batches)" : " none yet");
	printf("Path:         %s (the last batch's), %s\n", ESCAPED(path->path), ESCAPED(path->why));
	printf("By path:      inline-spin %" PRIu64 ", inline %" PRIu64 ", queued %" PRIu64 " batches\n",
	       path->inline_spin_batches, path->inline_batches, path->queued_batches);
	printf("Sync latency: p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us\n", us_of(js->sync_p50_ns),
	       us_of(js->sync_p99_ns), us_of(js->sync_p999_ns), us_of(js->sync_max_ns));
	printf("Recovery:     %s (%" PRIu64 " records)\n", js->recovery[0] ? ESCAPED(js->recovery) : "-",
	       js->recovered_records);
	printf("Durable in:   %.1f us on average per record, from the ring to durable; %" PRIu64 " I/O errors\n",
	       durability->to_durable.count ? us_of(durability->to_durable.sum_ns / durability->to_durable.count) : 0.0,
	       durability->io_errors);
}

void journal_stat_print(const struct hp_journal_status *js, bool json)
{
	if (json) {
		struct json j;

		json_line_begin(&j);
		journal_json_members(&j, js);
		json_line_end(&j);
	} else {
		journal_stat_text(js);
	}
}

void journal_verify_print(const struct journal_check *c, bool json)
{
	if (json) {
		struct json j;

		json_line_begin(&j);
		json_str(&j, "journal", c->journal);
		json_bool(&j, "intact", !c->problem[0]);
		json_str(&j, "result", !c->problem[0] ? "intact" : c->damaged ? "damaged" : "incomplete");
		json_u64(&j, "records", c->records);
		json_u64(&j, "bytes", c->bytes);
		json_u64(&j, "first_lsn", c->first_lsn);
		json_u64(&j, "last_lsn", c->last_lsn);
		json_u64(&j, "durable_lsn", c->durable_lsn);
		json_int(&j, "error", c->error);
		json_str(&j, "problem", c->problem);
		json_line_end(&j);
		return;
	}
	printf("Journal:  %s\n", c->journal);
	if (c->records)
		printf("Records:  %" PRIu64 ", LSN %" PRIu64 " to %" PRIu64 "%s\n", c->records, c->first_lsn,
		       c->last_lsn, c->first_lsn > 1 ? " (those before were truncated and their space reused)" : "");
	else
		printf("Records:  none\n");
	printf("Payload:  %" PRIu64 " bytes\n", c->bytes);
	printf("Durable:  up to LSN %" PRIu64 " when the check began\n", c->durable_lsn);
	printf("Result:   %s%s\n", !c->problem[0] ? "intact" : c->damaged ? "damaged: " : "incomplete: ",
	       c->problem);
}

void journal_record_print(uint64_t lsn, const void *data, size_t len, bool json, bool hex)
{
	const unsigned char *p = data;

	if (json) {
		struct json j;

		json_line_begin(&j);
		json_u64(&j, "lsn", lsn);
		json_u64(&j, "len", len);
		json_str(&j, "encoding", hex ? "hex" : "base64");
		json_key(&j, "payload");
		fputc('"', stdout);
		if (hex)
			print_hex(stdout, p, len);
		else
			print_base64(stdout, p, len);
		fputc('"', stdout);
		json_line_end(&j);
		return;
	}
	printf("%" PRIu64 " %zu", lsn, len);
	if (hex) {
		/* an empty payload is an empty third field */
		if (len)
			fputc(' ', stdout);
		print_hex(stdout, p, len);
	} else {
		fputc(' ', stdout);
		print_escaped(stdout, p, len);
	}
	fputc('\n', stdout);
}
