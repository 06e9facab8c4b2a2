/* SPDX-License-Identifier: MIT */
/*
 * bench_spill.c - spill streams (hp_spill_*) against the classic temp file, for runs of bytes of
 * 6 KiB (small), 200 KiB (medium) and 4 MiB (large).
 *
 * One run = write it, finish, read it all back into the caller's buffer, close. Side by side in
 * one process, from the same source buffer into the same destination buffer:
 *   ours   hp_spill_open + hp_spill_write + hp_spill_finish + hp_spill_read + hp_spill_close on
 *          a real hugepoold (tests/integration/harness.c, spill_directory in a fresh directory
 *          under $HP_BENCH_SPILL_DIR, default /var/tmp like the daemon's default); the daemon's
 *          default threshold (1 MiB): small and medium stay in the process's memory, large gets a
 *          daemon-made O_TMPFILE file. Two cells use HP_SPILL_ALWAYS_FILE (a file from the first
 *          byte): the cost of the daemon-made file itself against a plain temp file;
 *   plain  the classic way: open(O_CREAT|O_EXCL) of a named file in a sibling directory on the
 *          same file system, write, pread back, close, unlink.
 * Both write the run with one call (one cell: 4 MiB in 64 KiB writes, both sides alike) and read
 * it back with one call; the bytes are compared once per cell, outside the timing (timed runs
 * only check the byte count). Neither side syncs: spilled runs are scratch data.
 * Timing: the number of runs N is calibrated for each side so one pass lasts
 * $HP_BENCH_CELL_SECONDS (default 0.3; rescaled once if the first pass is under half that);
 * 3 passes, ours and plain alternating; the best pass
 * gives microseconds per run and runs/s, and the ratio plain/ours (> 1: ours faster).
 * Syscalls: one more, untimed pass of up to 100 runs per side under a ptrace counter the bench
 * forks (syscall-entry stops of the bench's thread and of every hugepoold thread between two
 * markers): every system call of any kind, the daemon's included (its epoll_wait wakeups too),
 * per run, the most frequent named. (/proc/self/io syscr/syscw would miss openat, close,
 * unlink, sendmsg, recvmsg, ftruncate, mmap: most of what differs.) Without permission to
 * ptrace it says why and counts nothing; the timings do not depend on it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tests/integration/harness.h"
#include "benchutil.h"
#include "hugepool.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define MAX_RUN (4 * MIB)
#define COUNT_RUNS 100u /* runs of the syscall-counting pass */

struct cell {
	const char *name;
	size_t size;
	size_t piece; /* bytes per write call; 0 = the whole run in one call */
	uint64_t threshold; /* hp_spill_opts.threshold: 0 = the daemon's */
};

static const struct cell cells[] = {
	{ "small 6 KiB", 6 * KIB, 0, 0 },
	{ "medium 200 KiB", 200 * KIB, 0, 0 },
	{ "large 4 MiB", 4 * MIB, 0, 0 },
	{ "large 4 MiB, 64 KiB writes", 4 * MIB, 64 * KIB, 0 },
	{ "large 4 MiB, ALWAYS_FILE", 4 * MIB, 0, HP_SPILL_ALWAYS_FILE },
	{ "small 6 KiB, ALWAYS_FILE", 6 * KIB, 0, HP_SPILL_ALWAYS_FILE },
};

struct ctx {
	hp_conn *c;
	char plain_dir[300];
	uint64_t seq; /* names of plain files */
	int state; /* ours: hp_spill_state of the last checked run */
};

typedef int (*run_fn)(struct ctx *x, const struct cell *k, bool check);

static char *src, *dst;

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* --- ours --------------------------------------------------------------------------------- */

