/* SPDX-License-Identifier: MIT */
/*
 * takeover.c - see takeover.h. The messages are datagrams of a SOCK_SEQPACKET socketpair, so a
 * message is whole or not there; every receive is checked for its length, its entries' count
 * and its fds (MSG_CMSG_CLOEXEC; a truncated message or control part closes what came and is an
 * error), as any peer's message is, though the other end is this daemon's own binary.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "size.h"
#include "takeover.h"
#include "util.h"

#define DIRTY_MAX 4096 /* record indices in one DIRTY message */
/* the largest message: a batch of names, or of record indices */
#define PAYLOAD_MAX (TAKEOVER_FDS_MAX * sizeof(struct takeover_name) > DIRTY_MAX * sizeof(uint32_t) \
			     ? TAKEOVER_FDS_MAX * sizeof(struct takeover_name)                       \
			     : DIRTY_MAX * sizeof(uint32_t))

/* One message; with wait, until the channel takes it. 0 or a negative errno (-EPIPE: gone). */
static int send_msg(int chan, const struct takeover_msg *m, const void *payload, size_t len, const int *fds,
		    unsigned nfds, bool wait)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * TAKEOVER_FDS_MAX)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov[2] = { { (void *)(uintptr_t)m, sizeof(*m) }, { (void *)(uintptr_t)payload, len } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	ssize_t n;

	if (nfds) {
		struct cmsghdr *c;

		msg.msg_control = cbuf.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	for (;;) {
		n = sendmsg(chan, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN || !wait)
			return errno == ECONNRESET ? -EPIPE : -errno;
		struct pollfd p = { .fd = chan, .events = POLLOUT };

		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -errno;
	}
}

int takeover_send(int chan, enum takeover_type type, uint64_t arg, const char *text, int fd)
{
	size_t len = text ? strnlen(text, TAKEOVER_TEXT_MAX) : 0;
	struct takeover_msg m = { .type = type, .count = (uint32_t)len, .arg = arg };

	return send_msg(chan, &m, text, len, &fd, fd >= 0, true);
}

int takeover_send_back(int chan, const struct takeover_back *b, int fd)
{
	struct takeover_msg m = { .type = TAKEOVER_BACK, .count = 1 };

	return send_msg(chan, &m, b, sizeof(*b), &fd, 1, true);
}

int takeover_back_taken(int chan, pid_t pid, int timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
	bool closed = chan < 0;

	for (;;) {
		struct pollfd p = { .fd = chan, .events = POLLIN };
		struct takeover_msg m;
		ssize_t n;

		if (!closed && poll(&p, 1, 10) > 0) {
			n = recv(chan, &m, sizeof(m), MSG_PEEK | MSG_DONTWAIT);
			/* its first batch (left there), or its last words: it will not */
			if (n >= (ssize_t)sizeof(m))
				return m.type == TAKEOVER_FDS || m.type == TAKEOVER_SNAPSHOT ? 0 : -EPIPE;
			/* closed with nothing said: by its death, or by an older binary that does not
			 * know BACK; only its exit tells which, however long that one takes to show */
			closed = n >= 0 || (errno != EAGAIN && errno != EINTR);
		} else if (closed) {
			(void)poll(NULL, 0, 10);
		}
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -ECHILD;
		if (now_ns() >= deadline)
			return closed ? -EPIPE : -ETIMEDOUT;
	}
}

int takeover_say_last(int chan, enum takeover_type type, const char *text, int timeout_ms)
{
	_cleanup_free_ uint8_t *payload = malloc(PAYLOAD_MAX);
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
	int r = takeover_send(chan, type, 0, text, -1);

	/* what still comes meanwhile (batches of fds) is read and let go */
	while (r == 0 && payload) {
		uint64_t now = now_ns();
		struct takeover_msg m;
		int fds[TAKEOVER_FDS_MAX];
		unsigned nfds;
		int n = now < deadline ? takeover_recv(chan, &m, payload, PAYLOAD_MAX, fds, &nfds,
						       (int)((deadline - now) / 1000000u) + 1)
				       : -ETIMEDOUT;

		for (unsigned i = 0; n >= 0 && i < nfds; i++)
			close(fds[i]);
		if (n == -EPIPE)
			return 0;
		if (n < 0 && n != -EMSGSIZE)
			return n == -EAGAIN ? -ETIMEDOUT : n;
	}
	return r;
}

int takeover_recv(int chan, struct takeover_msg *m, void *payload, size_t cap, int *fds, unsigned *nfds,
		  int timeout_ms)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * TAKEOVER_FDS_MAX)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov[2] = { { m, sizeof(*m) }, { payload, cap } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = cbuf.buf,
			      .msg_controllen = sizeof(cbuf.buf) };
	struct pollfd p = { .fd = chan, .events = POLLIN };
	unsigned got = 0;
	ssize_t n;
	int r;

	*nfds = 0;
	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (r == 0)
		return -EAGAIN;
	do
		n = recvmsg(chan, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == ECONNRESET ? -EPIPE : -errno;
	if (n == 0)
		return -EPIPE;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			if (got + k > TAKEOVER_FDS_MAX)
				k = TAKEOVER_FDS_MAX - got;
			memcpy(fds + got, CMSG_DATA(c), k * sizeof(int));
			got += k;
		}
	*nfds = got;
	if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)n < sizeof(*m) ||
	    (size_t)n - sizeof(*m) > cap) {
		for (unsigned i = 0; i < got; i++)
			close(fds[i]);
		*nfds = 0;
		return -EMSGSIZE;
	}
	return (int)((size_t)n - sizeof(*m));
}

