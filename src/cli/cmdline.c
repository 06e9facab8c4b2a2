/* SPDX-License-Identifier: MIT */
/*
 * cmdline.c - hugepoolctl's command line against its tables (hugepoolctl.c): --help printed from
 * the rows of commands and options (optrow.h makes the options' lines and getopt's tables), and a command's
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

void cmdline_usage(FILE *f)
{
	fprintf(f,
		"Usage: hugepoolctl [OPTION]... COMMAND [ARGUMENT]...\n"
		"Show the state of hugepoold, the pre-faulted hugepage buffer pool, and look\n"
		"after its journals.\n"
		"\n"
		"Commands:\n");
	usage_commands(f, "", cmdline_commands, cmdline_ncommands);
	fprintf(f, "\nOptions:\n");
	optrow_usage(f, cmdline_options, cmdline_noptions, OPTION_WIDTH);
	fprintf(f,
		"\n"
		"Exit status: 0 success, 1 usage error, 2 cannot connect to the daemon,\n"
		"3 the daemon returned an error (such as no such journal), a protocol error\n"
		"occurred, or journal verify found the journal damaged.\n"
		"See hugepoolctl(1).\n");
}

int cmdline_usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("hugepoolctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'hugepoolctl --help' for more information.\n", stderr);
	return EXIT_USAGE;
}

bool cmdline_parse_positive(const char *s, uint64_t *ret)
{
	return decimal_parse(s, ret) == 0 && *ret > 0;
}

static bool journal_name_valid(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n < HP_NAME_MAX &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

/* As the user may have written it: "-s/--socket", "--from". */
int cmdline_missing_argument(int val)
{
	const struct optrow *o = optrow_find(cmdline_options, cmdline_noptions, val);

	if (!o)
		return cmdline_usage_error("option '?' requires an argument");
	if (o->val < OPTROW_LONG_ONLY)
		return cmdline_usage_error("option '-%c/--%s' requires an argument", o->val, o->name);
	return cmdline_usage_error("option '--%s' requires an argument", o->name);
}

int cmdline_resolve(char **words, int nwords, const struct command **ret, struct invocation *inv)
{
	const struct command *table = cmdline_commands, *cmd = NULL;
	size_t n = cmdline_ncommands;
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
			return *group ? cmdline_usage_error("missing %s command (one of: %s)", group, names)
				      : cmdline_usage_error("missing command");
		}
		cmd = NULL;
		for (size_t i = 0; i < n; i++)
			if (strcmp(words[w], table[i].name) == 0)
				cmd = &table[i];
		if (!cmd)
			return *group ? cmdline_usage_error("unknown %s command '%s'", group, words[w])
				      : cmdline_usage_error("unknown command '%s'", words[w]);
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
		return cmdline_usage_error("missing %s (usage: %s %s)", cmd->args[nwords - w].name, inv->cmd,
				   strchr(synopsis, ' ') + 1);
	}
	if ((unsigned)(nwords - w) > nargs)
		return cmdline_usage_error("unexpected argument '%s'", words[w + (int)nargs]);
	for (unsigned a = 0; a < nargs; a++) {
		const char *v = words[w + (int)a];

		switch (cmd->args[a].kind) {
		case ARG_JOURNAL:
			if (!journal_name_valid(v))
				return cmdline_usage_error("invalid journal name '%s': 1 to %d letters, digits, '_', '.' or '-'",
						   v, HP_NAME_MAX - 1);
			inv->journal = v;
			break;
		case ARG_LSN:
			if (!cmdline_parse_positive(v, &inv->lsn))
				return cmdline_usage_error("invalid %s '%s': must be a positive integer", cmd->args[a].name, v);
			break;
		}
	}
	for (size_t i = 0; i < cmdline_noptions; i++)
		if ((inv->given & cmdline_options[i].flag) && !(cmd->opts & cmdline_options[i].flag))
			return cmdline_usage_error("option '--%s' does not apply to '%s'", cmdline_options[i].name, inv->cmd);
	*ret = cmd;
	return 0;
}
