/* SPDX-License-Identifier: MIT */
/*
 * expo.c - see expo.h. The two formats, side by side: a counter is "# TYPE x_total counter" in
 * Prometheus' and "# TYPE x counter" in OpenMetrics (its samples x_total in both); an info is a
 * gauge x_info in Prometheus' and "# TYPE x info" in OpenMetrics; OpenMetrics adds # UNIT and
 * ends with # EOF. Numbers are written exactly: integers as integers, nanoseconds as seconds
 * with up to nine decimals.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "expo.h"
#include "format.h"

const char *expo_content_type(enum expo_format fmt)
{
	return fmt == EXPO_OPENMETRICS ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
				       : "text/plain; version=0.0.4; charset=utf-8";
}

void expo_init(struct expo *e, FILE *f, enum expo_format fmt)
{
	*e = (struct expo){ .f = f, .fmt = fmt };
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The name a family's # lines carry, and its samples' stem (without _bucket, _sum, _count). */
static const char *type_suffix(const struct expo *e)
{
	if (e->fmt == EXPO_OPENMETRICS)
		return "";
	return e->type == EXPO_COUNTER ? "_total" : e->type == EXPO_INFO ? "_info" : "";
}

static const char *type_name(const struct expo *e)
{
	switch (e->type) {
	case EXPO_COUNTER:
		return "counter";
	case EXPO_HISTOGRAM:
		return "histogram";
	case EXPO_INFO:
		return e->fmt == EXPO_OPENMETRICS ? "info" : "gauge";
	case EXPO_GAUGE:
		break;
	}
	return "gauge";
}

/* Help text: a backslash and a line break escaped (both formats). */
static void put_help(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

void expo_family(struct expo *e, const char *name, enum expo_type type, const char *help)
{
	const char *sfx;

	e->type = type;
	snprintf(e->family, sizeof(e->family), "%s", name);
	sfx = type_suffix(e);
	fprintf(e->f, "# HELP %s%s ", name, sfx);
	put_help(e->f, help);
	fprintf(e->f, "\n# TYPE %s%s %s\n", name, sfx, type_name(e));
	if (e->fmt == EXPO_OPENMETRICS && (ends_with(name, "_seconds") || ends_with(name, "_bytes")))
		fprintf(e->f, "# UNIT %s %s\n", name, ends_with(name, "_seconds") ? "seconds" : "bytes");
}

char *expo_label(char *buf, size_t len, const char *name, const char *value)
{
	char safe[TEXT_ESCAPED_MAX];
	size_t at = strlen(buf), start = at;
	int n = snprintf(buf + at, len - at, "%s%s=\"", at ? "," : "", name);

	if (n < 0 || (size_t)n >= len - at)
		goto cut;
	at += (size_t)n;
	/*
	 * The value as hugepoolctl's text shows it (format.h): a name the daemon sent may hold
	 * terminal escapes or invalid UTF-8, which the formats would carry raw (they escape only
	 * the three characters below) to a terminal, and which Prometheus refuses whole scrapes for.
	 */
	text_escape(value, safe, sizeof(safe));
	for (const char *v = safe; *v; v++) {
		const char *esc = *v == '\\' ? "\\\\" : *v == '"' ? "\\\"" : *v == '\n' ? "\\n" : NULL;
		size_t k = esc ? 2 : 1;

		if (at + k + 2 > len)
			goto cut;
		memcpy(buf + at, esc ? esc : v, k);
		at += k;
	}
	if (at + 2 > len)
		goto cut;
	buf[at++] = '"';
	buf[at] = '\0';
	return buf;
cut:
	buf[start] = '\0';
	return buf;
}

/* name{labels} or name, then a space */
static void put_name(const struct expo *e, const char *suffix, const char *labels, const char *extra)
{
	bool any = labels && *labels, more = extra && *extra;

	fprintf(e->f, "%s%s", e->family, suffix);
	if (any || more)
		fprintf(e->f, "{%s%s%s}", any ? labels : "", any && more ? "," : "", more ? extra : "");
	fputc(' ', e->f);
}

static const char *sample_suffix(const struct expo *e)
{
	return e->type == EXPO_COUNTER ? "_total" : e->type == EXPO_INFO ? "_info" : "";
}

void expo_sample(struct expo *e, const char *labels, uint64_t v)
{
	put_name(e, sample_suffix(e), labels, NULL);
	fprintf(e->f, "%" PRIu64 "\n", v);
}

/* ns as seconds, exactly: 1500000000 -> 1.5, 1000 -> 0.000001 */
static void put_seconds(FILE *f, uint64_t ns)
{
	uint64_t frac = ns % 1000000000u;
	char digits[16];
	int n;

	if (!frac) {
		fprintf(f, "%" PRIu64, ns / 1000000000u);
		return;
	}
	n = snprintf(digits, sizeof(digits), "%09" PRIu64, frac);
	while (n > 0 && digits[n - 1] == '0')
		digits[--n] = '\0';
	fprintf(f, "%" PRIu64 ".%s", ns / 1000000000u, digits);
}

void expo_sample_ns(struct expo *e, const char *labels, uint64_t ns)
{
	put_name(e, sample_suffix(e), labels, NULL);
	put_seconds(e->f, ns);
	fputc('\n', e->f);
}

void expo_histogram(struct expo *e, const char *labels, const char *const *bounds, unsigned n, const uint64_t *buckets,
		    uint64_t count, const uint64_t *sum_ns, uint64_t sum)
{
	uint64_t cum = 0;
	char le[64];

	for (unsigned i = 0; i < n; i++) {
		cum += buckets[i];
		snprintf(le, sizeof(le), "le=\"%s\"", bounds[i]);
		put_name(e, "_bucket", labels, le);
		fprintf(e->f, "%" PRIu64 "\n", cum);
	}
	/* +Inf is the count: what was recorded above the last bound is in it */
	put_name(e, "_bucket", labels, "le=\"+Inf\"");
	fprintf(e->f, "%" PRIu64 "\n", count);
	put_name(e, "_sum", labels, NULL);
	if (sum_ns)
		put_seconds(e->f, *sum_ns);
	else
		fprintf(e->f, "%" PRIu64, sum);
	fputc('\n', e->f);
	put_name(e, "_count", labels, NULL);
	fprintf(e->f, "%" PRIu64 "\n", count);
}

void expo_end(struct expo *e)
{
	if (e->fmt == EXPO_OPENMETRICS)
		fputs("# EOF\n", e->f);
}