static int ours_run(struct ctx *x, const struct cell *k, bool check)
{
	struct hp_spill_opts o = { .threshold = k->threshold };
	size_t piece = k->piece ? k->piece : k->size, got = 0;
	hp_spill *s;
	int r = hp_spill_open(x->c, &o, &s);

	if (r < 0)
		return r;
	for (size_t off = 0; off < k->size && r == 0; off += piece)
		r = hp_spill_write(s, src + off, min_size(piece, k->size - off));
	if (r == 0)
		r = hp_spill_finish(s);
	while (r == 0 && got < k->size) {
		ssize_t n = hp_spill_read(s, dst + got, k->size - got);

		if (n <= 0)
			r = n < 0 ? (int)n : -EIO;
		else
			got += (size_t)n;
	}
	if (r == 0 && check) {
		x->state = hp_spill_state(s);
		if (hp_spill_size(s) != k->size || memcmp(src, dst, k->size) != 0)
			r = -EBADMSG;
	}
	hp_spill_close(s);
	return r;
}

/* --- plain: the classic named temp file ------------------------------------------------------ */

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int plain_run(struct ctx *x, const struct cell *k, bool check)
{
	size_t piece = k->piece ? k->piece : k->size, got = 0;
	char path[400];
	int fd, r = 0;

	snprintf(path, sizeof(path), "%s/run-%" PRIu64, x->plain_dir, ++x->seq);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	for (size_t off = 0; off < k->size && r == 0; off += piece)
		r = write_all(fd, src + off, min_size(piece, k->size - off));
	while (r == 0 && got < k->size) {
		ssize_t n = pread(fd, dst + got, k->size - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			r = n < 0 ? -errno : -EIO;
		else
			got += (size_t)n;
	}
	if (r == 0 && check && memcmp(src, dst, k->size) != 0)
		r = -EBADMSG;
	close(fd);
	if (unlink(path) < 0 && r == 0)
		r = -errno;
	return r;
}

/* --- timing --------------------------------------------------------------------------------- */

static int pass(run_fn fn, struct ctx *x, const struct cell *k, unsigned n, uint64_t *ret_ns)
{
	uint64_t t0 = bench_now_ns();

	for (unsigned i = 0; i < n; i++) {
		int r = fn(x, k, false);

		if (r < 0)
			return r;
	}
	*ret_ns = bench_now_ns() - t0;
	return 0;
}

/*
 * Runs per pass so that a pass lasts about target_ns, from the fastest rate of pilot passes of
 * 1, 8, 64... runs (they warm everything up; one disturbed pilot does not shrink N).
 */
static int calibrate(run_fn fn, struct ctx *x, const struct cell *k, uint64_t target_ns, unsigned *ret_n)
{
	double best = 0; /* ns per run */
	unsigned m = 1;
	uint64_t ns = 0;
	double n;
	int r;

	for (;;) {
		if ((r = pass(fn, x, k, m, &ns)) < 0)
			return r;
		if (ns >= 1000000 && (best == 0 || (double)ns / m < best))
			best = (double)ns / m;
		if (ns >= 20000000 || m >= (1u << 22))
			break;
		m *= ns < 2000000 ? 8 : 2;
	}
	if (best == 0)
		best = ns ? (double)ns / m : 1;
	n = (double)target_ns / best;
	*ret_n = (unsigned)(n < 3 ? 3 : n > 5e6 ? 5e6 : n);
	return 0;
}

/* --- syscall counting: a forked ptrace tracer ----------------------------------------------- */

/* close() of these (invalid) descriptors by the bench starts and stops the count */
#define MARK_START (-4242)
#define MARK_STOP (-4243)
#define SC_MAX 1024 /* syscall numbers counted one by one; above: "other" */
#define TIDS_MAX 64

struct sc_result {
	int err; /* 0, or why nothing was counted */
	int daemon_err; /* 0, or why the daemon was not counted */
	uint64_t client[SC_MAX + 1], daemon[SC_MAX + 1];
};

#define SC(x) { SYS_##x, #x }
static const struct {
	long nr;
	const char *name;
} sc_names[] = {
	SC(read), SC(write), SC(pread64), SC(pwrite64), SC(readv), SC(writev), SC(openat), SC(close),
	SC(unlinkat), SC(fstat), SC(newfstatat), SC(statx), SC(lseek), SC(mmap), SC(munmap), SC(mremap),
	SC(brk), SC(madvise), SC(sendmsg), SC(recvmsg), SC(sendto), SC(recvfrom), SC(epoll_pwait),
	SC(ftruncate), SC(fallocate), SC(fcntl), SC(futex), SC(ppoll), SC(getpid), SC(gettid), SC(ioctl),
	SC(fsync), SC(fdatasync), SC(getrandom), SC(rt_sigprocmask), SC(timerfd_settime), SC(clock_gettime),
	SC(memfd_create), SC(dup3), SC(fstatfs), SC(prctl), SC(clock_nanosleep),
#ifdef SYS_open
	SC(open), SC(unlink), SC(stat), SC(lstat), SC(epoll_wait), SC(poll), SC(dup2),
#endif
#ifdef SYS_epoll_pwait2
	SC(epoll_pwait2),
#endif
#ifdef SYS_io_uring_enter
	SC(io_uring_enter),
#endif
};

static void tracer_add(pid_t tid, bool daemon, pid_t *tids, bool *is_daemon, unsigned *n, int *err)
{
	if (*n >= TIDS_MAX)
		return;
	if (ptrace(PTRACE_SEIZE, tid, 0, PTRACE_O_TRACESYSGOOD) < 0) {
		*err = -errno;
		return;
	}
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0) {
		*err = -errno;
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return;
	}
	tids[*n] = tid;
	is_daemon[*n] = daemon;
	(*n)++;
}