/* --- the running life ------------------------------------------------------------------- */

/*
 * A next life being started: posix_spawn blocks its caller until the child has executed (a copy of
 * a table of thousands of fds, and the exec itself: milliseconds of a loaded machine), so it runs
 * on a thread of its own, while the event loop serves on and already fills the channel.
 */
struct takeover_child {
	pthread_t thread;
	int exe_fd; /* the caller's: open until joined */
	int theirs; /* the channel's other end, closed here once the child has its copy */
	char *const *argv;
	char **env;
	char env_fd[64];
	char env_nice[64];
	bool nice; /* the child starts idle (SCHED_IDLE at TAKEOVER_PREPARE_NICE) */
	bool managers; /* started as the service manager's child (CLONE_PARENT), not this life's */
	char exe[64];
	pid_t pid;
	int pidfd; /* managers: the child's (CLONE_PIDFD), -1 otherwise */
	int err; /* posix_spawn's, or the exec's */
	bool joined;
};

/* One thread to policy at nice (ESRCH: it ended meanwhile, not an error). */
static int thread_priority(pid_t tid, int policy, int nice)
{
	if (sched_setscheduler(tid, policy, &(struct sched_param){ 0 }) < 0 ||
	    setpriority(PRIO_PROCESS, (id_t)tid, nice) < 0)
		return errno == ESRCH ? 0 : -errno;
	return 0;
}

/*
 * The child of clone_managers, a copy of this process until its exec: raw system calls only
 * (it is the copy of one thread of a process with others), and no sanitizer. Every signal is
 * blocked until the mask the exec takes; a failure is told through errfd (close-on-exec: its
 * end at the exec says it succeeded).
 */
__attribute__((no_sanitize("address", "thread", "undefined"))) static void managers_child(const struct takeover_child *c,
											    int errfd)
{
	/* the kernel's struct sigaction: handler, flags, restorer, mask */
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		uint64_t mask;
	} dfl = { 0 };
	uint64_t none = 0;
	long r;
	int err;

	(void)syscall(SYS_rt_sigaction, SIGPIPE, &dfl, NULL, sizeof(dfl.mask));
	(void)syscall(SYS_rt_sigaction, SIGIO, &dfl, NULL, sizeof(dfl.mask));
	r = syscall(SYS_dup3, c->theirs, 3, 0);
	if (r >= 0) {
		(void)syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(none));
		r = syscall(SYS_execve, c->exe, c->argv, c->env);
	}
	err = r < 0 ? errno : EIO;
	(void)syscall(SYS_write, errfd, &err, sizeof(err));
	for (;;)
		(void)syscall(SYS_exit_group, 127);
}

