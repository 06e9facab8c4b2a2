/* SPDX-License-Identifier: MIT */
/*
 * manager.c - see manager.h. One thread per manager: it waits on the notify socket and, every
 * 20 ms, polls the kept fds that may hang up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "manager.h"

#define NAME_MAX_ 255
#define KEPT_MAX 65536

struct kept {
	char name[NAME_MAX_ + 1];
	int fd;
	bool poll;
	dev_t dev; /* the file it is, to find a duplicate without a system call per kept fd */
	ino_t ino;
};

struct manager {
	int sock;
	int stop_pipe[2];
	unsigned store_max;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t ready_cond;
	bool ready;
	pid_t main_pid; /* MAINPID= */
	unsigned stores; /* FDSTORE=1 datagrams since the last manager_reset_ready */
	struct kept *kept;
	unsigned nkept, capkept;
};

struct manager_layout {
	struct manager *m; /* whose lock is held from manager_prepare to manager_layout_free */
	unsigned n;
	int *fds; /* the kept fds (close-on-exec), to be moved to 3.. in the child */
	char *names; /* "a:b:c" */
	char fds_env[32], pid_env[32];
	char *names_env;
};

static void kept_drop(struct manager *m, unsigned i)
{
	close(m->kept[i].fd);
	m->kept[i] = m->kept[--m->nkept];
}

