/* SPDX-License-Identifier: MIT */
/*
 * reexec.c - see reexec.h. The check runs the binary as posix_spawn(3) does (the child shares
 * our memory until it executes, so a large pool costs it no page-table copy), through
 * /proc/self/fd so that the file checked is the file opened, with stdout discarded and stderr
 * read back, without blocking, for the refusal. One check at a time (`check`).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fdstore.h"
#include "reexec.h"
#include "takeover.h"
#include "util.h"

#define CHECK_MS 10000 /* how long the next binary may take to check the configuration */

#define REAP_ENV "HUGEPOOLD_REAP" /* pids, each followed by ',' */
#define REAP_MAX 16
#define REAP_INTERVAL_NS (10 * 1000000ull)

static char **args; /* the daemon's argv, as main got it */
static pid_t reap[REAP_MAX]; /* reexec_reap_add's */
static unsigned nreap;
static uint64_t reap_at;
static char path[4096]; /* "" when unknown */
static int self_fd = -1; /* this life's binary */

void reexec_init(char **argv)
{
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);

	args = argv;
	path[n > 0 ? n : 0] = '\0';
	/* "/usr/sbin/hugepoold (deleted)" when replaced before we looked: the path it had */
	if (n > 10 && strcmp(path + n - 10, " (deleted)") == 0)
		path[n - 10] = '\0';
	self_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	/* what an earlier image of this process left to reap */
	for (const char *p = getenv(REAP_ENV); p && *p;) {
		char *end;
		long pid = strtol(p, &end, 10);

		if (end == p || *end != ',')
			break;
		if (pid > 0 && pid <= INT32_MAX)
			reexec_reap_add((pid_t)pid);
		p = end + 1;
	}
	unsetenv(REAP_ENV);
}

void reexec_reap_add(pid_t pid)
{
	/* past REAP_MAX (restarts faster than lives end), the oldest waits here for its end */
	if (nreap == REAP_MAX) {
		while (waitpid(reap[0], NULL, 0) < 0 && errno == EINTR)
			;
		memmove(reap, reap + 1, --nreap * sizeof(*reap));
	}
	reap[nreap++] = pid;
	reap_at = 0;
}

uint64_t reexec_reap(uint64_t now)
{
	if (!nreap)
		return UINT64_MAX;
	if (now < reap_at)
		return reap_at;
	for (unsigned i = 0; i < nreap;) {
		pid_t r = waitpid(reap[i], NULL, WNOHANG);

		/* ended and reaped now, or not a child of this process (ECHILD): done with it */
		if (r != 0 && !(r < 0 && errno == EINTR))
			reap[i] = reap[--nreap];
		else
			i++;
	}
	reap_at = nreap ? now + REAP_INTERVAL_NS : UINT64_MAX;
	return reap_at;
}

/* The list for the next image of this process (before each exec). */
static void reap_pass_on(void)
{
	char list[REAP_MAX * 12 + 1];
	size_t n = 0;

	for (unsigned i = 0; i < nreap; i++)
		n += (size_t)snprintf(list + n, sizeof(list) - n, "%d,", (int)reap[i]);
	if (nreap)
		setenv(REAP_ENV, list, 1);
	else
		unsetenv(REAP_ENV);
}

const char *reexec_path(void)
{
	return path[0] ? path : NULL;
}

/* The first line of text, without its newline, for a reply. */
static void first_line(char *text)
{
	text[strcspn(text, "\n")] = '\0';
}

/* The check running: its process, the read end of its stderr, what it said, the binary. */
static struct {
	pid_t pid; /* 0: none runs */
	int out_fd;
	int exe_fd;
	uint64_t deadline;
	char out[512];
	size_t got;
} check = { .out_fd = -1, .exe_fd = -1 };

/* Run the binary open at fd as `ARGS --check-config`, its stderr into a pipe: the pipe's read end. */
static int check_spawn(int fd, char *err, size_t errlen)
{
	char exe[64];
	size_t nargs = 0;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	_cleanup_free_ char **argv = NULL;
	sigset_t none, dfl;
	int p[2], r;

	while (args[nargs])
		nargs++;
	argv = calloc(nargs + 2, sizeof(*argv));
	if (!argv || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return argv ? -errno : -ENOMEM;
	memcpy(argv, args, nargs * sizeof(*argv));
	argv[nargs] = (char *)"--check-config";
	snprintf(exe, sizeof(exe), "/proc/self/fd/%d", fd);
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	sigaddset(&dfl, SIGIO);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], STDERR_FILENO);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	r = -posix_spawn(&check.pid, exe, &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(p[1]);
	if (r < 0) {
		check.pid = 0;
		close(p[0]);
		snprintf(err, errlen, "cannot run '%s': %s", path, strerror(-r));
		return r;
	}
	return p[0];
}