/*
 * Under a service manager, start the next life as the manager's child, not this life's
 * (CLONE_PARENT): the manager then follows it as a main process it started. It made this life;
 * one it did not make is a stranger to it: systemd 252 ("Supervising process N which is not
 * our child") does not wait for such a main process to exit when it stops the service, and
 * sends SIGKILL right after SIGTERM, in the middle of the stop that keeps the clients'
 * connections for the next start. The pidfd (CLONE_PIDFD) is how this life sees the child end,
 * since it cannot reap it. A copy of the process (no CLONE_VM: a child sharing this memory
 * would run on the spawning thread's sanitizer state), cheap since the daemon maps no buffer
 * once it is faulted; CLONE_VFORK holds this thread until the exec.
 */
static void clone_managers(struct takeover_child *c)
{
	sigset_t all, old;
	int errp[2], pidfd = -1, err = 0;
	long pid;

	if (pipe2(errp, O_CLOEXEC) < 0) {
		c->err = errno;
		return;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = syscall(SYS_clone, CLONE_VFORK | CLONE_PARENT | CLONE_PIDFD | SIGCHLD, NULL, &pidfd, NULL, 0);
	if (pid == 0)
		managers_child(c, errp[1]);
	if (pid < 0)
		c->err = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close(errp[1]);
	if (pid > 0 && read(errp[0], &err, sizeof(err)) == (ssize_t)sizeof(err))
		c->err = err ? err : EIO; /* the exec failed: the child has exited (the manager reaps it) */
	close(errp[0]);
	if (pid > 0 && c->err)
		close(pidfd);
	else if (pid > 0) {
		c->pid = (pid_t)pid;
		c->pidfd = pidfd;
	}
}

/* The next life as this life's child (posix_spawn), fd 3 its end of the channel. */
static void spawn_own(struct takeover_child *c)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, dfl;

	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	sigaddset(&dfl, SIGIO);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, c->theirs, 3);
	posix_spawnattr_init(&attr);
	/* as a start by the service manager: no signal blocked, none ignored that the daemon sets */
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	c->err = posix_spawn(&c->pid, c->exe, &fa, &attr, c->argv, c->env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
}

static void *spawn_main(void *arg)
{
	struct takeover_child *c = arg;

	/* this thread's policy and nice are the child's: going idle needs no privilege, and the
	 * thread ends (should it fail, the child prepares at the daemon's priority, and goes to
	 * where it already is at GO) */
	if (c->nice)
		(void)thread_priority(gettid(), SCHED_IDLE, TAKEOVER_PREPARE_NICE);
	if (c->managers)
		clone_managers(c);
	else
		spawn_own(c);
	/* the child has its copy, or there is none: a failure shows as the channel's end */
	close(c->theirs);
	return NULL;
}

/* Does this process have CAP_SYS_NICE in its effective set (/proc/self/status)? */
static bool cap_sys_nice(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	unsigned long long eff = 0;
	char line[256];

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	if (f)
		fclose(f);
	return eff & (1ull << 23); /* CAP_SYS_NICE */
}

/* Could a thread of this process (or a child with the same credentials) go back to nice? */
static bool nice_restorable(int nice)
{
	struct rlimit rl;

	/* RLIMIT_NICE allows down to 20 - rlim_cur (setrlimit(2)) */
	if (getrlimit(RLIMIT_NICE, &rl) == 0 && (rl.rlim_cur == RLIM_INFINITY || (long long)rl.rlim_cur >= 20 - nice))
		return true;
	return cap_sys_nice();
}

