/* SPDX-License-Identifier: MIT */
/*
 * main.c - hugepoold's entry point: options, then the boot sequence, then the event loop.
 *
 * Boot (boot_steps, in order): load the configuration -> take over what a previous life left ->
 * create the pool (one sealed memfd per buffer, or the previous life's) -> pre-fault it in
 * parallel (telling systemd EXTEND_TIMEOUT_USEC while that takes long) -> the warm state ->
 * recover the journals -> the spill directory -> the socket -> READY=1 -> serve until
 * SIGTERM/SIGINT -> STOPPING=1, tear down. Each step logs its own failure (log.h) and main
 * exits with the step's status (EXIT_STATUSES). SIGTERM and SIGINT are blocked before any
 * thread starts so that only the event loop's signalfd sees them.
 */
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "fdstore.h"
#include "journal.h"
#include "log.h"
#include "notify.h"
#include "optrow.h"
#include "pages.h"
#include "pool.h"
#include "reexec.h"
#include "server.h"
#include "size.h"
#include "spill.h"
#include "takeover.h"
#include "util.h"
#include "warm.h"

/* CLOCK_MONOTONIC ns a re-executing life stopped serving at, for the next one's account of the pause */
#define STOPPED_ENV "HUGEPOOLD_STOPPED_NS"
/* a re-execution that ends a restart = exec: the connection that asked, to answer (server.h) */
#define ASKER_ENV "HUGEPOOLD_RESTART_ASKER"

/*
 * The exit statuses, as hugepoold(8) lists them under EXIT STATUS: the EXIT_* constants and
 * --help's list are both made from this one list.
 */
#define EXIT_STATUSES(X)                                                                              \
	X(EXIT_OK, 0, "a clean shutdown, or --check-config, --help or --version succeeded")           \
	X(EXIT_USAGE, 1, "bad usage, or the event loop failed while serving")                         \
	X(EXIT_CONFIG, 2, "the configuration is invalid or cannot be read")                           \
	X(EXIT_POOL, 3, "the pool could not be created or faulted in")                                \
	X(EXIT_SOCKET, 4, "a socket could not be set up, or a configured user or group is unknown")  \
	X(EXIT_JOURNAL, 5, "a journal could not be opened or recovered")                              \
	X(EXIT_SPILL, 6, "the spill directory is unusable")

#define EXIT_ENUM(name, status, meaning) name = status,
enum { EXIT_STATUSES(EXIT_ENUM) };
#undef EXIT_ENUM

/* The options, in --help's order (parse_options' switch says what each one does). */
enum { OPT_PRINT_HUGEPAGES = OPTROW_LONG_ONLY };
static const struct optrow options[] = {
	{ "config", 'c', "FILE", 0, "configuration file (default " CONFIG_DEFAULT_PATH ")" },
	{ "check-config", 't', NULL, 0, "check the configuration, print a summary and exit" },
	{ "print-hugepages", OPT_PRINT_HUGEPAGES, NULL, 0,
	  "check the configuration, print the hugepages the pool\n"
	  "needs as \"COUNT PAGE_SIZE_BYTES\" and exit" },
	{ "foreground", 'f', NULL, 0, "accepted for compatibility: hugepoold never forks" },
	{ "verbose", 'v', NULL, 0, "log debug messages too" },
	{ "help", 'h', NULL, 0, "show this help and exit" },
	{ "version", 'V', NULL, 0, "show the version and exit" },
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: hugepoold [OPTION]...\n"
		   "Pre-fault hugepage-backed shared memory at boot and lease it to local clients.\n"
		   "\n");
	optrow_usage(f, options, ARRAY_SIZE(options), 16);
	fprintf(f, "\nExit status:\n");
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
	printf("hugepages %s, page size %s, prefault threads %u\n", hugepages_mode_to_string(cfg->hugepages),
	       cfg->hugepages == HUGEPAGES_OFF ? "4K" : config_page_size_name(cfg->page_size),
	       cfg->prefault_threads ? cfg->prefault_threads : prefault_default_threads());
	for (unsigned i = 0; i < cfg->nclasses; i++) {
		const struct config_class *c = &cfg->classes[i];
		uint64_t cand[PAGES_HUGE_SIZES];

		/* auto: what it asks for first on this machine */
		pages_candidates(c, cand);
		printf("class %s: %u x %s, page size %s%s%s\n", c->name, c->count, size_format(c->size, b, sizeof(b)),
		       cfg->hugepages == HUGEPAGES_OFF ? "4K" : config_page_size_name(c->page_size),
		       cfg->hugepages != HUGEPAGES_OFF && c->page_size == CONFIG_PAGE_SIZE_AUTO ? ": " : "",
		       cfg->hugepages != HUGEPAGES_OFF && c->page_size == CONFIG_PAGE_SIZE_AUTO
			       ? config_page_size_name(cand[0])
			       : "");
	}
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
 * before the daemon starts (hugepool-hugepages.service): a line "COUNT PAGE_SIZE_BYTES" per page
 * size its classes ask for (pages.h), smallest first; one "0 2097152" when it asks for none.
 */