/* Open the executable at the path, if it is one (fd, or a negative errno with why in err). */
static int open_next(char *err, size_t errlen)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	if (!path[0]) {
		snprintf(err, errlen, "the daemon cannot find its own executable to run again");
		return -ENOEXEC;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot open '%s': %s", path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & 0111)) {
		snprintf(err, errlen, "'%s' is not an executable file", path);
		return -EACCES;
	}
	return TAKE_FD(fd);
}

int reexec_open_next(char *err, size_t errlen)
{
	int fd = open_next(err, errlen);

	if (fd < 0)
		return fd;
	if (check.exe_fd >= 0)
		close(check.exe_fd);
	check.exe_fd = fd;
	return fd;
}

char **reexec_args(void)
{
	return args;
}

int reexec_check_start(char *err, size_t errlen)
{
	_cleanup_close_ int fd = -1;
	int r;

	if (check.pid) {
		snprintf(err, errlen, "a restart is being checked already");
		return -EBUSY;
	}
	fd = open_next(err, errlen);
	if (fd < 0)
		return fd;
	r = check_spawn(fd, err, errlen);
	if (r < 0)
		return r;
	check.out_fd = r;
	check.got = 0;
	check.deadline = now_ns() + CHECK_MS * 1000000ull;
	if (check.exe_fd >= 0)
		close(check.exe_fd);
	check.exe_fd = TAKE_FD(fd);
	return check.out_fd;
}

uint64_t reexec_check_deadline(void)
{
	return check.pid ? check.deadline : UINT64_MAX;
}

int reexec_check_poll(uint64_t now, char *err, size_t errlen)
{
	bool timed_out = false;
	int status = 0;

	if (!check.pid)
		return -ECHILD;
	/* its stderr until it closes it (exits); past what a reply can say, drained anyway: a child
	 * blocked on its stderr never exits */
	for (;;) {
		char scratch[256], *to = check.got < sizeof(check.out) - 1 ? check.out + check.got : scratch;
		ssize_t n = read(check.out_fd, to, to == scratch ? sizeof(scratch) : sizeof(check.out) - 1 - check.got);

		if (n > 0) {
			if (to != scratch)
				check.got += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (now < check.deadline)
				return -EINPROGRESS;
			timed_out = true;
			kill(check.pid, SIGKILL);
		}
		break; /* end of file: it exited (or closed its stderr), or it is given up */
	}
	check.out[check.got] = '\0';
	close(check.out_fd);
	check.out_fd = -1;
	while (waitpid(check.pid, &status, 0) < 0 && errno == EINTR)
		;
	check.pid = 0;
	if (!timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		int r = fdstore_exec_prepare();

		if (r < 0)
			snprintf(err, errlen, "no fds to spare for the re-execution: %s", strerror(-r));
		return r;
	}
	first_line(check.out);
	if (timed_out)
		snprintf(err, errlen, "'%s --check-config' did not finish in %d s", path, CHECK_MS / 1000);
	else if (WIFEXITED(status))
		snprintf(err, errlen, "'%s --check-config' exited with status %d%s%s", path, WEXITSTATUS(status),
			 check.out[0] ? ": " : "", check.out);
	else
		snprintf(err, errlen, "'%s --check-config' was killed by signal %d", path, WTERMSIG(status));
	return WIFEXITED(status) && WEXITSTATUS(status) == 2 ? -EINVAL : -ENOEXEC;
}

void reexec_check_cancel(void)
{
	if (!check.pid)
		return;
	kill(check.pid, SIGKILL);
	while (waitpid(check.pid, NULL, 0) < 0 && errno == EINTR)
		;
	check.pid = 0;
	close(check.out_fd);
	check.out_fd = -1;
}

int reexec_run(void)
{
	reap_pass_on();
	return fdstore_exec(check.exe_fd, self_fd, args);
}

int reexec_back(int chan, int nice)
{
	reap_pass_on();
	return takeover_exec(check.exe_fd, self_fd, args, chan, nice);
}
