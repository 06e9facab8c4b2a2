/* SPDX-License-Identifier: MIT */
/*
 * optrow.c - see optrow.h.
 */
#include <string.h>

#include "optrow.h"

void optrow_getopt(const struct optrow *rows, size_t n, struct option *longopts, char *shortopts)
{
	*shortopts++ = ':';
	for (size_t i = 0; i < n; i++) {
		const struct optrow *o = &rows[i];

		longopts[i] = (struct option){ o->name, o->arg ? required_argument : no_argument, NULL, o->val };
		if (o->val < OPTROW_LONG_ONLY) {
			*shortopts++ = (char)o->val;
			if (o->arg)
				*shortopts++ = ':';
		}
	}
	longopts[n] = (struct option){ NULL, 0, NULL, 0 };
	*shortopts = '\0';
}

const struct optrow *optrow_find(const struct optrow *rows, size_t n, int val)
{
	for (size_t i = 0; i < n; i++)
		if (rows[i].val == val)
			return &rows[i];
	return NULL;
}

void optrow_usage(FILE *f, const struct optrow *rows, size_t n, int width)
{
	for (size_t i = 0; i < n; i++) {
		const struct optrow *o = &rows[i];
		const char *help = o->help, *nl;
		char name[64];
		int len;

		len = snprintf(name, sizeof(name), "--%s%s%s", o->name, o->arg ? "=" : "", o->arg ? o->arg : "");
		if (o->val < OPTROW_LONG_ONLY)
			fprintf(f, "  -%c, %-*s", o->val, width, name);
		else
			fprintf(f, "      %-*s", width, name);
		if (len > width)
			fprintf(f, "\n%*s", 6 + width, "");
		while ((nl = strchr(help, '\n'))) {
			fprintf(f, "%.*s\n%*s", (int)(nl - help), help, 6 + width, "");
			help = nl + 1;
		}
		fprintf(f, "%s\n", help);
	}
}
