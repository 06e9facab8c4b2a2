/* SPDX-License-Identifier: MIT */
/*
 * noiouring - run a program with io_uring forbidden, as a container's seccomp profile does.
 *
 *   noiouring PROG ARGS...
 *
 * Installs a seccomp filter under which io_uring_setup(2) fails with EPERM (everything else is
 * allowed), then execs PROG with ARGS (looked up in PATH when it has no '/'). The filter stays
 * with PROG and every thread it starts. Exit status 126: the filter could not be installed
 * (or this is not x86_64, the only architecture the filter is written for); 127: exec failed.
 * Used by tests/integration/test_journal.c; named so that tests/run-tests.sh does not run it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#define X32_SYSCALL_BIT 0x40000000u

static int forbid_io_uring(void)
{
	struct sock_filter f[] = {
		/* another architecture's calls (i386 on x86_64): not ours to judge */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		/* io_uring_setup, through the x86_64 or the x32 ABI */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup | X32_SYSCALL_BIT, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = (unsigned short)(sizeof(f) / sizeof(f[0])), .filter = f };

	/* without it an unprivileged process may not install a filter */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		return -errno;
	return 0;
}
#else
static int forbid_io_uring(void)
{
	return -ENOSYS;
}
#endif

int main(int argc, char **argv)
{
	int r;

	if (argc < 2) {
		fprintf(stderr, "usage: noiouring PROG [ARGS...]\n");
		return 126;
	}
	r = forbid_io_uring();
	if (r < 0) {
		fprintf(stderr, "noiouring: cannot install the seccomp filter: %s%s\n", strerror(-r),
			r == -ENOSYS ? " (the filter is written for x86_64 only)" : "");
		return 126;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "noiouring: cannot run %s: %s\n", argv[1], strerror(errno));
	return 127;
}
