/* SPDX-License-Identifier: MIT */
/*
 * cmdline.h - the shape of hugepoolctl's command line: the rows of its command and option tables
 * (the tables themselves are in hugepoolctl.c, beside the verbs they name), what one run was
 * asked to do, and the functions of cmdline.c that check a command line against the tables and
 * print --help from them.
 */
#ifndef HP_CLI_CMDLINE_H
#define HP_CLI_CMDLINE_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hugepool.h"
#include "json.h"
#include "optrow.h"

#define EXIT_USAGE 1 /* bad options or command */
#define EXIT_CONNECT 2 /* no daemon to talk to, or not allowed to talk to it */
#define EXIT_DAEMON 3 /* the daemon answered with an error, the protocol broke, or a journal is damaged */

/* Options beyond -s, -h and -V: a command says which of them apply to it. */
enum {
	OPT_JSON = 1u << 0,
	OPT_FROM = 1u << 1,
	OPT_MAX = 1u << 2,
	OPT_HEX = 1u << 3,
	OPT_OPENMETRICS = 1u << 4,
	OPT_OUTPUT = 1u << 5,
	OPT_HTTP = 1u << 6,
	OPT_UIDS = 1u << 7,
};

/* getopt values of the options without a short form */
enum {
	LONGOPT_FROM = OPTROW_LONG_ONLY,
	LONGOPT_MAX,
	LONGOPT_HEX,
	LONGOPT_OPENMETRICS,
	LONGOPT_HTTP,
	LONGOPT_UIDS,
};

/* What positional arguments are, so that they are checked before connecting. */
enum arg_kind {
	ARG_JOURNAL, /* a journal name: 1..HP_NAME_MAX-1 of [A-Za-z0-9_.-] */
	ARG_LSN, /* a positive decimal integer */
};

#define ARGS_MAX 2

struct arg {
	const char *name; /* as --help and the errors show it */
	enum arg_kind kind;
};

/* One run: the options given, the command's checked arguments and the connection. */
struct invocation {
	char cmd[64]; /* the command's words, "journal dump" */
	unsigned given; /* OPT_* seen on the command line */
	bool json, hex, openmetrics, http, uids;
	const char *output; /* --output FILE */
	uint64_t from, max; /* --from, --max; 0 when not given */
	const char *journal; /* ARG_JOURNAL */
	uint64_t lsn; /* ARG_LSN */
	const char *path; /* the daemon's socket */
	hp_conn *conn;
};

/* A command, one row each, in --help's order; or a group of them ("journal"). */
struct command {
	const char *name;
	const char *help;
	/* a group: the next word names one of these, and they hold the rest */
	const struct command *sub;
	size_t nsub;
	struct arg args[ARGS_MAX]; /* positional, all required; name NULL ends the list */
	unsigned opts; /* OPT_* that apply */
	bool own_connection; /* run connects (or not) itself: main does not connect first */
	int (*run)(const struct command *cmd, struct invocation *inv); /* returns the exit status */
	/* for run_status: print one hp_status (json: members of the top-level object) */
	void (*text)(const struct hp_status *st);
	void (*json)(struct json *j, const struct hp_status *st);
};

/*
 * hugepoolctl.c's tables: the commands, and the options, one row each in --help's order
 * (optrow.h: getopt's tables, --help's lines and the usage errors are made from them; a row's
 * flag is the OPT_* a command lists when the option applies to it, 0 when it applies to all)
 */
extern const struct command cmdline_commands[];
extern const size_t cmdline_ncommands;
extern const struct optrow cmdline_options[];
extern const size_t cmdline_noptions;

/* --help, to f. */
void cmdline_usage(FILE *f);

/* "hugepoolctl: <the error>" and a pointer to --help on stderr; returns EXIT_USAGE. */
int cmdline_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A positive decimal integer: digits only, no sign, no blank, no overflow. */
bool cmdline_parse_positive(const char *s, uint64_t *ret);

/* Say that the option with getopt value val lacks its argument; returns EXIT_USAGE. */
int cmdline_missing_argument(int val);

/*
 * Find the command that words[0..] name, walking into groups; check its arguments and the
 * options given (inv->given) into inv. Returns 0 or the usage error's exit status.
 */
int cmdline_resolve(char **words, int nwords, const struct command **ret, struct invocation *inv);

#endif
