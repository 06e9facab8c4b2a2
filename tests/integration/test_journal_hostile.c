/* SPDX-License-Identifier: MIT */
/*
 * test_journal_hostile.c - journals against hostile clients and planted files, on a real
 * hugepoold: a ring rewritten by its own writer while the daemon reads it (that writer is cut
 * off, the daemon and the other writers go on); a doorbell drained and made blocking and wake
 * words zeroed by another client (of another uid where the test may), while a victim's appends
 * still complete; lazy entries whose `want` and `lazy` words their writer flips without end
 * (another uid again), while the victim's appends are synced as they come; a journal directory of loose modes or another owner, and a segment replaced
 * by a symlink (never followed; refused at start).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "harness.h"
#include "hugepool.h"
#include "proto.h"
#include "case.h"
#include "journal_case.h"
#include "jring.h"

#define HOSTILE_RING (64 * KIB)
#define HOSTILE_JOURNAL JOURNAL "ring_size = 64K\nwhen_full = recycle\n"

/* Unmap every mapping whose name contains what (a forked child drops its parent's). */
static void maps_unmap(const char *what)
{
	uintptr_t a[64], b[64];
	unsigned n = 0;
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];

	if (!f)
		return;
	while (n < 64 && fgets(line, sizeof(line), f))
		if (strstr(line, what) && sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &a[n], &b[n]) == 2)
			n++;
	fclose(f);
	for (unsigned i = 0; i < n; i++)
		munmap((void *)a[i], b[i] - a[i]);
}

/*
 * An entry of half the ring: a 112-byte record then FLIP_EMPTY empty ones, so the second such
 * entry ends exactly at the end of the ring. The flipper makes that entry's first record
 * swallow all the others and back, as fast as it can: a reader that checks the lengths and
 * then reads them again may see 112 first and the swallowing length after, walk to the end of
 * the entry and read the next record header past the ring. Many records make the time between
 * the two readings long.
 */
#define FLIP_LEN 112u
#define FLIP_ENTRY (HOSTILE_RING / 2)
#define FLIP_EMPTY ((FLIP_ENTRY - sizeof(struct jring_entry) - (FLIP_LEN + 8)) / 8)
#define FLIP_SWALLOW (FLIP_ENTRY - sizeof(struct jring_entry) - sizeof(struct jring_rec))
#define FLIP_ATTEMPTS 64
/* the race is the point and may be lost many times on a slow (sanitized) build: keep trying */
#define FLIP_ATTEMPTS_MAX 2048

static struct {
	volatile uint32_t *len;
	atomic_bool stop;
	pthread_t thread;
	bool started;
} flip;

/* racing with the library's own writes into the ring is the point: not for TSan to report */
__attribute__((no_sanitize_thread)) static void *flipper_main(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&flip.stop, memory_order_relaxed)) {
		*flip.len = FLIP_SWALLOW;
		*flip.len = FLIP_LEN;
	}
	return NULL;
}

static void flip_join(void)
{
	if (!flip.started)
		return;
	atomic_store(&flip.stop, true);
	pthread_join(flip.thread, NULL);
	flip.started = false;
}

static void test_hostile_ring_flip(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	hp_conn *vc, *hc;
	hp_journal *victim;
	unsigned cut_off = 0;
	static struct iovec v[1 + FLIP_EMPTY];
	uint8_t rec[FLIP_LEN];

	(void)state;
	start_journal(&d, HOSTILE_JOURNAL);
	harness_watchdog_arm("test_hostile_ring_flip", 600);
	vc = conn(&d);
	hc = conn(&d);
	victim = jopen(vc);
	append_wait(victim, 1, 100);
	memset(rec, 0x5a, sizeof(rec));
	v[0] = (struct iovec){ rec, sizeof(rec) };
	for (unsigned i = 1; i <= FLIP_EMPTY; i++)
		v[i] = (struct iovec){ rec, 0 };
	for (unsigned a = 0; a < FLIP_ATTEMPTS || (cut_off == 0 && a < FLIP_ATTEMPTS_MAX); a++) {
		struct jring_hdr *ring;
		hp_journal *spacer = jopen(hc), *h = jopen_ring(hc, HOSTILE_RING, &ring);
		int r = 0;

		/*
		 * The daemon maps rings top-down: closing the spacer, opened just before, leaves this
		 * ring with nothing mapped after it once the daemon has let the spacer go, so a read
		 * past its end faults instead of landing in a neighbour.
		 */
		hp_journal_close(spacer);
		append_wait(victim, 1000 + a, 100);

		assert_int_equal(ring->size, HOSTILE_RING);
		flip.len = (volatile uint32_t *)((uint8_t *)ring + JRING_HDR_SIZE + FLIP_ENTRY +
						 sizeof(struct jring_entry));
		atomic_store(&flip.stop, false);
		assert_int_equal(pthread_create(&flip.thread, NULL, flipper_main, NULL), 0);
		flip.started = true;
		threads_cleanup = flip_join;
		/* 32 times round the ring, or until the daemon cuts this writer off */
		for (unsigned i = 0; i < 32 * HOSTILE_RING / FLIP_ENTRY && r == 0; i++)
			r = hp_journal_appendv(h, v, 1 + FLIP_EMPTY, NULL);
		flip_join();
		threads_cleanup = NULL;
		if (r == -EPROTO)
			cut_off++;
		else if (r < 0)
			fail_msg("attempt %u: a hostile append failed with %s, not EPROTO (the daemon died?)", a,
				 hp_strerror(r));
		hp_journal_close(h);
		/* the daemon lives and the other writer goes on */
		append_wait(victim, 2 + a, 100);
	}
	assert_true(cut_off > 0);
	assert_true(harness_log_count(&d, "broke the ring protocol") > 0);
	hp_journal_close(victim);
	hp_disconnect(hc);
	hp_disconnect(vc);
	stop(&d);
}