static void write_full(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
}

/*
 * The tracer (a child of the bench): seize the bench's thread and every thread of the daemon,
 * say ready, count syscall entries between the two markers, detach everyone, send the counts.
 */
static __attribute__((noreturn)) void tracer_main(pid_t bench, pid_t daemon, int ready_w, int res_w)
{
	static struct sc_result res;
	pid_t tids[TIDS_MAX];
	bool is_daemon[TIDS_MAX], alive[TIDS_MAX], seen[TIDS_MAX];
	unsigned n = 0, pending, waiting = 0;
	bool counting = false, done = false;
	char path[64];
	struct dirent *e;
	DIR *d;
	int st;

	tracer_add(bench, false, tids, is_daemon, &n, &res.err);
	if (n == 0) {
		write_full(ready_w, "E", 1);
		write_full(res_w, &res, sizeof(res));
		_exit(0);
	}
	snprintf(path, sizeof(path), "/proc/%d/task", (int)daemon);
	d = opendir(path);
	if (!d)
		res.daemon_err = -errno;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.')
			tracer_add((pid_t)atoi(e->d_name), true, tids, is_daemon, &n, &res.daemon_err);
	if (d)
		closedir(d);
	if (n == 1 && !res.daemon_err)
		res.daemon_err = -ESRCH;
	for (unsigned i = 0; i < n; i++)
		alive[i] = true, seen[i] = false;
	pending = n;

	while (!done) {
		pid_t w = waitpid(-1, &st, __WALL);
		unsigned i;
		int sig, inject = 0;

		if (w < 0) {
			if (errno == EINTR)
				continue;
			res.err = -errno;
			break;
		}
		for (i = 0; i < n && tids[i] != w; i++)
			;
		if (i == n)
			continue;
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			alive[i] = false;
			if (!seen[i] && --pending == 0)
				write_full(ready_w, "R", 1);
			seen[i] = true;
			if (w == bench) {
				res.err = -ESRCH;
				break;
			}
			continue;
		}
		if (!WIFSTOPPED(st))
			continue;
		sig = WSTOPSIG(st);
		if (sig == (SIGTRAP | 0x80)) {
			struct __ptrace_syscall_info info;

			if (ptrace(PTRACE_GET_SYSCALL_INFO, w, sizeof(info), &info) <= 0) {
				res.err = -errno;
				done = true;
			} else if (info.op == PTRACE_SYSCALL_INFO_ENTRY) {
				uint64_t nr = info.entry.nr < SC_MAX ? info.entry.nr : SC_MAX;
				bool mark = w == bench && info.entry.nr == SYS_close;

				if (mark && (int)info.entry.args[0] == MARK_STOP) {
					done = true;
					/* detached right here, in this stop */
					ptrace(PTRACE_DETACH, w, 0, 0);
					alive[i] = false;
					continue;
				} else if (mark && (int)info.entry.args[0] == MARK_START) {
					counting = true;
				} else if (counting) {
					(is_daemon[i] ? res.daemon : res.client)[nr]++;
				}
			}
		} else if ((st >> 16) == PTRACE_EVENT_STOP) {
			/* our PTRACE_INTERRUPT (or a group stop: resumed all the same) */
			if (!seen[i]) {
				seen[i] = true;
				if (--pending == 0)
					write_full(ready_w, "R", 1);
			}
		} else if ((st >> 16) == 0) {
			inject = sig; /* a signal for the tracee: deliver it */
		}
		ptrace(PTRACE_SYSCALL, w, 0, inject);
	}
	if (pending)
		write_full(ready_w, "E", 1);
	/* detach every other thread: stop it first (a detach needs a stopped tracee) */
	for (unsigned i = 0; i < n; i++)
		if (alive[i] && ptrace(PTRACE_INTERRUPT, tids[i], 0, 0) == 0)
			waiting++;
	while (waiting) {
		pid_t w = waitpid(-1, &st, __WALL);
		unsigned i;

		if (w < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (i = 0; i < n && tids[i] != w; i++)
			;
		if (i == n || !alive[i])
			continue;
		if (WIFSTOPPED(st)) {
			int sig = WSTOPSIG(st);

			ptrace(PTRACE_DETACH, w, 0, (st >> 16) == 0 && sig != (SIGTRAP | 0x80) ? sig : 0);
		}
		alive[i] = false;
		waiting--;
	}
	write_full(res_w, &res, sizeof(res));
	_exit(0);
}

