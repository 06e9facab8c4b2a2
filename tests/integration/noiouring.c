/* SPDX-License-Identifier: MIT */
/*
 * noiouring, noaio, nopassrights - run a program without a kernel feature, as a container's
 * seccomp profile or an older kernel would.
 *
 *   noiouring PROG ARGS...      io_uring_setup(2) fails with EPERM
 *   noaio PROG ARGS...          io_setup(2) fails with EPERM (libaio's context)
 *   nopassrights PROG ARGS...   setsockopt(SOL_SOCKET, SO_PASSRIGHTS) fails with ENOPROTOOPT
 *                               (a kernel before 6.16)
 *
 * One binary; what it denies depends on the name it is run by (noaio and nopassrights are links
 * to it).
 * Installs a seccomp filter under which that call fails (everything else is allowed), then
 * execs PROG with ARGS (looked up in PATH when it has no '/'). The filter stays with PROG and
 * every thread it starts. Exit status 126: the filter could not be installed (or this is not
 * x86_64, the only architecture the filter is written for); 127: exec failed. Used by
 * tests/integration/test_journal_backends.c and test_hostile.c; named so that
 * tests/run-tests.sh does not run it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* what the filter denies, by the name the binary is run by */
enum deny { DENY_URING, DENY_AIO, DENY_PASSRIGHTS };

#if defined(__x86_64__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#define X32_SYSCALL_BIT 0x40000000u
#define ARRAY_LEN(a) ((unsigned short)(sizeof(a) / sizeof((a)[0])))

#define SO_PASSRIGHTS_ 83 /* Linux 6.16 */

/* the x86_64 and x32 numbers of a call */
#define IS_CALL(nr, skip_if_not) \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 1, 0), \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr) | X32_SYSCALL_BIT, 0, (skip_if_not))

/* allow another architecture's calls (i386 on x86_64: not ours to judge), load the call number */
#define X86_64_CALL_NR \
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)), \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0), \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), \
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))

static int install(enum deny what)
{
	struct sock_filter uring[] = {
		X86_64_CALL_NR,
		IS_CALL(__NR_io_uring_setup, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_filter aio[] = {
		X86_64_CALL_NR,
		IS_CALL(__NR_io_setup, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_filter rights[] = {
		X86_64_CALL_NR,
		IS_CALL(__NR_setsockopt, 5),
		/* level and optname: the low words of args[1] and args[2] (little-endian) */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOL_SOCKET, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SO_PASSRIGHTS_, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOPROTOOPT & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = ARRAY_LEN(uring), .filter = uring };

	if (what == DENY_AIO)
		prog = (struct sock_fprog){ .len = ARRAY_LEN(aio), .filter = aio };
	else if (what == DENY_PASSRIGHTS)
		prog = (struct sock_fprog){ .len = ARRAY_LEN(rights), .filter = rights };

	/* without it an unprivileged process may not install a filter */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		return -errno;
	return 0;
}
#else
static int install(enum deny what)
{
	(void)what;
	return -ENOSYS;
}
#endif

int main(int argc, char **argv)
{
	const char *self = basename(argv[0]);
	int r;

	if (argc < 2) {
		fprintf(stderr, "usage: %s PROG [ARGS...]\n", self);
		return 126;
	}
	r = install(!strcmp(self, "nopassrights") ? DENY_PASSRIGHTS : !strcmp(self, "noaio") ? DENY_AIO : DENY_URING);
	if (r < 0) {
		fprintf(stderr, "%s: cannot install the seccomp filter: %s%s\n", self, strerror(-r),
			r == -ENOSYS ? " (the filter is written for x86_64 only)" : "");
		return 126;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "%s: cannot run %s: %s\n", self, argv[1], strerror(errno));
	return 127;
}