int takeover_spawn(int exe_fd, char *const argv[], bool managers, struct takeover_child **ret, int *ret_nice,
		   char *err, size_t errlen)
{
	extern char **environ;
	struct takeover_child *c = calloc(1, sizeof(*c));
	size_t nenv = 0;
	int sv[2] = { -1, -1 }, r, nice;

	*ret_nice = TAKEOVER_NICE_NONE;
	while (environ[nenv])
		nenv++;
	if (!c || !(c->env = calloc(nenv + 3, sizeof(*c->env)))) {
		free(c);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	nenv = 0;
	for (char **e = environ; *e; e++)
		if (strncmp(*e, TAKEOVER_FD_ENV "=", strlen(TAKEOVER_FD_ENV) + 1) != 0 &&
		    strncmp(*e, TAKEOVER_NICE_ENV "=", strlen(TAKEOVER_NICE_ENV) + 1) != 0)
			c->env[nenv++] = *e;
	snprintf(c->env_fd, sizeof(c->env_fd), TAKEOVER_FD_ENV "=3");
	c->env[nenv++] = c->env_fd;
	/* the calling thread's nice is the daemon's (the event loop's) */
	errno = 0;
	nice = getpriority(PRIO_PROCESS, (id_t)gettid());
	if (errno == 0 && nice < TAKEOVER_PREPARE_NICE && nice_restorable(nice)) {
		c->nice = true;
		*ret_nice = nice;
		snprintf(c->env_nice, sizeof(c->env_nice), TAKEOVER_NICE_ENV "=%d", nice);
		c->env[nenv++] = c->env_nice;
	}
	c->argv = argv;
	c->exe_fd = -1;
	c->pidfd = -1;
	c->managers = managers;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 || fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
		r = -errno;
		goto fail;
	}
	/* the child's end goes to 3 (dup2 clears close-on-exec there): neither it nor the
	 * executable, which the child runs through its fd, may be at 3 already */
	c->theirs = sv[1] >= 4 ? sv[1] : fcntl(sv[1], F_DUPFD_CLOEXEC, 4);
	c->exe_fd = fcntl(exe_fd, F_DUPFD_CLOEXEC, 4); /* the thread's own: joined, closed */
	if (sv[1] < 4)
		close(sv[1]);
	sv[1] = -1;
	if (c->theirs < 0 || c->exe_fd < 0) {
		r = -errno;
		goto fail;
	}
	snprintf(c->exe, sizeof(c->exe), "/proc/self/fd/%d", c->exe_fd);
	r = -pthread_create(&c->thread, NULL, spawn_main, c);
	if (r < 0)
		goto fail;
	*ret = c;
	return sv[0];
fail:
	snprintf(err, errlen, "cannot start the next life: %s", strerror(-r));
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	if (c->theirs > 0)
		close(c->theirs);
	if (c->exe_fd >= 0)
		close(c->exe_fd);
	free(c->env);
	free(c);
	return r;
}

pid_t takeover_child_pid(struct takeover_child *c, char *err, size_t errlen)
{
	if (!c->joined) {
		pthread_join(c->thread, NULL);
		c->joined = true;
		close(c->exe_fd);
		c->exe_fd = -1;
	}
	if (c->err) {
		snprintf(err, errlen, "cannot run the next life: %s", strerror(c->err));
		return -c->err;
	}
	return c->pid;
}

int takeover_child_pidfd(struct takeover_child *c)
{
	int fd = c->pidfd;

	c->pidfd = -1;
	return fd;
}

void takeover_child_free(struct takeover_child *c)
{
	char err[8];

	if (!c)
		return;
	(void)takeover_child_pid(c, err, sizeof(err));
	if (c->pidfd >= 0)
		close(c->pidfd);
	free(c->env);
	free(c);
}

int takeover_back_nice(void)
{
	int nice;

	/* the calling thread's nice is the daemon's (the event loop's), as for takeover_spawn */
	errno = 0;
	nice = getpriority(PRIO_PROCESS, (id_t)gettid());
	return errno == 0 && nice < TAKEOVER_PREPARE_NICE && nice_restorable(nice) ? nice : TAKEOVER_NICE_NONE;
}

/* fd moved to a number above 3, close-on-exec (the old number closed), unless it is -1 or there. */
static int move_above_3(int *fd)
{
	int to;

	if (*fd < 0 || *fd > 3)
		return 0;
	to = fcntl(*fd, F_DUPFD_CLOEXEC, 4);
	if (to < 0)
		return -errno;
	close(*fd);
	*fd = to;
	return 0;
}

int takeover_exec(int exe_fd, int fallback_fd, char *const argv[], int chan, int nice)
{
	extern char **environ;
	char num[32];
	int r;

	/* the channel goes to 3 (dup2 clears close-on-exec there), where neither executable may be */
	if ((r = move_above_3(&exe_fd)) < 0 || (r = move_above_3(&fallback_fd)) < 0)
		return r;
	if (chan == 3 ? fcntl(chan, F_SETFD, 0) < 0 : dup2(chan, 3) < 0)
		return -errno;
	setenv(TAKEOVER_FD_ENV, "3", 1);
	if (nice != TAKEOVER_NICE_NONE) {
		/* the exec keeps this thread alone, and its policy: it prepares idle, as a spawned
		 * next life does, while the life it gave way to serves */
		(void)thread_priority(gettid(), SCHED_IDLE, TAKEOVER_PREPARE_NICE);
		snprintf(num, sizeof(num), "%d", nice);
		setenv(TAKEOVER_NICE_ENV, num, 1);
	} else {
		unsetenv(TAKEOVER_NICE_ENV);
	}
	fexecve(exe_fd, argv, environ);
	r = -errno;
	if (fallback_fd >= 0) {
		log_error_errno(r, "Failed to execute the daemon's binary: %m; running this life's binary again");
		fexecve(fallback_fd, argv, environ);
		r = -errno;
	}
	return r;
}