/* Run `runs` runs of fn with every syscall of this thread and of the daemon counted. */
static int count_syscalls(pid_t daemon, run_fn fn, struct ctx *x, const struct cell *k, unsigned runs,
			  struct sc_result *res)
{
	int ready[2], resp[2], r = 0, st;
	char c = 0;
	size_t got = 0;
	pid_t pid, me = getpid();

	memset(res, 0, sizeof(*res));
	if (pipe2(ready, O_CLOEXEC) < 0)
		return res->err = -errno;
	if (pipe2(resp, O_CLOEXEC) < 0) {
		r = -errno;
		close(ready[0]);
		close(ready[1]);
		return res->err = r;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(ready[0]);
		close(resp[0]);
		tracer_main(me, daemon, ready[1], resp[1]);
	}
	close(ready[1]);
	close(resp[1]);
	if (pid < 0) {
		r = -errno;
		close(ready[0]);
		close(resp[0]);
		return res->err = r;
	}
	while (read(ready[0], &c, 1) < 0 && errno == EINTR)
		;
	if (c == 'R') {
		syscall(SYS_close, MARK_START);
		for (unsigned i = 0; i < runs && r == 0; i++)
			r = fn(x, k, false);
		syscall(SYS_close, MARK_STOP);
	}
	while (got < sizeof(*res)) {
		ssize_t n = read(resp[0], (char *)res + got, sizeof(*res) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < sizeof(*res) && !res->err)
		res->err = -EPIPE;
	if (c != 'R' && !res->err)
		res->err = -ECHILD;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	close(ready[0]);
	close(resp[0]);
	return r;
}

static uint64_t sc_total(const uint64_t *v)
{
	uint64_t t = 0;

	for (unsigned i = 0; i <= SC_MAX; i++)
		t += v[i];
	return t;
}

static const char *sc_name(unsigned nr, char *buf, size_t len)
{
	for (size_t i = 0; i < sizeof(sc_names) / sizeof(sc_names[0]); i++)
		if (sc_names[i].nr == (long)nr)
			return sc_names[i].name;
	if (nr == SC_MAX)
		return "other";
	snprintf(buf, len, "nr%u", nr);
	return buf;
}

/* "5 (openat 1, write 1, ...)": per run, the 6 most frequent by name. */
static const char *sc_str(const uint64_t *v, unsigned runs, char *buf, size_t len)
{
	uint64_t left[SC_MAX + 1];
	size_t off;
	int w;

	memcpy(left, v, sizeof(left));
	w = snprintf(buf, len, "%.3g", (double)sc_total(v) / runs);
	off = w > 0 ? (size_t)w : 0;
	for (unsigned shown = 0; shown < 6 && off < len; shown++) {
		unsigned best = 0;
		char nb[16];

		for (unsigned i = 1; i <= SC_MAX; i++)
			if (left[i] > left[best])
				best = i;
		if (!left[best])
			break;
		w = snprintf(buf + off, len - off, "%s%s %.3g", shown ? ", " : " (", sc_name(best, nb, sizeof(nb)),
			     (double)left[best] / runs);
		if (w < 0)
			break;
		off += (size_t)w;
		left[best] = 0;
	}
	if (off > 0 && off < len && strchr(buf, '('))
		snprintf(buf + off, len - off, "%s)", sc_total(left) ? ", ..." : "");
	return buf;
}

/* --- the run -------------------------------------------------------------------------------- */

static const char *fs_name(long type)
{
	switch ((unsigned long)type) {
	case 0xEF53: return "ext2/3/4";
	case 0x58465342: return "xfs";
	case 0x9123683E: return "btrfs";
	case 0x01021994: return "tmpfs";
	case 0x794c7630: return "overlayfs";
	case 0x2FC12FC1: return "zfs";
	case 0xF2F52010: return "f2fs";
	default: return "?";
	}
}

static double per_run_us(uint64_t ns, unsigned n)
{
	return n ? (double)ns / 1e3 / n : 0;
}

struct side {
	const char *name;
	run_fn fn;
	unsigned n;
	bool rescaled;
	struct bench_series s;
};

/* "1.23 1.19 1.31": us per run of every pass. */
static const char *passes_str(const struct side *sd, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (unsigned p = 0; p < sd->s.n && off < len; p++) {
		int w = snprintf(buf + off, len - off, "%s%.2f", p ? " " : "", per_run_us(sd->s.ns[p], sd->n));

		if (w < 0)
			break;
		off += (size_t)w;
	}
	return buf;
}

static void run_cell(const struct cell *k, struct ctx *x, pid_t daemon, uint64_t target_ns, bool *ptrace_said)
{
	struct side sides[2] = { { .name = "ours", .fn = ours_run }, { .name = "plain", .fn = plain_run } };
	double us[2], runs_s[2];
	char where[16], b[2][64];
	int r;

	for (unsigned i = 0; i < 2; i++) {
		/* verify the bytes once, untimed, then calibrate */
		r = sides[i].fn(x, k, true);
		if (r == 0)
			r = calibrate(sides[i].fn, x, k, target_ns, &sides[i].n);
		if (r < 0) {
			printf("%-27s %s failed: %s%s%s\n", k->name, sides[i].name,
			       r == -EBADMSG ? "the bytes read back differ" : hp_strerror(r), i == 0 ? " " : "",
			       i == 0 ? hp_last_error(x->c) : "");
			return;
		}
	}
	snprintf(where, sizeof(where), "%s", x->state == HP_SPILL_FILE ? "file" : "memory");
	for (unsigned rep = 0; rep < BENCH_REPS; rep++)
		for (unsigned j = 0; j < 2; j++) {
			struct side *sd = &sides[(j + rep) % 2]; /* alternate which side goes first */
			uint64_t ns;

			r = pass(sd->fn, x, k, sd->n, &ns);
			if (r == 0 && rep == 0 && ns < target_ns / 2 && !sd->rescaled) {
				/* the pilots were slower than the steady state: scale N once, pass again */
				double n = (double)sd->n * (double)target_ns / (double)(ns ? ns : 1);

				sd->n = (unsigned)(n > 5e6 ? 5e6 : n);
				sd->rescaled = true;
				r = pass(sd->fn, x, k, sd->n, &ns);
			}
			if (r < 0) {
				printf("%-27s %s failed: %s\n", k->name, sd->name, hp_strerror(r));
				return;
			}
			bench_series_add(&sd->s, ns);
		}
	for (unsigned i = 0; i < 2; i++) {
		us[i] = per_run_us(bench_series_best(&sides[i].s), sides[i].n);
		runs_s[i] = us[i] > 0 ? 1e6 / us[i] : 0;
	}
	printf("%-27s %-6s | %9.2f %9.0f %8u | %9.2f %9.0f %8u | %7.2fx\n", k->name, where, us[0], runs_s[0],
	       sides[0].n, us[1], runs_s[1], sides[1].n, us[0] > 0 ? us[1] / us[0] : 0);
	printf("%-34s   all passes, us/run: ours %s | plain %s\n", "", passes_str(&sides[0], b[0], sizeof(b[0])),
	       passes_str(&sides[1], b[1], sizeof(b[1])));

	/* syscalls, untimed */
	for (unsigned i = 0; i < 2; i++) {
		static struct sc_result res;
		unsigned runs = sides[i].n < COUNT_RUNS ? sides[i].n : COUNT_RUNS;
		char s1[200], s2[200];

		r = count_syscalls(daemon, sides[i].fn, x, k, runs, &res);
		if (r < 0) {
			printf("%-34s syscalls: %s failed: %s\n", "", sides[i].name, hp_strerror(r));
			continue;
		}
		if (res.err) {
			if (!*ptrace_said)
				printf("%-34s syscalls: not counted: ptrace: %s\n", "", strerror(-res.err));
			*ptrace_said = true;
			return;
		}
		if (i == 0 && !res.daemon_err)
			printf("%-34s syscalls/run, ours:  %.3g = client %s + daemon %s\n", "",
			       (double)(sc_total(res.client) + sc_total(res.daemon)) / runs,
			       sc_str(res.client, runs, s1, sizeof(s1)), sc_str(res.daemon, runs, s2, sizeof(s2)));
		else if (i == 0)
			printf("%-34s syscalls/run, ours:  client %s + daemon (not counted)\n", "",
			       sc_str(res.client, runs, s1, sizeof(s1)));
		else
			printf("%-34s syscalls/run, plain: %s\n", "", sc_str(res.client, runs, s1, sizeof(s1)));
		if (i == 0 && res.daemon_err && !*ptrace_said) {
			printf("%-34s (the daemon's syscalls are not counted: ptrace: %s)\n", "", strerror(-res.daemon_err));
			*ptrace_said = true;
		}
	}
}

/* Remove the (by then empty) directories; say so if something was left. */
static void remove_dirs(const char *workdir, const char *spilldir, const char *plain_dir)
{
	if (rmdir(plain_dir) < 0 || (rmdir(spilldir) < 0 && errno != ENOENT) || rmdir(workdir) < 0)
		printf("could not remove %s (something was left in it): %s\n", workdir, strerror(errno));
}

int main(void)
{
	const char *secs = getenv("HP_BENCH_CELL_SECONDS"), *parent = getenv("HP_BENCH_SPILL_DIR");
	const char *build = getenv("HP_BUILD");
	char workdir[256], spilldir[300], globals[512];
	struct ctx x = { 0 };
	struct hp_status *st = NULL;
	struct daemon d;
	struct stat s1, s2;
	struct statfs fs;
	uint64_t target_ns = 300000000, rnd = 0x9E3779B97F4A7C15ull;
	bool ptrace_said = false;
	int r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (secs && atof(secs) > 0)
		target_ns = (uint64_t)(atof(secs) * 1e9);
	snprintf(workdir, sizeof(workdir), "%s/hugepool-bench.XXXXXX", parent && *parent ? parent : "/var/tmp");
	if (!mkdtemp(workdir)) {
		printf("bench_spill: mkdtemp %s: %s\n", workdir, strerror(errno));
		return 1;
	}
	snprintf(spilldir, sizeof(spilldir), "%s/spill", workdir);
	snprintf(x.plain_dir, sizeof(x.plain_dir), "%s/plain", workdir);
	if (mkdir(x.plain_dir, 0700) < 0) {
		printf("bench_spill: mkdir %s: %s\n", x.plain_dir, strerror(errno));
		rmdir(workdir);
		return 1;
	}
	src = malloc(MAX_RUN);
	dst = malloc(MAX_RUN);
	if (!src || !dst) {
		remove_dirs(workdir, spilldir, x.plain_dir);
		return 1;
	}
	for (size_t i = 0; i < MAX_RUN; i += 8) {
		rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
		memcpy(src + i, &rnd, 8);
	}
	memset(dst, 0, MAX_RUN);
	/* the tracer that counts syscalls is our child: let it trace us (Yama ptrace_scope 1) */
	prctl(PR_SET_PTRACER, (unsigned long)getpid(), 0, 0, 0);

	snprintf(globals, sizeof(globals), "hugepages = off\nmax_connections_per_uid = 0\nspill_directory = %s\n",
		 spilldir);
	/* the daemon wants something to serve: one small class, never used here */
	r = harness_start(&d, globals, "[class bench]\nsize = 64K\ncount = 1\n");
	if (r < 0) {
		printf("bench_spill: cannot start hugepoold (%s)\n", strerror(-r));
		fflush(stdout);
		harness_dump_log(&d);
		harness_cleanup(&d);
		remove_dirs(workdir, spilldir, x.plain_dir);
		return 1;
	}
	r = hp_connect(d.socket, &x.c);
	if (r == 0)
		r = hp_status(x.c, &st);
	if (r < 0) {
		printf("bench_spill: cannot talk to hugepoold: %s (%s)\n", hp_strerror(r), hp_last_error(x.c));
		hp_disconnect(x.c);
		harness_stop(&d);
		remove_dirs(workdir, spilldir, x.plain_dir);
		return 1;
	}
	printf("bench_spill: a run of bytes written, finished, read back whole and closed, N times; daemon %s/hugepoold\n",
	       build ? build : "build");
	printf("  ours  = hp_spill_open/write/finish/read/close; daemon spill_threshold %" PRIu64
	       " KiB, files made with %s in %s\n",
	       st->spill.threshold >> 10, st->spill.method, st->spill.directory);
	printf("  plain = open(O_CREAT|O_EXCL) of a named file in %s, write, pread, close, unlink\n", x.plain_dir);
	if (stat(spilldir, &s1) == 0 && stat(x.plain_dir, &s2) == 0 && statfs(spilldir, &fs) == 0)
		printf("  file system: %s (0x%lx), %s device for both directories\n", fs_name((long)fs.f_type),
		       (unsigned long)fs.f_type, s1.st_dev == s2.st_dev ? "the same" : "NOT the same");
	printf("  where = where ours kept the run; us = microseconds per run in the best pass; plain/ours > 1: ours "
	       "faster\n");
	printf("  each side: N runs per pass (calibrated to %.2f s, $HP_BENCH_CELL_SECONDS), best of %d passes, "
	       "alternating; no fsync\n",
	       (double)target_ns / 1e9, BENCH_REPS);
	printf("  syscalls: an untimed pass of up to %u runs under ptrace, every syscall of the bench's thread and of "
	       "hugepoold\n\n", COUNT_RUNS);
	hp_status_free(st);
	st = NULL;

	printf("%-27s %-6s | %-9s %9s %8s | %-9s %9s %8s | %s\n", "cell", "where", "ours us", "runs/s", "N",
	       "plain us", "runs/s", "N", "plain/ours");
	for (size_t i = 0; i < sizeof(cells) / sizeof(cells[0]); i++)
		run_cell(&cells[i], &x, d.pid, target_ns, &ptrace_said);

	if (hp_status(x.c, &st) == 0) {
		printf("\ndaemon after the run: %" PRIu64 " spill files open, %" PRIu64 " bytes charged; since start %" PRIu64
		       " files created, %" PRIu64 " bytes charged, %" PRIu64 " refusals, %" PRIu64 " truncated\n",
		       st->spill.files, st->spill.bytes, st->spill.files_created, st->spill.bytes_charged_total,
		       st->spill.refusals, st->spill.truncated);
		hp_status_free(st);
	}
	hp_disconnect(x.c);
	if (harness_stop(&d) != 0)
		printf("hugepoold did not exit cleanly (its log is above)\n");
	remove_dirs(workdir, spilldir, x.plain_dir);
	free(src);
	free(dst);
	return 0;
}