static void print_hugepages(const struct config *cfg)
{
	struct pages_need need[PAGES_HUGE_SIZES];
	unsigned n = pages_needed(cfg, need);

	for (unsigned i = 0; i < n; i++)
		printf("%" PRIu64 " %" PRIu64 "\n", need[i].count, need[i].page_size);
	if (n == 0)
		printf("0 %" PRIu64 "\n", PAGES_2M);
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
 * time (milliseconds in a VM): about 10 ms of a 16 GiB pool's pause when a re-execution copied
 * every kept fd while the recycler ran, paid here once instead, before anything is served.
 * Tables never shrink; n is capped by the limit.
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

/*
 * The daemon as it boots: what the command line said, the configuration, what the boot builds
 * (in order; boot_free takes down whatever exists, in reverse) and what it learns on the way
 * about how this life started.
 */
struct boot {
	const char *config_path;
	struct config cfg;
	uint64_t t0, last_report;
	struct fdstore_fd *handed; /* what the previous life left (fdstore.h), until taken */
	unsigned nhanded;
	struct warm_prev *prev; /* its state, if one was usable */
	char cold_why[256]; /* why this life starts cold, when it does */
	struct pool_adopt adopt;
	struct pool *pool;
	struct warm *warm;
	/* [0, nprepared) held (journal_prepare), of which [0, njournals) open: a take-over's next
	 * life prepares them all while it prepares and opens them after GO */
	struct journal *journals[CONFIG_JOURNALS_MAX];
	unsigned njournals, nprepared;
	struct spill *spill;
	struct server_handover handover;
	struct server *srv;
	/* a take-over's next life (takeover.h): the channel to the running life (-1: not one), its
	 * state memfd (read again once it stopped), what changed meanwhile, and the times of the
	 * hand-over (CLOCK_MONOTONIC ns), for the pause's parts */
	int takeover;
	int nice; /* a take-over's next life: its threads' nice from GO on (TAKEOVER_NICE_NONE: as is) */
	int running_state;
	struct takeover_delta delta;
	uint64_t t_go, t_applied, t_journals, t_taken;
	unsigned changed_fds, changed_records;
	/* how long each boot step took, and when the life before stopped serving (a re-execution
	 * says, HUGEPOOLD_STOPPED_NS; 0: unknown), for the pause's parts */
	uint64_t step_ns[16];
	uint64_t prev_stopped_ns;
	uint64_t restart_asker; /* a connection still waiting for the restart's answer (ASKER_ENV) */
};

/*
 * The process ends (exits, or re-executes when exec): only what the end does not do itself
 * (server_leave), and the journals closed clean, their writers let go first. Tearing everything
 * down piece by piece first (boot_free) made 1,000 connections' clients wait 4-5 ms longer
 * across a restart.
 */
static void boot_leave(struct boot *b, bool exec)
{
	if (b->srv)
		server_leave(b->srv, exec);
	journal_close_all(b->journals, b->nprepared);
	b->njournals = b->nprepared = 0;
}

static void boot_free(struct boot *b)
{
	takeover_delta_free(&b->delta);
	if (b->running_state >= 0)
		close(b->running_state);
	if (b->takeover >= 0)
		close(b->takeover);
	server_free(b->srv);
	spill_free(b->spill);
	journal_close_all(b->journals, b->nprepared);
	warm_free(b->warm);
	pool_free(b->pool);
	warm_prev_free(b->prev);
	/* a failed boot leaves the service manager what it has not taken: the next try may */
	for (unsigned i = 0; i < b->nhanded; i++)
		if (b->handed[i].fd >= 0)
			close(b->handed[i].fd);
	free(b->handed);
}

/*
 * For the tests: HUGEPOOLD_TAKEOVER_FAULT=POINT@LIFE[,POINT@LIFE] makes life LIFE fail a
 * take-over at POINT: as the next life, "prepare" (killed before it is prepared), "slow" (it
 * prepares 1.5 s longer, past the time it may prepare idle), "refuse" (it refuses what changed),
 * "go" (killed once GO came), "orphan" (it says TAKEN only once the running life is gone) or
 * "taken" (killed right after TAKEN); as the running life, "stop" (killed once it sent GO). Read
 * by each life of the daemon, which inherit it.
 */
static bool takeover_fault(const struct boot *b, const char *point)
{
	uint64_t life = b->prev ? b->prev->lives + 1 : 1, at;
	size_t n = strlen(point);
	char at_text[24];

	for (const char *f = getenv("HUGEPOOLD_TAKEOVER_FAULT"); f && *f; f += strcspn(f, ",") + (f[strcspn(f, ",")] == ',')) {
		size_t len = strcspn(f, ",");

		if (len > n + 1 && len - n - 1 < sizeof(at_text) && strncmp(f, point, n) == 0 && f[n] == '@') {
			memcpy(at_text, f + n + 1, len - n - 1);
			at_text[len - n - 1] = '\0';
			if (decimal_parse(at_text, &at) == 0 && at == life)
				return true;
		}
	}
	return false;
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
static void keep_pool(struct boot *b)
{
	char name[WARM_NAME_MAX];
	unsigned failed;
	int r;

	warm_name(WARM_NAME_STATE, warm_id(b->warm), name);
	r = fdstore_add(name, warm_fd(b->warm), 0);
	failed = pool_store_fds(b->pool);
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
static void keep_done(struct boot *b)
{
	struct fdstore_usage u;

	fdstore_received_free(b->handed, b->nhanded);
	b->handed = NULL;
	b->nhanded = 0;
	fdstore_usage(&u);
	if (getenv("NOTIFY_SOCKET") && u.sent < u.kept)
		log_warning("The service manager's file descriptor store holds %u of the %u fds kept (at most %u fds "
			    "and %zu bytes of names): after a restart by the service manager the rest is made "
			    "anew; a re-execution (systemctl reload, hugepoolctl restart) keeps everything",
			    u.sent, u.kept, u.entries_max, u.names_max);
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

/* --- the boot's steps: each logs its own failure (log.h) and returns it ------------------- */

/* The spare socket to the service manager, for READY=1 and FDSTORE=1 when fds run out (notify.h). */
static int open_notify(struct boot *b)
{
	int r = notify_open();

	/* a take-over's next life is not the service's main process until the running life says */
	if (b->takeover >= 0) {
		notify_hold(true);
		fdstore_manager_wait();
	}
	if (r < 0)
		return log_error_errno(r, "Failed to create a socket to the service manager ($NOTIFY_SOCKET): %m");
	return 0;
}

/*
 * A take-over's next life: the running life's fds, and its state as it reads then (takeover.h);
 * the state memfd is kept to read again at GO what changed.
 */
static int take_snapshot(struct boot *b)
{
	char why[256], name[WARM_NAME_MAX];
	uint64_t id;
	int r;

	r = takeover_recv_snapshot(b->takeover, &b->handed, &b->nhanded, &id);
	if (r < 0)
		return log_error_errno(r, "Failed to receive the running life's fds: %m");
	fdstore_handed_init(b->handed, b->nhanded);
	warm_upgrade_names(b->handed, b->nhanded);
	grow_fd_table(2 * ((uint64_t)config_buffers(&b->cfg) + b->cfg.max_connections + b->nhanded) + 64);
	warm_name(WARM_NAME_STATE, id, name);
	b->running_state = fdstore_take(b->handed, b->nhanded, name);
	if (b->running_state < 0)
		return log_error_errno(-EBADF, "The running life did not hand its state memfd over");
	r = warm_read_live(b->running_state, &b->prev, why, sizeof(why));
	if (r < 0)
		return log_error_errno(r, "Failed to read the running life's state: %s", why[0] ? why : strerror(-r));
	b->adopt = (struct pool_adopt){ .prev = b->prev, .fds = b->handed, .nfds = b->nhanded, .snapshot = true };
	if (takeover_fault(b, "prepare"))
		raise(SIGKILL);
	return 0;
}

/*
 * What a previous life of the daemon left in the fd store (or handed over re-executing), and
 * whether its state can be used: if not, this life starts cold and says why.
 */
static int take_handover(struct boot *b)
{
	char why[256];
	int r;

	if (b->takeover >= 0)
		return take_snapshot(b);
	r = fdstore_receive(&b->handed, &b->nhanded);
	if (r < 0)
		return r;
	warm_upgrade_names(b->handed, b->nhanded);
	/* what it will hold, with room to spare (grown later, with threads, it waits for RCU) */
	grow_fd_table(2 * ((uint64_t)config_buffers(&b->cfg) + b->cfg.max_connections + b->nhanded) + 64);
	warm_choose(b->handed, b->nhanded, &b->prev, why, sizeof(why));
	if (!b->prev && why[0]) {
		log_warning("The state the previous life left cannot be used (%s): starting cold", why);
		snprintf(b->cold_why, sizeof(b->cold_why), "the state could not be used");
	} else if (!b->prev) {
		snprintf(b->cold_why, sizeof(b->cold_why), "%s",
			 b->nhanded ? "no state was handed over" : "nothing was handed over");
	}
	b->adopt = (struct pool_adopt){ .prev = b->prev, .fds = b->handed, .nfds = b->nhanded };
	return 0;
}

/* One sealed memfd per buffer, or the previous life's buffers adopted. */
static int create_pool(struct boot *b)
{
	return pool_create(&b->cfg, &b->adopt, &b->pool);
}

/* In parallel; -ECANCELED when SIGTERM or SIGINT came meanwhile. */
static int prefault_pool(struct boot *b)
{
	return pool_prefault(b->pool, b->cfg.prefault_threads, boot_progress, &b->last_report);
}

/* The record of this life that a next one reads (warm.h). */
static int create_warm_state(struct boot *b)
{
	return warm_create(b->pool->nbuffers, b->cfg.max_connections, spill_records(&b->cfg),
			   b->prev ? b->prev->lives + 1 : 1, &b->warm);
}

/*
 * Journals recover before anyone can connect: clients only ever see a consistent log. A
 * take-over's next life prepares them while it prepares (their I/O queues and buffers made:
 * journal_prepare) and recovers them once the running life stopped them clean (hand_over): at
 * the end their clean-stop markers name, no record read.
 */
static int open_journals(struct boot *b)
{
	bool before_go = b->takeover >= 0 && !b->t_go;
	int r;

	for (; b->nprepared < b->cfg.njournals; b->nprepared++) {
		const struct config_journal *cfg = &b->cfg.journals[b->nprepared];

		r = journal_prepare(cfg, fault_for(cfg->name), &b->journals[b->nprepared]);
		if (r < 0)
			return r;
	}
	if (before_go)
		return 0;
	for (; b->njournals < b->nprepared; b->njournals++) {
		notify_sendf("STATUS=Recovering journal %s", journal_name(b->journals[b->njournals]));
		r = journal_open_prepared(b->journals[b->njournals]);
		if (r < 0)
			return r; /* closed with the rest (boot_free) */
	}
	return 0;
}

static int open_spill(struct boot *b)
{
	char size[32];
	int r;

	r = spill_open(&b->cfg, b->takeover >= 0, &b->spill);
	if (r < 0)
		return r;
	log_info("Spill directory '%s', in-memory threshold %s", b->cfg.spill_directory,
		 size_format(b->cfg.spill_threshold, size, sizeof(size)));
	return 0;
}

/* The socket (bound, or the previous life's) and the connections a previous life served. */
static int open_server(struct boot *b)
{
	int r;

	b->handover = (struct server_handover){ .listen_fd = fdstore_take(b->handed, b->nhanded, "listen"),
						.prev = b->prev, .fds = b->handed, .nfds = b->nhanded,
						.prepare = b->takeover >= 0 };
	keep_pool(b);
	r = server_open(&b->cfg, b->pool, b->journals, b->njournals, b->spill, b->warm, &b->handover, &b->srv);
	if (r < 0)
		return r;
	if (b->takeover < 0)
		keep_done(b);
	return 0;
}

/*
 * A take-over's next life, prepared: say so (with the state memfd, for the running life to keep
 * in the service manager's store), wait for GO and what changed, apply it, recover the journals,
 * publish, and say TAKEN. -EXDEV: what changed cannot be taken over here (REFUSED: the running
 * life re-executes itself in place instead).
 */
static int hand_over(struct boot *b)
{
	char why[TAKEOVER_TEXT_MAX];
	int r;

	if (b->takeover < 0)
		return 0;
	if (takeover_fault(b, "slow")) /* at the end: the journals prepared before it */
		(void)nanosleep(&(struct timespec){ 1, 500000000 }, NULL);
	r = takeover_send(b->takeover, TAKEOVER_PREPARED, warm_id(b->warm), NULL, warm_fd(b->warm));
	if (r == 0)
		r = takeover_recv_go(b->takeover, &b->delta);
	if (r < 0)
		return log_error_errno(r, "The running life of the daemon went away before handing over: %m");
	b->t_go = now_ns();
	/* it prepared idle; the clients wait from here on */
	if (b->nice != TAKEOVER_NICE_NONE) {
		r = takeover_priority(0, false, b->nice);
		if (r < 0)
			log_warning_errno(r, "Failed to set the daemon's threads back to nice %d after preparing idle: %m",
					  b->nice);
	}
	if (takeover_fault(b, "go"))
		raise(SIGKILL);
	if (takeover_fault(b, "refuse")) {
		log_notice("Refusing to take over, as HUGEPOOLD_TAKEOVER_FAULT says");
		(void)takeover_say_last(b->takeover, TAKEOVER_REFUSED, "HUGEPOOLD_TAKEOVER_FAULT", 5000);
		return -EXDEV;
	}
	b->changed_fds = b->delta.nadded + b->delta.nremoved;
	for (int k = 0; k < WARM_KINDS; k++)
		b->changed_records += b->delta.ndirty[k];
	r = server_takeover_apply(b->srv, &b->handover, b->running_state, &b->delta, why, sizeof(why));
	/* the array grew with what came since: main frees it */
	b->handed = b->handover.fds;
	b->nhanded = b->handover.nfds;
	if (r == -EXDEV) {
		log_notice("Cannot take over what changed since the snapshot (%s): the running life re-executes "
			   "itself instead",
			   why);
		(void)takeover_say_last(b->takeover, TAKEOVER_REFUSED, why, 5000);
		return r;
	}
	if (r < 0)
		return log_error_errno(r, "Failed to take over what changed since the snapshot: %s", why);
	b->t_applied = now_ns();
	r = open_journals(b);
	if (r < 0)
		return r;
	b->t_journals = now_ns();
	server_takeover_finish(b->srv, &b->handover, b->njournals);
	if (takeover_fault(b, "orphan")) /* the running life gone first: its end hangs up */
		(void)poll(&(struct pollfd){ .fd = b->takeover, .events = POLLIN }, 1, 5000);
	r = takeover_send(b->takeover, TAKEOVER_TAKEN, 0, NULL, -1);
	if (r < 0 && !getenv("NOTIFY_SOCKET")) {
		/* nobody else will start the daemon again: this life has everything, and serves */
		log_warning_errno(r, "The running life of the daemon went away as this one took over: %m; serving on");
		r = 0;
	}
	if (r < 0) {
		/*
		 * Its state is published and in the store, and nobody will hand the service over: end
		 * as a crash here would, leaving the state and the store as they are for the next start
		 * (the service manager's). Tearing down as a failed boot does would let every client's
		 * connection and leases go, in the state it just published.
		 */
		log_error_errno(r, "The running life of the daemon went away as this one took over: %m; exiting, the state "
				   "left published for the next start");
		_exit(EXIT_POOL);
	}
	b->t_taken = now_ns();
	if (takeover_fault(b, "taken"))
		raise(SIGKILL);
	return 0;
}

/*
 * The boot, in order: its name, what systemd's STATUS= says while it runs (the steps that can
 * take long; a datagram per step would cost a warm restart, which waits for READY=1, more than
 * the quick steps take), and the exit status if it fails.
 */
static const struct boot_step {
	const char *name, *status;
	int (*run)(struct boot *b);
	int exit_status;
} boot_steps[] = {
	{ "notify socket", NULL, open_notify, EXIT_SOCKET },
	{ "take-over", NULL, take_handover, EXIT_POOL },
	{ "pool", "Creating the pool", create_pool, EXIT_POOL },
	{ "pre-fault", "Pre-faulting the pool", prefault_pool, EXIT_POOL },
	{ "warm state", NULL, create_warm_state, EXIT_POOL },
	{ "journals", NULL, open_journals, EXIT_JOURNAL }, /* STATUS= per journal */
	{ "spill", NULL, open_spill, EXIT_SPILL },
	{ "socket", NULL, open_server, EXIT_SOCKET },
	{ "hand-over", NULL, hand_over, EXIT_POOL }, /* a take-over's next life only */
};

/* One line: how this life started. */
static void log_start(const struct boot *b, const struct proto_status_start *start)
{
	const struct pool_adopt *a = &b->adopt;
	const struct server_handover *h = &b->handover;
	double s = (double)start->ready_ns / 1e9;
	char size[32];

	if (start->warm)
		log_info("Warm start (life %" PRIu64 "): adopted %" PRIu32 " buffers (%s), faulted %" PRIu32
			 ", dropped %" PRIu32 "; %u connections served on, %u closed; ready in %.3f s",
			 start->lives, a->adopted, size_format(a->adopted_bytes, size, sizeof(size)), a->created,
			 a->dropped, h->adopted, h->closed, s);
	else
		log_info("Cold start: %s; faulted %" PRIu32 " buffers, dropped %" PRIu32 ", in %.3f s",
			 b->prev ? "nothing the previous life left fits the configuration" : b->cold_why,
			 b->pool->nbuffers, a->dropped, s);
}

/*
 * One line with the parts of the pause a warm restart made its clients wait, in microseconds,
 * "name value" after the colon (bench_pause reads them): for a take-over, from the moment the
 * running life stopped serving until this one said TAKEN; else the boot's steps, and the time
 * from the previous life's stop to this life's main where a re-execution said when that was.
 */
static void log_parts(const struct boot *b)
{
	char line[512];
	int n;

	if (b->t_taken) {
		uint64_t stopped = b->delta.stopped_ns;

		log_info("Restart parts (us): stopping and handing over %" PRIu64 ", applying %" PRIu64 " (%u fds, %u "
			 "records), journals %" PRIu64 ", publishing %" PRIu64 "; taken over %" PRIu64 " us after the "
			 "running life stopped (at %" PRIu64 " ns, CLOCK_MONOTONIC); prepared %s",
			 (b->t_go - MIN(stopped, b->t_go)) / 1000, (b->t_applied - b->t_go) / 1000, b->changed_fds,
			 b->changed_records, (b->t_journals - b->t_applied) / 1000, (b->t_taken - b->t_journals) / 1000,
			 (b->t_taken - MIN(stopped, b->t_taken)) / 1000, stopped,
			 b->nice != TAKEOVER_NICE_NONE ? "idle"
						       : "at the daemon's priority (idle needs CAP_SYS_NICE or LimitNICE= to come back)");
		return;
	}
	n = snprintf(line, sizeof(line), "Restart parts (us):");
	if (b->prev_stopped_ns && b->prev_stopped_ns <= b->t0)
		n += snprintf(line + n, sizeof(line) - (size_t)n, " stop to main %" PRIu64 ",",
			      (b->t0 - b->prev_stopped_ns) / 1000);
	for (size_t i = 0; i < ARRAY_SIZE(boot_steps) && n < (int)sizeof(line); i++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, " %s %" PRIu64 "%s", boot_steps[i].name,
			      b->step_ns[i] / 1000, i + 1 < ARRAY_SIZE(boot_steps) ? "," : "");
	log_info("%s", line);
}

/* The boot is done: how it went, in the status replies, the log and to systemd (READY=1). */
static void announce_ready(struct boot *b)
{
	const struct pool_adopt *a = &b->adopt;
	const struct server_handover *h = &b->handover;
	struct proto_status_start start = { .warm = a->adopted || h->adopted,
					    .adopted_buffers = a->adopted,
					    .faulted_buffers = a->created,
					    .dropped_buffers = a->dropped,
					    .adopted_connections = h->adopted,
					    .closed_connections = h->closed,
					    .lives = b->prev ? b->prev->lives + 1 : 1,
					    .ready_ns = now_ns() - b->t0 };
	char size[32], ready[256];
	int r;

	server_set_start(b->srv, &start);
	server_answer_restart(b->srv, b->restart_asker);
	log_start(b, &start);
	if (start.warm)
		log_parts(b);
	snprintf(ready, sizeof(ready), "READY=1\nSTATUS=Serving %s in %u buffers (%s pages)",
		 size_format(b->pool->bytes, size, sizeof(size)), b->pool->nbuffers, b->pool->hugetlb ? "hugetlb" : "regular");
	if (b->takeover >= 0) {
		/* once the running life said this one is the service's main process */
		server_wait_main(b->srv, b->takeover, ready, b->handed, b->nhanded);
		b->takeover = -1;
		b->handed = NULL;
		b->nhanded = 0;
		return;
	}
	r = notify_send(ready);
	if (r < 0)
		log_error_errno(r, "Failed to tell the service manager that the daemon is ready (READY=1): %m; "
				   "serving all the same");
}

/*
 * A restart without a service manager (or within one), checked and prepared by reexec_prepare
 * while the daemon still served: end this life as a stop for the next life does (boot_leave:
 * the journals closed clean, the warm state left as it is, the rest left to the exec), and
 * become the daemon's binary again with everything handed over (reexec.h). Only a failed exec
 * tears down.
 */
static int reexec(struct boot *b)
{
	char stopped[32];
	int r;

	notify_send("RELOADING=1\nSTATUS=Restarting");
	/* for the next life's account of the pause (log_parts) */
	snprintf(stopped, sizeof(stopped), "%" PRIu64, server_stopped_at(b->srv));
	setenv(STOPPED_ENV, stopped, 1);
	if (server_restart_unanswered(b->srv)) {
		snprintf(stopped, sizeof(stopped), "%" PRIu64, server_restart_unanswered(b->srv));
		setenv(ASKER_ENV, stopped, 1);
	}
	boot_leave(b, true);
	log_info("Re-executing '%s'", reexec_path());
	r = reexec_run();
	log_error_errno(r, "Failed to re-execute '%s': %m", reexec_path());
	boot_free(b);
	return EXIT_USAGE;
}

/*
 * The running life's end of a take-over (takeover.h), stopped: its journals stopped for the
 * next life to recover, the hand-over, and either this life's end or, when the next life refused or
 * went away, a re-execution in place.
 */
static int takeover(struct boot *b)
{
	char why[512];
	pid_t pid;
	int back, nice, r;

	server_drop_writers(b->srv);
	/* final on disk for the next life; their I/O queues are released with the rest of this
	 * life, after the hand-over (journal_stop: a libaio context's release takes tens of ms) */
	for (unsigned i = 0; i < b->njournals; i++)
		journal_stop(b->journals[i], true);
	r = server_takeover_go(b->srv, takeover_fault(b, "stop"), &pid, &back, &nice, why, sizeof(why));
	if (r < 0) {
		log_warning("Restart: %s; re-executing '%s' in place", why, reexec_path());
		return reexec(b);
	}
	if (back >= 0) {
		/* restart = exec: the service comes back to this pid, from the life serving it now */
		log_info("Taken over by pid %d, which hands the service back: re-executing '%s'", (int)pid,
			 reexec_path());
		boot_leave(b, true);
		r = reexec_back(back, nice);
		log_error_errno(r, "Failed to re-execute '%s': %m; pid %d serves on as the daemon", reexec_path(),
				(int)pid);
		boot_free(b);
		return EXIT_USAGE;
	}
	/* what is left is this life's teardown (its fds, its mappings), which server_takeover_go
	 * put on CPUs the next life and the clients do not want */
	boot_free(b);
	log_info("Taken over by pid %d", (int)pid);
	return EXIT_OK;
}

/* Serve until SIGTERM or SIGINT (then stop clean), or until a restart is asked (then re-execute). */
static int serve(struct boot *b)
{
	int r = server_run(b->srv);

	if (r == SERVER_REEXEC)
		return reexec(b);
	if (r == SERVER_TAKEOVER)
		return takeover(b);
	notify_send("STOPPING=1");
	if (r < 0) {
		/* the event loop failed, unsealed: torn down as before, one thing at a time */
		boot_free(b);
		return EXIT_USAGE;
	}
	/* the rest goes with the exit: under a service manager the next start waits for it */
	boot_leave(b, false);
	log_info("Stopped");
	return EXIT_OK;
}

/* --- the command line ------------------------------------------------------------------- */

enum action { RUN, CHECK_CONFIG, PRINT_HUGEPAGES };

/* > 0 to go on with *action, 0 to exit at once (--help, --version), < 0 for a usage error. */
static int parse_options(int argc, char **argv, struct boot *b, enum action *action)
{
	struct option longopts[ARRAY_SIZE(options) + 1];
	char shortopts[2 * ARRAY_SIZE(options) + 2];
	int c;

	optrow_getopt(options, ARRAY_SIZE(options), longopts, shortopts);
	*action = RUN;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			b->config_path = optarg;
			break;
		case 't':
			if (*action == RUN)
				*action = CHECK_CONFIG;
			break;
		case OPT_PRINT_HUGEPAGES:
			*action = PRINT_HUGEPAGES;
			break;
		case 'f':
			break;
		case 'v':
			log_set_max_level(LOG_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("hugepoold %s\n", HUGEPOOL_VERSION);
			return 0;
		case ':':
		default:
			/* a long option as written, a short one by its letter ("-vx": x) */
			if (strncmp(argv[optind - 1], "--", 2) != 0 && optopt > 0 && optopt < OPTROW_LONG_ONLY)
				fprintf(stderr, c == ':' ? "hugepoold: option '-%c' requires an argument\n"
							 : "hugepoold: invalid option '-%c'\n", optopt);
			else
				fprintf(stderr, c == ':' ? "hugepoold: option '%s' requires an argument\n"
							 : "hugepoold: invalid option '%s'\n", argv[optind - 1]);
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "hugepoold: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return -EINVAL;
	}
	return 1;
}

/* The parser's words: on stderr alone for --check-config, in the log for a daemon. */
static int load_config(struct boot *b, enum action action)
{
	char err[512];
	int r;

	r = config_load(b->config_path, &b->cfg, err, sizeof(err));
	if (r < 0 && action != RUN) {
		fprintf(stderr, "%s\n", err);
		return r;
	}
	if (r < 0)
		return log_error_errno(r, "Invalid configuration: %s", err);
	return 0;
}

/*
 * SIGTERM, SIGINT and SIGUSR2 are read by the event loop's signalfd: blocked before any thread
 * starts, so that no thread takes one. A peer gone mid-write is an error return, not SIGPIPE;
 * spill.c probes files with leases it drops at once, and a lease break must not kill us.
 */
static void block_signals(void)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGUSR2);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGIO, SIG_IGN);
}

/*
 * A boot step failed with r (its one line is logged): a take-over's next life tells the running
 * life why (FAILED: the restart is refused; after GO, REFUSED: it re-executes itself instead),
 * unless it refused already (-EXDEV: nothing wrong here, the running life goes on), and exits.
 */
static int boot_failed(struct boot *b, int r, int status)
{
	if (r == -EXDEV)
		status = EXIT_OK;
	else if (b->takeover >= 0)
		(void)takeover_say_last(b->takeover, b->t_go ? TAKEOVER_REFUSED : TAKEOVER_FAILED, log_last_error(), 5000);
	boot_free(b);
	return status;
}

int main(int argc, char **argv)
{
	static struct boot b = { .config_path = CONFIG_DEFAULT_PATH, .takeover = -1, .running_state = -1,
				 .nice = TAKEOVER_NICE_NONE };
	enum action action;
	char size[32];
	uint64_t step;
	int r;

	b.t0 = b.last_report = now_ns();
	/* a next life runs from an fd (/proc/self/fd/N: a take-over, a re-execution), which the
	 * kernel makes its name: "N" in ps, top and the service manager's log */
	(void)prctl(PR_SET_NAME, "hugepoold");
	r = parse_options(argc, argv, &b, &action);
	if (r <= 0)
		return r < 0 ? EXIT_USAGE : EXIT_OK;
	log_open();
	reexec_init(argv); /* before anything can replace the binary */
	if (action == RUN)
		b.takeover = takeover_open(&b.nice);
	if (getenv(STOPPED_ENV)) {
		uint64_t v;

		if (decimal_parse(getenv(STOPPED_ENV), &v) == 0)
			b.prev_stopped_ns = v;
		unsetenv(STOPPED_ENV);
	}
	if (getenv(ASKER_ENV)) {
		if (decimal_parse(getenv(ASKER_ENV), &b.restart_asker) < 0)
			b.restart_asker = 0;
		unsetenv(ASKER_ENV);
	}
	if (load_config(&b, action) < 0)
		return boot_failed(&b, -EINVAL, EXIT_CONFIG);
	if (action == PRINT_HUGEPAGES) {
		print_hugepages(&b.cfg);
		return EXIT_OK;
	}
	if (action == CHECK_CONFIG) {
		print_summary(&b.cfg, b.config_path);
		return EXIT_OK;
	}

	block_signals();
	raise_nofile();
	log_info("hugepoold %s starting: %u classes, %s, configuration '%s'", HUGEPOOL_VERSION, b.cfg.nclasses,
		 size_format(config_pool_bytes(&b.cfg), size, sizeof(size)), b.config_path);
	for (size_t i = 0; i < ARRAY_SIZE(boot_steps); i++) {
		if (boot_steps[i].status)
			notify_sendf("STATUS=%s", boot_steps[i].status);
		log_debug("Boot: %s", boot_steps[i].name);
		step = now_ns();
		r = boot_steps[i].run(&b);
		b.step_ns[i] = now_ns() - step;
		if (r < 0) {
			/* SIGTERM while pre-faulting (the one step that returns -ECANCELED): a clean exit */
			return boot_failed(&b, r, r == -ECANCELED ? EXIT_OK : boot_steps[i].exit_status);
		}
	}
	announce_ready(&b);
	return serve(&b);
}
