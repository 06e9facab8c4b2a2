/* SPDX-License-Identifier: MIT */
/*
 * json.h - hugepoolctl's JSON writer: objects and arrays written straight to a FILE, member by
 * member, with the commas between them kept track of. No tree, no allocation; the caller opens
 * and closes what it nests. Strings are escaped so that the output is valid JSON whatever bytes
 * they hold.
 */
#ifndef HP_CLI_JSON_H
#define HP_CLI_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct json {
	FILE *f;
	bool comma; /* a value was written at this level: the next one needs a comma */
};

/*
 * A JSON string: valid UTF-8 as itself but C1 controls (\u0080..\u009f); control characters,
 * and each byte of invalid UTF-8 on its own (as \u00XX), escaped, so the output is valid JSON
 * whatever bytes s holds.
 */
void json_string(FILE *f, const char *s);

/* Start a member ("key":) of an object, or an element of an array when key is NULL. */
void json_key(struct json *j, const char *key);

/* Open an object ('{') or an array ('['), as a member key or an element (key NULL); close it. */
void json_open(struct json *j, const char *key, char bracket);
void json_close(struct json *j, char bracket);

/* A member (or, key NULL, an element) of each type. */
void json_str(struct json *j, const char *key, const char *v);
void json_u64(struct json *j, const char *key, uint64_t v);
void json_int(struct json *j, const char *key, int64_t v);
void json_bool(struct json *j, const char *key, bool v);
void json_double(struct json *j, const char *key, double v); /* %.6g */
/* A latency histogram of hugepool.h: {"count":..,"sum_ns":..,"buckets":[..]}. */
struct hp_latency;
void json_latency(struct json *j, const char *key, const struct hp_latency *h);

/* One top-level object on stdout, ended by a newline: the --json output of a command or a record. */
void json_line_begin(struct json *j);
void json_line_end(struct json *j);

#endif