/*
 * Run fn(arg) in a child process: as HARNESS_OTHER_UID when we may (the hostile client is
 * another user), else as ourselves (the doorbell and wake page attacks need no second uid).
 * Returns fn's return value, or 128 + signal.
 */
static int run_other(int (*fn)(void *), void *arg)
{
	pid_t pid;
	int status;

	if (harness_two_uids())
		return harness_as_uid(HARNESS_OTHER_UID, fn, arg);
	fprintf(stderr, "test: running the hostile client as our own uid\n");
	pid = fork();
	if (pid == 0)
		_exit(fn(arg) & 0xff);
	assert_true(pid > 0);
	while (waitpid(pid, &status, 0) < 0)
		assert_int_equal(errno, EINTR);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define VICTIM_APPENDS 30

struct doorbell_attack {
	const char *socket;
	int stop_fd; /* readable: the victim is done */
};

/* The first eventfd among our fds, or -1. */
static int find_eventfd(void)
{
	for (int fd = 3; fd < 256; fd++) {
		char path[64], link[64];
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = '\0';
			if (strcmp(link, "anon_inode:[eventfd]") == 0)
				return fd;
		}
	}
	return -1;
}

/*
 * The hostile client: a writer of its own, then until told to stop it drains the doorbell it
 * was given, leaves it blocking (a daemon that reads it would hang) and zeroes the wake words
 * it can reach (a daemon that trusts `waiters` would skip FUTEX_WAKE). It first drops what it
 * inherited from the test (fds, mappings): it attacks with what the daemon gave it, nothing else.
 */
static int doorbell_attacker_main(void *arg)
{
	struct doorbell_attack *a = arg;
	uintptr_t wakes[64];
	struct pollfd stop = { .fd = 3, .events = POLLIN };
	hp_conn *c = NULL;
	hp_journal *j = NULL;
	unsigned nw;
	int efd;

	if (dup2(a->stop_fd, 3) < 0 || syscall(SYS_close_range, 4, ~0u, 0) < 0)
		return 10;
	maps_unmap("hugepool-journal");
	if (writer_open(a->socket, &c, &j) < 0)
		return 11;
	efd = find_eventfd();
	nw = maps_find("hugepool-journal-wake", JRING_WAKE_SIZE, wakes, 64);
	if (efd < 0 || nw == 0)
		return 12;
	while (poll(&stop, 1, 0) == 0) {
		uint64_t v;

		fcntl(efd, F_SETFL, O_NONBLOCK);
		if (read(efd, &v, sizeof(v)) < 0) {
			/* empty */
		}
		fcntl(efd, F_SETFL, 0);
		for (unsigned i = 0; i < nw; i++) {
			struct jring_wake *w = (struct jring_wake *)wakes[i];

			__atomic_store_n(&w->waiters, 0, __ATOMIC_RELAXED);
			__atomic_store_n(&w->futex, 0, __ATOMIC_RELAXED);
		}
	}
	return 0;
}

static struct {
	hp_journal *j;
	int stop_fd;
	int64_t wait_ms; /* the bound of each of its waits */
	unsigned done;
	int err;
	pthread_t thread;
	bool started;
} victim;