/* A batch of the table as one FDS message, without waiting (fdstore_handover_batch's give). */
static int give_batch(const struct fdstore_handed *h, unsigned n, void *ud)
{
	struct takeover_name names[TAKEOVER_FDS_MAX];
	struct takeover_msg m = { .type = TAKEOVER_FDS, .count = n };
	int fds[TAKEOVER_FDS_MAX];

	for (unsigned i = 0; i < n; i++) {
		memset(&names[i], 0, sizeof(names[i]));
		memcpy(names[i].name, h[i].name, sizeof(names[i].name));
		names[i].held = h[i].held;
		fds[i] = h[i].fd;
	}
	return send_msg(*(const int *)ud, &m, names, n * sizeof(*names), fds, n, false);
}

int takeover_send_snapshot(int chan, struct warm *w)
{
	struct takeover_msg m = { .type = TAKEOVER_SNAPSHOT, .arg = warm_id(w) };
	int r = fdstore_handover_batch(TAKEOVER_FDS_MAX, give_batch, &chan);

	if (r != 0)
		return r < 0 ? r : 1;
	/* every fd kept is given: from now on what the records say anew is handed over at GO */
	r = warm_track(w);
	if (r == 0) {
		r = send_msg(chan, &m, NULL, 0, NULL, 0, false);
		if (r < 0)
			warm_track_end(w);
	}
	return r;
}

/* Names in batches of TAKEOVER_FDS_MAX, as message type t. */
static int send_names(int chan, enum takeover_type t, const fdstore_name *list, unsigned n)
{
	struct takeover_name names[TAKEOVER_FDS_MAX];

	for (unsigned at = 0; at < n;) {
		struct takeover_msg m = { .type = t, .count = MIN(n - at, (unsigned)TAKEOVER_FDS_MAX) };
		int r;

		for (unsigned i = 0; i < m.count; i++) {
			memset(&names[i], 0, sizeof(names[i]));
			memcpy(names[i].name, list[at + i], sizeof(names[i].name));
		}
		r = send_msg(chan, &m, names, m.count * sizeof(*names), NULL, 0, true);
		if (r < 0)
			return r;
		at += m.count;
	}
	return 0;
}

int takeover_send_go(int chan, const struct warm *w, uint64_t stopped_ns)
{
	_cleanup_free_ struct fdstore_handed *added = NULL;
	_cleanup_free_ fdstore_name *removed = NULL, *held = NULL;
	unsigned nadded = 0, nremoved = 0, nheld = 0;
	struct takeover_msg m;
	int r;

	r = fdstore_handover_delta(&added, &nadded, &removed, &nremoved, &held, &nheld);
	if (r < 0)
		return r;
	for (unsigned at = 0; at < nadded;) {
		struct takeover_name names[TAKEOVER_FDS_MAX];
		int fds[TAKEOVER_FDS_MAX];

		m = (struct takeover_msg){ .type = TAKEOVER_FDS, .count = MIN(nadded - at, (unsigned)TAKEOVER_FDS_MAX) };
		for (unsigned i = 0; i < m.count; i++) {
			memset(&names[i], 0, sizeof(names[i]));
			memcpy(names[i].name, added[at + i].name, sizeof(names[i].name));
			names[i].held = added[at + i].held;
			fds[i] = added[at + i].fd;
		}
		r = send_msg(chan, &m, names, m.count * sizeof(*names), fds, m.count, true);
		if (r < 0)
			return r;
		at += m.count;
	}
	if ((r = send_names(chan, TAKEOVER_REMOVED, removed, nremoved)) < 0 ||
	    (r = send_names(chan, TAKEOVER_HELD, held, nheld)) < 0)
		return r;
	for (int k = 0; k < WARM_KINDS; k++) {
		_cleanup_free_ uint32_t *recs = NULL;
		uint32_t n = warm_tracked(w, (enum warm_kind)k, &recs);

		for (uint32_t at = 0; at < n;) {
			m = (struct takeover_msg){ .type = TAKEOVER_DIRTY, .count = MIN(n - at, (uint32_t)DIRTY_MAX),
						   .arg = (uint64_t)k };
			r = send_msg(chan, &m, recs + at, m.count * sizeof(*recs), NULL, 0, true);
			if (r < 0)
				return r;
			at += m.count;
		}
	}
	m = (struct takeover_msg){ .type = TAKEOVER_GO, .arg = stopped_ns };
	return send_msg(chan, &m, NULL, 0, NULL, 0, true);
}

