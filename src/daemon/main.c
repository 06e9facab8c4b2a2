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
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "config.h"
#include "fdstore.h"
#include "journal.h"
#include "log.h"
#include "notify.h"
#include "pool.h"
#include "reexec.h"
#include "server.h"
#include "size.h"
#include "spill.h"
#include "util.h"
#include "warm.h"

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

/*
 * The warm state's spill records: one per spill file (spill_max_files; "unlimited" keeps the
 * first 65536) and one per connection's counters page. A file past them is simply not kept: its
 * connection is closed by a next life.
 */
static uint32_t spill_records(const struct config *cfg)
{
	return (cfg->spill_max_files ? cfg->spill_max_files : 65536) + cfg->max_connections;
}

/*
 * What a warm restart keeps at most: every buffer, the state and the listening socket, and for
 * every connection its socket and counters page, and every spill file; each kept under a 12-byte
 * name (warm.h, "listen" 6), as systemd hands them back in LISTEN_FDNAMES (fdstore.h).
 */
static void print_store_needs(const struct config *cfg)
{
	uint64_t n = config_buffers(cfg) + spill_records(cfg) + cfg->max_connections + 2;
	uint64_t bytes = (n - 1) * (WARM_NAME_LEN + 1) + sizeof("listen");

	printf("warm restart keeps up to %" PRIu64 " fds (buffers + 2 x max_connections + spill files + 2), "
	       "%" PRIu64 " bytes of names; a re-execution hands all of them over, a restart by systemd %s "
	       "(FileDescriptorStoreMax= %u in hugepoold.service, %u bytes of LISTEN_FDNAMES)\n",
	       n, bytes, n <= FDSTORE_ENTRIES_DEFAULT && bytes <= FDSTORE_NAMES_MAX ? "too" : "only what fits",
	       FDSTORE_ENTRIES_DEFAULT, FDSTORE_NAMES_MAX);
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
	print_store_needs(cfg);
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

/*
 * Make the fd table hold n fds now, while the daemon has one thread: the kernel grows it by
 * doubling, and growing the table of a process with threads waits for an RCU grace period each
 * time (milliseconds in a VM). A re-execution copies every kept fd above the kept ones
 * (fdstore_exec_prepare) with the recycler running: about 10 ms of a 16 GiB pool's pause, now
 * paid here once, before anything is served. Tables never shrink; n is capped by the limit.
 */
static void grow_fd_table(uint64_t n)
{
	struct rlimit rl;
	int fd, big;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && n >= rl.rlim_cur)
		n = rl.rlim_cur - 1;
	if (n > INT_MAX || (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		return;
	big = fcntl(fd, F_DUPFD_CLOEXEC, (int)n);
	if (big >= 0)
		close(big);
	close(fd);
}

/* What the daemon builds at boot, in order; parts_free takes down whatever exists, in reverse. */
struct parts {
	struct fdstore_fd *handed; /* what the previous life left (fdstore.h), until taken */
	unsigned nhanded;
	struct warm_prev *prev; /* its state, if one was usable */
	struct pool *pool;
	struct warm *warm;
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
	warm_free(d->warm);
	pool_free(d->pool);
	warm_prev_free(d->prev);
	/* a failed boot leaves the service manager what it has not taken: the next try may */
	for (unsigned i = 0; i < d->nhanded; i++)
		if (d->handed[i].fd >= 0)
			close(d->handed[i].fd);
	free(d->handed);
}

/* For the tests: HUGEPOOLD_FAULT_INJECT=NAME:SPEC arms SPEC (jio_set_fault) in journal NAME. */
static const char *fault_for(const char *journal)
{
	const char *f = getenv("HUGEPOOLD_FAULT_INJECT");
	size_t n = strlen(journal);

	return f && strncmp(f, journal, n) == 0 && f[n] == ':' ? f + n + 1 : NULL;
}

/*
 * The state and the pool are kept, the state first, so that it is among what the service
 * manager can hand back however large the pool: before server_open, whose recycler may renew a
 * buffer (replacing its fd) as soon as it runs.
 */
static void keep_pool(struct parts *d)
{
	char name[WARM_NAME_MAX];
	unsigned failed;
	int r;

	warm_name(WARM_NAME_STATE, warm_id(d->warm), name);
	r = fdstore_add(name, warm_fd(d->warm), 0);
	failed = pool_store_fds(d->pool);
	if (r < 0 || failed)
		log_warning("The pool will not survive a restart of the daemon: %u buffers and %s could not be "
			    "kept in the file descriptor store",
			    failed, r < 0 ? "the state" : "not the state");
}

/*
 * Once server_open kept the listening socket and the connections: what nobody took is closed,
 * and what the service manager still holds of the previous life and this one does not keep
 * (the previous state, names of an older daemon) is dropped from it.
 */
static void keep_done(struct parts *d)
{
	struct fdstore_usage u;

	fdstore_received_free(d->handed, d->nhanded);
	d->handed = NULL;
	d->nhanded = 0;
	fdstore_usage(&u);
	if (getenv("NOTIFY_SOCKET") && u.sent < u.kept)
		log_warning("The service manager's file descriptor store holds %u of the %u fds kept (at most %u fds "
			    "and %zu bytes of names): after a restart by the service manager the rest is made "
			    "anew; a re-execution (systemctl reload, hugepoolctl restart) keeps everything",
			    u.sent, u.kept, u.entries_max, u.names_max);
}

/* One line: how this life started. */
static void log_start(const struct parts *d, const struct pool_adopt *a, const struct server_handover *h,
		      const char *why, uint64_t t0)
{
	char b1[32];
	double s = (double)(now_ns() - t0) / 1e9;

	if (a->adopted || h->adopted)
		log_info("Warm start (life %" PRIu64 "): adopted %" PRIu32 " buffers (%s), faulted %" PRIu32
			 ", dropped %" PRIu32 "; %u connections served on, %u closed; ready in %.3f s",
			 d->prev->lives + 1, a->adopted, size_format(a->adopted_bytes, b1, sizeof(b1)), a->created,
			 a->dropped, h->adopted, h->closed, s);
	else
		log_info("Cold start: %s; faulted %" PRIu32 " buffers, dropped %" PRIu32 ", in %.3f s",
			 d->prev ? "nothing the previous life left fits the configuration" : why, d->pool->nbuffers,
			 a->dropped, s);
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

/*
 * A restart without a service manager (or within one), checked and prepared by reexec_prepare
 * while the daemon still served: tear the daemon down as a stop for the next life does
 * (journals closed clean, the warm state left as it is), and become the daemon's binary again
 * with everything handed over (reexec.h).
 */
static int reexec(struct parts *d)
{
	int r;

	notify_send("RELOADING=1\nSTATUS=Restarting");
	parts_free(d);
	log_info("Re-executing '%s'", reexec_path());
	r = reexec_run();
	log_error_errno(r, "Failed to re-execute '%s': %m", reexec_path());
	return EXIT_USAGE;
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
	char err[512], why[256], b1[32];
	static struct parts d;
	struct pool_adopt adopt;
	struct server_handover handover;
	struct proto_status_start start;
	uint64_t t0 = now_ns();
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
	reexec_init(argv); /* before anything can replace the binary */
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
	sigaddset(&mask, SIGUSR2);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* spill.c probes files with leases it drops at once; a lease break must not kill us */
	signal(SIGIO, SIG_IGN);

	raise_nofile();
	log_info("hugepoold %s starting: %u classes, %s, configuration '%s'", HUGEPOOL_VERSION, cfg.nclasses,
		 size_format(config_pool_bytes(&cfg), b1, sizeof(b1)), path);
	/* what a previous life of the daemon left in the fd store (or handed over re-executing) */
	if (fdstore_receive(&d.handed, &d.nhanded) < 0)
		return boot_failed(&d, EXIT_POOL);
	warm_upgrade_names(d.handed, d.nhanded);
	/* what it will hold, twice over for a re-execution's copies */
	grow_fd_table(2 * ((uint64_t)config_buffers(&cfg) + cfg.max_connections + d.nhanded) + 64);
	warm_choose(d.handed, d.nhanded, &d.prev, why, sizeof(why));
	if (!d.prev && why[0]) {
		log_warning("The state the previous life left cannot be used (%s): starting cold", why);
		snprintf(why, sizeof(why), "the state could not be used");
	} else if (!d.prev)
		snprintf(why, sizeof(why), "%s", d.nhanded ? "no state was handed over" : "nothing was handed over");
	adopt = (struct pool_adopt){ .prev = d.prev, .fds = d.handed, .nfds = d.nhanded };
	notify_send("STATUS=Creating the pool");
	if (pool_create(&cfg, &adopt, &d.pool) < 0)
		return boot_failed(&d, EXIT_POOL);
	notify_send("STATUS=Pre-faulting the pool");
	r = pool_prefault(d.pool, cfg.prefault_threads, boot_progress, &last_report);
	if (r < 0) /* stopped on request: a clean exit, not a failure */
		return boot_failed(&d, r == -ECANCELED ? EXIT_OK : EXIT_POOL);
	r = warm_create(d.pool->nbuffers, cfg.max_connections, spill_records(&cfg), d.prev ? d.prev->lives + 1 : 1,
			d.pool->page_size, d.pool->hugetlb, &d.warm);
	if (r < 0) {
		log_error_errno(r, "Failed to create the warm state memfd: %m");
		return boot_failed(&d, EXIT_POOL);
	}
	/* journals recover before anyone can connect: clients only ever see a consistent log */
	for (; d.njournals < cfg.njournals; d.njournals++) {
		notify_sendf("STATUS=Recovering journal %s", cfg.journals[d.njournals].name);
		if (journal_open(&cfg.journals[d.njournals], fault_for(cfg.journals[d.njournals].name),
				 &d.journals[d.njournals]) < 0)
			return boot_failed(&d, EXIT_JOURNAL);
	}
	if (spill_open(&cfg, &d.spill, err, sizeof(err)) < 0) {
		log_error("Spill streams unavailable: %s", err);
		return boot_failed(&d, EXIT_SPILL);
	}
	log_info("Spill directory '%s', in-memory threshold %s", cfg.spill_directory,
		 size_format(cfg.spill_threshold, b1, sizeof(b1)));
	handover = (struct server_handover){ .listen_fd = fdstore_take(d.handed, d.nhanded, "listen"),
					     .prev = d.prev, .fds = d.handed, .nfds = d.nhanded };
	keep_pool(&d);
	if (server_open(&cfg, d.pool, d.journals, d.njournals, d.spill, d.warm, &handover, &d.srv) < 0)
		return boot_failed(&d, EXIT_SOCKET);
	keep_done(&d);
	start = (struct proto_status_start){ .warm = adopt.adopted || handover.adopted, .adopted_buffers = adopt.adopted,
					     .faulted_buffers = adopt.created,
					     .dropped_buffers = adopt.dropped, .adopted_connections = handover.adopted,
					     .closed_connections = handover.closed,
					     .lives = d.prev ? d.prev->lives + 1 : 1, .ready_ns = now_ns() - t0 };
	server_set_start(d.srv, &start);
	log_start(&d, &adopt, &handover, why, t0);
	notify_sendf("READY=1\nSTATUS=Serving %s in %u buffers (%s pages)", size_format(d.pool->bytes, b1, sizeof(b1)),
		     d.pool->nbuffers, d.pool->hugetlb ? "hugetlb" : "regular");
	r = server_run(d.srv);
	if (r == SERVER_REEXEC)
		return reexec(&d);
	notify_send("STOPPING=1");
	parts_free(&d);
	log_info("Stopped");
	return r < 0 ? EXIT_USAGE : EXIT_OK;
}