static void *victim_main(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < VICTIM_APPENDS; i++) {
		uint64_t ticket = append_nowait(victim.j, 500 + i, 100);
		int r = hp_journal_wait(victim.j, ticket, victim.wait_ms);

		if (r < 0) {
			victim.err = r;
			break;
		}
		victim.done++;
		/* leave the flusher time to fall asleep: the next append must ring */
		sleep_ms(2);
	}
	if (write(victim.stop_fd, "x", 1) != 1)
		victim.err = -EIO;
	return NULL;
}

static void victim_join(void)
{
	if (victim.started)
		pthread_join(victim.thread, NULL);
	victim.started = false;
}

/*
 * The victim (root) appends and waits for each of its records, each wait bounded by wait_ms,
 * while attacker runs as another uid (run_other) against the same journal of a daemon started
 * with conf; then the victim appends once more: every one of its appends completed, and the
 * daemon serves on. what names the attack in the failure.
 */
static void victim_beside(struct daemon *d, const char *conf, const char *name, int64_t wait_ms,
			  int (*attacker)(void *), const char *what)
{
	struct doorbell_attack a;
	int pipefd[2], rc;
	hp_conn *c;

	start_journal(d, conf);
	harness_watchdog_arm(name, 120);
	c = conn(d);
	victim.j = jopen(c);
	append_wait(victim.j, 1, 100);
	assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
	a = (struct doorbell_attack){ d->socket, pipefd[0] };
	victim.stop_fd = pipefd[1];
	victim.wait_ms = wait_ms;
	victim.done = 0;
	victim.err = 0;
	assert_int_equal(pthread_create(&victim.thread, NULL, victim_main, NULL), 0);
	victim.started = true;
	threads_cleanup = victim_join;
	rc = run_other(attacker, &a);
	victim_join();
	threads_cleanup = NULL;
	close(pipefd[0]);
	close(pipefd[1]);
	assert_int_equal(rc, 0);
	if (victim.done != VICTIM_APPENDS)
		fail_msg("the victim's appends beside %s: %u of %u completed, then %s", what, victim.done,
			 VICTIM_APPENDS, hp_strerror(victim.err));
	append_wait(victim.j, 2, 100);
	hp_journal_close(victim.j);
	hp_disconnect(c);
	stop(d);
}

static void test_hostile_doorbell(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */

	(void)state;
	/* the attacker is another uid: it may append (it is a writer of the journal, as in real
	 * life the hostile one is) */
	victim_beside(&d, JOURNAL "append = 65534\n", "test_hostile_doorbell", LIVENESS_MS, doorbell_attacker_main,
		      "a doorbell attacker");
}

#define LAZY_RING (256u << 10)

/*
 * The hostile lazy writer: a writer of its own whose entries are lazy, then until told to stop
 * it flips its ring's `want` between nothing and everything and its `lazy` between on and
 * garbage, appending a lazy entry now and then (jring.h: the daemon must neither hold anyone
 * else's records for it nor loop on what it reads there). Like the doorbell attacker, it first
 * drops what it inherited and attacks with what the daemon gave it.
 */
static int lazy_attacker_main(void *arg)
{
	struct doorbell_attack *a = arg;
	struct pollfd stop = { .fd = 3, .events = POLLIN };
	struct jring_hdr *ring;
	uintptr_t rings[1];
	hp_conn *c = NULL;
	hp_journal *j = NULL;
	uint8_t rec[64] = { 0 };
	struct iovec v = { rec, sizeof(rec) };

	if (dup2(a->stop_fd, 3) < 0 || syscall(SYS_close_range, 4, ~0u, 0) < 0)
		return 10;
	maps_unmap("hugepool-journal");
	if (writer_open(a->socket, &c, &j) < 0)
		return 11;
	if (maps_find("hugepool-journal:", JRING_HDR_SIZE + LAZY_RING, rings, 1) != 1)
		return 12;
	ring = (struct jring_hdr *)rings[0];
	for (unsigned i = 0; poll(&stop, 1, 0) == 0; i++) {
		if (i % 4096 == 0 && hp_journal_appendv_flags(j, &v, 1, HP_JOURNAL_APPEND_LAZY, NULL) < 0)
			return 13;
		__atomic_store_n(&ring->want, i % 2 ? UINT64_MAX : 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&ring->lazy, i % 3 ? 1 : 7, __ATOMIC_SEQ_CST);
	}
	return 0;
}

/*
 * A writer of another uid plays with its lazy entries' words while the victim appends and
 * waits for each: the victim's records are synced as they come (each wait is bounded far below
 * the journal's max_batch_delay of 10 s, which a record held for the attacker's would take),
 * and the daemon serves on.
 */
static void test_hostile_lazy(void **state)
{
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */

	(void)state;
	victim_beside(&d, JOURNAL "append = 65534\nring_size = 256K\nmax_batch_delay = 10s\n", "test_hostile_lazy",
		      LIVENESS_MS / 4, lazy_attacker_main, "a lazy attacker");
}

