/* SPDX-License-Identifier: MIT */
/*
 * pidns - run a program as the first process of a new pid namespace, as a container's init.
 *
 *   pidns PROG ARGS...
 *
 * Unshares the pid namespace (root only), forks, and execs PROG with ARGS in the child, which
 * is pid 1 there: when it exits, the kernel kills every other process of the namespace. The
 * child has a mount namespace of its own with the namespace's /proc, as a container has. This
 * process stays outside, forwards SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 to it, and exits
 * as it did (its status, or 128 + its signal), or is killed with it: PR_SET_PDEATHSIG makes a
 * SIGKILL of this process (harness_kill) reach the child. Exit status 126: the namespace could
 * not be made (not root, or no user namespace allowing it); 127: exec failed. Used by
 * tests/integration/test_restart.c; named so that tests/run-tests.sh does not run it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2 };
	sigset_t wait_for, old;
	int status;
	pid_t child;

	if (argc < 2) {
		fprintf(stderr, "usage: pidns PROG ARGS...\n");
		return 2;
	}
	if (unshare(CLONE_NEWPID) < 0) {
		fprintf(stderr, "pidns: unshare(CLONE_NEWPID): %s\n", strerror(errno));
		return 126;
	}
	/* taken with sigwaitinfo, not handlers (which a TSan build defers past a blocking wait);
	 * blocked before the fork, so that none comes before we wait for it */
	sigemptyset(&wait_for);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&wait_for, sigs[i]);
	sigaddset(&wait_for, SIGCHLD);
	sigprocmask(SIG_BLOCK, &wait_for, &old);
	child = fork();
	if (child < 0) {
		fprintf(stderr, "pidns: fork: %s\n", strerror(errno));
		return 126;
	}
	if (child == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
			fprintf(stderr, "pidns: a mount namespace with its own /proc: %s\n", strerror(errno));
			_exit(126);
		}
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[1], argv + 1);
		fprintf(stderr, "pidns: %s: %s\n", argv[1], strerror(errno));
		_exit(127);
	}
	for (;;) {
		siginfo_t si;
		pid_t r = waitpid(child, &status, WNOHANG);

		if (r == child)
			break;
		if (r < 0 && errno != EINTR)
			return 126;
		if (sigwaitinfo(&wait_for, &si) > 0 && si.si_signo != SIGCHLD)
			kill(child, si.si_signo);
	}
	/* _exit: a sanitizer build's LeakSanitizer fails its check at this exit, outside the
	 * namespace its child was pid 1 of, and would make the status 1 */
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}
