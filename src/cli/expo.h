/* SPDX-License-Identifier: MIT */
/*
 * expo.h - hugepoolctl's writer of metrics in the Prometheus text exposition format (0.0.4) and
 * in OpenMetrics 1.0 text, straight to a FILE: a family's # HELP and # TYPE (and OpenMetrics'
 * # UNIT, from the name's _seconds or _bytes), its samples with their labels, histograms
 * (cumulative _bucket{le}, _sum, _count), and OpenMetrics' # EOF. Where the two formats differ
 * (a counter's family name without _total, the info type) is decided here and nowhere else.
 * It knows nothing of hugepool; the caller keeps each family's samples together, as both
 * formats require, and names families as Prometheus' conventions say.
 */
#ifndef HP_CLI_EXPO_H
#define HP_CLI_EXPO_H

#include <stdint.h>
#include <stdio.h>

enum expo_format {
	EXPO_PROMETHEUS, /* text/plain; version=0.0.4 */
	EXPO_OPENMETRICS, /* application/openmetrics-text; version=1.0.0 */
};

/* The Content-Type of each format, for HTTP. */
const char *expo_content_type(enum expo_format fmt);

enum expo_type {
	EXPO_GAUGE,
	EXPO_COUNTER, /* named without _total: its samples get it */
	EXPO_HISTOGRAM,
	EXPO_INFO, /* named without _info: one sample of value 1 whose labels say it all */
};

struct expo {
	FILE *f;
	enum expo_format fmt;
	enum expo_type type; /* of the family being written */
	char family[128]; /* its name, as the caller gave it */
};

void expo_init(struct expo *e, FILE *f, enum expo_format fmt);

/* Start a family: name (a valid metric name), its type, its help (one line; escaped here). */
void expo_family(struct expo *e, const char *name, enum expo_type type, const char *help);

/*
 * Labels, as written inside the braces: expo_label appends name="value" to buf (size len, holding
 * a NUL-terminated list, "" at first); returns buf. The value is written as hugepoolctl's text
 * writes a string (format.h's text_escape: no control character, no invalid UTF-8, whoever
 * wrote it), then escaped as both formats want (\\, \" and \n). A list too long for buf is cut
 * at the last whole label.
 */
char *expo_label(char *buf, size_t len, const char *name, const char *value);

/*
 * A sample of the current gauge, counter or info family: labels as expo_label makes them (""
 * for none). An integer is written exactly; expo_sample_ns writes ns as seconds, exactly.
 */
void expo_sample(struct expo *e, const char *labels, uint64_t v);
void expo_sample_ns(struct expo *e, const char *labels, uint64_t ns);

/*
 * A histogram of the current family: n bounds (the le labels, as they are to be written, in
 * increasing order), buckets[0..n] the samples in each bucket (not cumulative; buckets[n] above
 * the last bound), count of them and their sum (sum_ns: in ns, written in seconds; or sum, a
 * plain number, with sum_ns NULL).
 */
void expo_histogram(struct expo *e, const char *labels, const char *const *bounds, unsigned n, const uint64_t *buckets,
		    uint64_t count, const uint64_t *sum_ns, uint64_t sum);

/* The end of the exposition (OpenMetrics: # EOF). */
void expo_end(struct expo *e);

#endif
