/* SPDX-License-Identifier: MIT */
/*
 * main.c - hugepoold's entry point: options, then the boot sequence, then the event loop.
 *
 * Boot: load the configuration -> create the pool (one sealed memfd per buffer) -> pre-fault it
 * in parallel (telling systemd EXTEND_TIMEOUT_USEC while that takes long) -> bind the socket ->
 * READY=1 -> serve until SIGTERM/SIGINT -> STOPPING=1, tear down. SIGTERM and SIGINT are
 * blocked before any thread starts so that only the event loop's signalfd sees them.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "config.h"
#include "journal.h"
#include "log.h"
#include "notify.h"
#include "pool.h"
#include "server.h"
#include "size.h"
#include "spill.h"
#include "util.h"

/*
 * The exit statuses, as hugepoold(8) lists them under EXIT STATUS: the EXIT_* constants and
 * --help's list are both made from this one list.
 */
#define EXIT_STATUSES(X)                                                                              \
	X(EXIT_OK, 0, "a clean shutdown, or --check-config, --help or --version succeeded")           \
	X(EXIT_USAGE, 1, "bad usage, or the event loop failed while serving")                         \
	X(EXIT_CONFIG, 2, "the configuration is invalid or cannot be read")                           \
	X(EXIT_POOL, 3, "the pool could not be created or faulted in")                                \
	X(EXIT_SOCKET, 4, "the socket could not be set up, or a configured user or group is unknown") \
	X(EXIT_JOURNAL, 5, "a journal could not be opened or recovered")                              \
	X(EXIT_SPILL, 6, "the spill directory is unusable")

#define EXIT_ENUM(name, status, meaning) name = status,
enum { EXIT_STATUSES(EXIT_ENUM) };
#undef EXIT_ENUM

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: hugepoold [OPTION]...\n"
		"Pre-fault hugepage-backed shared memory at boot and lease it to local clients.\n"
		"\n"
		"  -c, --config=FILE   configuration file (default " CONFIG_DEFAULT_PATH ")\n"
		"  -t, --check-config  check the configuration, print a summary and exit\n"
		"      --print-hugepages\n"
		"                      check the configuration, print the hugepages the pool\n"
		"                      needs as \"COUNT PAGE_SIZE_BYTES\" and exit\n"
		"  -f, --foreground    accepted for compatibility: hugepoold never forks\n"
		"  -v, --verbose       log debug messages too\n"
		"  -h, --help          show this help and exit\n"
		"  -V, --version       show the version and exit\n"
		"\n"
		"Exit status:\n");
#define EXIT_HELP(name, status, meaning) fprintf(f, "  %d  %s\n", status, meaning);
	EXIT_STATUSES(EXIT_HELP)
#undef EXIT_HELP
	fprintf(f, "See hugepoold(8) and hugepoold.conf(5).\n");
}

static void print_summary(const struct config *cfg, const char *path)
{
	char b[32];

	printf("%s: OK\n", path);
	printf("socket %s (mode %04o%s%s)\n", cfg->socket_path, (unsigned)cfg->socket_mode,
	       cfg->socket_group[0] ? ", group " : "", cfg->socket_group);
	printf("hugepages %s, page size %s, prefault threads %u\n", hugepages_mode_name(cfg->hugepages),
	       cfg->hugepages == HUGEPAGES_OFF ? "4.0 KiB" : size_format(cfg->page_size, b, sizeof(b)),
	       cfg->prefault_threads ? cfg->prefault_threads : prefault_default_threads());
	for (unsigned i = 0; i < cfg->nclasses; i++)
		printf("class %s: %u x %s\n", cfg->classes[i].name, cfg->classes[i].count,
		       size_format(cfg->classes[i].size, b, sizeof(b)));
	for (unsigned i = 0; i < cfg->njournals; i++)
		printf("journal %s: %s, %u segments of %s, backend %s%s\n", cfg->journals[i].name,
		       cfg->journals[i].directory, cfg->journals[i].segments,
		       size_format(cfg->journals[i].segment_size, b, sizeof(b)),
		       journal_backend_name(cfg->journals[i].backend), cfg->journals[i].direct ? ", direct" : "");
	printf("spill %s: threshold %s, ", cfg->spill_directory, size_format(cfg->spill_threshold, b, sizeof(b)));
	printf("at most %s", cfg->spill_max_bytes ? size_format(cfg->spill_max_bytes, b, sizeof(b)) : "unlimited bytes");
	if (cfg->spill_max_files)
		printf(" in %u files\n", cfg->spill_max_files);
	else
		printf(" in any number of files\n");
	printf("pool total %s\n", size_format(config_pool_bytes(cfg), b, sizeof(b)));
}

/*
 * --print-hugepages: what the pool needs reserved, for the unit that reserves it with hugeadm
 * before the daemon starts (hugepool-hugepages.service): "COUNT PAGE_SIZE_BYTES", COUNT 0 when
 * the pool uses no hugepages. Class sizes are multiples of the page size (config.c checks).
 */
static void print_hugepages(const struct config *cfg)
{
	uint64_t pages = cfg->hugepages == HUGEPAGES_OFF ? 0 : config_pool_bytes(cfg) / cfg->page_size;

	printf("%" PRIu64 " %" PRIu64 "\n", pages, cfg->page_size);
}

