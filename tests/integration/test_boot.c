/* SPDX-License-Identifier: MIT */
/*
 * test_boot.c - every way the daemon's boot can fail ends in one error line of its log that says
 * what failed and why, and in the failed step's exit status (hugepoold(8), EXIT STATUS).
 *
 * The failures are made for real, by starving the daemon: it runs under a wrapper that lowers a
 * resource limit and execs it, and the limit rises one step per start until the daemon boots.
 *   - open files (RLIMIT_NOFILE) one fd at a time: every open, socket, memfd, eventfd and epoll
 *     of the boot is the one that fails, in turn (the configuration, the buffers, the warm
 *     state, the journal's directory, segments, I/O backend, doorbell and epoll, the spill
 *     directory, the event loop, the socket's directory);
 *   - address space (RLIMIT_AS) 2 MiB at a time: the buffers' mappings, the pre-fault threads,
 *     the journal's batch buffers (max_batch_bytes 16 MiB each), the recycler thread. Not under
 *     the sanitizers, whose shadow memory needs terabytes of address space.
 * Each failed start must exit with a step's status (2 to 6: not 1, not a signal), log exactly
 * one line at level error, and that line must name the cause (the errno's text, or "Out of
 * memory"). A start that dies before hugepoold runs (the dynamic loader, exit 127) is only
 * allowed below the lowest limit at which hugepoold logged anything.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "hugepool.h"
#include "proto.h"

#include "case.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

/* every subsystem a boot opens: buffers, a journal with large batches, spill (harness default) */
#define CLASSES                     \
	"[class s]\nsize = 2M\ncount = 2\n" \
	"[journal j]\ndirectory = @DIR@/j\nsegments = 2\nsegment_size = 64M\nmax_batch_bytes = 16M\n"

#define STEP_EXIT_MIN 2 /* EXIT_CONFIG */
#define STEP_EXIT_MAX 6 /* EXIT_SPILL */

static char wrapper[64];

/*
 * The wrapper: `ulimit $HP_BOOT_ULIMIT`, then exec the daemon (dash closes the script's fd).
 * LeakSanitizer, at the exit of a daemon out of fds, cannot open /proc/PID/task and ends the
 * process with status 1 instead of the daemon's own: it is off for these starts.
 */
static void wrapper_create(void)
{
	static const char script[] = "#!/bin/sh\n"
				     "export ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\"\n"
				     "ulimit $HP_BOOT_ULIMIT || exit 125\n"
				     "exec \"$@\"\n";
	int fd;

	snprintf(wrapper, sizeof(wrapper), "/tmp/hugepool-boot.XXXXXX");
	fd = mkstemp(wrapper);
	if (fd < 0 || write(fd, script, sizeof(script) - 1) != (ssize_t)(sizeof(script) - 1) || fchmod(fd, 0755) < 0) {
		perror("test_boot: cannot write the wrapper");
		exit(1);
	}
	close(fd);
}

/*
 * The lines hugepoold itself logged (not the dynamic loader's "build/hugepoold: error while
 * loading ..."), and of them those at level error, the first of which in line.
 */
static int log_lines(const struct daemon *d, int *errors, char *line, size_t len)
{
	char buf[1024];
	FILE *f = fopen(d->log, "re");
	int n = 0;

	assert_non_null(f);
	*errors = 0;
	line[0] = '\0';
	while (fgets(buf, sizeof(buf), f)) {
		if (strncmp(buf, "hugepoold: ", strlen("hugepoold: ")) != 0)
			continue;
		n++;
		if (strncmp(buf, "hugepoold: error: ", strlen("hugepoold: error: ")) == 0 && (*errors)++ == 0)
			snprintf(line, len, "%s", buf);
	}
	fclose(f);
	return n;
}

/*
 * Start the daemon under `ulimit OPT N` for N = from, from + step, ... until it boots; check
 * every failed start as the file's comment says. causes: the texts one of which the error line
 * must hold. Returns how many starts failed inside hugepoold.
 */
static unsigned sweep(const char *opt, uint64_t from, uint64_t step, uint64_t to, const char *const *causes)
{
	bool reached = false; /* a start got as far as hugepoold's own log */
	unsigned failed = 0;

	for (uint64_t n = from; n <= to; n += step) {
		char env[64], line[1024];
		struct harness_opts o = { .wrapper = wrapper, .env = { env, NULL } };
		struct daemon d;
		bool named = false;
		int r, errors;

		snprintf(env, sizeof(env), "HP_BOOT_ULIMIT=%s %" PRIu64, opt, n);
		r = start_try(&d, "", CLASSES, &o);
		if (r == 0) {
			print_message("ulimit %s %" PRIu64 ": booted after %u failed starts\n", opt, n, failed);
			stop(&d);
			assert_true(reached);
			return failed;
		}
		assert_int_equal(r, -ECHILD);
		if (log_lines(&d, &errors, line, sizeof(line)) == 0 && d.exit_status == 127 && !reached) {
			running = NULL;
			harness_cleanup(&d); /* the loader could not start it at all */
			continue;
		}
		reached = true;
		failed++;
		for (const char *const *c = causes; *c; c++)
			named = named || strstr(line, *c);
		if (d.exit_status < STEP_EXIT_MIN || d.exit_status > STEP_EXIT_MAX || errors != 1 || !named) {
			print_error("ulimit %s %" PRIu64 ": exit status %d, %d error lines, the first: %s", opt, n,
				    d.exit_status, errors, line[0] ? line : "(none)\n");
			fail(); /* teardown prints the log */
		}
		running = NULL;
		harness_cleanup(&d);
	}
	fail_msg("ulimit %s %" PRIu64 " still cannot boot the daemon", opt, to);
	return failed;
}

/* One fd short, at every fd the boot opens. */
static void test_out_of_fds(void **state)
{
	const char *const causes[] = { strerror(EMFILE), NULL };

	(void)state;
	/* a boot opens fewer than 64 fds with this configuration; at 3 not even libc opens */
	assert_true(sweep("-n", 3, 1, 64, causes) >= 10);
}

/* Out of address space, 2 MiB at a time (ulimit -v counts KiB). */
static void test_out_of_memory(void **state)
{
	const char *const causes[] = { strerror(ENOMEM), strerror(EAGAIN), "Out of memory", NULL };

	(void)state;
#ifdef SANITIZED
	skip();
#endif
	assert_true(sweep("-v", 2048, 2048, 1024 * 1024, causes) >= 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_out_of_fds, teardown),
		cmocka_unit_test_teardown(test_out_of_memory, teardown),
	};
	int r;

	wrapper_create();
	r = run_cases("test_boot", tests);
	unlink(wrapper);
	return r;
}
