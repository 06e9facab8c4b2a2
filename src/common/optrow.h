/* SPDX-License-Identifier: MIT */
/*
 * optrow.h - a program's command-line options as rows, one per option, from which getopt_long's
 * tables and --help's option lines are both made (hugepoold's main.c, hugepoolctl's cmdline.c).
 * Plain functions of the rows: no state.
 */
#ifndef HP_OPTROW_H
#define HP_OPTROW_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

#define OPTROW_LONG_ONLY 0x100 /* the first val of an option that has no short letter */

struct optrow {
	const char *name; /* --name */
	int val; /* getopt's: the short letter, or OPTROW_LONG_ONLY and up for a long option only */
	const char *arg; /* the argument's name in --help; NULL: the option takes none */
	unsigned flag; /* the program's own (hugepoolctl: the OPT_* bit a command lists); 0: none */
	const char *help; /* for --help; each '\n' goes on under the first line, aligned */
};

/* The row whose getopt value is val, or NULL. */
const struct optrow *optrow_find(const struct optrow *rows, size_t n, int val);

/* getopt_long's tables from n rows: longopts has n + 1 entries, shortopts 2 * n + 2 chars
 * (':' first, so that a missing argument is the caller's to report). */
void optrow_getopt(const struct optrow *rows, size_t n, struct option *longopts, char *shortopts);

/* --help's lines for n rows, "  -c, --config=FILE   help", the help column after width
 * characters of the option's name (a longer name puts its help on the next line). */
void optrow_usage(FILE *f, const struct optrow *rows, size_t n, int width);

#endif
