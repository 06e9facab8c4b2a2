/* SPDX-License-Identifier: MIT */
/*
 * cmdline.c - hugepoolctl's command line against its tables (hugepoolctl.c): --help printed from
 * the rows of commands and options, getopt's tables made from the option rows, and a command's
 * words resolved to its row, with its arguments and the options given checked before anything
 * is sent to the daemon. Every usage error is one line on stderr and exit status 1.
 */
#include <stdarg.h>
#include <string.h>

#include "cmdline.h"
#include "size.h"
#include "util.h"

/* --help's column of option names: "  -s, " then "--socket=PATH" padded to this width */
#define OPTION_WIDTH 15

/* "journal truncate NAME LSN" */
static void command_synopsis(const char *prefix, const struct command *c, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "%s%s%s", prefix, *prefix ? " " : "", c->name);

	for (unsigned a = 0; a < ARGS_MAX && c->args[a].name && n < len; a++)
		n += (size_t)snprintf(buf + n, len - n, " %s", c->args[a].name);
}

static void usage_commands(FILE *f, const char *prefix, const struct command *table, size_t n)
{
	char b[64];

	for (size_t i = 0; i < n; i++) {
		command_synopsis(prefix, &table[i], b, sizeof(b));
		if (table[i].sub)
			usage_commands(f, b, table[i].sub, table[i].nsub);
		else
			fprintf(f, "  %-26s %s\n", b, table[i].help);
	}
}

/* "  -s, --socket=PATH  the daemon's socket ..." */
static void usage_options(FILE *f)
{
	for (size_t i = 0; i < noptions; i++) {
		const struct option_row *o = &options[i];
		const char *help = o->help, *nl;
		char name[32];

		snprintf(name, sizeof(name), "--%s%s%s", o->name, o->arg ? "=" : "", o->arg ? o->arg : "");
		if (o->val < 128)
			fprintf(f, "  -%c, %-*s", o->val, OPTION_WIDTH, name);
		else
			fprintf(f, "      %-*s", OPTION_WIDTH, name);
		while ((nl = strchr(help, '\n'))) {
			fprintf(f, "%.*s\n%*s", (int)(nl - help), help, 6 + OPTION_WIDTH, "");
			help = nl + 1;
		}
		fprintf(f, "%s\n", help);
	}
}

void usage(FILE *f)
{
	fprintf(f,
		"Usage: hugepoolctl [OPTION]... COMMAND [ARGUMENT]...\n"
		"Show the state of hugepoold, the pre-faulted hugepage buffer pool, and look\n"
		"after its journals.\n"
		"\n"
		"Commands:\n");
	usage_commands(f, "", commands, ncommands);
	fprintf(f, "\nOptions:\n");
	usage_options(f);
	fprintf(f,
		"\n"
		"Exit status: 0 success, 1 usage error, 2 cannot connect to the daemon,\n"
		"3 the daemon returned an error (such as no such journal), a protocol error\n"
		"occurred, or journal verify found the journal damaged.\n"
		"See hugepoolctl(1).\n");
}

int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("hugepoolctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'hugepoolctl --help' for more information.\n", stderr);
	return EXIT_USAGE;
}

bool parse_positive(const char *s, uint64_t *ret)
{
	return decimal_parse(s, ret) == 0 && *ret > 0;
}

static bool journal_name_valid(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n < HP_NAME_MAX &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

const struct option_row *option_find(int val)
{
	for (size_t i = 0; i < noptions; i++)
		if (options[i].val == val)
			return &options[i];
	return NULL;
}

/* ":s:jhV": ':' first, so that a missing argument is ours to report */
void getopt_tables(struct option *longopts, char *shortopts)
{
	*shortopts++ = ':';
	for (size_t i = 0; i < noptions; i++) {
		const struct option_row *o = &options[i];

		longopts[i] = (struct option){ o->name, o->arg ? required_argument : no_argument, NULL, o->val };
		if (o->val < 128) {
			*shortopts++ = (char)o->val;
			if (o->arg)
				*shortopts++ = ':';
		}
	}
	longopts[noptions] = (struct option){ NULL, 0, NULL, 0 };
	*shortopts = '\0';
}

/* As the user may have written it: "-s/--socket", "--from". */
int missing_argument(int val)
{
	const struct option_row *o = option_find(val);

	if (!o)
		return usage_error("option '?' requires an argument");
	if (o->val < 128)
		return usage_error("option '-%c/--%s' requires an argument", o->val, o->name);
	return usage_error("option '--%s' requires an argument", o->name);
}

int resolve(char **words, int nwords, const struct command **ret, struct invocation *inv)
{
	const struct command *table = commands, *cmd = NULL;
	size_t n = ncommands;
	int w = 0;
	unsigned nargs = 0;

	inv->cmd[0] = '\0';
	while (!cmd || cmd->sub) {
		const char *group = inv->cmd;

		if (w >= nwords) {
			char names[128] = "";

			for (size_t i = 0, used = 0; i < n && used < sizeof(names); i++)
				used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
							 table[i].name);
			return *group ? usage_error("missing %s command (one of: %s)", group, names)
				      : usage_error("missing command");
		}
		cmd = NULL;
		for (size_t i = 0; i < n; i++)
			if (strcmp(words[w], table[i].name) == 0)
				cmd = &table[i];
		if (!cmd)
			return *group ? usage_error("unknown %s command '%s'", group, words[w])
				      : usage_error("unknown command '%s'", words[w]);
		snprintf(inv->cmd + strlen(inv->cmd), sizeof(inv->cmd) - strlen(inv->cmd), "%s%s",
			 *group ? " " : "", cmd->name);
		w++;
		table = cmd->sub;
		n = cmd->nsub;
	}
	while (nargs < ARGS_MAX && cmd->args[nargs].name)
		nargs++;
	if ((unsigned)(nwords - w) < nargs) {
		char synopsis[64];

		command_synopsis("", cmd, synopsis, sizeof(synopsis));
		return usage_error("missing %s (usage: %s %s)", cmd->args[nwords - w].name, inv->cmd,
				   strchr(synopsis, ' ') + 1);
	}
	if ((unsigned)(nwords - w) > nargs)
		return usage_error("unexpected argument '%s'", words[w + (int)nargs]);
	for (unsigned a = 0; a < nargs; a++) {
		const char *v = words[w + (int)a];

		switch (cmd->args[a].kind) {
		case ARG_JOURNAL:
			if (!journal_name_valid(v))
				return usage_error("invalid journal name '%s': 1 to %d letters, digits, '_', '.' or '-'",
						   v, HP_NAME_MAX - 1);
			inv->journal = v;
			break;
		case ARG_LSN:
			if (!parse_positive(v, &inv->lsn))
				return usage_error("invalid %s '%s': must be a positive integer", cmd->args[a].name, v);
			break;
		}
	}
	for (size_t i = 0; i < noptions; i++)
		if ((inv->given & options[i].bit) && !(cmd->opts & options[i].bit))
			return usage_error("option '--%s' does not apply to '%s'", options[i].name, inv->cmd);
	*ret = cmd;
	return 0;
}