/*
 * The daemon holds an fd per buffer, per spill file and per connection: take the whole hard
 * limit of open files (systemd's LimitNOFILE, or the shell's), not the 1024 soft default.
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			log_warning("Failed to raise the open files limit to %llu: %m",
				    (unsigned long long)rl.rlim_max);
	}
}

/* What the daemon builds at boot, in order; parts_free takes down whatever exists, in reverse. */
struct parts {
	struct pool *pool;
	struct journal *journals[CONFIG_JOURNALS_MAX];
	unsigned njournals;
	struct spill *spill;
	struct server *srv;
};

static void parts_free(struct parts *d)
{
	server_free(d->srv);
	spill_free(d->spill);
	for (unsigned i = 0; i < d->njournals; i++)
		journal_close(d->journals[i]);
	pool_free(d->pool);
}

/* Take everything down and exit with status. */
static int boot_failed(struct parts *d, int status)
{
	parts_free(d);
	return status;
}

/* Every 250 ms while pre-faulting: stop on SIGTERM/SIGINT, report every 2 s. */
static bool boot_progress(uint64_t done, uint64_t total, void *ud)
{
	uint64_t *last = ud, now = now_ns();
	sigset_t pending;
	char a[32], b[32];

	/* blocked until the event loop reads them: look whether one is waiting */
	sigpending(&pending);
	if (sigismember(&pending, SIGTERM) || sigismember(&pending, SIGINT))
		return false;
	if (now - *last < 2000000000ull)
		return true;
	*last = now;
	/* faulting goes on: ask systemd for more time than one more report needs */
	notify_sendf("EXTEND_TIMEOUT_USEC=%u\nSTATUS=Pre-faulting %s of %s", 30u * 1000000u,
		     size_format(done, a, sizeof(a)), size_format(total, b, sizeof(b)));
	log_info("Pre-faulting: %s of %s done", a, b);
	return true;
}

int main(int argc, char **argv)
{
	enum { OPT_PRINT_HUGEPAGES = 0x100 };
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' }, { "check-config", no_argument, NULL, 't' },
		{ "print-hugepages", no_argument, NULL, OPT_PRINT_HUGEPAGES },
		{ "foreground", no_argument, NULL, 'f' },   { "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },	    { "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = CONFIG_DEFAULT_PATH;
	bool check = false, hugepages = false;
	static struct config cfg;
	char err[512], b1[32];
	static struct parts d;
	sigset_t mask;
	uint64_t last_report = now_ns();
	int c, r;

	while ((c = getopt_long(argc, argv, "c:tfvhV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			path = optarg;
			break;
		case 't':
			check = true;
			break;
		case OPT_PRINT_HUGEPAGES:
			check = hugepages = true;
			break;
		case 'f':
			break;
		case 'v':
			log_set_max_level(LOG_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case 'V':
			printf("hugepoold %s\n", HUGEPOOL_VERSION);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "hugepoold: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return EXIT_USAGE;
	}
	log_open();
	r = config_load(path, &cfg, err, sizeof(err));
	if (r < 0) {
		if (check)
			fprintf(stderr, "%s\n", err);
		else
			log_error("Invalid configuration: %s", err);
		return EXIT_CONFIG;
	}
	if (hugepages) {
		print_hugepages(&cfg);
		return EXIT_OK;
	}
	if (check) {
		print_summary(&cfg, path);
		return EXIT_OK;
	}

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* spill.c probes files with leases it drops at once; a lease break must not kill us */
	signal(SIGIO, SIG_IGN);

	raise_nofile();
	log_info("hugepoold %s starting: %u classes, %s, configuration '%s'", HUGEPOOL_VERSION, cfg.nclasses,
		 size_format(config_pool_bytes(&cfg), b1, sizeof(b1)), path);
	notify_send("STATUS=Creating the pool");
	if (pool_create(&cfg, &d.pool) < 0)
		return boot_failed(&d, EXIT_POOL);
	notify_send("STATUS=Pre-faulting the pool");
	r = pool_prefault(d.pool, cfg.prefault_threads, boot_progress, &last_report);
	if (r < 0) /* stopped on request: a clean exit, not a failure */
		return boot_failed(&d, r == -ECANCELED ? EXIT_OK : EXIT_POOL);
	/* journals recover before anyone can connect: clients only ever see a consistent log */
	for (; d.njournals < cfg.njournals; d.njournals++) {
		notify_sendf("STATUS=Recovering journal %s", cfg.journals[d.njournals].name);
		if (journal_open(&cfg.journals[d.njournals], &d.journals[d.njournals]) < 0)
			return boot_failed(&d, EXIT_JOURNAL);
	}
	if (spill_open(&cfg, &d.spill, err, sizeof(err)) < 0) {
		log_error("Spill streams unavailable: %s", err);
		return boot_failed(&d, EXIT_SPILL);
	}
	log_info("Spill directory '%s', in-memory threshold %s", cfg.spill_directory,
		 size_format(cfg.spill_threshold, b1, sizeof(b1)));
	if (server_open(&cfg, d.pool, d.journals, d.njournals, d.spill, &d.srv) < 0)
		return boot_failed(&d, EXIT_SOCKET);
	notify_sendf("READY=1\nSTATUS=Serving %s in %u buffers (%s pages)", size_format(d.pool->bytes, b1, sizeof(b1)),
		     d.pool->nbuffers, d.pool->hugetlb ? "hugetlb" : "regular");
	r = server_run(d.srv);
	notify_send("STOPPING=1");
	parts_free(&d);
	log_info("Stopped");
	return r < 0 ? EXIT_USAGE : EXIT_OK;
}