/* Restart must fail with the journal's exit status and a log line saying why. */
static void restart_refused(struct daemon *d, const char *why)
{
	int before = harness_log_count(d, why);

	assert_int_equal(harness_restart(d), -ECHILD);
	assert_int_equal(d->exit_status, 5);
	if (harness_log_count(d, why) <= before) {
		harness_dump_log(d);
		fail_msg("the daemon did not say \"%s\"", why);
	}
}

static void test_journal_dir_checks(void **state)
{
	static const mode_t loose[] = { 0770, 0702, 0777 };
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	char dir[160];

	(void)state;
	start_journal(&d, JOURNAL);
	terminate(&d);
	snprintf(dir, sizeof(dir), "%s/j", d.dir);
	for (unsigned i = 0; i < sizeof(loose) / sizeof(loose[0]); i++) {
		assert_int_equal(chmod(dir, loose[i]), 0);
		restart_refused(&d, "writable by group or others; refusing it");
	}
	assert_int_equal(chmod(dir, 0700), 0);
	if (harness_two_uids()) {
		assert_int_equal(chown(dir, HARNESS_OTHER_UID, HARNESS_OTHER_UID), 0);
		restart_refused(&d, "not to the daemon");
		assert_int_equal(chown(dir, getuid(), getgid()), 0);
	}
	restart(&d);
	stop(&d);
}

/* Opens of path since the watch was set (inotify, non-blocking). */
static unsigned opens_seen(int ifd)
{
	char buf[4096] __attribute__((aligned(8)));
	unsigned n = 0;
	ssize_t len;

	while ((len = read(ifd, buf, sizeof(buf))) > 0)
		for (char *p = buf; p < buf + len; p += sizeof(struct inotify_event) + ((struct inotify_event *)p)->len)
			n += (((struct inotify_event *)p)->mask & IN_OPEN) != 0;
	return n;
}

static void test_hostile_symlink(void **state)
{
	struct recs e = { 0 };
	static struct daemon d; /* static: teardown uses it after a failed assertion left this frame */
	char secret[160], seg[160], moved[160];
	hp_journal_reader *r = NULL;
	hp_conn *c;
	hp_journal *j;
	uint64_t lsn;
	int fd, ifd;

	(void)state;
	start_journal(&d, JOURNAL);
	harness_watchdog_arm("test_hostile_symlink", 60);
	c = conn(&d);
	j = jopen(c);
	for (unsigned i = 0; i < 8; i++) {
		lsn = append_wait(j, 700 + i, 300);
		recs_add(&e, lsn, 700 + i, 300);
	}
	/* a file outside the journal's directory, of a segment's size, that must never be opened */
	snprintf(secret, sizeof(secret), "%s/secret", d.dir);
	fd = open(secret, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, MIB), 0);
	close(fd);
	ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	assert_true(ifd >= 0);
	assert_true(inotify_add_watch(ifd, secret, IN_OPEN) >= 0);
	/* the first segment's name now leads out of the directory */
	snprintf(seg, sizeof(seg), "%s/j/j-000.seg", d.dir);
	snprintf(moved, sizeof(moved), "%s/j/moved", d.dir);
	assert_int_equal(rename(seg, moved), 0);
	assert_int_equal(symlink(secret, seg), 0);
	if (hp_journal_reader_open(c, JNAME, 1, &r) == 0)
		hp_journal_reader_close(r);
	assert_int_equal(opens_seen(ifd), 0);
	/* and readers still get the journal's own records */
	read_expect(c, 1, &e, 1);
	assert_int_equal(opens_seen(ifd), 0);
	hp_journal_close(j);
	hp_disconnect(c);
	terminate(&d);
	/* at start, a symlink for a segment is refused, not followed */
	restart_refused(&d, "is not a regular file of the daemon's uid");
	assert_int_equal(opens_seen(ifd), 0);
	close(ifd);
	assert_int_equal(unlink(seg), 0);
	assert_int_equal(rename(moved, seg), 0);
	restart(&d);
	c = conn(&d);
	read_expect(c, 1, &e, 1);
	hp_disconnect(c);
	stop(&d);
	free(e.v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_hostile_ring_flip, teardown),
		cmocka_unit_test_teardown(test_hostile_doorbell, teardown),
		cmocka_unit_test_teardown(test_hostile_lazy, teardown),
		cmocka_unit_test_teardown(test_journal_dir_checks, teardown),
		cmocka_unit_test_teardown(test_hostile_symlink, teardown),
	};

	return run_cases("journal_hostile", tests);
}