/* --- the next life ---------------------------------------------------------------------- */

int takeover_open(int *ret_nice)
{
	const char *v = getenv(TAKEOVER_FD_ENV), *n = getenv(TAKEOVER_NICE_ENV);
	uint64_t fd;
	int type = 0, nice;
	socklen_t len = sizeof(type);
	char end;

	*ret_nice = TAKEOVER_NICE_NONE;
	if (n && sscanf(n, "%d%c", &nice, &end) == 1 && nice >= -20 && nice < TAKEOVER_PREPARE_NICE)
		*ret_nice = nice;
	unsetenv(TAKEOVER_NICE_ENV);
	if (!v)
		return -1;
	unsetenv(TAKEOVER_FD_ENV);
	if (decimal_parse(v, &fd) < 0 || fd < 3 || fd > INT32_MAX ||
	    getsockopt((int)fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_SEQPACKET ||
	    fcntl((int)fd, F_SETFD, FD_CLOEXEC) < 0)
		return -1;
	return (int)fd;
}

int takeover_priority(pid_t pid, bool idle, int nice)
{
	int policy = idle ? SCHED_IDLE : SCHED_OTHER, r = 0, k;
	char path[64];
	DIR *d;
	struct dirent *e;

	if (idle)
		nice = TAKEOVER_PREPARE_NICE;
	/* this process's calling thread first: it is the one that works on */
	if (pid == 0)
		r = thread_priority(gettid(), policy, nice);
	snprintf(path, sizeof(path), "/proc/%d/task", pid ? (int)pid : (int)getpid());
	d = opendir(path);
	if (!d)
		return r ? r : -errno;
	while ((e = readdir(d))) {
		uint64_t tid;

		if (decimal_parse(e->d_name, &tid) < 0 || (pid == 0 && tid == (uint64_t)gettid()))
			continue;
		k = thread_priority((pid_t)tid, policy, nice);
		if (k < 0 && !r)
			r = k;
	}
	closedir(d);
	/* a task that woke on this CPU while this one still had the daemon's priority waits here
	 * behind it (only a wake-up checks an idle task against the others): it runs first now */
	if (pid == 0 && idle)
		sched_yield();
	return r;
}

/* Append the message's named fds to the array (*fds, *n, *cap); closes them on failure. */
static int take_names(struct fdstore_fd **fds, unsigned *n, unsigned *cap, const struct takeover_name *names,
		      unsigned count, const int *got, unsigned ngot)
{
	int r = 0;

	if (count != ngot)
		r = -EBADMSG;
	for (unsigned i = 0; i < ngot; i++) {
		if (r == 0 && (r = ARRAY_RESERVE_ONE(*fds, *n, *cap, 256)) == 0) {
			struct fdstore_fd *f = &(*fds)[(*n)++];

			memset(f, 0, sizeof(*f));
			/* a name as long as the field, unterminated, is not one: nobody takes it */
			if (memchr(names[i].name, '\0', sizeof(names[i].name)))
				memcpy(f->name, names[i].name, sizeof(f->name));
			f->fd = got[i];
			f->held = names[i].held != 0;
			continue;
		}
		close(got[i]);
	}
	return r;
}

int takeover_recv_snapshot(int chan, struct fdstore_fd **ret_fds, unsigned *ret_n, uint64_t *ret_state_id)
{
	_cleanup_free_ struct takeover_name *names = malloc(PAYLOAD_MAX);
	struct fdstore_fd *fds = NULL;
	unsigned n = 0, cap = 0;
	int r;

	if (!names)
		return -ENOMEM;
	for (;;) {
		struct takeover_msg m;
		int got[TAKEOVER_FDS_MAX];
		unsigned ngot;

		r = takeover_recv(chan, &m, names, PAYLOAD_MAX, got, &ngot, -1);
		if (r < 0)
			break;
		if (m.type == TAKEOVER_FDS && (size_t)r == m.count * sizeof(*names)) {
			r = take_names(&fds, &n, &cap, names, m.count, got, ngot);
			if (r < 0)
				break;
			continue;
		}
		if (m.type == TAKEOVER_SNAPSHOT && ngot == 0 && r == 0) {
			*ret_state_id = m.arg;
			fdstore_sort(fds, n);
			*ret_fds = fds;
			*ret_n = n;
			return 0;
		}
		for (unsigned i = 0; i < ngot; i++)
			close(got[i]);
		r = -EBADMSG;
		break;
	}
	for (unsigned i = 0; i < n; i++)
		close(fds[i].fd);
	free(fds);
	return r;
}

void takeover_delta_free(struct takeover_delta *d)
{
	for (unsigned i = 0; i < d->nadded; i++)
		if (d->added[i].fd >= 0)
			close(d->added[i].fd);
	free(d->added);
	free(d->removed);
	free(d->held);
	for (int k = 0; k < WARM_KINDS; k++)
		free(d->dirty[k]);
	memset(d, 0, sizeof(*d));
}

/* Append count names to the list (*list, *n). */
static int add_names(fdstore_name **list, unsigned *n, const struct takeover_name *names, unsigned count)
{
	fdstore_name *grown = realloc(*list, (*n + count ? *n + count : 1) * sizeof(**list));

	if (!grown)
		return -ENOMEM;
	*list = grown;
	for (unsigned i = 0; i < count; i++) {
		if (!memchr(names[i].name, '\0', sizeof(names[i].name)))
			return -EBADMSG;
		memcpy(grown[(*n)++], names[i].name, sizeof(grown[0]));
	}
	return 0;
}

int takeover_recv_go(int chan, struct takeover_delta *ret)
{
	_cleanup_free_ uint8_t *payload = malloc(PAYLOAD_MAX);
	struct takeover_delta d = { 0 };
	unsigned cap = 0;
	int r;

	if (!payload)
		return -ENOMEM;
	for (;;) {
		struct takeover_msg m;
		int got[TAKEOVER_FDS_MAX];
		unsigned ngot;
		size_t len;

		r = takeover_recv(chan, &m, payload, PAYLOAD_MAX, got, &ngot, -1);
		if (r < 0)
			break;
		len = (size_t)r;
		if (m.type == TAKEOVER_FDS && len == m.count * sizeof(struct takeover_name)) {
			r = take_names(&d.added, &d.nadded, &cap, (const struct takeover_name *)payload, m.count, got,
				       ngot);
		} else if (ngot) {
			for (unsigned i = 0; i < ngot; i++)
				close(got[i]);
			r = -EBADMSG;
		} else if ((m.type == TAKEOVER_REMOVED || m.type == TAKEOVER_HELD) &&
			   len == m.count * sizeof(struct takeover_name)) {
			r = m.type == TAKEOVER_REMOVED
				    ? add_names(&d.removed, &d.nremoved, (const struct takeover_name *)payload, m.count)
				    : add_names(&d.held, &d.nheld, (const struct takeover_name *)payload, m.count);
		} else if (m.type == TAKEOVER_DIRTY && m.arg < WARM_KINDS && len == m.count * sizeof(uint32_t)) {
			unsigned k = (unsigned)m.arg;
			uint32_t *grown = realloc(d.dirty[k], (d.ndirty[k] + m.count + 1) * sizeof(uint32_t));

			r = grown ? 0 : -ENOMEM;
			if (grown) {
				memcpy(grown + d.ndirty[k], payload, len);
				d.dirty[k] = grown;
				d.ndirty[k] += m.count;
			}
		} else if (m.type == TAKEOVER_GO && len == 0) {
			d.stopped_ns = m.arg;
			fdstore_sort(d.added, d.nadded);
			*ret = d;
			return 0;
		} else {
			r = -EBADMSG;
		}
		if (r < 0)
			break;
	}
	takeover_delta_free(&d);
	return r;
}
