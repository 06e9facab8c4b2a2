/* SPDX-License-Identifier: MIT */
/*
 * json.c - hugepoolctl's JSON writer (see json.h): each value printed as it comes, with a comma
 * before every one but the first of its object or array.
 */
#include <inttypes.h>
#include <string.h>

#include "format.h"
#include "hugepool.h"
#include "json.h"

void json_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);

	fputc('"', f);
	for (size_t i = 0, len; i < n; i += len ? len : 1) {
		uint32_t cp;

		len = utf8_decode(p + i, n - i, &cp);
		if (len && cp >= 0xa0)
			fwrite(p + i, 1, len, f); /* JSON is UTF-8: a character as itself */
		else if (len)
			fprintf(f, "\\u%04x", cp); /* a C1 control, by its code point */
		else if (p[i] == '"' || p[i] == '\\')
			fprintf(f, "\\%c", p[i]);
		else if (p[i] == '\n')
			fputs("\\n", f);
		else if (p[i] == '\t')
			fputs("\\t", f);
		else if (p[i] < 0x20 || p[i] >= 0x7f)
			fprintf(f, "\\u%04x", p[i]); /* a control, or a byte of invalid UTF-8 */
		else
			fputc(p[i], f);
	}
	fputc('"', f);
}

void json_key(struct json *j, const char *key)
{
	if (j->comma)
		fputc(',', j->f);
	j->comma = true;
	if (key) {
		json_string(j->f, key);
		fputc(':', j->f);
	}
}

void json_open(struct json *j, const char *key, char bracket)
{
	json_key(j, key);
	fputc(bracket, j->f);
	j->comma = false;
}

void json_close(struct json *j, char bracket)
{
	fputc(bracket, j->f);
	j->comma = true;
}

void json_str(struct json *j, const char *key, const char *v)
{
	json_key(j, key);
	json_string(j->f, v);
}

void json_u64(struct json *j, const char *key, uint64_t v)
{
	json_key(j, key);
	fprintf(j->f, "%" PRIu64, v);
}

void json_int(struct json *j, const char *key, int64_t v)
{
	json_key(j, key);
	fprintf(j->f, "%" PRId64, v);
}

void json_bool(struct json *j, const char *key, bool v)
{
	json_key(j, key);
	fputs(v ? "true" : "false", j->f);
}

void json_latency(struct json *j, const char *key, const struct hp_latency *h)
{
	json_open(j, key, '{');
	json_u64(j, "count", h->count);
	json_u64(j, "sum_ns", h->sum_ns);
	json_open(j, "buckets", '[');
	for (unsigned i = 0; i <= HP_LATENCY_BUCKETS; i++)
		json_u64(j, NULL, h->buckets[i]);
	json_close(j, ']');
	json_close(j, '}');
}

void json_double(struct json *j, const char *key, double v)
{
	json_key(j, key);
	fprintf(j->f, "%.6g", v);
}

void json_line_begin(struct json *j)
{
	*j = (struct json){ .f = stdout };
	json_open(j, NULL, '{');
}

void json_line_end(struct json *j)
{
	json_close(j, '}');
	fputc('\n', j->f);
}