static const char *field(const char *msg, const char *key, char *val, size_t len)
{
	size_t kl = strlen(key);

	for (const char *l = msg; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (strncmp(l, key, kl) == 0 && l[kl] == '=') {
			size_t n = strcspn(l + kl + 1, "\n");

			if (n >= len)
				n = len - 1;
			memcpy(val, l + kl + 1, n);
			val[n] = '\0';
			return val;
		}
	return NULL;
}

/* One notify datagram: its text and the fds with it. */
static void handle(struct manager *m, const char *msg, int *fds, unsigned nfds)
{
	char name[NAME_MAX_ + 1], v[16];

	pthread_mutex_lock(&m->lock);
	if (field(msg, "MAINPID", v, sizeof(v)))
		m->main_pid = (pid_t)atoi(v);
	if (strstr(msg, "READY=1")) {
		m->ready = true;
		pthread_cond_broadcast(&m->ready_cond);
	}
	if (field(msg, "FDSTOREREMOVE", v, sizeof(v)) && strcmp(v, "1") == 0 &&
	    field(msg, "FDNAME", name, sizeof(name)))
		for (unsigned i = m->nkept; i-- > 0;)
			if (strcmp(m->kept[i].name, name) == 0)
				kept_drop(m, i);
	if (field(msg, "FDSTORE", v, sizeof(v)) && strcmp(v, "1") == 0 && m->store_max) {
		bool poll = !(field(msg, "FDPOLL", v, sizeof(v)) && strcmp(v, "0") == 0);

		m->stores++;
		if (!field(msg, "FDNAME", name, sizeof(name)))
			snprintf(name, sizeof(name), "stored");
		for (unsigned i = 0; i < nfds; i++) {
			struct stat st;
			bool dup = fstat(fds[i], &st) < 0;

			for (unsigned k = 0; k < m->nkept && !dup; k++)
				dup = m->kept[k].dev == st.st_dev && m->kept[k].ino == st.st_ino;
			if (dup || m->nkept >= m->store_max || m->nkept >= KEPT_MAX)
				continue;
			if (m->nkept == m->capkept) {
				unsigned cap = m->capkept ? 2 * m->capkept : 16;
				struct kept *k = realloc(m->kept, cap * sizeof(*k));

				if (!k)
					continue;
				m->kept = k;
				m->capkept = cap;
			}
			m->kept[m->nkept++] = (struct kept){ .fd = fds[i], .poll = poll, .dev = st.st_dev, .ino = st.st_ino };
			snprintf(m->kept[m->nkept - 1].name, sizeof(name), "%s", name);
			fds[i] = -1;
		}
	}
	pthread_mutex_unlock(&m->lock);
	/* BARRIER=1's fd and anything not kept: closed, after all before it was done */
	for (unsigned i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* FDPOLL: a kept fd that hung up is dropped. One poll(2) for all of them, as systemd's one epoll. */
static void poll_kept(struct manager *m)
{
	struct pollfd *p;
	unsigned *at, n = 0;

	pthread_mutex_lock(&m->lock);
	p = calloc(m->nkept ? m->nkept : 1, sizeof(*p));
	at = calloc(m->nkept ? m->nkept : 1, sizeof(*at));
	for (unsigned i = 0; p && at && i < m->nkept; i++)
		if (m->kept[i].poll) {
			p[n] = (struct pollfd){ .fd = m->kept[i].fd, .events = 0 };
			at[n++] = i;
		}
	/* from the last: dropping one moves the last kept fd into its place */
	if (n && poll(p, n, 0) > 0)
		for (unsigned k = n; k-- > 0;)
			if (p[k].revents & (POLLHUP | POLLERR))
				kept_drop(m, at[k]);
	pthread_mutex_unlock(&m->lock);
	free(p);
	free(at);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void *run(void *arg)
{
	struct manager *m = arg;
	char buf[8192]; /* each manager's own: two daemons may run at once, each with its manager */
	double polled = 0;

	for (;;) {
		struct pollfd p[2] = { { .fd = m->sock, .events = POLLIN }, { .fd = m->stop_pipe[0], .events = POLLIN } };
		union {
			char b[CMSG_SPACE(sizeof(int) * 253)];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = { buf, sizeof(buf) - 1 };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.b,
				      .msg_controllen = sizeof(cbuf.b) };
		int fds[253];
		unsigned nfds = 0;
		ssize_t n;

		if (poll(p, 2, 20) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		/* every 20 ms, not per datagram: a barrier after thousands of fds is answered at once */
		if (now_ms() - polled >= 20) {
			poll_kept(m);
			polled = now_ms();
		}
		if (!(p[0].revents & POLLIN))
			continue;
		n = recvmsg(m->sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0)
			continue;
		buf[n] = '\0';
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
				unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

				memcpy(fds + nfds, CMSG_DATA(c), k * sizeof(int));
				nfds += k;
			}
		handle(m, buf, fds, nfds);
	}
	return NULL;
}

/*
 * A store holds as many fds as a pool has buffers, and the layout for the next start copies all
 * of them once more: take the whole open files limit, and as root at least 65536 of it (some
 * machines set 20000), which the daemons started from here inherit as systemd's LimitNOFILE.
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (geteuid() == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 65536)
		rl.rlim_max = 65536;
	rl.rlim_cur = rl.rlim_max;
	(void)setrlimit(RLIMIT_NOFILE, &rl);
}

int manager_new(const char *path, unsigned store_max, struct manager **ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct manager *m = calloc(1, sizeof(*m));
	int r, big = 8 << 20;

	if (!m)
		return -ENOMEM;
	m->store_max = store_max;
	raise_nofile();
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->ready_cond, NULL);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	unlink(path);
	m->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (m->sock < 0 || bind(m->sock, (struct sockaddr *)&sa, sizeof(sa)) < 0 || pipe2(m->stop_pipe, O_CLOEXEC) < 0) {
		r = -errno;
		if (m->sock >= 0)
			close(m->sock);
		free(m);
		return r;
	}
	(void)setsockopt(m->sock, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	r = -pthread_create(&m->thread, NULL, run, m);
	if (r < 0) {
		close(m->sock);
		close(m->stop_pipe[0]);
		close(m->stop_pipe[1]);
		free(m);
		return r;
	}
	*ret = m;
	return 0;
}

void manager_flush(struct manager *m)
{
	pthread_mutex_lock(&m->lock);
	while (m->nkept)
		kept_drop(m, m->nkept - 1);
	pthread_mutex_unlock(&m->lock);
}

void manager_free(struct manager *m)
{
	if (!m)
		return;
	(void)!write(m->stop_pipe[1], "x", 1);
	pthread_join(m->thread, NULL);
	manager_flush(m);
	free(m->kept);
	close(m->sock);
	close(m->stop_pipe[0]);
	close(m->stop_pipe[1]);
	free(m);
}

void manager_reset_ready(struct manager *m)
{
	pthread_mutex_lock(&m->lock);
	m->ready = false;
	m->main_pid = 0;
	m->stores = 0;
	pthread_mutex_unlock(&m->lock);
}

bool manager_wait_ready(struct manager *m, int timeout_ms)
{
	struct timespec until;
	bool r;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += (long)timeout_ms * 1000000L;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&m->lock);
	while (!m->ready && pthread_cond_timedwait(&m->ready_cond, &m->lock, &until) == 0)
		;
	r = m->ready;
	pthread_mutex_unlock(&m->lock);
	return r;
}

pid_t manager_main_pid(struct manager *m)
{
	pid_t pid;

	pthread_mutex_lock(&m->lock);
	pid = m->main_pid;
	pthread_mutex_unlock(&m->lock);
	return pid;
}

unsigned manager_stores(struct manager *m)
{
	unsigned n;

	pthread_mutex_lock(&m->lock);
	n = m->stores;
	pthread_mutex_unlock(&m->lock);
	return n;
}

unsigned manager_count(struct manager *m, const char *name_prefix)
{
	unsigned n = 0;

	poll_kept(m);
	pthread_mutex_lock(&m->lock);
	for (unsigned i = 0; i < m->nkept; i++)
		n += !name_prefix || strncmp(m->kept[i].name, name_prefix, strlen(name_prefix)) == 0;
	pthread_mutex_unlock(&m->lock);
	return n;
}

int manager_dup(struct manager *m, const char *name_prefix)
{
	int fd = -1;

	pthread_mutex_lock(&m->lock);
	for (unsigned i = 0; i < m->nkept && fd < 0; i++)
		if (strncmp(m->kept[i].name, name_prefix, strlen(name_prefix)) == 0)
			fd = fcntl(m->kept[i].fd, F_DUPFD_CLOEXEC, 3);
	pthread_mutex_unlock(&m->lock);
	return fd;
}

bool manager_name(struct manager *m, const char *name_prefix, char *name, size_t len)
{
	bool found = false;

	pthread_mutex_lock(&m->lock);
	for (unsigned i = 0; i < m->nkept && !found; i++)
		if (strncmp(m->kept[i].name, name_prefix, strlen(name_prefix)) == 0) {
			snprintf(name, len, "%s", m->kept[i].name);
			found = true;
		}
	pthread_mutex_unlock(&m->lock);
	return found;
}

int manager_swap(struct manager *m, const char *name, int fd)
{
	int r = -ENOENT;
	struct stat st;

	pthread_mutex_lock(&m->lock);
	for (unsigned i = 0; i < m->nkept && r < 0; i++)
		if (strcmp(m->kept[i].name, name) == 0 && fstat(fd, &st) == 0) {
			int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);

			if (copy < 0) {
				r = -errno;
				break;
			}
			close(m->kept[i].fd);
			m->kept[i].fd = copy;
			m->kept[i].dev = st.st_dev;
			m->kept[i].ino = st.st_ino;
			r = 0;
		}
	pthread_mutex_unlock(&m->lock);
	return r;
}

struct manager_layout *manager_prepare(struct manager *m)
{
	struct manager_layout *l = calloc(1, sizeof(*l));
	size_t len = 1;

	if (!l)
		return NULL;
	poll_kept(m);
	pthread_mutex_lock(&m->lock);
	l->n = m->nkept;
	for (unsigned i = 0; i < l->n; i++)
		len += strlen(m->kept[i].name) + 1;
	l->fds = calloc(l->n ? l->n : 1, sizeof(int));
	l->names = calloc(1, len);
	l->names_env = calloc(1, len + 32);
	for (unsigned i = 0; l->fds && l->names && i < l->n; i++) {
		/* the kept fd itself, not a copy (the open files limit may not allow one of each):
		 * the lock stays held until after the fork, so none of them changes meanwhile */
		l->fds[i] = m->kept[i].fd;
		strcat(l->names, m->kept[i].name);
		if (i + 1 < l->n)
			strcat(l->names, ":");
	}
	l->m = m;
	if (!l->fds || !l->names || !l->names_env) {
		manager_layout_free(l);
		return NULL;
	}
	snprintf(l->fds_env, sizeof(l->fds_env), "LISTEN_FDS=%u", l->n);
	snprintf(l->names_env, len + 32, "LISTEN_FDNAMES=%s", l->names);
	return l;
}

/* In the child: no malloc, no stdio, no locks. */
void manager_layout_child(struct manager_layout *l, char **env, unsigned *nenv)
{
	char digits[16];
	int pid = (int)getpid(), k = 0;

	if (!l || !l->n)
		return;
	/* first every kept fd out of 3 .. 3 + n - 1 (dup, close: no more fds at any time), so that
	 * placing one never overwrites another */
	for (unsigned i = 0; i < l->n; i++)
		if (l->fds[i] >= 3 && l->fds[i] < 3 + (int)l->n) {
			int to = fcntl(l->fds[i], F_DUPFD_CLOEXEC, 3 + (int)l->n);

			close(l->fds[i]);
			l->fds[i] = to;
		}
	for (unsigned i = 0; i < l->n; i++)
		dup2(l->fds[i], 3 + (int)i); /* the copy is not close-on-exec */
	memcpy(l->pid_env, "LISTEN_PID=", 11);
	do
		digits[k++] = (char)('0' + pid % 10);
	while ((pid /= 10) > 0);
	for (int i = 0; i < k; i++)
		l->pid_env[11 + i] = digits[k - 1 - i];
	l->pid_env[11 + k] = '\0';
	env[(*nenv)++] = l->pid_env;
	env[(*nenv)++] = l->fds_env;
	env[(*nenv)++] = l->names_env;
}

void manager_layout_free(struct manager_layout *l)
{
	if (!l)
		return;
	pthread_mutex_unlock(&l->m->lock); /* taken by manager_prepare */
	free(l->fds);
	free(l->names);
	free(l->names_env);
	free(l);
}
