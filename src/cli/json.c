/* SPDX-License-Identifier: MIT */
/*
 * json.c - hugepoolctl's JSON writer (see json.h): each value printed as it comes, with a comma
 * before every one but the first of its object or array.
 */
#include <inttypes.h>

#include "json.h"

void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
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
